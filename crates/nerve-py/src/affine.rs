//! Thread affinity: Nerve's nodes and ports are `!Send` (non-atomic reference counts,
//! iceoryx2's single-threaded ports), while Python may touch or drop an object on any
//! thread. Every such value lives in an [`Affine`] tied to the thread that created its
//! context: it is reached only on that thread (elsewhere a clear `RuntimeError`), and
//! when Python drops it on another thread it is parked, untouched, in its context's
//! [`Graveyard`] and dropped later on the owning thread.

use pyo3::exceptions::PyRuntimeError;
use pyo3::PyResult;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};

/// Values dropped on a foreign thread, waiting for their owner thread.
pub(crate) struct Graveyard {
    owner: ThreadId,
    pending: AtomicBool,
    bodies: Mutex<Vec<Body>>,
}

/// A value parked in a graveyard: only moved, never touched, until it is dropped on the
/// owner thread.
struct Body(#[allow(dead_code)] Box<dyn std::any::Any>); // held only to be dropped later

// SAFETY: a `Body` is created on a foreign thread by moving a value out of an `Affine`
// (a memcpy of its bytes: no reference count or cell inside is read or written), stays
// in the mutex untouched, and is dropped only by `Graveyard::bury`, which runs on the
// owner thread that created the value.
unsafe impl Send for Body {}

impl Graveyard {
    /// A graveyard owned by the calling thread.
    pub(crate) fn new() -> Arc<Graveyard> {
        Arc::new(Graveyard {
            owner: thread::current().id(),
            pending: AtomicBool::new(false),
            bodies: Mutex::new(Vec::new()),
        })
    }

    /// Drops what other threads parked; call on the owner thread (no-op elsewhere).
    pub(crate) fn bury(&self) {
        // SYNC: Acquire pairs with the Release store in `park`: bodies pushed before the
        // flag was set are seen; a push racing with this is found by the next call.
        if !self.pending.load(Ordering::Acquire) || thread::current().id() != self.owner {
            return;
        }
        self.pending.store(false, Ordering::Relaxed);
        let bodies = std::mem::take(&mut *self.bodies.lock().unwrap_or_else(|e| e.into_inner()));
        drop(bodies);
    }

    fn park(&self, body: Body) {
        self.bodies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(body);
        // SYNC: Release publishes the push to `bury`'s Acquire load.
        self.pending.store(true, Ordering::Release);
    }

    /// Number of values waiting (for tests and introspection).
    pub(crate) fn waiting(&self) -> usize {
        self.bodies.lock().map(|b| b.len()).unwrap_or(0)
    }
}

impl Drop for Graveyard {
    fn drop(&mut self) {
        if thread::current().id() != self.owner {
            // the last reference went on a foreign thread: what is parked cannot be
            // dropped here, so it is leaked (bounded: what Python dropped on other threads
            // after its owner thread stopped using Nerve)
            let bodies = std::mem::take(self.bodies.get_mut().unwrap_or_else(|e| e.into_inner()));
            std::mem::forget(bodies);
        }
    }
}

/// A `!Send` value reachable only on its owner thread.
pub(crate) struct Affine<T: 'static> {
    value: ManuallyDrop<T>,
    graveyard: Arc<Graveyard>,
    what: &'static str,
}

// SAFETY: the value is only reached through `get`/`get_mut`/`into_inner`, which check
// that the caller runs on the owner thread; on any other thread it is never touched, and
// `Drop` moves it (without touching it) into the graveyard, whose owner thread drops it.
unsafe impl<T: 'static> Send for Affine<T> {}
// SAFETY: as above: shared references give access only on the owner thread, so two
// threads never reach the value at once.
unsafe impl<T: 'static> Sync for Affine<T> {}

impl<T: 'static> Affine<T> {
    /// Ties `value` to the graveyard's owner thread; `what` names it in errors.
    pub(crate) fn new(value: T, graveyard: &Arc<Graveyard>, what: &'static str) -> Self {
        Affine {
            value: ManuallyDrop::new(value),
            graveyard: graveyard.clone(),
            what,
        }
    }

    fn check(&self) -> PyResult<()> {
        if thread::current().id() == self.graveyard.owner {
            return Ok(());
        }
        Err(PyRuntimeError::new_err(format!(
            "this {} belongs to the thread that created its Context; Nerve nodes are \
             single-threaded (create a Context per thread, or hand data over through a topic)",
            self.what
        )))
    }

    /// The value, on the owner thread.
    pub(crate) fn get(&self) -> PyResult<&T> {
        self.check()?;
        self.graveyard.bury();
        Ok(&self.value)
    }

    /// Takes the value out, on the owner thread.
    pub(crate) fn into_inner(mut self) -> PyResult<T> {
        self.check()?;
        // SAFETY: taken once; `self` is then forgotten after its graveyard is dropped, so
        // the value is neither dropped nor used again here.
        let value = unsafe { ManuallyDrop::take(&mut self.value) };
        // SAFETY: `graveyard` is read out once and `self` is forgotten right after, so it
        // is dropped exactly once (here, by going out of scope).
        let _graveyard = unsafe { std::ptr::read(&self.graveyard) };
        std::mem::forget(self);
        Ok(value)
    }

    /// The graveyard this value belongs to.
    pub(crate) fn graveyard(&self) -> &Arc<Graveyard> {
        &self.graveyard
    }
}

impl<T: 'static> Drop for Affine<T> {
    fn drop(&mut self) {
        // SAFETY: `value` is taken exactly once, here, and never used again.
        let value = unsafe { ManuallyDrop::take(&mut self.value) };
        if thread::current().id() == self.graveyard.owner {
            drop(value);
        } else {
            self.graveyard.park(Body(Box::new(value)));
        }
    }
}
