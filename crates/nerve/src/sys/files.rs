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

    /// Waits for the lock.
    pub(crate) fn wait(fd: &'a OwnedFd, byte: u64) -> io::Result<OfdLock<'a>> {
        loop {
            match Self::fcntl(fd, byte, libc::F_WRLCK, libc::F_OFD_SETLKW) {
                Ok(()) => return Ok(OfdLock { fd, byte }),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
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

#[cfg(test)]
mod tests {
    use super::*;

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
