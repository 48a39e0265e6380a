//! RIHS01 type hashes (REP-2011) and the `type_description_interfaces` type description they
//! are computed from.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

use crate::definition::{BaseType, Container, FieldType, MessageDefinition, PrimitiveType};
use crate::name::TypeName;
use crate::registry::{Registry, RegistryError};
use crate::value::Value;

/// A RIHS01 type hash: SHA-256 over the canonical JSON type description.
/// Displays as `RIHS01_<64 lowercase hex digits>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rihs01(pub [u8; 32]);

impl Rihs01 {
    /// The 32 hash bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for Rihs01 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RIHS01_")?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// Error parsing a `RIHS01_...` string or a JSON type description.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// The text is not `RIHS01_` followed by 64 hex digits.
    #[error("invalid type hash `{0}`: expected `RIHS01_` followed by 64 hex digits")]
    InvalidHashString(String),
    /// A JSON type description lacks a member or has one of the wrong type.
    #[error("invalid type description JSON: {0}")]
    InvalidDescription(String),
}

impl FromStr for Rihs01 {
    type Err = HashError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || HashError::InvalidHashString(s.to_string());
        let hex = s.strip_prefix("RIHS01_").ok_or_else(bad)?;
        if hex.len() != 64 || !hex.is_ascii() {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Rihs01(out))
    }
}

/// One field of a type description (`type_description_interfaces/msg/Field` + `FieldType`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDescription {
    /// Field name.
    pub name: String,
    /// `FieldType.type_id` (e.g. 17 = string, 51 = uint8 array, 145 = nested unbounded
    /// sequence).
    pub type_id: u8,
    /// Array size or sequence bound (0 if none).
    pub capacity: u64,
    /// String bound (0 if none).
    pub string_capacity: u64,
    /// Full name of the nested type (`pkg/msg/Name`), or empty.
    pub nested_type_name: String,
    /// Default value as rosidl renders it (not part of the hash; best effort).
    pub default_value: String,
}

/// One type of a type description (`type_description_interfaces/msg/IndividualTypeDescription`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndividualTypeDescription {
    /// Full type name, e.g. `std_msgs/msg/String`.
    pub type_name: String,
    /// Fields in order.
    pub fields: Vec<FieldDescription>,
}

/// A full type description (`type_description_interfaces/msg/TypeDescription`): the type and
/// every type it references, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeDescription {
    /// The described type.
    pub type_description: IndividualTypeDescription,
    /// All types it references, transitively, sorted by `type_name`.
    pub referenced_type_descriptions: Vec<IndividualTypeDescription>,
}

fn primitive_id(p: PrimitiveType) -> u8 {
    match p {
        PrimitiveType::Int8 => 2,
        PrimitiveType::UInt8 | PrimitiveType::Char => 3,
        PrimitiveType::Int16 => 4,
        PrimitiveType::UInt16 => 5,
        PrimitiveType::Int32 => 6,
        PrimitiveType::UInt32 => 7,
        PrimitiveType::Int64 => 8,
        PrimitiveType::UInt64 => 9,
        PrimitiveType::Float32 => 10,
        PrimitiveType::Float64 => 11,
        PrimitiveType::Bool => 15,
        PrimitiveType::Byte => 16,
    }
}

/// The `type_description_interfaces/msg/FieldType` id of a field type.
pub fn field_type_id(ty: &FieldType) -> u8 {
    let base = match &ty.base {
        BaseType::Nested(_) => 1,
        BaseType::Primitive(p) => primitive_id(*p),
        BaseType::String { bound: None } => 17,
        BaseType::WString { bound: None } => 18,
        BaseType::String { bound: Some(_) } => 21,
        BaseType::WString { bound: Some(_) } => 22,
    };
    base + match ty.container {
        Container::Single => 0,
        Container::Array(_) => 48,
        Container::BoundedSequence(_) => 96,
        Container::Sequence => 144,
    }
}

fn py_float(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    format!("{v:?}")
}

fn py_repr_str(s: &str) -> String {
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::new();
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c == q => {
                out.push('\\');
                out.push(c)
            }
            c => out.push(c),
        }
    }
    out.push(q);
    out
}

/// Renders a default value like Python's `str()` of rosidl's annotation value.
fn py_default(v: &Value, in_tuple: bool) -> String {
    match v {
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Float32(x) => format!("{x:?}"),
        Value::Float64(x) => py_float(*x),
        Value::String(s) | Value::WString(s) if in_tuple => py_repr_str(s),
        Value::String(s) | Value::WString(s) => s.clone(),
        Value::Array(a) => {
            let items: Vec<String> = (0..a.len())
                .filter_map(|i| a.get(i))
                .map(|e| py_default(&e, true))
                .collect();
            if items.len() == 1 {
                format!("({},)", items[0])
            } else {
                format!("({})", items.join(", "))
            }
        }
        other => crate::value::msg_literal(other),
    }
}

impl IndividualTypeDescription {
    /// The description of one definition.
    pub fn from_definition(def: &MessageDefinition) -> Self {
        IndividualTypeDescription {
            type_name: def.name.to_string(),
            fields: def
                .fields
                .iter()
                .map(|f| FieldDescription {
                    name: f.name.to_string(),
                    type_id: field_type_id(&f.ty),
                    capacity: match f.ty.container {
                        Container::Array(n) | Container::BoundedSequence(n) => n.into(),
                        _ => 0,
                    },
                    string_capacity: match f.ty.base {
                        BaseType::String { bound: Some(n) }
                        | BaseType::WString { bound: Some(n) } => n.into(),
                        _ => 0,
                    },
                    nested_type_name: f.ty.nested().map(|t| t.to_string()).unwrap_or_default(),
                    default_value: f
                        .default
                        .as_ref()
                        .map(|d| py_default(d, false))
                        .unwrap_or_default(),
                })
                .collect(),
        }
    }

    fn write_json(&self, out: &mut String, with_defaults: bool) {
        out.push_str("{\"type_name\": ");
        json_str(out, &self.type_name);
        out.push_str(", \"fields\": [");
        for (i, f) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str("{\"name\": ");
            json_str(out, &f.name);
            out.push_str(&format!(
                ", \"type\": {{\"type_id\": {}, \"capacity\": {}, \"string_capacity\": {}, \"nested_type_name\": ",
                f.type_id, f.capacity, f.string_capacity
            ));
            json_str(out, &f.nested_type_name);
            out.push('}');
            if with_defaults {
                out.push_str(", \"default_value\": ");
                json_str(out, &f.default_value);
            }
            out.push('}');
        }
        out.push_str("]}");
    }

    fn from_json(v: &serde_json::Value) -> Result<Self, HashError> {
        let bad = |what: &str| HashError::InvalidDescription(what.to_string());
        let type_name = v
            .get("type_name")
            .and_then(|x| x.as_str())
            .ok_or_else(|| bad("missing string `type_name`"))?;
        let fields = v
            .get("fields")
            .and_then(|x| x.as_array())
            .ok_or_else(|| bad("missing array `fields`"))?;
        let mut out = Vec::new();
        for f in fields {
            let name = f
                .get("name")
                .and_then(|x| x.as_str())
                .ok_or_else(|| bad("field without string `name`"))?;
            let t = f.get("type").ok_or_else(|| bad("field without `type`"))?;
            let num = |k: &str| {
                t.get(k)
                    .and_then(|x| x.as_u64())
                    .ok_or_else(|| bad(&format!("field `{name}`: missing integer `{k}`")))
            };
            out.push(FieldDescription {
                name: name.to_string(),
                type_id: u8::try_from(num("type_id")?).map_err(|_| bad("type_id out of range"))?,
                capacity: num("capacity")?,
                string_capacity: num("string_capacity")?,
                nested_type_name: t
                    .get("nested_type_name")
                    .and_then(|x| x.as_str())
                    .unwrap_or("")
                    .to_string(),
                default_value: f
                    .get("default_value")
                    .and_then(|x| x.as_str())
                    .unwrap_or("")
                    .to_string(),
            });
        }
        Ok(IndividualTypeDescription {
            type_name: type_name.to_string(),
            fields: out,
        })
    }
}

/// Writes a JSON string the way Python's `json.dumps(ensure_ascii=True)` does.
fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

impl TypeDescription {
    /// The exact text that is hashed: the description as JSON with rosidl's key order,
    /// `", "`/`": "` separators, ASCII escaping and no `default_value` members.
    pub fn hash_input(&self) -> String {
        self.to_json_string(false)
    }

    /// The description as JSON text in rosidl's layout; `with_defaults` includes the
    /// `default_value` members (as in the `.json` files rosidl installs, minus indentation).
    pub fn to_json_string(&self, with_defaults: bool) -> String {
        let mut out = String::from("{\"type_description\": ");
        self.type_description.write_json(&mut out, with_defaults);
        out.push_str(", \"referenced_type_descriptions\": [");
        for (i, r) in self.referenced_type_descriptions.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            r.write_json(&mut out, with_defaults);
        }
        out.push_str("]}");
        out
    }

    /// The RIHS01 hash of this description.
    pub fn hash(&self) -> Rihs01 {
        let digest = Sha256::digest(self.hash_input().as_bytes());
        Rihs01(digest.into())
    }

    /// Reads a description in rosidl's JSON layout: either the `TypeDescription` object itself
    /// or a whole installed `.json` file (with a `type_description_msg` member).
    pub fn from_json(v: &serde_json::Value) -> Result<Self, HashError> {
        let v = v.get("type_description_msg").unwrap_or(v);
        let main = v
            .get("type_description")
            .ok_or_else(|| HashError::InvalidDescription("missing `type_description`".into()))?;
        let refs = v
            .get("referenced_type_descriptions")
            .and_then(|x| x.as_array())
            .ok_or_else(|| {
                HashError::InvalidDescription("missing array `referenced_type_descriptions`".into())
            })?;
        Ok(TypeDescription {
            type_description: IndividualTypeDescription::from_json(main)?,
            referenced_type_descriptions: refs
                .iter()
                .map(IndividualTypeDescription::from_json)
                .collect::<Result<_, _>>()?,
        })
    }
}

impl Registry {
    /// The full type description of `name` (messages, sub-types, and service/action
    /// composites). All referenced types must be in the registry.
    pub fn type_description(&self, name: &str) -> Result<TypeDescription, RegistryError> {
        let tn = TypeName::parse(name)?;
        self.check(name)?;
        let main = self.resolve_name(&tn, None)?;
        let refs = self
            .closure(&tn)?
            .iter()
            .map(|t| {
                self.resolve_name(t, None)
                    .map(IndividualTypeDescription::from_definition)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TypeDescription {
            type_description: IndividualTypeDescription::from_definition(main),
            referenced_type_descriptions: refs,
        })
    }

    /// The RIHS01 hash of `name` (e.g. `RIHS01_df668c74...` for `std_msgs/msg/String`).
    pub fn type_hash(&self, name: &str) -> Result<Rihs01, RegistryError> {
        Ok(self.type_description(name)?.hash())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn std_msgs_string() {
        let mut r = Registry::new();
        r.add_interface_text("std_msgs/msg/String", "string data\n")
            .unwrap();
        let h = r.type_hash("std_msgs/msg/String").unwrap();
        assert_eq!(
            h.to_string(),
            "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
        );
        assert_eq!(h.to_string().parse::<Rihs01>().unwrap(), h);
        assert!("RIHS01_zz".parse::<Rihs01>().is_err());
    }
}
