//! What `nerve bridge ros2` adds (issue 30, item 5): an rclpy publisher (Python, Fast
//! DDS) → the bridge (the `nerve` binary, a child with a Nerve and a ROS 2 domain of its
//! own) → a Nerve subscriber in this process (a `RawSubscriber` on a thread pinned to the
//! subscriber core), beside rclpy → rclpy at the same size and rate:
//!
//! - 1 KiB `std_msgs/UInt8MultiArray` at 100 Hz: one-way latency of both paths, the
//!   bridge's CPU (it arrives as a `Ros2Cdr` carrier; sequence number and stamp in the
//!   first 16 bytes of `data`, as the stream protocol's);
//! - the same at 5 kHz asked (saturation): messages/s through the bridge, loss, CPU;
//! - a 1 MiB `sensor_msgs/PointCloud2` at 30 Hz (arrives as `nerve_msgs::PointCloud`, the
//!   stamps in the first 16 bytes of its data; `header.stamp` is the wall clock);
//! - `sensor_msgs/Imu` at 100 Hz (arrives as `nerve_msgs::Imu`): the bridge's CPU, and the
//!   latency from its `stamp` (wall clock at publish) to the wall clock at receipt.
//!
//! Latency: publisher stamp (CLOCK_MONOTONIC, once the payload is written) to the
//! subscriber's receipt. CPU from /proc (user + system over the publisher's `start` to
//! `done`). No ROS 2 environment, or a bridge that does not start: the rows are skipped
//! with the reason.

use super::{PUB_CPU, START, SUB_CPU};
use crate::harness::child::Child;
use crate::harness::machine::{cpu_ns, mono_ns, pin_to_cpu};
use crate::harness::stats::{Dist, Recorder};
use crate::harness::PeerError;
use crate::peers::rclpy::Ros2;
use crate::peers::stream::Arrivals;
use crate::report::Skipped;
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WHAT: &str = "nerve bridge ros2";
/// The rate asked of the publisher in the saturation row (rclpy's timer falls short).
pub const SATURATION_HZ: f64 = 5000.0;
/// The point cloud's size.
pub const CLOUD_BYTES: usize = 1 << 20;
/// Payload sizes measured on every path, each at the rate a sensor of that size sends:
/// 1 KiB at 100 Hz (state, commands), 64 KiB at 100 Hz (a small image or a scan), 1 MiB
/// at 30 Hz (a lidar sweep), 4 MiB at 10 Hz (a camera frame).
pub const SIZES: [(usize, f64); 4] = [
    (1 << 10, 100.0),
    (64 << 10, 100.0),
    (1 << 20, 30.0),
    (4 << 20, 10.0),
];

/// What a row carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Message {
    /// `std_msgs/msg/UInt8MultiArray` (a `Ros2Cdr` carrier in Nerve).
    Bytes,
    /// `sensor_msgs/msg/PointCloud2` (`nerve_msgs::PointCloud` in Nerve).
    Pointcloud,
    /// `sensor_msgs/msg/Imu` (`nerve_msgs::Imu` in Nerve).
    Imu,
}

impl Message {
    fn id(self) -> &'static str {
        match self {
            Message::Bytes => "bytes",
            Message::Pointcloud => "pointcloud",
            Message::Imu => "imu",
        }
    }

    /// The ROS 2 type.
    pub fn ros_type(self) -> &'static str {
        match self {
            Message::Bytes => "std_msgs/msg/UInt8MultiArray",
            Message::Pointcloud => "sensor_msgs/msg/PointCloud2",
            Message::Imu => "sensor_msgs/msg/Imu",
        }
    }
}

/// The two paths compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Route {
    /// rclpy publisher → rclpy subscriber (single-threaded executors).
    #[serde(rename = "rclpy → rclpy")]
    Rclpy,
    /// rclpy publisher → `nerve bridge ros2` → Nerve subscriber.
    #[serde(rename = "rclpy → bridge → nerve")]
    Bridge,
    /// Nerve publisher → `nerve bridge ros2` → rclpy subscriber.
    #[serde(rename = "nerve → bridge → rclpy")]
    ToRos,
}

impl Route {
    /// The path in reports.
    pub fn label(self) -> &'static str {
        match self {
            Route::Rclpy => "rclpy → rclpy",
            Route::Bridge => "rclpy → bridge → nerve",
            Route::ToRos => "nerve → bridge → rclpy",
        }
    }

    /// Whether the row goes through the bridge.
    pub fn bridged(self) -> bool {
        self != Route::Rclpy
    }
}

/// One row of the bridge's table.
#[derive(Clone, Debug, Serialize)]
pub struct BridgeRow {
    /// Always "topic".
    pub suite: &'static str,
    /// Always "ros2-bridge".
    pub section: &'static str,
    /// Which measurement: "size" (one payload size, every path), "saturation",
    /// "pointcloud", "imu".
    pub scenario: &'static str,
    /// The path.
    pub route: Route,
    /// What was sent.
    pub message: Message,
    /// ROS 2 type.
    pub ros_type: &'static str,
    /// Bytes of the payload (the UInt8MultiArray's / PointCloud2's data; 0 for Imu).
    pub payload_bytes: usize,
    /// Rate asked of the publisher.
    pub rate_hz: f64,
    /// Messages sent.
    pub sent: u64,
    /// Distinct messages received.
    pub received: u64,
    /// 1 - received / sent.
    pub loss_rate: Option<f64>,
    /// Messages that failed their integrity check.
    pub malformed: u64,
    /// One-way latency in µs (Imu: wall clock, from its stamp).
    pub latency_us: Dist,
    /// Rate the publisher reached (sent / its start-to-done time).
    pub published_per_s: f64,
    /// Rate of arrivals (received over first to last arrival).
    pub received_per_s: Option<f64>,
    /// CPU of the bridge process, % of one core.
    pub bridge_cpu_percent: Option<f64>,
    /// CPU of the idle bridge (no message flowing) over 1 s after it started, % of one
    /// core: what it costs before any message (discovery, its threads).
    pub bridge_idle_cpu_percent: Option<f64>,
    /// CPU of the publisher process (the bench process itself for a Nerve publisher).
    pub publisher_cpu_percent: Option<f64>,
    /// CPU of the rclpy subscriber process (rclpy → rclpy and nerve → bridge → rclpy).
    pub subscriber_cpu_percent: Option<f64>,
    /// Publisher's start to done, s.
    pub seconds: f64,
}

/// One measured stream.
struct Plan {
    scenario: &'static str,
    route: Route,
    message: Message,
    bytes: usize,
    rate_hz: f64,
    seconds: f64,
}

/// The plan: both paths where they are compared, the bridge alone otherwise.
fn plans(quick: bool) -> Vec<Plan> {
    let s = if quick { 3.0 } else { 10.0 };
    let p = |scenario, route, message, bytes, rate_hz| Plan {
        scenario,
        route,
        message,
        bytes,
        rate_hz,
        seconds: s,
    };
    let mut plans = Vec::new();
    for (bytes, rate_hz) in SIZES {
        for route in [Route::Rclpy, Route::Bridge, Route::ToRos] {
            plans.push(p("size", route, Message::Bytes, bytes, rate_hz));
        }
    }
    plans.extend([
        p("imu", Route::Bridge, Message::Imu, 0, 100.0),
        p("saturation", Route::Bridge, Message::Bytes, 1024, SATURATION_HZ),
        p("pointcloud", Route::Rclpy, Message::Pointcloud, CLOUD_BYTES, 30.0),
        p("pointcloud", Route::Bridge, Message::Pointcloud, CLOUD_BYTES, 30.0),
    ]);
    plans
}

/// ROS domain of a Nerve domain number, as `rclpy_bench.py`'s `ros_domain`.
fn ros_domain(domain: u32) -> u32 {
    1 + domain % 100
}

/// Measures every row: rclpy → rclpy in `domain`'s ROS domain, the bridge between Nerve
/// domain `domain + 1` and its ROS domain. Rows that cannot run are skipped with why.
pub fn measure(
    ros: Result<&Ros2, String>,
    venv: &Path,
    domain: u32,
    quick: bool,
) -> (Vec<BridgeRow>, Vec<Skipped>) {
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let skip = |plan: &Plan, why: &str| Skipped {
        system: format!("ros2 bridge {} ({})", plan.scenario, plan.route.label()),
        payload_bytes: Some(plan.bytes),
        reason: format!("{} Hz: {why}", plan.rate_hz),
    };
    let plans = plans(quick);
    let ros = match ros {
        Ok(r) => r,
        Err(why) => {
            skipped.extend(plans.iter().map(|p| skip(p, &why)));
            return (rows, skipped);
        }
    };
    let profile = std::env::temp_dir().join(format!(
        "nerve-bench-fastdds-{}.xml",
        std::process::id()
    ));
    if let Err(e) = std::fs::write(&profile, nerve_ros2::dds::FASTDDS_LARGE_DATA_PROFILE) {
        let why = format!("cannot write the Fast DDS profile {}: {e}", profile.display());
        skipped.extend(plans.iter().map(|p| skip(p, &why)));
        return (rows, skipped);
    }
    let rclpy = Rclpy {
        ros,
        profile: &profile,
    };
    let bridge_domain = domain + 1;
    let mut bridge = match start_bridge(venv, bridge_domain) {
        Ok(b) => Some(b),
        Err(e) => {
            let why = e.to_string();
            for p in plans.iter().filter(|p| p.route.bridged()) {
                skipped.push(skip(p, &why));
            }
            None
        }
    };
    let idle = bridge.as_ref().and_then(|b| {
        let window = Duration::from_secs(1);
        let a = cpu_ns(b.pid());
        std::thread::sleep(window);
        let b = cpu_ns(b.pid());
        Some(b?.saturating_sub(a?) as f64 / window.as_nanos() as f64 * 100.0)
    });
    for (i, plan) in plans.iter().enumerate() {
        let topic = format!("/nerve_bench/bridge_{}_{i}", std::process::id());
        let r = match (plan.route, bridge.as_mut()) {
            (Route::Rclpy, _) => run(&rclpy, venv, plan, &topic, domain, None),
            (_, Some(b)) => run(&rclpy, venv, plan, &topic, bridge_domain, Some(b)),
            (_, None) => continue,
        };
        match r {
            Ok(mut row) => {
                if row.route.bridged() {
                    row.bridge_idle_cpu_percent = idle;
                }
                rows.push(row)
            }
            Err(e) => skipped.push(skip(plan, &e.to_string())),
        }
    }
    if let Some(mut b) = bridge {
        // SIGTERM, as a user stops it
        b.terminate();
    }
    let _ = std::fs::remove_file(&profile);
    (rows, skipped)
}

fn start_bridge(venv: &Path, domain: u32) -> Result<Child, PeerError> {
    let exe = std::env::current_exe().map_err(|e| PeerError::setup(WHAT, e))?;
    let share = venv.join("share");
    // Imu is measured converted to nerve_msgs::Imu, a lossy form (no frame id) the bridge
    // makes only when asked; without it the Imu would cross as its CDR
    let args = vec![
        "bridge".to_string(),
        "ros2".to_string(),
        "--types".to_string(),
        share.display().to_string(),
        "--lossy".to_string(),
        "nerve_msgs/Imu".to_string(),
    ];
    // the domains from the environment, as the ROS 2 tests start it
    let env = [
        ("NERVE_DOMAIN", domain.to_string()),
        ("ROS_DOMAIN_ID", ros_domain(domain).to_string()),
        ("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST".to_string()),
    ];
    let mut child = Child::spawn(&exe, &args, &env, WHAT)?;
    if let Err(e) = child.expect("bridging ROS 2 domain", START) {
        let tail = child.stop_and_tail();
        return Err(PeerError::setup(WHAT, format!("{e}; {tail}")));
    }
    Ok(child)
}

/// How the rclpy ends start: the ROS 2 environment, and the Fast DDS profile every rclpy
/// subscriber of the section runs with (`nerve_ros2::dds::FASTDDS_LARGE_DATA_PROFILE`: a
/// 4 MiB UDP receive buffer, as a ROS 2 user receiving large messages over UDP configures
/// it; rclpy → rclpy on one host goes over shared memory either way). Publishers run
/// with Fast DDS's defaults: the profile's own UDP transport sends every datagram once
/// per interface of the host (docs/design.md, "Large messages to ROS 2").
struct Rclpy<'a> {
    ros: &'a Ros2,
    profile: &'a Path,
}

fn python_end(
    rclpy: &Rclpy,
    role: &str,
    plan: &Plan,
    topic: &str,
    domain: u32,
    count: u64,
    cpu: usize,
) -> Result<Child, PeerError> {
    let (python, mut args): (PathBuf, Vec<String>) = rclpy.ros.stream_command();
    let spec = json!({
        "system": "rclpy-single-threaded",
        "executor": "single-threaded",
        "endpoint": topic,
        "payload_bytes": plan.bytes,
        "rate_hz": plan.rate_hz,
        "count": count,
        "domain": domain,
        "cpu": cpu,
        "message": plan.message.id(),
        // the receiving node's configuration (see Rclpy)
        "fastdds_profile": (role == "subscriber").then(|| rclpy.profile.display().to_string()),
    });
    args.extend([role.to_string(), spec.to_string()]);
    Child::spawn(&python, &args, &[("PYTHONNOUSERSITE", "1".to_string())], "rclpy")
}

fn run(
    rclpy: &Rclpy,
    venv: &Path,
    plan: &Plan,
    topic: &str,
    domain: u32,
    bridge: Option<&mut Child>,
) -> Result<BridgeRow, PeerError> {
    let count = ((plan.seconds * plan.rate_hz).round() as u64).max(2);
    let bridge_pid = bridge.as_ref().map(|b| b.pid());
    // the rclpy subscriber first where there is one (the bridge subscribes in Nerve once
    // ROS 2 listens); for rclpy → bridge → nerve, the publisher first: the bridge opens
    // the Nerve topic once it sees the ROS 2 publisher
    let mut rclpy_sub = match plan.route {
        Route::Rclpy | Route::ToRos => {
            let mut s = python_end(rclpy, "subscriber", plan, topic, domain, count, SUB_CPU)?;
            s.expect("ready", START)?;
            Some(s)
        }
        Route::Bridge => None,
    };
    // one of the two publishers: rclpy's (a child) or Nerve's (a thread of this process)
    let (mut rclpy_pub, nerve_pub) = match plan.route {
        Route::ToRos => match NervePub::start(venv, plan, topic, domain, count) {
            Ok(p) => (None, Some(p)),
            Err(e) => {
                if let Some(s) = rclpy_sub.as_mut() {
                    s.stop();
                }
                return Err(e);
            }
        },
        _ => (
            Some(python_end(rclpy, "publisher", plan, topic, domain, count, PUB_CPU)?),
            None,
        ),
    };
    let nerve_sub = match plan.route {
        Route::Bridge => Some(NerveSub::start(plan, topic, domain, count)?),
        _ => None,
    };
    if let Some(p) = rclpy_pub.as_mut() {
        if let Err(e) = p.expect("ready", START) {
            let tail = p.stop_and_tail();
            if let Some(s) = rclpy_sub.as_mut() {
                s.stop();
            }
            if let Some(n) = nerve_sub {
                let _ = n.finish();
            }
            return Err(PeerError::call("rclpy", format!("{e}; publisher: {tail}")));
        }
        p.expect("start", START)?;
    }
    let sub_pid = rclpy_sub.as_ref().map(|s| s.pid());
    let pub_pid = rclpy_pub.as_ref().map_or(std::process::id(), |p| p.pid());
    let cpu = |pid: Option<u32>| pid.and_then(cpu_ns);
    let (p0, s0, b0, t0) = (cpu_ns(pub_pid), cpu(sub_pid), cpu(bridge_pid), mono_ns());
    // generous: rclpy's timer falls behind at high rates
    let expected = Duration::from_secs_f64(count as f64 / plan.rate_hz.max(0.001));
    match (rclpy_pub.as_mut(), nerve_pub) {
        (Some(p), _) => {
            p.expect("done", expected * 4 + START)?;
        }
        (None, Some(p)) => p.run()?,
        (None, None) => {}
    }
    let (p1, s1, b1, t1) = (cpu_ns(pub_pid), cpu(sub_pid), cpu(bridge_pid), mono_ns());
    let arrivals = match (rclpy_sub.as_mut(), nerve_sub) {
        (Some(s), _) => {
            // a late sample (a large one still being repaired) has a few seconds
            let line = match s.try_expect("{", Duration::from_secs(3)) {
                Some(l) => l,
                None => {
                    s.close_stdin();
                    s.expect("{", Duration::from_secs(5))?
                }
            };
            s.stop();
            serde_json::from_str::<Arrivals>(&line)
                .map_err(|e| PeerError::call("rclpy", format!("bad arrivals: {e}")))?
        }
        (None, Some(n)) => {
            n.wait_last(Duration::from_secs(3));
            n.finish()?
        }
        (None, None) => Arrivals::default(),
    };
    if let Some(p) = rclpy_pub.as_mut() {
        p.stop();
    }
    let wall = t1.saturating_sub(t0) as f64;
    let pct = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) if wall > 0.0 => Some(b.saturating_sub(a) as f64 / wall * 100.0),
        _ => None,
    };
    let mut latency = Recorder::new();
    let mut seen = BTreeSet::new();
    let (mut first, mut last) = (u64::MAX, 0u64);
    for a in &arrivals.arrivals {
        if (1..=count).contains(&a[0]) && seen.insert(a[0]) {
            latency.record_ns(a[2].saturating_sub(a[1]));
            first = first.min(a[2]);
            last = last.max(a[2]);
        }
    }
    let received = seen.len() as u64;
    let span = last.saturating_sub(first) as f64 / 1e9;
    Ok(BridgeRow {
        suite: "topic",
        section: "ros2-bridge",
        scenario: plan.scenario,
        route: plan.route,
        message: plan.message,
        ros_type: plan.message.ros_type(),
        payload_bytes: plan.bytes,
        rate_hz: plan.rate_hz,
        sent: count,
        received,
        loss_rate: Some(1.0 - received as f64 / count as f64),
        malformed: arrivals.malformed,
        latency_us: latency.dist(),
        published_per_s: count as f64 / (wall / 1e9).max(1e-9),
        received_per_s: (received > 1 && span > 0.0).then(|| (received - 1) as f64 / span),
        bridge_cpu_percent: pct(b0, b1),
        bridge_idle_cpu_percent: None,
        publisher_cpu_percent: pct(p0, p1),
        subscriber_cpu_percent: pct(s0, s1),
        seconds: wall / 1e9,
    })
}

/// A Nerve publisher of `std_msgs/msg/UInt8MultiArray` (a `Ros2Cdr` carrier whose schema
/// comes from the ROS 2 environment's definition), on a thread of this process pinned to
/// the publisher core: the payload is the stream's (sequence number and monotonic stamp
/// in the first 16 bytes of `data`, written just before each send), as rclpy's.
struct NervePub {
    go: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<Result<(), PeerError>>,
}

impl NervePub {
    /// Opens the topic and waits until the bridge subscribes to it (it does once the
    /// rclpy subscriber is seen), then for its DDS writer to match the subscriber.
    fn start(
        venv: &Path,
        plan: &Plan,
        topic: &str,
        domain: u32,
        count: u64,
    ) -> Result<NervePub, PeerError> {
        let setup = |e: &dyn std::fmt::Display| PeerError::setup("nerve", e.to_string());
        let mut search = nerve_ros2_types::SearchPath::new();
        search.push_prefix(venv);
        let (_, schema) =
            nerve_ros2_map::carrier::Ros2Pass::load(plan.message.ros_type(), &search)
                .map_err(|e| setup(&e))?;
        let (bytes, rate_hz, topic) = (plan.bytes, plan.rate_hz, topic.to_string());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), PeerError>>();
        let (go, go_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            pin_to_cpu(PUB_CPU);
            let opened = (|| {
                let cfg = nerve::Config::from_env()
                    .and_then(|c| c.domain(domain))
                    .map_err(|e| setup(&e))?;
                let ctx = nerve::Context::new(cfg).map_err(|e| setup(&e))?;
                let node = ctx.node("bench_bridge_pub").create().map_err(|e| setup(&e))?;
                let publisher =
                    nerve::RawPublisher::create(&node, &topic, &schema, nerve::Qos::default())
                        .map_err(|e| setup(&e))?;
                if !publisher.wait_for_subscribers(1, START) {
                    return Err(setup(&"the bridge did not subscribe to the Nerve topic"));
                }
                // its DDS writer's match with the rclpy subscriber settles (as the rclpy
                // publisher's 0.2 s after it sees its subscriber)
                std::thread::sleep(Duration::from_millis(500));
                Ok((ctx, node, publisher))
            })();
            let (_ctx, _node, publisher) = match opened {
                Ok(x) => {
                    let _ = ready_tx.send(Ok(()));
                    x
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(PeerError::setup("nerve", e.to_string())));
                    return Err(e);
                }
            };
            if go_rx.recv().is_err() {
                return Ok(());
            }
            publish_stream(&publisher, bytes, rate_hz, count)
        });
        match ready_rx.recv_timeout(START * 2) {
            Ok(Ok(())) => Ok(NervePub { go, thread }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(PeerError::setup(
                "nerve",
                "the bridge did not subscribe to the Nerve topic in time",
            )),
        }
    }

    /// Publishes every message at the rate and returns once the last is sent.
    fn run(self) -> Result<(), PeerError> {
        let _ = self.go.send(());
        self.thread
            .join()
            .map_err(|_| PeerError::call("nerve", "the publisher thread panicked"))?
    }
}

/// The `Ros2Cdr` payload of a `UInt8MultiArray` of `n` data bytes: the carrier's 8-byte
/// head (source stamp 0: the bridge stamps), the CDR encapsulation, an empty
/// `layout.dim`, `layout.data_offset`, the data's length, then the data (byte i = i mod
/// 256; the first 16 bytes are the sequence number and stamp, written per message).
fn bytes_payload(n: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(nerve_ros2_map::carrier::HEAD + 16 + n);
    b.extend_from_slice(&0i64.to_le_bytes());
    b.extend_from_slice(&nerve_ros2_types::CDR_LE_HEADER);
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&(n as u32).to_le_bytes());
    b.extend((0..n).map(|i| (i % 256) as u8));
    b
}

fn publish_stream(
    publisher: &nerve::RawPublisher,
    bytes: usize,
    rate_hz: f64,
    count: u64,
) -> Result<(), PeerError> {
    let template = bytes_payload(bytes);
    let data_at = template.len() - bytes;
    let period = Duration::from_secs_f64(1.0 / rate_hz.max(0.001));
    let start = Instant::now();
    for seq in 1..=count {
        // Ctrl-C or SIGTERM ends the row at once (a 4 MiB row lasts up to 10 s)
        if crate::harness::interrupt::stopping() {
            return Err(PeerError::call("nerve", crate::harness::interrupt::Refused));
        }
        let due = start + period * (seq - 1) as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let mut loan = publisher
            .loan(template.len())
            .map_err(|e| PeerError::call("nerve", e))?;
        let out = loan.bytes_mut();
        out.copy_from_slice(&template);
        out[data_at..data_at + 8].copy_from_slice(&seq.to_le_bytes());
        out[data_at + 8..data_at + 16].copy_from_slice(&mono_ns().to_le_bytes());
        publisher
            .send(loan)
            .map_err(|e| PeerError::call("nerve", e))?;
    }
    Ok(())
}

/// The Nerve subscriber: a thread of this process pinned to the subscriber core.
struct NerveSub {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<Arrivals, PeerError>>,
}

impl NerveSub {
    fn start(plan: &Plan, topic: &str, domain: u32, count: u64) -> Result<NerveSub, PeerError> {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel::<Result<(), PeerError>>();
        let (message, bytes, topic) = (plan.message, plan.bytes, topic.to_string());
        let (st, dn) = (stop.clone(), done.clone());
        let thread = std::thread::spawn(move || {
            let r = subscribe(message, bytes, &topic, domain, count, &st, &tx);
            dn.store(true, Ordering::Relaxed);
            r
        });
        match rx.recv_timeout(START) {
            Ok(Ok(())) => Ok(NerveSub { stop, done, thread }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                stop.store(true, Ordering::Relaxed);
                Err(PeerError::setup(
                    "nerve",
                    "the bridge opened no Nerve topic for the ROS 2 publisher",
                ))
            }
        }
    }

    /// Waits up to `grace` for the last message.
    fn wait_last(&self, grace: Duration) {
        let end = Instant::now() + grace;
        while !self.done.load(Ordering::Relaxed) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn finish(self) -> Result<Arrivals, PeerError> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| PeerError::call("nerve", "the subscriber thread panicked"))?
    }
}

fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Whether `data` is the stream body after its 16-byte head (byte i = i mod 256).
fn body_ok(data: &[u8]) -> bool {
    data.iter()
        .enumerate()
        .skip(16)
        .all(|(i, &b)| b == (i % 256) as u8)
}

fn stamps(data: &[u8]) -> Option<(u64, u64)> {
    let seq = u64::from_le_bytes(data.get(..8)?.try_into().ok()?);
    let stamp = u64::from_le_bytes(data.get(8..16)?.try_into().ok()?);
    Some((seq, stamp))
}

/// `[seq, publish stamp, receipt]` of one sample, `Err` if it fails its check.
fn decode(message: Message, bytes: usize, b: &[u8], n: u64) -> Result<[u64; 3], ()> {
    match message {
        Message::Bytes => {
            let recv = mono_ns();
            // Ros2Cdr: 8-byte head, then CDR: encapsulation (4), layout.dim length (4),
            // layout.data_offset (4), data length (4), data
            let head = std::mem::size_of::<nerve_msgs::ros2::Ros2Cdr>();
            let len = b.get(head + 12..head + 16).ok_or(())?;
            if u32::from_le_bytes(len.try_into().map_err(|_| ())?) as usize != bytes {
                return Err(());
            }
            let data = b.get(head + 16..head + 16 + bytes).ok_or(())?;
            let (seq, stamp) = stamps(data).ok_or(())?;
            body_ok(data).then_some([seq, stamp, recv]).ok_or(())
        }
        Message::Pointcloud => {
            let recv = mono_ns();
            let off = nerve::message::elems_offset::<nerve_msgs::PointCloud>();
            let data = b.get(off..).ok_or(())?;
            if data.len() != bytes {
                return Err(());
            }
            let (seq, stamp) = stamps(data).ok_or(())?;
            body_ok(data).then_some([seq, stamp, recv]).ok_or(())
        }
        Message::Imu => {
            let recv = wall_ns();
            // nerve_msgs::Imu starts with its stamp (ns since the epoch); the sequence
            // number is the arrival's (Imu carries none the bridge keeps besides values)
            let stamp = i64::from_le_bytes(b.get(..8).ok_or(())?.try_into().map_err(|_| ())?);
            Ok([n, stamp.max(0) as u64, recv])
        }
    }
}

fn subscribe(
    message: Message,
    bytes: usize,
    topic: &str,
    domain: u32,
    count: u64,
    stop: &AtomicBool,
    ready: &std::sync::mpsc::Sender<Result<(), PeerError>>,
) -> Result<Arrivals, PeerError> {
    pin_to_cpu(SUB_CPU);
    let setup = |e: &dyn std::fmt::Display| PeerError::setup("nerve", e.to_string());
    let opened = (|| {
        let cfg = nerve::Config::from_env()
            .and_then(|c| c.domain(domain))
            .map_err(|e| setup(&e))?;
        let ctx = nerve::Context::new(cfg).map_err(|e| setup(&e))?;
        let node = ctx.node("bench_bridge_sub").create().map_err(|e| setup(&e))?;
        let deadline = Instant::now() + START;
        loop {
            match nerve::RawSubscriber::create(&node, topic, nerve::Qos::default()) {
                Ok(s) => return Ok((ctx, node, s)),
                Err(e) if Instant::now() > deadline => return Err(setup(&e)),
                Err(_) if stop.load(Ordering::Relaxed) => return Err(setup(&"stopped")),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    })();
    let (_ctx, _node, sub) = match opened {
        Ok(x) => {
            let _ = ready.send(Ok(()));
            x
        }
        Err(e) => {
            let _ = ready.send(Err(PeerError::setup("nerve", e.to_string())));
            return Err(e);
        }
    };
    let mut out = Arrivals::default();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match sub.recv_timeout(Duration::from_millis(100)) {
            Ok(Some(s)) => {
                n += 1;
                match decode(message, bytes, s.bytes(), n) {
                    Ok(a) => {
                        if out.arrivals.len() < (1 << 20) {
                            out.arrivals.push(a);
                        }
                        if a[0] >= count {
                            break;
                        }
                    }
                    Err(()) => out.malformed += 1,
                }
            }
            Ok(None) => {}
            Err(e) => return Err(PeerError::call("nerve", e)),
        }
    }
    Ok(out)
}

/// Added P50 and ratio of bridged row `r` over rclpy → rclpy in the same scenario, with
/// the same message and size, if both ran.
pub fn added(rows: &[BridgeRow], r: &BridgeRow) -> Option<(f64, f64)> {
    if !r.route.bridged() || r.latency_us.count == 0 {
        return None;
    }
    let base = rows.iter().find(|x| {
        x.route == Route::Rclpy
            && x.scenario == r.scenario
            && x.message == r.message
            && x.payload_bytes == r.payload_bytes
            && x.latency_us.count > 0
    })?;
    Some((
        r.latency_us.p50 - base.latency_us.p50,
        r.latency_us.p50 / base.latency_us.p50,
    ))
}

/// The paragraph before the table.
pub fn describe(quick: bool) -> String {
    format!(
        "What `nerve bridge ros2` adds, both ways: an rclpy publisher (rclpy's \
         single-threaded executor, Fast DDS, reliable keep-last 10, a timer at the rate) \
         → the bridge (the `nerve` binary, a child process with a Nerve and a ROS 2 \
         domain of its own, unpinned) → a Nerve RawSubscriber in the bench process \
         (pinned to the subscriber core); a Nerve RawPublisher in the bench process \
         (default QoS, loaned samples, pinned to the publisher core) → the bridge → an \
         rclpy subscriber (reliable keep-last 10); every rclpy subscriber runs with the \
         Fast DDS profile for large data (crates/nerve-ros2/fastdds_large_data.xml: a 4 MiB \
         UDP receive buffer, shared memory kept); beside the same rclpy publisher → an \
         rclpy subscriber. std_msgs/UInt8MultiArray (a Ros2Cdr carrier in Nerve) at \
         1 KiB and 64 KiB @ 100 Hz, 1 MiB @ 30 Hz, 4 MiB @ 10 Hz on every path, received \
         / sent on every row; 1 KiB at \
         {SATURATION_HZ} Hz asked (saturation: the rate rclpy's timer reaches), a 1 MiB \
         sensor_msgs/PointCloud2 at 30 Hz (nerve_msgs::PointCloud in Nerve), \
         sensor_msgs/Imu at 100 Hz (nerve_msgs::Imu). Latency from the publisher's \
         monotonic stamp in the payload's first 16 bytes to the receipt (Imu: its \
         header stamp, wall clock, to the wall clock at receipt); bridge CPU from /proc \
         (user + system over the publisher's start to done; its idle CPU over 1 s \
         before the first row beside it); {} s a row.",
        if quick { 3 } else { 10 }
    )
}

fn cell(v: Option<f64>) -> String {
    v.map_or("–".into(), crate::report::num)
}

/// The table: every row, and the bridge's added P50 and ratio where both paths ran.
pub fn table(rows: &[BridgeRow]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let head = vec![
        "scenario",
        "path",
        "type",
        "size",
        "rate Hz (asked)",
        "msgs/s pub / recv",
        "P50 µs",
        "P99 µs",
        "P99.9 µs",
        "max µs",
        "added P50 µs",
        "P50 ratio",
        "bridge CPU %",
        "bridge idle CPU %",
        "pub CPU %",
        "sub CPU %",
        "received / sent",
        "loss %",
    ];
    let cells = rows
        .iter()
        .map(|r| {
            let add = added(rows, r);
            let d = &r.latency_us;
            let has = d.count > 0;
            let q = |v: f64| if has { crate::report::num(v) } else { "–".into() };
            vec![
                r.scenario.to_string(),
                r.route.label().to_string(),
                r.ros_type.to_string(),
                crate::report::human_bytes(r.payload_bytes),
                format!("{}", r.rate_hz),
                format!(
                    "{:.0} / {}",
                    r.published_per_s,
                    r.received_per_s.map_or("–".into(), |x| format!("{x:.0}"))
                ),
                q(d.p50),
                q(d.p99),
                q(d.p999),
                q(d.max),
                cell(add.map(|a| a.0)),
                add.map_or("–".into(), |a| format!("{:.2}×", a.1)),
                cell(r.bridge_cpu_percent),
                cell(r.bridge_idle_cpu_percent),
                cell(r.publisher_cpu_percent),
                cell(r.subscriber_cpu_percent),
                format!("{} / {}", r.received, r.sent),
                r.loss_rate
                    .map_or("–".into(), |l| format!("{:.2}", l * 100.0)),
            ]
        })
        .collect();
    (head, cells)
}

fn row<'a>(
    rows: &'a [BridgeRow],
    skipped: &[Skipped],
    scenario: &str,
    route: Route,
    bytes: usize,
) -> Result<&'a BridgeRow, String> {
    rows.iter()
        .find(|r| r.scenario == scenario && r.route == route && r.payload_bytes == bytes)
        .ok_or_else(|| {
            let name = format!("ros2 bridge {scenario} ({})", route.label());
            crate::report::why_missing(skipped, &name, |k| {
                k.system == name && k.payload_bytes == Some(bytes)
            })
        })
}

/// The bridge's targets (benchmarks: reported, never asserted).
pub fn checks(rows: &[BridgeRow], skipped: &[Skipped]) -> Vec<crate::report::Verdict> {
    use crate::report::{Measured, Verdict};
    let v = |target: &str, scope: &str, value: Measured, ok: fn(f64) -> bool| {
        Verdict::judged("topic", target, scope, value, ok)
    };
    let p50 = |d: &Dist| (d.count > 0).then_some(d.p50);
    let mut out = Vec::new();
    for route in [Route::Bridge, Route::ToRos] {
        let at = |scenario: &str, bytes: usize| -> Result<(&BridgeRow, &BridgeRow), String> {
            Ok((
                row(rows, skipped, scenario, route, bytes)?,
                row(rows, skipped, scenario, Route::Rclpy, bytes)?,
            ))
        };
        let lat = at("size", 1024);
        let scope = format!("ros2 bridge {}: 1 KiB UInt8MultiArray @ 100 Hz", route.label());
        out.push(v(
            "bridge P50 - rclpy → rclpy P50 <= 50 µs",
            &scope,
            lat.clone()
                .map(|(b, r)| Some(p50(&b.latency_us)? - p50(&r.latency_us)?)),
            |d| d <= 50.0,
        ));
        for (bytes, rate) in SIZES {
            out.push(v(
                "delivered = sent (reliable)",
                &format!(
                    "ros2 bridge {}: {} UInt8MultiArray @ {rate} Hz",
                    route.label(),
                    crate::report::human_bytes(bytes)
                ),
                row(rows, skipped, "size", route, bytes).map(|b| b.loss_rate),
                |l| l == 0.0,
            ));
        }
    }
    let cloud = (|| {
        Ok::<_, String>((
            row(rows, skipped, "pointcloud", Route::Bridge, CLOUD_BYTES)?,
            row(rows, skipped, "pointcloud", Route::Rclpy, CLOUD_BYTES)?,
        ))
    })();
    let scope = "ros2 bridge: 1 MiB PointCloud2 @ 30 Hz";
    out.push(v(
        "bridge loss = 0",
        scope,
        cloud.clone().map(|(b, _)| b.loss_rate),
        |l| l == 0.0,
    ));
    out.push(v(
        "bridge P50 - rclpy → rclpy P50 <= 1000 µs",
        scope,
        cloud.map(|(b, r)| Some(p50(&b.latency_us)? - p50(&r.latency_us)?)),
        |d| d <= 1000.0,
    ));
    out.push(v(
        "bridge CPU <= 3 % of a core",
        "ros2 bridge: Imu @ 100 Hz",
        row(rows, skipped, "imu", Route::Bridge, 0).map(|b| b.bridge_cpu_percent),
        |c| c <= 3.0,
    ));
    out
}

/// The summary's lines.
pub fn summary(rows: &[BridgeRow]) -> String {
    let mut s = String::from(
        "ros2 bridge: P50 / P99 µs, bridge CPU %, received / sent (each path beside rclpy → rclpy)\n",
    );
    for r in rows {
        s.push_str(&format!(
            "  {:<11} {:<23} {:>8} @ {:>5} Hz  {:>9} / {:>9}  {:>6.0} msg/s  cpu {}  {} / {}\n",
            r.scenario,
            r.route.label(),
            crate::report::human_bytes(r.payload_bytes),
            r.rate_hz,
            crate::report::num(r.latency_us.p50),
            crate::report::num(r.latency_us.p99),
            r.received_per_s.unwrap_or(0.0),
            cell(r.bridge_cpu_percent),
            r.received,
            r.sent
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_rows_are_short_and_both_paths_are_compared() {
        let p = plans(true);
        assert!(p.iter().all(|p| p.seconds <= 3.0));
        for (bytes, _) in SIZES {
            let routes: Vec<Route> = p
                .iter()
                .filter(|p| p.scenario == "size" && p.bytes == bytes)
                .map(|p| p.route)
                .collect();
            assert_eq!(routes, [Route::Rclpy, Route::Bridge, Route::ToRos]);
        }
        let routes: Vec<Route> = p
            .iter()
            .filter(|p| p.scenario == "pointcloud")
            .map(|p| p.route)
            .collect();
        assert_eq!(routes, [Route::Rclpy, Route::Bridge]);
        assert_eq!(ros_domain(899), 100);
    }

    #[test]
    fn the_nerve_publishers_payload_is_what_the_subscribers_check() {
        let n = 64;
        let mut b = bytes_payload(n);
        let at = b.len() - n;
        b[at..at + 8].copy_from_slice(&7u64.to_le_bytes());
        b[at + 8..at + 16].copy_from_slice(&11u64.to_le_bytes());
        assert_eq!(decode(Message::Bytes, n, &b, 1).unwrap()[..2], [7, 11]);
    }

    #[test]
    fn a_bytes_carrier_is_decoded_and_checked() {
        let n = 64;
        let mut data: Vec<u8> = (0..n).map(|i| (i % 256) as u8).collect();
        data[..8].copy_from_slice(&7u64.to_le_bytes());
        data[8..16].copy_from_slice(&11u64.to_le_bytes());
        let mut b = vec![0u8; 8];
        b.extend([0, 1, 0, 0]); // encapsulation
        b.extend(0u32.to_le_bytes()); // layout.dim
        b.extend(0u32.to_le_bytes()); // layout.data_offset
        b.extend((n as u32).to_le_bytes());
        b.extend(&data);
        let a = decode(Message::Bytes, n, &b, 1).unwrap();
        assert_eq!(a[..2], [7, 11]);
        let last = b.len() - 1;
        b[last] ^= 1;
        assert!(decode(Message::Bytes, n, &b, 1).is_err());
    }
}
