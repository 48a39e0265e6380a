//! Handles and threads: using another thread's handle is `NERVE_ERR_WRONG_THREAD`,
//! certainly; destroying or releasing it from any thread succeeds and is done by the
//! owner (at its next call, or while its executor spins), leaking nothing.

use nerve::message::schema::Schema;
use nerve_c::*;
use nerve_msgs::CmdVel;
mod common;

use common::{last_error, node, ok, schema_of};
use std::ffi::{c_void, CString};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn context(domain: u32) -> (nerve_context_t, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "nerve-c-threads-{}-{domain}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    (common::context(domain, &dir), dir)
}

fn qos(max_borrowed: u32, max_loans: u32) -> nerve_qos_t {
    let mut q = std::mem::MaybeUninit::<nerve_qos_t>::zeroed();
    // SAFETY: writable storage.
    unsafe { nerve_qos_default(q.as_mut_ptr()) };
    // SAFETY: filled by nerve_qos_default.
    let mut q = unsafe { q.assume_init() };
    q.max_borrowed = max_borrowed;
    q.max_loans = max_loans;
    q
}

fn publisher(n: nerve_node_t, topic: &str, q: Option<nerve_qos_t>) -> nerve_publisher_t {
    let mut p = nerve_publisher_t::default();
    let t = CString::new(topic).unwrap();
    let s = schema_of::<CmdVel>();
    let q = q.as_ref().map_or(null(), |q| q as *const nerve_qos_t);
    // SAFETY: valid strings, QoS and out-pointer.
    ok(unsafe {
        nerve_publisher_create(
            n,
            t.as_ptr(),
            s.as_ptr(),
            Schema::of::<CmdVel>().layout_hash,
            q,
            &mut p,
        )
    });
    p
}

fn subscriber(n: nerve_node_t, topic: &str, q: Option<nerve_qos_t>) -> nerve_subscriber_t {
    let mut s = nerve_subscriber_t::default();
    let t = CString::new(topic).unwrap();
    let sc = schema_of::<CmdVel>();
    let q = q.as_ref().map_or(null(), |q| q as *const nerve_qos_t);
    // SAFETY: as above.
    ok(unsafe {
        nerve_subscriber_create(
            n,
            t.as_ptr(),
            sc.as_ptr(),
            Schema::of::<CmdVel>().layout_hash,
            q,
            &mut s,
        )
    });
    s
}

fn loan(p: nerve_publisher_t) -> (nerve_status_t, nerve_loan_t) {
    let mut l = nerve_loan_t::default();
    let mut data: *mut c_void = null_mut();
    // SAFETY: valid out-pointers.
    let code = unsafe { nerve_publisher_loan(p, std::mem::size_of::<CmdVel>(), &mut l, &mut data) };
    (code, l)
}

fn send(p: nerve_publisher_t) {
    let (code, l) = loan(p);
    ok(code);
    ok(nerve_sample_send(l));
}

fn take(s: nerve_subscriber_t) -> (nerve_status_t, nerve_sample_t) {
    let mut sample = nerve_sample_t::default();
    let mut view = std::mem::MaybeUninit::<nerve_sample_view_t>::zeroed();
    // SAFETY: valid out-pointers.
    let code = unsafe { nerve_subscriber_take(s, 0, &mut sample, view.as_mut_ptr()) };
    (code, sample)
}

fn publisher_count(s: nerve_subscriber_t) -> usize {
    let mut n = 0;
    // SAFETY: a valid out-pointer.
    ok(unsafe { nerve_subscriber_publisher_count(s, &mut n) });
    n
}

/// Runs `f` on a new thread named `name` and returns its result.
fn on_thread<R: Send + 'static>(name: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// Polls `cond` (an owner's call each time) until it holds; false after 20 s.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}

#[test]
fn a_handle_used_on_another_thread_is_wrong_thread() {
    let (ctx, _dir) = context(881);
    let n = node(ctx, "threads_use");
    let s = subscriber(n, "/threads/use", None);
    let p = publisher(n, "/threads/use", None);
    send(p);
    let (code, sample) = take(s);
    ok(code);
    let (code, l) = loan(p);
    ok(code);
    let me = format!("{:?}", std::thread::current().id());
    let (codes, msg) = on_thread("intruder", move || {
        let mut view = std::mem::MaybeUninit::<nerve_sample_view_t>::zeroed();
        let mut count = 0usize;
        // SAFETY: valid out-pointers.
        let codes = unsafe {
            [
                loan(p).0,
                take(s).0,
                nerve_sample_view(sample, view.as_mut_ptr()),
                nerve_sample_send(l),
                nerve_publisher_subscriber_count(p, &mut count),
                nerve_executor_spin_once(nerve_executor_t { id: n.id }, 0, null_mut()),
            ]
        };
        (codes, last_error())
    });
    let wrong = nerve_status_t::NERVE_ERR_WRONG_THREAD;
    assert_eq!(codes[..5], [wrong; 5], "{msg}");
    // a node handle where an executor is expected: the kind is checked first
    assert_eq!(codes[5], nerve_status_t::NERVE_ERR_WRONG_KIND);
    // SAFETY: a valid out-pointer.
    let code = unsafe { nerve_publisher_subscriber_count(p, &mut 0) };
    ok(code);
    let msg = on_thread("intruder", move || {
        // SAFETY: a valid out-pointer.
        let code = unsafe { nerve_publisher_subscriber_count(p, &mut 0) };
        assert_eq!(code, nerve_status_t::NERVE_ERR_WRONG_THREAD);
        last_error()
    });
    assert!(msg.contains(&me), "names the owner: {msg}");
    assert!(msg.contains("'intruder'"), "names the caller: {msg}");
    // everything still works on the owner's thread; the loan was not sent
    ok(nerve_sample_send(l));
    ok(nerve_sample_release(sample));
    let (code, second) = take(s);
    ok(code);
    ok(nerve_sample_release(second));
    for code in [
        nerve_publisher_destroy(p),
        nerve_subscriber_destroy(s),
        nerve_node_destroy(n),
        nerve_context_destroy(ctx),
    ] {
        ok(code);
    }
    assert_eq!(nerve_live_handles(), 0);
}

#[test]
fn destroying_on_another_thread_is_done_by_the_owner() {
    let (ctx, _dir) = context(882);
    let n = node(ctx, "threads_destroy");
    let base = nerve_live_handles();

    // a publisher destroyed elsewhere stops being counted once the owner runs
    let s = subscriber(n, "/threads/destroy", None);
    let p = publisher(n, "/threads/destroy", None);
    assert_eq!(publisher_count(s), 1);
    assert_eq!(
        on_thread("destroyer", move || nerve_publisher_destroy(p)),
        nerve_status_t::NERVE_OK
    );
    assert!(
        eventually(|| publisher_count(s) == 0),
        "the publisher is still counted"
    );
    // SAFETY: a valid out-pointer.
    let code = unsafe { nerve_publisher_subscriber_count(p, &mut 0) };
    assert_eq!(code, nerve_status_t::NERVE_ERR_STALE_HANDLE);

    // a sample released elsewhere is gone once the owner runs
    let s1 = subscriber(n, "/threads/samples", None);
    let p1 = publisher(n, "/threads/samples", Some(qos(0, 1)));
    send(p1);
    let (code, held) = take(s1);
    ok(code);
    let holding = nerve_live_handles();
    assert_eq!(
        on_thread("releaser", move || nerve_sample_release(held)),
        nerve_status_t::NERVE_OK
    );
    assert_eq!(nerve_live_handles(), holding - 1);
    let mut view = std::mem::MaybeUninit::<nerve_sample_view_t>::zeroed();
    // SAFETY: a valid out-pointer.
    let code = unsafe { nerve_sample_view(held, view.as_mut_ptr()) };
    assert_eq!(code, nerve_status_t::NERVE_ERR_STALE_HANDLE);

    // a loan discarded elsewhere goes back to the publisher's pool
    let (code, l) = loan(p1);
    ok(code);
    assert_ne!(loan(p1).0, nerve_status_t::NERVE_OK, "one loan at a time");
    assert_eq!(
        on_thread("discarder", move || nerve_loan_discard(l)),
        nerve_status_t::NERVE_OK
    );
    let (code, l2) = loan(p1);
    assert_eq!(code, nerve_status_t::NERVE_OK, "{}", last_error());
    ok(nerve_loan_discard(l2));

    // every kind of destroy from elsewhere, the context last: nothing is left
    let (s, s1, p1, n2) = (s, s1, p1, n);
    let codes = on_thread("destroyer", move || {
        [
            nerve_subscriber_destroy(s),
            nerve_subscriber_destroy(s1),
            nerve_publisher_destroy(p1),
        ]
    });
    assert_eq!(codes, [nerve_status_t::NERVE_OK; 3]);
    assert_eq!(nerve_live_handles(), base);
    let codes = on_thread("destroyer", move || {
        [nerve_node_destroy(n2), nerve_context_destroy(ctx)]
    });
    assert_eq!(codes, [nerve_status_t::NERVE_OK; 2]);
    assert_eq!(nerve_live_handles(), 0);
}

#[test]
fn destroying_after_the_owner_exited_succeeds() {
    let dir = std::env::temp_dir().join(format!("nerve-c-threads-exit-{}", std::process::id()));
    let (ctx, n, p) = on_thread("short-lived", move || {
        let ctx = common::context(883, &dir);
        let n = node(ctx, "threads_exit");
        let p = publisher(n, "/threads/exit", None);
        (ctx, n, p)
    });
    // the owner's table dropped them: destroying is a no-op, using is stale
    ok(nerve_publisher_destroy(p));
    ok(nerve_node_destroy(n));
    ok(nerve_context_destroy(ctx));
    // SAFETY: a valid out-pointer.
    let code = unsafe { nerve_publisher_subscriber_count(p, &mut 0) };
    assert_eq!(code, nerve_status_t::NERVE_ERR_STALE_HANDLE);
    assert!(last_error().contains("exited"), "{}", last_error());
}

/// The state directory both contexts of the spinning test share.
fn spin_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("nerve-c-threads-spin-{}", std::process::id()))
}

static CALLS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_sample(_: *mut c_void, _: *const nerve_sample_view_t) -> i32 {
    CALLS.fetch_add(1, Ordering::SeqCst);
    0
}

/// The owner sleeps in its executor's spin: a publisher destroyed elsewhere is released
/// during that spin (the executor is woken for it), not at the owner's next call.
#[test]
fn a_spinning_executor_releases_what_other_threads_destroy() {
    let (tx, rx) = std::sync::mpsc::channel();
    let owner = std::thread::Builder::new()
        .name("spinner".into())
        .spawn(move || {
            let ctx = common::context(884, &spin_dir());
            let n = node(ctx, "threads_spinner");
            let p = publisher(n, "/threads/spin/out", None);
            let s = subscriber(n, "/threads/spin/in", None);
            let mut exec = nerve_executor_t::default();
            // SAFETY: valid handles, callback and out-pointer.
            unsafe {
                ok(nerve_executor_create(ctx, &mut exec));
                ok(nerve_executor_add_subscriber(
                    exec,
                    s,
                    Some(count_sample),
                    null_mut(),
                    None,
                ));
            }
            tx.send(p).unwrap();
            // one spin, until the sample on /threads/spin/in comes (or a minute)
            let mut ran = 0usize;
            // SAFETY: a valid out-pointer.
            ok(unsafe { nerve_executor_spin_once(exec, 60_000_000_000, &mut ran) });
            let left_after_spin = nerve_live_handles();
            ok(nerve_executor_destroy(exec));
            ok(nerve_node_destroy(n));
            ok(nerve_context_destroy(ctx));
            (ran, left_after_spin, nerve_live_handles())
        })
        .unwrap();
    let p = rx.recv().unwrap();
    let ctx = common::context(884, &spin_dir());
    let n = node(ctx, "threads_watcher");
    let watch = subscriber(n, "/threads/spin/out", None);
    let poke = publisher(n, "/threads/spin/in", None);
    assert!(eventually(|| publisher_count(watch) == 1));
    // the owner is asleep in its spin: the release is queued and the executor woken
    ok(nerve_publisher_destroy(p));
    assert!(
        eventually(|| publisher_count(watch) == 0),
        "the spinning owner did not release the publisher"
    );
    // now end the owner's spin
    assert!(
        nerve_publisher_wait_for_subscribers(poke, 1, 20_000_000_000) == nerve_status_t::NERVE_OK
    );
    send(poke);
    let (ran, left_after_spin, left) = owner.join().unwrap();
    assert_eq!(
        ran, 1,
        "the spin ran the subscriber once (the release is not counted)"
    );
    assert_eq!(CALLS.load(Ordering::SeqCst), 1);
    // context, node, executor: the publisher is gone
    assert_eq!(left_after_spin, 3);
    assert_eq!(left, 0);
    for code in [
        nerve_publisher_destroy(poke),
        nerve_subscriber_destroy(watch),
        nerve_node_destroy(n),
        nerve_context_destroy(ctx),
    ] {
        ok(code);
    }
}
