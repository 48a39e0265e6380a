//! `nerve bench timer`: the method of seeds/002 (ros_transitions' one-shot timer
//! benchmark). A cyclic state machine waits in its active state on a one-shot timer; the
//! timeout takes it to a pass-through inactive state and straight back. A second process
//! records the arrival of every timeout event on `/<machine>/event`; δ = measured
//! interval between consecutive timeouts − requested timeout.
//!
//! The same method, in the same run, for what a user would otherwise write: a
//! `std::thread::sleep` loop and a tokio interval, publishing the same events through the
//! same topic. Nerve runs as configured by default, with its executor's real-time settings
//! (`nerve-rt`: SCHED_FIFO and locked memory, where the process may use them), and with
//! [`nerve::Precision::sleep_only`] to show what the final spin buys. The observer busy-polls on its own core from 1 ms before each timeout
//! is due (knowing the timeout), at SCHED_FIFO where allowed, so its own wake-up and
//! preemption do not blur the timers it measures;
//! δ from the machine's own event stamps is reported beside.

mod options;
pub use options::TimerOptions;

use crate::report::Skipped;
use crate::harness::progress;
use crate::report::{json_rows, num, why_missing, Section, SuiteOutput, Verdict};
use crate::harness::child::Child;
use crate::harness::PeerError;
use crate::harness::machine::{
    cpu_ns, mono_ns, online_cpus, pin_to_cpu, set_timer_slack_ns, sleep_until, steal_ms,
    AffinityGuard, Machine as Host,
};
use crate::report::plot::{line_chart, Axis, Series};
use crate::report::published::{ROS_TRANSITIONS, SEED_002};
use crate::harness::stats::quantiles;
use crate::harness::child::{say, stdin_closed};
use nerve::machine::{event_qos, event_topic, TransitionEvent};
use nerve::scheduler::Spread;
use nerve::{
    Context, Executor, Machine, MachineSpec, Precision, StateSpec, TransitionSpec, WaitMode,
};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Timeout events before the measured ones (start-up, connection).
pub const WARMUP: u64 = 3;

/// What drives the cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerSystem {
    /// A Nerve state machine on an executor, default precision (sleep, then spin).
    Nerve,
    /// The same with the executor's real-time settings: SCHED_FIFO, locked memory.
    NerveRt,
    /// The same with `Precision::sleep_only()`: the kernel's wake-up alone.
    NerveSleepOnly,
    /// A loop around `std::thread::sleep(timeout)`.
    StdSleep,
    /// A `tokio::time::interval(timeout)` on a current-thread runtime (tokio's timer
    /// wheel counts whole milliseconds).
    TokioInterval,
    /// The hand-tuned baseline: absolute `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`
    /// deadlines, one timeout apart, with the thread's timer slack set to 1 ns.
    ClockNanosleep,
}

impl TimerSystem {
    /// Every system, in report order.
    pub const ALL: [TimerSystem; 6] = [
        TimerSystem::Nerve,
        TimerSystem::NerveRt,
        TimerSystem::NerveSleepOnly,
        TimerSystem::StdSleep,
        TimerSystem::TokioInterval,
        TimerSystem::ClockNanosleep,
    ];

    /// Its id on the command line and in reports.
    pub fn id(self) -> &'static str {
        match self {
            TimerSystem::Nerve => "nerve",
            TimerSystem::NerveRt => "nerve-rt",
            TimerSystem::NerveSleepOnly => "nerve-sleep-only",
            TimerSystem::StdSleep => "std-sleep",
            TimerSystem::TokioInterval => "tokio-interval",
            TimerSystem::ClockNanosleep => "clock-nanosleep",
        }
    }

    /// By id.
    pub fn parse(id: &str) -> Option<TimerSystem> {
        TimerSystem::ALL.into_iter().find(|s| s.id() == id)
    }
}

/// Settings of the cycling process.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CycleSpec {
    /// What drives the cycle.
    pub system: TimerSystem,
    /// The one-shot timeout.
    pub timeout_ms: u32,
    /// Timeouts to run (warm-up included).
    pub timeouts: u64,
    /// Nerve domain.
    pub domain: u32,
    /// Machine name (its event topic).
    pub machine: String,
    /// CPU to pin to.
    pub cpu: Option<usize>,
}

/// The cyclic machine of seeds/002: active --timeout--> inactive --resume--> active.
pub fn cycle_spec(name: &str, timeout: Duration) -> MachineSpec {
    MachineSpec::new(name, "active")
        .state(StateSpec::new("active").timeout(timeout))
        .state(StateSpec::new("inactive").pass_through("resume"))
        .transition(TransitionSpec::new("timeout", &["active"], "inactive"))
        .transition(TransitionSpec::new("resume", &["inactive"], "active"))
}

fn setup(system: TimerSystem, e: impl std::fmt::Display) -> PeerError {
    PeerError::setup(system.id(), e)
}

/// Runs the cycling side (in a child process started by the suite).
pub fn run_cycle(spec: &CycleSpec) -> Result<(), PeerError> {
    if let Some(cpu) = spec.cpu {
        pin_to_cpu(cpu);
    }
    let sys = spec.system;
    let stop = stdin_closed();
    let cfg = nerve::Config::default()
        .domain(spec.domain)
        .map_err(|e| setup(sys, e))?;
    let ctx = Context::new(cfg).map_err(|e| setup(sys, e))?;
    let node = ctx
        .node("timer_cycle")
        .create()
        .map_err(|e| setup(sys, e))?;
    let timeout = Duration::from_millis(spec.timeout_ms.into());
    say("ready");
    match sys {
        TimerSystem::Nerve | TimerSystem::NerveRt | TimerSystem::NerveSleepOnly => {
            let mut exec = Executor::new();
            if sys == TimerSystem::NerveSleepOnly {
                exec.precision(Precision::sleep_only());
            }
            if sys == TimerSystem::NerveRt {
                exec.realtime(nerve::rt::RtConfig {
                    fifo_priority: Some(crate::suites::scheduler::FIFO_PRIORITY),
                    cpus: None,
                    lock_memory: true,
                });
            }
            let mut machine =
                Machine::new(cycle_spec(&spec.machine, timeout)).map_err(|e| setup(sys, e))?;
            let (handle, target) = (exec.handle(), spec.timeouts);
            let mut count = 0;
            machine
                .on_enter("inactive", move |_| {
                    count += 1;
                    if count >= target {
                        handle.stop();
                    }
                })
                .map_err(|e| setup(sys, e))?;
            exec.machine(&node, machine).map_err(|e| setup(sys, e))?;
            exec.spin().map_err(|e| setup(sys, e))?;
        }
        TimerSystem::StdSleep | TimerSystem::TokioInterval | TimerSystem::ClockNanosleep => {
            let publisher = node
                .publisher::<TransitionEvent>(&event_topic(&spec.machine))
                .qos(event_qos())
                .create()
                .map_err(|e| setup(sys, e))?;
            let mut seq = 1;
            let mut cycle = || -> Result<(), PeerError> {
                for (from, to, trigger) in [
                    ("active", "inactive", "timeout"),
                    ("inactive", "active", "resume"),
                ] {
                    seq += 1;
                    publisher
                        .publish(&TransitionEvent::new(seq, from, to, trigger))
                        .map_err(|e| setup(sys, e))?;
                }
                Ok(())
            };
            publisher
                .publish(&TransitionEvent::new(1, "", "active", "start"))
                .map_err(|e| setup(sys, e))?;
            match sys {
                TimerSystem::StdSleep => {
                    for _ in 0..spec.timeouts {
                        std::thread::sleep(timeout);
                        cycle()?;
                    }
                }
                TimerSystem::ClockNanosleep => {
                    // the kernel may fire a sleeping thread's timer up to its slack late
                    // (50 µs by default) to batch wake-ups; 1 ns asks for none
                    set_timer_slack_ns(1).map_err(|e| setup(sys, e))?;
                    let period = u64::from(spec.timeout_ms) * 1_000_000;
                    let mut deadline = mono_ns();
                    for _ in 0..spec.timeouts {
                        deadline += period;
                        // an absolute deadline: no drift from the work of a cycle, and a
                        // signal that ends the sleep early only means sleeping again
                        while mono_ns() < deadline {
                            sleep_until(deadline);
                        }
                        cycle()?;
                    }
                }
                // tokio-interval, the arm's last system
                _ => {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_time()
                        .build()
                        .map_err(|e| setup(sys, e))?;
                    rt.block_on(async {
                        let mut interval = tokio::time::interval(timeout);
                        interval.tick().await; // the first tick completes at once
                        for _ in 0..spec.timeouts {
                            interval.tick().await;
                            cycle()?;
                        }
                        Ok::<(), PeerError>(())
                    })?;
                }
            }
        }
    }
    say("done");
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// One row: a system at one timeout.
#[derive(Clone, Debug, Serialize)]
pub struct TimerRow {
    /// Always "timer".
    pub suite: &'static str,
    /// System id.
    pub system: String,
    /// Requested timeout.
    pub timeout_ms: u32,
    /// Measured intervals (N).
    pub cycles: u64,
    /// δ from arrival times at the observer (the seed's method), µs.
    pub delta_us: Spread,
    /// δ from the machine's own transition stamps (no transport), µs.
    pub delta_stamp_us: Spread,
    /// Events lost (sequence gaps).
    pub lost: u64,
    /// CPU of the cycling process, % of one core.
    pub cpu_percent: Option<f64>,
    /// Time the host stole from this VM's vCPUs during the run, ms.
    pub host_steal_ms: Option<f64>,
    /// Every δ from arrivals, in order (µs), for the plots.
    #[serde(skip)]
    pub series_us: Vec<f64>,
}

/// The suite's settings.
#[derive(Clone, Debug)]
pub struct TimerSuite {
    /// Requested timeouts in ms.
    pub timeouts_ms: Vec<u32>,
    /// Measured cycles per system and timeout (N).
    pub cycles: u64,
    /// Systems.
    pub systems: Vec<TimerSystem>,
    /// Whether this is the quick variant.
    pub quick: bool,
    /// How to start a role process: executable and leading arguments.
    pub role_command: (PathBuf, Vec<String>),
    /// Nerve domain of the runs.
    pub domain: u32,
}

impl TimerSuite {
    /// The seed's settings: 5, 10, 100 ms; N = 1,000.
    pub fn full(role_command: (PathBuf, Vec<String>)) -> TimerSuite {
        TimerSuite {
            timeouts_ms: vec![5, 10, 100],
            cycles: 1000,
            systems: TimerSystem::ALL.to_vec(),
            quick: false,
            role_command,
            domain: crate::harness::interrupt::domain(700, 90),
        }
    }

    /// N = 200, every timeout and system kept.
    pub fn quick(role_command: (PathBuf, Vec<String>)) -> TimerSuite {
        TimerSuite {
            cycles: 200,
            quick: true,
            ..TimerSuite::full(role_command)
        }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), String> {
        if self.timeouts_ms.is_empty() || self.timeouts_ms.iter().any(|&t| t == 0 || t > 10_000) {
            return Err("timeouts must be 1 to 10000 ms (and at least one)".into());
        }
        if !(2..=1_000_000).contains(&self.cycles) {
            return Err(format!("cycles must be 2 to 1000000, not {}", self.cycles));
        }
        if self.systems.is_empty() {
            return Err("no system to run".into());
        }
        Ok(())
    }

    /// Runs every system at every timeout.
    pub fn execute(&self, host: &Host) -> Result<SuiteOutput, String> {
        self.validate()?;
        let total: u64 = self.timeouts_ms.iter().map(|&t| u64::from(t)).sum::<u64>()
            * (self.cycles + WARMUP)
            * self.systems.len() as u64;
        let bar = progress(total, "ms of timers");
        let mut rows = Vec::new();
        let mut skipped = Vec::new();
        for &timeout_ms in &self.timeouts_ms {
            for &system in &self.systems {
                bar.set_message(format!("{} at {timeout_ms} ms", system.id()));
                match self.run_one(system, timeout_ms) {
                    Ok(r) => rows.push(r),
                    Err(e) => skipped.push(Skipped {
                        system: at(system, timeout_ms),
                        payload_bytes: None,
                        reason: e.to_string(),
                    }),
                }
                bar.inc(u64::from(timeout_ms) * (self.cycles + WARMUP));
            }
        }
        bar.finish_and_clear();
        Ok(output(rows, skipped, self, host))
    }

    fn run_one(&self, system: TimerSystem, timeout_ms: u32) -> Result<TimerRow, PeerError> {
        let machine = format!("bench_timer_{}", std::process::id());
        let two_cores = online_cpus() >= 2;
        let spec = CycleSpec {
            system,
            timeout_ms,
            timeouts: self.cycles + WARMUP,
            domain: self.domain,
            machine: machine.clone(),
            cpu: two_cores.then_some(1),
        };
        let _affinity = AffinityGuard::capture();
        if two_cores {
            pin_to_cpu(0);
        }
        // the instrument itself runs real-time where allowed (every system alike), so its
        // own preemption does not show as timer error
        let observer_rt = nerve::rt::apply(&nerve::rt::RtConfig {
            fifo_priority: Some(crate::suites::scheduler::FIFO_PRIORITY),
            ..Default::default()
        });
        let _normal = Restore(observer_rt.fifo.applied());
        let setup = |e: &dyn std::fmt::Display| PeerError::setup(system.id(), e);
        let cfg = nerve::Config::default()
            .domain(self.domain)
            .map_err(|e| setup(&e))?;
        let ctx = Context::new(cfg).map_err(|e| setup(&e))?;
        let node = ctx.node("timer_observer").create().map_err(|e| setup(&e))?;
        let sub = node
            .subscriber::<TransitionEvent>(&event_topic(&machine))
            .qos(event_qos())
            .wait_mode(WaitMode::Spin)
            .create()
            .map_err(|e| setup(&e))?;
        let (exe, args) = &self.role_command;
        let mut args = args.clone();
        args.push("timer-cycle".into());
        args.push(serde_json::to_string(&spec).map_err(|e| setup(&e))?);
        let mut child = Child::spawn(exe, &args, &[], "timer cycle")?;
        child.expect("ready", Duration::from_secs(20))?;
        let cpu0 = cpu_ns(child.pid());
        let steal0 = steal_ms();
        let t0 = mono_ns();
        let want = self.cycles + WARMUP;
        let limit =
            Duration::from_millis(u64::from(timeout_ms) * (want + 20)) + Duration::from_secs(20);
        let mut arrivals: Vec<(u64, u64)> = Vec::with_capacity(want as usize);
        let mut last_seq = 0;
        let mut lost = 0;
        // the observer spins only from 1 ms before the next timeout is due, so its core
        // stays mostly idle and does not disturb the machine it measures
        let timeout_ns = u64::from(timeout_ms) * 1_000_000;
        let mut next_due: Option<u64> = None;
        while (arrivals.len() as u64) < want {
            if let Some(due) = next_due.take() {
                let wake = due.saturating_sub(1_000_000);
                if mono_ns() < wake {
                    crate::harness::machine::sleep_until(wake);
                }
            }
            let left = limit.saturating_sub(Duration::from_nanos(mono_ns() - t0));
            if left.is_zero() {
                return Err(PeerError::call(
                    system.id(),
                    format!("only {} of {want} timeouts arrived", arrivals.len()),
                ));
            }
            let Some(e) = sub
                .recv_timeout(left.min(Duration::from_secs(1)))
                .map_err(|e| PeerError::call(system.id(), e))?
            else {
                continue;
            };
            let now = mono_ns();
            if last_seq != 0 && e.seq > last_seq + 1 {
                lost += e.seq - last_seq - 1;
            }
            last_seq = e.seq;
            if e.trigger_name() == "timeout" {
                arrivals.push((now, e.stamp_ns));
                next_due = Some(now + timeout_ns);
            }
        }
        let wall = mono_ns() - t0;
        let cpu = match (cpu0, cpu_ns(child.pid())) {
            (Some(a), Some(b)) => Some((b - a) as f64 / wall as f64 * 100.0),
            _ => None,
        };
        child.expect("done", Duration::from_secs(10))?;
        child.stop();
        let want_ns = f64::from(timeout_ms) * 1e6;
        let deltas = |pick: fn(&(u64, u64)) -> u64| -> Vec<f64> {
            arrivals[WARMUP as usize - 1..]
                .windows(2)
                .map(|w| (pick(&w[1]) as f64 - pick(&w[0]) as f64 - want_ns) / 1e3)
                .collect()
        };
        let series = deltas(|a| a.0);
        Ok(TimerRow {
            suite: "timer",
            system: system.id().into(),
            timeout_ms,
            cycles: series.len() as u64,
            delta_us: Spread::exact(&series),
            delta_stamp_us: Spread::exact(&deltas(|a| a.1)),
            lost,
            cpu_percent: cpu,
            host_steal_ms: steal0.zip(steal_ms()).map(|(a, b)| b - a),
            series_us: series,
        })
    }
}

/// Returns the observer thread to normal scheduling when the run ends.
struct Restore(bool);

impl Drop for Restore {
    fn drop(&mut self) {
        if self.0 {
            nerve::rt::set_normal();
        }
    }
}

/// Name of a system at one timeout, in skipped entries and checks.
fn at(system: TimerSystem, timeout_ms: u32) -> String {
    format!("{}, {timeout_ms} ms", system.id())
}

/// The targets of Nerve (default and real-time) at every timeout the suite plans: a run
/// that did not happen is judged not met, with the reason.
fn checks(rows: &[TimerRow], skipped: &[Skipped], suite: &TimerSuite) -> Vec<Verdict> {
    let mut checks = Vec::new();
    let judged = [TimerSystem::Nerve, TimerSystem::NerveRt];
    for &system in suite.systems.iter().filter(|s| judged.contains(s)) {
        for &timeout_ms in &suite.timeouts_ms {
            let at = at(system, timeout_ms);
            let row = rows
                .iter()
                .find(|r| r.system == system.id() && r.timeout_ms == timeout_ms)
                .ok_or_else(|| why_missing(skipped, &at, |k| k.system == at));
            let of = |f: fn(&TimerRow) -> f64| row.clone().map(|r| Some(f(r)));
            checks.push(Verdict::judged(
                "timer",
                "δ mean <= 20 µs",
                &at,
                of(|r| r.delta_us.mean),
                |v| v.abs() <= 20.0,
            ));
            checks.push(Verdict::judged(
                "timer",
                "δ P99 <= 100 µs",
                &at,
                of(|r| r.delta_us.p99),
                |v| v <= 100.0,
            ));
            checks.push(Verdict::judged(
                "timer",
                "δ max <= 500 µs",
                &at,
                of(|r| r.delta_us.max),
                |v| v <= 500.0,
            ));
            checks.push(Verdict::judged(
                "timer",
                "no event lost",
                &at,
                of(|r| r.lost as f64),
                |v| v == 0.0,
            ));
        }
    }
    checks
}

fn output(
    rows: Vec<TimerRow>,
    skipped: Vec<Skipped>,
    suite: &TimerSuite,
    host: &Host,
) -> SuiteOutput {
    let cycles = suite.cycles;
    let checks = checks(&rows, &skipped, suite);
    let head = [
        "system",
        "timeout ms",
        "N",
        "δ min µs",
        "δ mean µs",
        "δ P99 µs",
        "δ max µs",
        "stamp δ mean µs",
        "stamp δ max µs",
        "lost",
        "CPU %",
        "host steal ms",
    ];
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.system.clone(),
                r.timeout_ms.to_string(),
                r.cycles.to_string(),
                num(r.delta_us.min),
                num(r.delta_us.mean),
                num(r.delta_us.p99),
                num(r.delta_us.max),
                num(r.delta_stamp_us.mean),
                num(r.delta_stamp_us.max),
                r.lost.to_string(),
                r.cpu_percent.map_or("–".into(), |c| format!("{c:.2}")),
                r.host_steal_ms.map_or("–".into(), num),
            ]
        })
        .collect();
    let seed_head = [
        "run",
        "timeout ms",
        "N",
        "δ min µs",
        "δ mean µs",
        "δ max µs",
    ];
    let seed_rows: Vec<Vec<String>> = SEED_002
        .iter()
        .enumerate()
        .map(|(i, r)| {
            vec![
                (i + 1).to_string(),
                r.timeout_ms.to_string(),
                r.n.to_string(),
                num(r.min_ms * 1e3),
                num(r.mean_ms * 1e3),
                num(r.max_ms * 1e3),
            ]
        })
        .collect();
    let about = "A cyclic state machine waits in its active state on a one-shot timer; the \
                 timeout moves it through a pass-through inactive state back to active. A \
                 second process (SCHED_FIFO where allowed, busy-polling on its own core from \
                 1 ms before each timeout is due) records each timeout event's \
                 arrival; δ = interval between consecutive arrivals − requested timeout. \
                 std-sleep and tokio-interval drive the same events with what a user would \
                 otherwise write; tokio's timer wheel has a granularity of 1 ms (a deadline \
                 fires on a whole-millisecond tick of its clock, at or after it), so \
                 tokio-interval's δ shows that granularity, not the kernel's wake-up. \
                 clock-nanosleep is the hand-tuned baseline: a loop sleeping to absolute \
                 CLOCK_MONOTONIC deadlines one timeout apart (clock_nanosleep with \
                 TIMER_ABSTIME) with the thread's timer slack set to 1 ns (prctl \
                 PR_SET_TIMERSLACK; the default lets the kernel fire up to 50 µs late). \
                 nerve-rt adds the executor's real-time settings (SCHED_FIFO, locked memory); \
                 nerve-sleep-only is Nerve without the final spin.";
    let mut section = Section::new("timer (seeds/002)", about);
    section.paragraph(&format!(
        "N = {cycles} per point after {WARMUP} warm-up cycles; machine: {}.",
        host.cpu
    ));
    let mut timeouts: Vec<u32> = rows.iter().map(|r| r.timeout_ms).collect();
    timeouts.sort_unstable();
    timeouts.dedup();
    for t in timeouts {
        let series: Vec<Series> = rows
            .iter()
            .filter(|r| r.timeout_ms == t)
            .map(|r| Series {
                label: r.system.clone(),
                points: quantiles(
                    &r.series_us
                        .iter()
                        .map(|v| v.abs().max(0.01))
                        .collect::<Vec<_>>(),
                    200,
                ),
            })
            .collect();
        section.figure(
            &line_chart(
                &format!("|δ| quantiles, one-shot timeout {t} ms"),
                &Axis::linear("quantile"),
                &Axis::log("|δ| (µs)"),
                &series,
            ),
            "The |δ| not exceeded by that fraction of cycles (every cycle as measured).",
        );
    }
    section.table(Some("Summary"), &head, &table);
    section.table(
        Some(&format!(
            "{} (published in {}; not measured here)",
            ROS_TRANSITIONS.system, ROS_TRANSITIONS.reference
        )),
        &seed_head,
        &seed_rows,
    );
    let mut summary = String::from("timer: δ mean / P99 / max µs\n");
    for r in &rows {
        summary.push_str(&format!(
            "  {:<18} {:>4} ms  {:>8} / {:>8} / {:>8}\n",
            r.system,
            r.timeout_ms,
            num(r.delta_us.mean),
            num(r.delta_us.p99),
            num(r.delta_us.max)
        ));
    }
    section.finish("timer", json_rows(&rows), skipped, checks, summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_statistics_are_exact() {
        let d = Spread::exact(&[3.0, -1.0, 2.0, 10.0]);
        assert_eq!((d.min, d.mean, d.p99, d.max), (-1.0, 3.5, 10.0, 10.0));
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(Spread::exact(&v).p99, 990.0);
        assert_eq!(Spread::exact(&[]), Spread::default());
    }

    #[test]
    fn settings_are_checked() {
        let s = TimerSuite::quick((PathBuf::from("x"), vec![]));
        assert!(s.validate().is_ok());
        assert_eq!((s.cycles, s.timeouts_ms.clone()), (200, vec![5, 10, 100]));
        let bad = TimerSuite {
            timeouts_ms: vec![0],
            ..s.clone()
        };
        assert!(bad.validate().unwrap_err().contains("timeouts"));
        assert!(TimerSuite { cycles: 1, ..s }.validate().is_err());
        assert_eq!(TimerSystem::parse("std-sleep"), Some(TimerSystem::StdSleep));
        assert_eq!(TimerSystem::parse("x"), None);
    }

    #[test]
    fn the_cycle_is_a_valid_machine() {
        let m = Machine::new(cycle_spec("c", Duration::from_millis(5))).unwrap();
        assert_eq!(m.spec().states.len(), 2);
    }
}
