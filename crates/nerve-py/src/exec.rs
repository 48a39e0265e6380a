//! The wait behind `nerve.Executor`: one sleep on the Rust side, GIL released, on every
//! subscription, service server, action server and managed node (its lifecycle
//! services) of the executor's nodes (a `nerve::WaitSet`: `futex_waitv` on their
//! doorbells) up to the next timer deadline (timers are kept here, [`TimerRaw`], on
//! absolute grids, and waited for with the timer module's `PreciseSleep`, as the Rust
//! executor waits). Python then runs the callbacks of what the wait reports ready, with
//! the GIL. Nothing is polled: an idle executor sleeps until a doorbell rings or a
//! deadline comes.
//!
//! The loop runs here too ([`Waiter::run`]): a round reads the entities from the nodes'
//! lists, waits, fires the timers due and calls their ticks, and hands other ready
//! entities to the executor's Python `_dispatch`, so a timer tick costs one Python call
//! besides its callback.
//!
//! Ctrl-C: Python runs signal handlers on its main thread only, so a wait on the main
//! thread wakes every [`SIGNAL_CHECK`] to run them (`check_signals`: KeyboardInterrupt);
//! on any other thread it sleeps until work arrives or [`Waiter::wake`]
//! (`Executor.shutdown`) ends it. Either way the transport re-checks a doorbell wait
//! once a second (its bound on a missed wake-up).

use crate::action::ActionServerRaw;
use crate::errors::{err, WaitError};
use crate::lifecycle::{LifecycleError, ManagedNodeRaw};
use crate::service::Server;
use crate::topic::Subscription;
use crate::wait::{duration, SameThread, SIGNAL_CHECK};
use nerve::timer::PreciseSleep;
use nerve::{Precision, WaitSet, WaitSetWaker, Waitable};
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread::ThreadId;

/// `TimerRaw::next_ns` of a disarmed timer.
const DISARMED: u64 = u64::MAX;

/// A timer's deadlines: an absolute grid `start + k * period` (a periodic timer does not
/// drift, whatever its callbacks cost; ticks missed while a callback overran are skipped
/// and counted), or one deadline (one-shot). Any thread may cancel or reset it; the
/// executor that waits on it fires it.
#[pyclass(frozen, module = "nerve._nerve")]
pub(crate) struct TimerRaw {
    period_ns: u64,
    oneshot: bool,
    next_ns: AtomicU64,
    fired: AtomicU64,
    skipped: AtomicU64,
    /// The waker of the executor that last waited on it: `reset` from another thread
    /// wakes it to an earlier deadline.
    waker: Mutex<Option<WaitSetWaker>>,
}

#[pymethods]
impl TimerRaw {
    /// A timer first due one `period` (seconds, > 0) from now.
    #[new]
    #[pyo3(signature = (period, oneshot=false))]
    fn new(period: f64, oneshot: bool) -> PyResult<TimerRaw> {
        let period_ns = duration(period, "a timer period")?
            .as_nanos()
            .min(u128::from(u64::MAX / 4)) as u64;
        if period_ns == 0 {
            return Err(PyValueError::new_err(format!(
                "timer period must be > 0 seconds, got {period}"
            )));
        }
        Ok(TimerRaw {
            period_ns,
            oneshot,
            next_ns: AtomicU64::new(nerve::mono_ns() + period_ns),
            fired: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            waker: Mutex::new(None),
        })
    }

    /// The period in ns.
    #[getter]
    fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// Whether it fires once.
    #[getter]
    fn oneshot(&self) -> bool {
        self.oneshot
    }

    /// The next deadline (monotonic ns); None while cancelled or once a one-shot fired.
    #[getter]
    fn next_ns(&self) -> Option<u64> {
        Some(self.due()).filter(|&d| d != DISARMED)
    }

    /// Firings so far.
    #[getter]
    fn fired(&self) -> u64 {
        // SYNC: Relaxed: a counter guarding no other data.
        self.fired.load(Ordering::Relaxed)
    }

    /// Ticks skipped so far because a callback overran them.
    #[getter]
    fn skipped(&self) -> u64 {
        // SYNC: Relaxed: a counter guarding no other data.
        self.skipped.load(Ordering::Relaxed)
    }

    /// Disarms it until `reset`.
    fn cancel(&self) {
        // SYNC: SeqCst: a waiting executor reads the deadline after its wait ends.
        self.next_ns.store(DISARMED, Ordering::SeqCst);
    }

    /// Arms it one period from now (a periodic timer's grid restarts there); an
    /// executor asleep until a later deadline is woken to look again.
    fn reset(&self) {
        let next = nerve::mono_ns() + self.period_ns;
        // SYNC: as in `cancel`; the executor reads the deadline after its wake.
        let before = self.next_ns.swap(next, Ordering::SeqCst);
        if next < before {
            if let Some(w) = &*self.waker.lock().unwrap_or_else(|e| e.into_inner()) {
                w.wake();
            }
        }
    }

    /// Fires it if due at `now_ns` (default: now): advances its schedule and returns the
    /// ticks skipped just before this one; None if it is not due.
    #[pyo3(signature = (now_ns=None))]
    fn fire(&self, now_ns: Option<u64>) -> Option<u64> {
        let now = now_ns.unwrap_or_else(nerve::mono_ns);
        let mut due = self.due();
        loop {
            if due == DISARMED || due > now {
                return None;
            }
            let (next, skipped) = if self.oneshot {
                (DISARMED, 0)
            } else {
                let next = due.saturating_add(self.period_ns);
                match next <= now {
                    true => {
                        let skipped = (now - next) / self.period_ns + 1;
                        (next + skipped * self.period_ns, skipped)
                    }
                    false => (next, 0),
                }
            };
            // a cancel or reset from another thread meanwhile wins: look again
            // SYNC: SeqCst, as the stores of `cancel` and `reset`.
            match self
                .next_ns
                .compare_exchange(due, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => {
                    // SYNC: Relaxed: counters guarding no other data.
                    self.fired.fetch_add(1, Ordering::Relaxed);
                    self.skipped.fetch_add(skipped, Ordering::Relaxed);
                    return Some(skipped);
                }
                Err(now_due) => due = now_due,
            }
        }
    }
}

impl TimerRaw {
    /// The next deadline ([`DISARMED`] if none).
    fn due(&self) -> u64 {
        // SYNC: SeqCst, as the stores of `cancel` and `reset`.
        self.next_ns.load(Ordering::SeqCst)
    }
}

/// What `Waiter.wait` found ready: indices into its subscription, server and served
/// (action servers, managed nodes) lists, and of the timers it fired.
type Ready = (Vec<usize>, Vec<usize>, Vec<usize>, Vec<usize>);

/// Something the wait sleeps on: the waitable, which of the lists it is from (0
/// subscriptions, 1 servers, 2 served: action servers and managed nodes) and its index
/// there.
type Entry<'a> = (&'a dyn Waitable, u8, usize);

/// How a stretch of waiting without the GIL ended.
enum Outcome {
    /// Something is ready, or timers fired.
    Ready(Ready),
    /// The limit passed or `Waiter::wake` was called.
    Done,
    /// The slice before the next signal check ended.
    Signals,
}

/// The executor's wait (see the module docs). Made by `nerve.Executor`; `wake` may be
/// called from any thread.
#[pyclass(frozen, module = "nerve._nerve")]
pub(crate) struct Waiter {
    waker: WaitSetWaker,
    precision: Precision,
    /// Made on the thread that waits (it lowers that thread's timer slack), again if
    /// another thread waits.
    sleep: Mutex<Option<(ThreadId, PreciseSleep)>>,
}

#[pymethods]
impl Waiter {
    /// A waiter whose timers sleep to their deadlines (`precise`: sleep to shortly
    /// before, then spin: microsecond accuracy for tens of µs of CPU per tick).
    #[new]
    #[pyo3(signature = (precise=false))]
    fn new(precise: bool) -> Waiter {
        Waiter {
            waker: WaitSetWaker::new(),
            precision: match precise {
                true => Precision::default(),
                false => Precision::sleep_only(),
            },
            sleep: Mutex::new(None),
        }
    }

    /// Ends the current wait (or the next one, if none is waiting): from any thread.
    fn wake(&self) {
        self.waker.wake();
    }

    /// Runs `executor` (a `nerve.Executor`): sleeps (GIL released) until an entity of
    /// its nodes (`_nodes`: their `_subscriptions`, `_servers`, `_served` (action
    /// servers and managed nodes: objects whose `_raw` is an `ActionServerRaw` or a
    /// `ManagedNodeRaw`, answered by their `_handle_pending()`) and `_timers`, read
    /// again every round) has input or a timer is due, then, with the GIL, runs the
    /// ticks of the timers fired here (`timer.callback()`; a one-shot timer's
    /// `timer._fired()`) and hands what else is ready to
    /// `executor._dispatch(subs, servers, served)`, which returns the callbacks
    /// it ran. Returns the callbacks run, once `executor._stop` is set (by `shutdown`,
    /// which also calls `wake`), the monotonic clock reaches `limit_ns` (None: no limit),
    /// or with `once` after the first round that ran any. With `signals` (Python's main
    /// thread) it runs signal handlers every 200 ms while waiting: Ctrl-C raises
    /// KeyboardInterrupt. A callback's exception ends it.
    #[pyo3(signature = (executor, limit_ns=None, signals=false, once=false))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        executor: &Bound<'py, PyAny>,
        limit_ns: Option<u64>,
        signals: bool,
        once: bool,
    ) -> PyResult<u64> {
        let limit = limit_ns.unwrap_or(u64::MAX);
        let stop = intern!(py, "_stop");
        let mut total = 0;
        loop {
            let mut lists: [Vec<Bound<'py, PyAny>>; 4] = Default::default();
            let kinds = [
                intern!(py, "_subscriptions"),
                intern!(py, "_servers"),
                intern!(py, "_served"),
                intern!(py, "_timers"),
            ];
            for node in executor.getattr(intern!(py, "_nodes"))?.try_iter()? {
                let node = node?;
                for (list, kind) in lists.iter_mut().zip(kinds) {
                    for e in node.getattr(kind)?.try_iter()? {
                        list.push(e?);
                    }
                }
            }
            let [subs, servers, served, timers] = &lists;
            let mut ran = 0;
            if let Some((rs, rv, ra, rt)) =
                self.wait(py, subs, servers, served, timers, limit, signals)?
            {
                for i in rt {
                    let t = &timers[i];
                    let raw = t.getattr(intern!(py, "_raw"))?;
                    // a one-shot timer's tick also takes it off its node's list
                    match raw.cast::<TimerRaw>()?.get().oneshot {
                        true => t.call_method0(intern!(py, "_fired"))?,
                        false => t.getattr(intern!(py, "callback"))?.call0()?,
                    };
                    ran += 1;
                }
                if !(rs.is_empty() && rv.is_empty() && ra.is_empty()) {
                    let ready = (
                        pick(py, subs, rs)?,
                        pick(py, servers, rv)?,
                        pick(py, served, ra)?,
                    );
                    let got = executor.call_method1(intern!(py, "_dispatch"), ready)?;
                    ran += got.extract::<u64>()?;
                }
            }
            total += ran;
            if executor.getattr(stop)?.is_truthy()?
                || (once && ran > 0)
                || (limit != u64::MAX && nerve::mono_ns() >= limit)
            {
                return Ok(total);
            }
        }
    }
}

impl Waiter {
    /// Sleeps (GIL released) until one of `subs`, `servers` or `served` has input, one
    /// of `timers` is due, the monotonic clock reaches `limit` or `wake` is called. The
    /// entries are the Python layer's objects, whose native objects are their `_sub`,
    /// `_server`, `_raw` (an action server's or a managed node's) and `_raw`
    /// attributes; due timers are fired here (their schedules advanced). Returns the
    /// indices of what is ready and of the timers fired, or None after a wake or at the
    /// limit. An entry whose native object is of
    /// another type (a closed endpoint's stand-in) counts as ready, so the caller finds
    /// out what it is.
    #[allow(clippy::too_many_arguments)]
    fn wait<'py>(
        &self,
        py: Python<'py>,
        subs: &[Bound<'py, PyAny>],
        servers: &[Bound<'py, PyAny>],
        served: &[Bound<'py, PyAny>],
        timers: &[Bound<'py, PyAny>],
        limit: u64,
        signals: bool,
    ) -> PyResult<Option<Ready>> {
        let subs = native(subs, intern!(py, "_sub"))?;
        let servers = native(servers, intern!(py, "_server"))?;
        let served = native(served, intern!(py, "_raw"))?;
        let timers = native(timers, intern!(py, "_raw"))?;
        let mut closed: Ready = Default::default();
        let mut entries: Vec<Entry<'_>> = Vec::new();
        for (i, o) in subs.iter().enumerate() {
            match o.cast::<Subscription>() {
                Ok(s) => entries.push((s.get().inner.get()?, 0, i)),
                Err(_) => closed.0.push(i),
            }
        }
        for (i, o) in servers.iter().enumerate() {
            match o.cast::<Server>() {
                Ok(s) => entries.push((s.get().inner.get()?, 1, i)),
                Err(_) => closed.1.push(i),
            }
        }
        // a managed node lends its services for the wait (a borrow kept here)
        let mut managed = Vec::new();
        for (i, o) in served.iter().enumerate() {
            if let Ok(a) = o.cast::<ActionServerRaw>() {
                for w in a.get().inner.get()?.waitables() {
                    entries.push((w, 2, i));
                }
            } else if let Ok(m) = o.cast::<ManagedNodeRaw>() {
                let w = m.get().inner.get()?.waitables();
                managed.push((w.map_err(err::<LifecycleError>)?, i));
            } else {
                closed.2.push(i);
            }
        }
        for (w, i) in &managed {
            for x in w.list() {
                entries.push((x, 2, *i));
            }
        }
        if any(&closed) {
            return Ok(Some(closed));
        }
        let timers = timers
            .iter()
            .map(|t| Ok(t.cast::<TimerRaw>()?.get()))
            .collect::<PyResult<Vec<&TimerRaw>>>()?;
        for t in &timers {
            *t.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(self.waker.clone());
        }
        let mut set = WaitSet::new();
        for (w, _, _) in &entries {
            set.add(*w).map_err(err::<WaitError>)?;
        }
        set.wake_on(&self.waker).map_err(err::<WaitError>)?;
        let waiting = SameThread((&set, &entries));
        loop {
            let w = &waiting;
            let timers = &timers;
            let outcome = py.detach(move || {
                let (set, entries) = w.0;
                SameThread(self.sleep_until_ready(set, entries, timers, limit, signals))
            });
            // a signal that came meanwhile is handled by the interpreter as soon as this
            // returns, or here between slices
            match outcome.0.map_err(err::<WaitError>)? {
                Outcome::Ready(ready) => return Ok(Some(ready)),
                Outcome::Done => return Ok(None),
                Outcome::Signals => py.check_signals()?,
            }
        }
    }

    /// The GIL-free part of `wait`: sleeps on `set` to the next deadline (a timer's,
    /// `limit`, or with `signals` the next signal check) until something is ready.
    fn sleep_until_ready(
        &self,
        set: &WaitSet<'_>,
        entries: &[Entry<'_>],
        timers: &[&TimerRaw],
        limit: u64,
        signals: bool,
    ) -> Result<Outcome, nerve::WaitError> {
        let mut guard = self.sleep.lock().unwrap_or_else(|e| e.into_inner());
        let me = std::thread::current().id();
        let sleep = match &mut *guard {
            Some((owner, sleep)) if *owner == me => sleep,
            other => &other.insert((me, PreciseSleep::new(self.precision))).1,
        };
        let check_every = SIGNAL_CHECK.as_nanos() as u64;
        loop {
            let now = nerve::mono_ns();
            let ready = take_ready(entries, timers, now);
            if any(&ready) {
                return Ok(Outcome::Ready(ready));
            }
            if now >= limit {
                return Ok(Outcome::Done);
            }
            let timer = timers.iter().map(|t| t.due()).min().unwrap_or(DISARMED);
            let timer_first = timer != DISARMED && timer <= limit;
            // wake before a timer's deadline by the sleeper's margin (0 without spin)
            let wake = match timer_first {
                true => sleep.wake_at(timer, now),
                false => limit,
            };
            let check = match signals {
                true => now.saturating_add(check_every),
                false => u64::MAX,
            };
            let until = wake.min(check);
            if !set.wait_until(until)?.is_empty() {
                continue;
            }
            let woke = nerve::mono_ns();
            if woke < until {
                // only a wake ends the wait early (Executor.shutdown, a stale one: the
                // caller looks at its flags)
                return Ok(Outcome::Done);
            }
            if timer_first && wake <= check {
                sleep.observe(wake, woke, timer);
                let mut t = woke;
                while t < timer {
                    std::hint::spin_loop();
                    t = nerve::mono_ns();
                }
                continue;
            }
            if until == check {
                return Ok(Outcome::Signals);
            }
        }
    }
}

/// The native objects of the Python layer's `list`: their attribute `attr`.
fn native<'py>(
    list: &[Bound<'py, PyAny>],
    attr: &Bound<'py, PyString>,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    list.iter().map(|o| o.getattr(attr)).collect()
}

/// A list of the entries of `list` at the indices `ready`.
fn pick<'py>(
    py: Python<'py>,
    list: &[Bound<'py, PyAny>],
    ready: Vec<usize>,
) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, ready.into_iter().map(|i| &list[i]))
}

/// Whether anything is ready.
fn any(r: &Ready) -> bool {
    !(r.0.is_empty() && r.1.is_empty() && r.2.is_empty() && r.3.is_empty())
}

/// What of `entries` has input, and which of `timers` fired: those due at `now`.
fn take_ready(entries: &[Entry<'_>], timers: &[&TimerRaw], now: u64) -> Ready {
    let mut ready: Ready = Default::default();
    for &(w, list, i) in entries {
        if w.is_ready() {
            let l = match list {
                0 => &mut ready.0,
                1 => &mut ready.1,
                _ => &mut ready.2,
            };
            // an action server has three entries, a managed node five
            if l.last() != Some(&i) {
                l.push(i);
            }
        }
    }
    for (i, t) in timers.iter().enumerate() {
        if t.fire(Some(now)).is_some() {
            ready.3.push(i);
        }
    }
    ready
}
