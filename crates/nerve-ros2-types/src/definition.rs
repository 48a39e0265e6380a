//! The resolved form of a parsed interface definition: fields, their types, constants.

use std::fmt;
use std::sync::Arc;

use crate::name::TypeName;
use crate::value::Value;

/// A ROS 2 primitive (non-string) type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrimitiveType {
    /// `bool` (one byte on the wire, 0 or 1).
    Bool,
    /// `byte` (IDL `octet`), an unsigned 8-bit value.
    Byte,
    /// `char` (IDL `uint8` in ROS 2), an unsigned 8-bit value.
    Char,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
    /// `int8`.
    Int8,
    /// `uint8`.
    UInt8,
    /// `int16`.
    Int16,
    /// `uint16`.
    UInt16,
    /// `int32`.
    Int32,
    /// `uint32`.
    UInt32,
    /// `int64`.
    Int64,
    /// `uint64`.
    UInt64,
}

impl PrimitiveType {
    /// The .msg spelling (`float32`, `uint8`, ...).
    pub fn msg_name(self) -> &'static str {
        match self {
            PrimitiveType::Bool => "bool",
            PrimitiveType::Byte => "byte",
            PrimitiveType::Char => "char",
            PrimitiveType::Float32 => "float32",
            PrimitiveType::Float64 => "float64",
            PrimitiveType::Int8 => "int8",
            PrimitiveType::UInt8 => "uint8",
            PrimitiveType::Int16 => "int16",
            PrimitiveType::UInt16 => "uint16",
            PrimitiveType::Int32 => "int32",
            PrimitiveType::UInt32 => "uint32",
            PrimitiveType::Int64 => "int64",
            PrimitiveType::UInt64 => "uint64",
        }
    }

    /// Parses the .msg spelling.
    pub fn from_msg_name(s: &str) -> Option<Self> {
        Some(match s {
            "bool" => PrimitiveType::Bool,
            "byte" => PrimitiveType::Byte,
            "char" => PrimitiveType::Char,
            "float32" => PrimitiveType::Float32,
            "float64" => PrimitiveType::Float64,
            "int8" => PrimitiveType::Int8,
            "uint8" => PrimitiveType::UInt8,
            "int16" => PrimitiveType::Int16,
            "uint16" => PrimitiveType::UInt16,
            "int32" => PrimitiveType::Int32,
            "uint32" => PrimitiveType::UInt32,
            "int64" => PrimitiveType::Int64,
            "uint64" => PrimitiveType::UInt64,
            _ => return None,
        })
    }

    /// Size in bytes on the wire (also its CDR alignment).
    pub fn size(self) -> usize {
        match self {
            PrimitiveType::Bool
            | PrimitiveType::Byte
            | PrimitiveType::Char
            | PrimitiveType::Int8
            | PrimitiveType::UInt8 => 1,
            PrimitiveType::Int16 | PrimitiveType::UInt16 => 2,
            PrimitiveType::Float32 | PrimitiveType::Int32 | PrimitiveType::UInt32 => 4,
            PrimitiveType::Float64 | PrimitiveType::Int64 | PrimitiveType::UInt64 => 8,
        }
    }
}

/// The element type of a field, without array/sequence decoration.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BaseType {
    /// A primitive number or bool.
    Primitive(PrimitiveType),
    /// `string` or `string<=N` (bound in bytes).
    String {
        /// `Some(N)` for `string<=N`.
        bound: Option<u32>,
    },
    /// `wstring` or `wstring<=N` (bound in UTF-16 code units).
    WString {
        /// `Some(N)` for `wstring<=N`.
        bound: Option<u32>,
    },
    /// Another message type.
    Nested(TypeName),
}

/// How many values of the base type a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Container {
    /// A single value.
    Single,
    /// `T[N]`: exactly N values, no length on the wire.
    Array(u32),
    /// `T[<=N]`: at most N values, encoded like an unbounded sequence.
    BoundedSequence(u32),
    /// `T[]`: any number of values.
    Sequence,
}

/// The full type of a field.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldType {
    /// Element type.
    pub base: BaseType,
    /// Single value, array or sequence.
    pub container: Container,
}

impl FieldType {
    /// A single value of `base`.
    pub fn single(base: BaseType) -> Self {
        FieldType {
            base,
            container: Container::Single,
        }
    }

    /// The nested message type, if the element type is one.
    pub fn nested(&self) -> Option<&TypeName> {
        match &self.base {
            BaseType::Nested(n) => Some(n),
            _ => None,
        }
    }
}

impl fmt::Display for FieldType {
    /// Writes the .msg spelling (`uint8[<=4]`, `string<=10`, `std_msgs/Header`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.base {
            BaseType::Primitive(p) => f.write_str(p.msg_name())?,
            BaseType::String { bound: None } => f.write_str("string")?,
            BaseType::String { bound: Some(n) } => write!(f, "string<={n}")?,
            BaseType::WString { bound: None } => f.write_str("wstring")?,
            BaseType::WString { bound: Some(n) } => write!(f, "wstring<={n}")?,
            BaseType::Nested(t) => f.write_str(&t.to_short_string())?,
        }
        match self.container {
            Container::Single => Ok(()),
            Container::Array(n) => write!(f, "[{n}]"),
            Container::BoundedSequence(n) => write!(f, "[<={n}]"),
            Container::Sequence => f.write_str("[]"),
        }
    }
}

/// One field of a message.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Field name (shared with decoded [`crate::Struct`] values).
    pub name: Arc<str>,
    /// Field type.
    pub ty: FieldType,
    /// Default value from the definition (`int32 x 5`), already typed.
    pub default: Option<Value>,
}

/// A constant declared in a message (`int32 X=5`).
#[derive(Debug, Clone, PartialEq)]
pub struct Constant {
    /// Constant name.
    pub name: String,
    /// Its type (a primitive or a string type).
    pub ty: BaseType,
    /// Its value.
    pub value: Value,
}

/// What a definition describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DefinitionRole {
    /// A message type that can be serialized.
    Message,
    /// A service composite (`pkg/srv/Name`: fields request_message, response_message,
    /// event_message). Only used for type descriptions/hashes; not serializable itself.
    Service,
    /// An action composite (`pkg/action/Name`: goal, result, feedback, send_goal_service,
    /// get_result_service, feedback_message). Only used for type descriptions/hashes.
    Action,
}

/// A message (or service/action composite) definition.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageDefinition {
    /// Fully qualified type name.
    pub name: TypeName,
    /// Fields in declaration order. An empty .msg gets rosidl's placeholder field
    /// `uint8 structure_needs_at_least_one_member`.
    pub fields: Vec<Field>,
    /// Constants in declaration order.
    pub constants: Vec<Constant>,
    /// Message, service composite or action composite.
    pub role: DefinitionRole,
    /// The original interface text this was parsed from, when known (the .msg text, or the
    /// whole .srv text for a service's `_Event`); used for `ros2msg` schemas.
    pub source: Option<Arc<str>>,
}

/// Name of the field rosidl adds to messages that have no fields.
pub const EMPTY_PLACEHOLDER_FIELD: &str = "structure_needs_at_least_one_member";

impl MessageDefinition {
    /// Looks up a field by name.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| &*f.name == name)
    }

    /// Looks up a constant by name.
    pub fn constant(&self, name: &str) -> Option<&Constant> {
        self.constants.iter().find(|c| c.name == name)
    }

    /// The nested types this definition refers to directly (with duplicates removed, in
    /// field order).
    pub fn dependencies(&self) -> Vec<&TypeName> {
        let mut out: Vec<&TypeName> = Vec::new();
        for f in &self.fields {
            if let Some(n) = f.ty.nested() {
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        }
        out
    }

    /// Whether the definition only has rosidl's placeholder field (the .msg was empty).
    pub fn is_empty_placeholder(&self) -> bool {
        self.fields.len() == 1 && &*self.fields[0].name == EMPTY_PLACEHOLDER_FIELD
    }

    /// Renders the definition as .msg text (constants, then fields with defaults). Nested types
    /// are written fully qualified. This is used when no original source text is known.
    pub fn to_msg_text(&self) -> String {
        let mut out = String::new();
        for c in &self.constants {
            let ty = FieldType::single(c.ty.clone());
            out.push_str(&format!(
                "{ty} {}={}\n",
                c.name,
                crate::value::msg_literal(&c.value)
            ));
        }
        if !self.is_empty_placeholder() {
            for f in &self.fields {
                out.push_str(&format!("{} {}", f.ty, f.name));
                if let Some(d) = &f.default {
                    out.push(' ');
                    out.push_str(&crate::value::msg_literal(d));
                }
                out.push('\n');
            }
        }
        out
    }
}
