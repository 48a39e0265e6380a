//! ROS 2 interface definitions at run time.
//!
//! This crate lets Nerve carry, decode and encode ROS 2 message types it was never compiled
//! against:
//!
//! * [`TypeName`]: `pkg/msg/Name`, `pkg/srv/Name_Request`, `pkg/action/Name_Goal`, and the DDS
//!   form `pkg::msg::dds_::Name_`.
//! * [`parse`]: `.msg`, `.srv`, `.action` text into [`MessageDefinition`]s, generating the
//!   service and action sub-types like rosidl does.
//! * [`Registry`]: a set of definitions, built from an MCAP `ros2msg` schema
//!   ([`Registry::from_ros2msg`]), from interface files on a [`SearchPath`]
//!   ([`Registry::load`]), or from text; it renders `ros2msg` schemas
//!   ([`Registry::ros2msg_text`]) and computes RIHS01 type hashes ([`Registry::type_hash`]).
//! * [`Value`]: dynamic message values; [`decode`], [`validate`] and [`encode`] convert them
//!   from/to CDR as Fast DDS does; [`to_json`] / [`from_json`] convert them from/to JSON.
//! * [`CdrReader`] / [`CdrWriter`]: CDR field by field, the one reader and writer of CDR
//!   in Nerve (the dynamic codec above walks with them; so do the ROS 2 forms of Nerve's
//!   messages in `nerve-ros2-map` and the bridge's hand-written services).
//!
//! ```
//! use nerve_ros2_types::{decode, encode, Registry, Value};
//!
//! let mut reg = Registry::new();
//! reg.add_interface_text("std_msgs/msg/String", "string data\n").unwrap();
//! assert_eq!(
//!     reg.type_hash("std_msgs/msg/String").unwrap().to_string(),
//!     "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
//! );
//! let mut msg = Value::default_for(&reg, "std_msgs/String").unwrap();
//! msg.as_struct_mut().unwrap().set("data", Value::String("hi".into()));
//! let mut bytes = Vec::new();
//! encode(&reg, "std_msgs/msg/String", &msg, &mut bytes).unwrap();
//! assert_eq!(bytes, [0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0]);
//! assert_eq!(decode(&reg, "std_msgs/msg/String", &bytes).unwrap(), msg);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cdr;
mod defaults;
pub mod definition;
pub mod hash;
pub mod json;
pub mod name;
pub mod parse;
pub mod registry;
pub mod ros2msg;
pub mod value;

pub use cdr::{
    decode, decode_with_len, encapsulation, encode, validate, CdrReader, CdrWriter, DecodeError,
    EncodeError, Endianness, CDR_BE_HEADER, CDR_LE_HEADER,
};
pub use defaults::MAX_DEFAULT_ELEMENTS;
pub use definition::{
    BaseType, Constant, Container, DefinitionRole, Field, FieldType, MessageDefinition,
    PrimitiveType,
};
pub use hash::{HashError, Rihs01, TypeDescription};
pub use json::{from_json, to_json, JsonError};
pub use name::{InterfaceKind, NameError, SubType, TypeName};
pub use parse::{ParseError, ParseErrorKind};
pub use registry::{LoadReport, Registry, RegistryError, SearchPath, MAX_NESTING_DEPTH};
pub use value::{Array, Struct, Value};
