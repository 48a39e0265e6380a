//! numpy arrays over memory this package owns, made through numpy's C API (the
//! `_ARRAY_API` capsule every compiled numpy extension uses) instead of
//! `numpy.asarray(view)`: one allocation and no array-interface dict to build and parse.
//! Where a hand-off runs with cold caches (a consumer woken after the producer wrote a
//! large tensor), the shorter path is what counts (see docs/design.md, the tensor
//! hand-off). Where the capsule is missing or of an unknown numpy ABI, callers fall back
//! to `numpy.asarray` of a [`View`](crate::buffer::View).

use nerve::tensor::{DType, MAX_DIMS};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use std::ffi::{c_int, c_uint, c_void};

/// numpy's ABI versions whose table entries below are known (`NPY_ABI_VERSION` of 1.x
/// and of 2.x: these entries kept their index and signature).
const KNOWN_ABI: [c_uint; 2] = [0x0100_0009, 0x0200_0000];

/// Indices in numpy's C-API table (`__multiarray_api.h`).
const GET_NDARRAY_C_VERSION: usize = 0;
const ARRAY_TYPE: usize = 2;
const DESCR_FROM_TYPE: usize = 45;
const NEW_FROM_DESCR: usize = 94;
const SET_BASE_OBJECT: usize = 282;

/// Array flags (`ndarraytypes.h`).
const C_CONTIGUOUS: c_int = 0x0001;
const ALIGNED: c_int = 0x0100;
const WRITEABLE: c_int = 0x0400;

type DescrFromType = unsafe extern "C" fn(c_int) -> *mut ffi::PyObject;
type NewFromDescr = unsafe extern "C" fn(
    *mut ffi::PyTypeObject,
    *mut ffi::PyObject,
    c_int,
    *const isize,
    *const isize,
    *mut c_void,
    c_int,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;
type SetBaseObject = unsafe extern "C" fn(*mut ffi::PyObject, *mut ffi::PyObject) -> c_int;

/// The entries of numpy's C-API table this module calls.
struct Api {
    array_type: *mut ffi::PyTypeObject,
    descr_from_type: DescrFromType,
    new_from_descr: NewFromDescr,
    set_base_object: SetBaseObject,
}

// SAFETY: the pointers lead into numpy's extension module, which stays loaded for the
// interpreter's life (CPython never unloads extension modules); they are only called
// with the GIL held (every caller holds a `Python` token).
unsafe impl Send for Api {}
// SAFETY: as above; the values are never written after they are loaded.
unsafe impl Sync for Api {}

/// Loaded once per process (None: numpy's Python path is used instead).
static API: PyOnceLock<Option<Api>> = PyOnceLock::new();

/// numpy's C API, if this numpy offers the known one.
fn api(py: Python<'_>) -> Option<&'static Api> {
    API.get_or_init(py, || load(py).unwrap_or(None)).as_ref()
}

fn load(py: Python<'_>) -> PyResult<Option<Api>> {
    let module = py
        .import("numpy._core._multiarray_umath")
        .or_else(|_| py.import("numpy.core._multiarray_umath"))?;
    let capsule = module.getattr("_ARRAY_API")?;
    // SAFETY: `capsule` is a live object (we hold a reference); checking its type and
    // reading a capsule's pointer are what numpy's own `import_array` does.
    let table = unsafe {
        if ffi::PyCapsule_CheckExact(capsule.as_ptr()) == 0 {
            return Ok(None);
        }
        ffi::PyCapsule_GetPointer(capsule.as_ptr(), std::ptr::null())
    }
    .cast::<*const c_void>()
    .cast_const();
    if table.is_null() {
        let _ = PyErr::take(py);
        return Ok(None);
    }
    // SAFETY: `table` is numpy's C-API table, an array of pointers longer than 282
    // entries in every numpy with `PyArray_SetBaseObject` (1.7 on); entry 0 is
    // `unsigned int PyArray_GetNDArrayCVersion(void)` in every numpy.
    let entry = |i: usize| unsafe { *table.add(i) };
    if entry(GET_NDARRAY_C_VERSION).is_null() {
        return Ok(None);
    }
    // SAFETY: entry 0's signature, as above.
    let version: unsafe extern "C" fn() -> c_uint =
        unsafe { std::mem::transmute(entry(GET_NDARRAY_C_VERSION)) };
    // SAFETY: a function without arguments or preconditions, GIL held.
    if !KNOWN_ABI.contains(&unsafe { version() }) {
        return Ok(None);
    }
    let entries = [ARRAY_TYPE, DESCR_FROM_TYPE, NEW_FROM_DESCR, SET_BASE_OBJECT].map(entry);
    if entries.iter().any(|p| p.is_null()) {
        return Ok(None);
    }
    // SAFETY: in the ABIs of KNOWN_ABI these entries are `PyArray_Type` (the type
    // object), `PyArray_DescrFromType`, `PyArray_NewFromDescr` and
    // `PyArray_SetBaseObject`, with exactly the signatures of the types they become here.
    Ok(Some(unsafe {
        Api {
            array_type: entries[0].cast_mut().cast(),
            descr_from_type: std::mem::transmute::<*const c_void, DescrFromType>(entries[1]),
            new_from_descr: std::mem::transmute::<*const c_void, NewFromDescr>(entries[2]),
            set_base_object: std::mem::transmute::<*const c_void, SetBaseObject>(entries[3]),
        }
    }))
}

/// numpy's type number of `dtype` (`NPY_TYPES`; 64-bit integers as C `long`, numpy's
/// own `int64` on 64-bit Linux and macOS, `long long` elsewhere).
fn type_number(dtype: DType) -> c_int {
    let long64 = cfg!(all(unix, target_pointer_width = "64"));
    match dtype {
        DType::Bool => 0,
        DType::I8 => 1,
        DType::U8 => 2,
        DType::I16 => 3,
        DType::U16 => 4,
        DType::I32 => 5,
        DType::U32 => 6,
        DType::I64 if long64 => 7,
        DType::U64 if long64 => 8,
        DType::I64 => 9,
        DType::U64 => 10,
        DType::F32 => 11,
        DType::F64 => 12,
        DType::F16 => 23,
    }
}

/// A C-order numpy array of `shape` items of `dtype` at `data`, whose base is `base`;
/// `Ok(None)` where numpy's C API is not usable here (the caller takes numpy's Python
/// path) or the shape is not one numpy takes.
///
/// # Safety
///
/// `data` must be aligned for `dtype` and valid for reads (and writes, if `writable`) of
/// `shape`'s product times `dtype.size()` bytes for as long as `base` lives, and nothing
/// else may write it meanwhile unless `writable` (the array's only way to it).
pub(crate) unsafe fn array<'py>(
    py: Python<'py>,
    dtype: DType,
    shape: &[usize],
    data: *mut u8,
    writable: bool,
    base: Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Some(api) = api(py) else {
        return Ok(None);
    };
    if shape.len() > MAX_DIMS {
        return Ok(None);
    }
    let mut dims = [0isize; MAX_DIMS];
    for (d, &s) in dims.iter_mut().zip(shape) {
        let Ok(s) = isize::try_from(s) else {
            return Ok(None);
        };
        *d = s;
    }
    let flags = C_CONTIGUOUS | ALIGNED | if writable { WRITEABLE } else { 0 };
    // SAFETY: numpy's functions with the GIL held (`py`). `DescrFromType` returns a new
    // reference to a built-in descriptor; `NewFromDescr` steals it (also when it fails)
    // and, with `data` given and no strides, makes a C-order array over `data` that does
    // not own it (the caller's contract keeps `data` valid while `base` lives);
    // `SetBaseObject` steals the reference to `base` (also when it fails) and makes the
    // array keep it. `dims` holds `shape.len()` <= MAX_DIMS dimensions.
    unsafe {
        let descr = (api.descr_from_type)(type_number(dtype));
        if descr.is_null() {
            return Err(PyErr::fetch(py));
        }
        let arr = (api.new_from_descr)(
            api.array_type,
            descr,
            shape.len() as c_int,
            dims.as_ptr(),
            std::ptr::null(),
            data.cast(),
            flags,
            std::ptr::null_mut(),
        );
        if arr.is_null() {
            return Err(PyErr::fetch(py));
        }
        let arr = Bound::from_owned_ptr(py, arr);
        if (api.set_base_object)(arr.as_ptr(), base.into_ptr()) != 0 {
            return Err(PyErr::fetch(py));
        }
        Ok(Some(arr))
    }
}
