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
//! [`TfBuffer`] is the tree shared by many threads: lookups never lock and never make a
//! writer wait, and allocate nothing. Transforms travel as `nerve_msgs/TfMessage` on
//! `/tf` and `/tf_static` ([`Broadcaster`], [`StaticBroadcaster`]); a [`Listener`] feeds a
//! buffer on the caller's thread, a [`TransformListener`] on a thread of its own. The
//! helpers in [`apply`](transform_points) move points, poses and point clouds.
//! [`TfTree`] is the same model for one thread (and the baseline of `nerve bench tf`).
//!
//! ```
//! use nerve_tf::{Quat, TfBuffer, Transform, TreeLimits, Vec3, LATEST};
//! let buffer = TfBuffer::new(TreeLimits::default());
//! let lidar = Transform::new(Vec3::new(0.2, 0.0, 0.5), Quat::IDENTITY);
//! buffer.set_transform("base_link", "lidar", 0, lidar, true).unwrap();
//! let t = buffer.lookup_transform("base_link", "lidar", LATEST).unwrap();
//! assert_eq!(t.apply(Vec3::new(1.0, 0.0, 0.0)), Vec3::new(1.2, 0.0, 0.5));
//! ```

mod apply;
mod buffer;
mod error;
mod listener;
mod math;
mod topics;
mod tree;
mod walk;

pub use apply::{transform_cloud, transform_points, transform_pose, CloudError};
pub use buffer::{AsFrame, FrameHandle, TfBuffer};
pub use listener::TransformListener;

pub use error::TfError;
pub use math::{Quat, Transform, Vec3};
pub use topics::{
    from_msg, to_msg, Broadcaster, Listener, StaticBroadcaster, TfTopicError, MAX_STATIC,
    TF_STATIC_TOPIC, TF_TOPIC,
};
pub use tree::{FrameInfo, TfTree, TreeLimits, LATEST};
