//! The systems under test, each with a client (run in the measuring process) and a server
//! (run in a child process).

pub mod cyclone;
pub mod iceoryx2;
pub mod nerve;
pub mod uds;
pub mod zenoh;
