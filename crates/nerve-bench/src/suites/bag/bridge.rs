//! The Foxglove bridge under a 10 MB point cloud at 10 Hz (part of `nerve bench bag`):
//! `nerve bridge foxglove` in a process of its own, a publisher here, and a WebSocket
//! client here speaking `foxglove.sdk.v1` as the Foxglove app does.
//!
//! - **Unwatched**: the topic is advertised, and the publisher sees no subscriber until
//!   the client subscribes (the bridge costs a topic nobody watches nothing).
//! - **Watched**: per frame, publish (wall clock, carried as the message's log time) to
//!   the client holding the whole WebSocket message; beside it, the same bytes sent over
//!   a loopback TCP connection in the same run: the link's own time for a frame.

use crate::report::{num, Section, Verdict};
use crate::harness::child::Child;
use crate::harness::stats::Recorder;
use nerve::prelude::*;
use nerve_msgs::PointCloud;
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};
use tungstenite::{client::IntoClientRequest, Message as WsMessage};

/// What the bridge row measured.
#[derive(Clone, Debug, Serialize)]
pub struct BridgeRow {
    /// Suite name (`bag`).
    pub suite: &'static str,
    /// Row kind (`bridge`).
    pub kind: &'static str,
    /// Cloud payload bytes.
    pub size_bytes: usize,
    /// Frames published while the client watched, and received by it.
    pub published: u64,
    /// Frames the client received.
    pub received: u64,
    /// Subscribers the publisher saw while the topic was advertised but not watched.
    pub unwatched_subscribers: usize,
    /// Publish to the client holding the frame, µs: median, P99, max.
    pub latency_p50_us: f64,
    /// P99.
    pub latency_p99_us: f64,
    /// Largest.
    pub latency_max_us: f64,
    /// The same bytes over loopback TCP, µs per frame: median, P99.
    pub link_p50_us: f64,
    /// P99.
    pub link_p99_us: f64,
}

fn err(what: &str) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// One frame's time over a loopback TCP connection, `rounds` times (the link alone).
fn loopback_link(bytes: usize, rounds: usize) -> Result<Recorder, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(err("loopback listen"))?;
    let addr = listener.local_addr().map_err(err("loopback address"))?;
    let reader = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; bytes];
        for _ in 0..rounds {
            s.read_exact(&mut buf)?;
            s.write_all(&[1])?;
        }
        Ok(())
    });
    let mut s = TcpStream::connect(addr).map_err(err("loopback connect"))?;
    s.set_nodelay(true).map_err(err("nodelay"))?;
    let body = vec![7u8; bytes];
    let mut rec = Recorder::new();
    let mut ack = [0u8; 1];
    for _ in 0..rounds {
        let t = Instant::now();
        s.write_all(&body).map_err(err("loopback write"))?;
        s.read_exact(&mut ack).map_err(err("loopback ack"))?;
        rec.record_ns(t.elapsed().as_nanos() as u64);
        std::thread::sleep(Duration::from_millis(20));
    }
    reader
        .join()
        .map_err(|_| "loopback reader panicked".to_string())?
        .map_err(err("loopback reader"))?;
    Ok(rec)
}

/// The next WebSocket message, or None when none came within the read timeout.
fn read(ws: &mut tungstenite::WebSocket<TcpStream>) -> Result<Option<WsMessage>, String> {
    match ws.read() {
        Ok(m) => Ok(Some(m)),
        Err(tungstenite::Error::Io(e))
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(format!("read from the bridge: {e}")),
    }
}

/// Runs the bridge row: `frames` clouds of `bytes` at 10 Hz.
pub fn run(nerve_exe: &Path, domain: u32, bytes: usize, frames: u64) -> Result<BridgeRow, String> {
    let env = vec![("NERVE_DOMAIN", domain.to_string())];
    let cfg = nerve::Config::default()
        .domain(domain)
        .map_err(|e| e.to_string())?;
    let ctx = Context::new(cfg).map_err(|e| e.to_string())?;
    let node = ctx
        .node("bench_bridge")
        .create()
        .map_err(|e| e.to_string())?;
    let topic = format!("/bench_bridge_cloud_{}", std::process::id());
    let publisher = node
        .publisher::<PointCloud>(&topic)
        .create()
        .map_err(|e| e.to_string())?;
    let args: Vec<String> = ["bridge", "foxglove", "--port", "0", "--topics", &topic]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut bridge =
        Child::spawn(nerve_exe, &args, &env, "nerve bridge foxglove").map_err(|e| e.to_string())?;
    let line = bridge
        .expect("listening on ws://", Duration::from_secs(20))
        .map_err(|e| e.to_string())?;
    let uri = line
        .split_whitespace()
        .last()
        .unwrap_or_default()
        .to_string();
    let mut request = uri.into_client_request().map_err(|e| e.to_string())?;
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        "foxglove.sdk.v1"
            .parse()
            .map_err(|_| "header".to_string())?,
    );
    let addr = request
        .uri()
        .authority()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let tcp = TcpStream::connect(&addr).map_err(err("connect to the bridge"))?;
    let (mut ws, _) = tungstenite::client(request, tcp).map_err(|e| format!("handshake: {e}"))?;
    ws.get_mut()
        .set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(err("read timeout"))?;

    // advertised, not watched
    let deadline = Instant::now() + Duration::from_secs(20);
    let channel = loop {
        if Instant::now() > deadline {
            return Err(format!("{topic} was not advertised within 20 s"));
        }
        if let Some(WsMessage::Text(t)) = read(&mut ws)? {
            let v: serde_json::Value = serde_json::from_str(&t).map_err(|e| e.to_string())?;
            if v["op"] == "advertise" {
                if let Some(c) = v["channels"]
                    .as_array()
                    .and_then(|a| a.iter().find(|c| c["topic"] == topic.as_str()))
                {
                    break c["id"].as_u64().unwrap_or(0);
                }
            }
        }
    };
    // publish unwatched for a while: nobody takes the samples
    let body: Vec<u8> = (0..bytes).map(|i| (i * 31) as u8).collect();
    let publish = |k: u64| -> Result<(), String> {
        let mut loan = publisher.loan_slice(bytes).map_err(|e| e.to_string())?;
        loan.head_mut().width = k as u32;
        loan.head_mut().header.stamp.nanos = nerve::wall_ns();
        loan.elems_mut().copy_from_slice(&body);
        loan.send().map_err(|e| e.to_string())
    };
    for k in 0..5 {
        publish(k)?;
        std::thread::sleep(Duration::from_millis(100));
    }
    let unwatched_subscribers = publisher.subscriber_count();

    // watched: subscribe, then publish at 10 Hz on absolute deadlines and read
    let sub =
        serde_json::json!({"op": "subscribe", "subscriptions": [{"id": 1, "channelId": channel}]});
    ws.send(WsMessage::Text(sub.to_string().into()))
        .map_err(|e| format!("subscribe: {e}"))?;
    if !publisher.wait_for_subscribers(1, Duration::from_secs(10)) {
        return Err("the bridge did not subscribe within 10 s".into());
    }
    let mut lat = Recorder::new();
    let (mut published, mut received) = (0u64, 0u64);
    let t0 = Instant::now();
    let end_wait = Duration::from_millis(frames * 100 + 3000);
    while (received < frames) && t0.elapsed() < end_wait {
        if published < frames && t0.elapsed() >= Duration::from_millis(published * 100) {
            publish(published)?;
            published += 1;
        }
        if let Some(WsMessage::Binary(b)) = read(&mut ws)? {
            // message data: opcode 1, subscription id, log time, payload
            if let Some(t) = b.get(5..13).filter(|_| b[0] == 0x01) {
                let log_time = u64::from_le_bytes(t.try_into().expect("8 bytes"));
                let now = nerve::wall_ns().max(0) as u64;
                lat.record_ns(now.saturating_sub(log_time));
                received += 1;
            }
        }
    }
    let _ = ws.close(None);
    bridge.stop();
    let (lat, link) = (lat.dist(), loopback_link(bytes, 20)?.dist());
    Ok(BridgeRow {
        suite: "bag",
        kind: "bridge",
        size_bytes: bytes,
        published,
        received,
        unwatched_subscribers,
        latency_p50_us: lat.p50,
        latency_p99_us: lat.p99,
        latency_max_us: lat.max,
        link_p50_us: link.p50,
        link_p99_us: link.p99,
    })
}

/// The bridge's targets, judged on `row`, or every one not met with the reason the bridge
/// measurement did not run.
pub fn bridge_checks(row: Result<&BridgeRow, &str>) -> Vec<Verdict> {
    let value = |f: fn(&BridgeRow) -> f64| row.map(|r| Some(f(r))).map_err(str::to_string);
    vec![
        Verdict::judged(
            "bag",
            "the bridge costs an unwatched topic nothing (no subscriber)",
            "10 MB cloud",
            value(|r| r.unwatched_subscribers as f64),
            |v| v == 0.0,
        ),
        Verdict::judged(
            "bag",
            "a watched 10 MB cloud at 10 Hz reaches the client, none lost",
            "10 MB cloud",
            value(|r| r.published.saturating_sub(r.received) as f64),
            |v| v == 0.0,
        ),
    ]
}

/// The bridge table and its checks.
pub fn section(s: &mut Section, r: &BridgeRow, checks: &mut Vec<Verdict>) {
    s.table(
        Some("Foxglove bridge: a 10 MB cloud at 10 Hz to a WebSocket client"),
        &[
            "size",
            "received/published",
            "subscribers while unwatched",
            "publish to client P50 µs",
            "P99",
            "max",
            "loopback TCP, same bytes, P50 µs",
            "P99",
            "ratio P50",
        ],
        &[vec![
            format!("{} MB", num(r.size_bytes as f64 / 1e6)),
            format!("{}/{}", r.received, r.published),
            r.unwatched_subscribers.to_string(),
            num(r.latency_p50_us),
            num(r.latency_p99_us),
            num(r.latency_max_us),
            num(r.link_p50_us),
            num(r.link_p99_us),
            format!("{:.2}", r.latency_p50_us / r.link_p50_us.max(0.001)),
        ]],
    );
    s.paragraph(
        "nerve bridge foxglove runs in its own process; the client is a plain WebSocket \
         client here (subprotocol foxglove.sdk.v1), timed from the publisher's wall-clock \
         stamp (the message's log time) to the whole message in hand. The loopback row \
         sends the same number of bytes over a TCP connection on the same machine and \
         waits for a one-byte acknowledgement: the link's own time for a frame. The \
         bridge's extra work per frame is one conversion (a copy of the cloud) and the \
         WebSocket framing.",
    );
    checks.extend(bridge_checks(Ok(r)));
}
