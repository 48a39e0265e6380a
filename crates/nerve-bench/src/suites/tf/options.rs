//! `nerve bench tf`: its options and its preset in `bench all`.

use super::TfSuite;
use crate::report::SuiteOutput;
use crate::suite::{self, Env, Suite, SuiteError, Variant};
use std::path::{Path, PathBuf};

/// Options of `nerve bench tf`.
#[derive(clap::Args)]
pub struct TfOptions {
    /// 0.3 s per point instead of 2 s (every depth and reader count kept).
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Seconds of lookups per point (overrides --quick).
    #[arg(long)]
    seconds: Option<f64>,
    /// Chain depths (edges between the two frames looked up), comma-separated.
    #[arg(long, value_delimiter = ',')]
    depths: Option<Vec<usize>>,
    /// Reader thread counts, comma-separated.
    #[arg(long, value_delimiter = ',')]
    readers: Option<Vec<usize>>,
}

impl suite::Options for TfOptions {
    fn out(&self) -> &Path {
        &self.out
    }
}

impl Suite for TfSuite {
    type Options = TfOptions;
    const NAME: &'static str = "tf";
    const ABOUT: &'static str = "Transform lookups through chains of 1, 5 and 20 frames by \
                                 1, 4 and 8 reader threads while a writer updates every \
                                 frame at 100 Hz: nerve-tf's TfBuffer beside a \
                                 Mutex<TfTree>, and the insert cost";
    const SEED: Option<&'static str> = None;

    fn preset(variant: Variant, _env: &Env) -> TfSuite {
        match variant {
            Variant::Full => TfSuite::full(),
            Variant::Quick => TfSuite::quick(),
            Variant::Smoke => TfSuite {
                seconds: 0.05,
                depths: vec![5],
                readers: vec![1],
                ..TfSuite::quick()
            },
        }
    }

    fn from_options(o: TfOptions, _env: &Env) -> Result<TfSuite, SuiteError> {
        let mut s = if o.quick {
            TfSuite::quick()
        } else {
            TfSuite::full()
        };
        if let Some(v) = o.seconds {
            s.seconds = v;
        }
        if let Some(d) = o.depths {
            s.depths = d;
        }
        if let Some(r) = o.readers {
            s.readers = r;
        }
        s.validate().map_err(SuiteError::Invalid)?;
        Ok(s)
    }

    fn quick(&self) -> bool {
        self.quick
    }

    fn run(&self, env: &Env) -> Result<SuiteOutput, SuiteError> {
        self.execute(&env.machine).map_err(SuiteError::Failed)
    }
}
