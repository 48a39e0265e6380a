//! The machine a report was measured on, and pinning to cores.

use serde::Serialize;

/// Description of the measuring machine.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPU model name.
    pub cpu: String,
    /// Logical CPUs online.
    pub cores: usize,
    /// Kernel release.
    pub kernel: String,
    /// Total memory in GiB.
    pub memory_gib: f64,
    /// Host name.
    pub hostname: String,
    /// Whether client and server were pinned to separate cores.
    pub pinned: bool,
}

impl Machine {
    /// Reads the machine's description from /proc and uname.
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0);
        let cores = online_cpus();
        Machine {
            cpu,
            cores,
            kernel: read_trim("/proc/sys/kernel/osrelease"),
            memory_gib: (mem_kib / (1024.0 * 1024.0) * 10.0).round() / 10.0,
            hostname: read_trim("/proc/sys/kernel/hostname"),
            pinned: cores >= 2,
        }
    }
}

/// Logical CPUs online (not the calling thread's affinity, which a suite may have
/// narrowed by pinning).
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Pins the calling thread (and the threads and processes it later starts, which inherit
/// the mask) to one CPU. Returns false if the kernel refused.
pub fn pin_to_cpu(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Restores the calling thread's CPU affinity, as it was when the guard was made, on drop
/// (suites pin the thread they run on; what runs after them must not stay pinned).
pub struct AffinityGuard {
    set: libc::cpu_set_t,
    ok: bool,
}

impl AffinityGuard {
    /// Remembers the calling thread's affinity.
    pub fn capture() -> AffinityGuard {
        // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity writes at most its size.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            let ok =
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0;
            AffinityGuard { set, ok }
        }
    }
}

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        if self.ok {
            // SAFETY: restoring a mask the kernel gave us for this thread.
            unsafe {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.set)
            };
        }
    }
}

/// CPU time (user + system) a process used so far, in seconds, from /proc/PID/stat.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // fields after the command name (which may hold spaces) start after the last ')'
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((utime + stime) / hz)
}

/// CPU time (user + system) of every thread of a process so far, in ns, from
/// `/proc/PID/task/*/schedstat` (nanosecond resolution); falls back to `/proc/PID/stat`
/// (clock ticks) where schedstat is missing.
pub fn cpu_ns(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0u64;
    let mut any = false;
    for t in tasks.flatten() {
        let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) else {
            continue;
        };
        if let Some(ns) = s
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
        {
            total += ns;
            any = true;
        }
    }
    if any {
        Some(total)
    } else {
        cpu_seconds(pid).map(|s| (s * 1e9) as u64)
    }
}

/// Resident and proportional set size of a process, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Memory {
    /// Resident set size (shared pages counted whole).
    pub rss_bytes: u64,
    /// Proportional set size (shared pages split among their users).
    pub pss_bytes: u64,
}

/// RSS and PSS of a process from `/proc/PID/smaps_rollup`.
pub fn memory(pid: u32) -> Option<Memory> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map(|kib| kib * 1024)
    };
    Some(Memory {
        rss_bytes: field("Rss:")?,
        pss_bytes: field("Pss:")?,
    })
}

/// Shared memory held by the files in `/dev/shm` whose names start with `prefix`, in
/// bytes: the pages they really have (a pool sized for the worst case touches only the
/// samples in use), not their nominal sizes.
pub fn shm_bytes(prefix: &str) -> u64 {
    shm_files(prefix).map(|(_, held)| held).sum()
}

/// (name, bytes held) of every file in `/dev/shm` whose name starts with `prefix`.
pub fn shm_files(prefix: &str) -> impl Iterator<Item = (String, u64)> + '_ {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(move |e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let held = e.metadata().ok()?.blocks() * 512;
            name.starts_with(prefix).then_some((name, held))
        })
}

/// Removes every file in `/dev/shm` whose name starts with `prefix`.
pub fn remove_shm_files(prefix: &str) {
    for (name, _) in shm_files(prefix) {
        let _ = std::fs::remove_file(format!("/dev/shm/{name}"));
    }
}

/// Monotonic clock in ns (the clock every stamp of the benchmarks uses).
pub fn mono_ns() -> u64 {
    nerve::mono_ns()
}

/// Sleeps until the monotonic clock reads `deadline_ns` (absolute, so pacing does not
/// drift).
pub fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: ts is a valid absolute CLOCK_MONOTONIC time; the remainder pointer may be
    // null with TIMER_ABSTIME. EINTR just ends the sleep early (callers loop on time).
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// Sets the calling thread's timer slack (`prctl(PR_SET_TIMERSLACK)`): how late the kernel
/// may fire its timers to batch wake-ups (50 µs by default). 0 restores the default.
pub fn set_timer_slack_ns(ns: u64) -> std::io::Result<()> {
    let ns = libc::c_ulong::try_from(ns)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no memory of ours.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Time the host kept this machine's vCPUs from running although they had work (the
/// `steal` column of /proc/stat, all CPUs), in ms since boot.
pub fn steal_ms() -> Option<f64> {
    steal_ms_of(None)
}

/// Host steal time of one CPU (`cpuN` in `/proc/stat`; all CPUs for `None`), ms since
/// boot. The kernel prints it in clock ticks (10 ms with USER_HZ = 100), so a short
/// interval sees it only when the count crosses a tick.
pub fn steal_ms_of(cpu: Option<usize>) -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let head = cpu.map_or_else(|| "cpu ".to_string(), |c| format!("cpu{c} "));
    let line = stat.lines().find(|l| l.starts_with(&head))?;
    let steal: f64 = line.split_whitespace().nth(8)?.parse().ok()?;
    // SAFETY: sysconf takes a constant and has no side effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (hz > 0.0).then(|| steal * 1000.0 / hz)
}

/// Cargo's target directory: `CARGO_TARGET_DIR`, else `target` in the checkout.
pub fn target_dir(workspace: &std::path::Path) -> std::path::PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) if !d.is_empty() => {
            let d = std::path::PathBuf::from(d);
            if d.is_absolute() {
                d
            } else {
                std::env::current_dir().map_or(d.clone(), |c| c.join(d))
            }
        }
        _ => workspace.join("target"),
    }
}
