//! In-process behaviour of topics: type identity, QoS, slices, serde, wait sets.

use nerve::prelude::*;
use nerve::{Config, TopicError};
use std::time::Duration;

/// A context in a domain of its own per test (tests run in parallel threads).
fn ctx(tag: &str) -> Context {
    let h = nerve::message::layout::hash_str(nerve::message::layout::FNV_OFFSET, tag);
    let domain = 600 + (h % 300) as u32;
    let dir = std::env::temp_dir().join("nerve-tests/");
    Context::new(Config::default().domain(domain).unwrap().state_dir(dir)).unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "test/Point")]
struct Point {
    x: f64,
    y: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "test/Point")]
struct PointV2 {
    x: f64,
    y: f64,
    z: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "test/Blob", elem = u32)]
struct Blob {
    id: u64,
}

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Plan {
    name: String,
    waypoints: Vec<(f32, f32)>,
}
impl SerdeMessage for Plan {
    const TYPE_NAME: &'static str = "test/Plan";
}

#[test]
fn fixed_message_round_trip_with_header() {
    let node = ctx("fixed").node("n1").create().unwrap();
    let p = node.publisher::<Point>("/fixed").create().unwrap();
    let s = node.subscriber::<Point>("/fixed").create().unwrap();
    p.publish(&Point { x: 1.0, y: 2.0 }).unwrap();
    let mut l = p.loan().unwrap();
    l.x = 3.0;
    l.send().unwrap();
    let a = s.recv_timeout(Duration::from_secs(1)).unwrap().unwrap();
    assert_eq!(*a, Point { x: 1.0, y: 2.0 });
    assert_eq!(a.header().seq, 1);
    assert_eq!(a.header().publisher_id, p.id());
    let b = s.recv_timeout(Duration::from_secs(1)).unwrap().unwrap();
    assert_eq!(*b, Point { x: 3.0, y: 0.0 });
    assert_eq!(b.header().seq, 2);
    assert!(b.header().publish_mono_ns >= a.header().publish_mono_ns);
    assert!(s.try_recv().unwrap().is_none());
    assert_eq!(s.stats().received, 2);
}

#[test]
fn type_mismatch_names_both_types() {
    let node = ctx("mismatch").node("n1").create().unwrap();
    let _p = node.publisher::<Point>("/typed").create().unwrap();
    let err = node.subscriber::<PointV2>("/typed").create().err().unwrap();
    let msg = err.to_string();
    assert!(matches!(err, TopicError::TypeMismatch { .. }), "{msg}");
    assert!(
        msg.contains("/typed") && msg.matches("test/Point").count() == 2,
        "{msg}"
    );
    let err = node.subscriber::<Blob>("/typed").create().err().unwrap();
    assert!(err.to_string().contains("test/Blob"), "{err}");
}

#[test]
fn slices_grow_and_respect_max_payload() {
    let node = ctx("slices").node("n1").create().unwrap();
    let qos = Qos::default().payload(64, 1 << 20);
    let p = node
        .publisher::<Blob>("/blob")
        .qos(qos.clone())
        .create()
        .unwrap();
    let s = node.subscriber::<Blob>("/blob").qos(qos).create().unwrap();
    for n in [1usize, 10, 1000, 100_000] {
        let mut l = p.loan_slice(n).unwrap();
        l.id = n as u64;
        for (i, e) in l.elems_mut().iter_mut().enumerate() {
            *e = i as u32;
        }
        l.send().unwrap();
        let r = s.recv_timeout(Duration::from_secs(1)).unwrap().unwrap();
        assert_eq!(r.id, n as u64);
        assert_eq!(r.elems().len(), n);
        assert!(r.elems().iter().enumerate().all(|(i, &e)| e == i as u32));
    }
    let err = p.loan_slice(300_000).err().unwrap();
    assert!(
        matches!(err, nerve::LoanError::PayloadTooLarge { .. }),
        "{err}"
    );
}

#[test]
fn serde_fallback() {
    let node = ctx("serde").node("n1").create().unwrap();
    let p = node.publisher::<Serde<Plan>>("/plan").create().unwrap();
    let s = node.subscriber::<Serde<Plan>>("/plan").create().unwrap();
    let plan = Plan {
        name: "dock".into(),
        waypoints: vec![(1.0, 2.0), (3.0, 4.0)],
    };
    p.publish_value(&plan).unwrap();
    let r = s.recv_timeout(Duration::from_secs(1)).unwrap().unwrap();
    assert_eq!(r.decode().unwrap(), plan);
}

#[test]
fn bad_names_and_qos_are_rejected() {
    let node = ctx("bad").node("n1").create().unwrap();
    // a relative name is no longer an error: it resolves under the namespace (`/`)
    let relative = node.publisher::<Point>("rel").create().unwrap();
    assert_eq!(relative.topic(), "/rel");
    for bad in ["1imu", "/a//b", "/a-b", "", "a/"] {
        let e = node.publisher::<Point>(bad).create().err().unwrap();
        assert!(matches!(e, TopicError::Name(_)), "{bad}: {e}");
    }
    let e = node
        .publisher::<Point>("/q")
        .qos(Qos::default().depth(0))
        .create()
        .err()
        .unwrap();
    assert!(matches!(e, TopicError::InvalidQos { .. }), "{e}");
    assert!(ctx("bad").node("has space").create().is_err());
}

#[test]
fn overflow_policy_mismatch_is_an_error() {
    let node = ctx("ovf").node("n1").create().unwrap();
    let _p = node
        .publisher::<Point>("/ovf")
        .qos(Qos::sensor())
        .create()
        .unwrap();
    let e = node
        .subscriber::<Point>("/ovf")
        .qos(Qos::reliable())
        .create()
        .err()
        .unwrap();
    assert!(matches!(e, TopicError::IncompatibleQos { .. }), "{e}");
}

#[test]
fn drop_oldest_counts_losses() {
    let node = ctx("drops").node("n1").create().unwrap();
    let p = node.publisher::<Point>("/drops").create().unwrap();
    let s = node
        .subscriber::<Point>("/drops")
        .qos(Qos::sensor().depth(4))
        .create()
        .unwrap();
    for i in 0..20 {
        p.publish(&Point {
            x: i as f64,
            y: 0.0,
        })
        .unwrap();
    }
    let mut got = vec![];
    while let Some(m) = s.try_recv().unwrap() {
        got.push(m.x);
    }
    assert_eq!(got, vec![16.0, 17.0, 18.0, 19.0]);
    let st = s.stats();
    assert_eq!(st.received, 4);
    assert_eq!(st.lost, 0, "first sample of a publisher is not a gap");
    p.publish(&Point { x: 20.0, y: 0.0 }).unwrap();
    for i in 21..30 {
        p.publish(&Point {
            x: i as f64,
            y: 0.0,
        })
        .unwrap();
    }
    while s.try_recv().unwrap().is_some() {}
    assert_eq!(s.stats().lost, 6);
}

#[test]
fn late_joiner_gets_history() {
    let node = ctx("latched").node("n1").create().unwrap();
    let p = node
        .publisher::<Point>("/map")
        .qos(Qos::latched().history(3).depth(3))
        .create()
        .unwrap();
    for i in 0..5 {
        p.publish(&Point {
            x: i as f64,
            y: 0.0,
        })
        .unwrap();
    }
    let s = node
        .subscriber::<Point>("/map")
        .qos(Qos::latched().history(3).depth(3))
        .create()
        .unwrap();
    p.update_connections();
    let mut got = vec![];
    while let Some(m) = s.recv_timeout(Duration::from_millis(200)).unwrap() {
        got.push(m.x);
    }
    assert_eq!(got, vec![2.0, 3.0, 4.0]);
}

#[test]
fn wait_set_serves_several_subscribers() {
    let node = ctx("waitset").node("n1").create().unwrap();
    let pa = node.publisher::<Point>("/wa").create().unwrap();
    let sa = node.subscriber::<Point>("/wa").create().unwrap();
    let sb = node.subscriber::<Blob>("/wb").create().unwrap();
    let mut ws = WaitSet::new();
    let ia = ws.add(&sa).unwrap();
    let ib = ws.add(&sb).unwrap();
    assert!(ws.wait(Duration::from_millis(10)).unwrap().is_empty());
    pa.publish(&Point { x: 1.0, y: 1.0 }).unwrap();
    let ready = ws.wait(Duration::from_secs(1)).unwrap();
    assert_eq!(ready, vec![ia]);
    assert_ne!(ia, ib);
    assert!(sa.try_recv().unwrap().is_some());
}

#[test]
fn wait_set_waits_to_a_deadline_and_ends_on_a_wake() {
    let node = ctx("waitset_until").node("n1").create().unwrap();
    let pa = node.publisher::<Point>("/wu").create().unwrap();
    let sa = node.subscriber::<Point>("/wu").create().unwrap();
    let waker = nerve::WaitSetWaker::new();
    let mut ws = WaitSet::new();
    let ia = ws.add(&sa).unwrap();
    ws.wake_on(&waker).unwrap();
    // to the deadline, not before it
    let deadline = nerve::mono_ns() + 20_000_000;
    assert!(ws.wait_until(deadline).unwrap().is_empty());
    assert!(nerve::mono_ns() >= deadline);
    // a wake from another thread ends a wait with no deadline
    let w = waker.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        w.wake();
    });
    let start = std::time::Instant::now();
    assert!(ws.wait_until(u64::MAX).unwrap().is_empty());
    assert!(start.elapsed() < Duration::from_secs(10));
    t.join().unwrap();
    // a wake while nobody waits ends the next wait at once, once
    waker.wake();
    assert!(ws.wait_until(u64::MAX).unwrap().is_empty());
    pa.publish(&Point { x: 1.0, y: 1.0 }).unwrap();
    assert_eq!(ws.wait_until(u64::MAX).unwrap(), vec![ia]);
}

#[test]
fn wait_set_sees_a_publisher_that_joins_while_it_waits() {
    let sub_ctx = ctx("waitset_late");
    let node = sub_ctx.node("n1").create().unwrap();
    let sa = node.subscriber::<Point>("/wl").create().unwrap();
    let mut ws = WaitSet::new();
    let ia = ws.add(&sa).unwrap();
    assert!(ws.wait(Duration::from_millis(10)).unwrap().is_empty());
    // another context (another process's view): its publisher's ring is new to `sa`
    let pub_ctx = ctx("waitset_late");
    let pn = pub_ctx.node("n2").create().unwrap();
    let pa = pn.publisher::<Point>("/wl").create().unwrap();
    assert!(pa.wait_for_subscribers(1, Duration::from_secs(5)));
    pa.publish(&Point { x: 1.0, y: 2.0 }).unwrap();
    assert_eq!(ws.wait(Duration::from_secs(5)).unwrap(), vec![ia]);
    assert_eq!(sa.try_recv().unwrap().map(|s| s.y), Some(2.0));
}

#[test]
fn back_pressure_blocks_then_errors() {
    let node = ctx("bp").node("n1").create().unwrap();
    let qos = Qos::reliable().depth(4).overflow(Overflow::BackPressure {
        timeout: Duration::from_millis(100),
    });
    let s = node
        .subscriber::<Point>("/bp")
        .qos(qos.clone())
        .create()
        .unwrap();
    let p = node.publisher::<Point>("/bp").qos(qos).create().unwrap();
    // a receiving subscriber attaches to the new publisher
    assert!(s.try_recv().unwrap().is_none());
    let mut result = Ok(());
    let mut sent = 0;
    for i in 0..10 {
        result = p.publish(&Point {
            x: i as f64,
            y: 0.0,
        });
        if result.is_err() {
            break;
        }
        sent += 1;
    }
    let e = result.unwrap_err();
    assert!(
        matches!(e, nerve::PublishError::BackPressureTimeout { .. }),
        "{e}"
    );
    assert_eq!(sent, 4, "the queue holds depth samples");
    let mut got = vec![];
    while let Some(m) = s.try_recv().unwrap() {
        got.push(m.x);
    }
    assert_eq!(got, vec![0.0, 1.0, 2.0, 3.0]);
}

#[test]
fn back_pressure_never_loses_silently_to_an_unattached_subscriber() {
    let node = ctx("bp2").node("n1").create().unwrap();
    let qos = Qos::reliable().depth(2).overflow(Overflow::BackPressure {
        timeout: Duration::from_millis(50),
    });
    // this subscriber never receives, so it never attaches to the later publisher
    let _s = node
        .subscriber::<Point>("/bp2")
        .qos(qos.clone())
        .create()
        .unwrap();
    let p = node.publisher::<Point>("/bp2").qos(qos).create().unwrap();
    let results: Vec<_> = (0..5)
        .map(|i| {
            p.publish(&Point {
                x: i as f64,
                y: 0.0,
            })
        })
        .collect();
    assert!(results[..2].iter().all(|r| r.is_ok()));
    let e = results[2].as_ref().unwrap_err();
    assert!(
        matches!(
            e,
            nerve::PublishError::Undelivered { .. }
                | nerve::PublishError::BackPressureTimeout { .. }
        ),
        "{e}"
    );
}

#[test]
fn raw_bytes_follow_the_documented_layout() {
    let node = ctx("rawlayout").node("n1").create().unwrap();
    let p = node.publisher::<Blob>("/rawblob").create().unwrap();
    let raw = nerve::RawSubscriber::create(&node, "/rawblob", Qos::default()).unwrap();
    let mut l = p.loan_slice(3).unwrap();
    l.id = 0x1122_3344_5566_7788;
    l.elems_mut().copy_from_slice(&[7, 8, 9]);
    l.send().unwrap();
    let s = raw.recv_timeout(Duration::from_secs(1)).unwrap().unwrap();
    let t = raw.type_info();
    assert_eq!(t.name, "test/Blob");
    let b = s.bytes();
    assert_eq!(b.len(), t.elems_offset() + 3 * 4, "exact payload length");
    assert_eq!(&b[..8], &0x1122_3344_5566_7788u64.to_ne_bytes());
    let off = t.elems_offset();
    let e: Vec<u32> = (0..3)
        .map(|i| u32::from_ne_bytes(b[off + 4 * i..off + 4 * i + 4].try_into().unwrap()))
        .collect();
    assert_eq!(e, vec![7, 8, 9]);
    assert_eq!(s.elems(), 3);
}

// Over-aligned message types (more than 8 bytes) no longer compile: see the compile-fail
// doctest of `nerve::message::assert_supported_layout`.

#[test]
fn predictive_wait_mode_receives_a_periodic_stream_and_times_out_when_it_stops() {
    let ctx = ctx("predictive");
    let sub_ctx = ctx.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let node = sub_ctx.node("reader").create().unwrap();
        let s = node
            .subscriber::<Point>("/periodic")
            .qos(Qos::reliable())
            .wait_mode(WaitMode::Predictive)
            .create()
            .unwrap();
        ready_tx.send(()).unwrap();
        let mut got = vec![];
        while let Some(m) = s.recv_timeout(Duration::from_millis(300)).unwrap() {
            got.push(m.x);
        }
        got
    });
    ready_rx.recv().unwrap();
    let node = ctx.node("writer").create().unwrap();
    let p = node
        .publisher::<Point>("/periodic")
        .qos(Qos::reliable())
        .create()
        .unwrap();
    for i in 0..30 {
        p.publish(&Point {
            x: i as f64,
            y: 0.0,
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    let got = reader.join().unwrap();
    assert_eq!(got, (0..30).map(|i| i as f64).collect::<Vec<_>>());
}

#[test]
fn a_reliable_publisher_that_leaves_first_still_reaches_a_busy_subscriber() {
    // the subscriber lives in another context (so samples go through shared memory) and
    // is busy when the publisher sends everything and goes away
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let (go_tx, go) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        let ctx = ctx("linger");
        let node = ctx.node("late_reader").create().unwrap();
        let sub = node
            .subscriber::<Point>("/test/linger")
            .qos(Qos::reliable())
            .create()
            .unwrap();
        ready_tx.send(()).unwrap();
        go.recv().unwrap();
        // busy until after the publisher has sent and started to drop
        std::thread::sleep(Duration::from_millis(300));
        let mut got = Vec::new();
        while let Some(p) = sub.recv_timeout(Duration::from_secs(2)).unwrap() {
            got.push(p.x as u64);
            if got.len() == 50 {
                break;
            }
        }
        got
    });
    ready.recv().unwrap();
    let ctx = ctx("linger");
    let node = ctx.node("leaver").create().unwrap();
    let publisher = node
        .publisher::<Point>("/test/linger")
        .qos(Qos::reliable())
        .create()
        .unwrap();
    assert!(publisher.wait_for_subscribers(1, Duration::from_secs(5)));
    go_tx.send(()).unwrap();
    for i in 0..50 {
        publisher
            .publish(&Point {
                x: i as f64,
                y: 0.0,
            })
            .unwrap();
    }
    drop(publisher);
    drop(node);
    let got = reader.join().unwrap();
    assert_eq!(got, (0..50).collect::<Vec<u64>>(), "every sample, in order");
}

/// A back-pressure publish whose slow subscribers are one in its own context and one in
/// another (shared memory): each full queue waits within the same deadline, the publish
/// ends with a timeout error, and neither subscriber loses or duplicates what fit.
#[test]
fn back_pressure_with_slow_local_and_shared_memory_subscribers() {
    let qos = Qos::reliable().depth(2).overflow(Overflow::BackPressure {
        timeout: Duration::from_millis(100),
    });
    let here = ctx("bp-mixed");
    let there = ctx("bp-mixed");
    let node = here.node("n1").create().unwrap();
    let other = there.node("n2").create().unwrap();
    let local = node
        .subscriber::<Point>("/bp_mixed")
        .qos(qos.clone())
        .create()
        .unwrap();
    let remote = other
        .subscriber::<Point>("/bp_mixed")
        .qos(qos.clone())
        .create()
        .unwrap();
    let p = node
        .publisher::<Point>("/bp_mixed")
        .qos(qos)
        .create()
        .unwrap();
    // receiving subscribers attach to the new publisher
    assert!(local.try_recv().unwrap().is_none());
    assert!(remote.try_recv().unwrap().is_none());
    assert!(p.wait_for_subscribers(2, Duration::from_secs(5)));
    let point = |x: f64| Point { x, y: 0.0 };
    p.publish(&point(0.0)).unwrap();
    p.publish(&point(1.0)).unwrap();
    let e = p.publish(&point(2.0)).unwrap_err();
    assert!(
        matches!(e, nerve::PublishError::BackPressureTimeout { .. }),
        "{e}"
    );
    for s in [&local, &remote] {
        let mut got = vec![];
        while let Some(m) = s.try_recv().unwrap() {
            got.push(m.x);
        }
        assert_eq!(got, vec![0.0, 1.0], "what fit, once, in order");
    }
}

/// Built without the network plane, a configuration that turns it on is refused by name
/// when a node is created (never silently ignored).
#[cfg(not(feature = "net"))]
#[test]
fn without_the_net_feature_the_network_plane_is_a_named_error() {
    let dir = std::env::temp_dir().join("nerve-tests/");
    let mut cfg = Config::default().domain(640).unwrap().state_dir(dir);
    cfg.network.enabled = true;
    let e = Context::new(cfg).unwrap().node("n").create().err().unwrap();
    assert!(e.to_string().contains("cargo feature `net`"), "{e}");
}

/// Small messages reach other contexts through the publisher's shared ring; every
/// subscriber keeps to its own depth there: a deep one loses nothing of a burst it has not
/// read yet (however shallow the publisher's own depth), a shallow one keeps the newest
/// and counts the rest as lost. (The ring once had only the publisher's depth of slots: a
/// recorder with a deep queue lost samples behind a sensor publisher.)
#[test]
fn subscribers_of_other_contexts_keep_their_own_depth() {
    let a = ctx("own_depth");
    let b = Context::new(a.config().clone()).unwrap();
    let pub_node = a.node("depth_pub").create().unwrap();
    let p = pub_node
        .publisher::<Point>("/own_depth")
        .qos(Qos::sensor().depth(4))
        .create()
        .unwrap();
    let sub_node = b.node("depth_sub").create().unwrap();
    let deep = sub_node
        .subscriber::<Point>("/own_depth")
        .qos(Qos::sensor().depth(200))
        .create()
        .unwrap();
    let shallow = sub_node
        .subscriber::<Point>("/own_depth")
        .qos(Qos::sensor().depth(8))
        .create()
        .unwrap();
    assert!(p.wait_for_subscribers(2, Duration::from_secs(5)));
    let xs = |s: &Subscriber<Point>| {
        std::iter::from_fn(|| s.try_recv().unwrap().map(|m| m.x as u64)).collect::<Vec<_>>()
    };
    // both see the stream start (losses count from the first sample seen), then a burst
    p.publish(&Point { x: 0.0, y: 0.0 }).unwrap();
    assert_eq!(xs(&deep), [0]);
    assert_eq!(xs(&shallow), [0]);
    for i in 1..150 {
        p.publish(&Point {
            x: i as f64,
            y: 0.0,
        })
        .unwrap();
    }
    assert_eq!(xs(&deep), (1..150).collect::<Vec<_>>(), "nothing lost");
    assert_eq!(deep.stats().lost, 0);
    assert_eq!(xs(&shallow), (142..150).collect::<Vec<_>>(), "the newest 8");
    assert_eq!(shallow.stats().lost, 141);
}

/// A subscriber of another context that joins a stream already running reads it from then
/// on.
#[test]
fn a_late_subscriber_of_another_context_reads_a_running_stream() {
    let a = ctx("late_ring");
    let b = Context::new(a.config().clone()).unwrap();
    let pub_node = a.node("late_pub").create().unwrap();
    let p = pub_node.publisher::<Point>("/late_ring").create().unwrap();
    for i in 0..600 {
        p.publish(&Point {
            x: i as f64,
            y: 0.0,
        })
        .unwrap();
    }
    let sub_node = b.node("late_sub").create().unwrap();
    let s = sub_node.subscriber::<Point>("/late_ring").create().unwrap();
    let mut got = Vec::new();
    for i in 600..700 {
        p.publish(&Point {
            x: i as f64,
            y: 0.0,
        })
        .unwrap();
        while let Some(m) = s.try_recv().unwrap() {
            got.push(m.x as u64);
        }
    }
    assert!(!got.is_empty(), "nothing read of the running stream");
    assert_eq!(*got.last().unwrap(), 699);
}

#[test]
fn kept_raw_samples_are_bounded_by_max_borrowed() {
    use std::cell::RefCell;
    use std::rc::Rc;
    let node = ctx("rawheld").node("n1").create().unwrap();
    let p = node.publisher::<Blob>("/rawheld").create().unwrap();
    // the default QoS: a subscriber holds at most 2 samples
    let raw = nerve::RawSubscriber::create(&node, "/rawheld", Qos::default()).unwrap();
    let mut exec = Executor::new();
    exec.handle_signals(false);
    let kept = Rc::new(RefCell::new(Vec::new()));
    let k = kept.clone();
    exec.subscribe_raw_owned(raw, move |s| {
        k.borrow_mut().push(s);
        Ok(())
    })
    .unwrap();
    let id = |s: &nerve::RawSample| u64::from_ne_bytes(s.bytes()[..8].try_into().unwrap());
    for i in 0..3u64 {
        let mut l = p.loan_slice(1).unwrap();
        l.id = i;
        l.send().unwrap();
    }
    // the first two are kept; the third is refused with an error naming the limit
    let mut error = None;
    for _ in 0..1000 {
        if let Err(e) = exec.spin_once(Duration::from_millis(10)) {
            error = Some(e);
            break;
        }
    }
    let e = error.expect("a third kept sample is refused");
    assert!(
        matches!(
            e,
            nerve::ExecError::Recv(nerve::RecvError::TooManyHeld { max: 2, .. })
        ),
        "{e}"
    );
    assert!(e.to_string().contains("already holds 2 samples"), "{e}");
    assert_eq!(kept.borrow().len(), 2);
    // releasing one lets the queued third one through, not lost
    kept.borrow_mut().remove(0);
    for _ in 0..1000 {
        if kept.borrow().len() == 2 {
            break;
        }
        exec.spin_once(Duration::from_millis(10)).unwrap();
    }
    let ids: Vec<u64> = kept.borrow().iter().map(id).collect();
    assert_eq!(ids, vec![1, 2]);
}
