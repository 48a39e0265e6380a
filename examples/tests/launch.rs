//! `nerve launch` with real processes: Ctrl-C and `kill -9` of the launcher leave nothing
//! behind (grandchildren and shared memory included), respawn is counted and bounded,
//! readiness orders start-up, shutdown escalates, bad files are located, composed nodes
//! talk. Every test has its own domain and directory; every wait is bounded and the
//! launcher is killed on drop, so nothing can hang.
//!
//! Needs the `nerve` binary next to the examples (`cargo test --workspace` builds it, or
//! `cargo build -p nerve-cli`).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

static NEXT: AtomicU32 = AtomicU32::new(0);
const T: Duration = Duration::from_secs(60);
const TALKER: &str = env!("CARGO_BIN_EXE_talker");
const LISTENER: &str = env!("CARGO_BIN_EXE_listener");
const CONTAINER: &str = env!("CARGO_BIN_EXE_container_demo");

fn nerve_cli() -> PathBuf {
    static CHECKED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    CHECKED
        .get_or_init(|| {
            let p = Path::new(TALKER).parent().unwrap().join("nerve");
            assert!(
                p.exists(),
                "build the CLI first (cargo build -p nerve-cli): {}",
                p.display()
            );
            let ok = Command::new(&p)
                .args(["launch", "--help"])
                .output()
                .is_ok_and(|o| o.status.success());
            assert!(
                ok,
                "{} has no launch command: built from another checkout? (cargo build -p nerve-cli)",
                p.display()
            );
            p
        })
        .clone()
}

/// A domain and a directory of its own.
struct Env {
    id: u32,
    dir: PathBuf,
}

impl Env {
    fn new() -> Env {
        let id = 600 + (std::process::id() % 30) * 10 + NEXT.fetch_add(1, Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("nerve-launch-test-{}-{id}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Env { id, dir }
    }

    fn config(&self) -> nerve::Config {
        nerve::Config::default()
            .domain(self.id)
            .unwrap()
            .state_dir(self.dir.join("state/"))
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(nerve_cli());
        c.args(args)
            .current_dir(&self.dir)
            .env("NERVE_DOMAIN", self.id.to_string())
            .env("NERVE_STATE_DIR", self.dir.join("state/"))
            .env_remove("NERVE_CONFIG")
            .env_remove("NERVE_NAMESPACE")
            .env_remove("NERVE_REMAP")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn launch(&self, file: &Path, args: &[&str]) -> Launcher {
        let mut all = vec!["launch", file.to_str().unwrap()];
        all.extend_from_slice(args);
        Launcher::new(self.command(&all).spawn().expect("spawn nerve launch"))
    }

    fn check(&self, file: &Path, args: &[&str]) -> (i32, String) {
        let mut all = vec!["launch", "--check", file.to_str().unwrap()];
        all.extend_from_slice(args);
        let out = self.command(&all).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }

    /// This domain's files in /dev/shm and the state directory.
    fn files(&self) -> BTreeSet<String> {
        nerve::introspect::domain_files(&self.config())
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = nerve::introspect::clean(&self.config());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `nerve launch` with its output collected: stdout lines as they come, stderr lines
/// prefixed `E `. Killed (SIGKILL) on drop.
struct Launcher {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Launcher {
    fn new(mut child: Child) -> Launcher {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        for (src, tag) in [
            (Box::new(out) as Box<dyn std::io::Read + Send>, ""),
            (Box::new(err), "E "),
        ] {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for l in BufReader::new(src).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push(format!("{tag}{l}"));
                }
            });
        }
        Launcher { child, lines }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn output(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits for a line containing `text`; panics with the output so far on timeout.
    fn expect(&mut self, text: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(l) = self.output().into_iter().find(|l| l.contains(text)) {
                return l;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "no line with {text:?} within {timeout:?}; output:\n{}",
                    self.output().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `n` lines contain `text`; panics with the output so far on timeout.
    fn expect_count(&mut self, text: &str, n: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.output().iter().filter(|l| l.contains(text)).count() < n {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "fewer than {n} lines with {text:?} within {timeout:?}; output:\n{}",
                    self.output().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the launcher to exit (killing it after `timeout`), then for its output.
    fn wait(&mut self, timeout: Duration) -> i32 {
        let deadline = Instant::now() + timeout;
        let code = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s.code().unwrap_or(-1);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "launcher still running after {timeout:?}; output:\n{}",
                    self.output().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // let the readers drain the pipes
        std::thread::sleep(Duration::from_millis(100));
        code
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill with plain integers.
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0);
    }

    /// Pids the launcher reported (`NAME started (pid N)`) and pids children printed as
    /// `pid N` (their own children).
    fn pids(&self) -> Vec<i32> {
        let mut out = Vec::new();
        for l in self.output() {
            for key in ["(pid ", "gc "] {
                if let Some(i) = l.find(key) {
                    let n: String = l[i + key.len()..]
                        .chars()
                        .take_while(|c| c.is_ascii_digit())
                        .collect();
                    if let Ok(p) = n.parse() {
                        out.push(p);
                    }
                }
            }
        }
        out
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `pid` is a live process (a zombie counts as gone).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next());
            state != Some("Z") && state != Some("X")
        }
        Err(_) => false,
    }
}

/// Waits (bounded) until every pid is gone; returns the ones still alive.
fn wait_gone(pids: &[i32], timeout: Duration) -> Vec<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_ends_children_and_their_children() {
    let e = Env::new();
    let f = e.write(
        "gc.launch.toml",
        r#"
shutdown = { sigint = "500ms", sigterm = "500ms" }
[[process]]
name = "parent"
cmd = ["sh", "-c", "sleep 300 & echo gc $!; sleep 300 & echo gc $!; wait"]
ready = { line = "gc" }
[[process]]
name = "other"
cmd = ["sh", "-c", "sleep 300 & echo gc $!; wait"]
"#,
    );
    let mut l = e.launch(&f, &[]);
    l.expect("all processes ready", T);
    l.expect("[other] gc", T);
    let pids = l.pids();
    assert!(
        pids.len() >= 5,
        "launcher, children and grandchildren: {pids:?}"
    );
    assert!(pids.iter().all(|&p| alive(p)), "{pids:?}");
    l.signal(libc::SIGINT);
    assert_eq!(l.wait(T), 0, "{}", l.output().join("\n"));
    let left = wait_gone(&pids, T);
    assert!(
        left.is_empty(),
        "still alive: {left:?}\n{}",
        l.output().join("\n")
    );
}

#[test]
fn kill_9_of_the_launcher_leaves_no_process_and_no_shared_memory() {
    let e = Env::new();
    let f = e.write(
        "k9.launch.toml",
        &format!(
            r#"
[[process]]
name = "talker"
cmd = ["{TALKER}", "--topic", "/k9", "--rate", "50"]
ready = {{ topic = "/k9" }}
[[process]]
name = "listener"
cmd = ["{LISTENER}", "--topic", "/k9"]
after = ["talker"]
ready = {{ line = "received" }}
[[process]]
name = "family"
cmd = ["sh", "-c", "sleep 300 & echo gc $!; wait"]
ready = {{ line = "gc" }}
"#
        ),
    );
    let mut l = e.launch(&f, &[]);
    l.expect("all processes ready", T);
    assert!(!e.files().is_empty(), "the nodes have shared memory");
    let mut pids = l.pids();
    pids.retain(|&p| p != l.pid());
    assert!(pids.len() >= 4, "children and grandchild: {pids:?}");
    l.signal(libc::SIGKILL);
    let _ = l.wait(T);
    let left = wait_gone(&pids, T);
    assert!(
        left.is_empty(),
        "still alive: {left:?}\n{}",
        l.output().join("\n")
    );
    // the guardian reclaims the shared memory once the processes are gone
    let deadline = Instant::now() + T;
    while !e.files().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(e.files(), BTreeSet::new(), "{}", l.output().join("\n"));
}

#[test]
fn respawn_is_counted_and_bounded() {
    let e = Env::new();
    let f = e.write(
        "respawn.launch.toml",
        r#"
[[process]]
name = "flaky"
cmd = ["sh", "-c", "echo start; exit 1"]
respawn = { max = 2, delay = "10ms" }
"#,
    );
    let mut l = e.launch(&f, &[]);
    assert_eq!(l.wait(T), 1, "{}", l.output().join("\n"));
    let out = l.output();
    let starts = out.iter().filter(|x| *x == "[flaky] start").count();
    assert_eq!(starts, 3, "{}", out.join("\n"));
    assert!(
        out.iter()
            .any(|x| x.contains("after 3 starts: no respawn left")),
        "{}",
        out.join("\n")
    );
    assert!(
        out.iter().any(|x| x.contains("flaky respawned 2 times")),
        "{}",
        out.join("\n")
    );
}

#[test]
fn dependents_start_after_readiness() {
    let e = Env::new();
    let f = e.write(
        "order.launch.toml",
        r#"
[[process]]
name = "b"
cmd = ["sh", "-c", "echo b first; exec sleep 300"]
after = ["a"]
[[process]]
name = "a"
cmd = ["sh", "-c", "echo a starting; sleep 0.5; echo a is ready; exec sleep 300"]
ready = { line = "is ready$" }
"#,
    );
    let mut l = e.launch(&f, &[]);
    l.expect("all processes ready", T);
    l.expect("[b] b first", T);
    l.signal(libc::SIGINT);
    assert_eq!(l.wait(T), 0);
    let out: Vec<String> = l
        .output()
        .into_iter()
        .filter(|x| !x.starts_with("E "))
        .collect();
    let pos = |s: &str| {
        out.iter()
            .position(|x| x == s)
            .unwrap_or_else(|| panic!("{s} in {out:?}"))
    };
    assert!(pos("[a] a is ready") < pos("[b] b first"), "{out:?}");
    let left = wait_gone(&l.pids(), T);
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn shutdown_escalates_to_sigterm_and_sigkill() {
    let e = Env::new();
    let f = e.write(
        "stubborn.launch.toml",
        r#"
shutdown = { sigint = "300ms", sigterm = "300ms" }
[[process]]
name = "no_int"
cmd = ["sh", "-c", "trap '' INT; sleep 300 & echo gc $!; wait"]
ready = { line = "gc" }
[[process]]
name = "no_int_term"
cmd = ["sh", "-c", "trap '' INT TERM; sleep 300 & echo gc $!; wait"]
ready = { line = "gc" }
[[process]]
name = "polite"
cmd = ["sleep", "300"]
"#,
    );
    let mut l = e.launch(&f, &[]);
    l.expect("all processes ready", T);
    let pids = l.pids();
    l.signal(libc::SIGINT);
    assert_eq!(l.wait(T), 0, "{}", l.output().join("\n"));
    let out = l.output().join("\n");
    assert!(out.contains("no_int stopped by SIGTERM"), "{out}");
    assert!(out.contains("no_int_term stopped by SIGKILL"), "{out}");
    assert!(out.contains("polite stopped by SIGINT"), "{out}");
    let left = wait_gone(&pids, T);
    assert!(left.is_empty(), "still alive: {left:?}\n{out}");
}

#[test]
fn bad_launch_files_are_located() {
    let e = Env::new();
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "[[process]]\nname = \"a\"\ncmd = [\"sh\"]\nnme = 1\n",
            "unknown.toml:4:1: nme: unknown field `nme`",
            &[],
        ),
        (
            "[[process]]\nname = \"a\"\n",
            "missing.toml:1:1: cmd: missing field `cmd`",
            &[],
        ),
        (
            "[args]\nx = { default = \"1\" }\n[[process]]\nname = \"a\"\ncmd = [\"sh\", \"${y}\"]\n",
            "subst.toml:5:14: process[a].cmd[1]: `${y}` names no argument (declared: x)",
            &[],
        ),
        (
            "[args]\nx = { default = \"1\" }\n[[process]]\nname = \"a\"\ncmd = [\"sh\"]\n",
            "argument \"nope:=2\": ",
            &["nope:=2"],
        ),
        (
            "[[process]]\nname = \"a\"\ncmd = [\"sh\"]\nafter = [\"b\"]\n[[process]]\nname = \"b\"\ncmd = [\"sh\"]\nafter = [\"a\"]\n",
            "cycle.toml:4:10: process[a].after: dependency cycle: a -> b -> a",
            &[],
        ),
        (
            "[[process]]\nname = \"a\"\ncmd = [\"sh\"]\nready_timeout = \"10 parsecs\"\n",
            "duration.toml:4:17: process[a].ready_timeout: \"10 parsecs\": expected a duration",
            &[],
        ),
        (
            "[[process]]\nname = \"a\"\ncmd = [\"surely-no-such-program-here\"]\n",
            "program.toml:3:8: process[a].cmd: executable \"surely-no-such-program-here\" not found on PATH",
            &[],
        ),
    ];
    let names = [
        "unknown", "missing", "subst", "arg", "cycle", "duration", "program",
    ];
    for ((text, expected, args), name) in cases.iter().zip(names) {
        let f = e.write(&format!("{name}.toml"), text);
        let (code, out) = e.check(&f, args);
        assert_eq!(code, 2, "{name}: {out}");
        assert!(
            out.contains(expected),
            "{name}: expected {expected:?} in\n{out}"
        );
    }
    let good = e.write("good.toml", "[[process]]\nname = \"a\"\ncmd = [\"sh\"]\n");
    let (code, out) = e.check(&good, &[]);
    assert_eq!((code, out.trim()), (0, "ok: 1 processes, 0 containers"));
}

#[test]
fn composed_nodes_talk_in_one_process() {
    let e = Env::new();
    let f = e.write(
        "container.launch.toml",
        &format!(
            r#"
[args]
robot = {{ default = "r1" }}
[[container]]
name = "pipeline"
cmd = ["{CONTAINER}"]
namespace = "${{robot}}"
[[container.node]]
component = "talker"
name = "talker"
params = {{ rate = 100 }}
[[container.node]]
component = "listener"
name = "listener"
"#
        ),
    );
    let mut l = e.launch(&f, &["robot:=r7"]);
    l.expect("[pipeline] /r7/listener: listening on /r7/chatter", T);
    l.expect("[pipeline] /r7/listener: received 1", T);
    let pids = l.pids();
    l.signal(libc::SIGINT);
    assert_eq!(l.wait(T), 0, "{}", l.output().join("\n"));
    assert!(l
        .output()
        .iter()
        .any(|x| x.contains("pipeline stopped by SIGINT")));
    assert!(wait_gone(&pids, T).is_empty());
}

#[test]
fn namespaces_remaps_and_service_readiness_reach_real_nodes() {
    let e = Env::new();
    let server = env!("CARGO_BIN_EXE_add_server");
    let f = e.write(
        "ns.launch.toml",
        &format!(
            r#"
[args]
robot = {{ default = "r1" }}
[[process]]
name = "adder"
cmd = ["{server}", "--name", "add"]
namespace = "${{robot}}"
ready = {{ service = "add" }}
[[process]]
name = "talker"
cmd = ["{TALKER}", "--topic", "chatter", "--rate", "50"]
namespace = "${{robot}}"
remap = {{ chatter = "/talk" }}
after = ["adder"]
ready = {{ topic = "chatter" }}
[[process]]
name = "listener"
cmd = ["{LISTENER}", "--topic", "/talk"]
after = ["talker"]
ready = {{ line = "received" }}
"#
        ),
    );
    let mut l = e.launch(&f, &["robot:=r5"]);
    // ready means: a server of /r5/add (the relative name in the namespace), a publisher
    // on /talk (the remapped /r5/chatter) and a listener on /talk that received
    l.expect("all processes ready", T);
    l.expect("[listener] listener: ", T);
    l.signal(libc::SIGTERM);
    assert_eq!(l.wait(T), 0, "{}", l.output().join("\n"));
    let out = l.output().join("\n");
    for name in ["adder", "talker", "listener"] {
        assert!(out.contains(&format!("{name} stopped by SIGINT")), "{out}");
    }
}

/// Parameters inline and from a file reach a launched node in its namespace (an integer
/// for a float parameter widens), and its action answers under the namespace.
#[test]
fn parameters_inline_and_from_files_reach_a_launched_node() {
    let e = Env::new();
    let fib = env!("CARGO_BIN_EXE_fibonacci");
    e.write("fib.yaml", "/r2/fibonacci:\n  max_order: 50\n  gain: 9.5\n");
    let f = e.write(
        "params.launch.toml",
        &format!(
            r#"
[[process]]
name = "fib"
cmd = ["{fib}", "--name", "fib"]
namespace = "r2"
param_files = ["fib.yaml"]
params = {{ gain = 2, step_ms = 4 }}
ready = {{ service = "fibonacci/_params" }}
"#
        ),
    );
    let mut l = e.launch(&f, &[]);
    l.expect("all processes ready", T);
    let out = e
        .command(&[
            "param",
            "get",
            "/r2/fibonacci",
            "gain",
            "step_ms",
            "max_order",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // the inline params come after the file's, so gain is 2 (widened to 2.0)
    assert_eq!(
        got,
        serde_json::json!({"gain": 2.0, "step_ms": 4, "max_order": 50})
    );
    let out = e
        .command(&[
            "action",
            "send_goal",
            "/r2/fib",
            "Fibonacci",
            r#"{"order": 4}"#,
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(r#""elems":[0,1,1,2,3]"#));
    l.signal(libc::SIGINT);
    assert_eq!(l.wait(T), 0, "{}", l.output().join("\n"));
}

/// The launch file shipped in `examples/launch/` runs as its comment says: talker and
/// listener in the robot's namespace, the listener ready once a sample arrived, started
/// again when killed (and waited on for readiness again), everything stopped by Ctrl-C.
#[test]
fn the_shipped_robot_launch_file_runs() {
    let e = Env::new();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("launch/robot.launch.toml");
    // talker and listener are found on PATH, as the file's comment tells users to set it
    let bins = Path::new(TALKER).parent().unwrap();
    let path = format!(
        "{}:{}",
        bins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let check = ["launch", "--check", file.to_str().unwrap(), "robot:=r7"];
    let out = e.command(&check).env("PATH", &path).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let all = ["launch", file.to_str().unwrap(), "robot:=r7"];
    let mut l = Launcher::new(e.command(&all).env("PATH", path).spawn().unwrap());
    l.expect("all processes ready", T);
    l.expect("[listener] listener: ", T);
    let listener = l.expect("listener started (pid ", T);
    let pid: i32 = listener
        .rsplit("(pid ")
        .next()
        .and_then(|r| r.trim_end_matches(')').parse().ok())
        .unwrap_or_else(|| panic!("a pid in {listener:?}"));
    // the talker publishes in the robot's namespace
    let sub_on = |topic: &str| {
        let ctx = nerve::Context::new(e.config()).unwrap();
        let node = ctx.node("probe").create().unwrap();
        let sub = node.subscriber::<nerve_msgs::Imu>(topic).create().unwrap();
        sub.recv_timeout(T).unwrap().is_some()
    };
    assert!(sub_on("/r7/imu"), "an Imu on /r7/imu");
    // killed, the listener is started again and becomes ready again
    // SAFETY: kill with plain integers.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    l.expect("listener: respawn 1 in", T);
    l.expect_count("listener started (pid ", 2, T);
    l.expect_count("listener ready", 2, T);
    l.signal(libc::SIGINT);
    assert_eq!(l.wait(T), 0, "{}", l.output().join("\n"));
    let out = l.output();
    let readies = out.iter().filter(|x| x.ends_with("listener ready")).count();
    assert_eq!(readies, 2, "ready after each start: {}", out.join("\n"));
    let left = wait_gone(&l.pids(), T);
    assert!(left.is_empty(), "{left:?}");
}
