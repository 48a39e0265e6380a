//! The two graphs seen from each other (one thread): ROS 2's nodes, topics and services
//! published into Nerve as a [`RosGraph`] on [`GRAPH_TOPIC`], and Nerve's nodes announced
//! to ROS 2 ([`RosSide::mirror_nodes`]).

use crate::engine::side::RosSide;
use crate::engine::worker::Worker;
use crate::engine::{lock, Shared};
use crate::graph::{RosGraph, GRAPH_TOPIC};
use crate::BridgeConfig;
use nerve::{Node, Publisher, Qos};
use nerve_msgs::srv::Bytes;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the graphs are compared.
const PERIOD: Duration = Duration::from_secs(1);

/// The graph half of a bridge.
pub(crate) struct GraphHalf<S: RosSide> {
    shared: Arc<Shared<S>>,
    config: BridgeConfig,
    _node: Node,
    publisher: Option<Publisher<Bytes>>,
    last: Option<RosGraph>,
    next: Instant,
}

impl<S: RosSide> GraphHalf<S> {
    /// The half, made on its own thread with its own Nerve node.
    pub(crate) fn new(shared: Arc<Shared<S>>, config: BridgeConfig, node: Node) -> GraphHalf<S> {
        let publisher = node
            .publisher::<Bytes>(GRAPH_TOPIC)
            .qos(Qos::latched())
            .create()
            .ok();
        GraphHalf {
            shared,
            config,
            _node: node,
            publisher,
            last: None,
            next: Instant::now(),
        }
    }

    /// Runs until the bridge stops.
    pub(crate) fn run(mut self) {
        crate::engine::worker::run(&mut self, PERIOD);
    }

    /// Compares the graphs once a period.
    fn tick(&mut self) {
        // tools that just subscribed get the graph now, not at the next change
        if let Some(p) = &self.publisher {
            p.update_connections();
        }
        if Instant::now() < self.next {
            return;
        }
        self.next = Instant::now() + PERIOD;
        self.publish_ros_graph();
        self.mirror_nerve_nodes();
    }

    fn publish_ros_graph(&mut self) {
        let shared = &self.shared;
        let side = shared.side.graph(&shared.peers());
        let mut g = RosGraph {
            nodes: side.nodes,
            qos_mismatches: lock(&shared.qos_mismatches).clone(),
            not_carried: lock(&shared.not_carried).clone(),
            ..RosGraph::default()
        };
        for p in side.publishers {
            let t = g.topics.entry(p.name).or_default();
            t.types.insert(p.ros_type);
            t.publishers += 1;
        }
        for s in side.subscriptions {
            let t = g.topics.entry(s.name).or_default();
            t.types.insert(s.ros_type);
            t.subscriptions += 1;
        }
        for s in side.servers {
            g.services.insert(s.name, s.ros_type);
        }
        if self.last.as_ref() != Some(&g) {
            if let (Some(p), Ok(json)) = (&self.publisher, serde_json::to_vec(&g)) {
                let _ = p.publish_slice(&Bytes { tag: 0 }, &json);
            }
            self.last = Some(g);
        }
    }

    /// Every live Nerve node (bridges left out) is announced to ROS 2 under its name.
    fn mirror_nerve_nodes(&mut self) {
        let nodes = nerve::introspect::list_nodes(&self.shared.nerve).unwrap_or_default();
        let wanted: BTreeSet<String> = nodes
            .into_iter()
            .filter(|n| n.state == "alive" && !n.name.starts_with(crate::peers::NODE_PREFIX))
            .map(|n| n.name)
            .collect();
        self.shared.side.mirror_nodes(&wanted);
    }
}

impl<S: RosSide> Worker for GraphHalf<S> {
    type Side = S;
    fn shared(&self) -> &Shared<S> {
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
