//! `nerve bench …`: the benchmark suites (see the nerve-bench crate).

use crate::{usage, CmdResult, Failure};
use clap::{Args, Subcommand};
use nerve_bench::bag::BagSuite;
use nerve_bench::bundle::{Bundle, SuiteOutput};
use nerve_bench::control::ControlSuite;
use nerve_bench::cross_host::CrossHostSuite;
use nerve_bench::lidar::LidarSuite;
use nerve_bench::machine::Machine;
use nerve_bench::paths::{
    run_pongers, run_sinks, MessageKind, PathsSuite, PongSpec, Route, SinkSpec,
};
use nerve_bench::python::{run_py_ponger, PyMsg, PythonSuite, ALL_SYSTEMS as PY_SYSTEMS};
use nerve_bench::scheduler::{run_idle, run_load, LoadSpec, SchedSystem, SchedulerSuite};
use nerve_bench::service::{ServiceSuite, SystemId};
use nerve_bench::stream::{run_role, Role, StreamSpec};
use nerve_bench::timer::{run_cycle, CycleSpec, TimerSuite, TimerSystem};
use nerve_bench::topic::{TopicSuite, TopicSystem};
use std::path::PathBuf;

/// Benchmark suites.
#[derive(Subcommand)]
pub enum BenchCommand {
    /// Request/response ping-pong (seeds/000) on Nerve and its peers side by side.
    Service(ServiceArgs),
    /// One-way streams (seeds/001, CyberRT): latency, CPU, memory and loss by size and rate.
    Topic(TopicArgs),
    /// Ping-pong by route, topology and message type (seeds/004, HORUS).
    Paths(PathsArgs),
    /// Point clouds from a simulated Ouster driver (seeds/003): jitter and end-to-end latency.
    Lidar(LidarArgs),
    /// One-shot timer precision in a cyclic state machine (seeds/002), beside a sleep loop,
    /// a tokio interval and absolute clock_nanosleep deadlines with 1 ns timer slack.
    Timer(TimerArgs),
    /// Scheduled nodes at 1 kHz to 10 Hz (seeds/004): rate, jitter, deadline misses,
    /// overhead from 10 to 200 nodes, idle CPU.
    Scheduler(SchedulerArgs),
    /// Nerve's Python package beside the Python bindings of iceoryx2, Zenoh and Cyclone DDS
    /// and plain-Python baselines: ping-pong (also against a Rust ponger), streams, tensor
    /// hand-off, CPU. Prepares a virtual environment with the peers and a release build of
    /// the package.
    Python(PythonArgs),
    /// Recording and replay (`nerve bag`): throughput, drops and recorder CPU at CyberRT's
    /// scenarios and 1 kHz, saturation beside the raw disk, playback timing error.
    Bag(BagArgs),
    /// Parameters, actions and launch: an action round trip and a parameter set beside a
    /// service call, the idle CPU of a node with both, launch of 20 processes.
    Control(ControlArgs),
    /// Every suite (service, topic, paths, lidar, timer, scheduler, python, bag, control)
    /// into one report with plots.
    All(AllArgs),
    /// The Rust ponger of the Python ping-pong (started by pybench.py): answers every
    /// message on the ping topic with the same message on the pong topic until STOP.
    #[command(hide = true, name = "py-ponger")]
    PyPonger {
        /// Message: cmdvel or imu.
        #[arg(long)]
        msg: String,
        /// Topic the Python pinger publishes on.
        #[arg(long)]
        ping_topic: String,
        /// Topic the answers go to.
        #[arg(long)]
        pong_topic: String,
    },
    /// One end of a stream (started by the suites themselves).
    #[command(hide = true)]
    Role {
        /// publisher, subscriber, ponger, sink, timer-cycle, scheduler, idle-executor or
        /// pipeline-stage.
        role: String,
        /// The stream's settings as JSON.
        spec: String,
    },
    /// Server side of one system (started by the suites themselves).
    #[command(hide = true)]
    Peer {
        /// System id.
        system: String,
        /// Where to serve (service name, socket path or port).
        endpoint: String,
    },
}

/// Options of `bench service`.
#[derive(Args)]
pub struct ServiceArgs {
    /// 2,000 calls after 200 warm-up per system and payload (instead of 10,000 after 1,000).
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json and report.md.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Measured calls per system and payload (overrides --quick).
    #[arg(long)]
    calls: Option<usize>,
    /// Warm-up calls per system and payload (overrides --quick).
    #[arg(long)]
    warmup: Option<usize>,
    /// Payload sizes in bytes, comma-separated (multiples of 8), e.g. 64,4096,1048576.
    #[arg(long, value_delimiter = ',')]
    payloads: Option<Vec<usize>>,
    /// Systems to run, comma-separated: nerve-adaptive, nerve-spin, nerve-block, iceoryx2,
    /// zenoh, zenoh-shm, cyclonedds, uds.
    #[arg(long, value_delimiter = ',')]
    systems: Option<Vec<String>>,
}

/// Options of `bench topic`.
#[derive(Args)]
pub struct TopicArgs {
    /// 2 s per point instead of 10 s (every size, rate and scenario kept).
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Seconds per point (overrides --quick).
    #[arg(long)]
    seconds: Option<f64>,
    /// Sizes of the size sweep at 100 Hz, in bytes, comma-separated.
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<usize>>,
    /// Rates of the rate sweep at 1 MiB, in Hz, comma-separated.
    #[arg(long, value_delimiter = ',')]
    rates: Option<Vec<u32>>,
    /// Leave out CyberRT's four scenarios.
    #[arg(long)]
    no_scenarios: bool,
    /// Systems, comma-separated: nerve-adaptive, nerve-predictive, floor, iceoryx2,
    /// iceoryx2-spin-block, zenoh, zenoh-shm, cyclonedds (across hosts: nerve-adaptive,
    /// nerve-predictive, zenoh, cyclonedds).
    #[arg(long, value_delimiter = ',')]
    systems: Option<Vec<String>>,
    /// Run publisher and subscriber on two simulated hosts (network namespaces joined by
    /// veth, private /dev/shm each; needs root): Nerve over its network plane, raw Zenoh
    /// and Cyclone DDS, the size sweep and CyberRT's cross-machine scenarios.
    #[arg(long)]
    cross_host: bool,
}

/// Options of `bench paths`.
#[derive(Args)]
pub struct PathsArgs {
    /// 1,000 round trips after 100 warm-up instead of 10,000 after 1,000.
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Measured round trips per pinger (overrides --quick).
    #[arg(long)]
    iterations: Option<usize>,
    /// Warm-up round trips per pinger (overrides --quick).
    #[arg(long)]
    warmup: Option<usize>,
    /// Messages, comma-separated: CmdVel, BatteryState, Imu, Odometry, LaserScan,
    /// PointCloud1K, PointCloud10K.
    #[arg(long, value_delimiter = ',')]
    messages: Option<Vec<String>>,
    /// Routes, comma-separated: same-thread, cross-thread, cross-process.
    #[arg(long, value_delimiter = ',')]
    routes: Option<Vec<String>>,
    /// Topologies as pingers:pongers, comma-separated, e.g. 1:1,4:4.
    #[arg(long, value_delimiter = ',')]
    topologies: Option<Vec<String>>,
    /// Only the ping-pong latency (and the floor), no load runs.
    #[arg(long, conflicts_with = "load_only")]
    latency_only: bool,
    /// Only the load runs (throughput, bursts, send-only, the mixed loop, scaling).
    #[arg(long)]
    load_only: bool,
}

/// Builds the paths suite from its arguments.
fn paths_suite(a: &PathsArgs) -> Result<PathsSuite, Failure> {
    let mut suite = if a.quick {
        PathsSuite::quick(role_command()?)
    } else {
        PathsSuite::full(role_command()?)
    };
    if let Some(i) = a.iterations {
        suite.iterations = i;
    }
    if let Some(w) = a.warmup {
        suite.warmup = w;
    }
    suite.latency = !a.load_only;
    suite.load = !a.latency_only;
    if let Some(m) = &a.messages {
        suite.messages = m
            .iter()
            .map(|s| MessageKind::parse(s).ok_or_else(|| usage(format!("unknown message {s:?}"))))
            .collect::<Result<_, Failure>>()?;
    }
    if let Some(r) = &a.routes {
        suite.routes = r
            .iter()
            .map(|s| {
                Route::ALL
                    .into_iter()
                    .find(|x| x.name() == s)
                    .ok_or_else(|| usage(format!("unknown route {s:?}")))
            })
            .collect::<Result<_, Failure>>()?;
    }
    if let Some(t) = &a.topologies {
        suite.topologies = t
            .iter()
            .map(|s| {
                let bad = || usage(format!("topology {s:?} must look like 2:1"));
                let (a, b) = s.split_once(':').ok_or_else(bad)?;
                Ok((a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?))
            })
            .collect::<Result<_, Failure>>()?;
    }
    suite.validate().map_err(usage)?;
    Ok(suite)
}

/// Options of `bench lidar`.
#[derive(Args)]
pub struct LidarArgs {
    /// 100 frames per mode instead of 1,000.
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Frames per mode and system (overrides --quick).
    #[arg(long)]
    frames: Option<u64>,
    /// Modes by columns, comma-separated: 512, 1024, 2048.
    #[arg(long, value_delimiter = ',')]
    modes: Option<Vec<u32>>,
    /// Beam counts, comma-separated (16 for OS1-16, 64 for OS1-64).
    #[arg(long, value_delimiter = ',')]
    beams: Option<Vec<u32>>,
}

/// Options of `bench bag`.
#[derive(Args)]
pub struct BagArgs {
    /// 3 s per scenario, 2 x 1 GiB saturation, 4 s replay, no lz4 (instead of 10 s,
    /// 3 x 2 GiB, 10 s, lz4 too).
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Seconds per recording scenario (overrides --quick).
    #[arg(long)]
    seconds: Option<f64>,
    /// MiB written in the saturation run (overrides --quick).
    #[arg(long)]
    saturation_mib: Option<usize>,
}

fn bag_suite(quick: bool, out: &std::path::Path) -> Result<BagSuite, Failure> {
    let exe = std::env::current_exe()?;
    let scratch = out.join("bag-scratch");
    Ok(if quick {
        BagSuite::quick(exe, scratch)
    } else {
        BagSuite::full(exe, scratch)
    })
}

/// Options of `bench control`.
#[derive(Args)]
pub struct ControlArgs {
    /// 2,000 round trips per kind after 200 warm-up, 3 s idle (instead of 10,000 after
    /// 1,000, 10 s).
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Measured round trips per kind and payload (overrides --quick).
    #[arg(long)]
    calls: Option<usize>,
    /// Payload sizes in bytes, comma-separated.
    #[arg(long, value_delimiter = ',')]
    payloads: Option<Vec<usize>>,
}

fn control_suite(a: &ControlArgs) -> Result<ControlSuite, Failure> {
    let mut suite = if a.quick {
        ControlSuite::quick(role_command()?)
    } else {
        ControlSuite::full(role_command()?)
    };
    if let Some(c) = a.calls {
        if c == 0 {
            return Err(usage("--calls must be at least 1"));
        }
        suite.calls = c;
    }
    if let Some(p) = &a.payloads {
        if p.is_empty() || p.iter().any(|&b| b > 64 << 20) {
            return Err(usage("--payloads: sizes from 0 to 64 MiB"));
        }
        suite.payloads = p.clone();
    }
    Ok(suite)
}

/// Options of `bench timer`.
#[derive(Args)]
pub struct TimerArgs {
    /// N = 200 cycles per point instead of 1,000 (every timeout and system kept).
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Measured cycles per system and timeout (overrides --quick).
    #[arg(long)]
    cycles: Option<u64>,
    /// One-shot timeouts in ms, comma-separated.
    #[arg(long, value_delimiter = ',')]
    timeouts: Option<Vec<u32>>,
    /// Systems, comma-separated: nerve, nerve-rt, nerve-sleep-only, std-sleep,
    /// tokio-interval, clock-nanosleep.
    #[arg(long, value_delimiter = ',')]
    systems: Option<Vec<String>>,
}

/// Parses ids into values, or a usage error naming the unknown id and the known ones.
fn pick<T>(
    ids: &[String],
    what: &str,
    parse: impl Fn(&str) -> Option<T>,
    known: &[&str],
) -> Result<Vec<T>, Failure> {
    ids.iter()
        .map(|id| {
            parse(id).ok_or_else(|| {
                usage(format!(
                    "unknown {what} {id:?}; known: {}",
                    known.join(", ")
                ))
            })
        })
        .collect()
}

fn timer_suite(a: &TimerArgs) -> Result<TimerSuite, Failure> {
    let mut suite = if a.quick {
        TimerSuite::quick(role_command()?)
    } else {
        TimerSuite::full(role_command()?)
    };
    if let Some(c) = a.cycles {
        suite.cycles = c;
    }
    if let Some(t) = &a.timeouts {
        suite.timeouts_ms = t.clone();
    }
    if let Some(s) = &a.systems {
        let known = TimerSystem::ALL.map(|s| s.id());
        suite.systems = pick(s, "timer system", TimerSystem::parse, &known)?;
    }
    suite.validate().map_err(usage)?;
    Ok(suite)
}

/// Options of `bench scheduler`.
#[derive(Args)]
pub struct SchedulerArgs {
    /// 10 s per system instead of 60 s, 2 s per scaling point instead of 5 s.
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Seconds of the mixed-rate run per system (overrides --quick).
    #[arg(long)]
    seconds: Option<f64>,
    /// Node counts of the scaling runs, comma-separated.
    #[arg(long, value_delimiter = ',')]
    scales: Option<Vec<usize>>,
    /// Systems of the mixed-rate run, comma-separated: nerve-rt, nerve, threads.
    #[arg(long, value_delimiter = ',')]
    systems: Option<Vec<String>>,
}

fn scheduler_suite(a: &SchedulerArgs) -> Result<SchedulerSuite, Failure> {
    let mut suite = if a.quick {
        SchedulerSuite::quick(role_command()?)
    } else {
        SchedulerSuite::full(role_command()?)
    };
    if let Some(s) = a.seconds {
        suite.seconds = s;
    }
    if let Some(s) = &a.scales {
        suite.scales = s.clone();
    }
    if let Some(s) = &a.systems {
        let known = SchedSystem::ALL.map(|s| s.id());
        suite.systems = pick(s, "scheduler system", SchedSystem::parse, &known)?;
    }
    suite.validate().map_err(usage)?;
    Ok(suite)
}

/// Options of `bench python`.
#[derive(Args)]
pub struct PythonArgs {
    /// 20,000 round trips instead of 200,000, 2 s per stream point instead of 10 s, 20
    /// tensors per size instead of 200, 3 s per CPU point instead of 10 s.
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Virtual environment to use, created and filled if needed (default: $NERVE_BENCH_VENV,
    /// else bench-venv in the workspace's target directory, $CARGO_TARGET_DIR respected).
    #[arg(long)]
    venv: Option<PathBuf>,
    /// Systems, comma-separated: nerve, iceoryx2, shm_pipe, pickle_uds, zenoh, cyclonedds,
    /// sleep_loop.
    #[arg(long, value_delimiter = ',')]
    systems: Option<Vec<String>>,
}

fn ponger_command() -> Result<(PathBuf, Vec<String>), Failure> {
    Ok((
        std::env::current_exe()?,
        vec!["bench".to_string(), "py-ponger".to_string()],
    ))
}

fn python_suite(a: &PythonArgs) -> Result<PythonSuite, Failure> {
    let mut suite = if a.quick {
        PythonSuite::quick(ponger_command()?)
    } else {
        PythonSuite::full(ponger_command()?)
    };
    if let Some(v) = &a.venv {
        suite.venv = v.clone();
    }
    if let Some(s) = &a.systems {
        suite.systems = pick(
            s,
            "python system",
            |id| PY_SYSTEMS.contains(&id).then(|| id.to_string()),
            &PY_SYSTEMS,
        )?;
    }
    suite.validate().map_err(usage)?;
    Ok(suite)
}

/// Options of `bench all`.
#[derive(Args)]
pub struct AllArgs {
    /// Every suite's quick variant (about 30 minutes on 2 cores).
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Every suite at its smallest (a few seconds each): for tests of the whole pipeline.
    #[arg(long, hide = true)]
    smoke: bool,
}

fn lidar_suite(a: &LidarArgs) -> Result<LidarSuite, Failure> {
    let mut suite = if a.quick {
        LidarSuite::quick(role_command()?)
    } else {
        LidarSuite::full(role_command()?)
    };
    if let Some(f) = a.frames {
        suite.frames = f;
    }
    if let Some(m) = &a.modes {
        suite.modes = m.clone();
    }
    if let Some(b) = &a.beams {
        suite.beams = b.clone();
    }
    suite.validate().map_err(usage)?;
    Ok(suite)
}

/// Runs the service suite and returns its part of a combined report.
fn service_output(a: &AllArgs) -> Result<SuiteOutput, Failure> {
    let exe = std::env::current_exe()?;
    let peer = (exe, vec!["bench".to_string(), "peer".to_string()]);
    let mut suite = if a.quick {
        ServiceSuite::quick(peer)
    } else {
        ServiceSuite::full(peer)
    };
    if a.smoke {
        (suite.calls, suite.warmup, suite.payloads) = (20, 2, vec![64]);
    }
    suite.out = a.out.join("service");
    let report = suite.run().map_err(|e| Failure::Runtime(e.into()))?;
    Ok(report.to_suite_output())
}

fn role_command() -> Result<(PathBuf, Vec<String>), Failure> {
    Ok((
        std::env::current_exe()?,
        vec!["bench".to_string(), "role".to_string()],
    ))
}

/// Builds the topic suite from its arguments.
fn topic_suite(a: &TopicArgs) -> Result<TopicSuite, Failure> {
    let mut suite = if a.cross_host {
        CrossHostSuite::new(a.quick, role_command()?).0
    } else if a.quick {
        TopicSuite::quick(role_command()?)
    } else {
        TopicSuite::full(role_command()?)
    };
    if let Some(s) = a.seconds {
        suite.seconds = s;
    }
    if let Some(s) = &a.sizes {
        suite.sizes = s.clone();
    }
    if let Some(r) = &a.rates {
        suite.rates = r.clone();
    }
    suite.scenarios = !a.no_scenarios;
    if let Some(s) = &a.systems {
        let known: Vec<&str> = TopicSystem::all().iter().map(|s| s.id()).collect();
        suite.systems = pick(s, "topic system", TopicSystem::parse, &known)?;
    }
    suite.validate().map_err(usage)?;
    Ok(suite)
}

/// Writes a bundle of suites and prints where it went.
fn write_bundle(out: &std::path::Path, quick: bool, suites: Vec<SuiteOutput>) -> CmdResult {
    let bundle = Bundle {
        machine: Machine::detect(),
        versions: nerve_bench::report::versions(),
        quick,
        suites,
    };
    bundle.write(out)?;
    print!("{}", bundle.summary());
    println!(
        "report: {0}/index.html, {0}/report.md and {0}/report.json",
        out.display()
    );
    Ok(())
}

/// `bench all`: every suite in one run, one report.
fn run_all(a: &AllArgs) -> CmdResult {
    let machine = Machine::detect();
    let quick = a.quick || a.smoke;
    eprintln!(
        "nerve bench all ({}): service, topic, topic across hosts, paths, lidar, timer, \
         scheduler, python, bag, control",
        if quick { "quick" } else { "full" }
    );
    let mut suites = vec![service_output(a)?];
    let rc = role_command()?;
    let mut topic = if quick {
        TopicSuite::quick(rc.clone())
    } else {
        TopicSuite::full(rc.clone())
    };
    let mut cross = CrossHostSuite::new(quick, rc.clone());
    let mut paths = if quick {
        PathsSuite::quick(rc.clone())
    } else {
        PathsSuite::full(rc.clone())
    };
    let mut lidar = if quick {
        LidarSuite::quick(rc.clone())
    } else {
        LidarSuite::full(rc.clone())
    };
    let mut timer = if quick {
        TimerSuite::quick(rc.clone())
    } else {
        TimerSuite::full(rc.clone())
    };
    let mut scheduler = if quick {
        SchedulerSuite::quick(rc.clone())
    } else {
        SchedulerSuite::full(rc.clone())
    };
    let mut control = if quick {
        ControlSuite::quick(rc)
    } else {
        ControlSuite::full(rc)
    };
    let mut python = if quick {
        PythonSuite::quick(ponger_command()?)
    } else {
        PythonSuite::full(ponger_command()?)
    };
    let mut bag = bag_suite(quick, &a.out)?;
    if a.smoke {
        (bag.seconds, bag.saturation_mib, bag.play_seconds) = (0.5, 16, 0.5);
        bag.conversion_ms = 2;
        bag.bridge_frames = 3;
        bag.saturation_repeats = 1;
        bag.compressions = vec!["none".into()];
        (topic.sizes, topic.rates, topic.scenarios, topic.seconds) = (vec![16], vec![], false, 0.3);
        (cross.0.sizes, cross.0.scenarios, cross.0.seconds) = (vec![1024], false, 0.5);
        (paths.iterations, paths.warmup) = (50, 5);
        (paths.topologies, paths.messages) = (vec![(1, 1), (2, 1)], vec![MessageKind::CmdVel]);
        paths.load_count = Some(2_000);
        (lidar.frames, lidar.modes, lidar.beams) = (5, vec![512], vec![16]);
        lidar.pipeline_frames = 5;
        (timer.cycles, timer.timeouts_ms) = (5, vec![5]);
        (
            scheduler.seconds,
            scheduler.scale_seconds,
            scheduler.idle_seconds,
        ) = (0.3, 0.2, 0.3);
        scheduler.scales = vec![10, 50];
        // only where a ready environment exists: never a pip install or a release build
        python.setup = false;
        python.systems = vec!["nerve".into()];
        (python.round_trips, python.warmup, python.tensors) = (50, 5, 3);
        (python.stream_sizes, python.stream_seconds) = (vec![1024], 0.3);
        (python.tensor_mib, python.cpu_seconds) = (vec![1], 0.3);
        (control.calls, control.warmup, control.idle_seconds) = (50, 5, 0.3);
        (control.launch_processes, control.launch_singles) = (3, 1);
        control.payloads = vec![64];
    }
    suites.push(topic.run(&machine).map_err(usage)?);
    suites.push(cross.run(&machine).map_err(usage)?);
    suites.push(paths.run().map_err(usage)?);
    suites.push(lidar.run(&machine).map_err(usage)?);
    suites.push(timer.run(&machine).map_err(usage)?);
    suites.push(scheduler.run(&machine).map_err(usage)?);
    suites.push(python.run().map_err(usage)?);
    suites.push(bag.run(&machine).map_err(usage)?);
    suites.push(control.run(&machine).map_err(usage)?);
    write_bundle(&a.out, quick, suites)
}

/// Runs a bench command.
pub fn run(cmd: BenchCommand) -> CmdResult {
    match cmd {
        BenchCommand::Role { role, spec } => {
            let role = match role.as_str() {
                "publisher" => Role::Publisher,
                "subscriber" => Role::Subscriber,
                "timer-cycle" => {
                    let spec: CycleSpec = serde_json::from_str(&spec)
                        .map_err(|e| usage(format!("bad timer spec: {e}")))?;
                    run_cycle(&spec)?;
                    return Ok(());
                }
                "scheduler" => {
                    let spec: LoadSpec = serde_json::from_str(&spec)
                        .map_err(|e| usage(format!("bad scheduler spec: {e}")))?;
                    run_load(&spec)?;
                    return Ok(());
                }
                "idle-executor" => {
                    let domain = spec
                        .parse()
                        .map_err(|e| usage(format!("bad domain {spec:?}: {e}")))?;
                    run_idle(domain)?;
                    return Ok(());
                }
                "control-server" => {
                    let spec: nerve_bench::control::ServerSpec = serde_json::from_str(&spec)
                        .map_err(|e| usage(format!("bad control spec: {e}")))?;
                    nerve_bench::control::run_server(&spec)?;
                    return Ok(());
                }
                "launch-node" => {
                    nerve_bench::launch::run_launch_node(&spec).map_err(anyhow::Error::msg)?;
                    return Ok(());
                }
                "control-idle" => {
                    let domain = spec
                        .parse()
                        .map_err(|e| usage(format!("bad domain {spec:?}: {e}")))?;
                    nerve_bench::control::run_idle_node(domain)?;
                    return Ok(());
                }
                "pipeline-stage" => {
                    let spec: nerve_bench::pipeline::StageSpec = serde_json::from_str(&spec)
                        .map_err(|e| usage(format!("bad pipeline spec: {e}")))?;
                    nerve_bench::pipeline::run_stage(&spec).map_err(anyhow::Error::msg)?;
                    return Ok(());
                }
                "sink" => {
                    let spec: SinkSpec = serde_json::from_str(&spec)
                        .map_err(|e| usage(format!("bad sink spec: {e}")))?;
                    run_sinks(&spec)?;
                    return Ok(());
                }
                "ponger" => {
                    let spec: PongSpec = serde_json::from_str(&spec)
                        .map_err(|e| usage(format!("bad ponger spec: {e}")))?;
                    run_pongers(&spec)?;
                    return Ok(());
                }
                other => return Err(usage(format!("unknown role {other:?}"))),
            };
            let spec: StreamSpec =
                serde_json::from_str(&spec).map_err(|e| usage(format!("bad stream spec: {e}")))?;
            run_role(role, &spec)?;
            Ok(())
        }
        BenchCommand::Paths(a) => {
            let suite = paths_suite(&a)?;
            let out = suite.run().map_err(usage)?;
            write_bundle(&a.out, suite.quick, vec![out])
        }
        BenchCommand::Lidar(a) => {
            let suite = lidar_suite(&a)?;
            let out = suite.run(&Machine::detect()).map_err(usage)?;
            write_bundle(&a.out, suite.quick, vec![out])
        }
        BenchCommand::All(a) => run_all(&a),
        BenchCommand::Bag(a) => {
            let mut suite = bag_suite(a.quick, &a.out)?;
            if let Some(s) = a.seconds {
                if !(s.is_finite() && s > 0.0) {
                    return Err(usage(format!("--seconds must be positive, got {s}")));
                }
                suite.seconds = s;
            }
            if let Some(m) = a.saturation_mib {
                if m == 0 {
                    return Err(usage("--saturation-mib must be at least 1"));
                }
                suite.saturation_mib = m;
            }
            let out = suite.run(&Machine::detect()).map_err(usage)?;
            write_bundle(&a.out, suite.quick, vec![out])
        }
        BenchCommand::Control(a) => {
            let suite = control_suite(&a)?;
            let out = suite.run(&Machine::detect()).map_err(usage)?;
            write_bundle(&a.out, suite.quick, vec![out])
        }
        BenchCommand::Python(a) => {
            let suite = python_suite(&a)?;
            let out = suite.run().map_err(usage)?;
            write_bundle(&a.out, suite.quick, vec![out])
        }
        BenchCommand::PyPonger {
            msg,
            ping_topic,
            pong_topic,
        } => {
            let msg = PyMsg::parse(&msg)
                .ok_or_else(|| usage(format!("unknown message {msg:?}; known: cmdvel, imu")))?;
            run_py_ponger(msg, &ping_topic, &pong_topic)?;
            Ok(())
        }
        BenchCommand::Timer(a) => {
            let suite = timer_suite(&a)?;
            let out = suite.run(&Machine::detect()).map_err(usage)?;
            write_bundle(&a.out, suite.quick, vec![out])
        }
        BenchCommand::Scheduler(a) => {
            let suite = scheduler_suite(&a)?;
            let out = suite.run(&Machine::detect()).map_err(usage)?;
            write_bundle(&a.out, suite.quick, vec![out])
        }
        BenchCommand::Topic(a) => {
            let suite = topic_suite(&a)?;
            let machine = Machine::detect();
            let out = if suite.cross_host {
                CrossHostSuite(suite.clone()).run(&machine)
            } else {
                suite.run(&machine)
            }
            .map_err(usage)?;
            write_bundle(&a.out, suite.quick, vec![out])
        }
        BenchCommand::Peer { system, endpoint } => {
            nerve_bench::service::run_peer(&system, &endpoint)?;
            Ok(())
        }
        BenchCommand::Service(a) => {
            let exe = std::env::current_exe()?;
            let peer = (exe, vec!["bench".to_string(), "peer".to_string()]);
            let mut suite = if a.quick {
                ServiceSuite::quick(peer)
            } else {
                ServiceSuite::full(peer)
            };
            suite.out = a.out;
            if let Some(c) = a.calls {
                suite.calls = c;
            }
            if let Some(w) = a.warmup {
                suite.warmup = w;
            }
            if let Some(p) = a.payloads {
                suite.payloads = p;
            }
            if let Some(s) = a.systems {
                suite.systems = s
                    .iter()
                    .map(|id| {
                        SystemId::parse(id).ok_or_else(|| {
                            usage(format!(
                                "unknown system {id:?}; known: {}",
                                SystemId::ALL.map(|s| s.id()).join(", ")
                            ))
                        })
                    })
                    .collect::<Result<_, Failure>>()?;
            }
            let report = suite.run().map_err(|e| match e {
                nerve_bench::service::SuiteError::Invalid(m) => usage(m),
                e => Failure::Runtime(e.into()),
            })?;
            print!("{}", report.summary());
            println!("report: {}/report.md and report.json", suite.out.display());
            Ok(())
        }
    }
}
