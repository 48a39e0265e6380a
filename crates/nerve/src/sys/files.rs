//! Small private files in `/dev/shm` (the host id, large schemas): created atomically,
//! never read through a symbolic link, and trusted only when they belong to this user
//! alone, so no other user can pre-create or rewrite them.

use std::io::{self, Read, Write};
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
