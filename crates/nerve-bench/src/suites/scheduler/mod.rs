//! `nerve bench scheduler` (seeds/004, HORUS's tiered scheduler): nodes at 1 kHz, 500 Hz,
//! 100 Hz and 10 Hz (two of each) for 60 s (`--quick` 10 s): achieved rate, release
//! jitter (P99, max) and deadline misses; then 10, 50, 100 and 200 nodes of the same mix:
//! the scheduler's own overhead per tick; then an idle executor's CPU.
//!
//! Systems, each in a child process of its own: Nerve's scheduler with `SCHED_FIFO`,
//! CPU affinity and locked memory (`nerve-rt`, falling back with a warning where the
//! process may not), the same without real-time settings (`nerve`), and what a user would
//! otherwise write: one thread per node sleeping to absolute deadlines (`threads`).

mod options;
pub use options::SchedulerOptions;

use crate::report::Skipped;
use crate::harness::progress;
use crate::report::{json_rows, num, why_missing, Section, SuiteOutput, Verdict};
use crate::harness::child::Child;
use crate::harness::PeerError;
use crate::harness::machine::{cpu_ns, mono_ns, online_cpus, steal_ms, Machine as Host};
use crate::report::plot::{line_chart, Axis, Series};
use crate::harness::child::say;
use nerve::rt::{RtConfig, RtOutcome};
use nerve::scheduler::{histogram, NodeReport, Spread};
use nerve::{Context, Executor, NodeConfig, Scheduler, SchedulerReport};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// The seed's mix: (rate Hz, nodes).
pub const MIX: [(f64, usize); 4] = [(1000.0, 2), (500.0, 2), (100.0, 2), (10.0, 2)];
/// Node counts of the scaling runs.
pub const SCALES: [usize; 4] = [10, 50, 100, 200];
/// `SCHED_FIFO` priority asked for by `nerve-rt`.
pub const FIFO_PRIORITY: i32 = 80;

/// Who schedules the nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SchedSystem {
    /// Nerve's scheduler with SCHED_FIFO, affinity and mlockall.
    NerveRt,
    /// Nerve's scheduler, no real-time settings.
    Nerve,
    /// One thread per node, `clock_nanosleep` to absolute deadlines.
    Threads,
}

impl SchedSystem {
    /// Every system, in report order.
    pub const ALL: [SchedSystem; 3] = [
        SchedSystem::NerveRt,
        SchedSystem::Nerve,
        SchedSystem::Threads,
    ];

    /// Its id.
    pub fn id(self) -> &'static str {
        match self {
            SchedSystem::NerveRt => "nerve-rt",
            SchedSystem::Nerve => "nerve",
            SchedSystem::Threads => "threads",
        }
    }

    /// By id.
    pub fn parse(id: &str) -> Option<SchedSystem> {
        SchedSystem::ALL.into_iter().find(|s| s.id() == id)
    }
}

/// What a scheduler child runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadSpec {
    /// Who schedules.
    pub system: SchedSystem,
    /// Rate of every node.
    pub rates: Vec<f64>,
    /// Seconds to run.
    pub seconds: f64,
    /// CPU for the scheduler thread (nerve-rt).
    pub cpu: Option<usize>,
}

/// The rates of `n` nodes in the seed's mix (1 kHz, 500 Hz, 100 Hz, 10 Hz in turn).
pub fn mix_rates(n: usize) -> Vec<f64> {
    (0..n).map(|i| MIX[i % MIX.len()].0).collect()
}

/// A tick's work: a few dozen arithmetic steps, kept by the optimizer.
fn work(seed: u64) -> u64 {
    let mut x = seed;
    for _ in 0..64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
    }
    std::hint::black_box(x)
}

/// Runs the load and prints `report <json>` (in a child process started by the suite).
pub fn run_load(spec: &LoadSpec) -> Result<(), PeerError> {
    let sys = spec.system;
    let fail = |e: &dyn std::fmt::Display| PeerError::setup(sys.id(), e);
    let duration = Duration::from_secs_f64(spec.seconds);
    let report = match sys {
        SchedSystem::NerveRt | SchedSystem::Nerve => {
            let mut s = Scheduler::new(sys.id());
            for (i, &rate) in spec.rates.iter().enumerate() {
                s.add(
                    NodeConfig::new(&format!("n{i:03}_{rate}hz"), rate),
                    move |t| {
                        work(t.count);
                    },
                )
                .map_err(|e| fail(&e))?;
            }
            if sys == SchedSystem::NerveRt {
                s.realtime(RtConfig {
                    fifo_priority: Some(FIFO_PRIORITY),
                    cpus: spec.cpu.map(|c| vec![c]),
                    lock_memory: true,
                });
            }
            s.run_for(duration).map_err(|e| fail(&e))?
        }
        SchedSystem::Threads => run_threads(&spec.rates, duration),
    };
    say(&format!(
        "report {}",
        serde_json::to_string(&report).map_err(|e| fail(&e))?
    ));
    Ok(())
}

/// One thread per node, each sleeping to its absolute release times.
fn run_threads(rates: &[f64], duration: Duration) -> SchedulerReport {
    let start = mono_ns() + 5_000_000;
    let end = start + duration.as_nanos() as u64;
    let threads: Vec<_> = rates
        .iter()
        .enumerate()
        .map(|(i, &rate)| {
            std::thread::spawn(move || {
                let period = (1e9 / rate) as u64;
                let mut jitter = histogram();
                let mut exec = histogram();
                let (mut release, mut ticks, mut misses, mut skipped) = (start, 0u64, 0u64, 0u64);
                while release < end {
                    crate::harness::machine::sleep_until(release);
                    let began = mono_ns();
                    work(ticks);
                    let ended = mono_ns();
                    ticks += 1;
                    let _ = jitter.record((began - release).max(1));
                    let _ = exec.record((ended - began).max(1));
                    misses += u64::from(ended - release > period);
                    release += period;
                    if release <= ended {
                        let behind = (ended - release) / period + 1;
                        skipped += behind;
                        release += behind * period;
                    }
                }
                NodeReport {
                    name: format!("n{i:03}_{rate}hz"),
                    rate_hz: rate,
                    priority: 0,
                    achieved_hz: ticks as f64 / ((mono_ns().max(end) - start) as f64 / 1e9),
                    ticks,
                    jitter_us: Spread::of(&jitter),
                    execution_us: Spread::of(&exec),
                    deadline_misses: misses,
                    budget_overruns: 0,
                    skipped,
                    stopped: false,
                }
            })
        })
        .collect();
    let nodes: Vec<NodeReport> = threads.into_iter().filter_map(|t| t.join().ok()).collect();
    SchedulerReport {
        name: "threads".into(),
        pid: std::process::id(),
        elapsed_s: duration.as_secs_f64(),
        ticks: nodes.iter().map(|n| n.ticks).sum(),
        // no scheduler of its own: the kernel's cost is not visible from user space (the
        // rows leave it out)
        overhead_ns_per_tick: 0.0,
        nodes,
        ..SchedulerReport::default()
    }
}

/// An executor with a subscription and a service and no traffic, until stdin closes
/// (the idle-CPU measurement).
pub fn run_idle(domain: u32) -> Result<(), PeerError> {
    let fail = |e: &dyn std::fmt::Display| PeerError::setup("idle executor", e);
    // the environment decides about the network plane (the topic suite measures an idle
    // session that way)
    let ctx = Context::new(
        nerve::Config::from_env()
            .and_then(|c| c.domain(domain))
            .map_err(|e| fail(&e))?,
    )
    .map_err(|e| fail(&e))?;
    let node = ctx.node("idle").create().map_err(|e| fail(&e))?;
    let sub = node
        .subscriber::<nerve_msgs::srv::Bytes>("/idle/in")
        .create()
        .map_err(|e| fail(&e))?;
    let server = node
        .service::<nerve_msgs::srv::Echo>("/idle/echo")
        .create()
        .map_err(|e| fail(&e))?;
    let mut exec = Executor::new();
    exec.subscribe(sub, |_| {}).map_err(|e| fail(&e))?;
    exec.serve(server, |_| Ok(())).map_err(|e| fail(&e))?;
    let handle = exec.handle();
    // stop when stdin closes: a blocked read, no polling
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        handle.stop();
    });
    say("ready");
    exec.spin().map_err(|e| fail(&e))
}

/// A mix row: one node of one system.
#[derive(Clone, Debug, Serialize)]
pub struct MixRow {
    /// Always "scheduler".
    pub suite: &'static str,
    /// "mix".
    pub kind: &'static str,
    /// System id.
    pub system: String,
    /// Node name.
    pub node: String,
    /// Asked rate.
    pub rate_hz: f64,
    /// Achieved rate.
    pub achieved_hz: f64,
    /// Ticks run.
    pub ticks: u64,
    /// Release jitter (tick start − release), µs.
    pub jitter_us: Spread,
    /// Execution per tick, µs.
    pub execution_us: Spread,
    /// Ticks that ended after their deadline (one period from release).
    pub deadline_misses: u64,
    /// Releases dropped.
    pub skipped: u64,
    /// Seconds run.
    pub seconds: f64,
    /// The scheduler's own time per tick, ns (none for threads).
    pub overhead_ns_per_tick: Option<f64>,
    /// Real-time settings in force, as read back from the kernel.
    pub realtime: String,
    /// Time the host stole from this VM's vCPUs during the run, ms (no process,
    /// real-time or not, runs then).
    pub host_steal_ms: Option<f64>,
}

/// A scaling row: one node count.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleRow {
    /// Always "scheduler".
    pub suite: &'static str,
    /// "scaling".
    pub kind: &'static str,
    /// System id.
    pub system: String,
    /// Nodes scheduled.
    pub nodes: usize,
    /// Seconds run.
    pub seconds: f64,
    /// Ticks of all nodes per second.
    pub ticks_per_s: f64,
    /// The scheduler's own time per tick, ns.
    pub overhead_ns_per_tick: f64,
    /// Release jitter over all nodes: smallest min, mean of means, largest P99, largest
    /// max, µs.
    pub jitter_us: Spread,
    /// Deadline misses of all nodes.
    pub deadline_misses: u64,
    /// Time the host stole from this VM's vCPUs during the run, ms.
    pub host_steal_ms: Option<f64>,
}

/// The idle row.
#[derive(Clone, Debug, Serialize)]
pub struct IdleRow {
    /// Always "scheduler".
    pub suite: &'static str,
    /// "idle".
    pub kind: &'static str,
    /// "nerve-executor".
    pub system: String,
    /// Seconds measured.
    pub seconds: f64,
    /// CPU % of one core over that time.
    pub cpu_percent: f64,
}

/// The suite's settings.
#[derive(Clone, Debug)]
pub struct SchedulerSuite {
    /// Seconds of the mix run per system.
    pub seconds: f64,
    /// Seconds per scaling point.
    pub scale_seconds: f64,
    /// Node counts of the scaling runs.
    pub scales: Vec<usize>,
    /// Systems of the mix run.
    pub systems: Vec<SchedSystem>,
    /// Seconds of the idle measurement.
    pub idle_seconds: f64,
    /// Whether this is the quick variant.
    pub quick: bool,
    /// How to start a role process.
    pub role_command: (PathBuf, Vec<String>),
}

impl SchedulerSuite {
    /// 60 s per system, 5 s per scale, 5 s idle.
    pub fn full(role_command: (PathBuf, Vec<String>)) -> SchedulerSuite {
        SchedulerSuite {
            seconds: 60.0,
            scale_seconds: 5.0,
            scales: SCALES.to_vec(),
            systems: SchedSystem::ALL.to_vec(),
            idle_seconds: 5.0,
            quick: false,
            role_command,
        }
    }

    /// 10 s per system, 2 s per scale, 3 s idle.
    pub fn quick(role_command: (PathBuf, Vec<String>)) -> SchedulerSuite {
        SchedulerSuite {
            seconds: 10.0,
            scale_seconds: 2.0,
            idle_seconds: 3.0,
            quick: true,
            ..SchedulerSuite::full(role_command)
        }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), String> {
        for (what, s) in [
            ("seconds", self.seconds),
            ("scale seconds", self.scale_seconds),
            ("idle seconds", self.idle_seconds),
        ] {
            if !(s.is_finite() && s > 0.0 && s <= 3600.0) {
                return Err(format!("{what} must be in (0, 3600], not {s}"));
            }
        }
        if self
            .scales
            .iter()
            .any(|&n| n == 0 || n > nerve::scheduler::MAX_NODES)
        {
            return Err(format!(
                "node counts must be 1 to {}",
                nerve::scheduler::MAX_NODES
            ));
        }
        if self.systems.is_empty() {
            return Err("no system to run".into());
        }
        Ok(())
    }

    /// Runs a load; returns its report and the host's steal time meanwhile (ms).
    fn load(&self, spec: &LoadSpec) -> Result<(SchedulerReport, Option<f64>), PeerError> {
        let before = steal_ms();
        let report = self.load_report(spec)?;
        let stolen = before.zip(steal_ms()).map(|(a, b)| b - a);
        Ok((report, stolen))
    }

    fn load_report(&self, spec: &LoadSpec) -> Result<SchedulerReport, PeerError> {
        let (exe, args) = &self.role_command;
        let mut args = args.clone();
        args.push("scheduler".into());
        args.push(serde_json::to_string(spec).map_err(|e| PeerError::setup(spec.system.id(), e))?);
        let mut child = Child::spawn(exe, &args, &[], "scheduler load")?;
        let line = child.expect("report ", Duration::from_secs_f64(spec.seconds + 60.0))?;
        let json = line.trim_start_matches("report ");
        serde_json::from_str(json).map_err(|e| PeerError::call(spec.system.id(), e))
    }

    fn idle(&self) -> Result<IdleRow, PeerError> {
        let (exe, args) = &self.role_command;
        let mut args = args.clone();
        args.push("idle-executor".into());
        args.push(crate::harness::interrupt::domain(700, 90).to_string());
        let mut child = Child::spawn(exe, &args, &[], "idle executor")?;
        child.expect("ready", Duration::from_secs(20))?;
        // let start-up settle, then measure
        std::thread::sleep(Duration::from_millis(300));
        let (c0, t0) = (cpu_ns(child.pid()), mono_ns());
        std::thread::sleep(Duration::from_secs_f64(self.idle_seconds));
        let (c1, t1) = (cpu_ns(child.pid()), mono_ns());
        child.stop();
        let (Some(c0), Some(c1)) = (c0, c1) else {
            return Err(PeerError::call("idle executor", "no CPU figures in /proc"));
        };
        Ok(IdleRow {
            suite: "scheduler",
            kind: "idle",
            system: "nerve-executor".into(),
            seconds: (t1 - t0) as f64 / 1e9,
            cpu_percent: (c1 - c0) as f64 / (t1 - t0) as f64 * 100.0,
        })
    }

    /// Runs the mix per system, the scaling points and the idle measurement.
    pub fn execute(&self, host: &Host) -> Result<SuiteOutput, String> {
        self.validate()?;
        let cpu = (online_cpus() >= 2).then_some(1);
        let total = self.seconds * self.systems.len() as f64
            + self.scale_seconds * self.scales.len() as f64
            + self.idle_seconds;
        let bar = progress(total.ceil() as u64, "s");
        let mut mix = Vec::new();
        let mut scale = Vec::new();
        let mut idle = None;
        let mut skipped = Vec::new();
        let mut skip = |system: &str, e: PeerError| {
            skipped.push(Skipped {
                system: system.into(),
                payload_bytes: None,
                reason: e.to_string(),
            })
        };
        let rates: Vec<f64> = MIX.iter().flat_map(|&(r, n)| vec![r; n]).collect();
        for &system in &self.systems {
            bar.set_message(format!("{} mix", system.id()));
            let spec = LoadSpec {
                system,
                rates: rates.clone(),
                seconds: self.seconds,
                cpu,
            };
            match self.load(&spec) {
                Ok((r, stolen)) => mix.extend(mix_rows(&r, system, stolen)),
                Err(e) => skip(system.id(), e),
            }
            bar.inc(self.seconds as u64);
        }
        for &n in &self.scales {
            bar.set_message(format!("{n} nodes"));
            let spec = LoadSpec {
                system: SchedSystem::NerveRt,
                rates: mix_rates(n),
                seconds: self.scale_seconds,
                cpu,
            };
            match self.load(&spec) {
                Ok((r, stolen)) => scale.push(scale_row(&r, n, stolen)),
                Err(e) => skip(&scale_name(n), e),
            }
            bar.inc(self.scale_seconds as u64);
        }
        bar.set_message("idle executor");
        match self.idle() {
            Ok(r) => idle = Some(r),
            Err(e) => skip("nerve-executor", e),
        }
        bar.finish_and_clear();
        Ok(output(mix, scale, idle, skipped, self, host))
    }
}

fn rt_summary(r: &SchedulerReport) -> String {
    let Some(rt) = &r.rt else {
        return "none asked".into();
    };
    [
        ("FIFO", &rt.fifo),
        ("affinity", &rt.affinity),
        ("mlockall", &rt.memory_lock),
    ]
    .iter()
    .map(|(what, o)| match o {
        RtOutcome::NotRequested => format!("{what}: not asked"),
        RtOutcome::Applied(s) => format!("{what}: {s}"),
        RtOutcome::Refused(s) => format!("{what}: refused ({s})"),
    })
    .collect::<Vec<_>>()
    .join("; ")
}

fn mix_rows(r: &SchedulerReport, system: SchedSystem, stolen: Option<f64>) -> Vec<MixRow> {
    r.nodes
        .iter()
        .map(|n| MixRow {
            suite: "scheduler",
            kind: "mix",
            system: system.id().into(),
            node: n.name.clone(),
            rate_hz: n.rate_hz,
            achieved_hz: n.achieved_hz,
            ticks: n.ticks,
            jitter_us: n.jitter_us,
            execution_us: n.execution_us,
            deadline_misses: n.deadline_misses,
            skipped: n.skipped,
            seconds: r.elapsed_s,
            overhead_ns_per_tick: (system != SchedSystem::Threads)
                .then_some(r.overhead_ns_per_tick),
            realtime: rt_summary(r),
            host_steal_ms: stolen,
        })
        .collect()
}

fn scale_row(r: &SchedulerReport, n: usize, stolen: Option<f64>) -> ScaleRow {
    let j = |f: fn(&Spread) -> f64| r.nodes.iter().map(move |x| f(&x.jitter_us));
    ScaleRow {
        suite: "scheduler",
        kind: "scaling",
        system: "nerve-rt".into(),
        nodes: n,
        seconds: r.elapsed_s,
        ticks_per_s: r.ticks as f64 / r.elapsed_s.max(1e-9),
        overhead_ns_per_tick: r.overhead_ns_per_tick,
        jitter_us: Spread {
            min: j(|s| s.min).fold(f64::INFINITY, f64::min),
            mean: j(|s| s.mean).sum::<f64>() / r.nodes.len().max(1) as f64,
            p99: j(|s| s.p99).fold(0.0, f64::max),
            max: j(|s| s.max).fold(0.0, f64::max),
        },
        deadline_misses: r.nodes.iter().map(|x| x.deadline_misses).sum(),
        host_steal_ms: stolen,
    }
}

/// The targets of the run `suite` plans: a system, scale or idle run that did not
/// happen is judged not met, with the reason.
fn checks(
    mix: &[MixRow],
    scale: &[ScaleRow],
    idle: Option<&IdleRow>,
    skipped: &[Skipped],
    suite: &SchedulerSuite,
) -> Vec<Verdict> {
    let mut checks = Vec::new();
    let missing = |name: &str| why_missing(skipped, name, |k| k.system == name);
    if suite.systems.contains(&SchedSystem::NerveRt) {
        let fast: Vec<&MixRow> = mix
            .iter()
            .filter(|r| r.system == "nerve-rt" && r.rate_hz == 1000.0)
            .collect();
        let planned: usize = MIX.iter().filter(|m| m.0 == 1000.0).map(|m| m.1).sum();
        for i in 0..fast.len().max(planned) {
            let (at, row) = match fast.get(i) {
                Some(r) => (format!("nerve-rt, {}", r.node), Ok(*r)),
                None => (
                    format!("nerve-rt, 1 kHz node {} of {planned}", i + 1),
                    Err(missing("nerve-rt")),
                ),
            };
            let of = |f: fn(&MixRow) -> f64| row.clone().map(|r| Some(f(r)));
            checks.push(Verdict::judged(
                "scheduler",
                "1 kHz achieved within ±0.5 Hz",
                &at,
                of(|r| r.achieved_hz),
                |v| (v - 1000.0).abs() <= 0.5,
            ));
            checks.push(Verdict::judged(
                "scheduler",
                "jitter P99 <= 50 µs",
                &at,
                of(|r| r.jitter_us.p99),
                |v| v <= 50.0,
            ));
            checks.push(Verdict::judged(
                "scheduler",
                "no deadline miss",
                &at,
                of(|r| r.deadline_misses as f64),
                |v| v == 0.0,
            ));
        }
    }
    let point = |n: usize| {
        let name = scale_name(n);
        scale
            .iter()
            .find(|s| s.nodes == n)
            .ok_or_else(|| missing(&name))
    };
    let base = suite.scales.first().map(|&n0| (n0, point(n0)));
    for &n in &suite.scales {
        let at = scale_name(n);
        let s = point(n);
        checks.push(Verdict::judged(
            "scheduler",
            "overhead <= 1 µs per tick",
            &at,
            s.clone().map(|s| Some(s.overhead_ns_per_tick)),
            |v| v <= 1000.0,
        ));
        if let Some((n0, b)) = &base {
            let allowed = n as f64 / *n0 as f64;
            checks.push(Verdict::judged(
                "scheduler",
                format!("overhead grows at most linearly (× {allowed:.0} of {n0} nodes)"),
                &at,
                s.and_then(|s| {
                    Ok(Some(
                        s.overhead_ns_per_tick / b.clone()?.overhead_ns_per_tick,
                    ))
                }),
                move |v| v <= allowed,
            ));
        }
    }
    checks.push(Verdict::judged(
        "scheduler",
        "idle executor CPU <= 0.1 %",
        "nerve-executor",
        idle.map(|i| Some(i.cpu_percent))
            .ok_or_else(|| missing("nerve-executor")),
        |v| v <= 0.1,
    ));
    checks
}

/// Name of a scaling point, in skipped entries and checks.
fn scale_name(nodes: usize) -> String {
    format!("nerve-rt, {nodes} nodes")
}

fn output(
    mix: Vec<MixRow>,
    scale: Vec<ScaleRow>,
    idle: Option<IdleRow>,
    skipped: Vec<Skipped>,
    suite: &SchedulerSuite,
    host: &Host,
) -> SuiteOutput {
    let checks = checks(&mix, &scale, idle.as_ref(), &skipped, suite);
    let mix_head = [
        "system",
        "node",
        "rate Hz",
        "achieved Hz",
        "ticks",
        "jitter mean µs",
        "jitter P99 µs",
        "jitter max µs",
        "deadline misses",
        "skipped",
        "overhead ns/tick",
    ];
    let mix_table: Vec<Vec<String>> = mix
        .iter()
        .map(|r| {
            vec![
                r.system.clone(),
                r.node.clone(),
                num(r.rate_hz),
                format!("{:.3}", r.achieved_hz),
                r.ticks.to_string(),
                num(r.jitter_us.mean),
                num(r.jitter_us.p99),
                num(r.jitter_us.max),
                r.deadline_misses.to_string(),
                r.skipped.to_string(),
                r.overhead_ns_per_tick.map_or("–".into(), num),
                r.host_steal_ms.map_or("–".into(), num),
            ]
        })
        .collect();
    let scale_head = [
        "nodes",
        "ticks/s",
        "overhead ns/tick",
        "worst jitter P99 µs",
        "worst jitter max µs",
        "deadline misses",
    ];
    let scale_table: Vec<Vec<String>> = scale
        .iter()
        .map(|s| {
            vec![
                s.nodes.to_string(),
                num(s.ticks_per_s),
                num(s.overhead_ns_per_tick),
                num(s.jitter_us.p99),
                num(s.jitter_us.max),
                s.deadline_misses.to_string(),
            ]
        })
        .collect();
    let mut realtime: Vec<String> = mix
        .iter()
        .map(|r| format!("{}: {}", r.system, r.realtime))
        .collect();
    realtime.dedup();
    let about = format!(
        "Two nodes each at 1 kHz, 500 Hz, 100 Hz and 10 Hz for {} s per system; jitter is a \
         tick's start minus its release; a deadline miss is a tick ending more than one \
         period after its release. Scaling: the same mix with 10 to 200 nodes, {} s each; \
         overhead is the scheduler's own time (choosing, measuring, bookkeeping) per tick. \
         Idle: an executor with a subscription and a service and no traffic.",
        suite.seconds, suite.scale_seconds
    );
    let mut section = Section::new("scheduler (seeds/004)", &about);
    section.paragraph(&format!("Machine: {}.", host.cpu));
    let overhead = Series {
        label: "nerve-rt".into(),
        points: scale
            .iter()
            .map(|s| (s.nodes as f64, s.overhead_ns_per_tick))
            .collect(),
    };
    let worst = Series {
        label: "worst jitter P99 (µs)".into(),
        points: scale
            .iter()
            .map(|s| (s.nodes as f64, s.jitter_us.p99))
            .collect(),
    };
    section.figure(
        &line_chart(
            "Scheduler overhead per tick",
            &Axis::linear("nodes"),
            &Axis::linear("ns per tick"),
            &[overhead],
        ),
        "The scheduler's own time per tick, by node count.",
    );
    section.figure(
        &line_chart(
            "Worst release jitter P99",
            &Axis::linear("nodes"),
            &Axis::log("µs"),
            &[worst],
        ),
        "The largest P99 release jitter of any node, by node count.",
    );
    section.table(Some("Mixed rates"), &mix_head, &mix_table);
    section.paragraph("Real-time settings, as read back:");
    section.list(&realtime);
    section.table(Some("Scaling (nerve-rt)"), &scale_head, &scale_table);
    if let Some(i) = &idle {
        section.paragraph(&format!(
            "Idle executor: {:.3} % of one core over {:.1} s.",
            i.cpu_percent, i.seconds
        ));
    }
    let mut summary = String::from("scheduler: achieved Hz, jitter P99 / max µs, misses\n");
    for r in mix.iter().filter(|r| r.rate_hz == 1000.0) {
        summary.push_str(&format!(
            "  {:<9} {:<14} {:>10.3}  {:>7} / {:>7}  {}\n",
            r.system,
            r.node,
            r.achieved_hz,
            num(r.jitter_us.p99),
            num(r.jitter_us.max),
            r.deadline_misses
        ));
    }
    for s in &scale {
        summary.push_str(&format!(
            "  {:>4} nodes: {} ns per tick\n",
            s.nodes,
            num(s.overhead_ns_per_tick)
        ));
    }
    if let Some(i) = &idle {
        summary.push_str(&format!("  idle executor: {:.3} % CPU\n", i.cpu_percent));
    }
    let mut rows = json_rows(&mix);
    rows.extend(json_rows(&scale));
    rows.extend(json_rows(&idle.into_iter().collect::<Vec<_>>()));
    section.finish("scheduler", rows, skipped, checks, summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_cycles_through_the_seed_rates() {
        assert_eq!(
            mix_rates(6),
            vec![1000.0, 500.0, 100.0, 10.0, 1000.0, 500.0]
        );
        let s = SchedulerSuite::quick((PathBuf::from("x"), vec![]));
        assert!(s.validate().is_ok());
        assert!(SchedulerSuite {
            seconds: 0.0,
            ..s.clone()
        }
        .validate()
        .is_err());
        assert!(SchedulerSuite {
            scales: vec![0],
            ..s
        }
        .validate()
        .is_err());
    }

    #[test]
    fn a_thread_per_node_baseline_reports_every_node() {
        let r = run_threads(&[200.0, 100.0], Duration::from_millis(100));
        assert_eq!(r.nodes.len(), 2);
        assert!(r.nodes[0].ticks >= 15 && r.nodes[1].ticks >= 8, "{r:?}");
    }
}
