//! Serving several subscribers from one thread: sleep until any of them has a sample.

use crate::error::WaitError;
use crate::message::Message;
use crate::sys::futex::{self, WaitEntry};
use crate::topic::raw::RawSubscriber;
use crate::topic::subscriber::{Receiver, Subscriber};
use crate::transport::doorbell::SlotRef;
use crate::transport::wait::MAX_SLEEP;
use std::time::{Duration, Instant};

/// Something a [`WaitSet`] can wait on: [`Subscriber`] and [`crate::RawSubscriber`].
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

impl<S: crate::Service> sealed::Sealed for crate::Server<S> {
    fn wake_slot(&self) -> &SlotRef {
        crate::Server::wake_slot(self)
    }
}

/// A server is ready when requests wait.
impl<S: crate::Service> Waitable for crate::Server<S> {
    fn is_ready(&self) -> bool {
        self.has_requests()
    }
}

/// Most entries in one wait set (the kernel's futex_waitv limit).
pub const MAX_WAITSET_ENTRIES: usize = 128;

/// Waits on several subscribers at once without polling.
#[derive(Default)]
pub struct WaitSet<'a> {
    entries: Vec<&'a dyn Waitable>,
}

impl<'a> WaitSet<'a> {
    /// An empty wait set.
    pub fn new() -> Self {
        WaitSet::default()
    }

    /// Adds an entry; returns its index in the ready lists of [`WaitSet::wait`].
    pub fn add(&mut self, w: &'a dyn Waitable) -> Result<usize, WaitError> {
        if self.entries.len() == MAX_WAITSET_ENTRIES {
            return Err(WaitError::Full {
                max: MAX_WAITSET_ENTRIES,
            });
        }
        self.entries.push(w);
        Ok(self.entries.len() - 1)
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
        loop {
            slot_refs.iter().for_each(|s| s.announce());
            crate::transport::doorbell::fence_for_waiters();
            let entries: Vec<WaitEntry> = slot_refs
                .iter()
                .map(|s| WaitEntry {
                    seen: s.seq(),
                    word: s.word(),
                })
                .collect();
            let ready = self.ready();
            let remaining = deadline.saturating_duration_since(Instant::now());
            // a slot whose flag a ring cleared since it was armed: look again instead
            let armed = slot_refs.iter().all(|s| s.is_armed());
            if ready.is_empty() && armed && !remaining.is_zero() {
                futex::wait_any(
                    &entries,
                    crate::transport::doorbell::sleep_limit(remaining.min(MAX_SLEEP)),
                );
            }
            slot_refs.iter().for_each(|s| s.unregister());
            if !ready.is_empty() || remaining.is_zero() {
                return Ok(ready);
            }
            let ready = self.ready();
            if !ready.is_empty() {
                return Ok(ready);
            }
        }
    }
}
