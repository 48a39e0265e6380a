//! Deterministic replay: a bag played through unmodified nodes in lockstep, their outputs
//! recorded in an order that does not depend on scheduling.
//!
//! The nodes run in a domain of their own with `NERVE_LOCKSTEP=1` (see
//! [`nerve::time::lockstep`]). For every recorded message, in log-time order:
//! 1. the clock steps to each executor timer that falls due before the message (the
//!    earliest first), and the step ends once every executor fired what fell due (and
//!    everything that set off has been handled);
//! 2. the clock is set to the message's log time (timers due exactly then fired in 1:
//!    **at equal times, timers come before messages**, and messages keep the bag's order);
//! 3. the message is published and the player waits until every callback it triggered,
//!    in every process, has returned, and the callbacks those triggered, and so on;
//! 4. what the nodes published meanwhile is written to the output bag, topic by topic in
//!    name order, each topic in its publisher's order, stamped with the simulation time.
//!
//! Nothing is dropped for rate: a slow node makes the replay slower. The output bag is the
//! same, byte for byte in the payloads, every time the same bag goes through the same
//! nodes, however loaded the machine (what the nodes compute must itself be
//! deterministic: no wall clock, no randomness, no reading a topic outside an executor).

use crate::encoding::{Encoding, Schemas};
use crate::play::{PlayOptions, Player, Steps};
use crate::write::BagWriter;
use crate::BagError;
use hdrhistogram::Histogram;
use nerve::time::lockstep::{Lockstep, LockstepError};
use nerve::{Context, Qos, RawSubscriber};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to replay.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// Which topics of the bag, remapping, start offset (rate and clock are ignored).
    pub play: PlayOptions,
    /// Where the nodes' outputs are recorded (None: counted and digested only).
    pub output: Option<PathBuf>,
    /// How long the set of executors must stay unchanged before the replay starts.
    pub settle: Duration,
    /// Longest wait for the nodes to show up at all.
    pub join_timeout: Duration,
    /// Longest wait for one step to finish (a callback that blocks longer stalls the
    /// replay with an error).
    pub stall_timeout: Duration,
    /// Queue depth of the output recorder's subscriptions (per topic, per step).
    pub output_depth: usize,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            play: PlayOptions::default(),
            output: None,
            settle: Duration::from_millis(500),
            join_timeout: Duration::from_secs(30),
            stall_timeout: Duration::from_secs(30),
            output_depth: 4096,
        }
    }
}

/// What a replay did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ReplayReport {
    /// Messages played.
    pub messages: u64,
    /// Clock steps made for timers.
    pub clock_steps: u64,
    /// Recorded time the replay covered, s.
    pub bag_seconds: f64,
    /// Real time it took, s (from the first message).
    pub wall_seconds: f64,
    /// `bag_seconds / wall_seconds`.
    pub speedup: f64,
    /// Mean real time per played message, µs.
    pub per_message_us: f64,
    /// Real time of one message's step (clock steps for timers, publish, quiet, outputs
    /// written), µs: median, 99th and 99.9th percentile, largest (as measured).
    pub step_p50_us: f64,
    /// 99th percentile.
    pub step_p99_us: f64,
    /// 99.9th percentile.
    pub step_p999_us: f64,
    /// Largest.
    pub step_max_us: f64,
    /// Executors that took part.
    pub executors: u32,
    /// Output messages per topic.
    pub outputs: BTreeMap<String, u64>,
    /// SHA-256 of every output payload of a topic, in order, each after its length (as
    /// `nerve bag digest` gives it; hex).
    pub digests: BTreeMap<String, String>,
    /// Output samples the recorder lost (its queue overflowed within one step).
    pub outputs_lost: u64,
    /// Topics published by the nodes that could not be recorded, with why.
    pub unrecorded: BTreeMap<String, String>,
    /// The bag's damage, tolerated ([`PlayOptions::on_damage`]): what could be read was
    /// replayed.
    pub damage: Vec<crate::read::Damage>,
}

/// Runs a replay: waits for the nodes' executors to join `lockstep` and settle, then
/// plays `bag` through them and records what they publish. `check` runs whenever the
/// player waits (its error ends the replay: a child process that exited).
pub fn replay(
    lockstep: &Arc<Lockstep>,
    bag: &Path,
    opts: &ReplayOptions,
    check: &mut dyn FnMut() -> Result<(), String>,
    progress: impl FnMut(crate::play::PlayProgress),
) -> Result<ReplayReport, BagError> {
    let mut cfg = nerve::Config::from_env()
        .map_err(|e| BagError::Options(format!("replay configuration: {e}")))?;
    cfg.lockstep = true;
    cfg.sim_time = true;
    let domain = lockstep.domain();
    cfg = cfg
        .domain(domain)
        .map_err(|e| BagError::Options(e.to_string()))?;
    let ctx = Context::new(cfg).map_err(|e| BagError::Options(format!("replay context: {e}")))?;
    // a damaged bag is refused before the nodes are waited for
    let info = crate::read::info_checked(bag, opts.play.on_damage)?;
    settle(lockstep, opts, check)?;
    let played: BTreeSet<String> = info
        .topics
        .iter()
        .map(|t| {
            let name = if t.topic.starts_with('/') {
                t.topic.clone()
            } else {
                format!("/{}", t.topic)
            };
            opts.play
                .remap
                .iter()
                .find(|(from, _)| *from == t.topic)
                .map_or(name, |(_, to)| to.clone())
        })
        .collect();
    let mut outputs = Outputs::open(&ctx, &played, opts)?;
    // the recorder's subscriptions reach the publishers before anything is played
    std::thread::sleep(opts.settle.min(Duration::from_millis(200)));
    let mut play = opts.play.clone();
    play.clock_hz = None;
    play.looped = false;
    play.wait_subscribers = opts.settle;
    let start_steps = Instant::now();
    let mut pacer = Pacer {
        ls: lockstep.as_ref(),
        timeout: opts.stall_timeout,
        check,
        outputs: &mut outputs,
        clock_steps: 0,
        first: None,
        last: 0,
        started: None,
        ended: None,
        step: Instant::now(),
        steps: Histogram::new(3).expect("valid histogram"),
    };
    let report = Player::new().play_paced(&ctx, bag, &play, Some(&mut pacer), progress)?;
    if report.interrupted {
        return Err(BagError::Replay(LockstepError::Interrupted));
    }
    let (first, last, clock_steps) = (pacer.first, pacer.last, pacer.clock_steps);
    let started = pacer.started.unwrap_or(start_steps);
    let steps = std::mem::replace(&mut pacer.steps, Histogram::new(3).expect("valid"));
    let wall = pacer
        .ended
        .map_or(Duration::ZERO, |e| e - started)
        .as_secs_f64()
        .max(1e-9);
    let messages: u64 = report.published.values().sum();
    let bag_seconds = first.map_or(0.0, |f| (last - f) as f64 * 1e-9);
    let executors = lockstep.executors();
    let recorded = outputs.finish()?;
    if lockstep.underflows() > 0 {
        eprintln!(
            "nerve replay: {} accounting errors in the lockstep (more handled than sent): \
             a process outside the replay published into its domain?",
            lockstep.underflows()
        );
    }
    Ok(ReplayReport {
        messages,
        clock_steps,
        bag_seconds,
        wall_seconds: wall,
        speedup: bag_seconds / wall,
        per_message_us: if messages > 0 {
            wall * 1e6 / messages as f64
        } else {
            0.0
        },
        step_p50_us: steps.value_at_quantile(0.5) as f64 / 1e3,
        step_p99_us: steps.value_at_quantile(0.99) as f64 / 1e3,
        step_p999_us: steps.value_at_quantile(0.999) as f64 / 1e3,
        step_max_us: steps.max() as f64 / 1e3,
        executors,
        outputs: recorded.counts,
        digests: recorded.digests,
        outputs_lost: recorded.lost,
        unrecorded: recorded.unrecorded,
        damage: report.damage,
    })
}

/// Waits until at least one executor joined and the set stayed the same for
/// `opts.settle` with nothing owed.
fn settle(
    ls: &Lockstep,
    opts: &ReplayOptions,
    check: &mut dyn FnMut() -> Result<(), String>,
) -> Result<(), BagError> {
    let start = Instant::now();
    let mut seen = (u32::MAX, Instant::now());
    loop {
        if nerve::shutdown::requested() {
            return Err(BagError::Replay(LockstepError::Interrupted));
        }
        check().map_err(|e| BagError::Replay(LockstepError::Check(e)))?;
        if let Some(gone) = ls.dead_participant() {
            return Err(BagError::Replay(gone));
        }
        let n = ls.executors();
        if n != seen.0 || ls.pending() != 0 {
            seen = (n, Instant::now());
        } else if n > 0 && seen.1.elapsed() >= opts.settle {
            return Ok(());
        }
        if n == 0 && start.elapsed() >= opts.join_timeout {
            return Err(BagError::Options(format!(
                "no executor joined the replay within {:?}: do the nodes spin an executor \
                 and read NERVE_DOMAIN/NERVE_LOCKSTEP from the environment (Context::from_env)?",
                opts.join_timeout
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Paces the player: clock steps for due timers, then the message, then quiet.
struct Pacer<'a> {
    ls: &'a Lockstep,
    timeout: Duration,
    check: &'a mut dyn FnMut() -> Result<(), String>,
    outputs: &'a mut Outputs,
    clock_steps: u64,
    first: Option<i64>,
    last: i64,
    started: Option<Instant>,
    ended: Option<Instant>,
    /// When the current message's step began.
    step: Instant,
    /// Step times, ns.
    steps: Histogram<u64>,
}

/// Clock steps for one message beyond which a timer that never stops falling due is an
/// error (a timer that re-arms itself at the same time).
const MAX_STEPS_PER_MESSAGE: u32 = 100_000;

impl Steps for Pacer<'_> {
    fn before(&mut self, t: i64) -> Result<(), BagError> {
        self.step = Instant::now();
        self.started.get_or_insert(self.step);
        if self.first.is_none() {
            self.first = Some(t);
            // time starts at the first message: executors count their timers from here
            self.ls.step_clock(t, self.timeout, self.check)?;
            self.outputs.drain(t)?;
        }
        let mut steps = 0;
        while let Some(due) = self.ls.next_due().filter(|&d| d <= t) {
            let at = due.max(self.ls.now());
            self.ls.step_clock(at, self.timeout, self.check)?;
            self.outputs.drain(at)?;
            self.clock_steps += 1;
            steps += 1;
            if steps > MAX_STEPS_PER_MESSAGE {
                return Err(BagError::Options(format!(
                    "a timer keeps falling due at {:.6} s without moving on",
                    at as f64 * 1e-9
                )));
            }
        }
        if self.ls.now() < t {
            self.ls.set_time(t);
        }
        self.last = t;
        Ok(())
    }

    fn after(&mut self, t: i64) -> Result<(), BagError> {
        self.ls.wait_quiet(self.timeout, self.check)?;
        self.outputs.drain(t)?;
        let now = Instant::now();
        let _ = self.steps.record((now - self.step).as_nanos() as u64);
        self.ended = Some(now);
        Ok(())
    }
}

/// One recorded output topic.
struct Output {
    topic: String,
    sub: RawSubscriber,
    /// Converts samples when no bag is written (the writer converts them otherwise).
    encoding: Encoding,
    count: u64,
    lost_seen: u64,
    digest: Sha256,
    buf: Vec<u8>,
}

/// The recorder of the nodes' outputs.
struct Outputs {
    /// Sorted by topic name: the order samples of one step are written in.
    topics: Vec<Output>,
    writer: Option<BagWriter>,
    lost: u64,
    unrecorded: BTreeMap<String, String>,
    _node: nerve::Node,
}

/// What the recorder of the outputs saw, per topic.
struct Recorded {
    counts: BTreeMap<String, u64>,
    digests: BTreeMap<String, String>,
    lost: u64,
    unrecorded: BTreeMap<String, String>,
}

impl Outputs {
    /// Subscribes to every topic with a publisher that is not played from the bag, the
    /// clock or Nerve's own.
    fn open(
        ctx: &Context,
        played: &BTreeSet<String>,
        opts: &ReplayOptions,
    ) -> Result<Outputs, BagError> {
        let node = ctx
            .node("nerve_replay_recorder")
            .create()
            .map_err(|e| BagError::Options(format!("cannot create the recorder's node: {e}")))?;
        let names = nerve::introspect::topic_names(&node)
            .map_err(|e| BagError::Options(format!("cannot list the domain's topics: {e}")))?;
        let mut writer = match &opts.output {
            Some(path) => Some(BagWriter::create(path, true)?),
            None => None,
        };
        let mut topics = Vec::new();
        let mut unrecorded = BTreeMap::new();
        for name in names {
            if played.contains(&name)
                || name == nerve::time::CLOCK_TOPIC
                || name.starts_with("/_nerve")
            {
                continue;
            }
            let Ok(info) = nerve::introspect::topic_info(&node, &name) else {
                continue;
            };
            if info.publishers == 0 {
                continue;
            }
            let schema = match info.schema {
                Some(Ok(s)) => s,
                Some(Err(e)) => {
                    unrecorded.insert(name, format!("its schema cannot be trusted: {e}"));
                    continue;
                }
                None => {
                    unrecorded.insert(name, "no schema (a hand-written Pod type)".into());
                    continue;
                }
            };
            let encoding = match Encoding::for_schema_in(&schema, Schemas::Ros2) {
                Ok(e) => e,
                Err(e) => {
                    unrecorded.insert(name, e.to_string());
                    continue;
                }
            };
            if let Some(w) = writer.as_mut() {
                w.add_topic_schema(&name, &schema)?;
            }
            let qos = Qos::default().depth(opts.output_depth);
            let sub = RawSubscriber::with_schema(&node, &name, &schema, qos)?;
            topics.push(Output {
                topic: name,
                sub,
                encoding,
                count: 0,
                lost_seen: 0,
                digest: Sha256::new(),
                buf: Vec::new(),
            });
        }
        Ok(Outputs {
            topics,
            writer,
            lost: 0,
            unrecorded,
            _node: node,
        })
    }

    /// Writes what the nodes published since the last drain, stamped `t`.
    fn drain(&mut self, t: i64) -> Result<(), BagError> {
        let log_time = t.max(0) as u64;
        for o in &mut self.topics {
            while let Some(s) = o.sub.try_recv()? {
                let written = match self.writer.as_mut() {
                    Some(w) => {
                        let publish_time = s.header().publish_wall_ns.max(0) as u64;
                        w.write_payload(&o.topic, log_time, publish_time, s.bytes())?
                    }
                    None => {
                        o.encoding.encode(s.bytes(), &mut o.buf)?;
                        &o.buf
                    }
                };
                // as `compare::digest` reads the bag: each message after its length
                o.digest.update((written.len() as u64).to_le_bytes());
                o.digest.update(written);
                o.count += 1;
            }
            let lost = o.sub.stats().lost;
            if lost > o.lost_seen {
                self.lost += lost - o.lost_seen;
                o.lost_seen = lost;
            }
        }
        Ok(())
    }

    /// Closes the output bag; counts and digests per topic.
    fn finish(mut self) -> Result<Recorded, BagError> {
        if let Some(w) = self.writer.take() {
            w.finish()?;
        }
        let mut counts = BTreeMap::new();
        let mut digests = BTreeMap::new();
        for o in self.topics {
            counts.insert(o.topic.clone(), o.count);
            let hex: String = o
                .digest
                .finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            digests.insert(o.topic, hex);
        }
        Ok(Recorded {
            counts,
            digests,
            lost: self.lost,
            unrecorded: self.unrecorded,
        })
    }
}
