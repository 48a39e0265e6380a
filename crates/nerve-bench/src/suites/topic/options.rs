//! `nerve bench topic`: its options, its preset in `bench all`, its roles (the stream
//! ends, which the lidar and cross-host suites start too); and the topic suite across
//! simulated hosts, a suite of its own in `bench all` and `bench topic --cross-host`
//! alone.

use super::cross_host::CrossHostSuite;
use super::{TopicSuite, TopicSystem};
use crate::peers::stream::{run_role, Role as End, StreamSpec};
use crate::report::SuiteOutput;
use crate::suite::{self, Env, Role, Suite, SuiteError, Variant};
use std::path::{Path, PathBuf};

/// Options of `nerve bench topic`.
#[derive(clap::Args)]
pub struct TopicOptions {
    /// 2 s per point instead of 10 s (every size, rate and scenario kept).
    #[arg(long)]
    pub quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    pub out: PathBuf,
    /// Seconds per point (overrides --quick).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Sizes of the size sweep at 100 Hz, in bytes, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub sizes: Option<Vec<usize>>,
    /// Rates of the rate sweep at 1 MiB, in Hz, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub rates: Option<Vec<u32>>,
    /// Leave out CyberRT's four scenarios.
    #[arg(long)]
    pub no_scenarios: bool,
    /// Systems, comma-separated: nerve-adaptive, nerve-predictive, floor, iceoryx2,
    /// iceoryx2-spin-block, zenoh, zenoh-shm, cyclonedds, rclpy-single-threaded,
    /// rclpy-events (across hosts: nerve-adaptive, nerve-predictive, zenoh, cyclonedds).
    #[arg(long, value_delimiter = ',')]
    pub systems: Option<Vec<String>>,
    /// ROS 2 environment of the rclpy systems, created with python3.11 and filled from
    /// PyPI if needed (default: $NERVE_ROS2_VENV, else ros2-venv in the target directory).
    #[arg(long)]
    pub ros2_venv: Option<PathBuf>,
    /// Run publisher and subscriber on two simulated hosts (network namespaces joined by
    /// veth, private /dev/shm each; needs root): Nerve over its network plane, raw Zenoh
    /// and Cyclone DDS, the size sweep and CyberRT's cross-machine scenarios.
    #[arg(long)]
    pub cross_host: bool,
    /// Leave out the ROS 2 bridge's rows (rclpy → `nerve bridge ros2` → Nerve beside
    /// rclpy → rclpy; measured when an rclpy system runs).
    #[arg(long, conflicts_with = "bridge_only")]
    pub no_bridge: bool,
    /// Only the ROS 2 bridge's rows, none of the sweeps.
    #[arg(long)]
    pub bridge_only: bool,
}

impl suite::Options for TopicOptions {
    fn out(&self) -> &Path {
        &self.out
    }
}

fn end(role: End, args: &[String]) -> Result<(), SuiteError> {
    let spec: StreamSpec = suite::spec(args, "stream")?;
    Ok(run_role(role, &spec)?)
}

impl Suite for TopicSuite {
    type Options = TopicOptions;
    const NAME: &'static str = "topic";
    const ABOUT: &'static str = "One-way streams (seeds/001, CyberRT): latency, CPU, memory \
                                 and loss by size and rate";
    const SEED: Option<&'static str> = Some("001");
    const ROLES: &'static [Role] = &[
        Role {
            name: "publisher",
            run: |args| end(End::Publisher, args),
        },
        Role {
            name: "subscriber",
            run: |args| end(End::Subscriber, args),
        },
    ];

    fn preset(variant: Variant, env: &Env) -> TopicSuite {
        let mut suite = if variant.quick() {
            TopicSuite::quick(env.role_command())
        } else {
            TopicSuite::full(env.role_command())
        };
        if variant == Variant::Smoke {
            (suite.sizes, suite.rates, suite.scenarios, suite.seconds) =
                (vec![16], vec![], false, 0.3);
            // a pipeline test: no ROS 2 environment to prepare
            suite.systems.retain(|s| s.rclpy().is_none());
        }
        suite.bridge = suite.systems.iter().any(|s| s.rclpy().is_some());
        suite
    }

    fn from_options(o: TopicOptions, env: &Env) -> Result<TopicSuite, SuiteError> {
        let mut suite = if o.cross_host {
            CrossHostSuite::new(o.quick, env.role_command()).0
        } else if o.quick {
            TopicSuite::quick(env.role_command())
        } else {
            TopicSuite::full(env.role_command())
        };
        if let Some(s) = o.seconds {
            suite.seconds = s;
        }
        if let Some(s) = o.sizes {
            suite.sizes = s;
            // sizes asked for: rclpy runs at every point
            suite.rclpy_points = None;
        }
        if let Some(v) = o.ros2_venv {
            suite.ros2.venv = v;
        }
        if let Some(r) = o.rates {
            suite.rates = r;
        }
        suite.scenarios = !o.no_scenarios;
        if let Some(s) = &o.systems {
            let known: Vec<&str> = TopicSystem::all().iter().map(|s| s.id()).collect();
            suite.systems = suite::pick(s, "topic system", TopicSystem::parse, &known)?;
        }
        // the bridge's rows come with rclpy, or alone when asked for
        suite.bridge = !o.no_bridge
            && !suite.cross_host
            && (o.bridge_only || suite.systems.iter().any(|s| s.rclpy().is_some()));
        suite.bridge_only = o.bridge_only;
        if o.bridge_only && suite.cross_host {
            return Err(SuiteError::Invalid(
                "the ROS 2 bridge's rows run on one host only".into(),
            ));
        }
        suite.validate().map_err(SuiteError::Invalid)?;
        Ok(suite)
    }

    fn quick(&self) -> bool {
        self.quick
    }

    fn run(&self, env: &Env) -> Result<SuiteOutput, SuiteError> {
        if self.cross_host {
            CrossHostSuite(self.clone()).execute(&env.machine)
        } else {
            self.execute(&env.machine)
        }
        .map_err(SuiteError::Failed)
    }
}

impl Suite for CrossHostSuite {
    type Options = TopicOptions;
    const NAME: &'static str = "topic-cross-host";
    const ABOUT: &'static str = "One-way streams across two simulated hosts (seeds/001): \
                                 `nerve bench topic --cross-host`";
    const SEED: Option<&'static str> = Some("001");
    const COMMAND: bool = false;

    fn preset(variant: Variant, env: &Env) -> CrossHostSuite {
        let mut suite = CrossHostSuite::new(variant.quick(), env.role_command());
        if variant == Variant::Smoke {
            (suite.0.sizes, suite.0.scenarios, suite.0.seconds) = (vec![1024], false, 0.5);
        }
        suite
    }

    fn from_options(mut o: TopicOptions, env: &Env) -> Result<CrossHostSuite, SuiteError> {
        o.cross_host = true;
        Ok(CrossHostSuite(TopicSuite::from_options(o, env)?))
    }

    fn quick(&self) -> bool {
        self.0.quick
    }

    fn run(&self, env: &Env) -> Result<SuiteOutput, SuiteError> {
        self.execute(&env.machine).map_err(SuiteError::Failed)
    }
}
