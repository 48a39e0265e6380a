//! Nerve bags: record topics to MCAP, inspect, recover and replay them.
//!
//! - [`record`]: a [`record::Recorder`] subscribes to every selected topic (type-erased,
//!   picking up topics that appear later), stamps each sample, converts it and hands it
//!   to a writer thread through a bounded queue; drops are counted, never silent.
//! - [`encoding`]: the ROS 2 form of the standard messages and the CDR of any other type.
//! - [`read`]: summaries (`nerve bag info`), and a scan that salvages what a killed
//!   recorder left (`nerve bag recover`); a bag is one MCAP file or a directory of them
//!   (rosbag2's, split into several files, with or without `metadata.yaml`).
//! - [`play`]: replay on absolute deadlines, read ahead by a second thread.
#![warn(missing_docs)]

pub mod bridge;
pub mod compare;
pub mod encoding;
pub mod play;
pub mod read;
pub mod record;
pub mod replay;
pub mod write;

/// Metadata keys on every channel Nerve writes.
pub mod meta {
    /// The Nerve type name.
    pub const TYPE: &str = "nerve.type";
    /// The Nerve schema (its version 1 text).
    pub const SCHEMA: &str = "nerve.schema";
    /// The name of the metadata record that closes a recording (per-topic counts).
    pub const RECORDING: &str = "nerve.recording";
}

/// What can go wrong with a bag.
#[derive(Debug, thiserror::Error)]
pub enum BagError {
    /// A file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The MCAP library refused the file or a record.
    #[error("{path}: not a readable MCAP file: {reason}")]
    Mcap {
        /// The file.
        path: String,
        /// The cause, as the MCAP reader gives it.
        reason: String,
    },
    /// A payload could not be converted to or from its recorded encoding.
    #[error("cannot convert {what}: {reason}")]
    Convert {
        /// The message, type or field.
        what: String,
        /// Why.
        reason: String,
    },
    /// A topic of the bag cannot be replayed or recorded (type conflict, no schema).
    #[error("topic {topic}: {reason}")]
    Topic {
        /// The topic.
        topic: String,
        /// Why.
        reason: String,
    },
    /// A bag directory that cannot be read as one bag: its rosbag2 `metadata.yaml` is
    /// malformed or names files that are missing or not MCAP, or it holds no MCAP file.
    #[error("{path}: {reason}")]
    Directory {
        /// The directory.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A damaged bag, refused (see [`read::OnDamage`]).
    #[error(
        "{0} (--tolerate-damage reads what is readable; `nerve bag recover` saves it to a \
         new file)"
    )]
    Damaged(read::Damage),
    /// Bad options (regex, split size, rate, remapping).
    #[error("{0}")]
    Options(String),
    /// Nerve itself failed (shared memory, topic creation).
    #[error(transparent)]
    Nerve(#[from] nerve::TopicError),
    /// A lockstep replay failed (a node died, the replay stalled).
    #[error(transparent)]
    Replay(#[from] nerve::time::lockstep::LockstepError),
    /// A subscriber failed to receive.
    #[error(transparent)]
    Recv(#[from] nerve::RecvError),
}

impl BagError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> BagError {
        BagError::Io {
            path: path.display().to_string(),
            source,
        }
    }

    pub(crate) fn mcap(path: &std::path::Path, e: impl std::fmt::Display) -> BagError {
        BagError::Mcap {
            path: path.display().to_string(),
            reason: e.to_string(),
        }
    }
}
