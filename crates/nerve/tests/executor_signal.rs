//! SIGTERM stops a spinning executor, which drains queued input within its bound. (Its
//! own test binary: the shutdown flag is process-wide.)

use nerve::prelude::*;
use nerve::Config;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "signal/Num")]
struct Num {
    n: u64,
}

#[test]
fn sigterm_stops_the_executor_after_a_bounded_drain() {
    let dir = std::env::temp_dir().join("nerve-tests/");
    let ctx = Context::new(Config::default().domain(777).unwrap().state_dir(dir)).unwrap();
    let node = ctx.node("signal").create().unwrap();
    let qos = Qos::default().depth(32);
    let publisher = node
        .publisher::<Num>("/signal/in")
        .qos(qos.clone())
        .create()
        .unwrap();
    let sub = node
        .subscriber::<Num>("/signal/in")
        .qos(qos)
        .create()
        .unwrap();
    let handled = Rc::new(Cell::new(0u64));
    let ticks = Rc::new(Cell::new(0u64));
    let mut exec = Executor::new();
    exec.drain_timeout(Duration::from_millis(200));
    let h = handled.clone();
    exec.subscribe(sub, move |s: &Sample<Num>| {
        if s.n == 0 {
            // SAFETY: raising a signal whose handler the executor installed.
            unsafe { libc::raise(libc::SIGTERM) };
        }
        std::thread::sleep(Duration::from_millis(50));
        h.set(h.get() + 1);
    })
    .unwrap();
    let t = ticks.clone();
    exec.timer("t", Duration::from_millis(1), Overrun::Skip, move |_| {
        t.set(t.get() + 1)
    })
    .unwrap();
    for n in 0..30 {
        publisher.publish(&Num { n }).unwrap();
    }
    exec.spin().unwrap();
    assert!(nerve::shutdown::requested());
    let n = handled.get();
    // the callback in progress when the signal came, then what the 200 ms drain allows
    // (about 4 of 50 ms each)
    assert!(
        (2..30).contains(&n),
        "{n} of 30 handled: stop honoured, drain bounded"
    );
}
