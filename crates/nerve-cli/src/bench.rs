//! `nerve bench …`: the benchmark suites (see the nerve-bench crate). This module only
//! parses arguments and dispatches through the suites' registry: every suite's
//! subcommand and options come from there.

use crate::failure::{usage, CmdResult, Failure};
use clap::{ArgMatches, Args, Command, FromArgMatches, Subcommand};
use nerve_bench::registry;
use nerve_bench::run::{self, Ran};
use nerve_bench::suite::{SuiteError, Variant};
use std::path::PathBuf;

/// Benchmark suites.
#[derive(Subcommand)]
pub enum BenchCommand {
    /// One suite of the registry (`nerve bench <suite> [options]`).
    #[command(flatten)]
    Suite(SuiteCommand),
    /// Every suite (service, topic, paths, lidar, timer, scheduler, python, bag, control)
    /// into one report with plots.
    All(AllArgs),
    /// A child process of a suite (started by the suites themselves).
    #[command(hide = true)]
    Role {
        /// The role (publisher, subscriber, ponger, sink, timer-cycle, …).
        role: String,
        /// Its arguments (usually its settings as JSON).
        #[arg(allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Server side of one system of the service suite: the role `peer`.
    #[command(hide = true)]
    Peer {
        /// System id.
        system: String,
        /// Where to serve (service name, socket path or port).
        endpoint: String,
    },
    /// The Rust ponger of the Python ping-pong (started by pybench.py): the role
    /// `py-ponger`.
    #[command(hide = true, name = "py-ponger")]
    PyPonger {
        /// `--msg cmdvel|imu --ping-topic … --pong-topic …`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// `nerve bench <suite> [options]`: a suite of the registry with its parsed options.
pub struct SuiteCommand {
    name: String,
    matches: ArgMatches,
}

impl FromArgMatches for SuiteCommand {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        match m.subcommand() {
            Some((name, sub)) if registry::command(name).is_some() => Ok(SuiteCommand {
                name: name.to_string(),
                matches: sub.clone(),
            }),
            _ => Err(clap::Error::new(clap::error::ErrorKind::InvalidSubcommand)),
        }
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = SuiteCommand::from_arg_matches(m)?;
        Ok(())
    }
}

impl Subcommand for SuiteCommand {
    fn augment_subcommands(cmd: Command) -> Command {
        registry::commands().fold(cmd, |cmd, s| cmd.subcommand(s.options()))
    }

    fn augment_subcommands_for_update(cmd: Command) -> Command {
        SuiteCommand::augment_subcommands(cmd)
    }

    fn has_subcommand(name: &str) -> bool {
        registry::command(name).is_some()
    }
}

/// Options of `bench all`.
#[derive(Args)]
pub struct AllArgs {
    /// Every suite's quick variant (about 30 minutes on 2 cores).
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Every suite at its smallest (a few seconds each): for tests of the whole pipeline.
    #[arg(long, hide = true)]
    smoke: bool,
}

/// A suite's error as the command's: invalid settings are usage errors.
fn failure(e: SuiteError) -> Failure {
    match e {
        SuiteError::Invalid(m) => usage(m),
        e => Failure::Runtime(e.into()),
    }
}

/// Prints what a run left for the terminal; an interrupted run exits with 130.
fn finish(ran: Ran) -> CmdResult {
    print!("{}", ran.text);
    if ran.interrupted {
        return Err(Failure::Interrupted);
    }
    Ok(())
}

/// Runs a bench command.
pub fn run(cmd: BenchCommand) -> CmdResult {
    match cmd {
        BenchCommand::Suite(s) => finish(run::one(&s.name, &s.matches).map_err(failure)?),
        BenchCommand::All(a) => {
            let variant = match (a.smoke, a.quick) {
                (true, _) => Variant::Smoke,
                (false, true) => Variant::Quick,
                (false, false) => Variant::Full,
            };
            finish(run::all(variant, &a.out).map_err(failure)?)
        }
        BenchCommand::Role { role, args } => registry::run_role(&role, &args).map_err(failure),
        BenchCommand::Peer { system, endpoint } => {
            registry::run_role("peer", &[system, endpoint]).map_err(failure)
        }
        BenchCommand::PyPonger { args } => registry::run_role("py-ponger", &args).map_err(failure),
    }
}
