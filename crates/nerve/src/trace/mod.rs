//! Per-hop tracing: where the time goes between a sensor and the application.
//!
//! With tracing on (`NERVE_TRACE=<dir>` in the environment, or [`enable`]), every
//! process records two events per sample in `<dir>/<pid>.ntr`:
//! - *publish*: topic, publisher, sequence number, publish time, and the *cause*: the
//!   sample this thread took last (a pipeline stage publishes its output on the thread
//!   that took its input, so the output carries its origin forward);
//! - *take*: topic, publisher, sequence number, the publish time the sample carries, when
//!   the subscriber asked for a sample (`ready`) and when it got this one.
//!
//! [`analyze`] joins the events of every process into hops and chains (see
//! [`analysis`]). Times are the host's monotonic clock, so a trace spans the threads and
//! processes of one host; across hosts the clocks are not comparable (see the design
//! notes).
//!
//! Off (the default), each publish and take costs one relaxed atomic load.

pub mod analysis;

pub use analysis::{analyze, Chain, Report, Segment, SegmentKind, Stats};

use crate::message::header::SampleHeader;
use crate::sys::clock::mono_ns;
use std::cell::Cell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

/// Bytes of one event record.
pub const RECORD: usize = 128;
/// Longest topic name kept in a record (longer ones are cut).
pub const TOPIC_BYTES: usize = 56;
/// Largest trace file one process writes (later events are counted, not written).
pub const MAX_FILE_BYTES: u64 = 512 << 20;
/// The environment variable naming the trace directory.
pub const ENV: &str = "NERVE_TRACE";

/// What an event records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A sample was published.
    Publish,
    /// A subscriber took a sample.
    Take,
}

/// One event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Publish or take.
    pub kind: Kind,
    /// The topic.
    pub topic: String,
    /// The sample's publisher.
    pub publisher_id: u64,
    /// The sample's sequence number.
    pub seq: u64,
    /// When it was published (monotonic ns).
    pub published_ns: u64,
    /// Take: when the subscriber asked for a sample; publish: 0.
    pub ready_ns: u64,
    /// Take: when it got this one; publish: the publish time.
    pub at_ns: u64,
    /// Publish: the sample this thread took last (publisher, sequence), if any.
    pub cause: Option<(u64, u64)>,
    /// Process.
    pub pid: u32,
    /// Thread.
    pub tid: u32,
}

impl Event {
    fn encode(&self) -> [u8; RECORD] {
        let mut b = [0u8; RECORD];
        b[0] = match self.kind {
            Kind::Publish => 1,
            Kind::Take => 2,
        };
        b[1] = u8::from(self.cause.is_some());
        let (cp, cs) = self.cause.unwrap_or((0, 0));
        for (i, v) in [
            self.publisher_id,
            self.seq,
            self.published_ns,
            self.ready_ns,
            self.at_ns,
            cp,
            cs,
        ]
        .into_iter()
        .enumerate()
        {
            b[8 + i * 8..16 + i * 8].copy_from_slice(&v.to_le_bytes());
        }
        b[64..68].copy_from_slice(&self.pid.to_le_bytes());
        b[68..72].copy_from_slice(&self.tid.to_le_bytes());
        let t = self.topic.as_bytes();
        let n = t.len().min(TOPIC_BYTES);
        b[72..72 + n].copy_from_slice(&t[..n]);
        b
    }

    fn decode(b: &[u8]) -> Result<Event, String> {
        let kind = match b[0] {
            1 => Kind::Publish,
            2 => Kind::Take,
            k => return Err(format!("unknown event kind {k}")),
        };
        let u = |i: usize| u64::from_le_bytes(b[8 + i * 8..16 + i * 8].try_into().expect("8"));
        let end = b[72..].iter().position(|&c| c == 0).unwrap_or(TOPIC_BYTES);
        let topic = std::str::from_utf8(&b[72..72 + end])
            .map_err(|_| "topic is not UTF-8".to_string())?
            .to_string();
        Ok(Event {
            kind,
            topic,
            publisher_id: u(0),
            seq: u(1),
            published_ns: u(2),
            ready_ns: u(3),
            at_ns: u(4),
            cause: (b[1] == 1).then(|| (u(5), u(6))),
            pid: u32::from_le_bytes(b[64..68].try_into().expect("4")),
            tid: u32::from_le_bytes(b[68..72].try_into().expect("4")),
        })
    }
}

struct Tracer {
    out: BufWriter<File>,
    written: u64,
    /// Events not written: the file reached [`MAX_FILE_BYTES`], or a write failed.
    dropped: u64,
}

// SYNC: 0 = not decided, 1 = off, 2 = on. Written once after TRACER is set (the
// OnceLock publishes the tracer itself); a thread that reads 0 decides through the
// OnceLock, so relaxed loads suffice.
static STATE: AtomicU8 = AtomicU8::new(0);
static TRACER: OnceLock<Option<Mutex<Tracer>>> = OnceLock::new();

thread_local! {
    /// (publisher, seq) of the sample this thread took last.
    static LAST_TAKEN: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
    /// When this thread last asked a subscriber for a sample.
    static READY: Cell<u64> = const { Cell::new(0) };
    /// Inside a blocking receive (its polls are not new asks).
    static WAITING: Cell<bool> = const { Cell::new(false) };
}

fn open(dir: &Path) -> Option<Mutex<Tracer>> {
    std::fs::create_dir_all(dir).ok()?;
    let path: PathBuf = dir.join(format!("{}.ntr", std::process::id()));
    let f = File::create(path).ok()?;
    Some(Mutex::new(Tracer {
        out: BufWriter::with_capacity(1 << 16, f),
        written: 0,
        dropped: 0,
    }))
}

fn tracer() -> Option<&'static Mutex<Tracer>> {
    let t = TRACER.get_or_init(|| {
        let dir = std::env::var_os(ENV).filter(|d| !d.is_empty())?;
        open(Path::new(&dir))
    });
    STATE.store(if t.is_some() { 2 } else { 1 }, Ordering::Relaxed);
    t.as_ref()
}

/// Turns tracing on for this process, writing to `dir` (before any endpoint is used;
/// `NERVE_TRACE` does the same from the environment). Fails if tracing was already
/// decided (on or off) or the file cannot be created.
pub fn enable(dir: &Path) -> std::io::Result<()> {
    let mut made = false;
    TRACER.get_or_init(|| {
        made = true;
        open(dir)
    });
    let on = TRACER.get().is_some_and(|t| t.is_some());
    STATE.store(if on { 2 } else { 1 }, Ordering::Relaxed);
    if !made {
        return Err(std::io::Error::other(
            "tracing was already decided for this process",
        ));
    }
    if !on {
        return Err(std::io::Error::other(format!(
            "cannot create a trace file in {}",
            dir.display()
        )));
    }
    Ok(())
}

/// Whether this process traces.
#[inline]
pub fn enabled() -> bool {
    match STATE.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => tracer().is_some(),
    }
}

/// Writes buffered events to the file (also done when the buffer fills and when a
/// context is dropped).
pub fn flush() {
    if let Some(t) = TRACER.get().and_then(|t| t.as_ref()) {
        if let Ok(mut t) = t.lock() {
            let _ = t.out.flush();
        }
    }
}

/// Events this process could not write (file full or failing).
pub fn dropped() -> u64 {
    TRACER
        .get()
        .and_then(|t| t.as_ref())
        .and_then(|t| t.lock().ok().map(|t| t.dropped))
        .unwrap_or(0)
}

fn tid() -> u32 {
    rustix::thread::gettid().as_raw_nonzero().get() as u32
}

fn write(e: &Event) {
    let Some(t) = tracer() else {
        return;
    };
    let Ok(mut t) = t.lock() else {
        return;
    };
    if t.written + RECORD as u64 > MAX_FILE_BYTES || t.out.write_all(&e.encode()).is_err() {
        t.dropped += 1;
        return;
    }
    t.written += RECORD as u64;
}

/// A subscriber of this thread starts asking for a sample.
#[inline]
pub(crate) fn asking(blocking: bool) {
    if !enabled() {
        return;
    }
    if blocking {
        WAITING.with(|w| w.set(true));
        READY.with(|r| r.set(mono_ns()));
    } else if !WAITING.with(Cell::get) {
        READY.with(|r| r.set(mono_ns()));
    }
}

/// A blocking receive of this thread ended.
#[inline]
pub(crate) fn asked() {
    if enabled() {
        WAITING.with(|w| w.set(false));
    }
}

/// A sample was published on `topic`.
#[inline]
pub(crate) fn published(topic: &str, h: &SampleHeader) {
    if !enabled() {
        return;
    }
    write(&Event {
        kind: Kind::Publish,
        topic: topic.to_string(),
        publisher_id: h.publisher_id,
        seq: h.seq,
        published_ns: h.publish_mono_ns,
        ready_ns: 0,
        at_ns: h.publish_mono_ns,
        cause: LAST_TAKEN.with(Cell::get),
        pid: std::process::id(),
        tid: tid(),
    });
}

/// A subscriber of this thread took a sample of `topic`.
#[inline]
pub(crate) fn taken(topic: &str, h: &SampleHeader) {
    if !enabled() {
        return;
    }
    let now = mono_ns();
    LAST_TAKEN.with(|c| c.set(Some((h.publisher_id, h.seq))));
    let ready = READY.with(Cell::get);
    write(&Event {
        kind: Kind::Take,
        topic: topic.to_string(),
        publisher_id: h.publisher_id,
        seq: h.seq,
        published_ns: h.publish_mono_ns,
        ready_ns: if ready == 0 { now } else { ready },
        at_ns: now,
        cause: None,
        pid: std::process::id(),
        tid: tid(),
    });
}

/// A trace that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The directory or a file cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file is not a trace (size, kind, text).
    #[error("{path}: not a Nerve trace: {reason}")]
    Malformed {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

/// Reads every `*.ntr` file in `dir`. A file cut inside its last record (a process
/// killed while writing) loses that record only.
pub fn read_dir(dir: &Path) -> Result<Vec<Event>, TraceError> {
    let io = |p: &Path, source| TraceError::Io {
        path: p.display().to_string(),
        source,
    };
    let mut events = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ntr"))
        .collect();
    files.sort();
    for f in files {
        let bytes = std::fs::read(&f).map_err(|e| io(&f, e))?;
        for (i, rec) in bytes.chunks_exact(RECORD).enumerate() {
            events.push(Event::decode(rec).map_err(|reason| TraceError::Malformed {
                path: f.display().to_string(),
                reason: format!("record {i}: {reason}"),
            })?);
        }
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let e = Event {
            kind: Kind::Publish,
            topic: "/points".into(),
            publisher_id: 7,
            seq: 9,
            published_ns: 100,
            ready_ns: 0,
            at_ns: 100,
            cause: Some((3, 4)),
            pid: 11,
            tid: 12,
        };
        assert_eq!(Event::decode(&e.encode()).unwrap(), e);
        let mut bad = e.encode();
        bad[0] = 9;
        assert!(Event::decode(&bad).is_err());
    }
}
