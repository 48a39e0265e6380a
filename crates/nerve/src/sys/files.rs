//! Private files in `/dev/shm`: small ones (the host id, large schemas) created
//! atomically, and shared mappings (the doorbell, tensor pools) with their
//! open-file-description byte locks. Nothing is read through a symbolic link, and a file
//! is trusted only when it belongs to this user alone, so no other user can pre-create
//! or rewrite it.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

fn no_follow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// Reads at most `max` bytes of `path`: `None` if it does not exist; an error naming the
/// file if it is a link, not a regular file, not this user's, or writable by others.
pub(crate) fn read_private(path: &str, max: usize) -> io::Result<Option<Vec<u8>>> {
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(no_follow())
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io::Error::other(format!("{path}: {e}"))),
    };
    let meta = f.metadata()?;
    let uid = rustix::process::getuid().as_raw();
    if meta.uid() != uid || meta.mode() & 0o022 != 0 || !meta.is_file() {
        return Err(io::Error::other(format!(
            "{path} belongs to uid {} with mode {:o}: refusing a file another user can set",
            meta.uid(),
            meta.mode() & 0o7777
        )));
    }
    let mut bytes = Vec::new();
    f.take(max as u64).read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// Creates `path` holding `bytes` (mode 0600) unless it exists: written to a temporary
/// name first and linked into place, so readers never see a partial file and the first
/// writer wins a race.
pub(crate) fn create_private(path: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = format!("{path}.{}.tmp", std::process::id());
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(no_follow())
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes));
    // link fails if the file exists already (another process won the race): fine
    let linked = written.and_then(|()| match std::fs::hard_link(&tmp, path) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    });
    let _ = std::fs::remove_file(&tmp);
    linked.map_err(|e| io::Error::other(format!("{path}: {e}")))
}

/// A shared file must be a regular file of this user that nobody else may write: another
/// user's file (pre-created to spy on or stall this one) is refused by name.
pub(crate) fn check_owner(fd: &OwnedFd) -> io::Result<()> {
    let st = rustix::fs::fstat(fd)?;
    let uid = rustix::process::getuid().as_raw();
    let is_file = st.st_mode & libc::S_IFMT == libc::S_IFREG;
    if !is_file || st.st_uid != uid || st.st_mode & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "belongs to uid {} with mode {:o}, not to this user (uid {uid}) alone",
                st.st_uid,
                st.st_mode & 0o7777
            ),
        ));
    }
    Ok(())
}

/// Whether `path` still names the file open as `fd` (it may have been unlinked, or
/// replaced, since it was opened).
pub(crate) fn same_inode(fd: &OwnedFd, path: &str) -> bool {
    match (rustix::fs::fstat(fd), rustix::fs::stat(path)) {
        (Ok(a), Ok(b)) => a.st_ino == b.st_ino && a.st_dev == b.st_dev,
        _ => false,
    }
}

/// A read-write shared mapping of the start of a file, unmapped on drop. It hands out
/// only a raw pointer: whoever reads through it states why the bytes are there (the file
/// was at least `len` bytes long when mapped) and how they are shared (atomics).
pub(crate) struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is process-wide memory, valid on every thread until Drop unmaps it;
// Mapping itself only hands out the raw pointer (every access through it is unsafe and
// justified where it happens).
unsafe impl Send for Mapping {}
// SAFETY: as for Send: `&Mapping` gives nothing but the pointer and the length.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the first `len` bytes of `fd` (read and write, shared with every other process
    /// that maps the file). The caller makes sure the file is at least that long: pages
    /// beyond its end raise SIGBUS when touched.
    pub(crate) fn shared(fd: &OwnedFd, len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping at an address the kernel chooses (null hint), so no
        // existing memory is replaced; the result is checked by `?`.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED,
                fd,
                0,
            )?
        };
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    /// The first byte (page-aligned).
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The mapped length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `shared` mapped; its owners tie every reference
        // into it to their own lifetime, so none outlives this.
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), self.len) };
    }
}

/// A write lock on one byte of a file, held by the open file description (not the
/// process): released by [`Drop`], by closing the file, or by the holder's death. Two
/// descriptors opened separately (two handles, even in one process) exclude each other;
/// one description never conflicts with itself.
pub(crate) struct OfdLock<'a> {
    fd: &'a OwnedFd,
    byte: u64,
}

impl<'a> OfdLock<'a> {
    fn fcntl(fd: &OwnedFd, byte: u64, ty: libc::c_int, cmd: libc::c_int) -> io::Result<()> {
        // SAFETY: an all-zero flock is a valid value (integers only).
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = ty as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = byte as libc::off_t;
        fl.l_len = 1;
        // SAFETY: fd is open; fl is a valid, initialized flock that the call only reads
        // (l_pid must be 0 for OFD locks: it is).
        if unsafe { libc::fcntl(fd.as_raw_fd(), cmd, &fl as *const libc::flock) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Takes the lock, waiting at most `timeout` for another file description to release
    /// it. Past that, an error of kind `TimedOut` naming `what`, the file, the byte and the
    /// processes holding it (with their state: a stopped holder shows as `T`), so a
    /// process stopped inside the lock cannot stall its domain.
    ///
    /// The kernel's blocking wait (`F_OFD_SETLKW`) has no deadline, so this tries
    /// (`F_OFD_SETLK`) and sleeps between tries, 20 µs at first and doubling up to 2 ms:
    /// an uncontended lock costs one system call, as before.
    pub(crate) fn wait_at_most(
        fd: &'a OwnedFd,
        byte: u64,
        timeout: std::time::Duration,
        what: &str,
    ) -> io::Result<OfdLock<'a>> {
        let deadline = std::time::Instant::now() + timeout;
        let mut pause = std::time::Duration::from_micros(20);
        loop {
            if let Some(lock) = Self::try_take(fd, byte)? {
                return Ok(lock);
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{what} (byte {byte} of {}) was not released within {timeout:?}: {}",
                        fd_path(fd),
                        describe_holders(&lock_holders(fd, byte))
                    ),
                ));
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(std::time::Duration::from_millis(2));
        }
    }

    /// Takes the lock if no other file description holds it.
    pub(crate) fn try_take(fd: &'a OwnedFd, byte: u64) -> io::Result<Option<OfdLock<'a>>> {
        match Self::fcntl(fd, byte, libc::F_WRLCK, libc::F_OFD_SETLK) {
            Ok(()) => Ok(Some(OfdLock { fd, byte })),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Releases the lock on `byte` held by `fd`'s description (one kept by forgetting
    /// its guard).
    pub(crate) fn release(fd: &OwnedFd, byte: u64) -> io::Result<()> {
        Self::fcntl(fd, byte, libc::F_UNLCK, libc::F_OFD_SETLK)
    }
}

impl Drop for OfdLock<'_> {
    fn drop(&mut self) {
        let _ = Self::release(self.fd, self.byte);
    }
}

/// The path `fd` was opened at, for messages.
fn fd_path(fd: &OwnedFd) -> String {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).map_or_else(
        |_| format!("fd {}", fd.as_raw_fd()),
        |p| p.display().to_string(),
    )
}

/// A process holding a byte lock: its pid and its state letter from `/proc/<pid>/stat`
/// (`T`: stopped, `D`: in uninterruptible sleep).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LockHolder {
    /// The process id.
    pub(crate) pid: u32,
    /// Its state letter (`?` where it could not be read).
    pub(crate) state: char,
}

/// The processes holding an open-file-description lock over `byte` of `fd`'s file.
///
/// `F_OFD_GETLK` and `/proc/locks` report pid -1 for such locks, so the holders are found
/// the way `lslocks` finds them: each process's `/proc/<pid>/fdinfo/*` lists the locks
/// held through that descriptor, with the file's device and inode and the byte range.
/// Processes of other users are not readable and not listed.
pub(crate) fn lock_holders(fd: &OwnedFd, byte: u64) -> Vec<LockHolder> {
    let Ok(stat) = rustix::fs::fstat(fd) else {
        return Vec::new();
    };
    let dev = stat.st_dev;
    let id = format!(
        "{:02x}:{:02x}:{}",
        rustix::fs::major(dev),
        rustix::fs::minor(dev),
        stat.st_ino
    );
    let me = std::process::id();
    let mut holders = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return holders;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fdinfo")) else {
            continue;
        };
        let holds = fds.flatten().any(|f| {
            // this process's own descriptor is the one waiting
            if pid == me && f.file_name().to_str() == Some(&fd.as_raw_fd().to_string()) {
                return false;
            }
            std::fs::read_to_string(f.path()).is_ok_and(|info| {
                info.lines()
                    .filter(|l| l.starts_with("lock:"))
                    .any(|l| covers(l, &id, byte))
            })
        });
        if holds {
            let state = std::fs::read_to_string(p.path().join("stat"))
                .ok()
                .and_then(|s| s.rsplit_once(") ").and_then(|(_, r)| r.chars().next()))
                .unwrap_or('?');
            holders.push(LockHolder { pid, state });
        }
    }
    holders
}

/// Whether an fdinfo `lock:` line (`lock:\t1: OFDLCK ADVISORY WRITE -1 00:1b:123 5 5`)
/// is a lock of file `id` over `byte`.
fn covers(line: &str, id: &str, byte: u64) -> bool {
    let mut words = line.split_whitespace().skip_while(|w| *w != id).skip(1);
    let (Some(start), Some(end)) = (words.next(), words.next()) else {
        return false;
    };
    let start = start.parse::<u64>().unwrap_or(u64::MAX);
    let end = if end == "EOF" {
        u64::MAX
    } else {
        end.parse::<u64>().unwrap_or(0)
    };
    start <= byte && byte <= end
}

/// "held by pid 42 (stopped)" and the like, for messages.
fn describe_holders(holders: &[LockHolder]) -> String {
    if holders.is_empty() {
        return "its holder could not be found (a process of another user, or it has just \
                released it)"
            .into();
    }
    let each: Vec<String> = holders
        .iter()
        .map(|h| {
            let state = match h.state {
                'T' | 't' => "stopped",
                'D' => "in uninterruptible sleep",
                'Z' => "a zombie",
                'R' => "running",
                'S' => "sleeping",
                _ => "state unknown",
            };
            format!("pid {} ({state})", h.pid)
        })
        .collect();
    format!("held by {}", each.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdinfo_lock_lines_are_matched_by_file_and_byte() {
        let line = "lock:\t1: OFDLCK ADVISORY  WRITE -1 00:1b:123 5 5";
        assert!(covers(line, "00:1b:123", 5));
        assert!(!covers(line, "00:1b:123", 6));
        assert!(!covers(line, "00:1b:12", 5));
        assert!(covers(
            "lock:\t2: OFDLCK ADVISORY READ -1 00:1b:9 0 EOF",
            "00:1b:9",
            1 << 40
        ));
        assert!(!covers("lock:\tgarbage", "00:1b:9", 0));
    }

    #[test]
    fn a_held_lock_times_out_naming_this_process_as_holder() {
        let path = format!("/dev/shm/nerve_test_lock_{}", std::process::id());
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&path)
                .map(OwnedFd::from)
                .unwrap()
        };
        let (a, b) = (open(), open());
        let held = OfdLock::wait_at_most(&a, 7, std::time::Duration::ZERO, "test lock").unwrap();
        let e = OfdLock::wait_at_most(&b, 7, std::time::Duration::from_millis(30), "test lock")
            .err()
            .expect("held through the other description");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        let text = e.to_string();
        // (the state is the main thread's: waiting for the test threads)
        let me = format!("held by pid {} (", std::process::id());
        assert!(
            text.starts_with("test lock (byte 7 of /dev/shm/nerve_test_lock_"),
            "{text}"
        );
        assert!(text.contains(&me), "{text}");
        // another byte is free, and so is this one once released
        drop(OfdLock::wait_at_most(&b, 8, std::time::Duration::ZERO, "other").unwrap());
        drop(held);
        drop(OfdLock::wait_at_most(&b, 7, std::time::Duration::ZERO, "test lock").unwrap());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn private_files_are_created_once_and_read_up_to_a_limit() {
        // (links and files others may write are refused: see the host id test in net)
        let path = format!("/dev/shm/nerve_test_private_{}", std::process::id());
        assert!(read_private(&path, 64).unwrap().is_none());
        create_private(&path, b"first").unwrap();
        create_private(&path, b"second").unwrap();
        assert_eq!(read_private(&path, 64).unwrap().unwrap(), b"first");
        assert_eq!(
            read_private(&path, 3).unwrap().unwrap(),
            b"fir",
            "at most max bytes"
        );
        std::fs::remove_file(&path).unwrap();
    }
}
