//! ROS 2 → Nerve (one thread): for every ROS 2 topic with publishers (other than
//! bridges), a Nerve publisher of the mapped type announces the topic; the ROS 2 reader
//! that pulls the samples exists only while the Nerve topic has subscribers (no traffic
//! for nobody).

use super::{hears, nerve_topic, open_publisher, GRACE};
use crate::dds::RosQos;
use crate::engine::side::{Incoming, ReadySet, RosSide, RosType, TopicReader};
use crate::engine::{lock, Shared};
use crate::graph::NotCarried;
use crate::types::{count_unconverted, Catalog, TypeRoute};
use crate::{BridgeConfig, BridgeError, Event};
use nerve::{Node, RawPublisher};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

struct Route<S: RosSide> {
    ty: Arc<TypeRoute>,
    publisher: RawPublisher,
    qos: RosQos,
    /// Whether the ROS 2 publishers write a keyed topic (`@key` members): its reader is
    /// then a keyed one, the only kind a DDS writer of a keyed topic matches.
    keyed: bool,
    reader: Option<S::Reader>,
    token: usize,
    last_seen: Instant,
}

/// The ROS 2 → Nerve half of a bridge.
pub(crate) struct Inbound<S: RosSide> {
    shared: Arc<Shared<S>>,
    config: BridgeConfig,
    node: Node,
    catalog: Catalog,
    routes: BTreeMap<String, Route<S>>,
    tokens: HashMap<usize, String>,
    next_token: usize,
    ready: S::Ready,
    /// Topics that failed, when (reported once, tried again after [`crate::RETRY`]).
    failed: HashMap<String, Instant>,
    scratch: Vec<u8>,
}

impl<S: RosSide> Inbound<S> {
    /// The half, made on its own thread with its own Nerve node.
    pub(crate) fn new(
        shared: Arc<Shared<S>>,
        config: BridgeConfig,
        node: Node,
    ) -> Result<Inbound<S>, BridgeError> {
        Ok(Inbound {
            catalog: shared.side.catalog(&config)?,
            ready: shared.side.ready_set()?,
            shared,
            config,
            node,
            routes: BTreeMap::new(),
            tokens: HashMap::new(),
            next_token: 0,
            failed: HashMap::new(),
            scratch: Vec::new(),
        })
    }

    /// Runs until the bridge stops.
    pub(crate) fn run(mut self) {
        let mut next_refresh = Instant::now();
        let mut gate = crate::engine::changes::Gate::default();
        let mut ready = Vec::new();
        while !self.shared.stopping() {
            let now = Instant::now();
            if now >= next_refresh {
                if gate.due(&self.shared) {
                    self.refresh();
                }
                next_refresh = now + self.config.refresh;
            }
            let wait = next_refresh.saturating_duration_since(Instant::now());
            ready.clear();
            self.ready.wait(wait, &mut ready);
            for token in &ready {
                if let Some(topic) = self.tokens.get(token).cloned() {
                    self.drain(&topic);
                }
            }
        }
    }

    fn drain(&mut self, topic: &str) {
        let peers = self.shared.peers();
        let shared = &self.shared;
        let Some(route) = self.routes.get_mut(topic) else {
            return;
        };
        let Some(reader) = route.reader.as_mut() else {
            return;
        };
        loop {
            let Incoming {
                cdr,
                stamp_ns,
                from_bridge,
            } = match reader.take(&peers) {
                Ok(Some(s)) => s,
                Ok(None) => break,
                Err(reason) => {
                    shared.stats.malformed.fetch_add(1, Ordering::Relaxed);
                    shared.event(Event::Malformed {
                        topic: topic.to_string(),
                        reason,
                    });
                    continue;
                }
            };
            if from_bridge {
                shared.stats.loops_cut.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let stamp = stamp_ns.unwrap_or_else(nerve::wall_ns);
            if let Err(e) = route.ty.to_nerve(&cdr, stamp, &mut self.scratch) {
                if let Some(ev) = count_unconverted(&shared.stats, topic, &route.ty, &e) {
                    shared.event(ev);
                }
                continue;
            }
            match route.publisher.publish_bytes(&self.scratch) {
                Ok(()) => {
                    shared.stats.to_nerve.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    shared.event(Event::Dropped {
                        topic: topic.to_string(),
                        reason: e.to_string(),
                    });
                }
            }
        }
        let lost = reader.lost();
        if lost > 0 {
            shared.stats.dropped.fetch_add(lost, Ordering::Relaxed);
            shared.event(Event::Dropped {
                topic: topic.to_string(),
                reason: format!(
                    "{lost} samples dropped on arrival: the bridge's queue for the topic was \
                     full (the Nerve side did not take them in time)"
                ),
            });
        }
    }

    /// Compares ROS 2's publishers with the routes and Nerve's subscribers with the
    /// readers.
    fn refresh(&mut self) {
        let peers = self.shared.peers();
        // a standby bridge forwards nothing (and drops what it had at once)
        let primary = self.shared.side.primary(&peers);
        let graph = if primary {
            self.shared.side.graph(&peers)
        } else {
            Default::default()
        };
        // topic -> (type, combined QoS, keyed) of the ROS 2 publishers that are not bridges
        let mut wanted: BTreeMap<String, (String, RosQos, bool)> = BTreeMap::new();
        for p in graph.publishers {
            // an action's own topics cross with the action
            if !self.config.admits(&p.name) || p.name.contains("/_action/") {
                continue;
            }
            let q = p.qos;
            let e = wanted.entry(p.name).or_insert((p.ros_type, q, p.keyed));
            // a keyed topic where any publisher writes one (DDS matches no mix of kinds)
            e.2 |= p.keyed;
            // a reader matches every writer only if it asks no more than each offers
            e.1.reliable &= q.reliable;
            e.1.transient_local &= q.transient_local;
            e.1.depth = e.1.depth.max(q.depth);
        }
        let now = Instant::now();
        let before = lock(&self.shared.not_carried).clone();
        let mut not_carried = BTreeMap::new();
        for (topic, (ty, qos, keyed)) in &wanted {
            if let Some(r) = self.routes.get_mut(topic) {
                r.last_seen = now;
                // a reader made for publishers that offered more would not hear one that
                // offers less (nor a keyed reader a no-key writer): it is made again for
                // what every publisher offers now
                if r.reader.is_none() || !hears(r.qos, *qos) || r.keyed != *keyed {
                    r.reader = None;
                    r.qos = *qos;
                    r.keyed = *keyed;
                }
                continue;
            }
            if self
                .failed
                .get(topic)
                .is_some_and(|t| t.elapsed() < crate::RETRY)
            {
                // still refused for the reason said when it failed
                if let Some(n) = before.get(topic) {
                    not_carried.insert(topic.clone(), n.clone());
                }
                continue;
            }
            let first_failure = !self.failed.contains_key(topic);
            // the topic is the bridge's own before its Nerve publisher exists: the
            // Nerve → ROS 2 half (another thread) never takes that publisher for a Nerve
            // one and offers the topic back to ROS 2
            let claimed = lock(&self.shared.inbound_topics).insert(nerve_topic(topic).into_owned());
            let opened = self.open(topic, ty, *qos, *keyed);
            if opened.is_err() && claimed {
                lock(&self.shared.inbound_topics).remove(nerve_topic(topic).as_ref());
            }
            match opened {
                Ok(route) => {
                    self.failed.remove(topic);
                    self.shared.event(Event::Bridged {
                        kind: crate::Kind::Topic,
                        topic: nerve_topic(topic).into_owned(),
                        ros_type: ty.clone(),
                        nerve_type: route.ty.schema.name.clone(),
                        to_ros: false,
                    });
                    lock(&self.shared.inbound_publishers).insert(route.publisher.id());
                    self.routes.insert(topic.clone(), route);
                }
                // a type still asked of its publishers (type_description.rs) is not a
                // failure yet: looked at again at the next refresh
                Err(_) if self.catalog.learning(ty) => {
                    not_carried.insert(
                        topic.clone(),
                        NotCarried {
                            ros_type: ty.clone(),
                            learning: true,
                            why: format!(
                                "{ty} is on no type search path: the bridge is asking its \
                                 publishers' nodes for its definition (get_type_description)"
                            ),
                        },
                    );
                }
                Err(e) => {
                    not_carried.insert(
                        topic.clone(),
                        NotCarried {
                            ros_type: ty.clone(),
                            learning: false,
                            why: format!("not bridged: {e}"),
                        },
                    );
                    if first_failure {
                        self.shared.event(Event::NotBridged {
                            topic: topic.clone(),
                            reason: e.to_string(),
                        });
                    }
                    self.failed.insert(topic.clone(), Instant::now());
                }
            }
        }
        // a topic that failed is tried again once its publishers are gone and back
        self.failed.retain(|t, _| wanted.contains_key(t));
        *lock(&self.shared.not_carried) = not_carried;
        let gone: Vec<String> = self
            .routes
            .iter()
            .filter(|(t, r)| !wanted.contains_key(*t) && (!primary || now - r.last_seen > GRACE))
            .map(|(t, _)| t.clone())
            .collect();
        for t in gone {
            if let Some(r) = self.routes.remove(&t) {
                self.tokens.remove(&r.token);
                lock(&self.shared.inbound_publishers).remove(&r.publisher.id());
            }
            lock(&self.shared.inbound_topics).remove(nerve_topic(&t).as_ref());
        }
        // readers only while Nerve listens
        let topics: Vec<String> = self.routes.keys().cloned().collect();
        for t in topics {
            let Some(r) = self.routes.get_mut(&t) else {
                continue;
            };
            let listening = r.publisher.subscriber_count() > 0;
            if listening && r.reader.is_none() {
                let ty = RosType::of_topic(&r.ty);
                match self
                    .shared
                    .side
                    .reader(&mut self.ready, r.token, &t, &ty, r.qos, r.keyed)
                {
                    Ok(reader) => r.reader = Some(reader),
                    Err(e) => self.shared.event(Event::NotBridged {
                        topic: t.clone(),
                        reason: e.to_string(),
                    }),
                }
                // samples that came before the registration
                self.drain(&t);
            } else if !listening {
                r.reader = None;
            }
        }
        for r in self.routes.values() {
            r.publisher.update_connections();
        }
    }

    fn open(
        &mut self,
        topic: &str,
        ty: &str,
        qos: RosQos,
        keyed: bool,
    ) -> Result<Route<S>, BridgeError> {
        let route = self.catalog.for_ros(ty)?;
        let publisher = open_publisher(&self.node, topic, &route, qos).map_err(|e| {
            let topic = nerve_topic(topic);
            match self.other_version(&topic, &route) {
                // the same ROS 2 type name, another definition: both hashes named
                Some(theirs) => BridgeError::Type {
                    ros_type: ty.to_string(),
                    reason: format!(
                        "the Nerve topic {topic} carries {ty} with hash {theirs}, the ROS 2 \
                         publishers' definition hashes to {}",
                        nerve_msgs::ros2::ros2_type(&route.schema).map_or("?", |t| t.1)
                    ),
                },
                None => BridgeError::Nerve(format!("{topic}: {e}")),
            }
        })?;
        let token = self.next_token;
        self.next_token += 1;
        self.tokens.insert(token, topic.to_string());
        Ok(Route {
            ty: route,
            publisher,
            qos,
            keyed,
            reader: None,
            token,
            last_seen: Instant::now(),
        })
    }

    /// The RIHS01 hash of the same-named ROS 2 type a Nerve topic already carries, when
    /// it differs from the route's.
    fn other_version(&self, topic: &str, route: &TypeRoute) -> Option<String> {
        let info = nerve::introspect::topic_info(&self.node, topic).ok()?;
        let schema = info.schema?.ok()?;
        let (name, theirs, _) = nerve_msgs::ros2::ros2_type(&schema)?;
        let (ours_name, ours, _) = nerve_msgs::ros2::ros2_type(&route.schema)?;
        (name == ours_name && theirs != ours).then(|| theirs.to_string())
    }
}
