//! Executors: priorities, timers, services and clients, state machines, stopping, idling
//! without polling, and callback groups on several threads.

use nerve::executor::{CallbackGroup, EntityStats, MultiThreadedExecutor};
use nerve::machine::{event_qos, event_topic, TransitionEvent};
use nerve::prelude::*;
use nerve::{CallError, Config, StateSpec, TransitionSpec};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn ctx(tag: &str) -> Context {
    let h = nerve::message::layout::hash_str(nerve::message::layout::FNV_OFFSET, tag);
    let domain = 550 + (h % 200) as u32;
    let dir = std::env::temp_dir().join("nerve-tests/");
    Context::new(Config::default().domain(domain).unwrap().state_dir(dir)).unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "exec/Num")]
struct Num {
    n: u64,
}

struct Double;
impl Service for Double {
    const TYPE_NAME: &'static str = "exec/Double";
    type Request = Num;
    type Response = Num;
}

fn stats_of<'a>(stats: &'a [EntityStats], name: &str) -> &'a EntityStats {
    stats
        .iter()
        .find(|s| s.name == name)
        .expect("entity by name")
}

#[test]
fn ready_work_runs_by_priority() {
    let ctx = ctx("exec-priority");
    let node = ctx.node("prio").create().unwrap();
    let qos = Qos::default().depth(16);
    let topics = ["/exec/low", "/exec/high", "/exec/mid"];
    let pubs: Vec<_> = topics
        .iter()
        .map(|t| node.publisher::<Num>(t).qos(qos.clone()).create().unwrap())
        .collect();
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut exec = Executor::new();
    exec.handle_signals(false);
    let mut ids = Vec::new();
    for t in topics {
        let sub = node.subscriber::<Num>(t).qos(qos.clone()).create().unwrap();
        let log = log.clone();
        ids.push(
            exec.subscribe(sub, move |s: &Sample<Num>| log.borrow_mut().push((t, s.n)))
                .unwrap(),
        );
    }
    exec.set_priority(ids[1], 10).set_priority(ids[2], 5);
    for (i, p) in pubs.iter().enumerate() {
        for n in 0..3 {
            p.publish(&Num {
                n: 10 * i as u64 + n,
            })
            .unwrap();
        }
    }
    let ran = exec.spin_once(Duration::from_secs(5)).unwrap();
    assert_eq!(ran, 9);
    let order: Vec<&str> = log.borrow().iter().map(|e| e.0).collect();
    assert_eq!(
        order,
        [["/exec/high"; 3], ["/exec/mid"; 3], ["/exec/low"; 3]].concat(),
        "highest priority first, each topic in order"
    );
    let st = exec.stats();
    assert_eq!(st[0].priority, 10);
    assert_eq!(stats_of(&st, "/exec/low").callbacks, 3);
}

#[test]
fn periodic_and_one_shot_timers() {
    let mut exec = Executor::new();
    exec.handle_signals(false);
    let ticks = Rc::new(RefCell::new(Vec::<nerve::Tick>::new()));
    let t = ticks.clone();
    let (_, periodic) = exec
        .timer("tick", Duration::from_millis(5), Overrun::Skip, move |k| {
            t.borrow_mut().push(*k)
        })
        .unwrap();
    let shots = Rc::new(RefCell::new(0));
    let s = shots.clone();
    let (_, once) = exec
        .one_shot("once", None, move |_| *s.borrow_mut() += 1)
        .unwrap();
    assert_eq!(once.next_deadline(), None, "disarmed until armed");
    once.arm_after(Duration::from_millis(3));
    exec.spin_for(Duration::from_millis(60)).unwrap();
    let ticks = ticks.borrow();
    assert!(ticks.len() >= 5, "{} ticks", ticks.len());
    for w in ticks.windows(2) {
        let step = w[1].deadline_ns - w[0].deadline_ns;
        // deadlines stay on the 5 ms grid (a skipped tick makes a multiple)
        assert_eq!(step % 5_000_000, 0, "drift-free grid: {step}");
        assert!(w[1].count == w[0].count + 1);
    }
    assert!(
        ticks.iter().all(|k| k.fired_ns >= k.deadline_ns),
        "never early"
    );
    assert_eq!(*shots.borrow(), 1, "a one-shot fires once");
    assert_eq!(periodic.fired(), ticks.len() as u64);
    periodic.cancel();
    drop(ticks);
    let before = periodic.fired();
    exec.spin_for(Duration::from_millis(20)).unwrap();
    assert_eq!(periodic.fired(), before, "a cancelled timer stays quiet");
}

#[test]
fn an_idle_executor_sleeps_and_a_handle_wakes_it() {
    let ctx = ctx("exec-idle");
    let node = ctx.node("idle").create().unwrap();
    let sub = node.subscriber::<Num>("/exec/idle").create().unwrap();
    let mut exec = Executor::new();
    exec.handle_signals(false);
    exec.subscribe(sub, |_| {}).unwrap();
    let handle = exec.handle();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        handle.stop();
    });
    let cpu0 = thread_cpu();
    let t0 = Instant::now();
    exec.spin().unwrap();
    let (cpu, wall) = (thread_cpu() - cpu0, t0.elapsed());
    stopper.join().unwrap();
    assert!(
        wall < Duration::from_secs(5),
        "stop wakes the sleeping executor"
    );
    // blocked, not polling: a fraction of the wall time on the CPU
    assert!(
        cpu < wall / 4,
        "idle executor used {cpu:?} CPU over {wall:?}"
    );
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[test]
fn services_and_async_clients_on_one_executor() {
    let ctx = ctx("exec-service");
    let node = ctx.node("svc").create().unwrap();
    let server = node.service::<Double>("/exec/double").create().unwrap();
    let client = node.client::<Double>("/exec/double").create().unwrap();
    let mut exec = Executor::new();
    exec.handle_signals(false);
    exec.serve(server, |req| Ok(req.reply(&Num { n: req.n * 2 })?))
        .unwrap();
    let replies = Rc::new(RefCell::new(Vec::new()));
    let r = replies.clone();
    let (_, calls) = exec
        .client(
            client,
            Duration::from_secs(5),
            move |seq, reply: Result<_, CallError>| r.borrow_mut().push((seq, reply.unwrap().n)),
        )
        .unwrap();
    let sent: Vec<u64> = (1..=3).map(|n| calls.call(&Num { n }).unwrap()).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while replies.borrow().len() < 3 && Instant::now() < deadline {
        exec.spin_once(Duration::from_millis(100)).unwrap();
    }
    let mut got = replies.borrow().clone();
    got.sort();
    assert_eq!(
        got,
        sent.iter()
            .zip([2, 4, 6])
            .map(|(s, v)| (*s, v))
            .collect::<Vec<_>>()
    );
    assert_eq!(calls.pending(), 0);
}

#[test]
fn a_call_nobody_answers_times_out_through_the_callback() {
    let ctx = ctx("exec-timeout");
    let node = ctx.node("lonely").create().unwrap();
    // a server that exists but is never served
    let _server = node.service::<Double>("/exec/silent").create().unwrap();
    let client = node.client::<Double>("/exec/silent").create().unwrap();
    let mut exec = Executor::new();
    exec.handle_signals(false);
    let out = Rc::new(RefCell::new(None));
    let o = out.clone();
    let (_, calls) = exec
        .client(client, Duration::from_millis(50), move |_, r| {
            *o.borrow_mut() = Some(r.err().map(|e| e.to_string()))
        })
        .unwrap();
    calls.call(&Num { n: 1 }).unwrap();
    exec.spin_once(Duration::from_secs(5)).unwrap();
    let msg = out
        .borrow()
        .clone()
        .flatten()
        .expect("an error reached the callback");
    assert!(msg.contains("/exec/silent"), "{msg}");
}

#[test]
fn a_state_machine_cycles_on_its_timeout_and_publishes_every_transition() {
    let ctx = ctx("exec-machine");
    let node = ctx.node("sm").create().unwrap();
    let spec = MachineSpec::new("exec_cycle", "active")
        .state(StateSpec::new("active").timeout(Duration::from_millis(5)))
        .state(StateSpec::new("inactive").pass_through("resume"))
        .state(StateSpec::new("halted"))
        .transition(TransitionSpec::new("timeout", &["active"], "inactive"))
        .transition(TransitionSpec::new("resume", &["inactive"], "active"))
        .transition(TransitionSpec::new("halt", &["*"], "halted"));
    let watcher = node
        .subscriber::<TransitionEvent>(&event_topic("exec_cycle"))
        .qos(event_qos())
        .create()
        .unwrap();
    let mut exec = Executor::new();
    exec.handle_signals(false);
    let (_, handle) = exec.machine(&node, Machine::new(spec).unwrap()).unwrap();
    assert_eq!(handle.current(), "active");
    exec.spin_for(Duration::from_millis(40)).unwrap();
    handle.trigger("halt").unwrap();
    assert!(
        handle.trigger("explode").is_err(),
        "unknown triggers are refused"
    );
    exec.spin_once(Duration::from_secs(1)).unwrap();
    assert_eq!(handle.current(), "halted");
    let events: Vec<TransitionEvent> =
        std::iter::from_fn(|| watcher.try_recv().unwrap().map(|s| *s)).collect();
    assert_eq!(events[0].to_state(), "active");
    assert_eq!(events[0].trigger_name(), "start");
    let cycles = events
        .iter()
        .filter(|e| e.trigger_name() == "timeout")
        .count();
    assert!(cycles >= 3, "{cycles} timeouts in 40 ms of 5 ms states");
    for w in events.windows(2) {
        assert_eq!(w[1].seq, w[0].seq + 1, "no transition unpublished");
        assert_eq!(w[1].from_state(), w[0].to_state());
    }
    assert_eq!(events.last().unwrap().to_state(), "halted");
}

#[test]
fn mutually_exclusive_groups_never_overlap_and_reentrant_ones_do() {
    fn overlap(kind: CallbackGroup) -> usize {
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let mut mt = MultiThreadedExecutor::new(2);
        mt.handle_signals(false);
        let group = mt.group(kind);
        let stop = mt.stopper();
        let done = Arc::new(AtomicUsize::new(0));
        for name in ["a", "b"] {
            let (inside, most, done, stop) =
                (inside.clone(), most.clone(), done.clone(), stop.clone());
            mt.add(group, move |exec| {
                exec.one_shot(name, Some(Duration::from_millis(10)), move |_| {
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    // wait (bounded) for the other callback to join us
                    let until = Instant::now() + Duration::from_millis(300);
                    while inside.load(Ordering::SeqCst) < 2 && Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    most.fetch_max(inside.load(Ordering::SeqCst), Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    if done.fetch_add(1, Ordering::SeqCst) == 1 {
                        stop.stop();
                    }
                })?;
                Ok(())
            });
        }
        mt.spin(Duration::from_millis(100)).unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 2, "both callbacks ran");
        most.load(Ordering::SeqCst)
    }
    assert_eq!(overlap(CallbackGroup::MutuallyExclusive), 1);
    assert_eq!(overlap(CallbackGroup::Reentrant), 2);
}

#[test]
fn a_failing_setup_stops_every_worker_with_its_error() {
    let mut mt = MultiThreadedExecutor::new(2);
    mt.handle_signals(false);
    let g = mt.group(CallbackGroup::Reentrant);
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    mt.add(g, move |exec| {
        exec.timer(
            "forever",
            Duration::from_millis(1),
            Overrun::Skip,
            move |_| r.store(true, Ordering::SeqCst),
        )?;
        Ok(())
    });
    mt.add(g, |_| {
        Machine::new(MachineSpec::new("broken", "nowhere"))?;
        Ok(())
    });
    let e = mt.spin(Duration::from_millis(10)).unwrap_err().to_string();
    assert!(e.contains("nowhere"), "{e}");
}

#[test]
fn a_latched_publisher_reaches_late_joiners_while_idle() {
    let ctx = ctx("exec-latch");
    let node = ctx.node("map_server").create().unwrap();
    let map = Rc::new(
        node.publisher::<Num>("/exec/map")
            .qos(Qos::latched())
            .create()
            .unwrap(),
    );
    map.publish(&Num { n: 42 }).unwrap();
    let mut exec = Executor::new();
    exec.handle_signals(false);
    exec.latch(map.clone()).unwrap();
    let stop = exec.handle();
    // a late joiner in another context (so the history comes through shared memory)
    let joiner = std::thread::spawn(move || {
        let ctx = self::ctx("exec-latch");
        let node = ctx.node("late_joiner").create().unwrap();
        let sub = node
            .subscriber::<Num>("/exec/map")
            .qos(Qos::latched())
            .create()
            .unwrap();
        let got = sub
            .recv_timeout(Duration::from_secs(5))
            .unwrap()
            .map(|s| s.n);
        stop.stop();
        got
    });
    exec.spin_for(Duration::from_secs(10)).unwrap();
    assert_eq!(
        joiner.join().unwrap(),
        Some(42),
        "history handed over while idle"
    );
}

#[test]
fn a_full_trigger_inbox_is_an_error_and_loses_nothing_queued() {
    let ctx = ctx("exec-inbox");
    let node = ctx.node("inbox").create().unwrap();
    let spec = MachineSpec::new("exec_inbox", "a")
        .state(StateSpec::new("a"))
        .state(StateSpec::new("b"))
        .transition(TransitionSpec::new("flip", &["a"], "b"))
        .transition(TransitionSpec::new("flip", &["b"], "a"));
    let mut exec = Executor::new();
    exec.handle_signals(false);
    let (_, handle) = exec.machine(&node, Machine::new(spec).unwrap()).unwrap();
    let max = nerve::machine::INBOX;
    for _ in 0..max {
        handle.trigger("flip").unwrap();
    }
    let e = handle.trigger("flip").unwrap_err().to_string();
    assert!(
        e.contains("exec_inbox") && e.contains(&max.to_string()),
        "{e}"
    );
    while exec.spin_once(Duration::from_millis(50)).unwrap() > 0 {}
    // an even number of flips: back where it started, every queued trigger taken
    assert_eq!(handle.current(), "a");
    handle.trigger("flip").unwrap();
    exec.spin_once(Duration::from_secs(1)).unwrap();
    assert_eq!(handle.current(), "b", "room again once handled");
}

/// Runs `f` on a thread of its own and fails the test if it has not returned within
/// `limit` (a hang must fail, not stall the test run).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("did not return within {limit:?}"))
}

/// The review's scenario: an executor with a subscriber and a reliable publisher of the
/// same topic in its own context, and a subscriber of the topic in another context (a
/// stand-in for `nerve topic echo` in a second process), publishing from a timer more
/// samples than the queue holds. Nothing may block, nothing may be lost, and the executor
/// must sleep between ticks instead of spinning on samples it cannot take.
#[test]
fn a_reliable_publisher_beside_its_own_subscriber_never_blocks() {
    const SAMPLES: u64 = 300; // depth is 64
    let (local, remote, cpu, wall) = within(Duration::from_secs(60), || {
        let ctx_a = ctx("exec-reliable-mixed");
        // the echo process: another context, draining its queue on its own thread
        let stop = Arc::new(AtomicBool::new(false));
        let echo_stop = stop.clone();
        let echo_thread = std::thread::spawn(move || {
            let ctx_b = ctx("exec-reliable-mixed");
            let node_b = ctx_b.node("echo").create().unwrap();
            let echo = node_b
                .subscriber::<Num>("/exec/mixed")
                .qos(Qos::reliable())
                .create()
                .unwrap();
            let mut got = Vec::new();
            while got.len() < SAMPLES as usize {
                match echo.recv_timeout(Duration::from_millis(100)).unwrap() {
                    Some(s) => got.push(s.n),
                    None if echo_stop.load(Ordering::Relaxed) => break,
                    None => {}
                }
            }
            got
        });
        let node = ctx_a.node("mixed").create().unwrap();
        let publisher = node
            .publisher::<Num>("/exec/mixed")
            .qos(Qos::reliable())
            .create()
            .unwrap();
        let sub = node
            .subscriber::<Num>("/exec/mixed")
            .qos(Qos::reliable())
            .create()
            .unwrap();
        assert!(publisher.wait_for_subscribers(2, Duration::from_secs(5)));
        let mut exec = Executor::new();
        exec.handle_signals(false);
        let seen = Rc::new(RefCell::new(Vec::new()));
        let s2 = seen.clone();
        exec.subscribe(sub, move |s| s2.borrow_mut().push(s.n))
            .unwrap();
        let sent = Rc::new(std::cell::Cell::new(0u64));
        let sent2 = sent.clone();
        let errors = Rc::new(RefCell::new(Vec::new()));
        let errors2 = errors.clone();
        let handle = exec.handle();
        exec.timer("pub", Duration::from_millis(2), Overrun::Skip, move |_| {
            if sent2.get() < SAMPLES {
                match publisher.publish(&Num { n: sent2.get() }) {
                    Ok(()) => sent2.set(sent2.get() + 1),
                    Err(e) => errors2.borrow_mut().push(e.to_string()),
                }
            } else {
                handle.stop();
            }
        })
        .unwrap();
        let cpu0 = thread_cpu();
        let t0 = Instant::now();
        exec.spin_for(Duration::from_secs(20)).unwrap();
        let (cpu, wall) = (thread_cpu() - cpu0, t0.elapsed());
        stop.store(true, Ordering::Relaxed);
        let remote = echo_thread.join().unwrap();
        assert!(errors.borrow().is_empty(), "{:?}", errors.borrow());
        assert_eq!(sent.get(), SAMPLES);
        let local = seen.borrow().clone();
        (local, remote, cpu, wall)
    });
    let all: Vec<u64> = (0..SAMPLES).collect();
    assert_eq!(
        local, all,
        "the executor's subscriber got every sample once"
    );
    assert_eq!(remote, all, "the other context got every sample once");
    // between ticks the executor sleeps: far less CPU than wall time
    assert!(cpu < wall / 2, "executor used {cpu:?} CPU over {wall:?}");
}

#[test]
fn a_failing_worker_stops_the_others_whatever_the_join_order() {
    // the failing setup lands on worker 1 and the endless one on worker 0, which is
    // joined first: the failure must stop it
    let mut mt = MultiThreadedExecutor::new(2);
    mt.handle_signals(false);
    let g = mt.group(CallbackGroup::Reentrant);
    mt.add(g, |_| {
        Machine::new(MachineSpec::new("broken", "nowhere"))?;
        Ok(())
    });
    mt.add(g, |exec| {
        exec.timer("forever", Duration::from_millis(1), Overrun::Skip, |_| {})?;
        Ok(())
    });
    let e = mt.spin(Duration::from_millis(10)).unwrap_err().to_string();
    assert!(e.contains("nowhere"), "{e}");
}

#[test]
fn setups_added_after_a_spin_run_on_the_next_spin() {
    let mut mt = MultiThreadedExecutor::new(2);
    mt.handle_signals(false);
    let g = mt.group(CallbackGroup::MutuallyExclusive);
    let stop = mt.stopper();
    mt.add(g, move |_| {
        stop.stop();
        Ok(())
    });
    mt.spin(Duration::from_millis(10)).unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let g2 = mt.group(CallbackGroup::Reentrant);
    mt.add(g2, move |_| {
        r.store(true, Ordering::SeqCst);
        Ok(())
    });
    // the stop is sticky: the second spin runs its setups and returns
    mt.spin(Duration::from_millis(10)).unwrap();
    assert!(ran.load(Ordering::SeqCst));
}
