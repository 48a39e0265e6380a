//! The programmatic API: loading (includes, namespaces, arguments, located errors) and
//! running plans of plain `sh` processes: containment of setsid'd grandchildren in both
//! modes, readiness of respawned processes. Every wait is bounded.

use nerve_launch::{
    Containment, ContainmentMode, EndedBy, Event, ExitReason, LaunchError, LaunchFile, OnExit,
    Output, ParamValue, Ready, StartOptions,
};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
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

/// Live processes whose command line is `sleep ARG` (zombies excluded).
fn sleepers(arg: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let parts: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
        let sleep = parts.first().is_some_and(|p| p.ends_with(b"sleep"))
            && parts.get(1) == Some(&arg.as_bytes());
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(true);
        if sleep && !zombie {
            out.push(pid);
        }
    }
    out
}

/// A `sleep` argument unique to this test run: `tag` and the pid.
fn unique(tag: u32) -> String {
    format!("5151{tag:02}{:06}", std::process::id() % 1_000_000)
}

/// Kills the sleeps of `args` on drop (what a failed test left).
struct Sleeps(Vec<String>);

impl Drop for Sleeps {
    fn drop(&mut self) {
        for a in &self.0 {
            for p in sleepers(a) {
                // SAFETY: kill with plain integers; the pid runs our unique command line.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
        }
    }
}

fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !f() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Whether cgroup v2 containment works here: `Containment::Cgroup` succeeds exactly where
/// `Auto` picks a cgroup.
fn cgroup_mode_here() -> bool {
    let d = dir("probe");
    std::fs::write(
        d.join("p.toml"),
        "[[process]]\nname = \"p\"\ncmd = [\"true\"]\n",
    )
    .unwrap();
    let plan = LaunchFile::load(d.join("p.toml"), &[] as &[(&str, &str)]).unwrap();
    let auto = plan.start(opts()).unwrap();
    let mode = auto.containment().clone();
    auto.shutdown();
    let mut o = opts();
    o.containment = Containment::Cgroup;
    let forced = plan.start(o);
    let _ = std::fs::remove_dir_all(&d);
    match (mode, forced) {
        (ContainmentMode::Cgroup { path }, Ok(r)) => {
            assert!(matches!(r.containment(), ContainmentMode::Cgroup { .. }));
            r.shutdown();
            assert!(!path.exists(), "{} removed", path.display());
            true
        }
        (ContainmentMode::ProcessGroups { reason, .. }, Err(e)) => {
            assert!(matches!(e, LaunchError::CgroupUnavailable(_)), "{e}");
            eprintln!("no cgroup here: {reason}");
            false
        }
        (m, r) => panic!(
            "Auto gave {m}, Cgroup gave {:?}",
            r.map(|r| r.containment().clone())
        ),
    }
}

/// `shutdown()` ends grandchildren that left the process group and the session (one
/// setsid'd, one a double-forked daemon), in each containment mode; the launch's cgroup
/// is removed.
fn shutdown_ends_escaped(c: Containment, tag: u32) {
    let (a, b, child) = (unique(tag), unique(tag + 1), unique(tag + 2));
    let _cleanup = Sleeps(vec![a.clone(), b.clone(), child.clone()]);
    let d = dir(&format!("escape{tag}"));
    std::fs::write(
        d.join("e.toml"),
        format!(
            r#"
shutdown = {{ sigint = "300ms", sigterm = "300ms" }}
[[process]]
name = "escaper"
cmd = ["sh", "-c", "setsid sleep {a} & (setsid sleep {b} &); sleep {child}"]
"#
        ),
    )
    .unwrap();
    let plan = LaunchFile::load(d.join("e.toml"), &[] as &[(&str, &str)]).unwrap();
    let mut o = opts();
    o.containment = c;
    let running = plan.start(o).unwrap();
    let mode = running.containment().clone();
    match (c, &mode) {
        (Containment::ProcessGroups, ContainmentMode::ProcessGroups { reason, subreaper }) => {
            assert_eq!((reason.as_str(), *subreaper), ("asked for", true));
        }
        (Containment::Auto, _) => {}
        (c, m) => panic!("{c:?} gave {m}"),
    }
    running.wait_ready(T).unwrap();
    let up = wait_until(T, || {
        [&a, &b, &child].iter().all(|s| sleepers(s).len() == 1)
    });
    assert!(up, "the sleeps started");
    let report = running.shutdown();
    let left: Vec<i32> = [&a, &b, &child].iter().flat_map(|s| sleepers(s)).collect();
    assert!(
        left.is_empty(),
        "{mode}: still running after shutdown: {left:?}"
    );
    // the escaped sleeps ignore SIGINT (background jobs of sh): SIGTERM ended them
    assert_eq!(
        report.processes[0].ended_by,
        EndedBy::Sigterm,
        "{mode}: {report:?}"
    );
    if let ContainmentMode::Cgroup { path } = &mode {
        assert!(!path.exists(), "{} removed", path.display());
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn shutdown_ends_setsid_grandchildren_in_cgroup_mode_where_writable() {
    if !cgroup_mode_here() {
        eprintln!("skipped: no writable cgroup v2 (process-group mode is tested alone)");
        return;
    }
    shutdown_ends_escaped(Containment::Auto, 10);
}

#[test]
fn shutdown_ends_setsid_grandchildren_in_process_group_mode() {
    shutdown_ends_escaped(Containment::ProcessGroups, 20);
}

/// A process that exits and respawns takes what it left (even outside its group) with
/// it, in each mode.
fn respawn_ends_what_the_last_run_left(c: Containment, tag: u32) {
    let a = unique(tag);
    let _cleanup = Sleeps(vec![a.clone()]);
    let d = dir(&format!("leftover{tag}"));
    std::fs::write(
        d.join("r.toml"),
        format!(
            r#"
[[process]]
name = "leaver"
cmd = ["sh", "-c", "if [ -e {dir}/ran ]; then exec sleep 300; fi; touch {dir}/ran; setsid sleep {a} & sleep 0.5; exit 1"]
respawn = {{ max = 1, delay = "10ms" }}
"#,
            dir = d.display()
        ),
    )
    .unwrap();
    let plan = LaunchFile::load(d.join("r.toml"), &[] as &[(&str, &str)]).unwrap();
    let mut o = opts();
    o.containment = c;
    let running = plan.start(o).unwrap();
    assert!(
        wait_until(T, || sleepers(&a).len() == 1),
        "the first run's sleep"
    );
    assert!(wait_until(T, || running.respawns("leaver") == Some(1)));
    let gone = wait_until(Duration::from_secs(10), || sleepers(&a).is_empty());
    let mode = running.containment().clone();
    running.shutdown();
    assert!(gone, "{mode}: the first run's setsid'd sleep outlived it");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn respawn_ends_what_the_last_run_left_in_both_modes() {
    respawn_ends_what_the_last_run_left(Containment::ProcessGroups, 30);
    respawn_ends_what_the_last_run_left(Containment::Auto, 31);
}

#[test]
fn a_respawned_process_is_waited_on_for_readiness_again() {
    let d = dir("ready-again");
    // `up` is ready at once on its first run, then exits; its second run is ready 0.8 s
    // after it starts. `gate` is ready once the second run has started, so `late`, after
    // both, would start before `up` is ready again if a respawn were not waited on.
    std::fs::write(
        d.join("r.toml"),
        format!(
            r#"
[[process]]
name = "up"
cmd = ["sh", "-c", "n=$(cat {dir}/n 2>/dev/null || echo 0); echo $((n + 1)) > {dir}/n; if [ $n = 0 ]; then echo up; sleep 0.3; exit 1; fi; sleep 0.8; echo up; exec sleep 300"]
ready = {{ line = "^up$" }}
respawn = {{ max = 1, delay = "10ms" }}
[[process]]
name = "gate"
cmd = ["sh", "-c", "while [ \"$(cat {dir}/n 2>/dev/null)\" != 2 ]; do sleep 0.02; done; echo go; exec sleep 300"]
ready = {{ line = "^go$" }}
[[process]]
name = "late"
cmd = ["sleep", "300"]
after = ["up", "gate"]
"#,
            dir = d.display()
        ),
    )
    .unwrap();
    let plan = LaunchFile::load(d.join("r.toml"), &[] as &[(&str, &str)]).unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let mut o = opts();
    let ev = events.clone();
    o.on_event = Some(Arc::new(move |e: &Event| {
        ev.lock().unwrap().push(e.clone())
    }));
    let running = plan.start(o).unwrap();
    running.wait_ready(T).unwrap();
    assert!(running.is_ready());
    running.shutdown();
    let ev = events.lock().unwrap().clone();
    let pos = |f: &dyn Fn(&Event) -> bool| ev.iter().position(f);
    let ready_up: Vec<usize> = ev
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Event::Ready { name } if name == "up"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(ready_up.len(), 2, "up is ready on each run: {ev:?}");
    let respawned = pos(&|e| matches!(e, Event::Respawning { name, .. } if name == "up"));
    let late = pos(&|e| matches!(e, Event::Started { name, .. } if name == "late"));
    let all_ready = pos(&|e| matches!(e, Event::AllReady));
    assert!(respawned.unwrap() < ready_up[1], "{ev:?}");
    assert!(
        late.unwrap() > ready_up[1],
        "late waits for up's second run: {ev:?}"
    );
    assert!(all_ready.unwrap() > ready_up[1], "{ev:?}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_respawn_not_ready_in_time_fails_the_launch() {
    let d = dir("respawn-timeout");
    std::fs::write(
        d.join("r.toml"),
        format!(
            r#"
[[process]]
name = "once"
cmd = ["sh", "-c", "if [ -e {dir}/ran ]; then exec sleep 300; fi; touch {dir}/ran; echo up; sleep 0.2; exit 1"]
ready = {{ line = "^up$" }}
ready_timeout = "500ms"
respawn = {{ max = 3, delay = "10ms" }}
"#,
            dir = d.display()
        ),
    )
    .unwrap();
    let plan = LaunchFile::load(d.join("r.toml"), &[] as &[(&str, &str)]).unwrap();
    let running = plan.start(opts()).unwrap();
    running.wait_ready(T).unwrap();
    let ended = wait_until(Duration::from_secs(20), || running.is_finished());
    if !ended {
        running.shutdown();
        panic!("the respawned process was never waited on for readiness");
    }
    let report = running.wait();
    assert!(!report.success);
    assert!(
        matches!(&report.reason, ExitReason::ReadyTimeout { name, .. } if name == "once"),
        "{}",
        report.reason
    );
    let _ = std::fs::remove_dir_all(&d);
}
