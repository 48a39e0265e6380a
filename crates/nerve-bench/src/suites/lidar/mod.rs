//! `nerve bench lidar`: the method of seeds/003 (Ouster OS1 on ROS 2). A simulated Ouster
//! driver publishes point clouds at 10 Hz (modes 512x10, 1024x10, 2048x10; OS1-16 and
//! OS1-64 beam counts; the driver's point layout) written straight into the loaned sample
//! and stamped when the sweep is complete; an application process stamps each cloud on
//! receipt. Reported as in the seed: `msg_stamp` and `recv_stamp` inter-arrival jitter
//! and end-to-end latency, each as count, median, MAD, mean, std, min and max, with raw
//! series and quantile plots. The floor row moves the same bytes with a bare futex.

mod options;
pub mod pipeline;
pub use options::LidarOptions;

use crate::report::Skipped;
use crate::harness::progress;
use crate::report::{json_rows, num, why_missing, Section, SuiteOutput, Verdict};
use crate::harness::PeerError;
use crate::harness::machine::Machine;
use crate::report::plot::{line_chart, Axis, Series};
use crate::report::published::{OUSTER_ROS2, SEED_003};
use crate::harness::stats::{quantiles, Dist, Summary};
use crate::peers::stream::{Payload, StreamSpec, StreamSystem};
use crate::suites::topic::measure_stream;
use serde::Serialize;
use std::path::PathBuf;

/// Columns of the lidar modes (all at 10 Hz).
pub const MODES: [u32; 3] = [512, 1024, 2048];
/// Beam counts (OS1-16, OS1-64).
pub const BEAMS: [u32; 2] = [16, 64];
/// Frames per second of every mode.
pub const RATE_HZ: f64 = 10.0;

/// One row: a system in one lidar mode.
#[derive(Clone, Debug, Serialize)]
pub struct LidarRow {
    /// Always "lidar".
    pub suite: &'static str,
    /// System name.
    pub system: String,
    /// Mode.
    pub mode: String,
    /// "512x10" etc.
    pub lidar_mode: String,
    /// Beams (16 or 64).
    pub beams: u32,
    /// Bytes per cloud.
    pub payload_bytes: usize,
    /// Frames per second.
    pub rate_hz: f64,
    /// Frames sent.
    pub sent: u64,
    /// Frames received.
    pub received: u64,
    /// 1 - received / sent.
    pub loss_rate: f64,
    /// Inter-arrival of `msg_stamp` (the driver's stamps), ms.
    pub msg_stamp_jitter_ms: Summary,
    /// Inter-arrival of `recv_stamp` (the application's stamps), ms.
    pub recv_stamp_jitter_ms: Summary,
    /// End-to-end latency `recv_stamp - msg_stamp`, µs.
    pub e2e_latency_us: Summary,
    /// The same latency as a distribution (µs).
    pub latency_us: Dist,
    /// CPU % of the driver and the application.
    pub cpu_percent: crate::suites::topic::PerProcess<f64>,
    /// Resident memory of the driver and the application, bytes.
    pub rss_bytes: crate::suites::topic::PerProcess<u64>,
    /// End-to-end latency of every frame in arrival order, µs.
    pub e2e_series_us: Vec<f64>,
}

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct LidarSuite {
    /// Frames per mode and system.
    pub frames: u64,
    /// Columns (modes).
    pub modes: Vec<u32>,
    /// Beam counts.
    pub beams: Vec<u32>,
    /// Systems (Nerve's wait modes and the floor).
    pub systems: Vec<StreamSystem>,
    /// See [`crate::suites::topic::TopicSuite::role_command`].
    pub role_command: (PathBuf, Vec<String>),
    /// Nerve domain.
    pub domain: u32,
    /// Whether this is the `--quick` variant.
    pub quick: bool,
    /// Frames of the traced three-stage pipeline (0: not run).
    pub pipeline_frames: u64,
}

impl LidarSuite {
    /// 1,000 frames per mode and system.
    pub fn full(role_command: (PathBuf, Vec<String>)) -> LidarSuite {
        LidarSuite {
            frames: 1000,
            modes: MODES.to_vec(),
            beams: BEAMS.to_vec(),
            systems: vec![
                StreamSystem::NerveAdaptive,
                StreamSystem::NervePredictive,
                StreamSystem::Floor,
            ],
            role_command,
            domain: crate::harness::interrupt::domain(600, 90),
            quick: false,
            pipeline_frames: 300,
        }
    }

    /// 100 frames per mode and system.
    pub fn quick(role_command: (PathBuf, Vec<String>)) -> LidarSuite {
        LidarSuite {
            frames: 100,
            quick: true,
            pipeline_frames: 100,
            ..LidarSuite::full(role_command)
        }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), String> {
        if self.frames < 3 {
            return Err("at least 3 frames are needed (jitter needs two intervals)".into());
        }
        if self.modes.is_empty() || self.beams.is_empty() || self.systems.is_empty() {
            return Err("at least one mode, beam count and system are needed".into());
        }
        for &m in &self.modes {
            if !MODES.contains(&m) {
                return Err(format!("lidar mode {m} is not one of 512, 1024, 2048"));
            }
        }
        for &b in &self.beams {
            if !(1..=128).contains(&b) {
                return Err(format!("beam count {b} must be 1..=128"));
            }
        }
        Ok(())
    }

    /// Runs every mode on every system.
    pub fn execute(&self, machine: &Machine) -> Result<SuiteOutput, String> {
        self.validate()?;
        let runs = (self.modes.len() * self.beams.len() * self.systems.len()) as u64;
        let bar = progress(runs, "lidar");
        let mut rows = Vec::new();
        let mut skipped = Vec::new();
        let mut n = 0;
        for &columns in &self.modes {
            for &beams in &self.beams {
                for &sys in &self.systems {
                    n += 1;
                    bar.set_message(format!("{columns}x10 OS1-{beams} {}", sys.id()));
                    match self.run_one(sys, columns, beams, n) {
                        Ok(r) => rows.push(r),
                        Err(e) => skipped.push(Skipped {
                            system: format!(
                                "{} {} {columns}x10 OS1-{beams}",
                                sys.system(),
                                sys.mode()
                            ),
                            payload_bytes: None,
                            reason: e.to_string(),
                        }),
                    }
                    bar.inc(1);
                }
            }
        }
        let mut pipelines = Vec::new();
        for lang in [pipeline::FilterLang::Rust, pipeline::FilterLang::Cpp] {
            if self.pipeline_frames == 0 {
                break;
            }
            bar.set_message(format!("traced pipeline, {}", lang.name()));
            // 1024x10 OS1-64: the seed's tuned case
            let dir =
                std::env::temp_dir().join(format!("nerve-bench-trace-{}", std::process::id()));
            let result = match lang {
                pipeline::FilterLang::Cpp if crate::peers::cpp::unavailable().is_some() => {
                    Err(crate::peers::cpp::unavailable().unwrap_or_default().to_string())
                }
                _ => pipeline::run_pipeline(
                    &self.role_command,
                    lang,
                    self.domain,
                    self.pipeline_frames,
                    1024 * 64,
                    &dir,
                ),
            };
            match result {
                Ok(p) => pipelines.push(p),
                Err(e) => skipped.push(Skipped {
                    system: format!("nerve traced pipeline, {}", lang.name()),
                    payload_bytes: None,
                    reason: e,
                }),
            }
        }
        bar.finish_and_clear();
        Ok(output(rows, skipped, machine, self, pipelines))
    }

    fn run_one(
        &self,
        sys: StreamSystem,
        columns: u32,
        beams: u32,
        n: usize,
    ) -> Result<LidarRow, PeerError> {
        let tag = format!("{}_{n}", std::process::id());
        let lidar = Payload::Lidar { columns, beams };
        let bytes = StreamSpec {
            system: sys,
            endpoint: String::new(),
            payload_bytes: 0,
            rate_hz: RATE_HZ,
            count: 0,
            payload: lidar,
            domain: self.domain,
            cpu: None,
            reliable: false,
            listen_ip: None,
        }
        .message_bytes();
        // the floor carries the same bytes without Nerve's message
        let (endpoint, payload, payload_bytes, prefix) = match sys {
            StreamSystem::Floor => {
                let name = format!("nerve_bench_lidar_floor_{tag}");
                (
                    name.clone(),
                    Payload::Bytes,
                    bytes.div_ceil(8) * 8,
                    Some(name),
                )
            }
            _ => (format!("/bench/lidar_{tag}"), lidar, bytes, None::<String>),
        };
        let spec = StreamSpec {
            system: sys,
            endpoint: endpoint.clone(),
            payload_bytes,
            rate_hz: RATE_HZ,
            count: self.frames,
            payload,
            domain: self.domain,
            cpu: None,
            reliable: false,
            listen_ip: None,
        };
        let m = measure_stream(
            &self.role_command,
            &spec,
            self.frames,
            None,
            crate::suites::topic::Placement::Local,
        );
        if let Some(p) = prefix {
            let _ = std::fs::remove_file(format!("/dev/shm/{p}"));
        }
        let m = m?;
        let a: Vec<[u64; 3]> = m
            .arrivals
            .arrivals
            .iter()
            .copied()
            .filter(|a| (1..=self.frames).contains(&a[0]))
            .collect();
        let diffs = |i: usize| -> Vec<f64> {
            a.windows(2)
                .map(|w| (w[1][i] as f64 - w[0][i] as f64) / 1e6)
                .collect()
        };
        let e2e: Vec<f64> = a
            .iter()
            .map(|x| x[2].saturating_sub(x[1]) as f64 / 1e3)
            .collect();
        Ok(LidarRow {
            suite: "lidar",
            system: sys.system().into(),
            mode: sys.mode().into(),
            lidar_mode: format!("{columns}x10"),
            beams,
            payload_bytes: bytes,
            rate_hz: RATE_HZ,
            sent: self.frames,
            received: m.received,
            loss_rate: 1.0 - m.received as f64 / self.frames as f64,
            msg_stamp_jitter_ms: Summary::of(&diffs(1)),
            recv_stamp_jitter_ms: Summary::of(&diffs(2)),
            e2e_latency_us: Summary::of(&e2e),
            latency_us: m.latency.dist(),
            cpu_percent: m.cpu_percent,
            rss_bytes: crate::suites::topic::PerProcess {
                publisher: m.memory.publisher.map(|x| x.rss_bytes),
                subscriber: m.memory.subscriber.map(|x| x.rss_bytes),
            },
            e2e_series_us: e2e,
        })
    }
}

fn label(r: &LidarRow) -> String {
    format!("{} {}", r.system, r.mode)
}

/// The targets for every Nerve mode at every lidar mode the suite plans: one Nerve or the
/// floor it is compared with did not run is judged not met, with the reason.
fn checks(rows: &[LidarRow], skipped: &[Skipped], suite: &LidarSuite) -> Vec<Verdict> {
    let mut checks = Vec::new();
    for sys in suite.systems.iter().filter(|s| s.system() == "nerve") {
        for (&columns, &beams) in suite
            .modes
            .iter()
            .flat_map(|c| suite.beams.iter().map(move |b| (c, b)))
        {
            let lidar_mode = format!("{columns}x10");
            let row = |system: &str, mode: &str| {
                let name = format!("{system} {mode} {lidar_mode} OS1-{beams}");
                rows.iter()
                    .find(|r| {
                        r.system == system
                            && r.mode == mode
                            && r.lidar_mode == lidar_mode
                            && r.beams == beams
                    })
                    .ok_or_else(|| why_missing(skipped, &name, |k| k.system == name))
            };
            let n = row("nerve", sys.mode());
            let floor = row("floor", "futex");
            let at = &format!("nerve {} {lidar_mode} OS1-{beams}", sys.mode());
            let of = |f: fn(&LidarRow) -> f64| n.clone().map(|r| Some(f(r)));
            checks.push(Verdict::judged(
                "lidar",
                "e2e median - floor median <= 20 µs",
                at,
                n.clone().and_then(|r| {
                    Ok(Some(
                        r.e2e_latency_us.median - floor.clone()?.e2e_latency_us.median,
                    ))
                }),
                |d| d <= 20.0,
            ));
            checks.push(Verdict::judged(
                "lidar",
                "e2e MAD <= 25 µs",
                at,
                of(|r| r.e2e_latency_us.mad),
                |m| m <= 25.0,
            ));
            checks.push(Verdict::judged(
                "lidar",
                "loss = 0",
                at,
                of(|r| r.loss_rate),
                |l| l == 0.0,
            ));
        }
    }
    checks
}

fn output(
    rows: Vec<LidarRow>,
    skipped: Vec<Skipped>,
    machine: &Machine,
    suite: &LidarSuite,
    pipelines: Vec<pipeline::PipelineResult>,
) -> SuiteOutput {
    let frames = suite.frames;
    let checks = checks(&rows, &skipped, suite);
    let head = [
        "system",
        "mode",
        "beams",
        "MB/cloud",
        "frames",
        "e2e median µs",
        "e2e MAD µs",
        "e2e mean µs",
        "e2e std µs",
        "e2e min µs",
        "e2e max µs",
        "recv jitter median ms",
        "recv jitter MAD ms",
        "msg jitter MAD ms",
        "CPU app %",
    ];
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let e = &r.e2e_latency_us;
            vec![
                label(r),
                r.lidar_mode.clone(),
                r.beams.to_string(),
                format!("{:.2}", r.payload_bytes as f64 / 1e6),
                format!("{}/{}", r.received, r.sent),
                num(e.median),
                num(e.mad),
                num(e.mean),
                num(e.std),
                num(e.min),
                num(e.max),
                format!("{:.3}", r.recv_stamp_jitter_ms.median),
                format!("{:.3}", r.recv_stamp_jitter_ms.mad),
                format!("{:.3}", r.msg_stamp_jitter_ms.mad),
                r.cpu_percent
                    .subscriber
                    .map_or("–".into(), |c| format!("{c:.2}")),
            ]
        })
        .collect();
    let seed_head = [
        "test case",
        "mode",
        "e2e median ms",
        "e2e MAD ms",
        "recv jitter median ms",
        "recv jitter MAD ms",
    ];
    let seed_rows: Vec<Vec<String>> = SEED_003
        .iter()
        .map(|c| {
            vec![
                c.case.to_string(),
                format!("{}x10", c.columns),
                format!("{}", c.e2e_median_ms),
                format!("{}", c.e2e_mad_ms),
                format!("{}", c.recv_jitter_median_ms),
                format!("{}", c.recv_jitter_mad_ms),
            ]
        })
        .collect();
    let mut section = Section::new(
        "lidar (seeds/003)",
        &format!(
            "A simulated Ouster driver writes each sweep (points of 48 B: x, y, z, intensity, \
             t, reflectivity, ring, noise, range) straight into the loaned sample and stamps \
             it when the sweep is complete (msg_stamp); the application stamps on receipt \
             (recv_stamp). End-to-end latency is therefore transport plus wake-up. ROS 2 \
             figures: published in seeds/003 on other hardware, where the stamp is taken at \
             the sensor or at packet reception (ms). {frames} frames per mode at 10 Hz; \
             machine: {}.",
            machine.cpu
        ),
    );
    let mut modes: Vec<(String, u32)> = Vec::new();
    for r in &rows {
        let k = (r.lidar_mode.clone(), r.beams);
        if !modes.contains(&k) {
            modes.push(k);
        }
    }
    for (mode, beams) in &modes {
        let here: Vec<&LidarRow> = rows
            .iter()
            .filter(|r| &r.lidar_mode == mode && r.beams == *beams)
            .collect();
        let raw: Vec<Series> = here
            .iter()
            .map(|r| Series {
                label: label(r),
                points: r
                    .e2e_series_us
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (i as f64, *v))
                    .collect(),
            })
            .collect();
        let q: Vec<Series> = here
            .iter()
            .map(|r| Series {
                label: label(r),
                points: quantiles(&r.e2e_series_us, 200),
            })
            .collect();
        section.heading(&format!("{mode} OS1-{beams}"));
        section.figure(
            &line_chart(
                &format!("End-to-end latency per frame, {mode} OS1-{beams}"),
                &Axis::linear("frame"),
                &Axis::log("latency (µs)"),
                &raw,
            ),
            "Raw series: every frame as measured.",
        );
        section.figure(
            &line_chart(
                &format!("End-to-end latency quantiles, {mode} OS1-{beams}"),
                &Axis::linear("quantile"),
                &Axis::log("latency (µs)"),
                &q,
            ),
            "Quantile plot: the latency not exceeded by that fraction of frames.",
        );
    }
    section.table(Some("Summary"), &head, &table);
    section.table(
        Some(&format!(
            "{} (published in {}; not measured here)",
            OUSTER_ROS2.system, OUSTER_ROS2.reference
        )),
        &seed_head,
        &seed_rows,
    );
    let mut json = json_rows(&rows);
    for p in &pipelines {
        section.table(
            Some(&format!("Three-stage pipeline, traced (driver -> filter -> application, 1024x10 OS1-64, three processes), {}", p.filter.name())),
            &["part", "hop", "count", "P50 µs", "P99 µs", "max µs"],
            &pipeline::rows(&p.report),
        );
        section.paragraph(
            "Each process ran with NERVE_TRACE; the filter keeps every other point (a copy of \
             half the cloud). wait: the sample waited for its subscriber to ask; transport: \
             from then to delivery; callback: take to the publish it caused; end to end: the \
             driver's publish to the application's take.",
        );
        json.push(serde_json::json!({"suite": "lidar", "kind": "pipeline", "filter": p.filter.name(), "trace": p.report.clone(), "frames": p.frames}));
    }
    let mut summary = String::from("lidar: end-to-end median / MAD µs\n");
    for r in &rows {
        summary.push_str(&format!(
            "  {:<18} {:>6} OS1-{:<2}  {:>8} / {:>7}\n",
            label(r),
            r.lidar_mode,
            r.beams,
            num(r.e2e_latency_us.median),
            num(r.e2e_latency_us.mad)
        ));
    }
    for p in &pipelines {
        for (path, total) in &p.report.paths {
            summary.push_str(&format!(
                "  traced pipeline ({}) {path}: median {} µs, P99 {} µs, max {} µs\n",
                p.filter.name(),
                num(total.p50 as f64 / 1e3),
                num(total.p99 as f64 / 1e3),
                num(total.max as f64 / 1e3)
            ));
        }
    }
    section.finish("lidar", json, skipped, checks, summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked() {
        let s = LidarSuite::quick((PathBuf::from("x"), vec![]));
        assert!(s.validate().is_ok());
        assert_eq!(s.frames, 100);
        let bad = LidarSuite {
            modes: vec![4096],
            ..s.clone()
        };
        assert!(bad.validate().unwrap_err().contains("4096"));
        let bad = LidarSuite { frames: 2, ..s };
        assert!(bad.validate().is_err());
    }
}
