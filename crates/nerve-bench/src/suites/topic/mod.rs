//! `nerve bench topic`: the cross-process method of seeds/001 (Apollo CyberRT). Two
//! processes, a one-way stream: sizes 16 B to 10 MB at 100 Hz, rates 10 to 100 Hz at
//! 1 MB, and CyberRT's four scenarios. Per point: latency from the publisher's stamp
//! (taken once the payload is written) to the subscriber's receipt, CPU of each process
//! (user + system over wall time, from /proc), RSS and PSS of each process, the shared
//! memory the system holds, and loss from sequence numbers and end counts.
//!
//! The `floor` row is a bare futex wake-up at the same rate and size: what any
//! event-driven transport can reach on this machine.

pub mod bridge;
pub mod cross_host;
mod options;
pub use options::TopicOptions;

use crate::report::Skipped;
use crate::harness::progress;
use crate::report::{
    json_rows, num, why_missing, Measured, Section, SuiteOutput, Verdict,
};
use crate::harness::child::Child;
use crate::harness::PeerError;
use crate::harness::hosts::SimHosts;
use crate::harness::machine::{cpu_ns, memory, mono_ns, shm_bytes, Machine, Memory};
use crate::peers::cyclone;
use crate::peers::rclpy::{self, Ros2};
use crate::report::plot::{bar_chart, line_chart, Axis, Series};
use crate::report::published::{CYBERRT, CYBERRT_SCENARIOS};
use crate::report::human_bytes;
use crate::harness::stats::{Dist, Recorder};
use crate::peers::stream::{Arrivals, Payload, Role, StreamSpec, StreamSystem};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

/// Sizes of the size sweep (at 100 Hz).
pub const SIZES: [usize; 7] = [16, 1024, 64 * 1024, 256 * 1024, 1 << 20, 5 << 20, 10 << 20];
/// Rates of the rate sweep (at 1 MB).
pub const RATES: [u32; 4] = [10, 20, 50, 100];
/// The points rclpy runs at in the quick run (size, rate): four sizes of the size sweep
/// and CyberRT's two sensor scenarios (the summary's points).
pub const RCLPY_QUICK_POINTS: [(usize, u32); 6] = [
    (16, 100),
    (64 * 1024, 100),
    (1 << 20, 100),
    (10 << 20, 100),
    (1 << 20, 10),
    (10 << 20, 10),
];
/// The point of the reported rclpy target: 1 MiB at 100 Hz.
pub const RCLPY_TARGET_POINT: (usize, u32) = (1 << 20, 100);

/// Systems that can run between simulated hosts.
pub const CROSS_HOST_SYSTEMS: [TopicSystem; 4] = [
    TopicSystem::Stream(StreamSystem::NerveAdaptive),
    TopicSystem::Stream(StreamSystem::NervePredictive),
    TopicSystem::Stream(StreamSystem::Zenoh),
    TopicSystem::CycloneDds,
];

/// Queue depth of Nerve's sensor QoS (what the shared-memory target is scaled by).
const NERVE_DEPTH: u64 = 4;
/// Publisher and subscriber CPUs.
const PUB_CPU: usize = 0;
const SUB_CPU: usize = 1;
const START: Duration = Duration::from_secs(30);

/// A system of the topic suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopicSystem {
    /// One of the stream systems.
    Stream(StreamSystem),
    /// Cyclone DDS via `ddsperf ping R Hz` / `pong` (one-way = round trip / 2).
    CycloneDds,
}

impl TopicSystem {
    /// Every system, in report order (ROS 2 through rclpy last).
    pub fn all() -> Vec<TopicSystem> {
        let mut v: Vec<TopicSystem> = StreamSystem::ALL
            .iter()
            .map(|s| TopicSystem::Stream(*s))
            .collect();
        v.push(TopicSystem::CycloneDds);
        v.extend(StreamSystem::RCLPY.map(TopicSystem::Stream));
        v
    }

    /// The rclpy executor, for the rclpy systems.
    pub fn rclpy(self) -> Option<rclpy::Executor> {
        match self {
            TopicSystem::Stream(s) => s.rclpy(),
            TopicSystem::CycloneDds => None,
        }
    }

    /// Command-line name.
    pub fn id(self) -> &'static str {
        match self {
            TopicSystem::Stream(s) => s.id(),
            TopicSystem::CycloneDds => "cyclonedds",
        }
    }

    /// Parses [`TopicSystem::id`].
    pub fn parse(s: &str) -> Option<TopicSystem> {
        TopicSystem::all().into_iter().find(|x| x.id() == s)
    }

    fn names(self) -> (&'static str, &'static str) {
        match self {
            TopicSystem::Stream(s) => (s.system(), s.mode()),
            TopicSystem::CycloneDds => ("cyclonedds", "ddsperf-ping"),
        }
    }
}

/// One measured point: size and rate, and the sweeps it belongs to.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Bytes per message.
    pub payload_bytes: usize,
    /// Messages per second.
    pub rate_hz: u32,
    /// "size", "rate" and/or "scenario: `<name>`".
    pub sweeps: Vec<String>,
}

/// A figure per process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PerProcess<T> {
    /// The publishing process.
    pub publisher: Option<T>,
    /// The subscribing process.
    pub subscriber: Option<T>,
}

/// One row of the report: a system at a point.
#[derive(Clone, Debug, Serialize)]
pub struct TopicRow {
    /// Always "topic".
    pub suite: &'static str,
    /// System name.
    pub system: String,
    /// Mode.
    pub mode: String,
    /// Bytes per message.
    pub payload_bytes: usize,
    /// Messages per second.
    pub rate_hz: u32,
    /// Sweeps the point belongs to.
    pub sweeps: Vec<String>,
    /// Whether the stream crossed hosts (always false here).
    pub cross_host: bool,
    /// Messages sent.
    pub sent: u64,
    /// Distinct messages received.
    pub received: u64,
    /// 1 - received / sent.
    pub loss_rate: Option<f64>,
    /// Messages that failed their integrity check.
    pub malformed: u64,
    /// One-way latency in µs.
    pub latency_us: Dist,
    /// CPU % of one core (user + system over the stream's wall time).
    pub cpu_percent: PerProcess<f64>,
    /// Resident set size in bytes at the end of the stream.
    pub rss_bytes: PerProcess<u64>,
    /// Proportional set size in bytes at the end of the stream.
    pub pss_bytes: PerProcess<u64>,
    /// Shared memory the system holds (pages of its files in /dev/shm), in bytes.
    pub shm_bytes: Option<u64>,
    /// Pages held by the largest single shared-memory file (a publisher's data segment),
    /// in bytes.
    pub shm_largest_bytes: Option<u64>,
    /// Wall time of the stream in s.
    pub seconds: f64,
    /// How the figures were derived where it differs from the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Settings of one run of the suite.
#[derive(Clone, Debug)]
pub struct TopicSuite {
    /// Sizes at 100 Hz.
    pub sizes: Vec<usize>,
    /// Rates at 1 MB.
    pub rates: Vec<u32>,
    /// Whether CyberRT's four scenarios are measured.
    pub scenarios: bool,
    /// Systems to run.
    pub systems: Vec<TopicSystem>,
    /// Seconds per point.
    pub seconds: f64,
    /// Program and leading arguments that run a stream end: `<program> <args…> <role>
    /// <spec-json>` must call [`crate::peers::stream::run_role`].
    pub role_command: (PathBuf, Vec<String>),
    /// Nerve domain of the run.
    pub domain: u32,
    /// Whether this is the `--quick` variant.
    pub quick: bool,
    /// Whether publisher and subscriber run on two simulated hosts (network namespaces
    /// joined by a veth link, private /dev/shm each; see [`crate::harness::hosts`]).
    pub cross_host: bool,
    /// The ROS 2 environment of the rclpy systems.
    pub ros2: rclpy::Settings,
    /// The points the rclpy systems run at (size, rate); `None`: every point.
    pub rclpy_points: Option<Vec<(usize, u32)>>,
    /// Whether the ROS 2 bridge's rows ([`bridge`]) are measured (on this host only).
    pub bridge: bool,
    /// Only the bridge's rows: no point of the sweeps.
    pub bridge_only: bool,
}

impl TopicSuite {
    /// The full run: every size, rate and scenario, 10 s a point.
    pub fn full(role_command: (PathBuf, Vec<String>)) -> TopicSuite {
        TopicSuite {
            sizes: SIZES.to_vec(),
            rates: RATES.to_vec(),
            scenarios: true,
            systems: TopicSystem::all(),
            seconds: 10.0,
            role_command,
            domain: crate::harness::interrupt::domain(800, 90),
            quick: false,
            cross_host: false,
            ros2: rclpy::Settings::default(),
            rclpy_points: None,
            bridge: true,
            bridge_only: false,
        }
    }

    /// The quick run: every point, 2 s each; rclpy at [`RCLPY_QUICK_POINTS`] only.
    pub fn quick(role_command: (PathBuf, Vec<String>)) -> TopicSuite {
        TopicSuite {
            seconds: 2.0,
            quick: true,
            rclpy_points: Some(RCLPY_QUICK_POINTS.to_vec()),
            ..TopicSuite::full(role_command)
        }
    }

    /// Whether rclpy runs at `point`.
    fn rclpy_at(&self, point: &Point) -> bool {
        self.rclpy_points.as_ref().is_none_or(|pts| {
            pts.iter()
                .any(|&(b, r)| b == point.payload_bytes && r == point.rate_hz)
        })
    }

    /// The points to measure, each once, with the sweeps it belongs to.
    pub fn points(&self) -> Vec<Point> {
        let mut points: Vec<Point> = Vec::new();
        let mut add = |payload_bytes: usize, rate_hz: u32, sweep: String| match points
            .iter_mut()
            .find(|p| p.payload_bytes == payload_bytes && p.rate_hz == rate_hz)
        {
            Some(p) => p.sweeps.push(sweep),
            None => points.push(Point {
                payload_bytes,
                rate_hz,
                sweeps: vec![sweep],
            }),
        };
        for &s in &self.sizes {
            add(s, 100, "size".into());
        }
        for &r in &self.rates {
            add(1 << 20, r, "rate".into());
        }
        if self.scenarios {
            for s in CYBERRT_SCENARIOS {
                add(s.payload_bytes, s.rate_hz, format!("scenario: {}", s.name));
            }
        }
        points
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.seconds > 0.0 && self.seconds <= 3600.0) {
            return Err(format!(
                "seconds per point must be in (0, 3600], got {}",
                self.seconds
            ));
        }
        if self.systems.is_empty() || self.points().is_empty() {
            return Err("at least one system and one point are needed".into());
        }
        if self.cross_host {
            if let Some(s) = self
                .systems
                .iter()
                .find(|s| !CROSS_HOST_SYSTEMS.contains(s))
            {
                return Err(format!(
                    "{} runs on one host only; across hosts: {}",
                    s.id(),
                    CROSS_HOST_SYSTEMS.map(|s| s.id()).join(", ")
                ));
            }
        }
        for p in self.points() {
            if !(16..=256 << 20).contains(&p.payload_bytes) {
                return Err(format!(
                    "size {} must be between 16 B and 256 MiB",
                    p.payload_bytes
                ));
            }
            if !(1..=10_000).contains(&p.rate_hz) {
                return Err(format!("rate {} Hz must be 1..=10000", p.rate_hz));
            }
        }
        Ok(())
    }

    /// Runs every system at every point on this host and returns the suite's output
    /// (across hosts: [`cross_host::CrossHostSuite`]).
    pub fn execute(&self, machine: &Machine) -> Result<SuiteOutput, String> {
        self.validate()?;
        if self.cross_host {
            return Err("a suite across hosts runs as cross_host::CrossHostSuite".into());
        }
        let (rows, skipped, ros2, bridge_rows) = self.measure_all(None);
        Ok(output(
            (rows, bridge_rows),
            skipped,
            machine,
            self.quick,
            // only the bridge's rows: no point of the sweeps is judged
            &if self.bridge_only {
                Vec::new()
            } else {
                self.points()
            },
            &self.systems,
            ros2.as_ref().map(|r| &r.versions),
        ))
    }

    /// Measures every system at every point, on this host or between `hosts`.
    pub(crate) fn measure(&self, hosts: Option<&SimHosts>) -> (Vec<TopicRow>, Vec<Skipped>) {
        let (rows, skipped, _, _) = self.measure_all(hosts);
        (rows, skipped)
    }

    /// [`TopicSuite::measure`], and the ROS 2 environment the rclpy systems ran in.
    fn measure_all(
        &self,
        hosts: Option<&SimHosts>,
    ) -> (
        Vec<TopicRow>,
        Vec<Skipped>,
        Option<Ros2>,
        Vec<bridge::BridgeRow>,
    ) {
        let points = self.points();
        let bar = progress(
            (points.len() * self.systems.len()) as u64,
            if self.cross_host {
                "topic across hosts"
            } else {
                "topic"
            },
        );
        let ddsperf = cyclone::locate();
        let mut rows = Vec::new();
        let mut skipped = Vec::new();
        let rclpy_planned: Vec<TopicSystem> = self
            .systems
            .iter()
            .copied()
            .filter(|s| s.rclpy().is_some())
            .collect();
        // ROS 2's environment, prepared once; a system that cannot run is skipped with why
        let mut rclpy_out: Vec<TopicSystem> = Vec::new();
        let with_bridge = self.bridge && hosts.is_none();
        let mut ros2_failed: Option<String> = None;
        let ros2 = if rclpy_planned.is_empty() && !with_bridge {
            None
        } else if hosts.is_some() {
            rclpy_out = rclpy_planned.clone();
            None
        } else {
            match self.ros2.prepare() {
                Ok(r) => Some(r),
                Err(reason) => {
                    ros2_failed = Some(reason.clone());
                    for s in &rclpy_planned {
                        let (system, mode) = s.names();
                        skipped.push(Skipped {
                            system: format!("{system} {mode}"),
                            payload_bytes: None,
                            reason: reason.clone(),
                        });
                    }
                    rclpy_out = rclpy_planned.clone();
                    None
                }
            }
        };
        if let Some(r) = &ros2 {
            if !r.events_executor
                && rclpy_planned.contains(&TopicSystem::Stream(StreamSystem::RclpyEvents))
            {
                skipped.push(Skipped {
                    system: "rclpy events".into(),
                    payload_bytes: None,
                    reason: "this rclpy has no rclpy.experimental.EventsExecutor".into(),
                });
                rclpy_out.push(TopicSystem::Stream(StreamSystem::RclpyEvents));
            }
        }
        let sweeps: &[Point] = if self.bridge_only { &[] } else { &points };
        for (i, point) in sweeps.iter().enumerate() {
            for &sys in &self.systems {
                if sys.rclpy().is_some() && (rclpy_out.contains(&sys) || !self.rclpy_at(point)) {
                    bar.inc(1);
                    continue;
                }
                bar.set_message(format!(
                    "{} {} @ {} Hz",
                    sys.id(),
                    human_bytes(point.payload_bytes),
                    point.rate_hz
                ));
                let result = match (sys, &ddsperf) {
                    (TopicSystem::CycloneDds, Err(reason)) => Err(reason.clone()),
                    (TopicSystem::CycloneDds, Ok(exe)) => self
                        .run_ddsperf(exe, point, hosts)
                        .map_err(|e| e.to_string()),
                    (TopicSystem::Stream(s), _) => self
                        .run_stream(s, point, i, hosts, ros2.as_ref())
                        .map_err(|e| e.to_string()),
                };
                match result {
                    Ok(row) => rows.push(row),
                    Err(reason) => {
                        let (system, mode) = sys.names();
                        skipped.push(Skipped {
                            system: format!("{system} {mode}"),
                            payload_bytes: Some(point.payload_bytes),
                            reason: format!("{} Hz: {reason}", point.rate_hz),
                        })
                    }
                }
                bar.inc(1);
            }
        }
        bar.finish_and_clear();
        let mut bridge_rows = Vec::new();
        if with_bridge {
            let s = crate::suites::python::spinner(
                "topic: rclpy → nerve bridge ros2 → nerve, beside rclpy → rclpy".to_string(),
            );
            let ros = match (&ros2, ros2_failed) {
                (Some(r), _) => Ok(r),
                (None, Some(why)) => Err(why),
                (None, None) => Err("no ROS 2 environment".to_string()),
            };
            let (r, k) = bridge::measure(ros, &self.ros2.venv, self.domain, self.quick);
            s.finish_and_clear();
            bridge_rows = r;
            skipped.extend(k);
        }
        (rows, skipped, ros2, bridge_rows)
    }

    fn run_stream(
        &self,
        sys: StreamSystem,
        point: &Point,
        index: usize,
        hosts: Option<&SimHosts>,
        ros2: Option<&Ros2>,
    ) -> Result<TopicRow, PeerError> {
        let count = ((self.seconds * point.rate_hz as f64).round() as u64).max(2);
        let tag = format!("{}_{index}", std::process::id());
        let endpoint = match sys {
            StreamSystem::NerveAdaptive | StreamSystem::NervePredictive => {
                format!("/bench/topic_{tag}")
            }
            StreamSystem::Floor => format!("nerve_bench_floor_{tag}"),
            StreamSystem::Iceoryx2 | StreamSystem::Iceoryx2SpinBlock => {
                format!("nerve_bench/topic/{tag}")
            }
            StreamSystem::Zenoh | StreamSystem::ZenohShm => free_tcp_port().to_string(),
            StreamSystem::Rclpy | StreamSystem::RclpyEvents => {
                format!("/nerve_bench/rclpy_{tag}")
            }
        };
        // the rclpy ends are Python processes of the ROS 2 environment
        let role_command = match (sys.rclpy(), ros2) {
            (None, _) => self.role_command.clone(),
            (Some(_), Some(ros)) => ros.stream_command(),
            (Some(_), None) => {
                return Err(PeerError::setup("rclpy", "no ROS 2 environment"));
            }
        };
        let spec = StreamSpec {
            system: sys,
            endpoint: endpoint.clone(),
            payload_bytes: point.payload_bytes,
            rate_hz: point.rate_hz as f64,
            count,
            payload: Payload::Bytes,
            domain: self.domain,
            cpu: None,
            // across hosts Nerve runs reliable, as Zenoh (blocking congestion control) does
            reliable: hosts.is_some(),
            listen_ip: hosts.map(|h| h.hosts()[0].ip.clone()),
        };
        let shm_prefix = match sys {
            // the hosts' shared memory is private to them
            _ if hosts.is_some() => None,
            StreamSystem::NerveAdaptive | StreamSystem::NervePredictive => {
                Some(format!("nerve{}_", self.domain))
            }
            StreamSystem::Floor => Some(endpoint.clone()),
            StreamSystem::Iceoryx2 | StreamSystem::Iceoryx2SpinBlock => {
                Some(crate::peers::stream::iceoryx2_prefix(self.domain))
            }
            // Fast DDS's segments are not told apart from other ROS 2 processes' here
            StreamSystem::Zenoh
            | StreamSystem::ZenohShm
            | StreamSystem::Rclpy
            | StreamSystem::RclpyEvents => None,
        };
        let place = hosts.map_or(Placement::Local, Placement::CrossHost);
        let m = measure_stream(
            &role_command,
            &spec,
            count,
            shm_prefix.as_deref(),
            place,
        );
        match sys {
            StreamSystem::Floor => {
                let _ = std::fs::remove_file(format!("/dev/shm/{endpoint}"));
            }
            StreamSystem::Iceoryx2 | StreamSystem::Iceoryx2SpinBlock if hosts.is_none() => {
                crate::peers::stream::remove_iceoryx2_leftovers(self.domain)
            }
            _ => {}
        }
        let m = m?;
        Ok(TopicRow {
            suite: "topic",
            system: sys.system().into(),
            mode: sys.mode().into(),
            payload_bytes: point.payload_bytes,
            rate_hz: point.rate_hz,
            sweeps: point.sweeps.clone(),
            cross_host: hosts.is_some(),
            sent: count,
            received: m.received,
            loss_rate: Some(1.0 - m.received as f64 / count as f64),
            malformed: m.arrivals.malformed,
            latency_us: m.latency.dist(),
            cpu_percent: m.cpu_percent,
            rss_bytes: PerProcess {
                publisher: m.memory.publisher.map(|x| x.rss_bytes),
                subscriber: m.memory.subscriber.map(|x| x.rss_bytes),
            },
            pss_bytes: PerProcess {
                publisher: m.memory.publisher.map(|x| x.pss_bytes),
                subscriber: m.memory.subscriber.map(|x| x.pss_bytes),
            },
            shm_bytes: m.shm.map(|s| s.0),
            shm_largest_bytes: m.shm.map(|s| s.1),
            seconds: m.seconds,
            note: None,
        })
    }

    fn run_ddsperf(
        &self,
        exe: &std::path::Path,
        point: &Point,
        hosts: Option<&SimHosts>,
    ) -> Result<TopicRow, PeerError> {
        let launches = hosts.map(|sim| {
            let ips: Vec<&str> = sim.hosts().iter().map(|h| h.ip.as_str()).collect();
            [0, 1].map(|i| {
                let (program, args, env) = sim.wrapper(i);
                cyclone::Launch {
                    wrapper: (program, args),
                    env: env.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                    uri: cyclone::host_uri("eth0", &ips),
                }
            })
        });
        let r = cyclone::run(
            exe,
            &cyclone::DdsperfRun {
                payload_bytes: point.payload_bytes,
                duration: Duration::from_secs_f64(self.seconds.max(1.0)),
                domain: self.domain % 230,
                client_cpu: Some(SUB_CPU),
                server_cpu: Some(PUB_CPU),
                rate_hz: Some(point.rate_hz),
                hosts: launches,
            },
        )?;
        let half = |v: f64| v / 2.0;
        Ok(TopicRow {
            suite: "topic",
            system: "cyclonedds".into(),
            mode: "ddsperf-ping".into(),
            payload_bytes: point.payload_bytes,
            rate_hz: point.rate_hz,
            sweeps: point.sweeps.clone(),
            cross_host: hosts.is_some(),
            sent: r.roundtrips,
            received: r.roundtrips,
            loss_rate: None,
            malformed: 0,
            latency_us: Dist {
                count: r.roundtrips,
                min: f64::NAN,
                avg: half(r.avg_us),
                p50: half(r.p50_us),
                p90: half(r.p90_us),
                p95: f64::NAN,
                p99: half(r.p99_us),
                p999: r.p999_us.map_or(f64::NAN, half),
                max: half(r.max_us),
            },
            cpu_percent: PerProcess::default(),
            rss_bytes: PerProcess::default(),
            pss_bytes: PerProcess::default(),
            shm_bytes: None,
            shm_largest_bytes: None,
            seconds: r.seconds,
            note: Some(
                "ddsperf ping at the rate, pong echoing: one-way = round trip / 2; its \
                 percentiles are count-weighted per-second figures; no P95, loss, CPU or \
                 memory from ddsperf"
                    .into(),
            ),
        })
    }
}

/// Where the two ends of a stream run.
pub enum Placement<'a> {
    /// Both on this host.
    Local,
    /// The publisher on the first simulated host, the subscriber on the second.
    CrossHost(&'a SimHosts),
    /// Both on the first simulated host, with extra environment.
    OnHost(&'a SimHosts, Vec<(&'static str, String)>),
}

/// What one stream measured.
pub struct StreamMeasurement {
    /// The subscriber's arrivals.
    pub arrivals: Arrivals,
    /// Distinct sequence numbers 1..=count received.
    pub received: u64,
    /// Latency histogram (ns).
    pub latency: Recorder,
    /// CPU of each process over the stream.
    pub cpu_percent: PerProcess<f64>,
    /// Memory of each process at the end.
    pub memory: PerProcess<Memory>,
    /// (total, largest file) shared memory, if measured.
    pub shm: Option<(u64, u64)>,
    /// Wall time of the stream.
    pub seconds: f64,
}

/// Runs one stream: subscriber, then publisher, each a child process pinned to its own
/// core; measures CPU between the publisher's `start` and `done`, memory at `done`.
pub fn measure_stream(
    role_command: &(PathBuf, Vec<String>),
    spec: &StreamSpec,
    count: u64,
    shm_prefix: Option<&str>,
    place: Placement<'_>,
) -> Result<StreamMeasurement, PeerError> {
    let start = |role: Role, cpu: usize| -> Result<Child, PeerError> {
        let spec = StreamSpec {
            cpu: Some(cpu),
            ..spec.clone()
        };
        let json = serde_json::to_string(&spec).map_err(|e| PeerError::setup("bench", e))?;
        let role = match role {
            Role::Publisher => "publisher",
            Role::Subscriber => "subscriber",
        };
        let mut args = role_command.1.clone();
        args.extend([role.to_string(), json]);
        let what = spec.system.system();
        match &place {
            Placement::Local => Child::spawn(&role_command.0, &args, &[], what),
            // the publisher on the first host, the subscriber on the second
            Placement::CrossHost(sim) => {
                let host = usize::from(role == "subscriber");
                sim.spawn(host, &role_command.0, &args, &[], what)
            }
            Placement::OnHost(sim, env) => sim.spawn(0, &role_command.0, &args, env, what),
        }
    };
    let mut sub = start(Role::Subscriber, SUB_CPU)?;
    sub.expect("ready", START)?;
    let mut publisher = start(Role::Publisher, PUB_CPU)?;
    if let Err(e) = publisher.expect("ready", START) {
        // the subscriber may know why
        let tail = sub.stop_and_tail();
        return Err(PeerError::call(
            spec.system.system(),
            format!("{e}; subscriber: {tail}"),
        ));
    }
    publisher.expect("start", START)?;
    let (p0, s0, t0) = (cpu_ns(publisher.pid()), cpu_ns(sub.pid()), mono_ns());
    let expected = Duration::from_secs_f64(count as f64 / spec.rate_hz.max(0.001));
    publisher.expect("done", expected + START)?;
    let (p1, s1, t1) = (cpu_ns(publisher.pid()), cpu_ns(sub.pid()), mono_ns());
    let mem = PerProcess {
        publisher: memory(publisher.pid()),
        subscriber: memory(sub.pid()),
    };
    let shm = shm_prefix.map(|p| {
        let (total, largest) = shm_held(p);
        (total, largest)
    });
    // the subscriber ends on the last message; if that one was lost, stdin closing ends it
    let line = match sub.try_expect("{", Duration::from_secs(2)) {
        Some(l) => l,
        None => {
            sub.close_stdin();
            sub.expect("{", Duration::from_secs(5))?
        }
    };
    publisher.stop();
    sub.stop();
    let arrivals: Arrivals = serde_json::from_str(&line)
        .map_err(|e| PeerError::call(spec.system.system(), format!("bad arrivals: {e}")))?;
    let wall = (t1 - t0) as f64;
    let pct = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) if wall > 0.0 => Some(b.saturating_sub(a) as f64 / wall * 100.0),
        _ => None,
    };
    let mut latency = Recorder::new();
    let mut seen = BTreeSet::new();
    for a in &arrivals.arrivals {
        if (1..=count).contains(&a[0]) && seen.insert(a[0]) {
            latency.record_ns(a[2].saturating_sub(a[1]));
        }
    }
    Ok(StreamMeasurement {
        received: seen.len() as u64,
        arrivals,
        latency,
        cpu_percent: PerProcess {
            publisher: pct(p0, p1),
            subscriber: pct(s0, s1),
        },
        memory: mem,
        shm,
        seconds: wall / 1e9,
    })
}

/// (total, largest data file) of the shared memory held by `/dev/shm` files starting with
/// `prefix`: the largest leaves out Nerve's doorbell (the wake-up table of the domain, not
/// a data segment), so it is the publisher's pool the check below compares.
fn shm_held(prefix: &str) -> (u64, u64) {
    let total = shm_bytes(prefix);
    let largest = crate::harness::machine::shm_files(prefix)
        .filter(|(name, _)| !name.contains("doorbell"))
        .map(|(_, held)| held)
        .max()
        .unwrap_or(0);
    (total, largest)
}

/// A loopback TCP port that was free a moment ago.
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(47448)
}

fn find<'a>(
    rows: &'a [TopicRow],
    system: &str,
    mode: &str,
    size: usize,
    rate: u32,
) -> Option<&'a TopicRow> {
    rows.iter().find(|r| {
        r.system == system && r.mode == mode && r.payload_bytes == size && r.rate_hz == rate
    })
}

/// `system mode` at a point, or why it has no row (skipped with this reason, or not run).
pub(crate) fn found<'a>(
    rows: &'a [TopicRow],
    skipped: &[Skipped],
    (system, mode): (&str, &str),
    size: usize,
    rate: u32,
) -> Result<&'a TopicRow, String> {
    find(rows, system, mode, size, rate).ok_or_else(|| {
        let name = format!("{system} {mode}");
        let at = format!("{rate} Hz:");
        why_missing(
            skipped,
            &format!("{name} at {} @ {rate} Hz", human_bytes(size)),
            |k| {
                (k.covers(&name, Some(size)) && k.reason.starts_with(&at))
                    // across hosts without simulated hosts, nothing ran
                    || k.system == "every system"
            },
        )
    })
}

/// The targets of every Nerve mode at every point of the run: a point Nerve or the floor
/// it is compared with did not run is judged not met, with the reason.
fn checks(
    rows: &[TopicRow],
    skipped: &[Skipped],
    points: &[Point],
    systems: &[TopicSystem],
) -> Vec<Verdict> {
    let mut out = Vec::new();
    let v = |target: &str, scope: &str, value: Measured, ok: fn(f64) -> bool| {
        Verdict::judged("topic", target, scope, value, ok)
    };
    let nerve_modes = systems.iter().filter_map(|s| match s {
        TopicSystem::Stream(s) if s.system() == "nerve" => Some(s.mode()),
        _ => None,
    });
    for mode in nerve_modes {
        for p in points {
            let (size, rate) = (p.payload_bytes, p.rate_hz);
            let at = &format!("nerve {mode} {} @ {rate} Hz", human_bytes(size));
            let n = found(rows, skipped, ("nerve", mode), size, rate);
            let floor = found(rows, skipped, ("floor", "futex"), size, rate);
            let vs_floor = |q: fn(&Dist) -> f64| -> Measured {
                let (n, f) = (n.clone()?, floor.clone()?);
                Ok(Some(q(&n.latency_us) - q(&f.latency_us)))
            };
            let of = |f: fn(&TopicRow) -> Option<f64>| n.clone().map(f);
            if mode == "adaptive" {
                out.push(v(
                    "P50 - floor P50 <= 10 µs",
                    at,
                    vs_floor(|d| d.p50),
                    |d| d <= 10.0,
                ));
                out.push(v(
                    "P99 - floor P99 <= 30 µs",
                    at,
                    vs_floor(|d| d.p99),
                    |d| d <= 30.0,
                ));
                if rate == 100 && size <= 1 << 20 {
                    out.push(v(
                        "publisher CPU <= 1 %",
                        at,
                        of(|n| n.cpu_percent.publisher),
                        |c| c <= 1.0,
                    ));
                    out.push(v(
                        "subscriber CPU <= 1 %",
                        at,
                        of(|n| n.cpu_percent.subscriber),
                        |c| c <= 1.0,
                    ));
                }
                out.push(v(
                    "publisher RSS <= 30 MB",
                    at,
                    of(|n| n.rss_bytes.publisher.map(|b| b as f64 / 1e6)),
                    |mb| mb <= 30.0,
                ));
                out.push(v(
                    "subscriber RSS <= 30 MB",
                    at,
                    of(|n| n.rss_bytes.subscriber.map(|b| b as f64 / 1e6)),
                    |mb| mb <= 30.0,
                ));
                if size >= 64 * 1024 {
                    let budget = ((NERVE_DEPTH + 2) * size as u64) as f64;
                    out.push(v(
                        "publisher data segment / ((depth + 2) x size) <= 1",
                        at,
                        n.clone()
                            .map(|n| n.shm_largest_bytes.map(|b| b as f64 / budget)),
                        |r| r <= 1.0,
                    ));
                }
                out.push(v("loss = 0", at, of(|n| n.loss_rate), |l| l == 0.0));
            } else if mode == "predictive" {
                out.push(v(
                    "P50 <= 10 µs",
                    at,
                    of(|n| Some(n.latency_us.p50)),
                    |p| p <= 10.0,
                ));
                out.push(v(
                    "subscriber CPU <= 2 %",
                    at,
                    of(|n| n.cpu_percent.subscriber),
                    |c| c <= 2.0,
                ));
                out.push(v("loss = 0", at, of(|n| n.loss_rate), |l| l == 0.0));
            }
        }
    }
    // ROS 2 measured beside Nerve (reported, seeds/001's comparison): rclpy's latency
    // over Nerve's at 1 MiB @ 100 Hz
    let (size, rate) = RCLPY_TARGET_POINT;
    if points
        .iter()
        .any(|p| p.payload_bytes == size && p.rate_hz == rate)
    {
        for sys in systems.iter().filter(|s| s.rclpy().is_some()) {
            let (system, mode) = sys.names();
            let nerve = found(rows, skipped, ("nerve", "adaptive"), size, rate);
            let ros = find(rows, system, mode, size, rate).ok_or_else(|| {
                let name = format!("{system} {mode}");
                why_missing(
                    skipped,
                    &format!("{name} at {} @ {rate} Hz", human_bytes(size)),
                    |k| k.covers(&name, Some(size)) || k.covers(&name, None),
                )
            });
            out.push(v(
                &format!("{system} {mode} P50 / nerve adaptive P50 >= 10"),
                &format!("ROS 2 vs nerve {} @ {rate} Hz", human_bytes(size)),
                nerve.and_then(|n| Ok(Some(ros?.latency_us.p50 / n.latency_us.p50))),
                |r| r >= 10.0,
            ));
        }
    }
    let size_sweep = |size: usize| {
        points
            .iter()
            .any(|p| p.payload_bytes == size && p.rate_hz == 100)
    };
    let adaptive = systems.contains(&TopicSystem::Stream(StreamSystem::NerveAdaptive));
    if adaptive && size_sweep(16) && size_sweep(10 << 20) {
        let small = found(rows, skipped, ("nerve", "adaptive"), 16, 100);
        let big = found(rows, skipped, ("nerve", "adaptive"), 10 << 20, 100);
        out.push(v(
            "P50 at 10 MB / P50 at 16 B <= 1.5",
            "nerve adaptive @ 100 Hz",
            small.and_then(|s| Ok(Some(big?.latency_us.p50 / s.latency_us.p50))),
            |r| r <= 1.5,
        ));
    }
    out
}

/// Every rclpy row beside Nerve adaptive at the same point.
fn rclpy_rows(rows: &[TopicRow]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut points: Vec<(usize, u32)> = rows
        .iter()
        .filter(|r| r.system == "rclpy")
        .map(|r| (r.payload_bytes, r.rate_hz))
        .collect();
    points.sort_unstable_by_key(|&(b, r)| (std::cmp::Reverse(r), b));
    points.dedup();
    for (size, rate) in points {
        let nerve = find(rows, "nerve", "adaptive", size, rate);
        for r in rows.iter().filter(|r| {
            (r.system == "rclpy" || (r.system == "nerve" && r.mode == "adaptive"))
                && r.payload_bytes == size
                && r.rate_hz == rate
        }) {
            let vs = (r.system == "rclpy")
                .then(|| nerve.map(|n| r.latency_us.p50 / n.latency_us.p50))
                .flatten();
            out.push(vec![
                human_bytes(size),
                rate.to_string(),
                label(r),
                num(r.latency_us.avg),
                num(r.latency_us.p50),
                num(r.latency_us.p99),
                num(r.latency_us.p999),
                num(r.latency_us.max),
                pct(r.cpu_percent.publisher),
                pct(r.cpu_percent.subscriber),
                r.loss_rate
                    .map_or("–".into(), |l| format!("{:.2}", l * 100.0)),
                vs.map_or("–".into(), |x| format!("{}×", num(x))),
            ]);
        }
    }
    out
}

fn label(r: &TopicRow) -> String {
    format!("{} {}", r.system, r.mode)
}

fn systems(rows: &[TopicRow]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for r in rows {
        let k = (r.system.clone(), r.mode.clone());
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

fn mb(b: Option<u64>) -> String {
    b.map_or("–".into(), |b| format!("{:.1}", b as f64 / 1e6))
}

fn pct(p: Option<f64>) -> String {
    p.map_or("–".into(), |p| format!("{p:.2}"))
}

fn output(
    (rows, bridge_rows): (Vec<TopicRow>, Vec<bridge::BridgeRow>),
    skipped: Vec<Skipped>,
    machine: &Machine,
    quick: bool,
    points: &[Point],
    planned: &[TopicSystem],
    rclpy_versions: Option<&std::collections::BTreeMap<String, String>>,
) -> SuiteOutput {
    let head = [
        "system",
        "size",
        "rate Hz",
        "avg µs",
        "P50 µs",
        "P95 µs",
        "P99 µs",
        "max µs",
        "CPU pub %",
        "CPU sub %",
        "RSS pub MB",
        "RSS sub MB",
        "PSS sub MB",
        "shm MB",
        "loss %",
    ];
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                label(r),
                human_bytes(r.payload_bytes),
                r.rate_hz.to_string(),
                num(r.latency_us.avg),
                num(r.latency_us.p50),
                num(r.latency_us.p95),
                num(r.latency_us.p99),
                num(r.latency_us.max),
                pct(r.cpu_percent.publisher),
                pct(r.cpu_percent.subscriber),
                mb(r.rss_bytes.publisher),
                mb(r.rss_bytes.subscriber),
                mb(r.pss_bytes.subscriber),
                mb(r.shm_bytes),
                r.loss_rate
                    .map_or("–".into(), |l| format!("{:.2}", l * 100.0)),
            ]
        })
        .collect();
    // CyberRT's scenarios beside ours
    let scen_head = [
        "scenario",
        "size / rate",
        "system",
        "CPU % (sub)",
        "latency avg µs",
        "P50 µs",
        "loss %",
        "memory",
    ];
    let mut scen_rows = Vec::new();
    for s in CYBERRT_SCENARIOS {
        let at = format!("{} / {} Hz", human_bytes(s.payload_bytes), s.rate_hz);
        scen_rows.push(vec![
            s.name.to_string(),
            at.clone(),
            format!("{} (published)", CYBERRT.system),
            format!("{:.2}", s.cpu_percent),
            format!("{:.2}", s.latency_us),
            "–".into(),
            format!("{:.1}", s.loss_percent),
            s.memory(),
        ]);
        for r in rows
            .iter()
            .filter(|r| r.payload_bytes == s.payload_bytes && r.rate_hz == s.rate_hz)
        {
            scen_rows.push(vec![
                String::new(),
                String::new(),
                label(r),
                pct(r.cpu_percent.subscriber),
                num(r.latency_us.avg),
                num(r.latency_us.p50),
                r.loss_rate
                    .map_or("–".into(), |l| format!("{:.2}", l * 100.0)),
                format!(
                    "RSS {} + {} MB, shm {} MB",
                    mb(r.rss_bytes.publisher),
                    mb(r.rss_bytes.subscriber),
                    mb(r.shm_bytes)
                ),
            ]);
        }
    }
    let sys = systems(&rows);
    let series = |f: &dyn Fn(&TopicRow) -> Option<(f64, f64)>| -> Vec<Series> {
        sys.iter()
            .map(|(s, m)| Series {
                label: format!("{s} {m}"),
                points: rows
                    .iter()
                    .filter(|r| &r.system == s && &r.mode == m)
                    .filter_map(f)
                    .collect(),
            })
            .collect()
    };
    let by_size = |q: fn(&Dist) -> f64| {
        move |r: &TopicRow| {
            (r.rate_hz == 100 && r.sweeps.iter().any(|s| s == "size"))
                .then(|| (r.payload_bytes as f64, q(&r.latency_us)))
        }
    };
    let mut section = Section::new(
        "topic (seeds/001)",
        &format!(
            "Two processes pinned to separate cores, one-way stream (seeds/001, CyberRT's \
             method), {} per point; machine: {}. The publisher writes the whole payload, \
             stamps it, sends it; the subscriber stamps the arrival (same monotonic clock). \
             CPU from /proc (user + system over wall), memory from /proc/PID/smaps_rollup, \
             shared memory as the pages its files in /dev/shm hold. The floor is a bare futex wake-up of the other \
             core at the same rate and size: what any event-driven transport pays on this \
             machine. iceoryx2 event: raw iceoryx2 publish-subscribe, the publisher notifying \
             an event after each send and the subscriber waiting on its listener (its \
             event-driven path); iceoryx2 spin-then-block: the same subscriber spinning on \
             receive() for {} µs first (the upper bound of Nerve's adaptive window) before it \
             waits on the listener.",
            if quick { "2 s" } else { "10 s" },
            machine.cpu,
            crate::peers::stream::IOX_SPIN.as_micros()
        ),
    );
    if let Some(v) = rclpy_versions {
        section.paragraph(&format!(
            "ROS 2, measured here (not quoted): {}. {}",
            rclpy::topic_config(v),
            if quick {
                "In the quick run rclpy runs at 16 B, 64 KiB, 1 MiB and 10 MiB at 100 Hz and \
                 at 1 MiB and 10 MiB at 10 Hz only."
            } else {
                ""
            }
        ));
        section.table(
            Some("ROS 2 (rclpy) beside Nerve, one-way latency (µs)"),
            &[
                "size",
                "rate Hz",
                "system",
                "avg",
                "P50",
                "P99",
                "P99.9",
                "max",
                "CPU pub %",
                "CPU sub %",
                "loss %",
                "rclpy P50 / nerve adaptive P50",
            ],
            &rclpy_rows(&rows),
        );
    }
    section.figure(
        &line_chart(
            "Latency P50 vs message size at 100 Hz",
            &Axis::log("message size (bytes)"),
            &Axis::log("latency P50 (µs)"),
            &series(&by_size(|d| d.p50)),
        ),
        "Median one-way latency per system (log-log).",
    );
    section.figure(
        &line_chart(
            "Latency P99 vs message size at 100 Hz",
            &Axis::log("message size (bytes)"),
            &Axis::log("latency P99 (µs)"),
            &series(&by_size(|d| d.p99)),
        ),
        "99th percentile one-way latency per system (log-log).",
    );
    section.figure(
        &line_chart(
            "Latency P50 vs rate at 1 MiB",
            &Axis::log("rate (Hz)"),
            &Axis::log("latency P50 (µs)"),
            &series(&|r: &TopicRow| {
                (r.payload_bytes == 1 << 20 && r.sweeps.iter().any(|s| s == "rate"))
                    .then_some((r.rate_hz as f64, r.latency_us.p50))
            }),
        ),
        "Median one-way latency at 1 MiB by rate.",
    );
    let scen_names: Vec<String> = CYBERRT_SCENARIOS
        .iter()
        .map(|s| {
            format!(
                "{} ({} / {} Hz)",
                s.name,
                human_bytes(s.payload_bytes),
                s.rate_hz
            )
        })
        .collect();
    let mut cpu_groups = vec![(
        "CyberRT (published)".to_string(),
        CYBERRT_SCENARIOS
            .iter()
            .map(|s| Some(s.cpu_percent))
            .collect(),
    )];
    let mut mem_groups = Vec::new();
    for (s, m) in &sys {
        let at = |f: &dyn Fn(&TopicRow) -> Option<f64>| -> Vec<Option<f64>> {
            CYBERRT_SCENARIOS
                .iter()
                .map(|c| find(&rows, s, m, c.payload_bytes, c.rate_hz).and_then(f))
                .collect()
        };
        cpu_groups.push((format!("{s} {m}"), at(&|r| r.cpu_percent.subscriber)));
        mem_groups.push((
            format!("{s} {m}"),
            at(&|r| {
                let total = r.rss_bytes.publisher? + r.rss_bytes.subscriber?;
                Some(total as f64 / 1e6)
            }),
        ));
    }
    section.figure(
        &bar_chart(
            "Subscriber CPU per scenario",
            &scen_names,
            &Axis::linear("CPU % of one core"),
            &cpu_groups,
        ),
        "CPU of the subscribing process in CyberRT's scenarios (CyberRT: published, other hardware).",
    );
    section.figure(
        &bar_chart(
            "Memory per scenario (RSS publisher + subscriber)",
            &scen_names,
            &Axis::log("MB"),
            &mem_groups,
        ),
        "Resident memory of both processes (CyberRT reports 250 MB plus a 1 GB arena).",
    );
    section.table(
        Some(&format!(
            "CyberRT scenarios (CyberRT: published in {}; not measured here)",
            CYBERRT.reference
        )),
        &scen_head,
        &scen_rows,
    );
    section.table(Some("Every point"), &head, &table_rows);
    let with_bridge = !bridge_rows.is_empty()
        || skipped.iter().any(|k| k.system.starts_with("ros2 bridge"));
    if with_bridge {
        section.paragraph(&bridge::describe(quick));
        let (head, cells) = bridge::table(&bridge_rows);
        section.table(
            Some("What the ROS 2 bridge adds: rclpy → nerve bridge ros2 → Nerve vs rclpy → rclpy"),
            &head,
            &cells,
        );
    }

    let mut summary = String::from("topic: one-way latency P50 / P99 µs, subscriber CPU %\n");
    for r in rows
        .iter()
        .filter(|r| r.sweeps.iter().any(|s| s.starts_with("scenario")))
    {
        summary.push_str(&format!(
            "  {:<22} {:>8} @ {:>3} Hz  {:>9} / {:>9}  cpu {}\n",
            label(r),
            human_bytes(r.payload_bytes),
            r.rate_hz,
            num(r.latency_us.p50),
            num(r.latency_us.p99),
            pct(r.cpu_percent.subscriber)
        ));
    }
    let mut checks = checks(&rows, &skipped, points, planned);
    if with_bridge {
        checks.extend(bridge::checks(&bridge_rows, &skipped));
        summary.push_str(&bridge::summary(&bridge_rows));
    }
    let mut json = json_rows(&rows);
    json.extend(json_rows(&bridge_rows));
    section.finish("topic", json, skipped, checks, summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_measured_once_with_all_their_sweeps() {
        let s = TopicSuite::quick((PathBuf::from("x"), vec![]));
        let p = s.points();
        // 7 sizes + 3 new rates + 2 new scenarios (64 KiB/10 Hz, 10 MiB/10 Hz)
        assert_eq!(p.len(), 12);
        let one_mb = p
            .iter()
            .find(|p| p.payload_bytes == 1 << 20 && p.rate_hz == 100)
            .unwrap();
        assert_eq!(one_mb.sweeps, vec!["size", "rate"]);
        let loc = p
            .iter()
            .find(|p| p.payload_bytes == 64 << 10 && p.rate_hz == 100)
            .unwrap();
        assert_eq!(loc.sweeps, vec!["size", "scenario: localization"]);
        assert!(s.validate().is_ok());
        let bad = TopicSuite {
            sizes: vec![8],
            ..s.clone()
        };
        assert!(bad.validate().unwrap_err().contains("16 B"));
        let bad = TopicSuite { seconds: 0.0, ..s };
        assert!(bad.validate().is_err());
    }

    fn row(system: &str, mode: &str, size: usize, rate: u32, p50: f64) -> TopicRow {
        TopicRow {
            suite: "topic",
            system: system.into(),
            mode: mode.into(),
            payload_bytes: size,
            rate_hz: rate,
            sweeps: vec!["size".into()],
            cross_host: false,
            sent: 10,
            received: 10,
            loss_rate: Some(0.0),
            malformed: 0,
            latency_us: Dist {
                count: 10,
                p50,
                avg: p50,
                ..Dist::default()
            },
            cpu_percent: PerProcess::default(),
            rss_bytes: PerProcess::default(),
            pss_bytes: PerProcess::default(),
            shm_bytes: None,
            shm_largest_bytes: None,
            seconds: 0.1,
            note: None,
        }
    }

    #[test]
    fn rclpy_runs_at_fewer_points_when_quick_and_is_judged_at_1_mib() {
        let quick = TopicSuite::quick((PathBuf::from("x"), vec![]));
        let at = |s: &TopicSuite, b: usize, r: u32| {
            s.rclpy_at(&Point {
                payload_bytes: b,
                rate_hz: r,
                sweeps: vec![],
            })
        };
        assert!(at(&quick, 16, 100) && at(&quick, 1 << 20, 10));
        assert!(!at(&quick, 1024, 100) && !at(&quick, 1 << 20, 50));
        let full = TopicSuite::full((PathBuf::from("x"), vec![]));
        assert!(at(&full, 1024, 100));
        assert_eq!(
            TopicSystem::parse("rclpy-events"),
            Some(TopicSystem::Stream(StreamSystem::RclpyEvents))
        );
        assert!(full.systems.iter().filter(|s| s.rclpy().is_some()).count() == 2);

        let points = quick.points();
        let rows = vec![
            row("nerve", "adaptive", 1 << 20, 100, 50.0),
            row("rclpy", "events", 1 << 20, 100, 2_500.0),
        ];
        let skipped = vec![Skipped {
            system: "rclpy single-threaded".into(),
            payload_bytes: None,
            reason: "pip install failed".into(),
        }];
        let v = checks(&rows, &skipped, &points, &TopicSystem::all());
        let ev = v
            .iter()
            .find(|c| c.target.starts_with("rclpy events P50 / nerve adaptive P50"))
            .unwrap();
        assert_eq!((ev.value, ev.met), (Some(50.0), Some(true)));
        let st = v
            .iter()
            .find(|c| c.target.starts_with("rclpy single-threaded P50"))
            .unwrap();
        assert_eq!(st.met, Some(false));
        assert!(st.target.contains("pip install failed"), "{}", st.target);

        let out = output(
            (rows, Vec::new()),
            skipped,
            &Machine::detect(),
            true,
            &points,
            &TopicSystem::all(),
            Some(&std::collections::BTreeMap::from([(
                "rclpy".to_string(),
                "9.1.2".to_string(),
            )])),
        );
        assert!(out.markdown.contains("ROS 2, measured here (not quoted): rclpy 9.1.2"));
        assert!(
            out.markdown.contains("| 1 MiB | 100 | rclpy events | 2500 | 2500 |"),
            "{}",
            out.markdown
        );
    }
}
