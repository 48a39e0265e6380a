//! How a subscriber waits for the next sample.

use crate::sys::clock::stamp_ns;
use crate::transport::doorbell::SlotRef;
use std::cell::Cell;
use std::time::Duration;

/// Waiting strategy of a subscriber.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WaitMode {
    /// Spin briefly (as long as recent samples tended to arrive within the spin window),
    /// then sleep until woken. Back-to-back traffic is served without sleeping; an idle
    /// subscriber uses no CPU.
    #[default]
    Adaptive,
    /// Busy-poll until a sample arrives: lowest latency, one core fully used.
    Spin,
    /// Sleep until woken, never spin.
    Block,
    /// For periodic streams (sensors): learn the period from the publish stamps, sleep
    /// until shortly before the next sample is due and spin briefly across its arrival,
    /// so the wake-up cost is paid before the sample arrives instead of after. Falls back
    /// to [`WaitMode::Block`] until a period is learnt or when a sample is late. Services
    /// treat it as [`WaitMode::Adaptive`].
    Predictive,
}

/// Upper bound of the adaptive spin window.
pub(crate) const MAX_SPIN: Duration = Duration::from_micros(200);
/// Lower bound of the adaptive spin window.
pub(crate) const MIN_SPIN: Duration = Duration::from_micros(2);
/// How long an adaptive or predictive subscriber spins before it starts yielding its
/// core between looks (a yield costs a system call, so the short waits that busy traffic
/// has do not pay it).
const YIELD_AFTER_NS: u64 = 10_000;
/// Longest single sleep; waiters re-check their queue after it (bounds the cost of any
/// missed wake-up to this delay).
pub(crate) const MAX_SLEEP: Duration = Duration::from_secs(1);

/// Adaptive spin window, learnt from how long waits really took: a sample that arrived
/// within `MAX_SPIN` (spinning caught it, or it came soon after we went to sleep) widens the
/// window to twice that wait, so back-to-back traffic is served without sleeping; a
/// longer wait (idle periods, slow streams) halves it, so idle subscribers do not burn CPU.
#[derive(Debug)]
pub(crate) struct SpinWindow {
    ns: Cell<u64>,
}

impl SpinWindow {
    pub(crate) fn new() -> Self {
        SpinWindow {
            ns: Cell::new(50_000),
        }
    }
    pub(crate) fn get(&self) -> Duration {
        Duration::from_nanos(self.ns.get())
    }
    /// A sample arrived after waiting `waited` in total.
    pub(crate) fn observe(&self, waited: Duration) {
        let w = waited.as_nanos().min(u64::MAX as u128) as u64;
        let max = MAX_SPIN.as_nanos() as u64;
        let next = if w <= max {
            (2 * w).max(self.ns.get()).min(max)
        } else {
            (self.ns.get() / 2).max(MIN_SPIN.as_nanos() as u64)
        };
        self.ns.set(next);
    }
    /// The wait ended without a sample (timeout): treat it as a long wait.
    pub(crate) fn timed_out(&self) {
        self.observe(Duration::MAX);
    }
}

/// Waits until `poll` yields a value or `timeout` passes: spins for the mode's window,
/// then sleeps on `slot` (rung by the sender after it sent). `tick` runs every 64 spins
/// and before every sleep; an error from it ends the wait (subscribers attach to new
/// publishers there, clients check that their server still lives). Sleeps last at most
/// `max_sleep` so ticks keep coming.
pub(crate) fn wait_for<T, E>(
    mode: WaitMode,
    spin: &SpinWindow,
    slot: &SlotRef,
    timeout: Duration,
    max_sleep: Duration,
    mut poll: impl FnMut() -> Result<Option<T>, E>,
    mut tick: impl FnMut() -> Result<(), E>,
) -> Result<Option<T>, E> {
    if let Some(v) = poll()? {
        return Ok(Some(v));
    }
    // the cheap stamp clock (the TSC where the kernel uses it); a busy poll reads it only
    // once it has polled 64 times, so a sample that comes at once costs no clock read
    let timeout_ns = timeout.as_nanos().min(u64::MAX as u128) as u64;
    let mut start = (mode != WaitMode::Spin).then(stamp_ns);
    let waited = |start: Option<u64>| {
        Duration::from_nanos(start.map_or(0, |s| stamp_ns().saturating_sub(s)))
    };
    let spin_for = match mode {
        WaitMode::Spin => timeout,
        WaitMode::Adaptive | WaitMode::Predictive => spin.get().min(timeout),
        WaitMode::Block => Duration::ZERO,
    };
    if !spin_for.is_zero() {
        let mut i: u32 = 0;
        loop {
            if let Some(v) = poll()? {
                if mode != WaitMode::Spin {
                    // only the adaptive window learns (a clock read on the hot path)
                    spin.observe(waited(start));
                }
                return Ok(Some(v));
            }
            i = i.wrapping_add(1);
            if i.is_multiple_of(64) {
                tick()?;
                let s = *start.get_or_insert_with(stamp_ns);
                let spun = stamp_ns().saturating_sub(s);
                if spun >= spin_for.as_nanos() as u64 {
                    break;
                }
                // a long spin of a waiting (not busy-polling) subscriber gives its core
                // to other runnable threads between looks: where threads outnumber cores,
                // the publisher it waits for may be one of them
                if mode != WaitMode::Spin && spun >= YIELD_AFTER_NS {
                    std::thread::yield_now();
                }
            }
            core::hint::spin_loop();
        }
        if mode == WaitMode::Spin {
            return Ok(None);
        }
    }
    let start_ns = *start.get_or_insert_with(stamp_ns);
    let deadline = start_ns.checked_add(timeout_ns);
    let learn = |got: &Result<Option<T>, E>| {
        if mode != WaitMode::Spin && mode != WaitMode::Block {
            match got {
                Ok(Some(_)) => spin.observe(waited(start)),
                _ => spin.timed_out(),
            }
        }
    };
    loop {
        let seen = slot.register();
        let got = tick().and_then(|()| poll());
        let remaining = deadline.map(|d| Duration::from_nanos(d.saturating_sub(stamp_ns())));
        let nap = match (&got, remaining) {
            (Ok(None), Some(r)) if !r.is_zero() => r.min(max_sleep),
            (Ok(None), None) => max_sleep,
            _ => {
                slot.unregister();
                learn(&got);
                return got;
            }
        };
        slot.wait(seen, nap);
        // Woken (by a ring, mostly, whose sample is there now) or timed out: look before
        // arming again, while still counted as a waiter (a ring meanwhile finds the flag
        // down and costs nothing). Arming means a heavy fence (`membarrier`, a system
        // call that interrupts every CPU running a registered thread: the ringer's among
        // them, still finishing its send), and the tick may read shared state (a
        // subscriber's `acknowledge`); both came before the sample was handed out (see
        // docs/design.md, "Waking subscribers"). A look that finds nothing arms and ticks
        // as before; the tick skipped here runs at the next wait's first tick.
        let got = poll();
        slot.unregister();
        // (a wait that has run out ends here, without arming again)
        if !matches!(got, Ok(None)) || deadline.is_some_and(|d| stamp_ns() >= d) {
            learn(&got);
            return got;
        }
    }
}

/// Shortest and longest lead time of a predictive wake-up.
const MIN_MARGIN_NS: u64 = 30_000;
const MAX_MARGIN_NS: u64 = 2_000_000;
/// Added on top of the wake-up lateness seen so far.
const MARGIN_SLACK_NS: u64 = 20_000;
/// Consistent intervals needed before the period is trusted.
const LOCK_AFTER: u32 = 3;
/// Most of a period a predictive subscriber may be awake around a sample, in ‰ (the
/// spinning before and after the due time; keeps its CPU under 2 %).
const SPIN_BUDGET_PERMILLE: u64 = 19;

/// Learns the period of a stream from its publish stamps and plans when a predictive
/// subscriber should be awake (see [`WaitMode::Predictive`]).
#[derive(Debug, Default)]
pub(crate) struct Predictor {
    /// Publish stamp of the last sample (monotonic ns), 0 before the first.
    last: Cell<u64>,
    /// Learnt period in ns (0: none yet).
    period: Cell<u64>,
    /// Smoothed deviation of intervals from the period, in ns.
    jitter: Cell<u64>,
    /// Consecutive intervals that matched the period.
    locked: Cell<u32>,
    /// How long before the due time to wake, in ns: covers the wake-up lateness seen.
    margin: Cell<u64>,
}

/// A predictive wait's plan, in monotonic ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Sleep until then (unless a sample comes earlier).
    pub(crate) wake_at: u64,
    /// Then spin until then; after it, sleep until woken.
    pub(crate) spin_until: u64,
}

impl Predictor {
    /// A sample stamped `stamp` arrived.
    pub(crate) fn arrived(&self, stamp: u64) {
        let last = self.last.replace(stamp);
        if last == 0 || stamp <= last {
            return;
        }
        let interval = stamp - last;
        let period = self.period.get();
        let dev = interval.abs_diff(period);
        if period != 0 && dev < period / 4 {
            // exponential smoothing, 1/8 weight for the new interval
            self.period.set(period - period / 8 + interval / 8);
            let j = self.jitter.get();
            self.jitter.set(j - j / 8 + dev / 8);
            self.locked.set(self.locked.get().saturating_add(1));
        } else {
            self.period.set(interval);
            self.jitter.set(0);
            self.locked.set(0);
        }
    }

    /// When to be awake for the next sample, seen at `now`; `None` while no period is
    /// trusted.
    pub(crate) fn plan(&self, now: u64) -> Option<Plan> {
        let period = self.period.get();
        if self.locked.get() < LOCK_AFTER || period == 0 {
            return None;
        }
        let jitter = self.jitter.get();
        // awake this long before the due time (the wake-up lateness plus the rhythm's
        // jitter) and spinning this long after it, within a CPU budget per period; a
        // sample outside the window costs an ordinary wake-up. The time after the due
        // time comes first (it costs CPU only when a sample is late): a lead inflated by
        // one very late wake-up took all of the budget before, and then every sample a
        // little late missed the window
        let budget = period / 1000 * SPIN_BUDGET_PERMILLE;
        let after = (2 * jitter + MARGIN_SLACK_NS).min(budget / 2);
        let before =
            (self.margin().max(MIN_MARGIN_NS) + 2 * jitter).min(budget.saturating_sub(after));
        let mut due = self.last.get() + period;
        if now > due + after {
            // samples were missed or late: aim at the next slot of the grid
            let behind = (now - due) / period + 1;
            due += behind * period;
        }
        Some(Plan {
            wake_at: due.saturating_sub(before),
            spin_until: due + after,
        })
    }

    fn margin(&self) -> u64 {
        match self.margin.get() {
            0 => 200_000,
            m => m,
        }
    }

    /// A timed wake-up came `late` ns after it was asked for.
    pub(crate) fn woke_late(&self, late: u64) {
        let want = late + MARGIN_SLACK_NS;
        let m = self.margin();
        let next = if want > 4 * m {
            // an outlier (a preempted virtual CPU): noted, not followed, or the lead would
            // stay inflated for dozens of periods (it comes down by 1/16 per wake-up)
            m + m / 2
        } else if want > m {
            want + want / 4
        } else {
            m - (m - want) / 16
        };
        self.margin.set(next.clamp(MIN_MARGIN_NS, MAX_MARGIN_NS));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predictor_learns_a_period_and_plans_around_it() {
        let p = Predictor::default();
        assert_eq!(p.plan(0), None);
        let ms = 1_000_000;
        for i in 1..=5 {
            p.arrived(i * 10 * ms);
        }
        let plan = p.plan(50 * ms + ms).unwrap();
        assert!(plan.wake_at < 60 * ms && plan.wake_at > 59 * ms, "{plan:?}");
        assert!(
            plan.spin_until > 60 * ms && plan.spin_until < 61 * ms,
            "{plan:?}"
        );
        // a late sample misses the window: the plan moves to the next slot of the grid
        let later = p.plan(65 * ms).unwrap();
        assert!(
            later.wake_at > 69 * ms && later.wake_at < 70 * ms,
            "{later:?}"
        );
        // a broken rhythm unlocks until the period is consistent again
        p.arrived(53 * ms);
        assert_eq!(p.plan(54 * ms), None);
    }

    #[test]
    fn margin_follows_observed_lateness() {
        let p = Predictor::default();
        p.woke_late(400_000);
        assert_eq!(p.margin(), 525_000);
        for _ in 0..200 {
            p.woke_late(10_000);
        }
        assert!(p.margin() < 40_000, "{}", p.margin());
        // a single outlier raises the lead by half, repeated ones all the way
        let m = p.margin();
        p.woke_late(10_000_000);
        assert_eq!(p.margin(), m + m / 2);
        for _ in 0..20 {
            p.woke_late(10_000_000);
        }
        assert_eq!(p.margin(), MAX_MARGIN_NS);
    }

    #[test]
    fn window_adapts_within_bounds() {
        let w = SpinWindow::new();
        for _ in 0..20 {
            w.timed_out();
        }
        assert_eq!(w.get(), MIN_SPIN, "idle periods shrink the window");
        // a sample that came 30 us after we started waiting: spinning 60 us would catch it
        w.observe(Duration::from_micros(30));
        assert_eq!(w.get(), Duration::from_micros(60));
        w.observe(Duration::from_micros(150));
        assert_eq!(w.get(), MAX_SPIN);
        w.observe(Duration::from_millis(100));
        assert_eq!(w.get(), MAX_SPIN / 2, "a slow stream halves it");
    }
}
