//! Parameters both ways across the bridge (one thread), on any ROS 2 network.
//!
//! - A ROS 2 node (seen by its `/<node>/get_parameters` server in the ROS 2 graph) is
//!   offered to Nerve as `<node>/_params`, the service every Nerve node with parameters
//!   serves: `nerve param list|get|set|describe` and [`nerve::param::ParamClient`] work on
//!   it unchanged. Each Nerve request becomes one or two calls of ROS 2's parameter
//!   services (`list_parameters`, `get_parameters`, `describe_parameters`,
//!   `set_parameters`, `set_parameters_atomically`) through the side's service clients,
//!   answered when their replies are in. A set first reads the current values so that an
//!   integer sets a double parameter, as it does on a Nerve node.
//! - A Nerve node with a `<node>/_params` service is offered to ROS 2: the bridge serves
//!   `<node>/get_parameters`, `set_parameters`, `set_parameters_atomically`,
//!   `list_parameters`, `describe_parameters` and `get_parameter_types` by calling the
//!   node's parameter service, so that rclpy's `AsyncParameterClient` (or `ros2 param`)
//!   reads and sets a Nerve node's parameters.
//!
//! The ROS 2 side is `rcl_interfaces` in CDR (written and read here; the services' RIHS01
//! hashes, which rmw_zenoh puts in its keys, are computed from their definitions, held
//! here); the Nerve side is [`ParamRequest`]/[`ParamResponse`] in postcard, the
//! encoding of `Serde<T>` messages (written and read here, over raw service ports, so
//! that calls wait without blocking the thread). Calls in flight are bounded; a ROS 2
//! node that goes away ends the calls it had with [`RawRequest::server_gone`]; what
//! cannot be delivered is counted and named.

use crate::engine::side::{Endpoint, RosSide, RosType, ServiceClient, ServiceServer};
use crate::engine::worker::{Failures, Worker};
use crate::engine::Shared;
use crate::{BridgeConfig, BridgeError, Event};
use nerve::param::{
    ParamDescriptor, ParamInfo, ParamRange, ParamRequest, ParamResponse, ParamService, ParamType,
    ParamValue, SERVICE_SUFFIX,
};
use nerve::service::ServiceType;
use nerve::{Node, RawClient, RawPendingCall, RawRequest, RawServer, ServiceQos, WaitMode};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a bridged parameter call may take before the bridge gives up on it.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Calls in flight per node (each way) before new ones are refused.
const MAX_PENDING: usize = 64;
/// How often the thread looks at requests and replies while parameters cross: a
/// parameter call is not latency-bound, and every ROS 2 node has parameter services, so
/// a short tick would cost CPU for every node in the graph.
const TICK: Duration = Duration::from_millis(10);
/// The longest the thread goes without looking while no call is in flight: each quiet
/// look waits one [`TICK`] longer for the next, up to this (a call's first look comes at
/// most this late; its answers are then looked at every tick).
const QUIET: Duration = Duration::from_millis(100);

/// One of ROS 2's parameter services.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    Get,
    Set,
    SetAtomically,
    List,
    Describe,
    Types,
}

impl Op {
    const ALL: [Op; 6] = [
        Op::Get,
        Op::Set,
        Op::SetAtomically,
        Op::List,
        Op::Describe,
        Op::Types,
    ];

    /// The service's name under the node's.
    fn service(self) -> &'static str {
        match self {
            Op::Get => "get_parameters",
            Op::Set => "set_parameters",
            Op::SetAtomically => "set_parameters_atomically",
            Op::List => "list_parameters",
            Op::Describe => "describe_parameters",
            Op::Types => "get_parameter_types",
        }
    }

    /// The service's ROS 2 type.
    fn ros_type(self) -> &'static str {
        match self {
            Op::Get => "rcl_interfaces/srv/GetParameters",
            Op::Set => "rcl_interfaces/srv/SetParameters",
            Op::SetAtomically => "rcl_interfaces/srv/SetParametersAtomically",
            Op::List => "rcl_interfaces/srv/ListParameters",
            Op::Describe => "rcl_interfaces/srv/DescribeParameters",
            Op::Types => "rcl_interfaces/srv/GetParameterTypes",
        }
    }
}

/// The node whose parameter server `service` is (`/ns/n/get_parameters` → `/ns/n`).
fn node_of_service(service: &str, op: Op) -> Option<&str> {
    service
        .strip_suffix(op.service())
        .and_then(|s| s.strip_suffix('/'))
        .filter(|s| s.starts_with('/') && s.len() > 1)
}

/// The definitions of `rcl_interfaces`' parameter services (fields only: what their
/// RIHS01 hashes are computed from; the same in Jazzy and Kilted).
mod rcl {
    use super::Op;
    use nerve_ros2_types::Registry;

    /// Messages the services use, and theirs.
    const MESSAGES: [(&str, &str); 9] = [
        ("builtin_interfaces/msg/Time", "int32 sec\nuint32 nanosec\n"),
        (
            "service_msgs/msg/ServiceEventInfo",
            "uint8 event_type\nbuiltin_interfaces/Time stamp\nchar[16] client_gid\n\
             int64 sequence_number\n",
        ),
        (
            "rcl_interfaces/msg/ParameterValue",
            "uint8 type\nbool bool_value\nint64 integer_value\nfloat64 double_value\n\
             string string_value\nbyte[] byte_array_value\nbool[] bool_array_value\n\
             int64[] integer_array_value\nfloat64[] double_array_value\n\
             string[] string_array_value\n",
        ),
        (
            "rcl_interfaces/msg/Parameter",
            "string name\nParameterValue value\n",
        ),
        (
            "rcl_interfaces/msg/FloatingPointRange",
            "float64 from_value\nfloat64 to_value\nfloat64 step\n",
        ),
        (
            "rcl_interfaces/msg/IntegerRange",
            "int64 from_value\nint64 to_value\nuint64 step\n",
        ),
        (
            "rcl_interfaces/msg/ParameterDescriptor",
            "string name\nuint8 type\nstring description\nstring additional_constraints\n\
             bool read_only\nbool dynamic_typing\n\
             FloatingPointRange[<=1] floating_point_range\nIntegerRange[<=1] integer_range\n",
        ),
        (
            "rcl_interfaces/msg/SetParametersResult",
            "bool successful\nstring reason\n",
        ),
        (
            "rcl_interfaces/msg/ListParametersResult",
            "string[] names\nstring[] prefixes\n",
        ),
    ];

    /// A service's definition.
    fn service(op: Op) -> &'static str {
        match op {
            Op::Get => "string[] names\n---\nParameterValue[] values\n",
            Op::Set => "Parameter[] parameters\n---\nSetParametersResult[] results\n",
            Op::SetAtomically => "Parameter[] parameters\n---\nSetParametersResult result\n",
            Op::List => "string[] prefixes\nuint64 depth\n---\nListParametersResult result\n",
            Op::Describe => "string[] names\n---\nParameterDescriptor[] descriptors\n",
            Op::Types => "string[] names\n---\nuint8[] types\n",
        }
    }

    /// The RIHS01 hash of service `op`'s type (`None` only if the definitions above did
    /// not parse, which a test rules out).
    pub(super) fn type_hash(op: Op) -> Option<String> {
        let mut r = Registry::new();
        for (name, text) in MESSAGES {
            r.add_interface_text(name, text).ok()?;
        }
        r.add_interface_text(op.ros_type(), service(op)).ok()?;
        r.type_hash(op.ros_type()).ok().map(|h| h.to_string())
    }
}

/// The parameter service's payloads: `Serde<T>` messages (an 8-byte length in native
/// byte order, then the postcard bytes of [`ParamRequest`]/[`ParamResponse`]).
mod wire {
    use super::*;
    use serde::de::DeserializeOwned;

    fn framed<T: serde::Serialize>(v: &T) -> Vec<u8> {
        // postcard into a Vec fails only without memory
        let body = postcard::to_allocvec(v).unwrap_or_default();
        let mut p = (body.len() as u64).to_ne_bytes().to_vec();
        p.extend_from_slice(&body);
        p
    }

    fn unframed<T: DeserializeOwned>(payload: &[u8], what: &str) -> Result<T, String> {
        let head = payload
            .get(..8)
            .ok_or_else(|| format!("a {what} payload shorter than its head"))?;
        let len = u64::from_ne_bytes(head.try_into().map_err(|_| "8 bytes")?);
        let body = &payload[8..];
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let body = body
            .get(..len)
            .ok_or_else(|| format!("a {what} of {len} bytes in a payload of {}", body.len()))?;
        postcard::from_bytes(body).map_err(|e| format!("a malformed {what}: {e}"))
    }

    /// A request to a node's parameter service, as its payload.
    pub(super) fn encode_request(req: &ParamRequest) -> Vec<u8> {
        framed(req)
    }

    /// A request from its payload.
    pub(super) fn decode_request(payload: &[u8]) -> Result<ParamRequest, String> {
        unframed(payload, "parameter request")
    }

    /// A response of a node's parameter service, as its payload.
    pub(super) fn encode_response(resp: &ParamResponse) -> Vec<u8> {
        framed(resp)
    }

    /// A response from its payload.
    pub(super) fn decode_response(payload: &[u8]) -> Result<ParamResponse, String> {
        unframed(payload, "parameter response")
    }
}

/// `rcl_interfaces` in CDR: ParameterValue, Parameter, ParameterDescriptor,
/// SetParametersResult, ListParametersResult and the services' requests and responses.
mod cdr {
    use super::*;
    use nerve_ros2_types::{CdrReader, CdrWriter};

    /// `ParameterType` constants.
    pub(super) const NOT_SET: u8 = 0;
    const BOOL: u8 = 1;
    const INTEGER: u8 = 2;
    const DOUBLE: u8 = 3;
    const STRING: u8 = 4;
    const BYTE_ARRAY: u8 = 5;
    const BOOL_ARRAY: u8 = 6;
    const INTEGER_ARRAY: u8 = 7;
    const DOUBLE_ARRAY: u8 = 8;
    const STRING_ARRAY: u8 = 9;

    fn err(e: impl std::fmt::Display) -> String {
        e.to_string()
    }

    /// The ROS 2 `ParameterType` of a Nerve type.
    pub(super) fn ros_type(t: ParamType) -> u8 {
        match t {
            ParamType::Bool => BOOL,
            ParamType::Int => INTEGER,
            ParamType::Float => DOUBLE,
            ParamType::Str => STRING,
            ParamType::Bytes => BYTE_ARRAY,
            ParamType::BoolArray => BOOL_ARRAY,
            ParamType::IntArray => INTEGER_ARRAY,
            ParamType::FloatArray => DOUBLE_ARRAY,
            ParamType::StrArray => STRING_ARRAY,
        }
    }

    /// The Nerve type of a ROS 2 `ParameterType` (`None`: not set).
    fn nerve_type(t: u8) -> Result<Option<ParamType>, String> {
        Ok(Some(match t {
            NOT_SET => return Ok(None),
            BOOL => ParamType::Bool,
            INTEGER => ParamType::Int,
            DOUBLE => ParamType::Float,
            STRING => ParamType::Str,
            BYTE_ARRAY => ParamType::Bytes,
            BOOL_ARRAY => ParamType::BoolArray,
            INTEGER_ARRAY => ParamType::IntArray,
            DOUBLE_ARRAY => ParamType::FloatArray,
            STRING_ARRAY => ParamType::StrArray,
            t => {
                return Err(format!(
                    "ROS 2 parameter type {t} is not one Nerve has (bool, integer, double, \
                     string, byte/bool/integer/double/string arrays)"
                ))
            }
        }))
    }

    /// Writes CDR.
    pub(super) struct W<'a>(CdrWriter<'a>);

    impl<'a> W<'a> {
        pub(super) fn new(buf: &'a mut Vec<u8>) -> W<'a> {
            W(CdrWriter::new(buf))
        }
        /// A sequence length.
        pub(super) fn len(&mut self, n: usize) -> Result<(), String> {
            self.0.len(n).map_err(err)
        }
        fn i64(&mut self, v: i64) {
            self.0.align(8);
            self.0.bytes(&v.to_le_bytes());
        }
        fn u64(&mut self, v: u64) {
            self.0.align(8);
            self.0.bytes(&v.to_le_bytes());
        }
        pub(super) fn u8(&mut self, v: u8) {
            self.0.u8(v);
        }
        fn bool(&mut self, v: bool) {
            self.0.u8(u8::from(v));
        }
        pub(super) fn str(&mut self, s: &str) -> Result<(), String> {
            self.0.string(s.as_bytes()).map_err(err)
        }
        pub(super) fn strs(&mut self, v: &[String]) -> Result<(), String> {
            self.len(v.len())?;
            v.iter().try_for_each(|s| self.str(s))
        }
        pub(super) fn u8s(&mut self, v: &[u8]) -> Result<(), String> {
            self.len(v.len())?;
            self.0.bytes(v);
            Ok(())
        }
        fn i64s(&mut self, v: &[i64]) -> Result<(), String> {
            self.len(v.len())?;
            // an empty sequence has no elements, so no padding for them either
            v.iter().for_each(|x| self.i64(*x));
            Ok(())
        }
        fn f64s(&mut self, v: &[f64]) -> Result<(), String> {
            self.len(v.len())?;
            if !v.is_empty() {
                self.0.f64s(v);
            }
            Ok(())
        }

        /// A `ParameterValue` (`None`: not set).
        pub(super) fn value(&mut self, v: Option<&ParamValue>) -> Result<(), String> {
            self.u8(v.map_or(NOT_SET, |v| ros_type(v.ty())));
            self.bool(matches!(v, Some(ParamValue::Bool(true))));
            self.i64(match v {
                Some(ParamValue::Int(i)) => *i,
                _ => 0,
            });
            self.0.f64(match v {
                Some(ParamValue::Float(f)) => *f,
                _ => 0.0,
            });
            self.str(match v {
                Some(ParamValue::Str(s)) => s,
                _ => "",
            })?;
            self.u8s(match v {
                Some(ParamValue::Bytes(b)) => b,
                _ => &[],
            })?;
            match v {
                Some(ParamValue::BoolArray(b)) => {
                    self.len(b.len())?;
                    b.iter().for_each(|x| self.bool(*x));
                }
                _ => self.len(0)?,
            }
            self.i64s(match v {
                Some(ParamValue::IntArray(x)) => x,
                _ => &[],
            })?;
            self.f64s(match v {
                Some(ParamValue::FloatArray(x)) => x,
                _ => &[],
            })?;
            self.strs(match v {
                Some(ParamValue::StrArray(x)) => x,
                _ => &[],
            })
        }

        /// A `Parameter`.
        pub(super) fn parameter(&mut self, name: &str, v: &ParamValue) -> Result<(), String> {
            self.str(name)?;
            self.value(Some(v))
        }

        /// A `SetParametersResult`.
        pub(super) fn set_result(&mut self, r: &Result<(), String>) -> Result<(), String> {
            self.bool(r.is_ok());
            self.str(r.as_ref().err().map_or("", String::as_str))
        }

        /// A `ParameterDescriptor` of `name` (not declared: type not set).
        pub(super) fn descriptor(
            &mut self,
            name: &str,
            info: Option<&ParamInfo>,
        ) -> Result<(), String> {
            self.str(name)?;
            self.u8(info.map_or(NOT_SET, |i| ros_type(i.ty)));
            let d = info.map(|i| &i.descriptor);
            self.str(d.map_or("", |d| d.description.as_str()))?;
            self.str("")?; // additional_constraints
            self.bool(d.is_some_and(|d| d.read_only));
            self.bool(d.is_some_and(|d| d.dynamic_typing));
            let range = d.and_then(|d| d.range);
            let int = info.is_some_and(|i| matches!(i.ty, ParamType::Int | ParamType::IntArray));
            // floating_point_range, integer_range: sequences of at most one
            match range {
                Some(r) if !int => {
                    self.0.u32(1);
                    self.0.f64(r.min);
                    self.0.f64(r.max);
                    self.0.f64(r.step);
                    self.0.u32(0);
                }
                Some(r) => {
                    self.0.u32(0);
                    self.0.u32(1);
                    self.i64(r.min as i64);
                    self.i64(r.max as i64);
                    self.u64(r.step.max(0.0) as u64);
                }
                None => {
                    self.0.u32(0);
                    self.0.u32(0);
                }
            }
            Ok(())
        }
    }

    /// Reads CDR.
    pub(super) struct R<'a>(CdrReader<'a>);

    impl<'a> R<'a> {
        pub(super) fn new(data: &'a [u8]) -> Result<R<'a>, String> {
            CdrReader::new(data).map(R).map_err(err)
        }
        fn len(&mut self, elem: usize) -> Result<usize, String> {
            self.0.len(elem).map_err(err)
        }
        pub(super) fn u8(&mut self) -> Result<u8, String> {
            self.0.u8().map_err(err)
        }
        fn bool(&mut self) -> Result<bool, String> {
            Ok(self.u8()? != 0)
        }
        fn i64(&mut self) -> Result<i64, String> {
            self.0.align(8).map_err(err)?;
            let b = self.0.take(8).map_err(err)?;
            Ok(i64::from_le_bytes(b.try_into().map_err(|_| "8 bytes")?))
        }
        pub(super) fn u64(&mut self) -> Result<u64, String> {
            self.i64().map(|v| v as u64)
        }
        fn f64(&mut self) -> Result<f64, String> {
            self.0.f64().map_err(err)
        }
        pub(super) fn str(&mut self) -> Result<String, String> {
            let b = self.0.string().map_err(err)?;
            String::from_utf8(b.to_vec()).map_err(|e| format!("a string: {e}"))
        }
        pub(super) fn strs(&mut self) -> Result<Vec<String>, String> {
            (0..self.len(4)?).map(|_| self.str()).collect()
        }
        pub(super) fn u8s(&mut self) -> Result<Vec<u8>, String> {
            let n = self.len(1)?;
            Ok(self.0.take(n).map_err(err)?.to_vec())
        }
        fn i64s(&mut self) -> Result<Vec<i64>, String> {
            (0..self.len(8)?).map(|_| self.i64()).collect()
        }
        fn f64s(&mut self) -> Result<Vec<f64>, String> {
            (0..self.len(8)?).map(|_| self.f64()).collect()
        }

        /// A `ParameterValue` (`None`: not set); an unknown type is an error naming it.
        pub(super) fn value(&mut self) -> Result<Option<ParamValue>, String> {
            let ty = self.u8()?;
            let b = self.bool()?;
            let i = self.i64()?;
            let f = self.f64()?;
            let s = self.str()?;
            let bytes = self.u8s()?;
            let bools = self.u8s()?;
            let ints = self.i64s()?;
            let floats = self.f64s()?;
            let strs = self.strs()?;
            Ok(nerve_type(ty)?.map(|t| match t {
                ParamType::Bool => ParamValue::Bool(b),
                ParamType::Int => ParamValue::Int(i),
                ParamType::Float => ParamValue::Float(f),
                ParamType::Str => ParamValue::Str(s),
                ParamType::Bytes => ParamValue::Bytes(bytes),
                ParamType::BoolArray => {
                    ParamValue::BoolArray(bools.iter().map(|b| *b != 0).collect())
                }
                ParamType::IntArray => ParamValue::IntArray(ints),
                ParamType::FloatArray => ParamValue::FloatArray(floats),
                ParamType::StrArray => ParamValue::StrArray(strs),
            }))
        }

        /// `ParameterValue[]`.
        pub(super) fn values(&mut self) -> Result<Vec<Option<ParamValue>>, String> {
            (0..self.len(1)?).map(|_| self.value()).collect()
        }

        /// `Parameter[]`: names and values (`None`: not set, an undeclare).
        pub(super) fn parameters(&mut self) -> Result<Vec<(String, Option<ParamValue>)>, String> {
            (0..self.len(1)?)
                .map(|_| Ok((self.str()?, self.value()?)))
                .collect()
        }

        /// A `SetParametersResult`.
        pub(super) fn set_result(&mut self) -> Result<Result<(), String>, String> {
            let ok = self.bool()?;
            let reason = self.str()?;
            Ok(if ok { Ok(()) } else { Err(reason) })
        }

        /// `SetParametersResult[]`.
        pub(super) fn set_results(&mut self) -> Result<Vec<Result<(), String>>, String> {
            (0..self.len(1)?).map(|_| self.set_result()).collect()
        }

        /// A `ParameterDescriptor`: name, type, description, read-only, dynamic typing,
        /// range.
        pub(super) fn descriptor(&mut self) -> Result<(String, u8, ParamDescriptor), String> {
            let name = self.str()?;
            let ty = self.u8()?;
            let description = self.str()?;
            let _constraints = self.str()?;
            let read_only = self.bool()?;
            let dynamic_typing = self.bool()?;
            let mut range = None;
            for _ in 0..self.len(24)?.min(1) {
                range = Some(ParamRange {
                    min: self.f64()?,
                    max: self.f64()?,
                    step: self.f64()?,
                });
            }
            for _ in 0..self.len(24)?.min(1) {
                range = Some(ParamRange {
                    min: self.i64()? as f64,
                    max: self.i64()? as f64,
                    step: self.u64()? as f64,
                });
            }
            Ok((
                name,
                ty,
                ParamDescriptor {
                    description,
                    range,
                    read_only,
                    dynamic_typing,
                },
            ))
        }

        /// `ParameterDescriptor[]`.
        pub(super) fn descriptors(&mut self) -> Result<Vec<(String, u8, ParamDescriptor)>, String> {
            (0..self.len(1)?).map(|_| self.descriptor()).collect()
        }
    }

    /// A request of service `op` with `names` (get, describe, get types).
    pub(super) fn names_request(names: &[String]) -> Result<Vec<u8>, String> {
        let mut buf = Vec::new();
        W::new(&mut buf).strs(names)?;
        Ok(buf)
    }

    /// A `list_parameters` request for every name.
    pub(super) fn list_all_request() -> Vec<u8> {
        let mut buf = Vec::new();
        let mut w = W::new(&mut buf);
        let _ = w.strs(&[]);
        w.u64(0); // DEPTH_RECURSIVE
        buf
    }

    /// A `set_parameters(_atomically)` request.
    pub(super) fn set_request(values: &[(String, ParamValue)]) -> Result<Vec<u8>, String> {
        let mut buf = Vec::new();
        let mut w = W::new(&mut buf);
        w.len(values.len())?;
        for (n, v) in values {
            w.parameter(n, v)?;
        }
        Ok(buf)
    }
}

/// What a Nerve request to a ROS 2 node asks.
enum Kind {
    /// Names starting with the prefix (ROS 2's prefixes are namespaces: filtered here).
    List { prefix: String },
    /// Values.
    Get,
    /// Declarations and values.
    Describe,
    /// A set: first the current values (for their types), then the set.
    Set {
        values: Vec<(String, ParamValue)>,
        atomic: bool,
    },
}

/// What the bridge does for a Nerve request to a ROS 2 node, between the ROS 2 calls it
/// makes.
struct Job {
    kind: Kind,
    names: Vec<String>,
    /// Values are asked name by name: rclpy answers nothing at all for a list of names
    /// where one is not declared.
    split: bool,
    /// The set was sent (its results are next).
    setting: bool,
}

/// ROS 2 calls to make (or their replies): the service and the CDR.
type Calls = Vec<(Op, Vec<u8>)>;

/// What comes of a step of a [`Job`].
enum Step {
    /// The answer to the Nerve client.
    Reply(ParamResponse),
    /// More ROS 2 calls to make.
    Call(Calls),
}

impl Job {
    /// The job for a Nerve request and the ROS 2 calls it starts with.
    fn start(req: ParamRequest) -> Result<(Job, Calls), String> {
        let (kind, names) = match req {
            ParamRequest::List { prefix } => (Kind::List { prefix }, Vec::new()),
            ParamRequest::Get { names } => (Kind::Get, names),
            ParamRequest::Describe { names } => (Kind::Describe, names),
            ParamRequest::Set { values, atomic } => {
                let names = values.iter().map(|(n, _)| n.clone()).collect();
                (Kind::Set { values, atomic }, names)
            }
        };
        let job = Job {
            kind,
            names,
            split: false,
            setting: false,
        };
        let calls = match job.kind {
            Kind::List { .. } => vec![(Op::List, cdr::list_all_request())],
            _ => job.fetch()?,
        };
        Ok((job, calls))
    }

    /// The calls that read the values (and for a describe the declarations) of the names.
    fn fetch(&self) -> Result<Calls, String> {
        let describe = matches!(self.kind, Kind::Describe);
        let mut calls = Vec::new();
        let groups: Vec<&[String]> = if self.split {
            self.names.chunks(1).collect()
        } else {
            vec![&self.names[..]]
        };
        for names in groups {
            let req = cdr::names_request(names)?;
            if describe {
                calls.push((Op::Describe, req.clone()));
            }
            calls.push((Op::Get, req));
        }
        Ok(calls)
    }

    /// The next step, given the replies (CDR) of the calls the last step made, in the
    /// order they were made.
    fn step(&mut self, answers: &[(Op, Vec<u8>)]) -> Result<Step, String> {
        let answer = |op: Op| {
            answers
                .iter()
                .find(|(o, _)| *o == op)
                .map(|(_, cdr)| cdr.as_slice())
                .ok_or_else(|| format!("no {} reply", op.service()))
        };
        if let Kind::List { prefix } = &self.kind {
            let mut r = cdr::R::new(answer(Op::List)?)?;
            let mut names: Vec<String> = r
                .strs()?
                .into_iter()
                .filter(|n| n.starts_with(prefix.as_str()))
                .collect();
            names.sort();
            names.dedup();
            return Ok(Step::Reply(ParamResponse::List(names)));
        }
        if self.setting {
            let n = self.names.len();
            return Ok(Step::Reply(ParamResponse::Set(match self.kind {
                Kind::Set { atomic: true, .. } => {
                    vec![cdr::R::new(answer(Op::SetAtomically)?)?.set_result()?; n]
                }
                _ => {
                    let r = cdr::R::new(answer(Op::Set)?)?.set_results()?;
                    if r.len() != n {
                        return Err(format!(
                            "set_parameters answered {} results for {n} values",
                            r.len()
                        ));
                    }
                    r
                }
            })));
        }
        // values (and declarations) of the names
        let mut values: Vec<Option<ParamValue>> = Vec::new();
        let mut descs: HashMap<String, ParamDescriptor> = HashMap::new();
        for (op, cdr) in answers {
            let mut r = cdr::R::new(cdr)?;
            match op {
                Op::Get => values.extend(match r.values()? {
                    v if self.split && v.len() <= 1 => vec![v.into_iter().next().flatten()],
                    v if v.len() == self.names.len() => v,
                    v if v.is_empty() && self.names.len() == 1 => vec![None],
                    v if v.is_empty() => {
                        self.split = true;
                        return Ok(Step::Call(self.fetch()?));
                    }
                    v => {
                        return Err(format!(
                            "get_parameters answered {} values for {} names",
                            v.len(),
                            self.names.len()
                        ))
                    }
                }),
                Op::Describe => descs.extend(r.descriptors()?.into_iter().map(|(n, _, d)| (n, d))),
                op => return Err(format!("an unexpected {} reply", op.service())),
            }
        }
        if values.len() != self.names.len() {
            return Err(format!(
                "{} values for {} names",
                values.len(),
                self.names.len()
            ));
        }
        match &mut self.kind {
            Kind::Get => Ok(Step::Reply(ParamResponse::Get(values))),
            Kind::Describe => Ok(Step::Reply(ParamResponse::Describe(
                self.names
                    .iter()
                    .zip(values)
                    .map(|(name, v)| {
                        v.map(|value| ParamInfo {
                            name: name.clone(),
                            ty: value.ty(),
                            descriptor: descs.get(name).cloned().unwrap_or_default(),
                            value,
                        })
                    })
                    .collect(),
            ))),
            Kind::Set {
                values: to_set,
                atomic,
            } => {
                // an integer sets a double parameter, as on a Nerve node
                for ((_, v), now) in to_set.iter_mut().zip(values) {
                    if let Some(c) = now.and_then(|now| v.clone().coerce(now.ty())) {
                        *v = c;
                    }
                }
                let op = if *atomic { Op::SetAtomically } else { Op::Set };
                let req = cdr::set_request(to_set)?;
                self.setting = true;
                Ok(Step::Call(vec![(op, req)]))
            }
            Kind::List { .. } => Err("a list has no values".into()),
        }
    }
}

/// A ROS 2 call of one of a node's parameter services: the service and the call as its
/// client names it (clients number their calls each on their own).
type CallId<S> = (Op, <<S as RosSide>::Client as ServiceClient>::Call);

/// A Nerve request to a ROS 2 node, in flight.
struct Pending<S: RosSide> {
    req: RawRequest,
    job: Job,
    since: Instant,
    /// The ROS 2 calls of this step, in the order they were made.
    waiting: Vec<CallId<S>>,
    /// Their replies so far.
    answers: HashMap<CallId<S>, Vec<u8>>,
}

/// A ROS 2 node whose parameters are offered to Nerve as `<node>/_params`.
struct RosNode<S: RosSide> {
    server: RawServer,
    /// Its `get_parameters` server as the graph showed it (another type or hash is
    /// another node).
    get: Endpoint,
    /// A client per service.
    clients: HashMap<Op, S::Client>,
    pending: HashMap<u64, Pending<S>>,
    /// Which pending request a ROS 2 call belongs to.
    calls: HashMap<CallId<S>, u64>,
    next: u64,
}

/// What the ROS 2 answer to a Nerve node's response needs of the request.
enum Ask {
    Get,
    Types,
    Describe(Vec<String>),
    List {
        prefixes: Vec<String>,
        depth: u64,
    },
    /// Per parameter: refused here (a reason) or sent to the node.
    Set {
        refused: Vec<Option<String>>,
        atomic: bool,
    },
}

/// A ROS 2 request to a Nerve node, in flight.
struct Asked<S: RosSide> {
    call: RawPendingCall,
    op: Op,
    ask: Ask,
    /// What the answer goes through.
    id: <S::Server as ServiceServer>::Request,
    since: Instant,
}

/// A Nerve node whose parameters are offered to ROS 2.
struct NerveNode<S: RosSide> {
    client: RawClient,
    /// A server per service.
    servers: Vec<(Op, S::Server)>,
    pending: Vec<Asked<S>>,
}

/// The parameters half of a bridge (one thread).
pub(crate) struct Params<S: RosSide> {
    shared: Arc<Shared<S>>,
    config: BridgeConfig,
    node: Node,
    /// The ROS 2 type of each parameter service.
    types: HashMap<Op, RosType>,
    /// ROS 2 nodes offered to Nerve, by full name.
    ros: BTreeMap<String, RosNode<S>>,
    /// Nerve nodes offered to ROS 2, by full name.
    nerve: BTreeMap<String, NerveNode<S>>,
    /// Names that failed (reported once, tried again later).
    failures: Failures,
    /// How long the last look waits for the next (grows while nothing is in flight).
    quiet: Duration,
    /// No look before this.
    quiet_until: Instant,
}

impl<S: RosSide> Params<S> {
    /// The half, made on its own thread with its own Nerve node.
    pub(crate) fn new(
        shared: Arc<Shared<S>>,
        config: BridgeConfig,
        node: Node,
    ) -> Result<Params<S>, BridgeError> {
        let types = Op::ALL
            .into_iter()
            .map(|op| {
                let ty = RosType {
                    name: op.ros_type().to_string(),
                    hash: rcl::type_hash(op),
                };
                (op, ty)
            })
            .collect();
        Ok(Params {
            shared,
            config,
            node,
            types,
            ros: BTreeMap::new(),
            nerve: BTreeMap::new(),
            failures: Failures::default(),
            quiet: Duration::ZERO,
            quiet_until: Instant::now(),
        })
    }

    /// Runs until the bridge stops.
    pub(crate) fn run(mut self) {
        crate::engine::worker::run(&mut self, TICK);
        for (name, n) in std::mem::take(&mut self.ros) {
            for (_, p) in n.pending {
                let _ = p
                    .req
                    .server_gone(&format!("the bridge to ROS 2 node {name} stopped"));
            }
        }
    }

    fn report(&mut self, name: &str, reason: String) {
        self.failures.report(&self.shared, name, reason);
    }

    /// The ROS 2 type of service `op`.
    fn ty(&self, op: Op) -> &RosType {
        // every op has its type (made in `new`)
        &self.types[&op]
    }

    /// Compares both graphs: offers new nodes, withdraws those gone.
    fn sync(&mut self) {
        let peers = self.shared.peers();
        let primary = self.shared.side.primary(&peers);
        // ROS 2 nodes (neither ours nor bridges'): their parameter servers, by node; a
        // node is one with a get_parameters server
        let mut ros_nodes: BTreeMap<String, HashMap<Op, Endpoint>> = BTreeMap::new();
        if primary {
            for e in self.shared.side.graph(&peers).servers {
                let Some(op) = Op::ALL.into_iter().find(|op| e.ros_type == op.ros_type()) else {
                    continue;
                };
                if let Some(node) = node_of_service(&e.name, op) {
                    let ends = ros_nodes.entry(node.to_string()).or_default();
                    ends.entry(op).or_insert(e);
                }
            }
            ros_nodes.retain(|node, ends| {
                ends.contains_key(&Op::Get)
                    && self.config.admits(&format!("{node}{SERVICE_SUFFIX}"))
            });
        }
        // Nerve nodes with parameters, not served by us
        let mut nerve_nodes: BTreeSet<String> = BTreeSet::new();
        if primary {
            for s in nerve::introspect::list_services(&self.node).unwrap_or_default() {
                let Some(node) = s.name.strip_suffix(SERVICE_SUFFIX) else {
                    continue;
                };
                let ours = usize::from(self.ros.contains_key(node));
                if s.servers > ours
                    && !node.is_empty()
                    && !ros_nodes.contains_key(node)
                    && self.config.admits(&s.name)
                {
                    nerve_nodes.insert(node.to_string());
                }
            }
        }
        // a ROS 2 node gone (or whose get_parameters changed its type): its calls end now
        let gone: Vec<String> = self
            .ros
            .iter()
            .filter(|(name, n)| {
                ros_nodes.get(*name).and_then(|ends| ends.get(&Op::Get)) != Some(&n.get)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            if let Some(n) = self.ros.remove(&name) {
                for (_, p) in n.pending {
                    let _ = p
                        .req
                        .server_gone(&format!("the ROS 2 node {name} went away"));
                }
            }
        }
        for (name, ends) in &ros_nodes {
            if self.ros.contains_key(name) || self.failures.lately(name) {
                continue;
            }
            match self.offer_to_nerve(name, ends) {
                Ok(n) => {
                    self.bridged(name, false);
                    self.ros.insert(name.clone(), n);
                }
                Err(e) => self.report(name, e.to_string()),
            }
        }
        for name in &nerve_nodes {
            if self.nerve.contains_key(name) || self.failures.lately(name) {
                continue;
            }
            match self.offer_to_ros(name) {
                Ok(n) => {
                    self.bridged(name, true);
                    self.nerve.insert(name.clone(), n);
                }
                Err(e) => self.report(name, e.to_string()),
            }
        }
        self.nerve.retain(|n, _| nerve_nodes.contains(n));
        self.failures
            .retain(|n| ros_nodes.contains_key(n) || nerve_nodes.contains(n));
    }

    fn bridged(&self, node: &str, to_ros: bool) {
        self.shared.event(Event::Bridged {
            kind: crate::Kind::Service,
            topic: format!("{node}{SERVICE_SUFFIX}"),
            ros_type: "rcl_interfaces/srv/*Parameters".into(),
            nerve_type: <ParamService as nerve::Service>::TYPE_NAME.into(),
            to_ros,
        });
    }

    /// ROS 2 node `node` offered to Nerve, with a client of each of its parameter
    /// servers `ends` (one the graph does not show yet is called as the type is known
    /// here).
    fn offer_to_nerve(
        &self,
        node: &str,
        ends: &HashMap<Op, Endpoint>,
    ) -> Result<RosNode<S>, BridgeError> {
        let server = RawServer::create(
            &self.node,
            &format!("{node}{SERVICE_SUFFIX}"),
            &ServiceType::of::<ParamService>(),
            ServiceQos::default(),
            WaitMode::Block,
        )
        .map_err(|e| BridgeError::Nerve(e.to_string()))?;
        let mut clients = HashMap::new();
        for op in [Op::Get, Op::Set, Op::SetAtomically, Op::List, Op::Describe] {
            let name = format!("{node}/{}", op.service());
            let ty = self.ty(op);
            let end = ends.get(&op).cloned().unwrap_or_else(|| Endpoint {
                name: name.clone(),
                ros_type: ty.name.clone(),
                qos: crate::dds::RosQos::default(),
                keyed: false,
                type_hash: ty.hash.clone(),
            });
            clients.insert(op, self.shared.side.client(&name, ty, &end)?);
        }
        Ok(RosNode {
            server,
            get: ends
                .get(&Op::Get)
                .cloned()
                .ok_or_else(|| BridgeError::Config(format!("{node} has no get_parameters")))?,
            clients,
            pending: HashMap::new(),
            calls: HashMap::new(),
            next: 0,
        })
    }

    /// Nerve node `node` offered to ROS 2: a server of each parameter service.
    fn offer_to_ros(&self, node: &str) -> Result<NerveNode<S>, BridgeError> {
        let client = RawClient::create(
            &self.node,
            &format!("{node}{SERVICE_SUFFIX}"),
            &ServiceType::of::<ParamService>(),
            ServiceQos::default(),
            WaitMode::Block,
        )
        .map_err(|e| BridgeError::Nerve(e.to_string()))?;
        let servers = Op::ALL
            .into_iter()
            .map(|op| {
                let name = format!("{node}/{}", op.service());
                self.shared.side.server(&name, self.ty(op)).map(|s| (op, s))
            })
            .collect::<Result<_, _>>()?;
        Ok(NerveNode {
            client,
            servers,
            pending: Vec::new(),
        })
    }

    /// Nerve clients → ROS 2 nodes.
    fn pump_ros(&mut self) {
        for (name, n) in self.ros.iter_mut() {
            while let Ok(Some(req)) = n.server.try_take() {
                if n.pending.len() >= MAX_PENDING {
                    let _ = req.fail(&format!(
                        "the bridge has {MAX_PENDING} parameter calls to {name} in flight"
                    ));
                    continue;
                }
                let started = wire::decode_request(req.bytes())
                    .map_err(|e| format!("not a parameter request: {e}"))
                    .and_then(Job::start);
                match started {
                    Ok((job, calls)) => {
                        let token = n.next;
                        n.next += 1;
                        let mut p = Pending {
                            req,
                            job,
                            since: Instant::now(),
                            waiting: Vec::new(),
                            answers: HashMap::new(),
                        };
                        match send::<S>(&mut n.clients, &mut n.calls, token, &mut p, calls) {
                            Ok(()) => {
                                n.pending.insert(token, p);
                            }
                            Err(e) => {
                                let _ = p.req.fail(&e);
                            }
                        }
                    }
                    Err(e) => {
                        let _ = req.fail(&e);
                    }
                }
            }
            // replies
            let mut done: Vec<u64> = Vec::new();
            let mut failed: Vec<(u64, String)> = Vec::new();
            for (op, client) in n.clients.iter_mut() {
                while let Some((call, answer)) = client.take() {
                    // replies to calls given up (or answered already) are not ours
                    let Some(token) = n.calls.remove(&(*op, call)) else {
                        continue;
                    };
                    match answer {
                        Ok(cdr) => {
                            if let Some(p) = n.pending.get_mut(&token) {
                                p.answers.insert((*op, call), cdr);
                                if p.answers.len() == p.waiting.len() {
                                    done.push(token);
                                }
                            }
                        }
                        Err(reason) => failed.push((token, format!("{}: {reason}", op.service()))),
                    }
                }
            }
            for (token, reason) in failed {
                if let Some(p) = n.pending.remove(&token) {
                    for id in &p.waiting {
                        n.calls.remove(id);
                    }
                    let _ = p.req.fail(&format!("ROS 2 node {name}: {reason}"));
                }
            }
            for token in done {
                let Some(mut p) = n.pending.remove(&token) else {
                    continue;
                };
                let mut got = std::mem::take(&mut p.answers);
                let answers: Calls = std::mem::take(&mut p.waiting)
                    .into_iter()
                    .filter_map(|id| got.remove(&id).map(|cdr| (id.0, cdr)))
                    .collect();
                match p.job.step(&answers) {
                    Ok(Step::Reply(resp)) => {
                        if p.req.reply_bytes(&wire::encode_response(&resp)).is_ok() {
                            self.shared.stats.calls.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Ok(Step::Call(calls)) => {
                        match send::<S>(&mut n.clients, &mut n.calls, token, &mut p, calls) {
                            Ok(()) => {
                                n.pending.insert(token, p);
                            }
                            Err(e) => {
                                let _ = p.req.fail(&e);
                            }
                        }
                    }
                    Err(e) => {
                        self.shared.stats.malformed.fetch_add(1, Ordering::Relaxed);
                        let _ = p.req.fail(&format!("ROS 2 node {name}: {e}"));
                    }
                }
            }
            let calls = &mut n.calls;
            n.pending.retain(|_, p| {
                let keep = p.since.elapsed() < CALL_TIMEOUT && p.req.client_waits();
                if !keep {
                    if p.req.client_waits() {
                        let _ = p.req.fail(&format!(
                            "the ROS 2 node {name} did not answer in {CALL_TIMEOUT:?}"
                        ));
                    }
                    for id in &p.waiting {
                        calls.remove(id);
                    }
                }
                keep
            });
        }
    }

    /// ROS 2 clients → Nerve nodes.
    fn pump_nerve(&mut self) {
        let shared = &self.shared;
        let peers = shared.peers();
        let dropped = |topic: String, reason: String| {
            shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
            shared.event(Event::Dropped { topic, reason });
        };
        for (name, n) in self.nerve.iter_mut() {
            for (op, server) in n.servers.iter_mut() {
                let topic = || format!("{name}/{}", op.service());
                while let Some((id, cdr)) = server.take(&peers) {
                    if n.pending.len() >= MAX_PENDING {
                        dropped(
                            topic(),
                            format!("more than {MAX_PENDING} parameter calls in flight"),
                        );
                        continue;
                    }
                    let (req, ask) = match ros_request(*op, &cdr) {
                        Ok(r) => r,
                        Err(reason) => {
                            shared.stats.malformed.fetch_add(1, Ordering::Relaxed);
                            shared.event(Event::Malformed {
                                topic: topic(),
                                reason: format!("{} request dropped: {reason}", op.ros_type()),
                            });
                            continue;
                        }
                    };
                    match n.client.send_bytes(&wire::encode_request(&req)) {
                        Ok(call) => n.pending.push(Asked {
                            call,
                            op: *op,
                            ask,
                            id,
                            since: Instant::now(),
                        }),
                        Err(e) => dropped(topic(), e.to_string()),
                    }
                }
                let lost = server.lost();
                if lost > 0 {
                    shared.stats.dropped.fetch_add(lost, Ordering::Relaxed);
                    shared.event(Event::Dropped {
                        topic: topic(),
                        reason: format!(
                            "{lost} requests dropped on arrival: the bridge's queue was full"
                        ),
                    });
                }
            }
            let mut i = 0;
            while i < n.pending.len() {
                let a = &n.pending[i];
                let outcome = match a.call.try_take() {
                    Ok(None) if a.since.elapsed() < CALL_TIMEOUT => {
                        i += 1;
                        continue;
                    }
                    Ok(None) => Err(format!("no answer in {CALL_TIMEOUT:?}")),
                    Ok(Some(reply)) => wire::decode_response(reply.bytes())
                        .and_then(|resp| ros_response(&a.ask, resp)),
                    Err(e) => match &a.ask {
                        // a set is answered with the reason; others have no error reply
                        Ask::Set { refused, atomic } => {
                            let why = Err(e.to_string());
                            set_response(*atomic, vec![why; refused.len()])
                        }
                        _ => Err(e.to_string()),
                    },
                };
                let a = n.pending.swap_remove(i);
                let topic = format!("{name}/{}", a.op.service());
                let sent = outcome.and_then(|cdr| {
                    let (_, server) = n
                        .servers
                        .iter_mut()
                        .find(|(o, _)| *o == a.op)
                        .ok_or_else(|| format!("no {} server", a.op.service()))?;
                    server.reply(a.id, cdr)
                });
                match sent {
                    Ok(()) => {
                        shared.stats.calls.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(reason) => dropped(topic, reason),
                }
            }
        }
    }
}

/// Makes the ROS 2 calls of a step of `p` (known as `token`); when one cannot be made,
/// those made are forgotten and the reason returned.
fn send<S: RosSide>(
    clients: &mut HashMap<Op, S::Client>,
    calls: &mut HashMap<CallId<S>, u64>,
    token: u64,
    p: &mut Pending<S>,
    what: Calls,
) -> Result<(), String> {
    for (op, body) in what {
        let made = clients
            .get_mut(&op)
            .ok_or_else(|| format!("no {} client", op.service()))
            .and_then(|c| {
                c.call(body)
                    .map_err(|e| format!("ROS 2 {}: {e}", op.service()))
            });
        match made {
            Ok(call) => {
                calls.insert((op, call), token);
                p.waiting.push((op, call));
            }
            Err(e) => {
                for id in p.waiting.drain(..) {
                    calls.remove(&id);
                }
                return Err(e);
            }
        }
    }
    Ok(())
}

/// The Nerve request for a ROS 2 request of service `op`, and what its answer needs.
fn ros_request(op: Op, cdr: &[u8]) -> Result<(ParamRequest, Ask), String> {
    let mut r = cdr::R::new(cdr)?;
    Ok(match op {
        Op::Get => (ParamRequest::Get { names: r.strs()? }, Ask::Get),
        Op::Types => (ParamRequest::Get { names: r.strs()? }, Ask::Types),
        Op::Describe => {
            let names = r.strs()?;
            (
                ParamRequest::Describe {
                    names: names.clone(),
                },
                Ask::Describe(names),
            )
        }
        Op::List => {
            let prefixes = r.strs()?;
            let depth = r.u64()?;
            (
                ParamRequest::List {
                    prefix: String::new(),
                },
                Ask::List { prefixes, depth },
            )
        }
        Op::Set | Op::SetAtomically => {
            let atomic = op == Op::SetAtomically;
            let mut refused = Vec::new();
            let mut values = Vec::new();
            for (name, v) in r.parameters()? {
                match v {
                    Some(v) => {
                        refused.push(None);
                        values.push((name, v));
                    }
                    None => refused.push(Some(format!(
                        "parameter {name:?}: Nerve parameters cannot be undeclared"
                    ))),
                }
            }
            if atomic && refused.iter().any(Option::is_some) {
                // nothing is set: ask for nothing
                values.clear();
            }
            (
                ParamRequest::Set { values, atomic },
                Ask::Set { refused, atomic },
            )
        }
    })
}

/// `set_parameters(_atomically)`'s response from the outcomes.
fn set_response(atomic: bool, results: Vec<Result<(), String>>) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    let mut w = cdr::W::new(&mut buf);
    if atomic {
        let first = results.into_iter().find(Result::is_err).unwrap_or(Ok(()));
        w.set_result(&first)?;
    } else {
        w.len(results.len())?;
        for r in &results {
            w.set_result(r)?;
        }
    }
    Ok(buf)
}

/// The ROS 2 response (CDR) for a Nerve node's answer.
fn ros_response(ask: &Ask, resp: ParamResponse) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    let mut w = cdr::W::new(&mut buf);
    let wrong = || "the node answered with another kind of response".to_string();
    match (ask, resp) {
        (Ask::Get, ParamResponse::Get(values)) => {
            w.len(values.len())?;
            for v in &values {
                w.value(v.as_ref())?;
            }
        }
        (Ask::Types, ParamResponse::Get(values)) => {
            let types: Vec<u8> = values
                .iter()
                .map(|v| v.as_ref().map_or(cdr::NOT_SET, |v| cdr::ros_type(v.ty())))
                .collect();
            w.u8s(&types)?;
        }
        (Ask::Describe(names), ParamResponse::Describe(infos)) => {
            w.len(names.len())?;
            for (i, name) in names.iter().enumerate() {
                w.descriptor(name, infos.get(i).and_then(Option::as_ref))?;
            }
        }
        (Ask::List { prefixes, depth }, ParamResponse::List(all)) => {
            let (names, found) = list_filter(&all, prefixes, *depth);
            w.strs(&names)?;
            w.strs(&found)?;
        }
        (Ask::Set { refused, atomic }, ParamResponse::Set(results)) => {
            let mut results = results.into_iter();
            let merged: Vec<Result<(), String>> = refused
                .iter()
                .map(|r| match r {
                    Some(why) => Err(why.clone()),
                    None if *atomic && refused.iter().any(Option::is_some) => {
                        Err("not set: another parameter of the atomic set was refused".into())
                    }
                    None => results.next().unwrap_or(Ok(())),
                })
                .collect();
            return set_response(*atomic, merged);
        }
        _ => return Err(wrong()),
    }
    Ok(buf)
}

/// ROS 2's `list_parameters`: names under `prefixes` (all when empty), at most `depth`
/// levels deep (0: all), and the namespaces of the names returned.
fn list_filter(all: &[String], prefixes: &[String], depth: u64) -> (Vec<String>, Vec<String>) {
    let dots = |s: &str| s.bytes().filter(|b| *b == b'.').count() as u64;
    let mut names = Vec::new();
    let mut found: Vec<String> = Vec::new();
    for name in all {
        let get_all = prefixes.is_empty() && (depth == 0 || dots(name) < depth);
        let under = prefixes.iter().any(|p| {
            name == p
                || name
                    .strip_prefix(p.as_str())
                    .and_then(|rest| rest.strip_prefix('.'))
                    .is_some_and(|rest| depth == 0 || dots(rest) + 1 < depth)
        });
        if get_all || under {
            names.push(name.clone());
            if let Some((ns, _)) = name.rsplit_once('.') {
                if !found.iter().any(|f| f == ns) {
                    found.push(ns.to_string());
                }
            }
        }
    }
    (names, found)
}

impl<S: RosSide> Worker for Params<S> {
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
        !(self.ros.is_empty() && self.nerve.is_empty())
    }
    fn pump(&mut self) {
        let now = Instant::now();
        if now < self.quiet_until {
            return;
        }
        self.pump_ros();
        self.pump_nerve();
        let in_flight = self.ros.values().any(|n| !n.pending.is_empty())
            || self.nerve.values().any(|n| !n.pending.is_empty());
        self.quiet = next_quiet(self.quiet, in_flight);
        self.quiet_until = now + self.quiet;
    }
    fn next_pump(&self) -> Option<Instant> {
        Some(self.quiet_until)
    }
}

/// How long the thread waits after a look before the next, beyond its [`TICK`]: nothing
/// while calls are in flight, one tick more after each quiet look, up to [`QUIET`].
fn next_quiet(quiet: Duration, in_flight: bool) -> Duration {
    if in_flight {
        Duration::ZERO
    } else {
        (quiet + TICK).min(QUIET.saturating_sub(TICK))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::is_param_service;

    #[test]
    fn an_idle_thread_looks_less_often_and_at_once_again_while_calls_are_in_flight() {
        let mut q = Duration::ZERO;
        let mut waits = Vec::new();
        for _ in 0..20 {
            q = next_quiet(q, false);
            waits.push(q + TICK);
        }
        assert_eq!(waits[0], 2 * TICK, "the first quiet look waits a tick more");
        assert!(waits.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(*waits.last().unwrap(), QUIET, "never more than QUIET");
        assert_eq!(
            next_quiet(q, true) + TICK,
            TICK,
            "a call in flight: every tick"
        );
    }

    /// The services' RIHS01 hashes, as Jazzy and Kilted install them
    /// (`share/rcl_interfaces/srv/*.json`).
    #[test]
    fn the_services_type_hashes_are_ros2s() {
        let want = [
            (
                Op::Get,
                "bf9803d5c74cf989a5de3e0c2e99444599a627c7ff75f97b8c05b01003675cbc",
            ),
            (
                Op::Set,
                "56eed9a67e169f9cb6c1f987bc88f868c14a8fc9f743a263bc734c154015d7e0",
            ),
            (
                Op::SetAtomically,
                "0e192ef259c07fc3c07a13191d27002222e65e00ccec653ca05e856f79285fcd",
            ),
            (
                Op::List,
                "3e6062bfbb27bfb8730d4cef2558221f51a11646d78e7bb30a1e83afac3aad9d",
            ),
            (
                Op::Describe,
                "845b484d71eb0673dae682f2e3ba3c4851a65a3dcfb97bddd82c5b57e91e4cff",
            ),
            (
                Op::Types,
                "da199c878688b3e530bdfe3ca8f74cb9fa0c303101e980a9e8f260e25e1c80ca",
            ),
        ];
        for (op, hash) in want {
            assert_eq!(
                rcl::type_hash(op),
                Some(format!("RIHS01_{hash}")),
                "{}",
                op.ros_type()
            );
        }
    }

    #[test]
    fn parameter_service_names_are_recognized() {
        assert!(is_param_service("/talker/get_parameters"));
        assert!(is_param_service("/ns/talker/set_parameters_atomically"));
        assert!(is_param_service("/talker/get_type_description"));
        assert!(is_param_service("/driver/_params"));
        assert!(!is_param_service("/get_parameters"));
        assert!(!is_param_service("/add_two_ints"));
        assert_eq!(
            node_of_service("/ns/talker/get_parameters", Op::Get),
            Some("/ns/talker")
        );
        assert_eq!(node_of_service("/get_parameters", Op::Get), None);
        assert_eq!(node_of_service("/talker/xget_parameters", Op::Get), None);
        assert_eq!(
            node_of_service("/talker/get_parameter_types", Op::Types),
            Some("/talker")
        );
    }

    fn all_values() -> Vec<ParamValue> {
        vec![
            ParamValue::Bool(true),
            ParamValue::Int(-300),
            ParamValue::Int(i64::MIN),
            ParamValue::Float(1.5),
            ParamValue::Str("rover".into()),
            ParamValue::Bytes(vec![0, 255]),
            ParamValue::BoolArray(vec![true, false]),
            ParamValue::IntArray(vec![]),
            ParamValue::IntArray(vec![1, i64::MAX]),
            ParamValue::FloatArray(vec![0.5, -2.0]),
            ParamValue::StrArray(vec!["a".into(), String::new()]),
        ]
    }

    #[test]
    fn nerve_requests_and_responses_round_trip() {
        let values: Vec<(String, ParamValue)> = all_values()
            .into_iter()
            .enumerate()
            .map(|(i, v)| (format!("p{i}"), v))
            .collect();
        for req in [
            ParamRequest::List {
                prefix: "a.".into(),
            },
            ParamRequest::Get {
                names: vec!["x".into(), "y".into()],
            },
            ParamRequest::Describe { names: vec![] },
            ParamRequest::Set {
                values: values.clone(),
                atomic: true,
            },
        ] {
            assert_eq!(wire::decode_request(&wire::encode_request(&req)), Ok(req));
        }
        let info = ParamInfo {
            name: "speed".into(),
            ty: ParamType::Float,
            value: ParamValue::Float(2.0),
            descriptor: ParamDescriptor::new()
                .description("m/s")
                .range(0.0, 3.0, 0.5)
                .read_only(),
        };
        for resp in [
            ParamResponse::List(vec!["a".into(), "b.c".into()]),
            ParamResponse::Get(all_values().into_iter().map(Some).chain([None]).collect()),
            ParamResponse::Describe(vec![Some(info), None]),
            ParamResponse::Set(vec![Ok(()), Err("no".into())]),
        ] {
            let bytes = wire::encode_response(&resp);
            assert_eq!(wire::decode_response(&bytes), Ok(resp));
            // cut anywhere: an error, never a panic
            for n in 0..bytes.len() {
                let _ = wire::decode_response(&bytes[..n]);
            }
        }
        // a length the bytes cannot hold is refused before anything is allocated
        let mut lying = 9u64.to_ne_bytes().to_vec();
        lying.extend_from_slice(&[1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0]);
        assert!(wire::decode_request(&lying).is_err());
    }

    #[test]
    fn parameter_values_cross_cdr_both_ways() {
        let mut buf = Vec::new();
        for v in all_values().into_iter().map(Some).chain([None]) {
            cdr::W::new(&mut buf).value(v.as_ref()).unwrap();
            assert_eq!(cdr::R::new(&buf).unwrap().value().unwrap(), v);
            for n in 0..buf.len() {
                let _ = cdr::R::new(&buf[..n]).and_then(|mut r| r.value());
            }
        }
        // an unknown ParameterType is an error naming it
        cdr::W::new(&mut buf).value(None).unwrap();
        buf[4] = 42;
        let e = cdr::R::new(&buf).unwrap().value().unwrap_err();
        assert!(e.contains("type 42"), "{e}");
    }

    /// A `GetParameters` response of `values`.
    fn get_response(values: &[Option<ParamValue>]) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut w = cdr::W::new(&mut buf);
        w.len(values.len()).unwrap();
        for v in values {
            w.value(v.as_ref()).unwrap();
        }
        buf
    }

    #[test]
    fn a_get_of_an_undeclared_name_asks_name_by_name() {
        let names = vec!["speed".to_string(), "nope".to_string()];
        let (mut job, calls) = Job::start(ParamRequest::Get {
            names: names.clone(),
        })
        .unwrap();
        assert_eq!(calls.len(), 1);
        // rclpy answers nothing when one name is not declared
        let Step::Call(calls) = job.step(&[(Op::Get, get_response(&[]))]).unwrap() else {
            panic!("expected calls name by name");
        };
        assert_eq!(calls.len(), 2);
        let speed = Some(ParamValue::Float(1.5));
        let answers = [
            (Op::Get, get_response(std::slice::from_ref(&speed))),
            (Op::Get, get_response(&[])),
        ];
        let Step::Reply(ParamResponse::Get(v)) = job.step(&answers).unwrap() else {
            panic!("expected values");
        };
        assert_eq!(v, vec![speed, None]);
    }

    #[test]
    fn a_set_widens_integers_to_the_parameters_type() {
        let (mut job, _) = Job::start(ParamRequest::Set {
            values: vec![("speed".into(), ParamValue::Int(2))],
            atomic: false,
        })
        .unwrap();
        let now = [Some(ParamValue::Float(1.5))];
        let Step::Call(calls) = job.step(&[(Op::Get, get_response(&now))]).unwrap() else {
            panic!("expected the set");
        };
        assert_eq!(calls[0].0, Op::Set);
        let mut r = cdr::R::new(&calls[0].1).unwrap();
        assert_eq!(
            r.parameters().unwrap(),
            vec![("speed".to_string(), Some(ParamValue::Float(2.0)))]
        );
        let mut buf = Vec::new();
        let mut w = cdr::W::new(&mut buf);
        w.len(1).unwrap();
        w.set_result(&Err("too fast".into())).unwrap();
        let Step::Reply(resp) = job.step(&[(Op::Set, buf)]).unwrap() else {
            panic!("expected results");
        };
        assert_eq!(resp, ParamResponse::Set(vec![Err("too fast".into())]));
    }

    #[test]
    fn list_follows_ros2_prefixes_and_depth() {
        let all: Vec<String> = ["a", "b.c", "b.d.e", "bx"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            list_filter(&all, &[], 0),
            (all.clone(), vec!["b".to_string(), "b.d".to_string()])
        );
        assert_eq!(list_filter(&all, &[], 1).0, vec!["a", "bx"]);
        assert_eq!(list_filter(&all, &["b".into()], 0).0, vec!["b.c", "b.d.e"]);
        assert_eq!(list_filter(&all, &["b".into()], 2).0, vec!["b.c"]);
    }

    #[test]
    fn ros2_requests_become_nerve_requests() {
        let mut buf = Vec::new();
        let mut w = cdr::W::new(&mut buf);
        w.len(2).unwrap();
        w.parameter("speed", &ParamValue::Float(2.0)).unwrap();
        w.str("gone").unwrap();
        w.value(None).unwrap();
        let (req, ask) = ros_request(Op::Set, &buf).unwrap();
        assert_eq!(
            req,
            ParamRequest::Set {
                values: vec![("speed".into(), ParamValue::Float(2.0))],
                atomic: false
            }
        );
        let cdr = ros_response(&ask, ParamResponse::Set(vec![Ok(())])).unwrap();
        let results = cdr::R::new(&cdr).unwrap().set_results().unwrap();
        assert_eq!(results[0], Ok(()));
        assert!(results[1].as_ref().unwrap_err().contains("undeclared"));
        // a wrong kind of answer is an error, and truncated requests are errors
        assert!(ros_response(&ask, ParamResponse::List(vec![])).is_err());
        for n in 0..buf.len() {
            assert!(ros_request(Op::Set, &buf[..n]).is_err());
        }
    }
}
