//! Nerve → ROS 2 (one thread): for every Nerve topic with publishers (other than
//! bridges) whose type has a ROS 2 form, a ROS 2 writer announces the topic to ROS 2; the
//! Nerve subscriber that pulls the samples exists only while ROS 2 subscriptions the
//! writer serves are in the graph.

use crate::dds::RosQos;
use crate::engine::side::{Endpoint, RosSide, RosType, TopicWriter};
use crate::engine::{lock, Shared};
use crate::types::{count_unconverted, Catalog, TypeRoute};
use crate::{BridgeConfig, BridgeError, Event};
use nerve::{Node, RawSubscriber, WaitSet};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

struct Route<S: RosSide> {
    ty: Arc<TypeRoute>,
    writer: S::Writer,
    nerve_qos: nerve::Qos,
    subscriber: Option<RawSubscriber>,
}

/// The Nerve → ROS 2 half of a bridge.
pub(crate) struct Outbound<S: RosSide> {
    shared: Arc<Shared<S>>,
    config: BridgeConfig,
    node: Node,
    catalog: Catalog,
    routes: BTreeMap<String, Route<S>>,
    reported: HashSet<String>,
    scratch: Vec<u8>,
    /// Topics whose QoS mismatch was reported (once until it ends).
    mismatched: HashSet<String>,
}

impl<S: RosSide> Outbound<S> {
    /// The half, made on its own thread with its own Nerve node.
    pub(crate) fn new(
        shared: Arc<Shared<S>>,
        config: BridgeConfig,
        node: Node,
    ) -> Result<Outbound<S>, BridgeError> {
        Ok(Outbound {
            catalog: Catalog::of(&config),
            shared,
            config,
            node,
            routes: BTreeMap::new(),
            reported: HashSet::new(),
            scratch: Vec::new(),
            mismatched: HashSet::new(),
        })
    }

    /// Runs until the bridge stops.
    pub(crate) fn run(mut self) {
        let mut next_refresh = Instant::now();
        let mut gate = crate::engine::changes::Gate::default();
        while !self.shared.stopping() {
            let now = Instant::now();
            if now >= next_refresh {
                if gate.due(&self.shared) {
                    self.refresh();
                }
                next_refresh = now + self.config.refresh;
            }
            let wait = next_refresh.saturating_duration_since(Instant::now());
            let ready: Vec<String> = {
                let mut set = WaitSet::new();
                let mut names = Vec::new();
                for (t, r) in &self.routes {
                    if let Some(s) = &r.subscriber {
                        if set.add(s).is_ok() {
                            names.push(t.clone());
                        }
                    }
                }
                if names.is_empty() {
                    std::thread::sleep(wait);
                    continue;
                }
                match set.wait(wait) {
                    Ok(idx) => idx
                        .into_iter()
                        .filter_map(|i| names.get(i).cloned())
                        .collect(),
                    Err(_) => Vec::new(),
                }
            };
            for t in ready {
                self.drain(&t);
            }
        }
    }

    fn drain(&mut self, topic: &str) {
        let peers = self.shared.peers();
        let pid = std::process::id();
        let shared = &self.shared;
        let Some(route) = self.routes.get_mut(topic) else {
            return;
        };
        let Some(sub) = &route.subscriber else {
            return;
        };
        while let Ok(Some(sample)) = sub.try_recv() {
            let h = sample.header();
            // this bridge's own ROS 2 → Nerve publishers, and other bridges' processes
            // (this process may hold Nerve nodes of its own)
            let mine = lock(&shared.inbound_publishers).contains(&h.publisher_id);
            let other_bridge = peers.is_bridge_origin(h.origin) && (h.origin >> 32) as u32 != pid;
            if mine || other_bridge {
                shared.stats.loops_cut.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if let Err(e) = route.ty.to_ros(sample.bytes(), &mut self.scratch) {
                if let Some(ev) = count_unconverted(&shared.stats, topic, &route.ty, &e) {
                    shared.event(ev);
                }
                continue;
            }
            match route.writer.write(std::mem::take(&mut self.scratch)) {
                Ok(()) => {
                    shared.stats.to_ros.fetch_add(1, Ordering::Relaxed);
                }
                Err(reason) => {
                    shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    shared.event(Event::Dropped {
                        topic: topic.to_string(),
                        reason,
                    });
                }
            }
        }
    }

    fn not_bridged(&mut self, topic: &str, reason: String) {
        if self.reported.insert(topic.to_owned()) {
            self.shared.event(Event::NotBridged {
                topic: topic.to_owned(),
                reason,
            });
        }
    }

    fn refresh(&mut self) {
        let peers = self.shared.peers();
        let inbound = lock(&self.shared.inbound_topics).clone();
        // a standby bridge forwards nothing
        let topics = if self.shared.side.primary(&peers) {
            nerve::introspect::list_topics(&self.node).unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut wanted = HashSet::new();
        for t in topics {
            let ours = usize::from(inbound.contains(&t.name));
            // the bridges' own topics (`/_ros2/graph`) stay in Nerve; an action's topics
            // cross with the action
            if t.publishers <= ours
                || !self.config.admits(&t.name)
                || t.name.starts_with("/_ros2/")
                || t.name.contains("/_action/")
            {
                continue;
            }
            let Some(Ok(schema)) = &t.schema else {
                continue;
            };
            wanted.insert(t.name.clone());
            if self.routes.contains_key(&t.name) {
                continue;
            }
            let route = match self.catalog.for_nerve(schema) {
                None => {
                    let reason = format!(
                        "{} has no ROS 2 form (only ROS 2 types and the standard messages \
                         cross)",
                        schema.name
                    );
                    self.not_bridged(&t.name, reason);
                    continue;
                }
                Some(Err(e)) => {
                    self.not_bridged(&t.name, e.to_string());
                    continue;
                }
                Some(Ok(r)) => r,
            };
            let nerve_qos = nerve::Qos {
                history: t.history,
                ..nerve::Qos::default()
            };
            let nerve_qos = if t.overflow == "back-pressure" {
                nerve::Qos {
                    overflow: nerve::Qos::reliable().overflow,
                    ..nerve_qos
                }
            } else {
                nerve_qos
            };
            match self.shared.side.writer(
                &t.name,
                &RosType::of_topic(&route),
                RosQos::from_nerve(&nerve_qos),
            ) {
                Ok(writer) => {
                    self.shared.event(Event::Bridged {
                        kind: crate::Kind::Topic,
                        topic: t.name.clone(),
                        ros_type: route.ros_name.clone(),
                        nerve_type: schema.name.clone(),
                        to_ros: true,
                    });
                    self.routes.insert(
                        t.name.clone(),
                        Route {
                            ty: route,
                            writer,
                            nerve_qos,
                            subscriber: None,
                        },
                    );
                }
                Err(e) => self.not_bridged(&t.name, e.to_string()),
            }
        }
        self.routes.retain(|t, _| wanted.contains(t));
        self.reported.retain(|t| wanted.contains(t));
        self.match_subscriptions(&peers);
    }

    /// Pulls from Nerve only the topics that ROS 2 subscriptions (not bridges) receive,
    /// and names the subscriptions that ask for more than the Nerve topic offers.
    fn match_subscriptions(&mut self, peers: &crate::peers::Peers) {
        let graph = if self.routes.is_empty() {
            Default::default()
        } else {
            self.shared.side.graph(peers)
        };
        let mut on_topic: HashMap<&str, Vec<&Endpoint>> = HashMap::new();
        let mut mismatches = BTreeMap::new();
        for s in &graph.subscriptions {
            let Some(route) = self.routes.get(&s.name) else {
                continue;
            };
            on_topic.entry(s.name.as_str()).or_default().push(s);
            // a subscription that asks more than the Nerve topic offers gets nothing:
            // say so, by name, instead of starving it silently
            let why = if s.keyed {
                Some(crate::dds::keyed_subscription_refused(
                    &s.name,
                    &route.ty.ros_name,
                ))
            } else if s.qos.transient_local && route.nerve_qos.history == 0 {
                Some(format!(
                    "a ROS 2 subscription asks for transient local, but the Nerve topic {} \
                     keeps no history for late joiners: it receives nothing (publish with \
                     history, e.g. Qos::latched())",
                    s.name
                ))
            } else {
                None
            };
            if let Some(why) = why {
                if self.mismatched.insert(s.name.clone()) {
                    self.shared.event(Event::NotBridged {
                        topic: s.name.clone(),
                        reason: why.clone(),
                    });
                }
                mismatches.insert(s.name.clone(), why);
            }
        }
        self.mismatched.retain(|t| mismatches.contains_key(t));
        *lock(&self.shared.qos_mismatches) = mismatches;
        let mut failures = Vec::new();
        for (t, r) in self.routes.iter_mut() {
            let subs = on_topic.get(t.as_str()).map_or(&[][..], Vec::as_slice);
            if let Err(e) = r.writer.subscriptions(subs) {
                failures.push((t.clone(), e.to_string()));
            }
            let listening = subs.iter().any(|s| r.writer.serves(s));
            if listening && r.subscriber.is_none() {
                let qos = nerve::Qos {
                    depth: nerve::Qos::GUARANTEED_DEPTH.min(64),
                    ..r.nerve_qos.clone()
                };
                match RawSubscriber::create(&self.node, t, qos) {
                    Ok(s) => r.subscriber = Some(s),
                    Err(e) => failures.push((t.clone(), e.to_string())),
                }
            } else if !listening {
                r.subscriber = None;
            }
        }
        for (topic, reason) in failures {
            self.shared.event(Event::NotBridged { topic, reason });
        }
    }
}
