//! The C ABI's hot paths allocate nothing after warm-up: loan, send, take, release, and
//! a service call with its reply. Counted by a global allocator, on this thread only.

use nerve::message::schema::Schema;
use nerve_c::*;
use nerve_msgs::{srv, CmdVel};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::{c_void, CString};

mod common;
use common::{node, ok, AddTwoInts};
use std::ptr::{null, null_mut};

struct Counting;
static TRACE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts (thread-local cells with const
// initialisers, which never allocate).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            COUNT.with(|c| c.set(c.get() + 1));
            if TRACE.load(std::sync::atomic::Ordering::Relaxed) {
                COUNTING.with(|c| c.set(false));
                eprintln!(
                    "ALLOC {} bytes\n{}",
                    layout.size(),
                    std::backtrace::Backtrace::force_capture()
                );
                COUNTING.with(|c| c.set(true));
            }
        }
        // SAFETY: the caller's layout, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: allocated by `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Allocations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> u64 {
    COUNT.with(|c| c.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    COUNT.with(Cell::get)
}

fn round_trip(p: nerve_publisher_t, s: nerve_subscriber_t, i: u32) {
    let mut loan = nerve_loan_t::default();
    let mut data: *mut c_void = null_mut();
    // SAFETY: valid out-pointers; the loan is a writable CmdVel.
    unsafe {
        ok(nerve_publisher_loan(
            p,
            std::mem::size_of::<CmdVel>(),
            &mut loan,
            &mut data,
        ));
        (*data.cast::<CmdVel>()).linear = i as f32;
    }
    ok(nerve_sample_send(loan));
    let mut sample = nerve_sample_t::default();
    let mut view = std::mem::MaybeUninit::<nerve_sample_view_t>::zeroed();
    // SAFETY: valid out-pointers.
    ok(unsafe { nerve_subscriber_take(s, 1_000_000_000, &mut sample, view.as_mut_ptr()) });
    ok(nerve_sample_release(sample));
}

#[test]
fn hot_paths_allocate_nothing_after_warm_up() {
    TRACE.store(
        std::env::var_os("NERVE_ALLOC_TRACE").is_some(),
        std::sync::atomic::Ordering::Relaxed,
    );
    let dir = std::env::temp_dir().join(format!("nerve-c-alloc-{}", std::process::id()));
    let ctx = common::context(874, &dir);
    let n = node(ctx, "alloc_pubsub");
    let topic = CString::new("/alloc/cmd").unwrap();
    let schema = CString::new(Schema::of::<CmdVel>().encode()).unwrap();
    let (mut p, mut s) = (nerve_publisher_t::default(), nerve_subscriber_t::default());
    // SAFETY: valid strings and out-pointers.
    unsafe {
        ok(nerve_subscriber_create(
            n,
            topic.as_ptr(),
            schema.as_ptr(),
            0,
            null(),
            &mut s,
        ));
        ok(nerve_publisher_create(
            n,
            topic.as_ptr(),
            schema.as_ptr(),
            0,
            null(),
            &mut p,
        ));
    }
    for i in 0..100 {
        round_trip(p, s, i);
    }
    let n_allocs = allocations(|| {
        for i in 0..1000 {
            round_trip(p, s, i);
        }
    });
    assert_eq!(
        n_allocs, 0,
        "1000 loan/send/take/release round trips allocated"
    );

    // a service call: the server answers on a thread (and context) of its own
    let add = AddTwoInts::new();
    let ty = add.ty();
    let name = CString::new("/alloc/add").unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let server_dir = dir.clone();
    let server = std::thread::spawn(move || {
        let ctx = common::context(874, &server_dir);
        let n = node(ctx, "alloc_server");
        let name = CString::new("/alloc/add").unwrap();
        let add = AddTwoInts::new();
        let ty = add.ty();
        let mut server = nerve_server_t::default();
        // SAFETY: valid strings, type and out-pointer.
        ok(unsafe { nerve_server_create(n, name.as_ptr(), &ty, &mut server) });
        tx.send(()).unwrap();
        let mut served = 0;
        while served < 2200 {
            let mut r = nerve_request_t::default();
            let mut view = std::mem::MaybeUninit::<nerve_sample_view_t>::zeroed();
            // SAFETY: valid out-pointers; the view points to a TwoInts until answered.
            unsafe {
                if nerve_server_take(server, 100_000_000, &mut r, view.as_mut_ptr())
                    != nerve_status_t::NERVE_OK
                {
                    continue;
                }
                let q = &*view.assume_init().data.cast::<srv::TwoInts>();
                let out = srv::Int { value: q.a + q.b };
                ok(nerve_request_reply(r, (&out as *const srv::Int).cast(), 8));
            }
            served += 1;
        }
    });
    rx.recv().unwrap();
    let mut client = nerve_client_t::default();
    // SAFETY: valid strings, type and out-pointer.
    ok(unsafe { nerve_client_create(n, name.as_ptr(), &ty, &mut client) });
    assert_eq!(
        nerve_client_wait_for_service(client, 5_000_000_000),
        nerve_status_t::NERVE_OK
    );
    let call = |i: i64| {
        let q = srv::TwoInts { a: i, b: 1 };
        let mut reply = nerve_reply_t::default();
        let mut view = std::mem::MaybeUninit::<nerve_sample_view_t>::zeroed();
        // SAFETY: `q` is a TwoInts payload; valid out-pointers.
        unsafe {
            ok(nerve_client_call(
                client,
                (&q as *const srv::TwoInts).cast(),
                16,
                5_000_000_000,
                &mut reply,
                view.as_mut_ptr(),
            ));
            assert_eq!((*view.assume_init().data.cast::<srv::Int>()).value, i + 1);
        }
        ok(nerve_reply_release(reply));
    };
    for i in 0..100 {
        call(i);
    }
    let c_allocs = allocations(|| {
        for i in 0..1000 {
            call(i);
        }
    });
    // The same calls through the Rust API: iceoryx2 0.10 allocates one shared-state
    // `Rc` per request loan (`ChunkMutSharedState`), on every path; the C ABI must add
    // nothing to it.
    let rust_ctx = nerve::Context::new(
        nerve::Config::default()
            .domain(874)
            .unwrap()
            .state_dir(&dir),
    )
    .unwrap();
    let rust_node = rust_ctx.node("alloc_rust_client").create().unwrap();
    let rust_client = nerve::RawClient::create(
        &rust_node,
        "/alloc/add",
        &nerve::ServiceType {
            name: "nerve_msgs/AddTwoInts".into(),
            request: Schema::of::<srv::TwoInts>().type_info(),
            response: Schema::of::<srv::Int>().type_info(),
        },
        nerve::ServiceQos::default(),
        nerve::WaitMode::Adaptive,
    )
    .unwrap();
    assert!(rust_client.wait_for_service(std::time::Duration::from_secs(5)));
    let rust_call = |i: i64| {
        let q = srv::TwoInts { a: i, b: 1 };
        let r = rust_client
            .send_bytes(nerve::message::as_bytes(&q))
            .unwrap()
            .wait(std::time::Duration::from_secs(5))
            .unwrap();
        assert_eq!(r.bytes().len(), 8);
    };
    for i in 0..100 {
        rust_call(i);
    }
    let rust_allocs = allocations(|| {
        for i in 0..1000 {
            rust_call(i);
        }
    });
    assert_eq!(
        c_allocs, rust_allocs,
        "1000 calls through the C ABI allocated {c_allocs} times, through Rust {rust_allocs}"
    );
    assert!(
        c_allocs <= 1000,
        "more than one allocation per call: {c_allocs}"
    );
    server.join().unwrap();
}
