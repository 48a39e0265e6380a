//! Nerve → ROS 2: for every Nerve topic with publishers (other than bridges) whose type
//! has a ROS 2 form, a DDS writer announces the topic to ROS 2; the Nerve subscriber that
//! pulls the samples exists only while ROS 2 has subscriptions on it.

use crate::dds::{self, RawAdapter, RawCdr, RosQos};
use crate::types::{count_unconverted, dds_type_of_ros, Catalog, TypeRoute};
use crate::{BridgeConfig, BridgeError, Event, Shared};
use nerve::{Node, RawSubscriber, WaitSet};
use rustdds::no_key::DataWriter;
use rustdds::{RTPSEntity, Timestamp, TopicKind};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

struct Route {
    ty: Arc<TypeRoute>,
    writer: DataWriter<RawCdr, RawAdapter>,
    nerve_qos: nerve::Qos,
    subscriber: Option<RawSubscriber>,
}

/// The Nerve → ROS 2 half of a bridge (one thread).
pub(crate) struct Outbound {
    shared: Arc<Shared>,
    config: BridgeConfig,
    node: Node,
    catalog: Catalog,
    routes: BTreeMap<String, Route>,
    dds_pub: rustdds::Publisher,
    reported: HashSet<String>,
    scratch: Vec<u8>,
    graph: crate::graph::GraphSync,
    /// Topics whose QoS mismatch was reported (once until it ends).
    mismatched: HashSet<String>,
}

impl Outbound {
    pub(crate) fn new(
        shared: Arc<Shared>,
        config: BridgeConfig,
        node: Node,
    ) -> Result<Outbound, BridgeError> {
        let dds_pub = shared
            .participant
            .create_publisher(&rustdds::QosPolicies::qos_none())
            .map_err(|e| BridgeError::Dds(e.to_string()))?;
        let graph = crate::graph::GraphSync::new(&shared, &node);
        Ok(Outbound {
            graph,
            mismatched: HashSet::new(),
            catalog: Catalog::of(&config),
            shared,
            config,
            node,
            routes: BTreeMap::new(),
            dds_pub,
            reported: HashSet::new(),
            scratch: Vec::new(),
        })
    }

    /// Runs until the bridge stops.
    pub(crate) fn run(mut self) {
        let mut next_refresh = Instant::now();
        let mut gate = crate::changes::Gate::default();
        while !self.shared.stop.load(Ordering::Relaxed) {
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
        let Some(route) = self.routes.get(topic) else {
            return;
        };
        let Some(sub) = &route.subscriber else {
            return;
        };
        while let Ok(Some(sample)) = sub.try_recv() {
            if peers.is_bridge_origin(sample.header().origin) {
                self.shared.stats.loops_cut.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if let Err(e) = route.ty.to_ros(sample.bytes(), &mut self.scratch) {
                if let Some(ev) = count_unconverted(&self.shared.stats, topic, &route.ty, &e) {
                    (self.shared.events)(ev);
                }
                continue;
            }
            let stamp = Timestamp::now();
            let msg = RawCdr(std::mem::take(&mut self.scratch));
            match route.writer.write(msg, Some(stamp)) {
                Ok(()) => {
                    self.shared.stats.to_ros.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    self.shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    let reason = match e {
                        rustdds::dds::result::WriteError::WouldBlock { .. } => format!(
                            "the ROS 2 subscriptions have not acknowledged the last {} \
                             samples (reliable) within {:?}: a subscriber too slow for the \
                             rate, or large samples repaired over a lossy path",
                            dds::WRITER_WINDOW,
                            dds::WRITE_BLOCK
                        ),
                        e => e.to_string(),
                    };
                    (self.shared.events)(Event::Dropped {
                        topic: topic.to_string(),
                        reason,
                    });
                }
            }
        }
    }

    fn refresh(&mut self) {
        self.graph.tick(&self.shared);
        let me = self.shared.participant.guid().prefix;
        let peers = self.shared.peers();
        let inbound = self
            .shared
            .inbound_topics
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        // a standby bridge forwards nothing
        let topics = if self.shared.primary() {
            nerve::introspect::list_topics(&self.node).unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut wanted = HashSet::new();
        for t in topics {
            let ours = usize::from(inbound.contains(&t.name));
            // the bridges' own topics (`/_ros2/graph`) stay in Nerve
            // the bridges' own topics (`/_ros2/graph`) stay in Nerve; an action's topics
            // cross with the action (actions.rs)
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
                    if self.reported.insert(t.name.clone()) {
                        (self.shared.events)(Event::NotBridged {
                            topic: t.name.clone(),
                            reason: format!(
                                "{} has no ROS 2 form (only ROS 2 types and the standard \
                                 messages cross)",
                                schema.name
                            ),
                        });
                    }
                    continue;
                }
                Some(Err(e)) => {
                    if self.reported.insert(t.name.clone()) {
                        (self.shared.events)(Event::NotBridged {
                            topic: t.name.clone(),
                            reason: e.to_string(),
                        });
                    }
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
            match self.writer(&t.name, &route.ros_name, RosQos::from_nerve(&nerve_qos)) {
                Ok(writer) => {
                    (self.shared.events)(Event::Bridged {
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
                Err(e) => {
                    if self.reported.insert(t.name.clone()) {
                        (self.shared.events)(Event::NotBridged {
                            topic: t.name.clone(),
                            reason: e.to_string(),
                        });
                    }
                }
            }
        }
        self.routes.retain(|t, _| wanted.contains(t));
        self.reported.retain(|t| wanted.contains(t));
        // ROS 2 subscriptions (not bridges) per topic
        let mut readers: HashMap<String, usize> = HashMap::new();
        let mut mismatches = std::collections::BTreeMap::new();
        for r in self.shared.participant.discovered_readers() {
            let data = &r.subscription_topic_data;
            let key = data.key();
            if key.prefix == me || peers.is_bridge_participant(key.prefix.as_ref()) {
                continue;
            }
            if let Some(topic) = dds::topic_ros_name(data.topic_name()) {
                // a keyed subscription matches no writer of the bridge: not counted (no
                // Nerve subscriber for it), refused by name below
                if !dds::is_keyed(key) {
                    *readers.entry(topic.to_string()).or_default() += 1;
                }
                // a subscription that asks more than the Nerve topic offers gets nothing:
                // say so, by name, instead of starving it silently
                let asked = RosQos::of(&data.qos());
                if let Some(route) = self.routes.get(topic) {
                    if dds::is_keyed(key) {
                        let why = dds::keyed_subscription_refused(topic, &route.ty.ros_name);
                        if self.mismatched.insert(topic.to_string()) {
                            (self.shared.events)(Event::NotBridged {
                                topic: topic.to_string(),
                                reason: why.clone(),
                            });
                        }
                        mismatches.insert(topic.to_string(), why);
                        continue;
                    }
                    if asked.transient_local && route.nerve_qos.history == 0 {
                        let why = format!(
                            "a ROS 2 subscription asks for transient local, but the Nerve \
                             topic {topic} keeps no history for late joiners: it receives \
                             nothing (publish with history, e.g. Qos::latched())"
                        );
                        if self.mismatched.insert(topic.to_string()) {
                            (self.shared.events)(Event::NotBridged {
                                topic: topic.to_string(),
                                reason: why.clone(),
                            });
                        }
                        mismatches.insert(topic.to_string(), why);
                    }
                }
            }
        }
        self.mismatched.retain(|t| mismatches.contains_key(t));
        self.graph.set_mismatches(mismatches);
        for (t, r) in self.routes.iter_mut() {
            let listening = readers.get(t).copied().unwrap_or(0) > 0;
            if listening && r.subscriber.is_none() {
                let qos = nerve::Qos {
                    depth: nerve::Qos::GUARANTEED_DEPTH.min(64),
                    ..r.nerve_qos.clone()
                };
                match RawSubscriber::create(&self.node, t, qos) {
                    Ok(s) => r.subscriber = Some(s),
                    Err(e) => (self.shared.events)(Event::NotBridged {
                        topic: t.clone(),
                        reason: e.to_string(),
                    }),
                }
            } else if !listening && r.subscriber.is_some() {
                r.subscriber = None;
            }
        }
    }

    fn writer(
        &self,
        topic: &str,
        ros_type: &str,
        qos: RosQos,
    ) -> Result<DataWriter<RawCdr, RawAdapter>, BridgeError> {
        let dds_type = dds_type_of_ros(ros_type)
            .ok_or_else(|| BridgeError::Config(format!("{ros_type} is not a ROS 2 type name")))?;
        let t = self
            .shared
            .participant
            .create_topic(
                dds::topic_dds_name(topic),
                dds_type,
                &qos.policies(),
                TopicKind::NoKey,
            )
            .map_err(|e| BridgeError::Dds(format!("{topic}: {e}")))?;
        self.dds_pub
            .create_datawriter_no_key::<RawCdr, RawAdapter>(&t, Some(qos.policies()))
            .map_err(|e| BridgeError::Dds(format!("{topic}: {e}")))
    }
}
