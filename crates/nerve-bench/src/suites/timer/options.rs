//! `nerve bench timer`: its options, its preset in `bench all`, its role (one timed state
//! machine).

use super::{run_cycle, CycleSpec, TimerSuite, TimerSystem};
use crate::report::SuiteOutput;
use crate::suite::{self, Env, Role, Suite, SuiteError, Variant};
use std::path::{Path, PathBuf};

/// Options of `nerve bench timer`.
#[derive(clap::Args)]
pub struct TimerOptions {
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

impl suite::Options for TimerOptions {
    fn out(&self) -> &Path {
        &self.out
    }
}

impl Suite for TimerSuite {
    type Options = TimerOptions;
    const NAME: &'static str = "timer";
    const ABOUT: &'static str = "One-shot timer precision in a cyclic state machine \
                                 (seeds/002), beside a sleep loop, a tokio interval and \
                                 absolute clock_nanosleep deadlines with 1 ns timer slack";
    const SEED: Option<&'static str> = Some("002");
    const ROLES: &'static [Role] = &[Role {
        name: "timer-cycle",
        run: |args| {
            let spec: CycleSpec = suite::spec(args, "timer")?;
            Ok(run_cycle(&spec)?)
        },
    }];

    fn preset(variant: Variant, env: &Env) -> TimerSuite {
        let mut suite = if variant.quick() {
            TimerSuite::quick(env.role_command())
        } else {
            TimerSuite::full(env.role_command())
        };
        if variant == Variant::Smoke {
            (suite.cycles, suite.timeouts_ms) = (5, vec![5]);
        }
        suite
    }

    fn from_options(o: TimerOptions, env: &Env) -> Result<TimerSuite, SuiteError> {
        let mut suite = if o.quick {
            TimerSuite::quick(env.role_command())
        } else {
            TimerSuite::full(env.role_command())
        };
        if let Some(c) = o.cycles {
            suite.cycles = c;
        }
        if let Some(t) = o.timeouts {
            suite.timeouts_ms = t;
        }
        if let Some(s) = &o.systems {
            let known = TimerSystem::ALL.map(|s| s.id());
            suite.systems = suite::pick(s, "timer system", TimerSystem::parse, &known)?;
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
