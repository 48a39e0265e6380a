//! The DDS network as the engine reaches it ([`RosSide`]): one RustDDS participant that
//! interoperates with Fast DDS and Cyclone DDS, ROS 2's names on DDS (`rt/` topics,
//! `rq/…Request` and `rr/…Reply` for services), raw CDR both ways.

use super::services::{service_of_request_topic, service_type_of_request, DdsClient, DdsServer};
use super::{is_keyed, topic_dds_name, topic_ros_name, RawAdapter, RawCdr, RosQos, TopicReader};
use crate::engine::side::{Endpoint, Incoming, ReadySet, RosSide, RosType, SideGraph};
use crate::peers::Peers;
use crate::type_description::Learner;
use crate::types::{dds_type_of_ros, ros_type_of_dds, Catalog};
use crate::{BridgeConfig, BridgeError};
use rustdds::mio1::{Events, Interest, Poll, Registry, Token};
use rustdds::no_key::DataWriter;
use rustdds::{RTPSEntity, Timestamp, TopicKind};
use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeSet;
use std::hash::Hash;
use std::time::Duration;

/// A bridge's DDS participant, with the ROS 2 node that names the bridge in ROS 2's graph.
pub struct DdsSide {
    /// The participant.
    pub(crate) participant: rustdds::DomainParticipant,
    /// Its ROS 2 context (nodes that stand for Nerve's in ROS 2's graph).
    pub(crate) ros: ros2_client::Context,
    publisher: rustdds::Publisher,
    subscriber: rustdds::Subscriber,
    /// The participant's GUID prefix in hex.
    id: String,
    /// ROS 2's nodes, and those that stand for Nerve's.
    nodes: super::nodes::Nodes,
    _node: ros2_client::Node,
}

impl DdsSide {
    /// Joins ROS 2 domain `config.ros_domain` (on loopback only with
    /// `config.localhost_only`) with a node named `node_name` in namespace `/`.
    pub fn new(config: &BridgeConfig, node_name: &str) -> Result<DdsSide, BridgeError> {
        let dds_err = |e: &dyn std::fmt::Display| {
            BridgeError::Dds(format!("ROS 2 domain {}: {e}", config.ros_domain))
        };
        let mut builder = rustdds::DomainParticipantBuilder::new(config.ros_domain);
        if config.localhost_only {
            builder = builder.with_only_networks([std::net::Ipv4Addr::LOCALHOST]);
        }
        let participant = builder.build().map_err(|e| dds_err(&e))?;
        let ros =
            ros2_client::Context::from_domain_participant(participant).map_err(|e| dds_err(&e))?;
        let participant = ros.domain_participant();
        let name = ros2_client::NodeName::new("/", node_name)
            .map_err(|e| BridgeError::Config(format!("{e:?}")))?;
        let node = ros
            .new_node(name, ros2_client::NodeOptions::new().enable_rosout(false))
            .map_err(|e| BridgeError::Dds(format!("{e:?}")))?;
        let qos = rustdds::QosPolicies::qos_none();
        let publisher = participant
            .create_publisher(&qos)
            .map_err(|e| dds_err(&e))?;
        let subscriber = participant
            .create_subscriber(&qos)
            .map_err(|e| dds_err(&e))?;
        Ok(DdsSide {
            id: crate::peers::hex(participant.guid().prefix.as_ref()),
            nodes: super::nodes::Nodes::new(&participant),
            participant,
            ros,
            publisher,
            subscriber,
            _node: node,
        })
    }

    /// The participant's publisher (every writer of the bridge is made with it).
    pub(crate) fn dds_publisher(&self) -> &rustdds::Publisher {
        &self.publisher
    }

    /// The participant's subscriber (every reader of the bridge is made with it).
    pub(crate) fn dds_subscriber(&self) -> &rustdds::Subscriber {
        &self.subscriber
    }

    /// Whether an endpoint of the participant with `prefix` is this bridge's or another
    /// bridge's.
    pub(crate) fn is_bridge(&self, endpoint: rustdds::GUID, peers: &Peers) -> bool {
        endpoint.prefix == self.participant.guid().prefix
            || peers.is_bridge_participant(endpoint.prefix.as_ref())
    }

    /// A DDS topic `name` of ROS 2 type `ros_type` with `qos`.
    pub(crate) fn topic(
        &self,
        name: String,
        ros_type: &str,
        qos: &rustdds::QosPolicies,
        kind: TopicKind,
    ) -> Result<rustdds::Topic, BridgeError> {
        let dds_type = dds_type_of_ros(ros_type)
            .ok_or_else(|| BridgeError::Config(format!("{ros_type} is not a ROS 2 type name")))?;
        self.participant
            .create_topic(name.clone(), dds_type, qos, kind)
            .map_err(|e| BridgeError::Dds(format!("{name}: {e}")))
    }
}

/// A ROS 2 topic's writer on DDS.
pub struct DdsWriter(DataWriter<RawCdr, RawAdapter>);

impl crate::engine::TopicWriter for DdsWriter {
    fn write(&mut self, cdr: Vec<u8>) -> Result<(), String> {
        self.0
            .write(RawCdr(cdr), Some(Timestamp::now()))
            .map_err(|e| match e {
                rustdds::dds::result::WriteError::WouldBlock { .. } => format!(
                    "the ROS 2 subscriptions have not acknowledged the last {} samples \
                     (reliable) within {:?}: a subscriber too slow for the rate, or large \
                     samples repaired over a lossy path",
                    super::WRITER_WINDOW,
                    super::WRITE_BLOCK
                ),
                e => e.to_string(),
            })
    }

    /// A keyed subscription matches no writer of the bridge (refused by name).
    fn serves(&self, subscription: &Endpoint) -> bool {
        !subscription.keyed
    }
}

/// A ROS 2 topic's reader on DDS, registered with its thread's [`DdsReady`].
pub struct DdsReader {
    reader: TopicReader,
    registry: Registry,
    /// This participant.
    me: rustdds::GUID,
}

impl Drop for DdsReader {
    fn drop(&mut self) {
        let _ = self.registry.deregister(&mut self.reader);
    }
}

impl crate::engine::TopicReader for DdsReader {
    fn take(&mut self, peers: &Peers) -> Result<Option<Incoming>, String> {
        loop {
            let Some(t) = self.reader.take_next().map_err(|e| e.to_string())? else {
                return Ok(None);
            };
            // a keyed topic's dispose or unregister: no sample (Nerve has no instances)
            let Some(RawCdr(cdr)) = t.value else {
                continue;
            };
            let writer = t.writer.prefix;
            return Ok(Some(Incoming {
                cdr,
                stamp_ns: t.stamp.map(super::timestamp_ns),
                from_bridge: writer == self.me.prefix
                    || peers.is_bridge_participant(writer.as_ref()),
            }));
        }
    }
}

/// The readers one thread waits on (a mio poll).
pub struct DdsReady {
    poll: Poll,
    events: Events,
}

impl ReadySet for DdsReady {
    fn wait(&mut self, timeout: Duration, ready: &mut Vec<usize>) {
        if self.poll.poll(&mut self.events, Some(timeout)).is_err() {
            std::thread::sleep(timeout);
            return;
        }
        ready.extend(self.events.iter().map(|e| e.token().0));
    }
}

impl RosSide for DdsSide {
    type Writer = DdsWriter;
    type Reader = DdsReader;
    type Ready = DdsReady;
    type Server = DdsServer;
    type Client = DdsClient;

    fn bridge_id(&self) -> &str {
        &self.id
    }

    /// The bridge with the lowest participant prefix forwards ([`Peers::is_primary`]).
    fn primary(&self, peers: &Peers) -> bool {
        peers.is_primary(self.participant.guid().prefix.as_ref())
    }

    /// Nodes are those the participants with endpoints in the graph announce on
    /// `ros_discovery_info`.
    fn graph(&self, peers: &Peers) -> SideGraph {
        let mut g = SideGraph::default();
        let mut alive = BTreeSet::new();
        for w in self.participant.discovered_writers() {
            let d = &w.publication_topic_data;
            if self.is_bridge(d.key, peers) {
                continue;
            }
            alive.insert(d.key.prefix.as_ref().to_vec());
            let qos = RosQos::of(&d.qos());
            let keyed = is_keyed(d.key);
            if let (Some(topic), Some(ty)) =
                (topic_ros_name(&d.topic_name), ros_type_of_dds(&d.type_name))
            {
                g.publishers.push(endpoint(topic, ty, qos, keyed));
            } else if let (Some(name), Some(ty)) = (
                service_of_request_topic(&d.topic_name),
                service_type_of_request(&d.type_name),
            ) {
                g.clients.push(endpoint(name, ty, qos, keyed));
            }
        }
        for r in self.participant.discovered_readers() {
            let d = &r.subscription_topic_data;
            let key = d.key();
            if self.is_bridge(key, peers) {
                continue;
            }
            alive.insert(key.prefix.as_ref().to_vec());
            let qos = RosQos::of(&d.qos());
            let keyed = is_keyed(key);
            if let (Some(topic), Some(ty)) = (
                topic_ros_name(d.topic_name()),
                ros_type_of_dds(d.type_name()),
            ) {
                g.subscriptions.push(endpoint(topic, ty, qos, keyed));
            } else if let (Some(name), Some(ty)) = (
                service_of_request_topic(d.topic_name()),
                service_type_of_request(d.type_name()),
            ) {
                g.servers.push(endpoint(name, ty, qos, keyed));
            }
        }
        g.nodes = self.nodes.names(&alive);
        g
    }

    fn mirror_nodes(&self, nerve_nodes: &BTreeSet<String>) {
        self.nodes.mirror(&self.ros, nerve_nodes);
    }

    fn fingerprint(&self, h: &mut DefaultHasher) {
        let qos = |q: RosQos, h: &mut DefaultHasher| {
            (q.reliable, q.transient_local, q.depth).hash(h);
        };
        for w in self.participant.discovered_writers() {
            let d = &w.publication_topic_data;
            (d.key, &d.topic_name, &d.type_name).hash(h);
            qos(RosQos::of(&d.qos()), h);
        }
        for r in self.participant.discovered_readers() {
            let d = &r.subscription_topic_data;
            (d.key(), d.topic_name(), d.type_name()).hash(h);
            qos(RosQos::of(&d.qos()), h);
        }
    }

    /// A type with no definition here is asked of its publishers (REP-2016).
    fn catalog(&self, config: &BridgeConfig) -> Result<Catalog, BridgeError> {
        Ok(Catalog::of(config).with_learner(Learner::new(&self.participant)?))
    }

    fn ready_set(&self) -> Result<DdsReady, BridgeError> {
        Ok(DdsReady {
            poll: Poll::new().map_err(|e| BridgeError::Dds(e.to_string()))?,
            events: Events::with_capacity(64),
        })
    }

    fn writer(&self, topic: &str, ty: &RosType, qos: RosQos) -> Result<DdsWriter, BridgeError> {
        let t = self.topic(
            topic_dds_name(topic),
            &ty.name,
            &qos.policies(),
            TopicKind::NoKey,
        )?;
        self.publisher
            .create_datawriter_no_key::<RawCdr, RawAdapter>(&t, Some(qos.policies()))
            .map(DdsWriter)
            .map_err(|e| BridgeError::Dds(format!("{topic}: {e}")))
    }

    /// Of a keyed DDS topic if `keyed` (its publishers' type has `@key` members: read as
    /// one instance, see [`TopicReader`]).
    fn reader(
        &self,
        ready: &mut DdsReady,
        token: usize,
        topic: &str,
        ty: &RosType,
        qos: RosQos,
        keyed: bool,
    ) -> Result<DdsReader, BridgeError> {
        let kind = if keyed {
            TopicKind::WithKey
        } else {
            TopicKind::NoKey
        };
        let t = self.topic(topic_dds_name(topic), &ty.name, &qos.policies(), kind)?;
        let sub = &self.subscriber;
        let made = if keyed {
            sub.create_datareader::<RawCdr, RawAdapter>(&t, Some(qos.policies()))
                .map(TopicReader::Keyed)
        } else {
            sub.create_datareader_no_key::<RawCdr, RawAdapter>(&t, Some(qos.policies()))
                .map(TopicReader::NoKey)
        };
        let mut reader = made.map_err(|e| BridgeError::Dds(format!("{topic}: {e}")))?;
        let registry = ready
            .poll
            .registry()
            .try_clone()
            .map_err(|e| BridgeError::Dds(format!("{topic}: {e}")))?;
        registry
            .register(&mut reader, Token(token), Interest::READABLE)
            .map_err(|e| BridgeError::Dds(format!("{topic}: {e}")))?;
        Ok(DdsReader {
            reader,
            registry,
            me: self.participant.guid(),
        })
    }

    fn server(&self, service: &str, ty: &RosType) -> Result<DdsServer, BridgeError> {
        DdsServer::new(self, service, &ty.name)
    }

    fn client(
        &self,
        service: &str,
        ty: &RosType,
        _server: &Endpoint,
    ) -> Result<DdsClient, BridgeError> {
        DdsClient::new(self, service, &ty.name)
    }
}

fn endpoint(name: &str, ros_type: String, qos: RosQos, keyed: bool) -> Endpoint {
    Endpoint {
        name: name.to_string(),
        ros_type,
        qos,
        keyed,
        type_hash: None,
    }
}
