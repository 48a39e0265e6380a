//! Clocks: monotonic and wall-clock time, a wall clock derived from the monotonic one,
//! absolute sleeps and the thread's timer slack.

use rustix::time::{clock_gettime, ClockId, Timespec};
use std::cell::Cell;

/// Wall-clock time derived from a monotonic reading and a cached offset (one clock read
/// per sample instead of two), refreshed every [`WallClock::REFRESH_NS`] so clock steps
/// show up within that time.
#[derive(Debug, Default)]
pub(crate) struct WallClock {
    at: Cell<u64>,
    offset: Cell<i64>,
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
    ns(clock_gettime(ClockId::Monotonic)) as u64
}

/// Current wall-clock time in ns since the Unix epoch.
pub fn wall_ns() -> i64 {
    ns(clock_gettime(ClockId::Realtime))
}

fn ns(ts: Timespec) -> i64 {
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// `clock_nanosleep` to an absolute monotonic time (retried after signals).
pub(crate) fn clock_sleep_until(deadline_ns: u64) {
    let ts = Timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as i64,
        tv_nsec: (deadline_ns % 1_000_000_000) as _,
    };
    while let Err(rustix::io::Errno::INTR) =
        rustix::thread::clock_nanosleep_absolute(ClockId::Monotonic, &ts)
    {
        if super::signals::requested() {
            return;
        }
    }
}

/// Lowers this thread's timer slack to 1 ns once, so timed wake-ups are not deferred by
/// the default 50 µs slack.
pub(crate) fn precise_timers() {
    thread_local! { static DONE: Cell<bool> = const { Cell::new(false) }; }
    DONE.with(|d| {
        if !d.replace(true) {
            // a refusal leaves the default slack: timers are then up to 50 µs late
            let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
        }
    });
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
