//! Transforms: where one coordinate frame is relative to another, at a given time.
//!
//! The model is tf2's: every frame has at most one parent, and each edge carries a
//! history of stamped transforms (child in parent). [`TfTree::lookup`] walks from both
//! frames up to their common ancestor and composes the edges, each interpolated at the
//! asked time (linear for translation, slerp for rotation). Static edges hold one
//! transform valid at every time. Histories are bounded by a time window per frame and
//! by a count, and the tree by a number of frames; bad input (a non-unit or NaN
//! rotation, a second parent, a time outside the window) is an error naming the frames
//! and times.
//!
//! Transforms travel as `nerve_msgs/TfMessage` on `/tf` and `/tf_static` ([`Broadcaster`],
//! [`StaticBroadcaster`], [`Listener`]). The tree is single-threaded; a buffer shared by
//! many reader threads builds on it.

mod error;
mod math;
mod topics;
mod tree;

pub use error::TfError;
pub use math::{Quat, Transform, Vec3};
pub use topics::{
    from_msg, to_msg, Broadcaster, Listener, StaticBroadcaster, TfTopicError, MAX_STATIC,
    TF_STATIC_TOPIC, TF_TOPIC,
};
pub use tree::{FrameInfo, TfTree, TreeLimits, LATEST};
