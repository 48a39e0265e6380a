//! JSON conversion of dynamic values.
//!
//! Mapping: structs are objects, arrays are arrays, integers and finite floats are numbers,
//! non-finite floats are the strings `"NaN"`, `"Infinity"` and `"-Infinity"`, strings and
//! wstrings are strings. `uint8[]`/`byte[]` are arrays of numbers.
//!
//! [`to_json`] returns a `serde_json::Value`, whose objects are sorted by key; use
//! `serde_json::to_string(&value)` (the [`Value`] `Serialize` impl) for text that keeps the
//! field order of the definition.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::Value as Json;

use crate::defaults::Defaults;
use crate::definition::{BaseType, Container, FieldType, MessageDefinition, PrimitiveType};
use crate::name::TypeName;
use crate::parse::values_to_array;
use crate::registry::{Registry, RegistryError, MAX_NESTING_DEPTH};
use crate::value::{Array, Struct, Value};

fn show_path(path: &str) -> String {
    if path.is_empty() {
        "message".to_string()
    } else {
        format!("field `{path}`")
    }
}

fn join(seg: &str, path: &str) -> String {
    if path.is_empty() {
        seg.to_string()
    } else if path.starts_with('[') {
        format!("{seg}{path}")
    } else {
        format!("{seg}.{path}")
    }
}

/// Why JSON could not be converted to a value of the requested type.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// The type (or a nested one) is unknown.
    #[error(transparent)]
    Registry(Box<RegistryError>),
    /// A JSON value of the wrong kind.
    #[error("{}: expected {expected}, found {found}", show_path(path))]
    WrongType {
        /// Field path.
        path: String,
        /// What the field type needs.
        expected: String,
        /// The JSON found (abbreviated).
        found: String,
    },
    /// A member that is not a field of the type.
    #[error("{}: unknown field of `{type_name}`", show_path(path))]
    UnknownField {
        /// Field path (ending in the unknown name).
        path: String,
        /// The struct's type.
        type_name: String,
    },
    /// A number that does not fit the field type.
    #[error("{}: {value} is out of range for {ty}", show_path(path))]
    OutOfRange {
        /// Field path.
        path: String,
        /// The number.
        value: String,
        /// The field type.
        ty: String,
    },
    /// A fixed array of the wrong length.
    #[error(
        "{}: fixed array needs exactly {expected} elements, found {found}",
        show_path(path)
    )]
    ArrayLength {
        /// Field path.
        path: String,
        /// Declared size.
        expected: u32,
        /// Elements given.
        found: usize,
    },
    /// A bounded sequence or string longer than its bound.
    #[error("{}: length {length} exceeds the bound of {bound}", show_path(path))]
    BoundExceeded {
        /// Field path.
        path: String,
        /// Actual length.
        length: usize,
        /// The bound.
        bound: u32,
    },
    /// Nesting deeper than [`MAX_NESTING_DEPTH`].
    #[error("{}: nests more than {limit} levels deep", show_path(path))]
    TooDeep {
        /// Field path.
        path: String,
        /// The limit.
        limit: usize,
    },
}

impl From<RegistryError> for JsonError {
    fn from(e: RegistryError) -> Self {
        JsonError::Registry(Box::new(e))
    }
}

impl JsonError {
    fn in_field(mut self, seg: &str) -> Self {
        match &mut self {
            JsonError::WrongType { path, .. }
            | JsonError::UnknownField { path, .. }
            | JsonError::OutOfRange { path, .. }
            | JsonError::ArrayLength { path, .. }
            | JsonError::BoundExceeded { path, .. }
            | JsonError::TooDeep { path, .. } => *path = join(seg, path),
            JsonError::Registry(_) => {}
        }
        self
    }
}

fn float_json(x: f64) -> Json {
    if x.is_nan() {
        Json::String("NaN".into())
    } else if x.is_infinite() {
        Json::String(if x > 0.0 { "Infinity" } else { "-Infinity" }.into())
    } else {
        serde_json::Number::from_f64(x)
            .map(Json::Number)
            .unwrap_or(Json::Null)
    }
}

fn f32_json(x: f32) -> Json {
    // Use the shortest decimal that round-trips as f32 (0.1f32 -> 0.1, not 0.100000001490116).
    if x.is_finite() {
        float_json(x.to_string().parse::<f64>().unwrap_or(f64::from(x)))
    } else {
        float_json(f64::from(x))
    }
}

/// Converts a value to JSON (see the module docs for the mapping).
pub fn to_json(value: &Value) -> Json {
    match value {
        Value::Bool(b) => Json::Bool(*b),
        Value::Int8(x) => (*x).into(),
        Value::UInt8(x) => (*x).into(),
        Value::Int16(x) => (*x).into(),
        Value::UInt16(x) => (*x).into(),
        Value::Int32(x) => (*x).into(),
        Value::UInt32(x) => (*x).into(),
        Value::Int64(x) => (*x).into(),
        Value::UInt64(x) => (*x).into(),
        Value::Float32(x) => f32_json(*x),
        Value::Float64(x) => float_json(*x),
        Value::String(s) | Value::WString(s) => Json::String(s.clone()),
        Value::Struct(s) => struct_json(s),
        Value::Array(a) => Json::Array(match a {
            Array::Bool(v) => v.iter().map(|x| Json::Bool(*x)).collect(),
            Array::Int8(v) => v.iter().map(|x| (*x).into()).collect(),
            Array::UInt8(v) => v.iter().map(|x| (*x).into()).collect(),
            Array::Int16(v) => v.iter().map(|x| (*x).into()).collect(),
            Array::UInt16(v) => v.iter().map(|x| (*x).into()).collect(),
            Array::Int32(v) => v.iter().map(|x| (*x).into()).collect(),
            Array::UInt32(v) => v.iter().map(|x| (*x).into()).collect(),
            Array::Int64(v) => v.iter().map(|x| (*x).into()).collect(),
            Array::UInt64(v) => v.iter().map(|x| (*x).into()).collect(),
            Array::Float32(v) => v.iter().map(|x| f32_json(*x)).collect(),
            Array::Float64(v) => v.iter().map(|x| float_json(*x)).collect(),
            Array::String(v) | Array::WString(v) => {
                v.iter().map(|x| Json::String(x.clone())).collect()
            }
            Array::Struct(v) => v.iter().map(struct_json).collect(),
        }),
    }
}

fn struct_json(s: &Struct) -> Json {
    Json::Object(
        s.fields
            .iter()
            .map(|(k, v)| (k.to_string(), to_json(v)))
            .collect(),
    )
}

impl Serialize for Value {
    /// Serializes with the JSON mapping of [`to_json`], keeping struct field order.
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Struct(s) => s.serialize(ser),
            Value::Array(Array::Struct(v)) => {
                let mut seq = ser.serialize_seq(Some(v.len()))?;
                for s in v {
                    seq.serialize_element(s)?;
                }
                seq.end()
            }
            other => to_json(other).serialize(ser),
        }
    }
}

impl Serialize for Struct {
    /// Serializes as a map in field order.
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut map = ser.serialize_map(Some(self.fields.len()))?;
        for (k, v) in &self.fields {
            map.serialize_entry(&**k, v)?;
        }
        map.end()
    }
}

fn describe(j: &Json) -> String {
    let s = j.to_string();
    if s.len() > 40 {
        format!(
            "{}...",
            &s[..s.char_indices().nth(37).map(|(i, _)| i).unwrap_or(s.len())]
        )
    } else {
        s
    }
}

struct FromJson<'r> {
    reg: &'r Registry,
}

impl FromJson<'_> {
    fn structure(
        &self,
        def: &MessageDefinition,
        j: &Json,
        depth: usize,
    ) -> Result<Struct, JsonError> {
        if depth > MAX_NESTING_DEPTH {
            return Err(JsonError::TooDeep {
                path: String::new(),
                limit: MAX_NESTING_DEPTH,
            });
        }
        let obj = j.as_object().ok_or_else(|| JsonError::WrongType {
            path: String::new(),
            expected: format!("an object for `{}`", def.name),
            found: describe(j),
        })?;
        for k in obj.keys() {
            if def.field(k).is_none() {
                return Err(JsonError::UnknownField {
                    path: k.clone(),
                    type_name: def.name.to_string(),
                });
            }
        }
        if def.is_empty_placeholder() {
            return Ok(Struct::new());
        }
        let mut fields = Vec::with_capacity(def.fields.len());
        for f in &def.fields {
            let v = match obj.get(&*f.name) {
                Some(jv) => self
                    .field(&def.name, &f.ty, jv, depth)
                    .map_err(|e| e.in_field(&f.name))?,
                None => {
                    let mut d = Defaults {
                        reg: self.reg,
                        budget: crate::defaults::MAX_DEFAULT_ELEMENTS,
                        root: &def.name,
                    };
                    d.field(&def.name, f, depth)?
                }
            };
            fields.push((f.name.clone(), v));
        }
        Ok(Struct { fields })
    }

    fn field(
        &self,
        owner: &TypeName,
        ty: &FieldType,
        j: &Json,
        depth: usize,
    ) -> Result<Value, JsonError> {
        if ty.container == Container::Single {
            return self.single(owner, ty, &ty.base, j, depth);
        }
        let items = j.as_array().ok_or_else(|| JsonError::WrongType {
            path: String::new(),
            expected: format!("an array for {ty}"),
            found: describe(j),
        })?;
        match ty.container {
            Container::Array(n) if items.len() != n as usize => {
                return Err(JsonError::ArrayLength {
                    path: String::new(),
                    expected: n,
                    found: items.len(),
                })
            }
            Container::BoundedSequence(b) if items.len() > b as usize => {
                return Err(JsonError::BoundExceeded {
                    path: String::new(),
                    length: items.len(),
                    bound: b,
                })
            }
            _ => {}
        }
        let elem_ty = FieldType::single(ty.base.clone());
        let mut values = Vec::with_capacity(items.len());
        for (i, it) in items.iter().enumerate() {
            values.push(
                self.single(owner, &elem_ty, &ty.base, it, depth)
                    .map_err(|e| e.in_field(&format!("[{i}]")))?,
            );
        }
        Ok(Value::Array(values_to_array(&ty.base, values)))
    }

    fn single(
        &self,
        owner: &TypeName,
        ty: &FieldType,
        base: &BaseType,
        j: &Json,
        depth: usize,
    ) -> Result<Value, JsonError> {
        let wrong = |expected: &str| JsonError::WrongType {
            path: String::new(),
            expected: expected.to_string(),
            found: describe(j),
        };
        match base {
            BaseType::Primitive(p) => primitive(*p, j),
            BaseType::String { bound } | BaseType::WString { bound } => {
                let s = j.as_str().ok_or_else(|| wrong("a string"))?;
                if let Some(b) = bound {
                    let len = if matches!(base, BaseType::String { .. }) {
                        s.len()
                    } else {
                        s.encode_utf16().count()
                    };
                    if len > *b as usize {
                        return Err(JsonError::BoundExceeded {
                            path: String::new(),
                            length: len,
                            bound: *b,
                        });
                    }
                }
                Ok(if matches!(base, BaseType::String { .. }) {
                    Value::String(s.to_string())
                } else {
                    Value::WString(s.to_string())
                })
            }
            BaseType::Nested(t) => {
                let def = self.reg.resolve_name(t, Some(owner))?;
                let _ = ty;
                Ok(Value::Struct(self.structure(def, j, depth + 1)?))
            }
        }
    }
}

fn primitive(p: PrimitiveType, j: &Json) -> Result<Value, JsonError> {
    use PrimitiveType as P;
    let wrong = |expected: &str| JsonError::WrongType {
        path: String::new(),
        expected: expected.to_string(),
        found: describe(j),
    };
    let range = || JsonError::OutOfRange {
        path: String::new(),
        value: describe(j),
        ty: p.msg_name().to_string(),
    };
    match p {
        P::Bool => j
            .as_bool()
            .map(Value::Bool)
            .ok_or_else(|| wrong("true or false")),
        P::Float32 | P::Float64 => {
            let x = match j {
                Json::Number(n) => n.as_f64().ok_or_else(|| wrong("a number"))?,
                Json::String(s) => match s.as_str() {
                    "NaN" | "nan" => f64::NAN,
                    "Infinity" | "inf" => f64::INFINITY,
                    "-Infinity" | "-inf" => f64::NEG_INFINITY,
                    _ => return Err(wrong("a number, \"NaN\", \"Infinity\" or \"-Infinity\"")),
                },
                _ => return Err(wrong("a number")),
            };
            Ok(if p == P::Float32 {
                Value::Float32(x as f32)
            } else {
                Value::Float64(x)
            })
        }
        _ => {
            let n = j
                .as_number()
                .ok_or_else(|| wrong(&format!("an integer ({})", p.msg_name())))?;
            let i: i128 = if let Some(v) = n.as_i64() {
                v.into()
            } else if let Some(v) = n.as_u64() {
                v.into()
            } else {
                return Err(wrong(&format!("an integer ({})", p.msg_name())));
            };
            Ok(match p {
                P::Byte | P::Char | P::UInt8 => Value::UInt8(u8::try_from(i).map_err(|_| range())?),
                P::Int8 => Value::Int8(i8::try_from(i).map_err(|_| range())?),
                P::Int16 => Value::Int16(i16::try_from(i).map_err(|_| range())?),
                P::UInt16 => Value::UInt16(u16::try_from(i).map_err(|_| range())?),
                P::Int32 => Value::Int32(i32::try_from(i).map_err(|_| range())?),
                P::UInt32 => Value::UInt32(u32::try_from(i).map_err(|_| range())?),
                P::Int64 => Value::Int64(i64::try_from(i).map_err(|_| range())?),
                P::UInt64 => Value::UInt64(u64::try_from(i).map_err(|_| range())?),
                P::Bool | P::Float32 | P::Float64 => return Err(wrong("an integer")),
            })
        }
    }
}

/// Builds a value of message type `type_name` from JSON. Missing fields take their defaults
/// (as [`Value::default_for`]); members that are not fields are errors naming them; numbers
/// are range-checked, fixed array lengths and bounds are enforced.
pub fn from_json(registry: &Registry, type_name: &str, json: &Json) -> Result<Value, JsonError> {
    let def = registry.resolve(type_name)?;
    Ok(Value::Struct(
        FromJson { reg: registry }.structure(def, json, 0)?,
    ))
}
