//! Serving several subscribers from one thread: sleep until any of them has a sample.

use crate::error::WaitError;
use crate::message::Message;
use crate::service::server::RawServer;
use crate::sys::clock::mono_ns;
use crate::sys::futex::{self, WaitEntry};
use crate::topic::raw::RawSubscriber;
use crate::topic::subscriber::{Receiver, Subscriber};
use crate::transport::doorbell::SlotRef;
use crate::transport::wait::MAX_SLEEP;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Something a [`WaitSet`] can wait on: [`Subscriber`], [`crate::RawSubscriber`] and the
/// servers ([`crate::Server`], [`crate::RawServer`]; an action server's through
/// [`crate::action::ActionServer::waitables`]).
///
/// The trait is sealed: a wait set sleeps on the doorbell of what it waits for, which only
/// Nerve's own endpoints can name, so no other type can implement it.
///
/// ```compile_fail
/// struct Mine;
/// impl nerve::Waitable for Mine {
///     fn is_ready(&self) -> bool { true }
/// }
/// ```
pub trait Waitable: sealed::Sealed {
    /// Whether a sample is queued right now.
    fn is_ready(&self) -> bool;
}

pub(crate) mod sealed {
    /// Implemented by the crate's endpoints only (see [`super::Waitable`]).
    pub trait Sealed {
        /// The doorbell slot rung when the endpoint has input.
        #[doc(hidden)]
        fn wake_slot(&self) -> &super::SlotRef;
    }
}

impl sealed::Sealed for Receiver {
    fn wake_slot(&self) -> &SlotRef {
        self.slot()
    }
}

impl Waitable for Receiver {
    fn is_ready(&self) -> bool {
        self.has_samples()
    }
}

impl sealed::Sealed for RawSubscriber {
    fn wake_slot(&self) -> &SlotRef {
        self.rx.slot()
    }
}

impl Waitable for RawSubscriber {
    fn is_ready(&self) -> bool {
        self.rx.has_samples()
    }
}

impl<M: Message> sealed::Sealed for Subscriber<M> {
    fn wake_slot(&self) -> &SlotRef {
        self.receiver().slot()
    }
}

impl<M: Message> Waitable for Subscriber<M> {
    fn is_ready(&self) -> bool {
        self.receiver().is_ready()
    }
}

impl<S: crate::service::Service> sealed::Sealed for crate::service::server::Server<S> {
    fn wake_slot(&self) -> &SlotRef {
        crate::service::server::Server::wake_slot(self)
    }
}

/// A server is ready when requests wait.
impl<S: crate::service::Service> Waitable for crate::service::server::Server<S> {
    fn is_ready(&self) -> bool {
        self.has_requests()
    }
}

impl sealed::Sealed for RawServer {
    fn wake_slot(&self) -> &SlotRef {
        RawServer::wake_slot(self)
    }
}

/// A type-erased server is ready when requests wait.
impl Waitable for RawServer {
    fn is_ready(&self) -> bool {
        self.has_requests()
    }
}

/// Ends a [`WaitSet`]'s wait from any thread (see [`WaitSet::wake_on`]): a stop flag or
/// new work that the entries' doorbells do not announce. A wake while nobody waits ends
/// the next wait at once (it is kept until a wait consumes it). Cheap to clone; clones
/// wake the same waits.
#[derive(Clone, Debug, Default)]
pub struct WaitSetWaker {
    inner: Arc<WakerInner>,
}

#[derive(Debug, Default)]
struct WakerInner {
    word: AtomicU32,
    pending: AtomicBool,
}

impl WaitSetWaker {
    /// A waker no wait watches yet.
    pub fn new() -> WaitSetWaker {
        WaitSetWaker::default()
    }

    /// Ends the wait that watches this waker, or the next one if none is waiting.
    pub fn wake(&self) {
        // SYNC: SeqCst: the flag before the bump; a waiter that read the old word finds
        // the flag once the futex returns, one that reads the new word sleeps not at all.
        self.inner.pending.store(true, Ordering::SeqCst);
        self.inner.word.fetch_add(1, Ordering::SeqCst);
        futex::futex_wake(&self.inner.word);
    }

    /// Consumes a pending wake.
    fn take(&self) -> bool {
        // SYNC: SeqCst, after the waiter's read of the word (see `wake`).
        self.inner.pending.swap(false, Ordering::SeqCst)
    }
}

/// Most entries in one wait set (the kernel's futex_waitv limit).
pub const MAX_WAITSET_ENTRIES: usize = 128;

/// Waits on several subscribers at once without polling.
#[derive(Default)]
pub struct WaitSet<'a> {
    entries: Vec<&'a dyn Waitable>,
    wakers: Vec<&'a WaitSetWaker>,
}

impl<'a> WaitSet<'a> {
    /// An empty wait set.
    pub fn new() -> Self {
        WaitSet::default()
    }

    /// Adds an entry; returns its index in the ready lists of [`WaitSet::wait`].
    pub fn add(&mut self, w: &'a dyn Waitable) -> Result<usize, WaitError> {
        if self.entries.len() + self.wakers.len() >= MAX_WAITSET_ENTRIES {
            return Err(WaitError::Full {
                max: MAX_WAITSET_ENTRIES,
            });
        }
        self.entries.push(w);
        Ok(self.entries.len() - 1)
    }

    /// Makes every wait also end (with no entry ready) when `waker` is woken. A waker
    /// takes the place of an entry ([`MAX_WAITSET_ENTRIES`] counts both).
    pub fn wake_on(&mut self, waker: &'a WaitSetWaker) -> Result<(), WaitError> {
        if self.entries.len() + self.wakers.len() >= MAX_WAITSET_ENTRIES {
            return Err(WaitError::Full {
                max: MAX_WAITSET_ENTRIES,
            });
        }
        self.wakers.push(waker);
        Ok(())
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn ready(&self) -> Vec<usize> {
        (0..self.entries.len())
            .filter(|&i| self.entries[i].is_ready())
            .collect()
    }

    /// Sleeps until at least one entry has a sample or `timeout` passes; returns the
    /// indices of the ready entries (empty on timeout).
    pub fn wait(&self, timeout: Duration) -> Result<Vec<usize>, WaitError> {
        let ready = self.ready();
        if !ready.is_empty() {
            return Ok(ready);
        }
        let deadline = Instant::now() + timeout;
        let mut slot_refs: Vec<&SlotRef> = Vec::with_capacity(self.entries.len());
        for e in &self.entries {
            let slot = e.wake_slot();
            if !slot_refs.iter().any(|s| s.same(slot)) {
                slot_refs.push(slot);
            }
        }
        let mut seen = Vec::with_capacity(slot_refs.len());
        loop {
            let (ready, remaining) = crate::transport::doorbell::wait_round(
                &slot_refs,
                &mut seen,
                |seen| {
                    let entries: Vec<WaitEntry> = slot_refs
                        .iter()
                        .zip(seen)
                        .map(|(s, &seen)| WaitEntry {
                            seen,
                            word: s.word(),
                        })
                        .collect();
                    let ready = self.ready();
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    let idle = ready.is_empty() && !remaining.is_zero();
                    ((ready, remaining), idle.then_some((entries, remaining)))
                },
                |(entries, remaining)| {
                    futex::wait_any(
                        &entries,
                        crate::transport::doorbell::sleep_limit(remaining.min(MAX_SLEEP)),
                    );
                },
            );
            if !ready.is_empty() || remaining.is_zero() {
                return Ok(ready);
            }
            let ready = self.ready();
            if !ready.is_empty() {
                return Ok(ready);
            }
        }
    }

    /// Sleeps until at least one entry has a sample, a waker of [`WaitSet::wake_on`] is
    /// woken or the monotonic clock ([`crate::mono_ns`]) reaches `deadline_ns`
    /// (`u64::MAX`: no deadline); returns the indices of the ready entries (empty after
    /// a wake or at the deadline). The sleep is a single `futex_waitv` to the absolute
    /// deadline (re-armed once a second, as every doorbell wait is), so a timer deadline
    /// is met as precisely as the kernel wakes.
    pub fn wait_until(&self, deadline_ns: u64) -> Result<Vec<usize>, WaitError> {
        let ready = self.ready();
        if !ready.is_empty() || self.wakers.iter().any(|w| w.take()) {
            return Ok(ready);
        }
        let mut slot_refs: Vec<&SlotRef> = Vec::with_capacity(self.entries.len());
        for e in &self.entries {
            let slot = e.wake_slot();
            if !slot_refs.iter().any(|s| s.same(slot)) {
                slot_refs.push(slot);
            }
        }
        let mut seen = Vec::with_capacity(slot_refs.len());
        loop {
            let (ready, woken, now) = crate::transport::doorbell::wait_round(
                &slot_refs,
                &mut seen,
                |seen| {
                    let mut entries: Vec<WaitEntry> = slot_refs
                        .iter()
                        .zip(seen)
                        .map(|(s, &seen)| WaitEntry {
                            seen,
                            word: s.word(),
                        })
                        .collect();
                    for w in &self.wakers {
                        entries.push(WaitEntry {
                            // SYNC: read the word before the flag (see `WaitSetWaker::wake`).
                            seen: w.inner.word.load(Ordering::SeqCst),
                            word: &w.inner.word,
                        });
                    }
                    let woken = self.wakers.iter().any(|w| w.take());
                    let ready = self.ready();
                    let now = mono_ns();
                    let idle = ready.is_empty() && !woken && now < deadline_ns;
                    ((ready, woken, now), idle.then_some((entries, now)))
                },
                |(entries, now)| {
                    let limit =
                        crate::transport::doorbell::sleep_limit(MAX_SLEEP).as_nanos() as u64;
                    futex::wait_any_until(&entries, deadline_ns.min(now.saturating_add(limit)));
                },
            );
            if !ready.is_empty() || woken || now >= deadline_ns {
                return Ok(ready);
            }
            let ready = self.ready();
            if !ready.is_empty() || self.wakers.iter().any(|w| w.take()) || mono_ns() >= deadline_ns
            {
                return Ok(ready);
            }
        }
    }
}
