//! `nerve bench replay`: deterministic replay (issue 33), measured in child processes.
//!
//! - **Lockstep cost per message**: an echo node in a child process (an executor callback
//!   that republishes each message of `/in` on `/out`) and a player here. Free play: publish
//!   one message, wait for its echo, next (a ping-pong: as fast as the echo keeps up, no
//!   loss). Lockstep: the same messages through the domain's replay segment
//!   ([`Lockstep`]): publish from a context with `Config::lockstep`, `wait_quiet` until the
//!   echo's callback returned, take the echo. Each message timed on its own; free and
//!   lockstep take turns in rounds against a drifting VM. Overhead = lockstep - free.
//! - **Replay throughput**: a bag of lidar-like clouds (`/scan`, 10 Hz) and odometry
//!   (`/odom`) recorded here at real time by nerve-bag's recorder, replayed in lockstep
//!   (nerve-bag's player paced by the lockstep: no sleeps, every message waits for every
//!   callback it set off) through a pipeline of two executor processes: filter (`/scan` ->
//!   `/filtered`) and detector + fuser (`/filtered` -> `/detections`, `/odom` and a 10 Hz
//!   timer in simulation time -> `/fused`). Messages/s and bag seconds per wall second.
//! - **Determinism under load**: the same replay again and again with a CPU hog spinning
//!   on every core, the outputs digested here (SHA-256 of each output topic's payloads in
//!   order, each preceded by its length, as `nerve bag digest` does) and compared.

mod nodes;
mod options;
pub use options::ReplayOptions;

use crate::harness::child::Child;
use crate::harness::interrupt;
use crate::harness::progress;
use crate::harness::stats::{Dist, Recorder};
use crate::report::{json_rows, num, why_missing, Section, Skipped, SuiteOutput, Verdict};
use nerve::prelude::*;
use nerve::time::lockstep::Lockstep;
use nerve_bag::play::{PlayOptions, Player, Steps};
use nerve_bag::BagError;
use nerve_msgs::{CmdVel, Odometry, PointCloud, Time};
use nodes::{NodeSpec, DETECTIONS, FILTERED, FUSED, ODOM, OUTPUTS, SCAN};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SUITE: &str = "replay";
/// Longest a lockstep step may take before the replay counts as stalled.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a child may take to say `ready`.
const READY: Duration = Duration::from_secs(30);

/// The suite's settings.
#[derive(Clone, Debug)]
pub struct ReplaySuite {
    /// Whether this is the quick variant.
    pub quick: bool,
    /// Messages per mode in the lockstep cost measurement.
    pub messages: u64,
    /// Rounds the messages are split into (free and lockstep take turns).
    pub rounds: u64,
    /// Seconds of the recorded bag.
    pub bag_seconds: f64,
    /// Lidar columns per sweep.
    pub columns: usize,
    /// Lidar beams.
    pub beams: usize,
    /// Odometry rate in the bag, Hz.
    pub odom_hz: f64,
    /// Throughput replays (no load).
    pub throughput_runs: usize,
    /// Replays under load compared for determinism.
    pub determinism_runs: usize,
    /// Spinning threads of the CPU hog (0: one per CPU).
    pub hog_threads: usize,
    /// Program and leading arguments of the child roles.
    pub role_command: (PathBuf, Vec<String>),
    /// Where the bag is written (removed at the end).
    pub scratch: PathBuf,
    /// Nerve domain of the runs.
    pub domain: u32,
}

impl ReplaySuite {
    /// 20,000 messages per mode, a 20 s bag of 1024x10 OS1-16 sweeps, 3 throughput
    /// replays, 10 replays under load.
    pub fn full(role_command: (PathBuf, Vec<String>), scratch: PathBuf) -> ReplaySuite {
        ReplaySuite {
            quick: false,
            messages: 20_000,
            rounds: 10,
            bag_seconds: 20.0,
            columns: 1024,
            beams: 16,
            odom_hz: 50.0,
            throughput_runs: 3,
            determinism_runs: 10,
            hog_threads: 0,
            role_command,
            scratch,
            domain: interrupt::domain(770, 9),
        }
    }

    /// 4,000 messages per mode, a 5 s bag of 512x10 OS1-16 sweeps, 1 throughput replay, 3
    /// replays under load.
    pub fn quick(role_command: (PathBuf, Vec<String>), scratch: PathBuf) -> ReplaySuite {
        ReplaySuite {
            quick: true,
            messages: 4_000,
            rounds: 4,
            bag_seconds: 5.0,
            columns: 512,
            throughput_runs: 1,
            determinism_runs: 3,
            ..ReplaySuite::full(role_command, scratch)
        }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), String> {
        if self.messages < 10 || self.rounds == 0 || self.rounds > self.messages {
            return Err("at least 10 messages and 1 to messages rounds are needed".into());
        }
        if !(self.bag_seconds.is_finite() && (0.5..=600.0).contains(&self.bag_seconds)) {
            return Err(format!(
                "bag seconds must be 0.5 to 600, not {}",
                self.bag_seconds
            ));
        }
        if !(16..=4096).contains(&self.columns) || !(1..=128).contains(&self.beams) {
            return Err("columns must be 16 to 4096 and beams 1 to 128".into());
        }
        if !(self.odom_hz.is_finite() && (1.0..=1000.0).contains(&self.odom_hz)) {
            return Err(format!(
                "odometry rate must be 1 to 1000 Hz, not {}",
                self.odom_hz
            ));
        }
        if self.throughput_runs == 0 || self.determinism_runs < 2 {
            return Err("at least 1 throughput replay and 2 determinism replays".into());
        }
        Ok(())
    }
}

/// Per-message time of one mode of the cost measurement.
#[derive(Clone, Debug, Serialize)]
pub struct CostRow {
    suite: &'static str,
    kind: &'static str,
    /// free or lockstep.
    mode: &'static str,
    messages: u64,
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    max_us: f64,
    mean_us: f64,
}

/// The recorded bag.
#[derive(Clone, Debug, Serialize)]
pub struct BagRow {
    suite: &'static str,
    kind: &'static str,
    scans: u64,
    odoms: u64,
    messages: u64,
    bag_seconds: f64,
    cloud_bytes: usize,
    file_mb: f64,
    losses: u64,
}

/// One lockstep replay through the pipeline.
#[derive(Clone, Debug, Serialize)]
pub struct ReplayRow {
    suite: &'static str,
    /// throughput or determinism.
    kind: &'static str,
    /// The player: the bench's own pacer (per-step times, outputs counted) or
    /// `nerve_bag::replay` (what `nerve replay` runs: outputs converted and digested).
    player: &'static str,
    run: usize,
    /// Whether the CPU hog ran.
    load: bool,
    messages: u64,
    bag_seconds: f64,
    wall_seconds: f64,
    msgs_per_s: f64,
    speedup: f64,
    /// Mean wall time per message, µs.
    per_message_us: f64,
    /// One message's step (clock steps for timers due before it, publish, wait), µs (the
    /// bench's pacer only).
    step_us: Option<Dist>,
    /// Clock steps for timers.
    timer_steps: u64,
    /// Output messages per topic.
    outputs: BTreeMap<String, u64>,
    /// Output samples lost by the replay's recorder.
    outputs_lost: u64,
    /// SHA-256 per output topic (`nerve_bag::replay` only).
    digests: BTreeMap<String, String>,
    /// Same digests as the reference run (the replay without load, else the first one
    /// under load).
    identical: Option<bool>,
}

/// What one run of the suite measured.
struct Measured {
    cost: Vec<CostRow>,
    bag: Option<BagRow>,
    throughput: Vec<ReplayRow>,
    determinism: Vec<ReplayRow>,
    skipped: Vec<Skipped>,
    hog_threads: usize,
}

const COST: &str = "lockstep cost (echo)";
const BAG: &str = "lidar bag";
const THROUGHPUT: &str = "lockstep replay (throughput)";
const DETERMINISM: &str = "lockstep replay under load";
/// The players.
const PACER: &str = "bench pacer";
const LIBRARY: &str = "nerve_bag::replay";

fn context(domain: u32, lockstep: bool) -> Result<Context, String> {
    let mut cfg = nerve::Config::default()
        .domain(domain)
        .map_err(|e| e.to_string())?;
    cfg.lockstep = lockstep;
    Context::new(cfg).map_err(|e| e.to_string())
}

/// Fails once the run is being stopped (Ctrl-C): the check every lockstep wait runs.
fn not_stopping() -> Result<(), String> {
    if interrupt::stopping() {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

/// Waits up to `timeout` for `ok`.
fn wait_for(timeout: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    ok()
}

impl ReplaySuite {
    fn spawn(&self, role: &str, spec: &NodeSpec, what: &'static str) -> Result<Child, String> {
        let mut args = self.role_command.1.clone();
        args.push(role.into());
        args.push(serde_json::to_string(spec).map_err(|e| e.to_string())?);
        let env = [("NERVE_DOMAIN", self.domain.to_string())];
        let mut c =
            Child::spawn(&self.role_command.0, &args, &env, what).map_err(|e| e.to_string())?;
        c.expect("ready", READY).map_err(|e| e.to_string())?;
        Ok(c)
    }

    fn node_spec(&self, stage: &str, lockstep: bool, io: (&str, &str), subs: usize) -> NodeSpec {
        NodeSpec {
            stage: stage.into(),
            domain: self.domain,
            lockstep,
            input: io.0.into(),
            output: io.1.into(),
            wait_subscribers: subs,
        }
    }

    /// Runs every part.
    pub fn execute(&self) -> Result<SuiteOutput, String> {
        self.validate()?;
        std::fs::create_dir_all(&self.scratch)
            .map_err(|e| format!("{}: {e}", self.scratch.display()))?;
        // a plain context first: the process clock stays the system clock
        let plain = context(self.domain, false)?;
        let phases = 2 + self.throughput_runs + self.determinism_runs;
        let bar = progress(phases as u64, "phases");
        let mut skipped = Vec::new();
        let mut skip = |system: &str, reason: String| {
            skipped.push(Skipped {
                system: system.into(),
                payload_bytes: None,
                reason,
            })
        };
        bar.set_message("lockstep cost per message (echo node)");
        let cost = self.cost(&plain).unwrap_or_else(|e| {
            skip(COST, e);
            Vec::new()
        });
        bar.inc(1);
        bar.set_message(format!("recording a {} s lidar bag", self.bag_seconds));
        let file = self.scratch.join("lidar.mcap");
        let bag = match self.make_bag(&plain, &file) {
            Ok(b) => Some(b),
            Err(e) => {
                skip(BAG, e);
                None
            }
        };
        bar.inc(1);
        let mut throughput = Vec::new();
        let mut determinism = Vec::new();
        let hog_threads = match self.hog_threads {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        };
        if let Some(b) = &bag {
            for run in 1..=self.throughput_runs {
                for (library, player) in [(false, PACER), (true, LIBRARY)] {
                    bar.set_message(format!("replay {run}/{} ({player})", self.throughput_runs));
                    match self.replay(&plain, &file, b, run, library, None) {
                        Ok(r) => throughput.push(r),
                        Err(e) => skip(&format!("{THROUGHPUT} {player} run {run}"), e),
                    }
                }
                bar.inc(1);
            }
            let mut args = self.role_command.1.clone();
            args.push("replay-hog".into());
            args.push(hog_threads.to_string());
            let hog = Child::spawn(&self.role_command.0, &args, &[], "CPU hog")
                .map_err(|e| e.to_string())
                .and_then(|mut c| {
                    c.expect("ready", READY).map_err(|e| e.to_string())?;
                    Ok(c)
                });
            match hog {
                Ok(mut hog) => {
                    for run in 1..=self.determinism_runs {
                        bar.set_message(format!(
                            "replay {run}/{} under load ({hog_threads} spinning threads)",
                            self.determinism_runs
                        ));
                        match self.replay(&plain, &file, b, run, true, Some(hog_threads)) {
                            Ok(r) => determinism.push(r),
                            Err(e) => skip(&format!("{DETERMINISM} run {run}"), e),
                        }
                        bar.inc(1);
                    }
                    hog.stop();
                }
                Err(e) => skip(DETERMINISM, format!("the CPU hog did not start: {e}")),
            }
        } else {
            skip(THROUGHPUT, "no bag".into());
            skip(DETERMINISM, "no bag".into());
        }
        bar.finish_and_clear();
        let _ = std::fs::remove_dir_all(&self.scratch);
        // the reference: the library's replay without load, else the first one under load
        let reference = throughput
            .iter()
            .find(|r| r.player == LIBRARY)
            .or(determinism.first())
            .map(|r| r.digests.clone());
        if let Some(want) = reference {
            for r in &mut determinism {
                r.identical = Some(
                    r.digests == want && r.digests.len() == OUTPUTS.len() && r.outputs_lost == 0,
                );
            }
        }
        Ok(self.output(Measured {
            cost,
            bag,
            throughput,
            determinism,
            skipped,
            hog_threads,
        }))
    }

    /// Part 1: per-message time of free ping-pong and lockstep steps with one echo node.
    fn cost(&self, plain: &Context) -> Result<Vec<CostRow>, String> {
        let err = |e: &dyn std::fmt::Display| e.to_string();
        let ls = Lockstep::create(self.domain).map_err(|e| err(&e))?;
        let lctx = context(self.domain, true)?;
        let pnode = plain
            .node("replay_bench_free")
            .create()
            .map_err(|e| err(&e))?;
        let lnode = lctx
            .node("replay_bench_player")
            .create()
            .map_err(|e| err(&e))?;
        let tag = std::process::id();
        let t = |s: &str| format!("/replay_bench/{s}_{tag}");
        let (in_free, out_free, in_ls, out_ls) =
            (t("in_free"), t("out_free"), t("in_ls"), t("out_ls"));
        let sub = |topic: &str| {
            pnode
                .subscriber::<CmdVel>(topic)
                .qos(Qos::sensor().depth(16))
                .create()
                .map_err(|e| err(&e))
        };
        let (sub_free, sub_ls) = (sub(&out_free)?, sub(&out_ls)?);
        let pub_free = pnode
            .publisher::<CmdVel>(&in_free)
            .create()
            .map_err(|e| err(&e))?;
        let pub_ls = lnode
            .publisher::<CmdVel>(&in_ls)
            .create()
            .map_err(|e| err(&e))?;
        let _echo_free = self.spawn(
            "replay-node",
            &self.node_spec("echo", false, (&in_free, &out_free), 1),
            "echo node (free)",
        )?;
        let _echo_ls = self.spawn(
            "replay-node",
            &self.node_spec("echo", true, (&in_ls, &out_ls), 1),
            "echo node (lockstep)",
        )?;
        let wait = Duration::from_secs(10);
        if !pub_free.wait_for_subscribers(1, wait) || !pub_ls.wait_for_subscribers(1, wait) {
            return Err("an echo node did not subscribe within 10 s".into());
        }
        if !wait_for(wait, || ls.executors() >= 1 && ls.receivers(&in_ls) >= 1) {
            return Err(format!(
                "the lockstep echo did not join the replay within 10 s ({} executors, {} \
                 receivers of {in_ls})",
                ls.executors(),
                ls.receivers(&in_ls)
            ));
        }
        let msg = |k: u64| CmdVel {
            stamp: Time { nanos: k as i64 },
            linear: 1.0,
            angular: 0.5,
        };
        let free = |k: u64| -> Result<(), String> {
            pub_free.publish(&msg(k)).map_err(|e| err(&e))?;
            let end = Instant::now() + Duration::from_secs(5);
            loop {
                let left = end.saturating_duration_since(Instant::now());
                match sub_free.recv_timeout(left).map_err(|e| err(&e))? {
                    Some(s) if s.stamp.nanos == k as i64 => return Ok(()),
                    Some(_) => {}
                    None => return Err(format!("free play: no echo of message {k} within 5 s")),
                }
            }
        };
        let lock = |k: u64| -> Result<(), String> {
            pub_ls.publish(&msg(k)).map_err(|e| err(&e))?;
            ls.wait_quiet(Duration::from_secs(5), &mut not_stopping)
                .map_err(|e| err(&e))?;
            match sub_ls.try_recv().map_err(|e| err(&e))? {
                Some(s) if s.stamp.nanos == k as i64 => Ok(()),
                Some(s) => Err(format!(
                    "lockstep: echo {} instead of {k} once the step ended",
                    s.stamp.nanos
                )),
                None => Err(format!(
                    "lockstep: no echo of message {k} once the step ended"
                )),
            }
        };
        // warm up both paths
        for k in 0..200 {
            not_stopping()?;
            free(k)?;
            lock(k)?;
        }
        let (mut hf, mut hl) = (Recorder::new(), Recorder::new());
        let per_round = self.messages / self.rounds;
        let mut k = 1_000;
        for round in 0..self.rounds {
            let n = if round + 1 == self.rounds {
                self.messages - per_round * (self.rounds - 1)
            } else {
                per_round
            };
            for lockstep_first in [round % 2 == 1, round % 2 == 0] {
                for _ in 0..n {
                    not_stopping()?;
                    k += 1;
                    let t0 = Instant::now();
                    if lockstep_first {
                        lock(k)?;
                        hl.record(t0.elapsed());
                    } else {
                        free(k)?;
                        hf.record(t0.elapsed());
                    }
                }
            }
        }
        let underflows = ls.underflows();
        if underflows > 0 {
            return Err(format!("the lockstep count underflowed {underflows} times"));
        }
        let row = |mode, h: &Recorder| {
            let d = h.dist();
            CostRow {
                suite: SUITE,
                kind: "cost",
                mode,
                messages: d.count,
                p50_us: d.p50,
                p99_us: d.p99,
                p999_us: d.p999,
                max_us: d.max,
                mean_us: d.avg,
            }
        };
        Ok(vec![row("free", &hf), row("lockstep", &hl)])
    }

    /// Part 2's bag: lidar sweeps at 10 Hz and odometry, published here at real time and
    /// recorded by nerve-bag's recorder in this process.
    fn make_bag(&self, ctx: &Context, file: &Path) -> Result<BagRow, String> {
        let err = |e: &dyn std::fmt::Display| e.to_string();
        let mut opts = nerve_bag::record::RecordOptions::new(file);
        opts.selection = nerve_bag::record::Selection {
            topics: vec![SCAN.into(), ODOM.into()],
            ..Default::default()
        };
        opts.overwrite = true;
        opts.discovery_period = Duration::from_millis(50);
        let recorder = nerve_bag::record::Recorder::start(ctx, opts).map_err(|e| err(&e))?;
        let node = ctx.node("replay_bench_bag").create().map_err(|e| err(&e))?;
        let scan = node
            .publisher::<PointCloud>(SCAN)
            .qos(Qos::sensor().depth(8))
            .create()
            .map_err(|e| err(&e))?;
        let odom = node
            .publisher::<Odometry>(ODOM)
            .qos(Qos::sensor().depth(8))
            .create()
            .map_err(|e| err(&e))?;
        let wait = Duration::from_secs(10);
        if !scan.wait_for_subscribers(1, wait) || !odom.wait_for_subscribers(1, wait) {
            return Err("the recorder did not subscribe within 10 s".into());
        }
        let points = self.columns * self.beams;
        let bytes = points * crate::peers::stream::OUSTER_POINT_STEP;
        let sleeper = nerve::timer::PreciseSleep::new(nerve::Precision::default());
        let (scan_period, odom_period) = (100_000_000u64, (1e9 / self.odom_hz) as u64);
        let end = (self.bag_seconds * 1e9) as u64;
        let frame = nerve_msgs::FrameId::new("os_sensor").unwrap_or_default();
        let (mut ks, mut ko) = (0u64, 0u64);
        let t0 = nerve::mono_ns() + 50_000_000;
        loop {
            not_stopping()?;
            let (ts, to) = (ks * scan_period, ko * odom_period);
            if ts.min(to) >= end {
                break;
            }
            if ts <= to {
                let mut loan = scan.loan_slice(bytes).map_err(|e| err(&e))?;
                {
                    let h = loan.head_mut();
                    h.header.frame_id = frame;
                    h.height = 1;
                    h.width = points as u32;
                    h.point_step = crate::peers::stream::OUSTER_POINT_STEP as u32;
                    h.row_step = bytes as u32;
                    let f32s = nerve_msgs::datatype::FLOAT32;
                    let _ = h.set_fields(&[
                        PointCloud::field("x", 0, f32s, 1),
                        PointCloud::field("y", 4, f32s, 1),
                        PointCloud::field("z", 8, f32s, 1),
                        PointCloud::field("intensity", 12, f32s, 1),
                    ]);
                }
                nodes::sweep(ks, self.columns, self.beams, loan.elems_mut());
                sleeper.sleep_until(t0 + ts);
                loan.head_mut().header.stamp = Time::now();
                loan.send().map_err(|e| err(&e))?;
                ks += 1;
            } else {
                sleeper.sleep_until(t0 + to);
                let t = to as f64 * 1e-9;
                let mut m = Odometry::default();
                m.header.stamp = Time::now();
                m.header.frame_id = nerve_msgs::FrameId::new("odom").unwrap_or_default();
                m.pose.position.x = 0.8 * t;
                m.pose.position.y = (0.3 * t).sin();
                m.twist.linear.x = 0.8;
                odom.publish(&m).map_err(|e| err(&e))?;
                ko += 1;
            }
        }
        // the recorder takes what is still on its way
        let want = [(SCAN, ks), (ODOM, ko)];
        wait_for(Duration::from_secs(10), || {
            let stats = recorder.stats();
            want.iter().all(|(t, n)| {
                stats
                    .iter()
                    .any(|s| s.topic == *t && s.received + s.dropped + s.lost >= *n)
            })
        });
        let report = recorder.stop().map_err(|e| err(&e))?;
        let info = nerve_bag::read::info(file).map_err(|e| err(&e))?;
        let count = |t: &str| {
            info.topics
                .iter()
                .find(|s| s.topic == t)
                .map_or(0, |s| s.count)
        };
        let row = BagRow {
            suite: SUITE,
            kind: "bag",
            scans: count(SCAN),
            odoms: count(ODOM),
            messages: info.messages,
            bag_seconds: info.duration_s,
            cloud_bytes: bytes,
            file_mb: info.file_bytes as f64 / 1e6,
            losses: report.losses(),
        };
        if row.losses > 0 || row.scans != ks || row.odoms != ko {
            return Err(format!(
                "the recorder lost messages: {}/{ks} sweeps, {}/{ko} odometry written, {} \
                 losses",
                row.scans, row.odoms, row.losses
            ));
        }
        Ok(row)
    }

    /// One lockstep replay of `file` through the pipeline processes, by the bench's own
    /// pacer or (`library`) by `nerve_bag::replay`; `hog`: threads spinning meanwhile.
    fn replay(
        &self,
        plain: &Context,
        file: &Path,
        bag: &BagRow,
        run: usize,
        library: bool,
        hog: Option<usize>,
    ) -> Result<ReplayRow, String> {
        let err = |e: &dyn std::fmt::Display| e.to_string();
        let ls = Lockstep::create(self.domain).map_err(|e| err(&e))?;
        let kind = if hog.is_some() {
            "determinism"
        } else {
            "throughput"
        };
        if library {
            // nerve_bag::replay subscribes to the outputs itself, once the executors settled
            let _detector = self.spawn(
                "replay-node",
                &self.node_spec("detector", true, ("", ""), 0),
                "pipeline detector",
            )?;
            let _filter = self.spawn(
                "replay-node",
                &self.node_spec("filter", true, ("", ""), 1),
                "pipeline filter",
            )?;
            let opts = nerve_bag::replay::ReplayOptions {
                settle: Duration::from_millis(300),
                join_timeout: Duration::from_secs(10),
                stall_timeout: STEP_TIMEOUT,
                ..Default::default()
            };
            let r = nerve_bag::replay::replay(&ls, file, &opts, &mut not_stopping, |_| {})
                .map_err(|e| err(&e))?;
            if r.messages != bag.messages {
                return Err(format!(
                    "{} of {} messages replayed",
                    r.messages, bag.messages
                ));
            }
            return Ok(ReplayRow {
                suite: SUITE,
                kind,
                player: LIBRARY,
                run,
                load: hog.is_some(),
                messages: r.messages,
                bag_seconds: r.bag_seconds,
                wall_seconds: r.wall_seconds,
                msgs_per_s: r.messages as f64 / r.wall_seconds,
                speedup: r.speedup,
                per_message_us: r.per_message_us,
                step_us: None,
                timer_steps: r.clock_steps,
                outputs: r.outputs,
                outputs_lost: r.outputs_lost,
                digests: r.digests,
                identical: None,
            });
        }
        let lctx = context(self.domain, true)?;
        let node = plain
            .node("replay_bench_outputs")
            .create()
            .map_err(|e| err(&e))?;
        let q = Qos::sensor().depth(64);
        let mut outputs = Outputs {
            filtered: node
                .subscriber::<PointCloud>(FILTERED)
                .qos(q.clone())
                .create()
                .map_err(|e| err(&e))?,
            detections: node
                .subscriber::<PointCloud>(DETECTIONS)
                .qos(q.clone())
                .create()
                .map_err(|e| err(&e))?,
            fused: node
                .subscriber::<Odometry>(FUSED)
                .qos(q)
                .create()
                .map_err(|e| err(&e))?,
            counts: [0; 3],
        };
        // the detector's outputs wait for this process, the filter's for both
        let _detector = self.spawn(
            "replay-node",
            &self.node_spec("detector", true, ("", ""), 1),
            "pipeline detector",
        )?;
        let _filter = self.spawn(
            "replay-node",
            &self.node_spec("filter", true, ("", ""), 2),
            "pipeline filter",
        )?;
        let wired =
            || ls.executors() >= 2 && [SCAN, FILTERED, ODOM].iter().all(|t| ls.receivers(t) >= 1);
        if !wait_for(Duration::from_secs(10), wired) {
            return Err(format!(
                "the pipeline did not join the replay within 10 s ({} executors)",
                ls.executors()
            ));
        }
        let mut steps = LockSteps {
            ls: ls.clone(),
            outputs: &mut outputs,
            started: false,
            step: Instant::now(),
            first: None,
            last: None,
            hist: Recorder::new(),
            messages: 0,
            timer_steps: 0,
        };
        let opts = PlayOptions {
            wait_subscribers: Duration::from_secs(10),
            ..PlayOptions::default()
        };
        let report = Player::new()
            .play_paced(&lctx, file, &opts, Some(&mut steps), |_| {})
            .map_err(|e| err(&e))?;
        if report.interrupted {
            return Err("interrupted".into());
        }
        let (first, last) = steps.first.zip(steps.last).ok_or("nothing was replayed")?;
        let (messages, timer_steps) = (steps.messages, steps.timer_steps);
        let step_us = steps.hist.dist();
        drop(steps);
        outputs.drain();
        let underflows = ls.underflows();
        if underflows > 0 {
            return Err(format!("the lockstep count underflowed {underflows} times"));
        }
        if messages != bag.messages {
            return Err(format!("{messages} of {} messages replayed", bag.messages));
        }
        let wall = (last - first).as_secs_f64();
        Ok(ReplayRow {
            suite: SUITE,
            kind,
            player: PACER,
            run,
            load: hog.is_some(),
            messages,
            bag_seconds: bag.bag_seconds,
            wall_seconds: wall,
            msgs_per_s: messages as f64 / wall,
            speedup: bag.bag_seconds / wall,
            per_message_us: wall * 1e6 / messages.max(1) as f64,
            step_us: Some(step_us),
            timer_steps,
            outputs: OUTPUTS
                .iter()
                .map(|t| t.to_string())
                .zip(outputs.counts)
                .collect(),
            outputs_lost: 0,
            digests: BTreeMap::new(),
            identical: None,
        })
    }
}

/// The pipeline's outputs as this process receives them (counted; the bench's pacer).
struct Outputs {
    filtered: Subscriber<PointCloud>,
    detections: Subscriber<PointCloud>,
    fused: Subscriber<Odometry>,
    counts: [u64; 3],
}

fn drain_one<M: Message>(sub: &Subscriber<M>, count: &mut u64) {
    while let Ok(Some(_)) = sub.try_recv() {
        *count += 1;
    }
}

impl Outputs {
    fn drain(&mut self) {
        let [c0, c1, c2] = &mut self.counts;
        drain_one(&self.filtered, c0);
        drain_one(&self.detections, c1);
        drain_one(&self.fused, c2);
    }
}

/// Paces nerve-bag's player by the lockstep: before each message, the clock steps through
/// every timer deadline due up to the message's time (each step waits until every
/// executor fired what fell due), then moves to the message's time; after it, the player
/// waits until every callback it set off (and theirs) returned, and takes the outputs.
struct LockSteps<'a> {
    ls: Arc<Lockstep>,
    outputs: &'a mut Outputs,
    started: bool,
    step: Instant,
    first: Option<Instant>,
    last: Option<Instant>,
    hist: Recorder,
    messages: u64,
    timer_steps: u64,
}

fn bag_err(e: impl std::fmt::Display) -> BagError {
    BagError::Options(format!("lockstep: {e}"))
}

impl Steps for LockSteps<'_> {
    fn before(&mut self, t: i64) -> Result<(), BagError> {
        let now = Instant::now();
        self.step = now;
        self.first.get_or_insert(now);
        if !self.started {
            // the start: timers made before it run from the bag's first time
            self.ls
                .step_clock(t, STEP_TIMEOUT, &mut not_stopping)
                .map_err(bag_err)?;
            self.started = true;
            return Ok(());
        }
        while let Some(due) = self.ls.next_due() {
            if due > t || due <= self.ls.now() {
                break;
            }
            self.ls
                .step_clock(due, STEP_TIMEOUT, &mut not_stopping)
                .map_err(bag_err)?;
            self.outputs.drain();
            self.timer_steps += 1;
        }
        if t > self.ls.now() {
            self.ls.set_time(t);
        }
        Ok(())
    }

    fn after(&mut self, _t: i64) -> Result<(), BagError> {
        self.ls
            .wait_quiet(STEP_TIMEOUT, &mut not_stopping)
            .map_err(bag_err)?;
        self.outputs.drain();
        let now = Instant::now();
        self.hist.record(now - self.step);
        self.last = Some(now);
        self.messages += 1;
        Ok(())
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

impl ReplaySuite {
    fn output(&self, m: Measured) -> SuiteOutput {
        let Measured {
            cost,
            bag,
            throughput,
            determinism,
            skipped,
            hog_threads,
        } = m;
        let missing = |name: &str| why_missing(&skipped, name, |k| k.system.starts_with(name));
        let mut s = Section::new(
            "Deterministic replay (lockstep)",
            "Everything runs in child processes of the bench, each an Executor node; the \
             player is this process. Every message is timed on its own; the distributions \
             are as measured, nothing filtered.",
        );
        let mut checks = Vec::new();
        let mut summary = String::from("replay:\n");
        // part 1
        let free = cost.iter().find(|r| r.mode == "free");
        let lock = cost.iter().find(|r| r.mode == "lockstep");
        if !cost.is_empty() {
            let rows: Vec<Vec<String>> = cost
                .iter()
                .map(|r| {
                    vec![
                        r.mode.to_string(),
                        r.messages.to_string(),
                        num(r.p50_us),
                        num(r.p99_us),
                        num(r.p999_us),
                        num(r.max_us),
                        num(r.mean_us),
                    ]
                })
                .collect();
            s.table(
                Some("Per message, echo node in a child process (µs)"),
                &["mode", "messages", "P50", "P99", "P99.9", "max", "mean"],
                &rows,
            );
            s.paragraph(&format!(
                "free: publish a CmdVel on /in, block until the echo node's callback \
                 republished it on /out and it arrived here (a ping-pong: the echo keeps up, \
                 nothing lost). lockstep: publish from a context with Config::lockstep, \
                 Lockstep::wait_quiet until the echo's callback returned (its /out sample is \
                 then taken here and checked). Both modes take turns in {} rounds of {} \
                 messages after 200 warm-up messages each.",
                self.rounds,
                self.messages / self.rounds
            ));
            for r in &cost {
                summary.push_str(&format!(
                    "  {:<9} per message P50 {} µs, P99 {} µs, max {} µs, mean {} µs ({} messages)\n",
                    r.mode,
                    num(r.p50_us),
                    num(r.p99_us),
                    num(r.max_us),
                    num(r.mean_us),
                    r.messages
                ));
            }
        }
        let overhead = match (free, lock) {
            (Some(f), Some(l)) => Ok(Some(l.p50_us - f.p50_us)),
            _ => Err(missing(COST)),
        };
        if let (Some(f), Some(l)) = (free, lock) {
            s.paragraph(&format!(
                "Lockstep overhead per message: {} µs at P50, {} µs in the mean, {} µs at \
                 P99 (lockstep minus free).",
                num(l.p50_us - f.p50_us),
                num(l.mean_us - f.mean_us),
                num(l.p99_us - f.p99_us)
            ));
            summary.push_str(&format!(
                "  lockstep overhead per message: P50 {} µs, mean {} µs, P99 {} µs\n",
                num(l.p50_us - f.p50_us),
                num(l.mean_us - f.mean_us),
                num(l.p99_us - f.p99_us)
            ));
        }
        checks.push(Verdict::judged(
            SUITE,
            "lockstep overhead per message (P50 lockstep - P50 free) <= 10 µs",
            "echo node, two processes",
            overhead,
            |v| v <= 10.0,
        ));
        // part 2
        if let Some(b) = &bag {
            s.paragraph(&format!(
                "The bag: {} sweeps of a simulated {}x10 OS1-{} lidar ({} per cloud, 48-byte \
                 Ouster points) at 10 Hz and {} odometry messages at {} Hz, {:.2} s recorded \
                 by nerve-bag's recorder at real time ({} MB). Pipeline: a filter process \
                 (/scan -> /filtered: points within 40 m and above -1.5 m) and a detector \
                 process (/filtered -> /detections: 16 sector centroids; /odom; a 10 Hz \
                 timer in simulation time -> /fused). Players: `{LIBRARY}` (what `nerve \
                 replay` runs: the outputs converted to their recorded encoding, counted and \
                 digested, no output bag written; wall time from the first message to the \
                 end of the replay) and the bench's own pacer over the same nerve-bag player \
                 (Player::play_paced, the same clock steps, the outputs only counted, each \
                 message's step timed: the clock steps for the timers due before it, the \
                 publish and the wait until every callback it set off returned). The \
                 nerve-bag player reads and decodes ahead on a thread of its own.",
                b.scans,
                self.columns,
                self.beams,
                crate::report::human_bytes(b.cloud_bytes),
                b.odoms,
                self.odom_hz,
                b.bag_seconds,
                num(b.file_mb)
            ));
        }
        let dash = || "–".to_string();
        let replay_rows = |rows: &[ReplayRow]| -> Vec<Vec<String>> {
            rows.iter()
                .map(|r| {
                    let step =
                        |f: fn(&Dist) -> f64| r.step_us.as_ref().map_or_else(dash, |d| num(f(d)));
                    let mut row = vec![
                        r.player.to_string(),
                        r.run.to_string(),
                        r.messages.to_string(),
                        format!("{:.2}", r.bag_seconds),
                        format!("{:.3}", r.wall_seconds),
                        num(r.msgs_per_s),
                        format!("{:.1}x", r.speedup),
                        num(r.per_message_us),
                        step(|d| d.p50),
                        step(|d| d.p99),
                        step(|d| d.max),
                        r.timer_steps.to_string(),
                        r.outputs
                            .iter()
                            .map(|(t, n)| format!("{t} {n}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        r.outputs_lost.to_string(),
                        r.digests
                            .iter()
                            .map(|(t, d)| format!("{t} {}", &d[..16.min(d.len())]))
                            .collect::<Vec<_>>()
                            .join(", "),
                    ];
                    if r.load {
                        row.push(match r.identical {
                            Some(true) => "yes".into(),
                            Some(false) => "NO".into(),
                            None => dash(),
                        });
                    }
                    row
                })
                .collect()
        };
        let head = [
            "player",
            "run",
            "messages",
            "bag s",
            "wall s",
            "msg/s",
            "speed-up",
            "mean µs/msg",
            "step P50 µs",
            "step P99 µs",
            "step max µs",
            "timer steps",
            "outputs",
            "lost",
            "SHA-256 (first 16 hex digits)",
        ];
        if !throughput.is_empty() {
            s.table(
                Some("Lockstep replay through the pipeline, no load"),
                &head,
                &replay_rows(&throughput),
            );
        }
        for r in &throughput {
            let steps = r.step_us.as_ref().map_or(String::new(), |d| {
                format!(
                    " (step P50 {} µs, P99 {} µs, max {} µs)",
                    num(d.p50),
                    num(d.p99),
                    num(d.max)
                )
            });
            summary.push_str(&format!(
                "  replay {} run {}: {} messages, {:.2} bag s in {:.3} wall s: {} msg/s, {:.1}x \
                 real time, mean {} µs/msg{steps}\n",
                r.player,
                r.run,
                r.messages,
                r.bag_seconds,
                r.wall_seconds,
                num(r.msgs_per_s),
                r.speedup,
                num(r.per_message_us),
            ));
        }
        for player in [LIBRARY, PACER] {
            let speedup = median(
                throughput
                    .iter()
                    .filter(|r| r.player == player)
                    .map(|r| r.speedup)
                    .collect(),
            );
            checks.push(Verdict::judged(
                SUITE,
                "lockstep replay >= 5x real time (median of runs)",
                format!("{player}, lidar bag through the two-process pipeline, no load"),
                speedup
                    .map(Some)
                    .ok_or_else(|| missing(&format!("{THROUGHPUT} {player}"))),
                |v| v >= 5.0,
            ));
        }
        // part 3
        if !determinism.is_empty() {
            let mut h: Vec<&str> = head.to_vec();
            h.push("identical to the reference");
            s.table(
                Some(&format!(
                    "Replays under load ({hog_threads} threads spinning in another process)"
                )),
                &h,
                &replay_rows(&determinism),
            );
            s.paragraph(&format!(
                "Digest: `{LIBRARY}`'s SHA-256 of each output topic's payloads in order (the \
                 digests of `nerve replay --report`). Reference: the same replay without load \
                 (the first `{LIBRARY}` row above), else the first run under load; a run is \
                 identical when every output topic's digest matches and its recorder lost \
                 nothing. /fused carries the simulation time of its timer tick, so when the \
                 timers fired is part of what is compared."
            ));
        }
        let identical = determinism
            .iter()
            .filter(|r| r.identical == Some(true))
            .count();
        summary.push_str(&format!(
            "  determinism under load: {identical} of {} replays identical ({} planned, \
             {hog_threads} spinning threads)\n",
            determinism.len(),
            self.determinism_runs
        ));
        if let Some(r) = determinism.first() {
            for (t, d) in &r.digests {
                summary.push_str(&format!(
                    "    {t}: {} messages, sha256 {d}\n",
                    r.outputs.get(t).copied().unwrap_or(0)
                ));
            }
        }
        // every planned run counts: a run that failed is not identical
        let judged = if determinism.is_empty() {
            Err(missing(DETERMINISM))
        } else {
            Ok(Some((self.determinism_runs - identical) as f64))
        };
        checks.push(Verdict::judged(
            SUITE,
            format!(
                "{0} of {0} replays under load with identical output digests (value: runs \
                 that differ or failed)",
                self.determinism_runs
            ),
            format!("{LIBRARY}, {hog_threads} spinning threads"),
            judged,
            |v| v == 0.0,
        ));
        s.paragraph(
            "rosbag2: no published play-rate figure is available on this machine, so there \
             is no comparison row.",
        );
        for k in &skipped {
            summary.push_str(&format!("  skipped {}: {}\n", k.system, k.reason));
        }
        for c in &checks {
            summary.push_str(&format!(
                "  {} [{}]: {}{}\n",
                c.target,
                c.scope,
                match c.met {
                    Some(true) => "met",
                    Some(false) => "MISSED",
                    None => "n/a",
                },
                c.value.map_or(String::new(), |v| format!(" ({})", num(v)))
            ));
        }
        let mut rows = json_rows(&cost);
        rows.extend(json_rows(&bag.into_iter().collect::<Vec<_>>()));
        rows.extend(json_rows(&throughput));
        rows.extend(json_rows(&determinism));
        s.finish(SUITE, rows, skipped, checks, summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked() {
        let s = ReplaySuite::quick((PathBuf::from("x"), vec![]), PathBuf::from("y"));
        assert!(s.validate().is_ok());
        let bad = ReplaySuite {
            determinism_runs: 1,
            ..s.clone()
        };
        assert!(bad.validate().is_err());
        let bad = ReplaySuite {
            bag_seconds: 0.0,
            ..s
        };
        assert!(bad.validate().unwrap_err().contains("bag seconds"));
    }

    #[test]
    fn the_filter_has_points_to_keep_and_to_remove() {
        let (columns, beams) = (64, 16);
        let mut buf = vec![0u8; columns * beams * crate::peers::stream::OUSTER_POINT_STEP];
        nodes::sweep(3, columns, beams, &mut buf);
        let mut again = vec![0u8; buf.len()];
        nodes::sweep(3, columns, beams, &mut again);
        assert_eq!(buf, again, "sweeps are deterministic");
        let kept = buf
            .chunks_exact(crate::peers::stream::OUSTER_POINT_STEP)
            .filter(|p| {
                let f = |i: usize| f32::from_le_bytes(p[i..i + 4].try_into().unwrap());
                f(0) * f(0) + f(4) * f(4) <= 1600.0 && f(8) > -1.5
            })
            .count();
        assert!(kept > 0 && kept < columns * beams, "{kept}");
    }
}
