//! `nerve bench bag`: the recorder and the player, measured as a user runs them.
//!
//! - **Recording** at CyberRT's four scenarios (seeds/001: 64 KB at 10 and 100 Hz, 1 MB
//!   and 10 MB at 10 Hz) and Imu at 1 kHz, each without and with compression: a
//!   publisher in this process, `nerve bag record` in a process of its own (the CLI, as a
//!   user starts it). Per run: what was published, written, dropped and lost, the
//!   recorder's CPU (all its threads, from `/proc/PID/task/*/schedstat`) and its MB/s.
//!   Payloads are pseudo-random (the worst case for compression).
//! - **Saturation**: 1 MiB clouds published back to back on a reliable topic, recorded
//!   with `--backpressure`, until a fixed volume is written and the file closed (and
//!   synced); beside it, the same volume written to the same directory in 1 MiB
//!   `write`s and an `fsync`, in the same run: the disk's raw sequential bandwidth.
//! - **Playback**: a bag of Imu at 1 kHz and 1 MB clouds at 10 Hz replayed by `nerve bag
//!   play`; the player's own deadline error (publish time minus deadline) and, measured
//!   independently by a subscriber here, each replayed gap minus the recorded gap.
//! - **Conversion**: the cost of the recorded encoding per message type beside a plain
//!   copy ([`conversion`]).
//! - **Foxglove bridge**: a 10 MB cloud at 10 Hz to a WebSocket client, beside the same
//!   bytes over loopback TCP ([`bridge`]).

pub mod bridge;
pub mod conversion;
mod options;
pub use options::BagOptions;

use crate::report::{json_rows, num, why_missing, Section, Skipped, SuiteOutput, Verdict};
use crate::harness::child::Child;
use crate::harness::machine::{cpu_ns, Machine};
use crate::report::plot::{bar_chart, Axis};
use crate::report::published;
use crate::harness::stats::Recorder;
use nerve::prelude::*;
use nerve::timer::PreciseSleep;
use nerve::{Precision, RawSubscriber};
use nerve_msgs::{Imu, PointCloud, Time};
use serde::Serialize;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SUITE: &str = "bag";

/// The suite's settings.
#[derive(Clone, Debug)]
pub struct BagSuite {
    /// Whether this is the quick variant.
    pub quick: bool,
    /// Seconds per rated recording run.
    pub seconds: f64,
    /// MiB written in each saturation run (and by the raw disk writer).
    pub saturation_mib: usize,
    /// Saturation runs (each beside its own raw disk run).
    pub saturation_repeats: usize,
    /// Seconds of the bag replayed.
    pub play_seconds: f64,
    /// Milliseconds of conversion measurement per message type.
    pub conversion_ms: u64,
    /// 10 MB clouds sent through the Foxglove bridge to a WebSocket client (0: none).
    pub bridge_frames: u64,
    /// Compressions measured at the rated scenarios.
    pub compressions: Vec<String>,
    /// The `nerve` executable that records and plays.
    pub nerve: PathBuf,
    /// Where bags are written (removed after each run).
    pub scratch: PathBuf,
    /// Nerve domain of the runs.
    pub domain: u32,
}

impl BagSuite {
    /// 10 s per scenario, 3 x 2 GiB saturation, 10 s replay.
    pub fn full(nerve: PathBuf, scratch: PathBuf) -> BagSuite {
        BagSuite {
            quick: false,
            seconds: 10.0,
            saturation_mib: 2048,
            saturation_repeats: 3,
            play_seconds: 10.0,
            conversion_ms: 500,
            bridge_frames: 100,
            compressions: vec!["none".into(), "zstd".into(), "lz4".into()],
            nerve,
            scratch,
            domain: crate::harness::interrupt::domain(790, 9),
        }
    }

    /// 3 s per scenario, 2 x 1 GiB saturation, 4 s replay, no lz4.
    pub fn quick(nerve: PathBuf, scratch: PathBuf) -> BagSuite {
        BagSuite {
            quick: true,
            seconds: 3.0,
            saturation_mib: 1024,
            saturation_repeats: 2,
            play_seconds: 4.0,
            conversion_ms: 150,
            bridge_frames: 30,
            compressions: vec!["none".into(), "zstd".into()],
            ..BagSuite::full(nerve, scratch)
        }
    }
}

/// Everything one run of the suite measured.
struct Measured {
    records: Vec<RecordRow>,
    saturation: Option<SaturationRow>,
    play: Option<PlayRow>,
    conversions: Vec<conversion::ConversionRow>,
    bridge: Option<bridge::BridgeRow>,
    skipped: Vec<Skipped>,
}

/// One rated recording run.
#[derive(Clone, Debug, Serialize)]
pub struct RecordRow {
    suite: &'static str,
    kind: &'static str,
    scenario: String,
    size_bytes: usize,
    rate_hz: f64,
    compression: String,
    seconds: f64,
    published: u64,
    written: u64,
    dropped: u64,
    lost: u64,
    recorder_cpu_pct: f64,
    mb_per_s: f64,
    msg_per_s: f64,
    file_mb: f64,
}

/// The saturation run beside the raw disk.
#[derive(Clone, Debug, Serialize)]
pub struct SaturationRow {
    suite: &'static str,
    kind: &'static str,
    size_bytes: usize,
    bytes: u64,
    recorder_mb_per_s: f64,
    raw_disk_mb_per_s: f64,
    ratio: f64,
    recorder_runs_mb_per_s: Vec<f64>,
    raw_runs_mb_per_s: Vec<f64>,
    written: u64,
    dropped: u64,
    lost: u64,
    recorder_cpu_pct: f64,
}

/// Playback timing.
#[derive(Clone, Debug, Serialize)]
pub struct PlayRow {
    suite: &'static str,
    kind: &'static str,
    messages: u64,
    deadline_p50_us: f64,
    deadline_p99_us: f64,
    deadline_max_us: f64,
    gap_p50_us: f64,
    gap_p99_us: f64,
    gap_p999_us: f64,
    gap_max_us: f64,
}

struct Scenario {
    name: &'static str,
    size: usize,
    rate: f64,
}

/// Names of the suite's parts in skipped entries.
const SATURATION: &str = "saturation";
const PLAYBACK: &str = "playback";
const BRIDGE: &str = "nerve bridge foxglove";

/// Name of a recording run in skipped entries.
fn record_name(s: &Scenario, compression: &str) -> String {
    format!("nerve bag record {} ({compression})", s.name)
}

/// CyberRT's scenarios (seeds/001) and the 1 kHz small-message case.
const SCENARIOS: [Scenario; 5] = [
    Scenario {
        name: "functional module",
        size: 64 << 10,
        rate: 10.0,
    },
    Scenario {
        name: "high-frequency module",
        size: 64 << 10,
        rate: 100.0,
    },
    Scenario {
        name: "normal sensor",
        size: 1 << 20,
        rate: 10.0,
    },
    Scenario {
        name: "high-end sensor",
        size: 10 << 20,
        rate: 10.0,
    },
    Scenario {
        name: "imu 1 kHz",
        size: 0,
        rate: 1000.0,
    },
];

/// Fills `buf` with pseudo-random bytes (xorshift64, 8 bytes a step): every message
/// differs, so compression finds nothing to share between them.
fn fill_random(buf: &mut [u8], seed: u64) {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
}

/// Writes back every dirty page of the machine (sync(2)), so a timed run does not pay for
/// the run before it.
fn settle_disk() {
    // SAFETY: sync() takes no arguments and cannot fail.
    unsafe { libc::sync() };
}

fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0; n];
    fill_random(&mut v, seed);
    v
}

/// Figures of several runs, comma-separated.
fn runs(v: &[f64]) -> String {
    v.iter().map(|x| num(*x)).collect::<Vec<_>>().join(", ")
}

/// A running `nerve bag record`.
struct RecorderProc {
    child: Child,
    pid: u32,
}

impl BagSuite {
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![("NERVE_DOMAIN", self.domain.to_string())]
    }

    fn start_recorder(
        &self,
        topic: &str,
        file: &Path,
        extra: &[&str],
    ) -> Result<RecorderProc, String> {
        let mut args: Vec<String> = ["bag", "record", topic, "-o"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.push(file.display().to_string());
        args.extend(["--format", "json"].iter().map(|s| s.to_string()));
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Child::spawn(&self.nerve, &args, &self.env(), "nerve bag record")
            .map_err(|e| e.to_string())?;
        let pid = child.pid();
        Ok(RecorderProc { child, pid })
    }

    /// Stops a recorder with Ctrl-C; returns its report, its CPU ns since `cpu_mark`, and
    /// when the report came (the file closed and synced).
    fn stop_recorder(
        &self,
        mut r: RecorderProc,
        cpu_mark: u64,
    ) -> Result<(Value, u64, Instant), String> {
        let cpu = cpu_ns(r.pid).unwrap_or(0).saturating_sub(cpu_mark);
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(r.pid as i32, libc::SIGINT) };
        let line = r
            .child
            .expect("{", Duration::from_secs(120))
            .map_err(|e| e.to_string())?;
        let done = Instant::now();
        r.child.wait_exit(Duration::from_secs(10));
        let v: Value = serde_json::from_str(&line).map_err(|e| format!("recorder report: {e}"))?;
        Ok((v, cpu, done))
    }

    fn ctx(&self) -> Result<Context, String> {
        let cfg = nerve::Config::default()
            .domain(self.domain)
            .map_err(|e| e.to_string())?;
        Context::new(cfg).map_err(|e| e.to_string())
    }

    /// Runs the suite.
    pub fn execute(&self, machine: &Machine) -> Result<SuiteOutput, String> {
        std::fs::create_dir_all(&self.scratch)
            .map_err(|e| format!("{}: {e}", self.scratch.display()))?;
        let ctx = self.ctx()?;
        let node = ctx.node("bench_bag").create().map_err(|e| e.to_string())?;
        let mut skipped = Vec::new();
        let runs = SCENARIOS.len() * self.compressions.len() + 2;
        let bar = crate::harness::progress(runs as u64, "runs");
        let mut records = Vec::new();
        for (i, s) in SCENARIOS.iter().enumerate() {
            for c in &self.compressions {
                bar.set_message(format!("record {} ({c})", s.name));
                match self.record_scenario(&node, s, c, i) {
                    Ok(r) => records.push(r),
                    Err(e) => skipped.push(Skipped {
                        system: record_name(s, c),
                        payload_bytes: Some(s.size),
                        reason: e,
                    }),
                }
                bar.inc(1);
            }
        }
        bar.set_message("saturation");
        let saturation = match self.saturation(&node) {
            Ok(r) => Some(r),
            Err(e) => {
                skipped.push(Skipped {
                    system: SATURATION.into(),
                    payload_bytes: None,
                    reason: e,
                });
                None
            }
        };
        bar.inc(1);
        bar.set_message("playback");
        let play = match self.playback(&ctx, &node) {
            Ok(r) => Some(r),
            Err(e) => {
                skipped.push(Skipped {
                    system: PLAYBACK.into(),
                    payload_bytes: None,
                    reason: e,
                });
                None
            }
        };
        bar.set_message("conversion");
        let conversions = conversion::run(self.conversion_ms);
        let bridge = if self.bridge_frames > 0 {
            bar.set_message("Foxglove bridge");
            bridge::run(&self.nerve, self.domain, 10_000_000, self.bridge_frames)
                .map_err(|e| {
                    skipped.push(Skipped {
                        system: BRIDGE.into(),
                        payload_bytes: Some(10_000_000),
                        reason: e,
                    })
                })
                .ok()
        } else {
            None
        };
        bar.finish_and_clear();
        let _ = std::fs::remove_dir_all(&self.scratch);
        let _ = machine; // the report's header describes it
        Ok(self.output(Measured {
            records,
            saturation,
            play,
            conversions,
            bridge,
            skipped,
        }))
    }

    fn record_scenario(
        &self,
        node: &Node,
        s: &Scenario,
        compression: &str,
        i: usize,
    ) -> Result<RecordRow, String> {
        let topic = format!("/bench_bag_{i}_{compression}");
        let file = self.scratch.join(format!("rec_{i}_{compression}.mcap"));
        let rec = self.start_recorder(&topic, &file, &["--compression", compression])?;
        let sleeper = PreciseSleep::new(Precision::default());
        let period = (1e9 / s.rate) as u64;
        let n = (self.seconds * s.rate).round() as u64;
        let published;
        let cpu_mark;
        let t0;
        if s.size == 0 {
            let p = node
                .publisher::<Imu>(&topic)
                .create()
                .map_err(|e| e.to_string())?;
            if !p.wait_for_subscribers(1, Duration::from_secs(10)) {
                return Err("the recorder did not subscribe within 10 s".into());
            }
            cpu_mark = cpu_ns(rec.pid).unwrap_or(0);
            t0 = nerve::mono_ns();
            for k in 0..n {
                sleeper.sleep_until(t0 + k * period);
                let m = Imu {
                    stamp: Time::now(),
                    orientation_covariance: [k as f64; 9],
                    ..Default::default()
                };
                p.publish(&m).map_err(|e| e.to_string())?;
            }
            published = n;
        } else {
            let p = node
                .publisher::<PointCloud>(&topic)
                .create()
                .map_err(|e| e.to_string())?;
            if !p.wait_for_subscribers(1, Duration::from_secs(10)) {
                return Err("the recorder did not subscribe within 10 s".into());
            }
            cpu_mark = cpu_ns(rec.pid).unwrap_or(0);
            t0 = nerve::mono_ns();
            for k in 0..n {
                // written before the deadline, sent at it
                let mut loan = p.loan_slice(s.size).map_err(|e| e.to_string())?;
                loan.head_mut().width = k as u32;
                fill_random(loan.elems_mut(), (i as u64) << 32 | k);
                sleeper.sleep_until(t0 + k * period);
                loan.send().map_err(|e| e.to_string())?;
            }
            published = n;
        }
        // one period more for the last sample to arrive
        sleeper.sleep_until(nerve::mono_ns() + period.min(200_000_000));
        let elapsed = (nerve::mono_ns() - t0) as f64 * 1e-9;
        let (report, cpu, _) = self.stop_recorder(rec, cpu_mark)?;
        let t = &report["topics"][0];
        let get = |k: &str| t[k].as_u64().unwrap_or(0);
        let file_mb = std::fs::metadata(&file)
            .map(|m| m.len() as f64 / 1e6)
            .unwrap_or(0.0);
        let _ = std::fs::remove_file(&file);
        Ok(RecordRow {
            suite: SUITE,
            kind: "record",
            scenario: s.name.into(),
            size_bytes: if s.size == 0 {
                std::mem::size_of::<Imu>()
            } else {
                s.size
            },
            rate_hz: s.rate,
            compression: compression.into(),
            seconds: elapsed,
            published,
            written: get("written"),
            dropped: get("dropped"),
            lost: get("lost") + published.saturating_sub(get("received")),
            recorder_cpu_pct: cpu as f64 / (elapsed * 1e9) * 100.0,
            mb_per_s: get("bytes") as f64 / 1e6 / elapsed,
            msg_per_s: get("written") as f64 / elapsed,
            file_mb,
        })
    }

    /// The disk alone, then the recorder, alternately `repeats` times: the disk's speed
    /// on a shared machine drifts, so each is compared with the disk measured beside it.
    fn saturation(&self, node: &Node) -> Result<SaturationRow, String> {
        let size = 1 << 20;
        let n = self.saturation_mib as u64;
        let body = random_bytes(size, 99);
        let topic = "/bench_bag_saturation";
        let p = node
            .publisher::<PointCloud>(topic)
            .qos(Qos::reliable().overflow(nerve::Overflow::BackPressure {
                timeout: Duration::from_secs(10),
            }))
            .create()
            .map_err(|e| e.to_string())?;
        let (mut raw_runs, mut rec_runs, mut cpu_runs) = (Vec::new(), Vec::new(), Vec::new());
        let mut last = Value::Null;
        for _ in 0..self.saturation_repeats.max(1) {
            // the disk: the same volume, 1 MiB writes, one fsync; neither side starts
            // with the other's dirty pages or deletions still being written back
            settle_disk();
            let raw = self.scratch.join("raw.bin");
            let t = Instant::now();
            {
                let err = |e: std::io::Error| format!("{}: {e}", raw.display());
                let mut f = std::fs::File::create(&raw).map_err(err)?;
                for _ in 0..n {
                    f.write_all(&body).map_err(err)?;
                }
                f.sync_all().map_err(err)?;
            }
            raw_runs.push((n * size as u64) as f64 / 1e6 / t.elapsed().as_secs_f64());
            let _ = std::fs::remove_file(&raw);

            // the recorder: clouds back to back on a reliable topic, --backpressure, until
            // the file is closed and synced
            let file = self.scratch.join("saturation.mcap");
            settle_disk();
            let rec =
                self.start_recorder(topic, &file, &["--backpressure", "--queue-mb", "256"])?;
            if !p.wait_for_subscribers(1, Duration::from_secs(10)) {
                return Err("the recorder did not subscribe within 10 s".into());
            }
            let cpu_mark = cpu_ns(rec.pid).unwrap_or(0);
            let t = Instant::now();
            for k in 0..n {
                let mut loan = p.loan_slice(size).map_err(|e| e.to_string())?;
                loan.head_mut().width = k as u32;
                loan.elems_mut().copy_from_slice(&body);
                loan.send().map_err(|e| e.to_string())?;
            }
            let (report, cpu, done) = self.stop_recorder(rec, cpu_mark)?;
            let secs = done.duration_since(t).as_secs_f64();
            let _ = std::fs::remove_file(&file);
            let bytes = report["topics"][0]["bytes"].as_u64().unwrap_or(0);
            rec_runs.push(bytes as f64 / 1e6 / secs);
            cpu_runs.push(cpu as f64 / (secs * 1e9) * 100.0);
            last = report;
            // the next run starts with the topic's subscriber gone
            let end = Instant::now() + Duration::from_secs(5);
            while p.subscriber_count() > 0 && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let tp = &last["topics"][0];
        let get = |k: &str| tp[k].as_u64().unwrap_or(0);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        // each side's bandwidth over all its runs: the same volume per run, so the
        // harmonic mean of the runs (total bytes over total time)
        let overall = |v: &[f64]| v.len() as f64 / v.iter().map(|x| 1.0 / x).sum::<f64>();
        let (recorder, raw) = (overall(&rec_runs), overall(&raw_runs));
        Ok(SaturationRow {
            suite: SUITE,
            kind: "saturation",
            size_bytes: size,
            bytes: get("bytes"),
            recorder_mb_per_s: recorder,
            raw_disk_mb_per_s: raw,
            ratio: recorder / raw,
            recorder_runs_mb_per_s: rec_runs,
            raw_runs_mb_per_s: raw_runs,
            written: get("written"),
            dropped: get("dropped"),
            lost: get("lost") + n.saturating_sub(get("received")),
            recorder_cpu_pct: mean(&cpu_runs),
        })
    }

    fn playback(&self, ctx: &Context, node: &Node) -> Result<PlayRow, String> {
        settle_disk();
        let (imu_topic, cloud_topic) = ("/bench_play_imu", "/bench_play_cloud");
        let file = self.scratch.join("play.mcap");
        // record the bag: Imu at 1 kHz, 1 MB clouds at 10 Hz
        let rec = self.start_recorder(imu_topic, &file, &["--regex", "^/bench_play_"])?;
        let imu = node
            .publisher::<Imu>(imu_topic)
            .create()
            .map_err(|e| e.to_string())?;
        let cloud = node
            .publisher::<PointCloud>(cloud_topic)
            .create()
            .map_err(|e| e.to_string())?;
        if !imu.wait_for_subscribers(1, Duration::from_secs(10))
            || !cloud.wait_for_subscribers(1, Duration::from_secs(10))
        {
            return Err("the recorder did not subscribe within 10 s".into());
        }
        let body = random_bytes(1 << 20, 5);
        let sleeper = PreciseSleep::new(Precision::default());
        let n = (self.play_seconds * 1000.0) as u64;
        let t0 = nerve::mono_ns();
        for k in 0..n {
            sleeper.sleep_until(t0 + k * 1_000_000);
            imu.publish(&Imu {
                stamp: Time::now(),
                ..Default::default()
            })
            .map_err(|e| e.to_string())?;
            if k % 100 == 0 {
                let mut loan = cloud.loan_slice(body.len()).map_err(|e| e.to_string())?;
                loan.elems_mut().copy_from_slice(&body);
                loan.send().map_err(|e| e.to_string())?;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
        self.stop_recorder(rec, 0)?;
        // the recorded gaps
        let mapped = nerve_bag::read::Mapped::open(&file).map_err(|e| e.to_string())?;
        let mut recorded = Vec::new();
        nerve_bag::read::scan(&file, &mapped, |m| {
            if m.channel.topic == imu_topic {
                recorded.push(m.log_time);
            }
            Ok(())
        })
        .map_err(|e| e.to_string())?;
        // replay, received here
        let replay = "/bench_play_imu_replay";
        let sub = RawSubscriber::with_schema(
            node,
            replay,
            &nerve::message::schema::Schema::of::<Imu>(),
            Qos::sensor().depth(4096),
        )
        .map_err(|e| e.to_string())?;
        let args: Vec<String> = [
            "bag",
            "play",
            &file.display().to_string(),
            "--format",
            "json",
            "--remap",
            &format!("{imu_topic}:={replay}"),
            "--wait-subscribers",
            "5",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut player = Child::spawn(&self.nerve, &args, &self.env(), "nerve bag play")
            .map_err(|e| e.to_string())?;
        let mut arrivals = Vec::with_capacity(recorded.len());
        let end = Instant::now() + Duration::from_secs_f64(self.play_seconds * 3.0 + 10.0);
        while arrivals.len() < recorded.len() && Instant::now() < end {
            if let Some(s) = sub
                .recv_timeout(Duration::from_millis(100))
                .map_err(|e| e.to_string())?
            {
                arrivals.push(s.header().publish_mono_ns);
            }
        }
        let line = player
            .expect("{", Duration::from_secs(30))
            .map_err(|e| e.to_string())?;
        let report: Value = serde_json::from_str(&line).map_err(|e| e.to_string())?;
        let _ = std::fs::remove_file(&file);
        let _ = ctx;
        if arrivals.len() != recorded.len() {
            return Err(format!(
                "{} of {} replayed messages arrived",
                arrivals.len(),
                recorded.len()
            ));
        }
        let mut gaps = Recorder::new();
        for (r, p) in recorded.windows(2).zip(arrivals.windows(2)) {
            let err = ((p[1] - p[0]) as i64 - (r[1] - r[0]) as i64).unsigned_abs();
            gaps.record_ns(err.max(1));
        }
        let g = gaps.dist();
        let us = |k: &str| report[k].as_f64().unwrap_or(f64::NAN) / 1e3;
        Ok(PlayRow {
            suite: SUITE,
            kind: "play",
            messages: arrivals.len() as u64,
            deadline_p50_us: us("error_p50_ns"),
            deadline_p99_us: us("error_p99_ns"),
            deadline_max_us: us("error_max_ns"),
            gap_p50_us: g.p50,
            gap_p99_us: g.p99,
            gap_p999_us: g.p999,
            gap_max_us: g.max,
        })
    }

    fn output(&self, m: Measured) -> SuiteOutput {
        let Measured {
            records,
            saturation,
            play,
            conversions,
            bridge,
            skipped,
        } = m;
        let mut s = Section::new(
            "Recording and replay (`nerve bag`)",
            "nerve bag record in its own process records a topic published here; nerve bag \
             play replays a recorded bag. Payloads are pseudo-random (incompressible) and \
             differ per message. CPU is the recorder's, all threads, over the publishing \
             window, in % of one core. Saturation: 1 MiB clouds back to back (reliable topic, \
             --backpressure), timed from the first publish to the recorder's report (file \
             closed and fsynced), beside the same volume written to the same directory in \
             1 MiB writes and an fsync, alternately.",
        );
        let rows: Vec<Vec<String>> = records
            .iter()
            .map(|r| {
                vec![
                    r.scenario.clone(),
                    crate::report::human_bytes(r.size_bytes),
                    num(r.rate_hz),
                    r.compression.clone(),
                    format!("{}/{}", r.written, r.published),
                    r.dropped.to_string(),
                    r.lost.to_string(),
                    num(r.mb_per_s),
                    num(r.msg_per_s),
                    num(r.recorder_cpu_pct),
                    num(r.file_mb),
                ]
            })
            .collect();
        s.table(
            Some("Recording at rated loads"),
            &[
                "scenario",
                "size",
                "Hz",
                "compression",
                "written/published",
                "dropped",
                "lost",
                "MB/s",
                "msg/s",
                "recorder CPU %",
                "file MB",
            ],
            &rows,
        );
        let categories: Vec<String> = SCENARIOS.iter().map(|sc| sc.name.to_string()).collect();
        let groups: Vec<(String, Vec<Option<f64>>)> = self
            .compressions
            .iter()
            .map(|c| {
                let v = SCENARIOS
                    .iter()
                    .map(|sc| {
                        records
                            .iter()
                            .find(|r| r.scenario == sc.name && &r.compression == c)
                            .map(|r| r.recorder_cpu_pct)
                    })
                    .collect();
                (c.clone(), v)
            })
            .collect();
        s.figure(
            &bar_chart(
                "Recorder CPU",
                &categories,
                &Axis::linear("% of one core"),
                &groups,
            ),
            "Recorder CPU per scenario and compression",
        );
        let mut checks = Vec::new();
        let missing = |name: &str| why_missing(&skipped, name, |k| k.system == name);
        for sc in &SCENARIOS {
            for c in &self.compressions {
                let row = records
                    .iter()
                    .find(|r| r.scenario == sc.name && &r.compression == c)
                    .ok_or_else(|| missing(&record_name(sc, c)));
                checks.push(Verdict::judged(
                    SUITE,
                    "zero drops and losses",
                    format!("{} {c}", sc.name),
                    row.clone().map(|r| Some((r.dropped + r.lost) as f64)),
                    |v| v == 0.0,
                ));
                if sc.rate >= 1000.0 && c == "none" {
                    checks.push(Verdict::judged(
                        SUITE,
                        "recorder CPU <= 3 % at 1 kHz small messages",
                        format!("{} {c}", sc.name),
                        row.map(|r| Some(r.recorder_cpu_pct)),
                        |v| v <= 3.0,
                    ));
                }
            }
        }
        if let Some(sat) = &saturation {
            s.table(
                Some(
                    "Saturation: recorder vs the raw disk (same volume, same directory, \
                     alternating runs)",
                ),
                &[
                    "MiB per run",
                    "recorder MB/s (runs)",
                    "raw disk MB/s (runs)",
                    "recorder MB/s (all runs)",
                    "raw disk MB/s (all runs)",
                    "ratio (all runs)",
                    "ratio per run",
                    "written",
                    "dropped",
                    "lost",
                    "recorder CPU %",
                ],
                &[vec![
                    (sat.bytes >> 20).to_string(),
                    runs(&sat.recorder_runs_mb_per_s),
                    runs(&sat.raw_runs_mb_per_s),
                    num(sat.recorder_mb_per_s),
                    num(sat.raw_disk_mb_per_s),
                    format!("{:.2}", sat.ratio),
                    sat.recorder_runs_mb_per_s
                        .iter()
                        .zip(&sat.raw_runs_mb_per_s)
                        .map(|(r, d)| format!("{:.2}", r / d))
                        .collect::<Vec<_>>()
                        .join(", "),
                    sat.written.to_string(),
                    sat.dropped.to_string(),
                    sat.lost.to_string(),
                    num(sat.recorder_cpu_pct),
                ]],
            );
        }
        if let Some(p) = &play {
            s.table(
                Some("Playback timing (Imu 1 kHz with 1 MB clouds at 10 Hz)"),
                &[
                    "messages",
                    "deadline P50 µs",
                    "P99",
                    "max",
                    "gap error P50 µs",
                    "P99",
                    "P99.9",
                    "max",
                ],
                &[vec![
                    p.messages.to_string(),
                    num(p.deadline_p50_us),
                    num(p.deadline_p99_us),
                    num(p.deadline_max_us),
                    num(p.gap_p50_us),
                    num(p.gap_p99_us),
                    num(p.gap_p999_us),
                    num(p.gap_max_us),
                ]],
            );
        }
        let sat = saturation.as_ref().ok_or_else(|| missing(SATURATION));
        checks.push(Verdict::judged(
            SUITE,
            "recording >= 0.9x raw disk bandwidth, no compression",
            "saturation 1 MiB",
            sat.clone().map(|r| Some(r.ratio)),
            |v| v >= 0.9,
        ));
        checks.push(Verdict::judged(
            SUITE,
            "zero drops at saturation",
            "saturation 1 MiB",
            sat.map(|r| Some((r.dropped + r.lost) as f64)),
            |v| v == 0.0,
        ));
        let played = play.as_ref().ok_or_else(|| missing(PLAYBACK));
        checks.push(Verdict::judged(
            SUITE,
            "playback error P50 <= 50 µs",
            "replayed gap vs recorded gap",
            played.clone().map(|p| Some(p.gap_p50_us)),
            |v| v <= 50.0,
        ));
        checks.push(Verdict::judged(
            SUITE,
            "playback error P99 <= 200 µs",
            "replayed gap vs recorded gap",
            played.map(|p| Some(p.gap_p99_us)),
            |v| v <= 200.0,
        ));
        conversion::section(&mut s, &conversions, &mut checks);
        match &bridge {
            Some(b) => bridge::section(&mut s, b, &mut checks),
            None if self.bridge_frames > 0 => {
                checks.extend(bridge::bridge_checks(Err(&missing(BRIDGE))))
            }
            None => {}
        }
        s.heading("rosbag2's published figures");
        let (lo, hi) = published::ROSBAG2_RECORD_MB_S;
        s.list(&[
            format!(
                "{} ({}; disk measured at ~{} MB/s by dd/fio): recording caps at {lo}-{hi} \
                 MB/s with MCAP or SQLite, compressed or not (~{:.2}x the disk).",
                published::ROSBAG2_RECORDING.reference,
                published::ROSBAG2_RECORDING.system,
                published::ROSBAG2_DISK_MB_S,
                hi / published::ROSBAG2_DISK_MB_S
            ),
            "rosbag2#1963 (Humble, a 3 GB bag of 10 Hz lidar and images with 200 Hz Imu): replay \
             runs slower than real time (\"Message queue starved\") until --read-ahead-queue-size \
             is raised to 12000 and the bag preloaded."
                .into(),
            "rosbag2#1467, #1579: messages dropped on high-rate topics and while splitting.".into(),
        ]);
        let mut rows_json = json_rows(&records);
        rows_json.extend(json_rows(&saturation.into_iter().collect::<Vec<_>>()));
        rows_json.extend(json_rows(&play.iter().cloned().collect::<Vec<_>>()));
        rows_json.extend(json_rows(&conversions));
        rows_json.extend(json_rows(&bridge.into_iter().collect::<Vec<_>>()));
        let summary = checks
            .iter()
            .map(|c| {
                format!(
                    "  {} [{}]: {}",
                    c.target,
                    c.scope,
                    match c.met {
                        Some(true) => "met",
                        Some(false) => "MISSED",
                        None => "n/a",
                    }
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        s.finish(
            SUITE,
            rows_json,
            skipped,
            checks,
            format!("bag:\n{summary}\n"),
        )
    }
}
