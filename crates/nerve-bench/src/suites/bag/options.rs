//! `nerve bench bag`: its options and its preset in `bench all`.

use super::BagSuite;
use crate::harness::interrupt;
use crate::report::SuiteOutput;
use crate::suite::{self, Env, Suite, SuiteError, Variant};
use std::path::{Path, PathBuf};

/// Options of `nerve bench bag`.
#[derive(clap::Args)]
pub struct BagOptions {
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

impl suite::Options for BagOptions {
    fn out(&self) -> &Path {
        &self.out
    }
}

impl BagSuite {
    fn variant(quick: bool, env: &Env) -> BagSuite {
        let (exe, scratch) = (env.exe.clone(), env.out.join("bag-scratch"));
        if quick {
            BagSuite::quick(exe, scratch)
        } else {
            BagSuite::full(exe, scratch)
        }
    }
}

impl Suite for BagSuite {
    type Options = BagOptions;
    const NAME: &'static str = "bag";
    const ABOUT: &'static str = "Recording and replay (`nerve bag`): throughput, drops and \
                                 recorder CPU at CyberRT's scenarios and 1 kHz, saturation \
                                 beside the raw disk, playback timing error";
    const SEED: Option<&'static str> = None;

    fn preset(variant: Variant, env: &Env) -> BagSuite {
        let mut suite = BagSuite::variant(variant.quick(), env);
        if variant == Variant::Smoke {
            (suite.seconds, suite.saturation_mib, suite.play_seconds) = (0.5, 16, 0.5);
            suite.conversion_ms = 2;
            suite.bridge_frames = 3;
            suite.saturation_repeats = 1;
            suite.compressions = vec!["none".into()];
        }
        suite
    }

    fn from_options(o: BagOptions, env: &Env) -> Result<BagSuite, SuiteError> {
        let mut suite = BagSuite::variant(o.quick, env);
        if let Some(s) = o.seconds {
            if !(s.is_finite() && s > 0.0) {
                return Err(SuiteError::Invalid(format!(
                    "--seconds must be positive, got {s}"
                )));
            }
            suite.seconds = s;
        }
        if let Some(m) = o.saturation_mib {
            if m == 0 {
                return Err(SuiteError::Invalid(
                    "--saturation-mib must be at least 1".into(),
                ));
            }
            suite.saturation_mib = m;
        }
        Ok(suite)
    }

    fn quick(&self) -> bool {
        self.quick
    }

    fn run(&self, env: &Env) -> Result<SuiteOutput, SuiteError> {
        // bags of up to gigabytes: gone if the run is interrupted too
        let scratch = self.scratch.clone();
        let _cleanup = interrupt::on_stop(move || {
            let _ = std::fs::remove_dir_all(scratch);
        });
        self.execute(&env.machine).map_err(SuiteError::Failed)
    }
}
