//! ROS 2 → Nerve: for every ROS 2 topic with publishers (other than bridges), a Nerve
//! publisher of the mapped type announces the topic; the DDS reader that pulls the
//! samples exists only while the Nerve topic has subscribers (no traffic for nobody).
//! Whichever side starts first: the Nerve publisher takes the overflow policy a Nerve
//! subscriber already fixed ([`route_qos`]), the DDS reader is made again when a
//! publisher that offers less joins ([`hears`]), and a ROS 2 topic whose name Nerve
//! uses for its own type crosses under `/_ros2` ([`nerve_topic`]).

use crate::dds::{self, RawCdr, RosQos, Taken, TopicReader};
use crate::graph::NotCarried;
use crate::type_description::Learner;
use crate::types::{count_unconverted, ros_type_of_dds, Catalog, TypeRoute};
use crate::{BridgeConfig, BridgeError, Event, Shared};
use nerve::{Node, Overflow, RawPublisher};
use rustdds::mio1::{Events, Interest, Poll, Token};
use rustdds::{RTPSEntity, TopicKind};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a route outlives its last ROS 2 publisher (a restarting node keeps its
/// subscribers).
const GRACE: Duration = Duration::from_secs(2);

/// Where ROS 2 topics whose name Nerve uses for a topic of its own type cross to.
pub(crate) const RENAMED_PREFIX: &str = "/_ros2";

/// ROS 2 topics whose name Nerve uses for its own type: `/parameter_events` carries
/// `rcl_interfaces/msg/ParameterEvent` in ROS 2 and [`nerve::param::ParamEvent`] in
/// Nerve, which no conversion maps exactly (ROS 2's event has no old values).
const NERVE_OWNED: &[&str] = &[nerve::param::EVENTS_TOPIC];

/// The Nerve topic a ROS 2 topic crosses to: its own name, or under [`RENAMED_PREFIX`]
/// where Nerve uses the name for a type of its own (both then live side by side,
/// whichever side starts first).
pub(crate) fn nerve_topic(ros_topic: &str) -> Cow<'_, str> {
    if NERVE_OWNED.contains(&ros_topic) {
        Cow::Owned(format!("{RENAMED_PREFIX}{ros_topic}"))
    } else {
        Cow::Borrowed(ros_topic)
    }
}

/// The Nerve QoS of the publisher that carries ROS 2 publishers with `ros` into Nerve
/// topic `topic`: theirs ([`RosQos::nerve`]), within what the Nerve topic was created
/// with if it exists (a Nerve subscriber made first fixed its overflow policy, its
/// largest depth and its history: an endpoint that asks otherwise is refused).
pub(crate) fn route_qos(node: &Node, topic: &str, ros: RosQos) -> nerve::Qos {
    let mut qos = ros.nerve();
    let Ok(info) = nerve::introspect::topic_info(node, topic) else {
        return qos;
    };
    let back_pressure = info.overflow == "back-pressure";
    if back_pressure != matches!(qos.overflow, Overflow::BackPressure { .. }) {
        qos.overflow = if back_pressure {
            nerve::Qos::reliable().overflow
        } else {
            Overflow::DropOldest
        };
    }
    qos.depth = qos.depth.clamp(1, info.max_depth.max(1));
    qos.history = qos.history.min(info.history);
    if back_pressure {
        // under back-pressure the history fits in the queue
        qos.history = qos.history.min(qos.depth);
    }
    qos
}

/// Opens the Nerve publisher of a ROS 2 → Nerve route of ROS 2 topic `ros_topic` (on
/// [`nerve_topic`], with [`route_qos`]): the one way both bridge modes do it.
pub(crate) fn open_publisher(
    node: &Node,
    ros_topic: &str,
    route: &TypeRoute,
    ros: RosQos,
) -> Result<RawPublisher, nerve::TopicError> {
    let topic = nerve_topic(ros_topic);
    RawPublisher::create(node, &topic, &route.schema, route_qos(node, &topic, ros))
}

/// Whether a DDS reader (or Zenoh subscription) asking `reader` hears a publisher
/// offering `writer`: it asks no more than the publisher offers.
pub(crate) fn hears(reader: RosQos, writer: RosQos) -> bool {
    (!reader.reliable || writer.reliable) && (!reader.transient_local || writer.transient_local)
}

struct Route {
    ty: Arc<TypeRoute>,
    publisher: RawPublisher,
    qos: RosQos,
    /// Whether the ROS 2 publishers write a keyed topic (`@key` members): its reader is
    /// then a keyed one, the only kind a DDS writer of a keyed topic matches.
    keyed: bool,
    reader: Option<TopicReader>,
    token: usize,
    last_seen: Instant,
}

/// The ROS 2 → Nerve half of a bridge (one thread).
pub(crate) struct Inbound {
    shared: Arc<Shared>,
    config: BridgeConfig,
    node: Node,
    catalog: Catalog,
    routes: BTreeMap<String, Route>,
    tokens: HashMap<usize, String>,
    next_token: usize,
    poll: Poll,
    dds_sub: rustdds::Subscriber,
    /// Topics that failed, when (reported once, tried again after [`crate::RETRY`]).
    failed: HashMap<String, Instant>,
    scratch: Vec<u8>,
}

impl Inbound {
    pub(crate) fn new(
        shared: Arc<Shared>,
        config: BridgeConfig,
        node: Node,
    ) -> Result<Inbound, BridgeError> {
        let dds_sub = shared
            .participant
            .create_subscriber(&rustdds::QosPolicies::qos_none())
            .map_err(|e| BridgeError::Dds(e.to_string()))?;
        Ok(Inbound {
            // a type with no definition here is asked of its publishers (REP-2016)
            catalog: Catalog::of(&config).with_learner(Learner::new(&shared.participant)?),
            shared,
            config,
            node,
            routes: BTreeMap::new(),
            tokens: HashMap::new(),
            next_token: 0,
            poll: Poll::new().map_err(|e| BridgeError::Dds(e.to_string()))?,
            dds_sub,
            failed: HashMap::new(),
            scratch: Vec::new(),
        })
    }

    /// Runs until the bridge stops.
    pub(crate) fn run(mut self) {
        let mut events = Events::with_capacity(64);
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
            if self.poll.poll(&mut events, Some(wait)).is_err() {
                std::thread::sleep(wait);
                continue;
            }
            for ev in events.iter() {
                if let Some(topic) = self.tokens.get(&ev.token().0).cloned() {
                    self.drain(&topic);
                }
            }
        }
    }

    fn drain(&mut self, topic: &str) {
        let peers = self.shared.peers();
        let me = self.shared.participant.guid().prefix;
        let Some(route) = self.routes.get_mut(topic) else {
            return;
        };
        let Some(reader) = route.reader.as_mut() else {
            return;
        };
        loop {
            let sample = match reader.take_next() {
                Ok(Some(s)) => s,
                Ok(None) => break,
                Err(e) => {
                    self.shared.stats.malformed.fetch_add(1, Ordering::Relaxed);
                    (self.shared.events)(Event::Malformed {
                        topic: topic.to_string(),
                        reason: e.to_string(),
                    });
                    continue;
                }
            };
            let Taken {
                value,
                writer,
                stamp,
            } = sample;
            // a keyed topic's dispose or unregister: no sample (Nerve has no instances)
            let Some(RawCdr(cdr)) = value else {
                continue;
            };
            let writer = writer.prefix;
            if writer == me || peers.is_bridge_participant(writer.as_ref()) {
                self.shared.stats.loops_cut.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let stamp = stamp.map(dds::timestamp_ns).unwrap_or_else(nerve::wall_ns);
            if let Err(e) = route.ty.to_nerve(&cdr, stamp, &mut self.scratch) {
                if let Some(ev) = count_unconverted(&self.shared.stats, topic, &route.ty, &e) {
                    (self.shared.events)(ev);
                }
                continue;
            }
            match route.publisher.publish_bytes(&self.scratch) {
                Ok(()) => {
                    self.shared.stats.to_nerve.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    self.shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    (self.shared.events)(Event::Dropped {
                        topic: topic.to_string(),
                        reason: e.to_string(),
                    });
                }
            }
        }
    }

    /// Compares ROS 2's publishers with the routes and Nerve's subscribers with the
    /// readers.
    fn refresh(&mut self) {
        let me = self.shared.participant.guid().prefix;
        let peers = self.shared.peers();
        // topic -> (type, combined QoS, keyed) of the ROS 2 publishers that are not bridges
        let mut wanted: BTreeMap<String, (String, RosQos, bool)> = BTreeMap::new();
        // a standby bridge forwards nothing (and drops what it had at once)
        let primary = self.shared.primary();
        for w in self
            .shared
            .participant
            .discovered_writers()
            .into_iter()
            .filter(|_| primary)
        {
            let data = &w.publication_topic_data;
            let Some(topic) = dds::topic_ros_name(&data.topic_name) else {
                continue;
            };
            if data.key.prefix == me
                || peers.is_bridge_participant(data.key.prefix.as_ref())
                || !self.config.admits(topic)
                // an action's own topics cross with the action (actions.rs)
                || topic.contains("/_action/")
            {
                continue;
            }
            let Some(ty) = ros_type_of_dds(&data.type_name) else {
                continue;
            };
            let q = RosQos::of(&data.qos());
            let keyed = dds::is_keyed(data.key);
            let e = wanted.entry(topic.to_string()).or_insert((ty, q, keyed));
            // a keyed topic where any publisher writes one (DDS matches no mix of kinds)
            e.2 |= keyed;
            // a reader matches every writer only if it asks no more than each offers
            e.1.reliable &= q.reliable;
            e.1.transient_local &= q.transient_local;
            e.1.depth = e.1.depth.max(q.depth);
        }
        let now = Instant::now();
        let before = self
            .shared
            .not_carried
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut not_carried = BTreeMap::new();
        for (topic, (ty, qos, keyed)) in &wanted {
            if let Some(r) = self.routes.get_mut(topic) {
                r.last_seen = now;
                // a reader made for publishers that offered more would not hear one that
                // offers less (nor a keyed reader a no-key writer): it is made again for
                // what every publisher offers now
                if r.reader.is_none() || !hears(r.qos, *qos) || r.keyed != *keyed {
                    if let Some(mut reader) = r.reader.take() {
                        let _ = self.poll.registry().deregister(&mut reader);
                    }
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
            let shared = self.shared.clone();
            let inbound_topics = || {
                shared
                    .inbound_topics
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
            };
            let claimed = inbound_topics().insert(nerve_topic(topic).into_owned());
            let opened = self.open(topic, ty, *qos, *keyed);
            if opened.is_err() && claimed {
                inbound_topics().remove(nerve_topic(topic).as_ref());
            }
            match opened {
                Ok(route) => {
                    self.failed.remove(topic);
                    (self.shared.events)(Event::Bridged {
                        kind: crate::Kind::Topic,
                        topic: nerve_topic(topic).into_owned(),
                        ros_type: ty.clone(),
                        nerve_type: route.ty.schema.name.clone(),
                        to_ros: false,
                    });
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
                        (self.shared.events)(Event::NotBridged {
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
        *self
            .shared
            .not_carried
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = not_carried;
        let gone: Vec<String> = self
            .routes
            .iter()
            .filter(|(t, r)| !wanted.contains_key(*t) && (!primary || now - r.last_seen > GRACE))
            .map(|(t, _)| t.clone())
            .collect();
        for t in gone {
            if let Some(mut r) = self.routes.remove(&t) {
                if let Some(mut reader) = r.reader.take() {
                    let _ = self.poll.registry().deregister(&mut reader);
                }
                self.tokens.remove(&r.token);
            }
            self.shared
                .inbound_topics
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(nerve_topic(&t).as_ref());
        }
        // readers only while Nerve listens
        let topics: Vec<String> = self.routes.keys().cloned().collect();
        for t in topics {
            let Some(r) = self.routes.get_mut(&t) else {
                continue;
            };
            let listening = r.publisher.subscriber_count() > 0;
            if listening && r.reader.is_none() {
                match self
                    .shared
                    .reader(&self.dds_sub, &t, &r.ty.ros_name, r.qos, r.keyed)
                {
                    Ok(mut reader) => {
                        if self
                            .poll
                            .registry()
                            .register(&mut reader, Token(r.token), Interest::READABLE)
                            .is_ok()
                        {
                            r.reader = Some(reader);
                        }
                    }
                    Err(e) => (self.shared.events)(Event::NotBridged {
                        topic: t.clone(),
                        reason: e.to_string(),
                    }),
                }
                // samples that came before the registration
                self.drain(&t);
            } else if !listening && r.reader.is_some() {
                if let Some(mut reader) = r.reader.take() {
                    let _ = self.poll.registry().deregister(&mut reader);
                }
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
    ) -> Result<Route, BridgeError> {
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
}

impl Inbound {
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

impl Shared {
    /// A DDS reader of ROS 2 topic `topic`, of a keyed DDS topic if `keyed` (its
    /// publishers' type has `@key` members: read as one instance, see [`dds::TopicReader`]).
    pub(crate) fn reader(
        &self,
        sub: &rustdds::Subscriber,
        topic: &str,
        ros_type: &str,
        qos: RosQos,
        keyed: bool,
    ) -> Result<TopicReader, BridgeError> {
        let dds_type = crate::types::dds_type_of_ros(ros_type)
            .ok_or_else(|| BridgeError::Config(format!("{ros_type} is not a ROS 2 type name")))?;
        let t = self
            .participant
            .create_topic(
                dds::topic_dds_name(topic),
                dds_type,
                &qos.policies(),
                if keyed {
                    TopicKind::WithKey
                } else {
                    TopicKind::NoKey
                },
            )
            .map_err(|e| BridgeError::Dds(format!("{topic}: {e}")))?;
        let made = if keyed {
            sub.create_datareader::<RawCdr, dds::RawAdapter>(&t, Some(qos.policies()))
                .map(TopicReader::Keyed)
        } else {
            sub.create_datareader_no_key::<RawCdr, dds::RawAdapter>(&t, Some(qos.policies()))
                .map(TopicReader::NoKey)
        };
        made.map_err(|e| BridgeError::Dds(format!("{topic}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_nerve_uses_for_its_own_types_are_renamed() {
        assert_eq!(nerve_topic("/parameter_events"), "/_ros2/parameter_events");
        assert_eq!(nerve_topic("/chatter"), "/chatter");
        assert_eq!(nerve_topic("/ns/parameter_events"), "/ns/parameter_events");
        // the rename never lands on a name ROS 2 could also publish and Nerve forward
        assert!(nerve_topic(nerve::param::EVENTS_TOPIC).starts_with("/_ros2/"));
    }

    #[test]
    fn a_reader_hears_publishers_that_offer_at_least_what_it_asks() {
        let q = |reliable, transient_local| RosQos {
            reliable,
            transient_local,
            depth: 10,
        };
        assert!(hears(q(true, true), q(true, true)));
        assert!(hears(q(false, false), q(true, true)));
        assert!(
            !hears(q(true, false), q(false, false)),
            "reliable asks too much"
        );
        assert!(
            !hears(q(false, true), q(false, false)),
            "transient local asks too much"
        );
    }
}
