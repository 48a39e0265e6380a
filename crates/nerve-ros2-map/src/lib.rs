//! The ROS 2 form of a Nerve message, decided in one place: bag recording and replay,
//! the ROS 2 bridge (DDS and rmw_zenoh, both directions), the Foxglove bridge and the CLI
//! all ask this crate, so a Nerve type crosses to ROS 2 the same way everywhere.
//!
//! - [`standard`]: the table "Nerve type ↔ ROS 2 type" ([`standard::standard`]) with the
//!   `ros2msg` definition of each ROS 2 type and the CDR conversion both ways, and the
//!   lookups every user goes through: [`standard::of_nerve`] (a Nerve type's ROS 2 form)
//!   and [`standard::of_ros`] (the Nerve type a ROS 2 type becomes: only a conversion that
//!   is exact, unless the user names a lossy one).
//! - [`action`]: ROS 2 action types: the Fibonacci actions as Nerve's own, any other as
//!   CDR ([`nerve_msgs::ros2::Ros2Action`]) with the wire messages of ROS 2 actions.
//! - [`service`]: the ROS 2 services that are Nerve's own service types.
//! - [`carrier`]: any other ROS 2 type, carried through Nerve as its CDR
//!   ([`nerve_msgs::ros2::Ros2Cdr`]), checked against its definition both ways.
//! - [`graph`]: ROS 2's graph as a running bridge publishes it for the tools.
//!
//! CDR itself is read and written by [`nerve_ros2_types::CdrReader`] and
//! [`nerve_ros2_types::CdrWriter`] (one codec for the dynamic and the typed forms).
//!
//! The rule: a message becomes a Nerve message only when its conversion keeps every
//! field. A conversion that would cut a value (a frame id longer than Nerve's
//! [`nerve_msgs::FrameId`], more point fields than Nerve holds) fails for that message
//! with [`ConvertError::DoesNotFit`] naming the field, so the caller counts it as not
//! delivered instead of sending something else.
#![warn(missing_docs)]

pub mod action;
pub mod carrier;
pub mod graph;
pub mod service;
pub mod standard;

pub use nerve_ros2_types::{CdrReader, CdrWriter, DecodeError, EncodeError};
pub use standard::{of_nerve, of_ros, Standard};

/// Why a message could not be converted between its Nerve and its ROS 2 form.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// CDR that does not decode (cut short, a length past the end, another encapsulation).
    #[error("malformed CDR: {0}")]
    Malformed(#[from] DecodeError),
    /// A value CDR cannot hold (a sequence longer than CDR's 32-bit length).
    #[error("cannot write CDR: {0}")]
    Encode(#[from] EncodeError),
    /// A value the other form cannot hold exactly: the message is not converted, never
    /// cut (a 70-byte frame id for Nerve's 64, a stamp out of ROS 2's range).
    #[error("{field}: {reason}")]
    DoesNotFit {
        /// The field, e.g. `header.frame_id`.
        field: String,
        /// Why, with the sizes.
        reason: String,
    },
    /// A Nerve payload that is not a message of its type (shorter than its head, a count
    /// past its slots, elements cut short).
    #[error("{what}: {reason}")]
    Payload {
        /// The type or field.
        what: String,
        /// Why.
        reason: String,
    },
    /// A ROS 2 definition that does not parse or hash.
    #[error("the ROS 2 definition of {ros_type}: {reason}")]
    Definition {
        /// The ROS 2 type.
        ros_type: String,
        /// Why.
        reason: String,
    },
}

impl ConvertError {
    /// Whether the message itself was fine but holds a value the other form cannot
    /// keep exactly (the message is not delivered, it is not malformed).
    pub fn does_not_fit(&self) -> bool {
        matches!(self, ConvertError::DoesNotFit { .. })
    }
}
