//! Errors: one enum per operation.

use crate::state::{CallbackReturn, State, Transition};
use thiserror::Error;

/// Creating a managed node (its services, its event topic) or serving it failed.
#[derive(Debug, Error)]
pub enum LifecycleError {
    /// A lifecycle service could not be opened.
    #[error("managed node {node}: {source}")]
    Service {
        /// The node.
        node: String,
        /// Why.
        source: nerve::ServiceError,
    },
    /// The transition event topic could not be opened.
    #[error("managed node {node}: {source}")]
    Topic {
        /// The node.
        node: String,
        /// Why.
        source: nerve::TopicError,
    },
    /// A request could not be taken or answered.
    #[error("managed node {node}: {source}")]
    Serve {
        /// The node.
        node: String,
        /// Why.
        source: nerve::ServeError,
    },
    /// Adding the services to an executor failed.
    #[error("managed node {node}: {source}")]
    Exec {
        /// The node.
        node: String,
        /// Why.
        source: nerve::ExecError,
    },
    /// Waiting for requests failed.
    #[error("managed node {node}: {source}")]
    Wait {
        /// The node.
        node: String,
        /// Why.
        source: nerve::WaitError,
    },
    /// The services were handed to an executor already (serve them there).
    #[error("managed node {node}: its services already run on an executor")]
    AlreadyServed {
        /// The node.
        node: String,
    },
}

/// A transition was refused or did not reach its goal.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum TransitionError {
    /// The transition does not leave the node's current state.
    #[error("managed node {node}: transition {transition} is not valid from state {state} (valid: {valid})")]
    Invalid {
        /// The node.
        node: String,
        /// Its state.
        state: State,
        /// What was asked for (a label or `id N`).
        transition: String,
        /// The transitions valid from `state`, comma-separated (`none` if none).
        valid: String,
    },
    /// Another transition is in progress (asked from inside a transition callback).
    #[error("managed node {node}: transition {transition} refused: {running} is in progress (state {state})")]
    Busy {
        /// The node.
        node: String,
        /// Its (transition) state.
        state: State,
        /// What was asked for.
        transition: Transition,
        /// The transition running.
        running: Transition,
    },
    /// The callback failed or erred: the node is now in `state`.
    #[error("managed node {node}: {transition} callback returned {result:?}: now {state}")]
    Failed {
        /// The node.
        node: String,
        /// The transition.
        transition: Transition,
        /// What its callback said (a panic counts as `Error`).
        result: CallbackReturn,
        /// Where the node ended up.
        state: State,
    },
}

/// Asking a managed node in another process failed.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The client could not be created.
    #[error("managed node {node}: {source}")]
    Open {
        /// The node.
        node: String,
        /// Why.
        source: nerve::ServiceError,
    },
    /// Nothing serves the node's lifecycle services.
    #[error("no managed node {node} (nothing serves {service})")]
    NoNode {
        /// The node.
        node: String,
        /// The service looked for.
        service: String,
    },
    /// The node did not answer in time (it may be stuck in a transition).
    #[error("managed node {node}: {what} not answered within {timeout:?}")]
    Timeout {
        /// The node.
        node: String,
        /// What was asked (`get_state`, `transition configure`).
        what: String,
        /// How long was waited.
        timeout: std::time::Duration,
    },
    /// The node refused the transition (the reason names its state).
    #[error("{reason}")]
    Refused {
        /// The node.
        node: String,
        /// The node's reason.
        reason: String,
    },
    /// The transition ran but its callback failed or erred.
    #[error("managed node {node}: {transition} failed: now {state}")]
    Failed {
        /// The node.
        node: String,
        /// The transition label.
        transition: String,
        /// Where the node ended up.
        state: State,
    },
    /// The label is not a transition.
    #[error(
        "unknown transition {label:?} (one of: configure, activate, deactivate, cleanup, shutdown)"
    )]
    UnknownTransition {
        /// What was given.
        label: String,
    },
    /// A call failed otherwise.
    #[error("managed node {node}: {source}")]
    Call {
        /// The node.
        node: String,
        /// Why.
        source: nerve::CallError,
    },
    /// The answer did not make sense (an unknown state id).
    #[error("managed node {node}: malformed answer: {reason}")]
    Malformed {
        /// The node.
        node: String,
        /// What was wrong.
        reason: String,
    },
}
