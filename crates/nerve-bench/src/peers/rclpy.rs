//! ROS 2 measured, not quoted: rclpy over Fast DDS (`rmw_fastrtps_cpp`, ROS 2's default
//! middleware) from ROS 2's PyPI wheels (Kilted, CPython 3.11), in a virtual environment
//! the suites prepare themselves (`NERVE_ROS2_VENV`, else `ros2-venv` in the target
//! directory). Both ends run in Python processes of their own, driven by
//! `crates/nerve-bench/python/rclpy_bench.py`:
//!
//! - the service suite (seeds/000): an echo server and a synchronous client
//!   (`call_async` + the executor's `spin_until_future_complete`, timed in the client
//!   process around writing the request, the call and checking the whole response);
//! - the topic suite (seeds/001): a publisher (a timer at the rate) and a subscriber that
//!   speak the stream protocol of [`crate::peers::stream`], so the topic suite measures
//!   them exactly as its other systems (latency from stamps, CPU, memory, loss).
//!
//! Configured as a competent user would: reliable QoS (the services' default profile;
//! keep-last 10 for the topic), discovery limited to this host, Fast DDS's default
//! transports (shared memory between processes of one host), and either rclpy's default
//! `SingleThreadedExecutor` or its `EventsExecutor`. A system that cannot run (no
//! python3.11, pip failed, an import failed) is listed as skipped with the reason.

use crate::harness::child::Child;
use crate::harness::machine::{cpu_ns, cpu_seconds};
use crate::harness::PeerError;
use crate::suites::python::{pip_reason, run_bounded, spinner, target_dir, workspace_root};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The driver script, relative to the workspace root.
pub const SCRIPT: &str = "crates/nerve-bench/python/rclpy_bench.py";
/// The interpreter ROS 2's wheels are built for.
pub const PYTHON: &str = "python3.11";
/// What the environment gets: rclpy (Kilted) over Fast DDS and the message packages.
pub const PACKAGES: [&str; 7] = [
    "ros-rclpy",
    "ros-rmw-fastrtps-cpp",
    "ros-std-msgs",
    "ros-sensor-msgs",
    "ros-geometry-msgs",
    "ros-test-msgs",
    "ros-std-srvs",
];
/// The service type: the installed packages have no service with a byte array both ways,
/// so the payload travels in the unbounded `string string_value` of the request and of
/// the response (printable ASCII, one byte a character, exactly the row's size).
pub const SERVICE_TYPE: &str = "test_msgs/srv/BasicTypes";
/// The topic type: the payload is its `uint8[] data`, exactly the row's size (sequence
/// number and publish stamp in its first 16 bytes, as for the peers without a header).
pub const TOPIC_TYPE: &str = "std_msgs/msg/UInt8MultiArray";
/// Keep-last depth of the topic's reliable QoS.
pub const TOPIC_DEPTH: u32 = 10;

const WHAT: &str = "rclpy";
/// How long a Python end may take to import rclpy, start and find its peer.
const START: Duration = Duration::from_secs(60);
const PIP_LIMIT: Duration = Duration::from_secs(900);

/// The rclpy executor an end spins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Executor {
    /// `rclpy.executors.SingleThreadedExecutor`, rclpy's default.
    SingleThreaded,
    /// `rclpy.experimental.EventsExecutor`.
    Events,
}

impl Executor {
    /// Both, in report order.
    pub const ALL: [Executor; 2] = [Executor::SingleThreaded, Executor::Events];

    /// The mode in reports and the script's `executor`.
    pub fn id(self) -> &'static str {
        match self {
            Executor::SingleThreaded => "single-threaded",
            Executor::Events => "events",
        }
    }

    /// The class.
    pub fn class(self) -> &'static str {
        match self {
            Executor::SingleThreaded => "rclpy.executors.SingleThreadedExecutor (default)",
            Executor::Events => "rclpy.experimental.EventsExecutor",
        }
    }
}

/// `NERVE_ROS2_VENV`, else `ros2-venv` in the target directory.
pub fn default_venv(target_dir: &Path) -> PathBuf {
    match std::env::var_os("NERVE_ROS2_VENV") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => target_dir.join("ros2-venv"),
    }
}

/// Where the ROS 2 environment is and whether a suite may create and fill it.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// The virtual environment.
    pub venv: PathBuf,
    /// May create it and pip install; if false and it is not ready, rclpy is skipped.
    pub setup: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            venv: default_venv(&target_dir(&workspace_root())),
            setup: true,
        }
    }
}

/// A ready environment.
#[derive(Clone, Debug)]
pub struct Ros2 {
    /// Its Python.
    pub python: PathBuf,
    /// The driver script.
    pub script: PathBuf,
    /// rclpy, rmw_fastrtps_cpp, Fast DDS, Python.
    pub versions: BTreeMap<String, String>,
    /// Whether rclpy offers `rclpy.experimental.EventsExecutor`.
    pub events_executor: bool,
}

/// The first `name` on PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn step(cmd: Command, limit: Duration, what: &str) -> Result<String, String> {
    let f = run_bounded(cmd, limit)?;
    if f.timed_out {
        return Err(format!(
            "{what}: stopped after {:.0} s",
            limit.as_secs_f64()
        ));
    }
    if f.status != "exit status: 0" {
        return Err(format!("{what} failed ({}): {}", f.status, pip_reason(&f)));
    }
    Ok(f.stdout)
}

impl Settings {
    fn python(&self) -> PathBuf {
        self.venv.join("bin/python")
    }

    fn probe(&self, script: &Path) -> Result<Value, String> {
        let mut cmd = Command::new(self.python());
        cmd.arg(script)
            .arg("probe")
            .env("PYTHONNOUSERSITE", "1")
            .env_remove("PYTHONPATH")
            .env_remove("PYTHONHOME");
        let out = step(cmd, Duration::from_secs(120), "rclpy_bench.py probe")?;
        out.lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .and_then(|l| serde_json::from_str(l).ok())
            .ok_or_else(|| "rclpy_bench.py probe printed no JSON".to_string())
    }

    /// Makes the environment ready: creates it with python3.11, installs [`PACKAGES`]
    /// when rclpy does not import, and probes it. The reason it cannot be made ready
    /// otherwise.
    pub fn prepare(&self) -> Result<Ros2, String> {
        let venv = self.venv.display().to_string();
        let script = workspace_root().join(SCRIPT);
        if !script.is_file() {
            return Err(format!("no driver script at {}", script.display()));
        }
        if !self.python().exists() {
            if !self.setup {
                return Err(format!("no ROS 2 environment at {venv} (setup is off)"));
            }
            let py = on_path(PYTHON).ok_or_else(|| {
                format!(
                    "{PYTHON} not found on PATH: ROS 2's PyPI wheels (Kilted) are built for \
                     CPython 3.11"
                )
            })?;
            let s = spinner(format!("creating the ROS 2 environment {venv} ({PYTHON})"));
            let mut cmd = Command::new(py);
            cmd.args(["-m", "venv"]).arg(&self.venv);
            let r = step(cmd, Duration::from_secs(300), "python3.11 -m venv");
            s.finish_and_clear();
            r?;
        }
        let mut probe = self.probe(&script)?;
        if let Some(err) = probe.get("error").and_then(Value::as_str) {
            let python = probe.get("python").and_then(Value::as_str).unwrap_or("?");
            if !python.starts_with("3.11") {
                return Err(format!("{venv}: {err}"));
            }
            if !self.setup {
                return Err(format!("{err} in {venv} (setup is off)"));
            }
            let s = spinner(format!("pip install {} (ROS 2 wheels)", PACKAGES.join(" ")));
            let mut cmd = Command::new(self.python());
            cmd.args(["-m", "pip", "install", "--disable-pip-version-check"])
                .args(PACKAGES)
                .env("PYTHONNOUSERSITE", "1")
                .env_remove("PYTHONPATH");
            let r = step(
                cmd,
                PIP_LIMIT,
                &format!("pip install {}", PACKAGES.join(" ")),
            );
            s.finish_and_clear();
            r?;
            probe = self.probe(&script)?;
            if let Some(err) = probe.get("error").and_then(Value::as_str) {
                return Err(format!("{err} (in {venv}, after pip install)"));
            }
        }
        let mut versions = BTreeMap::new();
        for key in ["rclpy", "rmw_fastrtps_cpp", "fastdds"] {
            if let Some(v) = probe.get(key).and_then(Value::as_str) {
                versions.insert(key.to_string(), v.to_string());
            }
        }
        if let Some(v) = probe.get("python").and_then(Value::as_str) {
            versions.insert("rclpy python".into(), v.to_string());
        }
        Ok(Ros2 {
            python: self.python(),
            script,
            versions,
            events_executor: probe
                .get("events_executor")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }
}

/// One echo run: the client's samples and both processes' CPU.
#[derive(Clone, Debug)]
pub struct CallRun {
    /// Round trips of the measured calls, ns, in call order.
    pub samples_ns: Vec<u64>,
    /// Time the measured calls took (the client's clock), s.
    pub seconds: f64,
    /// Warm-up calls made.
    pub warmup: u64,
    /// CPU of the client process over the measured calls, % of one core.
    pub client_cpu: Option<f64>,
    /// The same of the server process.
    pub server_cpu: Option<f64>,
    /// CPU of the idle server over 1 s after the calls, % of one core (if asked).
    pub idle_server_cpu: Option<f64>,
}

/// One echo run of [`Ros2::service`].
#[derive(Clone, Debug)]
pub struct ServiceRun<'a> {
    /// The executor both ends spin.
    pub executor: Executor,
    /// The service's name.
    pub service: &'a str,
    /// Nerve domain of the run (the ROS domain follows from it).
    pub domain: u32,
    /// Request and response payload, bytes.
    pub payload_bytes: usize,
    /// Measured calls.
    pub calls: usize,
    /// Warm-up calls (and at least 100 ms of them).
    pub warmup: usize,
    /// (server, client) CPUs to pin to.
    pub cpus: Option<(usize, usize)>,
    /// Whether the idle server's CPU is measured after the calls.
    pub measure_idle: bool,
}

impl Ros2 {
    fn spawn(&self, role: &str, spec: &Value) -> Result<Child, PeerError> {
        let args = vec![
            self.script.display().to_string(),
            role.to_string(),
            spec.to_string(),
        ];
        Child::spawn(
            &self.python,
            &args,
            &[("PYTHONNOUSERSITE", "1".to_string())],
            WHAT,
        )
    }

    /// Program and leading arguments of a stream end (`<program> <args…> <role>
    /// <spec-json>`, as [`crate::suites::topic::measure_stream`] starts them).
    pub fn stream_command(&self) -> (PathBuf, Vec<String>) {
        (self.python.clone(), vec![self.script.display().to_string()])
    }

    /// Runs the echo service once: server, then client; CPU of both between the client's
    /// `start` and `done`.
    pub fn service(&self, run: &ServiceRun<'_>) -> Result<CallRun, PeerError> {
        let (server_cpu, client_cpu) = run.cpus.unzip();
        let common = |cpu: Option<usize>| {
            json!({
                "executor": run.executor.id(),
                "service": run.service,
                "domain": run.domain,
                "cpu": cpu,
            })
        };
        let mut client_spec = common(client_cpu);
        if let Some(o) = client_spec.as_object_mut() {
            o.insert("payload_bytes".into(), json!(run.payload_bytes));
            o.insert("calls".into(), json!(run.calls));
            o.insert("warmup".into(), json!(run.warmup));
        }
        let mut server = self.spawn("server", &common(server_cpu))?;
        server.expect("ready", START)?;
        let mut client = self.spawn("client", &client_spec)?;
        // generous: rclpy's slowest round trips seen are tens of ms at 1 MiB
        let per_call = 0.005 + run.payload_bytes as f64 * 50e-9;
        let warm = START + Duration::from_secs_f64(run.warmup as f64 * per_call);
        if let Err(e) = client.expect("start", warm) {
            let tail = server.stop_and_tail();
            return Err(PeerError::call(WHAT, format!("{e}; server: {tail}")));
        }
        let (c0, s0, t0) = (cpu_ns(client.pid()), cpu_ns(server.pid()), Instant::now());
        let limit = START + Duration::from_secs_f64(run.calls as f64 * per_call);
        if let Err(e) = client.expect("done", limit) {
            let tail = server.stop_and_tail();
            return Err(PeerError::call(WHAT, format!("{e}; server: {tail}")));
        }
        let (c1, s1) = (cpu_ns(client.pid()), cpu_ns(server.pid()));
        let wall = t0.elapsed().as_secs_f64();
        let line = client.expect("{", Duration::from_secs(30))?;
        let idle_server_cpu = if run.measure_idle {
            let window = Duration::from_secs(1);
            let a = cpu_seconds(server.pid());
            std::thread::sleep(window);
            let b = cpu_seconds(server.pid());
            a.zip(b)
                .map(|(a, b)| ((b - a) / window.as_secs_f64() * 100.0).max(0.0))
        } else {
            None
        };
        client.stop();
        server.stop();
        let v: Value = serde_json::from_str(&line)
            .map_err(|e| PeerError::call(WHAT, format!("bad result line: {e}")))?;
        if let Some(err) = v.get("error") {
            return Err(PeerError::call(WHAT, err.to_string()));
        }
        let samples_ns: Vec<u64> = v
            .get("samples_ns")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        if samples_ns.len() != run.calls {
            return Err(PeerError::call(
                WHAT,
                format!("{} samples instead of {}", samples_ns.len(), run.calls),
            ));
        }
        let pct = |a: Option<u64>, b: Option<u64>| {
            Some(b?.saturating_sub(a?) as f64 / 1e9 / wall.max(1e-9) * 100.0)
        };
        Ok(CallRun {
            samples_ns,
            seconds: v.get("seconds").and_then(Value::as_f64).unwrap_or(wall),
            warmup: v.get("warmup").and_then(Value::as_u64).unwrap_or(0),
            client_cpu: pct(c0, c1),
            server_cpu: pct(s0, s1),
            idle_server_cpu,
        })
    }
}

/// How the service ends are configured, for the report.
pub fn service_config(ros: &Ros2, executor: Executor) -> String {
    format!(
        "rclpy {} over rmw_fastrtps_cpp {} (Fast DDS {}, default transports: shared memory \
         on one host), {SERVICE_TYPE} with the payload in its string field both ways \
         (the installed packages have no service with a byte array both ways; the request \
         and response also carry its 13 scalar fields), services' default QoS (reliable, \
         keep last 10, volatile), {} on both ends; the client calls call_async and spins \
         the executor until the future completes, timed in the Python client around \
         writing the request, the call and checking the whole response; CPU of both Python \
         processes",
        v(ros, "rclpy"),
        v(ros, "rmw_fastrtps_cpp"),
        v(ros, "fastdds"),
        executor.class()
    )
}

/// How the stream ends are configured, for the report.
pub fn topic_config(versions: &BTreeMap<String, String>) -> String {
    let v = |k: &str| versions.get(k).map_or("?", String::as_str);
    format!(
        "rclpy {} over rmw_fastrtps_cpp {} (Fast DDS {}, default transports: shared memory \
         on one host), {TOPIC_TYPE} with the payload in its uint8[] data (sequence number \
         and stamp in its first 16 bytes), reliable keep-last {TOPIC_DEPTH} QoS, discovery \
         on this host only; the publisher publishes from a timer at the rate, writing the \
         whole payload into a fresh array each message and stamping it last; the \
         subscriber stamps in its callback, then checks the whole payload; either executor \
         on both ends (single-threaded: {}; events: {})",
        v("rclpy"),
        v("rmw_fastrtps_cpp"),
        v("fastdds"),
        Executor::SingleThreaded.class(),
        Executor::Events.class()
    )
}

fn v<'a>(ros: &'a Ros2, key: &str) -> &'a str {
    ros.versions.get(key).map_or("?", String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_and_executors_are_named() {
        let d = default_venv(Path::new("/t"));
        if std::env::var_os("NERVE_ROS2_VENV").is_none() {
            assert_eq!(d, Path::new("/t/ros2-venv"));
        }
        assert_eq!(
            Executor::ALL.map(Executor::id),
            ["single-threaded", "events"]
        );
        assert_eq!(
            serde_json::to_string(&Executor::SingleThreaded).unwrap(),
            "\"single-threaded\""
        );
        assert!(Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(SCRIPT)
            .is_file());
    }

    #[test]
    fn an_environment_that_is_not_there_is_a_reason_without_setup() {
        let s = Settings {
            venv: std::env::temp_dir().join(format!("nerve-no-ros2-{}", std::process::id())),
            setup: false,
        };
        let why = s.prepare().unwrap_err();
        assert!(
            why.contains("no ROS 2 environment") && why.contains("setup is off"),
            "{why}"
        );
    }
}
