//! The echo contract every system under test implements: a client makes one synchronous
//! call (it writes the whole request, the server copies it into the whole response, the
//! client checks the whole response), a server answers until it is told to stop.

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

/// Writes a request payload in place (called once per call with the request buffer).
pub type Fill<'a> = &'a mut dyn FnMut(&mut [u8]);
/// Checks a response payload in place.
pub type Check<'a> = &'a mut dyn FnMut(&[u8]) -> Result<(), String>;

/// Client side of an echo system.
pub trait EchoClient {
    /// One synchronous call with a `len`-byte request: `fill` writes the request in the
    /// system's send buffer (shared memory where the system has it), `check` reads the
    /// response where it arrived. Returns once the response was checked.
    fn call(&mut self, len: usize, fill: Fill<'_>, check: Check<'_>) -> Result<(), PeerError>;
}
