//! What the checks of `nerve doctor` look with: programs on PATH, commands run with a
//! time limit, mounts, sizes.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The first of `names` found: a name with a `/` is a path, any other is looked for in
/// the directories of PATH (as a shell does: the first executable file of that name).
pub fn find_program(names: &[String]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    names.iter().find_map(|name| {
        if name.contains('/') {
            return Some(PathBuf::from(name)).filter(|p| executable(p));
        }
        std::env::split_paths(&path)
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(|dir| dir.join(name))
            .find(|p| executable(p))
    })
}

/// Whether `p` is a file someone may execute.
fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// How a command run by [`run_bounded`] ended.
pub enum Ran {
    /// It exited: whether with status 0, and its output (stdout then stderr).
    Exited {
        /// Exit status 0.
        success: bool,
        /// Its stdout and stderr, in that order.
        output: String,
    },
    /// It ran past its time and was killed.
    TimedOut,
    /// It could not be started.
    NotStarted(std::io::Error),
}

impl Ran {
    /// The first non-empty line of its output, if it exited successfully.
    pub fn first_line(&self) -> Option<&str> {
        match self {
            Ran::Exited {
                success: true,
                output,
            } => output.lines().map(str::trim).find(|l| !l.is_empty()),
            _ => None,
        }
    }

    /// The last non-empty line of its output (the error a failed command ends with).
    pub fn last_line(&self) -> Option<&str> {
        match self {
            Ran::Exited { output, .. } => output.lines().map(str::trim).rfind(|l| !l.is_empty()),
            _ => None,
        }
    }
}

/// Runs `program args` with stdin from /dev/null, its output captured, for at most
/// `limit`: killed past it. Output is read by threads of its own, so a command that
/// writes much does not stall, and one whose children keep its pipes open is not waited
/// for beyond the limit.
pub fn run_bounded(program: &Path, args: &[&str], limit: Duration) -> Ran {
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Ran::NotStarted(e),
    };
    let deadline = Instant::now() + limit;
    let (tx, rx) = std::sync::mpsc::channel();
    let readers = [
        child
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|e| Box::new(e) as Box<dyn Read + Send>),
    ];
    for (i, pipe) in readers.into_iter().enumerate() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut p) = pipe {
                // bounded: a version line or an error, never a flood kept whole
                let _ = p.by_ref().take(64 * 1024).read_to_end(&mut text);
                let _ = std::io::copy(&mut p, &mut std::io::sink());
            }
            let _ = tx.send((i, String::from_utf8_lossy(&text).into_owned()));
        });
    }
    drop(tx);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                // our own child, by its handle
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let Some(status) = status else {
        return Ran::TimedOut;
    };
    // children it left holding its pipes are not waited for long
    let read_by = deadline.min(Instant::now() + Duration::from_secs(1));
    let mut parts = [String::new(), String::new()];
    while let Ok((i, text)) = rx.recv_timeout(read_by.saturating_duration_since(Instant::now())) {
        parts[i] = text;
    }
    Ran::Exited {
        success: status.success(),
        output: parts.join("\n"),
    }
}

/// The file system type of the mount holding `path` (`/proc/self/mounts`: the longest
/// mount point that is `path` or a folder above it).
pub fn fs_type(path: &str) -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, point, kind) = (f.next()?, f.next()?, f.next()?);
            // mount points escape spaces as \040
            let point = point.replace("\\040", " ");
            let under = point == path
                || point == "/"
                || path
                    .strip_prefix(point.as_str())
                    .is_some_and(|r| r.starts_with('/'));
            under.then(|| (point.len(), kind.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, kind)| kind)
}

/// Whether a file system of type `kind` is mounted anywhere.
pub fn mounted(kind: &str) -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .is_ok_and(|m| m.lines().any(|l| l.split_whitespace().nth(2) == Some(kind)))
}

/// Bytes as people read them: `512 MiB`, `7.8 GiB`.
pub fn bytes(n: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    if n >= 1 << 30 {
        format!("{:.1} GiB", n as f64 / GIB)
    } else {
        format!("{} MiB", n >> 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_end_within_their_limit() {
        let sh = find_program(&["sh".into()]).expect("sh on PATH");
        let ran = run_bounded(
            &sh,
            &["-c", "echo one; echo two >&2"],
            Duration::from_secs(5),
        );
        assert_eq!(ran.first_line(), Some("one"));
        assert_eq!(ran.last_line(), Some("two"));
        let start = Instant::now();
        let ran = run_bounded(&sh, &["-c", "sleep 30"], Duration::from_millis(200));
        assert!(matches!(ran, Ran::TimedOut));
        // killed at its limit, not waited for: a behaviour, not a speed (the sleep is 30 s)
        assert!(start.elapsed() < Duration::from_secs(25));
        // stdin is /dev/null: a command reading it ends at once
        let ran = run_bounded(&sh, &["-c", "cat; echo done"], Duration::from_secs(5));
        assert_eq!(ran.first_line(), Some("done"));
    }

    #[test]
    fn programs_are_found_on_path_or_by_path() {
        assert!(find_program(&["no-such-program-here".into(), "sh".into()]).is_some());
        assert!(find_program(&["/no/such/program".into()]).is_none());
        assert_eq!(bytes(3 << 29), "1.5 GiB");
        assert_eq!(bytes(5 << 20), "5 MiB");
    }
}
