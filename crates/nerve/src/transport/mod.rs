//! Transports under the public API.

pub(crate) mod doorbell;
pub(crate) mod intra;
pub(crate) mod remote;
pub(crate) mod ring;
pub(crate) mod route;
pub(crate) mod rpc;
pub(crate) mod shm;
pub(crate) mod shm_ring;
pub(crate) mod wait;
