//! The C ABI called as C calls it: handles checked, errors named, samples and calls
//! round trip, callbacks' failures reach the spin's caller.

use nerve::message::schema::Schema;
use nerve_c::*;
use nerve_msgs::{srv, CmdVel, Imu};
mod common;

use common::{last_error, node, ok, schema_of, AddTwoInts};
use std::ffi::{c_void, CStr, CString};
use std::ptr::{null, null_mut};

fn context(domain: u32) -> (nerve_context_t, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("nerve-c-abi-{}-{domain}", std::process::id()));
    (common::context(domain, &dir), dir)
}

fn publisher<M: nerve::Message>(n: nerve_node_t, topic: &str) -> nerve_publisher_t {
    let mut p = nerve_publisher_t::default();
    let t = CString::new(topic).unwrap();
    let s = schema_of::<M>();
    // SAFETY: valid strings and out-pointer; null QoS is the default.
    ok(unsafe {
        nerve_publisher_create(
            n,
            t.as_ptr(),
            s.as_ptr(),
            Schema::of::<M>().layout_hash,
            null(),
            &mut p,
        )
    });
    p
}

fn subscriber<M: nerve::Message>(n: nerve_node_t, topic: &str) -> nerve_subscriber_t {
    let mut s = nerve_subscriber_t::default();
    let t = CString::new(topic).unwrap();
    let sc = schema_of::<M>();
    // SAFETY: as above.
    ok(unsafe {
        nerve_subscriber_create(
            n,
            t.as_ptr(),
            sc.as_ptr(),
            Schema::of::<M>().layout_hash,
            null(),
            &mut s,
        )
    });
    s
}

fn send_cmd(p: nerve_publisher_t, x: f64) {
    let mut loan = nerve_loan_t::default();
    let mut data: *mut c_void = null_mut();
    // SAFETY: valid out-pointers.
    ok(unsafe { nerve_publisher_loan(p, std::mem::size_of::<CmdVel>(), &mut loan, &mut data) });
    // SAFETY: the loan is a CmdVel-sized, 8-byte aligned writable buffer.
    unsafe { (*data.cast::<CmdVel>()).linear = x as f32 };
    ok(nerve_sample_send(loan));
}

fn take(s: nerve_subscriber_t, timeout_ns: i64) -> Option<(nerve_sample_t, nerve_sample_view_t)> {
    let mut sample = nerve_sample_t::default();
    let mut view = std::mem::MaybeUninit::<nerve_sample_view_t>::zeroed();
    // SAFETY: valid out-pointers.
    match unsafe { nerve_subscriber_take(s, timeout_ns, &mut sample, view.as_mut_ptr()) } {
        // SAFETY: NERVE_OK means the call wrote the view.
        nerve_status_t::NERVE_OK => Some((sample, unsafe { view.assume_init() })),
        nerve_status_t::NERVE_NOTHING => None,
        other => panic!("{other:?}: {}", last_error()),
    }
}

#[test]
fn loan_send_take_release_and_handle_errors() {
    let (ctx, _dir) = context(871);
    let n = node(ctx, "abi_pubsub");
    let sub = subscriber::<CmdVel>(n, "/abi/cmd");
    let p = publisher::<CmdVel>(n, "/abi/cmd");
    assert_eq!(
        nerve_publisher_wait_for_subscribers(p, 1, 2_000_000_000),
        nerve_status_t::NERVE_OK
    );
    send_cmd(p, 1.5);
    let (sample, view) = take(sub, 2_000_000_000).expect("a sample");
    assert_eq!(view.len, std::mem::size_of::<CmdVel>());
    assert_eq!(view.seq, 1);
    // SAFETY: the view points to a CmdVel until the sample is released.
    assert_eq!(unsafe { (*view.data.cast::<CmdVel>()).linear }, 1.5);
    // the sample outlives its subscriber, readable
    ok(nerve_subscriber_destroy(sub));
    // SAFETY: as above (the sample keeps its memory).
    assert_eq!(unsafe { (*view.data.cast::<CmdVel>()).linear }, 1.5);
    ok(nerve_sample_release(sample));
    // double release, use after destroy, wrong kind, null
    assert_eq!(
        nerve_sample_release(sample),
        nerve_status_t::NERVE_ERR_STALE_HANDLE
    );
    assert!(
        last_error().contains("sample handle is no longer valid"),
        "{}",
        last_error()
    );
    assert_eq!(
        nerve_subscriber_destroy(sub),
        nerve_status_t::NERVE_ERR_STALE_HANDLE
    );
    assert_eq!(
        nerve_sample_release(nerve_sample_t { id: p.id }),
        nerve_status_t::NERVE_ERR_WRONG_KIND
    );
    assert!(
        last_error().contains("a publisher handle was passed where a sample"),
        "{}",
        last_error()
    );
    assert_eq!(
        nerve_publisher_destroy(nerve_publisher_t::default()),
        nerve_status_t::NERVE_ERR_BAD_HANDLE
    );
    // a loan used after send
    let mut loan = nerve_loan_t::default();
    let mut data: *mut c_void = null_mut();
    // SAFETY: valid out-pointers.
    ok(unsafe { nerve_publisher_loan(p, 16, &mut loan, &mut data) });
    ok(nerve_sample_send(loan));
    assert_eq!(
        nerve_sample_send(loan),
        nerve_status_t::NERVE_ERR_STALE_HANDLE
    );
    // a payload of the wrong size
    // SAFETY: valid out-pointers.
    let code = unsafe { nerve_publisher_loan(p, 3, &mut loan, &mut data) };
    assert_eq!(code, nerve_status_t::NERVE_ERR_TYPE_MISMATCH);
    assert!(
        last_error().contains("nerve_msgs/CmdVel"),
        "{}",
        last_error()
    );
    // a handle used on another thread: certainly refused, naming the owner
    let (code, msg) = std::thread::spawn(move || {
        let mut n = 0usize;
        // SAFETY: a valid out-pointer.
        let code = unsafe { nerve_publisher_subscriber_count(p, &mut n) };
        (code, last_error())
    })
    .join()
    .unwrap();
    assert_eq!(code, nerve_status_t::NERVE_ERR_WRONG_THREAD);
    assert!(msg.contains("belongs to thread"), "{msg}");
    ok(nerve_publisher_destroy(p));
    ok(nerve_node_destroy(n));
    ok(nerve_context_destroy(ctx));
    assert_eq!(nerve_live_handles(), 0);
}

#[test]
fn wrong_type_names_both_types_and_layouts() {
    let (ctx, _dir) = context(872);
    let n = node(ctx, "abi_types");
    let _p = publisher::<CmdVel>(n, "/abi/typed");
    let mut s = nerve_subscriber_t::default();
    let t = CString::new("/abi/typed").unwrap();
    let sc = schema_of::<Imu>();
    // SAFETY: valid strings and out-pointer.
    let code = unsafe { nerve_subscriber_create(n, t.as_ptr(), sc.as_ptr(), 0, null(), &mut s) };
    assert_eq!(code, nerve_status_t::NERVE_ERR_TOPIC);
    let e = last_error();
    assert!(
        e.contains("nerve_msgs/CmdVel") && e.contains("nerve_msgs/Imu"),
        "{e}"
    );
    // a struct compiled against another layout than its schema says
    // SAFETY: as above.
    let code = unsafe { nerve_subscriber_create(n, t.as_ptr(), sc.as_ptr(), 42, null(), &mut s) };
    assert_eq!(code, nerve_status_t::NERVE_ERR_TYPE_MISMATCH);
    // malformed schema text
    let bad = CString::new("nerve-schema/1|type=x").unwrap();
    // SAFETY: as above.
    let code = unsafe { nerve_subscriber_create(n, t.as_ptr(), bad.as_ptr(), 0, null(), &mut s) };
    assert_eq!(code, nerve_status_t::NERVE_ERR_SCHEMA);
    // null arguments
    // SAFETY: null topic is checked.
    let code = unsafe { nerve_subscriber_create(n, null(), sc.as_ptr(), 0, null(), &mut s) };
    assert_eq!(code, nerve_status_t::NERVE_ERR_NULL);
    assert!(last_error().contains("topic is null"), "{}", last_error());
    ok(nerve_context_destroy(ctx));
}

unsafe extern "C" fn failing_sample(user: *mut c_void, view: *const nerve_sample_view_t) -> i32 {
    let count = &*(user as *const std::cell::Cell<u32>);
    count.set(count.get() + 1);
    if (*(*view).data.cast::<CmdVel>()).linear < 0.0 {
        let msg = CString::new("negative speed").unwrap();
        nerve_callback_fail(msg.as_ptr());
        return 1;
    }
    0
}

unsafe extern "C" fn add_two_ints(
    _user: *mut c_void,
    req: *const nerve_sample_view_t,
    resp: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> i32 {
    let r = &*(*req).data.cast::<srv::TwoInts>();
    if r.a == 0 {
        let msg = CString::new("a must not be 0").unwrap();
        nerve_callback_fail(msg.as_ptr());
        return 7;
    }
    assert!(cap >= std::mem::size_of::<srv::Int>());
    *resp.cast::<srv::Int>() = srv::Int { value: r.a + r.b };
    *len = std::mem::size_of::<srv::Int>();
    0
}

#[test]
fn executor_callbacks_failures_and_services() {
    let (ctx, _dir) = context(873);
    let n = node(ctx, "abi_exec");
    let mut exec = nerve_executor_t::default();
    // SAFETY: valid out-pointer.
    ok(unsafe { nerve_executor_create(ctx, &mut exec) });
    let count = Box::new(std::cell::Cell::new(0u32));
    let sub = subscriber::<CmdVel>(n, "/abi/exec");
    // SAFETY: the callback reads `count` (alive for the test) and the view.
    ok(unsafe {
        nerve_executor_add_subscriber(
            exec,
            sub,
            Some(failing_sample),
            &*count as *const _ as *mut c_void,
            None,
        )
    });
    // moved into the executor: the handle is released
    assert_eq!(
        nerve_subscriber_destroy(sub),
        nerve_status_t::NERVE_ERR_STALE_HANDLE
    );
    let p = publisher::<CmdVel>(n, "/abi/exec");
    send_cmd(p, -1.0);
    send_cmd(p, 2.0);
    let mut ran = 0usize;
    // SAFETY: valid out-pointer.
    let code = unsafe { nerve_executor_spin_once(exec, 2_000_000_000, &mut ran) };
    assert_eq!(code, nerve_status_t::NERVE_ERR_CALLBACK);
    assert!(
        last_error().contains("negative speed") && last_error().contains("/abi/exec"),
        "{}",
        last_error()
    );
    // the executor is still usable: the next sample reaches the callback
    // SAFETY: as above.
    ok(unsafe { nerve_executor_spin_once(exec, 2_000_000_000, &mut ran) });
    assert_eq!(count.get(), 2);

    // a service served by the executor, called with a timeout
    let add = AddTwoInts::new();
    let ty = add.ty();
    let name = CString::new("/abi/add").unwrap();
    let mut server = nerve_server_t::default();
    let mut client = nerve_client_t::default();
    // SAFETY: valid strings, type and out-pointers.
    unsafe {
        ok(nerve_server_create(n, name.as_ptr(), &ty, &mut server));
        ok(nerve_executor_add_server(
            exec,
            server,
            8,
            Some(add_two_ints),
            null_mut(),
            None,
        ));
        ok(nerve_client_create(n, name.as_ptr(), &ty, &mut client));
    }
    assert_eq!(
        nerve_client_wait_for_service(client, 2_000_000_000),
        nerve_status_t::NERVE_OK
    );
    let call = srv::TwoInts { a: 2, b: 3 };
    let mut pending = nerve_pending_t::default();
    // SAFETY: `call` is a TwoInts payload.
    ok(unsafe {
        nerve_client_send(
            client,
            (&call as *const srv::TwoInts).cast(),
            std::mem::size_of_val(&call),
            &mut pending,
        )
    });
    let mut reply = nerve_reply_t::default();
    let mut view = std::mem::MaybeUninit::<nerve_sample_view_t>::zeroed();
    let mut got = nerve_status_t::NERVE_NOTHING;
    for _ in 0..200 {
        // SAFETY: valid out-pointers.
        ok(unsafe { nerve_executor_spin_once(exec, 10_000_000, &mut ran) });
        // SAFETY: valid out-pointers.
        got = unsafe { nerve_pending_wait(pending, 0, &mut reply, view.as_mut_ptr()) };
        if got != nerve_status_t::NERVE_NOTHING {
            break;
        }
    }
    ok(got);
    // SAFETY: the take succeeded, so it wrote the view, whose data points to the
    // reply's Int payload until released.
    let value = unsafe { (*view.assume_init().data.cast::<srv::Int>()).value };
    assert_eq!(value, 5);
    ok(nerve_reply_release(reply));
    // the server callback's failure reaches the caller with its message
    let bad = srv::TwoInts { a: 0, b: 3 };
    // SAFETY: as above.
    ok(unsafe {
        nerve_client_send(
            client,
            (&bad as *const srv::TwoInts).cast(),
            std::mem::size_of_val(&bad),
            &mut pending,
        )
    });
    for _ in 0..200 {
        // SAFETY: valid out-pointers.
        ok(unsafe { nerve_executor_spin_once(exec, 10_000_000, &mut ran) });
        // SAFETY: valid out-pointers.
        got = unsafe { nerve_pending_wait(pending, 0, &mut reply, view.as_mut_ptr()) };
        if got != nerve_status_t::NERVE_NOTHING {
            break;
        }
    }
    assert_eq!(got, nerve_status_t::NERVE_ERR_HANDLER_FAILED);
    assert!(last_error().contains("a must not be 0"), "{}", last_error());
    ok(nerve_executor_destroy(exec));
    ok(nerve_context_destroy(ctx));
}

#[test]
fn schema_seal_fills_in_the_derived_hash() {
    let text = Schema::of::<CmdVel>().encode();
    let hash = format!("hash={:016x}", Schema::of::<CmdVel>().layout_hash);
    let unsealed = CString::new(text.replace(&hash, "hash=0000000000000000")).unwrap();
    let mut buf = vec![0 as std::ffi::c_char; 4096];
    let mut needed = 0usize;
    let mut h = 0u64;
    // SAFETY: valid string, buffer of its length, out-pointers.
    ok(unsafe {
        nerve_schema_seal(
            unsealed.as_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
            &mut needed,
            &mut h,
        )
    });
    assert_eq!(h, Schema::of::<CmdVel>().layout_hash);
    // SAFETY: NUL-terminated by the call.
    let sealed = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
    assert_eq!(sealed, text);
    // too small a buffer says how much is needed
    // SAFETY: as above.
    let code =
        unsafe { nerve_schema_seal(unsealed.as_ptr(), buf.as_mut_ptr(), 4, &mut needed, &mut h) };
    assert_eq!(code, nerve_status_t::NERVE_ERR_BUFFER_TOO_SMALL);
    assert_eq!(needed, text.len() + 1);
}

/// Copies a name out through one of the ABI's `*_name` accessors.
fn name_of<H: Copy>(
    h: H,
    f: unsafe extern "C" fn(H, *mut std::ffi::c_char, usize, *mut usize) -> nerve_status_t,
) -> String {
    let mut buf = vec![0 as std::ffi::c_char; 256];
    let mut needed = 0usize;
    // SAFETY: a buffer of its length and a writable out-pointer.
    ok(unsafe { f(h, buf.as_mut_ptr(), buf.len(), &mut needed) });
    // SAFETY: NUL-terminated by the call.
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) };
    assert_eq!(needed, name.to_bytes().len() + 1);
    name.to_str().unwrap().to_string()
}

/// Names made through the C ABI resolve as Rust's do (`nerve::name::resolve_in_node`):
/// relative names under the namespace, private ones under the node, remap rules; a C
/// publisher on `chatter` under `/robot1` reaches a Rust subscriber of `/robot1/chatter`.
/// Before, the ABI ignored namespace and remaps and refused `chatter` ("must start with
/// '/'"), and `nerve_node_name` gave the bare name.
#[test]
fn names_resolve_under_the_namespace_and_remaps_apply() {
    let dir = std::env::temp_dir().join(format!("nerve-c-abi-{}-885", std::process::id()));
    let mut ctx = nerve_context_t::default();
    ok(common::context_in(
        885,
        &dir,
        Some("/robot1"),
        Some("cmd:=/base/cmd; ~/state:=status"),
        &mut ctx,
    ));
    let n = node(ctx, "talker");
    assert_eq!(name_of(n, nerve_node_name), "/robot1/talker");
    let chatter = publisher::<CmdVel>(n, "chatter");
    assert_eq!(
        name_of(chatter, nerve_publisher_topic_name),
        "/robot1/chatter"
    );
    let cmd = publisher::<CmdVel>(n, "cmd");
    assert_eq!(name_of(cmd, nerve_publisher_topic_name), "/base/cmd");
    let state = subscriber::<CmdVel>(n, "~/state");
    assert_eq!(
        name_of(state, nerve_subscriber_topic_name),
        "/robot1/status"
    );
    let imu = subscriber::<Imu>(n, "/imu");
    assert_eq!(name_of(imu, nerve_subscriber_topic_name), "/imu");
    let private = subscriber::<CmdVel>(n, "~/odom");
    assert_eq!(
        name_of(private, nerve_subscriber_topic_name),
        "/robot1/talker/odom"
    );

    // services resolve the same way
    let add = AddTwoInts::new();
    let ty = add.ty();
    let name = CString::new("add").unwrap();
    let (mut server, mut client) = (nerve_server_t::default(), nerve_client_t::default());
    // SAFETY: valid strings, type and out-pointers.
    unsafe {
        ok(nerve_server_create(n, name.as_ptr(), &ty, &mut server));
        ok(nerve_client_create(n, name.as_ptr(), &ty, &mut client));
    }
    assert_eq!(name_of(server, nerve_server_service_name), "/robot1/add");
    assert_eq!(name_of(client, nerve_client_service_name), "/robot1/add");

    // a Rust subscriber in the root namespace, on the absolute name, gets the C samples
    let cfg = nerve::Config::default()
        .domain(885)
        .unwrap()
        .state_dir(&dir)
        .network(false);
    let rust = nerve::Context::new(cfg).unwrap();
    let listener = rust.node("listener").create().unwrap();
    let sub = listener
        .subscriber::<CmdVel>("/robot1/chatter")
        .create()
        .unwrap();
    assert_eq!(
        nerve_publisher_wait_for_subscribers(chatter, 1, 5_000_000_000),
        nerve_status_t::NERVE_OK
    );
    send_cmd(chatter, 1.5);
    let got = sub
        .recv_timeout(std::time::Duration::from_secs(5))
        .unwrap()
        .expect("the C sample on /robot1/chatter");
    assert_eq!(got.linear, 1.5);

    // a bad namespace or rule is refused by name
    let mut bad = nerve_context_t::default();
    let code = common::context_in(885, &dir, Some("robot1"), None, &mut bad);
    assert_eq!(code, nerve_status_t::NERVE_ERR_CONTEXT);
    assert!(last_error().contains("robot1"), "{}", last_error());
    let code = common::context_in(885, &dir, None, Some("a:=1b"), &mut bad);
    assert_eq!(code, nerve_status_t::NERVE_ERR_CONTEXT);
    assert!(last_error().contains("1b"), "{}", last_error());
    ok(nerve_context_destroy(ctx));
}

unsafe extern "C" fn throwing_configure(_user: *mut c_void, _previous: u8) -> i32 {
    let msg = CString::new("bad config").unwrap();
    nerve_callback_fail(msg.as_ptr());
    NERVE_LIFECYCLE_ERROR
}

/// A transition whose callback fails reports the callback's own message (set with
/// `nerve_callback_fail`, as the C++ API does with an exception's `what()`); before, the
/// error said only "configure callback returned Error".
#[test]
fn a_failing_transition_callback_reports_its_message() {
    let (ctx, _dir) = context(886);
    let n = node(ctx, "managed_abi");
    let mut m = nerve_managed_t::default();
    // SAFETY: a writable out-pointer.
    ok(unsafe { nerve_managed_create(n, &mut m) });
    let hook = CString::new("configure").unwrap();
    // SAFETY: a valid hook name; the callback ignores its null user data.
    ok(unsafe { nerve_managed_on(m, hook.as_ptr(), Some(throwing_configure), null_mut(), None) });
    let mut state = 0u8;
    // SAFETY: a valid label and out-pointer.
    let code = unsafe { nerve_managed_trigger(m, hook.as_ptr(), &mut state) };
    assert_eq!(code, nerve_status_t::NERVE_ERR_CALLBACK);
    let e = last_error();
    assert!(e.contains("bad config"), "{e}");
    assert!(e.contains("configure callback"), "{e}");
    assert_eq!(state, 1, "back to unconfigured after error processing");
    // a transition that succeeds afterwards carries no stale message
    // SAFETY: a valid hook name; a null callback means success.
    ok(unsafe { nerve_managed_on(m, hook.as_ptr(), None, null_mut(), None) });
    // SAFETY: as above.
    ok(unsafe { nerve_managed_trigger(m, hook.as_ptr(), &mut state) });
    ok(nerve_managed_destroy(m));
    ok(nerve_context_destroy(ctx));
}
