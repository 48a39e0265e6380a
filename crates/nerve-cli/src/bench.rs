//! `nerve bench …`: the benchmark suites (see the nerve-bench crate).

use crate::{usage, CmdResult, Failure};
use clap::{Args, Subcommand};
use nerve_bench::service::{ServiceSuite, SystemId};
use std::path::PathBuf;

/// Benchmark suites.
#[derive(Subcommand)]
pub enum BenchCommand {
    /// Request/response ping-pong (seeds/000) on Nerve and its peers side by side.
    Service(ServiceArgs),
    /// Server side of one system (started by the suites themselves).
    #[command(hide = true)]
    Peer {
        /// System id.
        system: String,
        /// Where to serve (service name, socket path or port).
        endpoint: String,
    },
}

/// Options of `bench service`.
#[derive(Args)]
pub struct ServiceArgs {
    /// 2,000 calls after 200 warm-up per system and payload (instead of 10,000 after 1,000).
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json and report.md.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Measured calls per system and payload (overrides --quick).
    #[arg(long)]
    calls: Option<usize>,
    /// Warm-up calls per system and payload (overrides --quick).
    #[arg(long)]
    warmup: Option<usize>,
    /// Payload sizes in bytes, comma-separated (multiples of 8), e.g. 64,4096,1048576.
    #[arg(long, value_delimiter = ',')]
    payloads: Option<Vec<usize>>,
    /// Systems to run, comma-separated: nerve-adaptive, nerve-spin, nerve-block, iceoryx2,
    /// zenoh, cyclonedds, uds.
    #[arg(long, value_delimiter = ',')]
    systems: Option<Vec<String>>,
}

/// Runs a bench command.
pub fn run(cmd: BenchCommand) -> CmdResult {
    match cmd {
        BenchCommand::Peer { system, endpoint } => {
            nerve_bench::service::run_peer(&system, &endpoint)?;
            Ok(())
        }
        BenchCommand::Service(a) => {
            let exe = std::env::current_exe()?;
            let peer = (exe, vec!["bench".to_string(), "peer".to_string()]);
            let mut suite = if a.quick {
                ServiceSuite::quick(peer)
            } else {
                ServiceSuite::full(peer)
            };
            suite.out = a.out;
            if let Some(c) = a.calls {
                suite.calls = c;
            }
            if let Some(w) = a.warmup {
                suite.warmup = w;
            }
            if let Some(p) = a.payloads {
                suite.payloads = p;
            }
            if let Some(s) = a.systems {
                suite.systems = s
                    .iter()
                    .map(|id| {
                        SystemId::parse(id).ok_or_else(|| {
                            usage(format!(
                                "unknown system {id:?}; known: {}",
                                SystemId::ALL.map(|s| s.id()).join(", ")
                            ))
                        })
                    })
                    .collect::<Result<_, Failure>>()?;
            }
            let report = suite.run().map_err(|e| match e {
                nerve_bench::service::SuiteError::Invalid(m) => usage(m),
                e => Failure::Runtime(e.into()),
            })?;
            print!("{}", report.summary());
            println!("report: {}/report.md and report.json", suite.out.display());
            Ok(())
        }
    }
}
