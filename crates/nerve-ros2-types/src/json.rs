//! JSON conversion of dynamic values.
//!
//! Mapping: structs are objects, arrays are arrays, `bool` is `true`/`false`, strings and
//! wstrings are strings, `uint8[]`/`byte[]` are arrays of numbers. Numbers follow Nerve's
//! rules for every JSON path (`nerve::message::json::number`): integers exact over their
//! whole range, floats printed as the shortest decimal that reads back to the same bits
//! and read back exactly, NaN and the infinities as the strings `"NaN"`, `"Infinity"` and
//! `"-Infinity"`, a finite number beyond `float32` an error.
//!
//! [`to_json`] returns a `serde_json::Value`, whose objects are sorted by key; use
//! `serde_json::to_string(&value)` (the [`Value`] `Serialize` impl) for text that keeps the
//! field order of the definition.

use nerve::message::json::number::{
    bool_from_json, describe, f32_from_json, f32_to_json, f64_from_json, f64_to_json,
    int_from_json, NumberError,
};
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
        Value::Float32(x) => f32_to_json(*x),
        Value::Float64(x) => f64_to_json(*x),
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
            Array::Float32(v) => v.iter().map(|x| f32_to_json(*x)).collect(),
            Array::Float64(v) => v.iter().map(|x| f64_to_json(*x)).collect(),
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
    let ty = p.msg_name();
    let named = |e: NumberError| match e {
        NumberError::WrongKind { expected, found } => JsonError::WrongType {
            path: String::new(),
            expected,
            found,
        },
        NumberError::OutOfRange { value, .. } => JsonError::OutOfRange {
            path: String::new(),
            value,
            ty: ty.to_string(),
        },
    };
    Ok(match p {
        P::Bool => Value::Bool(bool_from_json(j).map_err(named)?),
        P::Float32 => Value::Float32(f32_from_json(j).map_err(named)?),
        P::Float64 => Value::Float64(f64_from_json(j).map_err(named)?),
        P::Byte | P::Char | P::UInt8 => Value::UInt8(int_from_json(j, ty).map_err(named)?),
        P::Int8 => Value::Int8(int_from_json(j, ty).map_err(named)?),
        P::Int16 => Value::Int16(int_from_json(j, ty).map_err(named)?),
        P::UInt16 => Value::UInt16(int_from_json(j, ty).map_err(named)?),
        P::Int32 => Value::Int32(int_from_json(j, ty).map_err(named)?),
        P::UInt32 => Value::UInt32(int_from_json(j, ty).map_err(named)?),
        P::Int64 => Value::Int64(int_from_json(j, ty).map_err(named)?),
        P::UInt64 => Value::UInt64(int_from_json(j, ty).map_err(named)?),
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DEF: &str = "bool b\nbyte y\nchar c\nint8 i8\nuint8 u8\nint16 i16\nuint16 u16\n\
        int32 i32\nuint32 u32\nint64 i64\nuint64 u64\nfloat32 f32\nfloat64 f64\n\
        float64[] many\nfloat32[3] three\n";

    fn registry() -> Registry {
        let mut reg = Registry::new();
        reg.add_interface_text("p/msg/All", DEF).unwrap();
        reg
    }

    /// JSON text → value → JSON text → value, as `topic pub` and `topic echo` go.
    fn through_text(reg: &Registry, text: &str) -> (Value, String) {
        let v: Json = serde_json::from_str(text).unwrap();
        let value = from_json(reg, "p/msg/All", &v).unwrap();
        let printed = serde_json::to_string(&value).unwrap();
        // read back and printed again: the same text (NaN is not equal to itself, text is)
        let again: Json = serde_json::from_str(&printed).unwrap();
        let value2 = from_json(reg, "p/msg/All", &again).unwrap();
        assert_eq!(serde_json::to_string(&value2).unwrap(), printed);
        (value, printed)
    }

    fn field<'a>(v: &'a Value, name: &str) -> &'a Value {
        let Value::Struct(s) = v else { panic!() };
        s.fields
            .iter()
            .find(|(k, _)| &**k == name)
            .map(|(_, v)| v)
            .unwrap()
    }

    #[test]
    fn numbers_survive_echo_and_pub_bit_for_bit() {
        let reg = registry();
        let many: Vec<f64> = [
            0.9364630260594403,
            -0.0,
            5e-324,
            f64::MIN_POSITIVE / 2.0,
            f64::MAX,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ]
        .into_iter()
        .chain((0..100).map(|i| f64::from(i) / 3.0))
        .collect();
        let text = json!({
            "b": true, "y": 255, "c": 0, "i8": -128, "u8": 255, "i16": -32768, "u16": 65535,
            "i32": i32::MIN, "u32": u32::MAX, "i64": i64::MIN, "u64": u64::MAX,
            "f32": 3.4028235e38, "f64": 0.9364630260594403,
            "many": many.iter().map(|x| f64_to_json(*x)).collect::<Vec<_>>(),
            "three": [-0.0, f32_to_json(f32::from_bits(1)), "NaN"],
        })
        .to_string();
        let (value, printed) = through_text(&reg, &text);
        assert_eq!(field(&value, "f64"), &Value::Float64(0.9364630260594403));
        assert_eq!(field(&value, "f32"), &Value::Float32(f32::MAX));
        assert_eq!(field(&value, "u64"), &Value::UInt64(u64::MAX));
        assert_eq!(field(&value, "i64"), &Value::Int64(i64::MIN));
        assert_eq!(field(&value, "b"), &Value::Bool(true));
        let Value::Array(Array::Float64(back)) = field(&value, "many") else {
            panic!()
        };
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(back), bits(&many), "all 107 elements, bit for bit");
        let Value::Array(Array::Float32(three)) = field(&value, "three") else {
            panic!()
        };
        assert_eq!(three[0].to_bits(), (-0.0f32).to_bits());
        assert_eq!(three[1].to_bits(), 1);
        assert!(three[2].is_nan());
        assert!(printed.contains("18446744073709551615"), "{printed}");
        assert!(printed.contains("\"-Infinity\"") && printed.contains("\"NaN\""));
    }

    #[test]
    fn bad_numbers_name_the_field() {
        let reg = registry();
        let e = |v: Json| from_json(&reg, "p/msg/All", &v).unwrap_err().to_string();
        let over = e(json!({"f32": 1e39}));
        assert!(over.contains("field `f32`") && over.contains("out of range for float32"));
        for (field, past) in [
            ("y", json!(256)),
            ("c", json!(-1)),
            ("i8", json!(128)),
            ("u8", json!(-1)),
            ("i16", json!(-32769)),
            ("u16", json!(65536)),
            ("i32", json!(2147483648_u64)),
            ("u32", json!(-1)),
            ("i64", json!(9223372036854775808_u64)),
            ("u64", json!(-1)),
        ] {
            let msg = e(json!({ field: past }));
            assert!(
                msg.contains(&format!("field `{field}`")) && msg.contains("out of range"),
                "{msg}"
            );
        }
        assert!(e(json!({"three": [0, 0, 1e39]})).contains("field `three[2]`"));
        assert!(e(json!({"b": 1})).contains("expected true or false"));
        assert!(e(json!({"u8": true})).contains("field `u8`"));
        assert!(e(json!({"f64": "fast"})).contains("field `f64`"));
        assert!(from_json(&reg, "p/msg/All", &json!({"b": false})).is_ok());
    }
}
