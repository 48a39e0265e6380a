//! `nerve bench tf`: transform lookups under a writer. A chain of `depth` edges
//! (`f0 <- f1 <- … <- f{depth}`) is filled with 1 s of history at 100 Hz; then, for a
//! fixed time, one writer thread updates every edge at 100 Hz (each `set_transform`
//! timed: the insert cost) while `readers` threads look up `f{depth}` in `f0` at LATEST
//! (the newest time the whole chain has: the two-pass lookup tf2 users call most), each
//! lookup timed on its own. Every lookup counts: the distribution is as measured, nothing
//! filtered.
//!
//! Systems: nerve-tf's [`TfBuffer`] looked up by name (`nerve`) and by pre-resolved
//! [`FrameHandle`](nerve_tf::FrameHandle) (`nerve-handle`), and the straightforward
//! shared tree a user would write first, a `std::sync::Mutex<TfTree>` (`mutex`), looked
//! up by name, the writer taking the same mutex.

mod options;
pub use options::TfOptions;

use crate::harness::machine::Machine as Host;
use crate::harness::progress;
use crate::report::{json_rows, num, Section, SuiteOutput, Verdict};
use hdrhistogram::Histogram;
use nerve_tf::{Quat, TfBuffer, TfTree, Transform, TreeLimits, Vec3, LATEST};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

/// HORUS's published claim about its transform tree (quoted in issue 32; not a
/// measurement, and not measured here).
pub const HORUS_TF_CLAIM: &str =
    "HORUS: a lock-free transform tree \"10–33× faster than TF2\" (the project's own claim, \
     as quoted in issue 32; no method or figures published beside it; not measured here)";

/// What is looked up in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum TfSystem {
    /// `TfBuffer`, frames by name.
    Nerve,
    /// `TfBuffer`, frames by handle.
    NerveHandle,
    /// `Mutex<TfTree>`, frames by name.
    Mutex,
}

impl TfSystem {
    /// Every system, in report order.
    pub const ALL: [TfSystem; 3] = [TfSystem::Nerve, TfSystem::NerveHandle, TfSystem::Mutex];

    /// Its id in reports.
    pub fn id(self) -> &'static str {
        match self {
            TfSystem::Nerve => "nerve",
            TfSystem::NerveHandle => "nerve-handle",
            TfSystem::Mutex => "mutex",
        }
    }
}

/// One row: a system at one depth and reader count.
#[derive(Clone, Debug, Serialize)]
pub struct TfRow {
    /// Always "tf".
    pub suite: &'static str,
    /// System id.
    pub system: &'static str,
    /// Edges between the two frames looked up.
    pub depth: usize,
    /// Reader threads.
    pub readers: usize,
    /// Lookups done (all readers), each timed.
    pub lookups: u64,
    /// Lookups that failed (should be 0).
    pub failed: u64,
    /// Lookups per second, all readers together.
    pub lookups_per_s: f64,
    /// Lookup latency, ns.
    pub p50_ns: u64,
    /// P99, ns.
    pub p99_ns: u64,
    /// P99.9, ns.
    pub p999_ns: u64,
    /// Largest, ns.
    pub max_ns: u64,
    /// One `set_transform` by the writer, P50 ns.
    pub insert_p50_ns: u64,
    /// P99 ns.
    pub insert_p99_ns: u64,
    /// Largest ns.
    pub insert_max_ns: u64,
}

/// The suite's settings.
#[derive(Clone, Debug)]
pub struct TfSuite {
    /// Seconds of lookups per point.
    pub seconds: f64,
    /// Chain depths.
    pub depths: Vec<usize>,
    /// Reader thread counts.
    pub readers: Vec<usize>,
    /// Whether this is the quick variant.
    pub quick: bool,
}

const SECOND: i64 = 1_000_000_000;
const PERIOD_NS: i64 = 10_000_000;

impl TfSuite {
    /// 2 s per point, depths 1, 5, 20, readers 1, 4, 8.
    pub fn full() -> TfSuite {
        TfSuite {
            seconds: 2.0,
            depths: vec![1, 5, 20],
            readers: vec![1, 4, 8],
            quick: false,
        }
    }

    /// 0.3 s per point, every depth and reader count.
    pub fn quick() -> TfSuite {
        TfSuite {
            seconds: 0.3,
            quick: true,
            ..TfSuite::full()
        }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.01..=600.0).contains(&self.seconds) {
            return Err(format!("seconds must be 0.01 to 600, not {}", self.seconds));
        }
        if self.depths.is_empty() || self.depths.iter().any(|&d| d == 0 || d > 1000) {
            return Err("depths must be 1 to 1000 (and at least one)".into());
        }
        if self.readers.is_empty() || self.readers.iter().any(|&r| r == 0 || r > 256) {
            return Err("readers must be 1 to 256 (and at least one)".into());
        }
        Ok(())
    }

    /// Runs every point.
    pub fn execute(&self, host: &Host) -> Result<SuiteOutput, String> {
        self.validate()?;
        let points = (self.depths.len() * self.readers.len() * TfSystem::ALL.len()) as u64;
        let bar = progress(points, "points");
        let mut rows = Vec::new();
        for &depth in &self.depths {
            for &readers in &self.readers {
                for system in TfSystem::ALL {
                    bar.set_message(format!("{} depth {depth}, {readers} readers", system.id()));
                    rows.push(run_point(system, depth, readers, self.seconds)?);
                    bar.inc(1);
                }
            }
        }
        bar.finish_and_clear();
        Ok(output(rows, self, host))
    }
}

fn frame(i: usize) -> String {
    format!("f{i}")
}

fn edge(k: i64, i: usize) -> Transform {
    let a = (k as f64 * 0.01 + i as f64) * 0.1;
    Transform::new(
        Vec3::new(1.0 + a, 0.5, 0.1 * i as f64),
        Quat::from_axis_angle(Vec3::new(0.0, 0.0, 1.0), a),
    )
}

/// Either store, behind one interface for the writer and readers.
enum Store {
    Buffer(TfBuffer),
    Tree(Mutex<TfTree>),
}

impl Store {
    fn set(&self, parent: &str, child: &str, stamp: i64, t: Transform) -> bool {
        match self {
            Store::Buffer(b) => b.set_transform(parent, child, stamp, t, false).is_ok(),
            Store::Tree(m) => m
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .set_transform(parent, child, stamp, t, false)
                .is_ok(),
        }
    }
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

fn run_point(
    system: TfSystem,
    depth: usize,
    readers: usize,
    seconds: f64,
) -> Result<TfRow, String> {
    let limits = TreeLimits::default();
    let store = Arc::new(match system {
        TfSystem::Mutex => Store::Tree(Mutex::new(TfTree::new(limits))),
        _ => Store::Buffer(TfBuffer::new(limits)),
    });
    let names: Arc<Vec<String>> = Arc::new((0..=depth).map(frame).collect());
    // 1 s of history at 100 Hz before the measured part
    let mut k = 0i64;
    while k < 100 {
        for i in 1..=depth {
            store.set(&names[i - 1], &names[i], SECOND + k * PERIOD_NS, edge(k, i));
        }
        k += 1;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(readers + 2));
    let writer = {
        let (store, names, stop, start) =
            (store.clone(), names.clone(), stop.clone(), start.clone());
        std::thread::spawn(move || {
            let mut h = hist();
            start.wait();
            let mut next = Instant::now();
            let mut k = k;
            while !stop.load(Relaxed) {
                for i in 1..=depth {
                    let t0 = Instant::now();
                    store.set(&names[i - 1], &names[i], SECOND + k * PERIOD_NS, edge(k, i));
                    let _ = h.record(t0.elapsed().as_nanos().max(1) as u64);
                }
                k += 1;
                next += Duration::from_nanos(PERIOD_NS as u64);
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    next = now;
                }
            }
            h
        })
    };
    let handles: Vec<_> = (0..readers)
        .map(|_| {
            let (store, names, stop, start) =
                (store.clone(), names.clone(), stop.clone(), start.clone());
            std::thread::spawn(move || {
                let mut h = hist();
                let mut failed = 0u64;
                let (target, source) = (names[0].as_str(), names[depth].as_str());
                let handles = match &*store {
                    Store::Buffer(b) => b.frame(target).zip(b.frame(source)),
                    Store::Tree(_) => None,
                };
                start.wait();
                while !stop.load(Relaxed) {
                    // 64 timed lookups between looks at the stop flag
                    for _ in 0..64 {
                        let t0 = Instant::now();
                        let ok = match (&*store, system, handles) {
                            (Store::Buffer(b), TfSystem::NerveHandle, Some((t, s))) => {
                                b.lookup_transform(t, s, LATEST).is_ok()
                            }
                            (Store::Buffer(b), _, _) => {
                                b.lookup_transform(target, source, LATEST).is_ok()
                            }
                            (Store::Tree(m), _, _) => m
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .lookup(target, source, LATEST)
                                .is_ok(),
                        };
                        let _ = h.record(t0.elapsed().as_nanos().max(1) as u64);
                        failed += u64::from(!ok);
                    }
                }
                (h, failed)
            })
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Relaxed);
    let mut lookups = hist();
    let mut failed = 0;
    for h in handles {
        let (h, f) = h
            .join()
            .map_err(|_| "a reader thread panicked".to_string())?;
        lookups
            .add(&h)
            .map_err(|e| format!("cannot merge histograms: {e}"))?;
        failed += f;
    }
    let wall = t0.elapsed().as_secs_f64();
    let inserts = writer
        .join()
        .map_err(|_| "the writer thread panicked".to_string())?;
    Ok(TfRow {
        suite: "tf",
        system: system.id(),
        depth,
        readers,
        lookups: lookups.len(),
        failed,
        lookups_per_s: lookups.len() as f64 / wall,
        p50_ns: lookups.value_at_quantile(0.5),
        p99_ns: lookups.value_at_quantile(0.99),
        p999_ns: lookups.value_at_quantile(0.999),
        max_ns: lookups.max(),
        insert_p50_ns: inserts.value_at_quantile(0.5),
        insert_p99_ns: inserts.value_at_quantile(0.99),
        insert_max_ns: inserts.max(),
    })
}

/// What `Instant::now()` itself costs here (ns, P50 of back-to-back pairs): part of every
/// timed lookup.
fn clock_cost_ns() -> u64 {
    let mut h = hist();
    for _ in 0..100_000 {
        let t0 = Instant::now();
        let _ = h.record(t0.elapsed().as_nanos().max(1) as u64);
    }
    h.value_at_quantile(0.5)
}

fn find(rows: &[TfRow], system: TfSystem, depth: usize, readers: usize) -> Option<&TfRow> {
    rows.iter()
        .find(|r| r.system == system.id() && r.depth == depth && r.readers == readers)
}

fn checks(rows: &[TfRow], suite: &TfSuite) -> Vec<Verdict> {
    let mut checks = Vec::new();
    for &readers in suite.readers.iter().filter(|&&r| r == 8) {
        if suite.depths.contains(&5) {
            let scope = format!("nerve, depth 5, {readers} readers");
            let v = find(rows, TfSystem::Nerve, 5, readers).map(|r| r.p50_ns as f64);
            checks.push(Verdict::new("tf", "lookup P50 <= 500 ns", &scope, v, |v| {
                v <= 500.0
            }));
        }
    }
    for &depth in &suite.depths {
        for &readers in suite.readers.iter().filter(|&&r| r >= 4) {
            let scope = format!("nerve vs mutex, depth {depth}, {readers} readers");
            let ratio = find(rows, TfSystem::Nerve, depth, readers)
                .zip(find(rows, TfSystem::Mutex, depth, readers))
                .map(|(n, m)| n.lookups_per_s / m.lookups_per_s.max(1e-9));
            checks.push(Verdict::new(
                "tf",
                "lookups/s >= 10x the Mutex<TfTree> baseline",
                &scope,
                ratio,
                |v| v >= 10.0,
            ));
        }
    }
    for r in rows {
        checks.push(Verdict::new(
            "tf",
            "no lookup failed",
            format!("{}, depth {}, {} readers", r.system, r.depth, r.readers),
            Some(r.failed as f64),
            |v| v == 0.0,
        ));
    }
    checks
}

fn output(rows: Vec<TfRow>, suite: &TfSuite, host: &Host) -> SuiteOutput {
    let checks = checks(&rows, suite);
    let clock = clock_cost_ns();
    let head = [
        "system",
        "depth",
        "readers",
        "lookups/s",
        "P50 ns",
        "P99 ns",
        "P99.9 ns",
        "max ns",
        "insert P50 ns",
        "insert P99 ns",
        "insert max ns",
        "failed",
    ];
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.system.to_string(),
                r.depth.to_string(),
                r.readers.to_string(),
                num(r.lookups_per_s),
                r.p50_ns.to_string(),
                r.p99_ns.to_string(),
                r.p999_ns.to_string(),
                r.max_ns.to_string(),
                r.insert_p50_ns.to_string(),
                r.insert_p99_ns.to_string(),
                r.insert_max_ns.to_string(),
                r.failed.to_string(),
            ]
        })
        .collect();
    let about = "A chain of `depth` frames (f0 <- f1 <- … <- f{depth}) holds 1 s of history \
                 at 100 Hz; one writer thread then updates every edge at 100 Hz while the \
                 reader threads look up f{depth} in f0 at LATEST (the newest time the whole \
                 chain has), each lookup timed on its own with Instant::now() (whose own \
                 cost is included; shown below). nerve: nerve-tf's TfBuffer (seqlocked \
                 per-frame rings, lock-free reads), frames by name; nerve-handle: the same \
                 with frames resolved once; mutex: a std Mutex<TfTree> shared by the writer \
                 and the readers, the straightforward baseline. Insert: one set_transform \
                 by the writer. No lookup allocates (checked by crates/nerve-tf/tests/alloc.rs \
                 with a counting allocator: 0 allocations per lookup).";
    let mut section = Section::new("tf (transform lookups)", about);
    section.paragraph(&format!(
        "{} s per point; machine: {} ({} CPUs); Instant::now() pair P50 {clock} ns.",
        suite.seconds, host.cpu, host.cores
    ));
    section.table(Some("Lookups under a 100 Hz writer"), &head, &table);
    let mut ratio_rows = Vec::new();
    for &depth in &suite.depths {
        for &readers in &suite.readers {
            if let (Some(n), Some(m)) = (
                find(&rows, TfSystem::Nerve, depth, readers),
                find(&rows, TfSystem::Mutex, depth, readers),
            ) {
                ratio_rows.push(vec![
                    depth.to_string(),
                    readers.to_string(),
                    format!("{:.1}x", n.lookups_per_s / m.lookups_per_s.max(1e-9)),
                    format!("{:.1}x", m.p50_ns as f64 / n.p50_ns.max(1) as f64),
                    format!("{:.1}x", m.p99_ns as f64 / n.p99_ns.max(1) as f64),
                ]);
            }
        }
    }
    section.table(
        Some("nerve against the Mutex<TfTree> baseline"),
        &[
            "depth",
            "readers",
            "lookups/s ratio",
            "P50 ratio",
            "P99 ratio",
        ],
        &ratio_rows,
    );
    section.paragraph(&format!("Published claim beside it: {HORUS_TF_CLAIM}."));
    let mut summary =
        String::from("tf: lookups/s, lookup P50 / P99 / P99.9 / max ns, insert P50 / P99 ns\n");
    for r in &rows {
        summary.push_str(&format!(
            "  {:<13} depth {:>2} readers {}  {:>12}/s  {:>6} / {:>7} / {:>8} / {:>9}  insert {:>6} / {:>7}\n",
            r.system,
            r.depth,
            r.readers,
            num(r.lookups_per_s),
            r.p50_ns,
            r.p99_ns,
            r.p999_ns,
            r.max_ns,
            r.insert_p50_ns,
            r.insert_p99_ns
        ));
    }
    summary.push_str(&format!(
        "  Instant::now() pair P50 {clock} ns (inside every timed lookup)\n"
    ));
    section.finish("tf", json_rows(&rows), Vec::new(), checks, summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_point_runs_and_finds_every_lookup() {
        let r = run_point(TfSystem::Nerve, 5, 2, 0.05).unwrap();
        assert!(r.lookups > 0);
        assert_eq!(r.failed, 0);
        let m = run_point(TfSystem::Mutex, 5, 1, 0.05).unwrap();
        assert_eq!(m.failed, 0);
    }

    #[test]
    fn settings_are_checked() {
        assert!(TfSuite::quick().validate().is_ok());
        let bad = TfSuite {
            depths: vec![0],
            ..TfSuite::quick()
        };
        assert!(bad.validate().unwrap_err().contains("depths"));
    }
}
