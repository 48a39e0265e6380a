//! Services both ways, over DDS with the request/reply mapping of Fast DDS (and of every
//! ROS 2 RMW since Foxy's "enhanced" mapping): requests on `rq/<name>Request`, replies
//! on `rr/<name>Reply`, a reply naming its request by the related sample identity.
//!
//! - A Nerve server (not a bridge's) of a type with a ROS 2 form is offered to ROS 2:
//!   the bridge reads requests from ROS 2 clients, calls the Nerve server and writes the
//!   reply back.
//! - A ROS 2 server is offered to Nerve: the bridge serves the service in Nerve with the
//!   mapped types, writes each request to ROS 2 and answers with the reply; when the ROS 2
//!   server goes away mid-call, the Nerve call fails at once naming it.
//!
//! Standard services (std_srvs Trigger and SetBool, example_interfaces AddTwoInts) are
//! converted to Nerve's own; any other ROS 2 service crosses as CDR carriers.

use crate::dds::{RawAdapter, RawCdr, RosQos};
use crate::types::{dds_type_of_ros, Catalog, TypeRoute};
use crate::{BridgeConfig, BridgeError, Event, Shared};
use nerve::service::ServiceType;
use nerve::{Node, RawClient, RawRequest, RawServer, ServiceQos, WaitMode};
use nerve_bag::cdr::{CdrReader, CdrWriter};
use nerve_msgs::srv;
use rustdds::no_key::{DataReader, DataWriter};
use rustdds::{RTPSEntity, SampleIdentity, Timestamp, TopicKind, WriteOptionsBuilder};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a bridged call may take before the bridge gives up on it.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Calls in flight per service before new ones are refused.
const MAX_PENDING: usize = 256;
/// How often the thread looks at Nerve's requests and replies while services cross.
const TICK: Duration = Duration::from_millis(1);

type Conv = fn(&[u8], &mut Vec<u8>) -> Result<(), String>;

/// How a service type's requests and responses cross.
#[derive(Clone)]
pub enum ServiceForm {
    /// A standard service: converted to and from Nerve's own types.
    Native {
        /// Request CDR → Nerve.
        req_to_nerve: Conv,
        /// Nerve request → CDR.
        req_to_ros: Conv,
        /// Response CDR → Nerve.
        resp_to_nerve: Conv,
        /// Nerve response → CDR.
        resp_to_ros: Conv,
    },
    /// Any ROS 2 service: request and response as CDR carriers.
    Cdr {
        /// The request's route.
        request: Arc<TypeRoute>,
        /// The response's route.
        response: Arc<TypeRoute>,
    },
}

/// One service type's route.
#[derive(Clone)]
pub struct ServiceRoute {
    /// ROS 2 type, `pkg/srv/Name`.
    pub ros_type: String,
    /// The Nerve service type.
    pub nerve_type: ServiceType,
    /// How payloads cross.
    pub form: ServiceForm,
}

impl ServiceRoute {
    fn req_to_nerve(&self, cdr: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        match &self.form {
            ServiceForm::Native { req_to_nerve, .. } => req_to_nerve(cdr, out),
            ServiceForm::Cdr { request, .. } => request.to_nerve(cdr, 0, out),
        }
    }
    fn req_to_ros(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        match &self.form {
            ServiceForm::Native { req_to_ros, .. } => req_to_ros(payload, out),
            ServiceForm::Cdr { request, .. } => request.to_ros(payload, out),
        }
    }
    fn resp_to_nerve(&self, cdr: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        match &self.form {
            ServiceForm::Native { resp_to_nerve, .. } => resp_to_nerve(cdr, out),
            ServiceForm::Cdr { response, .. } => response.to_nerve(cdr, 0, out),
        }
    }
    fn resp_to_ros(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        match &self.form {
            ServiceForm::Native { resp_to_ros, .. } => resp_to_ros(payload, out),
            ServiceForm::Cdr { response, .. } => response.to_ros(payload, out),
        }
    }
}

fn err(e: nerve_bag::BagError) -> String {
    e.to_string()
}

/// ROS 2 has no empty messages: an empty one carries `uint8 structure_needs_at_least_one_member`.
fn empty_to_nerve(cdr: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let mut r = CdrReader::new(cdr).map_err(err)?;
    r.u8().map_err(err)?;
    out.clear();
    Ok(())
}
fn empty_to_ros(_: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    CdrWriter::new(out).u8(0);
    Ok(())
}
fn bool_to_nerve(cdr: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let v = CdrReader::new(cdr).and_then(|mut r| r.u8()).map_err(err)?;
    out.clear();
    out.push(u8::from(v != 0));
    Ok(())
}
fn bool_to_ros(payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let v = payload.first().ok_or("an empty nerve_msgs/Bool")?;
    CdrWriter::new(out).u8(u8::from(*v != 0));
    Ok(())
}
/// `bool success`, `string message` ↔ nerve_msgs/Outcome.
fn outcome_to_nerve(cdr: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let mut r = CdrReader::new(cdr).map_err(err)?;
    let success = r.u8().map_err(err)?;
    let message = r.string().map_err(err)?;
    let mut o = srv::Outcome {
        success: u8::from(success != 0),
        ..Default::default()
    };
    // a longer message is cut at a character boundary (Outcome holds 127 bytes)
    let text = String::from_utf8_lossy(message);
    let mut end = text.len().min(127);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    o.message = nerve_msgs::FixedStr::new(&text[..end]).map_err(|e| e.to_string())?;
    out.clear();
    out.extend_from_slice(nerve::message::as_bytes(&o));
    Ok(())
}
fn outcome_to_ros(payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let o: srv::Outcome = nerve::message::read_pod(payload).ok_or("a short nerve_msgs/Outcome")?;
    let mut w = CdrWriter::new(out);
    w.u8(o.success);
    w.string(o.message.as_str().as_bytes());
    Ok(())
}
fn i64_at(r: &mut CdrReader<'_>) -> Result<i64, String> {
    r.align(8).map_err(err)?;
    let b = r.take(8).map_err(err)?;
    Ok(i64::from_le_bytes(b.try_into().map_err(|_| "8 bytes")?))
}
fn i64_to(w: &mut CdrWriter<'_>, v: i64) {
    w.align(8);
    w.bytes(&v.to_le_bytes());
}
fn two_ints_to_nerve(cdr: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let mut r = CdrReader::new(cdr).map_err(err)?;
    let t = srv::TwoInts {
        a: i64_at(&mut r)?,
        b: i64_at(&mut r)?,
    };
    out.clear();
    out.extend_from_slice(nerve::message::as_bytes(&t));
    Ok(())
}
fn two_ints_to_ros(payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let t: srv::TwoInts = nerve::message::read_pod(payload).ok_or("a short nerve_msgs/TwoInts")?;
    let mut w = CdrWriter::new(out);
    i64_to(&mut w, t.a);
    i64_to(&mut w, t.b);
    Ok(())
}
fn int_to_nerve(cdr: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let mut r = CdrReader::new(cdr).map_err(err)?;
    let t = srv::Int {
        value: i64_at(&mut r)?,
    };
    out.clear();
    out.extend_from_slice(nerve::message::as_bytes(&t));
    Ok(())
}
fn int_to_ros(payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let t: srv::Int = nerve::message::read_pod(payload).ok_or("a short nerve_msgs/Int")?;
    i64_to(&mut CdrWriter::new(out), t.value);
    Ok(())
}

/// The standard services: (ROS 2 type, Nerve type, conversions).
fn native() -> [(&'static str, ServiceType, ServiceForm); 3] {
    use nerve::Service;
    fn st<S: Service>() -> ServiceType {
        ServiceType::of::<S>()
    }
    [
        (
            "std_srvs/srv/Trigger",
            st::<srv::Trigger>(),
            ServiceForm::Native {
                req_to_nerve: empty_to_nerve,
                req_to_ros: empty_to_ros,
                resp_to_nerve: outcome_to_nerve,
                resp_to_ros: outcome_to_ros,
            },
        ),
        (
            "std_srvs/srv/SetBool",
            st::<srv::SetBool>(),
            ServiceForm::Native {
                req_to_nerve: bool_to_nerve,
                req_to_ros: bool_to_ros,
                resp_to_nerve: outcome_to_nerve,
                resp_to_ros: outcome_to_ros,
            },
        ),
        (
            "example_interfaces/srv/AddTwoInts",
            st::<srv::AddTwoInts>(),
            ServiceForm::Native {
                req_to_nerve: two_ints_to_nerve,
                req_to_ros: two_ints_to_ros,
                resp_to_nerve: int_to_nerve,
                resp_to_ros: int_to_ros,
            },
        ),
    ]
}

/// The route of ROS 2 service type `ros_type` (`pkg/srv/Name`).
pub fn service_route(catalog: &mut Catalog, ros_type: &str) -> Result<ServiceRoute, BridgeError> {
    if catalog.native() {
        if let Some((_, nerve_type, form)) = native().into_iter().find(|(r, _, _)| *r == ros_type) {
            return Ok(ServiceRoute {
                ros_type: ros_type.to_string(),
                nerve_type,
                form,
            });
        }
    }
    let request = catalog.for_ros(&format!("{ros_type}_Request"))?;
    let response = catalog.for_ros(&format!("{ros_type}_Response"))?;
    Ok(ServiceRoute {
        ros_type: ros_type.to_string(),
        nerve_type: ServiceType::new(
            ros_type,
            request.schema.type_info(),
            response.schema.type_info(),
        ),
        form: ServiceForm::Cdr { request, response },
    })
}

/// The route of a Nerve service type towards ROS 2, if it has a ROS 2 form.
fn route_of_nerve(catalog: &mut Catalog, ty: &ServiceType) -> Option<ServiceRoute> {
    if let Some((ros, nerve_type, form)) = native().into_iter().find(|(_, n, _)| n == ty) {
        return Some(ServiceRoute {
            ros_type: ros.to_string(),
            nerve_type,
            form,
        });
    }
    // a ROS 2 type carried as CDR: found on the search path, and the same identity
    let r = service_route(catalog, &ty.name).ok()?;
    (r.nerve_type == *ty).then_some(r)
}

/// The request and reply topics of ROS 2 service `name`.
fn topics(name: &str) -> (String, String) {
    (format!("rq{name}Request"), format!("rr{name}Reply"))
}

/// A ROS 2 service name from its request topic (`rq/ns/svcRequest` → `/ns/svc`).
fn service_of_request_topic(dds: &str) -> Option<&str> {
    dds.strip_prefix("rq")
        .and_then(|s| s.strip_suffix("Request"))
        .filter(|s| s.starts_with('/'))
}

/// `pkg::srv::dds_::Name_Request_` → `pkg/srv/Name`.
fn service_type_of_request(dds_type: &str) -> Option<String> {
    let ros = crate::types::ros_type_of_dds(dds_type)?;
    ros.strip_suffix("_Request").map(str::to_string)
}

/// A DDS reader of raw CDR.
type Reader = DataReader<RawCdr, RawAdapter>;
/// A DDS writer of raw CDR.
type Writer = DataWriter<RawCdr, RawAdapter>;

/// A Nerve server offered to ROS 2 clients.
struct ToNerve {
    route: ServiceRoute,
    client: RawClient,
    requests: DataReader<RawCdr, RawAdapter>,
    replies: DataWriter<RawCdr, RawAdapter>,
    pending: Vec<(nerve::RawPendingCall, SampleIdentity, Instant)>,
}

/// A ROS 2 server offered to Nerve clients.
struct ToRos {
    route: ServiceRoute,
    server: RawServer,
    requests: DataWriter<RawCdr, RawAdapter>,
    replies: DataReader<RawCdr, RawAdapter>,
    pending: HashMap<SampleIdentity, (RawRequest, Instant)>,
}

/// The services half of a bridge (one thread).
pub(crate) struct Services {
    shared: Arc<Shared>,
    config: BridgeConfig,
    node: Node,
    catalog: Catalog,
    to_nerve: BTreeMap<String, ToNerve>,
    to_ros: BTreeMap<String, ToRos>,
    dds_pub: rustdds::Publisher,
    dds_sub: rustdds::Subscriber,
    /// Names that failed (reported once, tried again later).
    failures: crate::worker::Failures,
    scratch: Vec<u8>,
}

impl Services {
    pub(crate) fn new(
        shared: Arc<Shared>,
        config: BridgeConfig,
        node: Node,
    ) -> Result<Services, BridgeError> {
        let (dds_pub, dds_sub) = crate::worker::dds_endpoints(&shared)?;
        Ok(Services {
            catalog: Catalog::new(config.types.clone(), config.native),
            dds_pub,
            dds_sub,
            shared,
            config,
            node,
            to_nerve: BTreeMap::new(),
            to_ros: BTreeMap::new(),
            failures: Default::default(),
            scratch: Vec::new(),
        })
    }

    /// Runs until the bridge stops.
    pub(crate) fn run(mut self) {
        crate::worker::run(&mut self, TICK);
    }

    fn report(&mut self, name: &str, reason: String) {
        self.failures.report(&self.shared, name, reason);
    }

    fn failed_lately(&self, name: &str) -> bool {
        self.failures.lately(name)
    }

    fn pump(&mut self) {
        let me = self.shared.participant.guid().prefix;
        let peers = self.shared.peers();
        // ROS 2 clients → Nerve servers
        for (name, s) in self.to_nerve.iter_mut() {
            while let Ok(Some(sample)) = s.requests.take_next_sample() {
                let info = sample.sample_info();
                let writer = info.writer_guid().prefix;
                if writer == me || peers.is_bridge_participant(writer.as_ref()) {
                    continue;
                }
                let id = info.sample_identity();
                if s.pending.len() >= MAX_PENDING {
                    (self.shared.events)(Event::Dropped {
                        topic: name.clone(),
                        reason: format!("more than {MAX_PENDING} calls in flight"),
                    });
                    continue;
                }
                let RawCdr(cdr) = sample.value();
                match s.route.req_to_nerve(cdr, &mut self.scratch) {
                    Err(reason) => {
                        self.shared.stats.malformed.fetch_add(1, Ordering::Relaxed);
                        (self.shared.events)(Event::Malformed {
                            topic: name.clone(),
                            reason: format!("{} request dropped: {reason}", s.route.ros_type),
                        });
                    }
                    Ok(()) => match s.client.send_bytes(&self.scratch) {
                        Ok(call) => s.pending.push((call, id, Instant::now())),
                        Err(e) => (self.shared.events)(Event::Dropped {
                            topic: name.clone(),
                            reason: e.to_string(),
                        }),
                    },
                }
            }
            let mut i = 0;
            while i < s.pending.len() {
                let (call, id, since) = &s.pending[i];
                match call.try_take() {
                    Ok(None) if since.elapsed() < CALL_TIMEOUT => {
                        i += 1;
                        continue;
                    }
                    Ok(Some(reply)) => {
                        match s.route.resp_to_ros(reply.bytes(), &mut self.scratch) {
                            Ok(()) => {
                                let opts = WriteOptionsBuilder::new()
                                    .source_timestamp(Timestamp::now())
                                    .related_sample_identity(*id)
                                    .build();
                                let msg = RawCdr(std::mem::take(&mut self.scratch));
                                if s.replies.write_with_options(msg, opts).is_ok() {
                                    self.shared.stats.calls.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            Err(reason) => (self.shared.events)(Event::Malformed {
                                topic: name.clone(),
                                reason,
                            }),
                        }
                    }
                    // ROS 2 has no error replies: the client sees no answer
                    Ok(None) | Err(_) => {
                        (self.shared.events)(Event::Dropped {
                            topic: name.clone(),
                            reason: match call.try_take() {
                                Err(e) => e.to_string(),
                                _ => format!("no answer in {CALL_TIMEOUT:?}"),
                            },
                        });
                    }
                }
                s.pending.swap_remove(i);
            }
        }
        // Nerve clients → ROS 2 servers
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
                let opts = WriteOptionsBuilder::new()
                    .source_timestamp(Timestamp::now())
                    .build();
                let msg = RawCdr(std::mem::take(&mut self.scratch));
                match s.requests.write_with_options(msg, opts) {
                    Ok(id) => {
                        s.pending.insert(id, (req, Instant::now()));
                    }
                    Err(e) => {
                        let _ = req.fail(&format!("ROS 2 request not sent: {e}"));
                    }
                }
            }
            while let Ok(Some(sample)) = s.replies.take_next_sample() {
                let Some(id) = sample.sample_info().related_sample_identity() else {
                    continue;
                };
                // replies to other clients' requests are not ours
                let Some((req, _)) = s.pending.remove(&id) else {
                    continue;
                };
                let RawCdr(cdr) = sample.value();
                match s.route.resp_to_nerve(cdr, &mut self.scratch) {
                    Ok(()) => {
                        if req.reply_bytes(&self.scratch).is_ok() {
                            self.shared.stats.calls.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(reason) => {
                        self.shared.stats.malformed.fetch_add(1, Ordering::Relaxed);
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
        let me = self.shared.participant.guid().prefix;
        let peers = self.shared.peers();
        // ROS 2 servers: readers of request topics that are neither ours nor bridges'
        let mut ros_servers: BTreeMap<String, String> = BTreeMap::new();
        // a standby bridge forwards nothing
        let primary = self.shared.primary();
        for r in self
            .shared
            .participant
            .discovered_readers()
            .into_iter()
            .filter(|_| primary)
        {
            let d = &r.subscription_topic_data;
            if d.key().prefix == me || peers.is_bridge_participant(d.key().prefix.as_ref()) {
                continue;
            }
            if let (Some(name), Some(ty)) = (
                service_of_request_topic(d.topic_name()),
                service_type_of_request(d.type_name()),
            ) {
                // parameter services cross in params.rs, actions' in actions.rs
                if self.config.admits(name)
                    && !crate::params::is_param_service(name)
                    && !name.contains("/_action/")
                {
                    ros_servers.insert(name.to_string(), ty);
                }
            }
        }
        // Nerve servers that are not ours
        let ours: HashSet<String> = self.to_ros.keys().cloned().collect();
        let nerve_servers: Vec<nerve::introspect::ServiceInfo> =
            nerve::introspect::list_services(&self.node)
                .unwrap_or_default()
                .into_iter()
                .filter(|s| {
                    primary
                        && s.servers > usize::from(ours.contains(&s.name))
                        && self.config.admits(&s.name)
                        && !crate::params::is_param_service(&s.name)
                        && !s.name.contains("/_action/")
                        && !ros_servers.contains_key(&s.name)
                })
                .collect();
        for (name, ty) in &ros_servers {
            if self.to_ros.contains_key(name) || self.failed_lately(name) {
                continue;
            }
            match self.offer_to_nerve(name, ty) {
                Ok(s) => {
                    (self.shared.events)(Event::Bridged {
                        kind: crate::Kind::Service,
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
        // a ROS 2 server that went away: its Nerve server goes, pending calls fail now
        let gone: Vec<String> = self
            .to_ros
            .keys()
            .filter(|n| !ros_servers.contains_key(*n))
            .cloned()
            .collect();
        for n in gone {
            if let Some(s) = self.to_ros.remove(&n) {
                for (_, (req, _)) in s.pending {
                    let _ = req.server_gone(&format!("the ROS 2 server of {n} went away"));
                }
            }
        }
        for info in &nerve_servers {
            if self.to_nerve.contains_key(&info.name) || self.failed_lately(&info.name) {
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
                    (self.shared.events)(Event::Bridged {
                        kind: crate::Kind::Service,
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
        let live: HashSet<&str> = nerve_servers.iter().map(|s| s.name.as_str()).collect();
        self.to_nerve.retain(|n, _| live.contains(n.as_str()));
        self.failures
            .retain(|n| live.contains(n) || ros_servers.contains_key(n));
    }

    fn endpoints(
        &self,
        name: &str,
        route: &ServiceRoute,
        server_side: bool,
    ) -> Result<(Reader, Writer), BridgeError> {
        let (rq, rr) = topics(name);
        let qos = RosQos::default().policies();
        let dds_err = |e: &dyn std::fmt::Display| BridgeError::Dds(format!("{name}: {e}"));
        let ty = |suffix: &str| {
            dds_type_of_ros(&format!("{}{suffix}", route.ros_type)).ok_or_else(|| {
                BridgeError::Config(format!("{} is not a ROS 2 type", route.ros_type))
            })
        };
        let rq_topic = self
            .shared
            .participant
            .create_topic(rq, ty("_Request")?, &qos, TopicKind::NoKey)
            .map_err(|e| dds_err(&e))?;
        let rr_topic = self
            .shared
            .participant
            .create_topic(rr, ty("_Response")?, &qos, TopicKind::NoKey)
            .map_err(|e| dds_err(&e))?;
        // a server reads requests and writes replies; a client the reverse
        let (read, write) = if server_side {
            (&rq_topic, &rr_topic)
        } else {
            (&rr_topic, &rq_topic)
        };
        let reader = self
            .dds_sub
            .create_datareader_no_key::<RawCdr, RawAdapter>(read, Some(qos.clone()))
            .map_err(|e| dds_err(&e))?;
        let writer = self
            .dds_pub
            .create_datawriter_no_key::<RawCdr, RawAdapter>(write, Some(qos))
            .map_err(|e| dds_err(&e))?;
        Ok((reader, writer))
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
        let (requests, replies) = self.endpoints(name, &route, true)?;
        Ok(ToNerve {
            route,
            client,
            requests,
            replies,
            pending: Vec::new(),
        })
    }

    fn offer_to_nerve(&mut self, name: &str, ros_type: &str) -> Result<ToRos, BridgeError> {
        let route = service_route(&mut self.catalog, ros_type)?;
        let server = RawServer::create(
            &self.node,
            name,
            &route.nerve_type,
            ServiceQos::default(),
            WaitMode::Block,
        )
        .map_err(|e| BridgeError::Nerve(e.to_string()))?;
        let (replies, requests) = self.endpoints(name, &route, false)?;
        Ok(ToRos {
            route,
            server,
            requests,
            replies,
            pending: HashMap::new(),
        })
    }
}

impl crate::worker::Worker for Services {
    fn shared(&self) -> &Shared {
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
        Services::pump(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_names_and_types_map_from_dds() {
        assert_eq!(
            service_of_request_topic("rq/ns/add_two_intsRequest"),
            Some("/ns/add_two_ints")
        );
        assert_eq!(service_of_request_topic("rt/chatter"), None);
        assert_eq!(
            service_type_of_request("std_srvs::srv::dds_::SetBool_Request_").as_deref(),
            Some("std_srvs/srv/SetBool")
        );
    }

    #[test]
    fn standard_services_convert_both_ways() {
        let mut cdr = Vec::new();
        let mut back = Vec::new();
        let o = srv::Outcome {
            success: 1,
            message: nerve_msgs::FixedStr::new("done").unwrap(),
        };
        outcome_to_ros(nerve::message::as_bytes(&o), &mut cdr).unwrap();
        outcome_to_nerve(&cdr, &mut back).unwrap();
        assert_eq!(back, nerve::message::as_bytes(&o));
        let t = srv::TwoInts { a: -3, b: 1 << 40 };
        two_ints_to_ros(nerve::message::as_bytes(&t), &mut cdr).unwrap();
        assert_eq!(cdr.len(), 4 + 16);
        two_ints_to_nerve(&cdr, &mut back).unwrap();
        assert_eq!(back, nerve::message::as_bytes(&t));
        empty_to_ros(&[], &mut cdr).unwrap();
        assert_eq!(cdr, [0, 1, 0, 0, 0]);
        // truncated bytes are errors, not panics
        for n in 0..cdr.len() {
            let _ = outcome_to_nerve(&cdr[..n], &mut back);
        }
        assert!(two_ints_to_nerve(&[0, 1, 0, 0, 1], &mut back).is_err());
    }
}
