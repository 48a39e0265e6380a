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

/// Monotonic time for sample stamps, in ns: `CLOCK_MONOTONIC` as [`mono_ns`] reads it,
/// but from the CPU's time-stamp counter where the kernel's own clock source is the TSC
/// (about 8 ns against 21 ns for `clock_gettime` on these VMs). Each thread converts
/// from an anchor (a counter and clock reading taken together) renewed every
/// millisecond, at a rate measured against the kernel's clock over the last second or
/// so; readings agree with [`mono_ns`] within tens of ns and never go back on a thread.
/// Elsewhere (another clock source, another architecture, `NERVE_TSC=off`) it is
/// [`mono_ns`].
#[inline]
pub fn stamp_ns() -> u64 {
    // (Miri cannot run RDTSC: it takes the kernel's clock, see scripts/concurrency)
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if let Some(ns) = tsc::now_ns() {
        return ns;
    }
    mono_ns()
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod tsc {
    use super::mono_ns;
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Mutex, OnceLock};

    /// A counter reading and the monotonic time taken with it.
    #[derive(Clone, Copy, Default)]
    struct Anchor {
        tsc: u64,
        mono: u64,
    }

    /// Per-thread state: the anchor, the renewal interval in ticks, the last reading.
    #[derive(Clone, Copy, Default)]
    struct Local {
        anchor: Anchor,
        window: u64,
        last: u64,
    }

    /// How often a thread renews its anchor, and how long the rate is measured over.
    const RENEW_NS: u64 = 1_000_000;
    const RATE_SPAN_NS: u64 = 1_000_000_000;

    /// Ns per tick in 32.32 fixed point (0 until measured), the span it was measured
    /// over, and the reference anchor the rate is measured from.
    static MULT: AtomicU64 = AtomicU64::new(0);
    static SPAN: AtomicU64 = AtomicU64::new(0);
    static REFERENCE: Mutex<Option<Anchor>> = Mutex::new(None);

    thread_local! {
        static LOCAL: Cell<Local> = const {
            Cell::new(Local { anchor: Anchor { tsc: 0, mono: 0 }, window: 0, last: 0 })
        };
    }

    fn usable() -> bool {
        static USABLE: OnceLock<bool> = OnceLock::new();
        *USABLE.get_or_init(|| {
            let off = std::env::var("NERVE_TSC").is_ok_and(|v| v == "off" || v == "0");
            let source = std::fs::read_to_string(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            )
            .unwrap_or_default();
            !off && source.trim() == "tsc"
        })
    }

    #[inline]
    fn rdtsc() -> u64 {
        // SAFETY: RDTSC has no memory effects and exists on every x86_64 CPU; Linux lets
        // user space run it (the kernel itself reads the clock this way, `usable`).
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }

    /// A counter reading paired with the clock: the middle of the two counter readings
    /// around the clock read, from the closest of three tries.
    fn anchor() -> Anchor {
        let mut best = (u64::MAX, Anchor::default());
        for _ in 0..3 {
            let a = rdtsc();
            let mono = mono_ns();
            let b = rdtsc();
            let spread = b.wrapping_sub(a);
            if spread < best.0 {
                best = (
                    spread,
                    Anchor {
                        tsc: a + spread / 2,
                        mono,
                    },
                );
            }
        }
        best.1
    }

    /// Measures the rate against the reference anchor, renewing the reference about once
    /// a second so the rate follows the kernel's (NTP slews `CLOCK_MONOTONIC`).
    fn measure(now: Anchor) -> u64 {
        let mut reference = REFERENCE.lock().unwrap_or_else(|e| e.into_inner());
        let r = *reference.get_or_insert(now);
        let (dt, dn) = (now.tsc.wrapping_sub(r.tsc), now.mono.saturating_sub(r.mono));
        // SYNC: Relaxed: the rate is a plain value, read with its own staleness allowed.
        let mut mult = MULT.load(Ordering::Relaxed);
        // at least 100 µs of history before the first rate; then a span twice as long
        // as the last one's, up to a second, after which the reference moves on and the
        // rate is renewed from spans of at least a tenth of a second
        let span = SPAN.load(Ordering::Relaxed);
        if dt > 0 && dn >= 100_000 && (dn >= 2 * span || dn >= RATE_SPAN_NS / 10) {
            mult = (((dn as u128) << 32) / dt as u128) as u64;
            MULT.store(mult, Ordering::Relaxed);
            SPAN.store(dn.min(RATE_SPAN_NS / 10), Ordering::Relaxed);
            if dn >= RATE_SPAN_NS {
                *reference = Some(now);
            }
        }
        mult
    }

    #[inline]
    pub(super) fn now_ns() -> Option<u64> {
        if !usable() {
            return None;
        }
        let t = rdtsc();
        LOCAL.with(|cell| {
            let mut l = cell.get();
            if l.window == 0 || t.wrapping_sub(l.anchor.tsc) > l.window {
                l = renew(l)?;
            }
            let since = t.saturating_sub(l.anchor.tsc);
            let mult = MULT.load(Ordering::Relaxed);
            let ns = l.anchor.mono + ((since as u128 * mult as u128) >> 32) as u64;
            l.last = l.last.max(ns);
            cell.set(l);
            Some(l.last)
        })
    }

    #[cold]
    fn renew(mut l: Local) -> Option<Local> {
        let now = anchor();
        let mult = measure(now);
        if mult == 0 {
            return None; // no rate yet: the caller reads the clock
        }
        l.anchor = now;
        l.window = ((RENEW_NS as u128) << 32).checked_div(mult as u128)? as u64;
        Some(l)
    }
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
    fn stamps_agree_with_the_monotonic_clock() {
        // the first readings (no rate yet) fall back to the clock; then the counter
        let start = mono_ns();
        let mut last = 0;
        while mono_ns() - start < 20_000_000 {
            let (before, stamp, after) = (mono_ns(), stamp_ns(), mono_ns());
            assert!(stamp >= last, "never back on a thread");
            last = stamp;
            // generous bounds: a preempted thread may read far apart
            assert!(
                stamp + 200_000 >= before && stamp <= after + 200_000,
                "{before} <= {stamp} <= {after}"
            );
        }
    }

    #[test]
    fn derived_wall_clock_tracks_the_real_one() {
        let w = WallClock::default();
        let mono = mono_ns();
        let derived = w.at(mono);
        let real = wall_ns();
        assert!((real - derived).abs() < 50_000_000, "{real} vs {derived}");
    }
}
