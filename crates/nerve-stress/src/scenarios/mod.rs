//! The scenarios, one module each.

pub mod discovery;
pub mod mixed_qos;
pub mod publisher_kill;
pub mod restart_all;
pub mod soak;
pub mod stopped;
pub mod subscriber_kill;
pub mod users;

pub(crate) use crate::domain::{setup, Domain};
pub(crate) use crate::roles::{cloud_whole, fibonacci, imu, imu_whole, RoleReport, RoleSpec};
pub(crate) use crate::{Options, Outcome, Scenario, StressError};
pub(crate) use nerve::prelude::*;
pub(crate) use nerve_msgs::{Imu, PointCloud};
pub(crate) use std::time::{Duration, Instant};

/// How long a child may take to get going, or a sample to come, before the round fails.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// A progress bar of `len` steps (hidden unless the options ask for one).
pub(crate) fn progress(opts: &Options, len: u64, what: &str) -> indicatif::ProgressBar {
    if opts.progress {
        nerve_bench_harness::progress(len, what)
    } else {
        indicatif::ProgressBar::hidden()
    }
}

/// The `done <json>` report of a role whose stdin was closed.
pub(crate) fn report_of(
    child: &mut nerve_bench_harness::child::Child,
    scenario: &'static str,
) -> Result<RoleReport, StressError> {
    child.close_stdin();
    let line = child
        .expect("done ", WAIT)
        .map_err(|e| setup(scenario, e))?;
    serde_json::from_str(line.trim_start_matches("done ")).map_err(|e| setup(scenario, e))
}
