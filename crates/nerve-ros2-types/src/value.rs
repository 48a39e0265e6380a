//! Dynamic message values: a tree of primitives, strings, typed arrays and structs.

use std::sync::Arc;

/// A dynamically typed ROS 2 value.
///
/// `byte`, `char` and `uint8` all decode to [`Value::UInt8`]. Arrays and sequences of any kind
/// are [`Value::Array`], whose numeric variants are plain `Vec`s so they can be viewed as slices
/// (e.g. `PointCloud2.data` is an [`Array::UInt8`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `bool`.
    Bool(bool),
    /// `int8`.
    Int8(i8),
    /// `uint8`, `byte`, `char`.
    UInt8(u8),
    /// `int16`.
    Int16(i16),
    /// `uint16`.
    UInt16(u16),
    /// `int32`.
    Int32(i32),
    /// `uint32`.
    UInt32(u32),
    /// `int64`.
    Int64(i64),
    /// `uint64`.
    UInt64(u64),
    /// `float32`.
    Float32(f32),
    /// `float64`.
    Float64(f64),
    /// `string` / `string<=N`.
    String(String),
    /// `wstring` / `wstring<=N`.
    WString(String),
    /// A fixed array, bounded or unbounded sequence.
    Array(Array),
    /// A nested message.
    Struct(Struct),
}

/// The elements of an array or sequence, typed by element type.
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    /// `bool[]`.
    Bool(Vec<bool>),
    /// `int8[]`.
    Int8(Vec<i8>),
    /// `uint8[]`, `byte[]`, `char[]`.
    UInt8(Vec<u8>),
    /// `int16[]`.
    Int16(Vec<i16>),
    /// `uint16[]`.
    UInt16(Vec<u16>),
    /// `int32[]`.
    Int32(Vec<i32>),
    /// `uint32[]`.
    UInt32(Vec<u32>),
    /// `int64[]`.
    Int64(Vec<i64>),
    /// `uint64[]`.
    UInt64(Vec<u64>),
    /// `float32[]`.
    Float32(Vec<f32>),
    /// `float64[]`.
    Float64(Vec<f64>),
    /// `string[]`.
    String(Vec<String>),
    /// `wstring[]`.
    WString(Vec<String>),
    /// Arrays of nested messages.
    Struct(Vec<Struct>),
}

impl Array {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Array::Bool(v) => v.len(),
            Array::Int8(v) => v.len(),
            Array::UInt8(v) => v.len(),
            Array::Int16(v) => v.len(),
            Array::UInt16(v) => v.len(),
            Array::Int32(v) => v.len(),
            Array::UInt32(v) => v.len(),
            Array::Int64(v) => v.len(),
            Array::UInt64(v) => v.len(),
            Array::Float32(v) => v.len(),
            Array::Float64(v) => v.len(),
            Array::String(v) => v.len(),
            Array::WString(v) => v.len(),
            Array::Struct(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as a [`Value`] (cloned), or `None` if out of range.
    pub fn get(&self, i: usize) -> Option<Value> {
        Some(match self {
            Array::Bool(v) => Value::Bool(*v.get(i)?),
            Array::Int8(v) => Value::Int8(*v.get(i)?),
            Array::UInt8(v) => Value::UInt8(*v.get(i)?),
            Array::Int16(v) => Value::Int16(*v.get(i)?),
            Array::UInt16(v) => Value::UInt16(*v.get(i)?),
            Array::Int32(v) => Value::Int32(*v.get(i)?),
            Array::UInt32(v) => Value::UInt32(*v.get(i)?),
            Array::Int64(v) => Value::Int64(*v.get(i)?),
            Array::UInt64(v) => Value::UInt64(*v.get(i)?),
            Array::Float32(v) => Value::Float32(*v.get(i)?),
            Array::Float64(v) => Value::Float64(*v.get(i)?),
            Array::String(v) => Value::String(v.get(i)?.clone()),
            Array::WString(v) => Value::WString(v.get(i)?.clone()),
            Array::Struct(v) => Value::Struct(v.get(i)?.clone()),
        })
    }

    /// A short name of the element kind, for error messages (`uint8`, `string`, `struct`...).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Array::Bool(_) => "bool",
            Array::Int8(_) => "int8",
            Array::UInt8(_) => "uint8",
            Array::Int16(_) => "int16",
            Array::UInt16(_) => "uint16",
            Array::Int32(_) => "int32",
            Array::UInt32(_) => "uint32",
            Array::Int64(_) => "int64",
            Array::UInt64(_) => "uint64",
            Array::Float32(_) => "float32",
            Array::Float64(_) => "float64",
            Array::String(_) => "string",
            Array::WString(_) => "wstring",
            Array::Struct(_) => "struct",
        }
    }

    /// The elements as a `u8` slice if this is a `uint8`/`byte`/`char` array.
    pub fn as_u8_slice(&self) -> Option<&[u8]> {
        match self {
            Array::UInt8(v) => Some(v),
            _ => None,
        }
    }

    /// The elements as an `f32` slice if this is a `float32` array.
    pub fn as_f32_slice(&self) -> Option<&[f32]> {
        match self {
            Array::Float32(v) => Some(v),
            _ => None,
        }
    }

    /// The elements as an `f64` slice if this is a `float64` array.
    pub fn as_f64_slice(&self) -> Option<&[f64]> {
        match self {
            Array::Float64(v) => Some(v),
            _ => None,
        }
    }

    /// The nested messages if this is an array of structs.
    pub fn as_structs(&self) -> Option<&[Struct]> {
        match self {
            Array::Struct(v) => Some(v),
            _ => None,
        }
    }
}

/// A decoded message: its fields, by name, in declaration order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Struct {
    /// `(field name, value)` pairs in declaration order.
    pub fields: Vec<(Arc<str>, Value)>,
}

impl Struct {
    /// An empty struct (add fields with [`Struct::push`]).
    pub fn new() -> Self {
        Struct { fields: Vec::new() }
    }

    /// Appends a field.
    pub fn push(&mut self, name: impl Into<Arc<str>>, value: Value) {
        self.fields.push((name.into(), value));
    }

    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, v)| v)
    }

    /// Mutable access to field `name`.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Value> {
        self.fields
            .iter_mut()
            .find(|(n, _)| &**n == name)
            .map(|(_, v)| v)
    }

    /// Replaces the value of an existing field; returns `false` if there is no such field.
    pub fn set(&mut self, name: &str, value: Value) -> bool {
        match self.get_mut(name) {
            Some(slot) => {
                *slot = value;
                true
            }
            None => false,
        }
    }

    /// Field names in order.
    pub fn field_names(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|(n, _)| &**n)
    }
}

impl Value {
    /// The value as a struct.
    pub fn as_struct(&self) -> Option<&Struct> {
        match self {
            Value::Struct(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a mutable struct.
    pub fn as_struct_mut(&mut self) -> Option<&mut Struct> {
        match self {
            Value::Struct(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an array.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A field of a struct value, or a dotted path of fields (`"header.stamp.sec"`).
    pub fn get(&self, path: &str) -> Option<&Value> {
        let mut cur = self;
        for part in path.split('.') {
            cur = cur.as_struct()?.get(part)?;
        }
        Some(cur)
    }

    /// The value as a bool.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Any integer value widened to `i64` (`None` for `uint64` values above `i64::MAX`).
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Int8(v) => Some(v.into()),
            Value::UInt8(v) => Some(v.into()),
            Value::Int16(v) => Some(v.into()),
            Value::UInt16(v) => Some(v.into()),
            Value::Int32(v) => Some(v.into()),
            Value::UInt32(v) => Some(v.into()),
            Value::Int64(v) => Some(v),
            Value::UInt64(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any non-negative integer value widened to `u64`.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::UInt64(v) => Some(v),
            _ => self.as_i64().and_then(|v| u64::try_from(v).ok()),
        }
    }

    /// Any number as `f64` (integers converted, possibly losing precision above 2^53).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Float32(v) => Some(v.into()),
            Value::Float64(v) => Some(v),
            Value::UInt64(v) => Some(v as f64),
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    /// The text of a `string` or `wstring` value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) | Value::WString(s) => Some(s),
            _ => None,
        }
    }

    /// A short name of the value's kind, for error messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Bool(_) => "bool",
            Value::Int8(_) => "int8",
            Value::UInt8(_) => "uint8",
            Value::Int16(_) => "int16",
            Value::UInt16(_) => "uint16",
            Value::Int32(_) => "int32",
            Value::UInt32(_) => "uint32",
            Value::Int64(_) => "int64",
            Value::UInt64(_) => "uint64",
            Value::Float32(_) => "float32",
            Value::Float64(_) => "float64",
            Value::String(_) => "string",
            Value::WString(_) => "wstring",
            Value::Array(_) => "array",
            Value::Struct(_) => "struct",
        }
    }
}

/// Renders a value as a .msg literal (used to print constants and defaults).
pub(crate) fn msg_literal(v: &Value) -> String {
    fn quote(s: &str) -> String {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    }
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Int8(x) => x.to_string(),
        Value::UInt8(x) => x.to_string(),
        Value::Int16(x) => x.to_string(),
        Value::UInt16(x) => x.to_string(),
        Value::Int32(x) => x.to_string(),
        Value::UInt32(x) => x.to_string(),
        Value::Int64(x) => x.to_string(),
        Value::UInt64(x) => x.to_string(),
        Value::Float32(x) => format!("{x:?}"),
        Value::Float64(x) => format!("{x:?}"),
        Value::String(s) | Value::WString(s) => quote(s),
        Value::Struct(_) => String::from("{}"),
        Value::Array(a) => {
            let items: Vec<String> = (0..a.len())
                .filter_map(|i| a.get(i))
                .map(|e| msg_literal(&e))
                .collect();
            format!("[{}]", items.join(", "))
        }
    }
}
