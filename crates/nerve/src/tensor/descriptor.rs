//! [`TensorDescriptor`]: the plain-data message that names a tensor in a pool.

use super::{DType, MAX_DIMS, MAX_NAME};

/// Names one tensor of a [`super::TensorPool`]: send it on any topic and the receiver
/// opens the tensor zero-copy with [`super::TensorPool::open_tensor`] or
/// [`super::TensorPool::open_descriptor`]. Made by [`super::Tensor::descriptor`].
///
/// Nothing in it is trusted: opening checks the pool's name and id, the slot's range, the
/// element type, the shape against the byte length and the slot size, and the slot's
/// generation, phase and recorded shape, refusing each mismatch with a named
/// [`crate::TensorError`]; `user` is the application's and is not checked. 136 bytes, no
/// padding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, nerve_derive::Message)]
#[repr(C)]
#[message(name = "nerve/TensorDescriptor")]
pub struct TensorDescriptor {
    /// The pool's name, NUL-padded.
    pub pool: [u8; 32],
    /// The pool's random id (a pool created again under the same name has another).
    pub pool_id: u64,
    /// The slot holding the tensor.
    pub slot: u32,
    /// The slot's generation when the tensor was made (changes whenever it is freed).
    pub generation: u32,
    /// The element type's [`DType::code`].
    pub dtype: u8,
    /// Number of dimensions (0 to 8; 0 is a scalar).
    pub ndim: u8,
    /// Reserved, zero.
    pub reserved: [u8; 6],
    /// The dimensions (C order); entries from `ndim` on are zero.
    pub shape: [u64; MAX_DIMS],
    /// Bytes of data: the product of the dimensions times the element size.
    pub len_bytes: u64,
    /// Free for the application: a frame number or an acquisition stamp travelling with
    /// the tensor (0 unless the producer sets it; Nerve does not read it).
    pub user: u64,
}

impl TensorDescriptor {
    /// The pool's name, if the field holds a valid one (NUL-padded, see
    /// [`super::TensorPool::create`]).
    pub fn pool_name(&self) -> Option<&str> {
        let n = self.pool.iter().position(|&b| b == 0).unwrap_or(32);
        let name = std::str::from_utf8(&self.pool[..n]).ok()?;
        let padded = self.pool[n..].iter().all(|&b| b == 0);
        (padded && super::pool::check_name(name).is_ok()).then_some(name)
    }

    /// The element type, if the code is one.
    pub fn dtype(&self) -> Option<DType> {
        DType::from_code(self.dtype)
    }

    /// The dimensions (the first `ndim` entries; all 8 if `ndim` is larger).
    pub fn shape(&self) -> &[u64] {
        &self.shape[..usize::from(self.ndim).min(MAX_DIMS)]
    }
}

/// `name` NUL-padded into the descriptor's field (names are at most [`MAX_NAME`] bytes).
pub(crate) fn name_field(name: &str) -> [u8; 32] {
    let mut b = [0u8; 32];
    let n = name.len().min(MAX_NAME);
    b[..n].copy_from_slice(&name.as_bytes()[..n]);
    b
}
