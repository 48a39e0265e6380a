//! The load figures of seeds/004 beside its ping-pong: throughput (bursts under
//! back-pressure, where nothing may be lost, and under drop-oldest, where losses are
//! counted), send-only latency, the mixed robot loop and scaling with producer and
//! consumer threads. Producers run on threads of the suite's process; consumers on
//! threads of the same process (cross-thread) or of a child (cross-process, the hidden
//! role `sink`). Every consumer subscribes to every producer (N:N is a full fan-out) and
//! checks that each producer's sequence numbers only rise.

use super::*;

/// What a load run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoadKind {
    /// Producers send `count` messages each, flat out, under back-pressure: every
    /// consumer must get every message.
    Throughput,
    /// The same under drop-oldest: producers never wait, consumers count what they lost.
    Burst,
    /// Drop-oldest with every publish call timed (one clock read per call).
    SendOnly,
    /// seeds/004's robot loop: CmdVel and Imu every iteration, BatteryState every 100th,
    /// from one producer under back-pressure, every publish call timed.
    Mixed,
}

impl LoadKind {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            LoadKind::Throughput => "throughput",
            LoadKind::Burst => "burst",
            LoadKind::SendOnly => "send-only",
            LoadKind::Mixed => "mixed",
        }
    }

    fn back_pressure(self) -> bool {
        matches!(self, LoadKind::Throughput | LoadKind::Mixed)
    }

    fn timed(self) -> bool {
        matches!(self, LoadKind::SendOnly | LoadKind::Mixed)
    }

    fn qos(self) -> Qos {
        if self.back_pressure() {
            Qos::reliable()
                .depth(64)
                .overflow(nerve::Overflow::BackPressure { timeout: TIMEOUT })
        } else {
            qos()
        }
    }
}

/// What the consumers of one load run do (also sent to a `sink` child as JSON).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SinkSpec {
    /// What is measured.
    pub kind: LoadKind,
    /// Message type (ignored by the mixed loop, which sends its three).
    pub message: MessageKind,
    /// Topic (the mixed loop adds `/cmd_vel`, `/imu` and `/battery`).
    pub topic: String,
    /// Producers (each a publisher of its own).
    pub producers: usize,
    /// Consumers (each a subscriber of its own).
    pub consumers: usize,
    /// Messages each producer sends (the mixed loop: iterations).
    pub count: u64,
    /// Nerve domain.
    pub domain: u32,
    /// Busy-poll (every thread has a core of its own), else adaptive waiting.
    pub spin: bool,
    /// Consumer `i` on CPU `i`, producer `j` on CPU `consumers + j` (`Some(0)`), or
    /// unpinned (`None`).
    pub cpu: Option<usize>,
}

impl SinkSpec {
    /// The topics of the run and how many messages each producer sends on each.
    fn streams(&self) -> Vec<(String, MessageKind, u64)> {
        if self.kind == LoadKind::Mixed {
            vec![
                (
                    format!("{}/cmd_vel", self.topic),
                    MessageKind::CmdVel,
                    self.count,
                ),
                (format!("{}/imu", self.topic), MessageKind::Imu, self.count),
                (
                    format!("{}/battery", self.topic),
                    MessageKind::BatteryState,
                    self.count.div_ceil(MIXED_BATTERY_EVERY),
                ),
            ]
        } else {
            vec![(self.topic.clone(), self.message, self.count)]
        }
    }
}

/// Longest sleep of a consumer's wait set between checks that the run is still alive.
const SET_WAIT: Duration = Duration::from_millis(100);

/// The mixed loop sends a BatteryState every this many iterations (100 Hz against 1 Hz).
const MIXED_BATTERY_EVERY: u64 = 100;

/// What one consumer saw.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SinkResult {
    /// Messages received.
    pub received: u64,
    /// Messages its subscribers counted as lost (sequence gaps).
    pub lost: u64,
    /// Messages whose sequence number did not rise (must be 0).
    pub out_of_order: u64,
    /// When the last message arrived (`nerve::stamp_ns`).
    pub last_ns: u64,
    /// Why it stopped early, if it did.
    pub error: Option<String>,
}

/// One row of the load tables.
#[derive(Clone, Debug, Serialize)]
pub struct LoadRow {
    /// Always "paths".
    pub suite: &'static str,
    /// throughput, burst, send-only, mixed or scalability.
    pub measure: String,
    /// Always "nerve".
    pub system: String,
    /// Route name.
    pub route: String,
    /// "producers:consumers".
    pub topology: String,
    /// Message type ("mixed" for the robot loop).
    pub message: String,
    /// Bytes per message (the loop's mean).
    pub payload_bytes: usize,
    /// "back-pressure" or "drop-oldest".
    pub qos: String,
    /// "spin", or "adaptive (...)" where threads outnumber cores.
    pub mode: String,
    /// Messages sent, all producers together.
    pub sent: u64,
    /// Messages received, all consumers together.
    pub received: u64,
    /// What full delivery is: sent × consumers.
    pub expected: u64,
    /// Messages the consumers counted as lost.
    pub lost: u64,
    /// Messages out of order (must be 0).
    pub out_of_order: u64,
    /// Publish calls that failed (a back-pressure timeout).
    pub publish_errors: u64,
    /// From the first send to the last arrival, in s.
    pub seconds: f64,
    /// Messages received per second, all consumers together.
    pub msgs_per_s: f64,
    /// Time of each publish call, in µs (send-only and mixed): includes one clock read.
    pub send_us: Option<Dist>,
    /// What the clock read inside every timed call costs alone, in ns (same run).
    pub clock_ns: Option<f64>,
}

/// What the producers of one run did.
struct Produced {
    sent: u64,
    errors: u64,
    start_ns: u64,
    send: Recorder,
}

impl Produced {
    /// Nothing sent yet; the run starts at `start_ns` (`nerve::stamp_ns`).
    fn starting_at(start_ns: u64) -> Produced {
        Produced {
            sent: 0,
            errors: 0,
            start_ns,
            send: Recorder::new(),
        }
    }
}

/// Runs the consumers of `spec` on threads of this process with `ctx`; `ready` is called
/// once every consumer has subscribed.
fn sinks(ctx: &Context, spec: &SinkSpec, ready: impl FnOnce()) -> Vec<SinkResult> {
    let barrier = Barrier::new(spec.consumers + 1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..spec.consumers)
            .map(|i| {
                let (ctx, barrier) = (ctx.clone(), &barrier);
                s.spawn(move || {
                    if let Some(base) = spec.cpu {
                        pin_to_cpu(base + i);
                    }
                    consume(&ctx, spec, i, barrier).unwrap_or_else(|e| SinkResult {
                        error: Some(e.to_string()),
                        ..SinkResult::default()
                    })
                })
            })
            .collect();
        barrier.wait();
        ready();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| SinkResult {
                    error: Some("a consumer thread panicked".into()),
                    ..SinkResult::default()
                })
            })
            .collect()
    })
}

/// A subscriber of any message type, type-erased for the consumer loop.
trait AnySub {
    /// The header of the next message, if one is there (spin) or comes within the wait.
    fn next(&self, wait: Duration) -> Result<Option<nerve::SampleHeader>, PeerError>;
    fn lost(&self) -> u64;
    /// The subscriber, for a wait set over several.
    fn waitable(&self) -> &dyn nerve::Waitable;
}

impl<M: Message> AnySub for nerve::Subscriber<M> {
    fn next(&self, wait: Duration) -> Result<Option<nerve::SampleHeader>, PeerError> {
        let got = if wait.is_zero() {
            self.try_recv()
        } else {
            self.recv_timeout(wait)
        };
        Ok(got.map_err(fail)?.map(|m| *m.header()))
    }

    fn lost(&self) -> u64 {
        self.stats().lost
    }

    fn waitable(&self) -> &dyn nerve::Waitable {
        self
    }
}

fn subscribe<M: Message>(
    node: &nerve::Node,
    topic: &str,
    spec: &SinkSpec,
) -> Result<Box<dyn AnySub>, PeerError> {
    let sub = node
        .subscriber::<M>(topic)
        .qos(spec.kind.qos())
        .wait_mode(mode(spec.spin))
        .create()
        .map_err(fail)?;
    Ok(Box::new(sub))
}

/// One consumer: receives until every producer's last message on every stream arrived.
fn consume(
    ctx: &Context,
    spec: &SinkSpec,
    index: usize,
    ready: &Barrier,
) -> Result<SinkResult, PeerError> {
    let streams = spec.streams();
    let setup = || -> Result<_, PeerError> {
        let node = ctx
            .node(&format!("paths_sink{index}"))
            .create()
            .map_err(fail)?;
        let subs = streams
            .iter()
            .map(|(topic, kind, _)| dispatch!(*kind, subscribe, &node, topic, spec))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((node, subs))
    };
    // every consumer reaches the barrier, failed or not (see `produce`)
    let setup = setup();
    ready.wait();
    let (_node, subs) = setup?;
    // per stream: (publisher id, last sequence number) of each producer seen
    let mut last: Vec<Vec<(u64, u64)>> = vec![Vec::new(); subs.len()];
    let mut finished = 0;
    let total = subs.len() * spec.producers;
    let mut r = SinkResult::default();
    // one subscriber waits in its mode; several are polled in turn, and where threads
    // outnumber cores a round that found nothing sleeps on all of them at once (polling
    // three rings flat out would take the core the producer and the other consumer need)
    let wait = if subs.len() == 1 {
        TIMEOUT
    } else {
        Duration::ZERO
    };
    let mut set = nerve::WaitSet::new();
    if subs.len() > 1 && !spec.spin {
        for sub in &subs {
            set.add(sub.waitable()).map_err(fail)?;
        }
    }
    let mut idle_since: Option<Instant> = None;
    while finished < total {
        let mut got_any = false;
        for (i, sub) in subs.iter().enumerate() {
            let Some(h) = sub.next(wait)? else { continue };
            got_any = true;
            r.received += 1;
            let end = streams[i].2;
            match last[i].iter_mut().find(|(id, _)| *id == h.publisher_id) {
                Some((_, seq)) => {
                    if h.seq <= *seq {
                        r.out_of_order += 1;
                    }
                    *seq = h.seq;
                }
                None => last[i].push((h.publisher_id, h.seq)),
            }
            if h.seq == end {
                finished += 1;
            }
        }
        if got_any {
            idle_since = None;
            continue;
        }
        if !set.is_empty() {
            set.wait(SET_WAIT).map_err(fail)?;
        }
        if idle_since.get_or_insert_with(Instant::now).elapsed() > TIMEOUT {
            return Err(fail(format!(
                "consumer {index}: nothing for {TIMEOUT:?} after {} messages",
                r.received
            )));
        }
    }
    r.last_ns = nerve::stamp_ns();
    r.lost = subs.iter().map(|s| s.lost()).sum();
    Ok(r)
}

/// A message of kind `M` ready to send again and again: its head and elements.
fn prebuilt<M: Message>(kind: MessageKind) -> Result<(M, Vec<M::Elem>), PeerError> {
    let mut scratch = vec![0u8; kind.bytes()];
    pattern::fill(&mut scratch[..kind.bytes() / 8 * 8], 7);
    let head = nerve::message::read_pod::<M>(&scratch).ok_or_else(|| fail("short message"))?;
    let zeros = vec![0u8; std::mem::size_of::<M::Elem>()];
    let elem = nerve::message::read_pod::<M::Elem>(&zeros).ok_or_else(|| fail("element"))?;
    Ok((head, vec![elem; kind.elems()]))
}

/// One producer: `count` messages of `spec.message` as fast as publish returns.
fn produce<M: Message>(
    ctx: &Context,
    spec: &SinkSpec,
    index: usize,
    start: &Barrier,
) -> Result<Produced, PeerError> {
    let setup = || -> Result<_, PeerError> {
        let node = ctx
            .node(&format!("paths_source{index}"))
            .create()
            .map_err(fail)?;
        let p = node
            .publisher::<M>(&spec.topic)
            .qos(spec.kind.qos())
            .create()
            .map_err(fail)?;
        if !p.wait_for_subscribers(spec.consumers, TIMEOUT) {
            return Err(fail("consumers did not appear"));
        }
        let (head, elems) = prebuilt::<M>(spec.message)?;
        Ok((node, p, head, elems))
    };
    // every producer reaches the barrier, failed or not: one that left before it would
    // hold the others there forever
    let setup = setup();
    start.wait();
    let (_node, p, head, elems) = setup?;
    let mut out = Produced::starting_at(nerve::stamp_ns());
    let mut lap = Lap::start();
    for _ in 0..spec.count {
        let sent = p.publish_slice(&head, &elems);
        if spec.kind.timed() {
            out.send.record_ns(lap.lap());
        }
        out.sent += 1;
        out.errors += u64::from(sent.is_err());
    }
    Ok(out)
}

/// The mixed loop's node, publishers and prebuilt messages, once its consumers joined.
#[allow(clippy::type_complexity)]
fn mixed_setup(
    ctx: &Context,
    spec: &SinkSpec,
) -> Result<
    (
        nerve::Node,
        nerve::Publisher<CmdVel>,
        nerve::Publisher<Imu>,
        nerve::Publisher<BatteryState>,
        CmdVel,
        Imu,
        BatteryState,
    ),
    PeerError,
> {
    let node = ctx.node("paths_loop").create().map_err(fail)?;
    let streams = spec.streams();
    let cmd = node
        .publisher::<CmdVel>(&streams[0].0)
        .qos(spec.kind.qos())
        .create()
        .map_err(fail)?;
    let imu = node
        .publisher::<Imu>(&streams[1].0)
        .qos(spec.kind.qos())
        .create()
        .map_err(fail)?;
    let battery = node
        .publisher::<BatteryState>(&streams[2].0)
        .qos(spec.kind.qos())
        .create()
        .map_err(fail)?;
    for ready in [
        cmd.wait_for_subscribers(spec.consumers, TIMEOUT),
        imu.wait_for_subscribers(spec.consumers, TIMEOUT),
        battery.wait_for_subscribers(spec.consumers, TIMEOUT),
    ] {
        if !ready {
            return Err(fail("consumers did not appear"));
        }
    }
    let (c, _) = prebuilt::<CmdVel>(MessageKind::CmdVel)?;
    let (i, _) = prebuilt::<Imu>(MessageKind::Imu)?;
    let (b, _) = prebuilt::<BatteryState>(MessageKind::BatteryState)?;
    Ok((node, cmd, imu, battery, c, i, b))
}

/// The mixed robot loop: CmdVel and Imu every iteration, BatteryState every 100th.
fn produce_mixed(ctx: &Context, spec: &SinkSpec, start: &Barrier) -> Result<Produced, PeerError> {
    // reach the barrier whatever the setup gives (see `produce`)
    let setup = mixed_setup(ctx, spec);
    start.wait();
    let (_node, cmd, imu, battery, c, i, b) = setup?;
    let mut out = Produced::starting_at(nerve::stamp_ns());
    let mut lap = Lap::start();
    let mut timed = |r: Result<(), nerve::PublishError>, out: &mut Produced| {
        out.send.record_ns(lap.lap());
        out.sent += 1;
        out.errors += u64::from(r.is_err());
    };
    for k in 0..spec.count {
        timed(cmd.publish(&c), &mut out);
        timed(imu.publish(&i), &mut out);
        if k % MIXED_BATTERY_EVERY == 0 {
            timed(battery.publish(&b), &mut out);
        }
    }
    Ok(out)
}

/// Runs the producers of `spec` on threads of this process, each pinned after the
/// consumers' cores where every thread has one.
fn producers(ctx: &Context, spec: &SinkSpec) -> Result<Produced, PeerError> {
    let n = if spec.kind == LoadKind::Mixed {
        1
    } else {
        spec.producers
    };
    let start = Barrier::new(n);
    let results: Vec<Result<Produced, PeerError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|j| {
                let (ctx, start) = (ctx.clone(), &start);
                s.spawn(move || {
                    if let Some(base) = spec.cpu {
                        pin_to_cpu(base + spec.consumers + j);
                    }
                    if spec.kind == LoadKind::Mixed {
                        produce_mixed(&ctx, spec, start)
                    } else {
                        dispatch!(spec.message, produce, &ctx, spec, j, start)
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(fail("a producer thread panicked")))
            })
            .collect()
    });
    let mut all = Produced::starting_at(u64::MAX);
    for r in results {
        let r = r?;
        all.sent += r.sent;
        all.errors += r.errors;
        all.start_ns = all.start_ns.min(r.start_ns);
        all.send.merge(&r.send);
    }
    Ok(all)
}

/// Runs the consumers of a `sink` child (called by `nerve bench role sink`): prints
/// `ready` once they subscribed, then `result <json>` with what each saw.
pub fn run_sinks(spec: &SinkSpec) -> Result<(), PeerError> {
    let cfg = nerve::Config::default()
        .domain(spec.domain)
        .map_err(|e| PeerError::setup("nerve", e))?;
    let ctx = Context::new(cfg).map_err(|e| PeerError::setup("nerve", e))?;
    use std::io::Write;
    let results = sinks(&ctx, spec, || {
        println!("ready");
        let _ = std::io::stdout().flush();
    });
    let json = serde_json::to_string(&results).map_err(|e| fail(e.to_string()))?;
    println!("result {json}");
    let _ = std::io::stdout().flush();
    Ok(())
}

/// Runs one load run: consumers on threads of this process or in a child, producers here.
fn run_once(
    suite: &PathsSuite,
    spec: &SinkSpec,
    route: Route,
) -> Result<(Produced, Vec<SinkResult>), PeerError> {
    let ctx = suite.context()?;
    match route {
        Route::CrossProcess => {
            let json = serde_json::to_string(spec).map_err(|e| PeerError::setup("bench", e))?;
            let mut args = suite.role_command.1.clone();
            args.extend(["sink".to_string(), json]);
            let mut child = Child::spawn(&suite.role_command.0, &args, &[], "sink")?;
            child.expect("ready", Duration::from_secs(30))?;
            let produced = producers(&ctx, spec);
            let line = child.expect("result ", Duration::from_secs(120));
            child.stop();
            let produced = produced?;
            let results: Vec<SinkResult> =
                serde_json::from_str(line?.trim_start_matches("result ").trim())
                    .map_err(|e| fail(format!("the sink's result: {e}")))?;
            Ok((produced, results))
        }
        _ => {
            let mut produced = None;
            let results = std::thread::scope(|s| {
                let (ready_tx, ready_rx) = std::sync::mpsc::channel();
                let consumers = s.spawn(|| {
                    sinks(&ctx, spec, move || {
                        let _ = ready_tx.send(());
                    })
                });
                if ready_rx.recv().is_ok() {
                    produced = Some(producers(&ctx, spec));
                }
                consumers.join()
            })
            .map_err(|_| fail("the consumers panicked"))?;
            let produced = produced.unwrap_or_else(|| Err(fail("the consumers did not start")))?;
            Ok((produced, results))
        }
    }
}

/// What a clock read inside a timed publish costs alone: the median of back-to-back laps.
fn clock_cost_ns() -> f64 {
    let mut rec = Recorder::new();
    let mut lap = Lap::start();
    for _ in 0..100_000 {
        rec.record_ns(lap.lap());
    }
    rec.dist().p50 * 1000.0
}

/// One planned load run.
#[derive(Clone, Copy, Debug)]
pub(super) struct LoadPlan {
    pub(super) measure: &'static str,
    pub(super) kind: LoadKind,
    pub(super) message: MessageKind,
    pub(super) route: Route,
    pub(super) producers: usize,
    pub(super) consumers: usize,
}

impl LoadPlan {
    fn label(&self) -> String {
        format!(
            "{} {} {} {}:{}",
            self.measure,
            if self.kind == LoadKind::Mixed {
                "mixed"
            } else {
                self.message.name()
            },
            self.route.name(),
            self.producers,
            self.consumers
        )
    }
}

/// Scalability points: producers and consumers (CmdVel across threads, back-pressure).
pub(super) const SCALING: [(usize, usize); 4] = [(1, 1), (2, 2), (4, 4), (8, 8)];

/// The load runs of a suite: throughput per message at 1:1 and 2:2, bursts and send-only
/// at 1:1, the mixed loop, and the scaling points, on both routes between threads.
pub(super) fn plan(suite: &PathsSuite) -> Vec<LoadPlan> {
    let routes: Vec<Route> = suite
        .routes
        .iter()
        .copied()
        .filter(|r| *r != Route::SameThread)
        .collect();
    let mut out = Vec::new();
    let mut add = |measure, kind, message, route, producers, consumers| {
        out.push(LoadPlan {
            measure,
            kind,
            message,
            route,
            producers,
            consumers,
        })
    };
    for &route in &routes {
        for &message in &suite.messages {
            add("throughput", LoadKind::Throughput, message, route, 1, 1);
            add("throughput", LoadKind::Throughput, message, route, 2, 2);
            add("burst", LoadKind::Burst, message, route, 1, 1);
            add("send-only", LoadKind::SendOnly, message, route, 1, 1);
        }
        add("mixed", LoadKind::Mixed, MessageKind::CmdVel, route, 1, 1);
        add("mixed", LoadKind::Mixed, MessageKind::CmdVel, route, 1, 2);
    }
    if routes.contains(&Route::CrossThread) && suite.messages.contains(&MessageKind::CmdVel) {
        for (p, c) in SCALING {
            if (p, c) != (1, 1) && (p, c) != (2, 2) {
                add(
                    "throughput",
                    LoadKind::Throughput,
                    MessageKind::CmdVel,
                    Route::CrossThread,
                    p,
                    c,
                );
            }
        }
    }
    out
}

/// Messages per producer: the suite's own count, or its budget of bytes spread over the
/// message's size, between 2,000 and 200,000 (quick) or 2,000,000.
fn count_for(suite: &PathsSuite, message: MessageKind) -> u64 {
    if let Some(n) = suite.load_count {
        return n.max(1);
    }
    let (count, budget) = if suite.quick {
        (200_000u64, 256u64 << 20)
    } else {
        (2_000_000, 2u64 << 30)
    };
    (budget / message.bytes() as u64).clamp(2_000, count)
}

/// Runs every planned load run; failures are skipped entries with their reason.
pub(super) fn run_all(
    suite: &PathsSuite,
    plans: &[LoadPlan],
    bar: &indicatif::ProgressBar,
    n: &mut usize,
    skipped: &mut Vec<Skipped>,
) -> Vec<LoadRow> {
    let cores = crate::harness::machine::online_cpus();
    let clock = clock_cost_ns();
    let mut rows = Vec::new();
    for plan in plans {
        *n += 1;
        bar.set_message(plan.label());
        let threads = plan.producers + plan.consumers;
        let fits = threads <= cores && cores >= 2;
        let count = if plan.kind == LoadKind::Mixed {
            count_for(suite, MessageKind::Imu) / 2
        } else {
            count_for(suite, plan.message)
        };
        let spec = SinkSpec {
            kind: plan.kind,
            message: plan.message,
            topic: format!("/bench/load_{}_{n}", std::process::id()),
            producers: if plan.kind == LoadKind::Mixed {
                1
            } else {
                plan.producers
            },
            consumers: plan.consumers,
            count,
            domain: suite.domain,
            spin: fits,
            cpu: fits.then_some(0),
        };
        match run_once(suite, &spec, plan.route) {
            Ok((produced, results)) => {
                if let Some(e) = results.iter().find_map(|r| r.error.clone()) {
                    skipped.push(Skipped {
                        system: format!("nerve {}", plan.label()),
                        payload_bytes: Some(plan.message.bytes()),
                        reason: e,
                    });
                } else {
                    rows.push(row(plan, &spec, &produced, &results, threads, cores, clock));
                }
            }
            Err(e) => skipped.push(Skipped {
                system: format!("nerve {}", plan.label()),
                payload_bytes: Some(plan.message.bytes()),
                reason: e.to_string(),
            }),
        }
        bar.inc(1);
    }
    rows
}

fn row(
    plan: &LoadPlan,
    spec: &SinkSpec,
    produced: &Produced,
    results: &[SinkResult],
    threads: usize,
    cores: usize,
    clock: f64,
) -> LoadRow {
    let received: u64 = results.iter().map(|r| r.received).sum();
    let last = results.iter().map(|r| r.last_ns).max().unwrap_or(0);
    let seconds = last.saturating_sub(produced.start_ns) as f64 / 1e9;
    let mixed = plan.kind == LoadKind::Mixed;
    let bytes = if mixed {
        // the mean message of the loop: per BatteryState, 100 CmdVel and 100 Imu
        let n = MIXED_BATTERY_EVERY as usize;
        ((MessageKind::CmdVel.bytes() + MessageKind::Imu.bytes()) * n
            + MessageKind::BatteryState.bytes())
            / (2 * n + 1)
    } else {
        plan.message.bytes()
    };
    LoadRow {
        suite: "paths",
        measure: plan.measure.to_string(),
        system: "nerve".into(),
        route: plan.route.name().into(),
        topology: format!("{}:{}", plan.producers, plan.consumers),
        message: if mixed {
            "mixed".into()
        } else {
            plan.message.name().into()
        },
        payload_bytes: bytes,
        qos: if plan.kind.back_pressure() {
            "back-pressure".into()
        } else {
            "drop-oldest".into()
        },
        mode: if spec.spin {
            "spin".into()
        } else {
            format!("adaptive ({threads} threads > {cores} cores)")
        },
        sent: produced.sent,
        received,
        expected: produced.sent * spec.consumers as u64,
        lost: results.iter().map(|r| r.lost).sum(),
        out_of_order: results.iter().map(|r| r.out_of_order).sum(),
        publish_errors: produced.errors,
        seconds,
        msgs_per_s: if seconds > 0.0 {
            received as f64 / seconds
        } else {
            0.0
        },
        send_us: plan.kind.timed().then(|| produced.send.dist()),
        clock_ns: plan.kind.timed().then_some(clock),
    }
}

fn find_load<'a>(
    rows: &'a [LoadRow],
    measure: &str,
    route: Route,
    topology: &str,
    message: &str,
) -> Option<&'a LoadRow> {
    rows.iter().find(|r| {
        r.measure == measure
            && r.route == route.name()
            && r.topology == topology
            && r.message == message
    })
}

/// Whether a back-pressure run delivered everything, once, in order.
fn whole(r: &LoadRow) -> bool {
    r.received == r.expected && r.lost == 0 && r.out_of_order == 0 && r.publish_errors == 0
}

/// The load targets: the throughput floor of issue 17, nothing lost under back-pressure,
/// and HORUS's published load figures (seeds/004, other hardware).
pub(super) fn checks(suite: &PathsSuite, rows: &[LoadRow], skipped: &[Skipped]) -> Vec<Verdict> {
    use crate::report::published::{HORUS, SEED_004_LOAD, SEED_004_MIXED};
    use crate::report::why_missing;
    let plans = plan(suite);
    let planned = |measure: &str, route: Route, p: usize, c: usize, message: &str| {
        plans.iter().any(|x| {
            x.measure == measure
                && x.route == route
                && (x.producers, x.consumers) == (p, c)
                && (x.kind == LoadKind::Mixed) == (message == "mixed")
                && (message == "mixed" || x.message.name() == message)
        })
    };
    let get = |measure: &str, route: Route, p: usize, c: usize, message: &str| {
        let topology = format!("{p}:{c}");
        find_load(rows, measure, route, &topology, message).ok_or_else(|| {
            let what = format!("nerve {measure} {message} {} {topology}", route.name());
            why_missing(skipped, &what, |k| k.system == what)
        })
    };
    let mut out = Vec::new();
    if planned("throughput", Route::CrossProcess, 1, 1, "CmdVel") {
        out.push(Verdict::judged(
            "paths",
            "throughput >= 5 M msg/s, nothing lost (back-pressure)",
            "nerve CmdVel cross-process 1:1",
            get("throughput", Route::CrossProcess, 1, 1, "CmdVel")
                .map(|r| Some(if whole(r) { r.msgs_per_s / 1e6 } else { 0.0 })),
            |m| m >= 5.0,
        ));
    }
    let back_pressure: Vec<&LoadRow> = rows.iter().filter(|r| r.qos == "back-pressure").collect();
    if !back_pressure.is_empty() {
        let broken = back_pressure.iter().filter(|r| !whole(r)).count();
        out.push(Verdict::new(
            "paths",
            "under back-pressure every consumer gets every message once, in order (runs that did not)",
            format!("nerve, {} back-pressure runs", back_pressure.len()),
            Some(broken as f64),
            |n| n == 0.0,
        ));
    }
    let horus = |what: &str| format!("{what} ({})", HORUS.reference);
    let (_, _, cmd_send_1_1, cmd_msgs_nn) = SEED_004_LOAD[0];
    for route in [Route::CrossThread, Route::CrossProcess] {
        if planned("throughput", route, 2, 2, "CmdVel") {
            out.push(Verdict::judged(
                "paths",
                horus(&format!(
                    "throughput N:N >= HORUS's {:.1} M msg/s",
                    cmd_msgs_nn / 1e6
                )),
                format!("nerve CmdVel {} 2:2", route.name()),
                get("throughput", route, 2, 2, "CmdVel").map(|r| Some(r.msgs_per_s / 1e6)),
                move |m| m >= cmd_msgs_nn / 1e6,
            ));
        }
        if planned("send-only", route, 1, 1, "CmdVel") {
            out.push(Verdict::judged(
                "paths",
                horus(&format!(
                    "send-only P50 <= HORUS's {cmd_send_1_1:.0} ns (ours includes a clock read)"
                )),
                format!("nerve CmdVel {} 1:1", route.name()),
                get("send-only", route, 1, 1, "CmdVel").map(|r| r.send_us.map(|d| d.p50 * 1000.0)),
                move |ns| ns <= cmd_send_1_1,
            ));
        }
    }
    let (mixed_ns, mixed_msgs) = SEED_004_MIXED;
    if planned("mixed", Route::CrossProcess, 1, 2, "mixed") {
        let r = get("mixed", Route::CrossProcess, 1, 2, "mixed");
        out.push(Verdict::judged(
            "paths",
            horus(&format!(
                "mixed loop throughput >= HORUS's {:.1} M msg/s",
                mixed_msgs / 1e6
            )),
            "nerve mixed cross-process 1:2",
            r.clone().map(|r| Some(r.msgs_per_s / 1e6)),
            move |m| m >= mixed_msgs / 1e6,
        ));
        out.push(Verdict::judged(
            "paths",
            horus(&format!(
                "mixed loop mean send <= HORUS's {mixed_ns:.0} ns average latency"
            )),
            "nerve mixed cross-process 1:2",
            r.map(|r| r.send_us.map(|d| d.avg * 1000.0)),
            move |ns| ns <= mixed_ns,
        ));
    }
    out
}

/// The load tables and charts of the paths section.
pub(super) fn section(section: &mut Section, rows: &[LoadRow]) {
    if rows.is_empty() {
        return;
    }
    let mps = |r: &LoadRow| format!("{:.3}", r.msgs_per_s / 1e6);
    let throughput: Vec<Vec<String>> = rows
        .iter()
        .filter(|r| r.measure == "throughput" || r.measure == "burst")
        .map(|r| {
            vec![
                r.measure.clone(),
                r.route.clone(),
                r.topology.clone(),
                r.message.clone(),
                r.payload_bytes.to_string(),
                r.qos.clone(),
                r.mode.clone(),
                r.sent.to_string(),
                r.received.to_string(),
                r.expected.to_string(),
                r.lost.to_string(),
                r.out_of_order.to_string(),
                r.publish_errors.to_string(),
                format!("{:.3}", r.seconds),
                mps(r),
            ]
        })
        .collect();
    section.table(
        Some("Throughput: producers send flat out; messages received per second, all consumers together"),
        &[
            "measure",
            "route",
            "producers:consumers",
            "message",
            "bytes",
            "QoS",
            "mode",
            "sent",
            "received",
            "full delivery",
            "lost",
            "out of order",
            "publish errors",
            "s",
            "M msg/s",
        ],
        &throughput,
    );
    let ns = |v: f64| format!("{:.0}", v * 1000.0);
    let timed: Vec<Vec<String>> = rows
        .iter()
        .filter_map(|r| r.send_us.map(|d| (r, d)))
        .map(|(r, d)| {
            vec![
                r.measure.clone(),
                r.route.clone(),
                r.topology.clone(),
                r.message.clone(),
                r.payload_bytes.to_string(),
                r.qos.clone(),
                ns(d.avg),
                ns(d.p50),
                ns(d.p99),
                ns(d.p999),
                ns(d.max),
                format!("{:.0}", r.clock_ns.unwrap_or(0.0)),
                mps(r),
            ]
        })
        .collect();
    section.table(
        Some(
            "Send-only: every publish call timed (one clock read per call, its cost alone beside)",
        ),
        &[
            "measure",
            "route",
            "producers:consumers",
            "message",
            "bytes",
            "QoS",
            "mean ns",
            "P50 ns",
            "P99 ns",
            "P99.9 ns",
            "max ns",
            "clock read ns",
            "M msg/s",
        ],
        &timed,
    );
    let messages: Vec<String> = MessageKind::ALL
        .iter()
        .map(|m| m.name().to_string())
        .collect();
    let groups: Vec<(String, Vec<Option<f64>>)> = [
        (Route::CrossThread, "1:1"),
        (Route::CrossThread, "2:2"),
        (Route::CrossProcess, "1:1"),
        (Route::CrossProcess, "2:2"),
    ]
    .iter()
    .map(|(route, topology)| {
        (
            format!("{} {topology}", route.name()),
            MessageKind::ALL
                .iter()
                .map(|m| {
                    find_load(rows, "throughput", *route, topology, m.name())
                        .map(|r| r.msgs_per_s / 1e6)
                })
                .collect(),
        )
    })
    .collect();
    section.figure(
        &bar_chart(
            "Throughput under back-pressure by message",
            &messages,
            &Axis::log("M msg/s"),
            &groups,
        ),
        "Messages received per second, all consumers together; nothing may be lost.",
    );
    let scaling: Vec<(f64, f64)> = SCALING
        .iter()
        .filter_map(|(p, c)| {
            find_load(
                rows,
                "throughput",
                Route::CrossThread,
                &format!("{p}:{c}"),
                "CmdVel",
            )
            .map(|r| ((p + c) as f64, r.msgs_per_s / 1e6))
        })
        .collect();
    section.figure(
        &crate::report::plot::line_chart(
            "CmdVel throughput by threads (N producers : N consumers, one process)",
            &Axis::linear("producer + consumer threads"),
            &Axis::linear("M msg/s"),
            &[crate::report::plot::Series {
                label: "nerve cross-thread".into(),
                points: scaling,
            }],
        ),
        "Every consumer receives every producer's messages; threads beyond the cores wait adaptively.",
    );
}

/// The console lines of the load runs.
pub(super) fn summary(rows: &[LoadRow]) -> String {
    let mut out = String::new();
    for route in [Route::CrossThread, Route::CrossProcess] {
        for topology in ["1:1", "2:2"] {
            if let Some(r) = find_load(rows, "throughput", route, topology, "CmdVel") {
                out.push_str(&format!(
                    "  CmdVel throughput {:<14} {topology}  {:>6.2} M msg/s, lost {}\n",
                    route.name(),
                    r.msgs_per_s / 1e6,
                    r.lost
                ));
            }
        }
        if let Some(d) =
            find_load(rows, "send-only", route, "1:1", "CmdVel").and_then(|r| r.send_us)
        {
            out.push_str(&format!(
                "  CmdVel send-only  {:<14} 1:1  {:>6.0} ns P50\n",
                route.name(),
                d.p50 * 1000.0
            ));
        }
    }
    out
}
