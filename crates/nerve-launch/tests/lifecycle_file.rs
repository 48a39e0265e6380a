//! `ready = { lifecycle = ... }` in launch files: what it parses to, and located errors.

use nerve_launch::{LaunchError, LaunchFile, LifecycleGoal, Ready};
use std::path::PathBuf;

fn file(tag: &str, text: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nerve-launch-lc-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join("robot.launch.toml");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn lifecycle_readiness_names_the_node_in_the_process_namespace() {
    let p = file(
        "ok",
        r#"
[[process]]
name = "camera"
cmd = ["sh", "-c", "true"]
namespace = "/r1"
ready = { lifecycle = "active" }
[[process]]
name = "detector-2"
cmd = ["sh", "-c", "true"]
ready = { lifecycle = "inactive", node = "detector" }
after = ["camera"]
"#,
    );
    let plan = LaunchFile::load(&p, &[] as &[(&str, &str)]).unwrap();
    let cam = plan.process("camera").unwrap();
    assert!(
        matches!(&cam.ready, Ready::Lifecycle { node, goal: LifecycleGoal::Active } if node == "/r1/camera"),
        "{:?}",
        cam.ready
    );
    let det = plan.process("detector-2").unwrap();
    assert!(matches!(
        &det.ready,
        Ready::Lifecycle { node, goal: LifecycleGoal::Inactive } if node == "/detector"
    ));
    assert_eq!(
        det.ready.to_string(),
        "managed node /detector to be inactive"
    );
}

#[test]
fn bad_lifecycle_readiness_is_located() {
    let p = file(
        "bad",
        r#"
[[process]]
name = "camera"
cmd = ["sh", "-c", "true"]
ready = { lifecycle = "running" }
[[process]]
name = "detector-2"
cmd = ["sh", "-c", "true"]
ready = { lifecycle = "active" }
[[process]]
name = "planner"
cmd = ["sh", "-c", "true"]
ready = { topic = "/plan", node = "planner" }
[[process]]
name = "mapper"
cmd = ["sh", "-c", "true"]
ready = { lifecycle = "active", topic = "/map" }
"#,
    );
    let Err(LaunchError::Invalid(d)) = LaunchFile::load(&p, &[] as &[(&str, &str)]) else {
        panic!("expected located errors");
    };
    let text: Vec<String> = d.iter().map(|d| d.to_string()).collect();
    let shown = p.display().to_string();
    let expect = [
        (
            5,
            "process[camera].ready.lifecycle: \"running\": expected \"active\" or \"inactive\"",
        ),
        (
            9,
            "process[detector-2].ready.node: the process name \"detector-2\" is not a node name",
        ),
        (
            13,
            "process[planner].ready.node: node goes with lifecycle readiness",
        ),
        (
            17,
            "process[mapper].ready: give one of topic, service, line, delay or lifecycle",
        ),
    ];
    assert_eq!(text.len(), expect.len(), "{text:#?}");
    for (line, needle) in expect {
        assert!(
            text.iter()
                .any(|t| t.starts_with(&format!("{shown}:{line}:")) && t.contains(needle)),
            "line {line}: {needle}\n{text:#?}"
        );
    }
}
