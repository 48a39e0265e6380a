//! Actions through a real context: round trips, the result race, cancels, policies, a
//! server that goes away, large goals in place, and executors.

use super::*;
use crate::config::Config;
use crate::context::Context;
use crate::exec::executor::Executor;
use crate::exec::timer::Overrun;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

#[derive(Clone, Copy, nerve_derive::Message)]
#[repr(C)]
#[message(name = "test/WorkGoal", elem = u8)]
struct WorkGoal {
    steps: u64,
}

#[derive(Clone, Copy, nerve_derive::Message)]
#[repr(C)]
#[message(name = "test/WorkFeedback")]
struct WorkFeedback {
    step: u64,
}

#[derive(Clone, Copy, nerve_derive::Message)]
#[repr(C)]
#[message(name = "test/WorkResult", elem = u8)]
struct WorkResult {
    steps: u64,
    goal_bytes: u64,
}

struct Work;
impl Action for Work {
    const TYPE_NAME: &'static str = "test/Work";
    type Goal = WorkGoal;
    type Feedback = WorkFeedback;
    type Result = WorkResult;
}

const S5: Duration = Duration::from_secs(5);

fn ctx() -> Context {
    // the tests share a domain: each uses its own action name
    let dir = std::env::temp_dir().join("nerve-tests/");
    Context::new(Config::default().domain(612).unwrap().state_dir(dir)).unwrap()
}

/// Runs a server of `/name` on its own thread: `step` is called for every executing goal
/// each loop round until `stop`; returns when stopped. `ready` fires once it serves.
fn serve<F>(
    ctx: &Context,
    name: &'static str,
    policy: GoalPolicy,
    step: F,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>)
where
    F: Fn(&GoalHandle<Work>) + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let ctx = ctx.clone();
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let node = ctx.node(&format!("srv_{}", &name[1..])).create().unwrap();
        let server = ActionServer::<Work>::builder(&node, name)
            .policy(policy)
            .create()
            .unwrap();
        tx.send(()).unwrap();
        while !stop2.load(Ordering::Relaxed) {
            server.wait(Duration::from_millis(5)).unwrap();
            server.handle_pending(|_| Ok(())).unwrap();
            for g in server.goals() {
                step(&g);
            }
        }
    });
    rx.recv().unwrap();
    (stop, t)
}

/// Ends a goal canceled with an empty result.
fn end_canceled(g: &GoalHandle<Work>) {
    g.canceled(&WorkResult {
        steps: 0,
        goal_bytes: 0,
    })
    .unwrap();
}

/// Succeeds after `steps` feedback, or ends canceled when asked to.
fn count_step(g: &GoalHandle<Work>) {
    if g.is_canceling() {
        end_canceled(g);
        return;
    }
    let steps = g.goal().steps;
    for step in 1..=steps {
        g.feedback(&WorkFeedback { step }).unwrap();
    }
    let n = g.elems().len();
    let sum: u8 = g.elems().iter().fold(0u8, |a, b| a.wrapping_add(*b));
    g.end_with(GoalState::Succeeded, n, |r, e| {
        *r = WorkResult {
            steps,
            goal_bytes: n as u64,
        };
        e.fill(sum);
    })
    .unwrap();
}

#[test]
fn feedback_reaches_only_its_own_client_and_results_arrive() {
    let ctx = ctx();
    let (stop, t) = serve(
        &ctx,
        "/act_own",
        GoalPolicy::Parallel { max: 4 },
        count_step,
    );
    let node = ctx.node("act_own_c").create().unwrap();
    let a = ActionClient::<Work>::create(&node, "/act_own").unwrap();
    let b = ActionClient::<Work>::create(&node, "/act_own").unwrap();
    assert!(a.wait_for_server(S5));
    let ga = a
        .send_goal_with(3, |g, e| {
            g.steps = 3;
            e.copy_from_slice(&[1, 2, 3]);
        })
        .unwrap();
    let gb = b.send_goal_with(0, |g, _| g.steps = 5).unwrap();
    let ra = ga.result(S5).unwrap();
    let rb = gb.result(S5).unwrap();
    assert_eq!(
        (ra.state(), ra.steps, ra.goal_bytes),
        (GoalState::Succeeded, 3, 3)
    );
    assert_eq!(ra.elems(), &[6, 6, 6]);
    assert_eq!((rb.state(), rb.steps), (GoalState::Succeeded, 5));
    let fa: Vec<u64> = std::iter::from_fn(|| ga.try_feedback())
        .map(|f| f.step)
        .collect();
    let fb: Vec<u64> = std::iter::from_fn(|| gb.try_feedback())
        .map(|f| f.step)
        .collect();
    assert_eq!(fa, [1, 2, 3]);
    assert_eq!(fb, [1, 2, 3, 4, 5]);
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

#[test]
fn a_result_that_comes_before_anyone_asks_is_never_lost() {
    let ctx = ctx();
    let (stop, t) = serve(&ctx, "/act_race", GoalPolicy::Queue { max: 8 }, count_step);
    let node = ctx.node("act_race_c").create().unwrap();
    let c = ActionClient::<Work>::create(&node, "/act_race").unwrap();
    assert!(c.wait_for_server(S5));
    for round in 0..50u64 {
        let g = c.send_goal_with(0, |g, _| g.steps = round % 3).unwrap();
        if round % 10 == 0 {
            // the goal ends long before the client looks
            std::thread::sleep(Duration::from_millis(20));
        }
        let r = g.result(S5).unwrap();
        assert_eq!((r.state(), r.steps), (GoalState::Succeeded, round % 3));
    }
    // and another process (here: another client) can still ask for a finished result
    let g = c.send_goal_with(0, |g, _| g.steps = 7).unwrap();
    let id = g.id();
    g.result(S5).unwrap();
    drop(g);
    let other = ActionClient::<Work>::create(&node, "/act_race").unwrap();
    let r = other.fetch_result(id).unwrap().expect("kept");
    assert_eq!((r.state(), r.steps), (GoalState::Succeeded, 7));
    let unknown = GoalId { client: 42, seq: 1 };
    assert!(matches!(
        other.fetch_result(unknown),
        Err(ActionError::UnknownGoal { .. })
    ));
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

#[test]
fn cancel_one_goal_among_several() {
    let ctx = ctx();
    // goals run until canceled, or until step 1000 of a goal that asks for 1
    let (stop, t) = serve(&ctx, "/act_cancel", GoalPolicy::Parallel { max: 3 }, |g| {
        if g.is_canceling() {
            end_canceled(g);
        } else if g.goal().steps == 1 {
            g.succeed(&WorkResult {
                steps: 1,
                goal_bytes: 0,
            })
            .unwrap();
        }
    });
    let node = ctx.node("act_cancel_c").create().unwrap();
    let c = ActionClient::<Work>::create(&node, "/act_cancel").unwrap();
    assert!(c.wait_for_server(S5));
    let g1 = c.send_goal_with(0, |g, _| g.steps = 0).unwrap();
    let g2 = c.send_goal_with(0, |g, _| g.steps = 0).unwrap();
    let g3 = c.send_goal_with(0, |g, _| g.steps = 0).unwrap();
    let s = g2.cancel().unwrap();
    assert!(
        matches!(s, GoalState::Canceling | GoalState::Canceled),
        "{s}"
    );
    assert_eq!(g2.result(S5).unwrap().state(), GoalState::Canceled);
    // the others still run
    assert!(g1.try_result().unwrap().is_none() && g3.try_result().unwrap().is_none());
    assert_eq!(g1.cancel().unwrap(), GoalState::Canceling);
    assert_eq!(g1.result(S5).unwrap().state(), GoalState::Canceled);
    assert_eq!(g3.cancel().unwrap(), GoalState::Canceling);
    assert_eq!(g3.result(S5).unwrap().state(), GoalState::Canceled);
    // a cancel after the end reports how it ended
    assert_eq!(c.cancel(g1.id()).unwrap(), GoalState::Canceled);
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

#[test]
fn policies_reject_queue_and_preempt() {
    let ctx = ctx();
    let run_until_canceled = |g: &GoalHandle<Work>| {
        if g.is_canceling() {
            end_canceled(g);
        }
    };
    let node = ctx.node("act_policy_c").create().unwrap();

    let (stop, t) = serve(
        &ctx,
        "/act_reject",
        GoalPolicy::RejectNew,
        run_until_canceled,
    );
    let c = ActionClient::<Work>::create(&node, "/act_reject").unwrap();
    assert!(c.wait_for_server(S5));
    let first = c.send_goal_with(0, |_, _| {}).unwrap();
    let e = c.send_goal_with(0, |_, _| {}).err().unwrap();
    assert!(matches!(e, ActionError::Rejected { .. }), "{e}");
    assert!(e.to_string().contains("reject new"), "{e}");
    first.cancel().unwrap();
    assert_eq!(first.result(S5).unwrap().state(), GoalState::Canceled);
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();

    let (stop, t) = serve(
        &ctx,
        "/act_queue",
        GoalPolicy::Queue { max: 1 },
        run_until_canceled,
    );
    let c = ActionClient::<Work>::create(&node, "/act_queue").unwrap();
    assert!(c.wait_for_server(S5));
    let first = c.send_goal_with(0, |_, _| {}).unwrap();
    let queued = c.send_goal_with(0, |_, _| {}).unwrap();
    let e = c.send_goal_with(0, |_, _| {}).err().unwrap();
    assert!(e.to_string().contains("queue is full"), "{e}");
    // a queued goal cancels at once; then the first
    assert_eq!(queued.cancel().unwrap(), GoalState::Canceled);
    assert_eq!(queued.result(S5).unwrap().state(), GoalState::Canceled);
    first.cancel().unwrap();
    assert_eq!(first.result(S5).unwrap().state(), GoalState::Canceled);
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();

    let (stop, t) = serve(
        &ctx,
        "/act_preempt",
        GoalPolicy::Preempt,
        run_until_canceled,
    );
    let c = ActionClient::<Work>::create(&node, "/act_preempt").unwrap();
    assert!(c.wait_for_server(S5));
    let first = c.send_goal_with(0, |_, _| {}).unwrap();
    let second = c.send_goal_with(0, |_, _| {}).unwrap();
    assert_eq!(first.result(S5).unwrap().state(), GoalState::Canceled);
    second.cancel().unwrap();
    assert_eq!(second.result(S5).unwrap().state(), GoalState::Canceled);
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

#[test]
fn a_server_that_goes_away_mid_goal_is_a_typed_error() {
    let ctx = ctx();
    // the server accepts, then its thread ends (its ports close) without a result
    let (stop, t) = serve(&ctx, "/act_gone", GoalPolicy::Queue { max: 1 }, |_| {});
    let node = ctx.node("act_gone_c").create().unwrap();
    let c = ActionClient::<Work>::create(&node, "/act_gone").unwrap();
    assert!(c.wait_for_server(S5));
    let g = c.send_goal_with(0, |_, _| {}).unwrap();
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    // ServerGone, not the Timeout the 30 s would end in: the liveness check noticed
    let e = g.result(Duration::from_secs(30)).err().unwrap();
    assert!(matches!(e, ActionError::ServerGone { .. }), "{e}");
}

#[test]
fn executors_run_both_sides() {
    let ctx = ctx();
    let ctx2 = ctx.clone();
    let (tx, rx) = mpsc::channel();
    let server_thread = std::thread::spawn(move || {
        let node = ctx2.node("act_exec_s").create().unwrap();
        let server = ActionServer::<Work>::builder(&node, "/act_exec")
            .create()
            .unwrap();
        let mut exec = Executor::new();
        exec.action_server(
            &server,
            |g| match g.goal().steps {
                99 => Err("99 steps are too many".into()),
                _ => Ok(()),
            },
            |_| {},
        )
        .unwrap();
        let s = server.clone();
        // one step per tick: feedback, and the result after `steps` ticks
        exec.timer("step", Duration::from_millis(1), Overrun::Skip, move |_| {
            for g in s.goals() {
                let done = g.goal().steps;
                g.feedback(&WorkFeedback { step: done }).unwrap();
                g.succeed(&WorkResult {
                    steps: done,
                    goal_bytes: 0,
                })
                .unwrap();
            }
        })
        .unwrap();
        let h = exec.handle();
        tx.send(h).unwrap();
        exec.spin().unwrap();
    });
    let handle = rx.recv().unwrap();

    let node = ctx.node("act_exec_c").create().unwrap();
    let client = ActionClient::<Work>::create(&node, "/act_exec").unwrap();
    assert!(client.wait_for_server(S5));
    let mut exec = Executor::new();
    let results = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let feedback = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let (r2, f2) = (results.clone(), feedback.clone());
    exec.action_client(
        &client,
        move |_| f2.set(f2.get() + 1),
        move |_, r| r2.borrow_mut().push(r.map(|r| r.steps)),
    )
    .unwrap();
    let e = client.send_goal_with(0, |g, _| g.steps = 99).err().unwrap();
    assert!(e.to_string().contains("too many"), "{e}");
    // the executor follows the goals: their handles may go at once
    for n in 1..=3 {
        client.send_goal_with(0, |g, _| g.steps = n).unwrap();
    }
    let deadline = std::time::Instant::now() + S5;
    // feedback and results travel on topics of their own: a result may be dispatched
    // before the feedback sent ahead of it, so wait for both
    while (results.borrow().len() < 3 || feedback.get() < 3) && std::time::Instant::now() < deadline
    {
        exec.spin_once(Duration::from_millis(50)).unwrap();
    }
    let mut got: Vec<u64> = results
        .borrow()
        .iter()
        .map(|r| *r.as_ref().unwrap())
        .collect();
    got.sort();
    assert_eq!(got, [1, 2, 3]);
    assert_eq!(feedback.get(), 3);
    handle.stop();
    server_thread.join().unwrap();
}

#[test]
fn one_client_cannot_hold_more_goals_than_its_calls_in_flight_and_nested_ends_end_once() {
    let ctx = ctx();
    // goals run until canceled; a goal of 99 steps ends itself from inside its own fill
    let (stop, t) = serve(&ctx, "/act_cap", GoalPolicy::Parallel { max: 32 }, |g| {
        if g.is_canceling() {
            end_canceled(g);
        } else if g.goal().steps == 99 {
            let inner = g.clone();
            let outer = g.end_with(GoalState::Succeeded, 0, move |r, _| {
                r.steps = 1;
                inner
                    .succeed(&WorkResult {
                        steps: 2,
                        goal_bytes: 0,
                    })
                    .unwrap();
            });
            assert!(matches!(outer, Err(ActionError::Ended { .. })), "{outer:?}");
        }
    });
    let node = ctx.node("act_cap_c").create().unwrap();
    let c = ActionClient::<Work>::create(&node, "/act_cap").unwrap();
    assert!(c.wait_for_server(S5));
    // each live goal keeps its request: one client gets max_in_flight (8) - 1 of them
    let live: Vec<_> = (0..7)
        .map(|_| c.send_goal_with(0, |_, _| {}).unwrap())
        .collect();
    let e = c.send_goal_with(0, |_, _| {}).err().unwrap();
    assert!(e.to_string().contains("7 goals live"), "{e}");
    // the server still serves: end one, and the next goal is taken
    live[0].cancel().unwrap();
    assert_eq!(live[0].result(S5).unwrap().state(), GoalState::Canceled);
    let nested = c.send_goal_with(0, |g, _| g.steps = 99).unwrap();
    let r = nested.result(S5).unwrap();
    assert_eq!(
        (r.state(), r.steps),
        (GoalState::Succeeded, 2),
        "the inner end wins"
    );
    for g in &live[1..] {
        g.cancel().unwrap();
        assert_eq!(g.result(S5).unwrap().state(), GoalState::Canceled);
    }
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

/// Sends a goal of two steps to `count_step` and waits until its result is queued at the
/// client (its feedback, sent before it, is queued too).
fn goal_ended_and_queued(client: &ActionClient<Work>) {
    client.send_goal_with(0, |g, _| g.steps = 2).unwrap();
    let deadline = std::time::Instant::now() + S5;
    while !client.inner.result_sub.receiver().has_samples() {
        assert!(std::time::Instant::now() < deadline, "no result came");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn feedback_moved_into_the_inbox_by_a_pump_for_results_still_reaches_the_executor() {
    let ctx = ctx();
    let (stop, t) = serve(
        &ctx,
        "/act_pumped",
        GoalPolicy::Queue { max: 4 },
        count_step,
    );
    let node = ctx.node("act_pumped_c").create().unwrap();
    let client = ActionClient::<Work>::create(&node, "/act_pumped").unwrap();
    assert!(client.wait_for_server(S5));
    let mut exec = Executor::new();
    let feedback = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let results = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let (f2, r2) = (feedback.clone(), results.clone());
    exec.action_client(
        &client,
        move |_| f2.set(f2.get() + 1),
        move |_, _| r2.set(r2.get() + 1),
    )
    .unwrap();
    goal_ended_and_queued(&client);
    // what the executor's result callback does when the feedback arrives between its
    // look at the feedback queue and its look at the result queue
    client.pump().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while (results.get() < 1 || feedback.get() < 2) && std::time::Instant::now() < deadline {
        exec.spin_once(Duration::from_millis(20)).unwrap();
    }
    assert_eq!((feedback.get(), results.get()), (2, 1));
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

#[test]
fn a_result_fetched_from_the_store_keeps_the_feedback_sent_before_it() {
    let ctx = ctx();
    let (stop, t) = serve(
        &ctx,
        "/act_fetched",
        GoalPolicy::Queue { max: 4 },
        count_step,
    );
    let node = ctx.node("act_fetched_c").create().unwrap();
    let client = ActionClient::<Work>::create(&node, "/act_fetched").unwrap();
    assert!(client.wait_for_server(S5));
    client.inner.driven.set(true);
    goal_ended_and_queued(&client);
    // the push is not taken in time: the executor asks the result store
    std::thread::sleep(super::client::FETCH_AFTER + Duration::from_millis(50));
    let fetched = client.fetch_due();
    assert_eq!(fetched.len(), 1);
    assert!(fetched[0].1.is_ok());
    assert_eq!(client.poll_feedback().unwrap().len(), 2);
    // the pushed result of a goal delivered from the store is not delivered again
    assert!(client.poll_results().unwrap().is_empty());
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}
