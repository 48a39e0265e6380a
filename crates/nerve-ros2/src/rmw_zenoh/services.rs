//! Services both ways in the bridge's rmw_zenoh mode (one thread), with the service
//! table of the DDS mode ([`crate::services`]: standard services become Nerve's own, any
//! other crosses as CDR carriers).
//!
//! - A ROS 2 server (its `SS` token) is offered to Nerve: the bridge serves the service
//!   in Nerve and sends each request as rmw_zenoh's clients do (a query of the server's
//!   key with the attachment, under the bridge's `SC` token); the reply answers the Nerve
//!   call. When the ROS 2 server goes away mid-call, the Nerve call fails at once.
//! - A Nerve server (not the bridge's) of a type with a ROS 2 form is offered to ROS 2:
//!   a complete queryable with its `SS` token, announced with the service type's RIHS01
//!   hash when its definition is known (`TypeHashNotSupported` otherwise) and answering
//!   queries of any hash; each reply carries the request's sequence number and client
//!   GID, as rmw_zenoh's servers write them.
//! - Loops: ROS 2 servers of bridges are not offered to Nerve, requests from bridges'
//!   clients are not answered, and this session neither queries its own queryables nor
//!   hears its own queries.

use super::bridge::Shared;
use super::names::TYPE_HASH_NOT_SUPPORTED;
use super::side::{Received, RosClient, RosRequest, RosService};
use super::Qos;
use crate::services::{
    route_of_nerve, service_route, ServiceForm, ServiceRoute, CALL_TIMEOUT, MAX_PENDING,
};
use crate::types::{Carrier, Catalog};
use crate::{BridgeConfig, BridgeError, Event, Kind};
use nerve::service::ServiceType;
use nerve::{CallError, Node, RawClient, RawPendingCall, RawRequest, RawServer};
use nerve::{ServiceQos, WaitMode};
use nerve_ros2_types::{Registry, SearchPath};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the thread looks at requests and replies while services cross.
const TICK: Duration = Duration::from_millis(1);

/// The type hash a bridge's queryable of `route` announces: the RIHS01 hash of the
/// service type (`pkg/srv/Name`: its request, response and event) from the carrier's
/// definitions or the search path, else `TypeHashNotSupported` (as Humble announces;
/// the queryable answers every hash either way).
pub(crate) fn service_type_hash(route: &ServiceRoute, search: &[std::path::PathBuf]) -> String {
    let of_carrier = match &route.form {
        ServiceForm::Cdr { request, .. } => match &request.carrier {
            Carrier::Cdr(pass) => pass.registry().type_hash(&route.ros_type).ok(),
            Carrier::Native(_) => None,
        },
        ServiceForm::Native(_) => None,
    };
    of_carrier
        .or_else(|| {
            let mut path = SearchPath::new();
            for d in search {
                path.push_dir(d.clone());
            }
            let mut r = Registry::new();
            r.load(&route.ros_type, &path).ok()?;
            r.type_hash(&route.ros_type).ok()
        })
        .map_or_else(|| TYPE_HASH_NOT_SUPPORTED.to_owned(), |h| h.to_string())
}

/// A Nerve server offered to rmw_zenoh clients.
struct ToNerve {
    route: ServiceRoute,
    client: RawClient,
    _service: RosService,
    requests: Receiver<RosRequest>,
    pending: Vec<(RawPendingCall, RosRequest, Instant)>,
}

/// A ROS 2 server offered to Nerve clients.
struct ToRos {
    route: ServiceRoute,
    server: RawServer,
    /// The server's type hash (the key its queryable serves).
    hash: String,
    client: RosClient,
    replies: Receiver<(i64, Result<Received, String>)>,
    reply_tx: SyncSender<(i64, Result<Received, String>)>,
    pending: HashMap<i64, (RawRequest, Instant)>,
}

/// The services half of a rmw_zenoh bridge (one thread).
pub(super) struct Services {
    shared: Arc<Shared>,
    config: BridgeConfig,
    node: Node,
    catalog: Catalog,
    to_nerve: BTreeMap<String, ToNerve>,
    to_ros: BTreeMap<String, ToRos>,
    /// Names whose failure was reported (once; tried again each refresh).
    reported: HashSet<String>,
    scratch: Vec<u8>,
}

impl Services {
    pub(super) fn new(shared: Arc<Shared>, config: BridgeConfig, node: Node) -> Services {
        Services {
            catalog: Catalog::of(&config),
            shared,
            config,
            node,
            to_nerve: BTreeMap::new(),
            to_ros: BTreeMap::new(),
            reported: HashSet::new(),
            scratch: Vec::new(),
        }
    }

    /// Runs until the bridge stops.
    pub(super) fn run(mut self) {
        let mut next_refresh = Instant::now();
        while !self.shared.stop.load(Ordering::Relaxed) {
            if Instant::now() >= next_refresh {
                self.sync();
                next_refresh = Instant::now() + self.config.refresh;
            }
            if self.to_nerve.is_empty() && self.to_ros.is_empty() {
                std::thread::sleep(next_refresh.saturating_duration_since(Instant::now()));
                continue;
            }
            self.pump();
            std::thread::sleep(TICK);
        }
    }

    fn report(&mut self, name: &str, reason: String) {
        if self.reported.insert(name.to_owned()) {
            self.shared.event(Event::NotBridged {
                topic: name.to_owned(),
                reason,
            });
        }
    }

    /// Whether `name` is a service this mode carries (parameter and action services are
    /// not: as in the DDS mode, they belong to their own halves).
    fn carried(&self, name: &str) -> bool {
        self.config.admits(name)
            && !crate::params::is_param_service(name)
            && !name.contains("/_action/")
    }

    fn sync(&mut self) {
        let primary = self.shared.primary();
        let peers = self.shared.peers();
        // ROS 2 servers that are not bridges': name → (type, hash)
        let mut ros_servers: BTreeMap<String, (String, String)> = BTreeMap::new();
        if primary {
            for e in self.shared.side.graph().service_servers() {
                if self.shared.is_bridge(e, &peers) {
                    continue;
                }
                let Some(t) = &e.token.topic else { continue };
                if self.carried(&t.name) {
                    ros_servers
                        .entry(t.name.clone())
                        .or_insert_with(|| (t.ros_type.clone(), t.type_hash.to_string()));
                }
            }
        }
        // a ROS 2 server that went away (or changed its type): its Nerve server goes,
        // pending calls fail now
        let gone: Vec<String> = self
            .to_ros
            .iter()
            .filter(|(n, s)| {
                ros_servers
                    .get(*n)
                    .is_none_or(|(ty, hash)| *ty != s.route.ros_type || *hash != s.hash)
            })
            .map(|(n, _)| n.clone())
            .collect();
        for n in gone {
            if let Some(s) = self.to_ros.remove(&n) {
                for (_, (req, _)) in s.pending {
                    let _ = req.server_gone(&format!("the ROS 2 server of {n} went away"));
                }
            }
        }
        for (name, (ty, hash)) in &ros_servers {
            if self.to_ros.contains_key(name) {
                continue;
            }
            match self.offer_to_nerve(name, ty, hash) {
                Ok(s) => {
                    self.shared.event(Event::Bridged {
                        kind: Kind::Service,
                        topic: name.clone(),
                        ros_type: ty.clone(),
                        nerve_type: s.route.nerve_type.name.clone(),
                        to_ros: false,
                    });
                    self.to_ros.insert(name.clone(), s);
                }
                Err(e) => self.report(name, e.to_string()),
            }
        }
        // Nerve servers that are not the bridge's own
        let nerve_servers: Vec<nerve::introspect::ServiceInfo> = if primary {
            nerve::introspect::list_services(&self.node).unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut live = HashSet::new();
        for info in &nerve_servers {
            let ours = usize::from(self.to_ros.contains_key(&info.name));
            if info.servers <= ours
                || !self.carried(&info.name)
                || ros_servers.contains_key(&info.name)
            {
                continue;
            }
            live.insert(info.name.clone());
            if self.to_nerve.contains_key(&info.name) {
                continue;
            }
            let ty = ServiceType::new(
                info.type_name.clone(),
                info.request.clone(),
                info.response.clone(),
            );
            let Some(route) = route_of_nerve(&mut self.catalog, &ty) else {
                let name = info.name.clone();
                self.report(&name, format!("{} has no ROS 2 form", info.type_name));
                continue;
            };
            match self.offer_to_ros(&info.name, route) {
                Ok(s) => {
                    self.shared.event(Event::Bridged {
                        kind: Kind::Service,
                        topic: info.name.clone(),
                        ros_type: s.route.ros_type.clone(),
                        nerve_type: info.type_name.clone(),
                        to_ros: true,
                    });
                    self.to_nerve.insert(info.name.clone(), s);
                }
                Err(e) => {
                    let name = info.name.clone();
                    self.report(&name, e.to_string());
                }
            }
        }
        self.to_nerve.retain(|n, _| live.contains(n));
        self.reported
            .retain(|n| live.contains(n) || ros_servers.contains_key(n));
    }

    fn offer_to_nerve(
        &mut self,
        name: &str,
        ros_type: &str,
        hash: &str,
    ) -> Result<ToRos, BridgeError> {
        let route = service_route(&mut self.catalog, ros_type)?;
        let server = RawServer::create(
            &self.node,
            name,
            &route.nerve_type,
            ServiceQos::default(),
            WaitMode::Block,
        )
        .map_err(|e| BridgeError::Nerve(e.to_string()))?;
        let client = self
            .shared
            .side
            .client(name, ros_type, hash, Qos::default())?;
        let (reply_tx, replies) = std::sync::mpsc::sync_channel(MAX_PENDING);
        Ok(ToRos {
            route,
            server,
            hash: hash.to_owned(),
            client,
            replies,
            reply_tx,
            pending: HashMap::new(),
        })
    }

    fn offer_to_ros(&mut self, name: &str, route: ServiceRoute) -> Result<ToNerve, BridgeError> {
        let client = RawClient::create(
            &self.node,
            name,
            &route.nerve_type,
            ServiceQos::default(),
            WaitMode::Block,
        )
        .map_err(|e| BridgeError::Nerve(e.to_string()))?;
        let hash = service_type_hash(&route, &self.config.types);
        let (tx, requests) = std::sync::mpsc::sync_channel(MAX_PENDING);
        let dropped = self.shared.clone();
        let topic = name.to_owned();
        let service = self.shared.side.service(
            name,
            &route.ros_type,
            &hash,
            Qos::default(),
            true,
            move |req| {
                if tx.try_send(req).is_err() {
                    dropped.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    dropped.event(Event::Dropped {
                        topic: topic.clone(),
                        reason: format!("more than {MAX_PENDING} requests waiting"),
                    });
                }
            },
        )?;
        Ok(ToNerve {
            route,
            client,
            _service: service,
            requests,
            pending: Vec::new(),
        })
    }

    fn pump(&mut self) {
        let shared = self.shared.clone();
        let peers = shared.peers();
        // rmw_zenoh clients → Nerve servers
        for (name, s) in self.to_nerve.iter_mut() {
            while let Ok(req) = s.requests.try_recv() {
                let gid = match &req.attachment {
                    Ok(a) => a.gid,
                    Err(e) => {
                        shared.stats.malformed.fetch_add(1, Ordering::Relaxed);
                        shared.event(Event::Malformed {
                            topic: name.clone(),
                            reason: format!(
                                "{} request without its attachment: {e}",
                                s.route.ros_type
                            ),
                        });
                        continue;
                    }
                };
                if shared
                    .side
                    .entity(gid)
                    .is_some_and(|e| shared.is_bridge(&e, &peers))
                {
                    shared.stats.loops_cut.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if s.pending.len() >= MAX_PENDING {
                    shared.event(Event::Dropped {
                        topic: name.clone(),
                        reason: format!("more than {MAX_PENDING} calls in flight"),
                    });
                    continue;
                }
                match s.route.req_to_nerve(&req.cdr, &mut self.scratch) {
                    Err(reason) => {
                        shared.stats.malformed.fetch_add(1, Ordering::Relaxed);
                        shared.event(Event::Malformed {
                            topic: name.clone(),
                            reason: format!("{} request dropped: {reason}", s.route.ros_type),
                        });
                    }
                    Ok(()) => match s.client.send_bytes(&self.scratch) {
                        Ok(call) => s.pending.push((call, req, Instant::now())),
                        Err(e) => shared.event(Event::Dropped {
                            topic: name.clone(),
                            reason: e.to_string(),
                        }),
                    },
                }
            }
            let mut i = 0;
            while i < s.pending.len() {
                let (call, _, since) = &s.pending[i];
                let answer = match call.try_take() {
                    Ok(None) if since.elapsed() < CALL_TIMEOUT => {
                        i += 1;
                        continue;
                    }
                    Ok(Some(reply)) => s.route.resp_to_ros(reply.bytes(), &mut self.scratch),
                    // a refusal the ROS 2 type can express (ChangeState: success false)
                    Err(CallError::Handler { .. }) if s.route.refusal().is_some() => {
                        if let Some(refusal) = s.route.refusal() {
                            refusal(&mut self.scratch);
                        }
                        Ok(())
                    }
                    // no reply: the query ends without one when the request is dropped
                    failed => {
                        shared.event(Event::Dropped {
                            topic: name.clone(),
                            reason: match failed {
                                Err(e) => e.to_string(),
                                _ => format!("no answer in {CALL_TIMEOUT:?}"),
                            },
                        });
                        s.pending.swap_remove(i);
                        continue;
                    }
                };
                let (_, req, _) = s.pending.swap_remove(i);
                match answer {
                    Ok(()) => match req.reply(&self.scratch) {
                        Ok(_) => {
                            shared.stats.calls.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => shared.event(Event::Dropped {
                            topic: name.clone(),
                            reason: e.to_string(),
                        }),
                    },
                    Err(reason) => shared.event(Event::Malformed {
                        topic: name.clone(),
                        reason,
                    }),
                }
            }
        }
        // Nerve clients → rmw_zenoh servers
        for (name, s) in self.to_ros.iter_mut() {
            while let Ok(Some(req)) = s.server.try_take() {
                if s.pending.len() >= MAX_PENDING {
                    let _ = req.fail(&format!("the bridge has {MAX_PENDING} calls in flight"));
                    continue;
                }
                if let Err(reason) = s.route.req_to_ros(req.bytes(), &mut self.scratch) {
                    let _ = req.fail(&format!("not a {} request: {reason}", s.route.ros_type));
                    continue;
                }
                let tx = s.reply_tx.clone();
                let seq = Arc::new(std::sync::atomic::AtomicI64::new(-1));
                let seq_of_reply = seq.clone();
                let sent = s.client.call(&self.scratch, CALL_TIMEOUT, move |reply| {
                    // the call's sequence number is known once `call` returned
                    let _ = tx.try_send((seq_of_reply.load(Ordering::Acquire), reply));
                });
                match sent {
                    Ok(a) => {
                        seq.store(a.sequence_number, Ordering::Release);
                        s.pending.insert(a.sequence_number, (req, Instant::now()));
                    }
                    Err(e) => {
                        let _ = req.fail(&format!("ROS 2 request not sent: {e}"));
                    }
                }
            }
            while let Ok((seq, reply)) = s.replies.try_recv() {
                // a reply's attachment names its request; the call's own number otherwise
                let seq = match &reply {
                    Ok(Received {
                        attachment: Ok(a), ..
                    }) if a.gid == s.client.gid() => a.sequence_number,
                    _ => seq,
                };
                // a second server's reply to a call already answered is not ours
                let Some((req, _)) = s.pending.remove(&seq) else {
                    continue;
                };
                let result = reply.and_then(|r| {
                    s.route
                        .resp_to_nerve(&r.cdr, &mut self.scratch)
                        .map_err(|reason| {
                            shared.stats.malformed.fetch_add(1, Ordering::Relaxed);
                            format!(
                                "the ROS 2 server's {} response does not decode: {reason}",
                                s.route.ros_type
                            )
                        })
                });
                match result {
                    Ok(()) => {
                        if req.reply_bytes(&self.scratch).is_ok() {
                            shared.stats.calls.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(reason) => {
                        let _ = req.fail(&reason);
                    }
                }
            }
            s.pending.retain(|_, (req, since)| {
                let keep = since.elapsed() < CALL_TIMEOUT && req.client_waits();
                if !keep && req.client_waits() {
                    let _ = req.fail(&format!("the ROS 2 server of {name} did not answer"));
                }
                keep
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../nerve-ros2-types/tests/fixtures/share")
    }

    /// A service carried as CDR announces the RIHS01 hash ROS 2 computes for the service
    /// type (recorded in the fixture from a real ROS 2); a standard service found nowhere
    /// on the type path announces `TypeHashNotSupported`.
    #[test]
    fn service_type_hashes() {
        let search = vec![fixtures()];
        let mut catalog = Catalog::new(search.clone(), true);
        let basic = service_route(&mut catalog, "test_msgs/srv/BasicTypes").unwrap();
        assert!(matches!(basic.form, ServiceForm::Cdr { .. }));
        assert_eq!(
            service_type_hash(&basic, &search),
            "RIHS01_da348697437c103cc9a9322ac1bdbdcf8eb11a85de22f7f2492ca1df416e1a5f"
        );
        let trigger = service_route(&mut catalog, "std_srvs/srv/Trigger").unwrap();
        assert!(matches!(trigger.form, ServiceForm::Native(_)));
        assert_eq!(
            service_type_hash(&trigger, &search),
            TYPE_HASH_NOT_SUPPORTED
        );
    }
}
