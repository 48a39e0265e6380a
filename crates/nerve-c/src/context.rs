//! Contexts and nodes.

use crate::handle::{self, Kind};
use crate::status::{c_str, err, guard, nerve_status_t, nerve_status_t::*, out, Error, Result};
use crate::types::{nerve_context_t, nerve_node_t};
use std::ffi::c_char;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};

/// A context in the table, with its id (every other object records the id of the
/// context it came from, so mixing contexts is caught).
#[derive(Clone)]
pub(crate) struct Ctx(pub(crate) Rc<nerve::Context>);

/// A node in the table, with its logger once it first logs (`log.rs`).
#[derive(Clone)]
pub(crate) struct NodeObj(
    pub(crate) Rc<nerve::Node>,
    pub(crate) Rc<std::cell::OnceCell<nerve::Logger>>,
);

boxed!(Ctx, NodeObj);

pub(crate) static NEXT_CONTEXT: AtomicU32 = AtomicU32::new(1);

/// How to open a context. Zero-initialised (or null) means: from the `NERVE_*`
/// environment variables. Names of topics, services and actions made through it resolve
/// as in Rust: relative ones (`chatter`) under the namespace, private ones (`~/state`)
/// under the node's full name, then the remap rules apply.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct nerve_context_options_t {
    /// A TOML configuration file (null: `NERVE_CONFIG` / the environment).
    pub config_path: *const c_char,
    /// Overrides the domain when `set_domain` is true.
    pub domain: u32,
    /// Whether `domain` applies.
    pub set_domain: bool,
    /// Overrides the state directory (null: keep).
    pub state_dir: *const c_char,
    /// The network plane: -1 keep the configuration's choice, 0 off, 1 on.
    pub network: i32,
    /// The namespace of the context's nodes, `/` or an absolute name such as `/robot1`
    /// (null: `NERVE_NAMESPACE`, else `/`).
    pub node_namespace: *const c_char,
    /// Remap rules `from:=to` separated by `;` (as `NERVE_REMAP`), checked before those of
    /// the environment (null: none more).
    pub remap: *const c_char,
}

pub(crate) fn open(opts: Option<&nerve_context_options_t>) -> Result<nerve::Context> {
    let mut cfg = match opts.filter(|o| !o.config_path.is_null()) {
        Some(o) => {
            let path = c_str(o.config_path, "config_path")?;
            nerve::Config::from_file(std::path::Path::new(path))
        }
        None => nerve::Config::from_env(),
    }
    .map_err(err(NERVE_ERR_CONTEXT))?;
    if let Some(o) = opts {
        if o.set_domain {
            cfg = cfg.domain(o.domain).map_err(err(NERVE_ERR_CONTEXT))?;
        }
        if !o.state_dir.is_null() {
            cfg = cfg.state_dir(c_str(o.state_dir, "state_dir")?);
        }
        if !o.node_namespace.is_null() {
            let ns = c_str(o.node_namespace, "node_namespace")?;
            cfg = cfg.namespace(ns).map_err(err(NERVE_ERR_CONTEXT))?;
        }
        if !o.remap.is_null() {
            let mut rules = nerve::name::parse_remap(c_str(o.remap, "remap")?)
                .map_err(|e| Error::new(NERVE_ERR_CONTEXT, format!("remap: {e}")))?;
            rules.append(&mut cfg.remap);
            if rules.len() > nerve::name::MAX_REMAP_RULES {
                return Err(Error::new(
                    NERVE_ERR_CONTEXT,
                    format!(
                        "remap: {} rules with the environment's, at most {}",
                        rules.len(),
                        nerve::name::MAX_REMAP_RULES
                    ),
                ));
            }
            cfg.remap = rules;
        }
        match o.network {
            -1 => {}
            0 => cfg = cfg.network(false),
            1 => cfg = cfg.network(true),
            n => {
                return Err(Error::new(
                    NERVE_ERR_INVALID_ARGUMENT,
                    format!("network must be -1 (keep), 0 (off) or 1 (on), not {n}"),
                ))
            }
        }
    }
    nerve::Context::new(cfg).map_err(err(NERVE_ERR_CONTEXT))
}

/// Opens a context. `options` may be null (everything from the environment). The
/// context and everything made from it belong to the calling thread.
///
/// # Safety
/// `options` is null or points to a valid `nerve_context_options_t` whose strings are
/// null or NUL-terminated; `out` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_context_create(
    options: *const nerve_context_options_t,
    out_ctx: *mut nerve_context_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_ctx, "out_ctx")?;
        // SAFETY: null or a valid options struct (the documented contract).
        let opts = unsafe { options.as_ref() };
        let ctx = open(opts)?;
        // SYNC: Relaxed: an id, publishing nothing.
        let id = NEXT_CONTEXT.fetch_add(1, Ordering::Relaxed);
        slot.id = handle::insert(Kind::Context, id, Ctx(Rc::new(ctx)))?;
        Ok(NERVE_OK)
    })
}

/// Releases a context handle. Objects made from it stay usable until released.
#[no_mangle]
pub extern "C" fn nerve_context_destroy(ctx: nerve_context_t) -> nerve_status_t {
    guard(|| handle::release(ctx.id, Kind::Context).map(|_| NERVE_OK))
}

/// The context's domain id.
///
/// # Safety
/// `out_domain` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_context_domain(
    ctx: nerve_context_t,
    out_domain: *mut u32,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_domain, "out_domain")?;
        *slot = handle::with(ctx.id, Kind::Context, |c: &Ctx, _| c.0.domain())?;
        Ok(NERVE_OK)
    })
}

/// Creates a node named `name` (one segment: letters, digits and `_`) in the context's
/// namespace.
///
/// # Safety
/// `name` is a NUL-terminated string; `out_node` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_node_create(
    ctx: nerve_context_t,
    name: *const c_char,
    out_node: *mut nerve_node_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_node, "out_node")?;
        let name = c_str(name, "name")?;
        let (c, id) = handle::get::<Ctx>(ctx.id, Kind::Context)?;
        let node = c.0.node(name).create().map_err(err(NERVE_ERR_NODE))?;
        slot.id = handle::insert(Kind::Node, id, NodeObj(Rc::new(node), Rc::default()))?;
        Ok(NERVE_OK)
    })
}

/// Releases a node handle.
#[no_mangle]
pub extern "C" fn nerve_node_destroy(node: nerve_node_t) -> nerve_status_t {
    guard(|| handle::release(node.id, Kind::Node).map(|_| NERVE_OK))
}

/// Copies the node's full name (with namespace: `/robot1/talker`) into `buf` (`cap`
/// bytes, NUL terminated); `needed` (may be null) receives its length plus one.
///
/// # Safety
/// `buf` points to `cap` writable bytes (or is null with `cap` 0).
#[no_mangle]
pub unsafe extern "C" fn nerve_node_name(
    node: nerve_node_t,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let name = handle::with(node.id, Kind::Node, |n: &NodeObj, _| n.0.full_name())?;
        // SAFETY: forwarded contract of this function.
        unsafe { copy_str(&name, buf, cap, needed) }
    })
}

/// Copies `s` NUL-terminated into `buf`; `needed` (nullable) gets its length plus one.
///
/// # Safety
/// `buf` points to `cap` writable bytes (or is null with `cap` 0); `needed` is null or
/// writable.
pub(crate) unsafe fn copy_str(
    s: &str,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> Result<nerve_status_t> {
    let want = s.len() + 1;
    // SAFETY: null or writable (the documented contract).
    if let Some(n) = unsafe { needed.as_mut() } {
        *n = want;
    }
    if cap < want || buf.is_null() {
        return Err(Error::new(
            NERVE_ERR_BUFFER_TOO_SMALL,
            format!("the buffer holds {cap} bytes; {want} are needed"),
        ));
    }
    // SAFETY: `buf` holds `cap >= want` writable bytes, and `s` does not overlap it
    // (it is Rust-owned memory).
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), s.len());
        *buf.add(s.len()) = 0;
    }
    Ok(NERVE_OK)
}

/// The monotonic clock (CLOCK_MONOTONIC) in ns, as Nerve stamps samples.
#[no_mangle]
pub extern "C" fn nerve_mono_ns() -> u64 {
    nerve::mono_ns()
}

/// Robot time now, ns since the Unix epoch: the system clock, or the simulation clock of
/// the process's first context (`NERVE_SIM_TIME=1`, or a replay: then 0 until the first
/// clock message). Executor timers run on the same clock.
#[no_mangle]
pub extern "C" fn nerve_time_now_ns() -> i64 {
    nerve::time::now_ns()
}

/// A cheap monotonic stamp in ns (the time-stamp counter where the kernel uses it), for
/// measuring intervals on one machine.
#[no_mangle]
pub extern "C" fn nerve_stamp_ns() -> u64 {
    nerve::stamp_ns()
}
