//! Replaying bags: every message published at its recorded time, on absolute deadlines.
//!
//! A reader thread walks the file, decodes each message into its Nerve payload and hands
//! it over through a bounded queue, so decoding and disk reads happen ahead of time. The
//! player loans a sample, copies the payload in *before* the deadline, sleeps with the
//! timer module's precise sleep ([`nerve::timer::PreciseSleep`]) to
//! `start + (log_time - first) / rate` and only then sends: the error left is the sleep's
//! and the send's. Deadlines are absolute, so a late message never delays the next.

use crate::encoding::Encoding;
use crate::read::Mapped;
use crate::{meta, BagError};
use crossbeam_channel::bounded;
use hdrhistogram::Histogram;
use nerve::message::schema::Schema;
use nerve::timer::PreciseSleep;
use nerve::{Context, Precision, Qos, RawPublisher};
use nerve_msgs::Clock;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How to replay.
#[derive(Clone, Debug)]
pub struct PlayOptions {
    /// Speed factor (2.0: twice as fast).
    pub rate: f64,
    /// Start over at the end until interrupted.
    pub looped: bool,
    /// Skip this much of the bag's start.
    pub start_offset: Duration,
    /// Only these topics (as recorded), or all.
    pub topics: Option<Vec<String>>,
    /// Publish topic `from` as `to`.
    pub remap: Vec<(String, String)>,
    /// Wait this long for each topic to have a subscriber before starting.
    pub wait_subscribers: Duration,
    /// Messages read ahead at most.
    pub read_ahead: usize,
    /// How deadlines are waited for.
    pub precision: Precision,
    /// Publish the bag's recorded time on `/clock` ([`nerve_msgs::Clock`]) this many
    /// times a second of wall time while replaying (None: off).
    pub clock_hz: Option<f64>,
}

impl Default for PlayOptions {
    fn default() -> Self {
        PlayOptions {
            rate: 1.0,
            looped: false,
            start_offset: Duration::ZERO,
            topics: None,
            remap: Vec::new(),
            wait_subscribers: Duration::ZERO,
            read_ahead: 256,
            precision: Precision::default(),
            clock_hz: None,
        }
    }
}

/// Progress of a replay.
#[derive(Clone, Copy, Debug, Default)]
pub struct PlayProgress {
    /// Messages published.
    pub published: u64,
    /// Messages in the selection (per loop), if the bag has a summary.
    pub total: Option<u64>,
    /// Bag time reached, in seconds from the start.
    pub bag_seconds: f64,
}

/// What a replay did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PlayReport {
    /// Messages published per topic (as published, after remapping).
    pub published: BTreeMap<String, u64>,
    /// Topics left out, with the reason.
    pub skipped: BTreeMap<String, String>,
    /// Publishing time minus deadline, ns: median.
    pub error_p50_ns: u64,
    /// 99th percentile.
    pub error_p99_ns: u64,
    /// Largest.
    pub error_max_ns: u64,
    /// Whether it ended early (Ctrl-C or [`Player::stop`]).
    pub interrupted: bool,
    /// Where a damaged bag stopped being readable (what came before was replayed).
    pub damage: Option<String>,
    /// Clock messages published on `/clock` (with [`PlayOptions::clock_hz`]).
    pub clock_ticks: u64,
}

/// How often a replay sleeping through a long gap looks for a stop.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// The topic of the simulated clock.
pub const CLOCK_TOPIC: &str = "/clock";

/// The `/clock` publisher of a replay.
struct SimClock {
    publisher: nerve::Publisher<Clock>,
    period_ns: u64,
    /// Monotonic time of the next tick.
    next_ns: u64,
    published: u64,
}

impl SimClock {
    fn tick(&mut self, bag_ns: u64) -> Result<(), BagError> {
        let clock = Clock {
            clock: nerve_msgs::Time {
                nanos: bag_ns.min(i64::MAX as u64) as i64,
            },
        };
        self.publisher
            .publish(&clock)
            .map_err(|e| BagError::Topic {
                topic: CLOCK_TOPIC.into(),
                reason: format!("cannot publish the clock: {e}"),
            })?;
        self.published += 1;
        Ok(())
    }
}

struct Route {
    publisher: RawPublisher,
    topic: String,
}

struct Ready {
    route: usize,
    /// Offset from the first message, ns of bag time.
    at_ns: u64,
    /// The recorded time (MCAP log time, wall clock ns).
    log_time: u64,
    payload: Vec<u8>,
}

/// A handle that stops a running replay from another thread.
#[derive(Clone, Default)]
pub struct Player {
    stop: Arc<AtomicBool>,
}

impl Player {
    /// A new handle.
    pub fn new() -> Player {
        Player::default()
    }

    /// Ends the replay after the current message.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || nerve::shutdown::requested()
    }

    /// Sleeps until `deadline` (monotonic ns), the last stretch precisely; a long gap is
    /// slept in slices so a stop (Ctrl-C, which another thread may receive) is noticed
    /// within [`STOP_CHECK`].
    fn sleep_until(&self, sleeper: &PreciseSleep, deadline: u64) {
        loop {
            let left = deadline.saturating_sub(nerve::mono_ns());
            if left <= 2 * STOP_CHECK.as_nanos() as u64 || self.stopped() {
                break;
            }
            std::thread::sleep(STOP_CHECK);
        }
        if !self.stopped() {
            sleeper.sleep_until(deadline);
        }
    }

    /// Replays the bag at `path` into `ctx`'s domain; `progress` is called about ten
    /// times a second.
    pub fn play(
        &self,
        ctx: &Context,
        path: &Path,
        opts: &PlayOptions,
        mut progress: impl FnMut(PlayProgress),
    ) -> Result<PlayReport, BagError> {
        if !(opts.rate.is_finite() && opts.rate > 0.0) {
            return Err(BagError::Options(format!(
                "--rate must be a positive number, got {}",
                opts.rate
            )));
        }
        if let Some(hz) = opts.clock_hz {
            if !(hz.is_finite() && hz > 0.0 && hz <= 10_000.0) {
                return Err(BagError::Options(format!(
                    "--clock must be a rate between 0 and 10000 Hz, got {hz}"
                )));
            }
        }
        let mapped = Arc::new(Mapped::open(path)?);
        let node = ctx
            .node("nerve_bag_player")
            .create()
            .map_err(|e| BagError::Options(format!("cannot create the player's node: {e}")))?;
        let summary = match mcap::read::footer(mapped.bytes()) {
            Ok(_) => mcap::Summary::read(mapped.bytes()).map_err(|e| BagError::mcap(path, e))?,
            Err(_) => None,
        };
        let mut report = PlayReport::default();
        let mut routes: Vec<Route> = Vec::new();
        let mut encodings: Vec<Encoding> = Vec::new();
        let mut by_channel: BTreeMap<u16, Option<usize>> = BTreeMap::new();
        let selected = |topic: &str| {
            opts.topics
                .as_ref()
                .is_none_or(|t| t.iter().any(|x| x == topic))
        };
        let mut channels: Vec<Arc<mcap::Channel>> = match &summary {
            Some(s) => s.channels.values().cloned().collect(),
            None => first_channels(path, &mapped)?,
        };
        channels.sort_by_key(|c| c.id);
        for ch in &channels {
            if !selected(&ch.topic) {
                by_channel.insert(ch.id, None);
                continue;
            }
            match route(&node, ch, opts) {
                Ok((r, e)) => {
                    by_channel.insert(ch.id, Some(routes.len()));
                    routes.push(r);
                    encodings.push(e);
                }
                Err(RouteError::Skip(why)) => {
                    report.skipped.insert(ch.topic.clone(), why);
                    by_channel.insert(ch.id, None);
                }
                Err(RouteError::Fatal(e)) => return Err(e),
            }
        }
        for (from, _) in &opts.remap {
            if !channels.iter().any(|c| &c.topic == from) {
                return Err(BagError::Options(format!(
                    "--remap {from}: no such topic in {}",
                    path.display()
                )));
            }
        }
        let mut clock = match opts.clock_hz {
            Some(hz) => Some(SimClock {
                publisher: node
                    .publisher::<Clock>(CLOCK_TOPIC)
                    .qos(Qos::sensor())
                    .create()
                    .map_err(|e| BagError::Topic {
                        topic: CLOCK_TOPIC.into(),
                        reason: format!("cannot publish the clock: {e}"),
                    })?,
                period_ns: (1e9 / hz) as u64,
                next_ns: 0,
                published: 0,
            }),
            None => None,
        };
        if let Some(wanted) = &opts.topics {
            for t in wanted {
                if !channels.iter().any(|c| &c.topic == t) {
                    return Err(BagError::Topic {
                        topic: t.clone(),
                        reason: format!("not in {}", path.display()),
                    });
                }
            }
        }
        if !opts.wait_subscribers.is_zero() {
            for r in &routes {
                r.publisher.wait_for_subscribers(1, opts.wait_subscribers);
            }
        }
        let total = summary.as_ref().and_then(|s| s.stats.as_ref()).map(|st| {
            st.channel_message_counts
                .iter()
                .filter(|(id, _)| by_channel.get(id).copied().flatten().is_some())
                .map(|(_, n)| *n)
                .sum()
        });
        let first = summary
            .as_ref()
            .and_then(|s| s.stats.as_ref())
            .map(|s| s.message_start_time);

        let (tx, rx) = bounded::<Result<Ready, BagError>>(opts.read_ahead.max(1));
        let reader = {
            let (mapped, stop) = (mapped.clone(), self.stop.clone());
            let (path, opts) = (path.to_path_buf(), opts.clone());
            std::thread::Builder::new()
                .name("bag-reader".into())
                .spawn(move || {
                    read_ahead(
                        &path,
                        &mapped,
                        &encodings,
                        &by_channel,
                        first,
                        &opts,
                        &stop,
                        &tx,
                    )
                })
                .map_err(|e| BagError::io(Path::new("bag-reader thread"), e))?
        };

        let sleeper = PreciseSleep::new(opts.precision);
        let mut hist = Histogram::<u64>::new(3).expect("valid histogram");
        let mut start_ns = None;
        let mut last_progress = 0u64;
        let mut published = vec![0u64; routes.len()];
        let mut result = Ok(());
        for item in rx.iter() {
            if self.stopped() {
                report.interrupted = true;
                break;
            }
            let ready = match item {
                Ok(r) => r,
                Err(BagError::Mcap { reason, .. }) if reason.starts_with("damaged: ") => {
                    report.damage = Some(reason["damaged: ".len()..].to_string());
                    break;
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            let r = &routes[ready.route];
            let mut loan = match r.publisher.loan(ready.payload.len()) {
                Ok(l) => l,
                Err(e) => {
                    result = Err(BagError::Topic {
                        topic: r.topic.clone(),
                        reason: format!("cannot loan a sample: {e}"),
                    });
                    break;
                }
            };
            loan.bytes_mut().copy_from_slice(&ready.payload);
            let start = *start_ns.get_or_insert_with(|| {
                let start = nerve::mono_ns() + 1_000_000;
                if let Some(c) = clock.as_mut() {
                    c.next_ns = start;
                }
                start
            });
            let deadline = start + (ready.at_ns as f64 / opts.rate) as u64;
            if let Some(c) = clock.as_mut() {
                // the clock ticks due before this message, each at the bag time it stands for
                while c.next_ns <= deadline && !self.stopped() {
                    self.sleep_until(&sleeper, c.next_ns);
                    let behind = ((deadline - c.next_ns) as f64 * opts.rate) as u64;
                    c.tick(ready.log_time.saturating_sub(behind))?;
                    c.next_ns += c.period_ns;
                }
            }
            self.sleep_until(&sleeper, deadline);
            if self.stopped() {
                report.interrupted = true;
                break;
            }
            let now = nerve::mono_ns();
            if let Err(e) = r.publisher.send(loan) {
                result = Err(BagError::Topic {
                    topic: r.topic.clone(),
                    reason: format!("cannot publish: {e}"),
                });
                break;
            }
            let _ = hist.record(now.saturating_sub(deadline));
            published[ready.route] += 1;
            if now - last_progress > 100_000_000 {
                last_progress = now;
                progress(PlayProgress {
                    published: published.iter().sum(),
                    total,
                    bag_seconds: ready.at_ns as f64 * 1e-9,
                });
            }
        }
        self.stop.store(true, Ordering::Relaxed);
        drop(rx);
        let _ = reader.join();
        result?;
        for (i, r) in routes.iter().enumerate() {
            *report.published.entry(r.topic.clone()).or_default() += published[i];
        }
        if let Some(c) = &clock {
            report.clock_ticks = c.published;
        }
        if !hist.is_empty() {
            report.error_p50_ns = hist.value_at_quantile(0.5);
            report.error_p99_ns = hist.value_at_quantile(0.99);
            report.error_max_ns = hist.max();
        }
        Ok(report)
    }
}

enum RouteError {
    Skip(String),
    Fatal(BagError),
}

/// The channels of a bag without a summary: those of its readable messages.
fn first_channels(path: &Path, m: &Mapped) -> Result<Vec<Arc<mcap::Channel<'static>>>, BagError> {
    let mut seen = BTreeMap::new();
    crate::read::scan(path, m, |msg| {
        seen.entry(msg.channel.id)
            .or_insert_with(|| msg.channel.clone());
        Ok(())
    })?;
    Ok(seen.into_values().collect())
}

fn route(
    node: &nerve::Node,
    ch: &mcap::Channel,
    opts: &PlayOptions,
) -> Result<(Route, Encoding), RouteError> {
    if !crate::read::is_cdr(ch) {
        return Err(RouteError::Skip(format!(
            "encoding {:?} is not CDR with a ros2msg schema",
            ch.message_encoding
        )));
    }
    let schema = match ch.metadata.get(meta::SCHEMA) {
        Some(text) => Schema::decode(text).map_err(|e| {
            RouteError::Fatal(BagError::Topic {
                topic: ch.topic.clone(),
                reason: format!("its recorded Nerve schema cannot be used: {e}"),
            })
        })?,
        None => {
            let ros = ch.schema.as_ref().map(|s| s.name.as_str()).unwrap_or("");
            Encoding::nerve_schema_of_ros(ros).ok_or_else(|| {
                RouteError::Skip(format!("{ros} has no Nerve equivalent and no Nerve schema"))
            })?
        }
    };
    let encoding = Encoding::for_schema(&schema).map_err(RouteError::Fatal)?;
    let topic = opts
        .remap
        .iter()
        .find(|(from, _)| from == &ch.topic)
        .map_or(ch.topic.clone(), |(_, to)| to.clone());
    let publisher = RawPublisher::create(node, &topic, &schema, Qos::sensor()).map_err(|e| {
        RouteError::Fatal(BagError::Topic {
            topic: topic.clone(),
            reason: format!("cannot publish the recorded {}: {e}", schema.name),
        })
    })?;
    Ok((Route { publisher, topic }, encoding))
}

#[allow(clippy::too_many_arguments)]
fn read_ahead(
    path: &Path,
    m: &Mapped,
    encodings: &[Encoding],
    by_channel: &BTreeMap<u16, Option<usize>>,
    first: Option<u64>,
    opts: &PlayOptions,
    stop: &AtomicBool,
    tx: &crossbeam_channel::Sender<Result<Ready, BagError>>,
) {
    let offset = opts.start_offset.as_nanos() as u64;
    let mut base = 0u64; // bag time of the loops before this one
    loop {
        let stream = crate::read::messages(m.bytes());
        let mut first = first;
        let mut last = 0u64;
        let mut count = 0u64;
        for msg in stream {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let msg = match msg {
                Ok(m) => m,
                // a damaged tail: what could be read is replayed, the damage reported
                Err(e) => {
                    let _ = tx.send(Err(BagError::mcap(path, format!("damaged: {e}"))));
                    return;
                }
            };
            let t0 = *first.get_or_insert(msg.log_time);
            let rel = msg.log_time.saturating_sub(t0);
            if rel < offset {
                continue;
            }
            let Some(Some(route)) = by_channel.get(&msg.channel.id).copied() else {
                continue;
            };
            last = last.max(rel - offset);
            count += 1;
            let mut payload = Vec::new();
            if let Err(e) = encodings[route].decode(&msg.data, &mut payload) {
                let _ = tx.send(Err(BagError::Convert {
                    what: format!("a message on {} at {} ns", msg.channel.topic, msg.log_time),
                    reason: e.to_string(),
                }));
                return;
            }
            let ready = Ready {
                route,
                at_ns: base + rel - offset,
                log_time: msg.log_time,
                payload,
            };
            if tx.send(Ok(ready)).is_err() {
                return;
            }
        }
        if !opts.looped || count == 0 {
            return;
        }
        // the next loop starts one mean gap after this one's last message (1 ms for a
        // single message)
        base += last + (last / count.saturating_sub(1).max(1)).max(1_000_000);
    }
}
