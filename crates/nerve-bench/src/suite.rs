//! What a suite is: the [`Suite`] trait (a name, the seed it reproduces, its options, a
//! run that returns its part of the report), and what every suite is given ([`Env`],
//! [`Variant`]) or declares ([`Role`]).

use crate::harness::machine::Machine;
use crate::report::SuiteOutput;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// One benchmark suite. A suite lives in a folder of its own under `suites/` and is
/// listed once in the registry ([`crate::suites::ALL`]); `nerve bench all`,
/// `nerve bench <NAME>`, the child roles and the report find it there.
pub trait Suite: Sized + Send + 'static {
    /// Its command-line options: `nerve bench <NAME> [options]`.
    type Options: Options;
    /// `nerve bench <NAME>`, and the name of its part of the report.
    const NAME: &'static str;
    /// One line for `nerve bench --help`.
    const ABOUT: &'static str;
    /// The seed report it reproduces (`"000"` for `seeds/000`), if any.
    const SEED: Option<&'static str>;
    /// Whether `nerve bench <NAME>` exists (the cross-host suite runs as `bench topic
    /// --cross-host` and in `bench all`).
    const COMMAND: bool = true;
    /// The child processes it starts: `nerve bench role <role> <args…>`.
    const ROLES: &'static [Role] = &[];

    /// The suite as `nerve bench all` runs it.
    fn preset(variant: Variant, env: &Env) -> Self;
    /// The suite as `nerve bench <NAME>` runs it; invalid options are
    /// [`SuiteError::Invalid`].
    fn from_options(options: Self::Options, env: &Env) -> Result<Self, SuiteError>;
    /// Whether it runs with its quick settings (the report says so).
    fn quick(&self) -> bool;
    /// Runs it: its part of the report. A system that cannot run is listed as skipped,
    /// not an error.
    fn run(&self, env: &Env) -> Result<SuiteOutput, SuiteError>;
    /// Whether its [`run`](Suite::run) wrote a report of its own into the report
    /// directory, printed as its output's `summary`, so `nerve bench <NAME>` writes no
    /// bundle. Only the service suite alone does: its `report.json` predates the bundle.
    fn own_report(&self) -> bool {
        false
    }
}

/// A suite's command-line options (clap arguments with at least `--out`).
pub trait Options: clap::Args + Send + 'static {
    /// The report directory (`--out`).
    fn out(&self) -> &Path;
}

/// Which settings `nerve bench all` runs every suite with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The full run.
    Full,
    /// `--quick`: every suite's quick settings.
    Quick,
    /// `--smoke`: every suite at its smallest, a few seconds each (tests of the pipeline).
    Smoke,
}

impl Variant {
    /// Whether the report counts it as a quick run.
    pub fn quick(self) -> bool {
        self != Variant::Full
    }
}

/// What a suite runs with: the `nerve` binary its children are started from, the report
/// directory, the machine.
#[derive(Clone, Debug)]
pub struct Env {
    /// The `nerve` binary (children run `<exe> bench role <role> <args…>`).
    pub exe: PathBuf,
    /// The report directory.
    pub out: PathBuf,
    /// The machine.
    pub machine: Machine,
}

impl Env {
    /// The environment of this process writing to `out`.
    pub fn new(out: &Path) -> Result<Env, SuiteError> {
        let exe = std::env::current_exe()
            .map_err(|e| SuiteError::Failed(format!("cannot find the nerve binary: {e}")))?;
        Ok(Env {
            exe,
            out: out.to_path_buf(),
            machine: Machine::detect(),
        })
    }

    /// Program and leading arguments of a child role: `<exe> bench role`.
    pub fn role_command(&self) -> (PathBuf, Vec<String>) {
        (
            self.exe.clone(),
            vec!["bench".to_string(), "role".to_string()],
        )
    }

    /// Program and leading arguments of one role: `<exe> bench role <role>`.
    pub fn role(&self, role: &str) -> (PathBuf, Vec<String>) {
        let (exe, mut args) = self.role_command();
        args.push(role.to_string());
        (exe, args)
    }
}

/// A child process a suite starts: `nerve bench role <name> <args…>` runs `run(args)`.
#[derive(Clone, Copy)]
pub struct Role {
    /// The role's name.
    pub name: &'static str,
    /// Runs it with the arguments after its name (usually one JSON spec).
    pub run: fn(&[String]) -> Result<(), SuiteError>,
}

/// A role's JSON spec from its arguments: a usage error "bad {what} spec: …" when it
/// does not parse.
pub fn spec<T: DeserializeOwned>(args: &[String], what: &str) -> Result<T, SuiteError> {
    let text = args.first().map(String::as_str).unwrap_or("");
    serde_json::from_str(text).map_err(|e| SuiteError::Invalid(format!("bad {what} spec: {e}")))
}

/// A Nerve domain number from a role's arguments.
pub fn domain_arg(args: &[String]) -> Result<u32, SuiteError> {
    let text = args.first().map(String::as_str).unwrap_or("");
    text.parse()
        .map_err(|e| SuiteError::Invalid(format!("bad domain {text:?}: {e}")))
}

/// Parses comma-separated ids into values: a usage error naming the unknown id and the
/// known ones.
pub fn pick<T>(
    ids: &[String],
    what: &str,
    parse: impl Fn(&str) -> Option<T>,
    known: &[&str],
) -> Result<Vec<T>, SuiteError> {
    ids.iter()
        .map(|id| {
            parse(id).ok_or_else(|| {
                SuiteError::Invalid(format!(
                    "unknown {what} {id:?}; known: {}",
                    known.join(", ")
                ))
            })
        })
        .collect()
}

/// Why a suite, a role or the report failed.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// An option, a setting or a role's arguments are invalid (a usage error).
    #[error("{0}")]
    Invalid(String),
    /// The run failed.
    #[error("{0}")]
    Failed(String),
    /// Writing the report failed.
    #[error("cannot write the report to {path}: {source}")]
    Write {
        /// Target directory.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl From<crate::harness::PeerError> for SuiteError {
    fn from(e: crate::harness::PeerError) -> SuiteError {
        SuiteError::Failed(e.to_string())
    }
}
