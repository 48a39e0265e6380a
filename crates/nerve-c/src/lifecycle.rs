//! Managed (lifecycle) nodes: ROS 2's states and transitions with C callbacks
//! (`nerve-lifecycle`); served on an executor or by `nerve_managed_handle_pending`.

use crate::context::NodeObj;
use crate::exec::{exec_err, nerve_drop_callback_t, with_exec};
use crate::handle::{self, Kind};
use crate::status::{c_str, err, guard, nerve_status_t, nerve_status_t::*, out, Error};
use crate::types::nerve_executor_t;
use nerve_lifecycle::{CallbackReturn, ManagedNode, State, TransitionError};
use std::cell::RefCell;
use std::ffi::{c_char, c_void};

/// A managed (lifecycle) node.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_managed_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A transition callback's answer: the transition reaches its goal.
pub const NERVE_LIFECYCLE_SUCCESS: i32 = 0;
/// A transition callback's answer: refused, back to the state it started from.
pub const NERVE_LIFECYCLE_FAILURE: i32 = 1;
/// A transition callback's answer (and any other value): error processing
/// (`on_error`), then unconfigured or finalized.
pub const NERVE_LIFECYCLE_ERROR: i32 = 2;

/// A transition callback: gets `user` and the id of the state the transition started
/// from (ROS 2's `lifecycle_msgs/State` ids); returns `NERVE_LIFECYCLE_SUCCESS`,
/// `NERVE_LIFECYCLE_FAILURE` or `NERVE_LIFECYCLE_ERROR`.
#[allow(non_camel_case_types)]
pub type nerve_lifecycle_callback_t =
    Option<unsafe extern "C" fn(user: *mut c_void, previous_state: u8) -> i32>;

thread_local! {
    /// What the failing callbacks of the transition running last said
    /// (`nerve_callback_fail`): its hook's and `error`'s, reported by
    /// `nerve_managed_trigger`.
    static REASONS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// A managed node in the table.
#[derive(Clone)]
pub(crate) struct ManagedObj(pub(crate) ManagedNode);

boxed!(ManagedObj);

/// User data of a callback, freed by its `drop` when the callback is dropped.
struct User {
    ptr: *mut c_void,
    drop: nerve_drop_callback_t,
}

impl User {
    fn ptr(&self) -> *mut c_void {
        self.ptr
    }
}

impl Drop for User {
    fn drop(&mut self) {
        if let Some(d) = self.drop {
            // SAFETY: the caller registered `drop` to free `ptr`; called once, here.
            unsafe { d(self.ptr) }
        }
    }
}

fn with_managed<R>(
    m: nerve_managed_t,
    f: impl FnOnce(&ManagedNode) -> crate::status::Result<R>,
) -> crate::status::Result<R> {
    let (o, _) = handle::get::<ManagedObj>(m.id, Kind::Managed)?;
    f(&o.0)
}

/// Makes `node` managed: opens `<node>/change_state`, `get_state`,
/// `get_available_states`, `get_available_transitions`, `get_transition_graph` and
/// `<node>/transition_event`.
/// It starts unconfigured.
///
/// # Safety
/// `out_managed` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_managed_create(
    node: crate::types::nerve_node_t,
    out_managed: *mut nerve_managed_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_managed, "out_managed")?;
        let (n, ctx) = handle::get::<NodeObj>(node.id, Kind::Node)?;
        let m = ManagedNode::create(&n.0).map_err(err(NERVE_ERR_SERVICE))?;
        slot.id = handle::insert(Kind::Managed, ctx, ManagedObj(m))?;
        Ok(NERVE_OK)
    })
}

/// Releases a managed node handle (its services go when nothing else holds them: an
/// executor it was added to keeps serving it).
#[no_mangle]
pub extern "C" fn nerve_managed_destroy(managed: nerve_managed_t) -> nerve_status_t {
    guard(|| handle::release(managed.id, Kind::Managed).map(|_| NERVE_OK))
}

/// Sets the callback of `hook` (`configure`, `activate`, `deactivate`, `cleanup`,
/// `shutdown` or `error`), replacing the one before (whose `drop` runs). A null
/// callback means success.
///
/// # Safety
/// `hook` is NUL-terminated; `callback` and `drop` are called on this thread with `user`.
#[no_mangle]
pub unsafe extern "C" fn nerve_managed_on(
    managed: nerve_managed_t,
    hook: *const c_char,
    callback: nerve_lifecycle_callback_t,
    user: *mut c_void,
    drop: nerve_drop_callback_t,
) -> nerve_status_t {
    guard(|| {
        let user = User { ptr: user, drop };
        let hook = c_str(hook, "hook")?;
        let name = hook.to_string();
        let f = move |from: State| {
            let Some(cb) = callback else {
                return CallbackReturn::Success;
            };
            if name != "error" {
                // a transition starts with its own hook: earlier reasons are stale
                REASONS.with(|r| r.borrow_mut().clear());
            }
            crate::exec::clear_callback_message();
            // SAFETY: the caller's contract: callable with its user data on this thread.
            let result = match unsafe { cb(user.ptr(), from.id()) } {
                NERVE_LIFECYCLE_SUCCESS => CallbackReturn::Success,
                NERVE_LIFECYCLE_FAILURE => CallbackReturn::Failure,
                _ => CallbackReturn::Error,
            };
            let message = crate::exec::take_callback_message();
            if let (false, Some(m)) = (result == CallbackReturn::Success, message) {
                REASONS.with(|r| r.borrow_mut().push(format!("{name} callback: {m}")));
            }
            result
        };
        with_managed(managed, |m| {
            match hook {
                "configure" => m.on_configure(f),
                "activate" => m.on_activate(f),
                "deactivate" => m.on_deactivate(f),
                "cleanup" => m.on_cleanup(f),
                "shutdown" => m.on_shutdown(f),
                "error" => m.on_error(f),
                other => {
                    return Err(Error::new(
                        NERVE_ERR_INVALID_ARGUMENT,
                        format!(
                            "no lifecycle callback {other:?} (configure, activate, deactivate, \
                             cleanup, shutdown, error)"
                        ),
                    ))
                }
            }
            Ok(NERVE_OK)
        })
    })
}

/// The node's state (ROS 2's `lifecycle_msgs/State` id: 1 unconfigured, 2 inactive,
/// 3 active, 4 finalized, 10-15 while a transition runs).
///
/// # Safety
/// `out_state` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_managed_state(
    managed: nerve_managed_t,
    out_state: *mut u8,
) -> nerve_status_t {
    guard(|| {
        let o = out(out_state, "out_state")?;
        *o = with_managed(managed, |m| Ok(m.state().id()))?;
        Ok(NERVE_OK)
    })
}

/// The node's state id, as `nerve_managed_state`, returned directly: the fast path
/// of a gate checked on every publish (one handle check and one relaxed atomic load; no
/// status, no out pointer). A null, released or foreign handle reads 0 (unknown), so a
/// gate on it stays shut.
#[no_mangle]
pub extern "C" fn nerve_managed_current_state(managed: nerve_managed_t) -> u8 {
    // no unwind crosses the ABI (the thread's table may be gone at thread exit)
    std::panic::catch_unwind(|| {
        handle::with(managed.id, Kind::Managed, |m: &ManagedObj, _| {
            m.0.state().id()
        })
    })
    .ok()
    .and_then(|r| r.ok())
    .unwrap_or(0)
}

/// Runs the transition `label` (`configure`, `activate`, `deactivate`, `cleanup`,
/// `shutdown`) now; `out_state` (nullable) gets the state reached. Invalid from the
/// current state: `NERVE_ERR_INVALID_ARGUMENT`; asked from inside a transition:
/// `NERVE_ERR_BUSY`; its callback failed or erred: `NERVE_ERR_CALLBACK` (the state is
/// still written). The message names the node, the state and the transition, and
/// carries what the failing callbacks said with `nerve_callback_fail` (a C++ callback's
/// exception message).
///
/// # Safety
/// `label` is NUL-terminated; `out_state` null or writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_managed_trigger(
    managed: nerve_managed_t,
    label: *const c_char,
    out_state: *mut u8,
) -> nerve_status_t {
    guard(|| {
        let label = c_str(label, "label")?;
        let (m, _) = handle::get::<ManagedObj>(managed.id, Kind::Managed)?;
        REASONS.with(|r| r.borrow_mut().clear());
        let result = m.0.trigger_label(label);
        let reasons = REASONS.with(|r| std::mem::take(&mut *r.borrow_mut()));
        // SAFETY: null or writable (the documented contract).
        if let Some(o) = unsafe { out_state.as_mut() } {
            *o = m.0.state().id();
        }
        match result {
            Ok(_) => Ok(NERVE_OK),
            Err(e @ TransitionError::Invalid { .. }) => {
                Err(Error::new(NERVE_ERR_INVALID_ARGUMENT, e.to_string()))
            }
            Err(e @ TransitionError::Busy { .. }) => Err(Error::new(NERVE_ERR_BUSY, e.to_string())),
            Err(e) if reasons.is_empty() => Err(Error::new(NERVE_ERR_CALLBACK, e.to_string())),
            Err(e) => Err(Error::new(
                NERVE_ERR_CALLBACK,
                format!("{e} ({})", reasons.join("; ")),
            )),
        }
    })
}

/// Answers the lifecycle requests waiting now (when not on an executor); `out_count`
/// (nullable) gets how many.
///
/// # Safety
/// `out_count` null or writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_managed_handle_pending(
    managed: nerve_managed_t,
    out_count: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let (m, _) = handle::get::<ManagedObj>(managed.id, Kind::Managed)?;
        let n = m.0.handle_pending().map_err(err(NERVE_ERR_SERVE))?;
        // SAFETY: null or writable (the documented contract).
        if let Some(o) = unsafe { out_count.as_mut() } {
            *o = n;
        }
        Ok(NERVE_OK)
    })
}

/// Serves the node's lifecycle services (`nerve lifecycle`, `nerve launch`) on this
/// executor from now on.
#[no_mangle]
pub extern "C" fn nerve_executor_add_managed(
    exec: nerve_executor_t,
    managed: nerve_managed_t,
) -> nerve_status_t {
    guard(|| {
        let (m, mctx) = handle::get::<ManagedObj>(managed.id, Kind::Managed)?;
        with_exec(exec, |ex, ctx| {
            handle::same_context(ctx, mctx, "adding a managed node to an executor")?;
            m.0.serve_on(ex).map_err(|e| match e {
                nerve_lifecycle::LifecycleError::Exec { source, .. } => exec_err(source),
                other => Error::new(NERVE_ERR_EXEC, other.to_string()),
            })?;
            Ok(NERVE_OK)
        })
    })
}
