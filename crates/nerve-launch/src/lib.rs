//! Nerve launch: start a system of processes and composed nodes from a TOML launch file,
//! supervise it and stop it cleanly.
//!
//! ```no_run
//! use nerve_launch::{LaunchFile, StartOptions};
//! use std::time::Duration;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let plan = LaunchFile::load("robot.launch.toml", &[("robot", "r2")])?;
//! let running = plan.start(StartOptions::new(nerve::Config::from_env()?))?;
//! running.wait_ready(Duration::from_secs(30))?;
//! // ... measure, test ...
//! let report = running.shutdown();
//! for p in report.escalated() {
//!     eprintln!("{} needed {:?}", p.name, p.ended_by);
//! }
//! # Ok(()) }
//! ```
//!
//! The file format, the environment each process gets and the supervision rules are
//! described in `docs/design.md` ("Launch").

#![warn(missing_docs)]

mod cgroup;
pub mod component;
mod contain;
pub mod error;
mod file;
mod guardian;
mod lifecycle;
mod plan;
mod supervisor;
mod sys;

pub use contain::{probe_containment, Containment, ContainmentMode};
pub use error::{BoxError, ContainerError, Diagnostic, LaunchError};
pub use file::{parse_duration, LaunchFile, MAX_INCLUDE_DEPTH, MAX_PROCESSES};
pub use guardian::{run_guardian_if_requested, Guardian, GUARDIAN_ARG};
pub use plan::{
    ComponentNode, LifecycleGoal, OnExit, ParamValue, Plan, ProcessSpec, Ready, Respawn,
    ShutdownTimeouts,
};
pub use supervisor::{
    EndedBy, Event, EventSink, ExitReason, ExitReport, Output, ProcessShutdown, Running,
    ShutdownReport, StartOptions, MAX_LINE,
};
