//! The one sync shim of the lock-free code (in the manner of tokio's `src/loom`): the
//! atomics, fences and thread yields it uses, and the two system calls its handshakes
//! rest on (the futex and `membarrier`), from the standard library and `sys` in a normal
//! build, or from [loom](https://docs.rs/loom) and a model of each call under
//! `--cfg nerve_loom`.
//!
//! Under the model the real code runs: the inline ring's `push` and `pop`
//! (`transport::ring`), the shared ring's reservation and registration of reader entries
//! (`transport::shm_ring`), the doorbell's `register`, `wait` and `ring`
//! (`transport::doorbell`), a tensor pool slot's state word (`tensor::pool`) and the
//! lockstep segment's count of work owed (`time::lockstep`). Each file's
//! `loom_models` explore every interleaving the C++ memory model allows, up to loom's
//! preemption bound (`scripts/concurrency`).
//!
//! What stays outside the model: shared-memory mappings and files (loom's atomics are no
//! plain words, so the models use heap memory and the real code reaches its words in a
//! mapping only in normal builds), open-file-description locks, and the timeouts of
//! sleeps. The futex becomes one loom lock and condition variable without a timeout, so a
//! lost wake-up leaves its waiter asleep and loom reports the deadlock; `membarrier`'s
//! light and heavy sides become loom's `SeqCst` fences, which is what the pair of them
//! guarantees together. Miri and ThreadSanitizer run the real calls.
//!
//! Words that must be `const`-initialised (process-wide statics) stay the standard
//! library's in every build: loom's have no `const fn new`.

#[cfg(not(nerve_loom))]
pub(crate) mod sync {
    //! `std::sync` (normal builds).
    pub(crate) mod atomic {
        //! `std::sync::atomic` (normal builds).
        pub(crate) use std::sync::atomic::{
            fence, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering,
        };
    }
}

#[cfg(nerve_loom)]
pub(crate) mod sync {
    //! loom's `sync` (models).
    pub(crate) mod atomic {
        //! loom's atomics (models).
        pub(crate) use ::loom::sync::atomic::{
            fence, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering,
        };
    }
}

/// The thread calls of lock-free code.
pub(crate) mod thread {
    #[cfg(nerve_loom)]
    pub(crate) use ::loom::thread::yield_now;
    // (normal builds spin with `core::hint::spin_loop` and sleep on the futex instead)
    #[cfg(not(nerve_loom))]
    #[allow(unused_imports)]
    pub(crate) use std::thread::yield_now;
}

/// The futex: `sys::futex` in a normal build; under the model one loom lock and
/// condition variable for every word (a model's kernel). A model's wait sleeps only while
/// every word it watches still holds the value seen, checked under the lock a wake takes
/// after its bump, so no wake-up between the check and the sleep is lost; it has no
/// timeout, so a wake-up the protocol loses leaves the waiter asleep for good, which loom
/// reports as a deadlock.
pub(crate) mod futex {
    #[cfg(not(nerve_loom))]
    pub(crate) use crate::sys::futex::{futex_wait, futex_wake};

    /// A wait on several words (`futex_waitv`), for the models of waits on several slots.
    #[cfg(all(test, nerve_loom))]
    pub(crate) use model::wait_any;
    #[cfg(nerve_loom)]
    pub(crate) use model::{futex_wait, futex_wake};

    #[cfg(nerve_loom)]
    mod model {
        use super::super::sync::atomic::{AtomicU32, Ordering};
        use ::loom::sync::{Condvar, Mutex};
        use std::time::Duration;

        ::loom::lazy_static! {
            static ref KERNEL: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());
        }

        /// Sleeps while `word` holds `seen` (the timeout is not modelled).
        pub(crate) fn futex_wait(word: &AtomicU32, seen: u32, _timeout: Duration) {
            wait_any(&[(word, seen)]);
        }

        /// Sleeps while every word holds the value paired with it (`futex_waitv`).
        pub(crate) fn wait_any(words: &[(&AtomicU32, u32)]) {
            let (lock, wakeups) = &*KERNEL;
            let held = lock.lock().unwrap_or_else(|e| e.into_inner());
            // SYNC: Relaxed under the lock: a wake takes the lock after its bump.
            if words
                .iter()
                .all(|(w, seen)| w.load(Ordering::Relaxed) == *seen)
            {
                drop(wakeups.wait(held).unwrap_or_else(|e| e.into_inner()));
            }
        }

        /// Wakes every sleeper (the models have few; a real wake may wake fewer, which
        /// the waiters' loops absorb). Returns 0: the count is not modelled.
        pub(crate) fn futex_wake(_word: &AtomicU32) -> usize {
            let (lock, wakeups) = &*KERNEL;
            let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
            wakeups.notify_all();
            0
        }
    }
}

/// The asymmetric fences of a wake-up handshake: `sys::membarrier` in a normal build;
/// under the model both sides are `SeqCst` fences (what the light and the heavy side
/// guarantee together), and the heavy side never fails.
pub(crate) mod membarrier {
    #[cfg(not(nerve_loom))]
    pub(crate) use crate::sys::membarrier::{heavy, light};

    /// The hot side (model): a `SeqCst` fence.
    #[cfg(nerve_loom)]
    #[inline]
    pub(crate) fn light() {
        super::sync::atomic::fence(super::sync::atomic::Ordering::SeqCst);
    }

    /// The cold side (model): a `SeqCst` fence; never refused.
    #[cfg(nerve_loom)]
    pub(crate) fn heavy() -> bool {
        super::sync::atomic::fence(super::sync::atomic::Ordering::SeqCst);
        true
    }
}
