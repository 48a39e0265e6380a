//! Tensors in shared memory that other processes open zero-copy.
//!
//! A [`TensorPool`] is a bounded set of equal slots in one file of the domain
//! (`/dev/shm/<domain prefix>tensor_<name>`, mode 0600). A producer
//! [allocates](TensorPool::alloc) a [`TensorMut`] in a free slot, writes it in place,
//! [freezes](TensorMut::freeze) it into a read-only [`Tensor`] and sends its
//! [`TensorDescriptor`] (a 128-byte plain-data message) on an ordinary topic; a consumer
//! opens the descriptor ([`TensorPool::open_tensor`] or [`TensorPool::open_descriptor`])
//! and reads the producer's bytes where they lie. The slot is freed when the last
//! reference, in any process, is dropped. Every type here is `Send + Sync`.
//!
//! ```
//! use nerve::prelude::*;
//! use nerve::tensor::{DType, TensorDescriptor, TensorPool};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = Context::from_env()?;
//! # let viewer = ctx.node("doc_viewer").create()?;
//! # let sub = viewer.subscriber::<TensorDescriptor>("/doc_camera/frames").create()?;
//! // producer: a pool of 4 RGB frames, one frame written and published
//! let pool = TensorPool::open_or_create(&ctx, "doc_camera", 4, 480 * 640 * 3)?;
//! let node = ctx.node("doc_camera").create()?;
//! let frames = node.publisher::<TensorDescriptor>("/doc_camera/frames").create()?;
//! let mut frame = pool.alloc(&[480, 640, 3], DType::U8)?;
//! frame.bytes_mut().fill(128);
//! let frame = frame.freeze();
//! frames.publish(&frame.descriptor())?;
//!
//! // consumer (in another process, with its own context)
//! let desc = sub.recv_timeout(Duration::from_millis(100))?.expect("a frame");
//! let image = TensorPool::open_descriptor(&ctx, &desc)?;
//! assert_eq!((image.shape(), image.dtype()), (&[480, 640, 3][..], DType::U8));
//! assert_eq!(image.bytes()[0], 128);
//! drop(frame); // the slot stays until `image` is dropped too
//! # drop(image);
//! # TensorPool::remove(&ctx, "doc_camera")?;
//! # Ok(()) }
//! ```
//!
//! # The file
//!
//! ```text
//! 0        header: magic "NRVTENS\0", version 1, records (64), slots, slot_bytes,
//!          pool id (random, non-zero), file size (64 bytes)
//! 64       per slot, 128 bytes: the state word (u64), then the tensor's length, type
//!          and ndim, shape[8] (written while the slot is being written)
//! records  64 handle records: a 64-byte head (the record's state word), then one u32
//!          per slot: the references this handle holds on it
//! data     page-aligned: slots x slot_bytes (a multiple of 64, so every tensor is
//!          64-byte aligned)
//! ```
//!
//! The whole file is reserved with `fallocate` when the pool is created (a full /dev/shm
//! is an error then, not a SIGBUS later) and built under a temporary name, then linked
//! into place. `open` reads the header with `pread` before mapping anything, checks the
//! magic, version, record count, ranges and the file's size against the layout, and
//! refuses the file by name otherwise: a damaged or foreign file never makes this
//! process read outside its mapping (every index into it is a slot number checked
//! against the header it validated, never a value read from the shared memory).
//!
//! # Slot states and references
//!
//! A slot's state word packs its **generation** (bits 63–32), its **phase** (bits
//! 31–30: free, being written, ready) and the **references** held on it by everyone
//! (bits 29–0). `alloc` turns a free slot into "being written" with one reference (a
//! CAS); `freeze` makes it ready (a Release that publishes the bytes); opening a
//! descriptor adds a reference with a CAS that checks the generation and that the slot
//! is ready, so a slot being written cannot be opened, even from a guessed descriptor.
//! The last reference to go frees the slot and bumps its generation, so a descriptor
//! kept from before is refused as [`TensorError::Stale`], also once the slot holds
//! another tensor. (A slot reused 2³² times between making and opening one descriptor
//! would match again: not a practical concern.) Each process counts a tensor once per
//! open or freeze, whatever its clones.
//!
//! # Processes that die
//!
//! Every pool handle owns one of 64 records in the file, with the number of references
//! it holds on each slot, and holds an open-file-description lock on that record's byte
//! (the doorbell's scheme): the kernel drops the lock when the process dies. Opening a
//! pool, and allocating in a full one, reclaims every record whose lock is free: its
//! counts are subtracted from the slots', which frees slots nobody else holds (a slot
//! the dead process was writing included). A count is raised in the slot before the
//! record and lowered in the record first (and a reaper zeroes the record before it
//! subtracts), so a death between the two writes leaves an **over-count**: that slot is
//! leaked until the pool is created anew (removed, or the domain's last context gone),
//! never freed while someone holds it. A 65th handle open at once is
//! [`TensorError::TooManyHandles`]. A handle that died while claiming its record (between
//! two instructions) leaks that record the same way.
//!
//! A forked child shares its parent's file descriptions, and with them the record
//! locks: it must not drop the copies of pools and tensors it inherited (each would give
//! back a reference its parent also gives back); let it `exec` or `_exit`.
//!
//! The file is this user's alone, but this user's processes are trusted not to scribble
//! on it: one that does can break the counts (leaking slots, or freeing a tensor still
//! read), never this process's memory safety beyond that shared data. Truncating the
//! file under a live mapping (also this user only) raises SIGBUS, as for any mapping.
//!
//! # Cleanup
//!
//! Every handle holds its context, so the domain stays in use while a pool is open; the
//! last context of the domain removes the domain's pool files with its other files, as
//! `nerve clean` does when no process uses the domain. [`TensorPool::remove`] removes a
//! pool's name earlier (open handles keep their memory).

mod descriptor;
mod dtype;
mod handle;
mod pool;
#[cfg(test)]
mod tests;

pub use crate::error::TensorError;
pub use descriptor::TensorDescriptor;
pub use dtype::DType;
pub use handle::{Tensor, TensorMut};
pub use pool::TensorPool;

/// Most dimensions a tensor has.
pub const MAX_DIMS: usize = 8;
/// Most slots a pool has.
pub const MAX_SLOTS: usize = 4096;
/// Largest slot in bytes (4 GiB).
pub const MAX_SLOT_BYTES: usize = 1 << 32;
/// Longest pool name in bytes (it fits a descriptor's 32-byte field with a NUL).
pub const MAX_NAME: usize = 31;
/// Pool handles open at once (each owns a record in the file).
pub const RECORDS: usize = 64;

/// Every type here may be shared and sent between threads (the Python bindings need it).
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<TensorPool>();
    send_sync::<Tensor>();
    send_sync::<TensorMut>();
    send_sync::<TensorDescriptor>();
    send_sync::<TensorError>();
};
