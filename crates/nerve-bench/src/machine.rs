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
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
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

/// Pins the calling thread to all online CPUs again.
pub fn unpin(cores: usize) {
    // SAFETY: as in pin_to_cpu.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in 0..cores {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
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
