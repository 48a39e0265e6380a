//! The rmw_zenoh side behind the engine's [`RosSide`]: one ROS 2 node on a Zenoh session
//! ([`ZenohSide`]) whose graph, publishers, subscriptions, services and clients the
//! engine uses, with the loop checks of the rmw_zenoh mode.
//!
//! - Graph: every entity whose liveliness token this session heard, without this
//!   session's own, those of nodes named `nerve_bridge_*` and those of sessions a Nerve
//!   bridge node lists (`_ros2_bridge_z<zid>`).
//! - Readers listen on the data key with `*` for the type hash (Humble publishers are
//!   heard too) and queue up to the QoS depth (at most [`MAX_QUEUE`]; the oldest go and
//!   are counted); a sample whose attachment names a publisher of a bridge is handed over
//!   marked `from_bridge`.
//! - Writers publish on the RIHS01 key of their type and, while Humble subscriptions are
//!   in the graph, on the `TypeHashNotSupported` key too.
//! - Servers are complete queryables that answer clients of any type hash; requests of
//!   bridges' clients are not handed over. Clients query the server's key (its hash).

use super::mapping::{ros_qos, zenoh_qos, BRIDGE_NODE_PREFIX, ZENOH_MARK};
use super::names::TYPE_HASH_NOT_SUPPORTED;
use super::qos::{History, Qos};
use super::side::{
    GraphEntity, Received, RosClient, RosPublisher, RosRequest, RosService, RosSubscription,
    ZenohSide, MAX_QUEUE,
};
use super::token::EntityKind;
use super::{Gid, TypeHash};
use crate::dds::RosQos;
use crate::engine::side::{
    Endpoint, Incoming, ReadySet, RosSide, RosType, ServiceClient, ServiceServer, SideGraph,
    TopicReader, TopicWriter,
};
use crate::peers::Peers;
use crate::services::{CALL_TIMEOUT, MAX_PENDING};
use crate::{BridgeConfig, BridgeError};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use zenoh::liveliness::LivelinessToken;
use zenoh::Wait;

/// How often an unknown publisher GID may make the readers read the graph again.
const GID_LOOKUP: Duration = Duration::from_millis(50);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Publisher GIDs of the graph, sorted into bridges' and others', as last read (a
/// snapshot of the graph: bounded by it).
#[derive(Default)]
struct Gids {
    bridges: HashSet<Gid>,
    others: HashSet<Gid>,
    /// When the graph was read.
    read: Option<Instant>,
    /// The bridges listed then ([`Peers::participants`]).
    participants: HashSet<String>,
}

/// What the side and its readers share.
struct Inner {
    side: ZenohSide,
    /// This session's id (as tokens write it).
    zid: String,
    /// `z<zid>`: this bridge in the Nerve node list.
    me: String,
    gids: Mutex<Gids>,
    /// The node tokens that stand for Nerve's nodes, by full name.
    mirrored: Mutex<HashMap<String, LivelinessToken>>,
}

impl Inner {
    /// Whether a graph entity belongs to this or another bridge.
    fn is_bridge(&self, e: &GraphEntity, peers: &Peers) -> bool {
        e.token.zid == self.zid
            || e.token.node_name.starts_with(BRIDGE_NODE_PREFIX)
            || peers
                .participants
                .contains(&format!("{ZENOH_MARK}{}", e.token.zid))
    }

    /// Whether a sample of the publisher with `gid` comes from a bridge: the graph's
    /// publishers are read again when the bridges listed changed, or for an unknown GID
    /// at most every [`GID_LOOKUP`] (an unknown GID is not a bridge's until then).
    fn is_bridge_gid(&self, gid: Gid, peers: &Peers) -> bool {
        let mut g = lock(&self.gids);
        let trusted = g.read.filter(|_| g.participants == peers.participants);
        if let Some(read) = trusted {
            if g.bridges.contains(&gid) {
                return true;
            }
            if g.others.contains(&gid) || read.elapsed() < GID_LOOKUP {
                return false;
            }
        }
        g.read = Some(Instant::now());
        g.participants.clone_from(&peers.participants);
        g.bridges.clear();
        g.others.clear();
        for e in self.side.graph().publishers() {
            if self.is_bridge(e, peers) {
                g.bridges.insert(e.gid);
            } else {
                g.others.insert(e.gid);
            }
        }
        g.bridges.contains(&gid)
    }
}

/// The rmw_zenoh side of the engine: a ROS 2 node on a Zenoh session (see the module
/// documentation).
pub struct ZenohEngineSide {
    inner: Arc<Inner>,
}

impl ZenohEngineSide {
    /// Opens a Zenoh session with `zenoh` (typically [`super::peer_config`] connected to
    /// rmw_zenoh's router) and declares the bridge's ROS 2 node `nerve_bridge_<pid>` in
    /// ROS domain `config.ros_domain`. Transient local topics need time stamps on the
    /// session (`timestamping/enabled`, as [`super::peer_config`] has it).
    pub fn open(config: &BridgeConfig, zenoh: zenoh::Config) -> Result<Self, BridgeError> {
        let session = zenoh::open(zenoh)
            .wait()
            .map_err(|e| BridgeError::Zenoh(format!("opening the session: {e}")))?;
        let side = ZenohSide::new(
            session,
            u32::from(config.ros_domain),
            "/",
            &format!("{BRIDGE_NODE_PREFIX}{}", std::process::id()),
        )?;
        Ok(Self::new(side))
    }

    /// The engine side on the node `side`.
    pub fn new(side: ZenohSide) -> Self {
        let zid = side.session().zid().to_string();
        let me = format!("{ZENOH_MARK}{zid}");
        ZenohEngineSide {
            inner: Arc::new(Inner {
                side,
                zid,
                me,
                gids: Mutex::default(),
                mirrored: Mutex::default(),
            }),
        }
    }

    /// The ROS 2 node (its session, its whole graph).
    pub fn side(&self) -> &ZenohSide {
        &self.inner.side
    }

    /// The Zenoh session id (its tokens carry it).
    pub fn zid(&self) -> &str {
        &self.inner.zid
    }
}

/// The endpoint a graph entity stands for (`None` for a node).
fn endpoint(e: &GraphEntity) -> Option<Endpoint> {
    let t = e.token.topic.as_ref()?;
    Some(Endpoint {
        name: t.name.clone(),
        ros_type: t.ros_type.clone(),
        qos: ros_qos(&t.qos),
        keyed: false,
        type_hash: match t.type_hash {
            TypeHash::NotSupported => None,
            h => Some(h.to_string()),
        },
    })
}

impl RosSide for ZenohEngineSide {
    type Writer = ZenohWriter;
    type Reader = ZenohReader;
    type Ready = ZenohReady;
    type Server = ZenohServer;
    type Client = ZenohClient;

    fn bridge_id(&self) -> &str {
        &self.inner.me
    }

    /// The lowest session id of the rmw_zenoh bridges on the Nerve domain forwards (DDS
    /// bridges are not counted: they serve another network).
    fn primary(&self, peers: &Peers) -> bool {
        peers
            .participants
            .iter()
            .filter(|p| p.starts_with(ZENOH_MARK))
            .all(|p| *p >= self.inner.me)
    }

    fn graph(&self, peers: &Peers) -> SideGraph {
        let mut g = SideGraph::default();
        for e in self.inner.side.graph().entities {
            if self.inner.is_bridge(&e, peers) {
                continue;
            }
            let list = match e.token.kind {
                EntityKind::Node => {
                    let ns = e.token.namespace.trim_end_matches('/');
                    g.nodes.insert(format!("{ns}/{}", e.token.node_name));
                    continue;
                }
                EntityKind::Publisher => &mut g.publishers,
                EntityKind::Subscription => &mut g.subscriptions,
                EntityKind::ServiceServer => &mut g.servers,
                EntityKind::ServiceClient => &mut g.clients,
            };
            list.extend(endpoint(&e));
        }
        g
    }

    /// Each Nerve node is a node token of this session (the graph leaves this session's
    /// entities out, so they are never taken for ROS 2's).
    fn mirror_nodes(&self, nerve_nodes: &BTreeSet<String>) {
        let mut mirrored = lock(&self.inner.mirrored);
        mirrored.retain(|n, _| nerve_nodes.contains(n));
        for name in nerve_nodes {
            if mirrored.contains_key(name) {
                continue;
            }
            let (ns, base) = match name.rsplit_once('/') {
                Some((ns, base)) if !ns.is_empty() => (ns, base),
                Some((_, base)) => ("/", base),
                None => ("/", name.as_str()),
            };
            // a name ROS 2 cannot hold is not announced
            if let Ok(token) = self.inner.side.announce_node(ns, base) {
                mirrored.insert(name.clone(), token);
            }
        }
    }

    fn fingerprint(&self, h: &mut DefaultHasher) {
        let g = self.inner.side.graph();
        g.entities.len().hash(h);
        for e in &g.entities {
            e.key_expr.hash(h);
        }
    }

    fn ready_set(&self) -> Result<ZenohReady, BridgeError> {
        Ok(ZenohReady::default())
    }

    /// A type with no known hash is refused: every rmw_zenoh key carries one.
    fn writer(&self, topic: &str, ty: &RosType, qos: RosQos) -> Result<ZenohWriter, BridgeError> {
        let hash = ty.hash.clone().ok_or_else(|| BridgeError::Type {
            ros_type: ty.name.clone(),
            reason: "no RIHS01 type hash (its definition was not found), which every \
                     rmw_zenoh key carries"
                .to_owned(),
        })?;
        let qos = zenoh_qos(&qos);
        let publisher = self.inner.side.publisher(topic, &ty.name, &hash, qos)?;
        Ok(ZenohWriter {
            inner: self.inner.clone(),
            topic: topic.to_owned(),
            ros_type: ty.name.clone(),
            hash,
            qos,
            publisher,
            humble: None,
        })
    }

    fn reader(
        &self,
        ready: &mut ZenohReady,
        token: usize,
        topic: &str,
        ty: &RosType,
        qos: RosQos,
        _keyed: bool,
    ) -> Result<ZenohReader, BridgeError> {
        // the token announces the type's own hash; Humble's when none is known
        let hash = ty.hash.as_deref().unwrap_or(TYPE_HASH_NOT_SUPPORTED);
        let qos = zenoh_qos(&qos);
        let adapted = qos.adapted();
        let capacity = match adapted.history {
            History::KeepAll => MAX_QUEUE,
            _ => usize::try_from(adapted.depth)
                .unwrap_or(MAX_QUEUE)
                .clamp(1, MAX_QUEUE),
        };
        let inbox = Arc::new(Mutex::new(ReaderInbox {
            samples: VecDeque::with_capacity(capacity.min(64)),
            capacity,
            lost: 0,
        }));
        let (into, wake) = (inbox.clone(), ready.shared.clone());
        let subscription =
            self.inner
                .side
                .subscription(topic, &ty.name, hash, qos, true, move |r| {
                    {
                        let mut i = lock(&into);
                        if i.samples.len() >= i.capacity {
                            i.samples.pop_front();
                            i.lost += 1;
                        }
                        i.samples.push_back(r);
                    }
                    wake.mark(token);
                })?;
        Ok(ZenohReader {
            inner: self.inner.clone(),
            inbox,
            _subscription: subscription,
        })
    }

    /// Announced with the type's hash, else Humble's `TypeHashNotSupported` (the
    /// queryable answers every hash either way).
    fn server(&self, service: &str, ty: &RosType) -> Result<ZenohServer, BridgeError> {
        let hash = ty.hash.as_deref().unwrap_or(TYPE_HASH_NOT_SUPPORTED);
        let (tx, requests) = std::sync::mpsc::sync_channel(MAX_PENDING);
        let lost = Arc::new(AtomicU64::new(0));
        let full = lost.clone();
        // a request that finds the queue full is dropped (counted): its client's query
        // ends without a reply
        let service =
            self.inner
                .side
                .service(service, &ty.name, hash, Qos::default(), true, move |req| {
                    if tx.try_send(req).is_err() {
                        // SYNC: a counter only; read with a swap on the engine's thread
                        full.fetch_add(1, Ordering::Relaxed);
                    }
                })?;
        Ok(ZenohServer {
            inner: self.inner.clone(),
            requests,
            lost,
            _service: service,
        })
    }

    fn client(
        &self,
        service: &str,
        ty: &RosType,
        server: &Endpoint,
    ) -> Result<ZenohClient, BridgeError> {
        let hash = server
            .type_hash
            .as_deref()
            .unwrap_or(TYPE_HASH_NOT_SUPPORTED);
        let client = self
            .inner
            .side
            .client(service, &ty.name, hash, Qos::default())?;
        let (reply_tx, replies) = std::sync::mpsc::sync_channel(MAX_PENDING);
        Ok(ZenohClient {
            client,
            replies,
            reply_tx,
        })
    }
}

#[derive(Default)]
struct Marked {
    tokens: Mutex<BTreeSet<usize>>,
    woken: Condvar,
}

impl Marked {
    fn mark(&self, token: usize) {
        lock(&self.tokens).insert(token);
        self.woken.notify_all();
    }
}

/// The readers of one engine thread to wait on: each reader's subscription marks its
/// token when a sample comes.
#[derive(Default)]
pub struct ZenohReady {
    shared: Arc<Marked>,
}

impl ReadySet for ZenohReady {
    /// Clears `ready`, waits up to `timeout` for a token to be marked and moves the
    /// marked tokens into `ready` (ascending).
    fn wait(&mut self, timeout: Duration, ready: &mut Vec<usize>) {
        ready.clear();
        let deadline = Instant::now() + timeout;
        let mut tokens = lock(&self.shared.tokens);
        while tokens.is_empty() {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            tokens = self
                .shared
                .woken
                .wait_timeout(tokens, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        ready.extend(std::mem::take(&mut *tokens));
    }
}

struct ReaderInbox {
    samples: VecDeque<Received>,
    capacity: usize,
    /// Samples dropped for a full queue since [`TopicReader::lost`] last asked.
    lost: u64,
}

/// A reader of one rmw_zenoh topic (its subscription, with its token, is undeclared when
/// dropped).
pub struct ZenohReader {
    inner: Arc<Inner>,
    inbox: Arc<Mutex<ReaderInbox>>,
    _subscription: RosSubscription,
}

impl TopicReader for ZenohReader {
    /// The oldest queued sample. A sample without a readable attachment is still good
    /// data (rmw_zenoh always attaches one): it is handed over without a time stamp and
    /// not taken for a bridge's.
    fn take(&mut self, peers: &Peers) -> Result<Option<Incoming>, String> {
        let Some(r) = lock(&self.inbox).samples.pop_front() else {
            return Ok(None);
        };
        let (stamp_ns, from_bridge) = match &r.attachment {
            Ok(a) => (
                (a.source_timestamp_ns > 0).then_some(a.source_timestamp_ns),
                self.inner.is_bridge_gid(a.gid, peers),
            ),
            Err(_) => (None, false),
        };
        Ok(Some(Incoming {
            cdr: r.cdr,
            stamp_ns,
            from_bridge,
        }))
    }

    fn lost(&mut self) -> u64 {
        std::mem::take(&mut lock(&self.inbox).lost)
    }
}

/// A writer of one rmw_zenoh topic: a publisher on the RIHS01 key of its type and, while
/// Humble subscriptions are in the graph, one on the `TypeHashNotSupported` key.
pub struct ZenohWriter {
    inner: Arc<Inner>,
    topic: String,
    ros_type: String,
    /// The RIHS01 hash of its type.
    hash: String,
    qos: Qos,
    publisher: RosPublisher,
    humble: Option<RosPublisher>,
}

impl TopicWriter for ZenohWriter {
    /// Publishes on every publisher; `Err` names each that failed (the others sent it).
    fn write(&mut self, cdr: Vec<u8>) -> Result<(), String> {
        let failed: Vec<String> = std::iter::once(&self.publisher)
            .chain(self.humble.as_ref())
            .filter_map(|p| p.publish(&cdr).err().map(|e| e.to_string()))
            .collect();
        if failed.is_empty() {
            Ok(())
        } else {
            Err(failed.join("; "))
        }
    }

    /// A subscription of the writer's type with its hash, or Humble's (no hash).
    fn serves(&self, subscription: &Endpoint) -> bool {
        subscription.ros_type == self.ros_type
            && subscription
                .type_hash
                .as_ref()
                .is_none_or(|h| *h == self.hash)
    }

    /// Opens the Humble publisher while Humble subscriptions of the type are on the
    /// topic, closes it when there are none.
    fn subscriptions(&mut self, on_topic: &[&Endpoint]) -> Result<(), BridgeError> {
        let humble = on_topic
            .iter()
            .any(|s| s.type_hash.is_none() && s.ros_type == self.ros_type);
        if !humble {
            self.humble = None;
        } else if self.humble.is_none() {
            self.humble = Some(self.inner.side.publisher(
                &self.topic,
                &self.ros_type,
                TYPE_HASH_NOT_SUPPORTED,
                self.qos,
            )?);
        }
        Ok(())
    }
}

/// A server of one rmw_zenoh service (its queryable, with its token, is undeclared when
/// dropped).
pub struct ZenohServer {
    inner: Arc<Inner>,
    requests: Receiver<RosRequest>,
    /// Requests dropped because the queue was full.
    lost: Arc<AtomicU64>,
    _service: RosService,
}

impl ServiceServer for ZenohServer {
    type Request = RosRequest;

    /// The next request of a client that is not a bridge's; requests without a readable
    /// attachment (they cannot be answered) and requests of bridges' clients are dropped
    /// (their queries end without a reply).
    fn take(&mut self, peers: &Peers) -> Option<(RosRequest, Vec<u8>)> {
        while let Ok(mut req) = self.requests.try_recv() {
            let Ok(a) = &req.attachment else { continue };
            if self
                .inner
                .side
                .entity(a.gid)
                .is_some_and(|e| self.inner.is_bridge(&e, peers))
            {
                continue;
            }
            let cdr = std::mem::take(&mut req.cdr);
            return Some((req, cdr));
        }
        None
    }

    fn reply(&mut self, to: RosRequest, cdr: Vec<u8>) -> Result<(), String> {
        to.reply(&cdr).map(|_| ()).map_err(|e| e.to_string())
    }

    fn lost(&mut self) -> u64 {
        self.lost.swap(0, Ordering::Relaxed)
    }
}

/// A reply as the client's callback queues it: the call's sequence number (`-1` when the
/// reply came before [`RosClient::call`] returned) and the reply.
type Reply = (i64, Result<Received, String>);

/// A client of one rmw_zenoh service server (its token is undeclared when dropped).
pub struct ZenohClient {
    client: RosClient,
    replies: Receiver<Reply>,
    reply_tx: SyncSender<Reply>,
}

impl ServiceClient for ZenohClient {
    /// The request's sequence number.
    type Call = i64;

    /// Queries the server's key, giving up after `crate::services::CALL_TIMEOUT`.
    fn call(&mut self, cdr: Vec<u8>) -> Result<i64, String> {
        let tx = self.reply_tx.clone();
        let seq = Arc::new(AtomicI64::new(-1));
        let seq_of_reply = seq.clone();
        let sent = self.client.call(&cdr, CALL_TIMEOUT, move |reply| {
            // SYNC: the call's sequence number is stored (Release) once `call` returned;
            // a reply before that names its call by its attachment instead
            let _ = tx.try_send((seq_of_reply.load(Ordering::Acquire), reply));
        });
        match sent {
            Ok(a) => {
                seq.store(a.sequence_number, Ordering::Release);
                Ok(a.sequence_number)
            }
            Err(e) => Err(format!("ROS 2 request not sent: {e}")),
        }
    }

    /// The next reply (every server's, when several answer one call).
    fn take(&mut self) -> Option<(i64, Result<Vec<u8>, String>)> {
        let (seq, reply) = self.replies.try_recv().ok()?;
        // a reply's attachment names its request; the call's own number otherwise
        let seq = match &reply {
            Ok(Received {
                attachment: Ok(a), ..
            }) if a.gid == self.client.gid() => a.sequence_number,
            _ => seq,
        };
        Some((seq, reply.map(|r| r.cdr)))
    }
}

/// The threads of a rmw_zenoh bridge: the engine's topics, services, actions,
/// parameters and graph.
pub(crate) const HALVES: [(&str, crate::engine::Half<ZenohEngineSide>); 6] = [
    ("zenoh-ros2-to-nerve", |s, c, n| {
        let h = crate::engine::topics::inbound::Inbound::new(s, c, n)?;
        Ok(Box::new(move || h.run()))
    }),
    ("zenoh-nerve-to-ros2", |s, c, n| {
        let h = crate::engine::topics::outbound::Outbound::new(s, c, n)?;
        Ok(Box::new(move || h.run()))
    }),
    ("zenoh-services", |s, c, n| {
        let h = crate::engine::services::Services::new(s, c, n)?;
        Ok(Box::new(move || h.run()))
    }),
    ("zenoh-actions", |s, c, n| {
        let h = crate::engine::actions::Actions::new(s, c, n)?;
        Ok(Box::new(move || h.run()))
    }),
    ("zenoh-graph", |s, c, n| {
        let h = crate::engine::graph::GraphHalf::new(s, c, n);
        Ok(Box::new(move || h.run()))
    }),
    ("zenoh-params", |s, c, n| {
        let h = crate::engine::params::Params::new(s, c, n)?;
        Ok(Box::new(move || h.run()))
    }),
];

#[cfg(test)]
mod tests {
    use super::super::side::peer_config;
    use super::*;
    use crate::services::service_route;
    use crate::types::Catalog;

    const STRING_HASH: &str =
        "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";
    const WAIT: Duration = Duration::from_secs(15);

    /// `std_msgs/msg/String` "hello" in CDR (little-endian encapsulation).
    const HELLO: [u8; 16] = [
        0, 1, 0, 0, 6, 0, 0, 0, b'h', b'e', b'l', b'l', b'o', 0, 0, 0,
    ];

    /// The engine side on one loopback session and a plain ROS 2 node `talker` on a
    /// second one connected to it, in ROS domain `domain`.
    fn pair(domain: u32) -> (ZenohEngineSide, ZenohSide) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let listen = format!("tcp/127.0.0.1:{port}");
        let a = zenoh::open(peer_config(&[&listen], &[]).unwrap())
            .wait()
            .unwrap();
        let b = zenoh::open(peer_config(&["tcp/127.0.0.1:0"], &[&listen]).unwrap())
            .wait()
            .unwrap();
        let bridge = ZenohSide::new(a, domain, "/", "nerve_bridge_1").unwrap();
        let other = ZenohSide::new(b, domain, "/", "talker").unwrap();
        (ZenohEngineSide::new(bridge), other)
    }

    fn wait_until<T>(mut f: impl FnMut() -> Option<T>) -> Option<T> {
        let end = Instant::now() + WAIT;
        while Instant::now() < end {
            if let Some(v) = f() {
                return Some(v);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// `std_msgs/msg/String` as a Nerve carrier of it names it (with its hash).
    fn string_route() -> RosType {
        let schema =
            nerve_msgs::ros2::ros2_schema("std_msgs/msg/String", STRING_HASH, "string data\n");
        let route = Catalog::new(Vec::new(), true)
            .for_nerve(&schema)
            .unwrap()
            .unwrap();
        RosType::of_topic(&route)
    }

    fn reliable(depth: usize) -> RosQos {
        RosQos {
            reliable: true,
            transient_local: false,
            depth,
        }
    }

    /// A writer's samples reach another session's subscription on the RIHS01 key, and a
    /// Humble subscription's through the second publisher it opens for it.
    #[test]
    fn a_writer_reaches_subscriptions_and_humble_ones() {
        let (side, other) = pair(81);
        let route = string_route();
        let mut w = side.writer("/chatter", &route, reliable(10)).unwrap();
        assert_eq!(w.hash, STRING_HASH);
        let sub = other
            .subscriber(
                "/chatter",
                "std_msgs/msg/String",
                STRING_HASH,
                Qos::keep_last(10),
            )
            .unwrap();
        let humble_sub = other
            .subscriber(
                "/chatter",
                "std_msgs/msg/String",
                TYPE_HASH_NOT_SUPPORTED,
                Qos::keep_last(10),
            )
            .unwrap();
        let subs = wait_until(|| {
            let g = side.graph(&Peers::default());
            (g.subscriptions.len() == 2).then_some(g.subscriptions)
        })
        .expect("both subscriptions in the graph");
        assert!(subs.iter().all(|s| w.serves(s)));
        let mut other_version = subs[0].clone();
        other_version.type_hash = Some("RIHS01_00".into());
        assert!(!w.serves(&other_version));
        let on_topic: Vec<&Endpoint> = subs.iter().collect();
        w.subscriptions(&on_topic).unwrap();
        assert!(w.humble.is_some());
        wait_until(|| {
            (w.publisher.has_subscribers()
                && w.humble.as_ref().is_some_and(|h| h.has_subscribers()))
            .then_some(())
        })
        .expect("matching");
        w.write(HELLO.to_vec()).unwrap();
        let r = sub.recv_timeout(WAIT).expect("the sample");
        assert_eq!(r.cdr, HELLO);
        assert_eq!(r.attachment.unwrap().gid, w.publisher.gid());
        assert_eq!(humble_sub.recv_timeout(WAIT).expect("Humble's").cdr, HELLO);
        w.subscriptions(&on_topic[..0]).unwrap();
        assert!(w.humble.is_none());
    }

    /// A reader hears another session's publisher: its ready set reports its token, the
    /// sample carries the publisher's time stamp and is not a bridge's.
    #[test]
    fn a_reader_hears_a_publisher_and_wakes_its_set() {
        let (side, other) = pair(82);
        let route = string_route();
        let mut ready = side.ready_set().unwrap();
        let mut r = side
            .reader(&mut ready, 7, "/chatter", &route, reliable(10), false)
            .unwrap();
        let mut tokens = vec![99];
        ready.wait(Duration::from_millis(10), &mut tokens);
        assert!(tokens.is_empty(), "nothing yet");
        let publ = other
            .publisher(
                "/chatter",
                "std_msgs/msg/String",
                STRING_HASH,
                Qos::keep_last(10),
            )
            .unwrap();
        wait_until(|| publ.has_subscribers().then_some(())).expect("matching");
        let sent = publ.publish(&HELLO).unwrap();
        ready.wait(WAIT, &mut tokens);
        assert_eq!(tokens, [7]);
        let peers = Peers::default();
        let got = r.take(&peers).unwrap().expect("the sample");
        assert_eq!(
            got,
            Incoming {
                cdr: HELLO.to_vec(),
                stamp_ns: Some(sent.source_timestamp_ns),
                from_bridge: false,
            }
        );
        assert_eq!(r.take(&peers), Ok(None));
        assert_eq!(r.lost(), 0);

        // a sample without its attachment is still data, without a time stamp
        let raw = other
            .session()
            .declare_publisher(format!(
                "82/chatter/std_msgs::msg::dds_::String_/{TYPE_HASH_NOT_SUPPORTED}"
            ))
            .wait()
            .unwrap();
        wait_until(|| raw.matching_status().wait().ok().filter(|s| s.matching()))
            .expect("matching");
        raw.put(HELLO.to_vec()).wait().unwrap();
        ready.wait(WAIT, &mut tokens);
        assert_eq!(tokens, [7]);
        let got = r.take(&peers).unwrap().expect("the sample");
        assert_eq!((got.stamp_ns, got.from_bridge), (None, false));

        // once the publisher's session is listed as a bridge's, its samples are marked
        let mut bridges = Peers::default();
        bridges
            .participants
            .insert(format!("z{}", other.session().zid()));
        publ.publish(&HELLO).unwrap();
        ready.wait(WAIT, &mut tokens);
        assert_eq!(tokens, [7]);
        assert!(r.take(&bridges).unwrap().expect("the sample").from_bridge);
    }

    /// A reader's queue holds its QoS depth: the oldest samples go and are counted once.
    #[test]
    fn a_full_reader_counts_what_it_drops() {
        let (side, other) = pair(83);
        let route = string_route();
        let mut ready = side.ready_set().unwrap();
        let mut r = side
            .reader(&mut ready, 0, "/chatter", &route, reliable(2), false)
            .unwrap();
        let publ = other
            .publisher(
                "/chatter",
                "std_msgs/msg/String",
                STRING_HASH,
                Qos::keep_last(10),
            )
            .unwrap();
        wait_until(|| publ.has_subscribers().then_some(())).expect("matching");
        let sent: Vec<i64> = (0..5)
            .map(|_| publ.publish(&HELLO).unwrap().source_timestamp_ns)
            .collect();
        let mut lost = 0;
        wait_until(|| {
            lost += r.lost();
            (lost == 3).then_some(())
        })
        .expect("three dropped");
        let peers = Peers::default();
        for want in &sent[3..] {
            assert_eq!(r.take(&peers).unwrap().unwrap().stamp_ns, Some(*want));
        }
        assert_eq!(r.take(&peers), Ok(None));
        assert_eq!(r.lost(), 0);
    }

    /// A server answers another session's client; a client gets another session's
    /// server's reply under its call's sequence number.
    #[test]
    fn services_both_ways() {
        let (side, other) = pair(84);
        let mut catalog = Catalog::new(Vec::new(), true);
        let route = service_route(&mut catalog, "std_srvs/srv/Trigger").unwrap();
        let route = RosType::of_service(&route, &[]);
        let peers = Peers::default();

        // the engine's server, another session's client
        let mut server = side.server("/trigger", &route).unwrap();
        let client = other
            .client(
                "/trigger",
                "std_srvs/srv/Trigger",
                TYPE_HASH_NOT_SUPPORTED,
                Qos::default(),
            )
            .unwrap();
        wait_until(|| {
            let g = other.graph();
            (g.on_topic(EntityKind::ServiceServer, "/trigger").count() == 1).then_some(())
        })
        .expect("the server in the client's graph");
        let (tx, rx) = std::sync::mpsc::channel();
        let tx = Mutex::new(tx);
        let sent = client
            .call(&[0, 1, 0, 0], WAIT, move |r| {
                let _ = lock(&tx).send(r);
            })
            .unwrap();
        let (req, cdr) = wait_until(|| server.take(&peers)).expect("the request");
        assert_eq!(cdr, [0, 1, 0, 0]);
        server.reply(req, HELLO.to_vec()).unwrap();
        let reply = rx.recv_timeout(WAIT).unwrap().unwrap();
        assert_eq!(reply.cdr, HELLO);
        assert_eq!(
            reply.attachment.unwrap().sequence_number,
            sent.sequence_number
        );

        // a bridge's client is not answered
        let mut bridges = Peers::default();
        bridges
            .participants
            .insert(format!("z{}", other.session().zid()));
        client.call(&[0, 1, 0, 0], WAIT, |_| {}).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(server.take(&bridges).is_none());
        // (it was there and was dropped: the next request comes next)
        client.call(&[0, 1, 0, 0, 9], WAIT, |_| {}).unwrap();
        let (_, cdr) = wait_until(|| server.take(&peers)).expect("the next request");
        assert_eq!(cdr, [0, 1, 0, 0, 9]);

        // another session's server, the engine's client
        let _service = other
            .service(
                "/other_trigger",
                "std_srvs/srv/Trigger",
                STRING_HASH,
                Qos::default(),
                false,
                |req| {
                    let _ = req.reply(&HELLO);
                },
            )
            .unwrap();
        let server_end = wait_until(|| {
            side.graph(&peers)
                .servers
                .into_iter()
                .find(|s| s.name == "/other_trigger")
        })
        .expect("the server in the graph");
        assert_eq!(server_end.type_hash.as_deref(), Some(STRING_HASH));
        let mut c = side.client("/other_trigger", &route, &server_end).unwrap();
        let call = c.call(vec![0, 1, 0, 0]).unwrap();
        let (got, reply) = wait_until(|| c.take()).expect("the reply");
        assert_eq!(got, call);
        assert_eq!(reply.unwrap(), HELLO);
    }

    /// The graph lists another session's node and publisher with type, hash and QoS, and
    /// leaves out this side's own node and publisher.
    #[test]
    fn the_graph_leaves_out_this_side() {
        let (side, other) = pair(85);
        let _mine = side.writer("/out", &string_route(), reliable(5)).unwrap();
        let _theirs = other
            .publisher(
                "/chatter",
                "std_msgs/msg/String",
                STRING_HASH,
                Qos::keep_last(7),
            )
            .unwrap();
        let peers = Peers::default();
        let g = wait_until(|| {
            let g = side.graph(&peers);
            (!g.publishers.is_empty()).then_some(g)
        })
        .expect("the publisher in the graph");
        assert_eq!(
            g.publishers,
            [Endpoint {
                name: "/chatter".into(),
                ros_type: "std_msgs/msg/String".into(),
                qos: reliable(7),
                keyed: false,
                type_hash: Some(STRING_HASH.into()),
            }]
        );
        assert_eq!(g.nodes, BTreeSet::from(["/talker".to_owned()]));
        assert!(
            side.side().graph().publishers().count() == 2,
            "own one heard"
        );

        // the fingerprint follows the graph
        let print = || {
            let mut h = DefaultHasher::new();
            side.fingerprint(&mut h);
            std::hash::Hasher::finish(&h)
        };
        let before = print();
        drop(_theirs);
        wait_until(|| side.graph(&peers).publishers.is_empty().then_some(()))
            .expect("the publisher gone");
        assert_ne!(print(), before);

        // a session listed as a bridge's is left out
        let _theirs = other
            .publisher(
                "/chatter",
                "std_msgs/msg/String",
                STRING_HASH,
                Qos::keep_last(7),
            )
            .unwrap();
        wait_until(|| (!side.graph(&peers).publishers.is_empty()).then_some(()))
            .expect("the publisher back");
        let mut bridges = Peers::default();
        bridges
            .participants
            .insert(format!("z{}", other.session().zid()));
        let g = side.graph(&bridges);
        assert!(g.publishers.is_empty() && g.nodes.is_empty());

        // the lowest rmw_zenoh bridge forwards; DDS bridges are not counted
        assert!(side.primary(&peers));
        let mut dds = Peers::default();
        dds.participants.insert("000000".into());
        assert!(side.primary(&dds));
        dds.participants.insert("z".into());
        assert!(!side.primary(&dds));
        assert_eq!(side.bridge_id(), format!("z{}", side.zid()));
    }
}
