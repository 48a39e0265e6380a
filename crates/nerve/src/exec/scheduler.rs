//! A real-time-aware tick scheduler: nodes with rates and priorities, per-tick deadlines
//! measured from the release time, WCET budgets, miss policies and a watchdog.
//!
//! Every node is released on its own absolute grid (`start + k / rate`). The scheduler
//! thread sleeps precisely ([`PreciseSleep`]) until the earliest release, then runs the
//! released nodes highest priority first. For each tick it measures:
//! - *lateness* (release jitter): tick start − release;
//! - *response*: tick end − release, checked against the node's deadline (default: the
//!   period), so time spent waiting behind other nodes counts, not only execution;
//! - *execution*: tick end − tick start, checked against the node's WCET budget.
//!
//! A miss (deadline or budget) is counted and handled by the node's [`MissPolicy`]. A
//! watchdog thread fires an emergency-stop hook when a node has not completed a tick
//! within its bound (a hung callback, or a scheduler starved by one). Releases that fell
//! behind by whole periods are skipped and counted, keeping the grid.

use crate::error::SchedulerError;
use crate::exec::timer::{PreciseSleep, Precision};
use crate::sys::clock::mono_ns;
use crate::sys::rt::{RtConfig, RtReport};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Highest node rate accepted.
pub const MAX_RATE_HZ: f64 = 100_000.0;
/// Most nodes in one scheduler.
pub const MAX_NODES: usize = 4096;
/// Topic where schedulers publish their [`SchedulerReport`] (for `nerve node list`).
pub const STATS_TOPIC: &str = "/_nerve/scheduler";
/// How often the report is published when a stats node is set.
pub const STATS_PERIOD: Duration = Duration::from_millis(500);

/// What happens when a tick misses its deadline or budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MissPolicy {
    /// Count it and print a warning (the first, then every 1000th).
    #[default]
    Warn,
    /// Count it and drop the node's next release to shed load.
    Skip,
    /// Count it, call the safe-stop hook and stop ticking the node.
    SafeStop,
}

/// A scheduler node's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeConfig {
    /// Name (shown by `nerve node list`).
    pub name: String,
    /// Ticks per second.
    pub rate_hz: f64,
    /// Higher runs first when several nodes are released.
    pub priority: i32,
    /// Longest allowed time from release to tick end (default: the period).
    pub deadline: Option<Duration>,
    /// Longest allowed execution of one tick (WCET budget; default: none).
    pub budget: Option<Duration>,
    /// What a miss does.
    pub on_miss: MissPolicy,
}

impl NodeConfig {
    /// A node ticking at `rate_hz`, priority 0, deadline one period, no budget.
    pub fn new(name: &str, rate_hz: f64) -> NodeConfig {
        NodeConfig {
            name: name.into(),
            rate_hz,
            priority: 0,
            deadline: None,
            budget: None,
            on_miss: MissPolicy::Warn,
        }
    }
    /// Sets the priority.
    pub fn priority(mut self, p: i32) -> Self {
        self.priority = p;
        self
    }
    /// Sets the deadline (from release).
    pub fn deadline(mut self, d: Duration) -> Self {
        self.deadline = Some(d);
        self
    }
    /// Sets the WCET budget.
    pub fn budget(mut self, b: Duration) -> Self {
        self.budget = Some(b);
        self
    }
    /// Sets the miss policy.
    pub fn on_miss(mut self, p: MissPolicy) -> Self {
        self.on_miss = p;
        self
    }

    fn period_ns(&self) -> u64 {
        (1e9 / self.rate_hz).round() as u64
    }

    fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() || self.name.len() > 64 {
            return Err("node names hold 1 to 64 bytes".into());
        }
        if !(self.rate_hz.is_finite() && self.rate_hz > 0.0 && self.rate_hz <= MAX_RATE_HZ) {
            return Err(format!(
                "rate {} Hz is outside (0, {MAX_RATE_HZ}]",
                self.rate_hz
            ));
        }
        for (what, d) in [("deadline", self.deadline), ("budget", self.budget)] {
            if d == Some(Duration::ZERO) {
                return Err(format!("{what} must be positive"));
            }
        }
        Ok(())
    }
}

/// One tick as the node's callback sees it.
#[derive(Clone, Copy, Debug)]
pub struct TickInfo {
    /// Its release time (monotonic ns).
    pub release_ns: u64,
    /// When it started (monotonic ns).
    pub start_ns: u64,
    /// Ticks of this node so far, this one included.
    pub count: u64,
}

/// A missed deadline or budget, as the safe-stop hook sees it.
#[derive(Clone, Debug)]
pub struct Miss {
    /// The node.
    pub node: String,
    /// Tick number.
    pub tick: u64,
    /// Release to end, ns.
    pub response_ns: u64,
    /// Start to end, ns.
    pub execution_ns: u64,
    /// Whether the deadline was missed.
    pub deadline_missed: bool,
    /// Whether the budget was overrun.
    pub budget_overrun: bool,
}

/// A node that stopped ticking, as the watchdog's emergency-stop hook sees it.
#[derive(Clone, Debug)]
pub struct Hang {
    /// The node.
    pub node: String,
    /// How long since its last completed tick (or the start), ns.
    pub silent_ns: u64,
    /// Whether it is inside a tick right now (its callback hangs) rather than starved.
    pub in_tick: bool,
}

/// Distribution of a measured time, in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    /// Of a histogram of nanoseconds (zeros when empty).
    pub fn of(h: &Histogram<u64>) -> Spread {
        if h.is_empty() {
            return Spread::default();
        }
        Spread {
            min: h.min() as f64 / 1e3,
            mean: h.mean() / 1e3,
            p99: h.value_at_quantile(0.99) as f64 / 1e3,
            max: h.max() as f64 / 1e3,
        }
    }

    /// Of values already in µs, exactly (P99 by nearest rank; zeros when empty).
    pub fn exact(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let rank = ((0.99 * v.len() as f64).ceil() as usize).clamp(1, v.len());
        Spread {
            min: v[0],
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p99: v[rank - 1],
            max: v[v.len() - 1],
        }
    }
}

/// One node's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    /// Name.
    pub name: String,
    /// Asked rate.
    pub rate_hz: f64,
    /// Priority.
    pub priority: i32,
    /// Ticks per second achieved over the run.
    pub achieved_hz: f64,
    /// Ticks run.
    pub ticks: u64,
    /// Lateness of tick starts after their release, µs.
    pub jitter_us: Spread,
    /// Execution time per tick, µs.
    pub execution_us: Spread,
    /// Ticks that ended after their deadline (from release).
    pub deadline_misses: u64,
    /// Ticks that ran longer than the budget.
    pub budget_overruns: u64,
    /// Releases dropped (fallen behind, or by the Skip policy).
    pub skipped: u64,
    /// Whether the safe-stop policy stopped it.
    pub stopped: bool,
}

/// A scheduler's figures (also published on [`STATS_TOPIC`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SchedulerReport {
    /// Scheduler name.
    pub name: String,
    /// Process id.
    pub pid: u32,
    /// Seconds run.
    pub elapsed_s: f64,
    /// Ticks of all nodes.
    pub ticks: u64,
    /// Time the scheduler itself spent per tick (choosing, bookkeeping, measuring;
    /// excluding callbacks and sleeping), ns.
    pub overhead_ns_per_tick: f64,
    /// Kernel wake-ups that came after the release they were for.
    pub late_wakeups: u64,
    /// Times the watchdog fired.
    pub watchdog_fired: u64,
    /// Real-time settings in force.
    pub rt: Option<RtReport>,
    /// Every node.
    pub nodes: Vec<NodeReport>,
}

impl crate::message::SerdeMessage for SchedulerReport {
    const TYPE_NAME: &'static str = "nerve/SchedulerReport";
}

type TickFn = Box<dyn FnMut(&TickInfo)>;
type MissFn = Box<dyn FnMut(&Miss)>;
type HangFn = Arc<dyn Fn(&Hang) + Send + Sync>;

/// Progress of one node, shared with the watchdog.
#[derive(Default)]
struct Beat {
    /// End of the last tick (monotonic ns).
    last_end: AtomicU64,
    /// Start of the tick in progress, 0 outside ticks.
    in_tick: AtomicU64,
    /// Stopped nodes are not watched.
    stopped: AtomicBool,
}

struct NodeState {
    cfg: NodeConfig,
    period: u64,
    deadline: u64,
    budget: Option<u64>,
    tick: TickFn,
    count: u64,
    jitter: Histogram<u64>,
    exec: Histogram<u64>,
    deadline_misses: u64,
    budget_overruns: u64,
    skipped: u64,
    stopped: bool,
    beat: Arc<Beat>,
}

/// A histogram of nanoseconds for one node's ticks.
pub fn histogram() -> Histogram<u64> {
    // 1 ns to 100 s at 2 significant digits: a few kB per node
    Histogram::new_with_bounds(1, 100_000_000_000, 2).expect("static bounds are valid")
}

/// Stops a running [`Scheduler`] from any thread.
#[derive(Clone, Default)]
pub struct SchedulerStop {
    flag: Arc<AtomicBool>,
}

impl SchedulerStop {
    /// Asks the scheduler to return after the tick in progress.
    pub fn stop(&self) {
        // SYNC: Release pairs with the Acquire load in the scheduler loop.
        self.flag.store(true, Ordering::Release);
    }
}

/// Runs scheduler nodes on the calling thread (see the module docs).
pub struct Scheduler {
    name: String,
    nodes: Vec<NodeState>,
    precision: Precision,
    rt: Option<RtConfig>,
    watchdog: Option<(Duration, HangFn)>,
    on_safe_stop: Option<MissFn>,
    stats: Option<crate::topic::publisher::Publisher<crate::message::Serde<SchedulerReport>>>,
    stop: SchedulerStop,
}

impl Scheduler {
    /// An empty scheduler.
    pub fn new(name: &str) -> Scheduler {
        Scheduler {
            name: name.into(),
            nodes: Vec::new(),
            precision: Precision::default(),
            rt: None,
            watchdog: None,
            on_safe_stop: None,
            stats: None,
            stop: SchedulerStop::default(),
        }
    }

    /// Adds a node ticking `tick` at its rate.
    pub fn add<F>(&mut self, cfg: NodeConfig, tick: F) -> Result<&mut Self, SchedulerError>
    where
        F: FnMut(&TickInfo) + 'static,
    {
        cfg.validate()
            .map_err(|reason| SchedulerError::InvalidNode {
                node: cfg.name.clone(),
                reason,
            })?;
        if self.nodes.len() == MAX_NODES {
            return Err(SchedulerError::TooManyNodes { max: MAX_NODES });
        }
        if self.nodes.iter().any(|n| n.cfg.name == cfg.name) {
            return Err(SchedulerError::InvalidNode {
                node: cfg.name.clone(),
                reason: "a node of that name is already scheduled".into(),
            });
        }
        let period = cfg.period_ns();
        self.nodes.push(NodeState {
            deadline: cfg.deadline.map_or(period, |d| d.as_nanos() as u64),
            budget: cfg.budget.map(|b| b.as_nanos() as u64),
            period,
            cfg,
            tick: Box::new(tick),
            count: 0,
            jitter: histogram(),
            exec: histogram(),
            deadline_misses: 0,
            budget_overruns: 0,
            skipped: 0,
            stopped: false,
            beat: Arc::default(),
        });
        Ok(self)
    }

    /// How releases are waited for (default [`Precision::default`]).
    pub fn precision(&mut self, p: Precision) -> &mut Self {
        self.precision = p;
        self
    }

    /// Real-time settings applied to the scheduler thread when it starts.
    pub fn realtime(&mut self, rt: RtConfig) -> &mut Self {
        self.rt = Some(rt);
        self
    }

    /// Fires `on_hang` (on the watchdog's own thread) when a node completed no tick for
    /// `bound` (at least its period); once per silence.
    pub fn watchdog<F>(&mut self, bound: Duration, on_hang: F) -> &mut Self
    where
        F: Fn(&Hang) + Send + Sync + 'static,
    {
        self.watchdog = Some((bound, Arc::new(on_hang)));
        self
    }

    /// Called on the scheduler thread when a [`MissPolicy::SafeStop`] node misses.
    pub fn on_safe_stop<F>(&mut self, hook: F) -> &mut Self
    where
        F: FnMut(&Miss) + 'static,
    {
        self.on_safe_stop = Some(Box::new(hook));
        self
    }

    /// Publishes the report on [`STATS_TOPIC`] every [`STATS_PERIOD`] through `node`, so
    /// `nerve node list` shows the nodes' rates, jitter and misses.
    pub fn publish_stats(
        &mut self,
        node: &crate::context::Node,
    ) -> Result<&mut Self, SchedulerError> {
        let p = node
            .publisher::<crate::message::Serde<SchedulerReport>>(STATS_TOPIC)
            .qos(stats_qos())
            .create()?;
        self.stats = Some(p);
        Ok(self)
    }

    /// A handle that stops the scheduler from any thread.
    pub fn stopper(&self) -> SchedulerStop {
        self.stop.clone()
    }

    /// Runs until stopped (or SIGINT/SIGTERM).
    pub fn run(&mut self) -> Result<SchedulerReport, SchedulerError> {
        crate::sys::signals::install();
        self.run_inner(None)
    }

    /// Runs for `duration` (or until stopped).
    pub fn run_for(&mut self, duration: Duration) -> Result<SchedulerReport, SchedulerError> {
        self.run_inner(Some(duration))
    }

    fn run_inner(&mut self, duration: Option<Duration>) -> Result<SchedulerReport, SchedulerError> {
        if self.nodes.is_empty() {
            return Err(SchedulerError::NoNodes);
        }
        let rt = self.rt.as_ref().map(crate::sys::rt::apply);
        if let Some(r) = &rt {
            for w in r.warnings() {
                eprintln!("nerve scheduler {}: {w}", self.name);
            }
        }
        let sleep = PreciseSleep::new(self.precision);
        // first releases 1 ms ahead, so every node starts on the same instant
        let start = mono_ns() + 1_000_000;
        let end = duration.map(|d| start + d.as_nanos() as u64);
        // releases ordered by time, then priority; ready nodes by priority, then release
        let mut pending: BinaryHeap<Reverse<(u64, Reverse<i32>, usize)>> = BinaryHeap::new();
        let mut ready: BinaryHeap<(i32, Reverse<u64>, Reverse<usize>)> = BinaryHeap::new();
        for (i, n) in self.nodes.iter_mut().enumerate() {
            n.beat.last_end.store(start, Ordering::Relaxed);
            pending.push(Reverse((start, Reverse(n.cfg.priority), i)));
        }
        let watchdog = match self.watchdog.clone() {
            Some((bound, hook)) => Some(Watchdog::spawn(
                bound,
                hook,
                self.nodes
                    .iter()
                    .map(|n| (n.cfg.name.clone(), n.period, n.beat.clone()))
                    .collect(),
            )?),
            None => None,
        };
        let mut run = Progress {
            start,
            ticks: 0,
            overhead: 0,
            sleep: &sleep,
            watchdog,
            rt,
        };
        let mut next_stats = start + STATS_PERIOD.as_nanos() as u64;
        let mut mark = mono_ns();
        loop {
            // SYNC: Acquire pairs with the Release store in `SchedulerStop::stop`.
            if self.stop.flag.load(Ordering::Acquire) || crate::sys::signals::requested() {
                break;
            }
            let now = mark;
            if end.is_some_and(|e| now >= e) {
                break;
            }
            while let Some(&Reverse((at, _, i))) = pending.peek() {
                if at > now {
                    break;
                }
                pending.pop();
                ready.push((self.nodes[i].cfg.priority, Reverse(at), Reverse(i)));
            }
            let Some((_, Reverse(release), Reverse(i))) = ready.pop() else {
                if now >= next_stats {
                    next_stats += STATS_PERIOD.as_nanos() as u64;
                    self.publish(&run, now)?;
                }
                let mut wake = pending.peek().map_or(u64::MAX, |r| r.0 .0);
                if let Some(e) = end {
                    wake = wake.min(e);
                }
                let before = mono_ns();
                run.overhead += before - mark;
                mark = sleep.sleep_until(wake.min(before + 1_000_000_000));
                continue;
            };
            let n = &mut self.nodes[i];
            let started = mono_ns();
            run.overhead += started - mark;
            n.count += 1;
            n.beat.in_tick.store(started, Ordering::Relaxed);
            (n.tick)(&TickInfo {
                release_ns: release,
                start_ns: started,
                count: n.count,
            });
            let ended = mono_ns();
            run.ticks += 1;
            n.beat.in_tick.store(0, Ordering::Relaxed);
            n.beat.last_end.store(ended, Ordering::Relaxed);
            let _ = n.jitter.record((started - release).max(1));
            let exec = ended - started;
            let _ = n.exec.record(exec.max(1));
            let deadline_missed = ended - release > n.deadline;
            let budget_overrun = n.budget.is_some_and(|b| exec > b);
            n.deadline_misses += u64::from(deadline_missed);
            n.budget_overruns += u64::from(budget_overrun);
            // next release on the grid; releases already past are dropped and counted
            let mut next = release + n.period;
            if next <= ended {
                let behind = (ended - next) / n.period + 1;
                n.skipped += behind;
                next += behind * n.period;
            }
            if deadline_missed || budget_overrun {
                let miss = Miss {
                    node: n.cfg.name.clone(),
                    tick: n.count,
                    response_ns: ended - release,
                    execution_ns: exec,
                    deadline_missed,
                    budget_overrun,
                };
                match n.cfg.on_miss {
                    MissPolicy::Warn => {
                        let misses = n.deadline_misses + n.budget_overruns;
                        if misses % 1000 == 1 {
                            eprintln!(
                                "nerve scheduler {}: node {} missed (tick {}: {} µs from release, {} µs running; {misses} misses so far)",
                                self.name,
                                miss.node,
                                miss.tick,
                                miss.response_ns / 1000,
                                miss.execution_ns / 1000
                            );
                        }
                    }
                    MissPolicy::Skip => {
                        n.skipped += 1;
                        next += n.period;
                    }
                    MissPolicy::SafeStop => {
                        n.stopped = true;
                        n.beat.stopped.store(true, Ordering::Relaxed);
                        if let Some(h) = self.on_safe_stop.as_mut() {
                            h(&miss);
                        }
                    }
                }
            }
            if !n.stopped {
                pending.push(Reverse((next, Reverse(n.cfg.priority), i)));
            }
            if pending.is_empty() && ready.is_empty() {
                break;
            }
            mark = ended;
        }
        let now = mono_ns();
        let report = self.report(&run, now);
        if let Some(w) = run.watchdog {
            w.stop();
        }
        if let Some(p) = &self.stats {
            p.publish_value(&report)?;
        }
        Ok(report)
    }

    fn publish(&self, run: &Progress<'_>, now: u64) -> Result<(), SchedulerError> {
        if let Some(p) = &self.stats {
            p.publish_value(&self.report(run, now))?;
        }
        Ok(())
    }

    fn report(&self, run: &Progress<'_>, now: u64) -> SchedulerReport {
        let (start, ticks) = (run.start, run.ticks);
        let elapsed = now.saturating_sub(start) as f64 / 1e9;
        SchedulerReport {
            name: self.name.clone(),
            pid: std::process::id(),
            elapsed_s: elapsed,
            ticks,
            overhead_ns_per_tick: if ticks == 0 {
                0.0
            } else {
                run.overhead as f64 / ticks as f64
            },
            late_wakeups: run.sleep.late_wakeups(),
            watchdog_fired: run.watchdog.as_ref().map_or(0, |w| w.fired()),
            rt: run.rt.clone(),
            nodes: self
                .nodes
                .iter()
                .map(|n| NodeReport {
                    name: n.cfg.name.clone(),
                    rate_hz: n.cfg.rate_hz,
                    priority: n.cfg.priority,
                    achieved_hz: if elapsed > 0.0 {
                        n.count as f64 / elapsed
                    } else {
                        0.0
                    },
                    ticks: n.count,
                    jitter_us: Spread::of(&n.jitter),
                    execution_us: Spread::of(&n.exec),
                    deadline_misses: n.deadline_misses,
                    budget_overruns: n.budget_overruns,
                    skipped: n.skipped,
                    stopped: n.stopped,
                })
                .collect(),
        }
    }
}

/// What a run has done so far (for its reports).
struct Progress<'a> {
    start: u64,
    ticks: u64,
    overhead: u64,
    sleep: &'a PreciseSleep,
    watchdog: Option<Watchdog>,
    rt: Option<RtReport>,
}

/// Quality of service of [`STATS_TOPIC`]: the latest report of every scheduler is kept
/// for late joiners.
pub fn stats_qos() -> crate::qos::Qos {
    crate::qos::Qos::latched().max_endpoints(64, 16)
}

struct Watchdog {
    shared: Arc<(Mutex<bool>, Condvar)>,
    fired: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn spawn(
        bound: Duration,
        hook: HangFn,
        nodes: Vec<(String, u64, Arc<Beat>)>,
    ) -> Result<Watchdog, SchedulerError> {
        let shared = Arc::new((Mutex::new(false), Condvar::new()));
        let fired = Arc::new(AtomicU64::new(0));
        let (s, f) = (shared.clone(), fired.clone());
        let thread = std::thread::Builder::new()
            .name("nerve-watchdog".into())
            .spawn(move || {
                let bound_ns = bound.as_nanos() as u64;
                // a node is silent once it completed no tick for its bound (never less
                // than two periods, so slow nodes are not flagged between ticks)
                let bounds: Vec<u64> = nodes.iter().map(|n| bound_ns.max(2 * n.1)).collect();
                let check = Duration::from_nanos((bound_ns / 4).max(1_000_000));
                let mut latched = vec![false; nodes.len()];
                let (lock, cv) = &*s;
                let mut stop = lock.lock().unwrap_or_else(|p| p.into_inner());
                while !*stop {
                    stop = cv
                        .wait_timeout(stop, check)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    let now = mono_ns();
                    for (k, (name, _, beat)) in nodes.iter().enumerate() {
                        if beat.stopped.load(Ordering::Relaxed) {
                            continue;
                        }
                        let last = beat.last_end.load(Ordering::Relaxed);
                        let silent = now.saturating_sub(last);
                        if silent <= bounds[k] {
                            latched[k] = false;
                        } else if !latched[k] {
                            latched[k] = true;
                            f.fetch_add(1, Ordering::Relaxed);
                            hook(&Hang {
                                node: name.clone(),
                                silent_ns: silent,
                                in_tick: beat.in_tick.load(Ordering::Relaxed) != 0,
                            });
                        }
                    }
                }
            })
            .map_err(|e| SchedulerError::Thread(e.to_string()))?;
        Ok(Watchdog {
            shared,
            fired,
            thread: Some(thread),
        })
    }

    fn fired(&self) -> u64 {
        self.fired.load(Ordering::Relaxed)
    }

    fn stop(mut self) {
        let (lock, cv) = &*self.shared;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
