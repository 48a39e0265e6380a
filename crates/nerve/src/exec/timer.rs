//! Timers on absolute monotonic deadlines, and the precise sleep that waits for them.
//!
//! A deadline is reached by sleeping until shortly before it (the *margin*) and spinning
//! across the rest. The margin covers the wake-up lateness the thread observes: it rises
//! at once to a late wake-up and decays slowly, within `[min_spin, max_spin]` of the
//! [`Precision`] settings. Periodic deadlines are `start + k * period`, never "now +
//! period", so a timer does not drift whatever its callbacks cost.

use crate::sys::clock::{clock_sleep_until, mono_ns};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// How a timer or scheduler waits for a deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Precision {
    /// Longest spin before a deadline (the margin's ceiling). `Duration::ZERO` sleeps to
    /// the deadline itself: no CPU spent, but every wake-up's lateness shows.
    pub max_spin: Duration,
    /// Shortest spin before a deadline (the margin's floor).
    pub min_spin: Duration,
    /// Learn the margin from observed wake-up lateness (else always spin `max_spin`).
    pub adaptive: bool,
}

impl Default for Precision {
    /// Up to 500 µs of spin (a VM's wake-up lateness reaches that), at least 20 µs,
    /// adaptive.
    fn default() -> Self {
        Precision {
            max_spin: Duration::from_micros(500),
            min_spin: Duration::from_micros(20),
            adaptive: true,
        }
    }
}

impl Precision {
    /// Sleep only: never spin (lowest CPU, the kernel's wake-up lateness shows).
    pub fn sleep_only() -> Precision {
        Precision {
            max_spin: Duration::ZERO,
            min_spin: Duration::ZERO,
            adaptive: false,
        }
    }
}

/// Decay of the margin per wake-up that came earlier than it (1/64 of the gap).
const DECAY_SHIFT: u32 = 6;
/// A sleep spins at least this share of its length before the deadline, in ‰: a virtual
/// CPU idle for 100 ms wakes up to ~0.5 ms late, one idle for 5 ms much sooner.
pub const LONG_SLEEP_SPIN_PERMILLE: u64 = 5;
/// Added to the latest lateness when the margin rises to it.
const MARGIN_HEADROOM_NS: u64 = 20_000;

/// Sleeps to absolute deadlines: a kernel sleep to `deadline - margin`, then a spin.
#[derive(Debug)]
pub struct PreciseSleep {
    precision: Precision,
    margin_ns: Cell<u64>,
    late_wakeups: Cell<u64>,
}

impl PreciseSleep {
    /// A sleeper with the given settings; lowers this thread's timer slack to 1 ns.
    pub fn new(precision: Precision) -> PreciseSleep {
        crate::sys::clock::precise_timers();
        let start = if precision.adaptive {
            (precision.max_spin.as_nanos() as u64 / 2).max(precision.min_spin.as_nanos() as u64)
        } else {
            precision.max_spin.as_nanos() as u64
        };
        PreciseSleep {
            precision,
            margin_ns: Cell::new(start),
            late_wakeups: Cell::new(0),
        }
    }

    /// The current margin: how long before a deadline the kernel sleep ends.
    pub fn margin(&self) -> Duration {
        Duration::from_nanos(self.margin_ns.get())
    }

    /// Kernel wake-ups that came after the deadline itself (the margin was too small).
    pub fn late_wakeups(&self) -> u64 {
        self.late_wakeups.get()
    }

    /// When the kernel sleep for `deadline`, begun at `now_ns`, should end (monotonic
    /// ns): the learnt margin before it, but at least [`LONG_SLEEP_SPIN_PERMILLE`] of the
    /// sleep (capped at `max_spin`), since a longer idle wakes later.
    pub fn wake_at(&self, deadline_ns: u64, now_ns: u64) -> u64 {
        let long = deadline_ns.saturating_sub(now_ns) / 1000 * LONG_SLEEP_SPIN_PERMILLE;
        let floor = long.min(self.precision.max_spin.as_nanos() as u64);
        deadline_ns.saturating_sub(self.margin_ns.get().max(floor))
    }

    /// A kernel sleep that should have ended at `asked_ns` ended at `woke_ns`, on the way
    /// to `deadline_ns`: adapts the margin.
    pub fn observe(&self, asked_ns: u64, woke_ns: u64, deadline_ns: u64) {
        if woke_ns > deadline_ns {
            self.late_wakeups.set(self.late_wakeups.get() + 1);
        }
        if !self.precision.adaptive {
            return;
        }
        let late = woke_ns.saturating_sub(asked_ns);
        let m = self.margin_ns.get();
        let want = late + MARGIN_HEADROOM_NS;
        let next = if want > m {
            want
        } else {
            m - ((m - want) >> DECAY_SHIFT)
        };
        let lo = self.precision.min_spin.as_nanos() as u64;
        let hi = self.precision.max_spin.as_nanos() as u64;
        self.margin_ns.set(next.clamp(lo, hi.max(lo)));
    }

    /// Blocks until `deadline_ns` (monotonic), or less when a shutdown signal arrives
    /// (see [`crate::sys::signals`]); returns the time it returned at.
    pub fn sleep_until(&self, deadline_ns: u64) -> u64 {
        let mut now = mono_ns();
        let wake = self.wake_at(deadline_ns, now);
        if now < wake {
            clock_sleep_until(wake);
            now = mono_ns();
            if now < wake {
                // a shutdown signal ended the sleep: no spin, the caller is leaving
                return now;
            }
            self.observe(wake, now, deadline_ns);
        }
        spin_until(deadline_ns, now)
    }
}

/// Spins until `deadline_ns`; `now` is a recent clock reading. Returns the final reading.
pub(crate) fn spin_until(deadline_ns: u64, mut now: u64) -> u64 {
    while now < deadline_ns {
        std::hint::spin_loop();
        now = mono_ns();
    }
    now
}

/// What a periodic timer does after it fell behind by whole periods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Overrun {
    /// Drop the missed ticks and keep the original phase: the next tick is the first
    /// deadline of the grid still ahead (missed ticks are counted).
    #[default]
    Skip,
    /// Fire every missed tick, back to back, until the timer is on time again.
    CatchUp,
}

/// One firing of a timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tick {
    /// The deadline this firing was for (monotonic ns, or simulation ns on a simulation
    /// clock).
    pub deadline_ns: u64,
    /// When the firing began (on the same clock); `fired_ns - deadline_ns` is its
    /// lateness.
    pub fired_ns: u64,
    /// Firings so far, this one included.
    pub count: u64,
    /// Ticks dropped just before this one under [`Overrun::Skip`].
    pub skipped: u64,
}

impl Tick {
    /// How late this firing began.
    pub fn lateness(&self) -> Duration {
        Duration::from_nanos(self.fired_ns.saturating_sub(self.deadline_ns))
    }
}

/// A timer's deadlines: a periodic grid or one armed deadline.
#[derive(Debug)]
pub(crate) struct Schedule {
    /// Next deadline (monotonic ns); `None` while disarmed.
    next: Cell<Option<u64>>,
    /// Period in ns; 0 for a one-shot timer.
    period: u64,
    overrun: Overrun,
    count: Cell<u64>,
    skipped: Cell<u64>,
    /// Made while a simulation clock had not started (read 0): the deadline counts from
    /// the time it starts at.
    floating: Cell<bool>,
}

impl Schedule {
    pub(crate) fn periodic(first_ns: u64, period: Duration, overrun: Overrun) -> Schedule {
        Schedule {
            next: Cell::new(Some(first_ns)),
            period: (period.as_nanos() as u64).max(1),
            overrun,
            count: Cell::new(0),
            skipped: Cell::new(0),
            floating: Cell::new(false),
        }
    }

    pub(crate) fn one_shot(at_ns: Option<u64>) -> Schedule {
        Schedule {
            next: Cell::new(at_ns),
            period: 0,
            overrun: Overrun::Skip,
            count: Cell::new(0),
            skipped: Cell::new(0),
            floating: Cell::new(false),
        }
    }

    pub(crate) fn next(&self) -> Option<u64> {
        self.next.get()
    }

    pub(crate) fn arm(&self, at_ns: Option<u64>) {
        self.next.set(at_ns);
    }

    /// Marks the deadline as counted from a simulation clock's start (see `start`).
    pub(crate) fn float(&self) {
        self.floating.set(true);
    }

    /// A simulation clock started at `at`: a deadline made before counts from there.
    pub(crate) fn start(&self, at: u64) {
        if self.floating.replace(false) {
            self.rebase(0, at);
        }
    }

    /// The clock jumped from `from` to `to`: the next deadline keeps the time it had left.
    pub(crate) fn rebase(&self, from: u64, to: u64) {
        if let Some(next) = self.next.get() {
            self.next
                .set(Some(to.saturating_add(next.saturating_sub(from))));
        }
    }

    /// Fires if due at `now`: advances the schedule and returns the tick.
    pub(crate) fn fire(&self, now: u64) -> Option<Tick> {
        let deadline = self.next.get().filter(|&d| d <= now)?;
        let count = self.count.get() + 1;
        self.count.set(count);
        let mut skipped = 0;
        if self.period == 0 {
            self.next.set(None);
        } else {
            let mut next = deadline + self.period;
            if next <= now && self.overrun == Overrun::Skip {
                skipped = (now - next) / self.period + 1;
                next += skipped * self.period;
            }
            self.next.set(Some(next));
            self.skipped.set(self.skipped.get() + skipped);
        }
        Some(Tick {
            deadline_ns: deadline,
            fired_ns: now,
            count,
            skipped,
        })
    }

    pub(crate) fn count(&self) -> u64 {
        self.count.get()
    }

    pub(crate) fn skipped(&self) -> u64 {
        self.skipped.get()
    }
}

/// A timer used on its own, without an executor: [`Timer::wait`] blocks until the next
/// deadline. Executors have their own timers ([`crate::Executor::timer`]).
pub struct Timer {
    schedule: Schedule,
    sleep: PreciseSleep,
}

impl Timer {
    /// A periodic timer whose first deadline is one period from now.
    pub fn periodic(period: Duration, overrun: Overrun, precision: Precision) -> Timer {
        let first = mono_ns() + period.as_nanos() as u64;
        Timer {
            schedule: Schedule::periodic(first, period, overrun),
            sleep: PreciseSleep::new(precision),
        }
    }

    /// A one-shot timer due `after` from now.
    pub fn once(after: Duration, precision: Precision) -> Timer {
        Timer {
            schedule: Schedule::one_shot(Some(mono_ns() + after.as_nanos() as u64)),
            sleep: PreciseSleep::new(precision),
        }
    }

    /// Re-arms the timer for `after` from now (one-shot) or restarts its grid there.
    pub fn reset(&mut self, after: Duration) {
        self.schedule.arm(Some(mono_ns() + after.as_nanos() as u64));
    }

    /// Blocks until the next deadline and returns its tick; `None` for a one-shot timer
    /// that already fired.
    pub fn wait(&mut self) -> Option<Tick> {
        let deadline = self.schedule.next()?;
        let now = self.sleep.sleep_until(deadline);
        self.schedule.fire(now)
    }

    /// Ticks dropped so far under [`Overrun::Skip`].
    pub fn skipped(&self) -> u64 {
        self.schedule.skipped()
    }
}

/// Controls an executor timer from callbacks: re-arm a one-shot, cancel, read counts.
/// Cheap to clone; lives on the executor's thread.
#[derive(Clone, Debug)]
pub struct TimerHandle {
    pub(crate) schedule: Rc<Schedule>,
    /// The executor's clock, which deadlines are on.
    pub(crate) clock: crate::time::Clock,
}

impl TimerHandle {
    /// Arms the timer to fire `after` from now (a periodic timer restarts its grid there);
    /// now on the executor's clock (simulation time in simulation).
    pub fn arm_after(&self, after: Duration) {
        self.arm_at(self.clock.timer_ns() + after.as_nanos() as u64);
    }

    /// Arms the timer to fire at `deadline_ns` (monotonic ns, see [`crate::mono_ns`], or
    /// simulation ns when the executor follows a simulation clock).
    pub fn arm_at(&self, deadline_ns: u64) {
        self.schedule.arm(Some(deadline_ns));
    }

    /// Disarms the timer until it is armed again.
    pub fn cancel(&self) {
        self.schedule.arm(None);
    }

    /// The next deadline, if armed.
    pub fn next_deadline(&self) -> Option<u64> {
        self.schedule.next()
    }

    /// Firings so far.
    pub fn fired(&self) -> u64 {
        self.schedule.count()
    }

    /// Ticks dropped so far under [`Overrun::Skip`].
    pub fn skipped(&self) -> u64 {
        self.schedule.skipped()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn periodic_deadlines_stay_on_the_grid_and_skip_or_catch_up() {
        let s = Schedule::periodic(10 * MS, Duration::from_millis(10), Overrun::Skip);
        assert_eq!(s.fire(9 * MS), None, "not due yet");
        let t = s.fire(10 * MS + 300).unwrap();
        assert_eq!((t.deadline_ns, t.skipped), (10 * MS, 0));
        assert_eq!(s.next(), Some(20 * MS), "no drift from the late firing");
        // 35 ms: the 20 ms tick fires, 30 ms is dropped, 40 ms is next
        let t = s.fire(35 * MS).unwrap();
        assert_eq!(
            (t.deadline_ns, t.skipped, s.next()),
            (20 * MS, 1, Some(40 * MS))
        );
        assert_eq!(s.skipped(), 1);

        let c = Schedule::periodic(10 * MS, Duration::from_millis(10), Overrun::CatchUp);
        let fired: Vec<u64> =
            std::iter::from_fn(|| c.fire(35 * MS).map(|t| t.deadline_ns)).collect();
        assert_eq!(
            fired,
            vec![10 * MS, 20 * MS, 30 * MS],
            "every missed tick fires"
        );
        assert_eq!(c.skipped(), 0);
    }

    #[test]
    fn one_shot_fires_once_until_rearmed() {
        let s = Schedule::one_shot(Some(5 * MS));
        assert!(s.fire(6 * MS).is_some());
        assert_eq!(s.fire(7 * MS), None);
        s.arm(Some(8 * MS));
        assert_eq!(s.fire(9 * MS).unwrap().count, 2);
    }

    #[test]
    fn margin_rises_to_lateness_and_decays_within_bounds() {
        let p = PreciseSleep::new(Precision::default());
        assert_eq!(p.margin(), Duration::from_micros(250));
        p.observe(0, 400_000, 1_000_000);
        assert_eq!(p.margin(), Duration::from_micros(420));
        p.observe(0, 2_000_000, 1_000_000);
        assert_eq!(p.margin(), Duration::from_micros(500), "capped at max_spin");
        assert_eq!(p.late_wakeups(), 1);
        for _ in 0..2000 {
            p.observe(0, 10_000, 1_000_000);
        }
        assert!(p.margin() <= Duration::from_micros(31), "{:?}", p.margin());
        assert!(p.margin() >= Duration::from_micros(20));
        let fixed = PreciseSleep::new(Precision {
            adaptive: false,
            ..Precision::default()
        });
        fixed.observe(0, 10_000, 1_000_000);
        assert_eq!(fixed.margin(), Duration::from_micros(500));
        // a long sleep spins at least 0.5 % of itself, up to max_spin
        let ms = 1_000_000;
        assert_eq!(p.wake_at(1000 * ms, 900 * ms), 1000 * ms - 500_000);
        assert_eq!(
            p.wake_at(1000 * ms, 995 * ms),
            1000 * ms - p.margin().as_nanos() as u64
        );
        let none = PreciseSleep::new(Precision::sleep_only());
        assert_eq!(
            none.wake_at(1000 * ms, 0),
            1000 * ms,
            "sleep-only never spins"
        );
    }

    #[test]
    fn a_standalone_timer_never_returns_early() {
        let mut t = Timer::periodic(
            Duration::from_millis(2),
            Overrun::Skip,
            Precision::default(),
        );
        for n in 1..=5 {
            let tick = t.wait().unwrap();
            assert!(tick.fired_ns >= tick.deadline_ns);
            assert_eq!(tick.count, n);
        }
        let mut once = Timer::once(Duration::from_millis(1), Precision::sleep_only());
        assert!(once.wait().is_some());
        assert!(once.wait().is_none());
    }
}
