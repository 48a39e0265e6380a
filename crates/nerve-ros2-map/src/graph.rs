//! ROS 2's graph as a bridge publishes it into Nerve (`/_ros2/graph`, which `nerve
//! node/topic/service list` show marked as ROS 2): the bridge (`nerve-ros2`'s engine)
//! writes it, the tools read it, so it lives here, beside the other shared ROS 2 forms
//! (the tools need not link the bridge to read it).

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The Nerve topic the ROS 2 graph is published on (latched, JSON).
pub const GRAPH_TOPIC: &str = "/_ros2/graph";

/// ROS 2's graph as the bridge sees it (its own and other bridges' entities left out).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RosGraph {
    /// Fully qualified node names.
    pub nodes: BTreeSet<String>,
    /// Topic name → (types, publishers, subscriptions).
    pub topics: BTreeMap<String, RosTopic>,
    /// Service name → type.
    pub services: BTreeMap<String, String>,
    /// Topic → why a ROS 2 subscription on it receives nothing (QoS asked above what
    /// the Nerve side offers).
    #[serde(default)]
    pub qos_mismatches: BTreeMap<String, String>,
    /// ROS 2 topic → why the bridge carries nothing of its publishers into Nerve (so
    /// `nerve topic list/info/echo` say the same as the bridge).
    #[serde(default)]
    pub not_carried: BTreeMap<String, NotCarried>,
}

/// Why a ROS 2 topic with publishers has no Nerve side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct NotCarried {
    /// Its ROS 2 type (`pkg/msg/Name`).
    pub ros_type: String,
    /// Whether the bridge is still asking the publishers' nodes for the type's
    /// definition (it may be carried soon); else it was refused.
    pub learning: bool,
    /// Why, naming the type and where its definition was looked for.
    pub why: String,
}

/// One ROS 2 topic.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RosTopic {
    /// Its type(s) (`pkg/msg/Name`).
    pub types: BTreeSet<String>,
    /// Publishers.
    pub publishers: usize,
    /// Subscriptions.
    pub subscriptions: usize,
}
