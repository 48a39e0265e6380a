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
//! Standard services (std_srvs Trigger and SetBool, example_interfaces AddTwoInts, and
//! lifecycle_msgs ChangeState, GetState, GetAvailableStates and GetAvailableTransitions,
//! so ROS 2 tools drive Nerve's managed nodes and `nerve lifecycle` drives ROS 2's) are
//! converted to Nerve's own; any other ROS 2 service crosses as CDR carriers.

use crate::dds::{RawAdapter, RawCdr, RosQos};
use crate::types::{dds_type_of_ros, Catalog, TypeRoute};
use crate::{BridgeConfig, BridgeError, Event, Shared};
use nerve::service::ServiceType;
use nerve::{CallError, Node, RawClient, RawRequest, RawServer, ServiceQos, WaitMode};
use nerve_ros2_map::service::{native_of_nerve, native_of_ros, Conversions};
use rustdds::no_key::{DataReader, DataWriter};
use rustdds::{RTPSEntity, SampleIdentity, Timestamp, TopicKind, WriteOptionsBuilder};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a bridged call may take before the bridge gives up on it.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Calls in flight per service before new ones are refused.
pub(crate) const MAX_PENDING: usize = 256;
/// How often the thread looks at Nerve's requests and replies while services cross.
const TICK: Duration = Duration::from_millis(1);

/// How a service type's requests and responses cross.
#[derive(Clone)]
pub enum ServiceForm {
    /// A standard service: converted to and from Nerve's own types
    /// ([`nerve_ros2_map::service`]).
    Native(Conversions),
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
    pub(crate) fn req_to_nerve(&self, cdr: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        match &self.form {
            ServiceForm::Native(c) => (c.req_to_nerve)(cdr, out),
            ServiceForm::Cdr { request, .. } => {
                request.to_nerve(cdr, 0, out).map_err(|e| e.to_string())
            }
        }
    }
    pub(crate) fn req_to_ros(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        match &self.form {
            ServiceForm::Native(c) => (c.req_to_ros)(payload, out),
            ServiceForm::Cdr { request, .. } => {
                request.to_ros(payload, out).map_err(|e| e.to_string())
            }
        }
    }
    pub(crate) fn resp_to_nerve(&self, cdr: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        match &self.form {
            ServiceForm::Native(c) => (c.resp_to_nerve)(cdr, out),
            ServiceForm::Cdr { response, .. } => {
                response.to_nerve(cdr, 0, out).map_err(|e| e.to_string())
            }
        }
    }
    pub(crate) fn resp_to_ros(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        match &self.form {
            ServiceForm::Native(c) => (c.resp_to_ros)(payload, out),
            ServiceForm::Cdr { response, .. } => {
                response.to_ros(payload, out).map_err(|e| e.to_string())
            }
        }
    }
    pub(crate) fn refusal(&self) -> Option<fn(&mut Vec<u8>)> {
        match &self.form {
            ServiceForm::Native(c) => c.refusal,
            ServiceForm::Cdr { .. } => None,
        }
    }
}

/// The route of ROS 2 service type `ros_type` (`pkg/srv/Name`).
pub fn service_route(catalog: &mut Catalog, ros_type: &str) -> Result<ServiceRoute, BridgeError> {
    if catalog.native() {
        if let Some(n) = native_of_ros(ros_type) {
            return Ok(ServiceRoute {
                ros_type: ros_type.to_string(),
                nerve_type: n.nerve_type,
                form: ServiceForm::Native(n.conv),
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
pub(crate) fn route_of_nerve(catalog: &mut Catalog, ty: &ServiceType) -> Option<ServiceRoute> {
    if let Some(n) = native_of_nerve(ty) {
        return Some(ServiceRoute {
            ros_type: n.ros_type.to_string(),
            nerve_type: n.nerve_type,
            form: ServiceForm::Native(n.conv),
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
            catalog: Catalog::of(&config),
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
                        (self.shared.events)(Event::Dropped {
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
                match answer {
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
    use nerve_msgs::lifecycle;
    use nerve_ros2_types::CdrWriter;

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

    fn route(ros: &str) -> ServiceRoute {
        service_route(&mut Catalog::new(Vec::new(), true), ros).unwrap()
    }

    fn label<const N: usize>(s: &str) -> nerve_msgs::FixedStr<N> {
        nerve_msgs::FixedStr::new(s).unwrap()
    }

    fn state(id: u8, l: &str) -> lifecycle::State {
        lifecycle::State {
            id,
            label: label(l),
        }
    }

    fn transition(id: u8, l: &str) -> lifecycle::Transition {
        lifecycle::Transition {
            id,
            label: label(l),
        }
    }

    /// CDR of lifecycle_msgs `uint8 id` + `string label` after the header.
    fn i64_to(w: &mut CdrWriter<'_>, v: i64) {
        w.align(8);
        w.bytes(&v.to_le_bytes());
    }

    fn id_label_cdr(w: &mut CdrWriter<'_>, id: u8, label: &str) {
        w.u8(id);
        w.string(label.as_bytes()).unwrap();
    }

    #[test]
    fn lifecycle_services_are_native_both_ways() {
        let mut catalog = Catalog::new(Vec::new(), true);
        for (ros, nerve) in [
            (
                "lifecycle_msgs/srv/ChangeState",
                ServiceType::of::<lifecycle::ChangeState>(),
            ),
            (
                "lifecycle_msgs/srv/GetState",
                ServiceType::of::<lifecycle::GetState>(),
            ),
            (
                "lifecycle_msgs/srv/GetAvailableStates",
                ServiceType::of::<lifecycle::GetAvailableStates>(),
            ),
            (
                "lifecycle_msgs/srv/GetAvailableTransitions",
                ServiceType::of::<lifecycle::GetAvailableTransitions>(),
            ),
        ] {
            assert_eq!(service_route(&mut catalog, ros).unwrap().nerve_type, nerve);
            let back = route_of_nerve(&mut catalog, &nerve).unwrap();
            assert_eq!(back.ros_type, ros);
        }
    }

    #[test]
    fn change_state_converts_both_ways_and_a_refusal_is_success_false() {
        let r = route("lifecycle_msgs/srv/ChangeState");
        let req = lifecycle::ChangeStateRequest {
            transition: transition(3, "activate"),
        };
        let (mut cdr, mut back) = (Vec::new(), Vec::new());
        r.req_to_ros(nerve::message::as_bytes(&req), &mut cdr)
            .unwrap();
        let mut want = Vec::new();
        id_label_cdr(&mut CdrWriter::new(&mut want), 3, "activate");
        assert_eq!(cdr, want);
        // header, id 3, padding, length 9, "activate\0"
        assert_eq!(&cdr[..12], &[0, 1, 0, 0, 3, 0, 0, 0, 9, 0, 0, 0]);
        r.req_to_nerve(&cdr, &mut back).unwrap();
        assert_eq!(back, nerve::message::as_bytes(&req));
        // `ros2 service call` sends a label and id 0
        want.clear();
        id_label_cdr(&mut CdrWriter::new(&mut want), 0, "configure");
        r.req_to_nerve(&want, &mut back).unwrap();
        let got: lifecycle::ChangeStateRequest = nerve::message::read_pod(&back).unwrap();
        assert_eq!(got.transition, transition(0, "configure"));

        let ok = lifecycle::ChangeStateResponse { success: 1 };
        r.resp_to_ros(nerve::message::as_bytes(&ok), &mut cdr)
            .unwrap();
        assert_eq!(cdr, [0, 1, 0, 0, 1]);
        r.resp_to_nerve(&cdr, &mut back).unwrap();
        assert_eq!(back, [1]);
        // ROS 2 bools other than 0 are true
        r.resp_to_nerve(&[0, 1, 0, 0, 7], &mut back).unwrap();
        assert_eq!(back, [1]);
        let refusal = r.refusal().expect("ChangeState answers a refusal");
        refusal(&mut cdr);
        assert_eq!(cdr, [0, 1, 0, 0, 0]);
        r.resp_to_nerve(&cdr, &mut back).unwrap();
        assert_eq!(back, [0]);
        // only ChangeState can say no
        assert!(route("lifecycle_msgs/srv/GetState").refusal().is_none());
        assert!(route("std_srvs/srv/SetBool").refusal().is_none());
    }

    #[test]
    fn lifecycle_queries_convert_both_ways() {
        let (mut cdr, mut back) = (Vec::new(), Vec::new());
        let get = route("lifecycle_msgs/srv/GetState");
        get.req_to_nerve(&[0, 1, 0, 0, 0], &mut back).unwrap();
        assert!(back.is_empty());
        let now = lifecycle::GetStateResponse {
            current_state: state(2, "inactive"),
        };
        get.resp_to_ros(nerve::message::as_bytes(&now), &mut cdr)
            .unwrap();
        let mut want = Vec::new();
        id_label_cdr(&mut CdrWriter::new(&mut want), 2, "inactive");
        assert_eq!(cdr, want);
        get.resp_to_nerve(&cdr, &mut back).unwrap();
        assert_eq!(back, nerve::message::as_bytes(&now));

        // lists: the message slice's elements, a CDR sequence
        let descs = [
            lifecycle::TransitionDescription {
                transition: transition(1, "configure"),
                start_state: state(1, "unconfigured"),
                goal_state: state(10, "configuring"),
            },
            lifecycle::TransitionDescription {
                transition: transition(5, "shutdown"),
                start_state: state(1, "unconfigured"),
                goal_state: state(12, "shuttingdown"),
            },
        ];
        let payload: Vec<u8> = descs
            .iter()
            .flat_map(|d| nerve::message::as_bytes(d).to_vec())
            .collect();
        let trans = route("lifecycle_msgs/srv/GetAvailableTransitions");
        trans.resp_to_ros(&payload, &mut cdr).unwrap();
        want.clear();
        let mut w = CdrWriter::new(&mut want);
        w.u32(2);
        for d in &descs {
            for (id, l) in [
                (d.transition.id, d.transition.label),
                (d.start_state.id, d.start_state.label),
                (d.goal_state.id, d.goal_state.label),
            ] {
                id_label_cdr(&mut w, id, &l.as_str());
            }
        }
        assert_eq!(cdr, want);
        trans.resp_to_nerve(&cdr, &mut back).unwrap();
        assert_eq!(back, payload);
        // an empty list, and every cut of a full one is an error, not a panic
        trans.resp_to_ros(&[], &mut cdr).unwrap();
        assert_eq!(cdr, [0, 1, 0, 0, 0, 0, 0, 0]);
        trans.resp_to_nerve(&cdr, &mut back).unwrap();
        assert!(back.is_empty());
        trans.resp_to_ros(&payload, &mut cdr).unwrap();
        for cut in 0..cdr.len() {
            assert!(
                trans.resp_to_nerve(&cdr[..cut], &mut back).is_err(),
                "cut {cut}"
            );
        }
        // a count far beyond the bytes is refused before anything is allocated
        let mut huge = vec![0, 1, 0, 0];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(trans.resp_to_nerve(&huge, &mut back).is_err());

        let states = [state(1, "unconfigured"), state(15, "errorprocessing")];
        let payload: Vec<u8> = states
            .iter()
            .flat_map(|s| nerve::message::as_bytes(s).to_vec())
            .collect();
        let all = route("lifecycle_msgs/srv/GetAvailableStates");
        all.resp_to_ros(&payload, &mut cdr).unwrap();
        all.resp_to_nerve(&cdr, &mut back).unwrap();
        assert_eq!(back, payload);
    }

    #[test]
    fn a_ros2_label_longer_than_31_bytes_is_an_error_naming_the_field() {
        let long = "a_label_of_forty_bytes_from_ros2_tooling";
        assert_eq!(long.len(), 40);
        let mut back = Vec::new();
        let mut cdr = Vec::new();
        id_label_cdr(&mut CdrWriter::new(&mut cdr), 1, long);
        let e = route("lifecycle_msgs/srv/ChangeState")
            .req_to_nerve(&cdr, &mut back)
            .unwrap_err();
        assert!(e.contains("transition.label"), "{e}");
        assert!(e.contains("40 bytes do not fit Nerve's 31"), "{e}");
        let e = route("lifecycle_msgs/srv/GetState")
            .resp_to_nerve(&cdr, &mut back)
            .unwrap_err();
        assert!(e.contains("current_state.label"), "{e}");
        // in a list: the element's field is named
        cdr.clear();
        let mut w = CdrWriter::new(&mut cdr);
        w.u32(1);
        id_label_cdr(&mut w, 1, "configure");
        id_label_cdr(&mut w, 1, "unconfigured");
        id_label_cdr(&mut w, 10, long);
        let e = route("lifecycle_msgs/srv/GetAvailableTransitions")
            .resp_to_nerve(&cdr, &mut back)
            .unwrap_err();
        assert!(e.contains("available_transitions.goal_state.label"), "{e}");
        // exactly 31 bytes fit
        let fits = &long[..31];
        cdr.clear();
        id_label_cdr(&mut CdrWriter::new(&mut cdr), 1, fits);
        route("lifecycle_msgs/srv/ChangeState")
            .req_to_nerve(&cdr, &mut back)
            .unwrap();
        let got: lifecycle::ChangeStateRequest = nerve::message::read_pod(&back).unwrap();
        assert_eq!(got.transition.label.as_str(), fits);
    }

    #[test]
    fn transition_events_cross_topics_as_lifecycle_msgs() {
        use nerve::message::schema::Schema;
        let mut catalog = Catalog::new(Vec::new(), true);
        let ros = catalog
            .for_ros("lifecycle_msgs/msg/TransitionEvent")
            .unwrap();
        assert_eq!(
            ros.schema.layout_hash,
            Schema::of::<lifecycle::TransitionEvent>().layout_hash
        );
        let to_ros = catalog
            .for_nerve(&Schema::of::<lifecycle::TransitionEvent>())
            .unwrap()
            .unwrap();
        assert_eq!(to_ros.ros_name, "lifecycle_msgs/msg/TransitionEvent");
        let ev = lifecycle::TransitionEvent {
            timestamp: 1_700_000_000_123_456_789,
            transition: transition(10, "transition_success"),
            start_state: state(10, "configuring"),
            goal_state: state(2, "inactive"),
        };
        let (mut cdr, mut back) = (Vec::new(), Vec::new());
        to_ros
            .to_ros(nerve::message::as_bytes(&ev), &mut cdr)
            .unwrap();
        // header, then the u64 timestamp at offset 0 of the body
        assert_eq!(&cdr[4..12], &ev.timestamp.to_le_bytes());
        let mut want = Vec::new();
        let mut w = CdrWriter::new(&mut want);
        i64_to(&mut w, ev.timestamp as i64);
        id_label_cdr(&mut w, 10, "transition_success");
        id_label_cdr(&mut w, 10, "configuring");
        id_label_cdr(&mut w, 2, "inactive");
        assert_eq!(cdr, want);
        ros.to_nerve(&cdr, 0, &mut back).unwrap();
        assert_eq!(back, nerve::message::as_bytes(&ev));
        for cut in 0..cdr.len() {
            assert!(
                ros.to_nerve(&cdr[..cut], 0, &mut back).is_err(),
                "cut {cut}"
            );
        }
        // a ROS 2 label too long for Nerve names its field
        want.clear();
        let mut w = CdrWriter::new(&mut want);
        i64_to(&mut w, 5);
        id_label_cdr(&mut w, 1, "configure");
        id_label_cdr(&mut w, 1, "unconfigured");
        id_label_cdr(&mut w, 2, &"x".repeat(32));
        let e = ros.to_nerve(&want, 0, &mut back).unwrap_err().to_string();
        assert!(e.contains("goal_state.label"), "{e}");
        assert!(e.contains("32 bytes do not fit Nerve's 31"), "{e}");
    }

    #[test]
    fn lifecycle_definitions_hash_as_ros2s_own() {
        // RIHS01 hashes from the lifecycle_msgs package's type descriptions (Kilted)
        // lifecycle_services' order: the ChangeState request and response, then the
        // GetState, GetAvailableStates and GetAvailableTransitions responses
        let parts = nerve_ros2_map::standard::lifecycle_services();
        let standard = nerve_ros2_map::standard::standard();
        let event = standard
            .iter()
            .find(|s| s.ros_name == "lifecycle_msgs/msg/TransitionEvent")
            .unwrap();
        for (s, hash) in [
            (
                event,
                "d5f8873a2f0146498f812d7885c7327ce27e463d36811d8792f35ee38c0d6c38",
            ),
            (
                &parts[0],
                "d74c6f524e14cade7b67e7297190360ed749264af300524fc1456f27cc2a553a",
            ),
            (
                &parts[1],
                "e1ddfed0271fefe63767aa71561926e4d9eac0f1ddf9e71a8873eb46b36deac2",
            ),
            (
                &parts[2],
                "fe249babab472e42cb5653b5d6a6b0c42a003b0fdfb84851aea3fde08760b4f5",
            ),
            (
                &parts[3],
                "223e0dd5bb8a847ebb9532adaf8b5e2a97e6e68e79faeaabd81a45fb32925bd1",
            ),
            (
                &parts[4],
                "4711339461aadf02bcfff797a198de911f885074bd3f2fe9f7b677ef87f0741c",
            ),
        ] {
            let got = nerve_ros2_types::Registry::from_ros2msg(s.ros_name, &(s.text)())
                .and_then(|r| r.type_hash(s.ros_name))
                .unwrap();
            assert_eq!(got.to_string(), format!("RIHS01_{hash}"), "{}", s.ros_name);
        }
    }
}
