//! Transforms: the shared buffer, its listener thread and the broadcasters.
//!
//! The buffer is the one object of the ABI that is not a handle: it is shared by threads
//! (lookups from any thread, lock-free), and handles belong to one thread's table. It
//! crosses as an opaque reference-counted pointer (`nerve_tf_buffer_t *`): every
//! `nerve_tf_buffer_create` / `nerve_tf_buffer_retain` is matched by one
//! `nerve_tf_buffer_release`, from any thread. A null buffer is an error; a released one
//! is the caller's bug (as with any pointer). Listeners and broadcasters are handles of
//! the thread that made them, like every other object.

use crate::context::{Ctx, NodeObj};
use crate::handle::{self, Kind};
use crate::status::{c_str, err, guard, nerve_status_t, nerve_status_t::*, out, Error, Result};
use crate::types::{nerve_context_t, nerve_node_t};
use nerve_tf::{Quat, TfBuffer, Transform, TransformListener, TreeLimits, Vec3};
use std::cell::RefCell;
use std::ffi::c_char;
use std::sync::Arc;
use std::time::Duration;

/// The time of a lookup that means "the newest time the whole chain has".
pub const NERVE_TF_LATEST: i64 = i64::MIN;

/// A transform buffer shared by threads (opaque; see `nerve_tf_buffer_create`).
#[allow(non_camel_case_types)]
pub struct nerve_tf_buffer_t {
    inner: Arc<TfBuffer>,
}

/// A rigid transform: `p_parent = rotation * p_child + translation`; rotation as a unit
/// quaternion x, y, z, w.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[allow(non_camel_case_types)]
pub struct nerve_tf_transform_t {
    /// x, y, z (m).
    pub translation: [f64; 3],
    /// x, y, z, w.
    pub rotation: [f64; 4],
}

/// One transform to broadcast: `child` in `parent` at `stamp_ns`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct nerve_tf_stamped_t {
    /// The parent frame (NUL-terminated, at most 64 bytes).
    pub parent: *const c_char,
    /// The child frame (NUL-terminated, at most 64 bytes).
    pub child: *const c_char,
    /// When (ns).
    pub stamp_ns: i64,
    /// The child in the parent.
    pub transform: nerve_tf_transform_t,
}

/// A thread feeding a buffer from /tf and /tf_static.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_tf_listener_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A broadcaster of transforms on /tf (dynamic) or /tf_static (static, latched).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_tf_broadcaster_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

struct ListenerObj(#[allow(dead_code)] TransformListener);

enum BroadcasterObj {
    Dynamic(nerve_tf::Broadcaster),
    Static(RefCell<nerve_tf::StaticBroadcaster>),
}

boxed!(ListenerObj, BroadcasterObj);

fn to_rust(t: &nerve_tf_transform_t) -> Transform {
    let (v, q) = (t.translation, t.rotation);
    Transform::new(
        Vec3::new(v[0], v[1], v[2]),
        Quat::new(q[0], q[1], q[2], q[3]),
    )
}

fn to_c(t: Transform) -> nerve_tf_transform_t {
    let (v, q) = (t.translation, t.rotation);
    nerve_tf_transform_t {
        translation: [v.x, v.y, v.z],
        rotation: [q.x, q.y, q.z, q.w],
    }
}

fn buffer<'a>(b: *const nerve_tf_buffer_t) -> Result<&'a nerve_tf_buffer_t> {
    // SAFETY: null or a live buffer (the documented contract of every caller).
    unsafe { b.as_ref() }.ok_or_else(|| Error::new(NERVE_ERR_NULL, "buffer is null"))
}

fn tf_err(e: nerve_tf::TfError) -> Error {
    Error::new(NERVE_ERR_INVALID_ARGUMENT, e.to_string())
}

/// Creates a buffer keeping `window_ns` of history per frame (0: 10 s), at most
/// `max_history` transforms per frame (0: 10,000) and `max_frames` frames (0: 10,000).
/// Release it with `nerve_tf_buffer_release`.
///
/// # Safety
/// `out_buffer` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_tf_buffer_create(
    window_ns: i64,
    max_frames: u32,
    max_history: u32,
    out_buffer: *mut *mut nerve_tf_buffer_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_buffer, "out_buffer")?;
        if window_ns < 0 {
            return Err(Error::new(
                NERVE_ERR_INVALID_ARGUMENT,
                format!("window_ns must be >= 0 (0: 10 s), not {window_ns}"),
            ));
        }
        let d = TreeLimits::default();
        let pick = |v: u32, default: usize| if v == 0 { default } else { v as usize };
        let limits = TreeLimits {
            window_ns: if window_ns == 0 {
                d.window_ns
            } else {
                window_ns
            },
            max_frames: pick(max_frames, d.max_frames),
            max_history: pick(max_history, d.max_history),
        };
        let b = Box::new(nerve_tf_buffer_t {
            inner: Arc::new(TfBuffer::new(limits)),
        });
        *slot = Box::into_raw(b);
        Ok(NERVE_OK)
    })
}

/// Adds a reference to `buffer` (for another owner, on any thread): `out_buffer`
/// receives a pointer to release on its own.
///
/// # Safety
/// `buffer` is null or a live buffer; `out_buffer` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_tf_buffer_retain(
    buffer: *const nerve_tf_buffer_t,
    out_buffer: *mut *mut nerve_tf_buffer_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_buffer, "out_buffer")?;
        let b = self::buffer(buffer)?;
        *slot = Box::into_raw(Box::new(nerve_tf_buffer_t {
            inner: b.inner.clone(),
        }));
        Ok(NERVE_OK)
    })
}

/// Releases one reference (null: nothing happens). The buffer goes with its last
/// reference (a listener holds one of its own).
///
/// # Safety
/// `buffer` is null or a pointer from `nerve_tf_buffer_create` / `nerve_tf_buffer_retain`
/// not released before.
#[no_mangle]
pub unsafe extern "C" fn nerve_tf_buffer_release(buffer: *mut nerve_tf_buffer_t) -> nerve_status_t {
    guard(|| {
        if !buffer.is_null() {
            // SAFETY: a pointer from `Box::into_raw` not released before (the contract).
            drop(unsafe { Box::from_raw(buffer) });
        }
        Ok(NERVE_OK)
    })
}

/// Stores `child` in `parent` at `stamp_ns` (static: valid at every time).
/// `NERVE_NOTHING` when the stamp is older than the window; `NERVE_ERR_INVALID_ARGUMENT`,
/// the message naming the frames, for a non-unit or NaN rotation, a second parent, a
/// loop or a frame past the limit.
///
/// # Safety
/// `buffer` is null or live; the strings are NUL-terminated; `transform` is readable.
#[no_mangle]
pub unsafe extern "C" fn nerve_tf_buffer_set(
    buffer: *const nerve_tf_buffer_t,
    parent: *const c_char,
    child: *const c_char,
    stamp_ns: i64,
    transform: *const nerve_tf_transform_t,
    is_static: bool,
) -> nerve_status_t {
    guard(|| {
        let b = self::buffer(buffer)?;
        let (p, c) = (c_str(parent, "parent")?, c_str(child, "child")?);
        // SAFETY: null or readable (the contract).
        let t = unsafe { transform.as_ref() }
            .ok_or_else(|| Error::new(NERVE_ERR_NULL, "transform is null"))?;
        let stored = b
            .inner
            .set_transform(p, c, stamp_ns, to_rust(t), is_static)
            .map_err(tf_err)?;
        Ok(if stored { NERVE_OK } else { NERVE_NOTHING })
    })
}

/// `source` in `target` at `time_ns` (`NERVE_TF_LATEST`: the newest time the chain has),
/// interpolated; lock-free and allocation-free on success. `NERVE_ERR_INVALID_ARGUMENT`
/// with the frames and times named when it cannot be found.
///
/// # Safety
/// `buffer` is null or live; the strings are NUL-terminated; `out_transform` writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_tf_buffer_lookup(
    buffer: *const nerve_tf_buffer_t,
    target: *const c_char,
    source: *const c_char,
    time_ns: i64,
    out_transform: *mut nerve_tf_transform_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_transform, "out_transform")?;
        let b = self::buffer(buffer)?;
        let (t, s) = (c_str(target, "target")?, c_str(source, "source")?);
        *slot = to_c(b.inner.lookup_transform(t, s, time_ns).map_err(tf_err)?);
        Ok(NERVE_OK)
    })
}

/// [`nerve_tf_buffer_lookup`], waiting up to `timeout_ns` for the transforms to arrive:
/// `NERVE_ERR_TIMEOUT` with the last lookup's error when they did not.
///
/// # Safety
/// As for `nerve_tf_buffer_lookup`.
#[no_mangle]
pub unsafe extern "C" fn nerve_tf_buffer_wait(
    buffer: *const nerve_tf_buffer_t,
    target: *const c_char,
    source: *const c_char,
    time_ns: i64,
    timeout_ns: i64,
    out_transform: *mut nerve_tf_transform_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_transform, "out_transform")?;
        let b = self::buffer(buffer)?;
        let (t, s) = (c_str(target, "target")?, c_str(source, "source")?);
        let timeout = Duration::from_nanos(timeout_ns.max(0) as u64);
        let r = b.inner.wait_for_transform(t, s, time_ns, timeout);
        *slot = to_c(r.map_err(|e| Error::new(NERVE_ERR_TIMEOUT, e.to_string()))?);
        Ok(NERVE_OK)
    })
}

/// Whether the lookup would succeed now (`out` true or false).
///
/// # Safety
/// As for `nerve_tf_buffer_lookup`; `out_can` writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_tf_buffer_can_transform(
    buffer: *const nerve_tf_buffer_t,
    target: *const c_char,
    source: *const c_char,
    time_ns: i64,
    out_can: *mut bool,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_can, "out_can")?;
        let b = self::buffer(buffer)?;
        let (t, s) = (c_str(target, "target")?, c_str(source, "source")?);
        *slot = b.inner.can_transform(t, s, time_ns);
        Ok(NERVE_OK)
    })
}

/// Starts a thread (with a node named `name` of `ctx`) feeding `buffer` from /tf and
/// /tf_static; it holds a reference to the buffer until destroyed.
///
/// # Safety
/// `buffer` is null or live; `name` NUL-terminated; `out_listener` writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_tf_listener_create(
    ctx: nerve_context_t,
    name: *const c_char,
    buffer: *const nerve_tf_buffer_t,
    out_listener: *mut nerve_tf_listener_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_listener, "out_listener")?;
        let b = self::buffer(buffer)?;
        let name = c_str(name, "name")?;
        let (c, id) = handle::get::<Ctx>(ctx.id, Kind::Context)?;
        let l =
            TransformListener::spawn(&c.0, name, b.inner.clone()).map_err(err(NERVE_ERR_NODE))?;
        slot.id = handle::insert(Kind::TfListener, id, ListenerObj(l))?;
        Ok(NERVE_OK)
    })
}

/// Stops the listener's thread, waits for it and releases the handle.
#[no_mangle]
pub extern "C" fn nerve_tf_listener_destroy(listener: nerve_tf_listener_t) -> nerve_status_t {
    guard(|| handle::release(listener.id, Kind::TfListener).map(|_| NERVE_OK))
}

/// A broadcaster of `node`: on /tf, or with `is_static` on /tf_static (latched; every
/// send carries all static transforms it was given, so late joiners get them).
///
/// # Safety
/// `out_broadcaster` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_tf_broadcaster_create(
    node: nerve_node_t,
    is_static: bool,
    out_broadcaster: *mut nerve_tf_broadcaster_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_broadcaster, "out_broadcaster")?;
        let (n, id) = handle::get::<NodeObj>(node.id, Kind::Node)?;
        let b = if is_static {
            BroadcasterObj::Static(RefCell::new(
                nerve_tf::StaticBroadcaster::new(&n.0).map_err(err(NERVE_ERR_TOPIC))?,
            ))
        } else {
            BroadcasterObj::Dynamic(nerve_tf::Broadcaster::new(&n.0).map_err(err(NERVE_ERR_TOPIC))?)
        };
        slot.id = handle::insert(Kind::TfBroadcaster, id, b)?;
        Ok(NERVE_OK)
    })
}

/// Sends `count` transforms in one message. A frame name longer than 64 bytes is
/// `NERVE_ERR_INVALID_ARGUMENT` (nothing sent).
///
/// # Safety
/// `items` points to `count` readable entries whose strings are NUL-terminated (or is
/// null with `count` 0).
#[no_mangle]
pub unsafe extern "C" fn nerve_tf_broadcaster_send(
    broadcaster: nerve_tf_broadcaster_t,
    items: *const nerve_tf_stamped_t,
    count: usize,
) -> nerve_status_t {
    guard(|| {
        let items: &[nerve_tf_stamped_t] = if count == 0 {
            &[]
        } else if items.is_null() {
            return Err(Error::new(NERVE_ERR_NULL, "items is null"));
        } else {
            // SAFETY: `count` readable entries (the contract).
            unsafe { std::slice::from_raw_parts(items, count) }
        };
        let msgs = items
            .iter()
            .map(|i| {
                let (p, c) = (c_str(i.parent, "parent")?, c_str(i.child, "child")?);
                nerve_tf::to_msg(p, c, i.stamp_ns, to_rust(&i.transform))
                    .map_err(err(NERVE_ERR_INVALID_ARGUMENT))
            })
            .collect::<Result<Vec<_>>>()?;
        handle::with(
            broadcaster.id,
            Kind::TfBroadcaster,
            |b: &BroadcasterObj, _| match b {
                BroadcasterObj::Dynamic(d) => d.send(&msgs).map_err(err(NERVE_ERR_PUBLISH)),
                BroadcasterObj::Static(s) => s
                    .try_borrow_mut()
                    .map_err(|_| Error::new(NERVE_ERR_BUSY, "the static broadcaster is busy"))?
                    .send(&msgs)
                    .map_err(err(NERVE_ERR_PUBLISH)),
            },
        )??;
        Ok(NERVE_OK)
    })
}

/// Releases a broadcaster.
#[no_mangle]
pub extern "C" fn nerve_tf_broadcaster_destroy(
    broadcaster: nerve_tf_broadcaster_t,
) -> nerve_status_t {
    guard(|| handle::release(broadcaster.id, Kind::TfBroadcaster).map(|_| NERVE_OK))
}
