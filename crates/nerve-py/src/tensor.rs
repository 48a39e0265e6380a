//! The shared-memory tensor pool (`nerve::tensor`) for Python: tensors are Buffers, so
//! numpy arrays and DLPack capsules of them keep their slot alive.

use crate::buffer::{Buffer, Owner, View};
use crate::errors::{err, TensorError};
use crate::topic::{Context, Publisher};
use nerve::message::read_pod;
use nerve::tensor::{DType, TensorDescriptor, TensorPool as RawPool};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

/// A bounded pool of tensors in shared memory that other processes open without copying.
#[pyclass(frozen, module = "nerve._nerve")]
pub struct TensorPool {
    inner: RawPool,
}

fn tensor_buffer(t: nerve::tensor::Tensor) -> Buffer {
    let mem = (t.as_ptr(), t.len_bytes());
    Buffer::new(Owner::Tensor(t), mem, false, None, "tensor")
}

/// The descriptor of the frozen tensor `buf` holds, with `user`.
fn descriptor_of(buf: &Buffer, user: u64) -> PyResult<TensorDescriptor> {
    buf.with_owner(|o| match o {
        Owner::Tensor(t) => Ok(TensorDescriptor {
            user,
            ..t.descriptor()
        }),
        _ => Err(PyValueError::new_err(
            "only a frozen tensor has a descriptor: freeze() it first",
        )),
    })?
}

#[pymethods]
impl TensorPool {
    /// Opens the pool `name` of the context's domain, creating it with `slots` slots of
    /// `slot_bytes` bytes each if it does not exist (its memory is reserved at once).
    #[new]
    #[pyo3(signature = (ctx, name, slots=8, slot_bytes=16 << 20))]
    fn new(ctx: &Context, name: &str, slots: usize, slot_bytes: usize) -> PyResult<TensorPool> {
        let inner = RawPool::open_or_create(ctx.inner.get()?, name, slots, slot_bytes)
            .map_err(err::<TensorError>)?;
        Ok(TensorPool { inner })
    }

    /// Opens an existing pool.
    #[staticmethod]
    fn open_existing(ctx: &Context, name: &str) -> PyResult<TensorPool> {
        let inner = RawPool::open(ctx.inner.get()?, name).map_err(err::<TensorError>)?;
        Ok(TensorPool { inner })
    }

    /// The pool's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Number of slots.
    #[getter]
    fn slots(&self) -> usize {
        self.inner.slots()
    }

    /// Bytes per slot.
    #[getter]
    fn slot_bytes(&self) -> usize {
        self.inner.slot_bytes()
    }

    /// Slots in use now (by any process).
    fn in_use(&self) -> usize {
        self.inner.in_use()
    }

    /// Takes back the slots of processes that died; returns how many.
    fn reclaim(&self) -> usize {
        self.inner.reclaim()
    }

    /// A writable tensor of `shape` and `dtype` (a numpy dtype name, e.g. "float32");
    /// a full pool raises TensorError at once.
    fn _alloc(&self, shape: Vec<usize>, dtype: &str) -> PyResult<Buffer> {
        let dt = DType::from_name(dtype).ok_or_else(|| {
            PyValueError::new_err(format!(
                "unsupported dtype {dtype:?} (one of: {})",
                DType::ALL.map(|d| d.name()).join(", ")
            ))
        })?;
        let mut t = self.inner.alloc(&shape, dt).map_err(err::<TensorError>)?;
        let mem = (t.as_mut_ptr().cast_const(), t.len_bytes());
        Ok(Buffer::new(Owner::TensorMut(t), mem, true, None, "tensor"))
    }

    /// Opens the tensor a descriptor names, zero-copy: `descriptor` is its message's
    /// Buffer (read in place, no bytes object made) or its bytes. Returns the tensor's
    /// Buffer, shape (a tuple) and dtype name; a stale or foreign descriptor raises
    /// TensorError.
    fn _open<'py>(
        &self,
        py: Python<'py>,
        descriptor: &Bound<'py, PyAny>,
    ) -> PyResult<(Buffer, Bound<'py, PyTuple>, &'static str)> {
        const SIZE: usize = std::mem::size_of::<TensorDescriptor>();
        let wrong = |got: usize| {
            PyValueError::new_err(format!("a tensor descriptor has {SIZE} bytes, got {got}"))
        };
        let desc: TensorDescriptor = if let Ok(buf) = descriptor.cast::<Buffer>() {
            let mut raw = [0u8; SIZE];
            if let Err(len) = buf.get().read_exact(&mut raw)? {
                return Err(wrong(len));
            }
            read_pod(&raw).ok_or_else(|| wrong(SIZE))?
        } else {
            let raw: &[u8] = descriptor.extract()?;
            read_pod(raw).ok_or_else(|| wrong(raw.len()))?
        };
        let t = self.inner.open_tensor(&desc).map_err(err::<TensorError>)?;
        let shape = PyTuple::new(py, t.shape())?;
        let dtype = t.dtype().name();
        Ok((tensor_buffer(t), shape, dtype))
    }

    fn __repr__(&self) -> String {
        format!(
            "TensorPool({:?}, slots={}, slot_bytes={})",
            self.inner.name(),
            self.inner.slots(),
            self.inner.slot_bytes()
        )
    }
}

/// Freezes a tensor being written (refused while numpy views of it live): it becomes
/// read-only and shareable; returns its new Buffer.
#[pyfunction]
pub(crate) fn tensor_freeze(buf: &Buffer) -> PyResult<Buffer> {
    match buf.take()? {
        Owner::TensorMut(t) => Ok(tensor_buffer(t.freeze())),
        _ => Err(PyValueError::new_err(
            "only a tensor being written can be frozen",
        )),
    }
}

/// The descriptor (message bytes) of a frozen tensor, to publish on a topic, with `user`
/// (the application's field: a frame number or an acquisition stamp).
#[pyfunction]
#[pyo3(signature = (buf, user=0))]
pub(crate) fn tensor_descriptor<'py>(
    py: Python<'py>,
    buf: &Buffer,
    user: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    let desc = descriptor_of(buf, user)?;
    Ok(PyBytes::new(py, nerve::message::as_bytes(&desc)))
}

/// Publishes the descriptor of the frozen tensor `buf` holds, with `user`, on `publisher`
/// (of TensorDescriptor): the descriptor goes from the tensor into the sample without a
/// bytes object in between.
#[pyfunction]
#[pyo3(signature = (publisher, buf, user=0))]
pub(crate) fn tensor_publish(publisher: &Publisher, buf: &Buffer, user: u64) -> PyResult<()> {
    let desc = descriptor_of(buf, user)?;
    publisher.publish_raw(nerve::message::as_bytes(&desc))
}

/// A numpy array view of the tensor `buf` holds, in its own type and shape
/// (`numpy.asarray(view)` makes the final array in one step); None if the Buffer holds no
/// tensor (the caller makes a byte view). The view keeps the tensor alive and counts as
/// one of the Buffer's views.
#[pyfunction]
pub(crate) fn tensor_view(buf: &Bound<'_, Buffer>) -> PyResult<Option<View>> {
    Buffer::typed_view(buf, |o| match o {
        Owner::Tensor(t) => Some((t.dtype(), t.shape().to_vec())),
        Owner::TensorMut(t) => Some((t.dtype(), t.shape().to_vec())),
        _ => None,
    })
}

/// The numpy array of the tensor `buf` holds, in its own type and shape, made through
/// numpy's C API (see `ndarray`); its base is a [`View`], which keeps the tensor alive
/// and counts as one of the Buffer's views. None if the Buffer holds no tensor or numpy's
/// C API is not usable here (the caller takes `numpy.asarray(tensor_view(buf))`).
#[pyfunction]
pub(crate) fn tensor_array<'py>(
    py: Python<'py>,
    buf: &Bound<'py, Buffer>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Some(view) = tensor_view(buf)? else {
        return Ok(None);
    };
    let Some((dtype, shape)) = view.typed().map(|(d, s)| (d, s.to_vec())) else {
        return Ok(None);
    };
    let (ptr, writable) = (view.ptr(), view.writable());
    let base = Bound::new(py, view)?.into_any();
    // SAFETY: `typed_view` checked that the shape's items cover exactly the tensor's
    // bytes at `ptr` (a slot's data, 64-byte aligned; 8 for an empty tensor, which is
    // never read); `base` is the View that keeps the tensor (and so its slot, mapped
    // while the pool handle lives) alive for the array's life. A frozen tensor is never
    // written (read-only array); a tensor being written is written only through its
    // views (writable array), and it cannot be frozen while one lives.
    unsafe { crate::ndarray::array(py, dtype, &shape, ptr, writable, base) }
}
