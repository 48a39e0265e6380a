//! `nerve bridge foxglove`: Nerve topics live in Foxglove, over the `foxglove` crate's
//! WebSocket server.
//!
//! Every topic is advertised as soon as it is found, with the schema [`crate::encoding`]
//! gives it (standard messages as their ROS 2 types, so point clouds open in the 3D panel
//! and images in the image panel; any other type as CDR with a generated `ros2msg`
//! schema), except Nerve's own serde-encoded topics (parameter events, action status),
//! which are sent as JSON with a JSON Schema naming their fields ([`internal`]). Nothing else happens for a topic until a client subscribes: only then does
//! the bridge subscribe to the Nerve topic (a thread per watched topic), convert each
//! sample and hand it to the server; when the last client unsubscribes, the Nerve
//! subscription is dropped again. A topic nobody watches has no subscriber, so its
//! publishers do no work for the bridge.
//!
//! Services: every Nerve service whose request and response types have a schema the
//! bridge knows (`nerve_msgs`' types, a type some topic of the domain carries, or one
//! the service's endpoints recorded in the domain) is offered to Foxglove's Service Call
//! panel with `ros2msg` schemas and CDR payloads. A call is decoded, made through a
//! Nerve client on the bridge's caller thread (one call at a time, each bounded by
//! [`BridgeOptions::call_timeout`]; at most [`MAX_PENDING_CALLS`] wait, more are refused
//! at once), and its response converted back; a failed call answers with the Nerve
//! error's message.
//!
//! Clients: the bridge listens itself and hands each connection to the SDK's server on a
//! loopback port ([`gate`]), so clients offering the protocol's first name,
//! `foxglove.websocket.v1` (`@foxglove/ws-protocol`, Lichtblick, Foxglove Studio before
//! the SDK), are served beside those offering `foxglove.sdk.v1` or `foxglove.sdk.v1.1`,
//! each answered with the name it offered.
//!
//! Slow clients: the front door keeps a bounded queue of frames per client
//! ([`BridgeOptions::backlog`]) and drops the oldest message data when it is full,
//! counting per client and telling the client with a status message ([`gate`]; the
//! SDK's own backlog drops are not exposed by foxglove 0.30). Samples the bridge itself
//! missed (sequence gaps on a watched topic) are counted in [`BridgeTopicStats::lost`]
//! and reported to the clients watching the topic.
//!
//! Foxglove as a cockpit (issue 32): clients publish to Nerve topics ([`inbound`]: the
//! Teleop panel's Twist on `/cmd_vel`, type checked), get and set the nodes' parameters
//! ([`params`]), see the connection graph (publishers, subscribers and services by
//! node), and get the simulation time as the server's time ([`BridgeOptions::clock`]). A
//! topic whose last publisher is gone is unadvertised. [`playback`] serves a bag with the
//! playback bar instead of the domain.
//!
//! Time: the bridge has one clock, its context's ([`nerve::time`]). Every message's log
//! time is that clock's reading when the bridge forwards it, and when the clock is a
//! simulation clock the server broadcasts it as its time: stamps and server time are the
//! same time source, as Foxglove requires (the publisher's own stamp may come from
//! another clock: a player on the system clock, replaying a bag under `/clock`).

pub mod gate;
pub mod inbound;
pub mod internal;
pub mod params;
pub mod playback;

use crate::encoding::{Encoding, MESSAGE_ENCODING, SCHEMA_ENCODING};
use crate::record::Selection;
use crate::BagError;
use crossbeam_channel::{bounded, Receiver, Sender};
use foxglove::websocket::service::{Request, Responder, Service, ServiceSchema};
use foxglove::websocket::{
    Capability, ChannelView, Client, ClientChannel, ConnectionGraph, ServerListener, Status,
};
use foxglove::{
    ChannelBuilder, PartialMetadata, RawChannel, WebSocketServer, WebSocketServerHandle,
};
use nerve::message::schema::Schema;
use nerve::{Context, Qos, RawClient, RawSubscriber, ServiceQos, WaitMode};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How to bridge.
#[derive(Clone, Debug)]
pub struct BridgeOptions {
    /// Address to listen on.
    pub host: String,
    /// Port (0: any free port).
    pub port: u16,
    /// Topics to offer.
    pub selection: Selection,
    /// How often new topics are looked for.
    pub discovery_period: Duration,
    /// Messages queued per client before the oldest are dropped.
    pub backlog: usize,
    /// Offer Nerve services to Foxglove's Service Call panel.
    pub services: bool,
    /// Longest a service call from Foxglove may take.
    pub call_timeout: Duration,
    /// Let clients publish to Nerve topics (`clientPublish`).
    pub client_publish: bool,
    /// Offer the nodes' parameters to Foxglove's Parameters panel.
    pub parameters: bool,
    /// Run on the domain's simulation time (the `/clock` topic, as `nerve bag play
    /// --clock` or a simulator publishes it) and broadcast it as the server's time: the
    /// bridge follows it with a context of its own when the context it is given runs on
    /// the system clock. A context on simulation time does this without being asked.
    pub clock: bool,
}

/// Discovery rounds in a row a topic must look gone (no publisher, or no topic) before it
/// is unadvertised.
const GONE_ROUNDS: u32 = 2;

/// Service calls from Foxglove waiting for the caller thread; more are refused at once.
pub const MAX_PENDING_CALLS: usize = 64;

impl Default for BridgeOptions {
    /// 127.0.0.1:8765 (Foxglove's default), every topic, discovery every 250 ms, a
    /// backlog of 256 messages per client.
    fn default() -> Self {
        BridgeOptions {
            host: "127.0.0.1".into(),
            port: 8765,
            selection: Selection {
                all: true,
                ..Selection::default()
            },
            discovery_period: Duration::from_millis(250),
            backlog: 256,
            services: true,
            call_timeout: Duration::from_secs(5),
            client_publish: true,
            parameters: true,
            clock: false,
        }
    }
}

/// Counts of one bridged topic.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BridgeTopicStats {
    /// Topic name.
    pub topic: String,
    /// Schema advertised.
    pub schema_name: String,
    /// Clients subscribed now.
    pub watchers: usize,
    /// Samples converted and handed to the server.
    pub forwarded: u64,
    /// Samples the bridge missed while watching (sequence gaps).
    pub lost: u64,
    /// Samples that could not be converted.
    pub failed: u64,
    /// Why the bridge could not subscribe to the topic, if it could not.
    pub error: Option<String>,
}

/// Counts of one service offered to Foxglove.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BridgeServiceStats {
    /// Service name.
    pub service: String,
    /// Nerve service type.
    pub type_name: String,
    /// Calls made from Foxglove.
    pub calls: u64,
    /// Calls that failed (refused, bad payload, Nerve error).
    pub failed: u64,
}

/// How a topic's samples are sent to Foxglove.
enum Form {
    /// CDR with a `ros2msg` schema ([`crate::encoding`]).
    Cdr(Encoding),
    /// JSON with a JSON Schema (Nerve's own serde-encoded topics, [`internal`]).
    Json(internal::Readable),
}

impl Form {
    /// The form of the type `schema` describes, if it has one.
    fn of(schema: &Schema) -> Option<Form> {
        internal::Readable::of(schema)
            .map(Form::Json)
            .or_else(|| Encoding::for_schema(schema).ok().map(Form::Cdr))
    }

    fn schema_name(&self) -> String {
        match self {
            Form::Cdr(e) => e.schema_name.clone(),
            Form::Json(r) => r.schema_name().to_string(),
        }
    }

    /// The channel's message encoding and schema.
    fn channel(&self) -> (&'static str, foxglove::Schema) {
        match self {
            Form::Cdr(e) => (
                MESSAGE_ENCODING,
                foxglove::Schema::new(
                    e.schema_name.clone(),
                    SCHEMA_ENCODING,
                    e.schema_data.clone(),
                ),
            ),
            Form::Json(r) => (
                internal::MESSAGE_ENCODING,
                foxglove::Schema::new(r.schema_name(), internal::SCHEMA_ENCODING, r.schema_data()),
            ),
        }
    }

    /// Converts a sample's payload into `out`.
    fn encode(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        match self {
            Form::Cdr(e) => e.encode(payload, out).map_err(|e| e.to_string()),
            Form::Json(r) => r.encode(payload, out).map_err(|e| e.to_string()),
        }
    }
}

struct Bridged {
    name: String,
    schema: Schema,
    form: Form,
    channel: Arc<RawChannel>,
    watchers: AtomicUsize,
    forwarded: AtomicU64,
    lost: AtomicU64,
    failed: AtomicU64,
    /// The Nerve subscription while someone watches: its stop flag and thread.
    worker: Mutex<Worker>,
    /// Why the last subscription to the Nerve topic failed, if it did.
    error: Mutex<Option<String>>,
    /// The clients subscribed now (at most [`gate::MAX_CONNECTIONS`]), told of losses.
    clients: Mutex<Vec<Client>>,
    /// The loss count last reported to them.
    reported_lost: AtomicU64,
    /// Unadvertised: no worker starts any more (set under the worker's lock).
    closed: AtomicBool,
}

/// A Nerve service offered to Foxglove.
struct BridgedService {
    name: String,
    ty: nerve::ServiceType,
    request: Encoding,
    response: Encoding,
    calls: AtomicU64,
    failed: AtomicU64,
}

/// A call from a Foxglove client on its way to the caller thread.
struct Call {
    service: Arc<BridgedService>,
    request: Request,
    responder: Responder,
}

struct Shared {
    ctx: Context,
    stop: AtomicBool,
    /// Bridged topics by Foxglove channel id.
    topics: Mutex<BTreeMap<u64, Arc<Bridged>>>,
    /// Bridged services by name.
    services: Mutex<BTreeMap<String, Arc<BridgedService>>>,
    /// The server, until the bridge stops.
    server: Mutex<Option<WebSocketServerHandle>>,
    /// Client channels and their messages, on their way to the publishing thread.
    inbound: Option<inbound::Queues>,
    /// Counts per topic clients published to.
    inbound_counts: inbound::Counts,
    /// Whether some client subscribed to the connection graph.
    graph_watched: AtomicBool,
    /// Counts of topics unadvertised since, by name (added up if a topic comes and goes
    /// several times; bounded by the domain's topic names).
    retired: Mutex<BTreeMap<String, BridgeTopicStats>>,
    /// Schemas of the domain's types by layout hash, learnt from the topics' records (at
    /// most [`MAX_KNOWN_SCHEMAS`]).
    known: inbound::Known,
    /// Subscriptions that came before their channel was in [`Shared::topics`] (the SDK
    /// advertises a channel as it is built, before the bridge knows its id): taken up
    /// when it is. Held while a topic is added and while a subscription looks for its
    /// topic, so that none falls between the two.
    early: Mutex<HashMap<u64, Vec<Client>>>,
}

impl Bridged {
    fn stats(&self) -> BridgeTopicStats {
        BridgeTopicStats {
            topic: self.name.clone(),
            schema_name: self.form.schema_name(),
            watchers: self.watchers.load(Ordering::Relaxed),
            forwarded: self.forwarded.load(Ordering::Relaxed),
            lost: self.lost.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            error: self.error.lock().expect("poisoned").clone(),
        }
    }
}

impl Shared {
    fn find(&self, channel: &ChannelView) -> Option<Arc<Bridged>> {
        let id: u64 = channel.id().into();
        self.topics.lock().expect("poisoned").get(&id).cloned()
    }
}

/// The server's callbacks. It holds the bridge's state weakly: the foxglove SDK keeps
/// listeners in tasks of its global runtime, which can outlive the server (and do at
/// process exit), and a strong reference there kept the bridge's `Context` alive past
/// `Bridge::stop`, so the domain's last context never removed its files from /dev/shm.
struct Listener(Weak<Shared>);

impl ServerListener for Listener {
    fn on_client_advertise(&self, client: Client, channel: &ClientChannel) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        if let Some(q) = &shared.inbound {
            q.advertise(client, channel);
        }
    }

    fn on_client_unadvertise(&self, client: Client, channel: &ClientChannel) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        if let Some(q) = &shared.inbound {
            q.unadvertise(client.id(), channel.id);
        }
    }

    fn on_message_data(&self, client: Client, channel: &ClientChannel, payload: &[u8]) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        if let Some(q) = &shared.inbound {
            if !q.data(client.id(), channel.id, payload) {
                inbound::count(&shared.inbound_counts, &channel.topic, |c| {
                    c.received += 1;
                    c.dropped += 1;
                });
            }
        }
    }

    fn on_connection_graph_subscribe(&self) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        shared.graph_watched.store(true, Ordering::Relaxed);
    }

    fn on_connection_graph_unsubscribe(&self) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        shared.graph_watched.store(false, Ordering::Relaxed);
    }

    fn on_subscribe(&self, client: Client, channel: ChannelView) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        let t = {
            let mut early = shared.early.lock().expect("poisoned");
            match shared.find(&channel) {
                Some(t) => t,
                None => {
                    // a channel being added (see Shared::early); one the bridge closed
                    // is never added again, and its entry goes with the client
                    let id: u64 = channel.id().into();
                    let waiting = early.entry(id).or_default();
                    if waiting.len() < gate::MAX_CONNECTIONS {
                        waiting.push(client);
                    }
                    return;
                }
            }
        };
        watch(&shared, &t, client);
    }

    fn on_unsubscribe(&self, client: Client, channel: ChannelView) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        let t = {
            let mut early = shared.early.lock().expect("poisoned");
            let id: u64 = channel.id().into();
            if let Some(waiting) = early.get_mut(&id) {
                waiting.retain(|c| c.id() != client.id());
                if waiting.is_empty() {
                    early.remove(&id);
                }
            }
            shared.find(&channel)
        };
        let Some(t) = t else {
            return;
        };
        t.clients
            .lock()
            .expect("poisoned")
            .retain(|c| c.id() != client.id());
        let mut w = t.worker.lock().expect("poisoned");
        if t.watchers.fetch_sub(1, Ordering::Relaxed) == 1 {
            stop_worker(&mut w);
        }
    }
}

/// A client watches topic `t` from now on: its worker runs while anyone does.
fn watch(shared: &Arc<Shared>, t: &Arc<Bridged>, client: Client) {
    {
        let mut clients = t.clients.lock().expect("poisoned");
        if clients.len() < gate::MAX_CONNECTIONS {
            clients.push(client);
        }
    }
    // the count changes under the worker's lock, so a subscribe and an unsubscribe
    // arriving together cannot leave a worker running for nobody (or none for someone)
    let mut w = t.worker.lock().expect("poisoned");
    if t.watchers.fetch_add(1, Ordering::Relaxed) == 0 && !t.closed.load(Ordering::Relaxed) {
        start_worker(shared, t, &mut w);
    }
}

type Worker = Option<(Arc<AtomicBool>, JoinHandle<()>)>;

fn start_worker(shared: &Arc<Shared>, t: &Arc<Bridged>, w: &mut Worker) {
    stop_worker(w);
    let stop = Arc::new(AtomicBool::new(false));
    let (ctx, topic, flag) = (shared.ctx.clone(), t.clone(), stop.clone());
    if let Ok(h) = std::thread::Builder::new()
        .name("bridge-topic".into())
        .spawn(move || forward(&ctx, &topic, &flag))
    {
        *w = Some((stop, h));
    }
}

fn stop_worker(w: &mut Worker) {
    if let Some((stop, h)) = w.take() {
        stop.store(true, Ordering::Relaxed);
        let _ = h.join();
    }
}

/// Subscribes to the Nerve topic and forwards each sample, converted, until stopped.
fn forward(ctx: &Context, t: &Bridged, stop: &AtomicBool) {
    let sub = ctx
        .node("nerve_bridge")
        .create()
        .map_err(|e| e.to_string())
        .and_then(|node| {
            RawSubscriber::with_schema(&node, &t.name, &t.schema, Qos::sensor().depth(16))
                .map_err(|e| e.to_string())
        });
    let mut sub = match sub {
        Ok(s) => s,
        Err(e) => {
            *t.error.lock().expect("poisoned") = Some(format!("cannot subscribe: {e}"));
            return;
        }
    };
    sub.set_wait_mode(nerve::WaitMode::Block);
    let mut buf = Vec::new();
    let mut lost_seen = sub.stats().lost;
    while !stop.load(Ordering::Relaxed) {
        let Ok(Some(s)) = sub.recv_timeout(Duration::from_millis(20)) else {
            continue;
        };
        let lost = sub.stats().lost;
        t.lost.fetch_add(lost - lost_seen, Ordering::Relaxed);
        lost_seen = lost;
        if t.form.encode(s.bytes(), &mut buf).is_err() {
            t.failed.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        drop(s);
        // the bridge's one clock (see the module docs), the server's time too
        let log_time = u64::try_from(ctx.clock().now_ns()).ok();
        t.channel.log_with_meta(&buf, PartialMetadata { log_time });
        t.forwarded.fetch_add(1, Ordering::Relaxed);
    }
}

/// A running bridge; [`Bridge::stop`] (or dropping it) closes the server.
pub struct Bridge {
    shared: Arc<Shared>,
    /// The listening socket clients connect to.
    gate: gate::Gate,
    port: u16,
    discovery: Option<JoinHandle<()>>,
    /// The caller, publishing, parameter and clock threads.
    workers: Vec<JoinHandle<()>>,
}

impl Bridge {
    /// Starts the server and the discovery of topics in `ctx`'s domain.
    pub fn start(ctx: &Context, opts: BridgeOptions) -> Result<Bridge, BagError> {
        let ctx = clock_context(ctx, opts.clock)?;
        let sim_time = ctx.clock().is_sim();
        let (queues, inbound_rx) = inbound::Queues::new();
        let shared = Arc::new(Shared {
            ctx,
            stop: AtomicBool::new(false),
            topics: Mutex::new(BTreeMap::new()),
            services: Mutex::new(BTreeMap::new()),
            server: Mutex::new(None),
            inbound: opts.client_publish.then_some(queues),
            inbound_counts: Mutex::new(BTreeMap::new()),
            graph_watched: AtomicBool::new(false),
            retired: Mutex::new(BTreeMap::new()),
            known: Mutex::new(HashMap::new()),
            early: Mutex::new(HashMap::new()),
        });
        let fctx = foxglove::Context::new();
        let mut caps = vec![Capability::ConnectionGraph];
        if opts.services {
            caps.push(Capability::Services);
        }
        if opts.client_publish {
            caps.push(Capability::ClientPublish);
        }
        if opts.parameters {
            caps.push(Capability::Parameters);
        }
        if sim_time {
            caps.push(Capability::Time);
        }
        let (params_tx, params_rx) = bounded::<params::Request>(params::MAX_PENDING);
        let mut server = WebSocketServer::new()
            .name("nerve")
            .context(&fctx)
            .bind("127.0.0.1", 0)
            .message_backlog_size(opts.backlog.max(1))
            .listener(Arc::new(Listener(Arc::downgrade(&shared))))
            .capabilities(caps)
            .supported_encodings([MESSAGE_ENCODING, "json"]);
        if opts.parameters {
            server = server.parameter_handler(Arc::new(params::Handler(params_tx)));
        }
        let server = server.start_blocking().map_err(|e| BagError::Io {
            path: "the bridge's server on 127.0.0.1".into(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let backend = std::net::SocketAddr::from(([127, 0, 0, 1], server.port()));
        *shared.server.lock().expect("poisoned") = Some(server);
        let gate = match gate::Gate::start(&opts.host, opts.port, backend, opts.backlog) {
            Ok(g) => g,
            Err(source) => {
                if let Some(s) = shared.server.lock().expect("poisoned").take() {
                    drop(s.stop());
                }
                return Err(BagError::Io {
                    path: format!("{}:{}", opts.host, opts.port),
                    source,
                });
            }
        };
        let port = gate.port();
        let (calls_tx, calls_rx) = bounded::<Call>(MAX_PENDING_CALLS);
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|e| BagError::io(Path::new(name), e))
        };
        let mut workers = Vec::new();
        if opts.services {
            let (shared, timeout) = (shared.clone(), opts.call_timeout);
            workers.push(spawn(
                "bridge-calls",
                Box::new(move || make_calls(&shared, &calls_rx, timeout)),
            )?);
        }
        if opts.client_publish {
            let shared = shared.clone();
            workers.push(spawn(
                "bridge-publish",
                Box::new(move || {
                    inbound::run(
                        &shared.ctx,
                        &inbound_rx,
                        &shared.inbound_counts,
                        &shared.known,
                        &shared.stop,
                    )
                }),
            )?);
        }
        if opts.parameters {
            let shared = shared.clone();
            workers.push(spawn(
                "bridge-params",
                Box::new(move || {
                    params::run(&shared.ctx, &params_rx, &shared.server, &shared.stop)
                }),
            )?);
        }
        if sim_time {
            let shared = shared.clone();
            workers.push(spawn(
                "bridge-clock",
                Box::new(move || broadcast_time(&shared)),
            )?);
        }
        let discovery = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("bridge-discovery".into())
                .spawn(move || discover(&shared, &fctx, &opts, &calls_tx))
                .map_err(|e| BagError::io(Path::new("bridge-discovery thread"), e))?
        };
        Ok(Bridge {
            shared,
            gate,
            port,
            discovery: Some(discovery),
            workers,
        })
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Messages dropped for slow clients so far (each client is told its own count by
    /// a status message; see [`gate`]).
    pub fn client_drops(&self) -> u64 {
        self.gate.dropped()
    }

    /// Clients connected now.
    pub fn clients(&self) -> usize {
        let server = self.shared.server.lock().expect("poisoned");
        server.as_ref().map_or(0, |s| s.client_count())
    }

    /// Services offered, with the calls made through each (and how many failed).
    pub fn service_stats(&self) -> Vec<BridgeServiceStats> {
        let services = self.shared.services.lock().expect("poisoned");
        services
            .values()
            .map(|s| BridgeServiceStats {
                service: s.name.clone(),
                type_name: s.ty.name.clone(),
                calls: s.calls.load(Ordering::Relaxed),
                failed: s.failed.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Counts per topic Foxglove clients published to.
    pub fn inbound_stats(&self) -> Vec<inbound::InboundStats> {
        let counts = self.shared.inbound_counts.lock().expect("poisoned");
        counts.values().cloned().collect()
    }

    /// Counts per topic (those of a topic unadvertised since included).
    pub fn stats(&self) -> Vec<BridgeTopicStats> {
        let mut by_name = self.shared.retired.lock().expect("poisoned").clone();
        for t in self.shared.topics.lock().expect("poisoned").values() {
            add_stats(&mut by_name, t.stats());
        }
        by_name.into_values().collect()
    }

    /// Stops discovery, every forwarding thread and the server.
    pub fn stop(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        self.gate.stop();
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(d) = self.discovery.take() {
            let _ = d.join();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        if let Some(s) = self.shared.server.lock().expect("poisoned").take() {
            drop(s.stop());
        }
        let topics: Vec<_> = self
            .shared
            .topics
            .lock()
            .expect("poisoned")
            .values()
            .cloned()
            .collect();
        for t in topics {
            stop_worker(&mut t.worker.lock().expect("poisoned"));
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        if self.discovery.is_some() {
            self.finish();
        }
    }
}

/// How often losses are reported to the clients watching a topic, at most.
pub const LOSS_REPORT_PERIOD: Duration = Duration::from_secs(2);

/// Most schemas the bridge learns from the domain's topics.
pub const MAX_KNOWN_SCHEMAS: usize = 4096;

fn discover(
    shared: &Arc<Shared>,
    fctx: &Arc<foxglove::Context>,
    opts: &BridgeOptions,
    calls: &Sender<Call>,
) {
    let Ok(node) = shared.ctx.node("nerve_bridge").create() else {
        return;
    };
    // topics offered, by name: their channel ids and the rounds in a row they looked gone
    let mut offered: HashMap<String, (u64, u32)> = HashMap::new();
    // topics looked at and not offered (no usable schema): not looked at again
    let mut skipped = HashSet::new();
    let mut seen_services = HashSet::new();
    let mut last_graph = None;
    let mut last_loss_report = Instant::now();
    while !shared.stop.load(Ordering::Relaxed) {
        let names = nerve::introspect::topic_names(&node).unwrap_or_default();
        // topics whose last publisher is gone (or that vanished) are unadvertised once they
        // look gone for GONE_ROUNDS rounds in a row: a topic that cannot be read this round
        // (being changed by another process) keeps its channel, so clients' subscriptions
        // do not break on a glitch
        offered.retain(|name, (id, misses)| {
            let gone = !names.contains(name)
                || nerve::introspect::topic_info(&node, name).is_ok_and(|i| i.publishers == 0);
            *misses = if gone { *misses + 1 } else { 0 };
            if *misses >= GONE_ROUNDS {
                unadvertise(shared, *id);
                return false;
            }
            true
        });
        for name in &names {
            if offered.contains_key(name) || skipped.contains(name) || !opts.selection.matches(name)
            {
                continue;
            }
            let Ok(info) = nerve::introspect::topic_info(&node, name) else {
                continue;
            };
            // topics without a usable schema cannot be decoded by anyone: not offered
            let Some(Ok(schema)) = info.schema else {
                skipped.insert(name.clone());
                continue;
            };
            {
                let mut known = shared.known.lock().expect("poisoned");
                if known.len() < MAX_KNOWN_SCHEMAS {
                    known
                        .entry(schema.layout_hash)
                        .or_insert_with(|| schema.clone());
                }
            }
            if info.publishers == 0 {
                continue;
            }
            let Some(form) = Form::of(&schema) else {
                skipped.insert(name.clone());
                continue;
            };
            if let Some(id) = advertise(shared, fctx, name, schema, form) {
                offered.insert(name.clone(), (id, 0));
            }
        }
        if opts.services {
            let known = shared.known.lock().expect("poisoned").clone();
            offer_services(shared, &node, &mut seen_services, &known, calls);
        }
        if shared.graph_watched.load(Ordering::Relaxed) {
            let graph = graph_of(&node, &names);
            if last_graph.as_ref() != Some(&graph) {
                let mut g = ConnectionGraph::new();
                for (topic, (pubs, subs)) in &graph.0 {
                    if !pubs.is_empty() {
                        g.set_published_topic(topic, pubs.iter().cloned());
                    }
                    if !subs.is_empty() {
                        g.set_subscribed_topic(topic, subs.iter().cloned());
                    }
                }
                for (service, servers) in &graph.1 {
                    g.set_advertised_service(service, servers.iter().cloned());
                }
                if let Some(server) = shared.server.lock().expect("poisoned").as_ref() {
                    let _ = server.publish_connection_graph(g);
                }
                last_graph = Some(graph);
            }
        } else {
            last_graph = None;
        }
        if last_loss_report.elapsed() >= LOSS_REPORT_PERIOD {
            last_loss_report = Instant::now();
            report_losses(shared);
        }
        let end = Instant::now() + opts.discovery_period;
        while !shared.stop.load(Ordering::Relaxed) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Offers a topic to clients; its channel id.
fn advertise(
    shared: &Arc<Shared>,
    fctx: &Arc<foxglove::Context>,
    name: &str,
    schema: Schema,
    form: Form,
) -> Option<u64> {
    let (message_encoding, fschema) = form.channel();
    let channel = ChannelBuilder::new(name)
        .context(fctx)
        .message_encoding(message_encoding)
        .schema(fschema)
        .build_raw()
        .ok()?;
    let id: u64 = channel.id().into();
    let t = Arc::new(Bridged {
        name: name.to_string(),
        schema,
        form,
        channel,
        watchers: AtomicUsize::new(0),
        forwarded: AtomicU64::new(0),
        lost: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        worker: Mutex::new(None),
        error: Mutex::new(None),
        clients: Mutex::new(Vec::new()),
        reported_lost: AtomicU64::new(0),
        closed: AtomicBool::new(false),
    });
    // clients that subscribed while the channel was being built are taken up now
    let waiting = {
        let mut early = shared.early.lock().expect("poisoned");
        shared
            .topics
            .lock()
            .expect("poisoned")
            .insert(id, t.clone());
        early.remove(&id).unwrap_or_default()
    };
    for client in waiting {
        watch(shared, &t, client);
    }
    Some(id)
}

/// Withdraws a topic: its channel is closed (clients get an unadvertise) and its
/// forwarding thread stopped. Its counts stay in [`Bridge::stats`].
fn unadvertise(shared: &Shared, id: u64) {
    shared.early.lock().expect("poisoned").remove(&id);
    let t = shared.topics.lock().expect("poisoned").remove(&id);
    if let Some(t) = t {
        {
            let mut w = t.worker.lock().expect("poisoned");
            t.closed.store(true, Ordering::Relaxed);
            stop_worker(&mut w);
        }
        t.channel.close();
        let mut retired = shared.retired.lock().expect("poisoned");
        add_stats(
            &mut retired,
            BridgeTopicStats {
                watchers: 0,
                ..t.stats()
            },
        );
    }
}

/// Adds `s` to the counts of its topic in `to`.
fn add_stats(to: &mut BTreeMap<String, BridgeTopicStats>, s: BridgeTopicStats) {
    match to.get_mut(&s.topic) {
        None => {
            to.insert(s.topic.clone(), s);
        }
        Some(t) => {
            t.watchers += s.watchers;
            t.forwarded += s.forwarded;
            t.lost += s.lost;
            t.failed += s.failed;
            t.schema_name = s.schema_name;
            if s.error.is_some() {
                t.error = s.error;
            }
        }
    }
}

/// Tells the clients watching each topic how many of its samples the bridge lost since
/// the last report (the SDK's own per-client backlog drops are not exposed by foxglove
/// 0.30: see the module's docs).
fn report_losses(shared: &Shared) {
    let topics: Vec<_> = shared
        .topics
        .lock()
        .expect("poisoned")
        .values()
        .cloned()
        .collect();
    for t in topics {
        let lost = t.lost.load(Ordering::Relaxed);
        let before = t.reported_lost.swap(lost, Ordering::Relaxed);
        if lost <= before {
            continue;
        }
        let status = Status::warning(format!(
            "{}: {} samples lost by the bridge in the last {} s ({lost} in all): the topic \
             outruns the bridge's subscription",
            t.name,
            lost - before,
            LOSS_REPORT_PERIOD.as_secs()
        ))
        .with_id(format!("nerve-bridge-lost-{}", t.name));
        for c in t.clients.lock().expect("poisoned").iter() {
            c.send_status(status.clone());
        }
    }
}

/// The domain's graph: per topic its publishing and subscribing nodes, per service its
/// serving nodes (the bridge's own endpoints left out).
#[derive(PartialEq)]
struct Graph(
    BTreeMap<String, (Vec<String>, Vec<String>)>,
    BTreeMap<String, Vec<String>>,
);

fn graph_of(node: &nerve::Node, topics: &std::collections::BTreeSet<String>) -> Graph {
    let own = |n: &String| !n.contains("nerve_bridge");
    let mut g = Graph(BTreeMap::new(), BTreeMap::new());
    for t in topics {
        if let Ok(e) = nerve::introspect::topic_endpoints(node, t) {
            let mut pubs: Vec<String> = e.publishers.into_iter().filter(own).collect();
            let mut subs: Vec<String> = e.subscribers.into_iter().filter(own).collect();
            pubs.dedup();
            subs.dedup();
            if !pubs.is_empty() || !subs.is_empty() {
                g.0.insert(t.clone(), (pubs, subs));
            }
        }
    }
    for s in nerve::introspect::list_services(node).unwrap_or_default() {
        if s.servers == 0 {
            continue;
        }
        if let Ok(e) = nerve::introspect::service_endpoints(node, &s.name) {
            let mut servers: Vec<String> = e.publishers.into_iter().filter(own).collect();
            servers.dedup();
            if !servers.is_empty() {
                g.1.insert(s.name, servers);
            }
        }
    }
    g
}

/// The context the bridge runs on: `ctx`, or with `clock` and `ctx` on the system clock,
/// a context of the same settings on simulation time (following the domain's `/clock`).
fn clock_context(ctx: &Context, clock: bool) -> Result<Context, BagError> {
    if !clock || ctx.clock().is_sim() {
        return Ok(ctx.clone());
    }
    let mut config = ctx.config().clone();
    config.sim_time = true;
    Context::new(config).map_err(|e| {
        BagError::Options(format!(
            "--clock: cannot follow the simulation time of domain {}: {e}",
            ctx.domain()
        ))
    })
}

/// How often the server's time is sent again while it stands still (for clients that
/// connected since it last changed).
const TIME_REPEAT: Duration = Duration::from_millis(250);

/// Broadcasts the bridge's clock (a simulation clock) as the server's time whenever it
/// changes (forward or back; not before its first time), and every [`TIME_REPEAT`].
fn broadcast_time(shared: &Shared) {
    let clock = shared.ctx.clock().clone();
    let mut last: Option<(i64, Instant)> = None;
    while !shared.stop.load(Ordering::Relaxed) {
        let now = clock.now_ns();
        let due = last.is_none_or(|(t, at)| t != now || at.elapsed() >= TIME_REPEAT);
        if now > 0 && due {
            if let Some(server) = shared.server.lock().expect("poisoned").as_ref() {
                server.broadcast_time(now as u64);
                last = Some((now, Instant::now()));
            }
        }
        // wakes as soon as the time moves on (a jump back shows within the wait)
        clock.sleep_until(now.saturating_add(1), Duration::from_millis(50));
    }
}

/// The schema of a service's request or response type, if the bridge knows it: a
/// standard message's, one recorded on a topic of the domain, or one the service's
/// endpoints recorded in the domain ([`nerve::introspect::recorded_schema`]; a
/// type-erased endpoint made without a schema records none).
fn known_schema(
    node: &nerve::Node,
    ty: &nerve::TypeInfo,
    known: &HashMap<u64, Schema>,
) -> Option<Schema> {
    nerve_msgs::schemas()
        .into_iter()
        .find(|s| s.layout_hash == ty.layout_hash && s.name == ty.name)
        .or_else(|| {
            known
                .get(&ty.layout_hash)
                .filter(|s| s.name == ty.name)
                .cloned()
        })
        .or_else(|| nerve::introspect::recorded_schema(node, ty)?.ok())
}

/// Offers the services that appeared since the last round (those whose types have a
/// known schema; the others are looked at again each round, as a topic may make their
/// types known) and withdraws those whose last server is gone.
fn offer_services(
    shared: &Shared,
    node: &nerve::Node,
    seen: &mut HashSet<String>,
    known: &HashMap<u64, Schema>,
    calls: &Sender<Call>,
) {
    let Ok(list) = nerve::introspect::list_services(node) else {
        return;
    };
    let gone: Vec<String> = seen
        .iter()
        .filter(|n| !list.iter().any(|i| &&i.name == n && i.servers > 0))
        .cloned()
        .collect();
    if !gone.is_empty() {
        if let Some(server) = shared.server.lock().expect("poisoned").as_ref() {
            server.remove_services(&gone);
        }
        for n in &gone {
            seen.remove(n);
        }
    }
    for info in list {
        if info.servers == 0 || seen.contains(&info.name) {
            continue;
        }
        let (Some(req), Some(resp)) = (
            known_schema(node, &info.request, known),
            known_schema(node, &info.response, known),
        ) else {
            continue;
        };
        seen.insert(info.name.clone());
        let (Ok(request), Ok(response)) = (Encoding::for_schema(&req), Encoding::for_schema(&resp))
        else {
            continue;
        };
        let fschema = |e: &Encoding| {
            foxglove::Schema::new(
                e.schema_name.clone(),
                SCHEMA_ENCODING,
                e.schema_data.clone(),
            )
        };
        let schema = ServiceSchema::new(info.type_name.clone())
            .with_request(MESSAGE_ENCODING, fschema(&request))
            .with_response(MESSAGE_ENCODING, fschema(&response));
        let bridged = Arc::new(BridgedService {
            name: info.name.clone(),
            ty: nerve::ServiceType::new(
                info.type_name.clone(),
                info.request.clone(),
                info.response.clone(),
            ),
            request,
            response,
            calls: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        });
        let (tx, service) = (calls.clone(), bridged.clone());
        let handler = move |request: Request, responder: Responder| {
            service.calls.fetch_add(1, Ordering::Relaxed);
            let call = Call {
                service: service.clone(),
                request,
                responder,
            };
            // never blocks the server's poll loop: a full queue refuses the call
            if let Err(e) = tx.try_send(call) {
                service.failed.fetch_add(1, Ordering::Relaxed);
                e.into_inner().responder.respond_err(format!(
                    "{}: the bridge has {MAX_PENDING_CALLS} calls waiting; try again",
                    service.name
                ));
            }
        };
        let offered = Service::builder(info.name.clone(), schema).handler(CallHandler(handler));
        let server = shared.server.lock().expect("poisoned");
        if let Some(server) = server.as_ref() {
            if server.add_services([offered]).is_ok() {
                shared
                    .services
                    .lock()
                    .expect("poisoned")
                    .insert(info.name.clone(), bridged);
            }
        }
    }
}

/// A closure as a Foxglove service handler.
struct CallHandler<F>(F);

impl<F: Fn(Request, Responder) + Send + Sync> foxglove::websocket::service::Handler
    for CallHandler<F>
{
    fn call(&self, request: Request, responder: Responder) {
        (self.0)(request, responder)
    }
}

/// The caller thread: makes each call through a Nerve client (one per service, made on
/// first use) and answers Foxglove with the converted response or the error.
fn make_calls(shared: &Shared, calls: &Receiver<Call>, timeout: Duration) {
    let Ok(node) = shared.ctx.node("nerve_bridge_calls").create() else {
        return;
    };
    let mut clients: BTreeMap<String, RawClient> = BTreeMap::new();
    let (mut nerve_request, mut cdr) = (Vec::new(), Vec::new());
    while !shared.stop.load(Ordering::Relaxed) {
        let Ok(call) = calls.recv_timeout(Duration::from_millis(50)) else {
            continue;
        };
        let s = &call.service;
        let result = (|| -> Result<(), String> {
            s.request
                .decode(call.request.payload(), &mut nerve_request)
                .map_err(|e| format!("bad request for {}: {e}", s.name))?;
            if !clients.contains_key(&s.name) {
                let c = RawClient::create(
                    &node,
                    &s.name,
                    &s.ty,
                    ServiceQos::default(),
                    WaitMode::Block,
                )
                .map_err(|e| e.to_string())?;
                clients.insert(s.name.clone(), c);
            }
            let client = &clients[&s.name];
            let reply = client
                .send_bytes(&nerve_request)
                .and_then(|p| p.wait(timeout))
                .map_err(|e| e.to_string())?;
            s.response
                .encode(reply.bytes(), &mut cdr)
                .map_err(|e| format!("cannot convert the response of {}: {e}", s.name))
        })();
        match result {
            Ok(()) => call.responder.respond_ok(&cdr),
            Err(e) => {
                s.failed.fetch_add(1, Ordering::Relaxed);
                // a client whose server went away is made anew on the next call
                clients.remove(&s.name);
                call.responder.respond_err(e);
            }
        }
    }
    // calls still queued get an answer, not silence
    while let Ok(call) = calls.try_recv() {
        call.responder
            .respond_err(format!("{}: the bridge is stopping", call.service.name));
    }
}
