//! Wake-ups between processes through futexes in one small shared-memory file per domain.
//!
//! The doorbell is an array of slots, each a sequence word and a waiter count on its own
//! cache line. A topic maps to a slot by hash (collisions only cause spurious wake-ups,
//! which waiters tolerate). A publisher rings after sending only when someone waits, so an
//! un-watched topic pays one fence and one load per publish and no system call.
//!
//! Lifetime: every process holds a shared `flock` on the file; the last one to close it
//! takes the exclusive lock and unlinks it. A crashed process releases its lock with its
//! death, so a stale file is reused by the next process or removed by `nerve clean`.

use crate::sys::futex::{futex_wait, futex_wake};
use std::ffi::CString;
use std::io;
use std::ops::Deref;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Number of slots in a doorbell.
pub(crate) const SLOTS: usize = 1024;

/// One wake-up slot: a sequence word (the futex), a waiter count and an ack count on a
/// cache line of its own. (Public only as the target of [`SlotRef`]; unreachable outside
/// the crate, and all its methods are crate-private.)
#[repr(C, align(64))]
pub struct Slot {
    seq: AtomicU32,
    waiters: AtomicU32,
    acks: AtomicU32,
}

/// A mapped doorbell file.
pub(crate) struct Doorbell {
    path: CString,
    fd: OwnedFd,
    slots: *const Slot,
}

// SAFETY: the mapping is shared memory accessed only through atomics; the pointer stays
// valid until Drop unmaps it.
unsafe impl Send for Doorbell {}
// SAFETY: the mapping is shared memory accessed only through atomics (Slot holds only
// atomics), so shared references from several threads are sound; the pointer stays valid
// until Drop unmaps it.
unsafe impl Sync for Doorbell {}

const SIZE: usize = SLOTS * std::mem::size_of::<Slot>();

impl Doorbell {
    /// Opens (or creates) the doorbell at `/dev/shm/<name>` with the given file mode.
    pub(crate) fn open(name: &str, mode: u32) -> io::Result<Doorbell> {
        let path = CString::new(format!("/dev/shm/{name}"))
            .map_err(|_| io::Error::other("doorbell name holds a NUL byte"))?;
        loop {
            // SAFETY: path is a valid NUL-terminated string; flags and mode are plain ints.
            let raw = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC | libc::O_NOFOLLOW,
                    mode as libc::c_uint,
                )
            };
            if raw < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: raw is a freshly opened descriptor we own.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            check_owner(&fd)?;
            // First user of the domain (no one else holds a lock)? Then waiter counts left
            // by processes killed while waiting are stale: reset them below.
            // SAFETY: fd is open.
            let alone = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
            if !alone {
                // SAFETY: fd is open.
                if unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_SH) } != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            // The last user may have unlinked the file between our open and our lock:
            // then the path names another inode (or none) and we start over.
            if !same_inode(&fd, &path) {
                continue;
            }
            // SAFETY: fd is open; ftruncate to the fixed size is idempotent for all openers.
            if unsafe { libc::ftruncate(fd.as_raw_fd(), SIZE as libc::off_t) } != 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: mapping SIZE bytes of a file we just sized; MAP_SHARED so other
            // processes see the same memory; the result is checked below.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    SIZE,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if ptr == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let bell = Doorbell {
                path,
                fd,
                slots: ptr as *const Slot,
            };
            if alone {
                for i in 0..SLOTS {
                    // SAFETY: i < SLOTS, inside the mapping.
                    let slot = unsafe { &*bell.slots.add(i) };
                    // SYNC: we hold the exclusive lock, so no other process touches the
                    // slots until we downgrade below.
                    slot.waiters.store(0, Ordering::SeqCst);
                }
                // SAFETY: fd is open; downgrade to the shared lock every user holds.
                if unsafe { libc::flock(bell.fd.as_raw_fd(), libc::LOCK_SH) } != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            return Ok(bell);
        }
    }

    /// The slot of a topic or service.
    pub(crate) fn slot(&self, key: &str) -> &Slot {
        self.slot_at(Self::slot_index(key))
    }

    /// The index of a key's slot (what a client tells a server to ring).
    pub(crate) fn slot_index(key: &str) -> u32 {
        let h = crate::message::layout::hash_str(crate::message::layout::FNV_OFFSET, key);
        (h % SLOTS as u64) as u32
    }

    /// The slot at `index` (taken modulo the slot count: indices may come from other
    /// processes).
    pub(crate) fn slot_at(&self, index: u32) -> &Slot {
        // SAFETY: `slots` points at a live mapping of SLOTS slots until `self` is dropped
        // (Drop unmaps it), the index is reduced below SLOTS, and a Slot holds only
        // atomics, so a shared reference tied to &self is valid.
        unsafe { &*self.slots.add(index as usize % SLOTS) }
    }

    /// A counted reference to the slot of `key` that keeps the mapping alive.
    pub(crate) fn slot_ref(self: &Arc<Self>, key: &str) -> SlotRef {
        self.slot_ref_at(Self::slot_index(key))
    }

    /// A counted reference to the slot at `index` (modulo the slot count).
    pub(crate) fn slot_ref_at(self: &Arc<Self>, index: u32) -> SlotRef {
        SlotRef {
            bell: self.clone(),
            index: index % SLOTS as u32,
        }
    }
}

/// One slot of a doorbell, holding the mapping alive: safe to keep in any entity for as
/// long as it lives, wherever the context that opened the doorbell has gone. (Public only
/// to name it in the sealed [`crate::Waitable`]; nothing outside the crate can reach it.)
#[derive(Clone)]
pub struct SlotRef {
    bell: Arc<Doorbell>,
    index: u32,
}

impl SlotRef {
    /// Whether both refer to the same slot of the same mapping.
    pub(crate) fn same(&self, other: &SlotRef) -> bool {
        std::ptr::eq::<Slot>(&**self, &**other)
    }
}

impl Deref for SlotRef {
    type Target = Slot;
    #[inline]
    fn deref(&self) -> &Slot {
        self.bell.slot_at(self.index)
    }
}

impl Doorbell {
    /// Tries to turn this process's shared lock into an exclusive one: succeeds only if no
    /// other context in the domain is alive. (The conversion is not atomic: on failure
    /// this handle may hold no lock at all, so call it only when about to drop or clean.)
    pub(crate) fn try_exclusive(&self) -> bool {
        // SAFETY: fd is open for the life of self.
        unsafe { libc::flock(self.fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
    }

    /// Removes the file name; processes that still map it keep their mapping.
    pub(crate) fn unlink(&self) {
        // SAFETY: path is a valid NUL-terminated string.
        unsafe { libc::unlink(self.path.as_ptr()) };
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what open() mapped; no references outlive self.
        // Closing the fd (OwnedFd) releases the lock.
        unsafe { libc::munmap(self.slots as *mut libc::c_void, SIZE) };
    }
}

/// A doorbell must be a regular file of this user that nobody else may write: another
/// user's file (pre-created to spy on or stall this one) is refused by name.
fn check_owner(fd: &OwnedFd) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::File::from(fd.try_clone()?).metadata()?;
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    if !meta.is_file() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "belongs to uid {} with mode {:o}, not to this user (uid {uid}) alone",
                meta.uid(),
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

fn same_inode(fd: &OwnedFd, path: &CString) -> bool {
    // SAFETY: zeroed stat structs are valid out-parameters.
    let mut a: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: libc::stat is plain integers: all-zero bytes are a valid value.
    let mut b: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open, path is NUL-terminated, a and b are writable.
    unsafe {
        libc::fstat(fd.as_raw_fd(), &mut a) == 0
            && libc::stat(path.as_ptr(), &mut b) == 0
            && a.st_ino == b.st_ino
            && a.st_dev == b.st_dev
    }
}

impl Slot {
    /// Rings the slot if anyone waits. Call after the sample is visible in its queue.
    #[inline]
    pub(crate) fn ring(&self) {
        // SYNC: SeqCst fence orders our queue write before the waiter-count load; pairs
        // with the fence in `register` so either the waiter sees the sample or we see it.
        fence(Ordering::SeqCst);
        if self.waiters.load(Ordering::Relaxed) > 0 {
            // SYNC: the new sequence value publishes "something changed" to waiters.
            self.seq.fetch_add(1, Ordering::SeqCst);
            futex_wake(&self.seq);
        }
    }

    /// Rings even if nobody waits: tells every subscriber of the topic to look (a new
    /// publisher appeared and needs them to attach).
    pub(crate) fn ring_always(&self) {
        // SYNC: see `ring`.
        self.seq.fetch_add(1, Ordering::SeqCst);
        futex_wake(&self.seq);
    }

    /// Current sequence value (changes on every effective ring).
    pub(crate) fn seq(&self) -> u32 {
        self.seq.load(Ordering::Acquire)
    }

    /// A subscriber confirms it looked after a ring (and so attached to new publishers).
    pub(crate) fn ack(&self) {
        self.acks.fetch_add(1, Ordering::AcqRel);
    }

    /// Number of confirmations so far (wrapping).
    pub(crate) fn acks(&self) -> u32 {
        self.acks.load(Ordering::Acquire)
    }

    /// The futex word waiters sleep on (for [`wait_any`]).
    pub(crate) fn word(&self) -> &AtomicU32 {
        &self.seq
    }

    /// Announces a waiter; returns the sequence value to wait on. Check the queue after this
    /// and before `wait`.
    pub(crate) fn register(&self) -> u32 {
        // SYNC: see `ring`; the fence orders the count increment before the queue check.
        self.waiters.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.seq.load(Ordering::SeqCst)
    }

    /// Withdraws a waiter announced by `register`.
    pub(crate) fn unregister(&self) {
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// Sleeps while the sequence still equals `seen`, at most `timeout`.
    pub(crate) fn wait(&self, seen: u32, timeout: Duration) {
        futex_wait(&self.seq, seen, timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn ring_wakes_a_waiter_and_exclusive_lock_means_last_user() {
        let name = format!("nerve_test_doorbell_{}", std::process::id());
        let bell = Arc::new(Doorbell::open(&name, 0o600).unwrap());
        let b2 = bell.clone();
        let t = std::thread::spawn(move || {
            let slot = b2.slot("/t");
            let seen = slot.register();
            slot.wait(seen, Duration::from_secs(10));
            slot.unregister();
        });
        // ring until the waiter has gone (it may not have registered yet)
        while !t.is_finished() {
            bell.slot("/t").ring();
            std::thread::sleep(Duration::from_millis(1));
        }
        t.join().unwrap();
        let path = format!("/dev/shm/{name}");
        let other = Doorbell::open(&name, 0o600).unwrap();
        assert!(!bell.try_exclusive(), "another handle holds it");
        drop(other);
        let last = Doorbell::open(&name, 0o600).unwrap();
        drop(bell);
        assert!(last.try_exclusive());
        last.unlink();
        drop(last);
        assert!(!std::path::Path::new(&path).exists());
    }

    #[test]
    fn a_doorbell_others_can_write_or_a_link_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let name = format!("nerve_test_doorbell_owner_{}", std::process::id());
        let path = format!("/dev/shm/{name}");
        std::fs::write(&path, b"").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = Doorbell::open(&name, 0o600)
            .err()
            .expect("world-writable refused");
        assert!(e.to_string().contains("mode 666"), "{e}");
        std::fs::remove_file(&path).unwrap();
        let target = format!("/dev/shm/{name}_target");
        std::fs::write(&target, b"").unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(
            Doorbell::open(&name, 0o600).is_err(),
            "a symbolic link is not followed"
        );
        std::fs::remove_file(&path).unwrap();
        std::fs::remove_file(&target).unwrap();
    }
}
