//! Discovery across hosts: the liveliness tokens of every network endpoint (they vanish
//! when their process or host goes, within Zenoh's lease), and per-process counters of
//! network samples.

use super::{lock, plane, MAX_FRAME};
use crate::config::Config;
use crate::error::NetError;
use crate::message::schema::{Schema, MAX_SCHEMA_BYTES};
use crate::net::wire::WireError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use zenoh::Wait;

/// What a liveliness token stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntityKind {
    /// A topic publisher.
    Publisher,
    /// A topic subscriber.
    Subscriber,
    /// A service server.
    Server,
    /// A service client.
    Client,
    /// A node.
    Node,
}

impl EntityKind {
    /// The key chunk of this kind.
    pub(crate) fn chunk(self) -> &'static str {
        match self {
            EntityKind::Publisher => "pub",
            EntityKind::Subscriber => "sub",
            EntityKind::Server => "srv",
            EntityKind::Client => "cli",
            EntityKind::Node => "node",
        }
    }

    fn from_chunk(c: &str) -> Option<EntityKind> {
        Some(match c {
            "pub" => EntityKind::Publisher,
            "sub" => EntityKind::Subscriber,
            "srv" => EntityKind::Server,
            "cli" => EntityKind::Client,
            "node" => EntityKind::Node,
            _ => return None,
        })
    }
}

/// An endpoint or node on another host, as its liveliness token describes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteEntity {
    /// What it is.
    pub kind: EntityKind,
    /// Topic, service (with its leading `/`) or node name.
    pub name: String,
    /// Its host's name.
    pub host: String,
    /// Its host's id.
    pub host_id: String,
    /// Layout hash of its message type (0 for nodes).
    pub type_hash: u64,
    /// Its message or service type's name (`-` for nodes).
    pub type_name: String,
}

impl RemoteEntity {
    /// Parses a token key `nerve/d/live/<kind>/<host id>/<host>/<uid>/<hash>=<type>/<name>`.
    fn parse(key: &str) -> Option<RemoteEntity> {
        let mut it = key.splitn(9, '/');
        let (_, _, live) = (it.next()?, it.next()?, it.next()?);
        if live != "live" {
            return None;
        }
        let kind = EntityKind::from_chunk(it.next()?)?;
        let host_id = it.next()?.to_string();
        let host = it.next()?.to_string();
        let _uid = it.next()?;
        let (hash, type_name) = it.next()?.split_once('=')?;
        let type_hash = u64::from_str_radix(hash, 16).ok()?;
        let name = it.next()?;
        Some(RemoteEntity {
            kind,
            name: if kind == EntityKind::Node {
                name.to_string()
            } else {
                format!("/{name}")
            },
            host,
            host_id,
            type_hash,
            type_name: type_name.replace(':', "/"),
        })
    }
}

/// The endpoints and nodes of other hosts in the context's domain: after `window` (the
/// session may still be connecting when this is called), the liveliness tokens their
/// holders confirm, asked of the network rather than read from this session's view (which
/// was seen to keep some tokens of a process that had gone: see docs/design.md). Empty
/// when the network plane is off.
pub fn remote_entities(config: &Config, window: Duration) -> Result<Vec<RemoteEntity>, NetError> {
    let Some(plane) = plane(config)? else {
        return Ok(Vec::new());
    };
    let key = format!("nerve/{}/live/**", config.domain);
    let own = format!("{:016x}", plane.host);
    std::thread::sleep(window);
    // Replies go to a callback, not to Zenoh's default channel: Zenoh answers the tokens
    // this session already knows inside the `get` call itself, before it returns, and its
    // channel holds 256 replies, so a domain with more tokens than that blocked `get`
    // forever (`nerve topic list` with 1,000 topics, issue 46). The callback keeps at most
    // `MAX_REMOTE_TOKENS` keys of other hosts; Zenoh drops it (and so the sender) when the
    // query ends, which ends the loop below.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let mut kept = 0usize;
    plane
        .session
        .liveliness()
        .get(key)
        .timeout(window)
        .callback_mut(move |reply| {
            if let Ok(s) = reply.into_result() {
                let k = s.key_expr().as_str();
                if kept < super::MAX_REMOTE_TOKENS && k.split('/').nth(4) != Some(own.as_str()) {
                    kept += 1;
                    let _ = tx.send(k.to_string());
                }
            }
        })
        .wait()
        .map_err(|e| NetError::Discovery(e.to_string()))?;
    let mut seen = BTreeMap::new();
    for k in rx {
        if let Some(e) = RemoteEntity::parse(&k) {
            seen.insert(k, e);
        }
    }
    let mut out: Vec<RemoteEntity> = seen.into_values().collect();
    out.sort_by(|a, b| (a.kind, &a.name, &a.host).cmp(&(b.kind, &b.name, &b.host)));
    Ok(out)
}

/// This process's host name on the network plane (`None` while it is off).
pub fn local_host(config: &Config) -> Result<Option<String>, NetError> {
    Ok(plane(config)?.map(|p| p.host_name.clone()))
}

/// The network counters of a process's subscribers and publishers, by domain and topic.
pub(crate) type CounterMap = Mutex<HashMap<(u32, String), Arc<Counters>>>;

/// Network counters of one topic in one process.
#[derive(Default)]
pub(crate) struct Counters {
    arrived: AtomicU64,
    refused: Mutex<BTreeMap<&'static str, u64>>,
    sent: AtomicU64,
}

impl Counters {
    pub(crate) fn arrived(&self) {
        // SYNC: a statistic; nothing is published through it.
        self.arrived.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a refused frame; true if it is the topic's first refusal for that reason.
    pub(crate) fn refused(&self, e: &WireError) -> bool {
        let mut refused = lock(&self.refused);
        let n = refused.entry(e.label()).or_default();
        *n += 1;
        *n == 1
    }

    pub(crate) fn sent(&self) {
        // SYNC: a statistic; nothing is published through it.
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn refused_total(&self) -> u64 {
        lock(&self.refused).values().sum()
    }
}

/// Network counters of one topic, summed over a process's subscribers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicCounters {
    /// Topic name.
    pub topic: String,
    /// Valid samples that arrived from other hosts.
    pub arrived: u64,
    /// Frames refused, by reason (truncated, bad-magic, wrong-kind, length-mismatch,
    /// oversized, checksum, wrong-type), from Nerve on other hosts or any Zenoh publisher.
    pub refused: BTreeMap<String, u64>,
    /// Frames this process's publishers handed to Zenoh (one per sample and destination:
    /// Nerve's subscribers on other hosts, Zenoh subscribers outside Nerve). None while
    /// nobody listens.
    #[serde(default)]
    pub sent: u64,
}

/// One process's network counters, answered on `nerve/<d>/info/<host id>/<pid>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetCounters {
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Per topic.
    pub topics: Vec<TopicCounters>,
    /// Endpoints of this process that the access-control policy denies.
    #[serde(default)]
    pub denied: Vec<super::DeniedEndpoint>,
}

pub(crate) fn report(
    counters: &CounterMap,
    denied: &super::denied::DeniedMap,
    domain: u32,
    host: &str,
) -> Vec<u8> {
    let topics = lock(counters)
        .iter()
        .filter(|((d, _), _)| *d == domain)
        .map(|((_, topic), c)| TopicCounters {
            topic: topic.clone(),
            // SYNC: see Counters::arrived.
            arrived: c.arrived.load(Ordering::Relaxed),
            refused: lock(&c.refused)
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            // SYNC: see Counters::sent.
            sent: c.sent.load(Ordering::Relaxed),
        })
        .collect();
    serde_json::to_vec(&NetCounters {
        host: host.to_string(),
        pid: std::process::id(),
        topics,
        denied: super::denied::report(denied, domain),
    })
    .unwrap_or_default()
}

/// The schemas a process offers, by domain and layout hash (see `Plane::offer_schema`).
pub(crate) type SchemaMap = Mutex<HashMap<(u32, u64), std::sync::Weak<str>>>;

/// The schema a query `nerve/<d>/schema/<hash>/…` asks of this process, if it has it.
pub(crate) fn schema_for(map: &SchemaMap, domain: u32, key: &str) -> Option<(u64, Arc<str>)> {
    let hash = key.split('/').nth(3)?;
    let hash = u64::from_str_radix(hash, 16).ok()?;
    Some((hash, lock(map).get(&(domain, hash))?.upgrade()?))
}

/// The schema of the type with layout `hash`, asked of every process of the domain that
/// publishes it (on this host and others) within `timeout`: `None` if nobody answered.
/// Answers are checked, never trusted: one that is malformed, too large or describes
/// another layout is refused, and if no answer is usable the error names why.
pub fn remote_schema(
    config: &Config,
    hash: u64,
    timeout: Duration,
) -> Result<Option<Schema>, NetError> {
    let Some(plane) = plane(config)? else {
        return Ok(None);
    };
    let replies = plane
        .session
        .get(format!("nerve/{}/schema/{hash:016x}/**", config.domain))
        .timeout(timeout)
        .wait()
        .map_err(|e| NetError::Discovery(e.to_string()))?;
    let mut refused = None;
    for s in answers(replies) {
        let bytes = s.payload().to_bytes();
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_SCHEMA_BYTES + 1)]);
        match Schema::decode(&text) {
            Ok(schema) if schema.layout_hash == hash => return Ok(Some(schema)),
            Ok(schema) => {
                refused = Some(format!(
                    "the answer describes layout {:016x}",
                    schema.layout_hash
                ))
            }
            Err(e) => refused = Some(e.to_string()),
        }
    }
    match refused {
        Some(why) => Err(NetError::Discovery(format!(
            "schema of layout {hash:016x} from the network refused: {why}"
        ))),
        None => Ok(None),
    }
}

/// The network counters of every process of this domain that answers within `timeout`
/// (on this host and others). Empty when the network plane is off.
pub fn net_counters(config: &Config, timeout: Duration) -> Result<Vec<NetCounters>, NetError> {
    let Some(plane) = plane(config)? else {
        return Ok(Vec::new());
    };
    let replies = plane
        .session
        .get(format!("nerve/{}/info/**", config.domain))
        .timeout(timeout)
        .wait()
        .map_err(|e| NetError::Discovery(e.to_string()))?;
    Ok(answers(replies)
        .filter_map(|s| {
            let bytes = s.payload().to_bytes();
            (bytes.len() <= MAX_FRAME)
                .then(|| serde_json::from_slice::<NetCounters>(&bytes).ok())
                .flatten()
        })
        .collect())
}

/// The samples of every answer to a query, as they come (error replies left out).
fn answers(
    replies: zenoh::handlers::FifoChannelHandler<zenoh::query::Reply>,
) -> impl Iterator<Item = zenoh::sample::Sample> {
    std::iter::from_fn(move || replies.recv().ok()).filter_map(|r| r.into_result().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_keys_parse_back() {
        let e =
            RemoteEntity::parse("nerve/3/live/sub/00ff/robot-a/12-3/00000000000000ab=pkg:Imu/a/b")
                .unwrap();
        assert_eq!(e.type_name, "pkg/Imu");
        assert_eq!(e.kind, EntityKind::Subscriber);
        assert_eq!((e.name.as_str(), e.host.as_str()), ("/a/b", "robot-a"));
        assert_eq!(e.type_hash, 0xab);
        assert!(RemoteEntity::parse("nerve/3/live/zzz/0/h/u/0=-/a").is_none());
        assert!(RemoteEntity::parse("nerve/3/live/sub/0/h/u/nohash/a").is_none());
        assert!(RemoteEntity::parse("nerve/3/info/x").is_none());
    }
}
