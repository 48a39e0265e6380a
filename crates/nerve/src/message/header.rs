//! The header Nerve writes in front of every sample.

use iceoryx2::prelude::ZeroCopySend;

/// Metadata of every sample: loss detection and latency measurement for free.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ZeroCopySend)]
#[repr(C)]
pub struct SampleHeader {
    /// Per-publisher sequence number, starting at 1 and increasing by 1.
    pub seq: u64,
    /// Publish time on the monotonic clock, in ns (comparable between processes of a host).
    pub publish_mono_ns: u64,
    /// Publish time on the wall clock, in ns since the Unix epoch (on the simulation clock
    /// when the publishing context follows one, see [`crate::time`]).
    pub publish_wall_ns: i64,
    /// Identity of the publisher (unique per host while it lives).
    pub publisher_id: u64,
    /// Number of payload bytes in use (head plus elements).
    pub payload_len: u64,
    /// Layout hash of the message type, checked again on receipt.
    pub type_hash: u64,
    /// The publishing context (process id and context number): subscribers of that
    /// context received the sample in-process and skip its shared-memory copy.
    pub origin: u64,
}

/// Metadata of every service request and response.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ZeroCopySend)]
#[repr(C)]
pub struct CallHeader {
    /// Per-client call number, starting at 1; a response carries its request's number.
    pub seq: u64,
    /// Send time on the monotonic clock, in ns.
    pub sent_mono_ns: u64,
    /// Number of payload bytes in use (head plus elements, or the error message).
    pub payload_len: u64,
    /// Layout hash of the payload's message type, checked on receipt.
    pub type_hash: u64,
    /// Doorbell slot the server rings after responding (set in requests).
    pub reply_slot: u32,
    /// [`CallStatus`] of a response as a number (0 in requests).
    pub status: u32,
}

/// Outcome a response carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum CallStatus {
    /// The payload is the response message.
    Ok = 0,
    /// The handler failed; the payload is its UTF-8 error message.
    HandlerError = 1,
    /// The server rejected the request (malformed, or no response was produced); the
    /// payload is the UTF-8 reason.
    Rejected = 2,
    /// The server answers for another that went away before responding (a bridged
    /// server on another system); the payload is the UTF-8 reason.
    ServerGone = 3,
}
