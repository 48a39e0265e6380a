//! The error of a peer under test: a child process of the harness or a system measured in
//! process.

/// Error of a peer under test.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The peer could not be set up (missing tool, port in use, ...).
    #[error("{system}: setup failed: {reason}")]
    Setup {
        /// System name.
        system: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// A call failed (timeout, disconnect, transport error).
    #[error("{system}: call failed: {reason}")]
    Call {
        /// System name.
        system: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// The response did not match the request.
    #[error("{system}: bad response: {reason}")]
    BadResponse {
        /// System name.
        system: &'static str,
        /// What was wrong with it.
        reason: String,
    },
}

impl PeerError {
    /// A setup failure of `system`.
    pub fn setup(system: &'static str, reason: impl std::fmt::Display) -> PeerError {
        PeerError::Setup {
            system,
            reason: reason.to_string(),
        }
    }

    /// A failed call of `system`.
    pub fn call(system: &'static str, reason: impl std::fmt::Display) -> PeerError {
        PeerError::Call {
            system,
            reason: reason.to_string(),
        }
    }
}
