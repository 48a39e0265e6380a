//! Standard service types (like ROS 2's std_srvs and example_interfaces).

use crate::FixedStr;
use nerve::{Message, Service};
use serde::{Deserialize, Serialize};

/// A request without data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/Empty")]
pub struct Empty {}

/// Outcome of an action: success flag and a human-readable message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/Outcome")]
pub struct Outcome {
    /// 1 on success, 0 on failure.
    pub success: u8,
    /// What happened, at most 127 bytes.
    pub message: FixedStr<127>,
}

/// A boolean request (0 = false, 1 = true).
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/Bool")]
pub struct Bool {
    /// 0 or 1.
    pub data: u8,
}

/// Two integers to add.
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/TwoInts")]
pub struct TwoInts {
    /// First operand.
    pub a: i64,
    /// Second operand.
    pub b: i64,
}

/// One integer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/Int")]
pub struct Int {
    /// The value.
    pub value: i64,
}

/// An opaque byte payload with a tag (followed by its bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/Bytes", elem = u8)]
pub struct Bytes {
    /// Free for the application (a call number, a format id).
    pub tag: u64,
}

/// Trigger an action (like std_srvs/Trigger).
pub struct Trigger;
impl Service for Trigger {
    const TYPE_NAME: &'static str = "nerve_msgs/Trigger";
    type Request = Empty;
    type Response = Outcome;
}

/// Switch something on or off (like std_srvs/SetBool).
pub struct SetBool;
impl Service for SetBool {
    const TYPE_NAME: &'static str = "nerve_msgs/SetBool";
    type Request = Bool;
    type Response = Outcome;
}

/// Add two integers (like example_interfaces/AddTwoInts).
pub struct AddTwoInts;
impl Service for AddTwoInts {
    const TYPE_NAME: &'static str = "nerve_msgs/AddTwoInts";
    type Request = TwoInts;
    type Response = Int;
}

/// Send bytes, get bytes back (the benchmark's service).
pub struct Echo;
impl Service for Echo {
    const TYPE_NAME: &'static str = "nerve_msgs/Echo";
    type Request = Bytes;
    type Response = Bytes;
}

const _: () = assert!(core::mem::size_of::<Outcome>() == 128);
const _: () = assert!(core::mem::size_of::<Empty>() == 0);

/// One standard service type: its name and the type names of request and response.
pub struct ServiceInfo {
    /// Service type name, e.g. `nerve_msgs/AddTwoInts`.
    pub name: &'static str,
    /// Request message type name.
    pub request: &'static str,
    /// Response message type name.
    pub response: &'static str,
}

fn info<S: Service>() -> ServiceInfo {
    ServiceInfo {
        name: S::TYPE_NAME,
        request: <S::Request as nerve::Message>::TYPE_NAME,
        response: <S::Response as nerve::Message>::TYPE_NAME,
    }
}

/// Every standard service type (their payload schemas are in [`crate::schemas`]).
pub fn services() -> Vec<ServiceInfo> {
    vec![
        info::<Trigger>(),
        info::<SetBool>(),
        info::<AddTwoInts>(),
        info::<Echo>(),
    ]
}
