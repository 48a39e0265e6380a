//! Per-hop tracing of a three-stage pipeline (driver -> filter -> application) on three
//! threads: every sample is followed from its origin to the application, each hop split
//! into wait and transport and each stage's callback timed. Tracing is per process, so
//! this file is a test binary of its own.

use nerve::prelude::*;
use nerve::trace::{self, SegmentKind};
use nerve::Config;
use std::time::Duration;

#[derive(Clone, Copy, nerve::Message)]
#[repr(C)]
#[message(name = "trace_test/Frame")]
struct Frame {
    n: u64,
}

const N: u64 = 200;

fn config() -> Config {
    let domain = 560 + std::process::id() % 40;
    let dir = std::env::temp_dir().join("nerve-tests/");
    Config::default().domain(domain).unwrap().state_dir(dir)
}

#[test]
fn a_pipeline_is_followed_hop_by_hop() {
    let dir = tempfile_dir();
    trace::enable(&dir).unwrap();
    assert!(trace::enabled());
    assert!(trace::enable(&dir).is_err(), "decided once per process");
    let ctx = Context::new(config()).unwrap();

    let app = {
        let ctx = ctx.clone();
        std::thread::spawn(move || {
            let node = ctx.node("app").create().unwrap();
            let sub = node
                .subscriber::<Frame>("/trace_filtered")
                .qos(Qos::sensor().depth(256))
                .create()
                .unwrap();
            for i in 0..N {
                let f = sub
                    .recv_timeout(Duration::from_secs(10))
                    .unwrap()
                    .expect("a frame");
                assert_eq!(f.n, i * 2);
            }
        })
    };
    let filter = {
        let ctx = ctx.clone();
        std::thread::spawn(move || {
            let node = ctx.node("filter").create().unwrap();
            let sub = node
                .subscriber::<Frame>("/trace_raw")
                .qos(Qos::sensor().depth(256))
                .create()
                .unwrap();
            let out = node.publisher::<Frame>("/trace_filtered").create().unwrap();
            assert!(out.wait_for_subscribers(1, Duration::from_secs(10)));
            for _ in 0..N {
                let f = sub
                    .recv_timeout(Duration::from_secs(10))
                    .unwrap()
                    .expect("a raw frame");
                out.publish(&Frame { n: f.n * 2 }).unwrap();
            }
        })
    };
    let node = ctx.node("driver").create().unwrap();
    let raw = node.publisher::<Frame>("/trace_raw").create().unwrap();
    assert!(raw.wait_for_subscribers(1, Duration::from_secs(10)));
    std::thread::sleep(Duration::from_millis(50));
    for n in 0..N {
        raw.publish(&Frame { n }).unwrap();
        std::thread::sleep(Duration::from_micros(500));
    }
    filter.join().unwrap();
    app.join().unwrap();
    trace::flush();
    assert_eq!(trace::dropped(), 0);

    let events = trace::read_dir(&dir).unwrap();
    let r = trace::analyze(&events, 5);
    assert_eq!(r.unmatched_takes, 0);
    let path = r
        .paths
        .iter()
        .find(|p| p.0 == "/trace_raw -> /trace_filtered")
        .expect("the chain");
    assert_eq!(
        path.1.count, N as usize,
        "every sample followed to the application"
    );
    let stage = r
        .stages
        .iter()
        .find(|s| s.0 == "/trace_raw -> /trace_filtered")
        .unwrap();
    assert_eq!(stage.1.count, N as usize);
    for topic in ["/trace_raw", "/trace_filtered"] {
        let hop = r.hops.iter().find(|h| h.0 == topic).unwrap();
        assert_eq!((hop.1.count, hop.2.count), (N as usize, N as usize));
    }
    assert_eq!(r.chains.len(), 5, "the last chains kept for the timeline");
    for c in &r.chains {
        // the parts tile the chain: each starts where the previous ended
        let mut at = 0;
        for s in &c.segments {
            assert_eq!(s.start_ns, at, "{c:?}");
            assert!(s.end_ns >= s.start_ns);
            at = s.end_ns;
        }
        assert_eq!(at, c.total_ns);
        assert_eq!(
            c.segments
                .iter()
                .filter(|s| s.kind == SegmentKind::Callback)
                .count(),
            1
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("nerve-trace-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}
