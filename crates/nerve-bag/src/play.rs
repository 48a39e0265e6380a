//! Replaying bags: every message published at its recorded time, on absolute deadlines.
//!
//! A reader thread walks the file, decodes each message into its Nerve payload and hands
//! it over through a bounded queue, so decoding and disk reads happen ahead of time. The
//! player loans a sample, copies the payload in *before* the deadline, sleeps with the
//! timer module's precise sleep ([`nerve::timer::PreciseSleep`]) to
//! `start + (log_time - first) / rate` and only then sends: the error left is the sleep's
//! and the send's. Deadlines are absolute, so a late message never delays the next.
//!
//! What is replayed: a bag Nerve recorded, with the exact types it recorded (the Nerve
//! schema in each channel's metadata), and any ROS 2 bag (rosbag2's MCAP; a directory,
//! split into several files, see [`crate::read::bag_files`]). A ROS 2 type with a Nerve
//! equivalent is replayed as that type; every other one as the ROS 2 type itself, carried
//! as CDR ([`nerve_msgs::ros2::Ros2Cdr`], schema from the channel's `ros2msg` definition,
//! source stamp from the message's publish time): each message is checked against the
//! definition, and one that does not decode is counted ([`PlayReport::undecodable`]),
//! not published. Relative ROS 2 names (`chatter`) are published in the root namespace.
//!
//! A damaged bag is refused before anything is published, or when the player reaches a
//! record that cannot be read, unless [`PlayOptions::on_damage`] tolerates it (see
//! [`crate::read::OnDamage`]): then what is readable is replayed and the damage is in
//! [`PlayReport::damage`].

use crate::encoding::{ros2cdr, Encoding};
use crate::read::{BagFile, Damage, Mapped, OnDamage};
use crate::{meta, BagError};
use crossbeam_channel::bounded;
use hdrhistogram::Histogram;
use nerve::message::schema::Schema;
use nerve::timer::PreciseSleep;
use nerve::{Context, Precision, Qos, RawPublisher};
use nerve_msgs::Clock;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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
    /// What a damaged bag does: refused (the default), or replayed as far as it can be
    /// read.
    pub on_damage: OnDamage,
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
            on_damage: OnDamage::Refuse,
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
    /// Messages not published because they do not decode as their type, per topic (as
    /// recorded).
    pub undecodable: BTreeMap<String, Undecodable>,
    /// Publishing time minus deadline, ns: median.
    pub error_p50_ns: u64,
    /// 99th percentile.
    pub error_p99_ns: u64,
    /// Largest.
    pub error_max_ns: u64,
    /// Whether it ended early (Ctrl-C or [`Player::stop`]).
    pub interrupted: bool,
    /// The damage found under [`OnDamage::Tolerate`], a file at a time (what could be
    /// read was replayed).
    pub damage: Vec<Damage>,
    /// Clock messages published on `/clock` (with [`PlayOptions::clock_hz`]).
    pub clock_ticks: u64,
}

/// Messages of a topic that do not decode as its type (left out of the replay).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Undecodable {
    /// How many.
    pub count: u64,
    /// The first one: its type, file, time and what is wrong with it.
    pub first: String,
}

/// Longest a replay waits at its end for subscribers to attach to its publishers (see
/// [`nerve::RawPublisher::settle`]).
const SETTLE: Duration = Duration::from_secs(1);

/// How often a replay sleeping through a long gap looks for a stop.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// The topic of the simulated clock.
pub use nerve::time::CLOCK_TOPIC;

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
    /// As published (remapped, made absolute).
    topic: String,
    /// As recorded.
    recorded: String,
}

/// What makes two channels (of the files of a split bag) one topic.
#[derive(PartialEq, Eq)]
struct ChannelKey {
    topic: String,
    message_encoding: String,
    schema: Option<(String, String, Vec<u8>)>,
    nerve_schema: Option<String>,
}

impl ChannelKey {
    fn of(ch: &mcap::Channel) -> ChannelKey {
        ChannelKey {
            topic: ch.topic.clone(),
            message_encoding: ch.message_encoding.clone(),
            schema: ch
                .schema
                .as_ref()
                .map(|s| (s.name.clone(), s.encoding.clone(), s.data.to_vec())),
            nerve_schema: ch.metadata.get(meta::SCHEMA).cloned(),
        }
    }
}

/// What the reader thread hands the player.
enum Item {
    /// A message, decoded.
    Ready(Ready),
    /// A file's damage, tolerated: reading goes on with the next file.
    Damage(Damage),
    /// The replay cannot go on (a damaged bag refused).
    Failed(BagError),
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
        progress: impl FnMut(PlayProgress),
    ) -> Result<PlayReport, BagError> {
        self.play_paced(ctx, path, opts, None, progress)
    }

    /// [`Player::play`], paced by `steps` instead of the recorded times when given (a
    /// lockstep replay, see [`crate::replay`]): each message is published between
    /// `steps.before` and `steps.after` of its recorded time, with no sleep.
    pub fn play_paced(
        &self,
        ctx: &Context,
        path: &Path,
        opts: &PlayOptions,
        mut steps: Option<&mut dyn Steps>,
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
        let files: Vec<BagFile> = crate::read::open_bag(path, opts.on_damage)?;
        let node = ctx
            .node("nerve_bag_player")
            .create()
            .map_err(|e| BagError::Options(format!("cannot create the player's node: {e}")))?;
        let mut report = PlayReport {
            damage: files.iter().filter_map(|f| f.damage.clone()).collect(),
            ..PlayReport::default()
        };
        let mut routes: Vec<Route> = Vec::new();
        let mut encodings: Vec<Encoding> = Vec::new();
        // a topic of several files (a split bag) has one route, shared by its channels
        let mut keys: Vec<(ChannelKey, Option<usize>)> = Vec::new();
        let mut by_channel: BTreeMap<(usize, u16), Option<usize>> = BTreeMap::new();
        let selected = |topic: &str| {
            opts.topics
                .as_ref()
                .is_none_or(|t| t.iter().any(|x| x == topic))
        };
        let mut all_topics: Vec<String> = Vec::new();
        for (fi, f) in files.iter().enumerate() {
            let mut channels: Vec<Arc<mcap::Channel>> = match &f.summary {
                Some(s) => s.channels.values().cloned().collect(),
                None => first_channels(&f.path, &f.mapped)?,
            };
            channels.sort_by_key(|c| c.id);
            for ch in &channels {
                all_topics.push(ch.topic.clone());
                if !selected(&ch.topic) {
                    by_channel.insert((fi, ch.id), None);
                    continue;
                }
                let key = ChannelKey::of(ch);
                if let Some((_, r)) = keys.iter().find(|(k, _)| *k == key) {
                    by_channel.insert((fi, ch.id), *r);
                    continue;
                }
                let r = match route(&node, ch, opts, &f.path) {
                    Ok((r, e)) => {
                        routes.push(r);
                        encodings.push(e);
                        Some(routes.len() - 1)
                    }
                    Err(RouteError::Skip(why)) => {
                        report.skipped.insert(ch.topic.clone(), why);
                        None
                    }
                    Err(RouteError::Fatal(e)) => return Err(e),
                };
                keys.push((key, r));
                by_channel.insert((fi, ch.id), r);
            }
        }
        for (from, _) in &opts.remap {
            if !all_topics.iter().any(|t| t == from) {
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
                if !all_topics.iter().any(|x| x == t) {
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
        let stats: Option<Vec<&mcap::records::Statistics>> = files
            .iter()
            .map(|f| f.summary.as_ref().and_then(|s| s.stats.as_ref()))
            .collect();
        let routed = &by_channel;
        let total = stats.as_ref().map(|all| {
            all.iter()
                .enumerate()
                .flat_map(|(fi, st)| {
                    st.channel_message_counts
                        .iter()
                        .filter(move |(id, _)| routed.get(&(fi, **id)).copied().flatten().is_some())
                        .map(|(_, n)| *n)
                })
                .sum()
        });
        let first = stats.as_ref().and_then(|all| {
            all.iter()
                .filter(|s| s.message_count > 0)
                .map(|s| s.message_start_time)
                .min()
        });

        let (tx, rx) = bounded::<Item>(opts.read_ahead.max(1));
        let reader = {
            let stop = self.stop.clone();
            let opts = opts.clone();
            let files: Vec<Source> = files
                .iter()
                .map(|f| Source {
                    path: f.path.clone(),
                    mapped: f.mapped.clone(),
                    promised: f.promised(),
                    reported: f.damage.is_some(),
                })
                .collect();
            let topics: Vec<String> = routes.iter().map(|r| r.recorded.clone()).collect();
            std::thread::Builder::new()
                .name("bag-reader".into())
                .spawn(move || {
                    let reader = Reader {
                        files: &files,
                        encodings: &encodings,
                        topics: &topics,
                        by_channel: &by_channel,
                        first,
                        opts: &opts,
                        stop: &stop,
                    };
                    reader.run(&tx)
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
                Item::Ready(r) => r,
                Item::Damage(d) => {
                    report.damage.push(d);
                    continue;
                }
                Item::Failed(e) => {
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
            let t = ready.log_time.min(i64::MAX as u64) as i64;
            // paced by steps (a lockstep replay) or by the recorded times
            let deadline = match steps.as_deref_mut() {
                Some(steps) => {
                    if let Err(e) = steps.before(t) {
                        result = Err(e);
                        break;
                    }
                    None
                }
                None => {
                    let start = *start_ns.get_or_insert_with(|| {
                        let start = nerve::mono_ns() + 1_000_000;
                        if let Some(c) = clock.as_mut() {
                            c.next_ns = start;
                        }
                        start
                    });
                    let deadline = start + (ready.at_ns as f64 / opts.rate) as u64;
                    if let Some(c) = clock.as_mut() {
                        // the clock ticks due before this message, each at the bag time it
                        // stands for
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
                    Some(deadline)
                }
            };
            let now = nerve::mono_ns();
            if let Err(e) = r.publisher.send(loan) {
                result = Err(BagError::Topic {
                    topic: r.topic.clone(),
                    reason: format!("cannot publish: {e}"),
                });
                break;
            }
            published[ready.route] += 1;
            match (deadline, steps.as_deref_mut()) {
                (Some(d), _) => {
                    let _ = hist.record(now.saturating_sub(d));
                }
                (None, Some(steps)) => {
                    if let Err(e) = steps.after(t) {
                        result = Err(e);
                        break;
                    }
                }
                (None, None) => {}
            }
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
        if let Ok(undecodable) = reader.join() {
            report.undecodable = undecodable;
        }
        result?;
        // (paced by steps, every message was handled before the next: nothing to wait for)
        if !report.interrupted && steps.is_none() {
            // what was sent last survives the publishers' departure only once every
            // subscriber has attached to them (a short bag may be over before that)
            for (i, r) in routes.iter().enumerate() {
                if published[i] > 0 {
                    r.publisher.settle(SETTLE);
                }
            }
        }
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

/// Paces a replay instead of the recorded times (see [`Player::play_paced`]).
pub trait Steps {
    /// Called before the message recorded at `t` (MCAP log time, ns) is published.
    fn before(&mut self, t: i64) -> Result<(), BagError>;
    /// Called once it is published.
    fn after(&mut self, t: i64) -> Result<(), BagError>;
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

/// The Nerve topic name of a recorded one: ROS 2 resolves a relative name (`chatter`,
/// as rosbag2 may record it) in the root namespace.
fn absolute(topic: &str) -> String {
    if topic.starts_with('/') {
        topic.to_string()
    } else {
        format!("/{topic}")
    }
}

fn route(
    node: &nerve::Node,
    ch: &mcap::Channel,
    opts: &PlayOptions,
    file: &Path,
) -> Result<(Route, Encoding), RouteError> {
    if !crate::read::is_cdr(ch) {
        return Err(RouteError::Skip(format!(
            "encoding {:?} is not CDR with a ros2msg schema",
            ch.message_encoding
        )));
    }
    let ros = ch.schema.as_ref().map(|s| s.name.as_str()).unwrap_or("");
    let in_file = || format!("{ros} in {}", file.display());
    let schema = match ch.metadata.get(meta::SCHEMA) {
        Some(text) => Schema::decode(text).map_err(|e| {
            RouteError::Fatal(BagError::Topic {
                topic: ch.topic.clone(),
                reason: format!("its recorded Nerve schema cannot be used: {e}"),
            })
        })?,
        None => match Encoding::nerve_schema_of_ros(ros) {
            Some(s) => s,
            // any other ROS 2 type: carried as its CDR, with its definition
            None => {
                let data = ch.schema.as_ref().map(|s| &s.data[..]).unwrap_or_default();
                let text = std::str::from_utf8(data).map_err(|e| {
                    RouteError::Skip(format!(
                        "{}: the ros2msg schema is not UTF-8: {e}",
                        in_file()
                    ))
                })?;
                ros2cdr::schema_of(ros, text)
                    .map_err(|e| RouteError::Skip(format!("{}: {e}", in_file())))?
            }
        },
    };
    let encoding = Encoding::for_schema(&schema).map_err(|e| {
        if nerve_msgs::ros2::ros2_type(&schema).is_some() {
            RouteError::Skip(format!("{}: {e}", in_file()))
        } else {
            RouteError::Fatal(e)
        }
    })?;
    let topic = opts
        .remap
        .iter()
        .find(|(from, _)| from == &ch.topic)
        .map_or_else(|| absolute(&ch.topic), |(_, to)| to.clone());
    if let Err(e) = nerve::name::validate_topic(&topic) {
        return Err(RouteError::Skip(format!(
            "{e} (publish it under another name with --remap)"
        )));
    }
    let publisher = RawPublisher::create(node, &topic, &schema, Qos::sensor()).map_err(|e| {
        RouteError::Fatal(BagError::Topic {
            topic: topic.clone(),
            reason: format!("cannot publish the recorded {}: {e}", schema.name),
        })
    })?;
    let recorded = ch.topic.clone();
    Ok((
        Route {
            publisher,
            topic,
            recorded,
        },
        encoding,
    ))
}

/// A file of the bag as the reader thread reads it.
struct Source {
    path: PathBuf,
    mapped: Arc<Mapped>,
    /// What its summary promised (see [`BagFile::promised`]).
    promised: Option<u64>,
    /// Its damage was found on opening (and is in the report already).
    reported: bool,
}

/// The reader thread of a replay: the files in order, each message decoded ahead of
/// its time.
struct Reader<'a> {
    files: &'a [Source],
    encodings: &'a [Encoding],
    /// Recorded topic of each route.
    topics: &'a [String],
    by_channel: &'a BTreeMap<(usize, u16), Option<usize>>,
    first: Option<u64>,
    opts: &'a PlayOptions,
    stop: &'a AtomicBool,
}

impl Reader<'_> {
    /// Reads until the end (of the last loop), a stop, damage, or a player that went
    /// away; returns the messages left out because they do not decode.
    fn run(&self, tx: &crossbeam_channel::Sender<Item>) -> BTreeMap<String, Undecodable> {
        let mut undecodable: BTreeMap<String, Undecodable> = BTreeMap::new();
        let offset = self.opts.start_offset.as_nanos() as u64;
        let mut base = 0u64; // bag time of the loops before this one
        let mut round = 0u64; // loops done
        loop {
            let mut first = self.first;
            let mut last = 0u64;
            let mut count = 0u64;
            for (fi, source) in self.files.iter().enumerate() {
                let (path, m) = (&source.path, &source.mapped);
                for (read, msg) in (0u64..).zip(crate::read::messages(m.bytes())) {
                    if self.stop.load(Ordering::Relaxed) {
                        return undecodable;
                    }
                    let msg = match msg {
                        Ok(m) => m,
                        // a damaged record: refused, or (tolerated) what could be read is
                        // replayed, the damage reported once, and the next file read
                        Err(e) => {
                            let damage = Damage::unreadable_after(path, read, e, source.promised);
                            match self.opts.on_damage.admit(damage) {
                                Ok(d) if round == 0 && !source.reported => {
                                    if tx.send(Item::Damage(d)).is_err() {
                                        return undecodable;
                                    }
                                }
                                Ok(_) => {}
                                Err(e) => {
                                    let _ = tx.send(Item::Failed(e));
                                    return undecodable;
                                }
                            }
                            break;
                        }
                    };
                    let t0 = *first.get_or_insert(msg.log_time);
                    let rel = msg.log_time.saturating_sub(t0);
                    if rel < offset {
                        continue;
                    }
                    let Some(Some(route)) = self.by_channel.get(&(fi, msg.channel.id)).copied()
                    else {
                        continue;
                    };
                    // the source's stamp: rosbag2 writes it as the publish time (older
                    // versions wrote the receive time, or nothing)
                    let stamp = if msg.publish_time > 0 {
                        msg.publish_time
                    } else {
                        msg.log_time
                    };
                    let mut payload = Vec::new();
                    if let Err(e) = self.encodings[route].decode_stamped(
                        &msg.data,
                        stamp.min(i64::MAX as u64) as i64,
                        &mut payload,
                    ) {
                        let u = undecodable.entry(self.topics[route].clone()).or_default();
                        if u.count == 0 {
                            u.first = format!(
                                "{} in {} at {} ns: {e}",
                                self.encodings[route].schema_name,
                                path.display(),
                                msg.log_time
                            );
                        }
                        u.count += 1;
                        continue;
                    }
                    last = last.max(rel - offset);
                    count += 1;
                    let ready = Ready {
                        route,
                        at_ns: base + rel - offset,
                        log_time: msg.log_time,
                        payload,
                    };
                    if tx.send(Item::Ready(ready)).is_err() {
                        return undecodable;
                    }
                }
            }
            if !self.opts.looped || count == 0 {
                return undecodable;
            }
            // the next loop starts one mean gap after this one's last message (1 ms for
            // a single message)
            base += last + (last / count.saturating_sub(1).max(1)).max(1_000_000);
            round += 1;
        }
    }
}
