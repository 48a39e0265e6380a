//! What can go wrong with parameters.

use super::value::ParamType;
use crate::error::{CallError, PublishError, ServeError, ServiceError, TopicError};
use thiserror::Error;

/// A parameter operation failed.
#[derive(Debug, Error)]
pub enum ParamError {
    /// A parameter file could not be read or parsed.
    #[error("{path}{}: {reason}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    File {
        /// The file.
        path: String,
        /// The line, when known.
        line: Option<usize>,
        /// What is wrong.
        reason: String,
    },
    /// The name breaks the grammar (segments of letters, digits and `_`, joined by `.`).
    #[error("invalid parameter name {name:?}: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// No parameter of that name was declared.
    #[error("parameter {name:?} is not declared")]
    NotDeclared {
        /// The name.
        name: String,
    },
    /// The parameter was declared before.
    #[error("parameter {name:?} is already declared")]
    AlreadyDeclared {
        /// The name.
        name: String,
    },
    /// The value has another type than the parameter.
    #[error("parameter {name:?} is of type {expected}, not {got}")]
    WrongType {
        /// The name.
        name: String,
        /// The parameter's type.
        expected: ParamType,
        /// The value's type.
        got: ParamType,
    },
    /// The value is outside the declared range or off its step.
    #[error("parameter {name:?}: {value} is {reason}")]
    OutOfRange {
        /// The name.
        name: String,
        /// The value, as text.
        value: String,
        /// The range it misses.
        reason: String,
    },
    /// The parameter is read-only.
    #[error("parameter {name:?} is read-only")]
    ReadOnly {
        /// The name.
        name: String,
    },
    /// A validation callback rejected the change.
    #[error("rejected: {reason}")]
    Rejected {
        /// The callback's reason.
        reason: String,
    },
    /// A limit that keeps a node's parameters bounded.
    #[error("{what}: more than the {max} allowed")]
    Limit {
        /// What went over.
        what: String,
        /// The limit.
        max: usize,
    },
    /// A callback tried to set parameters while a set was running.
    #[error("parameters cannot be set from inside a parameter callback")]
    Reentrant,
    /// The remote node answered with an error, or sent something unreadable.
    #[error("node {node}: {reason}")]
    Remote {
        /// The node asked.
        node: String,
        /// What it said.
        reason: String,
    },
    /// Opening the parameter service or client failed.
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// Calling a remote node failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// Answering a remote request failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// Opening the parameter-events topic failed.
    #[error(transparent)]
    Topic(#[from] TopicError),
    /// Publishing a parameter event failed.
    #[error(transparent)]
    Publish(#[from] PublishError),
}
