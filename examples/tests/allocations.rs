//! Nerve's hot paths allocate nothing once warm: publish and receive of small messages in
//! one process and across contexts (the rings), an executor dispatching a subscription's
//! callback. Where iceoryx2 0.10 carries the data (large messages through its loans,
//! service calls through its request-response ports), iceoryx2 itself allocates a little
//! state per loan (`ChunkMutSharedState`) and per received request: those tests pin
//! exactly that count, so anything Nerve would add on top fails them. A counting
//! allocator counts the calling thread's allocations only, so other tests running beside
//! these do not disturb the count.

use nerve::prelude::*;
use nerve_msgs::srv::{AddTwoInts, Int, TwoInts};
use nerve_msgs::{CmdVel, PointCloud};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed to the system allocator unchanged; the counter is a
// const-initialized thread-local Cell (no allocation, no lazy initialization).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller upholds `alloc`'s contract, passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations this thread made while `f` ran.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

fn ctx(domain: u32) -> Context {
    let dir = std::env::temp_dir().join(format!("nerve-alloc-{}-{domain}", std::process::id()));
    Context::new(
        nerve::Config::default()
            .domain(domain)
            .unwrap()
            .state_dir(dir),
    )
    .unwrap()
}

const WARM: usize = 1_000;
const MEASURED: usize = 10_000;

#[test]
fn publish_and_receive_of_small_messages_in_one_process() {
    let ctx = ctx(611);
    let node = ctx.node("alloc_small").create().unwrap();
    let p = node.publisher::<CmdVel>("/alloc/small").create().unwrap();
    let s = node.subscriber::<CmdVel>("/alloc/small").create().unwrap();
    let round = || {
        p.publish(&CmdVel::default()).unwrap();
        assert!(s.try_recv().unwrap().is_some());
    };
    (0..WARM).for_each(|_| round());
    assert_eq!(allocations(|| (0..MEASURED).for_each(|_| round())), 0);
}

#[test]
fn publish_and_receive_across_contexts() {
    // two contexts meet through shared memory, as two processes do
    let (a, b) = (ctx(612), ctx(612));
    let pa = a.node("alloc_pub").create().unwrap();
    let sb = b.node("alloc_sub").create().unwrap();
    let small_p = pa.publisher::<CmdVel>("/alloc/x_small").create().unwrap();
    let small_s = sb.subscriber::<CmdVel>("/alloc/x_small").create().unwrap();
    let large_p = pa
        .publisher::<PointCloud>("/alloc/x_large")
        .create()
        .unwrap();
    let large_s = sb
        .subscriber::<PointCloud>("/alloc/x_large")
        .create()
        .unwrap();
    assert!(small_p.wait_for_subscribers(1, Duration::from_secs(5)));
    assert!(large_p.wait_for_subscribers(1, Duration::from_secs(5)));
    let small = || {
        small_p.publish(&CmdVel::default()).unwrap();
        let got = small_s.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(got.is_some());
    };
    let large = || {
        let mut l = large_p.loan_slice(64 * 1024).unwrap();
        l.elems_mut()[0] = 1;
        l.send().unwrap();
        let got = large_s.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(got.map(|m| m.elems().len()), Some(64 * 1024));
    };
    (0..WARM).for_each(|_| small());
    (0..WARM).for_each(|_| large());
    assert_eq!(allocations(|| (0..MEASURED).for_each(|_| small())), 0);
    // iceoryx2's loan allocates its sample's shared state, once per loan; Nerve nothing
    assert_eq!(
        allocations(|| (0..MEASURED).for_each(|_| large())),
        MEASURED as u64
    );
}

#[test]
fn a_call_and_its_reply() {
    let ctx = ctx(613);
    let node = ctx.node("alloc_srv").create().unwrap();
    let server = node.service::<AddTwoInts>("/alloc/add").create().unwrap();
    let client = node.client::<AddTwoInts>("/alloc/add").create().unwrap();
    let round = || {
        let call = client.send(&TwoInts { a: 1, b: 2 }).unwrap();
        let req = server
            .take_timeout(Duration::from_secs(5))
            .unwrap()
            .unwrap();
        req.reply(&Int {
            value: req.a + req.b,
        })
        .unwrap();
        drop(req);
        assert_eq!(call.wait(Duration::from_secs(5)).unwrap().value, 3);
    };
    (0..WARM).for_each(|_| round());
    // iceoryx2 allocates per call: the request loan's state, the server's active request
    // and the response loan's state; Nerve adds nothing
    assert_eq!(
        allocations(|| (0..MEASURED).for_each(|_| round())),
        3 * MEASURED as u64
    );
}

#[test]
fn an_executor_dispatching_a_callback() {
    let ctx = ctx(614);
    let node = ctx.node("alloc_exec").create().unwrap();
    let p = node.publisher::<CmdVel>("/alloc/exec").create().unwrap();
    let s = node.subscriber::<CmdVel>("/alloc/exec").create().unwrap();
    let seen = std::rc::Rc::new(Cell::new(0u64));
    let mut exec = Executor::new();
    let counter = seen.clone();
    exec.subscribe(s, move |_m| counter.set(counter.get() + 1))
        .unwrap();
    let mut round = || {
        p.publish(&CmdVel::default()).unwrap();
        assert_eq!(exec.spin_once(Duration::from_secs(1)).unwrap(), 1);
    };
    (0..WARM).for_each(|_| round());
    assert_eq!(allocations(|| (0..MEASURED).for_each(|_| round())), 0);
    assert_eq!(seen.get(), (WARM + MEASURED) as u64);
}
