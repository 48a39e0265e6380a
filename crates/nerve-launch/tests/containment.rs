//! Containment as `nerve launch` runs it: this test binary re-runs itself as a launcher
//! (`Guardian::CurrentExe`, SIGINT handled like Ctrl-C) of `sh -c "setsid sleep A &
//! (setsid sleep C &); sleep B"`, whose grandchildren leave the process group and the
//! session (C is a daemon: its parent exits at once). Ctrl-C (SIGINT to the launcher) and
//! `kill -9` of the launcher (the guardian cleans up) must both end them, in cgroup mode
//! where cgroup v2 is writable and in the forced process-group fallback.
//!
//! No test harness (`harness = false`): the binary's `main` must answer the guardian
//! argument first. Every wait is bounded; what a test starts is killed at its end, passed
//! or failed. Arguments: names (substrings) select tests; `--list` lists them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(30);
const LAUNCHER_ARG: &str = "__containment-test-launcher";

type Test = (&'static str, fn());

const TESTS: &[Test] = &[
    ("ctrl_c_ends_a_setsid_grandchild_auto", || ctrl_c("auto", 1)),
    ("ctrl_c_ends_a_setsid_grandchild_process_groups", || {
        ctrl_c("process-groups", 2)
    }),
    ("kill_9_guardian_ends_a_setsid_grandchild_auto", || {
        kill_9("auto", 3)
    }),
    (
        "kill_9_guardian_ends_a_setsid_grandchild_process_groups",
        || kill_9("process-groups", 4),
    ),
];

fn main() {
    nerve_launch::run_guardian_if_requested();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(LAUNCHER_ARG) {
        std::process::exit(launcher(&args[1..]));
    }
    if args.iter().any(|a| a == "--list") {
        for (name, _) in TESTS {
            println!("{name}: test");
        }
        return;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let chosen: Vec<&Test> = TESTS
        .iter()
        .filter(|(n, _)| filters.is_empty() || filters.iter().any(|f| n.contains(f.as_str())))
        .collect();
    println!("\nrunning {} tests", chosen.len());
    let mut failed = Vec::new();
    for (name, f) in chosen {
        let ok = std::panic::catch_unwind(f).is_ok();
        println!("test {name} ... {}", if ok { "ok" } else { "FAILED" });
        if !ok {
            failed.push(*name);
        }
    }
    if failed.is_empty() {
        println!("\ntest result: ok");
    } else {
        println!("\nfailures: {failed:?}\ntest result: FAILED");
        std::process::exit(1);
    }
}

/// The launcher (this binary with [`LAUNCHER_ARG`]): `FILE MODE`; prints its containment
/// to stdout, runs until SIGINT, exits 0 on success.
fn launcher(args: &[String]) -> i32 {
    use nerve_launch::{Containment, Event, Guardian, LaunchFile, Output, StartOptions};
    nerve::shutdown::install();
    let (Some(file), Some(mode)) = (args.first(), args.get(1)) else {
        eprintln!("usage: {LAUNCHER_ARG} FILE MODE");
        return 2;
    };
    let plan = match LaunchFile::load(file, &[] as &[(&str, &str)]) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let cfg = match nerve::Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let mut o = StartOptions::new(cfg);
    o.output = Output::Prefixed;
    o.handle_signals = true;
    o.guardian = Guardian::CurrentExe;
    o.on_event = Some(Arc::new(|e: &Event| eprintln!("launch: {e}")));
    o.containment = match mode.as_str() {
        "auto" => Containment::Auto,
        "cgroup" => Containment::Cgroup,
        _ => Containment::ProcessGroups,
    };
    let running = match plan.start(o) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    println!("mode: {}", running.containment());
    let report = running.wait();
    eprintln!("launch: done: {}", report.reason);
    if report.success {
        0
    } else {
        1
    }
}

/// A domain, a directory and two sleep durations of this test's own.
struct Case {
    domain: u32,
    dir: PathBuf,
    /// The setsid'd grandchild's `sleep` argument.
    escaped: String,
    /// The double-forked daemon's `sleep` argument.
    daemon: String,
    /// The child's own `sleep` argument.
    child: String,
}

impl Case {
    fn new(n: u32) -> Case {
        let pid = std::process::id();
        let domain = 980 + n;
        let dir = std::env::temp_dir().join(format!("nerve-containment-{pid}-{n}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Case {
            domain,
            dir,
            // unique to this test and run: found in /proc by their command lines
            escaped: format!("4242{n}{:06}", pid % 1_000_000),
            daemon: format!("4141{n}{:06}", pid % 1_000_000),
            child: format!("4343{n}{:06}", pid % 1_000_000),
        }
    }

    fn config(&self) -> nerve::Config {
        nerve::Config::default()
            .domain(self.domain)
            .unwrap()
            .state_dir(self.dir.join("state/"))
    }

    /// Starts the launcher of the setsid file.
    fn launch(&self, mode: &str) -> Launcher {
        let file = self.dir.join("escape.launch.toml");
        std::fs::write(
            &file,
            format!(
                r#"
shutdown = {{ sigint = "300ms", sigterm = "300ms" }}
[[process]]
name = "escaper"
cmd = ["sh", "-c", "setsid sleep {} & (setsid sleep {} &); sleep {}"]
"#,
                self.escaped, self.daemon, self.child
            ),
        )
        .unwrap();
        let mut c = Command::new("/proc/self/exe");
        c.arg(LAUNCHER_ARG)
            .arg(&file)
            .arg(mode)
            .env("NERVE_DOMAIN", self.domain.to_string())
            .env("NERVE_STATE_DIR", self.dir.join("state/"))
            .env_remove("NERVE_CONFIG")
            .env_remove("NERVE_NAMESPACE")
            .env_remove("NERVE_REMAP")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Launcher::new(c.spawn().expect("spawn the launcher"))
    }

    /// Processes running `sleep ARG` (zombies excluded).
    fn sleeping(&self, arg: &str) -> Vec<i32> {
        sleepers(arg)
    }

    /// Every sleep of the test still running, by role.
    fn running(&self) -> Vec<(&'static str, i32)> {
        let mut out = Vec::new();
        for (role, arg) in [
            ("escaped", &self.escaped),
            ("daemon", &self.daemon),
            ("child", &self.child),
        ] {
            out.extend(self.sleeping(arg).into_iter().map(|p| (role, p)));
        }
        out
    }

    /// Kills what this test left: the sleeps, found by their unique arguments.
    fn kill_leftovers(&self) {
        for arg in [&self.escaped, &self.daemon, &self.child] {
            for p in sleepers(arg) {
                // SAFETY: kill with plain integers; the pid runs our unique command line.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
        }
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        self.kill_leftovers();
        let _ = nerve::introspect::clean(&self.config());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Live processes whose command line is `sleep ARG`.
fn sleepers(arg: &str) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let parts: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
        let is_sleep = parts
            .first()
            .is_some_and(|p| p.ends_with(b"sleep") && parts.get(1) == Some(&arg.as_bytes()));
        if is_sleep && alive(pid) {
            out.push(pid);
        }
    }
    out
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

/// Waits (bounded) until `f` holds; whether it did.
fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The launcher with its output collected (stderr lines prefixed `E `); SIGKILLed on drop.
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

    fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// The line starting `mode: ` (waits for it, bounded).
    fn mode(&self) -> String {
        let mut mode = String::new();
        wait_until(T, || {
            let l = self.lines.lock().unwrap();
            match l.iter().find_map(|l| l.strip_prefix("mode: ")) {
                Some(m) => {
                    mode = m.to_string();
                    true
                }
                None => false,
            }
        });
        mode
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill with plain integers: our own child.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }

    /// Waits for the launcher to exit (bounded; killed after that): its exit code.
    fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(100)); // the readers drain
                return Some(s.code().unwrap_or(-1));
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the setsid launch in `mode` and waits until both sleeps run; checks the mode
/// it reports.
fn start(c: &Case, mode: &str) -> (Launcher, String) {
    let l = c.launch(mode);
    let up = wait_until(T, || c.running().len() == 3);
    assert!(up, "the sleeps did not start:\n{}", l.output());
    let reported = l.mode();
    (l, reported)
}

/// Checks the mode the launcher reported for `mode`; the launch's cgroup, if any.
fn check_mode(mode: &str, reported: &str, out: &str) -> Option<PathBuf> {
    eprintln!("  {mode}: {reported}");
    if mode == "process-groups" {
        assert_eq!(reported, "process groups + subreaper (asked for)", "{out}");
        return None;
    }
    if let Some(p) = reported.strip_prefix("cgroup ") {
        let p = PathBuf::from(p);
        assert!(p.join("cgroup.procs").is_file(), "{out}");
        return Some(p);
    }
    assert!(
        reported.starts_with("process groups + subreaper ("),
        "{out}"
    );
    None
}

/// Waits (bounded) until the launch's cgroup (if any) is removed.
fn cgroup_removed(cg: Option<&Path>) -> bool {
    wait_until(Duration::from_secs(10), || cg.is_none_or(|p| !p.exists()))
}

/// Ctrl-C (SIGINT to the launcher) ends the child and its setsid'd grandchild.
fn ctrl_c(mode: &str, n: u32) {
    let c = Case::new(n);
    let (mut l, reported) = start(&c, mode);
    let cg = check_mode(mode, &reported, &l.output());
    l.signal(libc::SIGINT);
    let code = l.wait(T);
    let gone = wait_until(Duration::from_secs(10), || c.running().is_empty());
    let out = l.output();
    assert!(
        gone,
        "after Ctrl-C: still running: {:?}\n{out}",
        c.running()
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(cgroup_removed(cg.as_deref()), "{cg:?} left\n{out}");
}

/// `kill -9` of the launcher: the guardian ends the child and its setsid'd grandchild.
fn kill_9(mode: &str, n: u32) {
    let c = Case::new(n);
    let (mut l, reported) = start(&c, mode);
    let cg = check_mode(mode, &reported, &l.output());
    l.signal(libc::SIGKILL);
    let _ = l.wait(T);
    // the guardian: SIGTERM, SIGKILL after 2 s, then gone
    let gone = wait_until(Duration::from_secs(15), || c.running().is_empty());
    let out = l.output();
    assert!(
        gone,
        "after kill -9: still running: {:?}\n{out}",
        c.running()
    );
    assert!(cgroup_removed(cg.as_deref()), "{cg:?} left\n{out}");
}
