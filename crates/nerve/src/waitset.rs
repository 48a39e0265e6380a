//! Serving several subscribers from one thread: sleep until any of them has a sample.

use crate::error::WaitError;
use crate::message::Message;
use crate::subscriber::{Receiver, Subscriber};
use crate::transport::doorbell::{self, Doorbell, Slot, WaitEntry};
use crate::wait::MAX_SLEEP;
use std::time::{Duration, Instant};

/// Something a [`WaitSet`] can wait on. Implemented by [`Subscriber`] and
/// [`crate::RawSubscriber`].
pub trait Waitable {
    /// Whether a sample is queued right now.
    fn is_ready(&self) -> bool;
    #[doc(hidden)]
    fn wake_slot_addr(&self) -> usize;
}

impl Waitable for Receiver {
    fn is_ready(&self) -> bool {
        self.has_samples()
    }
    fn wake_slot_addr(&self) -> usize {
        self.slot() as usize
    }
}

impl<M: Message> Waitable for Subscriber<M> {
    fn is_ready(&self) -> bool {
        self.receiver().is_ready()
    }
    fn wake_slot_addr(&self) -> usize {
        self.receiver().wake_slot_addr()
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
        let mut slots: Vec<usize> = self.entries.iter().map(|e| e.wake_slot_addr()).collect();
        slots.sort_unstable();
        slots.dedup();
        loop {
            // SAFETY: every address comes from a live subscriber borrowed for 'a, whose
            // node keeps the doorbell mapping alive.
            let slot_refs: Vec<&Slot> = slots
                .iter()
                .map(|&a| unsafe { &*(a as *const Slot) })
                .collect();
            let entries: Vec<WaitEntry> = slot_refs
                .iter()
                .map(|s| WaitEntry {
                    seen: s.register(),
                    word: Doorbell::slot_ptr(s),
                })
                .collect();
            let ready = self.ready();
            let remaining = deadline.saturating_duration_since(Instant::now());
            if ready.is_empty() && !remaining.is_zero() {
                doorbell::wait_any(&entries, remaining.min(MAX_SLEEP));
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
