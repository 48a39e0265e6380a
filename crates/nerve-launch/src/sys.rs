//! The process calls the supervisor and the guardian make (process groups, signals,
//! reaping, the parent-death signal) and what they read of `/proc`.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Makes the child of `cmd` lead its own process group and die (SIGKILL) with the thread
/// that spawns it; it refuses to start if the spawning process is already gone.
pub(crate) fn own_group_and_parent_death(cmd: &mut Command) {
    // SAFETY: getpid is async-signal-safe; the value is read before the fork.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the forked child before exec. It only makes
    // async-signal-safe system calls (setpgid, prctl, getppid), allocates nothing
    // (`io::Error::last_os_error` is a plain errno value) and touches no lock.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // PR_SET_PDEATHSIG fires when the *thread* that forked exits: the supervisor
            // thread spawns every child and outlives them all.
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // the parent died before prctl took effect: never run as an orphan
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Makes the child lead its own process group (the guardian: no parent-death signal).
pub(crate) fn own_group(cmd: &mut Command) {
    // SAFETY: runs in the forked child before exec; setpgid is async-signal-safe and the
    // closure allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Sends `sig` to every process of group `pgid`. Whether the group still exists.
pub(crate) fn kill_group(pgid: i32, sig: i32) -> bool {
    if pgid <= 1 {
        return false; // never signal init's group or "every process"
    }
    // SAFETY: kill takes plain integers and touches no memory of ours.
    unsafe { libc::kill(-pgid, sig) == 0 }
}

/// Sends `sig` to process `pid`. Whether it still exists. Never init, every process or
/// this process.
pub(crate) fn kill_pid(pid: i32, sig: i32) -> bool {
    if pid <= 1 || pid == std::process::id() as i32 {
        return false;
    }
    // SAFETY: kill takes plain integers and touches no memory of ours.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// Reaps child `pid` if it has exited, without blocking: its wait status.
pub(crate) fn reap_pid(pid: i32) -> Option<i32> {
    if pid <= 1 {
        return None;
    }
    let mut status = 0;
    // SAFETY: `status` is a valid, writable int for the duration of the call.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    (r == pid).then_some(status)
}

/// What the supervisor and the guardian read of `/proc/PID/stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// The parent.
    pub(crate) ppid: i32,
    /// Start time after boot, in clock ticks: with the pid, it names one process (a pid
    /// may be reused, the pair is not).
    pub(crate) start: u64,
    /// Exited, not reaped yet.
    pub(crate) zombie: bool,
}

/// `/proc/PID/stat` of `pid` (`None`: no such process, or unreadable).
pub(crate) fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Parses a `/proc/PID/stat` line: the fields after the command name (which may hold
/// spaces and parentheses, so the *last* `)` ends it).
fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] state (field 3), f[1] ppid (4), f[19] starttime (22)
    Some(ProcStat {
        ppid: f.get(1)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
        zombie: matches!(*f.first()?, "Z" | "X"),
    })
}

/// Whether process `pid` is the one that started at `start` and has not exited.
pub(crate) fn pid_live(pid: i32, start: u64) -> bool {
    proc_stat(pid).is_some_and(|s| s.start == start && !s.zombie)
}

/// Every pid in `/proc`.
pub(crate) fn all_pids() -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect()
}

/// The value of variable `key` in the environment `pid` was started with (`None`: not
/// set, or not readable: another user's process, or one that has exited).
pub(crate) fn environ_var(pid: i32, key: &str) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|&b| b == 0).find_map(|kv| {
        let v = kv.strip_prefix(key.as_bytes())?.strip_prefix(b"=")?;
        std::str::from_utf8(v).ok().map(str::to_string)
    })
}

/// Whether group `pgid` has any process (zombies included until reaped).
pub(crate) fn group_alive(pgid: i32) -> bool {
    kill_group(pgid, 0)
}

/// Reaps one exited child of group `pgid` without blocking: `Some((pid, wait status))`.
pub(crate) fn reap_group(pgid: i32) -> Option<(i32, i32)> {
    if pgid <= 1 {
        return None;
    }
    let mut status = 0;
    // SAFETY: `status` is a valid, writable int for the duration of the call.
    let pid = unsafe { libc::waitpid(-pgid, &mut status, libc::WNOHANG) };
    (pid > 0).then_some((pid, status))
}

/// Makes this process the reaper of its orphaned descendants (grandchildren whose parent
/// died are re-parented here, so their group can still be reaped and waited for).
pub(crate) fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes the child of `cmd` move itself, before it runs anything, into the cgroup whose
/// open `cgroup.procs` is `procs_fd` (writing `0` moves the writer). The descriptor must
/// stay open until the spawn returns.
pub(crate) fn join_cgroup(cmd: &mut Command, procs_fd: i32) {
    // SAFETY: the closure runs in the forked child before exec. It only makes the
    // async-signal-safe write system call, on a descriptor the parent keeps open across
    // the spawn, from a static buffer; it allocates nothing and touches no lock.
    unsafe {
        cmd.pre_exec(move || {
            const ME: &[u8] = b"0";
            if libc::write(procs_fd, ME.as_ptr().cast(), ME.len()) != ME.len() as isize {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Sets `sig` to be ignored in this process.
pub(crate) fn ignore_signal(sig: i32) {
    // SAFETY: SIG_IGN installs no handler code.
    unsafe {
        libc::signal(sig, libc::SIG_IGN);
    }
}

/// A wait status in words: `exit code 1`, `killed by SIGKILL`.
pub(crate) fn describe_status(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exit code {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("killed by {}", signal_name(libc::WTERMSIG(status)))
    } else {
        format!("wait status {status}")
    }
}

/// Name of a signal number.
pub(crate) fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGABRT => "SIGABRT".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGPIPE => "SIGPIPE".into(),
        libc::SIGBUS => "SIGBUS".into(),
        other => format!("signal {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_with_odd_command_names() {
        let line = "42 (a) b (c)) S 7 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 0 0";
        assert_eq!(
            parse_stat(line),
            Some(ProcStat {
                ppid: 7,
                start: 98765,
                zombie: false
            })
        );
        let z = "9 (sh) Z 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0";
        assert!(parse_stat(z).unwrap().zombie);
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S"), None);
    }

    #[test]
    fn this_process_is_live_and_has_no_marker() {
        let me = std::process::id() as i32;
        let s = proc_stat(me).expect("own stat");
        assert!(pid_live(me, s.start));
        assert!(!pid_live(me, s.start + 1));
        assert!(all_pids().contains(&me));
        assert_eq!(environ_var(me, "NERVE_TEST_SURELY_UNSET_VAR"), None);
    }
}
