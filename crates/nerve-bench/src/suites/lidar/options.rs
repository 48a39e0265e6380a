//! `nerve bench lidar`: its options, its preset in `bench all`, its role (a stage of the
//! traced pipeline).

use super::pipeline::{run_stage, StageSpec};
use super::LidarSuite;
use crate::report::SuiteOutput;
use crate::suite::{self, Env, Role, Suite, SuiteError, Variant};
use std::path::{Path, PathBuf};

/// Options of `nerve bench lidar`.
#[derive(clap::Args)]
pub struct LidarOptions {
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

impl suite::Options for LidarOptions {
    fn out(&self) -> &Path {
        &self.out
    }
}

impl Suite for LidarSuite {
    type Options = LidarOptions;
    const NAME: &'static str = "lidar";
    const ABOUT: &'static str = "Point clouds from a simulated Ouster driver (seeds/003): \
                                 jitter and end-to-end latency";
    const SEED: Option<&'static str> = Some("003");
    const ROLES: &'static [Role] = &[Role {
        name: "pipeline-stage",
        run: |args| {
            let spec: StageSpec = suite::spec(args, "pipeline")?;
            run_stage(&spec).map_err(SuiteError::Failed)
        },
    }];

    fn preset(variant: Variant, env: &Env) -> LidarSuite {
        let mut suite = if variant.quick() {
            LidarSuite::quick(env.role_command())
        } else {
            LidarSuite::full(env.role_command())
        };
        if variant == Variant::Smoke {
            (suite.frames, suite.modes, suite.beams) = (5, vec![512], vec![16]);
            suite.pipeline_frames = 5;
        }
        suite
    }

    fn from_options(o: LidarOptions, env: &Env) -> Result<LidarSuite, SuiteError> {
        let mut suite = if o.quick {
            LidarSuite::quick(env.role_command())
        } else {
            LidarSuite::full(env.role_command())
        };
        if let Some(f) = o.frames {
            suite.frames = f;
        }
        if let Some(m) = o.modes {
            suite.modes = m;
        }
        if let Some(b) = o.beams {
            suite.beams = b;
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
