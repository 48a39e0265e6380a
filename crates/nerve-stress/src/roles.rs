//! The processes scenarios start: this binary again, in a hidden role, talking to the
//! scenario by lines on stdout (`ready`, `loaned`, `sending`, `holding`, `ok`, and `done
//! <json>` with what it saw). A role runs until it is killed or its stdin closes.

use nerve::prelude::*;
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
    let cfg = nerve::Config::default()
        .domain(spec.domain)?
        .state_dir(spec.state_dir.clone());
    let ctx = Context::new(cfg)?;
    let stop = stop_on_eof();
    match role {
        "publisher" => publisher(&ctx, &spec, &stop),
        "subscriber" => subscriber(&ctx, &spec, &stop),
        "server" => server(&ctx, &spec, &stop),
        "client" => client(&ctx, &spec, &stop),
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
    let (mut said_first, mut said_holding) = (false, false);
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
    say("ready");
    // SYNC: a plain flag.
    while !stop.load(Ordering::Relaxed) {
        if let Some(req) = server.take_timeout(Duration::from_millis(50))? {
            let mut out = req.loan_reply_slice(req.elems().len())?;
            out.head_mut().tag = req.tag;
            out.elems_mut().copy_from_slice(req.elems());
            out.send()?;
        }
    }
    Ok(())
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
