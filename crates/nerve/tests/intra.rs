//! The same-process fast path: chosen automatically, zero copy within the process, and
//! correct when local and shared-memory subscribers mix.

use nerve::prelude::*;
use nerve::Config;
use std::time::Duration;

/// A context in a domain of its own per test (tests run in parallel threads).
fn config(tag: &str) -> Config {
    let h = nerve::message::layout::hash_str(nerve::message::layout::FNV_OFFSET, tag);
    let domain = 300 + (h % 250) as u32;
    let dir = std::env::temp_dir().join("nerve-tests/");
    Config::default().domain(domain).unwrap().state_dir(dir)
}

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "intra/Tick")]
struct Tick {
    n: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "intra/Cloud", elem = u8)]
struct Cloud {
    id: u64,
}

const WAIT: Duration = Duration::from_secs(5);

/// Receives `n` ticks and checks they are 0..n in order.
fn expect_ticks(s: &Subscriber<Tick>, n: u64) {
    for i in 0..n {
        let m = s.recv_timeout(WAIT).unwrap().expect("a tick within 5 s");
        assert_eq!(m.n, i, "in order, no duplicates");
    }
    assert!(
        s.try_recv().unwrap().is_none(),
        "nothing more: no duplicates"
    );
}

#[test]
fn same_node_uses_the_in_process_route() {
    let ctx = Context::new(config("same-node")).unwrap();
    let node = ctx.node("n").create().unwrap();
    let p = node.publisher::<Tick>("/intra/ticks").create().unwrap();
    let s = node
        .subscriber::<Tick>("/intra/ticks")
        .qos(Qos::default().depth(64))
        .create()
        .unwrap();
    for n in 0..50 {
        p.publish(&Tick { n }).unwrap();
    }
    // the subscriber's queue holds all 50: nothing is dropped
    expect_ticks(&s, 50);
    let st = s.stats();
    assert_eq!((st.received, st.in_process, st.lost), (50, 50, 0));
}

#[test]
fn large_samples_are_not_copied_within_the_process() {
    let ctx = Context::new(config("zero-copy")).unwrap();
    let node = ctx.node("n").create().unwrap();
    let p = node.publisher::<Cloud>("/intra/cloud").create().unwrap();
    let s = node.subscriber::<Cloud>("/intra/cloud").create().unwrap();
    let mut loan = p.loan_slice(4 << 20).unwrap();
    loan.id = 7;
    loan.elems_mut().fill(0xAB);
    let written = loan.elems().as_ptr();
    loan.send().unwrap();
    let got = s.recv_timeout(WAIT).unwrap().unwrap();
    assert_eq!(got.id, 7);
    assert_eq!(got.elems().len(), 4 << 20);
    assert!(got.elems().iter().all(|&b| b == 0xAB));
    assert_eq!(
        got.elems().as_ptr(),
        written,
        "read in the publisher's buffer"
    );
}

#[test]
fn threads_of_one_context_exchange_in_process() {
    let ctx = Context::new(config("threads")).unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let sub_ctx = ctx.clone();
    let reader = std::thread::spawn(move || {
        let node = sub_ctx.node("reader").create().unwrap();
        let s = node
            .subscriber::<Tick>("/intra/threads")
            .qos(Qos::reliable())
            .wait_mode(WaitMode::Block)
            .create()
            .unwrap();
        ready_tx.send(()).unwrap();
        expect_ticks(&s, 5000);
        s.stats()
    });
    ready_rx.recv().unwrap();
    let node = ctx.node("writer").create().unwrap();
    let p = node
        .publisher::<Tick>("/intra/threads")
        .qos(Qos::reliable())
        .create()
        .unwrap();
    for n in 0..5000 {
        p.publish(&Tick { n }).unwrap();
    }
    let st = reader.join().unwrap();
    assert_eq!((st.received, st.in_process, st.lost), (5000, 5000, 0));
}

#[test]
fn local_and_shared_memory_subscribers_are_served_once_each() {
    let cfg = config("mixed");
    // a second context stands for another process: it shares only shared memory
    let here = Context::new(cfg.clone()).unwrap();
    let there = Context::new(cfg).unwrap();
    let node = here.node("here").create().unwrap();
    let p = node
        .publisher::<Tick>("/intra/mixed")
        .qos(Qos::reliable())
        .create()
        .unwrap();
    let local = node
        .subscriber::<Tick>("/intra/mixed")
        .qos(Qos::reliable())
        .create()
        .unwrap();
    let remote_node = there.node("there").create().unwrap();
    let remote = remote_node
        .subscriber::<Tick>("/intra/mixed")
        .qos(Qos::reliable())
        .create()
        .unwrap();
    assert!(p.wait_for_subscribers(2, WAIT));
    for n in 0..40 {
        p.publish(&Tick { n }).unwrap();
    }
    expect_ticks(&local, 40);
    expect_ticks(&remote, 40);
    assert_eq!(local.stats().in_process, 40);
    assert_eq!(remote.stats().in_process, 0);

    // the remote subscriber leaves: the local one keeps its order and gets no copies
    drop(remote);
    for n in 40..60 {
        p.publish(&Tick { n }).unwrap();
    }
    for n in 40..60 {
        assert_eq!(local.recv_timeout(WAIT).unwrap().unwrap().n, n);
    }
    assert!(local.try_recv().unwrap().is_none());
}

#[test]
fn a_remote_subscriber_joining_after_the_loan_still_gets_the_sample() {
    let cfg = config("late-remote");
    let here = Context::new(cfg.clone()).unwrap();
    let there = Context::new(cfg).unwrap();
    let node = here.node("here").create().unwrap();
    let p = node.publisher::<Cloud>("/intra/late").create().unwrap();
    let local = node.subscriber::<Cloud>("/intra/late").create().unwrap();
    // loaned on the heap (only local subscribers yet)
    let mut loan = p.loan_slice(1000).unwrap();
    loan.id = 3;
    loan.elems_mut().fill(9);
    let remote_node = there.node("there").create().unwrap();
    let remote = remote_node
        .subscriber::<Cloud>("/intra/late")
        .create()
        .unwrap();
    loan.send().unwrap();
    for s in [&local, &remote] {
        let got = s.recv_timeout(WAIT).unwrap().unwrap();
        assert_eq!((got.id, got.elems().len()), (3, 1000));
        assert!(got.elems().iter().all(|&b| b == 9));
    }
    assert_eq!(remote.stats().in_process, 0);
    assert_eq!(local.stats().in_process, 1);
}

#[test]
fn history_reaches_a_late_local_subscriber_in_order() {
    let ctx = Context::new(config("history")).unwrap();
    let node = ctx.node("n").create().unwrap();
    let qos = Qos::latched().history(3).depth(8);
    let p = node
        .publisher::<Tick>("/intra/latched")
        .qos(qos.clone())
        .create()
        .unwrap();
    for n in 0..5 {
        p.publish(&Tick { n }).unwrap();
    }
    let s = node
        .subscriber::<Tick>("/intra/latched")
        .qos(qos)
        .create()
        .unwrap();
    p.update_connections();
    for n in 5..8 {
        p.publish(&Tick { n }).unwrap();
    }
    let mut got = vec![];
    while let Some(m) = s.recv_timeout(Duration::from_millis(200)).unwrap() {
        got.push(m.n);
    }
    assert_eq!(
        got,
        vec![2, 3, 4, 5, 6, 7],
        "history first, then live, once each"
    );
}

#[test]
fn samples_queued_in_process_outlive_their_publisher() {
    let ctx = Context::new(config("outlive")).unwrap();
    let node = ctx.node("n").create().unwrap();
    let s = node
        .subscriber::<Tick>("/intra/outlive")
        .qos(Qos::default().depth(16))
        .create()
        .unwrap();
    // nothing local yet: receiving finds nothing and costs nothing
    assert!(s.try_recv().unwrap().is_none());
    let p = node.publisher::<Tick>("/intra/outlive").create().unwrap();
    for n in 0..10 {
        p.publish(&Tick { n }).unwrap();
    }
    drop(p);
    expect_ticks(&s, 10);
    assert_eq!(s.stats().in_process, 10);
}

#[test]
fn history_the_topic_keeps_reaches_late_joiners_whatever_the_publisher_asked() {
    let cfg = config("topic-history");
    let here = Context::new(cfg.clone()).unwrap();
    let node = here.node("n").create().unwrap();
    let latched = Qos::latched().history(2).depth(4);
    // the topic is created by a subscriber that wants history
    let _creator = node
        .subscriber::<Tick>("/intra/kept")
        .qos(latched.clone())
        .create()
        .unwrap();
    let p = node
        .publisher::<Tick>("/intra/kept")
        .qos(Qos::default())
        .create()
        .unwrap();
    for n in 0..3 {
        p.publish(&Tick { n }).unwrap();
    }
    let there = Context::new(cfg).unwrap();
    let late_node = there.node("late").create().unwrap();
    let late = late_node
        .subscriber::<Tick>("/intra/kept")
        .qos(latched)
        .create()
        .unwrap();
    p.update_connections();
    let mut got = vec![];
    while let Some(m) = late.recv_timeout(Duration::from_millis(200)).unwrap() {
        got.push(m.n);
    }
    assert_eq!(got, vec![1, 2]);
}

/// Two pingers and one ponger, every receive blocking (the `bench paths` N:1 topology):
/// each pinger sends a ping tagged with its index and round, the ponger answers every ping
/// on that pinger's reply topic, and each pinger waits for its answer. `same_context` puts
/// the ponger in the pingers' context (cross-thread route); otherwise in a context of its
/// own (shared memory, as across processes). (With one reply topic for both pingers, a
/// pinger that runs ahead floods the other's queue, which under drop-oldest loses the
/// oldest answers and counts them as lost: that was the benchmark's N:1 failure.)
fn two_pingers_one_ponger(tag: &str, same_context: bool) {
    const ROUNDS: u64 = 200;
    let cfg = config(tag);
    let ctx = Context::new(cfg.clone()).unwrap();
    let ponger_ctx = if same_context {
        ctx.clone()
    } else {
        Context::new(cfg).unwrap()
    };
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ponger_stop = stop.clone();
    let ponger = std::thread::spawn(move || {
        let node = ponger_ctx.node("ponger").create().unwrap();
        let pings = node
            .subscriber::<Tick>("/intra/n1/ping")
            .qos(Qos::default().depth(64))
            .wait_mode(WaitMode::Adaptive)
            .create()
            .unwrap();
        let pongs: Vec<_> = (0..2)
            .map(|i| {
                node.publisher::<Tick>(&format!("/intra/n1/pong{i}"))
                    .qos(Qos::default().depth(64))
                    .create()
                    .unwrap()
            })
            .collect();
        ready_tx.send(()).unwrap();
        let mut answered = 0;
        while !ponger_stop.load(std::sync::atomic::Ordering::Relaxed) {
            if let Some(p) = pings.recv_timeout(Duration::from_millis(50)).unwrap() {
                pongs[(p.n >> 32) as usize]
                    .publish(&Tick { n: p.n })
                    .unwrap();
                answered += 1;
            }
        }
        answered
    });
    ready_rx.recv().unwrap();
    let pingers: Vec<_> = (0..2u64)
        .map(|i| {
            let ctx = ctx.clone();
            std::thread::spawn(move || {
                let node = ctx.node(&format!("pinger{i}")).create().unwrap();
                let ping = node
                    .publisher::<Tick>("/intra/n1/ping")
                    .qos(Qos::default().depth(64))
                    .create()
                    .unwrap();
                let pong = node
                    .subscriber::<Tick>(&format!("/intra/n1/pong{i}"))
                    .qos(Qos::default().depth(64))
                    .wait_mode(WaitMode::Adaptive)
                    .create()
                    .unwrap();
                assert!(ping.wait_for_subscribers(1, WAIT));
                for round in 0..ROUNDS {
                    let want = (i << 32) | round;
                    ping.publish(&Tick { n: want }).unwrap();
                    let m = pong.recv_timeout(WAIT).unwrap().unwrap_or_else(|| {
                        panic!("pinger {i}: no answer in round {round}: {:?}", pong.stats())
                    });
                    assert_eq!(m.n, want, "pinger {i}: its own answer, in order");
                }
                assert_eq!(pong.stats().lost, 0);
            })
        })
        .collect();
    let results: Vec<_> = pingers.into_iter().map(|p| p.join()).collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let answered = ponger.join().unwrap();
    for r in results {
        r.unwrap();
    }
    assert_eq!(answered, 2 * ROUNDS, "every ping answered once");
}

#[test]
fn two_publishers_one_blocking_subscriber_across_threads() {
    two_pingers_one_ponger("n1-threads", true);
}

#[test]
fn two_publishers_one_blocking_subscriber_across_contexts() {
    two_pingers_one_ponger("n1-contexts", false);
}

/// A fixed-size message of 256 KiB (a small camera frame).
#[derive(Clone, Copy, nerve::Message)]
#[repr(C)]
#[message(name = "intra/Frame")]
struct Frame {
    id: u64,
    pixels: [[u8; 1024]; 256],
}

/// A drop-oldest (sensor) publisher of large fixed-size samples keeps publishing while
/// subscribers in another context let their queues fill and hold every sample they may:
/// a slow reader never fails a sensor publisher (no `PoolExhausted`, even with the small
/// budget the benchmarks set), and the pool's memory follows the samples really in use.
#[test]
fn a_slow_reader_never_fails_a_sensor_publisher_of_large_samples() {
    let frame = std::mem::size_of::<Frame>();
    let cfg = config("slow-reader-large");
    let a = Context::new(cfg.clone()).unwrap();
    let b = Context::new(cfg).unwrap();
    let pub_node = a.node("camera").create().unwrap();
    let sub_node = b.node("slow").create().unwrap();
    // the budget the benchmarks set (queue and two loans): it caps back-pressure pools
    let qos = Qos {
        max_borrowed: 4,
        ..Qos::sensor().depth(4).shm_budget(6 * frame)
    };
    let p = pub_node
        .publisher::<Frame>("/intra/slow_frames")
        .qos(qos.clone())
        .create()
        .unwrap();
    let subs: Vec<Subscriber<Frame>> = (0..2)
        .map(|_| {
            sub_node
                .subscriber::<Frame>("/intra/slow_frames")
                .qos(qos.clone())
                .create()
                .unwrap()
        })
        .collect();
    p.wait_for_subscribers(2, WAIT);
    let shm_before = shm_used_kib();
    let mut held = Vec::new();
    for id in 0..64u64 {
        let mut loan = p.loan().unwrap_or_else(|e| panic!("loan {id}: {e}"));
        loan.id = id;
        loan.send().unwrap_or_else(|e| panic!("send {id}: {e}"));
        // each subscriber takes samples until it holds all it may, then stops reading
        for s in &subs {
            if held.len() < 8 {
                if let Some(m) = s.try_recv().unwrap() {
                    held.push(m);
                }
            }
        }
    }
    assert_eq!(held.len(), 8, "both subscribers hold 4 samples");
    // newest wins for the slow readers: their queues hold the last samples published
    drop(held);
    for s in &subs {
        let first = s.try_recv().unwrap().expect("a queued sample").id;
        assert!(first >= 60, "the oldest were dropped, got {first}");
    }
    // what the pool really takes: about the samples in use at once (8 held, 4 queued,
    // loans), not its worst case
    let grown = shm_used_kib().saturating_sub(shm_before) as usize;
    assert!(
        grown * 1024 < 32 * frame,
        "shared memory grew by {grown} KiB for 64 frames of {frame} bytes"
    );
}

/// Used space of /dev/shm in KiB.
fn shm_used_kib() -> u64 {
    let out = std::process::Command::new("df")
        .args(["-k", "--output=used", "/dev/shm"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0)
}

/// The same for slice messages (a point cloud), whose pool could grow: a pool grown for
/// more samples made iceoryx2 panic in the publisher. Readers holding every sample they
/// may never fail it.
#[test]
fn a_slow_reader_never_fails_a_sensor_publisher_of_slices() {
    let cfg = config("slow-reader-slices");
    let a = Context::new(cfg.clone()).unwrap();
    let b = Context::new(cfg).unwrap();
    let pub_node = a.node("lidar").create().unwrap();
    let sub_node = b.node("slow").create().unwrap();
    let qos = Qos {
        max_borrowed: 4,
        initial_payload: 4096,
        ..Qos::sensor().depth(4).shm_budget(4 * 4096)
    };
    let p = pub_node
        .publisher::<Cloud>("/intra/slow_clouds")
        .qos(qos.clone())
        .create()
        .unwrap();
    let s = sub_node
        .subscriber::<Cloud>("/intra/slow_clouds")
        .qos(qos)
        .create()
        .unwrap();
    p.wait_for_subscribers(1, WAIT);
    let points = vec![1u8; 4000];
    let mut held = Vec::new();
    for id in 0..64u64 {
        p.publish_slice(&Cloud { id }, &points)
            .unwrap_or_else(|e| panic!("publish {id}: {e}"));
        if held.len() < 4 {
            if let Some(m) = s.try_recv().unwrap() {
                held.push(m);
            }
        }
    }
    assert_eq!(held.len(), 4);
    drop(held);
    let first = s.try_recv().unwrap().expect("a queued cloud").id;
    assert!(first >= 60, "the oldest were dropped, got {first}");
}

#[test]
fn relative_names_resolve_under_the_namespace_and_remaps_apply() {
    let cfg = config("namespaces")
        .namespace("/robot1")
        .unwrap()
        .remap("cmd", "/shared/cmd")
        .unwrap();
    let ctx = Context::new(cfg).unwrap();
    assert_eq!(ctx.namespace(), "/robot1");
    let node = ctx.node("driver").create().unwrap();
    assert_eq!(node.full_name(), "/robot1/driver");
    let p = node.publisher::<Tick>("chatter").create().unwrap();
    assert_eq!(p.topic(), "/robot1/chatter");
    let q = node.publisher::<Tick>("cmd").create().unwrap();
    assert_eq!(q.topic(), "/shared/cmd");
    let abs = node.publisher::<Tick>("/abs").create().unwrap();
    assert_eq!(abs.topic(), "/abs");
    // a node of the same process in another namespace, with a rule of its own
    let other = ctx
        .node("other")
        .namespace("/robot2")
        .remap("in", "/robot1/chatter")
        .create()
        .unwrap();
    assert_eq!(other.full_name(), "/robot2/other");
    let s = other.subscriber::<Tick>("in").create().unwrap();
    p.publish(&Tick { n: 0 }).unwrap();
    let m = s
        .recv_timeout(WAIT)
        .unwrap()
        .expect("a tick through the remapped name");
    assert_eq!(m.n, 0);
    let root = Context::new(config("namespaces_root")).unwrap();
    assert_eq!(root.node("n").create().unwrap().full_name(), "/n");
    assert!(ctx.node("bad").namespace("robot").create().is_err());
}
