//! The rmw_zenoh side of a bridge: one ROS 2 node on a Zenoh session, with publishers and
//! subscriptions that carry raw CDR and a graph read from liveliness tokens.

use super::attachment::{Attachment, AttachmentError, Gid};
use super::names::FormatError;
use super::qos::{Durability, History, Qos, Reliability};
use super::token::{graph_key_expr, EntityKind, EntityToken};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use zenoh::liveliness::LivelinessToken;
use zenoh::qos::CongestionControl;
use zenoh::sample::{Locality, SampleKind};
use zenoh::Wait;
use zenoh_ext::{
    AdvancedPublisher, AdvancedPublisherBuilderExt, AdvancedSubscriber,
    AdvancedSubscriberBuilderExt, CacheConfig, HistoryConfig, MissDetectionConfig, RecoveryConfig,
};

/// The most entities a graph holds (tokens beyond are counted, not kept).
pub const MAX_GRAPH_ENTITIES: usize = 65_536;

/// The most samples a subscription queues (keep-all ones included).
pub const MAX_QUEUE: usize = 4096;

/// How often a reliable transient local publisher announces its last sequence number
/// when it changed, so subscriptions detect a missed last sample and fetch it from the
/// cache (rmw_zenoh's `SAMPLE_MISS_DETECTION_HEARTBEAT_PERIOD`, 500 ms).
const HEARTBEAT_PERIOD: Duration = Duration::from_millis(500);

/// How long a transient local subscription waits for a publisher's history (rmw_zenoh
/// waits without limit; a day stands for that here).
const HISTORY_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Node and entity ids, unique in this process (so in every session it opens).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

fn next_id() -> u64 {
    // SYNC: a counter only.
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// What can go wrong on the rmw_zenoh side.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ZenohError {
    /// A name, type, hash or QoS is not valid.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A Zenoh configuration setting was refused.
    #[error("Zenoh configuration {key}: {reason}")]
    Config {
        /// The setting.
        key: &'static str,
        /// Zenoh's reason.
        reason: String,
    },
    /// Declaring a Zenoh entity failed.
    #[error("Zenoh: declaring the {what} {key:?}: {reason}")]
    Declare {
        /// What (publisher, subscriber, queryable, liveliness token, liveliness subscriber).
        what: &'static str,
        /// Its key expression.
        key: String,
        /// Zenoh's reason.
        reason: String,
    },
    /// Publishing, querying or replying failed.
    #[error("Zenoh: publishing on {key:?}: {reason}")]
    Publish {
        /// The data key expression.
        key: String,
        /// Zenoh's reason.
        reason: String,
    },
}

/// A Zenoh configuration for a peer that finds its peers only through the given
/// endpoints (`tcp/127.0.0.1:7447`): multicast scouting off, as rmw_zenoh's default
/// session configuration has it. `connect` is typically rmw_zenoh's router
/// (`tcp/localhost:7447`).
pub fn peer_config(listen: &[&str], connect: &[&str]) -> Result<zenoh::Config, ZenohError> {
    let json = |v: &[&str]| {
        let items: Vec<String> = v.iter().map(|e| format!("{e:?}")).collect();
        format!("[{}]", items.join(","))
    };
    let mut c = zenoh::Config::default();
    for (key, value) in [
        ("mode", "\"peer\"".to_owned()),
        ("scouting/multicast/enabled", "false".to_owned()),
        ("listen/endpoints", json(listen)),
        ("connect/endpoints", json(connect)),
        // transient local publishers' caches order their samples by timestamp
        ("timestamping/enabled", "true".to_owned()),
    ] {
        c.insert_json5(key, &value)
            .map_err(|e| ZenohError::Config {
                key,
                reason: e.to_string(),
            })?;
    }
    Ok(c)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// One entity of the ROS 2 graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphEntity {
    /// Its liveliness token's key expression.
    pub key_expr: String,
    /// Its GID (the hash of `key_expr`).
    pub gid: Gid,
    /// The token read.
    pub token: EntityToken,
}

/// The ROS 2 graph of a domain as its liveliness tokens show it now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    /// Every entity, in key expression order.
    pub entities: Vec<GraphEntity>,
    /// Tokens under `@ros2_lv/<domain>` that did not read (ever seen).
    pub malformed_tokens: u64,
    /// What was wrong with the last of them.
    pub last_malformed: Option<FormatError>,
    /// Tokens not kept because the graph held [`MAX_GRAPH_ENTITIES`] (ever seen).
    pub overflowed: u64,
}

impl Graph {
    /// The entities of one kind.
    pub fn of_kind(&self, kind: EntityKind) -> impl Iterator<Item = &GraphEntity> {
        self.entities.iter().filter(move |e| e.token.kind == kind)
    }

    /// The nodes.
    pub fn nodes(&self) -> impl Iterator<Item = &GraphEntity> {
        self.of_kind(EntityKind::Node)
    }

    /// The publishers.
    pub fn publishers(&self) -> impl Iterator<Item = &GraphEntity> {
        self.of_kind(EntityKind::Publisher)
    }

    /// The subscriptions.
    pub fn subscriptions(&self) -> impl Iterator<Item = &GraphEntity> {
        self.of_kind(EntityKind::Subscription)
    }

    /// The service servers.
    pub fn service_servers(&self) -> impl Iterator<Item = &GraphEntity> {
        self.of_kind(EntityKind::ServiceServer)
    }

    /// The service clients.
    pub fn service_clients(&self) -> impl Iterator<Item = &GraphEntity> {
        self.of_kind(EntityKind::ServiceClient)
    }

    /// The entities of one kind on the topic or service `name` (fully qualified).
    pub fn on_topic<'a>(
        &'a self,
        kind: EntityKind,
        name: &'a str,
    ) -> impl Iterator<Item = &'a GraphEntity> {
        self.of_kind(kind)
            .filter(move |e| e.token.topic.as_ref().is_some_and(|t| t.name == name))
    }
}

#[derive(Default)]
struct GraphState {
    entities: BTreeMap<String, GraphEntity>,
    malformed: u64,
    last_malformed: Option<FormatError>,
    overflowed: u64,
}

impl GraphState {
    fn put(&mut self, key: &str) {
        if self.entities.contains_key(key) {
            return;
        }
        match EntityToken::parse(key) {
            Ok(token) if self.entities.len() < MAX_GRAPH_ENTITIES => {
                let entity = GraphEntity {
                    key_expr: key.to_owned(),
                    gid: Gid::from_token_key(key),
                    token,
                };
                self.entities.insert(key.to_owned(), entity);
            }
            Ok(_) => self.overflowed += 1,
            Err(e) => {
                self.malformed += 1;
                self.last_malformed = Some(e);
            }
        }
    }
}

/// One ROS 2 node of rmw_zenoh on a Zenoh session: it declares its node token, follows
/// the domain's graph and makes publishers and subscriptions that carry raw CDR.
pub struct ZenohSide {
    session: zenoh::Session,
    node: EntityToken,
    graph: Arc<Mutex<GraphState>>,
    _node_token: LivelinessToken,
    _graph_subscriber: zenoh::pubsub::Subscriber<()>,
}

impl ZenohSide {
    /// A node `node_name` in `namespace` (`/` or empty for the root) of ROS domain
    /// `domain` on `session` (a peer session; see [`peer_config`]). Its graph is filled
    /// from the tokens already there and follows them from then on.
    pub fn new(
        session: zenoh::Session,
        domain: u32,
        namespace: &str,
        node_name: &str,
    ) -> Result<ZenohSide, ZenohError> {
        let node = EntityToken::node(
            domain,
            &session.zid().to_string(),
            next_id(),
            namespace,
            node_name,
        )?;
        let graph: Arc<Mutex<GraphState>> = Arc::default();
        let g = graph.clone();
        let graph_key = graph_key_expr(domain);
        let graph_subscriber = session
            .liveliness()
            .declare_subscriber(graph_key.clone())
            .history(true)
            .callback(move |sample| {
                let key = sample.key_expr().as_str();
                let mut g = lock(&g);
                match sample.kind() {
                    SampleKind::Put => g.put(key),
                    SampleKind::Delete => {
                        g.entities.remove(key);
                    }
                }
            })
            .wait()
            .map_err(|e| ZenohError::Declare {
                what: "liveliness subscriber",
                key: graph_key,
                reason: e.to_string(),
            })?;
        let node_token = declare_token(&session, &node)?;
        Ok(ZenohSide {
            session,
            node,
            graph,
            _node_token: node_token,
            _graph_subscriber: graph_subscriber,
        })
    }

    /// Announces another node, `name` in `namespace`, on this session (as a process with
    /// several nodes does); it is withdrawn when the returned token is dropped.
    pub fn announce_node(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<LivelinessToken, ZenohError> {
        let node = EntityToken::node(
            self.node.domain,
            &self.session.zid().to_string(),
            next_id(),
            namespace,
            name,
        )?;
        declare_token(&self.session, &node)
    }

    /// The Zenoh session.
    pub fn session(&self) -> &zenoh::Session {
        &self.session
    }

    /// The node's token (domain, session id, node id, names).
    pub fn node(&self) -> &EntityToken {
        &self.node
    }

    /// The graph now: every node, publisher, subscription, service and client of the
    /// domain whose token this session has heard (this node's own included).
    pub fn graph(&self) -> Graph {
        let g = lock(&self.graph);
        Graph {
            entities: g.entities.values().cloned().collect(),
            malformed_tokens: g.malformed,
            last_malformed: g.last_malformed.clone(),
            overflowed: g.overflowed,
        }
    }

    /// The entity of the graph with GID `gid`, if its token has been heard (a scan of
    /// the graph, without copying it).
    pub fn entity(&self, gid: Gid) -> Option<GraphEntity> {
        lock(&self.graph)
            .entities
            .values()
            .find(|e| e.gid == gid)
            .cloned()
    }

    /// A publisher on ROS 2 topic `topic` of type `ros_type` (`std_msgs/msg/String`) with
    /// type hash `type_hash` (`RIHS01_...`, or `TypeHashNotSupported` to meet Humble),
    /// announced with its liveliness token. The QoS is adapted as rmw_zenoh does
    /// ([`Qos::adapted`]); reliable keep-all publishers block when the network is
    /// congested, the others drop. A transient local publisher is, as rmw_zenoh's, an
    /// advanced publisher that keeps its last `depth` samples for late subscriptions
    /// (detected through its liveliness token under `@adv/pub`), with sample miss
    /// detection (sporadic heartbeats) when reliable.
    pub fn publisher(
        &self,
        topic: &str,
        ros_type: &str,
        type_hash: &str,
        qos: Qos,
    ) -> Result<RosPublisher, ZenohError> {
        let qos = qos.adapted();
        let token = EntityToken::endpoint(
            &self.node,
            EntityKind::Publisher,
            next_id(),
            topic,
            ros_type,
            type_hash,
            qos,
        )?;
        let key = data_key_expr(&token);
        let reliable = qos.reliability == Reliability::Reliable;
        let congestion = if reliable && qos.history == History::KeepAll {
            CongestionControl::Block
        } else {
            CongestionControl::Drop
        };
        let builder = self
            .session
            .declare_publisher(key.clone())
            .congestion_control(congestion)
            .reliability(if reliable {
                zenoh::qos::Reliability::Reliable
            } else {
                zenoh::qos::Reliability::BestEffort
            });
        let declared = if qos.durability == Durability::TransientLocal {
            let advanced = builder
                .cache(CacheConfig::default().max_samples(depth_of(&qos)))
                .publisher_detection();
            let advanced = if reliable {
                advanced.sample_miss_detection(
                    MissDetectionConfig::default().sporadic_heartbeat(HEARTBEAT_PERIOD),
                )
            } else {
                advanced
            };
            advanced.wait().map(Sender::Advanced)
        } else {
            builder.wait().map(Sender::Plain)
        };
        let publisher = declared.map_err(|e| ZenohError::Declare {
            what: "publisher",
            key: key.clone(),
            reason: e.to_string(),
        })?;
        let live = declare_token(&self.session, &token)?;
        let token_key = token.key_expr();
        Ok(RosPublisher {
            publisher,
            gid: Gid::from_token_key(&token_key),
            key,
            token_key,
            token,
            next_sequence: Mutex::new(1),
            _live: live,
        })
    }

    /// A subscription to ROS 2 topic `topic` of type `ros_type` with type hash
    /// `type_hash`, announced with its liveliness token. Samples queue up to the QoS
    /// depth (at most [`MAX_QUEUE`]; the oldest go first). Samples published through
    /// this same session (the bridge's own publishers) are not heard.
    pub fn subscriber(
        &self,
        topic: &str,
        ros_type: &str,
        type_hash: &str,
        qos: Qos,
    ) -> Result<RosSubscriber, ZenohError> {
        let qos = qos.adapted();
        let capacity = match qos.history {
            History::KeepAll => MAX_QUEUE,
            _ => usize::try_from(qos.depth)
                .unwrap_or(MAX_QUEUE)
                .clamp(1, MAX_QUEUE),
        };
        let inbox = Arc::new(Inbox {
            state: Mutex::new(InboxState {
                samples: VecDeque::with_capacity(capacity.min(64)),
                capacity,
                stats: SubscriberStats::default(),
            }),
            ready: Condvar::new(),
        });
        let i = inbox.clone();
        let inner =
            self.subscription(topic, ros_type, type_hash, qos, false, move |r| i.push(r))?;
        Ok(RosSubscriber { inner, inbox })
    }

    /// A subscription like [`ZenohSide::subscriber`] that hands every sample to
    /// `on_sample` (called on Zenoh's threads: it must not block) instead of queueing it.
    /// With `any_hash` the data key's hash chunk is `*`: publishers of the type with any
    /// type hash are heard, Humble's `TypeHashNotSupported` included (the token still
    /// announces `type_hash`).
    pub fn subscription(
        &self,
        topic: &str,
        ros_type: &str,
        type_hash: &str,
        qos: Qos,
        any_hash: bool,
        on_sample: impl Fn(Received) + Send + Sync + 'static,
    ) -> Result<RosSubscription, ZenohError> {
        let qos = qos.adapted();
        let token = EntityToken::endpoint(
            &self.node,
            EntityKind::Subscription,
            next_id(),
            topic,
            ros_type,
            type_hash,
            qos,
        )?;
        let key = data_key_expr(&token);
        let key = match key.rsplit_once('/') {
            Some((head, _)) if any_hash => format!("{head}/*"),
            _ => key,
        };
        let builder = self
            .session
            .declare_subscriber(key.clone())
            .allowed_origin(Locality::Remote)
            .callback(move |sample: zenoh::sample::Sample| {
                if sample.kind() != SampleKind::Put {
                    return;
                }
                let attachment = match sample.attachment() {
                    None => Err(AttachmentError::Missing),
                    Some(a) => Attachment::decode(&a.to_bytes()),
                };
                on_sample(Received {
                    cdr: sample.payload().to_bytes().into_owned(),
                    attachment,
                });
            });
        let declared = if qos.durability == Durability::TransientLocal {
            // as rmw_zenoh's: the history of the publishers there and of late ones
            let advanced = builder
                .advanced()
                .allowed_origin(Locality::Remote)
                .subscriber_detection()
                .query_timeout(HISTORY_TIMEOUT)
                .history(
                    HistoryConfig::default()
                        .detect_late_publishers()
                        .max_samples(depth_of(&qos)),
                );
            let advanced = if qos.reliability == Reliability::Reliable {
                advanced.recovery(RecoveryConfig::default().heartbeat())
            } else {
                advanced
            };
            advanced.wait().map(Receiving::Advanced)
        } else {
            builder.wait().map(Receiving::Plain)
        };
        let subscriber = declared.map_err(|e| ZenohError::Declare {
            what: "subscriber",
            key: key.clone(),
            reason: e.to_string(),
        })?;
        let live = declare_token(&self.session, &token)?;
        Ok(RosSubscription {
            gid: token.gid(),
            token_key: token.key_expr(),
            key,
            token,
            _subscriber: subscriber,
            _live: live,
        })
    }
    /// A service server of ROS 2 service `service` of type `ros_type`
    /// (`example_interfaces/srv/AddTwoInts`) announced with hash `type_hash` (the
    /// service type's `RIHS01_...`): a complete Zenoh queryable with its `SS` token, as
    /// rmw_zenoh declares one. With `any_hash` the queryable's hash chunk is `*`, so
    /// clients that announce another hash (Humble's `TypeHashNotSupported`) reach it too.
    /// Every request goes to `on_request` (called on Zenoh's threads: it must not block);
    /// requests of this same session are not heard.
    pub fn service(
        &self,
        service: &str,
        ros_type: &str,
        type_hash: &str,
        qos: Qos,
        any_hash: bool,
        on_request: impl Fn(RosRequest) + Send + Sync + 'static,
    ) -> Result<RosService, ZenohError> {
        let qos = qos.adapted();
        let token = EntityToken::endpoint(
            &self.node,
            EntityKind::ServiceServer,
            next_id(),
            service,
            ros_type,
            type_hash,
            qos,
        )?;
        let key = data_key_expr(&token);
        let key = match key.rsplit_once('/') {
            Some((head, _)) if any_hash => format!("{head}/*"),
            _ => key,
        };
        let queryable = self
            .session
            .declare_queryable(key.clone())
            .complete(true)
            .allowed_origin(Locality::Remote)
            .callback(move |query| {
                let cdr = query
                    .payload()
                    .map(|p| p.to_bytes().into_owned())
                    .unwrap_or_default();
                let attachment = match query.attachment() {
                    None => Err(AttachmentError::Missing),
                    Some(a) => Attachment::decode(&a.to_bytes()),
                };
                on_request(RosRequest {
                    cdr,
                    attachment,
                    query,
                });
            })
            .wait()
            .map_err(|e| ZenohError::Declare {
                what: "queryable",
                key: key.clone(),
                reason: e.to_string(),
            })?;
        let live = declare_token(&self.session, &token)?;
        Ok(RosService {
            gid: token.gid(),
            token_key: token.key_expr(),
            key,
            token,
            _queryable: queryable,
            _live: live,
        })
    }

    /// A service client of ROS 2 service `service` of type `ros_type` with type hash
    /// `type_hash` (the server's, so its requests reach that server's queryable),
    /// announced with its `SC` token.
    pub fn client(
        &self,
        service: &str,
        ros_type: &str,
        type_hash: &str,
        qos: Qos,
    ) -> Result<RosClient, ZenohError> {
        let qos = qos.adapted();
        let token = EntityToken::endpoint(
            &self.node,
            EntityKind::ServiceClient,
            next_id(),
            service,
            ros_type,
            type_hash,
            qos,
        )?;
        let live = declare_token(&self.session, &token)?;
        Ok(RosClient {
            session: self.session.clone(),
            key: data_key_expr(&token),
            gid: token.gid(),
            token_key: token.key_expr(),
            token,
            next_sequence: Mutex::new(1),
            _live: live,
        })
    }
}

/// The history depth of a transient local publisher or subscription (keep-all ones keep
/// [`MAX_QUEUE`]).
fn depth_of(qos: &Qos) -> usize {
    match qos.history {
        History::KeepAll => MAX_QUEUE,
        _ => usize::try_from(qos.depth)
            .unwrap_or(MAX_QUEUE)
            .clamp(1, MAX_QUEUE),
    }
}

/// A publisher as declared: plain, or advanced with a cache (transient local).
enum Sender {
    Plain(zenoh::pubsub::Publisher<'static>),
    Advanced(AdvancedPublisher<'static>),
}

/// A subscriber as declared: plain, or advanced with history (transient local); held
/// only to be undeclared when dropped.
#[allow(dead_code)]
enum Receiving {
    Plain(zenoh::pubsub::Subscriber<()>),
    Advanced(AdvancedSubscriber<()>),
}

fn data_key_expr(token: &EntityToken) -> String {
    token.data_key().map(|k| k.key_expr()).unwrap_or_default()
}

fn declare_token(
    session: &zenoh::Session,
    token: &EntityToken,
) -> Result<LivelinessToken, ZenohError> {
    let key = token.key_expr();
    session
        .liveliness()
        .declare_token(key.clone())
        .wait()
        .map_err(|e| ZenohError::Declare {
            what: "liveliness token",
            key,
            reason: e.to_string(),
        })
}

/// A ROS 2 publisher of raw CDR on rmw_zenoh (undeclared, with its token, when dropped).
pub struct RosPublisher {
    publisher: Sender,
    key: String,
    token_key: String,
    token: EntityToken,
    gid: Gid,
    next_sequence: Mutex<i64>,
    _live: LivelinessToken,
}

impl RosPublisher {
    /// Publishes one serialized message (CDR with its 4-byte encapsulation header, as
    /// ROS 2 serializes it) with the attachment rmw_zenoh reads: the next sequence
    /// number (from 1), the time now and this publisher's GID. Returns the attachment.
    pub fn publish(&self, cdr: &[u8]) -> Result<Attachment, ZenohError> {
        let mut seq = lock(&self.next_sequence);
        let attachment = Attachment {
            sequence_number: *seq,
            source_timestamp_ns: now_ns(),
            gid: self.gid,
        };
        // like rmw_zenoh, a failed put still uses its sequence number
        *seq = seq.wrapping_add(1);
        let attached = attachment.encode().to_vec();
        match &self.publisher {
            Sender::Plain(p) => p.put(cdr.to_vec()).attachment(attached).wait(),
            Sender::Advanced(p) => p.put(cdr.to_vec()).attachment(attached).wait(),
        }
        .map_err(|e| ZenohError::Publish {
            key: self.key.clone(),
            reason: e.to_string(),
        })?;
        Ok(attachment)
    }

    /// Whether a Zenoh subscriber matches its data key expression now.
    pub fn has_subscribers(&self) -> bool {
        match &self.publisher {
            Sender::Plain(p) => p.matching_status().wait(),
            Sender::Advanced(p) => p.matching_status().wait(),
        }
        .is_ok_and(|s| s.matching())
    }

    /// Its GID (the hash of its token's key expression, as rmw_zenoh computes it).
    pub fn gid(&self) -> Gid {
        self.gid
    }

    /// Its data key expression.
    pub fn key_expr(&self) -> &str {
        &self.key
    }

    /// Its liveliness token's key expression.
    pub fn token_key_expr(&self) -> &str {
        &self.token_key
    }

    /// Its token.
    pub fn token(&self) -> &EntityToken {
        &self.token
    }
}

/// A request a [`RosService`] received; answered by [`RosRequest::reply`] (a request
/// dropped unanswered ends the client's query without a reply).
pub struct RosRequest {
    /// The serialized request (CDR with its encapsulation header).
    pub cdr: Vec<u8>,
    /// The client's attachment (sequence number, source timestamp, client GID), or what
    /// was wrong with it.
    pub attachment: Result<Attachment, AttachmentError>,
    query: zenoh::query::Query,
}

impl RosRequest {
    /// Replies with the serialized response `cdr`, on the query's key expression, with
    /// the attachment rmw_zenoh's servers write: the request's sequence number and client
    /// GID, the time now. Returns the attachment.
    pub fn reply(&self, cdr: &[u8]) -> Result<Attachment, ZenohError> {
        let request = self.attachment.map_err(|e| ZenohError::Publish {
            key: self.query.key_expr().to_string(),
            reason: format!("the request's attachment: {e}"),
        })?;
        let attachment = Attachment {
            source_timestamp_ns: now_ns(),
            ..request
        };
        self.query
            .reply(self.query.key_expr().clone(), cdr.to_vec())
            .attachment(attachment.encode().to_vec())
            .wait()
            .map_err(|e| ZenohError::Publish {
                key: self.query.key_expr().to_string(),
                reason: e.to_string(),
            })?;
        Ok(attachment)
    }

    /// The key expression the client queried.
    pub fn key_expr(&self) -> &str {
        self.query.key_expr().as_str()
    }
}

/// A ROS 2 service server on rmw_zenoh (a queryable; undeclared, with its token, when
/// dropped); see [`ZenohSide::service`].
pub struct RosService {
    key: String,
    token_key: String,
    token: EntityToken,
    gid: Gid,
    _queryable: zenoh::query::Queryable<()>,
    _live: LivelinessToken,
}

impl RosService {
    /// Its queryable's key expression (its last chunk `*` when it hears any type hash).
    pub fn key_expr(&self) -> &str {
        &self.key
    }

    /// Its liveliness token's key expression.
    pub fn token_key_expr(&self) -> &str {
        &self.token_key
    }

    /// Its token.
    pub fn token(&self) -> &EntityToken {
        &self.token
    }

    /// Its GID.
    pub fn gid(&self) -> Gid {
        self.gid
    }
}

/// A ROS 2 service client on rmw_zenoh (undeclared, with its token, when dropped); see
/// [`ZenohSide::client`].
pub struct RosClient {
    session: zenoh::Session,
    key: String,
    token_key: String,
    token: EntityToken,
    gid: Gid,
    next_sequence: Mutex<i64>,
    _live: LivelinessToken,
}

impl RosClient {
    /// Sends one serialized request as rmw_zenoh's clients do: a query of every complete
    /// queryable on the service's key with the request as payload and the attachment (the
    /// next sequence number from 1, the time now, this client's GID), giving up after
    /// `timeout`. Each reply goes to `on_reply` (on Zenoh's threads: it must not block):
    /// the response and its attachment, or the error Zenoh answered. Returns the
    /// request's attachment (its sequence number names the call).
    pub fn call(
        &self,
        cdr: &[u8],
        timeout: Duration,
        on_reply: impl Fn(Result<Received, String>) + Send + Sync + 'static,
    ) -> Result<Attachment, ZenohError> {
        let mut seq = lock(&self.next_sequence);
        let attachment = Attachment {
            sequence_number: *seq,
            source_timestamp_ns: now_ns(),
            gid: self.gid,
        };
        *seq = seq.wrapping_add(1);
        drop(seq);
        self.session
            .get(self.key.clone())
            .payload(cdr.to_vec())
            .attachment(attachment.encode().to_vec())
            .target(zenoh::query::QueryTarget::AllComplete)
            .consolidation(zenoh::query::ConsolidationMode::None)
            .allowed_destination(Locality::Remote)
            .timeout(timeout)
            .callback(move |reply| {
                on_reply(match reply.result() {
                    Ok(sample) => Ok(Received {
                        cdr: sample.payload().to_bytes().into_owned(),
                        attachment: match sample.attachment() {
                            None => Err(AttachmentError::Missing),
                            Some(a) => Attachment::decode(&a.to_bytes()),
                        },
                    }),
                    Err(e) => Err(format!(
                        "the server answered an error: {}",
                        String::from_utf8_lossy(&e.payload().to_bytes())
                    )),
                })
            })
            .wait()
            .map_err(|e| ZenohError::Publish {
                key: self.key.clone(),
                reason: e.to_string(),
            })?;
        Ok(attachment)
    }

    /// Its data key expression (the server's queryable's).
    pub fn key_expr(&self) -> &str {
        &self.key
    }

    /// Its liveliness token's key expression.
    pub fn token_key_expr(&self) -> &str {
        &self.token_key
    }

    /// Its token.
    pub fn token(&self) -> &EntityToken {
        &self.token
    }

    /// Its GID.
    pub fn gid(&self) -> Gid {
        self.gid
    }
}

/// One sample as a subscription hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The serialized message (CDR with its encapsulation header).
    pub cdr: Vec<u8>,
    /// Its attachment, or what was wrong with it (such samples are also counted in
    /// [`SubscriberStats::malformed`]).
    pub attachment: Result<Attachment, AttachmentError>,
}

/// Counters of a subscription.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscriberStats {
    /// Samples heard.
    pub received: u64,
    /// Samples whose attachment was missing or malformed.
    pub malformed: u64,
    /// Samples dropped because the queue was full (the oldest go).
    pub dropped: u64,
    /// What was wrong with the last malformed attachment.
    pub last_malformed: Option<AttachmentError>,
}

struct InboxState {
    samples: VecDeque<Received>,
    capacity: usize,
    stats: SubscriberStats,
}

struct Inbox {
    state: Mutex<InboxState>,
    ready: Condvar,
}

impl Inbox {
    fn push(&self, r: Received) {
        let mut s = lock(&self.state);
        s.stats.received += 1;
        if let Err(e) = &r.attachment {
            s.stats.malformed += 1;
            s.stats.last_malformed = Some(*e);
        }
        if s.samples.len() >= s.capacity {
            s.samples.pop_front();
            s.stats.dropped += 1;
        }
        s.samples.push_back(r);
        drop(s);
        self.ready.notify_one();
    }
}

/// A ROS 2 subscription on rmw_zenoh whose samples go to a callback (undeclared, with
/// its token, when dropped); see [`ZenohSide::subscription`].
pub struct RosSubscription {
    key: String,
    token_key: String,
    token: EntityToken,
    gid: Gid,
    _subscriber: Receiving,
    _live: LivelinessToken,
}

impl RosSubscription {
    /// Its data key expression (its last chunk `*` when it hears any type hash).
    pub fn key_expr(&self) -> &str {
        &self.key
    }

    /// Its liveliness token's key expression.
    pub fn token_key_expr(&self) -> &str {
        &self.token_key
    }

    /// Its token.
    pub fn token(&self) -> &EntityToken {
        &self.token
    }

    /// Its GID.
    pub fn gid(&self) -> Gid {
        self.gid
    }
}

/// A ROS 2 subscription to raw CDR on rmw_zenoh (undeclared, with its token, when
/// dropped).
pub struct RosSubscriber {
    inner: RosSubscription,
    inbox: Arc<Inbox>,
}

impl RosSubscriber {
    /// The oldest queued sample, if any.
    pub fn try_recv(&self) -> Option<Received> {
        lock(&self.inbox.state).samples.pop_front()
    }

    /// The oldest queued sample, waiting up to `timeout` for one.
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Received> {
        let deadline = Instant::now() + timeout;
        let mut s = lock(&self.inbox.state);
        loop {
            if let Some(r) = s.samples.pop_front() {
                return Some(r);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            s = self
                .inbox
                .ready
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Its counters.
    pub fn stats(&self) -> SubscriberStats {
        lock(&self.inbox.state).stats.clone()
    }

    /// Its data key expression.
    pub fn key_expr(&self) -> &str {
        self.inner.key_expr()
    }

    /// Its liveliness token's key expression.
    pub fn token_key_expr(&self) -> &str {
        self.inner.token_key_expr()
    }

    /// Its token.
    pub fn token(&self) -> &EntityToken {
        self.inner.token()
    }

    /// Its GID.
    pub fn gid(&self) -> Gid {
        self.inner.gid()
    }
}

#[cfg(test)]
mod tests {
    use super::super::names::TokenPart;
    use super::*;

    const STRING_HASH: &str =
        "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";
    const WAIT: Duration = Duration::from_secs(15);

    /// `std_msgs/msg/String` "hello" in CDR (little-endian encapsulation).
    const HELLO: [u8; 16] = [
        0, 1, 0, 0, 6, 0, 0, 0, b'h', b'e', b'l', b'l', b'o', 0, 0, 0,
    ];

    /// Two peer sessions on loopback only: `a` listens on a free port, `b` connects to it.
    fn pair() -> (zenoh::Session, zenoh::Session) {
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
        (a, b)
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

    #[test]
    fn peer_config_is_loopback_only() {
        let c = peer_config(&["tcp/127.0.0.1:0"], &["tcp/127.0.0.1:7447"]).unwrap();
        let s = format!("{c:?}");
        assert!(s.contains("127.0.0.1:7447"), "{s}");
        assert_eq!(c.get_json("scouting/multicast/enabled").unwrap(), "false");
    }

    /// Two sessions exchange a raw CDR String through a publisher and a subscription,
    /// the attachment intact; each sees the other's tokens in its graph, and a dropped
    /// publisher leaves it.
    #[test]
    fn two_sessions_exchange_a_string_with_its_attachment() {
        let (sa, sb) = pair();
        let a = ZenohSide::new(sa, 71, "/", "nerve_bridge").unwrap();
        let b = ZenohSide::new(sb, 71, "/robot", "listener").unwrap();
        let sub = b
            .subscriber(
                "/chatter",
                "std_msgs/msg/String",
                STRING_HASH,
                Qos::keep_last(10),
            )
            .unwrap();
        let publ = a
            .publisher(
                "chatter",
                "std_msgs/msg/String",
                STRING_HASH,
                Qos::keep_last(7),
            )
            .unwrap();
        assert_eq!(
            publ.key_expr(),
            format!("71/chatter/std_msgs::msg::dds_::String_/{STRING_HASH}")
        );
        assert_eq!(publ.key_expr(), sub.key_expr());
        assert_eq!(publ.gid(), Gid::from_token_key(publ.token_key_expr()));

        // b's graph: a's node and publisher, with type, hash and QoS
        let g = wait_until(|| {
            let g = b.graph();
            let found = g.on_topic(EntityKind::Publisher, "/chatter").count() == 1;
            found.then_some(g)
        })
        .expect("a's publisher in b's graph");
        let p = g.publishers().next().unwrap();
        assert_eq!(p.key_expr, publ.token_key_expr());
        assert_eq!(p.gid, publ.gid());
        assert_eq!(p.token.node_name, "nerve_bridge");
        assert_eq!(p.token.zid, a.session().zid().to_string());
        let t = p.token.topic.as_ref().unwrap();
        assert_eq!(t.ros_type, "std_msgs/msg/String");
        assert_eq!(t.type_hash.to_string(), STRING_HASH);
        assert_eq!(t.qos, Qos::keep_last(7));
        assert!(p.key_expr.ends_with("/MP/%/%/nerve_bridge/%chatter/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18/::,7:,:,:,,"));
        assert!(wait_until(|| b
            .graph()
            .nodes()
            .any(|n| n.token.node_name == "nerve_bridge")
            .then_some(()))
        .is_some());
        assert_eq!(g.malformed_tokens, 0);

        // a's graph: b's node (namespaced) and subscription
        let g = wait_until(|| {
            let g = a.graph();
            (g.subscriptions().count() == 1 && g.nodes().count() == 2).then_some(g)
        })
        .expect("b's subscription in a's graph");
        let s = g.subscriptions().next().unwrap();
        assert_eq!(s.key_expr, sub.token_key_expr());
        assert_eq!(s.token.namespace, "/robot");
        assert_eq!(s.token.topic.as_ref().unwrap().qos.depth, 10);

        // the data: three samples, the attachment as rmw_zenoh writes it
        wait_until(|| publ.has_subscribers().then_some(())).expect("matching");
        let before = now_ns();
        let sent: Vec<Attachment> = (0..3).map(|_| publ.publish(&HELLO).unwrap()).collect();
        let after = now_ns();
        for (i, want) in sent.iter().enumerate() {
            let r = sub.recv_timeout(WAIT).expect("a sample");
            assert_eq!(r.cdr, HELLO);
            let got = r.attachment.unwrap();
            assert_eq!(&got, want);
            assert_eq!(got.sequence_number, i as i64 + 1);
            assert!((before..=after).contains(&got.source_timestamp_ns));
            assert_eq!(got.gid, publ.gid());
        }
        let stats = sub.stats();
        assert_eq!((stats.received, stats.malformed, stats.dropped), (3, 0, 0));

        // a dropped publisher's token leaves the other side's graph
        let token_key = publ.token_key_expr().to_owned();
        drop(publ);
        assert!(wait_until(|| b
            .graph()
            .entities
            .iter()
            .all(|e| e.key_expr != token_key)
            .then_some(()))
        .is_some());
    }

    /// rmw_zenoh's topology: peers that only know the router (`rmw_zenohd`) find each
    /// other through it (its gossip) and exchange data and tokens. Zenoh 1.10.0 broke
    /// this (eclipse-zenoh/zenoh#2753: peers of ROS 2 Kilted/Lyrical saw nothing); this
    /// checks the pinned release.
    #[test]
    fn peers_find_each_other_through_a_router() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let router_at = format!("tcp/127.0.0.1:{port}");
        let mut router = peer_config(&[&router_at], &[]).unwrap();
        router.insert_json5("mode", "\"router\"").unwrap();
        let _router = zenoh::open(router).wait().unwrap();
        let peer = || {
            zenoh::open(peer_config(&["tcp/127.0.0.1:0"], &[&router_at]).unwrap())
                .wait()
                .unwrap()
        };
        let a = ZenohSide::new(peer(), 73, "/", "talker").unwrap();
        let b = ZenohSide::new(peer(), 73, "/", "listener").unwrap();
        let sub = b
            .subscriber(
                "/chatter",
                "std_msgs/msg/String",
                STRING_HASH,
                Qos::keep_last(10),
            )
            .unwrap();
        let publ = a
            .publisher(
                "/chatter",
                "std_msgs/msg/String",
                STRING_HASH,
                Qos::keep_last(10),
            )
            .unwrap();
        wait_until(|| {
            (b.graph()
                .on_topic(EntityKind::Publisher, "/chatter")
                .count()
                == 1)
                .then_some(())
        })
        .expect("a's publisher token through the router");
        wait_until(|| publ.has_subscribers().then_some(())).expect("matching");
        publ.publish(&HELLO).unwrap();
        assert_eq!(sub.recv_timeout(WAIT).expect("the sample").cdr, HELLO);
    }

    /// Samples without or with a malformed attachment are handed over with the error,
    /// counted and named; a malformed token is counted in the graph with its part named.
    #[test]
    fn malformed_attachments_and_tokens_are_counted_and_named() {
        let (sa, sb) = pair();
        let b = ZenohSide::new(sb, 72, "", "listener").unwrap();
        let sub = b
            .subscriber(
                "/chatter",
                "std_msgs/msg/String",
                STRING_HASH,
                Qos::keep_last(2),
            )
            .unwrap();
        let raw = sa
            .declare_publisher(sub.key_expr().to_owned())
            .wait()
            .unwrap();
        wait_until(|| raw.matching_status().wait().ok().filter(|s| s.matching()))
            .expect("matching");
        raw.put(HELLO.to_vec()).wait().unwrap();
        raw.put(HELLO.to_vec())
            .attachment(vec![1u8, 2, 3, 4, 5])
            .wait()
            .unwrap();
        let r = sub.recv_timeout(WAIT).unwrap();
        assert_eq!(r.attachment, Err(AttachmentError::Missing));
        let r = sub.recv_timeout(WAIT).unwrap();
        assert_eq!(r.attachment, Err(AttachmentError::Truncated { len: 5 }));
        let stats = sub.stats();
        assert_eq!(stats.malformed, 2);
        assert_eq!(
            stats.last_malformed,
            Some(AttachmentError::Truncated { len: 5 })
        );
        assert!(sub.try_recv().is_none());

        // the queue is bounded by the depth: the oldest go
        for _ in 0..5 {
            raw.put(HELLO.to_vec()).wait().unwrap();
        }
        wait_until(|| (sub.stats().received == 7).then_some(())).expect("all heard");
        assert_eq!(sub.stats().dropped, 3);

        let _bad = sa
            .liveliness()
            .declare_token("@ros2_lv/72/abc/0/1/MP/%/%/talker/%chatter/std_msgs::msg::dds_::String_/TypeHashNotSupported/::,7:,:")
            .wait()
            .unwrap();
        let g = wait_until(|| {
            let g = b.graph();
            (g.malformed_tokens == 1).then_some(g)
        })
        .expect("the malformed token counted");
        assert!(
            matches!(
                &g.last_malformed,
                Some(FormatError::Token {
                    part: TokenPart::Qos,
                    ..
                })
            ),
            "{:?}",
            g.last_malformed
        );
        assert_eq!(g.publishers().count(), 0);
    }
}
