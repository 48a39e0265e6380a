//! What the engine needs of a ROS 2 network, and all it knows of one: a look at its
//! graph, writers and readers of raw CDR on topics, service servers and clients. DDS
//! ([`crate::dds::DdsSide`]) and rmw_zenoh ([`crate::rmw_zenoh::ZenohSide`]) implement it;
//! everything else (which topics and services cross, QoS, conversion, loops, counting)
//! is the engine's, written once.

use crate::dds::RosQos;
use crate::peers::Peers;
use crate::services::{service_type_hash, ServiceRoute};
use crate::types::{route_type_hash, Catalog, TypeRoute};
use crate::{BridgeConfig, BridgeError};
use std::collections::BTreeSet;
use std::hash::Hash;
use std::time::Duration;

/// A ROS 2 type as a network announces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RosType {
    /// `pkg/msg/Name`, `pkg/srv/Name`, `pkg/action/Name_SendGoal`.
    pub name: String,
    /// Its RIHS01 hash (`RIHS01_<hex>`) where its definition is known (rmw_zenoh puts it
    /// in every key; DDS does not use it).
    pub hash: Option<String>,
}

impl RosType {
    /// The type of a topic's route.
    pub fn of_topic(route: &TypeRoute) -> RosType {
        RosType {
            name: route.ros_name.clone(),
            hash: route_type_hash(route).ok(),
        }
    }

    /// The type of a service's route; `search`: where definitions are looked up.
    pub fn of_service(route: &ServiceRoute, search: &[std::path::PathBuf]) -> RosType {
        RosType {
            name: route.ros_type.clone(),
            hash: service_type_hash(route, search),
        }
    }
}

/// One endpoint of the ROS 2 graph that is neither this bridge's nor another bridge's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Its topic or service name (`/chatter`, `/add_two_ints`).
    pub name: String,
    /// Its ROS 2 type (`std_msgs/msg/String`, `example_interfaces/srv/AddTwoInts`).
    pub ros_type: String,
    /// Its QoS.
    pub qos: RosQos,
    /// Whether it reads or writes a keyed DDS topic (`@key` members; never on rmw_zenoh).
    pub keyed: bool,
    /// The RIHS01 type hash it announced (`RIHS01_<hex>`); `None` where it announced none
    /// (a DDS endpoint without type information, Humble's `TypeHashNotSupported`).
    pub type_hash: Option<String>,
}

/// The ROS 2 graph as one look shows it, without this bridge's and other bridges'
/// endpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SideGraph {
    /// Fully qualified node names.
    pub nodes: BTreeSet<String>,
    /// Topic publishers.
    pub publishers: Vec<Endpoint>,
    /// Topic subscriptions.
    pub subscriptions: Vec<Endpoint>,
    /// Service servers (an action's services and topics included: the engine tells them
    /// apart by name).
    pub servers: Vec<Endpoint>,
    /// Service clients.
    pub clients: Vec<Endpoint>,
}

/// One sample a [`TopicReader`] took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    /// The message (CDR with its encapsulation header).
    pub cdr: Vec<u8>,
    /// When its publisher wrote it (nanoseconds since the Unix epoch), if it said.
    pub stamp_ns: Option<i64>,
    /// Whether this or another bridge published it (never forwarded again).
    pub from_bridge: bool,
}

/// Writes raw CDR on one ROS 2 topic.
pub trait TopicWriter: Send {
    /// Sends one message (CDR with its encapsulation header); `Err` says why it was not
    /// sent (the engine counts it as not delivered and names the topic).
    fn write(&mut self, cdr: Vec<u8>) -> Result<(), String>;

    /// Whether a subscription in the graph receives what this writer sends (the engine
    /// pulls samples from Nerve only while one does).
    fn serves(&self, subscription: &Endpoint) -> bool;

    /// Called after each look at the graph with the subscriptions on the writer's topic
    /// (rmw_zenoh serves Humble's subscriptions with a second publisher while there are
    /// any); `Err` is reported with the topic.
    fn subscriptions(&mut self, _on_topic: &[&Endpoint]) -> Result<(), BridgeError> {
        Ok(())
    }
}

/// Takes raw CDR from one ROS 2 topic; readiness is signalled through the
/// [`RosSide::Ready`] set it was made with, under its token.
pub trait TopicReader: Send {
    /// The next message not yet taken; `Err` names what was wrong with one that could not
    /// be read (the engine counts it malformed and goes on).
    fn take(&mut self, peers: &Peers) -> Result<Option<Incoming>, String>;

    /// Messages the reader itself dropped since the last call (a full queue); the engine
    /// counts them as not delivered.
    fn lost(&mut self) -> u64 {
        0
    }
}

/// Waits for any of a thread's readers to have messages.
pub trait ReadySet: Send {
    /// Waits up to `timeout` and puts the tokens of the readers with messages in `ready`
    /// (a token may be reported with nothing left to take).
    fn wait(&mut self, timeout: Duration, ready: &mut Vec<usize>);
}

/// Answers the requests of ROS 2 clients (a Nerve server offered to ROS 2).
pub trait ServiceServer: Send {
    /// What a request is answered through.
    type Request: Send;

    /// The next request (not from a bridge), with its CDR.
    fn take(&mut self, peers: &Peers) -> Option<(Self::Request, Vec<u8>)>;

    /// Answers a request with `cdr`; `Err` says why the answer was not sent.
    fn reply(&mut self, to: Self::Request, cdr: Vec<u8>) -> Result<(), String>;

    /// Requests the server itself dropped since the last call (a full queue); the engine
    /// counts them as not delivered.
    fn lost(&mut self) -> u64 {
        0
    }
}

/// Calls a ROS 2 server (a ROS 2 server offered to Nerve clients).
pub trait ServiceClient: Send {
    /// What names a call in flight.
    type Call: Copy + Eq + Hash + Send;

    /// Sends one request (CDR); `Err` says why it was not sent.
    fn call(&mut self, cdr: Vec<u8>) -> Result<Self::Call, String>;

    /// The next answer to one of this client's calls: the response's CDR, or what the
    /// server or the network answered instead.
    #[allow(clippy::type_complexity)] // a call and its answer: no type of its own
    fn take(&mut self) -> Option<(Self::Call, Result<Vec<u8>, String>)>;
}

/// A ROS 2 network a bridge reaches: DDS or rmw_zenoh.
pub trait RosSide: Send + Sync + 'static {
    /// A topic writer.
    type Writer: TopicWriter;
    /// A topic reader.
    type Reader: TopicReader;
    /// A thread's set of readers to wait on.
    type Ready: ReadySet;
    /// A service server.
    type Server: ServiceServer;
    /// A service client.
    type Client: ServiceClient;

    /// What the bridge's Nerve node is called after [`crate::peers::NODE_PREFIX`]
    /// (unique per bridge; the lowest of one kind forwards, see [`RosSide::primary`]).
    fn bridge_id(&self) -> &str;

    /// Whether this bridge forwards, of the bridges of its kind alive on the Nerve domain
    /// (the others stand by).
    fn primary(&self, peers: &Peers) -> bool;

    /// The graph now, without this bridge's and other bridges' endpoints.
    fn graph(&self, peers: &Peers) -> SideGraph;

    /// Hashes what the graph holds (cheap: called every refresh period to see whether
    /// anything changed at all).
    fn fingerprint(&self, h: &mut std::collections::hash_map::DefaultHasher);

    /// Announces Nerve's nodes `nerve_nodes` (full names) to ROS 2 as nodes of this
    /// bridge, so ROS 2's tools list them, and withdraws those no longer given.
    fn mirror_nodes(&self, nerve_nodes: &BTreeSet<String>);

    /// Where the engine finds the routes of ROS 2 types (DDS asks a type's publishers
    /// for a definition it does not have, REP-2016).
    fn catalog(&self, config: &BridgeConfig) -> Result<Catalog, BridgeError> {
        Ok(Catalog::of(config))
    }

    /// A new, empty set of readers to wait on.
    fn ready_set(&self) -> Result<Self::Ready, BridgeError>;

    /// A writer of ROS 2 topic `topic` of type `ty` with QoS `qos`.
    fn writer(&self, topic: &str, ty: &RosType, qos: RosQos) -> Result<Self::Writer, BridgeError>;

    /// A reader of ROS 2 topic `topic` of type `ty` with QoS `qos` (keyed: for keyed DDS
    /// publishers), whose readiness `ready` reports as `token`.
    fn reader(
        &self,
        ready: &mut Self::Ready,
        token: usize,
        topic: &str,
        ty: &RosType,
        qos: RosQos,
        keyed: bool,
    ) -> Result<Self::Reader, BridgeError>;

    /// A server of ROS 2 service `service` of type `ty`.
    fn server(&self, service: &str, ty: &RosType) -> Result<Self::Server, BridgeError>;

    /// A client of ROS 2 service `service` of type `ty`, for the server `server`.
    fn client(
        &self,
        service: &str,
        ty: &RosType,
        server: &Endpoint,
    ) -> Result<Self::Client, BridgeError>;
}
