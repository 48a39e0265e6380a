//! The tick scheduler: priorities, misses counted when provoked, every miss policy, the
//! watchdog, bad settings, and the report published for `nerve node list`.

use nerve::scheduler::{stats_qos, Hang, MissPolicy, NodeConfig, Scheduler, STATS_TOPIC};
use nerve::{Config, Context, SchedulerError, SchedulerReport, Serde};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn busy(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

fn node<'a>(r: &'a SchedulerReport, name: &str) -> &'a nerve::scheduler::NodeReport {
    r.nodes
        .iter()
        .find(|n| n.name == name)
        .expect("node in report")
}

#[test]
fn released_together_higher_priority_ticks_first() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut s = Scheduler::new("prio");
    for (name, prio) in [("low", 1), ("high", 9)] {
        let log = log.clone();
        s.add(NodeConfig::new(name, 100.0).priority(prio), move |t| {
            log.borrow_mut().push((t.count, name, t.release_ns))
        })
        .unwrap();
    }
    let r = s.run_for(Duration::from_millis(100)).unwrap();
    let log = log.borrow();
    assert!(log.len() >= 10, "{} ticks", log.len());
    for pair in log.chunks(2).filter(|c| c.len() == 2) {
        assert_eq!(pair[0].0, pair[1].0, "same tick number");
        assert_eq!(pair[0].2, pair[1].2, "same release");
        assert_eq!((pair[0].1, pair[1].1), ("high", "low"));
    }
    for w in log
        .iter()
        .filter(|e| e.1 == "high")
        .collect::<Vec<_>>()
        .windows(2)
    {
        assert_eq!(
            (w[1].2 - w[0].2) % 10_000_000,
            0,
            "releases on the 10 ms grid"
        );
    }
    assert_eq!(node(&r, "high").ticks, node(&r, "low").ticks);
    assert_eq!(r.ticks, log.len() as u64);
}

#[test]
fn deadlines_count_from_release_and_budgets_from_start() {
    let mut s = Scheduler::new("misses");
    // the hog overruns its budget once; the victim runs right after it, so it misses its
    // 1 ms deadline although its own execution stays within its (generous) budget
    s.add(
        NodeConfig::new("hog", 20.0)
            .priority(5)
            .budget(Duration::from_micros(500)),
        |t| {
            if t.count == 3 {
                busy(Duration::from_millis(3));
            }
        },
    )
    .unwrap();
    s.add(
        NodeConfig::new("victim", 20.0)
            .deadline(Duration::from_millis(1))
            .budget(Duration::from_millis(20)),
        |_| {},
    )
    .unwrap();
    let r = s.run_for(Duration::from_millis(300)).unwrap();
    let (hog, victim) = (node(&r, "hog"), node(&r, "victim"));
    assert!(hog.budget_overruns >= 1, "{hog:?}");
    assert_eq!(
        hog.deadline_misses, 0,
        "3 ms is within its 50 ms deadline: {hog:?}"
    );
    assert!(victim.deadline_misses >= 1, "{victim:?}");
    assert_eq!(
        victim.budget_overruns, 0,
        "the miss is waiting, not running: {victim:?}"
    );
}

#[test]
fn skip_drops_releases_and_safe_stop_stops_the_node() {
    let mut s = Scheduler::new("policies");
    s.add(
        // 20 ms periods and 5 ms budgets, far above what a preempted empty tick takes on a
        // loaded machine (with 5 ms periods and 1 ms budgets a tick that was only
        // preempted missed in a loaded CI run): only the chosen ticks overrun, and the
        // skipper's 8 ms leave the other node within its period
        NodeConfig::new("skipper", 50.0)
            .budget(Duration::from_millis(5))
            .on_miss(MissPolicy::Skip),
        |t| {
            if t.count == 2 {
                busy(Duration::from_millis(8));
            }
        },
    )
    .unwrap();
    let stops = Rc::new(RefCell::new(Vec::new()));
    let st = stops.clone();
    s.on_safe_stop(move |m| st.borrow_mut().push(m.clone()));
    s.add(
        NodeConfig::new("fragile", 50.0)
            .budget(Duration::from_millis(5))
            .on_miss(MissPolicy::SafeStop),
        |t| {
            if t.count == 3 {
                busy(Duration::from_millis(8));
            }
        },
    )
    .unwrap();
    let r = s.run_for(Duration::from_millis(300)).unwrap();
    let skipper = node(&r, "skipper");
    assert!(skipper.skipped >= 1, "{skipper:?}");
    assert!(!skipper.stopped && skipper.ticks > 5);
    let fragile = node(&r, "fragile");
    assert!(fragile.stopped);
    assert_eq!(fragile.ticks, 3, "no tick after the safe stop");
    let stops = stops.borrow();
    assert_eq!(stops.len(), 1);
    assert_eq!((stops[0].node.as_str(), stops[0].tick), ("fragile", 3));
    assert!(stops[0].budget_overrun);
}

#[test]
fn the_watchdog_fires_when_a_node_hangs() {
    let hangs: Arc<Mutex<Vec<Hang>>> = Arc::default();
    let h = hangs.clone();
    let mut s = Scheduler::new("watched");
    s.watchdog(Duration::from_millis(40), move |hang| {
        h.lock().unwrap().push(hang.clone())
    });
    s.add(NodeConfig::new("stuck", 100.0), |t| {
        if t.count == 3 {
            std::thread::sleep(Duration::from_millis(300));
        }
    })
    .unwrap();
    let r = s.run_for(Duration::from_millis(400)).unwrap();
    let hangs = hangs.lock().unwrap();
    assert!(!hangs.is_empty(), "the hang was noticed");
    assert_eq!(hangs[0].node, "stuck");
    assert!(hangs[0].in_tick, "caught inside its callback");
    assert!(hangs[0].silent_ns > 40_000_000);
    // once per silence, not once per check (another silence needs another stall)
    assert!(hangs.len() < 4, "{hangs:?}");
    assert_eq!(r.watchdog_fired, hangs.len() as u64);
}

#[test]
fn a_healthy_node_never_trips_the_watchdog() {
    let fired = Arc::new(Mutex::new(0));
    let f = fired.clone();
    let mut s = Scheduler::new("healthy");
    s.watchdog(Duration::from_millis(100), move |_| *f.lock().unwrap() += 1);
    // slower than the bound: judged against two periods, not the bound
    s.add(NodeConfig::new("slow", 4.0), |_| {}).unwrap();
    s.run_for(Duration::from_millis(600)).unwrap();
    assert_eq!(*fired.lock().unwrap(), 0);
}

#[test]
fn bad_settings_are_refused_with_the_reason() {
    let mut s = Scheduler::new("bad");
    for (cfg, why) in [
        (NodeConfig::new("zero", 0.0), "rate"),
        (NodeConfig::new("nan", f64::NAN), "rate"),
        (NodeConfig::new("fast", 1e7), "rate"),
        (NodeConfig::new("", 10.0), "names"),
        (
            NodeConfig::new("d", 10.0).deadline(Duration::ZERO),
            "deadline",
        ),
    ] {
        let e = s.add(cfg, |_| {}).err().expect("refused").to_string();
        assert!(e.contains(why), "{e}");
    }
    assert!(matches!(
        s.run_for(Duration::from_millis(1)),
        Err(SchedulerError::NoNodes)
    ));
    s.add(NodeConfig::new("a", 10.0), |_| {}).unwrap();
    let e = s
        .add(NodeConfig::new("a", 10.0), |_| {})
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("already"), "{e}");
}

#[test]
fn the_report_is_published_for_node_list() {
    let dir = std::env::temp_dir().join("nerve-tests/");
    let ctx = Context::new(Config::default().domain(778).unwrap().state_dir(dir)).unwrap();
    let n = ctx.node("sched_stats").create().unwrap();
    let sub = n
        .subscriber::<Serde<SchedulerReport>>(STATS_TOPIC)
        .qos(stats_qos())
        .create()
        .unwrap();
    let mut s = Scheduler::new("published");
    s.publish_stats(&n).unwrap();
    s.add(NodeConfig::new("imu", 500.0), |_| {}).unwrap();
    let r = s.run_for(Duration::from_millis(700)).unwrap();
    let mut last = None;
    while let Some(sample) = sub.try_recv().unwrap() {
        last = Some(sample.decode().unwrap());
    }
    let last = last.expect("reports published");
    assert_eq!(last.name, "published");
    assert_eq!(last.pid, std::process::id());
    assert_eq!(last.nodes[0].name, "imu");
    assert_eq!(
        last.nodes[0].ticks, r.nodes[0].ticks,
        "the final report is published"
    );
}
