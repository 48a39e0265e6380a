//! The launch rows of `nerve bench control`: 20 processes to all-ready and back down,
//! timed, through `nerve-launch` as `nerve launch` runs them.
//!
//! - **Start-up:** 20 real Nerve processes (`bench role launch-node`: a node and a
//!   publisher, ready when the publisher exists), started in parallel, timed from
//!   `start` until every readiness condition holds; beside it, one such process alone
//!   (its own start-up: exec, dynamic linking, the node's shared memory).
//! - **Shutdown, well behaved:** SIGINT to every process group; timed until every group
//!   is empty.
//! - **Shutdown, misbehaving:** 20 shell processes that ignore SIGINT and SIGTERM, each
//!   with a child of its own (a grandchild of the launcher): SIGINT, SIGTERM after 300 ms,
//!   SIGKILL after 300 ms more. Afterwards no pid of either run may be alive.

use crate::report::{num, Section, Verdict};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SUITE: &str = "control";

/// One launch measurement.
#[derive(Clone, Debug, Serialize)]
pub struct LaunchRow {
    suite: &'static str,
    kind: &'static str,
    /// Processes launched.
    pub processes: usize,
    /// One process alone, start to ready (median of the runs), ms.
    pub single_ready_ms: f64,
    /// All processes, start to all ready, ms.
    pub all_ready_ms: f64,
    /// Well-behaved shutdown (SIGINT), until every group was empty, ms.
    pub shutdown_ms: f64,
    /// The SIGINT timeout of that run, ms.
    pub sigint_timeout_ms: f64,
    /// Misbehaving shutdown (SIGINT, SIGTERM, SIGKILL), until every group was empty, ms.
    pub escalated_shutdown_ms: f64,
    /// SIGINT + SIGTERM timeouts of that run plus 100 ms for SIGKILL to act, ms.
    pub escalation_budget_ms: f64,
    /// Processes ended by SIGKILL in the misbehaving run.
    pub killed: usize,
    /// Pids (children and grandchildren) alive after both shutdowns.
    pub left_behind: usize,
}

/// `bench role launch-node`: a node with a publisher on `topic`, until SIGINT or SIGTERM.
pub fn run_launch_node(topic: &str) -> Result<(), String> {
    nerve::shutdown::install();
    let ctx = nerve::Context::from_env().map_err(|e| e.to_string())?;
    let node = ctx
        .node("launch_node")
        .create()
        .map_err(|e| e.to_string())?;
    let _publisher = node
        .publisher::<nerve_msgs::CmdVel>(topic)
        .create()
        .map_err(|e| e.to_string())?;
    while !nerve::shutdown::requested() {
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// Whether `pid` is a live process. A zombie is dead: in cgroup mode the launcher is no
/// subreaper, so a killed grandchild's zombie waits for init to reap it, which
/// `kill(pid, 0)` still finds.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

/// Writes a launch file of `n` processes and loads it.
fn plan(dir: &Path, name: &str, body: String) -> Result<nerve_launch::Plan, String> {
    let f = dir.join(name);
    std::fs::write(&f, body).map_err(|e| format!("{}: {e}", f.display()))?;
    nerve_launch::LaunchFile::load::<&str, &str>(&f, &[]).map_err(|e| e.to_string())
}

fn nodes_file(nerve: &Path, n: usize) -> String {
    let mut s = String::from("shutdown = { sigint = \"5s\", sigterm = \"2s\" }\n");
    for i in 0..n {
        s.push_str(&format!(
            "[[process]]\nname = \"n{i}\"\ncmd = [{:?}, \"bench\", \"role\", \"launch-node\", \"/bench_launch/n{i}\"]\nready = {{ topic = \"/bench_launch/n{i}\" }}\n",
            nerve.display().to_string()
        ));
    }
    s
}

fn stubborn_file(n: usize) -> String {
    let mut s = String::from("shutdown = { sigint = \"300ms\", sigterm = \"300ms\" }\n");
    for i in 0..n {
        s.push_str(&format!(
            "[[process]]\nname = \"s{i}\"\ncmd = [\"sh\", \"-c\", \"trap '' INT TERM; sleep 600 & echo ready; wait\"]\nready = {{ line = \"ready\" }}\n"
        ));
    }
    s
}

/// Runs the launch measurements with `nerve` as the node executable, in `domain`.
pub fn measure(nerve: &Path, domain: u32, n: usize, singles: usize) -> Result<LaunchRow, String> {
    let cfg = nerve::Config::from_env()
        .and_then(|c| c.domain(domain))
        .map_err(|e| e.to_string())?;
    let dir: PathBuf =
        std::env::temp_dir().join(format!("nerve-bench-launch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let opts = || {
        let mut o = nerve_launch::StartOptions::new(cfg.clone());
        o.output = nerve_launch::Output::Discard;
        o
    };
    let timeout = Duration::from_secs(60);
    let mut pids = Vec::new();
    // one process alone
    let one = plan(&dir, "one.launch.toml", nodes_file(nerve, 1))?;
    let mut singles_ms = Vec::new();
    for _ in 0..singles.max(1) {
        let t0 = Instant::now();
        let r = one.start(opts()).map_err(|e| e.to_string())?;
        r.wait_ready(timeout).map_err(|e| e.to_string())?;
        singles_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        pids.extend(r.pids().into_iter().filter_map(|(_, p)| p));
        r.shutdown();
    }
    singles_ms.sort_by(f64::total_cmp);
    let single_ready_ms = singles_ms[singles_ms.len() / 2];
    // all of them
    let many = plan(&dir, "many.launch.toml", nodes_file(nerve, n))?;
    let t0 = Instant::now();
    let r = many.start(opts()).map_err(|e| e.to_string())?;
    r.wait_ready(timeout).map_err(|e| e.to_string())?;
    let all_ready_ms = t0.elapsed().as_secs_f64() * 1e3;
    pids.extend(r.pids().into_iter().filter_map(|(_, p)| p));
    let t0 = Instant::now();
    let report = r.shutdown();
    let shutdown_ms = t0.elapsed().as_secs_f64() * 1e3;
    if let Some(p) = report.escalated().next() {
        return Err(format!("{} needed {:?} to stop", p.name, p.ended_by));
    }
    // misbehaving ones
    let stubborn = plan(&dir, "stubborn.launch.toml", stubborn_file(n))?;
    let r = stubborn.start(opts()).map_err(|e| e.to_string())?;
    r.wait_ready(timeout).map_err(|e| e.to_string())?;
    pids.extend(r.pids().into_iter().filter_map(|(_, p)| p));
    // the grandchildren (`sleep 600`) too
    for p in r.pids().into_iter().filter_map(|(_, p)| p) {
        if let Ok(text) = std::fs::read_to_string(format!("/proc/{p}/task/{p}/children")) {
            pids.extend(
                text.split_whitespace()
                    .filter_map(|s| s.parse::<u32>().ok()),
            );
        }
    }
    let t0 = Instant::now();
    let report = r.shutdown();
    let escalated_shutdown_ms = t0.elapsed().as_secs_f64() * 1e3;
    let killed = report
        .processes
        .iter()
        .filter(|p| matches!(p.ended_by, nerve_launch::EndedBy::Sigkill))
        .count();
    let left_behind = pids.iter().filter(|&&p| alive(p)).count();
    let _ = nerve::introspect::clean(&cfg);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(LaunchRow {
        suite: SUITE,
        kind: "launch",
        processes: n,
        single_ready_ms,
        all_ready_ms,
        shutdown_ms,
        sigint_timeout_ms: 5000.0,
        escalated_shutdown_ms,
        // the two timeouts, and 100 ms for SIGKILL to take effect and the groups to empty
        escalation_budget_ms: 300.0 + 300.0 + 100.0,
        killed,
        left_behind,
    })
}

/// The launch targets, judged on `row`, or every one not met with the reason the launch
/// measurement did not run.
pub fn launch_checks(row: Result<&LaunchRow, &str>) -> Vec<Verdict> {
    let value = |f: fn(&LaunchRow) -> f64| row.map(|r| Some(f(r))).map_err(str::to_string);
    let sigint = row.map_or("–".to_string(), |r| r.sigint_timeout_ms.to_string());
    let budget = row.map_or(0.0, |r| r.escalation_budget_ms);
    vec![
        Verdict::judged(
            SUITE,
            "20 processes all ready within 1 s plus one process's own start-up (ms over it)",
            "nerve bench role launch-node x20, ready = topic has a publisher",
            value(|r| r.all_ready_ms - r.single_ready_ms),
            |v| v <= 1000.0,
        ),
        Verdict::judged(
            SUITE,
            "well-behaved shutdown within the SIGINT timeout",
            format!("20 processes, SIGINT timeout {sigint} ms"),
            value(|r| r.shutdown_ms),
            |v| v <= 5000.0,
        ),
        Verdict::judged(
            SUITE,
            "misbehaving shutdown within SIGINT + SIGTERM + SIGKILL timeouts",
            "20 shells ignoring SIGINT and SIGTERM, 300 + 300 ms + 100 ms for SIGKILL",
            value(|r| r.escalated_shutdown_ms),
            move |v| v <= budget,
        ),
        Verdict::judged(
            SUITE,
            "nothing left behind",
            "children and grandchildren of both runs",
            value(|r| r.left_behind as f64),
            |v| v == 0.0,
        ),
    ]
}

/// The launch table and its checks.
pub fn section(s: &mut Section, row: &LaunchRow, checks: &mut Vec<Verdict>) {
    s.table(
        Some("Launch: 20 Nerve processes to all-ready, and shutdown"),
        &[
            "processes",
            "one alone: ready ms",
            "all ready ms",
            "shutdown ms (SIGINT)",
            "escalated shutdown ms",
            "budget ms",
            "killed",
            "left behind",
        ],
        &[vec![
            row.processes.to_string(),
            num(row.single_ready_ms),
            num(row.all_ready_ms),
            num(row.shutdown_ms),
            num(row.escalated_shutdown_ms),
            num(row.escalation_budget_ms),
            row.killed.to_string(),
            row.left_behind.to_string(),
        ]],
    );
    checks.extend(launch_checks(Ok(row)));
}
