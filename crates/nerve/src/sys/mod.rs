//! Everything that talks to the operating system: clocks, futexes, private files,
//! signals, real-time settings. Other modules call these instead of making system calls themselves.

pub(crate) mod clock;
pub(crate) mod files;
pub(crate) mod futex;
pub(crate) mod membarrier;
pub mod rt;
pub mod signals;
