//! The process harness of Nerve's benchmarks (`nerve-bench`) and stress scenarios
//! (`nerve-stress`): child processes talked to by lines on stdout, simulated hosts,
//! machine facts (CPU, memory, shared memory, pinning), statistics, progress bars, and
//! stopping a run on Ctrl-C or SIGTERM. It knows nothing of the suites.
//!
//! ```no_run
//! use nerve_bench_harness::child::Child;
//! use std::time::Duration;
//!
//! // a child that prints `ready`, then works until its stdin closes
//! let exe = std::path::Path::new("/usr/bin/nerve");
//! let mut child = Child::spawn(exe, &["bench".into(), "role".into()], &[], "worker")?;
//! child.expect("ready", Duration::from_secs(10))?;
//! child.stop();
//! # Ok::<(), nerve_bench_harness::PeerError>(())
//! ```
#![warn(missing_docs)]

pub mod child;
mod error;
pub mod hosts;
pub mod interrupt;
pub mod machine;
pub mod pki;
mod progress;
pub mod stats;

pub use error::PeerError;
pub use progress::progress;
