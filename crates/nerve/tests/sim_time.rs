//! Simulation time and the lockstep of deterministic replay: timers on a simulation
//! clock, its jumps (forward, back, start), the clock topic, and a player that knows when
//! every callback a message set off has returned.

use nerve::prelude::*;
use nerve::time::lockstep::Lockstep;
use nerve::time::Clock;
use nerve::{Config, Overrun};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const S: i64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn config(tag: &str) -> Config {
    let h = nerve::message::layout::hash_str(nerve::message::layout::FNV_OFFSET, tag);
    let domain = 760 + (h % 100) as u32;
    let dir = std::env::temp_dir().join("nerve-tests/");
    Config::default().domain(domain).unwrap().state_dir(dir)
}

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "sim_test/Num")]
struct Num {
    n: u64,
}

/// Spins until nothing more is ready (short real-time bound per round).
fn run_ready(exec: &mut Executor) -> usize {
    let mut total = 0;
    loop {
        let n = exec.spin_once(Duration::from_millis(1)).unwrap();
        if n == 0 {
            return total;
        }
        total += n;
    }
}

/// Timers follow the simulation clock: nothing fires while it stands still, a step
/// forward fires what fell due (in order; `Skip` once, `CatchUp` every missed period),
/// the first time after 0 starts the grids there, and a jump back keeps each timer's time
/// left, counted from the new time.
#[test]
fn timers_follow_simulation_time_and_its_jumps() {
    let clock = Clock::manual();
    let mut exec = Executor::new();
    exec.handle_signals(false);
    assert!(exec.use_clock(clock.clone()));
    let log = Rc::new(RefCell::new(Vec::<(&str, u64)>::new()));
    let (l1, l2) = (log.clone(), log.clone());
    exec.timer(
        "skip",
        Duration::from_millis(100),
        Overrun::Skip,
        move |t| l1.borrow_mut().push(("skip", t.deadline_ns)),
    )
    .unwrap();
    let (_, one) = exec
        .one_shot("once", Some(Duration::from_millis(250)), move |t| {
            l2.borrow_mut().push(("once", t.deadline_ns))
        })
        .unwrap();
    // created at time 0: nothing runs, however long real time passes
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(run_ready(&mut exec), 0);

    // time starts at 10 s: the grids start there
    clock.set(10 * S);
    assert_eq!(run_ready(&mut exec), 0, "nothing due at the start");
    assert_eq!(one.next_deadline(), Some(10_250 * MS));
    clock.set(10 * S + 100 * MS as i64);
    assert_eq!(run_ready(&mut exec), 1);
    assert_eq!(*log.borrow(), vec![("skip", 10_100 * MS)]);

    // forward by 350 ms: the periodic timer fires once (Skip), the one-shot at 250 ms
    log.borrow_mut().clear();
    clock.set(10 * S + 450 * MS as i64);
    run_ready(&mut exec);
    let mut got = log.borrow().clone();
    got.sort_by_key(|e| e.1);
    assert_eq!(got, vec![("skip", 10_200 * MS), ("once", 10_250 * MS)]);

    // back to 5 s (the bag played again): the periodic timer had 50 ms left
    log.borrow_mut().clear();
    clock.set(5 * S);
    assert_eq!(clock.jumps_back(), 1);
    assert_eq!(run_ready(&mut exec), 0);
    clock.set(5 * S + 49 * MS as i64);
    assert_eq!(run_ready(&mut exec), 0, "not yet: 50 ms were left");
    clock.set(5 * S + 50 * MS as i64);
    assert_eq!(run_ready(&mut exec), 1);
    assert_eq!(*log.borrow(), vec![("skip", 5_050 * MS)]);

    // one-shots re-armed from a callback count on simulation time too
    one.arm_after(Duration::from_millis(10));
    assert_eq!(one.next_deadline(), Some(5_060 * MS));
}

/// A `CatchUp` timer fires every period a forward jump skipped, in order.
#[test]
fn a_catch_up_timer_fires_every_missed_period_after_a_jump() {
    let clock = Clock::manual();
    let mut exec = Executor::new();
    exec.handle_signals(false);
    exec.use_clock(clock.clone());
    clock.set(S);
    let got = Rc::new(RefCell::new(Vec::new()));
    let g = got.clone();
    exec.timer("c", Duration::from_millis(10), Overrun::CatchUp, move |t| {
        g.borrow_mut().push(t.deadline_ns)
    })
    .unwrap();
    clock.set(S + 35 * MS as i64);
    run_ready(&mut exec);
    assert_eq!(*got.borrow(), vec![1_010 * MS, 1_020 * MS, 1_030 * MS]);
}

/// A context in simulation time follows the clock topic; its samples carry that time.
#[test]
fn a_sim_time_context_follows_the_clock_topic_and_stamps_with_it() {
    let mut cfg = config("sim-clock-topic");
    let plain = Context::new(cfg.clone()).unwrap();
    cfg.sim_time = true;
    let sim = Context::new(cfg).unwrap();
    assert!(sim.clock().is_sim());
    assert_eq!(sim.clock().now_ns(), 0, "no clock message yet");
    let driver = plain.node("driver").create().unwrap();
    let clock_pub = driver
        .publisher::<nerve::time::wire::Clock>(nerve::time::CLOCK_TOPIC)
        .create()
        .unwrap();
    let t = 1_700_000_000 * S;
    // the feed thread subscribes in the background: publish until it follows
    let give_up = std::time::Instant::now() + Duration::from_secs(20);
    while sim.clock().now_ns() != t && std::time::Instant::now() < give_up {
        clock_pub
            .publish(&nerve::time::wire::Clock {
                clock: nerve::time::wire::Time { nanos: t },
            })
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(sim.clock().now_ns(), t);
    let node = sim.node("stamped").create().unwrap();
    let sub = driver.subscriber::<Num>("/sim/stamped").create().unwrap();
    let publ = node.publisher::<Num>("/sim/stamped").create().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    publ.publish(&Num { n: 1 }).unwrap();
    let s = sub.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    assert_eq!(
        s.header().publish_wall_ns,
        t,
        "stamped with simulation time"
    );
}

/// Lockstep: a player's message comes back as "quiet" only once the echo callback in
/// another thread (its own context, as another process would be) has returned and the
/// callback its output set off in turn has returned too.
#[test]
fn the_player_waits_for_every_callback_a_message_sets_off() {
    let cfg = {
        let mut c = config("sim-lockstep");
        c.lockstep = true;
        c
    };
    let ls = Lockstep::create(cfg.domain).unwrap();
    let handled = Arc::new(AtomicU64::new(0));
    let (h, c2) = (handled.clone(), cfg.clone());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let nodes = std::thread::spawn(move || {
        let ctx = Context::new(c2).unwrap();
        let node = ctx.node("echo").create().unwrap();
        let out = node.publisher::<Num>("/ls/out").create().unwrap();
        let mut exec = Executor::new();
        exec.handle_signals(false);
        let inp = node
            .subscriber::<Num>("/ls/in")
            .qos(Qos::default().depth(64))
            .create()
            .unwrap();
        exec.subscribe(inp, move |s| {
            // slow on purpose: the player must wait
            std::thread::sleep(Duration::from_millis(2));
            out.publish(&Num { n: s.n }).unwrap();
        })
        .unwrap();
        let sink = node
            .subscriber::<Num>("/ls/out")
            .qos(Qos::default().depth(64))
            .create()
            .unwrap();
        let h2 = h.clone();
        exec.subscribe(sink, move |s| {
            std::thread::sleep(Duration::from_millis(1));
            h2.store(s.n, Ordering::SeqCst);
        })
        .unwrap();
        while !stop2.load(Ordering::SeqCst) {
            exec.spin_once(Duration::from_millis(20)).unwrap();
        }
    });
    // the player's context (publishers count what they owe)
    let ctx = Context::new(cfg).unwrap();
    let node = ctx.node("player").create().unwrap();
    let publ = node.publisher::<Num>("/ls/in").create().unwrap();
    let give_up = std::time::Instant::now() + Duration::from_secs(20);
    while (ls.executors() < 1 || ls.receivers("/ls/in") < 1 || ls.receivers("/ls/out") < 1)
        && std::time::Instant::now() < give_up
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        ls.executors() >= 1 && ls.receivers("/ls/in") == 1 && ls.receivers("/ls/out") == 1,
        "the echo executor joined the replay with both subscriptions"
    );
    std::thread::sleep(Duration::from_millis(300)); // connections
    for n in 1..=20 {
        publ.publish(&Num { n }).unwrap();
        ls.wait_quiet(Duration::from_secs(20), &mut || Ok(()))
            .unwrap();
        assert_eq!(
            handled.load(Ordering::SeqCst),
            n,
            "message {n} went through both callbacks before the player went on"
        );
    }
    assert_eq!(ls.underflows(), 0);
    stop.store(true, Ordering::SeqCst);
    nodes.join().unwrap();
}
