//! Robot time: the system clock, or a simulation clock that something else drives.
//!
//! A [`Context`](crate::Context) chooses its clock from its [`Config`](crate::Config)
//! (`sim_time`, `NERVE_SIM_TIME=1`). In simulation time the clock stands still until a
//! clock message arrives on [`CLOCK_TOPIC`] (laid out as `nerve_msgs/Clock`, the ROS 2
//! `rosgraph_msgs/msg/Clock`), as `nerve bag play --clock` or a simulator publishes it,
//! and reads 0 before the first one. Under a deterministic replay (`nerve replay`,
//! `NERVE_LOCKSTEP=1`) the clock is the replay's own, in shared memory (see [`lockstep`]).
//!
//! What follows the clock: executor timers and their [`crate::Tick`]s, state machine
//! timeouts, sample stamps ([`crate::SampleHeader::publish_wall_ns`]), [`now_ns`] and
//! [`Clock::sleep_until`]. Time jumps are defined:
//! - **forward**: timers that fell due fire, in deadline order, per their
//!   [`crate::Overrun`] policy (one firing under `Skip`, every missed one under `CatchUp`);
//! - **backward** (a bag played again from its start): every timer keeps the time it had
//!   left and counts it from the new time; the clock counts the jump
//!   ([`Clock::jumps_back`], which tf listeners watch to clear their buffers) and says so
//!   once per process on stderr;
//! - **start** (the first clock message after 0) counts as a jump back: timers created
//!   before it run from the first time.
//!
//! The process clock ([`clock`], [`now_ns`]) is the clock of the first context created in
//! the process (the system clock until then).

mod feed;
pub mod lockstep;

use crate::sys::clock::{mono_ns, wall_ns};
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub(crate) use feed::Feed;

/// The topic a simulation clock follows.
pub const CLOCK_TOPIC: &str = "/clock";

/// The words of a simulation clock, in this process's memory or in a replay's shared
/// segment (the layout is fixed: other processes map it).
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct SimWords {
    /// Current time, ns since the Unix epoch (0: not started).
    pub(crate) now: AtomicI64,
    /// Bumped after every change of `now` (a futex: executors sleep on it).
    pub(crate) epoch: AtomicU32,
    /// Jumps back in time so far.
    pub(crate) jumps_back: AtomicU32,
}

/// How a change of a simulation clock went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Jump {
    /// Same time as before (nothing changed).
    None,
    /// Forward (or the first time after 0).
    Forward,
    /// Backward.
    Back,
}

impl SimWords {
    /// Sets the time and wakes everyone who waits on the clock (nobody if it did not
    /// change).
    pub(crate) fn set(&self, t: i64) -> Jump {
        self.change(t, false)
    }

    /// Sets the time and wakes everyone who waits on the clock, even if it did not change
    /// (a replay's clock step, which every executor acknowledges).
    pub(crate) fn step(&self, t: i64) -> Jump {
        self.change(t, true)
    }

    fn change(&self, t: i64, always: bool) -> Jump {
        // SYNC: SeqCst swap, then the epoch bump: a waiter that reads the new epoch
        // (SeqCst) reads this time or a later one.
        let old = self.now.swap(t, Ordering::SeqCst);
        if old == t && !always {
            return Jump::None;
        }
        let jump = if t == old {
            Jump::None
        } else if t < old {
            self.jumps_back.fetch_add(1, Ordering::SeqCst);
            Jump::Back
        } else {
            Jump::Forward
        };
        self.epoch.fetch_add(1, Ordering::SeqCst);
        crate::sys::futex::futex_wake(&self.epoch);
        if jump == Jump::Back {
            warn_back_once(old, t);
        }
        jump
    }
}

fn warn_back_once(old: i64, new: i64) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        eprintln!(
            "nerve: simulation time jumped back from {:.3} s to {:.3} s: timers keep the time \
             they had left, tf buffers are cleared (said once per process)",
            old as f64 * 1e-9,
            new as f64 * 1e-9
        )
    });
}

/// Where a simulation clock's words live.
pub(crate) enum SimSource {
    /// In this process, fed from the clock topic by a thread ([`Feed`]), or set by hand.
    Local {
        words: SimWords,
        feed: std::sync::Mutex<Option<Feed>>,
    },
    /// In a replay's shared segment.
    Lockstep(Arc<lockstep::Lockstep>),
}

impl SimSource {
    pub(crate) fn words(&self) -> &SimWords {
        match self {
            SimSource::Local { words, .. } => words,
            SimSource::Lockstep(ls) => ls.sim(),
        }
    }
}

/// A clock: the system's, or a simulation clock (see the module docs). Cheap to clone.
#[derive(Clone, Default)]
pub struct Clock {
    sim: Option<Arc<SimSource>>,
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.sim {
            None => f.write_str("Clock::System"),
            Some(s) => write!(
                f,
                "Clock::Sim({} ns)",
                s.words().now.load(Ordering::Relaxed)
            ),
        }
    }
}

impl Clock {
    /// The system clock (wall-clock time for stamps, the monotonic clock for timers).
    pub fn system() -> Clock {
        Clock { sim: None }
    }

    /// A simulation clock that only [`Clock::set`] moves (tests, simulators in-process).
    pub fn manual() -> Clock {
        Clock {
            sim: Some(Arc::new(SimSource::Local {
                words: SimWords::default(),
                feed: std::sync::Mutex::new(None),
            })),
        }
    }

    pub(crate) fn lockstep(ls: Arc<lockstep::Lockstep>) -> Clock {
        Clock {
            sim: Some(Arc::new(SimSource::Lockstep(ls))),
        }
    }

    /// A simulation clock following the clock topic of `config`'s domain (a thread of its
    /// own reads it).
    pub(crate) fn following(config: &crate::config::Config) -> Result<Clock, std::io::Error> {
        let clock = Clock::manual();
        let Some(SimSource::Local { feed, .. }) = clock.sim.as_deref() else {
            unreachable!("a manual clock is local")
        };
        let f = Feed::start(config, Arc::downgrade(clock.sim.as_ref().expect("sim")))?;
        *feed.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
        Ok(clock)
    }

    /// The replay segment this clock is (a lockstep replay's clock).
    pub(crate) fn lockstep_segment(&self) -> Option<&Arc<lockstep::Lockstep>> {
        match self.sim.as_deref() {
            Some(SimSource::Lockstep(ls)) => Some(ls),
            _ => None,
        }
    }

    /// Whether this is a simulation clock.
    pub fn is_sim(&self) -> bool {
        self.sim.is_some()
    }

    /// Robot time now, ns since the Unix epoch (a simulation clock reads 0 before it
    /// starts).
    #[inline]
    pub fn now_ns(&self) -> i64 {
        match &self.sim {
            None => wall_ns(),
            // SYNC: SeqCst, paired with the swap in `SimWords::set`.
            Some(s) => s.words().now.load(Ordering::SeqCst),
        }
    }

    /// Time for timers, ns: the monotonic clock, or the simulation time.
    #[inline]
    pub(crate) fn timer_ns(&self) -> u64 {
        match &self.sim {
            None => mono_ns(),
            Some(s) => s.words().now.load(Ordering::SeqCst).max(0) as u64,
        }
    }

    /// The word that changes whenever simulation time does (none for the system clock).
    pub(crate) fn epoch_word(&self) -> Option<&AtomicU32> {
        self.sim.as_deref().map(|s| &s.words().epoch)
    }

    /// Jumps back in time so far (always 0 for the system clock).
    pub fn jumps_back(&self) -> u32 {
        self.sim
            .as_deref()
            .map_or(0, |s| s.words().jumps_back.load(Ordering::SeqCst))
    }

    /// Moves a simulation clock to `t_ns` (ns since the epoch) and wakes what waits on it;
    /// `false` (and nothing done) for the system clock, or for one that follows a clock
    /// topic or a replay (they have their own driver).
    pub fn set(&self, t_ns: i64) -> bool {
        match self.sim.as_deref() {
            Some(SimSource::Local { words, feed }) => {
                if feed.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
                    return false;
                }
                words.set(t_ns);
                true
            }
            _ => false,
        }
    }

    /// Blocks until robot time reaches `t_ns`, or `timeout` of real time passes, or a
    /// shutdown signal comes; whether the time was reached. On the system clock this is a
    /// sleep to that wall-clock time.
    pub fn sleep_until(&self, t_ns: i64, timeout: Duration) -> bool {
        let end = mono_ns().saturating_add(timeout.as_nanos().min(u64::MAX as u128 / 4) as u64);
        loop {
            let now = self.now_ns();
            if now >= t_ns {
                return true;
            }
            let real = mono_ns();
            if real >= end || crate::sys::signals::requested() {
                return false;
            }
            match self.epoch_word() {
                None => {
                    let left = ((t_ns - now) as u64).min(end - real);
                    crate::sys::clock::clock_sleep_until(real + left);
                }
                Some(word) => {
                    // SYNC: the epoch is read before the time is checked again, so a
                    // change in between ends the wait at once.
                    let seen = word.load(Ordering::SeqCst);
                    if self.now_ns() >= t_ns {
                        return true;
                    }
                    let slice = Duration::from_nanos((end - real).min(100_000_000));
                    crate::sys::futex::futex_wait(word, seen, slice);
                }
            }
        }
    }
}

static PROCESS: OnceLock<Clock> = OnceLock::new();

/// Makes `clock` the process clock unless one was chosen before (the first context's).
pub(crate) fn adopt(clock: &Clock) {
    let _ = PROCESS.set(clock.clone());
}

/// The process clock: the first context's, or the system clock before any context.
pub fn clock() -> Clock {
    PROCESS.get().cloned().unwrap_or_default()
}

/// Robot time now on the process clock, ns since the Unix epoch.
#[inline]
pub fn now_ns() -> i64 {
    match PROCESS.get() {
        Some(c) => c.now_ns(),
        None => wall_ns(),
    }
}

/// The clock message as it travels on [`CLOCK_TOPIC`]: the same layout, name and hash as
/// `nerve_msgs::Clock` (a test in nerve-msgs holds them together).
pub mod wire {
    /// Nanoseconds since the Unix epoch (`nerve_msgs::Time`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, nerve_derive::Pod)]
    #[repr(C)]
    pub struct Time {
        /// Nanoseconds.
        pub nanos: i64,
    }

    /// The simulation time (`nerve_msgs::Clock`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, nerve_derive::Message)]
    #[repr(C)]
    #[message(name = "nerve_msgs/Clock")]
    pub struct Clock {
        /// The current simulation time.
        pub clock: Time,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_wakes_and_counts_jumps_back() {
        let c = Clock::manual();
        assert!(c.is_sim());
        assert_eq!(c.now_ns(), 0);
        assert!(c.set(5_000_000_000));
        assert_eq!(c.now_ns(), 5_000_000_000);
        let c2 = c.clone();
        let t = std::thread::spawn(move || c2.sleep_until(6_000_000_000, Duration::from_secs(20)));
        std::thread::sleep(Duration::from_millis(20));
        c.set(6_000_000_000);
        assert!(t.join().unwrap(), "the sleeper saw the time reached");
        assert_eq!(c.jumps_back(), 0);
        c.set(1_000_000_000);
        assert_eq!(c.jumps_back(), 1);
        assert!(
            !c.sleep_until(2_000_000_000, Duration::from_millis(10)),
            "times out"
        );
        assert!(!Clock::system().set(1), "the system clock cannot be set");
    }
}
