//! How a subscriber waits for the next sample.

use crate::transport::doorbell::Slot;
use std::cell::Cell;
use std::time::{Duration, Instant};

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
}

/// Upper bound of the adaptive spin window.
pub(crate) const MAX_SPIN: Duration = Duration::from_micros(200);
/// Lower bound of the adaptive spin window.
pub(crate) const MIN_SPIN: Duration = Duration::from_micros(2);
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
    slot: &Slot,
    timeout: Duration,
    max_sleep: Duration,
    mut poll: impl FnMut() -> Result<Option<T>, E>,
    mut tick: impl FnMut() -> Result<(), E>,
) -> Result<Option<T>, E> {
    if let Some(v) = poll()? {
        return Ok(Some(v));
    }
    let start = Instant::now();
    let deadline = start.checked_add(timeout);
    let spin_for = match mode {
        WaitMode::Spin => timeout,
        WaitMode::Adaptive => spin.get().min(timeout),
        WaitMode::Block => Duration::ZERO,
    };
    if !spin_for.is_zero() {
        let mut i: u32 = 0;
        loop {
            if let Some(v) = poll()? {
                spin.observe(start.elapsed());
                return Ok(Some(v));
            }
            i = i.wrapping_add(1);
            if i.is_multiple_of(64) {
                tick()?;
                if start.elapsed() >= spin_for {
                    break;
                }
            }
            core::hint::spin_loop();
        }
        if mode == WaitMode::Spin {
            return Ok(None);
        }
    }
    loop {
        let seen = slot.register();
        let got = tick().and_then(|()| poll());
        let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        match (got, remaining) {
            (Ok(None), Some(r)) if !r.is_zero() => {
                slot.wait(seen, r.min(max_sleep));
                slot.unregister();
            }
            (Ok(None), None) => {
                slot.wait(seen, max_sleep);
                slot.unregister();
            }
            (other, _) => {
                slot.unregister();
                if mode == WaitMode::Adaptive {
                    match &other {
                        Ok(Some(_)) => spin.observe(start.elapsed()),
                        _ => spin.timed_out(),
                    }
                }
                return other;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
