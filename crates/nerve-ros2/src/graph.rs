//! The two graphs seen from each other: ROS 2's nodes, topics and services published into
//! Nerve (`/_ros2/graph`, which `nerve node/topic/service list` show marked as ROS 2), and
//! Nerve's nodes announced to ROS 2 (`get_node_names()` in rclpy lists them).

use crate::dds::topic_ros_name;
use crate::dds::Shared;
use crate::types::ros_type_of_dds;
use crate::BridgeConfig;
use nerve::{Node, Publisher, Qos};
use nerve_msgs::srv::Bytes;
use ros2_client::entities_info::ParticipantEntitiesInfo;
use rustdds::no_key::DataReader;
use rustdds::{CDRDeserializerAdapter, RTPSEntity, TopicKind};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The Nerve topic the ROS 2 graph is published on (latched, JSON).
pub const GRAPH_TOPIC: &str = "/_ros2/graph";
/// How often the graphs are compared.
const PERIOD: Duration = Duration::from_secs(1);
/// How long a participant is remembered once none of its endpoints is seen.
const PARTICIPANT_GRACE: Duration = Duration::from_secs(5);
/// Most participants remembered from `ros_discovery_info`.
const MAX_PARTICIPANTS: usize = 1024;

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

type InfoReader =
    DataReader<ParticipantEntitiesInfo, CDRDeserializerAdapter<ParticipantEntitiesInfo>>;

/// Keeps both graphs in view of each other (a thread of a DDS bridge).
pub(crate) struct GraphHalf {
    shared: Arc<Shared>,
    config: BridgeConfig,
    _node: Node,
    info: Option<InfoReader>,
    /// What each participant announced, and when its endpoints were last seen.
    participants: HashMap<ros2_client::Gid, (ParticipantEntitiesInfo, Instant)>,
    publisher: Option<Publisher<Bytes>>,
    last: Option<RosGraph>,
    mirrored: HashMap<String, ros2_client::Node>,
    next: Instant,
}

impl GraphHalf {
    /// The half, made on its own thread with its own Nerve node.
    pub(crate) fn new(shared: Arc<Shared>, config: BridgeConfig, node: Node) -> GraphHalf {
        let info = shared
            .side
            .participant
            .create_topic(
                ros2_client::builtin_topics::ros_discovery::TOPIC_NAME.to_string(),
                ros2_client::builtin_topics::ros_discovery::TYPE_NAME.to_string(),
                &ros2_client::builtin_topics::ros_discovery::QOS_PUB,
                TopicKind::NoKey,
            )
            .ok()
            .and_then(|t| {
                shared
                    .side
                    .participant
                    .create_subscriber(&rustdds::QosPolicies::qos_none())
                    .ok()?
                    .create_datareader_no_key::<ParticipantEntitiesInfo, CDRDeserializerAdapter<_>>(
                        &t,
                        // every participant's announcement is one sample of the same
                        // (keyless) instance: keep many, or only the last one survives
                        Some(
                            rustdds::QosPolicyBuilder::new()
                                .reliable(rustdds::Duration::ZERO)
                                .durability(rustdds::policy::Durability::TransientLocal)
                                .history(rustdds::policy::History::KeepLast { depth: 256 })
                                .build(),
                        ),
                    )
                    .ok()
            });
        let publisher = node
            .publisher::<Bytes>(GRAPH_TOPIC)
            .qos(Qos::latched())
            .create()
            .ok();
        GraphHalf {
            shared,
            config,
            _node: node,
            info,
            participants: HashMap::new(),
            publisher,
            last: None,
            mirrored: HashMap::new(),
            next: Instant::now(),
        }
    }

    /// Runs until the bridge stops.
    pub(crate) fn run(mut self) {
        crate::engine::worker::run(&mut self, PERIOD);
    }

    /// Compares the graphs once a period.
    fn tick(&mut self) {
        let shared = self.shared.clone();
        let shared = &*shared;
        // tools that just subscribed get the graph now, not at the next change
        if let Some(p) = &self.publisher {
            p.update_connections();
        }
        if Instant::now() < self.next {
            return;
        }
        self.next = Instant::now() + PERIOD;
        self.publish_ros_graph(shared);
        self.mirror_nerve_nodes(shared);
    }

    fn publish_ros_graph(&mut self, shared: &Shared) {
        let me = shared.side.participant.guid().prefix;
        let peers = shared.peers();
        if let Some(r) = self.info.as_mut() {
            while let Ok(Some(s)) = r.take_next_sample() {
                let info = s.value().clone();
                if self.participants.len() < MAX_PARTICIPANTS
                    || self.participants.contains_key(&info.gid())
                {
                    self.participants.insert(info.gid(), (info, Instant::now()));
                }
            }
        }
        let mut g = RosGraph {
            qos_mismatches: crate::engine::lock(&shared.qos_mismatches).clone(),
            not_carried: shared
                .not_carried
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            ..RosGraph::default()
        };
        let mut alive = BTreeSet::new();
        let foreign =
            |g: &rustdds::GUID| g.prefix != me && !peers.is_bridge_participant(g.prefix.as_ref());
        for w in shared.side.participant.discovered_writers() {
            let d = &w.publication_topic_data;
            if !foreign(&d.key) {
                continue;
            }
            alive.insert(d.key.prefix.as_ref().to_vec());
            if let (Some(t), Some(ty)) =
                (topic_ros_name(&d.topic_name), ros_type_of_dds(&d.type_name))
            {
                let e = g.topics.entry(t.to_string()).or_default();
                e.types.insert(ty);
                e.publishers += 1;
            }
        }
        for r in shared.side.participant.discovered_readers() {
            let d = &r.subscription_topic_data;
            if !foreign(&d.key()) {
                continue;
            }
            alive.insert(d.key().prefix.as_ref().to_vec());
            if let (Some(t), Some(ty)) = (
                topic_ros_name(d.topic_name()),
                ros_type_of_dds(d.type_name()),
            ) {
                let e = g.topics.entry(t.to_string()).or_default();
                e.types.insert(ty);
                e.subscriptions += 1;
            } else if let (Some(s), Some(ty)) = (
                d.topic_name()
                    .strip_prefix("rq")
                    .and_then(|s| s.strip_suffix("Request")),
                ros_type_of_dds(d.type_name()),
            ) {
                if let Some(ty) = ty.strip_suffix("_Request") {
                    g.services.insert(s.to_string(), ty.to_string());
                }
            }
        }
        // participants that left are forgotten (an announcement may come before the
        // participant's endpoints are discovered: it gets a grace period)
        let now = Instant::now();
        self.participants.retain(|gid, (_, seen)| {
            if alive.contains(&gid.as_bytes()[..12]) {
                *seen = now;
            }
            now.duration_since(*seen) < PARTICIPANT_GRACE
        });
        for (p, _) in self.participants.values() {
            for n in p.nodes() {
                let full = if n.namespace() == "/" {
                    format!("/{}", n.name())
                } else {
                    format!("{}/{}", n.namespace(), n.name())
                };
                g.nodes.insert(full);
            }
        }
        if self.last.as_ref() != Some(&g) {
            if let (Some(p), Ok(json)) = (&self.publisher, serde_json::to_vec(&g)) {
                let _ = p.publish_slice(&Bytes { tag: 0 }, &json);
            }
            self.last = Some(g);
        }
    }

    /// Every live Nerve node (bridges left out) gets a ROS 2 node of its name, so ROS 2's
    /// tools list it.
    fn mirror_nerve_nodes(&mut self, shared: &Shared) {
        let nodes = nerve::introspect::list_nodes(&shared.nerve).unwrap_or_default();
        let wanted: BTreeSet<String> = nodes
            .into_iter()
            .filter(|n| n.state == "alive" && !n.name.starts_with(crate::peers::NODE_PREFIX))
            .map(|n| n.name)
            .collect();
        self.mirrored.retain(|n, _| wanted.contains(n));
        for name in wanted {
            if self.mirrored.contains_key(&name) {
                continue;
            }
            let (ns, base) = match name.rsplit_once('/') {
                Some((ns, base)) if !ns.is_empty() => (ns.to_string(), base.to_string()),
                Some((_, base)) => ("/".to_string(), base.to_string()),
                None => ("/".to_string(), name.clone()),
            };
            let Ok(node_name) = ros2_client::NodeName::new(&ns, &base) else {
                continue;
            };
            if let Ok(n) = shared.side.ros.new_node(
                node_name,
                ros2_client::NodeOptions::new().enable_rosout(false),
            ) {
                self.mirrored.insert(name, n);
            }
        }
    }
}

impl crate::engine::worker::Worker for GraphHalf {
    type Side = crate::dds::DdsSide;
    fn shared(&self) -> &Shared {
        &self.shared
    }
    fn config(&self) -> &BridgeConfig {
        &self.config
    }
    fn refresh(&mut self) {
        self.tick();
    }
    fn busy(&self) -> bool {
        false
    }
    fn pump(&mut self) {}
}
