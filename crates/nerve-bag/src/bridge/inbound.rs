//! `clientPublish`: Foxglove clients publishing to Nerve topics (the Teleop panel's
//! `geometry_msgs/msg/Twist` on `/cmd_vel`, or any channel a client advertises).
//!
//! A client channel is accepted when its schema name leads to a Nerve type
//! ([`resolve`]): the ROS 2 name of a standard message, a `nerve_msgs` name, the name the
//! bridge itself advertises a topic's type under, or the type of the Nerve topic of the
//! same name. A channel whose type differs from the existing Nerve topic's is refused with
//! a status message naming both. Payloads are `cdr` (decoded against the Nerve type's
//! ROS 2 form) or `json` (Nerve's field names).
//!
//! Everything runs on one thread of the bridge ([`run`]), fed by a bounded queue: the
//! server's poll loop never waits on Nerve. Payloads that do not decode are counted and
//! dropped, and the client is told by a status message, at most one per channel per
//! [`STATUS_INTERVAL`] (the count so far in it).

use crate::encoding::Encoding;
use crossbeam_channel::{bounded, Receiver, Sender};
use foxglove::websocket::{Client, ClientChannel, ClientChannelId, ClientId, Status};
use nerve::message::schema::Schema;
use nerve::{Context, Qos, RawPublisher};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Client channels open at once (all clients together); more are refused.
pub const MAX_CLIENT_CHANNELS: usize = 256;
/// Client messages waiting for the publishing thread; more are dropped and counted.
pub const INBOUND_QUEUE: usize = 1024;
/// Bytes of client messages waiting for the publishing thread; more are dropped and
/// counted.
pub const INBOUND_BYTES: usize = 64 << 20;
/// Shortest time between two status messages about one channel's bad payloads.
pub const STATUS_INTERVAL: Duration = Duration::from_secs(1);
/// Topics whose counts are kept (published to by clients since the bridge started).
pub const MAX_COUNTED_TOPICS: usize = 1024;

/// Why a client channel is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AdvertiseError {
    /// The message encoding is neither `cdr` nor `json`.
    #[error(
        "client channel {topic}: message encoding {encoding:?} is not supported (cdr or json)"
    )]
    Encoding {
        /// The channel's topic.
        topic: String,
        /// The encoding it advertised.
        encoding: String,
    },
    /// The schema name leads to no Nerve type.
    #[error("client channel {topic}: schema {schema} is not a type Nerve knows")]
    UnknownSchema {
        /// The channel's topic.
        topic: String,
        /// The schema name it advertised.
        schema: String,
    },
    /// The Nerve topic exists with another type.
    #[error(
        "client channel {topic}: it advertises {schema} ({advertised}), but the Nerve topic \
         {topic} has type {existing}"
    )]
    TypeMismatch {
        /// The channel's topic.
        topic: String,
        /// The schema name it advertised.
        schema: String,
        /// The Nerve type that schema name leads to (or `no Nerve type`).
        advertised: String,
        /// The Nerve topic's type.
        existing: String,
    },
    /// The Nerve publisher could not be made.
    #[error("client channel {topic}: cannot publish: {reason}")]
    Publisher {
        /// The channel's topic.
        topic: String,
        /// Why.
        reason: String,
    },
    /// Too many client channels are open.
    #[error("client channel {topic}: the bridge has {MAX_CLIENT_CHANNELS} client channels open")]
    TooMany {
        /// The channel's topic.
        topic: String,
    },
}

/// The Nerve type a client channel's schema name leads to, checked against the type of
/// the Nerve topic of that name (`existing`, if there is one). `known` holds the schemas
/// of the domain's topics, which lead back from the names the bridge advertises them under.
pub fn resolve(
    topic: &str,
    schema_name: &str,
    existing: Option<&Schema>,
    known: &[Schema],
) -> Result<Schema, AdvertiseError> {
    let advertised_as = |s: &Schema| {
        s.name == schema_name || Encoding::for_schema(s).is_ok_and(|e| e.schema_name == schema_name)
    };
    let candidate = Encoding::nerve_schema_of_ros(schema_name)
        .or_else(|| {
            nerve_msgs::schemas()
                .into_iter()
                .find(|s| s.name == schema_name)
        })
        .or_else(|| existing.filter(|e| advertised_as(e)).cloned())
        .or_else(|| known.iter().find(|s| advertised_as(s)).cloned());
    match (candidate, existing) {
        (Some(c), Some(e)) if c.layout_hash != e.layout_hash => Err(AdvertiseError::TypeMismatch {
            topic: topic.into(),
            schema: schema_name.into(),
            advertised: c.name,
            existing: e.name.clone(),
        }),
        (Some(c), _) => Ok(c),
        (None, Some(e)) => Err(AdvertiseError::TypeMismatch {
            topic: topic.into(),
            schema: schema_name.into(),
            advertised: "no Nerve type".into(),
            existing: e.name.clone(),
        }),
        (None, None) => Err(AdvertiseError::UnknownSchema {
            topic: topic.into(),
            schema: schema_name.into(),
        }),
    }
}

/// How a channel's payloads become Nerve payloads.
pub enum Decoder {
    /// CDR of the type's ROS 2 form.
    Cdr(Box<Encoding>),
    /// JSON with Nerve's field names.
    Json(Schema),
}

impl Decoder {
    /// The decoder of `encoding` for `schema`.
    pub fn new(topic: &str, encoding: &str, schema: &Schema) -> Result<Decoder, AdvertiseError> {
        match encoding {
            "cdr" => Encoding::for_schema(schema)
                .map(|e| Decoder::Cdr(Box::new(e)))
                .map_err(|e| AdvertiseError::Publisher {
                    topic: topic.into(),
                    reason: e.to_string(),
                }),
            "json" => Ok(Decoder::Json(schema.clone())),
            other => Err(AdvertiseError::Encoding {
                topic: topic.into(),
                encoding: other.into(),
            }),
        }
    }

    /// The Nerve payload of `bytes` into `out`, or why the bytes do not decode.
    pub fn decode(&self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        match self {
            Decoder::Cdr(e) => e.decode(bytes, out).map_err(|e| e.to_string()),
            Decoder::Json(schema) => {
                let v: serde_json::Value =
                    serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
                let (payload, _missing) =
                    nerve::message::json::from_json(schema, &v).map_err(|e| e.to_string())?;
                *out = payload;
                Ok(())
            }
        }
    }
}

/// Counts of one topic clients published to.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct InboundStats {
    /// Topic name.
    pub topic: String,
    /// Nerve type.
    pub type_name: String,
    /// Messages received from clients.
    pub received: u64,
    /// Messages published to Nerve.
    pub published: u64,
    /// Messages dropped because they did not decode against the advertised schema.
    pub malformed: u64,
    /// Messages dropped because the bridge's queue was full or the publish failed.
    pub dropped: u64,
    /// Client channels refused for this topic.
    pub refused: u64,
}

/// What the server's callbacks hand the publishing thread.
pub enum Inbound {
    /// A client advertised a channel.
    Advertise(Client, ClientChannel),
    /// A message on a client channel.
    Data(ClientId, ClientChannelId, Vec<u8>),
    /// A client channel went away.
    Unadvertise(ClientId, ClientChannelId),
}

/// The queues from the server's callbacks to the publishing thread: channel changes
/// (bounded by the channels that can be open) and messages ([`INBOUND_QUEUE`]).
pub struct Queues {
    control: Sender<Inbound>,
    data: Sender<Inbound>,
    /// Bytes queued in `data`.
    bytes: Arc<AtomicUsize>,
}

/// The publishing thread's ends of [`Queues`].
pub struct Receivers {
    control: Receiver<Inbound>,
    data: Receiver<Inbound>,
    bytes: Arc<AtomicUsize>,
}

impl Queues {
    /// New queues and their receiving ends.
    pub fn new() -> (Queues, Receivers) {
        let (control, crx) = bounded(2 * MAX_CLIENT_CHANNELS);
        let (data, drx) = bounded(INBOUND_QUEUE);
        let bytes = Arc::new(AtomicUsize::new(0));
        (
            Queues {
                control,
                data,
                bytes: bytes.clone(),
            },
            Receivers {
                control: crx,
                data: drx,
                bytes,
            },
        )
    }

    /// Queues an advertised channel (refused at once, with a status, if the queue is full).
    pub fn advertise(&self, client: Client, ch: &ClientChannel) {
        if self
            .control
            .try_send(Inbound::Advertise(client.clone(), ch.clone()))
            .is_err()
        {
            client.send_status(Status::error(
                AdvertiseError::TooMany {
                    topic: ch.topic.clone(),
                }
                .to_string(),
            ));
        }
    }

    /// Queues the end of a channel.
    pub fn unadvertise(&self, client: ClientId, id: ClientChannelId) {
        let _ = self.control.try_send(Inbound::Unadvertise(client, id));
    }

    /// Queues a message; false if the queue is full (the message is dropped).
    pub fn data(&self, client: ClientId, id: ClientChannelId, payload: &[u8]) -> bool {
        // SYNC: Relaxed: a bound on memory, not a guard of data; the queue itself hands
        // the bytes over
        let queued = self.bytes.fetch_add(payload.len(), Ordering::Relaxed);
        let sent = queued + payload.len() <= INBOUND_BYTES
            && self
                .data
                .try_send(Inbound::Data(client, id, payload.to_vec()))
                .is_ok();
        if !sent {
            self.bytes.fetch_sub(payload.len(), Ordering::Relaxed);
        }
        sent
    }
}

/// The schemas of the domain's topics by layout hash, as the bridge's discovery found
/// them.
pub type Known = Mutex<std::collections::HashMap<u64, Schema>>;

/// Counts per topic, shared with the bridge.
pub type Counts = Mutex<BTreeMap<String, InboundStats>>;

/// Adds to the counts of `topic` (a new topic is counted while fewer than
/// [`MAX_COUNTED_TOPICS`] are).
pub fn count(counts: &Counts, topic: &str, f: impl FnOnce(&mut InboundStats)) {
    let mut c = counts.lock().expect("poisoned");
    if !c.contains_key(topic) && c.len() >= MAX_COUNTED_TOPICS {
        return;
    }
    f(c.entry(topic.to_string()).or_insert_with(|| InboundStats {
        topic: topic.to_string(),
        ..InboundStats::default()
    }))
}

/// One open client channel.
struct Open {
    client: Client,
    topic: String,
    decoder: Decoder,
    publisher: RawPublisher,
    malformed: u64,
    last_status: Option<Instant>,
}

/// The publishing thread: opens a Nerve publisher per accepted client channel and
/// publishes what clients send, until `stop`.
pub fn run(ctx: &Context, rx: &Receivers, counts: &Counts, known: &Known, stop: &AtomicBool) {
    let Ok(node) = ctx.node("nerve_bridge_publish").create() else {
        return;
    };
    let mut open: HashMap<(ClientId, ClientChannelId), Open> = HashMap::new();
    let mut payload = Vec::new();
    let mut waiting: Option<Inbound> = None;
    while !stop.load(Ordering::Relaxed) {
        // channel changes first: a channel is open before its first message is handled
        let msg = if let Ok(m) = rx.control.try_recv() {
            m
        } else if let Some(m) = waiting.take() {
            m
        } else {
            crossbeam_channel::select! {
                recv(rx.control) -> m => match m { Ok(m) => m, Err(_) => break },
                recv(rx.data) -> m => {
                    // handled once the channel changes queued before it are
                    waiting = m.ok();
                    continue;
                }
                default(Duration::from_millis(50)) => continue,
            }
        };
        match msg {
            Inbound::Advertise(client, ch) => {
                let key = (client.id(), ch.id);
                match accept(&node, &ch, open.len(), known) {
                    Ok((decoder, publisher)) => {
                        open.insert(
                            key,
                            Open {
                                client,
                                topic: ch.topic.clone(),
                                decoder,
                                publisher,
                                malformed: 0,
                                last_status: None,
                            },
                        );
                    }
                    Err(e) => {
                        count(counts, &ch.topic, |c| c.refused += 1);
                        client.send_status(Status::error(e.to_string()));
                    }
                }
            }
            Inbound::Unadvertise(client, id) => {
                open.remove(&(client, id));
            }
            Inbound::Data(client, id, bytes) => {
                rx.bytes.fetch_sub(bytes.len(), Ordering::Relaxed);
                let Some(o) = open.get_mut(&(client, id)) else {
                    continue;
                };
                let type_name = &o.publisher.type_info().name;
                let outcome = o.decoder.decode(&bytes, &mut payload);
                let published = match &outcome {
                    Ok(()) => o.publisher.publish_bytes(&payload).is_ok(),
                    Err(_) => false,
                };
                count(counts, &o.topic, |c| {
                    c.type_name.clone_from(type_name);
                    c.received += 1;
                    match (&outcome, published) {
                        (Ok(()), true) => c.published += 1,
                        (Ok(()), false) => c.dropped += 1,
                        (Err(_), _) => c.malformed += 1,
                    }
                });
                if let Err(why) = outcome {
                    o.malformed += 1;
                    let due = o.last_status.is_none_or(|t| t.elapsed() >= STATUS_INTERVAL);
                    if due {
                        o.last_status = Some(Instant::now());
                        o.client.send_status(
                            Status::error(format!(
                                "{}: dropped a message that does not decode as {} \
                                 ({} dropped on this channel so far): {why}",
                                o.topic, type_name, o.malformed
                            ))
                            .with_id(format!("nerve-bridge-malformed-{}", o.topic)),
                        );
                    }
                }
            }
        }
    }
}

/// The decoder and publisher of an advertised channel, or why it is refused.
fn accept(
    node: &nerve::Node,
    ch: &ClientChannel,
    open: usize,
    known: &Known,
) -> Result<(Decoder, RawPublisher), AdvertiseError> {
    let topic = ch.topic.as_str();
    if open >= MAX_CLIENT_CHANNELS {
        return Err(AdvertiseError::TooMany {
            topic: topic.into(),
        });
    }
    nerve::name::validate_topic(topic).map_err(|e| AdvertiseError::Publisher {
        topic: topic.into(),
        reason: e.to_string(),
    })?;
    let info = nerve::introspect::topic_info(node, topic).ok();
    let existing = info.and_then(|i| i.schema).and_then(Result::ok);
    let known: Vec<Schema> = known.lock().expect("poisoned").values().cloned().collect();
    let schema = resolve(topic, &ch.schema_name, existing.as_ref(), &known)?;
    let decoder = Decoder::new(topic, &ch.encoding, &schema)?;
    let publisher = RawPublisher::create(node, topic, &schema, Qos::default()).map_err(|e| {
        AdvertiseError::Publisher {
            topic: topic.into(),
            reason: e.to_string(),
        }
    })?;
    Ok((decoder, publisher))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nerve::message::as_bytes;

    #[test]
    fn teleop_twist_leads_to_the_nerve_twist_and_decodes() {
        let s = resolve("/cmd_vel", "geometry_msgs/msg/Twist", None, &[]).unwrap();
        assert_eq!(s.name, "nerve_msgs/Twist");
        let d = Decoder::new("/cmd_vel", "cdr", &s).unwrap();
        let mut cdr = vec![0, 1, 0, 0];
        for v in [0.5f64, 0.0, 0.0, 0.0, 0.0, -1.0] {
            cdr.extend_from_slice(&v.to_le_bytes());
        }
        let mut out = Vec::new();
        d.decode(&cdr, &mut out).unwrap();
        let tw = nerve_msgs::Twist {
            linear: nerve_msgs::Vector3 {
                x: 0.5,
                ..Default::default()
            },
            angular: nerve_msgs::Vector3 {
                z: -1.0,
                ..Default::default()
            },
        };
        assert_eq!(out, as_bytes(&tw));
        // bytes that do not decode are an error, not a panic
        for cut in 0..cdr.len() {
            assert!(d.decode(&cdr[..cut], &mut out).is_err(), "cut at {cut}");
        }
        let j = Decoder::new("/cmd_vel", "json", &s).unwrap();
        j.decode(
            br#"{"linear": {"x": 0.5}, "angular": {"z": -1.0}}"#,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, as_bytes(&tw));
        assert!(j.decode(b"{not json", &mut out).is_err());
        assert!(matches!(
            Decoder::new("/cmd_vel", "protobuf", &s),
            Err(AdvertiseError::Encoding { .. })
        ));
    }

    #[test]
    fn a_type_other_than_the_topics_is_refused_naming_both() {
        let cmd = Schema::of::<nerve_msgs::CmdVel>();
        let e = resolve("/cmd_vel", "geometry_msgs/msg/Twist", Some(&cmd), &[]).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("geometry_msgs/msg/Twist (nerve_msgs/Twist)")
                && text.contains("has type nerve_msgs/CmdVel"),
            "{text}"
        );
        let e = resolve("/x", "pkg/msg/Nothing", Some(&cmd), &[]).unwrap_err();
        assert!(e.to_string().contains("no Nerve type"), "{e}");
        let e = resolve("/x", "pkg/msg/Nothing", None, &[]).unwrap_err();
        assert!(matches!(e, AdvertiseError::UnknownSchema { .. }), "{e}");
        // the name the bridge advertises a topic's type under leads back to it
        let odom = Schema::of::<nerve_msgs::Odometry>();
        let name = Encoding::for_schema(&odom).unwrap().schema_name;
        assert_eq!(resolve("/c", &name, Some(&odom), &[]).unwrap(), odom);
        assert_eq!(
            resolve("/c", &name, None, std::slice::from_ref(&odom)).unwrap(),
            odom
        );
        // a TwistStamped is not cut into a CmdVel without being asked (issue 42): it
        // is the exact nerve_msgs/TwistStamped, which the CmdVel topic refuses
        let name = Encoding::for_schema(&cmd).unwrap().schema_name;
        let e = resolve("/c", &name, Some(&cmd), &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("nerve_msgs/TwistStamped") && e.contains("nerve_msgs/CmdVel"),
            "{e}"
        );
    }
}
