//! What can go wrong with transforms; every message names the frames and times.

/// A transform could not be stored or looked up.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TfError {
    /// A frame name is empty or malformed.
    #[error("invalid frame name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The rotation is NaN, infinite or not of unit length.
    #[error("transform {parent} -> {child}: rotation {rotation:?} is not a unit quaternion (norm {norm})")]
    BadRotation {
        /// Parent frame.
        parent: String,
        /// Child frame.
        child: String,
        /// The quaternion given (x, y, z, w).
        rotation: [f64; 4],
        /// Its norm.
        norm: f64,
    },
    /// The translation is NaN or infinite.
    #[error("transform {parent} -> {child}: translation {translation:?} is not finite")]
    BadTranslation {
        /// Parent frame.
        parent: String,
        /// Child frame.
        child: String,
        /// The translation given.
        translation: [f64; 3],
    },
    /// A frame would get a second parent.
    #[error(
        "frame {child} already has parent {existing}; a transform from {requested} is refused"
    )]
    TwoParents {
        /// The frame.
        child: String,
        /// Its parent.
        existing: String,
        /// The other parent asked for.
        requested: String,
    },
    /// The edge would close a loop.
    #[error("transform {parent} -> {child} would make a loop: {parent} descends from {child}")]
    Loop {
        /// Parent frame.
        parent: String,
        /// Child frame.
        child: String,
    },
    /// A frame nobody published.
    #[error("unknown frame {frame:?}")]
    UnknownFrame {
        /// The frame.
        frame: String,
    },
    /// The two frames are in different trees.
    #[error("frames {target} and {source_frame} are not connected: {target} is in the tree of {target_root}, {source_frame} in the tree of {source_root}")]
    NotConnected {
        /// Target frame.
        target: String,
        /// Source frame.
        source_frame: String,
        /// Root of the target's tree.
        target_root: String,
        /// Root of the source's tree.
        source_root: String,
    },
    /// The time asked for is outside what an edge holds.
    #[error("lookup of {child} in {parent} at {time_ns} ns would extrapolate into the {direction}: the buffer holds {oldest_ns} to {newest_ns} ns")]
    Extrapolation {
        /// Parent frame of the edge.
        parent: String,
        /// Child frame of the edge.
        child: String,
        /// The time asked for (ns).
        time_ns: i64,
        /// "past" or "future".
        direction: &'static str,
        /// Oldest stamp held (ns).
        oldest_ns: i64,
        /// Newest stamp held (ns).
        newest_ns: i64,
    },
    /// The edge holds no transform (dynamic histories cleared after a time jump).
    #[error("no transform of {child} in {parent} is held (cleared after time jumped back?)")]
    NoData {
        /// Parent frame of the edge.
        parent: String,
        /// Child frame of the edge.
        child: String,
    },
    /// The tree holds as many frames as it may.
    #[error(
        "the tree holds {max} frames; frame {frame} is refused (raise TreeLimits::max_frames)"
    )]
    TooManyFrames {
        /// The new frame.
        frame: String,
        /// The limit.
        max: usize,
    },
}
