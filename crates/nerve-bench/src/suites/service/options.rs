//! `nerve bench service`: its options, its preset in `bench all`, its role.

use super::{run_peer, ServiceSuite, SystemId};
use crate::report::SuiteOutput;
use crate::suite::{self, Env, Role, Suite, SuiteError, Variant};
use std::path::{Path, PathBuf};

/// Options of `nerve bench service`.
#[derive(clap::Args)]
pub struct ServiceOptions {
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
    /// Systems to run, comma-separated: nerve-adaptive, nerve-spin, nerve-block, nerve-cpp, iceoryx2,
    /// zenoh, zenoh-shm, cyclonedds, uds, rclpy-single-threaded, rclpy-events.
    #[arg(long, value_delimiter = ',')]
    systems: Option<Vec<String>>,
    /// ROS 2 environment of the rclpy systems, created with python3.11 and filled from
    /// PyPI if needed (default: $NERVE_ROS2_VENV, else ros2-venv in the target directory).
    #[arg(long)]
    ros2_venv: Option<PathBuf>,
}

impl suite::Options for ServiceOptions {
    fn out(&self) -> &Path {
        &self.out
    }
}

/// `peer <system> <endpoint>`: the server side of one system.
fn peer(args: &[String]) -> Result<(), SuiteError> {
    let [system, endpoint] = args else {
        return Err(SuiteError::Invalid(
            "the peer role takes a system and an endpoint".into(),
        ));
    };
    Ok(run_peer(system, endpoint)?)
}

impl ServiceSuite {
    fn variant(quick: bool, env: &Env) -> ServiceSuite {
        let peer = env.role("peer");
        if quick {
            ServiceSuite::quick(peer)
        } else {
            ServiceSuite::full(peer)
        }
    }
}

impl Suite for ServiceSuite {
    type Options = ServiceOptions;
    const NAME: &'static str = "service";
    const ABOUT: &'static str =
        "Request/response ping-pong (seeds/000) on Nerve and its peers side by side";
    const SEED: Option<&'static str> = Some("000");
    const ROLES: &'static [Role] = &[Role {
        name: "peer",
        run: peer,
    }];

    fn preset(variant: Variant, env: &Env) -> ServiceSuite {
        let mut suite = ServiceSuite::variant(variant.quick(), env);
        if variant == Variant::Smoke {
            (suite.calls, suite.warmup, suite.payloads) = (20, 2, vec![64]);
            // a pipeline test: no ROS 2 environment to prepare
            suite.systems.retain(|s| s.rclpy().is_none());
        }
        suite.out = env.out.join("service");
        suite
    }

    fn from_options(o: ServiceOptions, env: &Env) -> Result<ServiceSuite, SuiteError> {
        let mut suite = ServiceSuite::variant(o.quick, env);
        suite.out = o.out;
        suite.own_report = true;
        if let Some(c) = o.calls {
            suite.calls = c;
        }
        if let Some(w) = o.warmup {
            suite.warmup = w;
        }
        if let Some(p) = o.payloads {
            suite.payloads = p;
            // payloads asked for: rclpy runs at every one
            suite.rclpy_payloads = None;
        }
        if let Some(v) = o.ros2_venv {
            suite.ros2.venv = v;
        }
        if let Some(s) = &o.systems {
            let known = SystemId::ALL.map(|s| s.id());
            suite.systems = suite::pick(s, "system", SystemId::parse, &known)?;
        }
        suite.validate()?;
        Ok(suite)
    }

    fn quick(&self) -> bool {
        self.quick
    }

    fn run(&self, _env: &Env) -> Result<SuiteOutput, SuiteError> {
        let report = self.execute()?;
        let mut out = report.to_suite_output();
        if self.own_report {
            out.summary = format!(
                "{}report: {}/report.md and report.json\n",
                report.summary(),
                self.out.display()
            );
        }
        Ok(out)
    }

    fn own_report(&self) -> bool {
        self.own_report
    }
}
