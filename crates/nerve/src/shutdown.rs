//! Cooperative shutdown on SIGINT and SIGTERM: loops poll [`requested`] and exit cleanly so
//! every shared-memory resource is released.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Installs handlers for SIGINT and SIGTERM that set the shutdown flag.
pub fn install() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
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
}
