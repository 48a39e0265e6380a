//! Services both ways (one thread):
//! - a Nerve server (not a bridge's) of a type with a ROS 2 form is offered to ROS 2: the
//!   bridge takes requests from ROS 2 clients, calls the Nerve server and answers;
//! - a ROS 2 server is offered to Nerve: the bridge serves the service in Nerve with the
//!   mapped types, sends each request to ROS 2 and answers with the response; when the
//!   ROS 2 server goes away (or changes its type) mid-call, the Nerve call fails at once
//!   naming it.
//!
//! How a type crosses is its [`ServiceRoute`]. Parameter services and an action's
//! services are left to their own halves.

use crate::engine::side::{Endpoint, RosSide, RosType, ServiceClient, ServiceServer};
use crate::engine::worker::{Failures, Worker};
use crate::engine::Shared;
use crate::services::{route_of_nerve, service_route, ServiceRoute, CALL_TIMEOUT, MAX_PENDING};
use crate::types::Catalog;
use crate::{BridgeConfig, BridgeError, Event, Kind};
use nerve::service::ServiceType;
use nerve::{CallError, Node, RawClient, RawPendingCall, RawRequest, RawServer};
use nerve::{ServiceQos, WaitMode};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the thread looks at requests and replies while services cross.
const TICK: Duration = Duration::from_millis(1);

/// A Nerve server offered to ROS 2 clients.
struct ToNerve<S: RosSide> {
    route: ServiceRoute,
    client: RawClient,
    server: S::Server,
    pending: Vec<(
        RawPendingCall,
        <S::Server as ServiceServer>::Request,
        Instant,
    )>,
}

/// A ROS 2 server offered to Nerve clients.
struct ToRos<S: RosSide> {
    route: ServiceRoute,
    /// The ROS 2 server as the graph showed it (another type or hash is another server).
    ros: Endpoint,
    server: RawServer,
    client: S::Client,
    pending: HashMap<<S::Client as ServiceClient>::Call, (RawRequest, Instant)>,
}

/// The services half of a bridge.
pub(crate) struct Services<S: RosSide> {
    shared: Arc<Shared<S>>,
    config: BridgeConfig,
    node: Node,
    catalog: Catalog,
    to_nerve: BTreeMap<String, ToNerve<S>>,
    to_ros: BTreeMap<String, ToRos<S>>,
    failures: Failures,
    scratch: Vec<u8>,
}

/// Whether service `name` crosses here (parameter services and an action's services
/// belong to their own halves).
fn carried(config: &BridgeConfig, name: &str) -> bool {
    config.admits(name) && !crate::services::is_param_service(name) && !name.contains("/_action/")
}

impl<S: RosSide> Services<S> {
    /// The half, made on its own thread with its own Nerve node.
    pub(crate) fn new(
        shared: Arc<Shared<S>>,
        config: BridgeConfig,
        node: Node,
    ) -> Result<Services<S>, BridgeError> {
        Ok(Services {
            catalog: Catalog::of(&config),
            shared,
            config,
            node,
            to_nerve: BTreeMap::new(),
            to_ros: BTreeMap::new(),
            failures: Failures::default(),
            scratch: Vec::new(),
        })
    }

    /// Runs until the bridge stops.
    pub(crate) fn run(mut self) {
        crate::engine::worker::run(&mut self, TICK);
    }

    fn report(&mut self, name: &str, reason: String) {
        self.failures.report(&self.shared, name, reason);
    }

    fn pump_to_nerve(&mut self) {
        let shared = &self.shared;
        let peers = shared.peers();
        for (name, s) in self.to_nerve.iter_mut() {
            while let Some((id, cdr)) = s.server.take(&peers) {
                if s.pending.len() >= MAX_PENDING {
                    shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    shared.event(Event::Dropped {
                        topic: name.clone(),
                        reason: format!("more than {MAX_PENDING} calls in flight"),
                    });
                    continue;
                }
                match s.route.req_to_nerve(&cdr, &mut self.scratch) {
                    Err(reason) => {
                        shared.stats.malformed.fetch_add(1, Ordering::Relaxed);
                        shared.event(Event::Malformed {
                            topic: name.clone(),
                            reason: format!("{} request dropped: {reason}", s.route.ros_type),
                        });
                    }
                    Ok(()) => match s.client.send_bytes(&self.scratch) {
                        Ok(call) => s.pending.push((call, id, Instant::now())),
                        Err(e) => {
                            shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
                            shared.event(Event::Dropped {
                                topic: name.clone(),
                                reason: e.to_string(),
                            })
                        }
                    },
                }
            }
            let lost = s.server.lost();
            if lost > 0 {
                shared.stats.dropped.fetch_add(lost, Ordering::Relaxed);
                shared.event(Event::Dropped {
                    topic: name.clone(),
                    reason: format!(
                        "{lost} requests dropped on arrival: the bridge's queue was full"
                    ),
                });
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
                    // ROS 2 has no error replies: the client sees no answer
                    failed => {
                        shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
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
                let (_, id, _) = s.pending.swap_remove(i);
                match answer {
                    Ok(()) => match s.server.reply(id, std::mem::take(&mut self.scratch)) {
                        Ok(()) => {
                            shared.stats.calls.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(reason) => {
                            shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
                            shared.event(Event::Dropped {
                                topic: name.clone(),
                                reason,
                            })
                        }
                    },
                    Err(reason) => {
                        shared.stats.malformed.fetch_add(1, Ordering::Relaxed);
                        shared.event(Event::Malformed {
                            topic: name.clone(),
                            reason,
                        })
                    }
                }
            }
        }
    }

    fn pump_to_ros(&mut self) {
        let shared = &self.shared;
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
                match s.client.call(std::mem::take(&mut self.scratch)) {
                    Ok(id) => {
                        s.pending.insert(id, (req, Instant::now()));
                    }
                    Err(reason) => {
                        let _ = req.fail(&reason);
                    }
                }
            }
            while let Some((id, answer)) = s.client.take() {
                // an answer to a call already given up is not delivered twice
                let Some((req, _)) = s.pending.remove(&id) else {
                    continue;
                };
                let cdr = match answer {
                    Ok(cdr) => cdr,
                    Err(reason) => {
                        let _ = req.fail(&format!("the ROS 2 server of {name}: {reason}"));
                        continue;
                    }
                };
                match s.route.resp_to_nerve(&cdr, &mut self.scratch) {
                    Ok(()) => {
                        if req.reply_bytes(&self.scratch).is_ok() {
                            shared.stats.calls.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(reason) => {
                        shared.stats.malformed.fetch_add(1, Ordering::Relaxed);
                        let _ = req.fail(&format!(
                            "the ROS 2 server's {} response does not decode: {reason}",
                            s.route.ros_type
                        ));
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

    fn sync(&mut self) {
        let peers = self.shared.peers();
        // a standby bridge forwards nothing
        let primary = self.shared.side.primary(&peers);
        // ROS 2 servers that are neither ours nor bridges': the first of each name
        let mut ros_servers: BTreeMap<String, Endpoint> = BTreeMap::new();
        if primary {
            for e in self.shared.side.graph(&peers).servers {
                if carried(&self.config, &e.name) {
                    ros_servers.entry(e.name.clone()).or_insert(e);
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
                    .is_none_or(|e| e.ros_type != s.ros.ros_type || e.type_hash != s.ros.type_hash)
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
        for (name, e) in &ros_servers {
            if self.to_ros.contains_key(name) || self.failures.lately(name) {
                continue;
            }
            match self.offer_to_nerve(e) {
                Ok(s) => {
                    self.shared.event(Event::Bridged {
                        kind: Kind::Service,
                        topic: name.clone(),
                        ros_type: e.ros_type.clone(),
                        nerve_type: s.route.nerve_type.name.clone(),
                        to_ros: false,
                    });
                    self.to_ros.insert(name.clone(), s);
                }
                Err(err) => self.report(name, err.to_string()),
            }
        }
        // Nerve servers that are not the bridge's own
        let nerve_servers = if primary {
            nerve::introspect::list_services(&self.node).unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut live = HashSet::new();
        for info in &nerve_servers {
            let ours = usize::from(self.to_ros.contains_key(&info.name));
            if info.servers <= ours
                || !carried(&self.config, &info.name)
                || ros_servers.contains_key(&info.name)
            {
                continue;
            }
            live.insert(info.name.clone());
            if self.to_nerve.contains_key(&info.name) || self.failures.lately(&info.name) {
                continue;
            }
            let ty = ServiceType::new(
                info.type_name.clone(),
                info.request.clone(),
                info.response.clone(),
            );
            let Some(route) = route_of_nerve(&mut self.catalog, &ty) else {
                self.report(&info.name, format!("{} has no ROS 2 form", info.type_name));
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
                Err(e) => self.report(&info.name, e.to_string()),
            }
        }
        self.to_nerve.retain(|n, _| live.contains(n));
        self.failures
            .retain(|n| live.contains(n) || ros_servers.contains_key(n));
    }

    fn offer_to_ros(&mut self, name: &str, route: ServiceRoute) -> Result<ToNerve<S>, BridgeError> {
        let client = RawClient::create(
            &self.node,
            name,
            &route.nerve_type,
            ServiceQos::default(),
            WaitMode::Block,
        )
        .map_err(|e| BridgeError::Nerve(e.to_string()))?;
        let ty = RosType::of_service(&route, &self.config.types);
        let server = self.shared.side.server(name, &ty)?;
        Ok(ToNerve {
            route,
            client,
            server,
            pending: Vec::new(),
        })
    }

    fn offer_to_nerve(&mut self, ros: &Endpoint) -> Result<ToRos<S>, BridgeError> {
        let route = service_route(&mut self.catalog, &ros.ros_type)?;
        let server = RawServer::create(
            &self.node,
            &ros.name,
            &route.nerve_type,
            ServiceQos::default(),
            WaitMode::Block,
        )
        .map_err(|e| BridgeError::Nerve(e.to_string()))?;
        let ty = RosType::of_service(&route, &self.config.types);
        let client = self.shared.side.client(&ros.name, &ty, ros)?;
        Ok(ToRos {
            route,
            ros: ros.clone(),
            server,
            client,
            pending: HashMap::new(),
        })
    }
}

impl<S: RosSide> Worker for Services<S> {
    type Side = S;
    fn shared(&self) -> &Shared<S> {
        &self.shared
    }
    fn config(&self) -> &BridgeConfig {
        &self.config
    }
    fn refresh(&mut self) {
        self.sync();
    }
    fn busy(&self) -> bool {
        !(self.to_nerve.is_empty() && self.to_ros.is_empty())
    }
    fn pump(&mut self) {
        self.pump_to_nerve();
        self.pump_to_ros();
    }
}
