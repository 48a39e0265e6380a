//! The multi-threaded executor: the library's `nerve::MultiThreadedExecutor` (worker
//! threads, each with its own executor; callback groups choose the worker), for C.
//!
//! Nerve objects stay on the thread that created their context, so a C caller never
//! moves them to a worker: it adds a *setup* to a group, and the setup runs on the
//! worker thread when the executor spins. Each setup gets a context (opened there from
//! the options given at creation) and that worker's executor, both valid during the
//! setup; it creates nodes, ports and callbacks with them. What it moves into the
//! executor (subscribers, servers, timers and their callbacks) lives as long as the
//! worker's executor and is dropped on the worker thread when the spin ends.
//!
//! The multi-threaded executor itself is not an object of a thread's handle table: its
//! handle works from any thread (it is a key into one process-wide registry), so
//! `nerve_mt_executor_stop` may be called from any thread, a callback of a worker
//! included.

use crate::context::{nerve_context_options_t, open, Ctx, NEXT_CONTEXT};
use crate::exec::{clear_callback_message, failed, nerve_drop_callback_t, ExecObj, User};
use crate::handle::{self, Kind};
use crate::status::{c_str, guard, nerve_status_t, nerve_status_t::*, out, Error, Result};
use crate::types::{nerve_context_t, nerve_executor_t};
use nerve::executor::{CallbackError, CallbackGroup, GroupId, MultiStop};
use nerve::{ExecError, Executor, MultiThreadedExecutor};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::{c_char, c_void, CString};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

thread_local! {
    /// A worker thread's registration to be woken when other threads release its
    /// handles (made by its first setup; dropped when the worker ends).
    static WORKER_WAKE: RefCell<Option<handle::WakeGuard>> = const { RefCell::new(None) };
}

/// A multi-threaded executor. Unlike other handles it may be used from any thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_mt_executor_t {
    /// The handle (0: none).
    pub id: u64,
}

/// A callback group of a multi-threaded executor.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_callback_group_t {
    /// The group (0: none).
    pub id: u64,
}

/// How the callbacks of a group may overlap (passed as `int`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum nerve_callback_group_kind_t {
    /// Never two callbacks of the group at once: the whole group runs on one worker.
    NERVE_GROUP_MUTUALLY_EXCLUSIVE = 0,
    /// Callbacks of the group may run in parallel: each setup added to the group goes
    /// to the next worker in turn (one entity's own callbacks still run one at a time,
    /// in order).
    NERVE_GROUP_REENTRANT = 1,
}

/// Runs on a worker thread with a context and that worker's executor (both valid during
/// the call, on that thread): creates nodes, ports and callbacks. Returns 0, or
/// non-zero to fail the spin (message: `nerve_callback_fail`).
#[allow(non_camel_case_types)]
pub type nerve_setup_callback_t = Option<
    unsafe extern "C" fn(user: *mut c_void, ctx: nerve_context_t, exec: nerve_executor_t) -> i32,
>;

/// The options each worker opens its setups' contexts with (owned copies of the
/// caller's strings).
#[derive(Default)]
struct Options {
    given: bool,
    config_path: Option<CString>,
    domain: u32,
    set_domain: bool,
    state_dir: Option<CString>,
    network: i32,
    node_namespace: Option<CString>,
    remap: Option<CString>,
}

impl Options {
    fn copy(o: Option<&nerve_context_options_t>) -> Result<Options> {
        let Some(o) = o else {
            return Ok(Options::default());
        };
        let s = |p: *const c_char, what: &str| -> Result<Option<CString>> {
            if p.is_null() {
                return Ok(None);
            }
            let text = c_str(p, what)?;
            CString::new(text)
                .map(Some)
                .map_err(|_| Error::new(NERVE_ERR_INVALID_ARGUMENT, format!("{what} has a NUL")))
        };
        Ok(Options {
            given: true,
            config_path: s(o.config_path, "options.config_path")?,
            domain: o.domain,
            set_domain: o.set_domain,
            state_dir: s(o.state_dir, "options.state_dir")?,
            network: o.network,
            node_namespace: s(o.node_namespace, "options.node_namespace")?,
            remap: s(o.remap, "options.remap")?,
        })
    }

    /// Opens a context with these options (on the calling thread).
    fn open(&self) -> Result<nerve::Context> {
        if !self.given {
            return open(None);
        }
        let p = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
        let o = nerve_context_options_t {
            config_path: p(&self.config_path),
            domain: self.domain,
            set_domain: self.set_domain,
            state_dir: p(&self.state_dir),
            network: self.network,
            node_namespace: p(&self.node_namespace),
            remap: p(&self.remap),
        };
        open(Some(&o))
    }
}

/// What the lock guards: the library's executor and the groups made so far.
struct Inner {
    exec: MultiThreadedExecutor,
    groups: Vec<GroupId>,
}

/// A multi-threaded executor in the registry.
struct MtObj {
    inner: Mutex<Inner>,
    stop: MultiStop,
    /// This executor's serial (its handle's low bits), stamped into its groups.
    serial: u32,
    options: Arc<Options>,
}

/// The handles' top byte: no kind of the thread tables uses it.
const TAG: u64 = 0xA5 << 56;
/// Live multi-threaded executors at most (the registry stays bounded).
const MAX_LIVE: usize = 1 << 16;
/// Groups of one executor at most.
const MAX_GROUPS: usize = 1 << 16;

static REGISTRY: Mutex<BTreeMap<u64, Arc<MtObj>>> = Mutex::new(BTreeMap::new());
static NEXT: AtomicU64 = AtomicU64::new(1);

fn registry() -> MutexGuard<'static, BTreeMap<u64, Arc<MtObj>>> {
    // a panic while holding it cannot leave the map half-changed (inserts and removes
    // are single calls): the data is still sound
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

fn lookup(h: u64) -> Result<Arc<MtObj>> {
    if h == 0 {
        return Err(Error::new(
            NERVE_ERR_BAD_HANDLE,
            "the multi-threaded executor handle is null",
        ));
    }
    if h & (0xFF << 56) != TAG {
        return Err(Error::new(
            NERVE_ERR_WRONG_KIND,
            format!("{h:#x} is not a multi-threaded executor handle"),
        ));
    }
    registry().get(&h).cloned().ok_or_else(|| {
        Error::new(
            NERVE_ERR_STALE_HANDLE,
            "the multi-threaded executor handle is no longer valid: it was destroyed",
        )
    })
}

/// Locks the executor for a change or a spin, or fails while it spins.
fn lock(obj: &MtObj) -> Result<MutexGuard<'_, Inner>> {
    match obj.inner.try_lock() {
        Ok(g) => Ok(g),
        // a worker's panic is reported by spin; the executor's state is still sound
        Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
        Err(TryLockError::WouldBlock) => Err(Error::new(
            NERVE_ERR_BUSY,
            "the multi-threaded executor is spinning: add groups and setups before spin",
        )),
    }
}

/// Creates a multi-threaded executor of `threads` workers (at least one). Each setup
/// opens its context with `options` (null: from the NERVE_* environment, as
/// `nerve_context_create`). SIGINT and SIGTERM stop `nerve_mt_executor_spin`.
///
/// # Safety
/// `options` is null or valid (its strings are copied); `out_exec` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_mt_executor_create(
    threads: usize,
    options: *const nerve_context_options_t,
    out_exec: *mut nerve_mt_executor_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_exec, "out_exec")?;
        if threads == 0 {
            return Err(Error::new(
                NERVE_ERR_INVALID_ARGUMENT,
                "threads must be at least 1",
            ));
        }
        // SAFETY: null or a valid options struct (the documented contract).
        let options = Options::copy(unsafe { options.as_ref() })?;
        let exec = MultiThreadedExecutor::new(threads);
        // SYNC: Relaxed: a counter of ids, publishing nothing.
        let serial = NEXT.fetch_add(1, Ordering::Relaxed);
        let id = TAG | (serial & 0x00FF_FFFF_FFFF_FFFF);
        let obj = Arc::new(MtObj {
            stop: exec.stopper(),
            inner: Mutex::new(Inner {
                exec,
                groups: Vec::new(),
            }),
            serial: serial as u32,
            options: Arc::new(options),
        });
        let mut reg = registry();
        if reg.len() >= MAX_LIVE {
            return Err(Error::new(
                NERVE_ERR_INVALID_ARGUMENT,
                format!("{MAX_LIVE} multi-threaded executors are live: destroy some"),
            ));
        }
        reg.insert(id, obj);
        slot.id = id;
        Ok(NERVE_OK)
    })
}

/// Whether `nerve_mt_executor_spin` installs SIGINT/SIGTERM handlers and stops on them
/// (default true).
#[no_mangle]
pub extern "C" fn nerve_mt_executor_handle_signals(
    exec: nerve_mt_executor_t,
    on: bool,
) -> nerve_status_t {
    guard(|| {
        let obj = lookup(exec.id)?;
        lock(&obj)?.exec.handle_signals(on);
        Ok(NERVE_OK)
    })
}

/// A new callback group of `kind` (a `nerve_callback_group_kind_t`).
///
/// # Safety
/// `out_group` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_mt_executor_group(
    exec: nerve_mt_executor_t,
    kind: i32,
    out_group: *mut nerve_callback_group_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_group, "out_group")?;
        let kind = match kind {
            0 => CallbackGroup::MutuallyExclusive,
            1 => CallbackGroup::Reentrant,
            k => {
                return Err(Error::new(
                    NERVE_ERR_INVALID_ARGUMENT,
                    format!(
                        "kind must be NERVE_GROUP_MUTUALLY_EXCLUSIVE (0) or \
                         NERVE_GROUP_REENTRANT (1), not {k}"
                    ),
                ))
            }
        };
        let obj = lookup(exec.id)?;
        let mut g = lock(&obj)?;
        if g.groups.len() >= MAX_GROUPS {
            return Err(Error::new(
                NERVE_ERR_INVALID_ARGUMENT,
                format!("a multi-threaded executor has at most {MAX_GROUPS} groups"),
            ));
        }
        let id = g.exec.group(kind);
        g.groups.push(id);
        slot.id = (u64::from(obj.serial) << 32) | g.groups.len() as u64;
        Ok(NERVE_OK)
    })
}

/// The setup's `user` and its destructor, sent to the worker that runs it.
struct SendUser(User);

// SAFETY: the caller of `nerve_mt_executor_add` promises that `user` may be used and
// freed on another thread (the documented contract); nothing else in it is shared.
unsafe impl Send for SendUser {}

/// A setup's failure that is not its callback's (opening the context, the table).
#[derive(Debug)]
struct SetupFailed(String);

impl std::fmt::Display for SetupFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetupFailed {}

/// Runs one C setup on this worker: opens its context, lends it and the worker's
/// executor to the setup as handles of this thread's table, then takes both back.
fn run_setup(
    ex: &mut Executor,
    options: &Options,
    cb: unsafe extern "C" fn(*mut c_void, nerve_context_t, nerve_executor_t) -> i32,
    user: &User,
) -> std::result::Result<(), CallbackError> {
    let setup_err = |e: Error| -> CallbackError {
        Box::new(SetupFailed(format!(
            "the setup of a multi-threaded executor failed: {}",
            e.message
        )))
    };
    // the worker's objects destroyed on other threads are released while it spins (once
    // per worker thread: its executor lives as long as the thread)
    if WORKER_WAKE.with(|w| w.borrow().is_none()) {
        ex.on_request(
            "deferred releases",
            handle::deferred_requested,
            handle::drain_deferred,
        )
        .map_err(|e| setup_err(Error::new(NERVE_ERR_EXEC, e.to_string())))?;
        let wake = handle::wake_on_release(ex.handle()).map_err(setup_err)?;
        WORKER_WAKE.with(|w| *w.borrow_mut() = Some(wake));
    }
    let ctx = options.open().map_err(setup_err)?;
    // SYNC: Relaxed: an id, publishing nothing.
    let ctx_id = NEXT_CONTEXT.fetch_add(1, Ordering::Relaxed);
    let ctx_h = handle::insert(Kind::Context, ctx_id, Ctx(Rc::new(ctx))).map_err(setup_err)?;
    // the worker's executor is lent to the table for the setup, then put back: the
    // library's worker spins it (its stop handle is registered with the stopper)
    let stop = Rc::new(ex.handle());
    let cell = Rc::new(RefCell::new(std::mem::replace(ex, Executor::new())));
    let exec_h = handle::insert(
        Kind::Executor,
        ctx_id,
        ExecObj {
            exec: cell.clone(),
            stop,
            _wake: None,
        },
    );
    let code = match exec_h {
        Ok(h) => {
            clear_callback_message();
            // SAFETY: the registered setup with its own `user`; both handles are live
            // on this thread for the call.
            let code = unsafe {
                cb(
                    user.ptr(),
                    nerve_context_t { id: ctx_h },
                    nerve_executor_t { id: h },
                )
            };
            // already released by the setup is fine
            let _ = handle::release(h, Kind::Executor);
            Ok(code)
        }
        Err(e) => Err(e),
    };
    let _ = handle::release(ctx_h, Kind::Context);
    match Rc::try_unwrap(cell) {
        Ok(c) => *ex = c.into_inner(),
        Err(_) => {
            return Err(Box::new(SetupFailed(
                "the setup of a multi-threaded executor kept its executor in use".into(),
            )))
        }
    }
    match code.map_err(setup_err)? {
        0 => Ok(()),
        c => Err(failed("the setup of a multi-threaded executor", c)),
    }
}

/// Adds a setup to `group`: when the executor spins, `setup` runs on the worker thread
/// the group chooses, with a context and that worker's executor, and creates nodes,
/// ports and callbacks there. `drop` (nullable) frees `user` after the setup ran (on the
/// worker) or, if it never runs, when the executor is destroyed (on that thread).
///
/// # Safety
/// `setup` is a valid function; `user` is whatever it expects and may be used and freed
/// on another thread; `drop` is null or frees `user`.
#[no_mangle]
pub unsafe extern "C" fn nerve_mt_executor_add(
    exec: nerve_mt_executor_t,
    group: nerve_callback_group_t,
    setup: nerve_setup_callback_t,
    user: *mut c_void,
    drop: nerve_drop_callback_t,
) -> nerve_status_t {
    guard(|| {
        let user = SendUser(User { ptr: user, drop });
        let cb = setup.ok_or_else(|| Error::new(NERVE_ERR_NULL, "setup is null"))?;
        let obj = lookup(exec.id)?;
        let mut g = lock(&obj)?;
        let index = (group.id & 0xFFFF_FFFF) as usize;
        if group.id >> 32 != u64::from(obj.serial) || index == 0 || index > g.groups.len() {
            return Err(Error::new(
                NERVE_ERR_INVALID_ARGUMENT,
                format!(
                    "{:#x} is not a group of this multi-threaded executor",
                    group.id
                ),
            ));
        }
        let gid = g.groups[index - 1];
        let options = obj.options.clone();
        g.exec.add(gid, move |ex: &mut Executor| {
            let user = user;
            run_setup(ex, &options, cb, &user.0).map_err(ExecError::Work)
        });
        Ok(NERVE_OK)
    })
}

/// Runs every worker until `nerve_mt_executor_stop`, `nerve_shutdown_request` or
/// SIGINT / SIGTERM (each drains queued input within `drain_ns`), then returns the first
/// error of any worker (a setup's or a callback's: `NERVE_ERR_CALLBACK` with its
/// message) after all have ended. Blocks the calling thread; setups added before run
/// once, on the workers.
#[no_mangle]
pub extern "C" fn nerve_mt_executor_spin(
    exec: nerve_mt_executor_t,
    drain_ns: u64,
) -> nerve_status_t {
    guard(|| {
        let obj = lookup(exec.id)?;
        let mut g = lock(&obj)?;
        let drain = Duration::from_nanos(drain_ns.min(3_600_000_000_000));
        g.exec.spin(drain).map_err(crate::exec::exec_err)?;
        Ok(NERVE_OK)
    })
}

/// Stops every worker of a spinning executor (any thread, its callbacks included).
/// Sticky: a stopped executor's later spins return at once.
#[no_mangle]
pub extern "C" fn nerve_mt_executor_stop(exec: nerve_mt_executor_t) -> nerve_status_t {
    guard(|| {
        lookup(exec.id)?.stop.stop();
        Ok(NERVE_OK)
    })
}

/// Destroys a multi-threaded executor (any thread). A spin in progress is stopped and
/// returns; setups that never ran are dropped (their `drop` runs).
#[no_mangle]
pub extern "C" fn nerve_mt_executor_destroy(exec: nerve_mt_executor_t) -> nerve_status_t {
    guard(|| {
        let obj = lookup(exec.id)?;
        registry().remove(&exec.id);
        obj.stop.stop();
        Ok(NERVE_OK)
    })
}
