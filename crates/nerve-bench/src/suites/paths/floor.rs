//! The physical floor of a hop between two cores, measured in alternation with Nerve and
//! raw iceoryx2: two threads pinned to CPUs 0 and 1 bounce a sequence number, on one
//! cache line (the floor the targets use) and on one line per direction (what any
//! ping-pong over two topics must pay). Where the VM's vCPUs sit changes within seconds,
//! so every system runs in short rounds, one after the other, and each round gives its
//! own ratio to that round's floor.

use super::*;
use crossbeam_utils::CachePadded;
use std::sync::atomic::AtomicU64;

/// Rounds of the alternation (quick, full).
pub(super) const ROUNDS: (usize, usize) = (6, 16);

/// One round: the one-way P50 of every system, in ns.
#[derive(Clone, Debug, Serialize)]
pub struct FloorRound {
    /// Round number, from 0.
    pub round: usize,
    /// One cache line bounced between the two cores.
    pub floor_ns: f64,
    /// One line per direction.
    pub floor_two_lines_ns: f64,
    /// Nerve CmdVel 1:1 across threads, busy-polling.
    pub cross_thread_ns: Option<f64>,
    /// Nerve CmdVel 1:1 across processes, busy-polling.
    pub cross_process_ns: Option<f64>,
    /// Raw iceoryx2 CmdVel 1:1 across processes, busy-polling.
    pub iceoryx2_ns: Option<f64>,
}

impl FloorRound {
    /// `system / two-line floor` of this round, if the system ran.
    pub fn two_line_ratio(&self, system: Option<f64>) -> Option<f64> {
        system.map(|v| v / self.floor_two_lines_ns)
    }
}

/// Round trips of bouncing a sequence number between CPUs 0 and 1: the pinger writes an
/// odd value on the first line, the ponger answers with the next even value on the same
/// line (`two_lines` false) or on a second one.
pub(super) fn bounce(two_lines: bool, round_trips: usize, warmup: usize) -> Recorder {
    let lines = [
        CachePadded::new(AtomicU64::new(0)),
        CachePadded::new(AtomicU64::new(0)),
    ];
    let back = &lines[usize::from(two_lines)];
    let total = (round_trips + warmup) as u64;
    std::thread::scope(|s| {
        s.spawn(|| {
            pin_to_cpu(0);
            for k in 0..total {
                // SYNC: Acquire/Release pairs carry the sequence number both ways; nothing
                // else is published.
                while lines[0].load(Ordering::Acquire) != 2 * k + 1 {
                    core::hint::spin_loop();
                }
                back.store(2 * k + 2, Ordering::Release);
            }
        });
        s.spawn(|| {
            pin_to_cpu(1);
            let mut rec = Recorder::new();
            let mut lap = Lap::start();
            for k in 0..total {
                // SYNC: see the ponger.
                lines[0].store(2 * k + 1, Ordering::Release);
                while back.load(Ordering::Acquire) != 2 * k + 2 {
                    core::hint::spin_loop();
                }
                let ns = lap.lap();
                if k >= warmup as u64 {
                    rec.record_ns(ns);
                }
            }
            rec
        })
        .join()
        .unwrap_or_default()
    })
}

/// One-way P50 in ns of a round-trip recorder.
pub(super) fn one_way_p50_ns(rec: &Recorder) -> f64 {
    rec.dist().p50 * 1000.0 / 2.0
}

/// The median and range of `values` (sorted copy), if any.
pub fn spread(values: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    Some((mid, v[0], v[v.len() - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_measures_every_round_trip() {
        let rec = bounce(false, 2_000, 100);
        assert_eq!(rec.len(), 2_000);
        let two = bounce(true, 500, 10);
        assert_eq!(two.len(), 500);
    }

    #[test]
    fn spread_is_median_and_range() {
        assert_eq!(spread(&[3.0, 1.0, 2.0]), Some((2.0, 1.0, 3.0)));
        assert_eq!(spread(&[4.0, 1.0, 2.0, 3.0]), Some((2.5, 1.0, 4.0)));
        assert_eq!(spread(&[]), None);
    }
}
