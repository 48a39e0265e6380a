//! `nerve bench control`: its options, its preset in `bench all`, its roles (the action
//! and parameter server, an idle node, a launched node).

use super::launch::run_launch_node;
use super::{run_idle_node, run_server, ControlSuite, ServerSpec};
use crate::report::SuiteOutput;
use crate::suite::{self, Env, Role, Suite, SuiteError, Variant};
use std::path::{Path, PathBuf};

/// Options of `nerve bench control`.
#[derive(clap::Args)]
pub struct ControlOptions {
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

impl suite::Options for ControlOptions {
    fn out(&self) -> &Path {
        &self.out
    }
}

impl Suite for ControlSuite {
    type Options = ControlOptions;
    const NAME: &'static str = "control";
    const ABOUT: &'static str = "Parameters, actions and launch: an action round trip and a \
                                 parameter set beside a service call, the idle CPU of a node \
                                 with both, launch of 20 processes";
    const SEED: Option<&'static str> = None;
    const ROLES: &'static [Role] = &[
        Role {
            name: "control-server",
            run: |args| {
                let spec: ServerSpec = suite::spec(args, "control")?;
                Ok(run_server(&spec)?)
            },
        },
        Role {
            name: "launch-node",
            run: |args| {
                let topic = args.first().map(String::as_str).unwrap_or("");
                run_launch_node(topic).map_err(SuiteError::Failed)
            },
        },
        Role {
            name: "control-idle",
            run: |args| Ok(run_idle_node(suite::domain_arg(args)?)?),
        },
    ];

    fn preset(variant: Variant, env: &Env) -> ControlSuite {
        let mut suite = if variant.quick() {
            ControlSuite::quick(env.role_command())
        } else {
            ControlSuite::full(env.role_command())
        };
        if variant == Variant::Smoke {
            (suite.calls, suite.warmup, suite.idle_seconds) = (50, 5, 0.3);
            (suite.launch_processes, suite.launch_singles) = (3, 1);
            suite.payloads = vec![64];
        }
        suite
    }

    fn from_options(o: ControlOptions, env: &Env) -> Result<ControlSuite, SuiteError> {
        let mut suite = if o.quick {
            ControlSuite::quick(env.role_command())
        } else {
            ControlSuite::full(env.role_command())
        };
        if let Some(c) = o.calls {
            if c == 0 {
                return Err(SuiteError::Invalid("--calls must be at least 1".into()));
            }
            suite.calls = c;
        }
        if let Some(p) = o.payloads {
            if p.is_empty() || p.iter().any(|&b| b > 64 << 20) {
                return Err(SuiteError::Invalid(
                    "--payloads: sizes from 0 to 64 MiB".into(),
                ));
            }
            suite.payloads = p;
        }
        Ok(suite)
    }

    fn quick(&self) -> bool {
        self.quick
    }

    fn run(&self, env: &Env) -> Result<SuiteOutput, SuiteError> {
        self.execute(&env.machine).map_err(SuiteError::Failed)
    }
}
