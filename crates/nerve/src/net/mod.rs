//! The network plane: topics and services across hosts over Eclipse Zenoh.
//!
//! Each process opens one Zenoh session, lazily, when the first node of a context with
//! the network plane enabled is created (see [`crate::config::NetworkConfig`]). Shared
//! memory stays the route between processes of one host; Zenoh carries a sample only
//! when a subscriber on another host exists, which publishers learn from the liveliness
//! tokens every network endpoint declares.
//!
//! A *host* is the set of processes that share `/dev/shm`: the first Nerve process of a
//! host writes a random id to `/dev/shm/nerve_host_id_<uid>`, and every sample or call sent
//! over the network carries it, so a receiver drops what came from its own host (that
//! reached it through shared memory already).
//!
//! Key expressions, for domain `d` (the README's "The network plane's key space" is
//! the reference for Zenoh applications outside Nerve):
//! - `nerve/d/t/<topic>`: samples for Nerve's subscribers, which listen here (nothing else
//!   of Nerve does): from Nerve publishers while a subscriber on another host exists, and
//!   from any Zenoh publisher;
//! - `nerve/d/o/<topic>`: samples for Zenoh subscribers outside Nerve, sent while one
//!   matches (Zenoh's matching status). Nerve never subscribes here, so its subscribers on
//!   a publisher's own host never make a publisher send;
//! - `nerve/d/s/<service>`: queryables of servers; `nerve/d/h/<uid>/<topic>`: history of
//!   topics that keep it, for late joiners on other hosts;
//! - `nerve/d/live/<kind>/<host id>/<host name>/<uid>/<type hash>=<type>/<name>`: liveliness
//!   tokens of publishers (`pub`), subscribers (`sub`), servers (`srv`), clients (`cli`)
//!   and nodes (`node`);
//! - `nerve/d/info/<host id>/<pid>`: a queryable answering this process's network
//!   counters as JSON (for `nerve topic info`), with its endpoints the access-control
//!   policy denies.
//!
//! Access control: a policy file (`[network] policy`, `NERVE_POLICY`; see [`policy`])
//! adds Zenoh's `access_control` and mutual TLS to the session's configuration, and the
//! plane checks it for its own host as endpoints are declared (see `denied`).

mod denied;
mod discovery;
pub mod policy;
mod router;
mod service;
mod topic;
pub(crate) mod wire;

pub use denied::DeniedEndpoint;
pub use discovery::{
    local_host, net_counters, remote_entities, remote_schema, EntityKind, NetCounters,
    RemoteEntity, TopicCounters,
};
pub use router::{Router, DEFAULT_ROUTER_PORT};
pub use service::{MAX_QUERIES, NET_CALL_TIMEOUT};
pub use wire::{decode_call, decode_sample, seal, Frame, Kind, WireError};

use crate::message::TypeInfo;
use crate::qos::Qos;
use crate::transport::doorbell::SlotRef;
use crate::transport::remote::{
    RemoteClient, RemotePlane, RemotePublisher, RemoteServer, RemoteSubscriber,
};

use crate::config::{Config, NetworkConfig};
use crate::error::NetError;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use zenoh::sample::SampleKind;
use zenoh::Wait;

/// Largest frame accepted from the network (a sanity bound above every QoS limit).
pub const MAX_FRAME: usize = 1 << 30;

/// Remote liveliness tokens by key, with what was parsed from each.
pub(crate) type Tokens<T> = Arc<Mutex<BTreeMap<String, T>>>;

/// Most remote tokens one watch keeps (endpoints of one name, or of a whole domain for
/// discovery); tokens beyond it are ignored until others go, so a flood from the network
/// cannot grow the map without bound.
pub(crate) const MAX_REMOTE_TOKENS: usize = 16_384;

/// This process's Zenoh session and the identity of its host.
pub(crate) struct Plane {
    pub(crate) session: zenoh::Session,
    /// Random id shared by every process of this host (see the module docs).
    pub(crate) host: u64,
    /// Host name shown in discovery (a valid key chunk).
    pub(crate) host_name: String,
    next_uid: AtomicU64,
    /// Network counters of this process's subscribers and publishers, by domain and topic.
    pub(crate) counters: Arc<discovery::CounterMap>,
    /// Schemas of the types this process publishes, by domain and layout hash; an entry
    /// lives while a publisher holds its text.
    pub(crate) schemas: Arc<discovery::SchemaMap>,
    /// The access-control policy this process runs under, if any.
    pub(crate) policy: Option<Arc<policy::Policy>>,
    /// This process's endpoints the policy denies, while they live.
    pub(crate) denied: Arc<denied::DeniedMap>,
    /// Counter and schema queryables, per domain.
    info: Mutex<HashMap<u32, [zenoh::query::Queryable<()>; 2]>>,
}

impl Plane {
    /// A process-unique id for a token.
    pub(crate) fn uid(&self) -> String {
        format!(
            "{}-{}",
            std::process::id(),
            self.next_uid.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// The liveliness key of an entity of this process: its type is named by its layout
    /// hash and (for people) its name.
    pub(crate) fn token_key(
        &self,
        domain: u32,
        kind: EntityKind,
        (type_name, type_hash): (&str, u64),
        name: &str,
    ) -> String {
        format!(
            "nerve/{domain}/live/{}/{:016x}/{}/{}/{type_hash:016x}={}/{}",
            kind.chunk(),
            self.host,
            self.host_name,
            self.uid(),
            key_chunk(&type_name.replace('/', ":")),
            name.trim_start_matches('/')
        )
    }

    /// Declares a liveliness token.
    pub(crate) fn token(
        &self,
        key: String,
    ) -> Result<zenoh::liveliness::LivelinessToken, NetError> {
        self.session
            .liveliness()
            .declare_token(key.clone())
            .wait()
            .map_err(|e| NetError::Declare {
                what: "liveliness token",
                key,
                reason: e.to_string(),
            })
    }

    /// Follows the liveliness tokens under `key` of other hosts: `parse` turns a token's
    /// key into what is kept (or nothing), `changed` hears the count after every change.
    /// The map holds each token's value until the token goes.
    pub(crate) fn watch_tokens<T: Send + 'static>(
        &self,
        key: String,
        parse: impl Fn(&str) -> Option<T> + Send + Sync + 'static,
        changed: impl Fn(usize) + Send + Sync + 'static,
    ) -> Result<(Tokens<T>, zenoh::pubsub::Subscriber<()>), NetError> {
        let own = format!("{:016x}", self.host);
        let seen: Tokens<T> = Arc::default();
        let s2 = seen.clone();
        let sub = self
            .session
            .liveliness()
            .declare_subscriber(key.clone())
            .history(true)
            .callback(move |s| {
                let k = s.key_expr().as_str();
                // nerve/<d>/live/<kind>/<host id>/…: this host's tokens are not remote
                if k.split('/').nth(4) == Some(own.as_str()) {
                    return;
                }
                let mut seen = lock(&s2);
                match s.kind() {
                    SampleKind::Put => {
                        if let Some(v) = parse(k) {
                            keep_token(&mut seen, MAX_REMOTE_TOKENS, k, v);
                        }
                    }
                    SampleKind::Delete => {
                        seen.remove(k);
                    }
                }
                changed(seen.len());
            })
            .wait()
            .map_err(|e| NetError::Declare {
                what: "liveliness subscriber",
                key,
                reason: e.to_string(),
            })?;
        Ok((seen, sub))
    }

    /// The network counters of `topic`, shared by its subscribers and publishers here.
    /// Counters of topics whose endpoints have all gone are dropped here, so the map
    /// holds the topics this process subscribes or publishes now.
    pub(crate) fn counters(&self, domain: u32, topic: &str) -> Arc<discovery::Counters> {
        self.ensure_info(domain);
        let mut map = lock(&self.counters);
        map.retain(|_, c| Arc::strong_count(c) > 1);
        map.entry((domain, topic.to_string())).or_default().clone()
    }

    /// Offers the schema `text` of layout `hash` to other hosts while the returned text
    /// lives (publishers hold it). Entries of types nobody publishes any more are dropped
    /// here, so the map holds the types this process publishes now.
    pub(crate) fn offer_schema(&self, domain: u32, hash: u64, text: &str) -> Arc<str> {
        self.ensure_info(domain);
        let mut map = lock(&self.schemas);
        map.retain(|_, t| t.strong_count() > 0);
        if let Some(t) = map.get(&(domain, hash)).and_then(|t| t.upgrade()) {
            return t;
        }
        let t: Arc<str> = Arc::from(text);
        map.insert((domain, hash), Arc::downgrade(&t));
        t
    }

    /// Declares this process's queryables of `domain` once: its network counters
    /// (`nerve/<d>/info/<host id>/<pid>`) and the schemas of its types
    /// (`nerve/<d>/schema/<hash>/<host id>/<pid>`).
    pub(crate) fn ensure_info(&self, domain: u32) {
        let mut info = lock(&self.info);
        if info.contains_key(&domain) {
            return;
        }
        let me = format!("{:016x}/{}", self.host, std::process::id());
        let counters = self.counters.clone();
        let denied = self.denied.clone();
        let host_name = self.host_name.clone();
        let info_key = format!("nerve/{domain}/info/{me}");
        let counters_q = self
            .session
            .declare_queryable(info_key.clone())
            .callback(move |query| {
                let report = discovery::report(&counters, &denied, domain, &host_name);
                // on this process's own key: replies on one key are consolidated into
                // one (Zenoh's default for a get), so answering on the query's
                // `info/**` left one process's answer of all
                let _ = query.reply(info_key.clone(), report).wait();
            })
            .wait();
        let (schemas, me2) = (self.schemas.clone(), me.clone());
        let schemas_q = self
            .session
            .declare_queryable(format!("nerve/{domain}/schema/*/{me}"))
            .callback(move |query| {
                if let Some((hash, text)) =
                    discovery::schema_for(&schemas, domain, query.key_expr())
                {
                    let key = format!("nerve/{domain}/schema/{hash:016x}/{me2}");
                    let _ = query.reply(key, &*text).wait();
                }
            })
            .wait();
        if let (Ok(c), Ok(s)) = (counters_q, schemas_q) {
            info.insert(domain, [c, s]);
        }
    }
}

impl RemotePlane for Plane {
    fn node(&self, domain: u32, name: &str) -> Result<Box<dyn std::any::Any>, NetError> {
        let key = self.token_key(domain, EntityKind::Node, ("-", 0), name);
        Ok(Box::new(self.token(key)?))
    }

    fn publisher(
        &self,
        domain: u32,
        topic: &str,
        (ty, schema): (&TypeInfo, Option<&str>),
        qos: &Qos,
        history: usize,
    ) -> Result<Box<dyn RemotePublisher>, NetError> {
        if let Some(d) = self.denied(domain, policy::Action::Publish, topic) {
            return Ok(Box::new(denied::DeniedPublisher::new(
                self, domain, topic, d,
            )?));
        }
        Ok(Box::new(topic::NetPublisher::new(
            self,
            domain,
            topic,
            (ty, schema),
            qos,
            history,
        )?))
    }

    fn subscriber(
        &self,
        slot: SlotRef,
        domain: u32,
        topic: &str,
        ty: &TypeInfo,
        qos: &Qos,
    ) -> Result<Box<dyn RemoteSubscriber>, NetError> {
        if let Some(d) = self.denied(domain, policy::Action::Subscribe, topic) {
            return Ok(Box::new(denied::DeniedEndpointSide::new(d)));
        }
        Ok(Box::new(topic::NetSubscriber::new(
            self, slot, domain, topic, ty, qos,
        )?))
    }

    fn server(
        &self,
        slot: SlotRef,
        domain: u32,
        name: &str,
        service: (&str, &TypeInfo),
        max_request: usize,
        depth: usize,
    ) -> Result<Box<dyn RemoteServer>, NetError> {
        if let Some(d) = self.denied(domain, policy::Action::Serve, name) {
            return Ok(Box::new(denied::DeniedEndpointSide::new(d)));
        }
        Ok(Box::new(service::NetServer::new(
            self,
            slot,
            domain,
            name,
            service,
            max_request,
            depth,
        )?))
    }

    fn client(
        &self,
        domain: u32,
        name: &str,
        service: (&str, &TypeInfo),
    ) -> Result<Box<dyn RemoteClient>, NetError> {
        if let Some(d) = self.denied(domain, policy::Action::Call, name) {
            return Ok(Box::new(denied::DeniedEndpointSide::new(d)));
        }
        Ok(Box::new(service::NetClient::new(
            self, domain, name, service,
        )?))
    }
}

/// Keeps token `key` in `seen` unless `cap` others are kept already (a flood from the
/// network cannot grow the map without bound; tokens beyond the cap are ignored until
/// others go).
fn keep_token<T>(seen: &mut BTreeMap<String, T>, cap: usize, key: &str, value: T) {
    if seen.len() < cap || seen.contains_key(key) {
        seen.insert(key.to_string(), value);
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The process's plane for `config`: `None` while the network plane is off; opened on
/// first use. One session serves the process: a context asking for other network settings
/// than the open plane's gets an error naming both; a failed open is not remembered, so
/// a later context may try again (a file fixed, a port freed).
pub(crate) fn plane(config: &Config) -> Result<Option<Arc<Plane>>, NetError> {
    static PLANE: Mutex<Option<(NetworkConfig, Arc<Plane>)>> = Mutex::new(None);
    if !config.network.enabled {
        return Ok(None);
    }
    let mut open_plane = lock(&PLANE);
    if let Some((settings, plane)) = open_plane.as_ref() {
        if *settings != config.network {
            return Err(NetError::Config {
                path: describe_settings(&config.network),
                reason: format!(
                    "this process's network plane is already open with {}; one Zenoh \
                     session serves a process",
                    describe_settings(settings)
                ),
            });
        }
        return Ok(Some(plane.clone()));
    }
    let plane = Arc::new(open(config)?);
    *open_plane = Some((config.network.clone(), plane.clone()));
    Ok(Some(plane))
}

fn describe_settings(n: &NetworkConfig) -> String {
    let policy = match &n.policy {
        Some(p) => format!(", policy {}", p.display()),
        None => String::new(),
    };
    match &n.zenoh_config {
        Some(path) => format!("{} (host name {:?}{policy})", path.display(), n.host_name),
        None => format!("Zenoh's defaults (host name {:?}{policy})", n.host_name),
    }
}

fn open(config: &Config) -> Result<Plane, NetError> {
    let mut zc = match &config.network.zenoh_config {
        Some(path) => zenoh::Config::from_file(path).map_err(|e| NetError::Config {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?,
        None => zenoh::Config::default(),
    };
    // processes of one host meet through Nerve's own shared memory
    zc.insert_json5("transport/shared_memory/enabled", "false")
        .map_err(|e| NetError::Open(e.to_string()))?;
    bound_blocking_push(&mut zc)?;
    let host_name = key_chunk(
        &config
            .network
            .host_name
            .clone()
            .unwrap_or_else(kernel_host_name),
    );
    let policy = match &config.network.policy {
        Some(path) => {
            let p = policy::Policy::load(path)?;
            let mode = zc.get_json("mode").unwrap_or_default();
            p.apply(&mut zc, &host_name)
                .and_then(|()| {
                    p.check_links(
                        mode.trim_matches('"'),
                        &listen_endpoints(&zc),
                        &connect_endpoints(&zc),
                    )
                })
                .map_err(|reason| NetError::Config {
                    path: path.display().to_string(),
                    reason,
                })?;
            Some(Arc::new(p))
        }
        None => None,
    };
    let session = match zenoh::open(zc.clone()).wait() {
        Ok(s) => s,
        Err(e) if e.to_string().contains("Address already in use") => {
            // another process of this host holds the configured port: listen on a free
            // port of the same address and join through that process (gossip tells the
            // other hosts where we are)
            let taken = listen_endpoints(&zc);
            let free: Vec<String> = taken.iter().map(|e| with_port_zero(e)).collect();
            let connect: Vec<String> = taken
                .iter()
                .map(|e| e.replace("0.0.0.0", "127.0.0.1"))
                .collect();
            let json = |v: &[String]| serde_json::to_string(v).unwrap_or_default();
            zc.insert_json5("listen/endpoints", &json(&free))
                .and_then(|_| {
                    zc.insert_json5(
                        "connect/endpoints",
                        &json(&[connect, connect_endpoints(&zc)].concat()),
                    )
                })
                .map_err(|e| NetError::Open(e.to_string()))?;
            zenoh::open(zc)
                .wait()
                .map_err(|e| NetError::Open(e.to_string()))?
        }
        Err(e) => return Err(NetError::Open(e.to_string())),
    };
    Ok(Plane {
        session,
        host: host_id().map_err(|e| NetError::Open(format!("host id: {e}")))?,
        host_name,
        next_uid: AtomicU64::new(1),
        counters: Arc::default(),
        schemas: Arc::default(),
        policy,
        denied: Arc::default(),
        info: Mutex::default(),
    })
}

/// Longest a reliable (blocking) push waits for room in one peer's queue before Zenoh
/// gives that peer up: `Qos::reliable()`'s back-pressure timeout. Zenoh's own default
/// (5 s) let a stopped host hold every publisher of reliable topics to it, and with them
/// their local subscribers, for 5 s (`cross_host`, a stopped host).
const MAX_BLOCKING_PUSH_US: u64 = 1_000_000;

/// Makes a reliable (blocking) push to an unresponsive peer give up, and close that
/// transport, within [`MAX_BLOCKING_PUSH_US`] and within half the link lease; a shorter
/// setting of the configuration file is kept. Above a shorter lease, a link that came back
/// between the two was taken down again by the stale transport's close, and the peer that
/// connects never reconnected: a reliable stream stopped for good after a 2 to 5 s cut
/// with a 2 s lease (`cross_host`, a link cut; upstream: zenoh#1886).
fn bound_blocking_push(zc: &mut zenoh::Config) -> Result<(), NetError> {
    const KEY: &str = "transport/link/tx/queue/congestion_control/block/wait_before_close";
    let number = |key: &str| -> Option<u64> { zc.get_json(key).ok()?.trim().parse().ok() };
    let (Some(lease_ms), Some(wait_us)) = (number("transport/link/tx/lease"), number(KEY)) else {
        return Ok(());
    };
    let limit_us = (lease_ms.saturating_mul(1000) / 2).min(MAX_BLOCKING_PUSH_US);
    if wait_us > limit_us {
        zc.insert_json5(KEY, &limit_us.to_string())
            .map_err(|e| NetError::Open(e.to_string()))?;
    }
    Ok(())
}

/// The endpoints of a list-valued setting (a per-mode object gives its peer list).
fn endpoints(zc: &zenoh::Config, key: &str) -> Vec<String> {
    let Ok(text) = zc.get_json(key) else {
        return Vec::new();
    };
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let list = if v.is_object() { &v["peer"] } else { &v };
    list.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn listen_endpoints(zc: &zenoh::Config) -> Vec<String> {
    endpoints(zc, "listen/endpoints")
}

fn connect_endpoints(zc: &zenoh::Config) -> Vec<String> {
    endpoints(zc, "connect/endpoints")
}

/// `proto/addr:port[?…][#…]` with port 0.
fn with_port_zero(endpoint: &str) -> String {
    let end = endpoint.find(['?', '#']).unwrap_or(endpoint.len());
    let (locator, rest) = endpoint.split_at(end);
    match locator.rfind(':') {
        Some(i) => format!("{}:0{rest}", &locator[..i]),
        None => endpoint.to_string(),
    }
}

/// `s` made a valid key chunk: characters other than letters, digits, `-`, `_` and `.`
/// become `_`.
fn key_chunk(s: &str) -> String {
    let c: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if c.is_empty() {
        "host".into()
    } else {
        c
    }
}

fn kernel_host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "host".into())
}

/// Path of the host id of this Unix user: its directory is what defines a host (see the
/// module docs). Per user, because Nerve's shared-memory files are owner-only: processes
/// of two users never meet through shared memory, so to the network plane they are two
/// hosts (and no user can pre-create or rewrite another user's id).
fn host_id_file() -> String {
    let uid = rustix::process::getuid().as_raw();
    format!("/dev/shm/nerve_host_id_{uid}")
}

/// This host's id: read from [`host_id_file`], created (atomically) by the first process.
fn host_id() -> std::io::Result<u64> {
    if let Some(id) = read_host_id(&host_id_file())? {
        return Ok(id);
    }
    let file = host_id_file();
    let mut raw = [0u8; 8];
    let n = rustix::rand::getrandom(&mut raw, rustix::rand::GetRandomFlags::empty())?;
    if n != raw.len() {
        return Err(std::io::Error::other("getrandom returned too few bytes"));
    }
    let id = u64::from_le_bytes(raw) | 1;
    crate::sys::files::create_private(&file, format!("{id:016x}\n").as_bytes())?;
    read_host_id(&file)?.ok_or_else(|| std::io::Error::other(format!("{file} vanished")))
}

/// Reads the host id file (see [`crate::sys::files::read_private`] for what is refused).
fn read_host_id(file: &str) -> std::io::Result<Option<u64>> {
    let Some(bytes) = crate::sys::files::read_private(file, 64)? else {
        return Ok(None);
    };
    let s = String::from_utf8_lossy(&bytes);
    u64::from_str_radix(s.trim(), 16)
        .map(Some)
        .map_err(|e| std::io::Error::other(format!("{file}: {e}")))
}

/// Key of a topic's samples.
pub(crate) fn topic_key(domain: u32, topic: &str) -> String {
    format!("nerve/{domain}/t/{}", topic.trim_start_matches('/'))
}

/// Key of a topic's samples for Zenoh subscribers outside Nerve.
pub(crate) fn outside_key(domain: u32, topic: &str) -> String {
    format!("nerve/{domain}/o/{}", topic.trim_start_matches('/'))
}

/// Key of a service's queryables.
pub(crate) fn service_key(domain: u32, service: &str) -> String {
    format!("nerve/{domain}/s/{}", service.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocking_push_gives_up_within_a_second_and_half_the_lease() {
        let wait = |lease_ms: Option<u64>, wait_us: Option<u64>| {
            let mut zc = zenoh::Config::default();
            let key = "transport/link/tx/queue/congestion_control/block/wait_before_close";
            if let Some(l) = lease_ms {
                zc.insert_json5("transport/link/tx/lease", &l.to_string())
                    .unwrap();
            }
            if let Some(w) = wait_us {
                zc.insert_json5(key, &w.to_string()).unwrap();
            }
            bound_blocking_push(&mut zc).unwrap();
            zc.get_json(key).unwrap().parse::<u64>().unwrap()
        };
        assert_eq!(
            wait(None, None),
            1_000_000,
            "Zenoh's defaults: 10 s lease, 5 s wait"
        );
        assert_eq!(wait(Some(2000), None), 1_000_000);
        assert_eq!(wait(Some(1000), None), 500_000, "half a shorter lease");
        assert_eq!(
            wait(None, Some(200_000)),
            200_000,
            "a shorter setting is kept"
        );
    }

    #[test]
    fn token_maps_stop_at_their_cap_until_others_go() {
        let mut seen = BTreeMap::new();
        for k in ["a", "b", "c", "d"] {
            keep_token(&mut seen, 3, k, ());
        }
        assert_eq!(
            seen.keys().collect::<Vec<_>>(),
            ["a", "b", "c"],
            "d is ignored"
        );
        keep_token(&mut seen, 3, "a", ());
        assert_eq!(seen.len(), 3, "a known token is updated, not added");
        seen.remove("b");
        keep_token(&mut seen, 3, "d", ());
        assert!(seen.contains_key("d"), "room again once one went");
    }

    #[test]
    fn host_names_become_key_chunks() {
        assert_eq!(key_chunk("robot-1.lab"), "robot-1.lab");
        assert_eq!(key_chunk("a/b*c$"), "a_b_c_");
        assert_eq!(key_chunk(""), "host");
    }

    #[test]
    fn taken_ports_become_free_ones() {
        assert_eq!(with_port_zero("tcp/10.0.0.1:7447"), "tcp/10.0.0.1:0");
        assert_eq!(with_port_zero("tls/[::1]:7447?rel=1"), "tls/[::1]:0?rel=1");
    }

    #[test]
    fn the_host_id_is_stable() {
        assert_eq!(host_id().unwrap(), host_id().unwrap());
    }

    /// A host id file that others may write, or a link, is refused by name.
    #[test]
    fn host_id_files_others_can_set_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let path = format!("/dev/shm/nerve_test_host_id_{}", std::process::id());
        std::fs::write(&path, "00000000000000ff\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_host_id(&path).unwrap(), Some(0xff));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = read_host_id(&path).unwrap_err().to_string();
        assert!(e.contains(&path) && e.contains("mode 666"), "{e}");
        let link = format!("{path}_link");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(
            read_host_id(&link).is_err(),
            "a symbolic link is not followed"
        );
        std::fs::write(&path, "not hex").unwrap();
        assert!(read_host_id(&path).unwrap_err().to_string().contains(&path));
        std::fs::remove_file(&link).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(read_host_id(&path).unwrap(), None, "missing: none yet");
    }

    /// A failed open is not remembered (a fixed file works next time), and a context that
    /// asks for other settings than the open plane's is told so by name. Loopback only,
    /// no multicast scouting.
    #[test]
    fn plane_errors_are_not_cached_and_conflicts_are_named() {
        let dir = std::env::temp_dir().join(format!("nerve-plane-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("zenoh.json5");
        let with_file = |path: &std::path::Path, host: &str| {
            let mut c = Config::default().network(true);
            c.network.zenoh_config = Some(path.to_path_buf());
            c.network.host_name = Some(host.into());
            c
        };
        std::fs::write(&file, "{ this is not json5").unwrap();
        let bad = plane(&with_file(&file, "a"))
            .err()
            .expect("a malformed file fails");
        assert!(bad.to_string().contains("zenoh.json5"), "{bad}");
        std::fs::write(
            &file,
            "{ mode: \"peer\", listen: { endpoints: [\"tcp/127.0.0.1:0\"] }, \
             scouting: { multicast: { enabled: false }, gossip: { enabled: false } } }",
        )
        .unwrap();
        let good = with_file(&file, "a");
        let p = plane(&good).unwrap().expect("the fixed file opens");
        assert!(
            Arc::ptr_eq(&p, &plane(&good).unwrap().unwrap()),
            "one per process"
        );
        let other = plane(&with_file(&file, "b"))
            .err()
            .expect("other settings conflict");
        assert!(other.to_string().contains("already open"), "{other}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
