//! The bridge's rmw_zenoh mode: a Nerve domain and ROS 2 nodes that use `rmw_zenoh_cpp`.
//!
//! The same demand-driven scheme as the DDS mode ([`crate::Bridge`]), on one Zenoh
//! session that plays a ROS 2 node named `nerve_bridge_<pid>` ([`ZenohSide`]):
//!
//! - ROS 2 → Nerve: every ROS 2 topic with rmw_zenoh publishers (their liveliness
//!   tokens) gets a Nerve publisher of the mapped type; the Zenoh subscription (with its
//!   token) exists only while the Nerve topic has subscribers. It listens on the key with
//!   `*` for the type hash, so Humble publishers (`TypeHashNotSupported`) are heard too.
//! - Nerve → ROS 2: every Nerve topic with publishers whose type has a ROS 2 form gets a
//!   rmw_zenoh publisher (key `<domain>/<name>/<type>/RIHS01_<hash>`, its token, and the
//!   attachment on every sample); the Nerve subscriber exists only while rmw_zenoh
//!   subscriptions of the type are in the graph. Humble subscriptions are served by a
//!   second publisher on the `TypeHashNotSupported` key while there are any.
//! - Loops: samples of this session are not heard; samples whose attachment names a
//!   publisher of another bridge (a node named `nerve_bridge_*` or a session listed by a
//!   Nerve bridge node) are not forwarded into Nerve; Nerve samples of this bridge's
//!   publishers or of other bridges' processes are not forwarded into ROS 2.
//!
//! Each bridge names its Nerve node `_ros2_bridge_z<zid>` (see [`crate::peers`]): of
//! several rmw_zenoh bridges on one Nerve domain the one with the lowest session id
//! forwards and the others stand by.

use super::attachment::Gid;
use super::names::TYPE_HASH_NOT_SUPPORTED;
use super::qos::{Durability, Qos, Reliability};
use super::side::{GraphEntity, Received, RosPublisher, RosSubscription, ZenohError, ZenohSide};
use super::TypeHash;
use crate::dds::RosQos;
use crate::peers::{Peers, NODE_PREFIX};
use crate::types::{count_unconverted, Carrier, Catalog, TypeRoute};
use crate::{BridgeConfig, BridgeError, BridgeStats, Event, Kind};
use nerve::{Node, RawPublisher, RawSubscriber, WaitSet};
use nerve_msgs::ros2::ros2_type;
use nerve_ros2_types::Registry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use zenoh::Wait;

/// The prefix of the ROS 2 node name of every bridge (`nerve_bridge_<pid>`, as the DDS
/// mode names its node too): endpoints of nodes so named are never bridged.
pub const BRIDGE_NODE_PREFIX: &str = "nerve_bridge_";

/// The most samples waiting between Zenoh's threads and the ROS 2 → Nerve thread (more
/// are dropped and counted).
pub const MAX_PENDING: usize = 1024;

/// How long a route outlives its last ROS 2 publisher (a restarting node keeps its
/// subscribers).
const GRACE: Duration = Duration::from_secs(2);

/// How long a scan of the bridges alive is trusted.
const PEER_SCAN: Duration = Duration::from_millis(250);

/// How often an unknown publisher GID may make the ROS 2 → Nerve half look it up.
const GID_LOOKUP: Duration = Duration::from_millis(50);

/// What marks a rmw_zenoh bridge in the Nerve node list (after [`NODE_PREFIX`]).
const ZENOH_MARK: char = 'z';

impl From<ZenohError> for BridgeError {
    fn from(e: ZenohError) -> BridgeError {
        BridgeError::Zenoh(e.to_string())
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// State the bridge's threads share.
pub(super) struct Shared {
    pub(super) side: ZenohSide,
    /// This session's id (as tokens write it).
    pub(super) zid: String,
    /// `z<zid>`: this bridge in the Nerve node list.
    me: String,
    pub(super) stop: AtomicBool,
    pub(super) stats: BridgeStats,
    events: Box<dyn Fn(Event) + Send + Sync>,
    /// Nerve topics the ROS 2 → Nerve half publishes (the other half discounts them).
    inbound_topics: Mutex<HashSet<String>>,
    /// Ids of the Nerve publishers of the ROS 2 → Nerve half (their samples never go back).
    inbound_publishers: Mutex<HashSet<u64>>,
    peers: Mutex<(Instant, Arc<Peers>)>,
    nerve: nerve::Context,
}

impl Shared {
    pub(super) fn event(&self, e: Event) {
        (self.events)(e)
    }

    /// The bridges alive now (scanned at most every [`PEER_SCAN`]).
    pub(super) fn peers(&self) -> Arc<Peers> {
        let mut p = lock(&self.peers);
        if p.0.elapsed() > PEER_SCAN {
            *p = (Instant::now(), Arc::new(Peers::scan(&self.nerve)));
        }
        p.1.clone()
    }

    /// Whether this bridge forwards: the lowest session id of the rmw_zenoh bridges on
    /// the Nerve domain does (DDS bridges are not counted: they serve another network).
    pub(super) fn primary(&self) -> bool {
        self.peers()
            .participants
            .iter()
            .filter(|p| p.starts_with(ZENOH_MARK))
            .all(|p| *p >= self.me)
    }

    /// Whether a graph entity belongs to this or another bridge.
    pub(super) fn is_bridge(&self, e: &GraphEntity, peers: &Peers) -> bool {
        e.token.zid == self.zid
            || e.token.node_name.starts_with(BRIDGE_NODE_PREFIX)
            || peers
                .participants
                .contains(&format!("{ZENOH_MARK}{}", e.token.zid))
    }
}

/// The ROS 2 QoS of an rmw_zenoh profile, for the Nerve side.
fn ros_qos(q: &Qos) -> RosQos {
    RosQos {
        reliable: q.reliability != Reliability::BestEffort,
        transient_local: q.durability == Durability::TransientLocal,
        depth: usize::try_from(q.depth).unwrap_or(usize::MAX).max(1),
    }
}

/// The rmw_zenoh profile of a ROS 2 QoS.
fn zenoh_qos(q: &RosQos) -> Qos {
    Qos {
        reliability: if q.reliable {
            Reliability::Reliable
        } else {
            Reliability::BestEffort
        },
        durability: if q.transient_local {
            Durability::TransientLocal
        } else {
            Durability::Volatile
        },
        ..Qos::keep_last(q.depth.max(1) as u64)
    }
}

/// The RIHS01 type hash (`RIHS01_<hex>`) of a route's ROS 2 type: the one its carrier
/// schema holds, else computed from the definition (a native standard type's `ros2msg`
/// text).
pub(crate) fn route_type_hash(route: &TypeRoute) -> Result<String, BridgeError> {
    if let Some((_, hash, _)) = ros2_type(&route.schema) {
        return Ok(hash.to_owned());
    }
    let err = |e: nerve_ros2_types::RegistryError| BridgeError::Type {
        ros_type: route.ros_name.clone(),
        reason: format!("no type hash: {e}"),
    };
    let hash = match &route.carrier {
        Carrier::Native(s) => Registry::from_ros2msg(&route.ros_name, &(s.text)())
            .and_then(|r| r.type_hash(&route.ros_name))
            .map_err(err)?,
        Carrier::Cdr(pass) => pass.registry().type_hash(pass.name()).map_err(err)?,
    };
    Ok(hash.to_string())
}

/// A running rmw_zenoh bridge (three threads: topics ROS 2 → Nerve, topics Nerve → ROS 2,
/// services both ways).
pub struct ZenohBridge {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl ZenohBridge {
    /// Opens a Zenoh session with `zenoh` (typically [`super::peer_config`] connected to
    /// rmw_zenoh's router), declares the bridge's ROS 2 node `nerve_bridge_<pid>` in ROS
    /// domain `config.ros_domain` and starts its threads; `events` receives what the
    /// bridge reports. Transient local topics need time stamps on the session
    /// (`timestamping/enabled`, as rmw_zenoh's default session configuration and
    /// [`super::peer_config`] have it): without, such a topic is reported not bridged.
    pub fn start(
        config: BridgeConfig,
        zenoh: zenoh::Config,
        events: impl Fn(Event) + Send + Sync + 'static,
    ) -> Result<ZenohBridge, BridgeError> {
        config.check()?;
        let session = zenoh::open(zenoh)
            .wait()
            .map_err(|e| BridgeError::Zenoh(format!("opening the session: {e}")))?;
        let zid = session.zid().to_string();
        let side = ZenohSide::new(
            session,
            u32::from(config.ros_domain),
            "/",
            &format!("{BRIDGE_NODE_PREFIX}{}", std::process::id()),
        )?;
        let nerve_ctx = nerve::Context::new(config.nerve.clone())
            .map_err(|e| BridgeError::Nerve(e.to_string()))?;
        let me = format!("{ZENOH_MARK}{zid}");
        let node_name = format!("{NODE_PREFIX}{me}");
        let shared = Arc::new(Shared {
            side,
            zid,
            me,
            stop: AtomicBool::new(false),
            stats: BridgeStats::default(),
            events: Box::new(events),
            inbound_topics: Mutex::default(),
            inbound_publishers: Mutex::default(),
            peers: Mutex::new((Instant::now() - Duration::from_secs(10), Arc::default())),
            nerve: nerve_ctx.clone(),
        });
        let mut bridge = ZenohBridge {
            shared: shared.clone(),
            threads: Vec::new(),
        };
        for half in ["ros2-to-nerve", "nerve-to-ros2", "services"] {
            let (for_half, config, ctx, name) = (
                shared.clone(),
                config.clone(),
                nerve_ctx.clone(),
                node_name.clone(),
            );
            // each half owns its Nerve node (ports belong to the thread that made them)
            let (tx, rx) = std::sync::mpsc::channel();
            let handle = std::thread::Builder::new()
                .name(format!("zenoh-{half}"))
                .spawn(move || {
                    let node = match ctx.node(&name).create() {
                        Ok(n) => n,
                        Err(e) => {
                            let _ = tx.send(Err(BridgeError::Nerve(e.to_string())));
                            return;
                        }
                    };
                    let _ = tx.send(Ok(()));
                    match half {
                        "ros2-to-nerve" => Inbound::new(for_half, config, node).run(),
                        "nerve-to-ros2" => Outbound::new(for_half, config, node).run(),
                        _ => super::services::Services::new(for_half, config, node).run(),
                    }
                })
                .map_err(|e| BridgeError::Config(format!("thread: {e}")))?;
            bridge.threads.push(handle);
            rx.recv()
                .unwrap_or_else(|_| Err(BridgeError::Config(format!("{half} thread died"))))?;
        }
        Ok(bridge)
    }

    /// The bridge's counters.
    pub fn stats(&self) -> &BridgeStats {
        &self.shared.stats
    }

    /// The Zenoh session id of the bridge (its tokens carry it).
    pub fn zid(&self) -> &str {
        &self.shared.zid
    }

    /// The bridge's ROS 2 side (its node, its graph).
    pub fn side(&self) -> &ZenohSide {
        &self.shared.side
    }

    /// Stops its threads and waits for them.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for ZenohBridge {
    fn drop(&mut self) {
        self.halt();
    }
}

/// One ROS 2 → Nerve topic.
struct InRoute {
    ty: Arc<TypeRoute>,
    publisher: RawPublisher,
    qos: RosQos,
    /// The type hash its subscription token announces.
    hash: String,
    /// The Zenoh subscription (while Nerve listens) and the id its samples carry.
    subscription: Option<(u64, RosSubscription)>,
    last_seen: Instant,
}

/// The ROS 2 → Nerve half (one thread).
struct Inbound {
    shared: Arc<Shared>,
    config: BridgeConfig,
    node: Node,
    catalog: Catalog,
    routes: BTreeMap<String, InRoute>,
    /// Subscription id → topic.
    ids: HashMap<u64, String>,
    next_id: u64,
    tx: SyncSender<(u64, Received)>,
    rx: Receiver<(u64, Received)>,
    /// Samples Zenoh's threads could not queue (the queue held [`MAX_PENDING`]).
    overflow: Arc<AtomicU64>,
    /// Publisher GIDs of bridges and of ROS 2 nodes, as last read from the graph.
    bridge_gids: HashSet<Gid>,
    known_gids: HashSet<Gid>,
    last_lookup: Instant,
    failed: HashMap<String, Instant>,
    scratch: Vec<u8>,
}

impl Inbound {
    fn new(shared: Arc<Shared>, config: BridgeConfig, node: Node) -> Inbound {
        let (tx, rx) = std::sync::mpsc::sync_channel(MAX_PENDING);
        Inbound {
            catalog: Catalog::of(&config),
            shared,
            config,
            node,
            routes: BTreeMap::new(),
            ids: HashMap::new(),
            next_id: 0,
            tx,
            rx,
            overflow: Arc::default(),
            bridge_gids: HashSet::new(),
            known_gids: HashSet::new(),
            last_lookup: Instant::now(),
            failed: HashMap::new(),
            scratch: Vec::new(),
        }
    }

    fn run(mut self) {
        let mut next_refresh = Instant::now();
        while !self.shared.stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= next_refresh {
                self.refresh();
                next_refresh = now + self.config.refresh;
            }
            let wait = next_refresh.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(wait) {
                Ok((id, r)) => self.forward(id, r),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
            }
            // what else is there, without waiting
            for _ in 0..MAX_PENDING {
                match self.rx.try_recv() {
                    Ok((id, r)) => self.forward(id, r),
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
        }
    }

    /// Whether a sample from the publisher with `gid` comes from a bridge (an unknown
    /// GID makes the graph be read again, at most every [`GID_LOOKUP`]).
    fn is_bridge_gid(&mut self, gid: Gid) -> bool {
        if self.bridge_gids.contains(&gid) {
            return true;
        }
        if self.known_gids.contains(&gid) || self.last_lookup.elapsed() < GID_LOOKUP {
            return false;
        }
        self.last_lookup = Instant::now();
        let Some(e) = self.shared.side.entity(gid) else {
            return false;
        };
        let bridge = self.shared.is_bridge(&e, &self.shared.peers());
        if bridge {
            self.bridge_gids.insert(gid);
        } else {
            self.known_gids.insert(gid);
        }
        bridge
    }

    fn forward(&mut self, id: u64, r: Received) {
        let Some(topic) = self.ids.get(&id).cloned() else {
            return; // a subscription since undeclared
        };
        if let Ok(a) = &r.attachment {
            if self.is_bridge_gid(a.gid) {
                self.shared.stats.loops_cut.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let Some(route) = self.routes.get(&topic) else {
            return;
        };
        // rmw_zenoh always attaches; a sample without is still good data
        let stamp = match &r.attachment {
            Ok(a) if a.source_timestamp_ns > 0 => a.source_timestamp_ns,
            _ => nerve::wall_ns(),
        };
        if let Err(e) = route.ty.to_nerve(&r.cdr, stamp, &mut self.scratch) {
            if let Some(ev) = count_unconverted(&self.shared.stats, &topic, &route.ty, &e) {
                self.shared.event(ev);
            }
            return;
        }
        match route.publisher.publish_bytes(&self.scratch) {
            Ok(()) => {
                self.shared.stats.to_nerve.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
                self.shared.event(Event::Dropped {
                    topic,
                    reason: e.to_string(),
                });
            }
        }
    }

    /// Compares the rmw_zenoh publishers with the routes and Nerve's subscribers with
    /// the subscriptions.
    fn refresh(&mut self) {
        let lost = self.overflow.swap(0, Ordering::Relaxed);
        if lost > 0 {
            self.shared.stats.dropped.fetch_add(lost, Ordering::Relaxed);
            self.shared.event(Event::Dropped {
                topic: "(rmw_zenoh)".to_owned(),
                reason: format!("{lost} samples dropped: the bridge's queue was full"),
            });
        }
        let peers = self.shared.peers();
        let primary = self.shared.primary();
        let graph = self.shared.side.graph();
        self.bridge_gids.clear();
        self.known_gids.clear();
        // topic -> (type, hash, combined QoS) of the publishers that are not bridges
        let mut wanted: BTreeMap<String, (String, TypeHash, RosQos)> = BTreeMap::new();
        for e in graph.publishers() {
            if self.shared.is_bridge(e, &peers) {
                self.bridge_gids.insert(e.gid);
                continue;
            }
            self.known_gids.insert(e.gid);
            let Some(t) = &e.token.topic else { continue };
            if !primary || !self.config.admits(&t.name) {
                continue;
            }
            let q = ros_qos(&t.qos);
            let w = wanted
                .entry(t.name.clone())
                .or_insert_with(|| (t.ros_type.clone(), t.type_hash, q));
            if w.0 != t.ros_type {
                continue; // a second type on one topic: the first one seen crosses
            }
            // a subscription hears every publisher only if it asks no more than each offers
            w.2.reliable &= q.reliable;
            w.2.transient_local &= q.transient_local;
            w.2.depth = w.2.depth.max(q.depth);
        }
        let now = Instant::now();
        for (topic, (ty, hash, qos)) in &wanted {
            if let Some(r) = self.routes.get_mut(topic) {
                r.last_seen = now;
                continue;
            }
            if self
                .failed
                .get(topic)
                .is_some_and(|t| t.elapsed() < crate::RETRY)
            {
                continue;
            }
            let first_failure = !self.failed.contains_key(topic);
            // the topic is the bridge's own before its Nerve publisher exists (as in
            // inbound.rs): the other half never offers it back
            let nerve_topic = crate::inbound::nerve_topic(topic).into_owned();
            let claimed = lock(&self.shared.inbound_topics).insert(nerve_topic.clone());
            let opened = self.open(topic, ty, *hash, *qos);
            if opened.is_err() && claimed {
                lock(&self.shared.inbound_topics).remove(&nerve_topic);
            }
            match opened {
                Ok(route) => {
                    self.failed.remove(topic);
                    self.shared.event(Event::Bridged {
                        kind: Kind::Topic,
                        topic: nerve_topic.clone(),
                        ros_type: ty.clone(),
                        nerve_type: route.ty.schema.name.clone(),
                        to_ros: false,
                    });
                    lock(&self.shared.inbound_publishers).insert(route.publisher.id());
                    self.routes.insert(topic.clone(), route);
                }
                Err(e) => {
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
        let gone: Vec<String> = self
            .routes
            .iter()
            .filter(|(t, r)| !wanted.contains_key(*t) && (!primary || now - r.last_seen > GRACE))
            .map(|(t, _)| t.clone())
            .collect();
        for t in gone {
            if let Some(r) = self.routes.remove(&t) {
                if let Some((id, _)) = r.subscription {
                    self.ids.remove(&id);
                }
                lock(&self.shared.inbound_publishers).remove(&r.publisher.id());
            }
            lock(&self.shared.inbound_topics).remove(crate::inbound::nerve_topic(&t).as_ref());
        }
        // subscriptions only while Nerve listens
        for (t, r) in self.routes.iter_mut() {
            let listening = r.publisher.subscriber_count() > 0;
            if listening && r.subscription.is_none() {
                let id = self.next_id;
                self.next_id += 1;
                let (tx, overflow) = (self.tx.clone(), self.overflow.clone());
                let sub = self.shared.side.subscription(
                    t,
                    &r.ty.ros_name,
                    &r.hash,
                    zenoh_qos(&r.qos),
                    true,
                    move |sample| {
                        if tx.try_send((id, sample)).is_err() {
                            overflow.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                );
                match sub {
                    Ok(s) => {
                        self.ids.insert(id, t.clone());
                        r.subscription = Some((id, s));
                    }
                    Err(e) => self.shared.event(Event::NotBridged {
                        topic: t.clone(),
                        reason: e.to_string(),
                    }),
                }
            } else if !listening {
                if let Some((id, _)) = r.subscription.take() {
                    self.ids.remove(&id);
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
        hash: TypeHash,
        qos: RosQos,
    ) -> Result<InRoute, BridgeError> {
        let route = self.catalog.for_ros(ty)?;
        // the token announces the type's own hash; a Humble publisher's when none is known
        let hash = route_type_hash(&route).unwrap_or_else(|_| hash.to_string());
        let publisher = crate::inbound::open_publisher(&self.node, topic, &route, qos)
            .map_err(|e| BridgeError::Nerve(format!("{topic}: {e}")))?;
        Ok(InRoute {
            ty: route,
            publisher,
            qos,
            hash,
            subscription: None,
            last_seen: Instant::now(),
        })
    }
}

/// One Nerve → ROS 2 topic.
struct OutRoute {
    ty: Arc<TypeRoute>,
    /// The RIHS01 hash of its type.
    hash: String,
    qos: Qos,
    /// The publisher on the RIHS01 key.
    publisher: RosPublisher,
    /// The publisher on the `TypeHashNotSupported` key, while Humble subscriptions are
    /// in the graph.
    humble: Option<RosPublisher>,
    nerve_qos: nerve::Qos,
    subscriber: Option<RawSubscriber>,
}

/// The Nerve → ROS 2 half (one thread).
struct Outbound {
    shared: Arc<Shared>,
    config: BridgeConfig,
    node: Node,
    catalog: Catalog,
    routes: BTreeMap<String, OutRoute>,
    reported: HashSet<String>,
    scratch: Vec<u8>,
}

impl Outbound {
    fn new(shared: Arc<Shared>, config: BridgeConfig, node: Node) -> Outbound {
        Outbound {
            catalog: Catalog::of(&config),
            shared,
            config,
            node,
            routes: BTreeMap::new(),
            reported: HashSet::new(),
            scratch: Vec::new(),
        }
    }

    fn run(mut self) {
        let mut next_refresh = Instant::now();
        while !self.shared.stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= next_refresh {
                self.refresh();
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
        let Some(route) = self.routes.get(topic) else {
            return;
        };
        let Some(sub) = &route.subscriber else {
            return;
        };
        while let Ok(Some(sample)) = sub.try_recv() {
            let h = sample.header();
            let mine = lock(&self.shared.inbound_publishers).contains(&h.publisher_id);
            // another bridge's process (this process may hold other Nerve nodes)
            let other_bridge = peers.is_bridge_origin(h.origin) && (h.origin >> 32) as u32 != pid;
            if mine || other_bridge {
                self.shared.stats.loops_cut.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if let Err(e) = route.ty.to_ros(sample.bytes(), &mut self.scratch) {
                if let Some(ev) = count_unconverted(&self.shared.stats, topic, &route.ty, &e) {
                    self.shared.event(ev);
                }
                continue;
            }
            let mut sent = false;
            for p in std::iter::once(&route.publisher).chain(route.humble.as_ref()) {
                match p.publish(&self.scratch) {
                    Ok(_) => sent = true,
                    Err(e) => {
                        self.shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
                        self.shared.event(Event::Dropped {
                            topic: topic.to_string(),
                            reason: e.to_string(),
                        });
                    }
                }
            }
            if sent {
                self.shared.stats.to_ros.fetch_add(1, Ordering::Relaxed);
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
        let topics = if self.shared.primary() {
            nerve::introspect::list_topics(&self.node).unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut wanted = HashSet::new();
        for t in topics {
            let ours = usize::from(inbound.contains(&t.name));
            if t.publishers <= ours || !self.config.admits(&t.name) {
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
            let qos = zenoh_qos(&RosQos::from_nerve(&nerve_qos));
            let opened = route_type_hash(&route).and_then(|hash| {
                let p = self
                    .shared
                    .side
                    .publisher(&t.name, &route.ros_name, &hash, qos)?;
                Ok((hash, p))
            });
            match opened {
                Ok((hash, publisher)) => {
                    self.shared.event(Event::Bridged {
                        kind: Kind::Topic,
                        topic: t.name.clone(),
                        ros_type: route.ros_name.clone(),
                        nerve_type: schema.name.clone(),
                        to_ros: true,
                    });
                    self.routes.insert(
                        t.name.clone(),
                        OutRoute {
                            ty: route,
                            hash,
                            qos,
                            publisher,
                            humble: None,
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
        // rmw_zenoh subscriptions (not bridges) per topic: (with our hash, Humble's)
        let graph = self.shared.side.graph();
        let mut readers: HashMap<&str, (bool, bool)> = HashMap::new();
        for e in graph.subscriptions() {
            if self.shared.is_bridge(e, &peers) {
                continue;
            }
            let Some(t) = &e.token.topic else { continue };
            let Some(r) = self.routes.get(&t.name) else {
                continue;
            };
            if t.ros_type != r.ty.ros_name {
                continue;
            }
            let entry = readers.entry(t.name.as_str()).or_default();
            match t.type_hash {
                TypeHash::NotSupported => entry.1 = true,
                h if h.to_string() == r.hash => entry.0 = true,
                _ => {} // another version of the type: it would not decode
            }
        }
        let mut failures = Vec::new();
        for (t, r) in self.routes.iter_mut() {
            let (current, humble) = readers.get(t.as_str()).copied().unwrap_or_default();
            if humble && r.humble.is_none() {
                match self
                    .shared
                    .side
                    .publisher(t, &r.ty.ros_name, TYPE_HASH_NOT_SUPPORTED, r.qos)
                {
                    Ok(p) => r.humble = Some(p),
                    Err(e) => failures.push((t.clone(), e.to_string())),
                }
            } else if !humble {
                r.humble = None;
            }
            let listening = current || humble;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_maps_both_ways() {
        let q = RosQos {
            reliable: false,
            transient_local: true,
            depth: 5,
        };
        let z = zenoh_qos(&q);
        assert_eq!(z.reliability, Reliability::BestEffort);
        assert_eq!(z.durability, Durability::TransientLocal);
        assert_eq!(z.depth, 5);
        assert_eq!(ros_qos(&z), q);
        assert_eq!(ros_qos(&Qos::default()).depth, 42);
    }

    /// A native standard type's hash is computed from its `ros2msg` text, a carrier's
    /// read from its schema.
    #[test]
    fn route_hashes() {
        let mut c = Catalog::new(Vec::new(), true).with_lossy(vec!["nerve_msgs/Imu".into()]);
        let imu = c.for_ros("sensor_msgs/msg/Imu").unwrap();
        assert_eq!(
            route_type_hash(&imu).unwrap(),
            "RIHS01_7d9a00ff131080897a5ec7e26e315954b8eae3353c3f995c55faf71574000b5b"
        );
        let schema =
            nerve_msgs::ros2::ros2_schema("std_msgs/msg/String", "RIHS01_ab", "string data\n");
        let r = c.for_nerve(&schema).unwrap().unwrap();
        assert_eq!(route_type_hash(&r).unwrap(), "RIHS01_ab");
    }
}
