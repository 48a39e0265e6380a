//! The processes scenarios start: this binary again, in a hidden role, talking to the
//! scenario by lines on stdout (`ready`, `loaned`, `sending`, `holding`, `ok`, and `done
//! <json>` with what it saw). A role runs until it is killed or its stdin closes.

use nerve::action::{ActionServer, GoalState};
use nerve::prelude::*;
use nerve_msgs::action::Fibonacci;
use nerve_msgs::srv::Bytes;
use nerve_msgs::srv::Echo;
use nerve_msgs::{Imu, PointCloud};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a role is asked to do (one spec for every role; each reads its part).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RoleSpec {
    /// Domain id (filled in by the scenario's domain).
    pub domain: u32,
    /// State directory (filled in likewise).
    pub state_dir: PathBuf,
    /// Node name.
    pub node: String,
    /// Topic of small messages (Imu, the shared-memory ring route), if any.
    pub small: Option<String>,
    /// Topic of large messages (PointCloud, iceoryx2 loans), if any.
    pub large: Option<String>,
    /// Bytes of each large message's data.
    pub large_bytes: usize,
    /// Service (Echo) to serve or call, if any.
    pub service: Option<String>,
    /// Action (Fibonacci) a server also serves, if any: every goal accepted and
    /// answered with its sequence at once.
    pub action: Option<String>,
    /// Back-pressure (reliable) instead of drop-oldest.
    pub reliable: bool,
    /// Back-pressure timeout in ms.
    pub timeout_ms: u64,
    /// Queue depth.
    pub depth: usize,
    /// Messages (or calls) per second; 0: as fast as possible.
    pub rate_hz: f64,
    /// Publisher: loan a large sample and hold it before sending (print `loaned`).
    pub hold_loan: bool,
    /// Subscriber: keep this many large samples (print `holding` once it has them).
    pub hold: usize,
    /// Subscriber: print how this process maps what it reads (`sample <perms> <path>` for
    /// the mapping holding the first large sample, `ring <perms> <path>` for each shared
    /// ring), once the first large sample has come.
    pub show_mappings: bool,
    /// Nodes of a `nodes` role (each with a publisher and a subscriber).
    pub nodes: usize,
    /// This process's number among the `processes` of a `nodes` role.
    pub index: usize,
    /// Processes of a `nodes` role; process `index` listens to process `index + 1`.
    pub processes: usize,
    /// Take the network plane's settings (Zenoh configuration, host name, state
    /// directory) from the environment, as a process on a simulated host does.
    pub network: bool,
}

impl RoleSpec {
    fn qos(&self) -> Qos {
        let q = Qos::sensor().depth(self.depth.max(1));
        if self.reliable {
            q.overflow(Overflow::BackPressure {
                timeout: Duration::from_millis(self.timeout_ms.max(1)),
            })
        } else {
            q
        }
    }
}

/// What a subscriber or client role saw, printed as `done <json>` when its stdin closes.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RoleReport {
    /// Messages received, or calls answered.
    pub received: u64,
    /// Messages its subscribers counted as lost.
    pub lost: u64,
    /// Messages whose content did not match their sequence number (torn).
    pub torn: u64,
    /// Messages dropped as malformed by the subscriber.
    pub malformed: u64,
    /// Publish or call errors, each once with its count.
    pub errors: Vec<(String, u64)>,
    /// Messages sent, or calls made.
    pub sent: u64,
}

impl RoleReport {
    fn error(&mut self, e: impl std::fmt::Display) {
        let text = e.to_string();
        if let Some((_, n)) = self.errors.iter_mut().find(|(t, _)| *t == text) {
            *n += 1;
        } else if self.errors.len() < 16 {
            self.errors.push((text, 1));
        }
    }
}

/// The Imu number `seq`: every 8-byte word is `seq`, so a torn sample shows.
pub fn imu(seq: u64) -> Imu {
    let bytes: Vec<u8> = std::iter::repeat_n(seq.to_ne_bytes(), std::mem::size_of::<Imu>() / 8)
        .flatten()
        .collect();
    nerve::message::read_pod(&bytes).unwrap_or_default()
}

/// Whether a received Imu is whole: every word equals its sequence number.
pub fn imu_whole(m: &Imu, seq: u64) -> bool {
    nerve::message::as_bytes(m) == nerve::message::as_bytes(&imu(seq))
}

/// Whether a received cloud is whole: every data byte is its sequence number's low byte.
pub fn cloud_whole(elems: &[u8], seq: u64) -> bool {
    elems.iter().all(|&b| b == seq as u8)
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Prints the mapping of this process that holds `addr` (`sample <perms> <path>`) and
/// each mapped shared ring (`ring <perms> <path>`), as `/proc/self/maps` shows them.
fn show_mappings(addr: usize) {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(range), Some(perms), Some(path)) = (f.first(), f.get(1), f.get(5)) else {
            continue;
        };
        let (lo, hi) = range.split_once('-').unwrap_or(("0", "0"));
        let (lo, hi) = (
            usize::from_str_radix(lo, 16).unwrap_or(0),
            usize::from_str_radix(hi, 16).unwrap_or(0),
        );
        if (lo..hi).contains(&addr) {
            say(&format!("sample {perms} {path}"));
        } else if path.starts_with("/dev/shm/") && path.contains("ring_") {
            say(&format!("ring {perms} {path}"));
        }
    }
    say("mapped");
}

/// A flag set when stdin closes (the scenario's "stop").
fn stop_on_eof() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        // SYNC: a plain flag; nothing else is published with it.
        flag.store(true, Ordering::Relaxed);
    });
    stop
}

/// Runs `role` with `spec_json` (called by `nerve-stress role <role> <json>`).
pub fn run_role(role: &str, spec_json: &str) -> anyhow::Result<()> {
    let spec: RoleSpec = serde_json::from_str(spec_json)
        .map_err(|e| anyhow::anyhow!("bad spec for role {role}: {e}"))?;
    let cfg = if spec.network {
        nerve::Config::from_env()?.domain(spec.domain)?
    } else {
        nerve::Config::default()
            .domain(spec.domain)?
            .state_dir(spec.state_dir.clone())
    };
    let ctx = Context::new(cfg)?;
    let stop = stop_on_eof();
    match role {
        "publisher" => publisher(&ctx, &spec, &stop),
        "subscriber" => subscriber(&ctx, &spec, &stop),
        "server" => server(&ctx, &spec, &stop),
        "client" => client(&ctx, &spec, &stop),
        "nodes" => nodes(&ctx, &spec, &stop),
        other => anyhow::bail!("unknown role {other:?}"),
    }
}

fn publisher(ctx: &Context, spec: &RoleSpec, stop: &AtomicBool) -> anyhow::Result<()> {
    let node = ctx.node(&spec.node).create()?;
    let small = match &spec.small {
        Some(t) => Some(node.publisher::<Imu>(t).qos(spec.qos()).create()?),
        None => None,
    };
    let large = match &spec.large {
        Some(t) => Some(node.publisher::<PointCloud>(t).qos(spec.qos()).create()?),
        None => None,
    };
    say("ready");
    let _held = match (&large, spec.hold_loan) {
        (Some(p), true) => {
            let loan = p.loan_slice(spec.large_bytes)?;
            say("loaned");
            Some(loan)
        }
        _ => None,
    };
    let start = Instant::now();
    let mut report = RoleReport::default();
    let mut seq = 0u64;
    // SYNC: a plain flag.
    while !stop.load(Ordering::Relaxed) {
        seq += 1;
        if let Some(p) = &small {
            if let Err(e) = p.publish(&imu(seq)) {
                report.error(e);
            }
        }
        if let Some(p) = &large {
            if seq % 16 == 1 {
                // the large publisher's own sequence number: its (seq / 16 + 1)-th send
                let n = seq / 16 + 1;
                match p.loan_slice(spec.large_bytes) {
                    Ok(mut l) => {
                        l.elems_mut().fill(n as u8);
                        if let Err(e) = l.send() {
                            report.error(e);
                        }
                    }
                    Err(e) => report.error(e),
                }
            }
        }
        report.sent += 1;
        if seq == 1 {
            say("sending");
        }
        if spec.rate_hz > 0.0 {
            let due = start + Duration::from_secs_f64(seq as f64 / spec.rate_hz);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
    }
    say(&format!("done {}", serde_json::to_string(&report)?));
    Ok(())
}

fn subscriber(ctx: &Context, spec: &RoleSpec, stop: &AtomicBool) -> anyhow::Result<()> {
    let node = ctx.node(&spec.node).create()?;
    let small = match &spec.small {
        Some(t) => Some(node.subscriber::<Imu>(t).qos(spec.qos()).create()?),
        None => None,
    };
    let large = match &spec.large {
        Some(t) => Some(node.subscriber::<PointCloud>(t).qos(spec.qos()).create()?),
        None => None,
    };
    say("ready");
    let mut report = RoleReport::default();
    let mut held = Vec::new();
    let (mut said_first, mut said_holding, mut shown) = (false, false, false);
    // SYNC: a plain flag.
    while !stop.load(Ordering::Relaxed) {
        let mut got = false;
        if let Some(s) = &small {
            while let Some(m) = s.try_recv()? {
                got = true;
                report.received += 1;
                report.torn += u64::from(!imu_whole(&m, m.header().seq));
            }
        }
        if let Some(s) = &large {
            while let Some(m) = s.try_recv()? {
                got = true;
                report.received += 1;
                report.torn += u64::from(!cloud_whole(m.elems(), m.header().seq));
                if spec.show_mappings && !shown {
                    shown = true;
                    show_mappings(m.elems().as_ptr() as usize);
                }
                if held.len() < spec.hold {
                    held.push(m);
                }
            }
        }
        if got && !said_first {
            said_first = true;
            say("first");
        }
        if spec.hold > 0 && held.len() == spec.hold && !said_holding {
            said_holding = true;
            say("holding");
        }
        if !got {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    for s in small.iter() {
        let st = s.stats();
        (report.lost, report.malformed) = (report.lost + st.lost, report.malformed + st.malformed);
    }
    for s in large.iter() {
        let st = s.stats();
        (report.lost, report.malformed) = (report.lost + st.lost, report.malformed + st.malformed);
    }
    say(&format!("done {}", serde_json::to_string(&report)?));
    Ok(())
}

fn server(ctx: &Context, spec: &RoleSpec, stop: &AtomicBool) -> anyhow::Result<()> {
    let name = spec
        .service
        .clone()
        .ok_or_else(|| anyhow::anyhow!("server: no service"))?;
    let node = ctx.node(&spec.node).create()?;
    let server = node.service::<Echo>(&name).create()?;
    let actions = match &spec.action {
        Some(a) => Some(ActionServer::<Fibonacci>::builder(&node, a).create()?),
        None => None,
    };
    // with an action to serve as well, requests are polled more often
    let wait = Duration::from_millis(if actions.is_some() { 2 } else { 50 });
    say("ready");
    // SYNC: a plain flag.
    while !stop.load(Ordering::Relaxed) {
        if let Some(req) = server.take_timeout(wait)? {
            let mut out = req.loan_reply_slice(req.elems().len())?;
            out.head_mut().tag = req.tag;
            out.elems_mut().copy_from_slice(req.elems());
            out.send()?;
        }
        if let Some(a) = &actions {
            a.handle_pending(|_| Ok(()))?;
            for g in a.goals() {
                let seq = fibonacci(g.goal().order.clamp(0, 90) as usize);
                g.end_with(GoalState::Succeeded, seq.len(), |h, e| {
                    h.len = seq.len() as u64;
                    e.copy_from_slice(&seq);
                })?;
            }
        }
    }
    Ok(())
}

/// The first `order + 1` Fibonacci numbers (0, 1, 1, 2, …).
pub fn fibonacci(order: usize) -> Vec<i64> {
    let mut seq = vec![0i64, 1];
    while seq.len() < order + 1 {
        let n = seq[seq.len() - 1] + seq[seq.len() - 2];
        seq.push(n);
    }
    seq.truncate(order + 1);
    seq
}

fn client(ctx: &Context, spec: &RoleSpec, stop: &AtomicBool) -> anyhow::Result<()> {
    let name = spec
        .service
        .clone()
        .ok_or_else(|| anyhow::anyhow!("client: no service"))?;
    let node = ctx.node(&spec.node).create()?;
    let client = node.client::<Echo>(&name).create()?;
    say("ready");
    let mut report = RoleReport::default();
    let timeout = Duration::from_millis(spec.timeout_ms.max(1));
    let payload = vec![7u8; 64];
    let start = Instant::now();
    // SYNC: a plain flag.
    while !stop.load(Ordering::Relaxed) {
        report.sent += 1;
        let head = Bytes { tag: report.sent };
        match client.call_slice(&head, &payload, timeout) {
            Ok(r) if r.tag == head.tag && r.elems() == &payload[..] => {
                report.received += 1;
                if report.received == 1 {
                    say("ok");
                }
            }
            Ok(_) => report.torn += 1,
            Err(e) => report.error(e),
        }
        if spec.rate_hz > 0.0 {
            let due = start + Duration::from_secs_f64(report.sent as f64 / spec.rate_hz);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
    }
    say(&format!("done {}", serde_json::to_string(&report)?));
    Ok(())
}

/// Many nodes in one process: node `k` of process `i` publishes Imu on `<small>/p<i>/n<k>`
/// and subscribes to `<small>/p<i+1>/n<k>` (the next process's, in a ring); prints
/// `ready` once its nodes exist and `first` once every subscriber has heard its peer.
fn nodes(ctx: &Context, spec: &RoleSpec, stop: &AtomicBool) -> anyhow::Result<()> {
    let base = spec
        .small
        .clone()
        .ok_or_else(|| anyhow::anyhow!("nodes: no topic prefix (small)"))?;
    let next = (spec.index + 1) % spec.processes.max(1);
    let mut ends = Vec::with_capacity(spec.nodes);
    for k in 0..spec.nodes {
        let node = ctx
            .node(&format!("{}_p{}_n{k}", spec.node, spec.index))
            .create()?;
        let p = node
            .publisher::<Imu>(&format!("{base}/p{}/n{k}", spec.index))
            .qos(spec.qos())
            .create()?;
        let s = node
            .subscriber::<Imu>(&format!("{base}/p{next}/n{k}"))
            .qos(spec.qos())
            .create()?;
        ends.push((node, p, s, false));
    }
    say("ready");
    let mut report = RoleReport::default();
    let start = Instant::now();
    let mut said_first = false;
    // SYNC: a plain flag.
    while !stop.load(Ordering::Relaxed) {
        report.sent += 1;
        for (_, p, s, heard) in &mut ends {
            if let Err(e) = p.publish(&imu(report.sent)) {
                report.error(e);
            }
            while let Some(m) = s.try_recv()? {
                *heard = true;
                report.received += 1;
                report.torn += u64::from(!imu_whole(&m, m.header().seq));
            }
        }
        if !said_first && ends.iter().all(|e| e.3) {
            said_first = true;
            say("first");
        }
        let due = start + Duration::from_secs_f64(report.sent as f64 / spec.rate_hz.max(1.0));
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    for (_, _, s, _) in &ends {
        let st = s.stats();
        (report.lost, report.malformed) = (report.lost + st.lost, report.malformed + st.malformed);
    }
    say(&format!("done {}", serde_json::to_string(&report)?));
    Ok(())
}
