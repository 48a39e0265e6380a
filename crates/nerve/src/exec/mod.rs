//! Running callbacks: wait sets, timers, executors (single- and multi-threaded), state
//! machines and the real-time-aware tick scheduler.

pub mod executor;
pub mod machine;
pub mod scheduler;
pub mod timer;
pub(crate) mod waitset;
