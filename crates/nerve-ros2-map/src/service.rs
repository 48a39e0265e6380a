//! ROS 2 services Nerve has its own form of (std_srvs Trigger and SetBool,
//! example_interfaces AddTwoInts, lifecycle_msgs ChangeState, GetState,
//! GetAvailableStates and GetAvailableTransitions): their Nerve service types and the
//! conversions of their requests and responses, decided here for the ROS 2 bridge and
//! every tool and binding that names a service type as ROS 2 does. Any other ROS 2
//! service crosses as CDR carriers ([`crate::carrier`]).

use crate::standard::lifecycle_services;
use nerve::service::ServiceType;
use nerve_msgs::{lifecycle, srv};
use nerve_ros2_types::{CdrReader, CdrWriter};

/// A conversion of one message: the input bytes into `out` (cleared or overwritten), or
/// why it does not convert.
pub type Conv = fn(&[u8], &mut Vec<u8>) -> Result<(), String>;

/// How a standard service's requests and responses cross.
#[derive(Clone, Copy)]
pub struct Conversions {
    /// Request CDR → Nerve.
    pub req_to_nerve: Conv,
    /// Nerve request → CDR.
    pub req_to_ros: Conv,
    /// Response CDR → Nerve.
    pub resp_to_nerve: Conv,
    /// Nerve response → CDR.
    pub resp_to_ros: Conv,
    /// The CDR response a ROS 2 client gets when the Nerve server refuses the call
    /// (ROS 2 has no error replies); `None`: the client gets no answer.
    pub refusal: Option<fn(&mut Vec<u8>)>,
}

/// A ROS 2 service type that is a Nerve service type.
#[derive(Clone)]
pub struct NativeService {
    /// The ROS 2 type, `pkg/srv/Name`.
    pub ros_type: &'static str,
    /// The Nerve service type.
    pub nerve_type: ServiceType,
    /// How its messages cross.
    pub conv: Conversions,
}

/// Every standard service.
pub fn native_services() -> Vec<NativeService> {
    native()
        .into_iter()
        .map(|(ros_type, nerve_type, conv)| NativeService {
            ros_type,
            nerve_type,
            conv,
        })
        .collect()
}

/// The Nerve form of ROS 2 service type `ros` (`pkg/srv/Name`), if it has one.
pub fn native_of_ros(ros: &str) -> Option<NativeService> {
    native_services().into_iter().find(|n| n.ros_type == ros)
}

/// The standard service Nerve service type `ty` is, if it is one.
pub fn native_of_nerve(ty: &ServiceType) -> Option<NativeService> {
    native_services().into_iter().find(|n| n.nerve_type == *ty)
}

fn err(e: impl std::fmt::Display) -> String {
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
    // a message Outcome cannot hold whole is refused by name, never cut (issue 42)
    let text = std::str::from_utf8(message).map_err(|e| format!("message: {e}"))?;
    o.message = nerve_msgs::FixedStr::new(text).map_err(|_| {
        format!(
            "message: {} bytes do not fit nerve_msgs/Outcome's {}",
            text.len(),
            std::mem::size_of_val(&o.message)
        )
    })?;
    out.clear();
    out.extend_from_slice(nerve::message::as_bytes(&o));
    Ok(())
}
fn outcome_to_ros(payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let o: srv::Outcome = nerve::message::read_pod(payload).ok_or("a short nerve_msgs/Outcome")?;
    let mut w = CdrWriter::new(out);
    w.u8(o.success);
    w.string(o.message.as_str().as_bytes()).map_err(err)
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

/// Which part of [`lifecycle_services`] a conversion uses.
const LC_CHANGE_REQUEST: usize = 0;
const LC_CHANGE_RESPONSE: usize = 1;
const LC_GET_STATE_RESPONSE: usize = 2;
const LC_STATES_RESPONSE: usize = 3;
const LC_TRANSITIONS_RESPONSE: usize = 4;

/// A conversion by part `$i` of [`lifecycle_services`], `decode` (CDR → Nerve) or
/// `encode` (Nerve → CDR).
macro_rules! lifecycle_conv {
    ($i:expr, $dir:ident) => {
        |bytes: &[u8], out: &mut Vec<u8>| (lifecycle_services()[$i].$dir)(bytes, out).map_err(err)
    };
}

/// A refused change request is `success = false` to ROS 2 (as rclcpp answers an
/// invalid transition).
fn change_refused(out: &mut Vec<u8>) {
    CdrWriter::new(out).u8(0);
}

/// A lifecycle_msgs service with an empty request.
fn lifecycle_query(resp_to_nerve: Conv, resp_to_ros: Conv) -> Conversions {
    Conversions {
        req_to_nerve: empty_to_nerve,
        req_to_ros: empty_to_ros,
        resp_to_nerve,
        resp_to_ros,
        refusal: None,
    }
}

/// The standard services: (ROS 2 type, Nerve type, conversions).
fn native() -> [(&'static str, ServiceType, Conversions); 7] {
    use nerve::Service;
    fn st<S: Service>() -> ServiceType {
        ServiceType::of::<S>()
    }
    [
        (
            "std_srvs/srv/Trigger",
            st::<srv::Trigger>(),
            Conversions {
                req_to_nerve: empty_to_nerve,
                req_to_ros: empty_to_ros,
                resp_to_nerve: outcome_to_nerve,
                resp_to_ros: outcome_to_ros,
                refusal: None,
            },
        ),
        (
            "std_srvs/srv/SetBool",
            st::<srv::SetBool>(),
            Conversions {
                req_to_nerve: bool_to_nerve,
                req_to_ros: bool_to_ros,
                resp_to_nerve: outcome_to_nerve,
                resp_to_ros: outcome_to_ros,
                refusal: None,
            },
        ),
        (
            "example_interfaces/srv/AddTwoInts",
            st::<srv::AddTwoInts>(),
            Conversions {
                req_to_nerve: two_ints_to_nerve,
                req_to_ros: two_ints_to_ros,
                resp_to_nerve: int_to_nerve,
                resp_to_ros: int_to_ros,
                refusal: None,
            },
        ),
        (
            "lifecycle_msgs/srv/ChangeState",
            st::<lifecycle::ChangeState>(),
            Conversions {
                req_to_nerve: lifecycle_conv!(LC_CHANGE_REQUEST, decode),
                req_to_ros: lifecycle_conv!(LC_CHANGE_REQUEST, encode),
                resp_to_nerve: lifecycle_conv!(LC_CHANGE_RESPONSE, decode),
                resp_to_ros: lifecycle_conv!(LC_CHANGE_RESPONSE, encode),
                refusal: Some(change_refused),
            },
        ),
        (
            "lifecycle_msgs/srv/GetState",
            st::<lifecycle::GetState>(),
            lifecycle_query(
                lifecycle_conv!(LC_GET_STATE_RESPONSE, decode),
                lifecycle_conv!(LC_GET_STATE_RESPONSE, encode),
            ),
        ),
        (
            "lifecycle_msgs/srv/GetAvailableStates",
            st::<lifecycle::GetAvailableStates>(),
            lifecycle_query(
                lifecycle_conv!(LC_STATES_RESPONSE, decode),
                lifecycle_conv!(LC_STATES_RESPONSE, encode),
            ),
        ),
        (
            "lifecycle_msgs/srv/GetAvailableTransitions",
            st::<lifecycle::GetAvailableTransitions>(),
            lifecycle_query(
                lifecycle_conv!(LC_TRANSITIONS_RESPONSE, decode),
                lifecycle_conv!(LC_TRANSITIONS_RESPONSE, encode),
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // a message longer than Outcome holds is refused naming the field, not cut
        let long = "é".repeat(100);
        let mut w = CdrWriter::new(&mut cdr);
        w.u8(1);
        w.string(long.as_bytes()).unwrap();
        let e = outcome_to_nerve(&cdr, &mut back).unwrap_err();
        assert!(e.contains("message: 200 bytes do not fit"), "{e}");
        assert!(two_ints_to_nerve(&[0, 1, 0, 0, 1], &mut back).is_err());
    }

    #[test]
    fn the_ros2_names_of_nerve_services_map_both_ways() {
        let n = native_of_ros("std_srvs/srv/SetBool").unwrap();
        assert_eq!(n.nerve_type.name, "nerve_msgs/SetBool");
        assert_eq!(
            native_of_nerve(&n.nerve_type).unwrap().ros_type,
            "std_srvs/srv/SetBool"
        );
        assert!(native_of_ros("test_msgs/srv/BasicTypes").is_none());
    }
}
