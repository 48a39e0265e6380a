//! The rmw_zenoh side: ROS 2's Zenoh middleware (key expressions, liveliness tokens,
//! sample attachments), for the bridge's second mode.
//!
//! The formats are those of `rmw_zenoh_cpp` (its `docs/design.md`), checked byte for
//! byte against captures of a real Humble `rmw_zenoh_cpp` publisher
//! (`/work/shared/ros2/rmw_zenoh/`; the GID in its captured attachment is the XXH3-128 of
//! its captured token, as [`Gid::from_token_key`] computes it) and against the examples of
//! that document:
//!
//! - [`names`]: data key expressions `<domain>/<name>/<DDS type>/<type hash>`
//!   ([`DataKey`]), ROS 2 ↔ DDS type names, [`TypeHash`] (`RIHS01_<hex>` or Humble's
//!   `TypeHashNotSupported`);
//! - [`token`]: liveliness tokens `@ros2_lv/...` of nodes, publishers, subscriptions,
//!   services and clients ([`EntityToken`]);
//! - [`qos`]: the QoS chunk of those tokens ([`Qos`]);
//! - [`attachment`]: the attachment of every sample (sequence number, source timestamp,
//!   GID) and the GID itself ([`Attachment`], [`Gid`]).
//!
//! [`ZenohSide`] uses them on a Zenoh session: one ROS 2 node with publishers and
//! subscriptions of raw CDR and the domain's graph read from liveliness tokens. It takes
//! and returns plain Rust types (topic names, ROS 2 type names such as
//! `std_msgs/msg/String`, type hash strings, CDR bytes) and nothing else of this crate.
//!
//! [`ZenohEngineSide`] is the engine's [`crate::engine::RosSide`] on a [`ZenohSide`]
//! ([`crate::Side::Zenoh`]): the engine carries topics both ways, demand-driven, and
//! services both ways (a ROS 2 server is a complete queryable with an `SS` token, a
//! client queries it under an `SC` token; see [`ZenohSide::service`] and
//! [`ZenohSide::client`]) and nodes' parameters both ways (as ROS 2's parameter
//! services), with loop prevention; [`mapping`] holds the names, hashes
//! and QoS it announces.
//!
//! The formats are written here rather than taken from `ros2-client`'s `zenoh` feature:
//! that one serializes typed messages through its own node and executor, where the bridge
//! needs raw CDR on a session it shares; and its QoS encoding always writes the depth
//! where rmw_zenoh leaves the default depth (42) empty.
#![warn(missing_docs)]

pub mod attachment;
mod engine_side;
pub mod mapping;
pub mod names;
pub mod qos;
mod side;
pub mod token;

pub use attachment::{Attachment, AttachmentError, Gid};
pub(crate) use engine_side::HALVES;
pub use engine_side::{
    ZenohClient, ZenohEngineSide, ZenohReader, ZenohReady, ZenohServer, ZenohWriter,
};
pub use mapping::BRIDGE_NODE_PREFIX;
pub use names::{DataKey, FormatError, TokenPart, TypeHash};
pub use qos::{Durability, History, Liveliness, Qos, QosDuration, QosError, Reliability};
pub use side::{
    peer_config, Graph, GraphEntity, Received, RosClient, RosPublisher, RosRequest, RosService,
    RosSubscriber, RosSubscription, SubscriberStats, ZenohError, ZenohSide, MAX_GRAPH_ENTITIES,
    MAX_QUEUE,
};
pub use token::{EntityKind, EntityToken, TopicInfo};
