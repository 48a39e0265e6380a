//! `nerve bench scheduler`: its options, its preset in `bench all`, its roles (the
//! scheduled load, an idle executor).

use super::{run_idle, run_load, LoadSpec, SchedSystem, SchedulerSuite};
use crate::report::SuiteOutput;
use crate::suite::{self, Env, Role, Suite, SuiteError, Variant};
use std::path::{Path, PathBuf};

/// Options of `nerve bench scheduler`.
#[derive(clap::Args)]
pub struct SchedulerOptions {
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

impl suite::Options for SchedulerOptions {
    fn out(&self) -> &Path {
        &self.out
    }
}

impl Suite for SchedulerSuite {
    type Options = SchedulerOptions;
    const NAME: &'static str = "scheduler";
    const ABOUT: &'static str = "Scheduled nodes at 1 kHz to 10 Hz (seeds/004): rate, \
                                 jitter, deadline misses, overhead from 10 to 200 nodes, \
                                 idle CPU";
    const SEED: Option<&'static str> = Some("004");
    const ROLES: &'static [Role] = &[
        Role {
            name: "scheduler",
            run: |args| {
                let spec: LoadSpec = suite::spec(args, "scheduler")?;
                Ok(run_load(&spec)?)
            },
        },
        Role {
            name: "idle-executor",
            run: |args| Ok(run_idle(suite::domain_arg(args)?)?),
        },
    ];

    fn preset(variant: Variant, env: &Env) -> SchedulerSuite {
        let mut suite = if variant.quick() {
            SchedulerSuite::quick(env.role_command())
        } else {
            SchedulerSuite::full(env.role_command())
        };
        if variant == Variant::Smoke {
            (suite.seconds, suite.scale_seconds, suite.idle_seconds) = (0.3, 0.2, 0.3);
            suite.scales = vec![10, 50];
        }
        suite
    }

    fn from_options(o: SchedulerOptions, env: &Env) -> Result<SchedulerSuite, SuiteError> {
        let mut suite = if o.quick {
            SchedulerSuite::quick(env.role_command())
        } else {
            SchedulerSuite::full(env.role_command())
        };
        if let Some(s) = o.seconds {
            suite.seconds = s;
        }
        if let Some(s) = o.scales {
            suite.scales = s;
        }
        if let Some(s) = &o.systems {
            let known = SchedSystem::ALL.map(|s| s.id());
            suite.systems = suite::pick(s, "scheduler system", SchedSystem::parse, &known)?;
        }
        suite.validate().map_err(SuiteError::Invalid)?;
        Ok(suite)
    }

    fn quick(&self) -> bool {
        self.quick
    }

    fn run(&self, env: &Env) -> Result<SuiteOutput, SuiteError> {
        self.execute(&env.machine).map_err(SuiteError::Failed)
    }
}
