//! The shared-memory tensor pool (`nerve::tensor`) for Python: tensors are Buffers, so
//! numpy arrays and DLPack capsules of them keep their slot alive.

use crate::buffer::{Buffer, Owner};
use crate::errors::{err, TensorError};
use crate::topic::Context;
use nerve::message::read_pod;
use nerve::tensor::{DType, TensorDescriptor, TensorPool as RawPool};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A bounded pool of tensors in shared memory that other processes open without copying.
#[pyclass(frozen, module = "nerve._nerve")]
pub struct TensorPool {
    inner: RawPool,
}

fn tensor_buffer(t: nerve::tensor::Tensor) -> Buffer {
    let mem = (t.as_ptr(), t.len_bytes());
    Buffer::new(Owner::Tensor(t), mem, false, None, "tensor")
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

    /// Opens the tensor a descriptor (its message bytes) names, zero-copy; a stale or
    /// foreign descriptor raises TensorError.
    fn _open(&self, descriptor: &[u8]) -> PyResult<(Buffer, Vec<usize>, &'static str)> {
        let desc: TensorDescriptor = read_pod(descriptor).ok_or_else(|| {
            PyValueError::new_err(format!(
                "a tensor descriptor has {} bytes, got {}",
                std::mem::size_of::<TensorDescriptor>(),
                descriptor.len()
            ))
        })?;
        let t = self.inner.open_tensor(&desc).map_err(err::<TensorError>)?;
        let shape = t.shape().to_vec();
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
    let desc = buf.with_owner(|o| match o {
        Owner::Tensor(t) => Ok(TensorDescriptor {
            user,
            ..t.descriptor()
        }),
        _ => Err(PyValueError::new_err(
            "only a frozen tensor has a descriptor: freeze() it first",
        )),
    })??;
    Ok(PyBytes::new(py, nerve::message::as_bytes(&desc)))
}
