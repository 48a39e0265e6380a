//! `nerve bridge foxglove`: Nerve topics live in Foxglove, over the `foxglove` crate's
//! WebSocket server.
//!
//! Every topic is advertised as soon as it is found, with the schema [`crate::encoding`]
//! gives it (standard messages as their ROS 2 types, so point clouds open in the 3D panel
//! and images in the image panel; any other type as CDR with a generated `ros2msg`
//! schema). Nothing else happens for a topic until a client subscribes: only then does
//! the bridge subscribe to the Nerve topic (a thread per watched topic), convert each
//! sample and hand it to the server; when the last client unsubscribes, the Nerve
//! subscription is dropped again. A topic nobody watches has no subscriber, so its
//! publishers do no work for the bridge.
//!
//! Services: every Nerve service whose request and response types have a schema the
//! bridge knows (the standard services of `nerve_msgs`) is offered to Foxglove's Service
//! Call panel with `ros2msg` schemas and CDR payloads. A call is decoded, made through a
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
//! Slow clients: the server keeps a bounded backlog per client
//! ([`BridgeOptions::backlog`]) and drops the oldest messages when it is full (the SDK
//! logs it; foxglove 0.30 does not expose per-client counts). Samples the bridge itself
//! missed (sequence gaps on a watched topic) are counted in [`BridgeTopicStats::lost`].

pub mod gate;

use crate::encoding::{Encoding, MESSAGE_ENCODING, SCHEMA_ENCODING};
use crate::record::Selection;
use crate::BagError;
use crossbeam_channel::{bounded, Receiver, Sender};
use foxglove::websocket::service::{Request, Responder, Service, ServiceSchema};
use foxglove::websocket::{Capability, ChannelView, Client, ServerListener};
use foxglove::{
    ChannelBuilder, PartialMetadata, RawChannel, WebSocketServer, WebSocketServerHandle,
};
use nerve::message::schema::Schema;
use nerve::{Context, Qos, RawClient, RawSubscriber, ServiceQos, WaitMode};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

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
}

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

struct Bridged {
    name: String,
    schema: Schema,
    encoding: Encoding,
    channel: Arc<RawChannel>,
    watchers: AtomicUsize,
    forwarded: AtomicU64,
    lost: AtomicU64,
    failed: AtomicU64,
    /// The Nerve subscription while someone watches: its stop flag and thread.
    worker: Mutex<Worker>,
    /// Why the last subscription to the Nerve topic failed, if it did.
    error: Mutex<Option<String>>,
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
}

impl Shared {
    fn find(&self, channel: &ChannelView) -> Option<Arc<Bridged>> {
        let id: u64 = channel.id().into();
        self.topics.lock().expect("poisoned").get(&id).cloned()
    }
}

struct Listener(Arc<Shared>);

impl ServerListener for Listener {
    fn on_subscribe(&self, _client: Client, channel: ChannelView) {
        let Some(t) = self.0.find(&channel) else {
            return;
        };
        // the count changes under the worker's lock, so a subscribe and an unsubscribe
        // arriving together cannot leave a worker running for nobody (or none for someone)
        let mut w = t.worker.lock().expect("poisoned");
        if t.watchers.fetch_add(1, Ordering::Relaxed) == 0 {
            start_worker(&self.0, &t, &mut w);
        }
    }

    fn on_unsubscribe(&self, _client: Client, channel: ChannelView) {
        let Some(t) = self.0.find(&channel) else {
            return;
        };
        let mut w = t.worker.lock().expect("poisoned");
        if t.watchers.fetch_sub(1, Ordering::Relaxed) == 1 {
            stop_worker(&mut w);
        }
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
        if t.encoding.encode(s.bytes(), &mut buf).is_err() {
            t.failed.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let log_time = u64::try_from(s.header().publish_wall_ns).ok();
        drop(s);
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
    caller: Option<JoinHandle<()>>,
}

impl Bridge {
    /// Starts the server and the discovery of topics in `ctx`'s domain.
    pub fn start(ctx: &Context, opts: BridgeOptions) -> Result<Bridge, BagError> {
        let shared = Arc::new(Shared {
            ctx: ctx.clone(),
            stop: AtomicBool::new(false),
            topics: Mutex::new(BTreeMap::new()),
            services: Mutex::new(BTreeMap::new()),
            server: Mutex::new(None),
        });
        let fctx = foxglove::Context::new();
        let mut server = WebSocketServer::new()
            .name("nerve")
            .context(&fctx)
            .bind("127.0.0.1", 0)
            .message_backlog_size(opts.backlog.max(1))
            .listener(Arc::new(Listener(shared.clone())));
        if opts.services {
            server = server
                .capabilities([Capability::Services])
                .supported_encodings([MESSAGE_ENCODING]);
        }
        let server = server.start_blocking().map_err(|e| BagError::Io {
            path: "the bridge's server on 127.0.0.1".into(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let backend = std::net::SocketAddr::from(([127, 0, 0, 1], server.port()));
        *shared.server.lock().expect("poisoned") = Some(server);
        let gate = match gate::Gate::start(&opts.host, opts.port, backend) {
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
        let caller = opts
            .services
            .then(|| {
                let (shared, timeout) = (shared.clone(), opts.call_timeout);
                std::thread::Builder::new()
                    .name("bridge-calls".into())
                    .spawn(move || make_calls(&shared, &calls_rx, timeout))
                    .map_err(|e| BagError::io(Path::new("bridge-calls thread"), e))
            })
            .transpose()?;
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
            caller,
        })
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
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

    /// Counts per topic.
    pub fn stats(&self) -> Vec<BridgeTopicStats> {
        let topics = self.shared.topics.lock().expect("poisoned");
        let mut v: Vec<BridgeTopicStats> = topics
            .values()
            .map(|t| BridgeTopicStats {
                topic: t.name.clone(),
                schema_name: t.encoding.schema_name.clone(),
                watchers: t.watchers.load(Ordering::Relaxed),
                forwarded: t.forwarded.load(Ordering::Relaxed),
                lost: t.lost.load(Ordering::Relaxed),
                failed: t.failed.load(Ordering::Relaxed),
                error: t.error.lock().expect("poisoned").clone(),
            })
            .collect();
        v.sort_by(|a, b| a.topic.cmp(&b.topic));
        v
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
        if let Some(c) = self.caller.take() {
            let _ = c.join();
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

fn discover(
    shared: &Shared,
    fctx: &Arc<foxglove::Context>,
    opts: &BridgeOptions,
    calls: &Sender<Call>,
) {
    let Ok(node) = shared.ctx.node("nerve_bridge").create() else {
        return;
    };
    let mut seen = HashSet::new();
    let mut seen_services = HashSet::new();
    while !shared.stop.load(Ordering::Relaxed) {
        if opts.services {
            offer_services(shared, &node, &mut seen_services, calls);
        }
        for name in nerve::introspect::topic_names(&node).unwrap_or_default() {
            if seen.contains(&name) || !opts.selection.matches(&name) {
                continue;
            }
            let Ok(info) = nerve::introspect::topic_info(&node, &name) else {
                continue;
            };
            seen.insert(name.clone());
            // topics without a usable schema cannot be decoded by anyone: not offered
            let Some(Ok(schema)) = info.schema else {
                continue;
            };
            let Ok(encoding) = Encoding::for_schema(&schema) else {
                continue;
            };
            let fschema = foxglove::Schema::new(
                encoding.schema_name.clone(),
                SCHEMA_ENCODING,
                encoding.schema_data.clone(),
            );
            let Ok(channel) = ChannelBuilder::new(name.clone())
                .context(fctx)
                .message_encoding(MESSAGE_ENCODING)
                .schema(fschema)
                .build_raw()
            else {
                continue;
            };
            let id: u64 = channel.id().into();
            shared.topics.lock().expect("poisoned").insert(
                id,
                Arc::new(Bridged {
                    name,
                    schema,
                    encoding,
                    channel,
                    watchers: AtomicUsize::new(0),
                    forwarded: AtomicU64::new(0),
                    lost: AtomicU64::new(0),
                    failed: AtomicU64::new(0),
                    worker: Mutex::new(None),
                    error: Mutex::new(None),
                }),
            );
        }
        let end = std::time::Instant::now() + opts.discovery_period;
        while !shared.stop.load(Ordering::Relaxed) && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The schema of a service's request or response type, if the bridge knows it.
fn known_schema(ty: &nerve::TypeInfo) -> Option<Schema> {
    nerve_msgs::schemas()
        .into_iter()
        .find(|s| s.layout_hash == ty.layout_hash && s.name == ty.name)
}

/// Offers the services that appeared since the last round (those whose types have a
/// known schema; the others are skipped once, for good).
fn offer_services(
    shared: &Shared,
    node: &nerve::Node,
    seen: &mut HashSet<String>,
    calls: &Sender<Call>,
) {
    let Ok(list) = nerve::introspect::list_services(node) else {
        return;
    };
    for info in list {
        if info.servers == 0 || !seen.insert(info.name.clone()) {
            continue;
        }
        let (Some(req), Some(resp)) = (known_schema(&info.request), known_schema(&info.response))
        else {
            continue;
        };
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
