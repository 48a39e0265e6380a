//! One suite's part of the report: its rows, what it skipped and why, its checks.

use serde::Serialize;
use serde_json::Value;

/// A system (or one of its payloads) that could not run, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    /// System name (and mode).
    pub system: String,
    /// The payload, if only that one failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_bytes: Option<usize>,
    /// Why.
    pub reason: String,
}

impl Skipped {
    /// Whether this entry covers `system` (e.g. "iceoryx2 busy-poll") at `payload`: the same
    /// name or the name of its whole system ("cyclonedds" covers "cyclonedds ddsperf"), at
    /// that payload or at every payload (`None` on either side).
    pub fn covers(&self, system: &str, payload: Option<usize>) -> bool {
        let name = self.system == system
            || system
                .strip_prefix(self.system.as_str())
                .is_some_and(|rest| rest.starts_with(' '));
        let at = match (self.payload_bytes, payload) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        name && at
    }
}

/// A figure a check needs: `Err(why)` where its system (or the peer it is compared with)
/// did not run, `Ok(None)` where this machine cannot give it.
pub type Measured = Result<Option<f64>, String>;

/// Why a figure a check needs is missing: `what` was skipped (the reason of the first entry
/// `matches` accepts) or not run at all.
pub fn why_missing(skipped: &[Skipped], what: &str, matches: impl Fn(&Skipped) -> bool) -> String {
    match skipped.iter().find(|k| matches(k)) {
        Some(k) => format!("{what} skipped: {}", k.reason),
        None => format!("{what} not run"),
    }
}

/// A target checked against measured figures.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    /// Suite it belongs to.
    pub suite: String,
    /// What is checked, e.g. "P50 <= floor P50 + 10 µs".
    pub target: String,
    /// Where: the system, mode and parameters.
    pub scope: String,
    /// The measured value the target is compared with.
    pub value: Option<f64>,
    /// Whether it is met (`None`: not measurable in this run).
    pub met: Option<bool>,
}

impl Verdict {
    /// A verdict from a value and a test.
    pub fn new(
        suite: &str,
        target: impl Into<String>,
        scope: impl Into<String>,
        value: Option<f64>,
        ok: impl Fn(f64) -> bool,
    ) -> Verdict {
        Verdict {
            suite: suite.into(),
            target: target.into(),
            scope: scope.into(),
            value,
            met: value.map(ok),
        }
    }

    /// A verdict on a figure that may be missing. `Err(why)`: the system, or the peer it is
    /// compared with, did not run; the check counts as not met, `why` in its target text,
    /// so it never drops out of the tally. `Ok(None)`: a figure this machine cannot give
    /// (not measurable).
    pub fn judged(
        suite: &str,
        target: impl Into<String>,
        scope: impl Into<String>,
        value: Measured,
        ok: impl Fn(f64) -> bool,
    ) -> Verdict {
        match value {
            Ok(v) => Verdict::new(suite, target, scope, v, ok),
            Err(why) => Verdict::not_run(suite, target, scope, &why),
        }
    }

    /// A check whose system, or the peer it compares against, did not run: not met, with
    /// the reason in its target text.
    pub fn not_run(
        suite: &str,
        target: impl Into<String>,
        scope: impl Into<String>,
        why: &str,
    ) -> Verdict {
        Verdict {
            suite: suite.into(),
            target: format!("{} (not met: {why})", target.into()),
            scope: scope.into(),
            value: None,
            met: Some(false),
        }
    }
}

/// One suite's results.
#[derive(Clone, Debug, Default)]
pub struct SuiteOutput {
    /// Suite name.
    pub suite: String,
    /// Rows of `report.json`'s `results` (each names its `suite`).
    pub rows: Vec<Value>,
    /// What could not run, and why.
    pub skipped: Vec<Skipped>,
    /// Targets checked.
    pub checks: Vec<Verdict>,
    /// The suite's part of `report.md`.
    pub markdown: String,
    /// The suite's part of `index.html` (tables and inline SVG).
    pub html: String,
    /// A few lines for the terminal.
    pub summary: String,
}
