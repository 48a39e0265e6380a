//! How a subscriber waits for the next sample.

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
}

/// Upper bound of the adaptive spin window.
pub(crate) const MAX_SPIN: Duration = Duration::from_micros(200);
/// Lower bound of the adaptive spin window.
pub(crate) const MIN_SPIN: Duration = Duration::from_micros(2);
/// Longest single sleep; waiters re-check their queue after it (bounds the cost of any
/// missed wake-up to this delay).
pub(crate) const MAX_SLEEP: Duration = Duration::from_secs(1);

/// Adaptive spin window: grows when spinning caught a sample, shrinks when it did not.
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
    /// Spinning succeeded after `waited`: keep a window of at least twice that.
    pub(crate) fn hit(&self, waited: Duration) {
        let want = (waited.as_nanos() as u64 * 2).max(self.ns.get());
        self.ns.set(want.min(MAX_SPIN.as_nanos() as u64));
    }
    /// Spinning failed: halve the window.
    pub(crate) fn miss(&self) {
        self.ns
            .set((self.ns.get() / 2).max(MIN_SPIN.as_nanos() as u64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_adapts_within_bounds() {
        let w = SpinWindow::new();
        for _ in 0..20 {
            w.miss();
        }
        assert_eq!(w.get(), MIN_SPIN);
        w.hit(Duration::from_micros(30));
        assert_eq!(w.get(), Duration::from_micros(60));
        w.hit(Duration::from_millis(5));
        assert_eq!(w.get(), MAX_SPIN);
    }
}
