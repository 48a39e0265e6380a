//! Managed nodes brought up by a launch in dependency order and down in reverse, and a
//! node stuck in a transition reported by name. Real processes (`managed_node`); every
//! wait is bounded.

use nerve_launch::{Event, LaunchError, LaunchFile, Output, StartOptions};
use nerve_lifecycle::{LifecycleClient, State};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const T: Duration = Duration::from_secs(60);
const MANAGED: &str = env!("CARGO_BIN_EXE_managed_node");

fn setup(tag: &str, domain: u32, text: &str) -> (PathBuf, nerve::Config) {
    let d = std::env::temp_dir().join(format!("nerve-lc-launch-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join("managed.launch.toml");
    std::fs::write(&p, text.replace("MANAGED", MANAGED)).unwrap();
    let cfg = nerve::Config::default()
        .domain(domain)
        .unwrap()
        .state_dir(d.join("state/"));
    (p, cfg)
}

fn start(file: &PathBuf, cfg: &nerve::Config) -> (nerve_launch::Running, Arc<Mutex<Vec<String>>>) {
    let plan = LaunchFile::load(file, &[] as &[(&str, &str)]).unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let ev = events.clone();
    let mut o = StartOptions::new(cfg.clone());
    o.output = Output::Discard;
    o.on_event = Some(Arc::new(move |e: &Event| {
        let line = match e {
            Event::Started { name, .. } => format!("{name} started"),
            Event::Lifecycle { .. } | Event::Ready { .. } | Event::Warning(_) => e.to_string(),
            _ => return,
        };
        ev.lock().unwrap().push(line);
    }));
    (plan.start(o).unwrap(), events)
}

#[test]
fn three_managed_nodes_come_up_in_order_and_go_down_in_reverse() {
    let (file, cfg) = setup(
        "three",
        881,
        r#"
ready_timeout = "20s"
[[process]]
name = "camera"
cmd = ["MANAGED", "camera"]
ready = { lifecycle = "active" }
[[process]]
name = "detector"
cmd = ["MANAGED", "detector"]
ready = { lifecycle = "active" }
after = ["camera"]
[[process]]
name = "planner"
cmd = ["MANAGED", "planner"]
ready = { lifecycle = "inactive" }
after = ["detector"]
"#,
    );
    let (running, events) = start(&file, &cfg);
    running.wait_ready(T).unwrap();
    // the nodes say so themselves
    let ctx = nerve::Context::new(cfg.clone().network(false)).unwrap();
    let node = ctx.node("lc_test_probe").create().unwrap();
    let states: Vec<State> = ["/camera", "/detector", "/planner"]
        .iter()
        .map(|n| {
            LifecycleClient::create(&node, n)
                .unwrap()
                .get_state()
                .unwrap()
        })
        .collect();
    assert_eq!(states, [State::Active, State::Active, State::Inactive]);
    drop(node);
    drop(ctx);
    let report = running.shutdown();
    // every node ended on SIGINT after being brought down
    assert!(report.escalated().next().is_none(), "{report:?}");
    let got = events.lock().unwrap().clone();
    let want = [
        "camera started",
        "camera: /camera configure -> inactive",
        "camera: /camera activate -> active",
        "camera ready",
        "detector started",
        "detector: /detector configure -> inactive",
        "detector: /detector activate -> active",
        "detector ready",
        "planner started",
        "planner: /planner configure -> inactive",
        "planner ready",
        "planner: /planner cleanup -> unconfigured",
        "planner: /planner shutdown -> finalized",
        "detector: /detector deactivate -> inactive",
        "detector: /detector cleanup -> unconfigured",
        "detector: /detector shutdown -> finalized",
        "camera: /camera deactivate -> inactive",
        "camera: /camera cleanup -> unconfigured",
        "camera: /camera shutdown -> finalized",
    ];
    assert_eq!(got, want);
}

#[test]
fn a_node_stuck_in_a_transition_is_reported_by_name_and_transition() {
    let (file, cfg) = setup(
        "stuck",
        882,
        r#"
[[process]]
name = "camera"
cmd = ["MANAGED", "camera"]
ready = { lifecycle = "active" }
[[process]]
name = "lidar"
cmd = ["MANAGED", "lidar", "--stuck-in", "activate"]
ready = { lifecycle = "active" }
ready_timeout = "1s"
shutdown = { sigint = "300ms", sigterm = "300ms" }
after = ["camera"]
[[process]]
name = "planner"
cmd = ["MANAGED", "planner"]
ready = { lifecycle = "active" }
after = ["lidar"]
"#,
    );
    let (running, events) = start(&file, &cfg);
    let err = running.wait_ready(T).unwrap_err();
    assert!(
        matches!(&err, LaunchError::Ended(m)
            if m == "lidar: managed node /lidar stuck in activate (not answered within 1s)"),
        "{err}"
    );
    let report = running.wait();
    assert!(!report.success);
    let got = events.lock().unwrap().clone();
    // the planner never started; the camera still came down; the stuck node was not asked
    assert!(!got.iter().any(|e| e.starts_with("planner")), "{got:#?}");
    assert!(
        got.contains(&"camera: /camera shutdown -> finalized".to_string()),
        "{got:#?}"
    );
    assert!(
        !got.iter()
            .any(|e| e.starts_with("lidar: /lidar deactivate")),
        "{got:#?}"
    );
}
