//! The programmatic API: loading (includes, namespaces, arguments, located errors) and
//! running plans of plain `sh` processes. Every wait is bounded.

use nerve_launch::{
    EndedBy, ExitReason, LaunchError, LaunchFile, OnExit, Output, ParamValue, Ready, StartOptions,
};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(30);

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nerve-launch-api-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn opts() -> StartOptions {
    let mut o = StartOptions::new(
        nerve::Config::default()
            .domain(990)
            .unwrap()
            .state_dir(std::env::temp_dir().join("nerve-launch-api-state/")),
    );
    o.output = Output::Discard;
    o
}

#[test]
fn includes_namespaces_arguments_and_params() {
    let d = dir("include");
    std::fs::write(
        d.join("main.launch.toml"),
        r#"
[args]
robot = { default = "r1" }
rate = { default = "10" }
[env]
FROM_MAIN = "m"
[[include]]
file = "sub/cam.launch.toml"
namespace = "/${robot}"
args = { rate = "${rate}" }
[[process]]
name = "top"
cmd = ["sh", "-c", "true"]
remap = { chatter = "/talk" }
ready = { topic = "chatter" }
"#,
    )
    .unwrap();
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(
        d.join("sub/cam.launch.toml"),
        r#"
[args]
rate = {}
[[process]]
name = "cam"
cmd = ["sh", "-c", "echo ${rate} ${dir}"]
namespace = "cam"
params = { rate = "${rate}", gain = 1.10, flags = ["no", true] }
env = { OWN = "o" }
exit = "ignore"
"#,
    )
    .unwrap();
    let plan = LaunchFile::load(
        d.join("main.launch.toml"),
        &[("robot", "r2"), ("rate", "30")],
    )
    .unwrap();
    assert_eq!((plan.process_count(), plan.container_count()), (2, 0));
    let cam = plan.process("cam").unwrap();
    assert_eq!(cam.namespace, "/r2/cam");
    let sub = std::fs::canonicalize(d.join("sub")).unwrap();
    assert_eq!(
        cam.args,
        vec!["-c".to_string(), format!("echo 30 {}", sub.display())]
    );
    assert_eq!(
        cam.params,
        vec![
            (
                "flags".into(),
                ParamValue::List(vec![ParamValue::Str("no".into()), ParamValue::Bool(true)])
            ),
            ("gain".into(), ParamValue::Float(1.10)),
            ("rate".into(), ParamValue::Str("30".into())),
        ]
    );
    assert_eq!(
        cam.env,
        vec![("FROM_MAIN".into(), "m".into()), ("OWN".into(), "o".into())]
    );
    assert_eq!(cam.on_exit, OnExit::Ignore);
    let top = plan.process("top").unwrap();
    assert_eq!(top.namespace, "/");
    assert!(
        matches!(&top.ready, Ready::Topic(t) if t == "/talk"),
        "{:?}",
        top.ready
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn include_problems_are_located() {
    let d = dir("cycle");
    std::fs::write(d.join("a.toml"), "[[include]]\nfile = \"b.toml\"\n").unwrap();
    std::fs::write(d.join("b.toml"), "[[include]]\nfile = \"a.toml\"\n").unwrap();
    let e = LaunchFile::load(d.join("a.toml"), &[] as &[(&str, &str)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("b.toml:2:8: include[0].file: include cycle"),
        "{e}"
    );
    std::fs::write(
        d.join("c.toml"),
        "[[include]]\nfile = \"d.toml\"\nargs = { x = \"1\" }\n",
    )
    .unwrap();
    std::fs::write(d.join("d.toml"), "").unwrap();
    let e = LaunchFile::load(d.join("c.toml"), &[] as &[(&str, &str)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("c.toml:3:14: include[0].args.x:") && e.contains("no argument \"x\""),
        "{e}"
    );
    std::fs::write(d.join("e.toml"), "[args]\nneeded = {}\n").unwrap();
    let e = LaunchFile::load(d.join("e.toml"), &[] as &[(&str, &str)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("e.toml:2:10: args.needed: required argument not given"),
        "{e}"
    );
    let e = LaunchFile::load(d.join("e.toml"), &[("other", "1")]).unwrap_err();
    assert!(matches!(e, LaunchError::Argument { .. }), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn start_wait_ready_respawn_and_shutdown() {
    let d = dir("run");
    std::fs::write(
        d.join("run.toml"),
        r#"
shutdown = { sigint = "200ms", sigterm = "200ms" }
[[process]]
name = "setup"
cmd = ["true"]
exit = "ignore"
[[process]]
name = "server"
cmd = ["sleep", "300"]
after = ["setup"]
[[process]]
name = "flaky"
cmd = ["sh", "-c", "exit 2"]
respawn = { max = 1, delay = "10ms" }
exit = "ignore"
[[process]]
name = "stubborn"
cmd = ["sh", "-c", "trap '' INT; exec sleep 300"]
"#,
    )
    .unwrap();
    let plan = LaunchFile::load(d.join("run.toml"), &[] as &[(&str, &str)]).unwrap();
    let running = plan.start(opts()).unwrap();
    running.wait_ready(T).unwrap();
    let server = running.pid("server").expect("server runs");
    let deadline = Instant::now() + T;
    while running.respawns("flaky") != Some(1) || running.pid("flaky").is_some() {
        assert!(Instant::now() < deadline, "flaky respawned once and ended");
        std::thread::sleep(Duration::from_millis(10));
    }
    let report = running.shutdown();
    let by = |n: &str| {
        report
            .processes
            .iter()
            .find(|p| p.name == n)
            .unwrap()
            .ended_by
    };
    assert_eq!(by("server"), EndedBy::Sigint);
    assert_eq!(by("stubborn"), EndedBy::Sigterm);
    assert_eq!(by("flaky"), EndedBy::AlreadyExited);
    assert_eq!(report.escalated().count(), 1);
    assert!(
        !std::path::Path::new(&format!("/proc/{server}")).exists() || {
            let s = std::fs::read_to_string(format!("/proc/{server}/stat")).unwrap_or_default();
            s.contains(") Z")
        }
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn ready_timeout_fails_the_launch() {
    let d = dir("timeout");
    std::fs::write(
        d.join("t.toml"),
        "[[process]]\nname = \"mute\"\ncmd = [\"sleep\", \"300\"]\nready = { line = \"never\" }\nready_timeout = \"200ms\"\n",
    )
    .unwrap();
    let plan = LaunchFile::load(d.join("t.toml"), &[] as &[(&str, &str)]).unwrap();
    let running = plan.start(opts()).unwrap();
    let e = running.wait_ready(T).unwrap_err();
    assert!(
        matches!(e, LaunchError::ReadyTimeout { ref name, .. } if name == "mute"),
        "{e}"
    );
    let report = running.wait();
    assert!(!report.success);
    assert!(matches!(report.reason, ExitReason::ReadyTimeout { .. }));
    assert_eq!(report.shutdown.processes[0].ended_by, EndedBy::Sigint);
    let _ = std::fs::remove_dir_all(&d);
}
