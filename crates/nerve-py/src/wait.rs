//! Waiting with the GIL released, in slices, so that Ctrl-C (and other signals) reach
//! Python promptly, and the wait on several endpoints at once behind the executor.

use crate::errors::{err, WaitError};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::time::{Duration, Instant};

/// Longest stretch without the GIL before signals are checked: Ctrl-C is seen within
/// this, and an idle waiter wakes 5 times a second.
pub(crate) const SIGNAL_CHECK: Duration = Duration::from_millis(200);

/// A value carried into `Python::detach`, which runs its closure on the calling thread
/// (PyO3 asks for `Send` because it cannot know that).
pub(crate) struct SameThread<T>(pub T);

// SAFETY: only used to move values into and out of `Python::detach`, whose closure runs
// synchronously on the thread that calls it: the value never reaches another thread.
unsafe impl<T> Send for SameThread<T> {}
// SAFETY: as above; shared references never leave the calling thread either.
unsafe impl<T> Sync for SameThread<T> {}

impl<T> SameThread<T> {
    fn get(&self) -> &T {
        &self.0
    }
}

/// Seconds from Python as a Duration; negative, NaN or absurd values are a ValueError
/// naming `what`.
pub(crate) fn duration(secs: f64, what: &str) -> PyResult<Duration> {
    if !secs.is_finite() || secs < 0.0 {
        return Err(PyValueError::new_err(format!(
            "{what} must be a finite number of seconds >= 0, got {secs}"
        )));
    }
    Duration::try_from_secs_f64(secs)
        .map_err(|_| PyValueError::new_err(format!("{what} of {secs} s is too long")))
}

/// Runs `f` with the GIL released (a call that waits on another process, bounded by its
/// own timeout).
pub(crate) fn detached<R>(py: Python<'_>, f: impl FnOnce() -> R) -> R {
    let f = SameThread(f);
    py.detach(move || {
        let f = f; // the whole wrapper moves in, not its field
        SameThread((f.0)())
    })
    .0
}

/// Calls `attempt(slice)` with the GIL released until it returns `Some`, `limit` passes
/// (then `None`) or a signal handler raises (Ctrl-C: KeyboardInterrupt). Each call waits
/// at most [`SIGNAL_CHECK`].
pub(crate) fn blocking<R>(
    py: Python<'_>,
    limit: Duration,
    attempt: impl Fn(Duration) -> PyResult<Option<R>>,
) -> PyResult<Option<R>> {
    let start = Instant::now();
    let attempt = SameThread(attempt);
    loop {
        let left = limit.saturating_sub(start.elapsed());
        let slice = left.min(SIGNAL_CHECK);
        let a = &attempt;
        let got = py.detach(move || SameThread(a.get()(slice)));
        if let Some(r) = got.0? {
            return Ok(Some(r));
        }
        py.check_signals()?;
        if start.elapsed() >= limit {
            return Ok(None);
        }
    }
}

/// Waits (GIL released) until one of `subs` has a sample or `timeout` seconds pass;
/// returns the indices of those ready (empty on timeout). Ctrl-C interrupts it.
#[pyfunction]
pub(crate) fn wait_any(
    py: Python<'_>,
    subs: Vec<Py<crate::topic::Subscription>>,
    timeout: f64,
) -> PyResult<Vec<usize>> {
    let limit = duration(timeout, "timeout")?;
    let mut set = nerve::WaitSet::new();
    let mut refs = Vec::with_capacity(subs.len());
    for s in &subs {
        refs.push(s.get().inner.get()?);
    }
    for r in &refs {
        set.add(*r).map_err(err::<WaitError>)?;
    }
    let set = SameThread(set);
    Ok(blocking(py, limit, |slice| {
        let ready = set.get().wait(slice).map_err(err::<WaitError>)?;
        Ok((!ready.is_empty()).then_some(ready))
    })?
    .unwrap_or_default())
}

/// Sleeps until monotonic deadlines with the timer module's sleep: with `spin`, a coarse
/// sleep then a short spin whose length adapts to the wake-up lateness it observes
/// (precise, costs CPU); without, a kernel sleep only (the kernel's lateness shows).
#[pyclass(module = "nerve._nerve")]
pub(crate) struct Sleeper {
    inner: std::sync::Mutex<nerve::timer::PreciseSleep>,
}

#[pymethods]
impl Sleeper {
    #[new]
    #[pyo3(signature = (spin=false))]
    fn new(spin: bool) -> Sleeper {
        let precision = if spin {
            nerve::Precision::default()
        } else {
            nerve::Precision::sleep_only()
        };
        Sleeper {
            inner: std::sync::Mutex::new(nerve::timer::PreciseSleep::new(precision)),
        }
    }

    /// How long before a deadline the sleeper wakes to spin (0 without spin), in ns.
    #[getter]
    fn margin_ns(&self) -> u64 {
        self.inner
            .lock()
            .map(|s| s.margin().as_nanos() as u64)
            .unwrap_or(0)
    }

    /// Sleeps (GIL released) until the monotonic clock reads `deadline_ns`; Ctrl-C
    /// interrupts it within 50 ms.
    fn sleep_until(&self, py: Python<'_>, deadline_ns: u64) -> PyResult<()> {
        loop {
            let now = nerve::mono_ns();
            if now >= deadline_ns {
                return Ok(());
            }
            let until = now + (deadline_ns - now).min(SIGNAL_CHECK.as_nanos() as u64);
            let sleeper = &self.inner;
            py.detach(|| {
                sleeper
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .sleep_until(until);
            });
            py.check_signals()?;
        }
    }
}

/// Robot time now on the process clock (the first context's: simulation time under
/// `NERVE_SIM_TIME=1` or a replay), ns since the Unix epoch.
#[pyfunction]
pub(crate) fn now_ns() -> i64 {
    nerve::time::now_ns()
}

/// The monotonic clock in nanoseconds (the clock of sample stamps; the same as
/// `time.monotonic_ns()`).
#[pyfunction]
pub(crate) fn mono_ns() -> u64 {
    nerve::mono_ns()
}
