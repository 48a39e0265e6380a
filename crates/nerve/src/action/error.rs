//! What can go wrong with actions.

use super::{GoalId, GoalState};
use crate::error::{
    CallError, ExecError, LoanError, NodeError, PublishError, RecvError, ServeError, ServiceError,
    TopicError,
};
use std::time::Duration;
use thiserror::Error;

/// An action operation failed.
#[derive(Debug, Error)]
pub enum ActionError {
    /// The server rejected the goal.
    #[error("action {action}: goal rejected: {reason}")]
    Rejected {
        /// The action's name.
        action: String,
        /// The server's reason.
        reason: String,
    },
    /// The server died or went away while the goal was active.
    #[error("action {action}: the server went away while goal {goal} was active")]
    ServerGone {
        /// The action's name.
        action: String,
        /// The goal.
        goal: GoalId,
    },
    /// No result within the time asked.
    #[error("action {action}: goal {goal} has no result after {timeout:?}")]
    Timeout {
        /// The action's name.
        action: String,
        /// The goal.
        goal: GoalId,
        /// How long was waited.
        timeout: Duration,
    },
    /// The server does not know the goal (never sent, or its result expired).
    #[error("action {action}: unknown goal {goal}: {reason}")]
    UnknownGoal {
        /// The action's name.
        action: String,
        /// The goal.
        goal: GoalId,
        /// What the server said.
        reason: String,
    },
    /// The goal already ended: it can neither report nor end again.
    #[error("action {action}: goal {goal} already ended ({state})")]
    Ended {
        /// The action's name.
        action: String,
        /// The goal.
        goal: GoalId,
        /// How it ended.
        state: GoalState,
    },
    /// Something the server or a client sent breaks the protocol.
    #[error("action {action}: {reason}")]
    Protocol {
        /// The action's name.
        action: String,
        /// What is wrong.
        reason: String,
    },
    /// A server of an action type that carries others ([`super::Action::CARRIER`]) was
    /// not told, or could not say, which type it serves.
    #[error("action {action}: {reason}")]
    Unsaid {
        /// The action's name.
        action: String,
        /// What is wrong.
        reason: String,
    },
    /// Too many clients for one server.
    #[error("action {action}: more than {max} clients")]
    TooManyClients {
        /// The action's name.
        action: String,
        /// The limit.
        max: usize,
    },
    /// Creating the node failed.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// Opening one of the action's services failed.
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// Opening one of the action's topics failed.
    #[error(transparent)]
    Topic(#[from] TopicError),
    /// A call to the server failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// Answering a client failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// Publishing feedback, a result or the status failed.
    #[error(transparent)]
    Publish(#[from] PublishError),
    /// Loaning feedback or a result failed.
    #[error(transparent)]
    Loan(#[from] LoanError),
    /// Receiving feedback or a result failed.
    #[error(transparent)]
    Recv(#[from] RecvError),
    /// Adding the action to an executor failed.
    #[error(transparent)]
    Exec(#[from] ExecError),
}
