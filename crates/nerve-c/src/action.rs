//! Actions of the built-in action types (`nerve_msgs/Fibonacci`,
//! `nerve_msgs/EchoAction`), known by name: goals, feedback and results cross as message
//! payloads (head, then slice elements), copied once each way.

use crate::context::{copy_str, NodeObj};
use crate::handle::{self, Kind};
use crate::status::{
    action_error, bytes, c_str, guard, nerve_status_t, nerve_status_t::*, out, Error, Result,
};
use crate::topic::wait_loop;
use crate::types::{
    nerve_action_client_t, nerve_action_server_t, nerve_goal_t, nerve_node_t, nerve_server_goal_t,
};
use nerve::action::{GoalPolicy, GoalState};
use nerve_msgs::erased::{
    self, ErasedClient, ErasedError, ErasedGoal, ErasedServer, ErasedServerGoal,
};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::{c_char, c_void};
use std::rc::Rc;
use std::time::Duration;

/// A goal's state.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum nerve_goal_state_t {
    /// Accepted, not yet executing.
    NERVE_GOAL_ACCEPTED = 1,
    /// Executing.
    NERVE_GOAL_EXECUTING = 2,
    /// Its client asked to cancel it.
    NERVE_GOAL_CANCELING = 3,
    /// Ended: succeeded.
    NERVE_GOAL_SUCCEEDED = 4,
    /// Ended: aborted by the server.
    NERVE_GOAL_ABORTED = 5,
    /// Ended: canceled.
    NERVE_GOAL_CANCELED = 6,
}

use nerve_goal_state_t::*;

fn state_out(s: GoalState) -> nerve_goal_state_t {
    match s {
        GoalState::Accepted => NERVE_GOAL_ACCEPTED,
        GoalState::Executing => NERVE_GOAL_EXECUTING,
        GoalState::Canceling => NERVE_GOAL_CANCELING,
        GoalState::Succeeded => NERVE_GOAL_SUCCEEDED,
        GoalState::Aborted => NERVE_GOAL_ABORTED,
        GoalState::Canceled => NERVE_GOAL_CANCELED,
    }
}

/// How an action server takes new goals.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum nerve_goal_policy_t {
    /// Reject a new goal while one is active.
    NERVE_GOAL_REJECT_NEW = 0,
    /// Queue up to `max` goals behind the active one.
    NERVE_GOAL_QUEUE = 1,
    /// A new goal cancels the active one.
    NERVE_GOAL_PREEMPT = 2,
    /// Up to `max` goals at once.
    NERVE_GOAL_PARALLEL = 3,
}

pub(crate) fn action_err(e: ErasedError) -> Error {
    let code = match e {
        ErasedError::UnknownType { .. } | ErasedError::Payload(_) => NERVE_ERR_INVALID_ARGUMENT,
        ErasedError::Action(ref a) => crate::status::action_status(a),
    };
    Error::new(code, e.to_string())
}

#[derive(Clone)]
pub(crate) struct ClientObj(pub(crate) Rc<dyn ErasedClient>);
/// A goal and what it delivered that the caller's buffer could not take yet (kept for
/// the next call, so a small buffer loses nothing).
#[derive(Clone)]
struct GoalObj {
    goal: Rc<dyn ErasedGoal>,
    feedback: Rc<RefCell<Option<Vec<u8>>>>,
    result: Rc<RefCell<Option<Outcome>>>,
}

/// A goal's final state and result payload.
type Outcome = (GoalState, Vec<u8>);
/// A server and the goals it accepted that the caller has not taken yet.
#[derive(Clone)]
pub(crate) struct ServerObj {
    pub(crate) server: Rc<dyn ErasedServer>,
    pub(crate) accepted: Rc<RefCell<VecDeque<Box<dyn ErasedServerGoal>>>>,
}
#[derive(Clone)]
struct ServerGoalObj(Rc<dyn ErasedServerGoal>);

boxed!(ClientObj, GoalObj, ServerObj, ServerGoalObj);

/// Accepted goals a server keeps for `nerve_action_server_take_goal`; more are refused.
const MAX_UNTAKEN: usize = 256;

/// Copies `data` into the caller's buffer (`cap` bytes); `len` gets its size.
fn copy_out(data: &[u8], buf: *mut c_void, cap: usize, len: *mut usize) -> Result<()> {
    let l = out(len, "len")?;
    *l = data.len();
    if data.len() > cap {
        return Err(Error::new(
            NERVE_ERR_BUFFER_TOO_SMALL,
            format!(
                "the payload has {} bytes; the buffer holds {cap}",
                data.len()
            ),
        ));
    }
    if !data.is_empty() {
        if buf.is_null() {
            return Err(Error::new(NERVE_ERR_NULL, "buf is null"));
        }
        // SAFETY: `buf` holds `cap >= data.len()` writable bytes (the documented
        // contract) and does not overlap Rust-owned `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf.cast::<u8>(), data.len()) };
    }
    Ok(())
}

/// Creates a client of the action `name` of the built-in type `action_type`.
///
/// # Safety
/// `name` and `action_type` are NUL-terminated; `out_client` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_action_client_create(
    node: nerve_node_t,
    name: *const c_char,
    action_type: *const c_char,
    out_client: *mut nerve_action_client_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_client, "out_client")?;
        let name = c_str(name, "name")?;
        let ty = c_str(action_type, "action_type")?;
        let (n, ctx) = handle::get::<NodeObj>(node.id, Kind::Node)?;
        let c = erased::client(&n.0, name, ty).map_err(action_err)?;
        slot.id = handle::insert(Kind::ActionClient, ctx, ClientObj(Rc::from(c)))?;
        Ok(NERVE_OK)
    })
}

/// Copies the action's resolved name (namespace and remap rules applied, e.g.
/// `/robot1/fibonacci`) into `buf` (`cap` bytes, NUL terminated); `needed` (may be null)
/// receives its length plus one (`NERVE_ERR_BUFFER_TOO_SMALL` when `cap` is less).
///
/// # Safety
/// `buf` points to `cap` writable bytes (or is null with `cap` 0); `needed` is null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_action_client_name(
    client: nerve_action_client_t,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let name = handle::with(client.id, Kind::ActionClient, |c: &ClientObj, _| c.0.name())?;
        // SAFETY: forwarded contract of this function.
        unsafe { copy_str(&name, buf, cap, needed) }
    })
}

/// Releases an action client handle (goals keep it alive).
#[no_mangle]
pub extern "C" fn nerve_action_client_destroy(client: nerve_action_client_t) -> nerve_status_t {
    guard(|| handle::release(client.id, Kind::ActionClient).map(|_| NERVE_OK))
}

/// Waits up to `timeout_ns` for a server: `NERVE_OK` or `NERVE_NOTHING`.
#[no_mangle]
pub extern "C" fn nerve_action_client_wait_for_server(
    client: nerve_action_client_t,
    timeout_ns: u64,
) -> nerve_status_t {
    guard(|| {
        let (c, _) = handle::get::<ClientObj>(client.id, Kind::ActionClient)?;
        Ok(if c.0.wait_for_server(Duration::from_nanos(timeout_ns)) {
            NERVE_OK
        } else {
            NERVE_NOTHING
        })
    })
}

/// Sends a goal (its payload, `len` bytes) and waits for the server to accept it; a
/// rejection is `NERVE_ERR_REJECTED` with the server's reason, no server
/// `NERVE_ERR_NO_SERVER`, other failures their typed codes or `NERVE_ERR_ACTION`.
///
/// # Safety
/// `goal` points to `len` readable bytes; `out_goal` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_action_client_send_goal(
    client: nerve_action_client_t,
    goal: *const c_void,
    len: usize,
    out_goal: *mut nerve_goal_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_goal, "out_goal")?;
        let payload = bytes(goal.cast(), len, "goal")?;
        let (c, ctx) = handle::get::<ClientObj>(client.id, Kind::ActionClient)?;
        let g = c.0.send_goal(payload).map_err(action_err)?;
        let g = GoalObj {
            goal: Rc::from(g),
            feedback: Rc::default(),
            result: Rc::default(),
        };
        slot.id = handle::insert(Kind::Goal, ctx, g)?;
        Ok(NERVE_OK)
    })
}

/// Copies the goal's id (a UUID's text) into `buf`.
///
/// # Safety
/// `buf` holds `cap` writable bytes (or is null with `cap` 0); `needed` null or writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_goal_id(
    goal: nerve_goal_t,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let id = handle::with(goal.id, Kind::Goal, |g: &GoalObj, _| g.goal.id())?;
        // SAFETY: forwarded contract.
        unsafe { copy_str(&id, buf, cap, needed) }
    })
}

/// The next feedback that arrived, copied into `buf`: `NERVE_OK`, or `NERVE_NOTHING`. A
/// buffer too small is `NERVE_ERR_BUFFER_TOO_SMALL` with the size in `len`, and the
/// feedback stays for the next call.
///
/// # Safety
/// `buf` holds `cap` writable bytes; `len` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_goal_try_feedback(
    goal: nerve_goal_t,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let (g, _) = handle::get::<GoalObj>(goal.id, Kind::Goal)?;
        let kept = g.feedback.borrow_mut().take();
        let Some(f) = kept.or_else(|| g.goal.try_feedback()) else {
            return Ok(NERVE_NOTHING);
        };
        if let Err(e) = copy_out(&f, buf, cap, len) {
            *g.feedback.borrow_mut() = Some(f);
            return Err(e);
        }
        Ok(NERVE_OK)
    })
}

/// Waits up to `timeout_ns` (negative: until it ends) for the goal's result: `NERVE_OK`
/// with its final state and payload copied into `buf`, or `NERVE_NOTHING`. A buffer too
/// small is `NERVE_ERR_BUFFER_TOO_SMALL` with the size in `len`; the result stays for the
/// next call.
///
/// # Safety
/// `state` and `len` are writable; `buf` holds `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn nerve_goal_result(
    goal: nerve_goal_t,
    timeout_ns: i64,
    state: *mut nerve_goal_state_t,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let st = out(state, "state")?;
        let (g, _) = handle::get::<GoalObj>(goal.id, Kind::Goal)?;
        let kept = g.result.borrow_mut().take();
        let got = match kept {
            Some(r) => Some(r),
            None => wait_loop(timeout_ns, |d| g.goal.result(d).map_err(action_error))?,
        };
        let Some((s, payload)) = got else {
            return Ok(NERVE_NOTHING);
        };
        *st = state_out(s);
        if let Err(e) = copy_out(&payload, buf, cap, len) {
            *g.result.borrow_mut() = Some((s, payload));
            return Err(e);
        }
        Ok(NERVE_OK)
    })
}

/// Asks the server to cancel the goal; `state` gets its state after the request.
///
/// # Safety
/// `state` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_goal_cancel(
    goal: nerve_goal_t,
    state: *mut nerve_goal_state_t,
) -> nerve_status_t {
    guard(|| {
        let st = out(state, "state")?;
        let (g, _) = handle::get::<GoalObj>(goal.id, Kind::Goal)?;
        *st = state_out(g.goal.cancel().map_err(action_error)?);
        Ok(NERVE_OK)
    })
}

/// Releases a goal handle.
#[no_mangle]
pub extern "C" fn nerve_goal_destroy(goal: nerve_goal_t) -> nerve_status_t {
    guard(|| handle::release(goal.id, Kind::Goal).map(|_| NERVE_OK))
}

/// Creates the server of the action `name` of the built-in type `action_type`;
/// `policy` is a `nerve_goal_policy_t`; `max` bounds the queue (`NERVE_GOAL_QUEUE`) or the goals at once
/// (`NERVE_GOAL_PARALLEL`).
///
/// # Safety
/// `name` and `action_type` are NUL-terminated; `out_server` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_action_server_create(
    node: nerve_node_t,
    name: *const c_char,
    action_type: *const c_char,
    policy: i32,
    max: usize,
    out_server: *mut nerve_action_server_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_server, "out_server")?;
        let name = c_str(name, "name")?;
        let ty = c_str(action_type, "action_type")?;
        let policy = policy_of(policy, max)?;
        let (n, ctx) = handle::get::<NodeObj>(node.id, Kind::Node)?;
        let s = erased::server(&n.0, name, ty, policy, None).map_err(action_err)?;
        slot.id = handle::insert(
            Kind::ActionServer,
            ctx,
            ServerObj {
                server: Rc::from(s),
                accepted: Rc::default(),
            },
        )?;
        Ok(NERVE_OK)
    })
}

/// Copies the action's resolved name into `buf`, as `nerve_action_client_name`.
///
/// # Safety
/// As `nerve_action_client_name`.
#[no_mangle]
pub unsafe extern "C" fn nerve_action_server_name(
    server: nerve_action_server_t,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let name = handle::with(server.id, Kind::ActionServer, |s: &ServerObj, _| {
            s.server.name()
        })?;
        // SAFETY: forwarded contract of this function.
        unsafe { copy_str(&name, buf, cap, needed) }
    })
}

/// The goal policy of a `nerve_goal_policy_t` value and its `max`.
pub(crate) fn policy_of(policy: i32, max: usize) -> Result<GoalPolicy> {
    Ok(match policy {
        0 => GoalPolicy::RejectNew,
        1 => GoalPolicy::Queue { max },
        2 => GoalPolicy::Preempt,
        3 => GoalPolicy::Parallel { max: max.max(1) },
        other => {
            return Err(Error::new(
                NERVE_ERR_INVALID_ARGUMENT,
                format!("unknown goal policy {other}"),
            ))
        }
    })
}

/// Releases an action server handle (goals taken from it keep it alive).
#[no_mangle]
pub extern "C" fn nerve_action_server_destroy(server: nerve_action_server_t) -> nerve_status_t {
    guard(|| handle::release(server.id, Kind::ActionServer).map(|_| NERVE_OK))
}

/// Decides on a new goal: returns 0 to accept its payload, non-zero to reject it (with
/// the message set by `nerve_callback_fail` as the reason).
#[allow(non_camel_case_types)]
pub type nerve_goal_callback_t =
    Option<unsafe extern "C" fn(user: *mut c_void, goal: *const c_void, len: usize) -> i32>;

/// Waits up to `timeout_ns` for requests, then handles them: `on_goal` (null: accept
/// all) decides on each new goal, accepted goals queue for
/// `nerve_action_server_take_goal`; cancel and result requests are answered.
/// `handled` (nullable) gets the requests handled.
///
/// # Safety
/// `on_goal` is null or valid with `user`; `handled` null or writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_action_server_spin_once(
    server: nerve_action_server_t,
    timeout_ns: u64,
    on_goal: nerve_goal_callback_t,
    user: *mut c_void,
    handled: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let (s, _) = handle::get::<ServerObj>(server.id, Kind::ActionServer)?;
        if timeout_ns > 0 {
            s.server
                .wait(Duration::from_nanos(timeout_ns))
                .map_err(action_error)?;
        }
        let mut decide = |payload: &[u8]| -> std::result::Result<(), String> {
            let Some(cb) = on_goal else {
                return Ok(());
            };
            if s.accepted.borrow().len() >= MAX_UNTAKEN {
                return Err(format!(
                    "the server holds {MAX_UNTAKEN} accepted goals nobody took"
                ));
            }
            crate::exec::clear_callback_message();
            // SAFETY: the caller's callback with its own `user`; `payload` lives for
            // the call.
            match unsafe { cb(user, payload.as_ptr().cast(), payload.len()) } {
                0 => Ok(()),
                code => Err(crate::exec::take_callback_message()
                    .unwrap_or_else(|| format!("rejected (callback returned {code})"))),
            }
        };
        let mut accept = |g: Box<dyn ErasedServerGoal>| s.accepted.borrow_mut().push_back(g);
        let n = s
            .server
            .handle_pending(&mut decide, &mut accept)
            .map_err(action_error)?;
        // SAFETY: null or writable (the documented contract).
        if let Some(h) = unsafe { handled.as_mut() } {
            *h = n;
        }
        Ok(NERVE_OK)
    })
}

/// Takes the next accepted goal: `NERVE_OK`, or `NERVE_NOTHING`.
///
/// # Safety
/// `out_goal` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_action_server_take_goal(
    server: nerve_action_server_t,
    out_goal: *mut nerve_server_goal_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_goal, "out_goal")?;
        let (s, ctx) = handle::get::<ServerObj>(server.id, Kind::ActionServer)?;
        let Some(g) = s.accepted.borrow_mut().pop_front() else {
            return Ok(NERVE_NOTHING);
        };
        slot.id = handle::insert(Kind::ServerGoal, ctx, ServerGoalObj(Rc::from(g)))?;
        Ok(NERVE_OK)
    })
}

fn with_goal<R>(
    goal: nerve_server_goal_t,
    f: impl FnOnce(&dyn ErasedServerGoal) -> Result<R>,
) -> Result<R> {
    let (g, _) = handle::get::<ServerGoalObj>(goal.id, Kind::ServerGoal)?;
    f(&*g.0)
}

/// Copies an accepted goal's payload into `buf`.
///
/// # Safety
/// `buf` holds `cap` writable bytes; `len` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_server_goal_data(
    goal: nerve_server_goal_t,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> nerve_status_t {
    guard(|| {
        with_goal(goal, |g| {
            copy_out(&g.goal(), buf, cap, len).map(|_| NERVE_OK)
        })
    })
}

/// Copies an accepted goal's id into `buf`.
///
/// # Safety
/// As `nerve_goal_id`.
#[no_mangle]
pub unsafe extern "C" fn nerve_server_goal_id(
    goal: nerve_server_goal_t,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> nerve_status_t {
    guard(|| {
        with_goal(goal, |g| {
            // SAFETY: forwarded contract.
            unsafe { copy_str(&g.id(), buf, cap, needed) }
        })
    })
}

/// Whether the goal's client asked to cancel it.
///
/// # Safety
/// `canceling` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_server_goal_is_canceling(
    goal: nerve_server_goal_t,
    canceling: *mut bool,
) -> nerve_status_t {
    guard(|| {
        let c = out(canceling, "canceling")?;
        *c = with_goal(goal, |g| Ok(g.is_canceling()))?;
        Ok(NERVE_OK)
    })
}

/// Sends feedback (its payload, `len` bytes) to the goal's client.
///
/// # Safety
/// `data` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn nerve_server_goal_feedback(
    goal: nerve_server_goal_t,
    data: *const c_void,
    len: usize,
) -> nerve_status_t {
    guard(|| {
        let payload = bytes(data.cast(), len, "data")?;
        with_goal(goal, |g| g.feedback(payload).map_err(action_err))?;
        Ok(NERVE_OK)
    })
}

/// Ends the goal (`state`: `NERVE_GOAL_SUCCEEDED`, `_ABORTED` or `_CANCELED`) with a result
/// payload; the handle stays valid until destroyed.
///
/// # Safety
/// `data` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn nerve_server_goal_end(
    goal: nerve_server_goal_t,
    state: i32,
    data: *const c_void,
    len: usize,
) -> nerve_status_t {
    guard(|| {
        let state = match state {
            4 => GoalState::Succeeded,
            5 => GoalState::Aborted,
            6 => GoalState::Canceled,
            other => {
                return Err(Error::new(
                    NERVE_ERR_INVALID_ARGUMENT,
                    format!("a goal ends succeeded (4), aborted (5) or canceled (6), not {other}"),
                ))
            }
        };
        let payload = bytes(data.cast(), len, "data")?;
        with_goal(goal, |g| g.end(state, payload).map_err(action_err))?;
        Ok(NERVE_OK)
    })
}

/// Releases a server goal handle.
#[no_mangle]
pub extern "C" fn nerve_server_goal_destroy(goal: nerve_server_goal_t) -> nerve_status_t {
    guard(|| handle::release(goal.id, Kind::ServerGoal).map(|_| NERVE_OK))
}
