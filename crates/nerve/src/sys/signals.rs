//! Cooperative shutdown on SIGINT and SIGTERM: loops poll [`requested`] and exit cleanly so
//! every shared-memory resource is released. Executors also sleep on the shutdown word, so
//! a signal wakes them at once.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);
/// Bumped (and futex-woken) on every request, so sleeping executors notice.
static WORD: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    // atomics and the futex system call are async-signal-safe
    request();
}

/// Installs handlers for SIGINT and SIGTERM that set the shutdown flag.
pub fn install() {
    // SAFETY: the handler only stores to atomics and makes a futex system call, both
    // async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

/// Whether SIGINT or SIGTERM arrived since [`install`].
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// Requests shutdown from code (as if a signal had arrived).
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
    // SYNC: SeqCst bump after the flag store: a waiter that read the old word also sees
    // the flag once woken.
    WORD.fetch_add(1, Ordering::SeqCst);
    crate::sys::futex::futex_wake(&WORD);
}

/// How many shutdown requests (signals and [`request`] calls) arrived so far, wrapping;
/// pass it to [`wait`] to sleep until the next one.
pub fn requests() -> u32 {
    // SYNC: SeqCst, as the bump in `request` after its flag store: a caller that sees the
    // count change also sees `requested()`.
    WORD.load(Ordering::SeqCst)
}

/// Sleeps until a shutdown request arrives after [`requests`] returned `seen` (at once if
/// one already did), or until `timeout` passes; returns [`requests`] then.
pub fn wait(seen: u32, timeout: std::time::Duration) -> u32 {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let now = WORD.load(Ordering::SeqCst);
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if now != seen || left.is_zero() {
            return now;
        }
        crate::sys::futex::futex_wait(&WORD, seen, left);
    }
}

/// The word executors sleep on (changes on every request).
pub(crate) fn word() -> &'static AtomicU32 {
    &WORD
}
