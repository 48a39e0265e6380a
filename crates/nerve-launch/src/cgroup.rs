//! cgroup v2 directories: finding this process's own, making a launch's below it, moving
//! children in, signalling, killing and removing them. Everything here reads or writes
//! the cgroup files; nothing panics on what it reads.

use crate::sys;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// This process's cgroup v2 directory: the cgroup2 mount whose root holds the path of
/// `0::PATH` in `/proc/self/cgroup`.
pub(crate) fn own_dir() -> Result<PathBuf, String> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("/proc/self/cgroup: {e}"))?;
    let own = own_path(&cgroup).ok_or("no cgroup v2 entry in /proc/self/cgroup")?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    let mut found = false;
    for (root, point) in cgroup2_mounts(&mounts) {
        found = true;
        let rel = if root == "/" {
            own.as_str()
        } else {
            match own.strip_prefix(root.as_str()) {
                Some(r) if r.is_empty() || r.starts_with('/') => r,
                _ => continue,
            }
        };
        let rel = rel.trim_start_matches('/');
        let dir = if rel.is_empty() {
            PathBuf::from(&point)
        } else {
            PathBuf::from(&point).join(rel)
        };
        if dir.join("cgroup.procs").is_file() {
            return Ok(dir);
        }
    }
    Err(if found {
        format!("this process's cgroup {own} is under no cgroup2 mount")
    } else {
        "no cgroup2 file system mounted".to_string()
    })
}

/// The path of the `0::PATH` line (cgroup v2) of a `/proc/PID/cgroup` text.
fn own_path(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim_end_matches(" (deleted)").to_string())
}

/// `(root, mount point)` of every cgroup2 mount in a `/proc/PID/mountinfo` text.
fn cgroup2_mounts(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        if right.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        let f: Vec<&str> = left.split_whitespace().collect();
        if let (Some(root), Some(point)) = (f.get(3), f.get(4)) {
            out.push((unescape(root), unescape(point)));
        }
    }
    out
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if let Some(&[b'\\', x, y, z]) = b.get(i..i + 4) {
            if [x, y, z].iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = u32::from(x - b'0') * 64 + u32::from(y - b'0') * 8 + u32::from(z - b'0');
                out.push(v as u8);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Makes cgroup `parent/name`, refusing one that exists.
pub(crate) fn create(parent: &Path, name: &str) -> io::Result<PathBuf> {
    let dir = parent.join(name);
    std::fs::create_dir(&dir)?;
    Ok(dir)
}

/// Opens `dir/cgroup.procs` for writing (close-on-exec), for [`sys::join_cgroup`].
pub(crate) fn open_procs(dir: &Path) -> io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.procs"))
}

/// Whether processes can be moved from this process's cgroup `own` into `launch`: both
/// `cgroup.procs` open for writing, and `launch` is a domain cgroup (a threaded one takes
/// threads, not processes).
pub(crate) fn check_movable(own: &Path, launch: &Path) -> Result<(), String> {
    for d in [own, launch] {
        open_procs(d).map_err(|e| format!("{}/cgroup.procs: {e}", d.display()))?;
    }
    match std::fs::read_to_string(launch.join("cgroup.type")) {
        Ok(t) if t.trim() != "domain" => {
            Err(format!("{} is a {} cgroup", launch.display(), t.trim()))
        }
        _ => Ok(()),
    }
}

/// Every process in `dir` and the cgroups below it.
pub(crate) fn procs(dir: &Path) -> Vec<i32> {
    let mut out = Vec::new();
    collect_procs(dir, &mut out, 0);
    out
}

/// Deepest nesting [`procs`] and [`remove`] follow (a nested launch adds two levels).
const MAX_DEPTH: usize = 32;

fn collect_procs(dir: &Path, out: &mut Vec<i32>, depth: usize) {
    if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
    }
    if depth < MAX_DEPTH {
        for sub in subdirs(dir) {
            collect_procs(&sub, out, depth + 1);
        }
    }
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

/// Whether `dir` or a cgroup below it has a live process (zombies do not count). A
/// cgroup that is gone is empty.
pub(crate) fn populated(dir: &Path) -> bool {
    match std::fs::read_to_string(dir.join("cgroup.events")) {
        Ok(text) => text.lines().any(|l| l.trim() == "populated 1"),
        Err(_) => !procs(dir).is_empty(),
    }
}

/// Sends `sig` to every process in `dir` and below; SIGKILL goes through `cgroup.kill`
/// where the kernel has it (5.14), which also catches processes forked meanwhile.
pub(crate) fn signal(dir: &Path, sig: i32) {
    if sig == libc::SIGKILL && kill(dir) {
        return;
    }
    for p in procs(dir) {
        sys::kill_pid(p, sig);
    }
}

/// Writes `1` to `dir/cgroup.kill`: whether the kernel took it.
fn kill(dir: &Path) -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.kill"))
        .and_then(|mut f| f.write_all(b"1"))
        .is_ok()
}

/// Removes `dir` and the cgroups below it (each must be empty). A cgroup that is already
/// gone is not an error.
pub(crate) fn remove(dir: &Path) -> io::Result<()> {
    remove_at(dir, 0)
}

fn remove_at(dir: &Path, depth: usize) -> io::Result<()> {
    if depth < MAX_DEPTH {
        for sub in subdirs(dir) {
            remove_at(&sub, depth + 1)?;
        }
    }
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_path_and_mounts_parse() {
        let cg = "12:pids:/x\n0::/user.slice/a b.scope\n";
        assert_eq!(own_path(cg).as_deref(), Some("/user.slice/a b.scope"));
        assert_eq!(own_path("1:cpu:/\n"), None);
        assert_eq!(own_path("0::/gone (deleted)\n").as_deref(), Some("/gone"));
        let mi = "\
24 1 0:22 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw\n\
35 24 0:30 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n\
36 24 0:31 /docker/x /mnt/my\\040cg rw - cgroup2 cgroup2 rw\n\
37 24 0:32 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
broken line\n";
        assert_eq!(
            cgroup2_mounts(mi),
            vec![
                ("/".to_string(), "/sys/fs/cgroup/unified".to_string()),
                ("/docker/x".to_string(), "/mnt/my cg".to_string()),
            ]
        );
        assert_eq!(unescape("a\\040b\\"), "a b\\");
        assert_eq!(unescape("\\04"), "\\04");
    }
}
