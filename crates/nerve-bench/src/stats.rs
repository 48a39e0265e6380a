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
    }
}
