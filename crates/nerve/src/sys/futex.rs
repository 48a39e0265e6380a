//! Futexes: wake and wait on a 32-bit word in memory (shared between processes or not),
//! and wait on several words at once (`futex_waitv`, Linux 5.16+, with a fallback).

use rustix::io::Errno;
use rustix::thread::futex;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::time::Duration;

/// Wakes every thread (of any process) sleeping on `word`; returns how many woke.
pub(crate) fn futex_wake(word: &AtomicU32) -> usize {
    // Not PRIVATE: waiters of every process mapping the word are woken. A failure (only
    // EFAULT for an unmapped word, impossible for a reference) wakes nobody.
    futex::wake(word, futex::Flags::empty(), i32::MAX as u32).unwrap_or(0)
}

/// Sleeps while `word` still equals `seen`, at most `timeout` (returns at once if it
/// changed: no lost wake-up).
pub(crate) fn futex_wait(word: &AtomicU32, seen: u32, timeout: Duration) {
    let ts = futex::Timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64 / 2) as i64,
        tv_nsec: timeout.subsec_nanos().into(),
    };
    // EAGAIN (the word changed), ETIMEDOUT and EINTR all mean "look again": the callers
    // re-check their condition.
    let _ = futex::wait(word, futex::Flags::empty(), seen, Some(&ts));
}

/// One futex to wait on in [`wait_any`].
pub(crate) struct WaitEntry<'a> {
    pub(crate) word: &'a AtomicU32,
    pub(crate) seen: u32,
}

/// Sleeps until any of the words changes or `timeout` passes (futex_waitv, Linux 5.16+).
/// Where the kernel lacks it (ENOSYS), a seccomp filter forbids it (EPERM) or
/// `NERVE_FUTEX_WAITV=off` says so, found out once per process, it sleeps on the first
/// word instead, 1 ms at most per call, so the other words are looked at within 1 ms (no
/// busy loop either way).
pub(crate) fn wait_any(entries: &[WaitEntry], timeout: Duration) {
    let cap = timeout.as_nanos().min(u64::MAX as u128 / 4) as u64;
    wait_any_until(entries, super::clock::mono_ns().saturating_add(cap));
}

/// Like [`wait_any`], to an absolute `CLOCK_MONOTONIC` deadline in ns.
pub(crate) fn wait_any_until(entries: &[WaitEntry], deadline_ns: u64) {
    if entries.is_empty() {
        super::clock::clock_sleep_until(deadline_ns);
        return;
    }
    if !waitv_usable() {
        return wait_first(entries, deadline_ns);
    }
    let waits: Vec<futex::Wait> = entries
        .iter()
        .map(|e| {
            let mut w = futex::Wait::new();
            w.val = e.seen.into();
            w.uaddr = futex::WaitPtr::new(e.word.as_ptr().cast());
            w.flags = futex::WaitFlags::SIZE_U32;
            w
        })
        .collect();
    let deadline = futex::Timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as i64,
        tv_nsec: (deadline_ns % 1_000_000_000) as _,
    };
    // The addresses come from references borrowed for this call (live u32 words).
    let r = futex::waitv(
        &waits,
        futex::WaitvFlags::empty(),
        Some(&deadline),
        futex::ClockId::Monotonic,
    );
    if let Err(Errno::NOSYS | Errno::PERM) = r {
        refuse_waitv();
        wait_first(entries, deadline_ns);
    }
}

/// The fallback of [`wait_any_until`]: sleep on the first word, at most 1 ms.
fn wait_first(entries: &[WaitEntry], deadline_ns: u64) {
    let left = deadline_ns.saturating_sub(super::clock::mono_ns());
    futex_wait(
        entries[0].word,
        entries[0].seen,
        Duration::from_nanos(left).min(Duration::from_millis(1)),
    );
}

/// Whether futex_waitv is used: 0 not yet known, 1 yes, 2 no (refused by the kernel or
/// turned off by `NERVE_FUTEX_WAITV=off`).
static WAITV: AtomicU8 = AtomicU8::new(0);

fn waitv_usable() -> bool {
    // SYNC: a sticky flag guarding no data; a stale read costs one more refused syscall.
    match WAITV.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let off = std::env::var("NERVE_FUTEX_WAITV").is_ok_and(|v| v == "off");
            // SYNC: as above; two first callers store the same value.
            WAITV.store(if off { 2 } else { 1 }, Ordering::Relaxed);
            !off
        }
    }
}

fn refuse_waitv() {
    // SYNC: see `waitv_usable`.
    WAITV.store(2, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    /// Waits on two words (the second one is changed by another thread) through `wait`,
    /// until it sees the change; returns how long that took.
    fn woken_by_second_word(wait: fn(&[WaitEntry], u64)) -> Duration {
        let words = Arc::new([AtomicU32::new(0), AtomicU32::new(0)]);
        let w = words.clone();
        let start = Instant::now();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            w[1].store(1, Ordering::SeqCst);
            futex_wake(&w[1]);
        });
        while words[1].load(Ordering::SeqCst) == 0 {
            let entries = [
                WaitEntry {
                    word: &words[0],
                    seen: 0,
                },
                WaitEntry {
                    word: &words[1],
                    seen: 0,
                },
            ];
            wait(&entries, super::super::clock::mono_ns() + 5_000_000_000);
        }
        t.join().unwrap();
        start.elapsed()
    }

    #[test]
    fn both_paths_wake_on_any_word() {
        // futex_waitv where the kernel has it, and the fallback (sleep on the first word,
        // 1 ms at most, then look again) that ENOSYS, EPERM or NERVE_FUTEX_WAITV=off pick
        assert!(woken_by_second_word(wait_any_until) < Duration::from_secs(4));
        assert!(woken_by_second_word(wait_first) < Duration::from_secs(4));
    }

    #[test]
    fn the_fallback_sleeps_between_looks() {
        // 100 ms of fallback waits on words that never change: about 100 calls of 1 ms,
        // not a busy loop (a busy loop makes millions of calls)
        let word = AtomicU32::new(0);
        let entries = [WaitEntry {
            word: &word,
            seen: 0,
        }];
        let start = Instant::now();
        let mut calls = 0u32;
        while start.elapsed() < Duration::from_millis(100) {
            wait_first(&entries, super::super::clock::mono_ns() + 1_000_000_000);
            calls += 1;
        }
        assert!(calls <= 150, "{calls} calls in 100 ms");
    }
}
