//! Asymmetric fences (`membarrier`): the hot side of a wake-up handshake (a publisher
//! checking for sleepers after every send) pays only a compiler fence, the cold side (a
//! subscriber about to sleep) pays a system call that makes every running thread of every
//! registered process execute a full fence. Together they order "sample written, then
//! sleepers counted" against "sleeper counted, then queue checked" as two full fences
//! would, so no wake-up is lost.
//!
//! Every process registers when it makes its first context. Where the kernel or a seccomp
//! filter refuses (or `NERVE_MEMBARRIER=off`), publishers of that process keep a full fence
//! per send, and sleepers whose heavy fence fails sleep at most a millisecond at a time, so
//! a wake-up missed because some other process's publisher uses the light fence costs at
//! most that.

use rustix::thread::{membarrier, MembarrierCommand};
use std::sync::atomic::{compiler_fence, fence, AtomicU8, Ordering};
use std::time::Duration;

/// 0: not registered yet, 1: registered (light fences allowed), 2: refused.
static STATE: AtomicU8 = AtomicU8::new(0);

/// Longest single sleep of a waiter whose heavy fence failed.
pub(crate) const UNFENCED_SLEEP: Duration = Duration::from_millis(1);

/// Registers this process for global expedited barriers (once; later calls are free).
pub(crate) fn register() {
    // SYNC: Relaxed/Release: a plain flag; a thread that reads 0 uses full fences, which
    // is always correct.
    if STATE.load(Ordering::Relaxed) != 0 {
        return;
    }
    let off = std::env::var("NERVE_MEMBARRIER").is_ok_and(|v| v == "off" || v == "0");
    // (Miri has no membarrier: processes under it keep full fences)
    let ok = !off && !cfg!(miri) && membarrier(MembarrierCommand::RegisterGlobalExpedited).is_ok();
    STATE.store(if ok { 1 } else { 2 }, Ordering::Release);
}

/// The hot side: a full fence unless this process registered, then a compiler fence
/// (the heavy side's barrier runs on this thread when it matters).
// (under loom, `crate::loom::membarrier` stands in for both sides with loom's fences)
#[cfg_attr(nerve_loom, allow(dead_code))]
#[inline]
pub(crate) fn light() {
    // SYNC: Acquire pairs with the Release in `register`.
    if STATE.load(Ordering::Acquire) == 1 {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The cold side: a full fence here and on every running thread of every registered
/// process. False if the kernel refused (then sleep at most [`UNFENCED_SLEEP`]).
#[cfg_attr(nerve_loom, allow(dead_code))]
pub(crate) fn heavy() -> bool {
    fence(Ordering::SeqCst);
    !cfg!(miri) && membarrier(MembarrierCommand::GlobalExpedited).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_process_has_working_heavy_fences() {
        register();
        light();
        match STATE.load(Ordering::Acquire) {
            1 => assert!(heavy(), "registered, so the expedited barrier must work"),
            // refused (an old kernel, a seccomp filter, NERVE_MEMBARRIER=off): full fences
            // on both sides, which is always correct
            2 => {}
            s => panic!("state {s} after register"),
        }
    }
}
