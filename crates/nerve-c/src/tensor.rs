//! Tensor pools: tensors written in a shared-memory slot, frozen, and sent to other
//! processes (Python, Rust, C++) as a descriptor message (`nerve/TensorDescriptor`)
//! that they open zero-copy.

use crate::context::Ctx;
use crate::handle::{self, Kind};
use crate::status::{bytes, c_str, guard, nerve_status_t, nerve_status_t::*, out, Error};
use crate::types::{nerve_context_t, nerve_tensor_pool_t, nerve_tensor_t};
use nerve::message::schema::Schema;
use nerve::message::{as_bytes, read_pod};
use nerve::tensor::{DType, Tensor, TensorDescriptor, TensorMut, TensorPool, MAX_DIMS};
use std::cell::RefCell;
use std::ffi::{c_char, c_void, CString};
use std::sync::OnceLock;

/// A tensor's element type (the codes of `nerve::tensor::DType`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum nerve_dtype_t {
    /// uint8
    NERVE_DTYPE_U8 = 1,
    /// int8
    NERVE_DTYPE_I8 = 2,
    /// uint16
    NERVE_DTYPE_U16 = 3,
    /// int16
    NERVE_DTYPE_I16 = 4,
    /// uint32
    NERVE_DTYPE_U32 = 5,
    /// int32
    NERVE_DTYPE_I32 = 6,
    /// uint64
    NERVE_DTYPE_U64 = 7,
    /// int64
    NERVE_DTYPE_I64 = 8,
    /// IEEE half
    NERVE_DTYPE_F16 = 9,
    /// float
    NERVE_DTYPE_F32 = 10,
    /// double
    NERVE_DTYPE_F64 = 11,
    /// bool (one byte)
    NERVE_DTYPE_BOOL = 12,
}

/// Where a tensor is and what it holds.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct nerve_tensor_info_t {
    /// Its bytes (writable until frozen, then read-only), 64-byte aligned.
    pub data: *mut c_void,
    /// Bytes in use.
    pub len_bytes: usize,
    /// Element type code (`nerve_dtype_t`).
    pub dtype: i32,
    /// Dimensions in use.
    pub ndim: usize,
    /// The dimensions (C order).
    pub shape: [usize; 8],
    /// Whether it is frozen (read-only).
    pub frozen: bool,
}

const _: () = assert!(MAX_DIMS == 8);

#[derive(Clone)]
struct PoolObj(TensorPool);

/// A tensor being written, or frozen (read-only, sendable).
struct TensorObj(RefCell<State>);

enum State {
    Writing(TensorMut),
    Frozen(Tensor),
    /// Only while freezing.
    Moving,
}

boxed!(PoolObj, TensorObj);

fn tensor_err(e: nerve::TensorError) -> Error {
    Error::new(NERVE_ERR_TENSOR, e.to_string())
}

/// Creates the tensor pool `name` in the context's domain: `slots` slots of
/// `slot_bytes` each (a pool of that name already there is `NERVE_ERR_TENSOR`).
///
/// # Safety
/// `name` is NUL-terminated; `out_pool` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_tensor_pool_create(
    ctx: nerve_context_t,
    name: *const c_char,
    slots: usize,
    slot_bytes: usize,
    out_pool: *mut nerve_tensor_pool_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_pool, "out_pool")?;
        let name = c_str(name, "name")?;
        let (c, id) = handle::get::<Ctx>(ctx.id, Kind::Context)?;
        let p = TensorPool::create(&c.0, name, slots, slot_bytes).map_err(tensor_err)?;
        slot.id = handle::insert(Kind::TensorPool, id, PoolObj(p))?;
        Ok(NERVE_OK)
    })
}

/// Opens the existing tensor pool `name`.
///
/// # Safety
/// `name` is NUL-terminated; `out_pool` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_tensor_pool_open(
    ctx: nerve_context_t,
    name: *const c_char,
    out_pool: *mut nerve_tensor_pool_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_pool, "out_pool")?;
        let name = c_str(name, "name")?;
        let (c, id) = handle::get::<Ctx>(ctx.id, Kind::Context)?;
        let p = TensorPool::open(&c.0, name).map_err(tensor_err)?;
        slot.id = handle::insert(Kind::TensorPool, id, PoolObj(p))?;
        Ok(NERVE_OK)
    })
}

/// Releases a pool handle (tensors keep the pool mapped).
#[no_mangle]
pub extern "C" fn nerve_tensor_pool_destroy(pool: nerve_tensor_pool_t) -> nerve_status_t {
    guard(|| handle::release(pool.id, Kind::TensorPool).map(|_| NERVE_OK))
}

fn info_of(s: &mut State) -> nerve_tensor_info_t {
    let (data, len, dtype, shape, frozen): (*mut c_void, usize, DType, &[usize], bool) = match s {
        State::Writing(t) => {
            let p = t.as_mut_ptr().cast();
            (p, t.len_bytes(), t.dtype(), t.shape(), false)
        }
        State::Frozen(t) => (
            t.as_ptr().cast_mut().cast(),
            t.len_bytes(),
            t.dtype(),
            t.shape(),
            true,
        ),
        State::Moving => (std::ptr::null_mut(), 0, DType::U8, &[], true),
    };
    let mut dims = [0usize; 8];
    dims[..shape.len()].copy_from_slice(shape);
    nerve_tensor_info_t {
        data,
        len_bytes: len,
        dtype: i32::from(dtype.code()),
        ndim: shape.len(),
        shape: dims,
        frozen,
    }
}

/// Allocates a tensor of `shape` (`ndim` dimensions, at most 8) of `dtype` (a
/// `nerve_dtype_t`) in a free slot; `info` tells where to write it. A full pool is
/// `NERVE_ERR_TENSOR` at once.
///
/// # Safety
/// `shape` points to `ndim` values; `out_tensor` and `info` are writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_tensor_alloc(
    pool: nerve_tensor_pool_t,
    shape: *const usize,
    ndim: usize,
    dtype: i32,
    out_tensor: *mut nerve_tensor_t,
    info: *mut nerve_tensor_info_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_tensor, "out_tensor")?;
        let info = out(info, "info")?;
        let dims: &[usize] = if ndim == 0 {
            &[]
        } else if shape.is_null() {
            return Err(Error::new(NERVE_ERR_NULL, "shape is null"));
        } else {
            // SAFETY: `shape` points to `ndim` readable values (the documented contract).
            unsafe { std::slice::from_raw_parts(shape, ndim) }
        };
        let dt = u8::try_from(dtype)
            .ok()
            .and_then(DType::from_code)
            .ok_or_else(|| {
                Error::new(NERVE_ERR_INVALID_ARGUMENT, format!("unknown dtype {dtype}"))
            })?;
        let (p, ctx) = handle::get::<PoolObj>(pool.id, Kind::TensorPool)?;
        let t = p.0.alloc(dims, dt).map_err(tensor_err)?;
        let mut state = State::Writing(t);
        *info = info_of(&mut state);
        slot.id = handle::insert(Kind::Tensor, ctx, TensorObj(RefCell::new(state)))?;
        Ok(NERVE_OK)
    })
}

/// Ends the writing: the tensor becomes read-only and sendable (same handle).
#[no_mangle]
pub extern "C" fn nerve_tensor_freeze(tensor: nerve_tensor_t) -> nerve_status_t {
    guard(|| {
        handle::with(tensor.id, Kind::Tensor, |t: &TensorObj, _| {
            let mut s = t.0.borrow_mut();
            match std::mem::replace(&mut *s, State::Moving) {
                State::Writing(w) => *s = State::Frozen(w.freeze()),
                other => *s = other,
            }
        })?;
        Ok(NERVE_OK)
    })
}

/// Where the tensor is and what it holds.
///
/// # Safety
/// `info` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_tensor_info(
    tensor: nerve_tensor_t,
    info: *mut nerve_tensor_info_t,
) -> nerve_status_t {
    guard(|| {
        let o = out(info, "info")?;
        *o = handle::with(tensor.id, Kind::Tensor, |t: &TensorObj, _| {
            info_of(&mut t.0.borrow_mut())
        })?;
        Ok(NERVE_OK)
    })
}

/// Writes a frozen tensor's descriptor (a `nerve/TensorDescriptor` payload, 136 bytes)
/// into `buf`, to publish on a topic of that type. A tensor still being written is
/// `NERVE_ERR_TENSOR`.
///
/// # Safety
/// `buf` holds `cap` writable bytes; `len` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_tensor_descriptor(
    tensor: nerve_tensor_t,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let d = handle::with(tensor.id, Kind::Tensor, |t: &TensorObj, _| {
            match &*t.0.borrow() {
                State::Frozen(f) => Ok(f.descriptor()),
                _ => Err(Error::new(
                    NERVE_ERR_TENSOR,
                    "the tensor is still being written: freeze it before sending its descriptor",
                )),
            }
        })??;
        let l = out(len, "len")?;
        let b = as_bytes(&d);
        *l = b.len();
        if cap < b.len() || buf.is_null() {
            return Err(Error::new(
                NERVE_ERR_BUFFER_TOO_SMALL,
                format!("a descriptor has {} bytes; the buffer holds {cap}", b.len()),
            ));
        }
        // SAFETY: `buf` holds `cap >= b.len()` writable bytes, not overlapping `d`.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), buf.cast::<u8>(), b.len()) };
        Ok(NERVE_OK)
    })
}

/// Opens the tensor a descriptor names (received on a topic; `len` bytes), zero-copy
/// and read-only. A stale descriptor (its slot freed and reused) is `NERVE_ERR_TENSOR`.
///
/// # Safety
/// `descriptor` points to `len` readable bytes; `out_tensor` and `info` are writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_tensor_open(
    ctx: nerve_context_t,
    descriptor: *const c_void,
    len: usize,
    out_tensor: *mut nerve_tensor_t,
    info: *mut nerve_tensor_info_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_tensor, "out_tensor")?;
        let info = out(info, "info")?;
        let raw = bytes(descriptor.cast(), len, "descriptor")?;
        let d: TensorDescriptor = read_pod(raw)
            .filter(|_| raw.len() == std::mem::size_of::<TensorDescriptor>())
            .ok_or_else(|| {
                Error::new(
                    NERVE_ERR_INVALID_ARGUMENT,
                    format!(
                        "a tensor descriptor has {} bytes, not {len}",
                        std::mem::size_of::<TensorDescriptor>()
                    ),
                )
            })?;
        let (c, id) = handle::get::<Ctx>(ctx.id, Kind::Context)?;
        let t = TensorPool::open_descriptor(&c.0, &d).map_err(tensor_err)?;
        let mut state = State::Frozen(t);
        *info = info_of(&mut state);
        slot.id = handle::insert(Kind::Tensor, id, TensorObj(RefCell::new(state)))?;
        Ok(NERVE_OK)
    })
}

/// Releases a tensor (its slot is freed when the last reference in any process goes).
#[no_mangle]
pub extern "C" fn nerve_tensor_destroy(tensor: nerve_tensor_t) -> nerve_status_t {
    guard(|| handle::release(tensor.id, Kind::Tensor).map(|_| NERVE_OK))
}

/// The schema text of `nerve/TensorDescriptor` (a static string), for a publisher of
/// descriptors.
#[no_mangle]
pub extern "C" fn nerve_tensor_descriptor_schema() -> *const c_char {
    static TEXT: OnceLock<CString> = OnceLock::new();
    TEXT.get_or_init(|| CString::new(Schema::of::<TensorDescriptor>().encode()).unwrap_or_default())
        .as_ptr()
}

/// The layout hash of `nerve/TensorDescriptor`.
#[no_mangle]
pub extern "C" fn nerve_tensor_descriptor_hash() -> u64 {
    Schema::of::<TensorDescriptor>().layout_hash
}
