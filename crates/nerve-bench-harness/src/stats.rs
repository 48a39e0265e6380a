//! Round-trip statistics from an HDR histogram: nothing filtered, max as measured.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::time::Duration;

/// Round-trip times of one run, in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Rtt {
    /// Mean.
    pub avg: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile (None where the tool does not report it).
    pub p999: Option<f64>,
    /// Largest.
    pub max: f64,
}

/// Records round trips in ns with 3 significant digits, from 1 ns to 100 s.
pub struct Recorder {
    hist: Histogram<u64>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Recorder {
            hist: Histogram::new_with_bounds(1, 100_000_000_000, 3)
                .expect("constant bounds are valid"),
        }
    }

    /// Records one round trip (saturating at the upper bound, never dropped).
    #[inline]
    pub fn record(&mut self, d: Duration) {
        let ns = (d.as_nanos() as u64).clamp(1, self.hist.high());
        self.hist.saturating_record(ns);
    }

    /// Number of recorded round trips.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// The statistics in µs.
    pub fn rtt(&self) -> Rtt {
        let us = |ns: u64| ns as f64 / 1000.0;
        Rtt {
            avg: self.hist.mean() / 1000.0,
            p50: us(self.hist.value_at_quantile(0.50)),
            p90: us(self.hist.value_at_quantile(0.90)),
            p99: us(self.hist.value_at_quantile(0.99)),
            p999: Some(us(self.hist.value_at_quantile(0.999))),
            max: us(self.hist.max()),
        }
    }
}

/// A latency distribution in µs: every figure as measured, nothing filtered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Dist {
    /// Number of samples.
    pub count: u64,
    /// Smallest.
    pub min: f64,
    /// Mean.
    pub avg: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

impl Recorder {
    /// Records a value in ns (saturating at the upper bound, never dropped).
    #[inline]
    pub fn record_ns(&mut self, ns: u64) {
        self.hist.saturating_record(ns.clamp(1, self.hist.high()));
    }

    /// Adds every value another recorder holds.
    pub fn merge(&mut self, other: &Recorder) {
        // both have the same bounds, so adding cannot fail
        let _ = self.hist.add(&other.hist);
    }

    /// The whole distribution in µs (zeros if empty).
    pub fn dist(&self) -> Dist {
        if self.hist.is_empty() {
            return Dist::default();
        }
        let q = |x: f64| self.hist.value_at_quantile(x) as f64 / 1000.0;
        Dist {
            count: self.hist.len(),
            min: self.hist.min() as f64 / 1000.0,
            avg: self.hist.mean() / 1000.0,
            p50: q(0.50),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
            max: self.hist.max() as f64 / 1000.0,
        }
    }
}

/// Robust summary of a series (the statistics of seeds/003): count, median, median
/// absolute deviation, mean, standard deviation, min, max — in the series' unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Number of values.
    pub count: usize,
    /// Median.
    pub median: f64,
    /// Median absolute deviation from the median.
    pub mad: f64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation (population).
    pub std: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

fn median_of_sorted(v: &[f64]) -> f64 {
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

impl Summary {
    /// Summarises `values` (non-finite values are ignored).
    pub fn of(values: &[f64]) -> Summary {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Summary::default();
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let median = median_of_sorted(&v);
        let mut dev: Vec<f64> = v.iter().map(|x| (x - median).abs()).collect();
        dev.sort_by(|a, b| a.total_cmp(b));
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        Summary {
            count: v.len(),
            median,
            mad: median_of_sorted(&dev),
            mean,
            std: var.sqrt(),
            min: v[0],
            max: v[v.len() - 1],
        }
    }
}

/// Quantile points `(q, value)` of `values` for a quantile plot, at most `points` of them.
pub fn quantiles(values: &[f64], points: usize) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() || points == 0 {
        return Vec::new();
    }
    let n = v.len();
    let step = (n as f64 / points as f64).max(1.0);
    let mut out = Vec::new();
    let mut i = 0.0;
    while (i as usize) < n {
        let k = i as usize;
        out.push((k as f64 / (n - 1).max(1) as f64, v[k]));
        i += step;
    }
    if out.last().map(|p| p.1) != Some(v[n - 1]) {
        out.push((1.0, v[n - 1]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_max_are_kept() {
        let mut r = Recorder::new();
        for i in 1..=1000u64 {
            r.record(Duration::from_micros(i));
        }
        r.record(Duration::from_secs(2));
        let s = r.rtt();
        assert_eq!(r.len(), 1001);
        assert!((s.p50 - 501.0).abs() < 2.0, "{s:?}");
        assert!((s.p99 - 991.0).abs() < 2.0, "{s:?}");
        assert!((s.max - 2_000_000.0).abs() < 2000.0, "outlier kept: {s:?}");
        let d = r.dist();
        assert_eq!(d.count, 1001);
        assert!((d.p95 - 951.0).abs() < 2.0, "{d:?}");
        assert!((d.max - 2_000_000.0).abs() < 2000.0, "{d:?}");
    }

    #[test]
    fn summary_matches_hand_computed_figures() {
        let s = Summary::of(&[1.0, 2.0, 3.0, 4.0, 100.0, f64::NAN]);
        assert_eq!(s.count, 5);
        assert_eq!(s.median, 3.0);
        assert_eq!(s.mad, 1.0); // deviations 2,1,0,1,97
        assert_eq!((s.min, s.max), (1.0, 100.0));
        assert!((s.mean - 22.0).abs() < 1e-9);
        assert_eq!(Summary::of(&[]), Summary::default());
    }

    #[test]
    fn quantile_points_span_min_to_max() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        let q = quantiles(&v, 50);
        assert!(q.len() >= 50 && q.len() <= 52, "{}", q.len());
        assert_eq!(q[0], (0.0, 1.0));
        assert_eq!(*q.last().unwrap(), (1.0, 1000.0));
    }
}
