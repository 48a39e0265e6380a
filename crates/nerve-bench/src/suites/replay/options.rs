//! `nerve bench replay`: its options, its preset in `bench all`, its roles (the echo and
//! pipeline nodes, the CPU hog).

use super::nodes::{run_hog, run_node, NodeSpec};
use super::ReplaySuite;
use crate::harness::interrupt;
use crate::report::SuiteOutput;
use crate::suite::{self, Env, Role, Suite, SuiteError, Variant};
use std::path::{Path, PathBuf};

/// Options of `nerve bench replay`.
#[derive(clap::Args)]
pub struct ReplayOptions {
    /// 4,000 messages per mode, a 5 s bag of 512x10 sweeps, 1 replay, 3 replays under
    /// load (instead of 20,000, 20 s of 1024x10, 3 and 10).
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Messages per mode in the lockstep cost measurement (overrides --quick).
    #[arg(long)]
    messages: Option<u64>,
    /// Seconds of the recorded lidar bag (overrides --quick).
    #[arg(long)]
    bag_seconds: Option<f64>,
    /// Replays under load compared for determinism (overrides --quick).
    #[arg(long)]
    runs: Option<usize>,
}

impl suite::Options for ReplayOptions {
    fn out(&self) -> &Path {
        &self.out
    }
}

impl ReplaySuite {
    fn variant(quick: bool, env: &Env) -> ReplaySuite {
        let (roles, scratch) = (env.role_command(), env.out.join("replay-scratch"));
        if quick {
            ReplaySuite::quick(roles, scratch)
        } else {
            ReplaySuite::full(roles, scratch)
        }
    }
}

impl Suite for ReplaySuite {
    type Options = ReplayOptions;
    const NAME: &'static str = "replay";
    const ABOUT: &'static str = "Deterministic replay: the lockstep's cost per message across \
                                 two processes, lockstep replay of a lidar bag through a \
                                 two-process pipeline (msg/s, speed-up over real time), and \
                                 identical outputs under CPU load";
    const SEED: Option<&'static str> = None;
    const ROLES: &'static [Role] = &[
        Role {
            name: "replay-node",
            run: |args| {
                let spec: NodeSpec = suite::spec(args, "replay node")?;
                run_node(&spec).map_err(SuiteError::Failed)
            },
        },
        Role {
            name: "replay-hog",
            run: |args| {
                let text = args.first().map(String::as_str).unwrap_or("");
                let threads = text
                    .parse()
                    .map_err(|e| SuiteError::Invalid(format!("bad thread count {text:?}: {e}")))?;
                run_hog(threads).map_err(SuiteError::Failed)
            },
        },
    ];

    fn preset(variant: Variant, env: &Env) -> ReplaySuite {
        let mut suite = ReplaySuite::variant(variant.quick(), env);
        if variant == Variant::Smoke {
            suite.messages = 200;
            suite.rounds = 2;
            suite.bag_seconds = 1.0;
            suite.columns = 128;
            suite.determinism_runs = 2;
        }
        suite
    }

    fn from_options(o: ReplayOptions, env: &Env) -> Result<ReplaySuite, SuiteError> {
        let mut suite = ReplaySuite::variant(o.quick, env);
        if let Some(m) = o.messages {
            suite.messages = m;
        }
        if let Some(s) = o.bag_seconds {
            suite.bag_seconds = s;
        }
        if let Some(r) = o.runs {
            suite.determinism_runs = r;
        }
        suite.validate().map_err(SuiteError::Invalid)?;
        Ok(suite)
    }

    fn quick(&self) -> bool {
        self.quick
    }

    fn run(&self, _env: &Env) -> Result<SuiteOutput, SuiteError> {
        // the bag is gone if the run is interrupted too
        let scratch = self.scratch.clone();
        let _cleanup = interrupt::on_stop(move || {
            let _ = std::fs::remove_dir_all(scratch);
        });
        interrupt::remove_also(interrupt::Pattern::Prefix(format!(
            "nerve_lockstep{}",
            self.domain
        )));
        self.execute().map_err(SuiteError::Failed)
    }
}
