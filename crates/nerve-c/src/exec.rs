//! The executor: C callbacks of subscribers, servers and timers run from one wait (the
//! library's `nerve::Executor`: futex wait on the doorbells, precise timer deadlines).
//!
//! A callback returns 0 for success; anything else ends the spin with
//! `NERVE_ERR_CALLBACK` and the message set by `nerve_callback_fail` (the executor stays
//! usable). A server callback's failure is sent to the caller instead, and the spin goes
//! on. Callbacks may call any other function of the ABI, but not spin their own executor
//! (`NERVE_ERR_BUSY`).

use crate::context::Ctx;
use crate::handle::{self, Kind, Stored};
use crate::param::ParamsObj;
use crate::service::ServerObj;
use crate::status::{c_str, guard, nerve_status_t, nerve_status_t::*, out, Error, Result};
use crate::topic::{nerve_sample_view_t, view_of, Sub};
use crate::types::{
    nerve_context_t, nerve_executor_t, nerve_params_t, nerve_server_t, nerve_subscriber_t,
    nerve_timer_t,
};
use nerve::executor::CallbackError;
use nerve::{ExecError, Executor, ExecutorHandle, Overrun, TimerHandle};
use std::cell::RefCell;
use std::ffi::{c_char, c_void};
use std::rc::Rc;
use std::time::Duration;

/// Called with each sample (the view is valid during the call). Returns 0, or
/// non-zero to fail the spin.
#[allow(non_camel_case_types)]
pub type nerve_sample_callback_t =
    Option<unsafe extern "C" fn(user: *mut c_void, sample: *const nerve_sample_view_t) -> i32>;

/// Called with each request: writes the response payload into `response` (at most
/// `capacity` bytes) and its length into `response_len`. Returns 0; non-zero fails
/// the call with the message set by `nerve_callback_fail`.
#[allow(non_camel_case_types)]
pub type nerve_request_callback_t = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        request: *const nerve_sample_view_t,
        response: *mut c_void,
        capacity: usize,
        response_len: *mut usize,
    ) -> i32,
>;

/// One firing of a timer.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct nerve_tick_t {
    /// The deadline this firing was for (the timer's clock: monotonic ns, or simulation
    /// ns on a simulation clock).
    pub deadline_ns: u64,
    /// When the firing began (the same clock; `fired_ns - deadline_ns` is its lateness).
    pub fired_ns: u64,
    /// Firings so far, this one included.
    pub count: u64,
    /// Ticks skipped just before this one because a callback overran.
    pub skipped: u64,
    /// Robot time when the firing began, ns since the Unix epoch: the executor's
    /// context's clock (`nerve_context_now`; simulation time when it runs on one).
    pub time_ns: i64,
}

/// Called at each firing of a timer. Returns 0, or non-zero to fail the spin.
#[allow(non_camel_case_types)]
pub type nerve_timer_callback_t =
    Option<unsafe extern "C" fn(user: *mut c_void, tick: *const nerve_tick_t) -> i32>;

/// Frees a callback's `user` data when the executor drops the callback (may be null).
#[allow(non_camel_case_types)]
pub type nerve_drop_callback_t = Option<unsafe extern "C" fn(user: *mut c_void)>;

thread_local! {
    static CALLBACK_MESSAGE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Records the message of the failing callback (see `nerve_callback_fail`).
pub(crate) fn set_callback_message(text: &str) {
    CALLBACK_MESSAGE.with(|m| *m.borrow_mut() = Some(text.to_string()));
}

/// Clears the recorded callback message.
pub(crate) fn clear_callback_message() {
    CALLBACK_MESSAGE.with(|m| m.borrow_mut().take());
}

/// Takes the recorded callback message.
pub(crate) fn take_callback_message() -> Option<String> {
    CALLBACK_MESSAGE.with(|m| m.borrow_mut().take())
}

/// A callback's failure, as the executor reports it.
#[derive(Debug)]
struct CallbackFailed(String);

impl std::fmt::Display for CallbackFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CallbackFailed {}

pub(crate) fn failed(what: &str, code: i32) -> CallbackError {
    let msg = take_callback_message().unwrap_or_else(|| format!("returned {code}"));
    Box::new(CallbackFailed(format!(
        "the callback of {what} failed: {msg}"
    )))
}

/// A callback's `user` pointer and its destructor: dropped with the callback.
pub(crate) struct User {
    pub(crate) ptr: *mut c_void,
    pub(crate) drop: nerve_drop_callback_t,
}

impl User {
    /// The pointer. A method, not the field: a `move` closure calling it captures the
    /// whole `User` (Rust 2021 closures capture `user.ptr` alone, a `Copy` field, and
    /// would drop `User`, freeing the C++ callback, when the registering call returns).
    pub(crate) fn ptr(&self) -> *mut c_void {
        self.ptr
    }
}

impl Drop for User {
    fn drop(&mut self) {
        if let Some(d) = self.drop {
            // SAFETY: the caller registered `drop` to free `ptr`, called once, here.
            unsafe { d(self.ptr) }
        }
    }
}

/// An executor in the table.
#[derive(Clone)]
pub(crate) struct ExecObj {
    pub(crate) exec: Rc<RefCell<Executor>>,
    pub(crate) stop: Rc<ExecutorHandle>,
    /// Woken when another thread releases one of this thread's handles (dropped last:
    /// unregisters the waker). None for a multi-threaded executor's worker, lent to a
    /// setup: its waker lives with the worker thread (`mt.rs`).
    pub(crate) _wake: Option<Rc<handle::WakeGuard>>,
}

/// A timer in the table.
pub(crate) struct TimerObj(TimerHandle);

boxed!(ExecObj, TimerObj);

pub(crate) fn exec_err(e: ExecError) -> Error {
    match e {
        ExecError::Work(w) if w.is::<CallbackFailed>() => {
            Error::new(NERVE_ERR_CALLBACK, w.to_string())
        }
        other => Error::new(NERVE_ERR_EXEC, other.to_string()),
    }
}

/// Borrows the executor for `f`, or fails when a callback of it is calling back.
pub(crate) fn with_exec<R>(
    exec: nerve_executor_t,
    f: impl FnOnce(&mut Executor, u32) -> Result<R>,
) -> Result<R> {
    let (e, ctx) = handle::get::<ExecObj>(exec.id, Kind::Executor)?;
    let mut ex = e.exec.try_borrow_mut().map_err(|_| {
        Error::new(
            NERVE_ERR_BUSY,
            "the executor is spinning: its own callbacks cannot change or spin it",
        )
    })?;
    f(&mut ex, ctx)
}

/// Creates an executor for objects of `ctx`. SIGINT and SIGTERM stop `nerve_executor_spin`.
///
/// # Safety
/// `out_exec` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_executor_create(
    ctx: nerve_context_t,
    out_exec: *mut nerve_executor_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_exec, "out_exec")?;
        let ctx_id = handle::context_of(ctx.id, Kind::Context)?;
        let (c, _) = handle::get::<Ctx>(ctx.id, Kind::Context)?;
        let mut exec = Executor::new();
        exec.handle_signals(true);
        // timers run on the context's clock (simulation time when it runs on one), not
        // on the process clock, which is the first context's
        exec.use_clock(c.0.clock().clone());
        // objects destroyed on other threads are released while this executor spins
        exec.on_request(
            "deferred releases",
            handle::deferred_requested,
            handle::drain_deferred,
        )
        .map_err(exec_err)?;
        let wake = Rc::new(handle::wake_on_release(exec.handle())?);
        let stop = Rc::new(exec.handle());
        slot.id = handle::insert(
            Kind::Executor,
            ctx_id,
            ExecObj {
                exec: Rc::new(RefCell::new(exec)),
                stop,
                _wake: Some(wake),
            },
        )?;
        Ok(NERVE_OK)
    })
}

/// Releases an executor and everything added to it (their `drop` callbacks run). Any
/// thread may call it (the release is then done by the owner, as for every destroy).
#[no_mangle]
pub extern "C" fn nerve_executor_destroy(exec: nerve_executor_t) -> nerve_status_t {
    guard(|| handle::release(exec.id, Kind::Executor).map(|_| NERVE_OK))
}

/// Takes the object `h` (of `kind`, from context `ctx`) out of the table for an executor
/// to own: its handle is released.
pub(crate) fn move_in<T: Stored, U>(
    h: u64,
    kind: Kind,
    ctx: u32,
    inner: impl FnOnce(T) -> Rc<U>,
) -> Result<U> {
    handle::same_context(
        ctx,
        handle::context_of(h, kind)?,
        &format!("adding a {} to an executor", kind.name()),
    )?;
    let (v, _) = handle::remove::<T>(h, kind)?;
    Rc::try_unwrap(inner(v))
        .map_err(|_| Error::new(NERVE_ERR_BUSY, format!("the {} is in use", kind.name())))
}

/// Moves a subscriber into the executor: `callback` runs with each sample. The
/// subscriber handle is released (the executor owns it now).
///
/// # Safety
/// `callback` is a valid function; `user` is whatever it expects; `drop` is null or
/// frees `user`.
#[no_mangle]
pub unsafe extern "C" fn nerve_executor_add_subscriber(
    exec: nerve_executor_t,
    sub: nerve_subscriber_t,
    callback: nerve_sample_callback_t,
    user: *mut c_void,
    drop: nerve_drop_callback_t,
) -> nerve_status_t {
    guard(|| {
        let user = User { ptr: user, drop };
        let cb = callback.ok_or_else(|| Error::new(NERVE_ERR_NULL, "callback is null"))?;
        with_exec(exec, |ex, ctx| {
            let s = move_in(sub.id, Kind::Subscriber, ctx, |s: Sub| s.0)?;
            let topic = s.topic().to_string();
            ex.subscribe_raw(s, move |sample| {
                let view = view_of(sample.bytes(), sample.elems(), sample.header());
                clear_callback_message();
                // SAFETY: the registered callback with its own `user`; `view` lives
                // for the call.
                match unsafe { cb(user.ptr(), &view) } {
                    0 => Ok(()),
                    code => Err(failed(&format!("a subscriber of {topic}"), code)),
                }
            })
            .map_err(exec_err)?;
            Ok(NERVE_OK)
        })
    })
}

/// Moves a server into the executor: `callback` answers each request into a buffer of
/// `response_capacity` bytes. The server handle is released.
///
/// # Safety
/// As `nerve_executor_add_subscriber`.
#[no_mangle]
pub unsafe extern "C" fn nerve_executor_add_server(
    exec: nerve_executor_t,
    server: nerve_server_t,
    response_capacity: usize,
    callback: nerve_request_callback_t,
    user: *mut c_void,
    drop: nerve_drop_callback_t,
) -> nerve_status_t {
    guard(|| {
        let user = User { ptr: user, drop };
        let cb = callback.ok_or_else(|| Error::new(NERVE_ERR_NULL, "callback is null"))?;
        with_exec(exec, |ex, ctx| {
            let s = move_in(server.id, Kind::Server, ctx, |s: ServerObj| s.0)?;
            let name = s.name().to_string();
            let mut buf = vec![0u64; response_capacity.div_ceil(8).max(1)];
            ex.serve_raw(s, move |req| {
                let view = crate::service::request_view(req);
                let mut len = 0usize;
                clear_callback_message();
                // SAFETY: the registered callback with its own `user`; `view` and the
                // response buffer (`response_capacity` bytes, 8-byte aligned) live for
                // the call.
                let code = unsafe {
                    cb(user.ptr(), &view, buf.as_mut_ptr().cast(), response_capacity, &mut len)
                };
                if code != 0 {
                    return Err(failed(&format!("the server of {name}"), code));
                }
                if len > response_capacity {
                    return Err(format!(
                        "the server of {name} wrote a {len}-byte response into {response_capacity} bytes"
                    )
                    .into());
                }
                let bytes = &nerve_bytes(&buf)[..len];
                req.reply_bytes(bytes).map_err(|e| Box::new(e) as CallbackError)
            })
            .map_err(exec_err)?;
            Ok(NERVE_OK)
        })
    })
}

fn nerve_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: u64 words reinterpreted as bytes: same memory, alignment 1 <= 8, no
    // invalid bit patterns for u8.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), words.len() * 8) }
}

fn add_timer(
    exec: nerve_executor_t,
    name: *const c_char,
    callback: nerve_timer_callback_t,
    user: User,
    out_timer: *mut nerve_timer_t,
    make: impl FnOnce(
        &mut Executor,
        &str,
        Box<dyn FnMut(&nerve::Tick) -> std::result::Result<(), CallbackError>>,
    ) -> std::result::Result<(nerve::executor::EntityId, TimerHandle), ExecError>,
) -> Result<nerve_status_t> {
    let slot = out(out_timer, "out_timer")?;
    let name = c_str(name, "name")?.to_string();
    let cb = callback.ok_or_else(|| Error::new(NERVE_ERR_NULL, "callback is null"))?;
    with_exec(exec, |ex, ctx| {
        let what = format!("timer {name}");
        let clock = ex.clock().clone();
        let (_, th) = make(
            ex,
            &name,
            Box::new(move |t| {
                let tick = nerve_tick_t {
                    deadline_ns: t.deadline_ns,
                    fired_ns: t.fired_ns,
                    count: t.count,
                    skipped: t.skipped,
                    time_ns: clock.now_ns(),
                };
                clear_callback_message();
                // SAFETY: the registered callback with its own `user`.
                match unsafe { cb(user.ptr(), &tick) } {
                    0 => Ok(()),
                    code => Err(failed(&what, code)),
                }
            }),
        )
        .map_err(exec_err)?;
        slot.id = handle::insert(Kind::Timer, ctx, TimerObj(th))?;
        Ok(NERVE_OK)
    })
}

/// Adds a periodic timer: `callback` every `period_ns` on an absolute grid starting one
/// period from now (ticks missed by an overrunning callback are skipped and counted).
///
/// # Safety
/// As `nerve_executor_add_subscriber`; `name` is NUL-terminated; `out_timer` writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_executor_add_timer(
    exec: nerve_executor_t,
    name: *const c_char,
    period_ns: u64,
    callback: nerve_timer_callback_t,
    user: *mut c_void,
    drop: nerve_drop_callback_t,
    out_timer: *mut nerve_timer_t,
) -> nerve_status_t {
    guard(|| {
        let user = User { ptr: user, drop };
        if period_ns == 0 {
            return Err(Error::new(
                NERVE_ERR_INVALID_ARGUMENT,
                "period_ns must be > 0",
            ));
        }
        add_timer(exec, name, callback, user, out_timer, |ex, name, cb| {
            ex.try_timer(name, bounded(period_ns), Overrun::Skip, cb)
        })
    })
}

/// Adds a one-shot timer, armed `after_ns` from now (0: disarmed until
/// `nerve_timer_arm`).
///
/// # Safety
/// As `nerve_executor_add_timer`.
#[no_mangle]
pub unsafe extern "C" fn nerve_executor_add_one_shot(
    exec: nerve_executor_t,
    name: *const c_char,
    after_ns: u64,
    callback: nerve_timer_callback_t,
    user: *mut c_void,
    drop: nerve_drop_callback_t,
    out_timer: *mut nerve_timer_t,
) -> nerve_status_t {
    guard(|| {
        let user = User { ptr: user, drop };
        let after = (after_ns > 0).then(|| bounded(after_ns));
        add_timer(exec, name, callback, user, out_timer, |ex, name, cb| {
            ex.try_one_shot(name, after, cb)
        })
    })
}

/// Arms a timer `after_ns` from now (a periodic timer's grid restarts there).
#[no_mangle]
pub extern "C" fn nerve_timer_arm(timer: nerve_timer_t, after_ns: u64) -> nerve_status_t {
    guard(|| {
        handle::with(timer.id, Kind::Timer, |t: &TimerObj, _| {
            t.0.arm_after(bounded(after_ns))
        })?;
        Ok(NERVE_OK)
    })
}

/// Disarms a timer until armed again.
#[no_mangle]
pub extern "C" fn nerve_timer_cancel(timer: nerve_timer_t) -> nerve_status_t {
    guard(|| {
        handle::with(timer.id, Kind::Timer, |t: &TimerObj, _| t.0.cancel())?;
        Ok(NERVE_OK)
    })
}

/// A timer's firings and skipped ticks so far.
///
/// # Safety
/// `fired` and `skipped` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_timer_counts(
    timer: nerve_timer_t,
    fired: *mut u64,
    skipped: *mut u64,
) -> nerve_status_t {
    guard(|| {
        let (f, s) = handle::with(timer.id, Kind::Timer, |t: &TimerObj, _| {
            (t.0.fired(), t.0.skipped())
        })?;
        // SAFETY: null or writable (the documented contract).
        unsafe {
            if let Some(o) = fired.as_mut() {
                *o = f;
            }
            if let Some(o) = skipped.as_mut() {
                *o = s;
            }
        }
        Ok(NERVE_OK)
    })
}

/// Releases a timer handle (the timer stays on its executor; cancel it to stop it).
#[no_mangle]
pub extern "C" fn nerve_timer_destroy(timer: nerve_timer_t) -> nerve_status_t {
    guard(|| handle::release(timer.id, Kind::Timer).map(|_| NERVE_OK))
}

/// Answers the node's remote parameter requests (`nerve param`) on this executor.
#[no_mangle]
pub extern "C" fn nerve_executor_add_params(
    exec: nerve_executor_t,
    params: nerve_params_t,
) -> nerve_status_t {
    guard(|| {
        let (p, pctx) = handle::get::<ParamsObj>(params.id, Kind::Parameters)?;
        with_exec(exec, |ex, ctx| {
            handle::same_context(ctx, pctx, "adding parameters to an executor")?;
            ex.parameters(&p.0).map_err(exec_err)?;
            Ok(NERVE_OK)
        })
    })
}

/// A duration from C, capped at a century (the executor adds it to the clock).
fn bounded(ns: u64) -> Duration {
    Duration::from_nanos(ns.min(100 * 365 * 86_400 * 1_000_000_000))
}

/// Waits up to `timeout_ns` for work and runs what is ready; `ran` (nullable) gets the
/// callbacks run.
///
/// # Safety
/// `ran` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_executor_spin_once(
    exec: nerve_executor_t,
    timeout_ns: u64,
    ran: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let n = with_exec(exec, |ex, _| {
            ex.spin_once(bounded(timeout_ns)).map_err(exec_err)
        })?;
        // SAFETY: null or writable (the documented contract).
        if let Some(r) = unsafe { ran.as_mut() } {
            *r = n;
        }
        Ok(NERVE_OK)
    })
}

/// Runs callbacks for `duration_ns` (or until stopped).
#[no_mangle]
pub extern "C" fn nerve_executor_spin_for(
    exec: nerve_executor_t,
    duration_ns: u64,
) -> nerve_status_t {
    guard(|| {
        with_exec(exec, |ex, _| {
            ex.spin_for(bounded(duration_ns)).map_err(exec_err)
        })?;
        Ok(NERVE_OK)
    })
}

/// Runs callbacks until `nerve_executor_stop`, `nerve_shutdown_request` or SIGINT /
/// SIGTERM, then drains queued input (bounded) and returns.
#[no_mangle]
pub extern "C" fn nerve_executor_spin(exec: nerve_executor_t) -> nerve_status_t {
    guard(|| {
        with_exec(exec, |ex, _| ex.spin().map_err(exec_err))?;
        Ok(NERVE_OK)
    })
}

/// Stops a spinning executor (from one of its callbacks, or between spins). A stopped
/// executor's spins return at once.
#[no_mangle]
pub extern "C" fn nerve_executor_stop(exec: nerve_executor_t) -> nerve_status_t {
    guard(|| {
        handle::with(exec.id, Kind::Executor, |e: &ExecObj, _| e.stop.stop())?;
        Ok(NERVE_OK)
    })
}

/// Asks every executor of the process to stop, as SIGTERM does (any thread).
#[no_mangle]
pub extern "C" fn nerve_shutdown_request() {
    nerve::shutdown::request();
}

/// Whether a shutdown was requested (SIGINT, SIGTERM or `nerve_shutdown_request`).
#[no_mangle]
pub extern "C" fn nerve_shutdown_requested() -> bool {
    nerve::shutdown::requested()
}

/// Installs Nerve's SIGINT/SIGTERM handlers (the first signal requests a shutdown).
#[no_mangle]
pub extern "C" fn nerve_shutdown_install_handlers() {
    nerve::shutdown::install();
}
