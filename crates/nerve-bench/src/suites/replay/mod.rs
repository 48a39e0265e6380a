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
//!   (`/odom`) written here by nerve-bag's [`BagWriter`](nerve_bag::write::BagWriter)
//!   (fixed times: the same bag every run), replayed in lockstep by
//!   [`nerve_bag::replay::replay`] (what `nerve replay` runs: no sleeps, every message
//!   waits for every callback it set off) through a pipeline of two executor processes:
//!   filter (`/scan` -> `/filtered`) and detector + fuser (`/filtered` -> `/detections`,
//!   `/odom` and a 10 Hz timer in simulation time -> `/fused`). Messages/s, bag seconds
//!   per wall second and the time of each message's step.
//! - **Determinism under load**: the same replay again and again with a CPU hog spinning
//!   on every core, the outputs digested by the replay (SHA-256 of each output topic's
//!   payloads in order, each preceded by its length, as `nerve bag digest` does) and
//!   compared.

mod nodes;
mod options;
pub use options::ReplayOptions;

use crate::harness::child::Child;
use crate::harness::interrupt;
use crate::harness::progress;
use crate::harness::stats::Recorder;
use crate::report::{json_rows, num, why_missing, Section, Skipped, SuiteOutput, Verdict};
use nerve::time::lockstep::Lockstep;
use nerve::Context;
use nerve_msgs::{CmdVel, Odometry, PointCloud, Time};
use nodes::{context, publisher, subscriber, NodeSpec, ODOM, OUTPUTS, SCAN};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SUITE: &str = "replay";
/// Longest a lockstep step may take before the replay counts as stalled.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a child may take to say `ready`.
const READY: Duration = Duration::from_secs(30);
/// Log time of the bag's first message, ns since the Unix epoch (fixed: the bag is the
/// same every run).
const BAG_START_NS: u64 = 1_700_000_000_000_000_000;

/// The suite's settings.
#[derive(Clone, Debug)]
pub struct ReplaySuite {
    /// Whether this is the quick variant.
    pub quick: bool,
    /// Messages per mode in the lockstep cost measurement.
    pub messages: u64,
    /// Rounds the messages are split into (free and lockstep take turns).
    pub rounds: u64,
    /// Seconds of the bag.
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

/// The bag the replays play.
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
}

/// One lockstep replay through the pipeline (by `nerve_bag::replay`).
#[derive(Clone, Debug, Serialize)]
pub struct ReplayRow {
    suite: &'static str,
    /// throughput or determinism.
    kind: &'static str,
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
    /// One message's step (clock steps for timers due before it, publish, wait until
    /// every callback it set off returned, outputs taken), µs: P50, P99, P99.9, max.
    step_p50_us: f64,
    step_p99_us: f64,
    step_p999_us: f64,
    step_max_us: f64,
    /// Clock steps for timers.
    timer_steps: u64,
    /// Output messages per topic.
    outputs: BTreeMap<String, u64>,
    /// Output samples lost by the replay's recorder.
    outputs_lost: u64,
    /// SHA-256 per output topic.
    digests: BTreeMap<String, String>,
    /// Same digests as the reference run (the first replay without load, else the first
    /// one under load).
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
/// The player of the replays.
const PLAYER: &str = "nerve_bag::replay";

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
    /// Starts child role `role` with argument `arg` and waits for its `ready`.
    fn spawn(&self, role: &str, arg: String, what: &'static str) -> Result<Child, String> {
        let mut args = self.role_command.1.clone();
        args.extend([role.to_string(), arg]);
        let env = [("NERVE_DOMAIN", self.domain.to_string())];
        let mut c =
            Child::spawn(&self.role_command.0, &args, &env, what).map_err(|e| e.to_string())?;
        c.expect("ready", READY).map_err(|e| e.to_string())?;
        Ok(c)
    }

    /// Starts a node process of `stage` whose outputs wait for `subs` subscribers.
    fn spawn_node(
        &self,
        stage: &str,
        lockstep: bool,
        io: (&str, &str),
        subs: usize,
        what: &'static str,
    ) -> Result<Child, String> {
        let spec = NodeSpec {
            stage: stage.into(),
            domain: self.domain,
            lockstep,
            input: io.0.into(),
            output: io.1.into(),
            wait_subscribers: subs,
        };
        let json = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
        self.spawn("replay-node", json, what)
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
        bar.set_message(format!("writing a {} s lidar bag", self.bag_seconds));
        let file = self.scratch.join("lidar.mcap");
        let bag = match self.make_bag(&file) {
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
                bar.set_message(format!("replay {run}/{}", self.throughput_runs));
                match self.replay(&file, b, run, false) {
                    Ok(r) => throughput.push(r),
                    Err(e) => skip(&format!("{THROUGHPUT} run {run}"), e),
                }
                bar.inc(1);
            }
            match self.spawn("replay-hog", hog_threads.to_string(), "CPU hog") {
                Ok(mut hog) => {
                    for run in 1..=self.determinism_runs {
                        bar.set_message(format!(
                            "replay {run}/{} under load ({hog_threads} spinning threads)",
                            self.determinism_runs
                        ));
                        match self.replay(&file, b, run, true) {
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
        // the reference: the first replay without load, else the first one under load
        let reference = throughput
            .first()
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
        let sub_free = subscriber::<CmdVel>(&pnode, &out_free, 16)?;
        let sub_ls = subscriber::<CmdVel>(&pnode, &out_ls, 16)?;
        let pub_free = publisher::<CmdVel>(&pnode, &in_free)?;
        let pub_ls = publisher::<CmdVel>(&lnode, &in_ls)?;
        let io_free = (in_free.as_str(), out_free.as_str());
        let _echo_free = self.spawn_node("echo", false, io_free, 1, "echo node (free)")?;
        let io_ls = (in_ls.as_str(), out_ls.as_str());
        let _echo_ls = self.spawn_node("echo", true, io_ls, 1, "echo node (lockstep)")?;
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

    /// Part 2's bag: lidar sweeps at 10 Hz and odometry, written by nerve-bag's
    /// `BagWriter` with stamps and log times from [`BAG_START_NS`] (the same bag every run).
    fn make_bag(&self, file: &Path) -> Result<BagRow, String> {
        let err = |e: &dyn std::fmt::Display| e.to_string();
        let mut w = nerve_bag::write::BagWriter::create(file, true).map_err(|e| err(&e))?;
        w.add_topic::<PointCloud>(SCAN).map_err(|e| err(&e))?;
        w.add_topic::<Odometry>(ODOM).map_err(|e| err(&e))?;
        let points = self.columns * self.beams;
        let step = crate::peers::stream::OUSTER_POINT_STEP;
        let bytes = points * step;
        let mut cloud = PointCloud {
            height: 1,
            width: points as u32,
            point_step: step as u32,
            row_step: bytes as u32,
            ..Default::default()
        };
        cloud.header.frame_id = nerve_msgs::FrameId::new("os_sensor").unwrap_or_default();
        let f32s = nerve_msgs::datatype::FLOAT32;
        cloud.set_fields(&[
            PointCloud::field("x", 0, f32s, 1),
            PointCloud::field("y", 4, f32s, 1),
            PointCloud::field("z", 8, f32s, 1),
            PointCloud::field("intensity", 12, f32s, 1),
        ])?;
        let mut data = vec![0u8; bytes];
        let (scan_period, odom_period) = (100_000_000u64, (1e9 / self.odom_hz) as u64);
        let end = (self.bag_seconds * 1e9) as u64;
        let stamp = |t: u64| Time {
            nanos: (BAG_START_NS + t) as i64,
        };
        let (mut ks, mut ko) = (0u64, 0u64);
        loop {
            not_stopping()?;
            let (ts, to) = (ks * scan_period, ko * odom_period);
            if ts.min(to) >= end {
                break;
            }
            if ts <= to {
                nodes::sweep(ks, self.columns, self.beams, &mut data);
                cloud.header.stamp = stamp(ts);
                w.write_slice(SCAN, BAG_START_NS + ts, &cloud, &data)
                    .map_err(|e| err(&e))?;
                ks += 1;
            } else {
                let t = to as f64 * 1e-9;
                let mut m = Odometry::default();
                m.header.stamp = stamp(to);
                m.header.frame_id = nerve_msgs::FrameId::new("odom").unwrap_or_default();
                m.pose.position.x = 0.8 * t;
                m.pose.position.y = (0.3 * t).sin();
                m.twist.linear.x = 0.8;
                w.write(ODOM, BAG_START_NS + to, &m).map_err(|e| err(&e))?;
                ko += 1;
            }
        }
        w.finish().map_err(|e| err(&e))?;
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
        };
        if row.scans != ks || row.odoms != ko {
            return Err(format!(
                "the bag reads back {}/{ks} sweeps and {}/{ko} odometry messages",
                row.scans, row.odoms
            ));
        }
        Ok(row)
    }

    /// One lockstep replay of `file` by `nerve_bag::replay` through the pipeline
    /// processes; `load`: whether the CPU hog spins meanwhile.
    fn replay(
        &self,
        file: &Path,
        bag: &BagRow,
        run: usize,
        load: bool,
    ) -> Result<ReplayRow, String> {
        let err = |e: &dyn std::fmt::Display| e.to_string();
        let ls = Lockstep::create(self.domain).map_err(|e| err(&e))?;
        // nerve_bag::replay subscribes to the outputs itself, once the executors settled;
        // the filter's output waits for the detector
        let _detector = self.spawn_node("detector", true, ("", ""), 0, "pipeline detector")?;
        let _filter = self.spawn_node("filter", true, ("", ""), 1, "pipeline filter")?;
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
        Ok(ReplayRow {
            suite: SUITE,
            kind: if load { "determinism" } else { "throughput" },
            run,
            load,
            messages: r.messages,
            bag_seconds: r.bag_seconds,
            wall_seconds: r.wall_seconds,
            msgs_per_s: r.messages as f64 / r.wall_seconds,
            speedup: r.speedup,
            per_message_us: r.per_message_us,
            step_p50_us: r.step_p50_us,
            step_p99_us: r.step_p99_us,
            step_p999_us: r.step_p999_us,
            step_max_us: r.step_max_us,
            timer_steps: r.clock_steps,
            outputs: r.outputs,
            outputs_lost: r.outputs_lost,
            digests: r.digests,
            identical: None,
        })
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
                 Ouster points) at 10 Hz and {} odometry messages at {} Hz, {:.2} s written \
                 by nerve-bag's BagWriter with stamps and log times from a fixed start (the \
                 same bag every run; {} MB). Pipeline: a filter process (/scan -> /filtered: \
                 points within 40 m and above -1.5 m) and a detector process (/filtered -> \
                 /detections: 16 sector centroids; /odom; a 10 Hz timer in simulation time -> \
                 /fused). Player: `{PLAYER}` (what `nerve replay` runs: the clock steps for \
                 the timers due before each message, the publish, the wait until every \
                 callback it set off returned, the outputs converted to their recorded \
                 encoding, counted and digested, no output bag written; wall time from the \
                 first message to the end of the replay; each message's step timed). The \
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
        let replay_rows = |rows: &[ReplayRow]| -> Vec<Vec<String>> {
            rows.iter()
                .map(|r| {
                    let mut row = vec![
                        r.run.to_string(),
                        r.messages.to_string(),
                        format!("{:.2}", r.bag_seconds),
                        format!("{:.3}", r.wall_seconds),
                        num(r.msgs_per_s),
                        format!("{:.1}x", r.speedup),
                        num(r.per_message_us),
                        num(r.step_p50_us),
                        num(r.step_p99_us),
                        num(r.step_max_us),
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
                            None => "–".into(),
                        });
                    }
                    row
                })
                .collect()
        };
        let head = [
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
            summary.push_str(&format!(
                "  replay run {}: {} messages, {:.2} bag s in {:.3} wall s: {} msg/s, {:.1}x \
                 real time, mean {} µs/msg (step P50 {} µs, P99 {} µs, max {} µs)\n",
                r.run,
                r.messages,
                r.bag_seconds,
                r.wall_seconds,
                num(r.msgs_per_s),
                r.speedup,
                num(r.per_message_us),
                num(r.step_p50_us),
                num(r.step_p99_us),
                num(r.step_max_us),
            ));
        }
        let speedup = median(throughput.iter().map(|r| r.speedup).collect());
        checks.push(Verdict::judged(
            SUITE,
            "lockstep replay >= 5x real time (median of runs)",
            format!("{PLAYER}, lidar bag through the two-process pipeline, no load"),
            speedup.map(Some).ok_or_else(|| missing(THROUGHPUT)),
            |v| v >= 5.0,
        ));
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
                "Digest: `{PLAYER}`'s SHA-256 of each output topic's payloads in order (the \
                 digests of `nerve replay --report`). Reference: the same replay without load \
                 (the first row above), else the first run under load; a run is \
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
            format!("{PLAYER}, {hog_threads} spinning threads"),
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
    fn the_bag_is_the_same_every_run() {
        let dir = std::env::temp_dir().join(format!("nerve-replay-bag-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = ReplaySuite {
            bag_seconds: 0.5,
            columns: 16,
            beams: 4,
            ..ReplaySuite::quick((PathBuf::from("x"), vec![]), dir.clone())
        };
        let (a, b) = (dir.join("a.mcap"), dir.join("b.mcap"));
        let (ra, rb) = (s.make_bag(&a).unwrap(), s.make_bag(&b).unwrap());
        let bytes = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        let _ = std::fs::remove_dir_all(&dir);
        // 0.5 s: sweeps at 0-400 ms, odometry every 20 ms to 480 ms
        assert_eq!((ra.scans, ra.odoms, ra.messages), (5, 25, 30));
        assert!((ra.bag_seconds - 0.48).abs() < 1e-6, "{}", ra.bag_seconds);
        assert_eq!(ra.file_mb, rb.file_mb);
        assert!(bytes.0 == bytes.1, "the two bags differ");
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
