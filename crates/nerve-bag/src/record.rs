//! Recording topics to MCAP.
//!
//! Threads: one *discovery* thread lists the domain's topics every
//! [`RecordOptions::discovery_period`] and subscribes to new ones that match the
//! selection; one *receiver* per topic takes each sample out of shared memory, stamps its
//! receive time, converts it (see [`crate::encoding`]) and queues it; one *writer* owns
//! the file: chunks, compression, indexes, splitting and the closing summary happen
//! there, off the receive path. The queue is bounded in bytes: when it is full a sample
//! is dropped and counted ([`TopicStats::dropped`]), or, with
//! [`RecordOptions::backpressure`], the receiver waits (and the topic's own QoS decides
//! what its publishers do). Samples the topic dropped before the recorder took them
//! (sequence gaps) are counted as [`TopicStats::lost`].
//!
//! Crash safety: the writer flushes the current chunk at least every
//! [`RecordOptions::flush_period`], so a recorder killed with SIGKILL leaves a file that
//! reads up to its last complete chunk (see [`crate::read::scan`]).

use crate::encoding::{Encoding, Schemas};
use crate::{meta, BagError};
use crossbeam_channel::{bounded, Receiver, Sender};
use nerve::message::schema::Schema;
use nerve::{Context, Qos, RawSubscriber};
use regex::Regex;
use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Chunk compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// None: the fastest, the largest files.
    None,
    /// Zstandard (level 1).
    Zstd,
    /// LZ4.
    Lz4,
}

impl Compression {
    fn mcap(self) -> Option<mcap::Compression> {
        match self {
            Compression::None => None,
            Compression::Zstd => Some(mcap::Compression::Zstd),
            Compression::Lz4 => Some(mcap::Compression::Lz4),
        }
    }
}

/// Which topics to record.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// Every topic (the default when no topic and no pattern is given).
    pub all: bool,
    /// Exact topic names.
    pub topics: Vec<String>,
    /// Topics whose names match this pattern.
    pub include: Option<Regex>,
    /// Topics whose names match this pattern are left out (even if named).
    pub exclude: Option<Regex>,
}

impl Selection {
    /// Whether `topic` is recorded.
    pub fn matches(&self, topic: &str) -> bool {
        if self.exclude.as_ref().is_some_and(|x| x.is_match(topic)) {
            return false;
        }
        let nothing_named = self.topics.is_empty() && self.include.is_none();
        self.all
            || nothing_named
            || self.topics.iter().any(|t| t == topic)
            || self.include.as_ref().is_some_and(|r| r.is_match(topic))
    }
}

/// How to record.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// The file to write; with splitting, files `<stem>_<n>.mcap` beside it.
    pub output: PathBuf,
    /// Topics to record.
    pub selection: Selection,
    /// Chunk compression.
    pub compression: Compression,
    /// Start a new file once this many bytes are written.
    pub split_size: Option<u64>,
    /// ROS 2 schemas everywhere, or Foxglove's where a message has one.
    pub schemas: Schemas,
    /// Replace files that exist already (otherwise an existing file is an error, and
    /// nothing of it is touched).
    pub overwrite: bool,
    /// Start a new file after this long.
    pub split_duration: Option<Duration>,
    /// Most bytes waiting for the writer before samples are dropped (or wait).
    pub queue_bytes: usize,
    /// Wait for room in the queue instead of dropping (the topic's QoS then decides
    /// whether its publishers slow down).
    pub backpressure: bool,
    /// Depth of each topic's subscriber queue in shared memory: how many samples may
    /// arrive while the topic's receiving thread is not scheduled (256 is a quarter of a
    /// second of a 1 kHz IMU). Capped at what the topic supports.
    pub depth: usize,
    /// How often new topics are looked for.
    pub discovery_period: Duration,
    /// Target chunk size in bytes.
    pub chunk_size: u64,
    /// Longest time a written sample waits in memory before it reaches the file.
    pub flush_period: Duration,
}

impl RecordOptions {
    /// Defaults: all topics, no compression, 512 MiB of queue, the deepest queue every
    /// topic supports ([`Qos::GUARANTEED_DEPTH`]), discovery every 250 ms, 4 MiB chunks
    /// flushed at least every second.
    pub fn new(output: impl Into<PathBuf>) -> RecordOptions {
        RecordOptions {
            output: output.into(),
            selection: Selection {
                all: true,
                ..Selection::default()
            },
            compression: Compression::None,
            split_size: None,
            schemas: Schemas::Ros2,
            overwrite: false,
            split_duration: None,
            queue_bytes: 512 << 20,
            backpressure: false,
            depth: Qos::GUARANTEED_DEPTH,
            discovery_period: Duration::from_millis(250),
            chunk_size: 4 << 20,
            flush_period: Duration::from_secs(1),
        }
    }
}

/// Counts of one recorded topic.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct TopicStats {
    /// Topic name.
    pub topic: String,
    /// Nerve type.
    pub type_name: String,
    /// Schema name in the bag (the ROS 2 type for standard messages).
    pub schema_name: String,
    /// Samples taken from the topic.
    pub received: u64,
    /// Samples written to the bag.
    pub written: u64,
    /// Samples dropped because the writer queue was full.
    pub dropped: u64,
    /// Samples the topic dropped before the recorder took them (sequence gaps).
    pub lost: u64,
    /// Samples that could not be converted (see the log of the recorder).
    pub failed: u64,
    /// Payload bytes written (CDR).
    pub bytes: u64,
    /// Why the topic is not recorded, if it is not.
    pub skipped: Option<String>,
}

#[derive(Default)]
struct Counters {
    received: AtomicU64,
    written: AtomicU64,
    dropped: AtomicU64,
    lost: AtomicU64,
    failed: AtomicU64,
    bytes: AtomicU64,
}

struct Topic {
    name: String,
    type_name: String,
    schema_name: String,
    schema: Option<Schema>,
    encoding: Option<Encoding>,
    counters: Counters,
    skipped: Option<String>,
    /// Spare buffers, returned by the writer (bounded).
    spare: (Sender<Vec<u8>>, Receiver<Vec<u8>>),
}

impl Topic {
    fn stats(&self) -> TopicStats {
        let c = &self.counters;
        TopicStats {
            topic: self.name.clone(),
            type_name: self.type_name.clone(),
            schema_name: self.schema_name.clone(),
            received: c.received.load(Ordering::Relaxed),
            written: c.written.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            lost: c.lost.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            skipped: self.skipped.clone(),
        }
    }
}

/// A sample on its way to the writer.
struct Item {
    topic: Arc<Topic>,
    seq: u32,
    log_time: u64,
    publish_time: u64,
    data: Vec<u8>,
}

struct Shared {
    stop: AtomicBool,
    topics: Mutex<Vec<Arc<Topic>>>,
    queued: AtomicUsize,
    written_bytes: AtomicU64,
    files: Mutex<Vec<PathBuf>>,
    error: Mutex<Option<BagError>>,
    /// Problems worth telling (first conversion failure of a topic, failed subscribe),
    /// bounded.
    warnings: Mutex<Vec<String>>,
}

impl Shared {
    fn warn(&self, w: String) {
        let mut ws = self.warnings.lock().expect("poisoned");
        if ws.len() < 64 {
            ws.push(w);
        }
    }
}

/// A running recording; [`Recorder::stop`] ends it and closes the file.
pub struct Recorder {
    shared: Arc<Shared>,
    discovery: Option<JoinHandle<()>>,
    writer: Option<JoinHandle<()>>,
    receivers: Arc<Mutex<Vec<JoinHandle<()>>>>,
    started: Instant,
}

/// What a finished recording wrote.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RecordReport {
    /// The files, in order.
    pub files: Vec<PathBuf>,
    /// Per topic counts.
    pub topics: Vec<TopicStats>,
    /// How long it recorded, in seconds.
    pub seconds: f64,
    /// Bytes written to the files.
    pub bytes: u64,
}

impl RecordReport {
    /// Samples lost anywhere (queue drops, topic gaps, conversion failures).
    pub fn losses(&self) -> u64 {
        self.topics
            .iter()
            .map(|t| t.dropped + t.lost + t.failed)
            .sum()
    }
}

impl Recorder {
    /// Starts recording in `ctx`'s domain. Fails at once if the output cannot be
    /// created.
    pub fn start(ctx: &Context, opts: RecordOptions) -> Result<Recorder, BagError> {
        if opts.split_size.is_some_and(|s| s < (1 << 20)) {
            return Err(BagError::Options(
                "--split-size must be at least 1 MiB".into(),
            ));
        }
        if opts
            .split_duration
            .is_some_and(|d| d < Duration::from_secs(1))
        {
            return Err(BagError::Options(
                "--split-duration must be at least 1 s".into(),
            ));
        }
        // fail here, not in a thread, if this domain cannot be joined
        ctx.node(NODE)
            .create()
            .map_err(|e| BagError::Options(format!("cannot create the recorder's node: {e}")))?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            topics: Mutex::new(Vec::new()),
            queued: AtomicUsize::new(0),
            written_bytes: AtomicU64::new(0),
            files: Mutex::new(Vec::new()),
            error: Mutex::new(None),
            warnings: Mutex::new(Vec::new()),
        });
        // the first file is created now, so a bad path fails here, not later
        let (tx, rx) = bounded::<Item>(65_536);
        let mut file = BagFile::create(&opts, 0)?;
        shared
            .files
            .lock()
            .expect("poisoned")
            .push(file.path.clone());
        file.add_known(&shared)?;
        let receivers = Arc::new(Mutex::new(Vec::new()));
        let writer = {
            let shared = shared.clone();
            let opts = opts.clone();
            std::thread::Builder::new()
                .name("bag-writer".into())
                .spawn(move || writer_loop(&shared, &opts, file, &rx))
                .map_err(|e| BagError::io(Path::new("bag-writer thread"), e))?
        };
        let discovery = {
            let shared = shared.clone();
            let receivers = receivers.clone();
            let ctx = ctx.clone();
            std::thread::Builder::new()
                .name("bag-discovery".into())
                .spawn(move || discovery_loop(&ctx, &shared, &opts, &tx, &receivers))
                .map_err(|e| BagError::io(Path::new("bag-discovery thread"), e))?
        };
        Ok(Recorder {
            shared,
            discovery: Some(discovery),
            writer: Some(writer),
            receivers,
            started: Instant::now(),
        })
    }

    /// Live counts per topic.
    pub fn stats(&self) -> Vec<TopicStats> {
        let topics = self.shared.topics.lock().expect("poisoned");
        topics.iter().map(|t| t.stats()).collect()
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.shared.written_bytes.load(Ordering::Relaxed)
    }

    /// Problems met so far (the first conversion failure of each topic, failed
    /// subscriptions); taken, so each is returned once.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.shared.warnings.lock().expect("poisoned"))
    }

    /// Whether the writer failed (the error is returned by [`Recorder::stop`]).
    pub fn failed(&self) -> bool {
        self.shared.error.lock().expect("poisoned").is_some()
    }

    /// Stops: every receiver drains what it holds, the writer writes everything queued,
    /// the per-topic counts and the summary, and closes the file.
    pub fn stop(mut self) -> Result<RecordReport, BagError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<RecordReport, BagError> {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(d) = self.discovery.take() {
            let _ = d.join();
        }
        for r in std::mem::take(&mut *self.receivers.lock().expect("poisoned")) {
            let _ = r.join();
        }
        // the discovery thread held the last sender: the writer drains and exits
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        if let Some(e) = self.shared.error.lock().expect("poisoned").take() {
            return Err(e);
        }
        Ok(RecordReport {
            files: self.shared.files.lock().expect("poisoned").clone(),
            topics: self.stats(),
            seconds: self.started.elapsed().as_secs_f64(),
            bytes: self.bytes_written(),
        })
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if self.writer.is_some() {
            let _ = self.finish();
        }
    }
}

fn discovery_loop(
    ctx: &Context,
    shared: &Arc<Shared>,
    opts: &RecordOptions,
    tx: &Sender<Item>,
    receivers: &Mutex<Vec<JoinHandle<()>>>,
) {
    let Ok(node) = ctx.node(NODE).create() else {
        return;
    };
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let start = |topic: Topic| {
        let topic = Arc::new(topic);
        shared.topics.lock().expect("poisoned").push(topic.clone());
        if topic.skipped.is_some() {
            return;
        }
        let (shared, tx, opts, ctx) = (shared.clone(), tx.clone(), opts.clone(), ctx.clone());
        let spawned = std::thread::Builder::new()
            .name("bag-receiver".into())
            .spawn(move || receive_loop(&ctx, &topic, &shared, &opts, &tx));
        if let Ok(h) = spawned {
            receivers.lock().expect("poisoned").push(h);
        }
    };
    // topics published only on other hosts: asked of the network plane by a thread of its
    // own (a round takes a discovery window), started here like local ones
    let (remote_tx, remote_rx) = bounded::<Topic>(64);
    let remote = ctx.config().network.enabled.then(|| {
        let (ctx, shared, opts, seen) = (ctx.clone(), shared.clone(), opts.clone(), seen.clone());
        std::thread::Builder::new()
            .name("bag-remote-discovery".into())
            .spawn(move || remote_discovery_loop(&ctx, &shared, &opts, &seen, &remote_tx))
    });
    while !shared.stop.load(Ordering::Relaxed) {
        if let Ok(names) = nerve::introspect::topic_names(&node) {
            for name in names {
                if seen.lock().expect("poisoned").contains(&name) || !opts.selection.matches(&name)
                {
                    continue;
                }
                let Ok(info) = nerve::introspect::topic_info(&node, &name) else {
                    continue; // vanished, or not created completely yet: next round
                };
                if !seen.lock().expect("poisoned").insert(name.clone()) {
                    continue; // the remote discovery took it meanwhile
                }
                let schema = match &info.schema {
                    Some(Ok(s)) => Ok(s.clone()),
                    Some(Err(e)) => Err(format!("its schema cannot be trusted: {e}")),
                    None => Err(format!(
                        "{} has no schema (a hand-written Pod type)",
                        info.type_info.name
                    )),
                };
                start(describe(
                    name,
                    info.type_info.name.clone(),
                    schema,
                    opts.schemas,
                ));
            }
        }
        while let Ok(topic) = remote_rx.try_recv() {
            start(topic);
        }
        sleep_unless_stopped(shared, opts.discovery_period);
    }
    if let Some(Ok(h)) = remote {
        let _ = h.join();
    }
}

/// How long one round of remote discovery listens for other hosts' endpoints.
const REMOTE_WINDOW: Duration = Duration::from_millis(500);

/// Finds topics that have publishers on other hosts but none here, with the schema their
/// processes offer (checked against the announced layout hash), and hands them to the
/// discovery loop. The context's network plane then carries their samples to the
/// recorder's subscribers like any remote subscriber's.
fn remote_discovery_loop(
    ctx: &Context,
    shared: &Shared,
    opts: &RecordOptions,
    seen: &Mutex<HashSet<String>>,
    found: &Sender<Topic>,
) {
    while !shared.stop.load(Ordering::Relaxed) {
        let entities = match nerve::net::remote_entities(ctx.config(), REMOTE_WINDOW) {
            Ok(e) => e,
            Err(e) => {
                shared.warn(format!("remote discovery failed: {e}"));
                sleep_unless_stopped(shared, opts.discovery_period.max(Duration::from_secs(1)));
                continue;
            }
        };
        for e in entities {
            if e.kind != nerve::net::EntityKind::Publisher
                || !opts.selection.matches(&e.name)
                || seen.lock().expect("poisoned").contains(&e.name)
            {
                continue;
            }
            let schema = match nerve::net::remote_schema(ctx.config(), e.type_hash, REMOTE_WINDOW) {
                Ok(Some(s)) if s.name == e.type_name => Ok(s),
                Ok(Some(s)) => Err(format!(
                    "its publishers announce {} but offer the schema of {}",
                    e.type_name, s.name
                )),
                Ok(None) => continue, // not offered (yet): next round
                Err(err) => Err(format!("its schema could not be asked for: {err}")),
            };
            if !seen.lock().expect("poisoned").insert(e.name.clone()) {
                continue;
            }
            if found
                .send(describe(
                    e.name.clone(),
                    e.type_name.clone(),
                    schema,
                    opts.schemas,
                ))
                .is_err()
            {
                return;
            }
        }
        sleep_unless_stopped(shared, opts.discovery_period);
    }
}

/// The recorder's node name.
const NODE: &str = "nerve_bag_recorder";

/// A topic to record, described from its type and schema (or skipped, with why).
fn describe(
    name: String,
    type_name: String,
    schema: Result<Schema, String>,
    schemas: Schemas,
) -> Topic {
    let encoding = schema.and_then(|s| {
        Encoding::for_schema_in(&s, schemas)
            .map(|e| (s, e))
            .map_err(|e| e.to_string())
    });
    match encoding {
        Ok((schema, enc)) => Topic {
            name,
            type_name,
            schema_name: enc.schema_name.clone(),
            schema: Some(schema),
            encoding: Some(enc),
            counters: Counters::default(),
            skipped: None,
            spare: bounded(8),
        },
        Err(why) => Topic {
            name,
            type_name,
            schema_name: String::new(),
            schema: None,
            encoding: None,
            counters: Counters::default(),
            skipped: Some(why),
            spare: bounded(1),
        },
    }
}

fn sleep_unless_stopped(shared: &Shared, d: Duration) {
    let end = Instant::now() + d;
    while !shared.stop.load(Ordering::Relaxed) {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}

fn receive_loop(
    ctx: &Context,
    topic: &Arc<Topic>,
    shared: &Shared,
    opts: &RecordOptions,
    tx: &Sender<Item>,
) {
    let (Some(enc), Some(schema)) = (topic.encoding.as_ref(), topic.schema.as_ref()) else {
        return;
    };
    let qos = Qos::sensor().depth(opts.depth);
    let sub = ctx
        .node(NODE)
        .create()
        .map_err(|e| e.to_string())
        .and_then(|n| {
            RawSubscriber::with_schema(&n, &topic.name, schema, qos).map_err(|e| e.to_string())
        });
    let mut sub = match sub {
        Ok(s) => s,
        Err(e) => {
            shared.warn(format!("{}: cannot subscribe: {e}", topic.name));
            return;
        }
    };
    sub.set_wait_mode(nerve::WaitMode::Block);
    let c = &topic.counters;
    let mut lost_seen = 0;
    loop {
        let stopping = shared.stop.load(Ordering::Relaxed);
        let sample = match sub.recv_timeout(if stopping { Duration::ZERO } else { STOP_CHECK }) {
            Ok(Some(s)) => s,
            Ok(None) if stopping => break,
            Ok(None) => continue,
            Err(_) if stopping => break,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        // the context's one clock (simulation time included, see nerve::time)
        let log_time = ctx.clock().now_ns().max(0) as u64;
        c.received.fetch_add(1, Ordering::Relaxed);
        let lost = sub.stats().lost;
        if lost > lost_seen {
            c.lost.fetch_add(lost - lost_seen, Ordering::Relaxed);
            lost_seen = lost;
        }
        let h = *sample.header();
        // a ROS 2 message keeps its source's stamp as the publish time, as rosbag2 writes
        let publish_time = enc
            .source_stamp(sample.bytes())
            .unwrap_or(h.publish_wall_ns.max(0) as u64);
        let mut data = topic.spare.1.try_recv().unwrap_or_default();
        if let Err(e) = enc.encode(sample.bytes(), &mut data) {
            if c.failed.fetch_add(1, Ordering::Relaxed) == 0 {
                shared.warn(format!("{}: {e}", topic.name));
            }
            continue;
        }
        drop(sample);
        let len = data.len();
        if !reserve(shared, opts, len) {
            c.dropped.fetch_add(1, Ordering::Relaxed);
            let _ = topic.spare.0.try_send(data);
            continue;
        }
        let item = Item {
            topic: topic.clone(),
            seq: h.seq as u32,
            log_time,
            publish_time,
            data,
        };
        if tx.send(item).is_err() {
            // the writer is gone (it failed): nothing more can be written
            shared.queued.fetch_sub(len, Ordering::Relaxed);
            c.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Takes room for `len` bytes in the writer queue: at once, after waiting (back-pressure),
/// or not at all (the sample is dropped). A sample larger than the whole queue is let
/// through when the queue is empty.
fn reserve(shared: &Shared, opts: &RecordOptions, len: usize) -> bool {
    loop {
        let q = shared.queued.load(Ordering::Relaxed);
        if q == 0 || q + len <= opts.queue_bytes {
            shared.queued.fetch_add(len, Ordering::Relaxed);
            return true;
        }
        let writer_failed = shared.error.lock().expect("poisoned").is_some();
        if !opts.backpressure || writer_failed {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The file under the MCAP writer, counting the bytes that reach it (the writer's
/// position: it seeks only back over a chunk's header it just wrote, and forward again).
struct Counted {
    inner: BufWriter<File>,
    /// Read and written by the writer thread only (an atomic so the file is `Send`):
    /// relaxed orderings publish nothing.
    pos: Arc<AtomicU64>,
}

impl std::io::Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.pos.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl std::io::Seek for Counted {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let at = self.inner.seek(to)?;
        self.pos.store(at, Ordering::Relaxed);
        Ok(at)
    }
}

/// One MCAP file being written.
struct BagFile {
    path: PathBuf,
    writer: mcap::Writer<Counted>,
    /// Bytes handed to the file so far (chunks are written whole, compressed).
    on_disk: Arc<AtomicU64>,
    /// What `on_disk` was when the last message was written, and the message bytes
    /// written since (in the open chunk, before compression).
    seen_on_disk: u64,
    pending: u64,
    /// MCAP channel id of each topic in this file.
    channels: BTreeMap<String, u16>,
    opened: Instant,
}

impl BagFile {
    fn create(opts: &RecordOptions, index: usize) -> Result<BagFile, BagError> {
        let path = file_path(opts, index);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| BagError::io(dir, e))?;
        }
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .create_new(!opts.overwrite)
            .open(&path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => BagError::Options(format!(
                    "{} exists already: choose another output or allow overwriting it",
                    path.display()
                )),
                _ => BagError::io(&path, e),
            })?;
        let on_disk = Arc::new(AtomicU64::new(0));
        let counted = Counted {
            inner: BufWriter::with_capacity(1 << 20, f),
            pos: on_disk.clone(),
        };
        let writer = mcap::WriteOptions::new()
            .compression(opts.compression.mcap())
            .compression_level(1)
            .chunk_size(Some(opts.chunk_size))
            .profile("ros2")
            .library(concat!("nerve-bag ", env!("CARGO_PKG_VERSION")))
            .create(counted)
            .map_err(|e| BagError::mcap(&path, e))?;
        Ok(BagFile {
            path,
            writer,
            on_disk,
            seen_on_disk: 0,
            pending: 0,
            channels: BTreeMap::new(),
            opened: Instant::now(),
        })
    }

    /// Declares every topic known so far, so each file of a split recording lists them.
    fn add_known(&mut self, shared: &Shared) -> Result<(), BagError> {
        let topics: Vec<_> = shared.topics.lock().expect("poisoned").clone();
        for t in topics.iter().filter(|t| t.skipped.is_none()) {
            self.channel(t)?;
        }
        Ok(())
    }

    fn channel(&mut self, t: &Topic) -> Result<u16, BagError> {
        if let Some(&id) = self.channels.get(&t.name) {
            return Ok(id);
        }
        let enc = t.encoding.as_ref().ok_or_else(|| BagError::Topic {
            topic: t.name.clone(),
            reason: "it is not recorded (no encoding)".into(),
        })?;
        let id = crate::write::add_channel(
            &mut self.writer,
            &self.path,
            &t.name,
            &t.type_name,
            t.schema.as_ref(),
            enc,
        )?;
        self.channels.insert(t.name.clone(), id);
        Ok(id)
    }

    /// The file's size once its open chunk is written: the bytes on disk plus the
    /// messages of the open chunk (uncompressed, so an estimate from above).
    fn size(&self) -> u64 {
        self.on_disk.load(Ordering::Relaxed) + self.pending
    }

    /// Counts a message of `len` bytes (record overhead included) into [`Self::size`].
    fn wrote(&mut self, len: u64) {
        let disk = self.on_disk.load(Ordering::Relaxed);
        if disk != self.seen_on_disk {
            // a chunk went to the file: what was pending is in `on_disk` now
            (self.seen_on_disk, self.pending) = (disk, 0);
        }
        self.pending += len;
    }

    fn close(mut self, shared: &Shared) -> Result<(), BagError> {
        let mut md = BTreeMap::new();
        for t in shared.topics.lock().expect("poisoned").iter() {
            let s = t.stats();
            for (k, v) in [
                ("received", s.received),
                ("written", s.written),
                ("dropped", s.dropped),
                ("lost", s.lost),
                ("failed", s.failed),
                ("bytes", s.bytes),
            ] {
                md.insert(format!("{}.{k}", s.topic), v.to_string());
            }
            if let Some(why) = s.skipped {
                md.insert(format!("{}.skipped", s.topic), why);
            }
        }
        self.writer
            .write_metadata(&mcap::records::Metadata {
                name: meta::RECORDING.to_string(),
                metadata: md,
            })
            .map_err(|e| BagError::mcap(&self.path, e))?;
        self.writer
            .finish()
            .map_err(|e| BagError::mcap(&self.path, e))?;
        // a closed bag is on the disk, not only in the page cache
        let file = self
            .writer
            .into_inner()
            .inner
            .into_inner()
            .map_err(|e| BagError::io(&self.path, e.into_error()))?;
        file.sync_all().map_err(|e| BagError::io(&self.path, e))
    }
}

fn file_path(opts: &RecordOptions, index: usize) -> PathBuf {
    if opts.split_size.is_none() && opts.split_duration.is_none() {
        return opts.output.clone();
    }
    let stem = opts
        .output
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "bag".into());
    opts.output.with_file_name(format!("{stem}_{index}.mcap"))
}

/// How often an idle receiver looks at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(20);

/// How long the writer sleeps when it finds the queue empty.
const WRITER_BATCH: Duration = Duration::from_millis(10);

fn writer_loop(shared: &Shared, opts: &RecordOptions, file: BagFile, rx: &Receiver<Item>) {
    if let Err(e) = write_all(shared, opts, file, rx) {
        *shared.error.lock().expect("poisoned") = Some(e);
        // release the receivers: nothing more will be written
        for item in rx.iter() {
            shared.queued.fetch_sub(item.data.len(), Ordering::Relaxed);
            item.topic.counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn write_all(
    shared: &Shared,
    opts: &RecordOptions,
    mut file: BagFile,
    rx: &Receiver<Item>,
) -> Result<(), BagError> {
    let mut index = 0;
    let mut last_flush = Instant::now();
    loop {
        // The writer polls: it drains the queue, then sleeps a batch period. A blocking
        // receive would wake it (and make each receiver pay a futex wake) per sample.
        let item = match rx.try_recv() {
            Ok(i) => Some(i),
            Err(crossbeam_channel::TryRecvError::Empty) => {
                std::thread::sleep(WRITER_BATCH);
                None
            }
            Err(crossbeam_channel::TryRecvError::Disconnected) => break,
        };
        if let Some(item) = item {
            let split = opts.split_size.is_some_and(|s| file.size() >= s)
                || opts
                    .split_duration
                    .is_some_and(|d| file.opened.elapsed() >= d);
            if split {
                file.close(shared)?;
                index += 1;
                file = BagFile::create(opts, index)?;
                shared
                    .files
                    .lock()
                    .expect("poisoned")
                    .push(file.path.clone());
                file.add_known(shared)?;
            }
            let channel_id = file.channel(&item.topic)?;
            let header = mcap::records::MessageHeader {
                channel_id,
                sequence: item.seq,
                log_time: item.log_time,
                publish_time: item.publish_time,
            };
            file.writer
                .write_to_known_channel(&header, &item.data)
                .map_err(|e| BagError::mcap(&file.path, e))?;
            let len = item.data.len();
            // record overhead: opcode, length, header
            file.wrote(len as u64 + 31);
            shared
                .written_bytes
                .fetch_add(len as u64 + 31, Ordering::Relaxed);
            shared.queued.fetch_sub(len, Ordering::Relaxed);
            let c = &item.topic.counters;
            c.written.fetch_add(1, Ordering::Relaxed);
            c.bytes.fetch_add(len as u64, Ordering::Relaxed);
            let _ = item.topic.spare.0.try_send(item.data);
        }
        if last_flush.elapsed() >= opts.flush_period {
            file.writer
                .flush()
                .map_err(|e| BagError::mcap(&file.path, e))?;
            last_flush = Instant::now();
        }
    }
    file.close(shared)
}
