//! The echo contract every system under test implements: a client makes one synchronous
//! call (it writes the whole request, the server copies it into the whole response, the
//! client checks the whole response), a server answers until it is told to stop.

use crate::harness::PeerError;

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
