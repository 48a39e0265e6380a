//! Futexes: wake and wait on a 32-bit word in memory (shared between processes or not),
//! and wait on several words at once (`futex_waitv`, Linux 5.16+, with a fallback).

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Wakes every thread (of any process) sleeping on `word`.
pub(crate) fn futex_wake(word: &AtomicU32) {
    // SAFETY: word lives in a shared mapping; FUTEX_WAKE (not PRIVATE) wakes waiters of
    // every process mapping it. Extra arguments are ignored for WAKE.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word as *const AtomicU32,
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            0,
            0,
        );
    }
}

/// Sleeps while `word` still equals `seen`, at most `timeout` (returns at once if it
/// changed: no lost wake-up).
pub(crate) fn futex_wait(word: &AtomicU32, seen: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64 / 2) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: word is a valid u32 in a shared mapping; ts is a relative timeout; the kernel
    // returns at once if the word no longer equals `seen` (no lost wake-up).
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word as *const AtomicU32,
            libc::FUTEX_WAIT,
            seen,
            &ts as *const libc::timespec,
            0,
            0,
        );
    }
}

/// One futex to wait on in [`wait_any`].
pub(crate) struct WaitEntry<'a> {
    pub(crate) word: &'a AtomicU32,
    pub(crate) seen: u32,
}

#[repr(C)]
struct FutexWaitv {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}

const FUTEX2_SIZE_U32: u32 = 0x02;
const SYS_FUTEX_WAITV: libc::c_long = 449;

/// Sleeps until any of the words changes or `timeout` passes (futex_waitv, Linux 5.16+).
/// Where the kernel lacks it (ENOSYS) or a seccomp filter forbids it (EPERM), found out
/// once per process, it sleeps on the first word instead, 1 ms at most per call, so the
/// other words are looked at within 1 ms (no busy loop either way).
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
    if !WAITV.usable() {
        return wait_first(entries, deadline_ns);
    }
    let waitv: Vec<FutexWaitv> = entries
        .iter()
        .map(|e| FutexWaitv {
            val: e.seen as u64,
            uaddr: e.word.as_ptr() as u64,
            flags: FUTEX2_SIZE_U32,
            reserved: 0,
        })
        .collect();
    let deadline = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: waitv holds entries.len() futex_waitv records whose addresses come from
    // references borrowed for this call (live u32 words); deadline is an absolute
    // CLOCK_MONOTONIC time; the kernel only reads these.
    let r = unsafe {
        libc::syscall(
            SYS_FUTEX_WAITV,
            waitv.as_ptr(),
            waitv.len() as libc::c_uint,
            0,
            &deadline as *const libc::timespec,
            libc::CLOCK_MONOTONIC,
        )
    };
    if r < 0 {
        let errno = io::Error::last_os_error().raw_os_error();
        if matches!(errno, Some(libc::ENOSYS) | Some(libc::EPERM)) {
            WAITV.refuse();
            wait_first(entries, deadline_ns);
        }
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

/// Whether futex_waitv works in this process: assumed until a call says otherwise.
struct Probe(std::sync::atomic::AtomicBool);

impl Probe {
    fn usable(&self) -> bool {
        // SYNC: a sticky flag; a stale read costs one more refused syscall.
        !self.0.load(Ordering::Relaxed)
    }
    fn refuse(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

static WAITV: Probe = Probe(std::sync::atomic::AtomicBool::new(false));
