//! Real-time settings of the calling thread: `SCHED_FIFO` priority, CPU affinity and
//! locked memory. Each is applied only when asked, then read back from the kernel; a
//! refusal (no `CAP_SYS_NICE`, `RLIMIT_RTPRIO` or `RLIMIT_MEMLOCK` too low) is reported
//! with its reason and the thread goes on with what it has. (The scheduling policy calls
//! go through libc: rustix does not wrap `sched_setscheduler`.)

use rustix::thread::CpuSet;
use serde::{Deserialize, Serialize};

/// What to ask of the kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtConfig {
    /// `SCHED_FIFO` at this priority (1–99).
    pub fifo_priority: Option<i32>,
    /// Run only on these CPUs.
    pub cpus: Option<Vec<usize>>,
    /// `mlockall(MCL_CURRENT | MCL_FUTURE)`: no page faults once running.
    pub lock_memory: bool,
}

/// What became of one setting.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RtOutcome {
    /// Not asked for.
    NotRequested,
    /// Applied; the kernel's own report of it.
    Applied(String),
    /// Refused or not confirmed by the kernel; why.
    Refused(String),
}

impl RtOutcome {
    /// Whether the setting is in force.
    pub fn applied(&self) -> bool {
        matches!(self, RtOutcome::Applied(_))
    }
}

/// What [`apply`] achieved, setting by setting.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtReport {
    /// `SCHED_FIFO` priority.
    pub fifo: RtOutcome,
    /// CPU affinity.
    pub affinity: RtOutcome,
    /// Locked memory.
    pub memory_lock: RtOutcome,
}

impl RtReport {
    /// One warning line per refused setting.
    pub fn warnings(&self) -> Vec<String> {
        [
            ("SCHED_FIFO", &self.fifo),
            ("CPU affinity", &self.affinity),
            ("mlockall", &self.memory_lock),
        ]
        .into_iter()
        .filter_map(|(what, o)| match o {
            RtOutcome::Refused(why) => Some(format!(
                "warning: {what} not in force ({why}); running without it"
            )),
            _ => None,
        })
        .collect()
    }
}

fn os_error() -> String {
    std::io::Error::last_os_error().to_string()
}

/// The calling thread's scheduling policy and priority, as the kernel reports them.
pub fn current_policy() -> (i32, i32) {
    // SAFETY: pid 0 is the calling thread; the param struct is a valid out-parameter.
    unsafe {
        let policy = libc::sched_getscheduler(0);
        let mut p: libc::sched_param = std::mem::zeroed();
        libc::sched_getparam(0, &mut p);
        (policy, p.sched_priority)
    }
}

/// The CPUs the calling thread may run on, as the kernel reports them.
pub fn current_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => Vec::new(),
    }
}

/// Locked memory of this process in kB (`VmLck` of /proc/self/status).
pub fn locked_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmLck:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Applies `cfg` to the calling thread (memory locking applies to the process) and reads
/// every setting back.
pub fn apply(cfg: &RtConfig) -> RtReport {
    RtReport {
        fifo: cfg.fifo_priority.map_or(RtOutcome::NotRequested, set_fifo),
        affinity: cfg
            .cpus
            .as_deref()
            .map_or(RtOutcome::NotRequested, set_affinity),
        memory_lock: if cfg.lock_memory {
            lock_memory()
        } else {
            RtOutcome::NotRequested
        },
    }
}

/// Returns the calling thread to the normal time-sharing policy (`SCHED_OTHER`); true if
/// the kernel took it.
pub fn set_normal() -> bool {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; p is a valid sched_param.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) == 0 }
}

fn set_fifo(prio: i32) -> RtOutcome {
    if !(1..=99).contains(&prio) {
        return RtOutcome::Refused(format!("priority {prio} is outside 1..=99"));
    }
    let p = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: pid 0 is the calling thread; p is a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
        return RtOutcome::Refused(format!(
            "{}: needs CAP_SYS_NICE or RLIMIT_RTPRIO >= {prio}",
            os_error()
        ));
    }
    match current_policy() {
        (libc::SCHED_FIFO, got) if got == prio => {
            RtOutcome::Applied(format!("SCHED_FIFO priority {got}"))
        }
        (policy, got) => RtOutcome::Refused(format!(
            "the kernel reports policy {policy} priority {got} after asking for SCHED_FIFO {prio}"
        )),
    }
}

fn set_affinity(cpus: &[usize]) -> RtOutcome {
    if cpus.is_empty() || cpus.iter().any(|&c| c >= CpuSet::MAX_CPU) {
        return RtOutcome::Refused(format!("CPU list {cpus:?} is empty or out of range"));
    }
    let mut set = CpuSet::new();
    cpus.iter().for_each(|&c| set.set(c));
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        return RtOutcome::Refused(format!("{} (CPUs {cpus:?})", std::io::Error::from(e)));
    }
    let mut want: Vec<usize> = cpus.to_vec();
    want.sort_unstable();
    want.dedup();
    let got = current_cpus();
    if got == want {
        RtOutcome::Applied(format!("CPUs {got:?}"))
    } else {
        RtOutcome::Refused(format!(
            "the kernel reports CPUs {got:?} after asking for {want:?}"
        ))
    }
}

fn lock_memory() -> RtOutcome {
    use rustix::mm::MlockAllFlags;
    if let Err(e) = rustix::mm::mlockall(MlockAllFlags::CURRENT | MlockAllFlags::FUTURE) {
        return RtOutcome::Refused(format!(
            "{}: needs CAP_IPC_LOCK or a larger RLIMIT_MEMLOCK",
            std::io::Error::from(e)
        ));
    }
    match locked_kb() {
        Some(kb) if kb > 0 => RtOutcome::Applied(format!("{kb} kB locked")),
        other => RtOutcome::Refused(format!(
            "the kernel reports VmLck {other:?} kB after mlockall"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_asked_nothing_changed() {
        let before = (current_policy(), current_cpus());
        let r = apply(&RtConfig::default());
        assert_eq!(r.fifo, RtOutcome::NotRequested);
        assert_eq!(r.affinity, RtOutcome::NotRequested);
        assert_eq!(r.memory_lock, RtOutcome::NotRequested);
        assert!(r.warnings().is_empty());
        assert_eq!(before, (current_policy(), current_cpus()));
    }

    #[test]
    fn reports_match_what_the_kernel_says() {
        // on a thread of its own, so the test runner's threads keep their settings
        std::thread::spawn(|| {
            let cpus = current_cpus();
            let r = apply(&RtConfig {
                fifo_priority: Some(5),
                cpus: Some(vec![cpus[0]]),
                lock_memory: false,
            });
            let (policy, prio) = current_policy();
            // applied means the kernel confirms it; refused means it does not
            assert_eq!(
                r.fifo.applied(),
                policy == libc::SCHED_FIFO && prio == 5,
                "{r:?}"
            );
            assert_eq!(
                r.affinity.applied(),
                current_cpus() == vec![cpus[0]],
                "{r:?}"
            );
            assert_eq!(
                r.warnings().len(),
                [&r.fifo, &r.affinity]
                    .iter()
                    .filter(|o| !o.applied())
                    .count()
            );
            let bad = apply(&RtConfig {
                fifo_priority: Some(150),
                cpus: Some(vec![]),
                lock_memory: false,
            });
            assert!(matches!(&bad.fifo, RtOutcome::Refused(w) if w.contains("150")));
            assert!(matches!(bad.affinity, RtOutcome::Refused(_)));
            assert!(set_normal());
            assert_eq!(current_policy().0, libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
    }
}
