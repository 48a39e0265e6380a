//! `Buffer`: the one owner of a message's memory on the Python side (a received sample,
//! a loan, a request or reply, a tensor, or heap bytes). Messages, nested structs and
//! numpy arrays all refer to it (arrays through `__array_interface__`, so the Buffer is
//! their `base`): the memory lives exactly as long as anything can see it.

use crate::affine::Affine;
use crate::errors::ClosedError;
use nerve::tensor::DType;
use nerve::{RawLoan, RawSample, SampleHeader};
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString, PyTuple};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Primitive kinds, as the Python layer names them by number (see `_messages.py`).
const KINDS: [(&str, usize); 12] = [
    ("u8", 1),
    ("u16", 2),
    ("u32", 4),
    ("u64", 8),
    ("u128", 16),
    ("i8", 1),
    ("i16", 2),
    ("i32", 4),
    ("i64", 8),
    ("i128", 16),
    ("f32", 4),
    ("f64", 8),
];

/// The kind number of a primitive name (`u8` … `f64`).
pub(crate) fn kind_of(name: &str) -> Option<u8> {
    KINDS.iter().position(|(n, _)| *n == name).map(|i| i as u8)
}

/// What owns the memory. Most variants are only held (their drop gives the memory
/// back); the others are taken out to be sent or frozen.
#[allow(dead_code)]
pub(crate) enum Owner {
    /// A received sample (read-only).
    Sample(Affine<RawSample>),
    /// A publisher's loan (writable until sent).
    Loan(Affine<RawLoan>),
    /// Bytes on the heap (a message built in Python), 8-byte aligned.
    Heap(Vec<u64>),
    /// A request a server took (read-only).
    Request(Affine<nerve::RawRequest>),
    /// A reply a client took (read-only).
    Reply(Affine<nerve::RawReply>),
    /// A frozen tensor (read-only, shared).
    Tensor(nerve::tensor::Tensor),
    /// A tensor being written.
    TensorMut(nerve::tensor::TensorMut),
}

struct State {
    owner: Option<Owner>,
    ptr: usize,
    len: usize,
    writable: bool,
}

/// The memory behind a message or array (shared memory, or heap bytes).
#[pyclass(frozen, module = "nerve._nerve")]
pub struct Buffer {
    state: Mutex<State>,
    /// Live numpy views ([`View`]s): while any exists the memory is neither handed on
    /// (sent, frozen) nor released.
    views: AtomicUsize,
    /// A release was asked for while views lived: done when the last one goes.
    release_pending: AtomicBool,
    header: Option<SampleHeader>,
    call: Option<nerve::CallHeader>,
    /// Length in bytes (what was asked for a heap buffer; the payload otherwise).
    len: usize,
    /// Why it is closed, once it is.
    what: &'static str,
}

impl Buffer {
    /// A buffer over `memory` (address and length, taken from `owner` on its owner
    /// thread before it was wrapped). The address must stay valid while `owner` lives:
    /// shared memory, or a heap block that moves with no owner value.
    pub(crate) fn new(
        owner: Owner,
        memory: (*const u8, usize),
        writable: bool,
        header: Option<SampleHeader>,
        what: &'static str,
    ) -> Buffer {
        Buffer {
            state: Mutex::new(State {
                owner: Some(owner),
                ptr: memory.0 as usize,
                len: memory.1,
                writable,
            }),
            views: AtomicUsize::new(0),
            release_pending: AtomicBool::new(false),
            header,
            call: None,
            len: memory.1,
            what,
        }
    }

    /// Heap bytes of `len` (zeroed), writable.
    pub(crate) fn heap(len: usize) -> Buffer {
        let mut words = vec![0u64; len.div_ceil(8).max(1)];
        let ptr = words.as_mut_ptr().cast::<u8>().cast_const();
        Buffer::new(Owner::Heap(words), (ptr, len), true, None, "message")
    }

    /// With a service call header.
    pub(crate) fn with_call(mut self, call: nerve::CallHeader) -> Buffer {
        self.call = Some(call);
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the owner out (to send a loan or freeze a tensor); the buffer is closed from
    /// then on. Refused while numpy views of it exist, so no array can write into or read
    /// from memory that was handed on.
    pub(crate) fn take(&self) -> PyResult<Owner> {
        let mut st = self.lock();
        // SYNC: views are counted under the state lock (see `view`), so none can appear
        // between this check and the take below.
        let views = self.views.load(Ordering::Relaxed);
        if views > 0 {
            return Err(PyValueError::new_err(format!(
                "this {} is still viewed by {views} numpy array(s); delete them \
                 before sending or freezing it",
                self.what
            )));
        }
        let owner = st.owner.take().ok_or_else(|| self.closed())?;
        st.len = 0;
        st.ptr = 0;
        Ok(owner)
    }

    /// Runs `f` on the owner (for publishers copying a message, tensors' descriptors).
    pub(crate) fn with_owner<R>(&self, f: impl FnOnce(&mut Owner) -> R) -> PyResult<R> {
        let mut st = self.lock();
        let owner = st.owner.as_mut().ok_or_else(|| self.closed())?;
        Ok(f(owner))
    }

    /// A [`View`] of the whole memory as a C-order array of `shape` items of a `DType`,
    /// the type and shape asked from the owner under the state lock (`typed` answers None
    /// for an owner that has none). `Ok(None)` when the owner has no type or its shape
    /// does not cover the memory exactly (the caller falls back to a byte view): no array
    /// made from it reaches past the memory. `numpy.asarray(view)` makes the final array
    /// in one call, without the byte array, `.view(dtype)` and `.reshape` a byte view
    /// needs: a shorter path when caches are cold (see docs/design.md, the tensor
    /// hand-off).
    pub(crate) fn typed_view(
        slf: &Bound<'_, Self>,
        typed: impl FnOnce(&Owner) -> Option<(DType, Vec<usize>)>,
    ) -> PyResult<Option<View>> {
        let me = slf.get();
        let st = me.lock();
        let owner = st.owner.as_ref().ok_or_else(|| me.closed())?;
        let Some((dtype, shape)) = typed(owner) else {
            return Ok(None);
        };
        let covered = shape
            .iter()
            .try_fold(dtype.size(), |n, &d| n.checked_mul(d))
            .is_some_and(|n| n == st.len);
        if !covered {
            return Ok(None);
        }
        // SYNC: counted under the state lock, as in `view`.
        me.views.fetch_add(1, Ordering::Relaxed);
        Ok(Some(View {
            buf: slf.clone().unbind(),
            ptr: if st.len == 0 { 8 } else { st.ptr },
            len: st.len,
            readonly: !st.writable,
            typed: Some((dtype, shape)),
        }))
    }

    /// Copies the memory into `out` when it holds exactly `out.len()` bytes; else
    /// `Ok(Err(its length))`.
    pub(crate) fn read_exact(&self, out: &mut [u8]) -> PyResult<Result<(), usize>> {
        let st = self.lock();
        if st.owner.is_none() {
            return Err(self.closed());
        }
        if st.len != out.len() {
            return Ok(Err(st.len));
        }
        // SAFETY: `ptr..ptr+len` is the owner's memory, alive while `st.owner` is Some
        // (we hold the lock); `out` has `len` bytes and is our own stack or heap memory.
        unsafe { std::ptr::copy_nonoverlapping(st.ptr as *const u8, out.as_mut_ptr(), st.len) };
        Ok(Ok(()))
    }

    /// A copy of the bytes in use.
    pub(crate) fn to_vec(&self) -> PyResult<Vec<u8>> {
        let st = self.lock();
        if st.owner.is_none() {
            return Err(self.closed());
        }
        // SAFETY: `ptr..ptr+len` is the owner's memory, alive while `st.owner` is Some
        // (we hold the lock, so it cannot be taken meanwhile).
        Ok(unsafe { std::slice::from_raw_parts(st.ptr as *const u8, st.len) }.to_vec())
    }

    fn closed(&self) -> PyErr {
        ClosedError::new_err(format!(
            "this {} was sent, released or closed; its memory is no longer reachable",
            self.what
        ))
    }

    fn span(&self, st: &State, offset: usize, size: usize) -> PyResult<usize> {
        if st.owner.is_none() {
            return Err(self.closed());
        }
        match offset.checked_add(size) {
            Some(end) if end <= st.len => Ok(st.ptr + offset),
            _ => Err(PyValueError::new_err(format!(
                "{size} bytes at offset {offset} lie outside this {} of {} bytes",
                self.what, st.len
            ))),
        }
    }
}

fn range_err(v: &Bound<'_, PyAny>, kind: &str) -> PyErr {
    PyOverflowError::new_err(format!("{v} is out of range for {kind}"))
}

#[pymethods]
impl Buffer {
    /// Payload length in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.lock().len
    }

    /// Whether the memory may be written (loans, tensors being written, heap messages).
    #[getter]
    fn writable(&self) -> bool {
        let st = self.lock();
        st.writable && st.owner.is_some()
    }

    /// Whether the memory is gone (sent, released).
    #[getter(closed)]
    fn is_closed(&self) -> bool {
        self.lock().owner.is_none()
    }

    /// A view object for numpy (`numpy.asarray(buf.view())`): a uint8 array over the
    /// whole payload, read-only unless the memory is writable. The array's base is the
    /// View, which keeps this Buffer (and so the memory) alive and is counted: while any
    /// View lives the memory is neither sent nor released.
    fn view(slf: &Bound<'_, Self>) -> PyResult<View> {
        let me = slf.get();
        let st = me.lock();
        if st.owner.is_none() {
            return Err(me.closed());
        }
        // SYNC: counted under the state lock, which `take` and `release` hold while they
        // check the count.
        me.views.fetch_add(1, Ordering::Relaxed);
        Ok(View {
            buf: slf.clone().unbind(),
            ptr: if st.len == 0 { 8 } else { st.ptr },
            len: st.len,
            readonly: !st.writable,
            typed: None,
        })
    }

    /// Live numpy views.
    #[getter]
    fn views(&self) -> usize {
        self.views.load(Ordering::Relaxed)
    }

    /// Reads the primitive of kind `kind` at `offset`.
    fn get<'py>(&self, py: Python<'py>, offset: usize, kind: u8) -> PyResult<Bound<'py, PyAny>> {
        let (name, size) = *KINDS
            .get(kind as usize)
            .ok_or_else(|| PyValueError::new_err(format!("unknown kind {kind}")))?;
        let st = self.lock();
        let at = self.span(&st, offset, size)?;
        let mut raw = [0u8; 16];
        // SAFETY: `span` checked that `at..at+size` lies in the owner's memory, alive
        // while we hold the lock; `raw` has room for 16 bytes.
        unsafe { std::ptr::copy_nonoverlapping(at as *const u8, raw.as_mut_ptr(), size) };
        drop(st);
        let le8 = |n: usize| {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&raw[..n]);
            b
        };
        Ok(match name {
            "u8" | "u16" | "u32" | "u64" => {
                u64::from_ne_bytes(le8(size)).into_pyobject(py)?.into_any()
            }
            "i8" => (raw[0] as i8).into_pyobject(py)?.into_any(),
            "i16" => i16::from_ne_bytes([raw[0], raw[1]])
                .into_pyobject(py)?
                .into_any(),
            "i32" => i32::from_ne_bytes([raw[0], raw[1], raw[2], raw[3]])
                .into_pyobject(py)?
                .into_any(),
            "i64" => i64::from_ne_bytes(le8(8)).into_pyobject(py)?.into_any(),
            "u128" => u128::from_ne_bytes(raw).into_pyobject(py)?.into_any(),
            "i128" => i128::from_ne_bytes(raw).into_pyobject(py)?.into_any(),
            "f32" => (f32::from_ne_bytes([raw[0], raw[1], raw[2], raw[3]]) as f64)
                .into_pyobject(py)?
                .into_any(),
            _ => f64::from_ne_bytes(le8(8)).into_pyobject(py)?.into_any(),
        })
    }

    /// Writes `value` as the primitive of kind `kind` at `offset`, range-checked.
    fn set(&self, offset: usize, kind: u8, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (name, size) = *KINDS
            .get(kind as usize)
            .ok_or_else(|| PyValueError::new_err(format!("unknown kind {kind}")))?;
        let mut raw = [0u8; 16];
        // a bool is a Python int, but a number field takes no booleans (as from JSON)
        if value.is_instance_of::<PyBool>() {
            return Err(PyTypeError::new_err(format!(
                "expected a number for {name}, got bool"
            )));
        }
        if name.starts_with('f') {
            if !(value.is_instance_of::<PyFloat>() || value.is_instance_of::<PyInt>()) {
                return Err(PyTypeError::new_err(format!(
                    "expected a number for {name}, got {}",
                    value.get_type().name()?
                )));
            }
            let v: f64 = value.extract()?;
            if name == "f32" {
                // the rule of every path into fields: nearest f32, overflow refused
                let x = nerve::message::json::number::f32_from_f64(v)
                    .map_err(|_| range_err(value, name))?;
                raw[..4].copy_from_slice(&x.to_ne_bytes());
            } else {
                raw[..8].copy_from_slice(&v.to_ne_bytes());
            }
        } else {
            if !value.is_instance_of::<PyInt>() {
                return Err(PyTypeError::new_err(format!(
                    "expected an int for {name}, got {}",
                    value.get_type().name()?
                )));
            }
            let bits = size * 8;
            if name.starts_with('u') {
                let v: u128 = value.extract().map_err(|_| range_err(value, name))?;
                if bits < 128 && v >> bits != 0 {
                    return Err(range_err(value, name));
                }
                raw.copy_from_slice(&v.to_ne_bytes());
            } else {
                let v: i128 = value.extract().map_err(|_| range_err(value, name))?;
                if bits < 128 {
                    let (lo, hi) = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
                    if v < lo || v > hi {
                        return Err(range_err(value, name));
                    }
                }
                raw.copy_from_slice(&v.to_ne_bytes());
            }
        }
        let st = self.lock();
        if !st.writable {
            return Err(PyValueError::new_err(format!(
                "this {} is read-only (received messages cannot be written; copy it first)",
                self.what
            )));
        }
        let at = self.span(&st, offset, size)?;
        // SAFETY: `span` checked the range lies in the owner's memory, alive while we hold
        // the lock, and the owner is writable (a loan, heap bytes or a tensor being
        // written, none of which any other party reads yet). Little-endian machines only
        // (Nerve runs on x86_64 and aarch64), so native order is the low bytes first.
        unsafe { std::ptr::copy_nonoverlapping(raw.as_ptr(), at as *mut u8, size) };
        Ok(())
    }

    /// Reads a NUL-padded UTF-8 string of `size` bytes at `offset`.
    fn get_str(&self, offset: usize, size: usize) -> PyResult<String> {
        let st = self.lock();
        let at = self.span(&st, offset, size)?;
        // SAFETY: range checked by `span`, memory alive while we hold the lock.
        let b = unsafe { std::slice::from_raw_parts(at as *const u8, size) };
        let end = b.iter().position(|&c| c == 0).unwrap_or(size);
        Ok(String::from_utf8_lossy(&b[..end]).into_owned())
    }

    /// Writes `value` as a NUL-padded UTF-8 string of `size` bytes at `offset`.
    fn set_str(&self, offset: usize, size: usize, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let s = value.cast::<PyString>().map_err(|_| {
            PyTypeError::new_err(format!(
                "expected a str, got {}",
                value
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?;
        let s: String = s.extract()?;
        let s = s.as_str();
        if s.len() > size || s.contains('\0') {
            return Err(PyValueError::new_err(format!(
                "{s:?} does not fit a string of {size} bytes (UTF-8, no NUL)"
            )));
        }
        let st = self.lock();
        if !st.writable {
            return Err(PyValueError::new_err(format!(
                "this {} is read-only",
                self.what
            )));
        }
        let at = self.span(&st, offset, size)?;
        // SAFETY: range checked by `span`, writable owner alive while we hold the lock.
        let b = unsafe { std::slice::from_raw_parts_mut(at as *mut u8, size) };
        b.fill(0);
        b[..s.len()].copy_from_slice(s.as_bytes());
        Ok(())
    }

    /// Copies `data` (bytes-like given as a Buffer or `bytes`) to `offset`.
    fn write_bytes(&self, offset: usize, data: &[u8]) -> PyResult<()> {
        let st = self.lock();
        if !st.writable {
            return Err(PyValueError::new_err(format!(
                "this {} is read-only",
                self.what
            )));
        }
        let at = self.span(&st, offset, data.len())?;
        // SAFETY: range checked by `span`, writable owner alive while we hold the lock;
        // `data` is a Python bytes object, never our own memory.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), at as *mut u8, data.len()) };
        Ok(())
    }

    /// A copy of the payload bytes.
    fn tobytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        Ok(pyo3::types::PyBytes::new(py, &self.to_vec()?))
    }

    /// The sample header (received samples only).
    fn header(&self) -> Option<crate::topic::Header> {
        self.header.map(crate::topic::Header::from)
    }

    /// The call header's sequence number (requests and replies only).
    fn call_seq(&self) -> Option<u64> {
        self.call.map(|c| c.seq)
    }

    /// Releases the memory now if no numpy view of it lives; otherwise when the last
    /// view goes. Returns whether it was released now.
    fn release(&self) -> bool {
        let mut st = self.lock();
        if self.views.load(Ordering::Relaxed) > 0 {
            self.release_pending.store(true, Ordering::Relaxed);
            return false;
        }
        drop(st.owner.take());
        true
    }

    fn __len__(&self) -> usize {
        self.len
    }
}

/// A zeroed, writable heap buffer of `nbytes` (a message built in Python before it is
/// published).
#[pyfunction]
pub(crate) fn heap_buffer(nbytes: usize) -> PyResult<Buffer> {
    if nbytes > 1 << 30 {
        return Err(PyValueError::new_err(format!(
            "a message of {nbytes} bytes is larger than 1 GiB"
        )));
    }
    Ok(Buffer::heap(nbytes))
}

/// What a numpy array made by `numpy.asarray(buffer.view())` has as its base: it keeps
/// the Buffer alive and counts as one of its views.
#[pyclass(frozen, module = "nerve._nerve")]
pub struct View {
    buf: Py<Buffer>,
    ptr: usize,
    len: usize,
    readonly: bool,
    /// The items' type and the C-order shape (covering `len` bytes exactly, checked by
    /// [`Buffer::typed_view`]); None: `len` bytes.
    typed: Option<(DType, Vec<usize>)>,
}

impl View {
    /// The first byte (non-null, aligned for the type: 8 for empty memory).
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr as *mut u8
    }

    /// Whether arrays of it may write the memory.
    pub(crate) fn writable(&self) -> bool {
        !self.readonly
    }

    /// The type and shape of a typed view.
    pub(crate) fn typed(&self) -> Option<(DType, &[usize])> {
        self.typed.as_ref().map(|(d, s)| (*d, s.as_slice()))
    }
}

/// numpy's array-interface type string of `dtype` (native byte order).
fn typestr(dtype: DType) -> &'static str {
    let little = cfg!(target_endian = "little");
    match dtype {
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::Bool => "|b1",
        DType::U16 if little => "<u2",
        DType::U16 => ">u2",
        DType::I16 if little => "<i2",
        DType::I16 => ">i2",
        DType::F16 if little => "<f2",
        DType::F16 => ">f2",
        DType::U32 if little => "<u4",
        DType::U32 => ">u4",
        DType::I32 if little => "<i4",
        DType::I32 => ">i4",
        DType::F32 if little => "<f4",
        DType::F32 => ">f4",
        DType::U64 if little => "<u8",
        DType::U64 => ">u8",
        DType::I64 if little => "<i8",
        DType::I64 => ">i8",
        DType::F64 if little => "<f8",
        DType::F64 => ">f8",
    }
}

#[pymethods]
impl View {
    /// numpy's array interface (version 3): the memory as read-only or writable bytes,
    /// or as the typed array [`Buffer::typed_view`] made it.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        match &self.typed {
            Some((dtype, shape)) => {
                d.set_item("shape", PyTuple::new(py, shape)?)?;
                d.set_item("typestr", typestr(*dtype))?;
            }
            None => {
                d.set_item("shape", (self.len,))?;
                d.set_item("typestr", "|u1")?;
            }
        }
        d.set_item("data", (self.ptr, self.readonly))?;
        d.set_item("version", 3)?;
        Ok(d)
    }
}

impl Drop for View {
    fn drop(&mut self) {
        let buf = self.buf.get();
        let mut st = buf.lock();
        // SYNC: under the state lock, like the increment in `Buffer::view`.
        let left = buf.views.fetch_sub(1, Ordering::Relaxed) - 1;
        if left == 0 && buf.release_pending.load(Ordering::Relaxed) {
            // dropped on this thread or parked for the owner thread (see affine)
            drop(st.owner.take());
        }
    }
}
