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
//! Slow clients: the server keeps a bounded backlog per client
//! ([`BridgeOptions::backlog`]) and drops the oldest messages when it is full (the SDK
//! logs it; foxglove 0.30 does not expose per-client counts). Samples the bridge itself
//! missed (sequence gaps on a watched topic) are counted in [`BridgeTopicStats::lost`].

use crate::encoding::{Encoding, MESSAGE_ENCODING, SCHEMA_ENCODING};
use crate::record::Selection;
use crate::BagError;
use foxglove::websocket::{ChannelView, Client, ServerListener};
use foxglove::{
    ChannelBuilder, PartialMetadata, RawChannel, WebSocketServer, WebSocketServerHandle,
};
use nerve::message::schema::Schema;
use nerve::{Context, Qos, RawSubscriber};
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
}

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
    worker: Mutex<Option<(Arc<AtomicBool>, JoinHandle<()>)>>,
}

struct Shared {
    ctx: Context,
    stop: AtomicBool,
    /// Bridged topics by Foxglove channel id.
    topics: Mutex<BTreeMap<u64, Arc<Bridged>>>,
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
        if t.watchers.fetch_add(1, Ordering::SeqCst) == 0 {
            start_worker(&self.0, &t);
        }
    }

    fn on_unsubscribe(&self, _client: Client, channel: ChannelView) {
        let Some(t) = self.0.find(&channel) else {
            return;
        };
        if t.watchers.fetch_sub(1, Ordering::SeqCst) == 1 {
            stop_worker(&t);
        }
    }
}

fn start_worker(shared: &Arc<Shared>, t: &Arc<Bridged>) {
    let mut w = t.worker.lock().expect("poisoned");
    if let Some((stop, h)) = w.take() {
        stop.store(true, Ordering::Relaxed);
        let _ = h.join();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (ctx, topic, flag) = (shared.ctx.clone(), t.clone(), stop.clone());
    if let Ok(h) = std::thread::Builder::new()
        .name("bridge-topic".into())
        .spawn(move || forward(&ctx, &topic, &flag))
    {
        *w = Some((stop, h));
    }
}

fn stop_worker(t: &Bridged) {
    if let Some((stop, h)) = t.worker.lock().expect("poisoned").take() {
        stop.store(true, Ordering::Relaxed);
        let _ = h.join();
    }
}

/// Subscribes to the Nerve topic and forwards each sample, converted, until stopped.
fn forward(ctx: &Context, t: &Bridged, stop: &AtomicBool) {
    let Ok(node) = ctx.node("nerve_bridge").create() else {
        return;
    };
    let Ok(mut sub) =
        RawSubscriber::with_schema(&node, &t.name, &t.schema, Qos::sensor().depth(16))
    else {
        return;
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
    server: Option<WebSocketServerHandle>,
    discovery: Option<JoinHandle<()>>,
}

impl Bridge {
    /// Starts the server and the discovery of topics in `ctx`'s domain.
    pub fn start(ctx: &Context, opts: BridgeOptions) -> Result<Bridge, BagError> {
        let shared = Arc::new(Shared {
            ctx: ctx.clone(),
            stop: AtomicBool::new(false),
            topics: Mutex::new(BTreeMap::new()),
        });
        let fctx = foxglove::Context::new();
        let server = WebSocketServer::new()
            .name("nerve")
            .context(&fctx)
            .bind(opts.host.clone(), opts.port)
            .message_backlog_size(opts.backlog.max(1))
            .listener(Arc::new(Listener(shared.clone())))
            .start_blocking()
            .map_err(|e| BagError::Io {
                path: format!("{}:{}", opts.host, opts.port),
                source: std::io::Error::other(e.to_string()),
            })?;
        let discovery = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("bridge-discovery".into())
                .spawn(move || discover(&shared, &fctx, &opts))
                .map_err(|e| BagError::io(Path::new("bridge-discovery thread"), e))?
        };
        Ok(Bridge {
            shared,
            server: Some(server),
            discovery: Some(discovery),
        })
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.server.as_ref().map_or(0, |s| s.port())
    }

    /// Clients connected now.
    pub fn clients(&self) -> usize {
        self.server.as_ref().map_or(0, |s| s.client_count())
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
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(d) = self.discovery.take() {
            let _ = d.join();
        }
        if let Some(s) = self.server.take() {
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
            stop_worker(&t);
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        if self.server.is_some() {
            self.finish();
        }
    }
}

fn discover(shared: &Shared, fctx: &Arc<foxglove::Context>, opts: &BridgeOptions) {
    let Ok(node) = shared.ctx.node("nerve_bridge").create() else {
        return;
    };
    let mut seen = HashSet::new();
    while !shared.stop.load(Ordering::Relaxed) {
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
                encoding.schema_text.clone().into_bytes(),
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
                }),
            );
        }
        let end = std::time::Instant::now() + opts.discovery_period;
        while !shared.stop.load(Ordering::Relaxed) && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
