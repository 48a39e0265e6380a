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
    /// Publish time on the wall clock, in ns since the Unix epoch.
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
}

/// Wall-clock time derived from a monotonic reading and a cached offset (one clock read
/// per sample instead of two), refreshed every [`WallClock::REFRESH_NS`] so clock steps
/// show up within that time.
#[derive(Debug, Default)]
pub(crate) struct WallClock {
    at: std::cell::Cell<u64>,
    offset: std::cell::Cell<i64>,
}

impl WallClock {
    /// How often the offset is read again, in monotonic ns.
    pub(crate) const REFRESH_NS: u64 = 100_000_000;

    /// The wall-clock time at monotonic time `mono`.
    #[inline]
    pub(crate) fn at(&self, mono: u64) -> i64 {
        if self.at.get() == 0 || mono.wrapping_sub(self.at.get()) > Self::REFRESH_NS {
            let wall = wall_ns();
            let now = mono_ns();
            self.offset.set(wall - now as i64);
            self.at.set(now);
        }
        mono as i64 + self.offset.get()
    }
}

/// Current monotonic time in ns.
pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC) as u64
}

/// Current wall-clock time in ns since the Unix epoch.
pub fn wall_ns() -> i64 {
    clock_ns(libc::CLOCK_REALTIME)
}

fn clock_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; clock ids are constants the kernel knows.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_wall_clock_tracks_the_real_one() {
        let w = WallClock::default();
        let mono = mono_ns();
        let derived = w.at(mono);
        let real = wall_ns();
        assert!((real - derived).abs() < 50_000_000, "{real} vs {derived}");
    }
}
