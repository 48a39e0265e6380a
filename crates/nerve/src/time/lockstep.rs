//! Lockstep for deterministic replay: one shared-memory segment per domain through which
//! a player knows when everything a message set off has been handled, in every process.
//!
//! The segment (`/dev/shm/nerve_lockstep<domain>`, made by the player, joined by every
//! context with `NERVE_LOCKSTEP=1`) holds:
//! - **a count of work owed** (`pending`, a futex the player sleeps on). A publisher adds
//!   the number of executor subscriptions of its topic, across the domain, *before* the
//!   sample becomes visible; an executor subtracts each sample it took once the callback
//!   has returned (and whatever that callback published has been added). Work never
//!   reaches zero while any of it is still owed, so zero means: every callback the
//!   player's message triggered, and every callback those triggered, has returned.
//! - **a count of receivers per topic** (executor subscriptions, added when a subscriber
//!   joins an executor and removed when it leaves).
//! - **the simulation clock** ([`super::SimWords`]) that every joined context follows.
//! - **one slot per executor** (pid, process name, the deadline of its next timer in
//!   simulation time). The player reads the earliest deadline to interleave timers with
//!   messages, and sees an executor whose process died.
//!
//! A clock step that lets timers fall due adds one owed acknowledgement per executor:
//! each fires what fell due, then acknowledges.
//!
//! The counts are exact once the graph is wired; the player waits for the executors to
//! settle before it starts. Samples a subscriber loses (a queue overflowing under
//! drop-oldest, counted from sequence gaps) are subtracted too, so a loss never stalls
//! the replay; a stall names what is still owed.

use super::SimWords;
use crate::sys::files::{check_owner, Mapping};
// Under `--cfg nerve_loom` the segment's words are loom's atomics and the futex is the
// model's (see `crate::loom`), so `loom_models` below run the real count of work owed.
use crate::loom::futex::{futex_wait, futex_wake};
use crate::loom::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};
use rustix::fs::{FlockOperation, Mode, OFlags};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

const MAGIC: u64 = u64::from_le_bytes(*b"NRVLKST1");
/// Topics a replay's domain can count receivers for.
pub const MAX_TOPICS: usize = 1024;
/// Executors that can take part in one replay.
pub const MAX_EXECUTORS: usize = 256;
const NAME_LEN: usize = 40;

/// Nothing due: the deadline an executor without timers reports.
pub const NO_DEADLINE: i64 = i64::MAX;

/// Errors of a lockstep replay.
#[derive(Debug, thiserror::Error)]
pub enum LockstepError {
    /// No replay runs in the domain (a context asked for lockstep without a player).
    #[error("no replay runs in domain {domain}: {path} is missing (NERVE_LOCKSTEP=1 is set by `nerve replay` for the nodes it starts)")]
    NoReplay {
        /// The domain.
        domain: u32,
        /// The segment's path.
        path: String,
    },
    /// Another replay already runs in the domain.
    #[error("another replay runs in domain {domain} ({path} is held)")]
    Busy {
        /// The domain.
        domain: u32,
        /// The segment's path.
        path: String,
    },
    /// The segment could not be made or mapped.
    #[error("lockstep segment {path}: {reason}")]
    Io {
        /// The segment's path.
        path: String,
        /// The system error.
        reason: std::io::Error,
    },
    /// The segment is not a lockstep segment of this version.
    #[error("lockstep segment {path} has another layout (another Nerve version?)")]
    Layout {
        /// The segment's path.
        path: String,
    },
    /// Every slot of a table is taken.
    #[error("a replay counts at most {max} {what}")]
    Full {
        /// What ran out (topics, executors).
        what: &'static str,
        /// The bound.
        max: usize,
    },
    /// Work owed did not come back in time.
    #[error("the replay stalled: {pending} deliveries or timer firings still owed after {waited:?} (a callback that blocks, a subscriber that is not in an executor, or a process that stopped handling input)")]
    Stalled {
        /// Work still owed.
        pending: u32,
        /// How long the player waited.
        waited: Duration,
    },
    /// A process taking part ended during the replay.
    #[error("{name} (pid {pid}) ended during the replay")]
    Gone {
        /// Its process id.
        pid: u32,
        /// Its name.
        name: String,
    },
    /// The caller's check (child processes) failed while the player waited.
    #[error("{0}")]
    Check(String),
    /// SIGINT or SIGTERM came while the player waited.
    #[error("interrupted")]
    Interrupted,
}

#[repr(C, align(64))]
struct Header {
    magic: AtomicU64,
    /// Work owed (a futex the player sleeps on).
    pending: AtomicU32,
    /// Executors joined (each owes an acknowledgement per clock step with timers due).
    executors: AtomicU32,
    /// Subtractions that found less owed than they took (an accounting error).
    underflows: AtomicU32,
    _pad: u32,
    sim: SimWords,
}

#[repr(C)]
struct TopicEntry {
    /// Hash of the topic name (0: free).
    key: AtomicU64,
    /// Executor subscriptions of the topic.
    receivers: AtomicU32,
    _pad: u32,
}

#[repr(C, align(64))]
struct Slot {
    /// 0 free, 1 being written, 2 live.
    state: AtomicU32,
    pid: AtomicU32,
    /// The executor's next timer deadline, simulation ns ([`NO_DEADLINE`]: none).
    next_due: AtomicI64,
    name: [AtomicU8; NAME_LEN],
}

#[repr(C)]
struct Segment {
    header: Header,
    topics: [TopicEntry; MAX_TOPICS],
    slots: [Slot; MAX_EXECUTORS],
}

const SIZE: usize = std::mem::size_of::<Segment>();

/// The count of work owed (the header's `pending` futex word and its `underflows`) and
/// the lock-free core of the handshake over it: publishers [`owe`](Owed::owe) before the
/// sample they cover is visible, executors call [`done`](Owed::done) once the callbacks
/// returned, and the player [`waits`](Owed::quiet_or_sleep) for zero. The segment's
/// mapping, the signals and the checks of dead participants stay outside the loom models
/// (`loom_models` below), which run these on words of their own.
#[derive(Clone, Copy)]
struct Owed<'a> {
    pending: &'a AtomicU32,
    underflows: &'a AtomicU32,
}

impl Owed<'_> {
    /// Adds `n` to the work owed.
    #[inline]
    fn owe(self, n: u32) {
        if n > 0 {
            // SYNC: SeqCst: the addition precedes (in the single order of SeqCst
            // operations) the release of the sample that it covers.
            self.pending.fetch_add(n, Ordering::SeqCst);
        }
    }

    /// Subtracts `n` of the work owed; wakes the player when nothing is left.
    #[inline]
    fn done(self, n: u32) {
        if n == 0 {
            return;
        }
        // SYNC: SeqCst: everything the finished callbacks published was added before.
        let before = self.pending.fetch_sub(n, Ordering::SeqCst);
        if before < n {
            // more came back than was owed: put the count back to 0, note it
            self.pending.fetch_add(n - before, Ordering::SeqCst);
            self.underflows.fetch_add(1, Ordering::Relaxed);
        }
        if before <= n {
            futex_wake(self.pending);
        }
    }

    /// Whether nothing is owed; if something is, sleeps first until a [`done`](Owed::done)
    /// reaches zero or `sleep` passes (a timeout, not a result: the caller looks again).
    fn quiet_or_sleep(self, sleep: Duration) -> bool {
        let seen = self.pending.load(Ordering::SeqCst);
        if seen == 0 {
            return true;
        }
        futex_wait(self.pending, seen, sleep);
        self.pending.load(Ordering::SeqCst) == 0
    }
}

/// A mapped lockstep segment (player or participant).
pub struct Lockstep {
    map: Mapping,
    _fd: OwnedFd,
    path: String,
    domain: u32,
    owner: bool,
}

/// The path of `domain`'s lockstep segment.
pub fn segment_path(domain: u32) -> String {
    format!("/dev/shm/nerve_lockstep{domain}")
}

impl Lockstep {
    fn seg(&self) -> &Segment {
        // SAFETY: the mapping is SIZE bytes of a file at least that long (set by the
        // player before anyone could join, checked by `join`), page-aligned (so aligned
        // for Segment), and lives as long as `self`. Every field is an atomic or padding
        // never read, so any bytes are valid and concurrent access from other processes
        // goes through atomics only.
        unsafe { &*(self.map.ptr() as *const Segment) }
    }

    /// Makes the segment of `domain` for a player; fails if another replay holds it.
    pub fn create(domain: u32) -> Result<Arc<Lockstep>, LockstepError> {
        let path = segment_path(domain);
        let io = |reason| LockstepError::Io {
            path: path.clone(),
            reason,
        };
        let fd = rustix::fs::open(
            &path,
            OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| io(e.into()))?;
        check_owner(&fd).map_err(io)?;
        if rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_err() {
            return Err(LockstepError::Busy { domain, path });
        }
        // truncating to nothing and back zeroes what a crashed player left
        rustix::fs::ftruncate(&fd, 0).map_err(|e| io(e.into()))?;
        rustix::fs::ftruncate(&fd, SIZE as u64).map_err(|e| io(e.into()))?;
        let map = Mapping::shared(&fd, SIZE).map_err(io)?;
        let ls = Lockstep {
            map,
            _fd: fd,
            path,
            domain,
            owner: true,
        };
        // SYNC: Release: joiners check the magic (Acquire) before anything else.
        ls.seg().header.magic.store(MAGIC, Ordering::Release);
        Ok(Arc::new(ls))
    }

    /// Joins the segment of `domain` (it must exist: the player makes it).
    pub fn join(domain: u32) -> Result<Arc<Lockstep>, LockstepError> {
        let path = segment_path(domain);
        let fd = match rustix::fs::open(
            &path,
            OFlags::RDWR | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => {
                return Err(LockstepError::NoReplay { domain, path });
            }
            Err(e) => {
                return Err(LockstepError::Io {
                    path,
                    reason: e.into(),
                })
            }
        };
        let io = |reason| LockstepError::Io {
            path: path.clone(),
            reason,
        };
        check_owner(&fd).map_err(io)?;
        let len = rustix::fs::fstat(&fd).map_err(|e| io(e.into()))?.st_size;
        if len as usize != SIZE {
            return Err(LockstepError::Layout { path });
        }
        let map = Mapping::shared(&fd, SIZE).map_err(io)?;
        let ls = Lockstep {
            map,
            _fd: fd,
            path,
            domain,
            owner: false,
        };
        if ls.seg().header.magic.load(Ordering::Acquire) != MAGIC {
            return Err(LockstepError::Layout {
                path: ls.path.clone(),
            });
        }
        Ok(Arc::new(ls))
    }

    /// The domain of the replay.
    pub fn domain(&self) -> u32 {
        self.domain
    }

    /// The segment's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub(crate) fn sim(&self) -> &SimWords {
        &self.seg().header.sim
    }

    /// The receiver count of `topic` (made on first use).
    pub(crate) fn topic(self: &Arc<Self>, topic: &str) -> Result<TopicCount, LockstepError> {
        let key =
            crate::message::layout::hash_str(crate::message::layout::FNV_OFFSET, topic).max(1);
        let topics = &self.seg().topics;
        let start = key as usize % MAX_TOPICS;
        for i in 0..MAX_TOPICS {
            let idx = (start + i) % MAX_TOPICS;
            let e = &topics[idx];
            // SYNC: AcqRel CAS claims a free entry; the key is all an entry publishes.
            match e
                .key
                .compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    return Ok(TopicCount {
                        ls: self.clone(),
                        idx,
                    })
                }
                Err(k) if k == key => {
                    return Ok(TopicCount {
                        ls: self.clone(),
                        idx,
                    })
                }
                Err(_) => {}
            }
        }
        Err(LockstepError::Full {
            what: "topics",
            max: MAX_TOPICS,
        })
    }

    /// The count of work owed.
    fn owed(&self) -> Owed<'_> {
        let h = &self.seg().header;
        Owed {
            pending: &h.pending,
            underflows: &h.underflows,
        }
    }

    /// Adds `n` to the work owed.
    #[inline]
    pub(crate) fn owe(&self, n: u32) {
        self.owed().owe(n);
    }

    /// Subtracts `n` of the work owed; wakes the player when nothing is left.
    #[inline]
    pub(crate) fn done(&self, n: u32) {
        self.owed().done(n);
    }

    /// Work owed now.
    pub fn pending(&self) -> u32 {
        self.seg().header.pending.load(Ordering::SeqCst)
    }

    /// Subtractions that found less owed than they took (should stay 0).
    pub fn underflows(&self) -> u32 {
        self.seg().header.underflows.load(Ordering::Relaxed)
    }

    /// Executors joined.
    pub fn executors(&self) -> u32 {
        self.seg().header.executors.load(Ordering::SeqCst)
    }

    /// Receivers (executor subscriptions) of `topic` across the domain.
    pub fn receivers(self: &Arc<Self>, topic: &str) -> u32 {
        self.topic(topic).map_or(0, |t| t.receivers())
    }

    /// Takes an executor slot for this process.
    pub(crate) fn join_executor(self: &Arc<Self>) -> Result<ExecutorSlot, LockstepError> {
        let pid = std::process::id();
        let name = process_name();
        for (idx, s) in self.seg().slots.iter().enumerate() {
            // SYNC: AcqRel CAS claims the slot; its fields are published by the Release
            // store of state 2 below.
            if s.state
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                s.pid.store(pid, Ordering::Relaxed);
                s.next_due.store(NO_DEADLINE, Ordering::Relaxed);
                for (i, b) in s.name.iter().enumerate() {
                    b.store(*name.as_bytes().get(i).unwrap_or(&0), Ordering::Relaxed);
                }
                s.state.store(2, Ordering::Release);
                let h = &self.seg().header;
                h.executors.fetch_add(1, Ordering::SeqCst);
                let seen = h.sim.epoch.load(Ordering::SeqCst);
                return Ok(ExecutorSlot {
                    ls: self.clone(),
                    idx,
                    acked: std::cell::Cell::new(seen),
                });
            }
        }
        Err(LockstepError::Full {
            what: "executors",
            max: MAX_EXECUTORS,
        })
    }

    /// The executors joined: pid, process name, next timer deadline.
    pub fn participants(&self) -> Vec<Participant> {
        self.seg()
            .slots
            .iter()
            .filter(|s| s.state.load(Ordering::Acquire) == 2)
            .map(|s| {
                let bytes: Vec<u8> = s
                    .name
                    .iter()
                    .map(|b| b.load(Ordering::Relaxed))
                    .take_while(|&b| b != 0)
                    .collect();
                Participant {
                    pid: s.pid.load(Ordering::Relaxed),
                    name: String::from_utf8_lossy(&bytes).into_owned(),
                    next_due: s.next_due.load(Ordering::SeqCst),
                }
            })
            .collect()
    }

    /// The earliest timer deadline of any executor (simulation ns).
    pub fn next_due(&self) -> Option<i64> {
        self.seg()
            .slots
            .iter()
            .filter(|s| s.state.load(Ordering::Acquire) == 2)
            .map(|s| s.next_due.load(Ordering::SeqCst))
            .min()
            .filter(|&d| d != NO_DEADLINE)
    }

    /// The simulation time now.
    pub fn now(&self) -> i64 {
        self.sim().now.load(Ordering::SeqCst)
    }

    /// Sets the simulation time without waiting for anyone (no timer falls due by it:
    /// the caller checked [`Lockstep::next_due`]).
    pub fn set_time(&self, t: i64) {
        self.sim().now.store(t, Ordering::SeqCst);
    }

    /// Moves the simulation time to `t` and waits until every executor fired the timers
    /// that fell due (see [`Lockstep::wait_quiet`] for `timeout` and `check`).
    pub fn step_clock(
        &self,
        t: i64,
        timeout: Duration,
        check: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), LockstepError> {
        let h = &self.seg().header;
        self.owe(h.executors.load(Ordering::SeqCst));
        h.sim.step(t);
        self.wait_quiet(timeout, check)
    }

    /// Waits until no work is owed. A shutdown signal ends the wait
    /// ([`LockstepError::Interrupted`]); every 50 ms of waiting it looks for executors whose
    /// process died ([`LockstepError::Gone`]) and runs `check` (the caller's own checks,
    /// such as its children's exit status); after `timeout` without reaching zero it
    /// fails with [`LockstepError::Stalled`].
    pub fn wait_quiet(
        &self,
        timeout: Duration,
        check: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), LockstepError> {
        let owed = self.owed();
        let word = owed.pending;
        // a short spin first: most steps end within microseconds
        for _ in 0..200 {
            if word.load(Ordering::SeqCst) == 0 {
                return Ok(());
            }
            std::hint::spin_loop();
        }
        let start = crate::sys::clock::mono_ns();
        loop {
            if owed.quiet_or_sleep(Duration::from_millis(50)) {
                return Ok(());
            }
            let waited = Duration::from_nanos(crate::sys::clock::mono_ns() - start);
            if crate::sys::signals::requested() {
                return Err(LockstepError::Interrupted);
            }
            if waited >= Duration::from_millis(50) {
                if let Some(gone) = self.dead_participant() {
                    return Err(gone);
                }
                check().map_err(LockstepError::Check)?;
            }
            if waited >= timeout {
                return Err(LockstepError::Stalled {
                    pending: word.load(Ordering::SeqCst),
                    waited,
                });
            }
        }
    }

    /// An executor whose process is gone (or a zombie), if any.
    pub fn dead_participant(&self) -> Option<LockstepError> {
        self.participants().into_iter().find_map(|p| {
            let alive = match std::fs::read_to_string(format!("/proc/{}/stat", p.pid)) {
                // the state follows the ")" that ends the command name
                Ok(stat) => stat
                    .rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
                Err(_) => false,
            };
            (!alive).then_some(LockstepError::Gone {
                pid: p.pid,
                name: p.name,
            })
        })
    }
}

impl Drop for Lockstep {
    fn drop(&mut self) {
        if self.owner {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// An executor taking part in a replay (see [`MAX_EXECUTORS`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Participant {
    /// Its process id.
    pub pid: u32,
    /// Its process name.
    pub name: String,
    /// Its next timer deadline, simulation ns ([`NO_DEADLINE`]: none).
    pub next_due: i64,
}

/// The receiver count of one topic in the segment.
pub(crate) struct TopicCount {
    ls: Arc<Lockstep>,
    idx: usize,
}

impl TopicCount {
    fn entry(&self) -> &TopicEntry {
        &self.ls.seg().topics[self.idx]
    }
    /// Executor subscriptions of the topic.
    pub(crate) fn receivers(&self) -> u32 {
        self.entry().receivers.load(Ordering::SeqCst)
    }
    /// A sample is about to be sent: owe one handling per receiver.
    #[inline]
    pub(crate) fn sending(&self) {
        self.ls.owe(self.receivers());
    }
    /// Counts one receiver more until the guard drops.
    pub(crate) fn receiver(self) -> Receiver {
        self.entry().receivers.fetch_add(1, Ordering::SeqCst);
        Receiver { count: self }
    }
}

/// One executor subscription counted as a receiver of its topic.
pub(crate) struct Receiver {
    count: TopicCount,
}

impl Receiver {
    /// `n` samples of this subscription were handled (or lost).
    #[inline]
    pub(crate) fn handled(&self, n: u32) {
        self.count.ls.done(n);
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.count.entry().receivers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An executor's slot: its next deadline and its acknowledgements of clock steps.
pub(crate) struct ExecutorSlot {
    ls: Arc<Lockstep>,
    idx: usize,
    acked: std::cell::Cell<u32>,
}

impl ExecutorSlot {
    fn slot(&self) -> &Slot {
        &self.ls.seg().slots[self.idx]
    }
    /// The clock's epoch now (read before looking for due timers).
    pub(crate) fn epoch(&self) -> u32 {
        self.ls.sim().epoch.load(Ordering::SeqCst)
    }
    /// Nothing is ready any more: publishes the next deadline, then gives back `owed`
    /// handled samples and the acknowledgement of clock step `epoch` if not yet given.
    pub(crate) fn settle(&self, epoch: u32, next_due: Option<u64>, owed: u32) {
        let due = next_due.map_or(NO_DEADLINE, |d| d.min(i64::MAX as u64) as i64);
        // SYNC: SeqCst before the subtraction below: the player reads deadlines once the
        // count is zero.
        self.slot().next_due.store(due, Ordering::SeqCst);
        let ack = u32::from(self.acked.replace(epoch) != epoch);
        self.ls.done(owed + ack);
    }
}

impl Drop for ExecutorSlot {
    fn drop(&mut self) {
        let h = &self.ls.seg().header;
        h.executors.fetch_sub(1, Ordering::SeqCst);
        // a step that counted this executor gets its acknowledgement
        let epoch = self.epoch();
        if self.acked.get() != epoch {
            self.ls.done(1);
        }
        self.slot().state.store(0, Ordering::Release);
    }
}

/// This process's name (`/proc/self/comm`), for slots and errors.
fn process_name() -> String {
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
    let mut name = comm.trim().to_string();
    name.truncate(NAME_LEN);
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owed_work_wakes_the_player_only_at_zero() {
        let domain = 900 + (std::process::id() % 50);
        let ls = Lockstep::create(domain).unwrap();
        assert!(matches!(
            Lockstep::create(domain),
            Err(LockstepError::Busy { .. })
        ));
        let joined = Lockstep::join(domain).unwrap();
        let t = joined.topic("/a").unwrap();
        let r = joined.topic("/a").unwrap().receiver();
        assert_eq!(ls.receivers("/a"), 1);
        t.sending();
        assert_eq!(ls.pending(), 1);
        let waiter = {
            let ls = ls.clone();
            std::thread::spawn(move || ls.wait_quiet(Duration::from_secs(20), &mut || Ok(())))
        };
        std::thread::sleep(Duration::from_millis(20));
        r.handled(1);
        waiter.join().unwrap().unwrap();
        drop(r);
        assert_eq!(ls.receivers("/a"), 0);
        t.sending();
        assert_eq!(ls.pending(), 0, "no receiver: nothing owed");
        // a stall is reported, not waited out forever
        ls.owe(2);
        let e = ls
            .wait_quiet(Duration::from_millis(120), &mut || Ok(()))
            .unwrap_err();
        assert!(
            matches!(e, LockstepError::Stalled { pending: 2, .. }),
            "{e}"
        );
        ls.done(2);
        let path = ls.path().to_string();
        drop((ls, joined, t));
        assert!(
            !std::path::Path::new(&path).exists(),
            "the player removes it"
        );
        assert!(matches!(
            Lockstep::join(domain),
            Err(LockstepError::NoReplay { .. })
        ));
    }
}

/// Loom models of the count of work owed: a player's message sets off a callback that
/// publishes to a second receiver; the player, waiting for zero with the real
/// [`Owed::quiet_or_sleep`], must wake (the futex model has no timeout: a lost wake-up is
/// a deadlock loom reports) and then see what both callbacks did. Run by
/// `scripts/concurrency`.
#[cfg(all(test, nerve_loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// The words of a segment's count, a topic queue per receiver, and what each
    /// callback did (stored Relaxed: only the count may order them for the player).
    struct World {
        pending: AtomicU32,
        underflows: AtomicU32,
        queues: [AtomicU32; 2],
        handled: [AtomicU32; 2],
    }

    impl World {
        fn new() -> World {
            let word = || AtomicU32::new(0);
            World {
                pending: word(),
                underflows: word(),
                queues: [word(), word()],
                handled: [word(), word()],
            }
        }

        fn owed(&self) -> Owed<'_> {
            Owed {
                pending: &self.pending,
                underflows: &self.underflows,
            }
        }

        /// A publisher's send to receiver `i`'s topic: owe, then make it visible.
        fn send(&self, i: usize) {
            self.owed().owe(1);
            // SYNC: Release, as a queue's publishing store
            self.queues[i].store(1, Ordering::Release);
            futex_wake(&self.queues[i]);
        }

        /// Receiver `i`'s executor: takes its sample, runs `callback`, gives it back.
        fn receive(&self, i: usize, callback: impl FnOnce()) {
            // SYNC: Acquire, as a queue's take; the executor sleeps until the send's
            // wake (no spinning: loom bounds its branches)
            while self.queues[i].load(Ordering::Acquire) == 0 {
                futex_wait(&self.queues[i], 0, Duration::MAX);
            }
            callback();
            // SYNC: Relaxed: only the count orders this for the player
            self.handled[i].store(1, Ordering::Relaxed);
            self.owed().done(1);
        }
    }

    #[test]
    fn the_player_wakes_once_every_callback_set_off_returned() {
        loom::model(|| {
            let world = Arc::new(World::new());
            // receiver 0's callback publishes to receiver 1
            let first = {
                let world = world.clone();
                thread::spawn(move || world.receive(0, || world.send(1)))
            };
            let second = {
                let world = world.clone();
                thread::spawn(move || world.receive(1, || {}))
            };
            world.send(0);
            while !world.owed().quiet_or_sleep(Duration::MAX) {}
            // SYNC: Relaxed: the count reaching zero ordered them
            let handled = [0, 1].map(|i| world.handled[i].load(Ordering::Relaxed));
            assert_eq!(
                handled,
                [1, 1],
                "the player woke before a callback returned"
            );
            assert_eq!(world.underflows.load(Ordering::Relaxed), 0);
            first.join().expect("first receiver");
            second.join().expect("second receiver");
        });
    }
}
