//! `nerve bench paths`: its options, its preset in `bench all`, its roles.

use super::{run_pongers, run_sinks, MessageKind, PathsSuite, PongSpec, Route, SinkSpec};
use crate::report::SuiteOutput;
use crate::suite::{self, Env, Role, Suite, SuiteError, Variant};
use std::path::{Path, PathBuf};

/// Options of `nerve bench paths`.
#[derive(clap::Args)]
pub struct PathsOptions {
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

impl suite::Options for PathsOptions {
    fn out(&self) -> &Path {
        &self.out
    }
}

fn invalid(m: String) -> SuiteError {
    SuiteError::Invalid(m)
}

impl Suite for PathsSuite {
    type Options = PathsOptions;
    const NAME: &'static str = "paths";
    const ABOUT: &'static str = "Ping-pong by route, topology and message type (seeds/004, HORUS)";
    const SEED: Option<&'static str> = Some("004");
    const ROLES: &'static [Role] = &[
        Role {
            name: "ponger",
            run: |args| {
                let spec: PongSpec = suite::spec(args, "ponger")?;
                Ok(run_pongers(&spec)?)
            },
        },
        Role {
            name: "cpp-ponger",
            run: |args| {
                let spec: PongSpec = suite::spec(args, "cpp-ponger")?;
                Ok(super::cpp::run_cpp_ponger(&spec)?)
            },
        },
        Role {
            name: "sink",
            run: |args| {
                let spec: SinkSpec = suite::spec(args, "sink")?;
                Ok(run_sinks(&spec)?)
            },
        },
    ];

    fn preset(variant: Variant, env: &Env) -> PathsSuite {
        let mut suite = if variant.quick() {
            PathsSuite::quick(env.role_command())
        } else {
            PathsSuite::full(env.role_command())
        };
        if variant == Variant::Smoke {
            (suite.iterations, suite.warmup) = (50, 5);
            (suite.topologies, suite.messages) = (vec![(1, 1), (2, 1)], vec![MessageKind::CmdVel]);
            suite.load_count = Some(2_000);
        }
        suite
    }

    fn from_options(o: PathsOptions, env: &Env) -> Result<PathsSuite, SuiteError> {
        let mut suite = if o.quick {
            PathsSuite::quick(env.role_command())
        } else {
            PathsSuite::full(env.role_command())
        };
        if let Some(i) = o.iterations {
            suite.iterations = i;
        }
        if let Some(w) = o.warmup {
            suite.warmup = w;
        }
        suite.latency = !o.load_only;
        suite.load = !o.latency_only;
        if let Some(m) = &o.messages {
            suite.messages = m
                .iter()
                .map(|s| {
                    MessageKind::parse(s).ok_or_else(|| invalid(format!("unknown message {s:?}")))
                })
                .collect::<Result<_, _>>()?;
        }
        if let Some(r) = &o.routes {
            suite.routes = r
                .iter()
                .map(|s| {
                    Route::ALL
                        .into_iter()
                        .find(|x| x.name() == s)
                        .ok_or_else(|| invalid(format!("unknown route {s:?}")))
                })
                .collect::<Result<_, _>>()?;
        }
        if let Some(t) = &o.topologies {
            suite.topologies = t
                .iter()
                .map(|s| {
                    let bad = || invalid(format!("topology {s:?} must look like 2:1"));
                    let (a, b) = s.split_once(':').ok_or_else(bad)?;
                    Ok((a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?))
                })
                .collect::<Result<_, SuiteError>>()?;
        }
        suite.validate().map_err(invalid)?;
        Ok(suite)
    }

    fn quick(&self) -> bool {
        self.quick
    }

    fn run(&self, _env: &Env) -> Result<SuiteOutput, SuiteError> {
        self.execute().map_err(SuiteError::Failed)
    }
}
