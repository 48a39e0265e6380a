//! Topics: typed publishers and subscribers, their loans and samples, and the
//! type-erased subscriber for tools.

pub(crate) mod publisher;
pub(crate) mod raw;
pub(crate) mod subscriber;
