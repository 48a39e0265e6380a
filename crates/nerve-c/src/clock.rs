//! Robot time of a context (issue 45): its clock, the system clock or the simulation
//! clock (`NERVE_SIM_TIME=1`, `/clock`), the one Rust clock that timers, tick times and
//! sample stamps follow. `nerve_time_now_ns` reads the process's clock (the first
//! context's); these read a given context's.

use crate::context::{Ctx, NodeObj};
use crate::handle::{self, Kind};
use crate::status::{guard, nerve_status_t, nerve_status_t::*, out};
use crate::types::{nerve_context_t, nerve_node_t};

/// The context's robot time now, ns since the Unix epoch: the system clock, or the
/// simulation clock when the context runs on simulation time (then 0 until the first
/// clock message).
///
/// # Safety
/// `out_ns` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_context_now(
    ctx: nerve_context_t,
    out_ns: *mut i64,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_ns, "out_ns")?;
        *slot = handle::with(ctx.id, Kind::Context, |c: &Ctx, _| c.0.clock().now_ns())?;
        Ok(NERVE_OK)
    })
}

/// The robot time now of the node's context, as `nerve_context_now`.
///
/// # Safety
/// `out_ns` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_node_now(node: nerve_node_t, out_ns: *mut i64) -> nerve_status_t {
    guard(|| {
        let slot = out(out_ns, "out_ns")?;
        *slot = handle::with(node.id, Kind::Node, |n: &NodeObj, _| {
            n.0.context().clock().now_ns()
        })?;
        Ok(NERVE_OK)
    })
}

/// Whether the context runs on simulation time (`out_sim` true) or the system clock.
///
/// # Safety
/// `out_sim` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_context_sim_time(
    ctx: nerve_context_t,
    out_sim: *mut bool,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_sim, "out_sim")?;
        *slot = handle::with(ctx.id, Kind::Context, |c: &Ctx, _| c.0.clock().is_sim())?;
        Ok(NERVE_OK)
    })
}
