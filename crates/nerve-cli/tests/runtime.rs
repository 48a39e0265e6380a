//! `nerve sm show` and `nerve node list` against a state machine and a scheduler running
//! in this test process.

use nerve::scheduler::{NodeConfig, Scheduler};
use nerve::{Config, Context, Executor, Machine, MachineSpec, StateSpec, TransitionSpec};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const DOMAIN: u32 = 996;

fn state_dir() -> std::path::PathBuf {
    std::env::temp_dir().join("nerve-cli-runtime/")
}

fn nerve(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nerve"))
        .args(args)
        .env("NERVE_DOMAIN", DOMAIN.to_string())
        .env("NERVE_STATE_DIR", state_dir())
        .env_remove("NERVE_CONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("run nerve");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ctx() -> Context {
    Context::new(
        Config::default()
            .domain(DOMAIN)
            .unwrap()
            .state_dir(state_dir()),
    )
    .unwrap()
}

#[test]
fn sm_show_prints_states_and_the_current_one() {
    let (ready_tx, ready) = mpsc::channel();
    let (stop_tx, stop) = mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        let ctx = ctx();
        let node = ctx.node("door_node").create().unwrap();
        let spec = MachineSpec::new("cli_door", "closed")
            .state(StateSpec::new("closed"))
            .state(StateSpec::new("open"))
            .transition(TransitionSpec::new("push", &["closed"], "open"));
        let mut exec = Executor::new();
        exec.handle_signals(false);
        let (_, handle) = exec.machine(&node, Machine::new(spec).unwrap()).unwrap();
        handle.trigger("push").unwrap();
        exec.spin_once(Duration::from_secs(1)).unwrap();
        ready_tx.send(handle.current()).unwrap();
        while stop.try_recv().is_err() {
            exec.spin_once(Duration::from_millis(20)).unwrap();
        }
    });
    assert_eq!(ready.recv().unwrap(), "open");
    let (code, out, err) = nerve(&["sm", "show", "cli_door", "--format", "json"]);
    let (hcode, human, _) = nerve(&["sm", "show", "cli_door"]);
    stop_tx.send(()).unwrap();
    t.join().unwrap();
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["current"], "open");
    assert_eq!(v["transitions_so_far"], 2);
    assert_eq!(v["spec"]["states"].as_array().unwrap().len(), 2);
    assert_eq!(hcode, 0);
    assert!(
        human.contains("* ") && human.contains("current state: open"),
        "{human}"
    );

    let (code, _, err) = nerve(&["sm", "show", "no_such_machine"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("no state machine named \"no_such_machine\""),
        "{err}"
    );
    let (code, _, err) = nerve(&["sm", "show", "bad name"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("invalid machine name"), "{err}");
}

#[test]
fn node_list_shows_scheduled_nodes_with_rate_jitter_and_misses() {
    let (ready_tx, ready) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let ctx = ctx();
        let node = ctx.node("sched_node").create().unwrap();
        let mut s = Scheduler::new("cli_sched");
        s.publish_stats(&node).unwrap();
        s.add(NodeConfig::new("imu_driver", 200.0).priority(3), |_| {})
            .unwrap();
        let stop = s.stopper();
        ready_tx.send(stop).unwrap();
        s.run().unwrap()
    });
    let stop = ready.recv().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let (code, out, err) = nerve(&["node", "list", "--format", "json"]);
    let (_, human, _) = nerve(&["node", "list"]);
    stop.stop();
    t.join().unwrap();
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["name"].as_str())
        .collect();
    assert!(names.contains(&"sched_node"), "{names:?}");
    let sched = &v["schedulers"][0];
    assert_eq!(sched["name"], "cli_sched");
    let n = &sched["nodes"][0];
    assert_eq!(
        (n["name"].as_str(), n["rate_hz"].as_f64()),
        (Some("imu_driver"), Some(200.0))
    );
    assert!(n["ticks"].as_u64().unwrap() > 10, "{n}");
    assert!(n["jitter_us"]["p99"].is_number() && n["deadline_misses"].is_number());
    assert!(
        human.contains("imu_driver") && human.contains("JITTER_P99_US"),
        "{human}"
    );
}

#[test]
fn trace_run_reports_each_hop_and_writes_a_timeline() {
    let dir = std::env::temp_dir().join(format!("nerve-cli-trace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (events, html) = (dir.join("events"), dir.join("timeline.html"));
    let bin = env!("CARGO_BIN_EXE_nerve");
    // a subscriber and a publisher in two processes, both traced through the environment
    let script = format!(
        "{bin} topic echo /trace_cli --count 10 --timeout 30 > /dev/null & \
         {bin} topic pub /trace_cli CmdVel '{{\"linear\": 1.0}}' --rate 100 --count 200 \
         --wait-subscribers 20 > /dev/null; wait"
    );
    let (code, out, err) = nerve(&[
        "trace",
        "run",
        "--dir",
        events.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    for part in ["/trace_cli", "wait", "transport", "end to end"] {
        assert!(out.contains(part), "{part} in:\n{out}");
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<svg") && page.contains("/trace_cli"),
        "{page}"
    );

    // the same events as JSON: the hop was taken at least the 10 times echo took it
    let (code, out, err) = nerve(&[
        "trace",
        "report",
        events.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    let hop = &report["hops"][0];
    assert_eq!(hop[0], "/trace_cli", "{report}");
    assert!(hop[2]["count"].as_u64().unwrap() >= 10, "{report}");

    // nothing traced, and a damaged file: errors that name the directory or the file
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (code, _, err) = nerve(&["trace", "report", empty.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("no trace events"), "{err}");
    std::fs::write(empty.join("1.ntr"), [7u8; 128]).unwrap();
    let (code, _, err) = nerve(&["trace", "report", empty.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("1.ntr"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
