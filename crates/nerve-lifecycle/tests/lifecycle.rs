//! Managed nodes through a real context: transitions, callbacks, error processing, gated
//! publishers, events, and the services driven from another thread.

use nerve::{Config, Context, Executor};
use nerve_lifecycle::*;
use nerve_msgs::lifecycle::TransitionEvent;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn ctx() -> Context {
    // the tests share a domain: each names its own node
    let dir = std::env::temp_dir().join("nerve-tests/");
    Context::new(Config::default().domain(623).unwrap().state_dir(dir)).unwrap()
}

/// Every event waiting on `sub` as `(transition label, start, goal)`.
fn drain(sub: &nerve::Subscriber<TransitionEvent>) -> Vec<(String, u8, u8)> {
    let mut out = Vec::new();
    while let Some(e) = sub.try_recv().unwrap() {
        out.push((
            e.transition.label.as_str().into_owned(),
            e.start_state.id,
            e.goal_state.id,
        ));
    }
    out
}

#[test]
fn a_full_cycle_runs_the_callbacks_gates_publishers_and_publishes_every_step() {
    let ctx = ctx();
    let node = ctx.node("lc_cycle").create().unwrap();
    let managed = ManagedNode::create(&node).unwrap();
    let events = node
        .subscriber::<TransitionEvent>("/lc_cycle/transition_event")
        .qos(events_qos())
        .create()
        .unwrap();
    let calls = Rc::new(RefCell::new(Vec::new()));
    for (hook, name) in [
        (Hook::Configure, "configure"),
        (Hook::Activate, "activate"),
        (Hook::Deactivate, "deactivate"),
        (Hook::Cleanup, "cleanup"),
        (Hook::Shutdown, "shutdown"),
    ] {
        let calls = calls.clone();
        let f = move |from: State| {
            calls.borrow_mut().push(format!("{name} from {from}"));
            CallbackReturn::Success
        };
        match hook {
            Hook::Configure => managed.on_configure(f),
            Hook::Activate => managed.on_activate(f),
            Hook::Deactivate => managed.on_deactivate(f),
            Hook::Cleanup => managed.on_cleanup(f),
            _ => managed.on_shutdown(f),
        }
    }
    let out = managed
        .publisher::<nerve_msgs::CmdVel>("/lc_cycle/out", nerve::Qos::default())
        .unwrap();
    let sub = node
        .subscriber::<nerve_msgs::CmdVel>("/lc_cycle/out")
        .create()
        .unwrap();
    assert_eq!(managed.state(), State::Unconfigured);
    assert!(!out.publish(&Default::default()).unwrap());
    assert_eq!(managed.trigger(Transition::Configure), Ok(State::Inactive));
    assert!(!out.publish(&Default::default()).unwrap());
    assert_eq!(managed.trigger_label("activate"), Ok(State::Active));
    let cmd = nerve_msgs::CmdVel {
        linear: 1.5,
        ..Default::default()
    };
    assert!(out.publish(&cmd).unwrap());
    assert_eq!(managed.trigger_label("deactivate"), Ok(State::Inactive));
    assert!(!out.publish(&cmd).unwrap());
    assert_eq!(out.dropped(), 3);
    // only the sample sent while active arrived
    assert_eq!(sub.try_recv().unwrap().map(|s| s.linear), Some(1.5));
    assert!(sub.try_recv().unwrap().is_none());
    assert_eq!(managed.trigger_label("cleanup"), Ok(State::Unconfigured));
    assert_eq!(managed.trigger_label("shutdown"), Ok(State::Finalized));
    assert_eq!(
        *calls.borrow(),
        [
            "configure from unconfigured",
            "activate from inactive",
            "deactivate from active",
            "cleanup from inactive",
            "shutdown from unconfigured"
        ]
    );
    let got = drain(&events);
    let want: Vec<(String, u8, u8)> = [
        ("configure", 1, 10),
        ("transition_success", 10, 2),
        ("activate", 2, 13),
        ("transition_success", 13, 3),
        ("deactivate", 3, 14),
        ("transition_success", 14, 2),
        ("cleanup", 2, 11),
        ("transition_success", 11, 1),
        ("shutdown", 1, 12),
        ("transition_success", 12, 4),
    ]
    .iter()
    .map(|(l, a, b)| (l.to_string(), *a, *b))
    .collect();
    assert_eq!(got, want);
    assert_eq!(managed.events_lost(), 0);
    // finalized: nothing leaves it
    let e = managed.trigger_label("configure").unwrap_err();
    assert_eq!(
        e.to_string(),
        "managed node /lc_cycle: transition configure is not valid from state finalized (valid: none)"
    );
}

#[test]
fn failure_returns_error_processes_and_a_panic_counts_as_error() {
    let ctx = ctx();
    let node = ctx.node("lc_fail").create().unwrap();
    let managed = ManagedNode::create(&node).unwrap();
    let events = node
        .subscriber::<TransitionEvent>("/lc_fail/transition_event")
        .qos(events_qos())
        .create()
        .unwrap();
    let answer = Rc::new(RefCell::new(CallbackReturn::Failure));
    let a = answer.clone();
    managed.on_configure(move |_| *a.borrow());
    let errors = Rc::new(RefCell::new(Vec::new()));
    let e2 = errors.clone();
    let on_error = Rc::new(RefCell::new(CallbackReturn::Success));
    let oe = on_error.clone();
    managed.on_error(move |from| {
        e2.borrow_mut().push(from);
        *oe.borrow()
    });

    // failure: back to unconfigured, no error processing
    let e = managed.trigger(Transition::Configure).unwrap_err();
    assert_eq!(
        e,
        TransitionError::Failed {
            node: "/lc_fail".into(),
            transition: Transition::Configure,
            result: CallbackReturn::Failure,
            state: State::Unconfigured,
        }
    );
    assert!(errors.borrow().is_empty());

    // error: error processing, on_error succeeds -> unconfigured
    *answer.borrow_mut() = CallbackReturn::Error;
    let e = managed.trigger(Transition::Configure).unwrap_err();
    assert!(matches!(
        e,
        TransitionError::Failed {
            result: CallbackReturn::Error,
            state: State::Unconfigured,
            ..
        }
    ));
    assert_eq!(*errors.borrow(), [State::Configuring]);

    // a success, then an activate that panics and an on_error that fails: finalized
    *answer.borrow_mut() = CallbackReturn::Success;
    managed.trigger(Transition::Configure).unwrap();
    managed.on_activate(|_| panic!("the camera caught fire"));
    *on_error.borrow_mut() = CallbackReturn::Failure;
    let e = managed.trigger(Transition::Activate).unwrap_err();
    assert!(matches!(
        e,
        TransitionError::Failed {
            result: CallbackReturn::Error,
            state: State::Finalized,
            ..
        }
    ));
    assert_eq!(managed.state(), State::Finalized);
    let got = drain(&events);
    let labels: Vec<(&str, u8, u8)> = got.iter().map(|(l, a, b)| (l.as_str(), *a, *b)).collect();
    assert_eq!(
        labels,
        [
            ("configure", 1, 10),
            ("transition_failure", 10, 1),
            ("configure", 1, 10),
            ("transition_error", 10, 15),
            ("transition_success", 15, 1),
            ("configure", 1, 10),
            ("transition_success", 10, 2),
            ("activate", 2, 13),
            ("transition_error", 13, 15),
            ("transition_failure", 15, 4),
        ]
    );
}

#[test]
fn invalid_and_concurrent_transitions_are_refused_by_name() {
    let ctx = ctx();
    let node = ctx.node("lc_refuse").create().unwrap();
    let managed = ManagedNode::create(&node).unwrap();
    let e = managed.trigger(Transition::Activate).unwrap_err();
    assert_eq!(
        e.to_string(),
        "managed node /lc_refuse: transition activate is not valid from state unconfigured \
         (valid: configure, shutdown)"
    );
    // a transition asked for from inside a callback is refused, the first goes on
    let seen = Rc::new(RefCell::new(None));
    let s2 = seen.clone();
    let me = managed.clone();
    managed.on_configure(move |_| {
        *s2.borrow_mut() = Some(me.trigger(Transition::Activate));
        CallbackReturn::Success
    });
    assert_eq!(managed.trigger(Transition::Configure), Ok(State::Inactive));
    let inner = seen.borrow_mut().take().unwrap().unwrap_err();
    assert_eq!(
        inner,
        TransitionError::Busy {
            node: "/lc_refuse".into(),
            state: State::Configuring,
            transition: Transition::Activate,
            running: Transition::Configure,
        }
    );
    assert!(inner.to_string().contains("configure is in progress"));
    // (the callback above holds a clone: break the cycle for the test's sake)
    managed.on_configure(|_| CallbackReturn::Success);
}

#[test]
fn another_thread_drives_a_node_served_on_an_executor() {
    let ctx = ctx();
    let node = ctx.node("lc_remote").create().unwrap();
    let managed = ManagedNode::create(&node).unwrap();
    managed.on_activate(|_| CallbackReturn::Failure);
    let mut exec = Executor::new();
    managed.serve_on(&mut exec).unwrap();
    assert!(matches!(
        managed.serve_on(&mut exec),
        Err(LifecycleError::AlreadyServed { .. })
    ));
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    let ctx2 = ctx.clone();
    let caller = std::thread::spawn(move || {
        let node = ctx2.node("lc_remote_caller").create().unwrap();
        let c = LifecycleClient::create(&node, "/lc_remote")
            .unwrap()
            .timeout(Duration::from_secs(10));
        assert!(c.wait_for_node(Duration::from_secs(10)));
        let list = list_managed(&node).unwrap();
        assert!(list.contains(&"/lc_remote".to_string()), "{list:?}");
        let mut out = vec![format!("{}", c.get_state().unwrap())];
        let t = c.available_transitions().unwrap();
        out.push(format!("{t:?}"));
        out.push(c.change_state("activate").unwrap_err().to_string());
        out.push(format!("{:?}", c.change_state("configure")));
        out.push(c.change_state("activate").unwrap_err().to_string());
        out.push(format!("{:?}", c.change_state("shutdown")));
        out.push(check_label("explode").unwrap_err().to_string());
        d2.store(true, Ordering::Release);
        out
    });
    while !done.load(Ordering::Acquire) {
        exec.spin_once(Duration::from_millis(50)).unwrap();
    }
    let out = caller.join().unwrap();
    assert_eq!(
        out,
        [
            "unconfigured".to_string(),
            "[(\"configure\", 1, Inactive), (\"shutdown\", 5, Finalized)]".into(),
            "managed node /lc_remote: transition activate is not valid from state unconfigured \
             (valid: configure, shutdown)"
                .into(),
            "Ok(Inactive)".into(),
            "managed node /lc_remote: activate failed: now inactive".into(),
            "Ok(Finalized)".into(),
            "unknown transition \"explode\" (one of: configure, activate, deactivate, cleanup, \
             shutdown)"
                .into(),
        ]
    );
}

#[test]
fn a_wait_set_on_the_waitables_wakes_for_requests_and_the_graph_has_every_transition() {
    use nerve_msgs::lifecycle::GetAvailableTransitions;
    use nerve_msgs::srv::Empty;
    let ctx = ctx();
    let node = ctx.node("lc_waitables").create().unwrap();
    let managed = ManagedNode::create(&node).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    let ctx2 = ctx.clone();
    let caller = std::thread::spawn(move || {
        let node = ctx2.node("lc_waitables_caller").create().unwrap();
        let c = LifecycleClient::create(&node, "/lc_waitables")
            .unwrap()
            .timeout(Duration::from_secs(10));
        assert!(c.wait_for_node(Duration::from_secs(10)));
        let graph = node
            .client::<GetAvailableTransitions>("/lc_waitables/get_transition_graph")
            .create()
            .unwrap();
        let reply = graph.call(&Empty {}, Duration::from_secs(10)).unwrap();
        let all: Vec<(u8, u8, u8)> = reply
            .elems()
            .iter()
            .map(|d| (d.transition.id, d.start_state.id, d.goal_state.id))
            .collect();
        let state = c.change_state("configure").unwrap();
        // the graph does not depend on the state
        let again = graph.call(&Empty {}, Duration::from_secs(10)).unwrap();
        assert_eq!(again.elems().len(), all.len());
        d2.store(true, Ordering::Release);
        (all, state)
    });
    let mut answered = 0;
    while !done.load(Ordering::Acquire) {
        {
            let w = managed.waitables().unwrap();
            let mut set = nerve::WaitSet::new();
            for x in w.list() {
                set.add(x).unwrap();
            }
            // a hang guard: the caller's requests end each wait
            set.wait(Duration::from_millis(200)).unwrap();
        }
        answered += managed.handle_pending().unwrap();
    }
    let (all, state) = caller.join().unwrap();
    assert_eq!(state, State::Inactive);
    assert!(answered >= 4, "{answered}");
    assert_eq!(all.len(), 25);
    assert_eq!(all.len(), transition_graph().len());
    // the public transitions first, then the internal ones, error processing's last
    assert_eq!(all[0], (1, 1, 2)); // configure: unconfigured -> inactive
    assert!(all.contains(&(32, 13, 15))); // on_activate_error: activating -> errorprocessing
    assert_eq!(all[24], (62, 15, 4)); // on_error_error: errorprocessing -> finalized
                                      // handed to an executor, the services have no waitables here any more
    let mut exec = Executor::new();
    managed.serve_on(&mut exec).unwrap();
    assert!(matches!(
        managed.waitables(),
        Err(LifecycleError::AlreadyServed { .. })
    ));
}
