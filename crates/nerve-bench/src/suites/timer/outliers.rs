//! Attributing the timer suite's outliers: cheap counters sampled by the observer after
//! every timeout arrives, and for each cycle whose |δ| is over [`OUTLIER_US`], what
//! changed in that cycle.
//!
//! The observer, not the cycling process, reads them, so the process under test runs
//! exactly as it would without: after each arrival it reads the cycling process's
//! `/proc/<pid>/stat` (page faults of all its threads), `/proc/<pid>/status` and
//! `/proc/<pid>/schedstat` (involuntary context switches, time runnable but waiting for a
//! CPU and CPU time of its main thread, where the executor runs), the same for its own
//! thread (`/proc/thread-self`), and the host's steal time of each of the two CPUs from
//! `/proc/stat`. A cycle's counters are the difference between the samples taken after
//! its two arrivals: what happened in the few µs between an arrival and its sample counts
//! in the next cycle.

use crate::harness::machine::steal_ms_of;
use serde::Serialize;

/// |δ| above which a cycle is an outlier, µs.
pub const OUTLIER_US: f64 = 200.0;
/// Outliers listed per run (system and timeout); the rest are counted.
pub const LISTED: usize = 50;
/// Time waiting for a CPU in one cycle below which it is not named as a cause, µs (a
/// wake-up from sleep itself waits a few µs).
const RUN_DELAY_US: f64 = 50.0;
/// CPU time in one cycle beyond the run's median above which the executor's own work is
/// named as a cause, µs.
const EXTRA_CPU_US: f64 = 100.0;

/// Counters of one thread (or process, for page faults) at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TaskCounters {
    /// Minor page faults.
    pub minflt: u64,
    /// Major page faults (with I/O).
    pub majflt: u64,
    /// Involuntary context switches (preempted).
    pub nivcsw: u64,
    /// Time runnable but waiting for a CPU, ns (`schedstat` run_delay).
    pub run_delay_ns: u64,
    /// CPU time, ns (`schedstat` sum_exec_runtime).
    pub cpu_ns: u64,
}

impl TaskCounters {
    /// Reads `dir` (`/proc/<pid>` or `/proc/thread-self`); `None` where any file cannot be
    /// read or parsed (another kernel, no schedstats).
    pub fn read(dir: &str) -> Option<TaskCounters> {
        let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
        let status = std::fs::read_to_string(format!("{dir}/status")).ok()?;
        let sched = std::fs::read_to_string(format!("{dir}/schedstat")).ok()?;
        TaskCounters::parse(&stat, &status, &sched)
    }

    /// Parses the three files' text.
    pub fn parse(stat: &str, status: &str, schedstat: &str) -> Option<TaskCounters> {
        // the name in parentheses may hold spaces: fields count from after its last ')'
        let rest = &stat[stat.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        // after ')': state(3) ppid pgrp session tty_nr tpgid flags minflt(10) cminflt majflt(12)
        let minflt = f.get(7)?.parse().ok()?;
        let majflt = f.get(9)?.parse().ok()?;
        let nivcsw = status
            .lines()
            .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))?
            .trim()
            .parse()
            .ok()?;
        let mut s = schedstat.split_whitespace();
        let cpu_ns = s.next()?.parse().ok()?;
        let run_delay_ns = s.next()?.parse().ok()?;
        Some(TaskCounters {
            minflt,
            majflt,
            nivcsw,
            run_delay_ns,
            cpu_ns,
        })
    }

    fn since(&self, before: &TaskCounters) -> TaskCounters {
        TaskCounters {
            minflt: self.minflt.saturating_sub(before.minflt),
            majflt: self.majflt.saturating_sub(before.majflt),
            nivcsw: self.nivcsw.saturating_sub(before.nivcsw),
            run_delay_ns: self.run_delay_ns.saturating_sub(before.run_delay_ns),
            cpu_ns: self.cpu_ns.saturating_sub(before.cpu_ns),
        }
    }
}

/// Everything sampled after one arrival.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    /// The cycling process (faults: all threads; the rest: its main thread).
    pub child: Option<TaskCounters>,
    /// The observer's own thread.
    pub observer: Option<TaskCounters>,
    /// Host steal of the cycling process's CPU, ms.
    pub child_steal_ms: Option<f64>,
    /// Host steal of the observer's CPU, ms.
    pub observer_steal_ms: Option<f64>,
}

impl Sample {
    /// Reads every counter now: the cycling process `pid` on `child_cpu`, this thread on
    /// `observer_cpu` (`None`: not pinned, steal of all CPUs).
    pub fn take(pid: u32, child_cpu: Option<usize>, observer_cpu: Option<usize>) -> Sample {
        Sample {
            child: TaskCounters::read(&format!("/proc/{pid}")),
            observer: TaskCounters::read("/proc/thread-self"),
            child_steal_ms: steal_ms_of(child_cpu),
            observer_steal_ms: steal_ms_of(observer_cpu),
        }
    }

    /// What changed from `before` to this sample.
    pub fn since(&self, before: &Sample) -> Cycle {
        let diff = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| (a - b).max(0.0));
        Cycle {
            child: self.child.zip(before.child).map(|(a, b)| a.since(&b)),
            observer: self.observer.zip(before.observer).map(|(a, b)| a.since(&b)),
            child_steal_ms: diff(self.child_steal_ms, before.child_steal_ms),
            observer_steal_ms: diff(self.observer_steal_ms, before.observer_steal_ms),
            observer_asleep: false,
        }
    }
}

/// What changed during one cycle.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cycle {
    /// In the cycling process.
    pub child: Option<TaskCounters>,
    /// In the observer's thread.
    pub observer: Option<TaskCounters>,
    /// Host steal of the cycling process's CPU, ms.
    pub child_steal_ms: Option<f64>,
    /// Host steal of the observer's CPU, ms.
    pub observer_steal_ms: Option<f64>,
    /// The cycle's timeout was published before the observer began to listen for it, so
    /// it arrived late (a fault of the measurement, not of the timer).
    pub observer_asleep: bool,
}

/// One outlier and its cause, as the report lists it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Outlier {
    /// Measured cycle (1 = the first after the warm-up).
    pub cycle: usize,
    /// δ from arrivals, µs.
    pub delta_us: f64,
    /// δ from the machine's own stamps for the same cycle, µs.
    pub stamp_delta_us: f64,
    /// What changed in that cycle ("unexplained" if nothing did).
    pub cause: String,
    /// Whether some cause was found.
    pub explained: bool,
}

/// The outliers of one run.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Outliers {
    /// Cycles with |δ| over [`OUTLIER_US`].
    pub count: u64,
    /// Of those, cycles where no cause was found.
    pub unexplained: u64,
    /// The first [`LISTED`] of them.
    pub listed: Vec<Outlier>,
}

/// Finds and attributes the outliers of a run: `delta_us[j]` and `stamp_us[j]` are cycle
/// `j`'s δ from arrivals and from stamps, `cycles[j]` its counters.
pub fn attribute(delta_us: &[f64], stamp_us: &[f64], cycles: &[Cycle]) -> Outliers {
    let mut cpu: Vec<f64> = cycles
        .iter()
        .filter_map(|c| c.child.map(|t| t.cpu_ns as f64 / 1e3))
        .collect();
    cpu.sort_by(f64::total_cmp);
    let median_cpu_us = cpu.get(cpu.len() / 2).copied();
    let mut out = Outliers::default();
    for (j, &d) in delta_us.iter().enumerate() {
        if d.abs() <= OUTLIER_US {
            continue;
        }
        let stamp = stamp_us.get(j).copied().unwrap_or(f64::NAN);
        let before = j
            .checked_sub(1)
            .map(|i| (delta_us[i], stamp_us.get(i).copied()));
        let counters = cycles.get(j).copied().unwrap_or_default();
        let (cause, explained) = cause(d, stamp, before, &counters, median_cpu_us);
        out.count += 1;
        out.unexplained += u64::from(!explained);
        if out.listed.len() < LISTED {
            out.listed.push(Outlier {
                cycle: j + 1,
                delta_us: d,
                stamp_delta_us: stamp,
                cause,
                explained,
            });
        }
    }
    out
}

/// The cause of one outlier (δ `d`, stamp δ `stamp`; `before`: the previous cycle's δ
/// and stamp δ) and whether one was found.
fn cause(
    d: f64,
    stamp: f64,
    before: Option<(f64, Option<f64>)>,
    c: &Cycle,
    median_cpu_us: Option<f64>,
) -> (String, bool) {
    let mut causes = Vec::new();
    // where: in the cycling process's own timing, or between it and the observer
    let in_child = stamp.is_finite() && stamp.abs() > OUTLIER_US / 2.0;
    let place = if in_child {
        format!("timer (stamps: δ {stamp:.0} µs)")
    } else if stamp.is_finite() {
        format!("delivery (stamps: δ {stamp:.0} µs)")
    } else {
        String::new()
    };
    // a late end of the cycle before shortens this one by as much: the grid holds
    if let Some((prev, prev_stamp)) = before {
        let mirrored = |a: f64, b: f64| a > OUTLIER_US / 2.0 && b < 0.0 && (a + b).abs() < a / 2.0;
        let timer_side = prev_stamp.is_some_and(|p| stamp.is_finite() && mirrored(p, stamp));
        if mirrored(prev, d) || timer_side {
            causes.push(format!(
                "the cycle before ended {prev:.0} µs late and the next timeout kept its \
                 time, so this one is that much shorter"
            ));
        }
    }
    if c.observer_asleep {
        causes.push(
            "the observer was asleep when the event was published (a fault of the \
             measurement, not of the timer)"
                .into(),
        );
    }
    let mut task = |who: &str, t: &TaskCounters| {
        let faults = t.minflt + t.majflt;
        if faults > 0 {
            causes.push(format!(
                "{who}: {faults} page fault{} ({} major)",
                if faults == 1 { "" } else { "s" },
                t.majflt
            ));
        }
        let waited = t.run_delay_ns as f64 / 1e3;
        if t.nivcsw > 0 || waited >= RUN_DELAY_US {
            causes.push(format!(
                "{who}: preempted ({} involuntary switch{}, {waited:.0} µs waiting for a CPU)",
                t.nivcsw,
                if t.nivcsw == 1 { "" } else { "es" }
            ));
        }
    };
    if let Some(t) = &c.child {
        task("timer process", t);
    }
    if let Some(t) = &c.observer {
        task("observer", t);
    }
    for (who, steal) in [
        ("timer process's CPU", c.child_steal_ms),
        ("observer's CPU", c.observer_steal_ms),
    ] {
        if let Some(s) = steal.filter(|&s| s > 0.0) {
            causes.push(format!(
                "host steal on the {who} (its counter, in whole ticks, rose {s:.0} ms)"
            ));
        }
    }
    if let (Some(t), Some(median)) = (&c.child, median_cpu_us) {
        let extra = t.cpu_ns as f64 / 1e3 - median;
        if extra > EXTRA_CPU_US {
            causes.push(format!(
                "the executor's own work: {extra:.0} µs more CPU than its median cycle"
            ));
        }
    }
    let explained = !causes.is_empty();
    if !explained {
        causes.push(
            "unexplained (no steal tick, page fault, preemption, wait for a CPU or extra \
             work seen)"
                .into(),
        );
    }
    let text = if place.is_empty() {
        causes.join("; ")
    } else {
        format!("{place}: {}", causes.join("; "))
    };
    (text, explained)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_parse_and_bad_text_is_none() {
        let stat = "123 (a b) c) S 1 2 3 0 -1 4194560 17 0 2 0 5 6";
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t9\nnonvoluntary_ctxt_switches:\t4\n";
        let t = TaskCounters::parse(stat, status, "1000 250 7\n").unwrap();
        assert_eq!(
            t,
            TaskCounters {
                minflt: 17,
                majflt: 2,
                nivcsw: 4,
                run_delay_ns: 250,
                cpu_ns: 1000
            }
        );
        assert!(TaskCounters::parse("garbage", status, "1 2 3").is_none());
        assert!(TaskCounters::parse(stat, "Name: x", "1 2 3").is_none());
        assert!(TaskCounters::parse(stat, status, "").is_none());
        // this process's own files read
        assert!(TaskCounters::read("/proc/thread-self").is_some());
        assert!(TaskCounters::read("/proc/0").is_none());
    }

    fn task(minflt: u64, nivcsw: u64, run_delay_us: u64, cpu_us: u64) -> TaskCounters {
        TaskCounters {
            minflt,
            majflt: 0,
            nivcsw,
            run_delay_ns: run_delay_us * 1000,
            cpu_ns: cpu_us * 1000,
        }
    }

    #[test]
    fn outliers_name_what_changed_in_their_cycle() {
        let quiet = Cycle {
            child: Some(task(0, 0, 2, 300)),
            observer: Some(task(0, 0, 1, 50)),
            child_steal_ms: Some(0.0),
            observer_steal_ms: Some(0.0),
            observer_asleep: false,
        };
        let mut cycles = vec![quiet; 8];
        let delta = [1.0, 420.0, -410.0, 3.0, 250.0, 2.0, -300.0, 900.0];
        let stamp = [1.0, 415.0, -405.0, 3.0, 2.0, 2.0, -300.0, 2.0];
        cycles[1].child = Some(task(0, 1, 380, 300)); // preempted in the timer process
        cycles[4].observer_steal_ms = Some(10.0); // host steal, delivery side
        cycles[4].observer_asleep = true;
        cycles[6].child = Some(task(3, 0, 2, 300)); // page faults
        cycles[6].child = Some(TaskCounters {
            cpu_ns: 700_000,
            ..cycles[6].child.unwrap()
        }); // and extra work
        let o = attribute(&delta, &stamp, &cycles);
        assert_eq!((o.count, o.unexplained), (5, 1));
        let c: Vec<&str> = o.listed.iter().map(|o| o.cause.as_str()).collect();
        assert!(
            c[0].starts_with("timer (stamps") && c[0].contains("1 involuntary switch, 380 µs"),
            "{}",
            c[0]
        );
        assert!(
            c[1].contains("the cycle before ended 420 µs late"),
            "{}",
            c[1]
        );
        assert!(
            c[2].starts_with("delivery")
                && c[2].contains(
                    "host steal on the observer's CPU (its counter, in whole ticks, rose 10 ms)"
                )
                && c[2].contains("the observer was asleep"),
            "{}",
            c[2]
        );
        assert!(
            c[3].contains("3 page faults") && c[3].contains("400 µs more CPU"),
            "{}",
            c[3]
        );
        assert!(
            c[4].contains("unexplained") && !o.listed[4].explained,
            "{}",
            c[4]
        );
        assert_eq!(o.listed[0].cycle, 2);
    }

    #[test]
    fn the_list_is_bounded_and_the_rest_counted() {
        let delta = vec![500.0; LISTED + 7];
        let o = attribute(&delta, &delta, &[]);
        assert_eq!((o.count, o.listed.len()), (LISTED as u64 + 7, LISTED));
    }

    #[test]
    fn steal_of_a_cpu_reads() {
        assert!(steal_ms_of(None).is_some());
        assert!(steal_ms_of(Some(0)).is_some());
        assert!(steal_ms_of(Some(100_000)).is_none());
    }
}
