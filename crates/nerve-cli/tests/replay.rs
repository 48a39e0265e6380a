//! `nerve replay` end to end with the example perception pipeline (`replay_pipeline`, a
//! binary of the examples crate: `cargo build -p nerve-examples --bin replay_pipeline`
//! builds it next to `nerve`): the same outputs under load and from one or three
//! processes, no loss behind a slow node where real-time play loses, a crash named, and
//! `--check` naming the first difference.
//!
//! Every child process runs under a bound (killed past it) and no assertion depends on
//! timing.

use nerve::{Config, Context, Qos};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NERVE: &str = env!("CARGO_BIN_EXE_nerve");
/// The longest one replay (or one bag command) may take before the test fails.
const BOUND: Duration = Duration::from_secs(180);

/// The example pipeline, built next to the CLI.
fn pipeline() -> PathBuf {
    let p = Path::new(NERVE).with_file_name("replay_pipeline");
    assert!(
        p.exists(),
        "build the example pipeline first (cargo build -p nerve-examples --bin \
         replay_pipeline; cargo test --workspace builds it): {} is missing",
        p.display()
    );
    p
}

/// A scratch directory of one test (also its Nerve state directory), removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("nerve-replay-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    fn state(&self) -> PathBuf {
        self.0.join("state")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// What a bounded command gave.
#[derive(Debug)]
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn reader(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Asks a child to stop (SIGTERM: `nerve replay` then stops its nodes), kills it after 5 s.
fn terminate(child: &mut Child) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Runs `cmd` to its end, failing the test if it takes longer than `bound`.
fn run_bounded(cmd: &mut Command, bound: Duration) -> Out {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let out = reader(child.stdout.take().unwrap());
    let err = reader(child.stderr.take().unwrap());
    let end = Instant::now() + bound;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() >= end {
            terminate(&mut child);
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    let Some(status) = status else {
        panic!("{cmd:?} ran longer than {bound:?}\nstdout: {stdout}\nstderr: {stderr}");
    };
    Out {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr,
    }
}

/// The CLI in `state`, outside any domain the environment names (`nerve replay` picks a
/// free one).
fn nerve(state: &Path) -> Command {
    let mut c = Command::new(NERVE);
    c.env("NERVE_STATE_DIR", state)
        .env_remove("NERVE_CONFIG")
        .env_remove("NERVE_DOMAIN")
        .env_remove("NERVE_LOCKSTEP")
        .env_remove("NERVE_SIM_TIME")
        .env_remove("NERVE_NETWORK");
    c
}

/// Writes the input bag with the pipeline's `gen-bag`.
fn gen_bag(s: &Scratch, name: &str, seconds: f64, scan_hz: f64, odom_hz: f64) -> PathBuf {
    let bag = s.path(name);
    let out = run_bounded(
        Command::new(pipeline())
            .arg("gen-bag")
            .arg(&bag)
            .args(["--seconds", &seconds.to_string()])
            .args(["--scan-hz", &scan_hz.to_string()])
            .args(["--odom-hz", &odom_hz.to_string()]),
        BOUND,
    );
    assert_eq!(out.code, 0, "gen-bag: {out:?}");
    bag
}

/// A launch file starting the three nodes as processes of their own, each with its
/// extra flags.
fn three_processes(
    s: &Scratch,
    name: &str,
    filter: &[&str],
    detector: &[&str],
    fuser: &[&str],
) -> PathBuf {
    let exe = pipeline();
    let mut text = String::from("# the replay pipeline, one process per node\n");
    for (role, extra) in [("filter", filter), ("detector", detector), ("fuser", fuser)] {
        let mut cmd = vec![
            format!("{:?}", exe.display().to_string()),
            format!("{role:?}"),
        ];
        cmd.extend(extra.iter().map(|a| format!("{a:?}")));
        text.push_str(&format!(
            "\n[[process]]\nname = \"{role}\"\ncmd = [{}]\n",
            cmd.join(", ")
        ));
    }
    let path = s.path(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `nerve replay BAG [extra...] -- nodes...`, bounded.
fn replay(s: &Scratch, bag: &Path, extra: &[&str], nodes: &[&str]) -> Out {
    run_bounded(
        nerve(&s.state())
            .arg("replay")
            .arg(bag)
            .args(extra)
            .arg("--")
            .args(nodes),
        BOUND,
    )
}

/// Replays and expects success; returns the report.
fn replay_ok(s: &Scratch, bag: &Path, output: &Path, report: &Path, nodes: &[&str]) -> Value {
    let out = replay(
        s,
        bag,
        &[
            "-o",
            output.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
        nodes,
    );
    assert_eq!(out.code, 0, "nerve replay failed: {out:#?}");
    let text = std::fs::read_to_string(report).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("report {text}: {e}"))
}

/// Messages and digest per topic of a bag.
fn digests(bag: &Path) -> BTreeMap<String, (u64, String)> {
    nerve_bag::compare::digest(bag)
        .unwrap_or_else(|e| panic!("digest of {}: {e}", bag.display()))
        .into_iter()
        .map(|d| (d.topic, (d.messages, d.sha256)))
        .collect()
}

fn count(d: &BTreeMap<String, (u64, String)>, topic: &str) -> u64 {
    d.get(topic).map_or(0, |(n, _)| *n)
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Two threads that keep the CPUs busy until dropped.
struct CpuHog {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<u64>>,
}

impl CpuHog {
    fn start(n: usize) -> CpuHog {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|i| {
                let stop = stop.clone();
                std::thread::Builder::new()
                    .name(format!("cpu-hog-{i}"))
                    .spawn(move || {
                        let mut x = i as u64 + 1;
                        while !stop.load(Ordering::Relaxed) {
                            for _ in 0..10_000 {
                                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                            }
                            std::hint::black_box(x);
                        }
                        x
                    })
                    .unwrap()
            })
            .collect();
        CpuHog { stop, threads }
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[test]
fn two_replays_under_load_give_identical_outputs() {
    let s = Scratch::new("load");
    let bag = gen_bag(&s, "in.mcap", 3.0, 20.0, 50.0);
    let launch = three_processes(&s, "pipeline.launch.toml", &[], &[], &[]);
    let nodes = [path_str(&launch)];
    let hog = CpuHog::start(2);
    let (a, b) = (s.path("a.mcap"), s.path("b.mcap"));
    let ra = replay_ok(&s, &bag, &a, &s.path("a.json"), &nodes);
    let rb = replay_ok(&s, &bag, &b, &s.path("b.json"), &nodes);
    let (da, db) = (digests(&a), digests(&b));
    assert_eq!(da, db, "two replays of one bag differ");
    assert_eq!(
        count(&da, "/filtered"),
        60,
        "one filtered scan per scan: {da:?}"
    );
    assert!(count(&da, "/detections") > 0, "{da:?}");
    assert!(count(&da, "/fused") > 0, "{da:?}");
    for played in ["/scan", "/odom"] {
        assert!(
            !da.contains_key(played),
            "the played {played} is not recorded: {da:?}"
        );
    }
    assert_eq!(ra["digests"], rb["digests"], "{ra}\n{rb}");
    let out = replay(&s, &bag, &["--check", path_str(&a)], &nodes);
    drop(hog);
    assert_eq!(out.code, 0, "--check against the first replay: {out:#?}");
    // the report says what the output bag holds, digests as `nerve bag digest` gives them
    assert_eq!(ra["messages"], 210, "{ra}");
    for (topic, (n, sha)) in &da {
        assert_eq!(ra["outputs"][topic], *n, "{topic}: {ra}");
        assert_eq!(
            ra["digests"][topic],
            sha.as_str(),
            "{topic}: the report's digest is not the output bag's (nerve bag digest): {ra}"
        );
    }
}

/// A domain nobody in this host uses now (no shared memory of it), for a pipeline run by
/// hand.
fn quiet_domain() -> u32 {
    let names: Vec<String> = std::fs::read_dir("/dev/shm")
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let start = std::process::id() % 60;
    (0..60)
        .map(|i| 900 + (start + i) % 60)
        .find(|d| {
            let prefix = format!("nerve{d}_");
            !names
                .iter()
                .any(|n| n.starts_with(&prefix) || *n == format!("nerve_lockstep{d}"))
        })
        .expect("a free domain between 900 and 959")
}

/// A child process killed (SIGTERM, then SIGKILL) when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        terminate(&mut self.0);
    }
}

#[test]
fn real_time_play_loses_messages_a_slow_node_and_lockstep_loses_none() {
    let s = Scratch::new("slow");
    let bag = gen_bag(&s, "in.mcap", 2.0, 100.0, 50.0);
    let scans = count(&digests(&bag), "/scan");
    assert_eq!(scans, 200);
    let slow_filter = ["--slow-ms", "30", "--depth", "2"];
    let depth = ["--depth", "2"];

    // (i) real time: the pipeline in simulation time, the bag played on its timing
    let domain = quiet_domain();
    let state = s.state();
    // a counter of /filtered with a deep queue, subscribed before the filter exists
    let received = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let counter = {
        let (received, stop, state) = (received.clone(), stop.clone(), state.clone());
        std::thread::spawn(move || {
            let cfg = Config::default().domain(domain).unwrap().state_dir(&state);
            let ctx = Context::new(cfg).unwrap();
            let node = ctx.node("filtered_counter").create().unwrap();
            let sub = node
                .subscriber::<nerve_msgs::LaserScan>("/filtered")
                .qos(Qos::sensor().depth(Qos::GUARANTEED_DEPTH))
                .create()
                .unwrap();
            ready_tx.send(()).unwrap();
            while !stop.load(Ordering::SeqCst) {
                if let Ok(Some(_)) = sub.recv_timeout(Duration::from_millis(50)) {
                    received.fetch_add(1, Ordering::SeqCst);
                }
            }
            while let Ok(Some(_)) = sub.try_recv() {
                received.fetch_add(1, Ordering::SeqCst);
            }
            sub.stats().lost
        })
    };
    ready
        .recv_timeout(Duration::from_secs(30))
        .expect("the counter subscribed");
    let start = |role: &str, extra: &[&str]| {
        Running(
            Command::new(pipeline())
                .arg(role)
                .args(extra)
                .env("NERVE_DOMAIN", domain.to_string())
                .env("NERVE_STATE_DIR", &state)
                .env("NERVE_SIM_TIME", "1")
                .env_remove("NERVE_LOCKSTEP")
                .env_remove("NERVE_CONFIG")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    let nodes = [
        start("filter", &slow_filter),
        start("detector", &depth),
        start("fuser", &depth),
    ];
    let play = run_bounded(
        nerve(&state)
            .env("NERVE_DOMAIN", domain.to_string())
            .arg("bag")
            .arg("play")
            .arg(&bag)
            .args([
                "--clock",
                "100",
                "--wait-subscribers",
                "30",
                "--format",
                "json",
            ]),
        BOUND,
    );
    assert_eq!(play.code, 0, "nerve bag play: {play:#?}");
    let played: Value = serde_json::from_str(play.stdout.trim()).expect("play's JSON report");
    assert_eq!(played["published"]["/scan"], scans, "{played}");
    // the filter works through what its queue still holds (at most 2 scans)
    std::thread::sleep(Duration::from_millis(500));
    drop(nodes);
    stop.store(true, Ordering::SeqCst);
    let counter_lost = counter.join().unwrap();
    let filtered = received.load(Ordering::SeqCst);
    assert_eq!(counter_lost, 0, "the counter itself kept up");
    assert!(filtered > 0, "the filter ran");
    assert!(
        filtered < scans,
        "a 30 ms filter with a queue of 2 keeps up with 100 scans a second? {filtered} of {scans}"
    );

    // (ii) lockstep: the same pipeline loses nothing
    let launch = three_processes(&s, "slow.launch.toml", &slow_filter, &depth, &depth);
    let report = replay_ok(
        &s,
        &bag,
        &s.path("lockstep.mcap"),
        &s.path("lockstep.json"),
        &[path_str(&launch)],
    );
    assert_eq!(report["outputs"]["/filtered"], scans, "{report}");
    assert_eq!(report["messages"], scans + 100, "{report}");
    eprintln!("real-time play: {filtered} of {scans} scans filtered; lockstep: all {scans}");
}

/// Checks the failure of a replay whose node crashed.
fn assert_names_the_crash(out: &Out) {
    assert_ne!(out.code, 0, "the replay went on past a crash: {out:#?}");
    let err = out.stderr.to_lowercase();
    assert!(
        err.contains("replay_pipeline"),
        "the error names the process: {}",
        out.stderr
    );
    assert!(
        err.contains("ended") || err.contains("exited"),
        "the error says it ended: {}",
        out.stderr
    );
}

#[test]
fn a_crashing_node_ends_the_replay_naming_it() {
    let s = Scratch::new("crash");
    let bag = gen_bag(&s, "in.mcap", 3.0, 20.0, 50.0);
    // one process of three crashes
    let launch = three_processes(&s, "crash.launch.toml", &[], &["--crash-after", "5"], &[]);
    let out = replay(
        &s,
        &bag,
        &["-o", path_str(&s.path("a.mcap"))],
        &[path_str(&launch)],
    );
    assert_names_the_crash(&out);
    // the only process crashes
    let exe = pipeline();
    let out = replay(
        &s,
        &bag,
        &[],
        &[path_str(&exe), "all", "--crash-after", "5"],
    );
    assert_names_the_crash(&out);
}

#[test]
fn check_reports_the_first_difference() {
    let s = Scratch::new("check");
    let bag = gen_bag(&s, "in.mcap", 2.0, 20.0, 50.0);
    let base = three_processes(&s, "base.launch.toml", &[], &[], &[]);
    let expected = s.path("expected.mcap");
    replay_ok(
        &s,
        &bag,
        &expected,
        &s.path("expected.json"),
        &[path_str(&base)],
    );
    // the fuser's gain changes the score of every target, and nothing else
    let changed = three_processes(&s, "gain.launch.toml", &[], &[], &["--gain", "2.0"]);
    let out = replay(
        &s,
        &bag,
        &["--check", path_str(&expected)],
        &[path_str(&changed)],
    );
    assert_eq!(out.code, 1, "a changed output is a failed check: {out:#?}");
    let first = out
        .stderr
        .lines()
        .find(|l| l.contains("/fused"))
        .unwrap_or_else(|| panic!("the difference names the topic: {}", out.stderr));
    assert!(
        first.contains("/fused message 0"),
        "topic and index: {first}"
    );
    assert!(first.contains("targets[0].score"), "the field: {first}");
    assert!(
        first.contains("got ") && first.contains("expected "),
        "{first}"
    );
    // ignoring that field (on that topic, or everywhere), the outputs are the same
    for ignore in ["/fused:targets.score", "targets[].score"] {
        let out = replay(
            &s,
            &bag,
            &["--check", path_str(&expected), "--ignore", ignore],
            &[path_str(&changed)],
        );
        assert_eq!(out.code, 0, "--ignore {ignore}: {out:#?}");
    }
}

#[test]
fn multi_threaded_and_single_process_pipelines_match() {
    let s = Scratch::new("threads");
    let bag = gen_bag(&s, "in.mcap", 3.0, 20.0, 50.0);
    let launch = three_processes(&s, "pipeline.launch.toml", &[], &[], &[]);
    let exe = pipeline();
    let exe = path_str(&exe);
    // three processes of a shell, outside any launch
    let shell = format!("'{exe}' filter & '{exe}' detector & '{exe}' fuser & wait");
    let mut runs = Vec::new();
    for (name, nodes) in [
        ("three", vec![path_str(&launch)]),
        ("shell", vec!["sh", "-c", &shell]),
        ("one", vec![exe, "all"]),
        ("two_threads", vec![exe, "all", "--threads", "2"]),
    ] {
        let out = s.path(&format!("{name}.mcap"));
        replay_ok(&s, &bag, &out, &s.path(&format!("{name}.json")), &nodes);
        runs.push((name, digests(&out)));
    }
    let (_, three) = &runs[0];
    assert!(
        count(three, "/detections") > 0 && count(three, "/fused") > 0,
        "{three:?}"
    );
    for (name, d) in &runs[1..] {
        assert_eq!(d, three, "{name} differs from three processes");
    }
}

/// Bad input gets a clear error naming what was wrong, never a hang: a missing bag or
/// expected bag, a bad stall timeout (usage errors, exit 2), a program that cannot start,
/// a program that never joins (it exits: named with its status), a node started with
/// NERVE_LOCKSTEP outside any replay, and a bad NERVE_SIM_TIME.
#[test]
fn bad_input_is_refused_with_what_was_wrong() {
    let s = Scratch::new("bad-input");
    let bag = gen_bag(&s, "in.mcap", 0.5, 20.0, 50.0);
    let exe = pipeline();
    let nodes = [path_str(&exe), "all"];

    let out = replay(&s, &s.path("nope.mcap"), &[], &nodes);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("nope.mcap: no such bag"), "{out:?}");

    let out = replay(
        &s,
        &bag,
        &["--check", path_str(&s.path("missing.mcap"))],
        &nodes,
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("--check") && out.stderr.contains("missing.mcap"),
        "{out:?}"
    );

    let out = replay(&s, &bag, &["--stall-timeout=0"], &nodes);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("--stall-timeout"), "{out:?}");

    let out = replay(&s, &bag, &[], &[path_str(&s.path("no-such-program"))]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("cannot start") && out.stderr.contains("no-such-program"),
        "{out:?}"
    );

    // a program that ends without ever joining: named with its exit status
    let out = replay(&s, &bag, &[], &["sh", "-c", "exit 7"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("sh exited") && out.stderr.contains('7'),
        "{out:?}"
    );

    // a node told to take part in a replay that does not run
    let out = run_bounded(
        Command::new(&exe)
            .arg("all")
            .env("NERVE_STATE_DIR", s.state())
            .env("NERVE_DOMAIN", quiet_domain().to_string())
            .env("NERVE_LOCKSTEP", "1"),
        BOUND,
    );
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("no replay runs in domain"), "{out:?}");

    let out = run_bounded(
        Command::new(&exe)
            .arg("all")
            .env("NERVE_STATE_DIR", s.state())
            .env("NERVE_SIM_TIME", "sometimes"),
        BOUND,
    );
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("NERVE_SIM_TIME"), "{out:?}");
}

/// SIGTERM stops a replay in progress (behind a slow node) and its nodes: exit 130, no
/// node process left, no lockstep segment left.
#[test]
fn sigterm_stops_a_replay_and_its_nodes() {
    let s = Scratch::new("sigterm");
    let bag = gen_bag(&s, "in.mcap", 20.0, 20.0, 50.0);
    let exe = pipeline();
    let mut child = nerve(&s.state())
        .arg("replay")
        .arg(&bag)
        .args([
            "--",
            path_str(&exe),
            "all",
            "--slow",
            "filter",
            "--slow-ms",
            "50",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = reader(child.stderr.take().unwrap());
    let _out = reader(child.stdout.take().unwrap());
    // the nodes: the replay's child process
    let give_up = Instant::now() + BOUND;
    let node_pid = loop {
        let pids = children_of(child.id());
        if !pids.is_empty() || Instant::now() >= give_up {
            break pids;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!node_pid.is_empty(), "the nodes never started");
    std::thread::sleep(Duration::from_secs(2)); // replaying, slowly
                                                // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let end = Instant::now() + BOUND;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < end, "nerve replay did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = err.join().unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    for pid in node_pid {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|st| st.contains(") Z")),
            "node process {pid} still runs"
        );
    }
    let left: Vec<_> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("nerve_lockstep"))
        .filter(|n| {
            // only segments of replays this test started: their player is gone
            n.trim_start_matches("nerve_lockstep")
                .parse::<u32>()
                .is_ok_and(|d| (500..900).contains(&d))
        })
        .collect();
    // another test's replay may be running; ours is gone once no process holds it
    for name in left {
        let path = format!("/dev/shm/{name}");
        let held = std::fs::File::open(&path).is_ok_and(|f| {
            use std::os::fd::AsRawFd;
            // SAFETY: flock(2) on a file we own the descriptor of.
            let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            r != 0
        });
        assert!(held, "{path} was left behind by a stopped replay");
    }
}

/// Child processes of `parent` (from /proc/*/stat).
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // the parent pid is the second field after the ")" ending the command name
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
                st.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(parent)
            })
        })
        .collect()
}
