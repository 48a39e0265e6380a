//! `nerve bench python`: its options, its preset in `bench all`, its role (the Rust
//! ponger that pybench.py starts).

use super::{run_py_ponger, PyMsg, PythonSuite, ALL_SYSTEMS};
use crate::report::SuiteOutput;
use crate::suite::{self, Env, Role, Suite, SuiteError, Variant};
use clap::Parser;
use std::path::{Path, PathBuf};

/// Options of `nerve bench python`.
#[derive(clap::Args)]
pub struct PythonOptions {
    /// 20,000 round trips instead of 200,000, 2 s per stream point instead of 10 s, 20
    /// tensors per size instead of 200, 3 s per CPU point instead of 10 s.
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Virtual environment to use, created and filled if needed (default: $NERVE_BENCH_VENV,
    /// else bench-venv in the workspace's target directory, $CARGO_TARGET_DIR respected).
    #[arg(long)]
    venv: Option<PathBuf>,
    /// Systems, comma-separated: nerve, nerve_spin, shm_floor, iceoryx2, shm_pipe,
    /// pickle_uds, zenoh, cyclonedds, sleep_loop.
    #[arg(long, value_delimiter = ',')]
    systems: Option<Vec<String>>,
}

impl suite::Options for PythonOptions {
    fn out(&self) -> &Path {
        &self.out
    }
}

/// The arguments pybench.py gives the Rust ponger.
#[derive(Parser)]
#[command(name = "py-ponger")]
struct PongerArgs {
    /// Message: cmdvel or imu.
    #[arg(long)]
    msg: String,
    /// Topic the Python pinger publishes on.
    #[arg(long)]
    ping_topic: String,
    /// Topic the answers go to.
    #[arg(long)]
    pong_topic: String,
}

/// `py-ponger --msg … --ping-topic … --pong-topic …`: answers every message on the ping
/// topic with the same message on the pong topic until STOP.
fn ponger(args: &[String]) -> Result<(), SuiteError> {
    let a = PongerArgs::try_parse_from(
        std::iter::once("py-ponger".to_string()).chain(args.iter().cloned()),
    )
    .map_err(|e| {
        let text = e.to_string();
        SuiteError::Invalid(
            text.lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ")
                .to_string(),
        )
    })?;
    let msg = PyMsg::parse(&a.msg).ok_or_else(|| {
        SuiteError::Invalid(format!("unknown message {:?}; known: cmdvel, imu", a.msg))
    })?;
    run_py_ponger(msg, &a.ping_topic, &a.pong_topic)?;
    Ok(())
}

impl PythonSuite {
    fn variant(quick: bool, env: &Env) -> PythonSuite {
        let ponger = (
            env.exe.clone(),
            vec!["bench".to_string(), "py-ponger".to_string()],
        );
        if quick {
            PythonSuite::quick(ponger)
        } else {
            PythonSuite::full(ponger)
        }
    }
}

impl Suite for PythonSuite {
    type Options = PythonOptions;
    const NAME: &'static str = "python";
    const ABOUT: &'static str = "Nerve's Python package beside the Python bindings of \
                                 iceoryx2, Zenoh and Cyclone DDS and plain-Python baselines: \
                                 ping-pong (also against a Rust ponger), streams, tensor \
                                 hand-off, CPU. Prepares a virtual environment with the peers \
                                 and a release build of the package";
    const SEED: Option<&'static str> = None;
    const ROLES: &'static [Role] = &[Role {
        name: "py-ponger",
        run: ponger,
    }];

    fn preset(variant: Variant, env: &Env) -> PythonSuite {
        let mut suite = PythonSuite::variant(variant.quick(), env);
        if variant == Variant::Smoke {
            // only where a ready environment exists: never a pip install or a release build
            suite.setup = false;
            suite.systems = vec!["nerve".into()];
            (suite.round_trips, suite.warmup, suite.tensors) = (50, 5, 3);
            (suite.stream_sizes, suite.stream_seconds) = (vec![1024], 0.3);
            (suite.tensor_mib, suite.cpu_seconds) = (vec![1], 0.3);
        }
        suite
    }

    fn from_options(o: PythonOptions, env: &Env) -> Result<PythonSuite, SuiteError> {
        let mut suite = PythonSuite::variant(o.quick, env);
        if let Some(v) = o.venv {
            suite.venv = v;
        }
        if let Some(s) = &o.systems {
            suite.systems = suite::pick(
                s,
                "python system",
                |id| ALL_SYSTEMS.contains(&id).then(|| id.to_string()),
                &ALL_SYSTEMS,
            )?;
        }
        suite.validate().map_err(SuiteError::Invalid)?;
        Ok(suite)
    }

    fn quick(&self) -> bool {
        self.quick
    }

    fn run(&self, _env: &Env) -> Result<SuiteOutput, SuiteError> {
        self.execute().map_err(SuiteError::Failed)
    }
}
