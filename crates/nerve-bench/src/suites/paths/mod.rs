//! `nerve bench paths`: the all-paths ping-pong of seeds/004 (HORUS). Latency by route
//! (same thread, cross thread, cross process), topology (1:1, N:1, 1:N, N:N with N = 2
//! and 4) and robotics message type. A pinger fills its whole message, stamps nothing but
//! a tag in its first 8 bytes and publishes; every ponger copies the whole payload into a
//! reply on that pinger's own reply topic; the pinger waits for a reply from every ponger.
//! One-way = round trip / 2. (A reply topic shared by several pingers would let one that
//! runs ahead flood the others' queues: under drop-oldest their oldest replies are lost.)
//! Raw iceoryx2 runs beside Nerve on the cross-process 1:1 route.

pub mod cpp;
mod floor;
mod options;
pub use options::PathsOptions;

use crate::harness::child::Child;
use crate::harness::machine::pin_to_cpu;
use crate::harness::progress;
use crate::harness::stats::{Dist, Recorder};
use crate::harness::PeerError;
use crate::peers::pattern;
use crate::report::plot::{bar_chart, Axis};
use crate::report::Skipped;
use crate::report::{json_rows, num, Section, SuiteOutput, Verdict};
pub use floor::{spread, FloorRound};
use nerve::{Context, Message, Qos, WaitMode};
use nerve_msgs::{BatteryState, CmdVel, Imu, LaserScan, Odometry, PointCloud};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Calls `$f::<M>(args…)` with the Rust type of a [`MessageKind`].
macro_rules! dispatch {
    ($kind:expr, $f:ident, $($arg:expr),*) => {
        match $kind {
            MessageKind::CmdVel => $f::<CmdVel>($($arg),*),
            MessageKind::BatteryState => $f::<BatteryState>($($arg),*),
            MessageKind::Imu => $f::<Imu>($($arg),*),
            MessageKind::Odometry => $f::<Odometry>($($arg),*),
            MessageKind::LaserScan => $f::<LaserScan>($($arg),*),
            MessageKind::PointCloud1K | MessageKind::PointCloud10K => $f::<PointCloud>($($arg),*),
        }
    };
}

mod load;
pub use load::{run_sinks, LoadKind, LoadRow, SinkResult, SinkSpec};

/// The message types of seeds/004.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MessageKind {
    /// 16 B.
    CmdVel,
    /// 104 B.
    BatteryState,
    /// 304 B.
    Imu,
    /// 816 B (736 B before frame ids grew to 64 bytes).
    Odometry,
    /// 360 ranges (~1.5 KB).
    LaserScan,
    /// 1,000 points of x, y, z (~12 KB).
    PointCloud1K,
    /// 10,000 points of x, y, z (~120 KB).
    PointCloud10K,
}

impl MessageKind {
    /// Every message, smallest first.
    pub const ALL: [MessageKind; 7] = [
        MessageKind::CmdVel,
        MessageKind::BatteryState,
        MessageKind::Imu,
        MessageKind::Odometry,
        MessageKind::LaserScan,
        MessageKind::PointCloud1K,
        MessageKind::PointCloud10K,
    ];

    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            MessageKind::CmdVel => "CmdVel",
            MessageKind::BatteryState => "BatteryState",
            MessageKind::Imu => "Imu",
            MessageKind::Odometry => "Odometry",
            MessageKind::LaserScan => "LaserScan",
            MessageKind::PointCloud1K => "PointCloud1K",
            MessageKind::PointCloud10K => "PointCloud10K",
        }
    }

    /// Parses [`MessageKind::name`] (case-insensitive).
    pub fn parse(s: &str) -> Option<MessageKind> {
        MessageKind::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
    }

    /// Slice elements after the head.
    fn elems(self) -> usize {
        match self {
            MessageKind::LaserScan => 360,
            MessageKind::PointCloud1K => 12_000,
            MessageKind::PointCloud10K => 120_000,
            _ => 0,
        }
    }

    /// Bytes of the whole message.
    pub fn bytes(self) -> usize {
        fn of<M: Message>(elems: usize) -> usize {
            nerve::message::elems_offset::<M>() + elems * std::mem::size_of::<M::Elem>()
        }
        let n = self.elems();
        match self {
            MessageKind::CmdVel => of::<CmdVel>(n),
            MessageKind::BatteryState => of::<BatteryState>(n),
            MessageKind::Imu => of::<Imu>(n),
            MessageKind::Odometry => of::<Odometry>(n),
            MessageKind::LaserScan => of::<LaserScan>(n),
            MessageKind::PointCloud1K | MessageKind::PointCloud10K => of::<PointCloud>(n),
        }
    }
}

/// Where pinger and pongers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Route {
    /// Everything on one thread.
    SameThread,
    /// Every pinger and ponger on its own thread of one process.
    CrossThread,
    /// Pingers in this process, pongers in another.
    CrossProcess,
}

impl Route {
    /// Every route.
    pub const ALL: [Route; 3] = [Route::SameThread, Route::CrossThread, Route::CrossProcess];

    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Route::SameThread => "same-thread",
            Route::CrossThread => "cross-thread",
            Route::CrossProcess => "cross-process",
        }
    }
}

/// Pingers and pongers of the topologies: 1:1, N:1, 1:N, N:N for N = 2 and 4.
pub const TOPOLOGIES: [(usize, usize); 7] =
    [(1, 1), (2, 1), (1, 2), (2, 2), (4, 1), (1, 4), (4, 4)];

/// What a ponger process is asked to do.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PongSpec {
    /// Message type.
    pub message: MessageKind,
    /// Ping topic (pinger i's replies go to `<topic>/pong<i>`).
    pub topic: String,
    /// Pingers (each has a reply topic of its own).
    pub pingers: usize,
    /// Pongers to run (one thread each).
    pub pongers: usize,
    /// Nerve domain.
    pub domain: u32,
    /// Busy-poll (else adaptive waiting).
    pub spin: bool,
    /// Raw iceoryx2 instead of Nerve.
    pub raw: bool,
    /// Whether every thread has a core of its own: ponger `i` is then pinned to CPU
    /// `i` and pinger `j` to CPU `pongers + j` (`Some(0)`; `None`: not pinned).
    pub cpu: Option<usize>,
}

/// One row of the report.
#[derive(Clone, Debug, Serialize)]
pub struct PathsRow {
    /// Always "paths".
    pub suite: &'static str,
    /// "nerve" or "iceoryx2".
    pub system: String,
    /// "spin" or "adaptive".
    pub mode: String,
    /// Route name.
    pub route: String,
    /// "pingers:pongers".
    pub topology: String,
    /// Message type.
    pub message: String,
    /// Bytes per message.
    pub payload_bytes: usize,
    /// Measured round trips (every pinger's).
    pub iterations: u64,
    /// Warm-up round trips per pinger.
    pub warmup: usize,
    /// Round trips in µs.
    pub rtt_us: Dist,
    /// Round trip / 2 in µs.
    pub one_way_us: Dist,
}

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct PathsSuite {
    /// Routes to measure.
    pub routes: Vec<Route>,
    /// (pingers, pongers).
    pub topologies: Vec<(usize, usize)>,
    /// Messages.
    pub messages: Vec<MessageKind>,
    /// Measured round trips per pinger.
    pub iterations: usize,
    /// Warm-up round trips per pinger.
    pub warmup: usize,
    /// Whether raw iceoryx2 runs beside Nerve (cross-process 1:1).
    pub iceoryx2: bool,
    /// Whether the C++ API runs beside Rust (cross-process 1:1, CmdVel, Imu,
    /// PointCloud 10K: C++ ↔ C++ and Rust ↔ C++), with the C ABI's own cost.
    pub cpp: bool,
    /// Program and arguments that start a ponger process: `<program> <args…> ponger
    /// <spec-json>` must call [`run_pongers`].
    pub role_command: (PathBuf, Vec<String>),
    /// Nerve domain.
    pub domain: u32,
    /// Whether this is the `--quick` variant.
    pub quick: bool,
    /// Whether the ping-pong runs (latency by route, topology and message, the floor).
    pub latency: bool,
    /// Whether the load runs run (throughput, bursts, send-only, the mixed loop, scaling).
    pub load: bool,
    /// Messages per producer of a load run (`None`: a byte budget spread over the
    /// message's size, 200,000 or 2,000,000 at most).
    pub load_count: Option<u64>,
}

const TIMEOUT: Duration = Duration::from_secs(5);

impl PathsSuite {
    /// The full run: 10,000 round trips after 1,000 warm-up, every route, topology and
    /// message.
    pub fn full(role_command: (PathBuf, Vec<String>)) -> PathsSuite {
        PathsSuite {
            routes: Route::ALL.to_vec(),
            topologies: TOPOLOGIES.to_vec(),
            messages: MessageKind::ALL.to_vec(),
            iterations: 10_000,
            warmup: 1_000,
            iceoryx2: true,
            cpp: true,
            role_command,
            domain: crate::harness::interrupt::domain(700, 90),
            quick: false,
            latency: true,
            load: true,
            load_count: None,
        }
    }

    /// The quick run: 1,000 round trips after 100 warm-up, everything else kept.
    pub fn quick(role_command: (PathBuf, Vec<String>)) -> PathsSuite {
        PathsSuite {
            iterations: 1_000,
            warmup: 100,
            quick: true,
            ..PathsSuite::full(role_command)
        }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), String> {
        if self.iterations == 0 {
            return Err("iterations must be at least 1".into());
        }
        if self.routes.is_empty() || self.topologies.is_empty() || self.messages.is_empty() {
            return Err("at least one route, topology and message are needed".into());
        }
        if !self.latency && !self.load {
            return Err("nothing to run: both the latency and the load parts are off".into());
        }
        for &(a, b) in &self.topologies {
            if !(1..=8).contains(&a) || !(1..=8).contains(&b) {
                return Err(format!("topology {a}:{b}: 1 to 8 pingers and pongers"));
            }
        }
        Ok(())
    }

    fn runs(&self) -> usize {
        let one_one = self.topologies.contains(&(1, 1));
        let raw =
            usize::from(self.iceoryx2 && one_one && self.routes.contains(&Route::CrossProcess));
        let latency = if self.latency {
            self.messages.len() * (self.routes.len() * self.topologies.len() + raw)
                + self.floor_rounds()
                + 2 * self.cpp_messages().len()
                + usize::from(self.cpp)
        } else {
            0
        };
        latency + self.load_plans().len()
    }

    /// The load runs planned (none when the load part is off).
    /// The messages the C++ rows run for.
    fn cpp_messages(&self) -> Vec<MessageKind> {
        let planned = self.cpp
            && self.latency
            && self.topologies.contains(&(1, 1))
            && self.routes.contains(&Route::CrossProcess);
        self.messages
            .iter()
            .copied()
            .filter(|m| planned && cpp::MESSAGES.contains(m))
            .collect()
    }

    fn load_plans(&self) -> Vec<load::LoadPlan> {
        if self.load {
            load::plan(self)
        } else {
            Vec::new()
        }
    }

    /// Rounds of the alternation with the floor (none if it has nothing to compare).
    fn floor_rounds(&self) -> usize {
        let compared = self.messages.contains(&MessageKind::CmdVel)
            && self.topologies.contains(&(1, 1))
            && (self.routes.contains(&Route::CrossThread)
                || self.routes.contains(&Route::CrossProcess))
            && crate::harness::machine::online_cpus() >= 2;
        match (compared, self.quick) {
            (false, _) => 0,
            (true, true) => floor::ROUNDS.0,
            (true, false) => floor::ROUNDS.1,
        }
    }

    /// The alternation with the floor: each round measures the floor (one line, then two),
    /// Nerve CmdVel 1:1 across threads and across processes and raw iceoryx2, one after
    /// the other, `iterations / rounds` round trips each (at least 500).
    fn floor_block(
        &self,
        bar: &indicatif::ProgressBar,
        n: &mut usize,
        skipped: &mut Vec<Skipped>,
    ) -> (Vec<FloorRound>, Recorder, Recorder) {
        let rounds = self.floor_rounds();
        let per_round = (self.iterations / rounds.max(1)).max(500);
        let short = PathsSuite {
            iterations: per_round,
            warmup: (per_round / 10).max(50),
            ..self.clone()
        };
        let (mut one, mut two) = (Recorder::new(), Recorder::new());
        let mut out = Vec::new();
        for round in 0..rounds {
            bar.set_message(format!("floor round {}/{rounds}", round + 1));
            let a = floor::bounce(false, per_round, short.warmup);
            let b = floor::bounce(true, per_round, short.warmup);
            let mut system = |route: Route, raw: bool| {
                if !self.routes.contains(&route) || (raw && !self.iceoryx2) {
                    return None;
                }
                *n += 1;
                match short.run_one(MessageKind::CmdVel, route, 1, 1, raw, *n) {
                    Ok((rec, _)) => Some(floor::one_way_p50_ns(&rec)),
                    Err(e) => {
                        let who = if raw { "iceoryx2" } else { "nerve" };
                        skipped.push(Skipped {
                            system: format!(
                                "{who} {} CmdVel 1:1 (floor round {round})",
                                route.name()
                            ),
                            payload_bytes: Some(MessageKind::CmdVel.bytes()),
                            reason: e.to_string(),
                        });
                        None
                    }
                }
            };
            let cross_thread_ns = system(Route::CrossThread, false);
            let cross_process_ns = system(Route::CrossProcess, false);
            let iceoryx2_ns = system(Route::CrossProcess, true);
            out.push(FloorRound {
                round,
                floor_ns: floor::one_way_p50_ns(&a),
                floor_two_lines_ns: floor::one_way_p50_ns(&b),
                cross_thread_ns,
                cross_process_ns,
                iceoryx2_ns,
            });
            one.merge(&a);
            two.merge(&b);
            bar.inc(1);
        }
        (out, one, two)
    }

    /// Runs every combination and returns the suite's output.
    pub fn execute(&self) -> Result<SuiteOutput, String> {
        self.validate()?;
        let bar = progress(self.runs() as u64, "paths");
        let mut rows = Vec::new();
        let mut skipped = Vec::new();
        let mut n = 0;
        let messages = if self.latency {
            self.messages.clone()
        } else {
            Vec::new()
        };
        for &message in &messages {
            for &route in &self.routes {
                for &(pingers, pongers) in &self.topologies {
                    n += 1;
                    bar.set_message(format!(
                        "{} {} {pingers}:{pongers}",
                        message.name(),
                        route.name()
                    ));
                    let res = self.run_one(message, route, pingers, pongers, false, n);
                    self.collect(
                        res,
                        "nerve",
                        message,
                        route,
                        pingers,
                        pongers,
                        &mut rows,
                        &mut skipped,
                    );
                    bar.inc(1);
                }
            }
            if self.iceoryx2
                && self.topologies.contains(&(1, 1))
                && self.routes.contains(&Route::CrossProcess)
            {
                n += 1;
                bar.set_message(format!("{} raw iceoryx2", message.name()));
                let res = self.run_one(message, Route::CrossProcess, 1, 1, true, n);
                self.collect(
                    res,
                    "iceoryx2",
                    message,
                    Route::CrossProcess,
                    1,
                    1,
                    &mut rows,
                    &mut skipped,
                );
                bar.inc(1);
            }
        }
        for message in self.cpp_messages() {
            for ends in [cpp::Ends::CppCpp, cpp::Ends::RustCpp] {
                n += 1;
                bar.set_message(format!("{} {}", message.name(), ends.system()));
                let res = cpp::run(self, message, ends, n).map(|r| (r, true));
                self.collect(
                    res,
                    ends.system(),
                    message,
                    Route::CrossProcess,
                    1,
                    1,
                    &mut rows,
                    &mut skipped,
                );
                bar.inc(1);
            }
        }
        let abi = if self.cpp && self.latency {
            bar.set_message("C ABI cost");
            let r = cpp::abi_cost(self);
            bar.inc(1);
            match r {
                Ok(a) => Some(a),
                Err(e) => {
                    skipped.push(Skipped {
                        system: "C ABI cost".into(),
                        payload_bytes: Some(MessageKind::CmdVel.bytes()),
                        reason: e.to_string(),
                    });
                    None
                }
            }
        } else {
            None
        };
        let (floor, one, two) = if self.latency {
            self.floor_block(&bar, &mut n, &mut skipped)
        } else {
            (Vec::new(), Recorder::new(), Recorder::new())
        };
        for (system, rec) in [("floor", one), ("floor (two lines)", two)] {
            if !rec.is_empty() {
                self.collect(
                    Ok((rec, true)),
                    system,
                    MessageKind::CmdVel,
                    Route::CrossThread,
                    1,
                    1,
                    &mut rows,
                    &mut skipped,
                );
                if let Some(r) = rows.last_mut() {
                    r.route = "cross-core".into();
                    r.message = "sequence number".into();
                    r.payload_bytes = 8;
                }
            }
        }
        let load = load::run_all(self, &self.load_plans(), &bar, &mut n, &mut skipped);
        bar.finish_and_clear();
        Ok(output(self, rows, floor, load, abi, skipped))
    }

    #[allow(clippy::too_many_arguments)]
    fn collect(
        &self,
        res: Result<(Recorder, bool), PeerError>,
        system: &str,
        message: MessageKind,
        route: Route,
        pingers: usize,
        pongers: usize,
        rows: &mut Vec<PathsRow>,
        skipped: &mut Vec<Skipped>,
    ) {
        match res {
            Ok((rec, spin)) => {
                let rtt = rec.dist();
                let half = |v: f64| v / 2.0;
                rows.push(PathsRow {
                    suite: "paths",
                    system: system.into(),
                    mode: if spin {
                        "spin".into()
                    } else {
                        format!(
                            "adaptive ({} threads > {} cores)",
                            pingers + pongers,
                            crate::harness::machine::online_cpus()
                        )
                    },
                    route: route.name().into(),
                    topology: format!("{pingers}:{pongers}"),
                    message: message.name().into(),
                    payload_bytes: message.bytes(),
                    iterations: rtt.count,
                    warmup: self.warmup,
                    rtt_us: rtt,
                    one_way_us: Dist {
                        count: rtt.count,
                        min: half(rtt.min),
                        avg: half(rtt.avg),
                        p50: half(rtt.p50),
                        p90: half(rtt.p90),
                        p95: half(rtt.p95),
                        p99: half(rtt.p99),
                        p999: half(rtt.p999),
                        max: half(rtt.max),
                    },
                });
            }
            Err(e) => skipped.push(Skipped {
                system: format!(
                    "{system} {} {} {pingers}:{pongers}",
                    route.name(),
                    message.name()
                ),
                payload_bytes: Some(message.bytes()),
                reason: e.to_string(),
            }),
        }
    }

    /// Runs one combination; returns the round trips and whether it busy-polled.
    fn run_one(
        &self,
        message: MessageKind,
        route: Route,
        pingers: usize,
        pongers: usize,
        raw: bool,
        n: usize,
    ) -> Result<(Recorder, bool), PeerError> {
        let cores = crate::harness::machine::online_cpus();
        // busy-poll only while every spinning thread has a core of its own
        let spin = route == Route::SameThread || pingers + pongers <= cores;
        let topic = format!("/bench/paths_{}_{n}", std::process::id());
        let spec = PongSpec {
            message,
            topic: topic.clone(),
            pingers,
            pongers,
            domain: self.domain,
            spin,
            raw,
            cpu: (pingers + pongers <= cores && cores >= 2).then_some(0),
        };
        let rec = match route {
            Route::SameThread => {
                dispatch!(message, same_thread, &self.context()?, &spec, pingers, self)?
            }
            Route::CrossThread => {
                let ctx = self.context()?;
                let stop = Arc::new(AtomicBool::new(false));
                let ready = Arc::new(Barrier::new(pongers + 1));
                let mut handles = Vec::new();
                for i in 0..pongers {
                    let (ctx, spec, stop, ready) =
                        (ctx.clone(), spec.clone(), stop.clone(), ready.clone());
                    handles.push(std::thread::spawn(move || {
                        if let Some(base) = spec.cpu {
                            // every thread has a core: ponger i on CPU base + i
                            pin_to_cpu(base + i);
                        }
                        dispatch!(spec.message, ponger, &ctx, &spec, i, &stop, Some(&ready))
                    }));
                }
                ready.wait();
                let r = pingers_threads(&ctx, &spec, pingers, self);
                stop.store(true, Ordering::Relaxed);
                for h in handles {
                    let _ = h.join();
                }
                r?
            }
            Route::CrossProcess => {
                let json =
                    serde_json::to_string(&spec).map_err(|e| PeerError::setup("bench", e))?;
                let mut args = self.role_command.1.clone();
                args.extend(["ponger".to_string(), json]);
                let mut child = Child::spawn(&self.role_command.0, &args, &[], "ponger")?;
                child.expect("ready", Duration::from_secs(30))?;
                let r = if raw {
                    // on a thread of its own: it pins itself, the suite's thread stays free
                    std::thread::scope(|s| {
                        s.spawn(|| raw::pinger(&spec, self))
                            .join()
                            .unwrap_or_else(|_| Err(fail("the raw pinger panicked")))
                    })
                } else {
                    let ctx = self.context()?;
                    pingers_threads(&ctx, &spec, pingers, self)
                };
                child.stop();
                if raw {
                    crate::peers::stream::remove_iceoryx2_leftovers(self.domain);
                }
                r?
            }
        };
        Ok((rec, spin))
    }

    fn context(&self) -> Result<Context, PeerError> {
        let cfg = nerve::Config::default()
            .domain(self.domain)
            .map_err(|e| PeerError::setup("nerve", e))?;
        Context::new(cfg).map_err(|e| PeerError::setup("nerve", e))
    }
}

fn qos() -> Qos {
    Qos::default().depth(64)
}

fn mode(spin: bool) -> WaitMode {
    if spin {
        WaitMode::Spin
    } else {
        WaitMode::Adaptive
    }
}

fn fail(e: impl std::fmt::Display) -> PeerError {
    PeerError::call("nerve", e)
}

/// The tag of a ping: pinger index and round.
fn tag(pinger: usize, round: usize) -> u64 {
    ((pinger as u64) << 48) | round as u64
}

fn tag_of(bytes: &[u8]) -> u64 {
    bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map_or(u64::MAX, u64::from_le_bytes)
}

/// Writes a whole ping: the pattern over every byte, then the tag in front. A
/// fixed-size message is built in `scratch` and published by value (`publish_slice` with
/// no elements, as `publish` does), a slice message is written into a loan.
fn write_ping<M: Message>(
    p: &nerve::Publisher<M>,
    elems: usize,
    tag: u64,
    scratch: &mut Vec<u8>,
) -> Result<(), PeerError> {
    fn fill(bytes: &mut [u8], tag: u64) {
        let whole = bytes.len() / 8 * 8;
        pattern::fill(&mut bytes[..whole], tag);
        bytes[..8].copy_from_slice(&tag.to_le_bytes());
    }
    if elems == 0 && std::mem::size_of::<M::Elem>() == 0 {
        scratch.resize(std::mem::size_of::<M>(), 0);
        fill(scratch, tag);
        let m = nerve::message::read_pod::<M>(scratch).ok_or_else(|| fail("short message"))?;
        return p.publish_slice(&m, &[]).map_err(fail);
    }
    let mut l = p.loan_slice(elems).map_err(fail)?;
    fill(l.payload_bytes_mut(), tag);
    l.send().map_err(fail)
}

/// Round-trip timing: one clock read per round, the end of one round being the start of
/// the next (`nerve::stamp_ns`, the time-stamp counter where the kernel uses it: about
/// 8 ns a read here), so the clock costs a round trip one read.
struct Lap(u64);

impl Lap {
    fn start() -> Lap {
        Lap(nerve::stamp_ns())
    }

    /// Time since the last lap, in ns; starts the next.
    #[inline]
    fn lap(&mut self) -> u64 {
        let now = nerve::stamp_ns();
        let d = now.saturating_sub(self.0);
        self.0 = now;
        d
    }
}

/// Everything on one thread: each round every pinger sends, every ponger answers what
/// it got, every pinger collects its replies; a round trip is one whole round.
fn same_thread<M: Message>(
    ctx: &Context,
    spec: &PongSpec,
    pingers: usize,
    suite: &PathsSuite,
) -> Result<Recorder, PeerError> {
    let node = ctx.node("paths_same").create().map_err(fail)?;
    let mut ping_pubs = Vec::new();
    let mut pong_subs = Vec::new();
    for i in 0..pingers {
        ping_pubs.push(
            node.publisher::<M>(&spec.topic)
                .qos(qos())
                .create()
                .map_err(fail)?,
        );
        pong_subs.push(
            node.subscriber::<M>(&pong_topic(spec, i))
                .qos(qos())
                .create()
                .map_err(fail)?,
        );
    }
    let mut pongers = Vec::new();
    for _ in 0..spec.pongers {
        pongers.push((
            node.subscriber::<M>(&spec.topic)
                .qos(qos())
                .create()
                .map_err(fail)?,
            pong_publishers::<M>(&node, spec)?,
        ));
    }
    let elems = spec.message.elems();
    let mut rec = Recorder::new();
    let mut scratch = Vec::new();
    let mut lap = Lap::start();
    for round in 0..suite.warmup + suite.iterations {
        for (i, p) in ping_pubs.iter().enumerate() {
            write_ping(p, elems, tag(i, round), &mut scratch)?;
        }
        // every ponger takes exactly this round's pings and every pinger exactly its
        // replies: all were sent before, on this thread, so none may be missing (and no
        // empty look, which no transfer needs, is timed)
        for (s, p) in &pongers {
            for _ in 0..pingers {
                let m = s
                    .try_recv()
                    .map_err(fail)?
                    .ok_or_else(|| fail(format!("round {round}: a ping is missing")))?;
                echo(&m, p)?;
            }
        }
        for (i, s) in pong_subs.iter().enumerate() {
            for _ in 0..spec.pongers {
                let m = s.try_recv().map_err(fail)?;
                if m.map(|m| tag_of(m.payload_bytes())) != Some(tag(i, round)) {
                    return Err(fail(format!(
                        "round {round}: pinger {i} is missing a reply of {}",
                        spec.pongers
                    )));
                }
            }
        }
        let ns = lap.lap();
        if round >= suite.warmup {
            rec.record_ns(ns);
        }
    }
    Ok(rec)
}

/// Pinger `i`'s reply topic.
fn pong_topic(spec: &PongSpec, i: usize) -> String {
    format!("{}/pong{i}", spec.topic)
}

/// A ponger's publishers of every pinger's reply topic.
fn pong_publishers<M: Message>(
    node: &nerve::Node,
    spec: &PongSpec,
) -> Result<Vec<nerve::Publisher<M>>, PeerError> {
    (0..spec.pingers)
        .map(|i| {
            node.publisher::<M>(&pong_topic(spec, i))
                .qos(qos())
                .create()
                .map_err(fail)
        })
        .collect()
}

/// Answers a ping on its pinger's reply topic (the pinger's index is in the tag).
fn echo<M: Message>(m: &nerve::Sample<M>, pongs: &[nerve::Publisher<M>]) -> Result<(), PeerError> {
    let pinger = (tag_of(m.payload_bytes()) >> 48) as usize;
    let p = pongs
        .get(pinger)
        .ok_or_else(|| fail(format!("a ping from unknown pinger {pinger}")))?;
    // a copy of the whole message: head and elements
    p.publish_slice(m, m.elems()).map_err(fail)
}

/// A ponger: answers every ping with a copy until `stop`.
fn ponger<M: Message>(
    ctx: &Context,
    spec: &PongSpec,
    index: usize,
    stop: &AtomicBool,
    ready: Option<&Barrier>,
) -> Result<(), PeerError> {
    let node = ctx
        .node(&format!("paths_ponger{index}"))
        .create()
        .map_err(fail)?;
    let sub = node
        .subscriber::<M>(&spec.topic)
        .qos(qos())
        .wait_mode(mode(spec.spin))
        .create()
        .map_err(fail)?;
    let publishers = pong_publishers::<M>(&node, spec)?;
    if let Some(b) = ready {
        b.wait();
    }
    // SYNC: a plain stop flag.
    while !stop.load(Ordering::Relaxed) {
        if let Some(m) = sub.recv_timeout(Duration::from_millis(50)).map_err(fail)? {
            echo(&m, &publishers)?;
        }
    }
    Ok(())
}

/// A pinger: `warmup + iterations` round trips, each waiting for every ponger's reply.
fn pinger<M: Message>(
    ctx: &Context,
    spec: &PongSpec,
    index: usize,
    suite: &PathsSuite,
    start: &Barrier,
) -> Result<Recorder, PeerError> {
    let node = ctx
        .node(&format!("paths_pinger{index}"))
        .create()
        .map_err(fail)?;
    let publisher = node
        .publisher::<M>(&spec.topic)
        .qos(qos())
        .create()
        .map_err(fail)?;
    let sub = node
        .subscriber::<M>(&pong_topic(spec, index))
        .qos(qos())
        .wait_mode(mode(spec.spin))
        .create()
        .map_err(fail)?;
    if !publisher.wait_for_subscribers(spec.pongers, TIMEOUT) {
        return Err(fail("pongers did not appear"));
    }
    start.wait();
    let elems = spec.message.elems();
    let mut rec = Recorder::new();
    let mut scratch = Vec::new();
    let mut lap = Lap::start();
    for round in 0..suite.warmup + suite.iterations {
        let want = tag(index, round);
        write_ping(&publisher, elems, want, &mut scratch)?;
        let mut got = 0;
        while got < spec.pongers {
            let m = sub
                .recv_timeout(TIMEOUT)
                .map_err(fail)?
                .ok_or_else(|| fail(format!("no reply within {TIMEOUT:?} (round {round})")))?;
            got += usize::from(tag_of(m.payload_bytes()) == want);
        }
        let ns = lap.lap();
        if round >= suite.warmup {
            rec.record_ns(ns);
        }
    }
    Ok(rec)
}

/// Runs the pingers on threads of this process and merges their round trips.
fn pingers_threads(
    ctx: &Context,
    spec: &PongSpec,
    pingers: usize,
    suite: &PathsSuite,
) -> Result<Recorder, PeerError> {
    let start = Arc::new(Barrier::new(pingers));
    let results: Vec<Result<Recorder, PeerError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..pingers)
            .map(|i| {
                let (ctx, start) = (ctx.clone(), start.clone());
                s.spawn(move || {
                    if let Some(base) = spec.cpu {
                        // every thread has a core: pinger i after the pongers' cores
                        pin_to_cpu(base + spec.pongers + i);
                    }
                    dispatch!(spec.message, pinger, &ctx, spec, i, suite, &start)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(fail("a pinger thread panicked")))
            })
            .collect()
    });
    let mut all = Recorder::new();
    for r in results {
        all.merge(&r?);
    }
    Ok(all)
}

/// Runs the pongers of a ponger process until stdin closes (called by `nerve bench role
/// ponger`). Prints `ready` once every ponger listens.
pub fn run_pongers(spec: &PongSpec) -> Result<(), PeerError> {
    let stop = Arc::new(AtomicBool::new(false));
    if spec.raw {
        if let Some(base) = spec.cpu {
            pin_to_cpu(base);
        }
        return raw::ponger(spec, &stop);
    }
    let cfg = nerve::Config::default()
        .domain(spec.domain)
        .map_err(|e| PeerError::setup("nerve", e))?;
    let ctx = Context::new(cfg).map_err(|e| PeerError::setup("nerve", e))?;
    let ready = Arc::new(Barrier::new(spec.pongers + 1));
    let handles: Vec<_> = (0..spec.pongers)
        .map(|i| {
            let (ctx, spec, stop, ready) = (ctx.clone(), spec.clone(), stop.clone(), ready.clone());
            std::thread::spawn(move || {
                if let Some(base) = spec.cpu {
                    pin_to_cpu(base + i);
                }
                dispatch!(spec.message, ponger, &ctx, &spec, i, &stop, Some(&ready))
            })
        })
        .collect();
    ready.wait();
    println!("ready");
    use std::io::{BufRead, Write};
    let _ = std::io::stdout().flush();
    for _ in std::io::stdin().lock().lines().map_while(Result::ok) {}
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        if let Ok(Err(e)) = h.join() {
            return Err(e);
        }
    }
    Ok(())
}

mod raw {
    //! Raw iceoryx2 ping-pong over `[u64]` publish-subscribe, both sides busy-polling,
    //! doing the same work: the pinger fills the whole message, the ponger copies it.
    use super::*;
    use iceoryx2::prelude::*;

    type Pubsub =
        iceoryx2::service::port_factory::publish_subscribe::PortFactory<ipc::Service, [u64], ()>;

    fn err(e: impl std::fmt::Debug) -> PeerError {
        PeerError::call("iceoryx2", format!("{e:?}"))
    }

    fn node(spec: &PongSpec) -> Result<iceoryx2::node::Node<ipc::Service>, PeerError> {
        let mut cfg = iceoryx2::config::Config::default();
        cfg.global.prefix =
            FileName::new(crate::peers::stream::iceoryx2_prefix(spec.domain).as_bytes())
                .map_err(err)?;
        NodeBuilder::new()
            .config(&cfg)
            .signal_handling_mode(SignalHandlingMode::Disabled)
            .create::<ipc::Service>()
            .map_err(err)
    }

    /// The topic configured as Nerve configures the suite's topics (8 publishers, 8
    /// subscribers, queues of 64 out of at most 256), so the ratio shows what Nerve's
    /// layer adds, not a difference in capacity (iceoryx2's receive scans every possible
    /// publisher connection).
    fn open(node: &iceoryx2::node::Node<ipc::Service>, name: &str) -> Result<Pubsub, PeerError> {
        node.service_builder(&ServiceName::new(name).map_err(err)?)
            .publish_subscribe::<[u64]>()
            .history_size(0)
            .max_publishers(8)
            .max_subscribers(8)
            .max_nodes(20)
            .subscriber_max_buffer_size(256)
            .subscriber_max_borrowed_samples(4)
            .enable_safe_overflow(true)
            .open_or_create()
            .map_err(err)
    }

    fn names(spec: &PongSpec) -> (String, String) {
        let base = spec.topic.trim_start_matches('/').replace('/', "_");
        (format!("raw_{base}_ping"), format!("raw_{base}_pong"))
    }

    fn words(spec: &PongSpec) -> usize {
        spec.message.bytes().div_ceil(8)
    }

    pub(super) fn ponger(spec: &PongSpec, stop: &AtomicBool) -> Result<(), PeerError> {
        let node = node(spec)?;
        let (ping, pong) = names(spec);
        let (ping, pong) = (open(&node, &ping)?, open(&node, &pong)?);
        let sub = ping
            .subscriber_builder()
            .buffer_size(4)
            .create()
            .map_err(err)?;
        let publisher = pong
            .publisher_builder()
            .initial_max_slice_len(words(spec))
            .create()
            .map_err(err)?;
        println!("ready");
        use std::io::{BufRead, Write};
        let _ = std::io::stdout().flush();
        let stop_reader = Arc::new(AtomicBool::new(false));
        let flag = stop_reader.clone();
        std::thread::spawn(move || {
            for _ in std::io::stdin().lock().lines().map_while(Result::ok) {}
            flag.store(true, Ordering::Relaxed);
        });
        let mut idle = 0u32;
        while !stop.load(Ordering::Relaxed) && !stop_reader.load(Ordering::Relaxed) {
            match sub.receive().map_err(err)? {
                Some(s) => {
                    let out = publisher
                        .loan_slice_uninit(s.payload().len())
                        .map_err(err)?;
                    out.write_from_slice(s.payload()).send().map_err(err)?;
                }
                None => {
                    idle = idle.wrapping_add(1);
                    core::hint::spin_loop();
                }
            }
        }
        let _ = idle;
        Ok(())
    }

    pub(super) fn pinger(spec: &PongSpec, suite: &PathsSuite) -> Result<Recorder, PeerError> {
        if let Some(base) = spec.cpu {
            pin_to_cpu(base + 1);
        }
        let node = node(spec)?;
        let (ping_name, pong_name) = names(spec);
        let (ping, pong) = (open(&node, &ping_name)?, open(&node, &pong_name)?);
        let publisher = ping
            .publisher_builder()
            .initial_max_slice_len(words(spec))
            .create()
            .map_err(err)?;
        let sub = pong
            .subscriber_builder()
            .buffer_size(4)
            .create()
            .map_err(err)?;
        let deadline = Instant::now() + TIMEOUT;
        while ping.dynamic_config().number_of_subscribers() < 1
            || pong.dynamic_config().number_of_publishers() < 1
        {
            if Instant::now() > deadline {
                return Err(err("ponger did not appear"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        let n = words(spec);
        let mut rec = Recorder::new();
        let mut lap = Lap::start();
        for round in 0..suite.warmup + suite.iterations {
            let want = round as u64;
            let s = publisher.loan_slice_uninit(n).map_err(err)?;
            // SAFETY: shared memory of a mapped file is initialized and u64 has no invalid
            // values; every word is overwritten below.
            let mut s = unsafe { s.assume_init() };
            let p = s.payload_mut();
            for (i, w) in p.iter_mut().enumerate() {
                *w = want.wrapping_add(i as u64);
            }
            p[0] = want;
            s.send().map_err(err)?;
            let mut spins = 0u32;
            let mut start = None;
            loop {
                if let Some(r) = sub.receive().map_err(err)? {
                    if r.payload().first() == Some(&want) {
                        break;
                    }
                }
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(4096)
                    && start.get_or_insert_with(Instant::now).elapsed() > TIMEOUT
                {
                    return Err(err(format!("no reply within {TIMEOUT:?}")));
                }
                core::hint::spin_loop();
            }
            let ns = lap.lap();
            if round >= suite.warmup {
                rec.record_ns(ns);
            }
        }
        Ok(rec)
    }
}

fn find<'a>(
    rows: &'a [PathsRow],
    system: &str,
    route: &str,
    topo: &str,
    msg: &str,
) -> Option<&'a PathsRow> {
    rows.iter()
        .find(|r| r.system == system && r.route == route && r.topology == topo && r.message == msg)
}

fn output(
    suite: &PathsSuite,
    rows: Vec<PathsRow>,
    floor: Vec<FloorRound>,
    load: Vec<LoadRow>,
    abi: Option<cpp::AbiCost>,
    skipped: Vec<Skipped>,
) -> SuiteOutput {
    use crate::report::published;
    use crate::report::{why_missing, Measured};
    let mut checks = Vec::new();
    let planned = |route: Route| {
        suite.latency
            && suite.routes.contains(&route)
            && suite.messages.contains(&MessageKind::CmdVel)
            && suite.topologies.contains(&(1, 1))
    };
    let cmd = |route: Route| -> Result<&PathsRow, String> {
        find(&rows, "nerve", route.name(), "1:1", "CmdVel").ok_or_else(|| {
            let what = format!("nerve {} CmdVel 1:1", route.name());
            why_missing(&skipped, &what, |k| k.system.starts_with(&what))
        })
    };
    if planned(Route::SameThread) {
        checks.push(Verdict::judged(
            "paths",
            "same-thread one-way P50 <= 40 ns",
            "nerve CmdVel 1:1",
            cmd(Route::SameThread).map(|r| Some(r.one_way_us.p50 * 1000.0)),
            |ns| ns <= 40.0,
        ));
    }
    // ratios per round of the alternation with the floor, then their median
    let per_round = |f: &dyn Fn(&FloorRound) -> Option<f64>, what: &str| -> (Measured, String) {
        let ratios: Vec<f64> = floor.iter().filter_map(f).collect();
        match spread(&ratios) {
            Some((mid, lo, hi)) => (
                Ok(Some(mid)),
                format!("median of {} rounds, range {lo:.2}-{hi:.2}", ratios.len()),
            ),
            None if floor.is_empty() => (
                Err(format!("{what}: no round with the floor ran")),
                String::new(),
            ),
            None => (
                Err(why_missing(&skipped, what, |k| {
                    k.system.contains("floor round")
                })),
                String::new(),
            ),
        }
    };
    let mut ratio_check =
        |route: Route, target: &str, f: &dyn Fn(&FloorRound) -> Option<f64>, limit: f64| {
            if planned(route) {
                let what = format!("nerve {} CmdVel 1:1", route.name());
                let (value, scope) = per_round(f, &what);
                checks.push(Verdict::judged(
                    "paths",
                    target,
                    format!("{what}, {scope}"),
                    value,
                    move |r| r <= limit,
                ));
            }
        };
    // a message and its reply each cross in a line of their own (the ring's slot), so the
    // floor they are held to is the two-line bounce
    ratio_check(
        Route::CrossThread,
        "cross-thread one-way P50 / two-line floor <= 2 (same round)",
        &|r| r.two_line_ratio(r.cross_thread_ns),
        2.0,
    );
    ratio_check(
        Route::CrossProcess,
        "cross-process one-way P50 / two-line floor <= 2 (same round)",
        &|r| r.two_line_ratio(r.cross_process_ns),
        2.0,
    );
    if suite.iceoryx2 {
        ratio_check(
            Route::CrossProcess,
            "cross-process one-way P50 / raw iceoryx2 busy-poll <= 0.5 (same round)",
            &|r| Some(r.cross_process_ns? / r.iceoryx2_ns?),
            0.5,
        );
    }
    for route in Route::ALL {
        if planned(route) {
            checks.push(Verdict::judged(
                "paths",
                "one-way P99 <= 2x P50",
                format!("nerve {} CmdVel 1:1", route.name()),
                cmd(route).map(|r| Some(r.one_way_us.p99 / r.one_way_us.p50)),
                |x| x <= 2.0,
            ));
        }
    }
    if planned(Route::CrossProcess) {
        checks.push(Verdict::judged(
            "paths",
            format!(
                "cross-process one-way P50 <= HORUS's {} ns ({})",
                published::HORUS_HERE_CROSS_PROCESS_P50_NS,
                published::HORUS_HERE.reference
            ),
            "nerve CmdVel 1:1",
            cmd(Route::CrossProcess).map(|r| Some(r.one_way_us.p50 * 1000.0)),
            |ns| ns <= published::HORUS_HERE_CROSS_PROCESS_P50_NS,
        ));
    }
    let head = [
        "system",
        "route",
        "topology",
        "message",
        "bytes",
        "mode",
        "one-way P50 µs",
        "P95 µs",
        "P99 µs",
        "max µs",
        "round trips",
    ];
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.system.clone(),
                r.route.clone(),
                r.topology.clone(),
                r.message.clone(),
                r.payload_bytes.to_string(),
                r.mode.clone(),
                format!("{:.3}", r.one_way_us.p50),
                format!("{:.3}", r.one_way_us.p95),
                format!("{:.3}", r.one_way_us.p99),
                num(r.one_way_us.max),
                r.iterations.to_string(),
            ]
        })
        .collect();
    let names: Vec<String> = MessageKind::ALL
        .iter()
        .map(|m| m.name().to_string())
        .collect();
    let mut section = Section::new(
        "paths (seeds/004)",
        "Ping-pong (seeds/004, HORUS's method): the pinger fills its whole message and \
         publishes it, every ponger copies the whole payload into a reply on that pinger's \
         own reply topic, the pinger waits for every reply. One-way = round trip / 2, \
         unfiltered. Busy-polling where every thread has a core, adaptive waiting otherwise. \
         HORUS published (other hardware): CmdVel 1:1 ~85 ns send-only; on this machine kind \
         its own all_paths run gave 180 ns cross-process (cycle-counter timed, after its \
         outlier filter).",
    );
    let mut groups = Vec::new();
    for route in Route::ALL {
        groups.push((
            format!("nerve {} 1:1", route.name()),
            MessageKind::ALL
                .iter()
                .map(|m| {
                    find(&rows, "nerve", route.name(), "1:1", m.name()).map(|r| r.one_way_us.p50)
                })
                .collect(),
        ));
    }
    groups.push((
        "raw iceoryx2 cross-process 1:1".into(),
        MessageKind::ALL
            .iter()
            .map(|m| {
                find(&rows, "iceoryx2", "cross-process", "1:1", m.name()).map(|r| r.one_way_us.p50)
            })
            .collect(),
    ));
    section.figure(
        &bar_chart(
            "One-way P50 by route (1:1)",
            &names,
            &Axis::log("µs"),
            &groups,
        ),
        "Median one-way latency per message type and route.",
    );
    let topos: Vec<String> = TOPOLOGIES.iter().map(|(a, b)| format!("{a}:{b}")).collect();
    let topo_groups: Vec<(String, Vec<Option<f64>>)> = Route::ALL
        .iter()
        .map(|route| {
            (
                route.name().to_string(),
                topos
                    .iter()
                    .map(|t| {
                        find(&rows, "nerve", route.name(), t, "CmdVel").map(|r| r.one_way_us.p50)
                    })
                    .collect(),
            )
        })
        .collect();
    section.figure(
        &bar_chart(
            "CmdVel one-way P50 by topology",
            &topos,
            &Axis::log("µs"),
            &topo_groups,
        ),
        "Pingers:pongers; each ping waits for every ponger's reply.",
    );
    if !floor.is_empty() {
        let ns = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        let ratio = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        let floor_rows: Vec<Vec<String>> = floor
            .iter()
            .map(|r| {
                vec![
                    r.round.to_string(),
                    format!("{:.0}", r.floor_ns),
                    format!("{:.0}", r.floor_two_lines_ns),
                    ns(r.cross_thread_ns),
                    ns(r.cross_process_ns),
                    ns(r.iceoryx2_ns),
                    ratio(r.two_line_ratio(r.cross_thread_ns)),
                    ratio(r.two_line_ratio(r.cross_process_ns)),
                    ratio(r.cross_process_ns.zip(r.iceoryx2_ns).map(|(a, b)| a / b)),
                ]
            })
            .collect();
        section.table(
            Some("CmdVel 1:1 one-way P50 (ns) in alternation with the floor, round by round"),
            &[
                "round",
                "floor",
                "floor, two lines",
                "nerve cross-thread",
                "nerve cross-process",
                "raw iceoryx2",
                "cross-thread / two-line floor",
                "cross-process / two-line floor",
                "nerve / iceoryx2",
            ],
            &floor_rows,
        );
    }
    cpp_section(
        suite,
        &rows,
        abi.as_ref(),
        &skipped,
        &mut section,
        &mut checks,
    );
    if suite.latency {
        section.table(Some("Every route, topology and message"), &head, &table);
    }
    if suite.load {
        checks.extend(load::checks(suite, &load, &skipped));
        load::section(&mut section, &load);
    }
    let mut summary = String::from("paths: CmdVel 1:1 one-way P50\n");
    for route in Route::ALL {
        if let Some(r) = find(&rows, "nerve", route.name(), "1:1", "CmdVel") {
            summary.push_str(&format!(
                "  nerve {:<14} {:>9.0} ns\n",
                route.name(),
                r.one_way_us.p50 * 1000.0
            ));
        }
    }
    if let Some(r) = find(&rows, "iceoryx2", "cross-process", "1:1", "CmdVel") {
        summary.push_str(&format!(
            "  raw iceoryx2 cross-process {:>9.0} ns\n",
            r.one_way_us.p50 * 1000.0
        ));
    }
    summary.push_str(&load::summary(&load));
    let mut json = json_rows(&rows);
    json.extend(json_rows(&load));
    section.finish("paths", json, skipped, checks, summary)
}

/// The C++ rows beside Rust's, their targets, and the C ABI's own cost.
fn cpp_section(
    suite: &PathsSuite,
    rows: &[PathsRow],
    abi: Option<&cpp::AbiCost>,
    skipped: &[Skipped],
    section: &mut Section,
    checks: &mut Vec<Verdict>,
) {
    use crate::report::why_missing;
    let messages = suite.cpp_messages();
    if messages.is_empty() {
        return;
    }
    let p50 = |system: &str, m: MessageKind| {
        find(rows, system, "cross-process", "1:1", m.name()).map(|r| r.one_way_us.p50 * 1000.0)
    };
    let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    let ratio = |a: Option<f64>, b: Option<f64>| {
        a.zip(b)
            .map_or("-".to_string(), |(a, b)| format!("{:.2}", a / b))
    };
    let table: Vec<Vec<String>> = messages
        .iter()
        .map(|&m| {
            let (rust, cpp, mixed) = (
                p50("nerve", m),
                p50(cpp::Ends::CppCpp.system(), m),
                p50(cpp::Ends::RustCpp.system(), m),
            );
            let p99 = find(
                rows,
                cpp::Ends::CppCpp.system(),
                "cross-process",
                "1:1",
                m.name(),
            )
            .map(|r| r.one_way_us.p99 * 1000.0);
            vec![
                m.name().to_string(),
                cell(rust),
                cell(cpp),
                cell(mixed),
                ratio(cpp, rust),
                ratio(mixed, rust),
                cell(p99),
            ]
        })
        .collect();
    section.table(
        Some("C++ beside Rust: cross-process 1:1 one-way P50 (ns), same run"),
        &[
            "message",
            "Rust ↔ Rust",
            "C++ ↔ C++",
            "Rust ↔ C++",
            "C++ / Rust",
            "Rust↔C++ / Rust",
            "C++ ↔ C++ P99",
        ],
        &table,
    );
    if messages.contains(&MessageKind::CmdVel) {
        let what = "nerve C++ cross-process CmdVel 1:1";
        let value = match (
            p50("nerve", MessageKind::CmdVel),
            p50(cpp::Ends::CppCpp.system(), MessageKind::CmdVel),
        ) {
            (Some(r), Some(c)) => Ok(Some(c / r)),
            _ => Err(why_missing(skipped, what, |k| {
                k.system.starts_with("nerve C++") || k.system.starts_with("nerve cross-process")
            })),
        };
        checks.push(Verdict::judged(
            "paths",
            "C++ one-way P50 <= 1.1x Rust's (cross-process CmdVel, same run)",
            what,
            value,
            |r| r <= 1.1,
        ));
    }
    match abi {
        Some(a) => {
            section.table(
                Some(&format!(
                    "The C ABI's own cost: median ns per operation, one thread, CmdVel, {} \
                     rounds of {} operations alternating the APIs",
                    a.rounds, a.ops
                )),
                &["operation", "Rust API", "C ABI", "added by the C ABI"],
                &[
                    vec![
                        "publish (loan, write, send)".into(),
                        format!("{:.0}", a.rust_publish_ns),
                        format!("{:.0}", a.c_publish_ns),
                        format!("{:+.0}", a.publish_added()),
                    ],
                    vec![
                        "receive (take, release)".into(),
                        format!("{:.0}", a.rust_receive_ns),
                        format!("{:.0}", a.c_receive_ns),
                        format!("{:+.0}", a.receive_added()),
                    ],
                ],
            );
            for (target, v) in [
                ("the C ABI adds <= 10 ns per publish", a.publish_added()),
                ("the C ABI adds <= 10 ns per receive", a.receive_added()),
            ] {
                checks.push(Verdict::judged(
                    "paths",
                    target,
                    "CmdVel, one thread, median of op-by-op timings",
                    Ok(Some(v)),
                    |ns| ns <= 10.0,
                ));
            }
        }
        None => checks.push(Verdict::judged(
            "paths",
            "the C ABI adds <= 10 ns per publish and per receive",
            "CmdVel, one thread",
            Err(why_missing(skipped, "C ABI cost", |k| {
                k.system == "C ABI cost"
            })),
            |ns| ns <= 10.0,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_sizes_follow_the_seed() {
        assert_eq!(MessageKind::CmdVel.bytes(), 16);
        assert_eq!(MessageKind::BatteryState.bytes(), 104);
        assert_eq!(MessageKind::Imu.bytes(), 304);
        assert_eq!(MessageKind::Odometry.bytes(), 816);
        assert!((1400..1700).contains(&MessageKind::LaserScan.bytes()));
        assert!((12_000..13_000).contains(&MessageKind::PointCloud1K.bytes()));
        assert!((120_000..121_000).contains(&MessageKind::PointCloud10K.bytes()));
        assert_eq!(MessageKind::parse("imu"), Some(MessageKind::Imu));
    }

    #[test]
    fn tags_identify_pinger_and_round() {
        let t = tag(3, 77);
        assert_eq!(tag_of(&t.to_le_bytes()), t);
        assert_ne!(tag(1, 77), tag(2, 77));
        assert_eq!(tag_of(&[1, 2]), u64::MAX);
    }
}
