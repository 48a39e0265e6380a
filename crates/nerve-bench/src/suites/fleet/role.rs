//! The processes of a fleet host: a `driver` that publishes the host's topics and a
//! `planner` that subscribes to what the host uses, over Nerve or raw Zenoh
//! (`nerve bench role fleet-host <spec>`).
//!
//! Topics of host `i` (robot or base station):
//! - `/fleet/h<i>/s<k>`, `k < local_topics`: sensor data between the host's own driver and
//!   planner (drop-oldest QoS; shared memory in Nerve);
//! - `/fleet/pose`: every driver publishes, every planner subscribes (all to all);
//! - `/fleet/status`: every robot's driver publishes, the base station's planner
//!   subscribes (the fan-in the capacity rows load);
//! - `/fleet/cmd`: the base station's driver publishes, every planner subscribes.
//!
//! pose, status and cmd are reliable. A sample's tag (Nerve) or first word (Zenoh) is its
//! publisher's host; its sequence number and monotonic send time are the header's (Nerve)
//! or the next two words (Zenoh). Both sides run on one kernel, so the monotonic clock is
//! shared by every simulated host.
//!
//! The planner prints `seen <topic> <host> <mono_ns>` when a publisher's first sample
//! arrives and again after a silence of `silence_ms` (discovery, join, partition heal,
//! rejoin), and on `report` one JSON line of what it received since the last `report`.
//! The driver takes `quiet`, `talk`, `load <hz> <bytes>` and `report` (one line
//! `sent {…}`: samples sent per topic, and Nerve's subscriber count per topic) on stdin. End of stdin ends either.

use crate::harness::child::say;
use crate::harness::machine::mono_ns;
use crate::harness::stats::{Dist, Recorder};
use crate::harness::PeerError;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::BufRead;
use std::sync::mpsc;
use std::time::Duration;

/// Which middleware a fleet process uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FleetSystem {
    /// Nerve with its network plane on.
    Nerve,
    /// Raw Zenoh publishers and subscribers with the same Zenoh configuration.
    Zenoh,
}

impl FleetSystem {
    /// Its id in reports.
    pub fn id(self) -> &'static str {
        match self {
            FleetSystem::Nerve => "nerve",
            FleetSystem::Zenoh => "zenoh",
        }
    }
}

/// Which of a host's processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Part {
    /// Publishes the host's topics.
    Driver,
    /// Subscribes to what the host uses.
    Planner,
}

/// What a fleet process is (its JSON spec).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HostSpec {
    /// Middleware.
    pub system: FleetSystem,
    /// Which process.
    pub part: Part,
    /// Nerve domain (Zenoh key prefix for raw Zenoh).
    pub domain: u32,
    /// This host's index.
    pub host: u32,
    /// The base station's index.
    pub base: u32,
    /// Sensor topics between the host's own processes.
    pub local_topics: u32,
    /// Rate of every topic, Hz (status changes with `load`).
    pub rate_hz: f64,
    /// Payload bytes of every sample (status changes with `load`).
    pub payload: usize,
    /// Silence after which a publisher's next sample is reported as `seen` again, ms.
    pub silence_ms: u64,
}

/// Topic kinds, in the order of [`Track`] keys.
const POSE: u32 = u32::MAX;
const STATUS: u32 = u32::MAX - 1;
const CMD: u32 = u32::MAX - 2;

fn kind_name(kind: u32) -> String {
    match kind {
        POSE => "pose".into(),
        STATUS => "status".into(),
        CMD => "cmd".into(),
        k => format!("s{k}"),
    }
}

fn topic_name(kind: u32, host: u32) -> String {
    match kind {
        POSE => "/fleet/pose".into(),
        STATUS => "/fleet/status".into(),
        CMD => "/fleet/cmd".into(),
        k => format!("/fleet/h{host}/s{k}"),
    }
}

fn zenoh_key(domain: u32, kind: u32, host: u32) -> String {
    format!("fleet{domain}{}", topic_name(kind, host))
}

/// Most publishing hosts a planner tracks per topic (bounds its map).
const MAX_HOSTS: u32 = 1024;

/// One publisher (topic kind, host) as a planner sees it.
#[derive(Default)]
struct Track {
    next_seq: u64,
    last_ns: u64,
}

/// What a planner received since its last report.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct Report {
    /// Samples per topic kind (`pose`, `status`, `cmd`, `s<k>`).
    pub received: HashMap<String, u64>,
    /// Samples missing from publishers' sequences (counted by this process).
    pub gaps: u64,
    /// Samples Nerve counted as lost (its subscribers' stats; raw Zenoh: none kept).
    pub nerve_lost: Option<u64>,
    /// Latency of `status` samples, µs.
    pub status_latency: Dist,
    /// Latency of `pose` samples, µs.
    pub pose_latency: Dist,
    /// Window, s.
    pub seconds: f64,
}

/// The planner's bookkeeping.
struct Books {
    silence_ns: u64,
    tracks: HashMap<(u32, u32), Track>,
    report: Report,
    status: Recorder,
    pose: Recorder,
    since: u64,
}

impl Books {
    fn new(silence_ms: u64) -> Books {
        Books {
            silence_ns: silence_ms * 1_000_000,
            tracks: HashMap::new(),
            report: Report::default(),
            status: Recorder::new(),
            pose: Recorder::new(),
            since: mono_ns(),
        }
    }

    /// One sample of `kind` from `host`: sequence `seq` (from 1), sent at `sent_ns`.
    fn arrived(&mut self, kind: u32, host: u32, seq: u64, sent_ns: u64) {
        if host >= MAX_HOSTS {
            return;
        }
        let now = mono_ns();
        let t = self.tracks.entry((kind, host)).or_default();
        if t.last_ns == 0 || now.saturating_sub(t.last_ns) >= self.silence_ns {
            say(&format!("seen {} {host} {now}", kind_name(kind)));
        }
        if t.next_seq != 0 && seq > t.next_seq {
            self.report.gaps += seq - t.next_seq;
        }
        t.next_seq = t.next_seq.max(seq + 1);
        t.last_ns = now;
        *self.report.received.entry(kind_name(kind)).or_default() += 1;
        let lat = now.saturating_sub(sent_ns);
        match kind {
            STATUS => self.status.record_ns(lat),
            POSE => self.pose.record_ns(lat),
            _ => {}
        }
    }

    fn report(&mut self, nerve_lost: Option<u64>) {
        let now = mono_ns();
        let mut r = std::mem::take(&mut self.report);
        r.nerve_lost = nerve_lost;
        r.status_latency = self.status.dist();
        r.pose_latency = self.pose.dist();
        r.seconds = now.saturating_sub(self.since) as f64 / 1e9;
        self.status = Recorder::new();
        self.pose = Recorder::new();
        self.since = now;
        say(&format!(
            "report {}",
            serde_json::to_string(&r).unwrap_or_default()
        ));
    }
}

/// Commands from stdin.
enum Command {
    Quiet,
    Talk,
    Load(f64, usize),
    Report,
    End,
}

/// Reads commands from stdin on a thread; `wake` runs after each.
fn commands(wake: impl Fn() + Send + 'static) -> mpsc::Receiver<Command> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            let words: Vec<&str> = line.split_whitespace().collect();
            let cmd = match words.as_slice() {
                ["quiet"] => Command::Quiet,
                ["talk"] => Command::Talk,
                ["report"] => Command::Report,
                ["load", hz, bytes] => match (hz.parse(), bytes.parse()) {
                    (Ok(h), Ok(b)) => Command::Load(h, b),
                    _ => continue,
                },
                _ => continue,
            };
            if tx.send(cmd).is_err() {
                return;
            }
            wake();
        }
        let _ = tx.send(Command::End);
        wake();
    });
    rx
}

/// The topics a driver publishes: (kind, rate Hz, bytes).
fn driver_topics(spec: &HostSpec) -> Vec<u32> {
    let mut kinds: Vec<u32> = (0..spec.local_topics).collect();
    kinds.push(POSE);
    if spec.host == spec.base {
        kinds.push(CMD);
    } else {
        kinds.push(STATUS);
    }
    kinds
}

/// The topics a planner subscribes to.
fn planner_topics(spec: &HostSpec) -> Vec<u32> {
    let mut kinds: Vec<u32> = (0..spec.local_topics).collect();
    kinds.extend([POSE, CMD]);
    if spec.host == spec.base {
        kinds.push(STATUS);
    }
    kinds
}

fn reliable(kind: u32) -> bool {
    kind >= CMD
}

/// Runs the driver loop: `send(kind, bytes)` publishes one sample; status follows `load`.
fn drive(
    spec: &HostSpec,
    rx: mpsc::Receiver<Command>,
    mut send: impl FnMut(u32, usize) -> Result<(), PeerError>,
    subscribers: impl Fn(u32) -> Option<usize>,
) -> Result<(), PeerError> {
    let kinds = driver_topics(spec);
    let period = |hz: f64| (1e9 / hz.max(0.1)) as u64;
    let (mut base_ns, mut status_ns, mut status_bytes) =
        (period(spec.rate_hz), period(spec.rate_hz), spec.payload);
    let mut talking = true;
    let mut next_base = mono_ns();
    let mut next_status = next_base;
    let mut sent: HashMap<String, u64> = HashMap::new();
    // a failed publish (back-pressure timing out while a link is down) is counted under
    // `<topic> failed`, as an application would log it and go on
    let mut send = |sent: &mut HashMap<String, u64>, k: u32, bytes: usize| {
        let key = match send(k, bytes) {
            Ok(()) => kind_name(k),
            Err(_) => format!("{} failed", kind_name(k)),
        };
        *sent.entry(key).or_default() += 1;
        Ok::<(), PeerError>(())
    };
    say("ready");
    loop {
        let cmd = if talking {
            let now = mono_ns();
            let wake = next_base.min(next_status);
            if wake > now {
                rx.recv_timeout(Duration::from_nanos(wake - now)).ok()
            } else {
                rx.try_recv().ok()
            }
        } else {
            Some(rx.recv().unwrap_or(Command::End))
        };
        match cmd {
            Some(Command::End) => return Ok(()),
            Some(Command::Quiet) => talking = false,
            Some(Command::Talk) => {
                talking = true;
                (next_base, next_status) = (mono_ns(), mono_ns());
            }
            Some(Command::Load(hz, bytes)) => {
                (status_ns, status_bytes) = (period(hz), bytes);
                base_ns = period(spec.rate_hz);
                next_status = mono_ns();
            }
            Some(Command::Report) => {
                let subs: HashMap<String, usize> = kinds
                    .iter()
                    .filter_map(|&k| subscribers(k).map(|n| (kind_name(k), n)))
                    .collect();
                say(&format!(
                    "sent {}",
                    serde_json::json!({ "sent": sent, "subscribers": subs })
                ))
            }
            None => {}
        }
        if !talking {
            continue;
        }
        let now = mono_ns();
        if now >= next_base {
            for &k in kinds.iter().filter(|&&k| k != STATUS) {
                send(&mut sent, k, spec.payload)?;
            }
            next_base = (next_base + base_ns).max(now);
        }
        if now >= next_status && kinds.contains(&STATUS) {
            send(&mut sent, STATUS, status_bytes)?;
            next_status = (next_status + status_ns).max(now);
        }
    }
}

/// Runs one fleet process.
pub fn run(spec: &HostSpec) -> Result<(), PeerError> {
    match spec.system {
        FleetSystem::Nerve => nerve_side::run(spec),
        FleetSystem::Zenoh => zenoh_side::run(spec),
    }
}

mod nerve_side {
    use super::*;
    use nerve::{Context, Qos, WaitSet, WaitSetWaker};
    use nerve_msgs::srv::Bytes;
    use std::sync::Arc;

    fn setup(e: impl std::fmt::Display) -> PeerError {
        PeerError::setup("nerve fleet host", e)
    }

    fn qos(kind: u32, payload: usize) -> Qos {
        let q = if reliable(kind) {
            Qos::reliable()
        } else {
            Qos::sensor()
        };
        Qos {
            initial_payload: payload.max(64) + 64,
            ..q
        }
    }

    pub(super) fn run(spec: &HostSpec) -> Result<(), PeerError> {
        let cfg = nerve::Config::from_env()
            .and_then(|c| c.domain(spec.domain))
            .map_err(setup)?;
        let ctx = Context::new(cfg).map_err(setup)?;
        let name = match spec.part {
            Part::Driver => format!("driver_{}", spec.host),
            Part::Planner => format!("planner_{}", spec.host),
        };
        let node = ctx.node(&name).create().map_err(setup)?;
        match spec.part {
            Part::Driver => {
                let mut pubs = HashMap::new();
                for k in driver_topics(spec) {
                    let p = node
                        .publisher::<Bytes>(&topic_name(k, spec.host))
                        .qos(qos(k, spec.payload))
                        .create()
                        .map_err(setup)?;
                    pubs.insert(k, p);
                }
                let rx = commands(|| {});
                let host = spec.host as u64;
                drive(spec, rx, |k, bytes| {
                    let p = &pubs[&k];
                    let call = |e: String| PeerError::call("nerve fleet host", e);
                    let mut loan = p.loan_slice(bytes).map_err(|e| call(e.to_string()))?;
                    loan.tag = host;
                    loan.send().map_err(|e| call(e.to_string()))
                }, |k| pubs.get(&k).map(|p| p.subscriber_count()))
            }
            Part::Planner => {
                let kinds = planner_topics(spec);
                let mut subs = Vec::new();
                for &k in &kinds {
                    let s = node
                        .subscriber::<Bytes>(&topic_name(k, spec.host))
                        .qos(qos(k, spec.payload))
                        .create()
                        .map_err(setup)?;
                    subs.push((k, s));
                }
                let waker = Arc::new(WaitSetWaker::new());
                let w = waker.clone();
                let rx = commands(move || w.wake());
                let mut set = WaitSet::new();
                for (_, s) in &subs {
                    set.add(s).map_err(setup)?;
                }
                set.wake_on(&waker).map_err(setup)?;
                let mut books = Books::new(spec.silence_ms);
                say("ready");
                loop {
                    set.wait(Duration::from_secs(5)).map_err(setup)?;
                    for (k, s) in &subs {
                        while let Some(m) = s.try_recv().map_err(setup)? {
                            let h = m.header();
                            books.arrived(*k, m.tag as u32, h.seq, h.publish_mono_ns);
                        }
                    }
                    while let Ok(cmd) = rx.try_recv() {
                        match cmd {
                            Command::End => return Ok(()),
                            Command::Report => {
                                let lost = subs.iter().map(|(_, s)| s.stats().lost).sum();
                                books.report(Some(lost));
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
    }
}

mod zenoh_side {
    use super::*;
    use zenoh::qos::CongestionControl;
    use zenoh::Wait;

    fn setup(e: impl std::fmt::Display) -> PeerError {
        PeerError::setup("zenoh fleet host", e)
    }

    fn session() -> Result<zenoh::Session, PeerError> {
        let mut cfg = match std::env::var_os("NERVE_ZENOH_CONFIG") {
            Some(p) => zenoh::Config::from_file(p).map_err(setup)?,
            None => zenoh::Config::default(),
        };
        cfg.insert_json5("transport/shared_memory/enabled", "false")
            .map_err(setup)?;
        zenoh::open(cfg).wait().map_err(setup)
    }

    pub(super) fn run(spec: &HostSpec) -> Result<(), PeerError> {
        let session = session()?;
        match spec.part {
            Part::Driver => {
                let mut pubs = HashMap::new();
                for k in driver_topics(spec) {
                    let cc = if reliable(k) {
                        CongestionControl::Block
                    } else {
                        CongestionControl::Drop
                    };
                    let p = session
                        .declare_publisher(zenoh_key(spec.domain, k, spec.host))
                        .congestion_control(cc)
                        .wait()
                        .map_err(setup)?;
                    pubs.insert(k, (p, 0u64));
                }
                let rx = commands(|| {});
                let host = spec.host as u64;
                drive(spec, rx, |k, bytes| {
                    let Some((p, seq)) = pubs.get_mut(&k) else {
                        return Ok(());
                    };
                    *seq += 1;
                    let mut buf = vec![0u8; bytes.max(24)];
                    buf[..8].copy_from_slice(&host.to_le_bytes());
                    buf[8..16].copy_from_slice(&seq.to_le_bytes());
                    buf[16..24].copy_from_slice(&mono_ns().to_le_bytes());
                    p.put(buf)
                        .wait()
                        .map_err(|e| PeerError::call("zenoh fleet host", e))
                }, |_| None)
            }
            Part::Planner => {
                let (tx, rx) = mpsc::sync_channel::<(u32, u32, u64, u64)>(65_536);
                let mut subs = Vec::new();
                for k in planner_topics(spec) {
                    let tx = tx.clone();
                    let s = session
                        .declare_subscriber(zenoh_key(spec.domain, k, spec.host))
                        .callback(move |sample| {
                            let b = sample.payload().to_bytes();
                            if b.len() < 24 {
                                return;
                            }
                            let word = |i: usize| {
                                u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]))
                            };
                            let _ = tx.try_send((k, word(0) as u32, word(1), word(2)));
                        })
                        .wait()
                        .map_err(setup)?;
                    subs.push(s);
                }
                // commands arrive as a sample of kind 0 from an impossible host
                let cmd_tx = tx.clone();
                let cmds = commands(move || {
                    let _ = cmd_tx.try_send((0, u32::MAX, 0, 0));
                });
                let mut books = Books::new(spec.silence_ms);
                say("ready");
                loop {
                    let Ok((k, host, seq, sent)) = rx.recv() else {
                        return Ok(());
                    };
                    if host != u32::MAX {
                        books.arrived(k, host, seq, sent);
                        continue;
                    }
                    while let Ok(cmd) = cmds.try_recv() {
                        match cmd {
                            Command::End => {
                                drop(subs);
                                return Ok(());
                            }
                            Command::Report => books.report(None),
                            _ => {}
                        }
                    }
                }
            }
        }
    }
}
