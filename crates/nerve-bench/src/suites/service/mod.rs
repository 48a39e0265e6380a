//! `nerve bench service`: the request/response ping-pong of seeds/000 (Segar vs ROS 2),
//! run on every system in one go. Two processes; a single-threaded client calls
//! synchronously in a loop; the server copies each request into its response; the client
//! writes the whole request and checks the whole response on every call.

mod options;
pub mod report;

use crate::harness::child::Child;
use crate::harness::machine::{cpu_ns, cpu_seconds, pin_to_cpu, AffinityGuard, Machine};
use crate::harness::stats::Recorder;
use crate::harness::PeerError;
use crate::peers::echo::EchoClient;
use crate::peers::pattern;
use crate::peers::rclpy::{self, Ros2};
use crate::peers::{self, cyclone};
use crate::report::{human_bytes, Skipped};
use crate::suite::SuiteError;
use indicatif::ProgressBar;
pub use options::ServiceOptions;
use report::{Entry, Report};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// The payload sizes of seeds/000 plus 64 B.
pub const PAYLOADS: [usize; 8] = [
    64,
    256,
    1024,
    4096,
    16 * 1024,
    64 * 1024,
    256 * 1024,
    1024 * 1024,
];

/// The payloads rclpy runs at in the quick run: four of the eight, the summary's two
/// (256 B, 1 MiB) among them.
pub const RCLPY_QUICK_PAYLOADS: [usize; 4] = [256, 4096, 64 * 1024, 1024 * 1024];
/// At most this many measured calls (and warm-up calls) per rclpy point in the quick run.
pub const RCLPY_QUICK_CALLS: (usize, usize) = (1_000, 100);
/// The payload of the reported rclpy target.
pub const RCLPY_TARGET_PAYLOAD: usize = 256;

/// How long a peer process may take to start.
const PEER_START: Duration = Duration::from_secs(20);
/// CPU the server process runs on; the client runs on the next one.
/// Shortest warm-up of a system at a payload, whatever the warm-up count.
const WARMUP_MIN: Duration = Duration::from_millis(100);
const SERVER_CPU: usize = 0;
const CLIENT_CPU: usize = 1;

/// One system (and mode) under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SystemId {
    /// Nerve, adaptive waiting (the default).
    NerveAdaptive,
    /// Nerve, busy-polling.
    NerveSpin,
    /// Nerve, sleeping until woken.
    NerveBlock,
    /// Raw iceoryx2 request-response, busy-polling.
    Iceoryx2,
    /// Zenoh queryable/get, peer mode over loopback TCP.
    Zenoh,
    /// The same with Zenoh's shared memory on (payloads by reference on one host).
    ZenohShm,
    /// Cyclone DDS ping/pong via `ddsperf`.
    CycloneDds,
    /// Unix-domain-socket echo, blocking.
    Uds,
    /// Nerve's C++ API (`nerve.hpp` over the C ABI) at both ends, adaptive waiting.
    NerveCpp,
    /// ROS 2: rclpy over Fast DDS, rclpy's default `SingleThreadedExecutor` on both ends.
    RclpySingleThreaded,
    /// ROS 2: rclpy over Fast DDS, rclpy's `EventsExecutor` on both ends.
    RclpyEvents,
}

impl SystemId {
    /// Every system, in report order.
    pub const ALL: [SystemId; 11] = [
        SystemId::NerveAdaptive,
        SystemId::NerveSpin,
        SystemId::NerveBlock,
        SystemId::NerveCpp,
        SystemId::Iceoryx2,
        SystemId::Zenoh,
        SystemId::ZenohShm,
        SystemId::CycloneDds,
        SystemId::Uds,
        SystemId::RclpySingleThreaded,
        SystemId::RclpyEvents,
    ];

    /// Name used on the command line and in peers' arguments.
    pub fn id(self) -> &'static str {
        match self {
            SystemId::NerveAdaptive => "nerve-adaptive",
            SystemId::NerveSpin => "nerve-spin",
            SystemId::NerveBlock => "nerve-block",
            SystemId::NerveCpp => "nerve-cpp",
            SystemId::Iceoryx2 => "iceoryx2",
            SystemId::Zenoh => "zenoh",
            SystemId::ZenohShm => "zenoh-shm",
            SystemId::CycloneDds => "cyclonedds",
            SystemId::Uds => "uds",
            SystemId::RclpySingleThreaded => "rclpy-single-threaded",
            SystemId::RclpyEvents => "rclpy-events",
        }
    }

    /// The rclpy executor, for the rclpy systems.
    pub fn rclpy(self) -> Option<rclpy::Executor> {
        match self {
            SystemId::RclpySingleThreaded => Some(rclpy::Executor::SingleThreaded),
            SystemId::RclpyEvents => Some(rclpy::Executor::Events),
            _ => None,
        }
    }

    /// Parses [`SystemId::id`].
    pub fn parse(s: &str) -> Option<SystemId> {
        SystemId::ALL.into_iter().find(|x| x.id() == s)
    }

    /// System name in reports.
    pub fn system(self) -> &'static str {
        match self {
            SystemId::NerveAdaptive | SystemId::NerveSpin | SystemId::NerveBlock => "nerve",
            SystemId::NerveCpp => "nerve C++",
            SystemId::Iceoryx2 => "iceoryx2",
            SystemId::Zenoh | SystemId::ZenohShm => "zenoh",
            SystemId::CycloneDds => "cyclonedds",
            SystemId::Uds => "uds",
            SystemId::RclpySingleThreaded | SystemId::RclpyEvents => "rclpy",
        }
    }

    /// Mode in reports.
    pub fn mode(self) -> &'static str {
        match self {
            SystemId::NerveAdaptive => "adaptive",
            SystemId::NerveSpin => "spin",
            SystemId::NerveBlock => "block",
            SystemId::NerveCpp => "adaptive",
            SystemId::Iceoryx2 => "busy-poll",
            SystemId::Zenoh => "peer-tcp",
            SystemId::ZenohShm => "peer-shm",
            SystemId::CycloneDds => "ddsperf",
            SystemId::Uds => "blocking",
            SystemId::RclpySingleThreaded => "single-threaded",
            SystemId::RclpyEvents => "events",
        }
    }

    fn nerve_mode(self) -> Option<nerve::WaitMode> {
        match self {
            SystemId::NerveAdaptive => Some(nerve::WaitMode::Adaptive),
            SystemId::NerveSpin => Some(nerve::WaitMode::Spin),
            SystemId::NerveBlock => Some(nerve::WaitMode::Block),
            _ => None,
        }
    }
}

/// Settings of one run of the suite.
#[derive(Clone, Debug)]
pub struct ServiceSuite {
    /// Measured calls per system and payload.
    pub calls: usize,
    /// Warm-up calls before measuring.
    pub warmup: usize,
    /// Payload sizes in bytes (multiples of 8).
    pub payloads: Vec<usize>,
    /// Systems to run.
    pub systems: Vec<SystemId>,
    /// Where report.json and report.md go.
    pub out: PathBuf,
    /// Program and leading arguments that start a peer: `<program> <args…> <system>
    /// <endpoint>` must call [`run_peer`].
    pub peer_command: (PathBuf, Vec<String>),
    /// Nerve domain of the run.
    pub domain: u32,
    /// Whether this is the `--quick` variant (recorded in the report).
    pub quick: bool,
    /// Whether this is `nerve bench service` alone: its report.json and report.md in
    /// `out` are the report (no bundle beside them).
    pub own_report: bool,
    /// The ROS 2 environment of the rclpy systems.
    pub ros2: rclpy::Settings,
    /// The payloads the rclpy systems run at; `None`: every payload.
    pub rclpy_payloads: Option<Vec<usize>>,
    /// At most this many measured and warm-up calls per rclpy point; `None`: as the others.
    pub rclpy_calls: Option<(usize, usize)>,
}

impl ServiceSuite {
    /// The full run: 10,000 calls after 1,000 warm-up per system and payload.
    pub fn full(peer_command: (PathBuf, Vec<String>)) -> ServiceSuite {
        ServiceSuite {
            calls: 10_000,
            warmup: 1_000,
            payloads: PAYLOADS.to_vec(),
            systems: SystemId::ALL.to_vec(),
            out: PathBuf::from("nerve-report"),
            peer_command,
            domain: crate::harness::interrupt::domain(900, 90),
            quick: false,
            own_report: false,
            ros2: rclpy::Settings::default(),
            rclpy_payloads: None,
            rclpy_calls: None,
        }
    }

    /// The quick run: 2,000 calls after 200 warm-up, every payload kept; rclpy at
    /// [`RCLPY_QUICK_PAYLOADS`] with at most [`RCLPY_QUICK_CALLS`].
    pub fn quick(peer_command: (PathBuf, Vec<String>)) -> ServiceSuite {
        ServiceSuite {
            calls: 2_000,
            warmup: 200,
            quick: true,
            rclpy_payloads: Some(RCLPY_QUICK_PAYLOADS.to_vec()),
            rclpy_calls: Some(RCLPY_QUICK_CALLS),
            ..ServiceSuite::full(peer_command)
        }
    }

    /// Measured and warm-up calls of an rclpy point.
    fn rclpy_calls(&self) -> (usize, usize) {
        match self.rclpy_calls {
            Some((c, w)) => (self.calls.min(c), self.warmup.min(w)),
            None => (self.calls, self.warmup),
        }
    }

    /// Whether rclpy runs at `payload`.
    fn rclpy_at(&self, payload: usize) -> bool {
        self.rclpy_payloads
            .as_ref()
            .is_none_or(|p| p.contains(&payload))
    }

    fn validate(&self) -> Result<(), SuiteError> {
        if self.calls == 0 {
            return Err(SuiteError::Invalid("calls must be at least 1".into()));
        }
        if self.payloads.is_empty() || self.systems.is_empty() {
            return Err(SuiteError::Invalid(
                "at least one payload and one system are needed".into(),
            ));
        }
        for &p in &self.payloads {
            if p == 0 || p % 8 != 0 || p > 64 << 20 {
                return Err(SuiteError::Invalid(format!(
                    "payload {p} must be a multiple of 8 between 8 B and 64 MiB"
                )));
            }
        }
        Ok(())
    }

    /// Runs every system at every payload, writes `report.json` and `report.md` into
    /// `out`, and returns the report.
    pub fn execute(&self) -> Result<Report, SuiteError> {
        self.validate()?;
        let machine = Machine::detect();
        let _restore = AffinityGuard::capture();
        let pinned = machine.pinned && pin_to_cpu(CLIENT_CPU);
        let ddsperf = cyclone::locate();
        let mut report = Report::new("service", machine, self.quick, self.calls, self.warmup);
        report.machine.pinned = pinned;
        let runs = (self.payloads.len() * self.systems.len()) as u64;
        let bar = crate::harness::progress(runs * (self.calls + self.warmup) as u64, "calls");
        let mut skipped_systems = Vec::new();
        if self.systems.contains(&SystemId::CycloneDds) {
            if let Err(reason) = &ddsperf {
                skipped_systems.push(SystemId::CycloneDds);
                report.skipped.push(Skipped {
                    system: "cyclonedds".into(),
                    payload_bytes: None,
                    reason: reason.clone(),
                });
            } else {
                report
                    .versions
                    .insert("cyclonedds".into(), cyclone_version());
            }
        }
        let ros2 = self.prepare_ros2(&mut report, &mut skipped_systems);
        // the idle CPU of rclpy's server is measured at the first payload rclpy runs at
        let rclpy_first = self.payloads.iter().copied().find(|&p| self.rclpy_at(p));
        let mut done = 0u64;
        for (pi, &payload) in self.payloads.iter().enumerate() {
            report.workload.push(self.workload(payload)?);
            for &sys in &self.systems {
                bar.set_message(format!("{} {}", sys.id(), human_bytes(payload)));
                if skipped_systems.contains(&sys)
                    || (sys.rclpy().is_some() && !self.rclpy_at(payload))
                {
                    done += (self.calls + self.warmup) as u64;
                    continue;
                }
                let result = match (sys, &ddsperf, sys.rclpy(), &ros2) {
                    (_, _, Some(exec), Some(ros)) => {
                        self.run_rclpy(ros, exec, payload, rclpy_first == Some(payload))
                    }
                    (_, _, Some(_), None) => Err(PeerError::setup("rclpy", "no ROS 2 environment")),
                    (SystemId::CycloneDds, Ok(exe), _, _) => self.run_ddsperf(exe, payload, pinned),
                    _ => self.run_peer_system(sys, payload, pi == 0, &bar),
                };
                match result {
                    Ok(entry) => report.results.push(entry),
                    Err(e) => report.skipped.push(Skipped {
                        system: format!("{} {}", sys.system(), sys.mode()),
                        payload_bytes: Some(payload),
                        reason: e.to_string(),
                    }),
                }
                done += (self.calls + self.warmup) as u64;
                bar.set_position(done);
            }
        }
        bar.finish_and_clear();
        report
            .write(&self.out)
            .map_err(|source| SuiteError::Write {
                path: self.out.display().to_string(),
                source,
            })?;
        Ok(report)
    }

    /// Prepares ROS 2's environment when an rclpy system is planned; where it cannot be
    /// had (or has no events executor), the systems are skipped with the reason.
    fn prepare_ros2(
        &self,
        report: &mut Report,
        skipped_systems: &mut Vec<SystemId>,
    ) -> Option<Ros2> {
        let planned: Vec<SystemId> = self
            .systems
            .iter()
            .copied()
            .filter(|s| s.rclpy().is_some())
            .collect();
        if planned.is_empty() {
            return None;
        }
        match self.ros2.prepare() {
            Ok(ros) => {
                for (k, v) in &ros.versions {
                    report.versions.insert(k.clone(), v.clone());
                }
                if !ros.events_executor && planned.contains(&SystemId::RclpyEvents) {
                    skipped_systems.push(SystemId::RclpyEvents);
                    report.skipped.push(Skipped {
                        system: "rclpy events".into(),
                        payload_bytes: None,
                        reason: "this rclpy has no rclpy.experimental.EventsExecutor".into(),
                    });
                }
                Some(ros)
            }
            Err(reason) => {
                for s in planned {
                    skipped_systems.push(s);
                    report.skipped.push(Skipped {
                        system: format!("{} {}", s.system(), s.mode()),
                        payload_bytes: None,
                        reason: reason.clone(),
                    });
                }
                None
            }
        }
    }

    /// One rclpy point: server and client in Python processes of the ROS 2 environment,
    /// pinned as the other systems' are.
    fn run_rclpy(
        &self,
        ros: &Ros2,
        executor: rclpy::Executor,
        payload: usize,
        measure_idle: bool,
    ) -> Result<Entry, PeerError> {
        let (calls, warmup) = self.rclpy_calls();
        let service = format!(
            "/nerve_bench/echo_{}_{}_{payload}",
            std::process::id(),
            executor.id().replace('-', "_")
        );
        let r = ros.service(&rclpy::ServiceRun {
            executor,
            service: &service,
            domain: self.domain,
            payload_bytes: payload,
            calls,
            warmup,
            cpus: Machine::detect().pinned.then_some((SERVER_CPU, CLIENT_CPU)),
            measure_idle,
        })?;
        let mut rec = Recorder::new();
        for &ns in &r.samples_ns {
            rec.record_ns(ns);
        }
        let mut note = rclpy::service_config(ros, executor);
        if Some((calls, warmup)) != Some((self.calls, self.warmup)) {
            note.push_str(&format!(
                "; {calls} calls after {} warm-up (the quick run's cap for rclpy)",
                r.warmup
            ));
        }
        Ok(Entry {
            system: "rclpy".into(),
            mode: executor.id().into(),
            payload_bytes: payload,
            calls: calls as u64,
            seconds: r.seconds,
            tps: calls as f64 / r.seconds.max(1e-9),
            rtt_us: rec.rtt(),
            cpu_percent: Some(report::CallCpu {
                client: r.client_cpu,
                server: r.server_cpu,
            }),
            idle_cpu_percent: measure_idle.then_some(report::IdleCpu {
                server: r.idle_server_cpu,
                client: None,
            }),
            note: Some(note),
        })
    }

    fn run_ddsperf(
        &self,
        exe: &std::path::Path,
        payload: usize,
        pinned: bool,
    ) -> Result<Entry, PeerError> {
        // ddsperf runs for a time, not a number of calls: give it about the time the
        // requested calls take at its typical round trip, at least 2 s.
        let secs = (self.calls as f64 * (40e-6 + payload as f64 * 1.2e-9)).max(2.0);
        let r = cyclone::run(
            exe,
            &cyclone::DdsperfRun {
                payload_bytes: payload,
                duration: Duration::from_secs_f64(secs.ceil()),
                domain: self.domain % 230,
                client_cpu: pinned.then_some(CLIENT_CPU),
                server_cpu: pinned.then_some(SERVER_CPU),
                rate_hz: None,
                hosts: None,
            },
        )?;
        Ok(Entry {
            system: "cyclonedds".into(),
            mode: "ddsperf".into(),
            payload_bytes: payload,
            calls: r.roundtrips,
            seconds: r.seconds,
            tps: r.roundtrips as f64 / r.seconds.max(1e-9),
            rtt_us: crate::harness::stats::Rtt {
                avg: r.avg_us,
                p50: r.p50_us,
                p90: r.p90_us,
                p99: r.p99_us,
                p999: r.p999_us,
                max: r.max_us,
            },
            cpu_percent: None,
            idle_cpu_percent: None,
            note: Some(
                "ddsperf's own ping/pong (it prints half round trips; doubled here); percentiles \
                 are count-weighted means of its per-second percentiles (each over at most \
                 20,000 samples); it does not fill or check the payload"
                    .into(),
            ),
        })
    }

    fn endpoint(&self, sys: SystemId, payload: usize) -> String {
        let tag = format!(
            "{}_{}_{}",
            std::process::id(),
            sys.id().replace('-', "_"),
            payload
        );
        match sys {
            SystemId::Uds => std::env::temp_dir()
                .join(format!("nerve-bench-{tag}.sock"))
                .display()
                .to_string(),
            SystemId::Zenoh => free_tcp_port().to_string(),
            // the server sizes its shared-memory provider for the payload
            SystemId::ZenohShm => format!("{}:{payload}", free_tcp_port()),
            SystemId::Iceoryx2 => format!("nerve_bench/raw/{tag}"),
            _ => format!("/bench/echo_{tag}"),
        }
    }

    fn run_peer_system(
        &self,
        sys: SystemId,
        payload: usize,
        measure_idle: bool,
        bar: &ProgressBar,
    ) -> Result<Entry, PeerError> {
        let endpoint = self.endpoint(sys, payload);
        let mut peer = Peer::start(self, sys, &endpoint)?;
        let mut client: Box<dyn EchoClient> = match sys {
            SystemId::Iceoryx2 => {
                Box::new(peers::iceoryx2::RawClient::connect(&endpoint, PEER_START)?)
            }
            SystemId::Uds => Box::new(peers::uds::Client::connect(
                std::path::Path::new(&endpoint),
                PEER_START,
            )?),
            SystemId::Zenoh | SystemId::ZenohShm => Box::new(peers::zenoh::Client::connect(
                parse_port(endpoint.split(':').next().unwrap_or_default())?,
                ZENOH_KEY,
                sys == SystemId::ZenohShm,
                payload,
                PEER_START,
            )?),
            SystemId::CycloneDds => {
                return Err(PeerError::setup(
                    "cyclonedds",
                    "ddsperf runs its own processes, not this client",
                ))
            }
            SystemId::NerveCpp => Box::new(peers::cpp::CppEchoClient::connect(
                &endpoint,
                self.domain,
                PEER_START,
            )?),
            nerve_sys => Box::new(peers::nerve::NerveClient::connect(
                &self.context()?,
                &endpoint,
                nerve_sys.nerve_mode().unwrap_or_default(),
                PEER_START,
            )?),
        };
        let mut seed = (payload as u64) << 32;
        let mut call = |client: &mut Box<dyn EchoClient>| {
            seed += 1;
            let s = seed;
            client.call(
                payload,
                &mut |b: &mut [u8]| pattern::fill(b, s),
                &mut |b: &[u8]| pattern::verify(b, payload, s),
            )
        };
        // warm-up: the calls asked for, and at least WARMUP_MIN of them: 200 calls are
        // under a millisecond at small payloads, too short for a fresh pair of processes
        // (page faults, the adaptive windows, the vCPUs' state) to settle
        let warm = Instant::now();
        let mut warmed = 0usize;
        while warmed < self.warmup || warm.elapsed() < WARMUP_MIN {
            call(&mut client)?;
            warmed += 1;
        }
        bar.inc(self.warmup as u64);
        let mut rec = Recorder::new();
        let (me, server) = (std::process::id(), peer.child.pid());
        let (client0, server0) = (cpu_ns(me), cpu_ns(server));
        let start = Instant::now();
        for i in 0..self.calls {
            let t = Instant::now();
            call(&mut client)?;
            rec.record(t.elapsed());
            if i % 1024 == 1023 {
                bar.inc(1024);
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        let (client1, server1) = (cpu_ns(me), cpu_ns(server));
        let pct = |a: Option<u64>, b: Option<u64>| {
            Some(b?.saturating_sub(a?) as f64 / 1e9 / seconds.max(1e-9) * 100.0)
        };
        let cpu = report::CallCpu {
            client: pct(client0, client1),
            server: pct(server0, server1),
        };
        let idle = if measure_idle && !matches!(sys, SystemId::Zenoh | SystemId::ZenohShm) {
            Some(peer.idle_cpu(Duration::from_secs(1)))
        } else {
            None
        };
        drop(client);
        peer.stop();
        if sys == SystemId::Iceoryx2 {
            peers::iceoryx2::remove_leftovers();
        }
        Ok(Entry {
            system: sys.system().into(),
            mode: sys.mode().into(),
            payload_bytes: payload,
            calls: self.calls as u64,
            seconds,
            tps: self.calls as f64 / seconds,
            rtt_us: rec.rtt(),
            cpu_percent: Some(cpu),
            idle_cpu_percent: idle,
            note: None,
        })
    }

    /// The echo work alone at `payload` (client on this thread, server on the server's
    /// core, no transport): as many calls as a system's run.
    fn workload(&self, payload: usize) -> Result<report::Workload, SuiteError> {
        let pinned = Machine::detect().pinned;
        let mut w = peers::echo::WorkloadOnly::start(pinned.then_some(SERVER_CPU));
        let mut rec = Recorder::new();
        let total = self.warmup + self.calls;
        let mut measured = Instant::now();
        for i in 0..total {
            if i == self.warmup {
                measured = Instant::now();
            }
            let s = ((payload as u64) << 32) + 1 + i as u64;
            let t = Instant::now();
            w.call(
                payload,
                &mut |b: &mut [u8]| pattern::fill(b, s),
                &mut |b: &[u8]| pattern::verify(b, payload, s),
            )?;
            if i >= self.warmup {
                rec.record(t.elapsed());
            }
        }
        let seconds = measured.elapsed().as_secs_f64().max(1e-9);
        Ok(report::Workload {
            payload_bytes: payload,
            rtt_us: rec.rtt(),
            tps: self.calls as f64 / seconds,
        })
    }

    fn context(&self) -> Result<nerve::Context, PeerError> {
        nerve::Config::default()
            .domain(self.domain)
            .map_err(|e| e.to_string())
            .and_then(|c| nerve::Context::new(c).map_err(|e| e.to_string()))
            .map_err(|reason| PeerError::Setup {
                system: "nerve",
                reason,
            })
    }
}

/// Key the Zenoh echo queryable serves.
const ZENOH_KEY: &str = "nerve/bench/echo";

fn parse_port(s: &str) -> Result<u16, PeerError> {
    s.parse().map_err(|_| PeerError::Setup {
        system: "zenoh",
        reason: format!("bad port {s:?}"),
    })
}

/// A loopback TCP port that was free a moment ago.
fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(47447)
}

fn cyclone_version() -> String {
    Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", "cyclonedds-tools"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// A server process of one system; stopped (SIGTERM, then SIGKILL) when done.
struct Peer {
    child: Child,
}

impl Peer {
    fn start(suite: &ServiceSuite, sys: SystemId, endpoint: &str) -> Result<Peer, PeerError> {
        let (exe, args) = &suite.peer_command;
        let mut args = args.clone();
        args.extend([sys.id().to_string(), endpoint.to_string()]);
        let env = [
            ("NERVE_DOMAIN", suite.domain.to_string()),
            ("NERVE_BENCH_CPU", SERVER_CPU.to_string()),
        ];
        let mut child = Child::spawn(exe, &args, &env, sys.system())?;
        child.expect("ready", PEER_START)?;
        Ok(Peer { child })
    }

    /// CPU the idle server used, and this (client) process used, over `window`, in %.
    fn idle_cpu(&self, window: Duration) -> report::IdleCpu {
        let me = std::process::id();
        let server = self.child.pid();
        let (s0, c0) = (cpu_seconds(server), cpu_seconds(me));
        std::thread::sleep(window);
        let (s1, c1) = (cpu_seconds(server), cpu_seconds(me));
        let pct = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(((b - a) / window.as_secs_f64() * 100.0).max(0.0)),
            _ => None,
        };
        report::IdleCpu {
            server: pct(s0, s1),
            client: pct(c0, c1),
        }
    }

    fn stop(&mut self) {
        self.child.terminate();
    }
}

/// Runs the server side of `system` at `endpoint` until SIGTERM; prints `ready` once it
/// serves. Called in the peer process the suite starts.
pub fn run_peer(system: &str, endpoint: &str) -> Result<(), PeerError> {
    let sys = SystemId::parse(system).ok_or_else(|| PeerError::Setup {
        system: "bench",
        reason: format!("unknown system {system:?}"),
    })?;
    if let Some(cpu) = std::env::var("NERVE_BENCH_CPU")
        .ok()
        .and_then(|c| c.parse().ok())
    {
        pin_to_cpu(cpu);
    }
    nerve::shutdown::install();
    let mut ready = || {
        use std::io::Write;
        println!("ready");
        let _ = std::io::stdout().flush();
    };
    match sys {
        SystemId::Iceoryx2 => peers::iceoryx2::serve(endpoint, &mut ready),
        SystemId::Uds => peers::uds::serve(std::path::Path::new(endpoint), &mut ready),
        SystemId::Zenoh => {
            peers::zenoh::serve(parse_port(endpoint)?, ZENOH_KEY, false, 0, &mut ready)
        }
        SystemId::ZenohShm => {
            let (port, payload) = endpoint.split_once(':').unwrap_or((endpoint, "0"));
            let payload = payload.parse().map_err(|_| PeerError::Setup {
                system: "zenoh",
                reason: format!("bad payload size in {endpoint:?}"),
            })?;
            peers::zenoh::serve(parse_port(port)?, ZENOH_KEY, true, payload, &mut ready)
        }
        SystemId::CycloneDds => Err(PeerError::Setup {
            system: "cyclonedds",
            reason: "ddsperf runs its own processes".into(),
        }),
        SystemId::RclpySingleThreaded | SystemId::RclpyEvents => Err(PeerError::Setup {
            system: "rclpy",
            reason: "the rclpy ends run in Python (rclpy_bench.py)".into(),
        }),
        SystemId::NerveCpp => peers::cpp::serve(endpoint, &mut ready),
        nerve_sys => {
            let ctx = nerve::Context::from_env().map_err(|e| PeerError::Setup {
                system: "nerve",
                reason: e.to_string(),
            })?;
            peers::nerve::serve(
                &ctx,
                endpoint,
                nerve_sys.nerve_mode().unwrap_or_default(),
                &mut ready,
            )
        }
    }
}
