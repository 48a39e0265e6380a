//! `nerve tf tree | echo | monitor` against transforms broadcast by this test, and bad
//! arguments.

use nerve::{Config, Context};
use nerve_tf::{to_msg, Broadcaster, Quat, StaticBroadcaster, Transform, Vec3};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

const DOMAIN: u32 = 881;

fn state_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("nerve-cli-tf-{}", std::process::id()))
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

fn at(x: f64, y: f64, z: f64) -> Transform {
    Transform::new(Vec3::new(x, y, z), Quat::IDENTITY)
}

/// Broadcasts a small robot until stopped: map -> odom -> base_link (dynamic, 50 Hz),
/// base_link -> lidar (static).
fn robot(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::fs::create_dir_all(state_dir()).unwrap();
    std::thread::spawn(move || {
        let ctx = Context::new(
            Config::default()
                .domain(DOMAIN)
                .unwrap()
                .state_dir(state_dir()),
        )
        .unwrap();
        let node = ctx.node("tf_test_robot").create().unwrap();
        let mut statics = StaticBroadcaster::new(&node).unwrap();
        statics
            .send(&[to_msg("base_link", "lidar", 0, at(0.2, 0.0, 0.5)).unwrap()])
            .unwrap();
        let dynamic = Broadcaster::new(&node).unwrap();
        while !stop.load(Relaxed) {
            let now = nerve::wall_ns();
            dynamic
                .send(&[
                    to_msg("map", "odom", now, at(1.0, 2.0, 0.0)).unwrap(),
                    to_msg("odom", "base_link", now, at(3.0, 0.0, 0.0)).unwrap(),
                ])
                .unwrap();
            statics.update_connections();
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

#[test]
fn tree_echo_and_monitor_show_a_small_robot() {
    let stop = Arc::new(AtomicBool::new(false));
    let robot = robot(stop.clone());
    let (code, out, err) = nerve(&["tf", "tree", "--wait", "1"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "map", "{out}");
    assert!(lines[1].starts_with("└── odom (dynamic, "), "{out}");
    assert!(
        lines[2].starts_with("    └── base_link (dynamic, "),
        "{out}"
    );
    assert_eq!(lines[3], "        └── lidar (static)", "{out}");
    let (code, out, err) = nerve(&["tf", "tree", "--wait", "1", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let frames = v["frames"].as_array().unwrap();
    let lidar = frames.iter().find(|f| f["frame"] == "lidar").unwrap();
    assert_eq!(
        (lidar["parent"].as_str(), lidar["static"].as_bool()),
        (Some("base_link"), Some(true))
    );

    let (code, out, err) = nerve(&["tf", "echo", "map", "lidar", "--once", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let t: Vec<f64> = v["translation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert!(
        (t[0] - 4.2).abs() < 1e-9 && (t[1] - 2.0).abs() < 1e-9 && (t[2] - 0.5).abs() < 1e-9,
        "{out}"
    );
    assert!(v["age_ns"].as_i64().is_some(), "{out}");
    let (code, out, err) = nerve(&["tf", "echo", "map", "lidar", "--once"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("lidar in map (at "), "{out}");
    assert!(
        out.contains("translation: [4.200000, 2.000000, 0.500000]"),
        "{out}"
    );

    let (code, out, err) = nerve(&["tf", "monitor", "--duration", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("frame"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("lidar") && l.contains("static")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("base_link") && l.contains("odom")),
        "{out}"
    );

    // a chain that never arrives: a clear error naming the frames, exit 1
    let (code, _, err) = nerve(&["tf", "echo", "map", "nowhere", "--once", "--timeout", "0.5"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("no transform of nowhere in map") && err.contains("unknown frame"),
        "{err}"
    );
    stop.store(true, Relaxed);
    robot.join().unwrap();
}

#[test]
fn tf_bad_arguments_are_usage_errors() {
    for (args, needle) in [
        (
            vec!["tf", "echo", "map", "", "--once"],
            "invalid frame name",
        ),
        (vec!["tf", "echo", "map", "base", "--rate", "0"], "--rate"),
        (vec!["tf", "tree", "--wait=-1"], "--wait"),
        (vec!["tf", "monitor", "--duration", "nan"], "--duration"),
        (vec!["tf", "echo", "map"], "required arguments"),
    ] {
        let (code, _, err) = nerve(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
}
