//! Errors: one enum for loading and running a launch, with a located diagnostic for every
//! problem in a file.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;
use thiserror::Error;

/// A problem at a place in a launch file: `file:line:col: field: reason`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The launch file.
    pub file: PathBuf,
    /// Line, from 1 (0: the file as a whole).
    pub line: usize,
    /// Column, from 1 (0: the file as a whole).
    pub col: usize,
    /// The field, e.g. `process[talker].cmd` (empty when none applies).
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.col)?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// Loading or running a launch failed.
#[derive(Debug, Error)]
pub enum LaunchError {
    /// The launch file (or a file it includes) is invalid: every problem found, located.
    #[error("{}", join(.0))]
    Invalid(Vec<Diagnostic>),
    /// A command-line argument is malformed or names no argument of the file.
    #[error("argument {arg:?}: {reason}")]
    Argument {
        /// The argument as given.
        arg: String,
        /// What is wrong.
        reason: String,
    },
    /// A process could not be started.
    #[error("cannot start {name} ({program}): {source}")]
    Spawn {
        /// The process.
        name: String,
        /// Its executable.
        program: String,
        /// The system error.
        source: std::io::Error,
    },
    /// A process did not become ready in time.
    #[error("{name} not ready within {timeout:?} (waiting for {condition})")]
    ReadyTimeout {
        /// The process.
        name: String,
        /// Its ready timeout.
        timeout: Duration,
        /// What it waited for.
        condition: String,
    },
    /// A process exited before the launch was ready.
    #[error("{name} exited during start-up: {status}")]
    ExitedEarly {
        /// The process.
        name: String,
        /// How it ended.
        status: String,
    },
    /// [`crate::Running::wait_ready`] ran out of time.
    #[error("the launch was not ready within {0:?}")]
    NotReady(Duration),
    /// The launch ended before it was ready (see its exit report).
    #[error("the launch ended before it was ready: {0}")]
    Ended(String),
    /// The guardian process (which cleans up if the launcher dies) could not be started.
    #[error("cannot start the guardian process {program}: {source}")]
    Guardian {
        /// What was run.
        program: String,
        /// The system error.
        source: std::io::Error,
    },
    /// [`crate::Containment::Cgroup`] was asked for, but no cgroup v2 is writable here.
    #[error("no cgroup for the launch: {0}")]
    CgroupUnavailable(String),
    /// The launcher's own Nerve context (for readiness checks) failed.
    #[error("nerve: {0}")]
    Nerve(String),
    /// Any other system error.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The system error.
        source: std::io::Error,
    },
}

fn join(d: &[Diagnostic]) -> String {
    d.iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// An error a component returns (any error type).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Starting a container's components failed.
#[derive(Debug, Error)]
pub enum ContainerError {
    /// `NERVE_COMPONENTS` is missing or malformed.
    #[error("NERVE_COMPONENTS: {0}")]
    Spec(String),
    /// A node names a component the container does not register.
    #[error("unknown component {name:?} (node {node}); this container has: {registered}")]
    UnknownComponent {
        /// The component asked for.
        name: String,
        /// The node that asked.
        node: String,
        /// The registered components, comma-separated.
        registered: String,
    },
    /// The shared context could not be created.
    #[error("nerve context: {0}")]
    Context(#[from] nerve::ContextError),
    /// A component failed.
    #[error("component {component} (node {node}) failed: {reason}")]
    Component {
        /// The component.
        component: String,
        /// Its node's full name.
        node: String,
        /// The error it returned or its panic message.
        reason: String,
    },
}
