//! Nerve's benchmark suites: Nerve side by side with the systems robots use today, in one
//! run, on one machine, with the same work per call.
//!
//! A tour:
//! - [`suite`]: the [`Suite`](suite::Suite) trait every suite implements (a name, the
//!   seed it reproduces, its options, a run that returns its part of the report);
//! - [`suites`]: one folder per suite and the registry that lists them ([`registry`]
//!   looks them up: `bench all`, `bench <suite>`, the child roles);
//! - [`run`]: running suites under the harness's supervision, so Ctrl-C or SIGTERM stops
//!   a run and still leaves the report of what finished;
//! - [`report`]: the bundle (`report.json`, `report.md`, `index.html`), the summary, the
//!   published figures, plots;
//! - [`peers`]: the systems under test, one module each (the echo contract of the
//!   service suite, the stream ends of the topic suites);
//! - [`harness`]: child processes, simulated hosts, machine facts, statistics (its own
//!   crate, `nerve-bench-harness`, which `nerve-stress` uses too).
//!
//! ```no_run
//! // what `nerve bench timer --quick` does
//! let cmd = nerve_bench::registry::command("timer").unwrap();
//! let matches = cmd.options().get_matches_from(["timer", "--quick"]);
//! let ran = nerve_bench::run::one("timer", &matches)?;
//! print!("{}", ran.text);
//! # Ok::<(), nerve_bench::suite::SuiteError>(())
//! ```
#![warn(missing_docs)]

pub use nerve_bench_harness as harness;

pub mod peers;
pub mod registry;
pub mod report;
pub mod run;
pub mod suite;
pub mod suites;
