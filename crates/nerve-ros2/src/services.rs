//! How a service type crosses ([`ServiceRoute`]): the request and response conversions
//! both doors use (the engine's services half, [`crate::engine`], and the CLI's
//! `nerve service call` of ROS 2 types).
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

use crate::types::{Catalog, TypeRoute};
use crate::BridgeError;
use nerve::service::ServiceType;
use nerve_ros2_map::service::{native_of_nerve, native_of_ros, Conversions};
use std::sync::Arc;
use std::time::Duration;

/// How long a bridged call may take before the bridge gives up on it.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Calls in flight per service before new ones are refused.
pub(crate) const MAX_PENDING: usize = 256;

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

/// The RIHS01 hash of a route's service type (`pkg/srv/Name`: its request, response and
/// event) from the carrier's definitions or the search path `search`, if found.
pub(crate) fn service_type_hash(
    route: &ServiceRoute,
    search: &[std::path::PathBuf],
) -> Option<String> {
    let of_carrier = match &route.form {
        ServiceForm::Cdr { request, .. } => match &request.carrier {
            crate::types::Carrier::Cdr(pass) => pass.registry().type_hash(&route.ros_type).ok(),
            crate::types::Carrier::Native(_) => None,
        },
        ServiceForm::Native(_) => None,
    };
    of_carrier
        .or_else(|| {
            let mut path = nerve_ros2_types::SearchPath::new();
            for d in search {
                path.push_dir(d.clone());
            }
            let mut r = nerve_ros2_types::Registry::new();
            r.load(&route.ros_type, &path).ok()?;
            r.type_hash(&route.ros_type).ok()
        })
        .map(|h| h.to_string())
}

/// The names of ROS 2's parameter services under a node's name (and the type
/// description service every node has): the generic service bridge leaves them alone.
pub(crate) const ROS_PARAM_SERVICES: [&str; 7] = [
    "get_parameters",
    "set_parameters",
    "set_parameters_atomically",
    "list_parameters",
    "describe_parameters",
    "get_parameter_types",
    "get_type_description",
];

/// Whether service `name` is a parameter service of either side (a ROS 2 node's
/// `/<node>/get_parameters` and the like, or a Nerve node's `<node>/_params`): these
/// cross here, never as plain services.
pub(crate) fn is_param_service(name: &str) -> bool {
    name.ends_with(nerve::param::SERVICE_SUFFIX)
        || ROS_PARAM_SERVICES.iter().any(|s| {
            name.strip_suffix(s)
                .is_some_and(|node| node.ends_with('/') && node.len() > 1)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nerve_msgs::lifecycle;
    use nerve_ros2_types::CdrWriter;

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

    fn fixtures() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../nerve-ros2-types/tests/fixtures/share")
    }

    /// A service carried as CDR announces the RIHS01 hash ROS 2 computes for the service
    /// type (recorded in the fixture from a real ROS 2); a standard service found nowhere
    /// on the type path has no hash here.
    #[test]
    fn service_type_hashes() {
        let search = vec![fixtures()];
        let mut catalog = Catalog::new(search.clone(), true);
        let basic = service_route(&mut catalog, "test_msgs/srv/BasicTypes").unwrap();
        assert!(matches!(basic.form, ServiceForm::Cdr { .. }));
        assert_eq!(
            service_type_hash(&basic, &search).as_deref(),
            Some("RIHS01_da348697437c103cc9a9322ac1bdbdcf8eb11a85de22f7f2492ca1df416e1a5f")
        );
        let trigger = service_route(&mut catalog, "std_srvs/srv/Trigger").unwrap();
        assert!(matches!(trigger.form, ServiceForm::Native(_)));
        assert_eq!(service_type_hash(&trigger, &search), None);
    }
}
