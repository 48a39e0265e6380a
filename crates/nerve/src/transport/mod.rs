//! Transports under the public API.

pub(crate) mod doorbell;
pub(crate) mod shm;
