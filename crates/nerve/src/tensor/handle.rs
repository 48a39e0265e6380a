//! [`TensorMut`] (a tensor being written) and [`Tensor`] (a readable, shared one).

use super::pool::{PoolInner, TensorPool};
use super::{DType, TensorDescriptor, MAX_DIMS};
use std::fmt;
use std::sync::Arc;

/// One reference of a pool handle to one slot at one generation; gives it back when
/// dropped (freeing the slot when it was the last anywhere).
pub(crate) struct Held {
    /// Keeps the mapping (and the handle's record) alive.
    pub(crate) pool: Arc<PoolInner>,
    pub(crate) slot: usize,
    pub(crate) generation: u32,
    pub(crate) dtype: DType,
    pub(crate) ndim: usize,
    pub(crate) shape: [usize; MAX_DIMS],
    /// Bytes of data (checked against the slot size when the reference was taken).
    pub(crate) len: usize,
}

impl Held {
    fn shape(&self) -> &[usize] {
        &self.shape[..self.ndim]
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.pool.release(self.slot, self.generation);
    }
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:?} in pool {} slot {} generation {}",
            self.dtype,
            self.shape(),
            self.pool.name(),
            self.slot,
            self.generation
        )
    }
}

/// A tensor being written: its slot belongs to this value alone (nobody can open it
/// yet). [`freeze`](TensorMut::freeze) it to share it; dropping it unfrozen frees the
/// slot.
#[derive(Debug)]
pub struct TensorMut {
    pub(crate) held: Held,
}

impl TensorMut {
    /// The dimensions (C order; empty for a scalar).
    pub fn shape(&self) -> &[usize] {
        self.held.shape()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.held.dtype
    }

    /// Bytes of data (elements times the element size).
    pub fn len_bytes(&self) -> usize {
        self.held.len
    }

    /// The data, to read back what was written.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the slot's data lies in the mapping (`PoolInner::data`; len <= slot
        // size, checked by `alloc`), which `held.pool` keeps alive; the slot is WRITING
        // and counted for this value, so no one opens, frees or reuses it, and only this
        // value writes it, through `&mut self` (so not while this borrow lives).
        unsafe { std::slice::from_raw_parts(self.held.pool.data(self.held.slot), self.held.len) }
    }

    /// The data, to write. Its contents are what the slot held before (not zeroed).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes this the only reference to the bytes
        // in this process, and no other handle can open a WRITING slot.
        unsafe {
            std::slice::from_raw_parts_mut(self.held.pool.data(self.held.slot), self.held.len)
        }
    }

    /// The first byte of the data (64-byte aligned), for writers that take a pointer
    /// (valid for [`len_bytes`](TensorMut::len_bytes) bytes while this value lives and is
    /// not frozen).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.held.pool.data(self.held.slot)
    }

    /// Ends the writing: the tensor becomes readable, here and by whoever opens its
    /// [descriptor](Tensor::descriptor), and is never written again.
    pub fn freeze(self) -> Tensor {
        self.held.pool.freeze(self.held.slot, self.held.generation);
        Tensor {
            held: Arc::new(self.held),
        }
    }
}

/// A read-only tensor in a pool: cloning it is one more reference, and the slot is freed
/// when the last reference anywhere (in any process) is dropped.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub(crate) held: Arc<Held>,
}

impl Tensor {
    /// The dimensions (C order; empty for a scalar).
    pub fn shape(&self) -> &[usize] {
        self.held.shape()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.held.dtype
    }

    /// Bytes of data (elements times the element size).
    pub fn len_bytes(&self) -> usize {
        self.held.len
    }

    /// The data, in place in the shared memory (no copy).
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the slot's data lies in the mapping (len <= slot size, checked when the
        // reference was taken), which `held.pool` keeps alive; the reference counted for
        // this value keeps the slot from being freed or reused, and a READY slot is never
        // written through this API.
        unsafe { std::slice::from_raw_parts(self.held.pool.data(self.held.slot), self.held.len) }
    }

    /// The first byte of the data (64-byte aligned), valid for
    /// [`len_bytes`](Tensor::len_bytes) bytes while this value (or a clone) lives; read
    /// only.
    pub fn as_ptr(&self) -> *const u8 {
        self.held.pool.data(self.held.slot)
    }

    /// The descriptor to send to other processes (or contexts), which open it with
    /// [`TensorPool::open_tensor`] or [`TensorPool::open_descriptor`].
    pub fn descriptor(&self) -> TensorDescriptor {
        let h = &*self.held;
        TensorDescriptor {
            pool: super::descriptor::name_field(h.pool.name()),
            pool_id: h.pool.id(),
            slot: h.slot as u32,
            generation: h.generation,
            dtype: h.dtype.code(),
            ndim: h.ndim as u8,
            reserved: [0; 6],
            shape: h.shape.map(|d| d as u64),
            len_bytes: h.len as u64,
            user: 0,
        }
    }

    /// The pool handle this tensor was allocated or opened through.
    pub fn pool(&self) -> TensorPool {
        TensorPool {
            inner: self.held.pool.clone(),
        }
    }
}
