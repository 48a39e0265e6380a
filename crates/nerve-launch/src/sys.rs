//! The process calls the supervisor and the guardian make (process groups, signals,
//! reaping, the parent-death signal).

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
