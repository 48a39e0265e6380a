//! Reports: `report.json` (machine-readable), `report.md` (the seed's tables with its
//! published figures beside ours) and a summary table for the terminal.

use crate::harness::machine::Machine;
use crate::harness::stats::Rtt;
use crate::report::plot::{bar_chart, line_chart, Axis, Series};
use crate::report::published;
use crate::report::{
    human_bytes, md_table, num, versions, why_missing, Measured, Section, Skipped, SuiteOutput,
    Verdict,
};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// CPU used while idle, in % of one core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct IdleCpu {
    /// The server process.
    pub server: Option<f64>,
    /// The client process.
    pub client: Option<f64>,
}

/// CPU used while the measured calls ran, in % of one core: user + system time over wall
/// time, as Apex.AI's performance_test reports it. A busy-polling side shows ~100 %.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CallCpu {
    /// The client process (every thread of it, so a client library's own threads count).
    pub client: Option<f64>,
    /// The server process (every thread).
    pub server: Option<f64>,
}

/// Systems that sleep while they wait, compared with Nerve's block mode: (system, mode).
pub const BLOCKING_PEERS: [(&str, &str); 4] = [
    ("uds", "blocking"),
    ("zenoh", "peer-tcp"),
    ("zenoh", "peer-shm"),
    ("cyclonedds", "ddsperf"),
];

/// One system at one payload.
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    /// System name (`nerve`, `iceoryx2`, ...).
    pub system: String,
    /// Mode (`adaptive`, `busy-poll`, ...).
    pub mode: String,
    /// Request (and response) payload in bytes.
    pub payload_bytes: usize,
    /// Measured calls.
    pub calls: u64,
    /// Time the measured calls took, in s.
    pub seconds: f64,
    /// Calls per second: calls / total time.
    pub tps: f64,
    /// Round-trip statistics in µs.
    pub rtt_us: Rtt,
    /// CPU of client and server while the measured calls ran (`None`: not measured, e.g.
    /// ddsperf, which runs its own processes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<CallCpu>,
    /// Idle CPU after the run (first payload only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_cpu_percent: Option<IdleCpu>,
    /// How the figures were derived where it differs from the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Entry {
    /// CPU time of client and server together per call, in µs: how much of the round trip
    /// both sides spend on a core (spinning shows as about the round trip itself).
    pub fn cpu_us_per_call(&self) -> Option<f64> {
        let cpu = self.cpu_percent?;
        let total = cpu.client? + cpu.server?;
        (self.calls > 0).then(|| total / 100.0 * self.seconds / self.calls as f64 * 1e6)
    }
}

/// The echo work alone at one payload: what the client and server do per call (write the
/// request, copy it into the response, check the response) on their two cores, handed
/// over by a spinning word instead of a transport.
#[derive(Clone, Debug, Serialize)]
pub struct Workload {
    /// Payload of request and response.
    pub payload_bytes: usize,
    /// Time per call, µs.
    pub rtt_us: Rtt,
    /// Calls per second it allows at most.
    pub tps: f64,
}

/// A suite's results.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Suite name.
    pub suite: String,
    /// The measuring machine.
    pub machine: Machine,
    /// Versions of Nerve, the peers and the compiler.
    pub versions: BTreeMap<String, String>,
    /// Whether this was the `--quick` variant.
    pub quick: bool,
    /// Measured calls per system and payload.
    pub calls_per_run: usize,
    /// Warm-up calls per system and payload.
    pub warmup_per_run: usize,
    /// Every measured run.
    pub results: Vec<Entry>,
    /// The echo work alone (fill, copy, check on the two cores, no transport) per payload:
    /// the floor under every system's round trip.
    pub workload: Vec<Workload>,
    /// What could not run.
    pub skipped: Vec<Skipped>,
}

fn opt(v: Option<f64>) -> String {
    v.map(num).unwrap_or_else(|| "–".into())
}

/// Outcome of one target check.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// The Nerve system and mode it judges, e.g. "nerve adaptive".
    pub system: String,
    /// What is checked.
    pub target: String,
    /// The payload it applies to.
    pub payload_bytes: usize,
    /// The measured value (ratio or rate).
    pub value: Option<f64>,
    /// Whether the target is met (`None`: not measurable in this run).
    pub met: Option<bool>,
}

impl Report {
    /// An empty report of `suite` on `machine`.
    pub fn new(suite: &str, machine: Machine, quick: bool, calls: usize, warmup: usize) -> Report {
        Report {
            suite: suite.into(),
            machine,
            versions: versions(),
            quick,
            calls_per_run: calls,
            warmup_per_run: warmup,
            results: Vec::new(),
            workload: Vec::new(),
            skipped: Vec::new(),
        }
    }

    /// The workload alone at `payload`, if measured.
    fn workload_at(&self, payload: usize) -> Option<&Workload> {
        self.workload.iter().find(|w| w.payload_bytes == payload)
    }

    fn find(&self, system: &str, mode: &str, payload: usize) -> Option<&Entry> {
        self.results
            .iter()
            .find(|e| e.system == system && e.mode == mode && e.payload_bytes == payload)
    }

    fn payloads(&self) -> Vec<usize> {
        let mut p: Vec<usize> = self.results.iter().map(|e| e.payload_bytes).collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    fn systems(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for e in &self.results {
            let k = (e.system.clone(), e.mode.clone());
            if !out.contains(&k) {
                out.push(k);
            }
        }
        out
    }

    /// Payloads of the run: measured or skipped.
    fn planned_payloads(&self) -> Vec<usize> {
        let mut p = self.payloads();
        p.extend(self.skipped.iter().filter_map(|k| k.payload_bytes));
        p.sort_unstable();
        p.dedup();
        p
    }

    /// `system mode` at `payload`, or why it has no row (skipped with this reason, or not
    /// run).
    fn found(&self, system: &str, mode: &str, payload: usize) -> Result<&Entry, String> {
        self.find(system, mode, payload).ok_or_else(|| {
            let name = format!("{system} {mode}");
            why_missing(
                &self.skipped,
                &format!("{name} at {}", human_bytes(payload)),
                |k| k.covers(&name, Some(payload)),
            )
        })
    }

    /// Checks the targets against the measured figures (service suite), at every
    /// payload of the run: one Nerve or the peer it is compared with did not run at is not
    /// met, with the reason.
    pub fn checks(&self) -> Vec<Check> {
        let mut out = Vec::new();
        let payloads = self.planned_payloads();
        let idle_at = self
            .results
            .iter()
            .find(|e| e.system == "nerve" && e.mode == "adaptive" && e.idle_cpu_percent.is_some())
            .map(|e| e.payload_bytes)
            .or(payloads.first().copied());
        for &p in &payloads {
            let n = self.found("nerve", "adaptive", p);
            let mut judge =
                |system: &str, target: String, value: Measured, ok: &dyn Fn(f64) -> bool| {
                    let v = Verdict::judged("service", target, "", value, ok);
                    out.push(Check {
                        system: system.into(),
                        target: v.target,
                        payload_bytes: p,
                        value: v.value,
                        met: v.met,
                    })
                };
            // a figure of `a` over the same figure of `b`
            let ratio_of = |a: &Result<&Entry, String>,
                            b: Result<&Entry, String>,
                            f: &dyn Fn(&Entry) -> Option<f64>|
             -> Measured {
                let (a, b) = (a.clone()?, b?);
                Ok(f(a).zip(f(b)).map(|(a, b)| a / b))
            };
            // Nerve's block mode beside the peers that sleep while they wait
            let block = self.found("nerve", "block", p);
            for (sys, mode) in BLOCKING_PEERS {
                judge(
                    "nerve block",
                    format!("block median RTT / {sys} {mode} median RTT <= 1"),
                    ratio_of(&block, self.found(sys, mode, p), &|e| Some(e.rtt_us.p50)),
                    &|r| r <= 1.0,
                );
            }
            judge(
                "nerve block",
                "block CPU per call (client + server) / uds blocking's <= 1".into(),
                ratio_of(
                    &block,
                    self.found("uds", "blocking", p),
                    &Entry::cpu_us_per_call,
                ),
                &|r| r <= 1.0,
            );
            // the C++ API beside Rust's, both adaptive (the target is at 256 B)
            let cpp_planned = self.systems().iter().any(|(s, _)| s == "nerve C++")
                || self
                    .skipped
                    .iter()
                    .any(|k| k.system.starts_with("nerve C++"));
            if p == 256 && cpp_planned {
                judge(
                    "nerve C++",
                    "C++ median RTT / Rust adaptive median RTT <= 1.1".into(),
                    ratio_of(&self.found("nerve C++", "adaptive", p), n.clone(), &|e| {
                        Some(e.rtt_us.p50)
                    }),
                    &|r| r <= 1.1,
                );
            }
            let mut push = |target: String, value: Measured, ok: &dyn Fn(f64) -> bool| {
                judge("nerve adaptive", target, value, ok)
            };
            let ratio = |other: Result<&Entry, String>, f: fn(&Entry) -> f64| {
                ratio_of(&n, other, &|e| Some(f(e)))
            };
            push(
                "adaptive median RTT / iceoryx2 median RTT <= 1.2".into(),
                ratio(self.found("iceoryx2", "busy-poll", p), |e| e.rtt_us.p50),
                &|r| r <= 1.2,
            );
            let work = self.workload_at(p);
            let floor = if p <= 16 * 1024 {
                Some(50_000.0)
            } else if p == 1 << 20 {
                Some(10_000.0)
            } else {
                None
            };
            if let Some(floor) = floor {
                // where the echo work alone (its data crossing the two cores as in every
                // system) allows fewer calls, the target is 0.9x what it allows
                match work.filter(|w| w.tps * 0.9 < floor) {
                    Some(w) => {
                        let honest = w.tps * 0.9;
                        push(
                            format!(
                                "adaptive TPS >= {honest:.0}: {floor:.0} is out of reach, the \
                                 echo work alone allows {:.0}/s; 0.9x that",
                                w.tps
                            ),
                            n.clone().map(|n| Some(n.tps)),
                            &move |t| t >= honest,
                        );
                    }
                    None => push(
                        format!("adaptive TPS >= {floor:.0}"),
                        n.clone().map(|n| Some(n.tps)),
                        &move |t| t >= floor,
                    ),
                }
            }
            push(
                "adaptive P99 / median <= 3".into(),
                n.clone().map(|n| Some(n.rtt_us.p99 / n.rtt_us.p50)),
                &|r| r <= 3.0,
            );
            for (sys, mode) in [
                ("cyclonedds", "ddsperf"),
                ("zenoh", "peer-tcp"),
                ("zenoh", "peer-shm"),
            ] {
                let peer = self.found(sys, mode, p);
                // 5x the peer's calls/s needs a round trip under a fifth of its own; where
                // the echo work alone takes more than that, compare what each transport
                // adds to the work instead
                let out_of_reach = work
                    .zip(peer.as_ref().ok())
                    .filter(|(w, e)| w.rtt_us.p50 * 5.0 > e.rtt_us.p50)
                    .map(|(w, _)| w.rtt_us.p50);
                match out_of_reach {
                    Some(w) => push(
                        format!(
                            "time added to the echo work ({w:.1} µs alone, so 5x the TPS is \
                             out of reach): {sys} {mode}'s / adaptive's >= 5"
                        ),
                        ratio_of(&n, peer, &|e| Some(e.rtt_us.p50 - w)).map(|r| r.map(|r| 1.0 / r)),
                        &|r| !(0.0..5.0).contains(&r),
                    ),
                    None => push(
                        format!("adaptive TPS / {sys} {mode} TPS >= 5"),
                        ratio(peer, |e| e.tps),
                        &|r| r >= 5.0,
                    ),
                }
            }
            // ROS 2 measured beside Nerve (reported; seeds/000 compares with ROS 2): rclpy's
            // median round trip over Nerve's
            if p == super::RCLPY_TARGET_PAYLOAD {
                for mode in ["single-threaded", "events"] {
                    push(
                        format!("rclpy {mode} median RTT / adaptive median RTT >= 20"),
                        ratio_of(&self.found("rclpy", mode, p), n.clone(), &|e| {
                            Some(e.rtt_us.p50)
                        }),
                        &|r| r >= 20.0,
                    );
                }
            }
            // idle CPU is measured after the first payload only
            if idle_at == Some(p) {
                let idle = n.clone().map(|n| n.idle_cpu_percent.unwrap_or_default());
                push(
                    "idle server CPU % < 1".into(),
                    idle.clone().map(|i| i.server),
                    &|c| c < 1.0,
                );
                push(
                    "idle client CPU % < 1".into(),
                    idle.map(|i| i.client),
                    &|c| c < 1.0,
                );
            }
        }
        out
    }

    /// Writes `report.json` and `report.md` into `dir` (created if needed).
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut json = serde_json::to_value(self).map_err(std::io::Error::other)?;
        if let Some(obj) = json.as_object_mut() {
            obj.insert(
                "checks".into(),
                serde_json::to_value(self.checks()).map_err(std::io::Error::other)?,
            );
        }
        std::fs::write(
            dir.join("report.json"),
            serde_json::to_string_pretty(&json).map_err(std::io::Error::other)?,
        )?;
        std::fs::write(dir.join("report.md"), self.markdown())
    }

    /// The report as Markdown, standalone (`report.md` of `nerve bench service`): machine
    /// and versions, the targets, then the same section the combined report shows, and
    /// what was skipped.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let m = &self.machine;
        let _ = writeln!(s, "# Nerve benchmark: {}\n", self.suite);
        let _ = writeln!(
            s,
            "Machine: {} ({} logical CPUs, {} GiB), kernel {}, client and server {}.  ",
            m.cpu,
            m.cores,
            m.memory_gib,
            m.kernel,
            if m.pinned {
                "pinned to separate cores"
            } else {
                "not pinned"
            }
        );
        let versions: Vec<String> = self
            .versions
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(s, "Versions: {}.\n", versions.join(", "));
        let _ = writeln!(s, "## Targets\n");
        let targets: Vec<Vec<String>> = self
            .checks()
            .into_iter()
            .map(|c| {
                vec![
                    format!("{} {}", c.system, human_bytes(c.payload_bytes)),
                    c.target,
                    opt(c.value),
                    match c.met {
                        Some(true) => "yes".into(),
                        Some(false) => "**no**".into(),
                        None => "not measured".into(),
                    },
                ]
            })
            .collect();
        s.push_str(&md_table(&["where", "target", "value", "met"], &targets));
        s.push('\n');
        s.push_str(self.section().markdown());
        if !self.skipped.is_empty() {
            let _ = writeln!(s, "## Skipped\n");
            for k in &self.skipped {
                let at = k
                    .payload_bytes
                    .map(|p| format!(" at {}", human_bytes(p)))
                    .unwrap_or_default();
                let _ = writeln!(s, "- {}{at}: {}", k.system, k.reason);
            }
        }
        s
    }

    /// A compact table for the terminal.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<11} {:<10} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
            "system",
            "mode",
            "payload",
            "TPS",
            "avg µs",
            "P50",
            "P99",
            "P99.9",
            "max",
            "cli CPU%",
            "srv CPU%"
        );
        for e in &self.results {
            let r = &e.rtt_us;
            let _ = writeln!(
                s,
                "{:<11} {:<10} {:>8} {:>10.0} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
                e.system,
                e.mode,
                human_bytes(e.payload_bytes),
                e.tps,
                num(r.avg),
                num(r.p50),
                num(r.p99),
                opt(r.p999),
                num(r.max),
                opt(e.cpu_percent.and_then(|c| c.client)),
                opt(e.cpu_percent.and_then(|c| c.server))
            );
        }
        let checks = self.checks();
        let failed: Vec<&Check> = checks.iter().filter(|c| c.met == Some(false)).collect();
        let _ = writeln!(
            s,
            "\ntargets: {} met, {} not met, {} not measured",
            checks.iter().filter(|c| c.met == Some(true)).count(),
            failed.len(),
            checks.iter().filter(|c| c.met.is_none()).count()
        );
        for c in failed {
            let _ = writeln!(
                s,
                "  not met, {} at {}: {} (measured {})",
                c.system,
                human_bytes(c.payload_bytes),
                c.target,
                opt(c.value)
            );
        }
        for k in &self.skipped {
            let _ = writeln!(s, "skipped {}: {}", k.system, k.reason);
        }
        s
    }
}

impl Report {
    /// The service suite's part of a report, written once for Markdown and HTML: method,
    /// plots, throughput and round-trip tables (with the figures published in seeds/000),
    /// notes and idle CPU. Targets and skipped systems are left to the report around it.
    fn section(&self) -> Section {
        let mut section = Section::new(
            "service (seeds/000)",
            "Request/response ping-pong (seeds/000, Segar vs ROS 2): two processes; one \
             client thread calls synchronously in a loop; the server copies each request into \
             its response at once. Every call the client writes the whole request and checks \
             length and checksum of the whole response. TPS = calls / total time; RTT from an \
             HDR histogram, nothing filtered. Segar and ROS 2: published elsewhere on other \
             hardware.",
        );
        section.paragraph(
            "Zenoh: queryable and get in peer mode over loopback TCP; the server answers in \
             its callback and the client takes the reply in a callback too (handed to the \
             calling thread through a mutex and condition variable), not through Zenoh's \
             FIFO channel. Two configurations: peer-tcp (shared memory off, as Zenoh runs \
             between machines) and peer-shm (Zenoh 1.10's shared memory on in both sessions, \
             the request written into a buffer of the client's shared-memory provider and \
             the response into one of the server's, so only references cross the socket: \
             what a competent user picks on one host).",
        );
        section.paragraph(&format!(
            "{} calls after at least {} warm-up calls and 100 ms of them per system and \
             payload{}.",
            self.calls_per_run,
            self.warmup_per_run,
            if self.quick { " (--quick)" } else { "" }
        ));
        let payloads = self.payloads();
        let systems = self.systems();
        let seed = published::seed_000;

        let names: Vec<String> = payloads.iter().map(|p| human_bytes(*p)).collect();
        let mut tps_groups: Vec<(String, Vec<Option<f64>>)> = systems
            .iter()
            .map(|(s, m)| {
                let v = payloads
                    .iter()
                    .map(|p| self.find(s, m, *p).map(|e| e.tps))
                    .collect();
                (format!("{s} {m}"), v)
            })
            .collect();
        tps_groups.push((
            "Segar (published)".into(),
            payloads
                .iter()
                .map(|p| seed(*p).and_then(|s| s.0[0]))
                .collect(),
        ));
        tps_groups.push((
            "ROS 2 (published)".into(),
            payloads
                .iter()
                .map(|p| seed(*p).and_then(|s| s.1[0]))
                .collect(),
        ));
        section.figure(
            &bar_chart(
                "Calls per second by payload",
                &names,
                &Axis::log("calls/s"),
                &tps_groups,
            ),
            "TPS per payload and system (log scale).",
        );
        let rtt_series: Vec<Series> = systems
            .iter()
            .map(|(s, m)| Series {
                label: format!("{s} {m}"),
                points: payloads
                    .iter()
                    .filter_map(|p| self.find(s, m, *p).map(|e| (*p as f64, e.rtt_us.p50)))
                    .collect(),
            })
            .collect();
        section.figure(
            &line_chart(
                "Round trip P50 vs payload",
                &Axis::log("payload (bytes)"),
                &Axis::log("RTT P50 (µs)"),
                &rtt_series,
            ),
            "Median round trip per system (log-log).",
        );

        let mut head: Vec<String> = vec!["payload".into(), "echo work alone".into()];
        head.extend(systems.iter().map(|(s, m)| format!("{s} {m}")));
        head.extend(["Segar*".into(), "ROS 2*".into()]);
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        let throughput: Vec<Vec<String>> = payloads
            .iter()
            .map(|&p| {
                let mut row = vec![human_bytes(p), opt(self.workload_at(p).map(|w| w.tps))];
                row.extend(
                    systems
                        .iter()
                        .map(|(s, m)| opt(self.find(s, m, p).map(|e| e.tps))),
                );
                row.push(opt(seed(p).and_then(|x| x.0[0])));
                row.push(opt(seed(p).and_then(|x| x.1[0])));
                row
            })
            .collect();
        section.table(Some("Throughput (calls/s)"), &head, &throughput);
        section.paragraph(&format!(
            "Segar* and ROS 2*: {} and {}, quoted as published in {}; measured elsewhere, \
             not on this machine. ROS 2 measured here: the rclpy rows (rclpy over Fast DDS \
             from ROS 2's PyPI wheels, both ends in Python processes pinned as the others; \
             see the notes for their configuration).",
            published::SEGAR.system,
            published::ROS2_SERVICE.system,
            published::SEGAR.reference
        ));

        let head = [
            "system",
            "mode",
            "TPS",
            "avg",
            "P50",
            "P90",
            "P99",
            "P99.9",
            "max",
            "client CPU %",
            "server CPU %",
        ];
        for &p in &payloads {
            // one row per system: name, mode, TPS, the round trip's figures, CPU
            let row = |name: &str, mode: &str, tps: f64, r: &Rtt, cpu: Option<CallCpu>| {
                vec![
                    name.to_string(),
                    mode.to_string(),
                    num(tps),
                    num(r.avg),
                    num(r.p50),
                    num(r.p90),
                    num(r.p99),
                    opt(r.p999),
                    num(r.max),
                    opt(cpu.and_then(|c| c.client)),
                    opt(cpu.and_then(|c| c.server)),
                ]
            };
            let work = self.workload_at(p).map(|w| {
                row(
                    "echo work alone",
                    "two cores, no transport",
                    w.tps,
                    &w.rtt_us,
                    None,
                )
            });
            let mut rows: Vec<Vec<String>> = work
                .into_iter()
                .chain(
                    self.results
                        .iter()
                        .filter(|e| e.payload_bytes == p)
                        .map(|e| row(&e.system, &e.mode, e.tps, &e.rtt_us, e.cpu_percent)),
                )
                .collect();
            if let Some((segar, ros)) = seed(p) {
                for (name, f) in [("Segar*", segar), ("ROS 2*", ros)] {
                    rows.push(vec![
                        name.into(),
                        "published".into(),
                        opt(f[0]),
                        opt(f[1]),
                        opt(f[2]),
                        opt(f[3]),
                        opt(f[4]),
                        "–".into(),
                        opt(f[5]),
                        "–".into(),
                        "–".into(),
                    ]);
                }
            }
            let title = format!("Round trip at {} (µs)", human_bytes(p));
            section.table(Some(&title), &head, &rows);
        }
        section.paragraph(
            "CPU %: user + system time of every thread of the process over the wall time of \
             the measured calls, in % of one core (as Apex.AI's performance_test reports \
             it): a side that busy-polls shows about 100 %, a side that sleeps while it \
             waits shows only its work and its wake-ups. The client is this process, so a \
             client library's own threads (Zenoh's runtime) count. ddsperf runs its own \
             processes: no CPU figures.",
        );
        self.blocking_table(&mut section, &payloads);

        let notes: Vec<String> = self
            .results
            .iter()
            .filter_map(|e| {
                e.note
                    .as_ref()
                    .map(|n| format!("{} {}: {n}", e.system, e.mode))
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if !notes.is_empty() {
            section.heading("Notes");
            section.list(&notes);
        }

        let idle: Vec<Vec<String>> = self
            .results
            .iter()
            .filter_map(|e| {
                let i = e.idle_cpu_percent?;
                Some(vec![
                    e.system.clone(),
                    e.mode.clone(),
                    opt(i.server),
                    opt(i.client),
                ])
            })
            .collect();
        if !idle.is_empty() {
            section.table(
                Some("Idle CPU (% of one core, 1 s after the first payload)"),
                &["system", "mode", "server", "client"],
                &idle,
            );
        }
        section
    }

    /// Nerve's block mode beside the peers that also sleep while they wait: median round
    /// trip and CPU per call (client + server) at every payload.
    fn blocking_table(&self, section: &mut Section, payloads: &[usize]) {
        let systems: Vec<(&str, &str)> = std::iter::once(("nerve", "block"))
            .chain(BLOCKING_PEERS)
            .collect();
        let mut head = vec!["payload".to_string()];
        for (sys, mode) in &systems {
            head.push(format!("{sys} {mode} P50 µs"));
            head.push(format!("{sys} {mode} CPU µs/call"));
        }
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        let rows: Vec<Vec<String>> = payloads
            .iter()
            .map(|&p| {
                let mut row = vec![human_bytes(p)];
                for (sys, mode) in &systems {
                    let e = self.find(sys, mode, p);
                    row.push(opt(e.map(|e| e.rtt_us.p50)));
                    row.push(opt(e.and_then(Entry::cpu_us_per_call)));
                }
                row
            })
            .collect();
        section.table(
            Some("Blocking: Nerve's block mode beside the peers that sleep while they wait"),
            &head,
            &rows,
        );
    }

    /// The service suite as one part of a combined report (rows, checks, Markdown, HTML).
    pub fn to_suite_output(&self) -> SuiteOutput {
        let rows = self
            .results
            .iter()
            .filter_map(|e| {
                let mut v = serde_json::to_value(e).ok()?;
                v.as_object_mut()?
                    .insert("suite".into(), serde_json::Value::String("service".into()));
                Some(v)
            })
            .collect();
        let checks = self
            .checks()
            .into_iter()
            .map(|c| Verdict {
                suite: "service".into(),
                target: c.target,
                scope: format!("{} {}", c.system, human_bytes(c.payload_bytes)),
                value: c.value,
                met: c.met,
            })
            .collect();
        self.section().finish(
            "service",
            rows,
            self.skipped.clone(),
            checks,
            self.summary(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(system: &str, mode: &str, p50: f64) -> Entry {
        Entry {
            system: system.into(),
            mode: mode.into(),
            payload_bytes: 256,
            calls: 1000,
            seconds: 0.1,
            tps: 10_000.0,
            rtt_us: Rtt {
                avg: p50 * 1.1,
                p50,
                p90: p50 * 1.5,
                p99: p50 * 2.0,
                p999: None,
                max: p50 * 10.0,
            },
            cpu_percent: Some(CallCpu {
                client: Some(100.0),
                server: Some(20.0),
            }),
            idle_cpu_percent: Some(IdleCpu {
                server: Some(0.1),
                client: None,
            }),
            note: Some("a note".into()),
        }
    }

    #[test]
    fn checks_of_skipped_systems_count_as_not_met() {
        let mut report = Report::new("service", Machine::detect(), true, 1000, 10);
        report.results = vec![entry("nerve", "adaptive", 12.5)];
        report.skipped = vec![
            Skipped {
                system: "iceoryx2 busy-poll".into(),
                payload_bytes: Some(256),
                reason: "no server".into(),
            },
            Skipped {
                system: "nerve adaptive".into(),
                payload_bytes: Some(1024),
                reason: "setup failed".into(),
            },
        ];
        let checks = report.checks();
        let at = |p: usize, target: &str| {
            checks
                .iter()
                .find(|c| c.payload_bytes == p && c.target.starts_with(target))
                .unwrap_or_else(|| panic!("no {target} at {p}: {checks:?}"))
        };
        let iox = at(256, "adaptive median RTT / iceoryx2");
        assert_eq!((iox.value, iox.met), (None, Some(false)));
        assert!(
            iox.target
                .ends_with("(not met: iceoryx2 busy-poll at 256 B skipped: no server)"),
            "{}",
            iox.target
        );
        let zenoh = at(256, "adaptive TPS / zenoh peer-tcp TPS");
        assert!(
            zenoh
                .target
                .ends_with("(not met: zenoh peer-tcp at 256 B not run)"),
            "{}",
            zenoh.target
        );
        // measured: P99 / median = 2
        assert_eq!(at(256, "adaptive P99 / median").met, Some(true));
        // a figure the row lacks is not measurable, not failed
        assert_eq!(at(256, "idle client CPU").met, None);
        // Nerve skipped at 1 KiB: every target there is still judged, none met
        let kib: Vec<&Check> = checks
            .iter()
            .filter(|c| c.payload_bytes == 1024 && c.system == "nerve adaptive")
            .collect();
        assert_eq!(kib.len(), 6, "{kib:?}");
        assert!(kib.iter().all(|c| c.met == Some(false)
            && c.target
                .contains("nerve adaptive at 1 KiB skipped: setup failed")));
    }

    #[test]
    fn block_mode_is_judged_against_the_blocking_peers() {
        let mut report = Report::new("service", Machine::detect(), true, 1000, 10);
        let mut uds = entry("uds", "blocking", 50.0);
        uds.cpu_percent = Some(CallCpu {
            client: Some(10.0),
            server: Some(10.0),
        });
        report.results = vec![entry("nerve", "block", 40.0), uds];
        report.skipped = vec![Skipped {
            system: "cyclonedds".into(),
            payload_bytes: None,
            reason: "ddsperf not found".into(),
        }];
        // 1000 calls in 0.1 s: 120 % of a core is 120 µs per call, 20 % is 20 µs
        let near = |v: Option<f64>, want: f64| v.is_some_and(|v| (v - want).abs() < 1e-9);
        assert!(near(report.results[0].cpu_us_per_call(), 120.0));
        assert!(near(report.results[1].cpu_us_per_call(), 20.0));
        let checks = report.checks();
        let block = |target: &str| {
            checks
                .iter()
                .find(|c| c.system == "nerve block" && c.target.starts_with(target))
                .unwrap_or_else(|| panic!("no {target}: {checks:?}"))
        };
        let rtt = block("block median RTT / uds blocking");
        assert_eq!((rtt.value, rtt.met), (Some(0.8), Some(true)));
        let cpu = block("block CPU per call");
        assert!(near(cpu.value, 6.0) && cpu.met == Some(false), "{cpu:?}");
        let dds = block("block median RTT / cyclonedds ddsperf");
        assert_eq!(dds.met, Some(false));
        assert!(
            dds.target.ends_with("skipped: ddsperf not found)"),
            "{}",
            dds.target
        );
        let zenoh = block("block median RTT / zenoh peer-tcp");
        assert!(zenoh
            .target
            .ends_with("(not met: zenoh peer-tcp at 256 B not run)"));

        let out = report.to_suite_output();
        assert!(out.checks.iter().any(|c| c.scope == "nerve block 256 B"));
        assert!(
            out.markdown
                .contains("| 256 B | 40.0 | 120 | 50.0 | 20.0 | – | – | – | – |"),
            "{}",
            out.markdown
        );
        assert!(out.markdown.contains("| uds | blocking | 10000 |"));
    }

    #[test]
    fn service_section_has_tables_plots_and_standalone_targets() {
        let mut report = Report::new("service", Machine::detect(), true, 1000, 10);
        report.results = vec![
            entry("nerve", "adaptive", 12.5),
            entry("iceoryx2", "busy-poll", 8.0),
        ];
        let out = report.to_suite_output();
        assert_eq!(out.suite, "service");
        assert_eq!(out.rows.len(), 2);
        assert_eq!(out.rows[0]["suite"], "service");
        let throughput =
            "| payload | echo work alone | nerve adaptive | iceoryx2 busy-poll | Segar* | ROS 2* |";
        assert!(out.markdown.contains(throughput), "{}", out.markdown);
        assert!(out.markdown.contains("### Round trip at 256 B (µs)"));
        assert!(out.markdown.contains("| Segar* | published | 10343 |"));
        assert!(out.markdown.contains("- nerve adaptive: a note"));
        assert!(!out.markdown.contains("## Targets"));
        assert!(out
            .html
            .contains("<th>iceoryx2 busy-poll</th><th>Segar*</th>"));
        assert!(out.html.contains("<h3>Round trip at 256 B (µs)</h3>"));
        assert!(out.html.contains("<svg"));
        let standalone = report.markdown();
        assert!(standalone.contains("## Targets"));
        assert!(standalone.contains(throughput));
        assert!(standalone.ends_with(&out.markdown));
    }

    #[test]
    fn targets_out_of_reach_of_the_echo_work_are_judged_on_what_the_transport_adds() {
        let mib = 1 << 20;
        let at = |mut e: Entry, tps: f64| {
            e.payload_bytes = mib;
            e.tps = tps;
            e
        };
        let mut report = Report::new("service", Machine::detect(), true, 1000, 10);
        report.results = vec![
            at(entry("nerve", "adaptive", 130.0), 7_500.0),
            at(entry("zenoh", "peer-shm", 250.0), 4_000.0),
        ];
        // the work alone takes 120 µs: 10,000 calls/s and 5x Zenoh's TPS are out of reach
        report.workload = vec![Workload {
            payload_bytes: mib,
            rtt_us: entry("workload", "", 120.0).rtt_us,
            tps: 8_000.0,
        }];
        let checks = report.checks();
        let find = |start: &str| {
            checks
                .iter()
                .find(|c| c.target.starts_with(start))
                .unwrap_or_else(|| panic!("no {start}: {checks:?}"))
        };
        let tps = find("adaptive TPS >= 7200: 10000 is out of reach");
        assert_eq!((tps.value, tps.met), (Some(7_500.0), Some(true)));
        // Zenoh adds 130 µs to the work, Nerve 10 µs: 13x
        let zenoh = find("time added to the echo work (120.0 µs alone");
        assert!(zenoh.target.contains("zenoh peer-shm"), "{}", zenoh.target);
        assert!(
            zenoh.value.is_some_and(|v| (v - 13.0).abs() < 1e-9),
            "{zenoh:?}"
        );
        assert_eq!(zenoh.met, Some(true));
        // within reach (the work alone is fast), the plain targets stay
        report.workload[0].tps = 20_000.0;
        report.workload[0].rtt_us = entry("workload", "", 10.0).rtt_us;
        let checks = report.checks();
        assert!(checks.iter().any(|c| c.target == "adaptive TPS >= 10000"));
        assert!(checks
            .iter()
            .any(|c| c.target == "adaptive TPS / zenoh peer-shm TPS >= 5"));
        let md = report.to_suite_output().markdown;
        assert!(
            md.contains("| echo work alone | two cores, no transport | 20000 |"),
            "{md}"
        );
    }

    #[test]
    fn rclpy_is_judged_at_256_b_and_shown_beside_the_quotes() {
        let mut report = Report::new("service", Machine::detect(), true, 1000, 10);
        report.results = vec![
            entry("nerve", "adaptive", 12.5),
            entry("rclpy", "events", 250.0),
        ];
        report.skipped = vec![Skipped {
            system: "rclpy single-threaded".into(),
            payload_bytes: None,
            reason: "python3.11 not found".into(),
        }];
        let checks = report.checks();
        let find = |t: &str| {
            checks
                .iter()
                .find(|c| c.target.starts_with(t))
                .unwrap_or_else(|| panic!("no {t}: {checks:?}"))
        };
        let ev = find("rclpy events median RTT / adaptive median RTT >= 20");
        assert_eq!(
            (ev.value, ev.met, ev.payload_bytes),
            (Some(20.0), Some(true), 256)
        );
        let st = find("rclpy single-threaded median RTT");
        assert_eq!((st.value, st.met), (None, Some(false)));
        assert!(
            st.target.ends_with("skipped: python3.11 not found)"),
            "{}",
            st.target
        );
        let md = report.to_suite_output().markdown;
        assert!(md.contains("| rclpy | events | 10000 |"), "{md}");
        assert!(md.contains("| ROS 2* | published |"), "{md}");
        assert!(md.contains("ROS 2 measured here: the rclpy rows"), "{md}");
    }
}
