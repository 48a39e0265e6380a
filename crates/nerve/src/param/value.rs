//! Parameter values and their types.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The type of a parameter value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ParamType {
    /// `true` or `false`.
    Bool,
    /// A 64-bit signed integer.
    Int,
    /// A 64-bit float.
    Float,
    /// A UTF-8 string.
    Str,
    /// Raw bytes.
    Bytes,
    /// An array of booleans.
    BoolArray,
    /// An array of integers.
    IntArray,
    /// An array of floats.
    FloatArray,
    /// An array of strings.
    StrArray,
}

impl ParamType {
    /// The type's name as tools print it.
    pub fn name(self) -> &'static str {
        match self {
            ParamType::Bool => "bool",
            ParamType::Int => "int",
            ParamType::Float => "float",
            ParamType::Str => "string",
            ParamType::Bytes => "bytes",
            ParamType::BoolArray => "bool[]",
            ParamType::IntArray => "int[]",
            ParamType::FloatArray => "float[]",
            ParamType::StrArray => "string[]",
        }
    }

    fn is_array(self) -> bool {
        matches!(
            self,
            ParamType::BoolArray
                | ParamType::IntArray
                | ParamType::FloatArray
                | ParamType::StrArray
        )
    }
}

impl fmt::Display for ParamType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A parameter value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ParamValue {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
    /// Raw bytes.
    Bytes(Vec<u8>),
    /// Booleans.
    BoolArray(Vec<bool>),
    /// Integers.
    IntArray(Vec<i64>),
    /// Floats.
    FloatArray(Vec<f64>),
    /// Strings.
    StrArray(Vec<String>),
}

impl ParamValue {
    /// The value's type.
    pub fn ty(&self) -> ParamType {
        match self {
            ParamValue::Bool(_) => ParamType::Bool,
            ParamValue::Int(_) => ParamType::Int,
            ParamValue::Float(_) => ParamType::Float,
            ParamValue::Str(_) => ParamType::Str,
            ParamValue::Bytes(_) => ParamType::Bytes,
            ParamValue::BoolArray(_) => ParamType::BoolArray,
            ParamValue::IntArray(_) => ParamType::IntArray,
            ParamValue::FloatArray(_) => ParamType::FloatArray,
            ParamValue::StrArray(_) => ParamType::StrArray,
        }
    }

    /// This value as type `ty`, or `None` when it does not convert. Integers widen to
    /// floats (a YAML `1` sets a float parameter: rclcpp#1009), and an empty array is an
    /// array of any element type; nothing narrows.
    pub fn coerce(self, ty: ParamType) -> Option<ParamValue> {
        if self.ty() == ty {
            return Some(self);
        }
        match (self, ty) {
            (ParamValue::Int(i), ParamType::Float) => Some(ParamValue::Float(i as f64)),
            (ParamValue::IntArray(v), ParamType::FloatArray) => Some(ParamValue::FloatArray(
                v.into_iter().map(|i| i as f64).collect(),
            )),
            (v, ty) if ty.is_array() && v.array_len() == Some(0) => Some(match ty {
                ParamType::BoolArray => ParamValue::BoolArray(Vec::new()),
                ParamType::IntArray => ParamValue::IntArray(Vec::new()),
                ParamType::FloatArray => ParamValue::FloatArray(Vec::new()),
                _ => ParamValue::StrArray(Vec::new()),
            }),
            _ => None,
        }
    }

    fn array_len(&self) -> Option<usize> {
        match self {
            ParamValue::BoolArray(v) => Some(v.len()),
            ParamValue::IntArray(v) => Some(v.len()),
            ParamValue::FloatArray(v) => Some(v.len()),
            ParamValue::StrArray(v) => Some(v.len()),
            _ => None,
        }
    }

    /// Bytes the value holds (bounds what a node keeps).
    pub fn size(&self) -> usize {
        match self {
            ParamValue::Bool(_) | ParamValue::Int(_) | ParamValue::Float(_) => 8,
            ParamValue::Str(s) => s.len(),
            ParamValue::Bytes(b) => b.len(),
            ParamValue::BoolArray(v) => v.len(),
            ParamValue::IntArray(v) => v.len() * 8,
            ParamValue::FloatArray(v) => v.len() * 8,
            ParamValue::StrArray(v) => v.iter().map(|s| s.len() + 8).sum(),
        }
    }

    /// The value as JSON (bytes as an array of numbers).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            ParamValue::Bool(b) => J::Bool(*b),
            ParamValue::Int(i) => J::from(*i),
            ParamValue::Float(f) => J::from(*f),
            ParamValue::Str(s) => J::String(s.clone()),
            ParamValue::Bytes(b) => J::from(b.clone()),
            ParamValue::BoolArray(v) => J::from(v.clone()),
            ParamValue::IntArray(v) => J::from(v.clone()),
            ParamValue::FloatArray(v) => J::from(v.clone()),
            ParamValue::StrArray(v) => J::from(v.clone()),
        }
    }

    /// Reads a value written as YAML (`1`, `1.5`, `true`, `abc`, `[1, 2]`, `"quoted"`):
    /// what `nerve param set` accepts.
    pub fn parse(text: &str) -> Result<ParamValue, String> {
        let tree: super::file::ParamTree =
            serde_yaml_ng::from_str(text).map_err(|e| format!("{text:?}: {e}"))?;
        match tree {
            super::file::ParamTree::Leaf(v) => Ok(v),
            super::file::ParamTree::Map(_) => Err(format!(
                "{text:?}: a map is not a parameter value (set its entries by name)"
            )),
        }
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Str(s) => f.write_str(s),
            v => write!(f, "{}", v.to_json()),
        }
    }
}

macro_rules! from_value {
    ($($t:ty => $v:ident $(as $c:ty)?),* $(,)?) => {$(
        impl From<$t> for ParamValue {
            fn from(x: $t) -> ParamValue {
                ParamValue::$v((x $(as $c)?).into())
            }
        }
    )*};
}
from_value!(bool => Bool, i64 => Int, i32 => Int as i64, u32 => Int as i64, f64 => Float,
    f32 => Float as f64, String => Str, &str => Str, Vec<u8> => Bytes, Vec<bool> => BoolArray,
    Vec<i64> => IntArray, Vec<f64> => FloatArray, Vec<String> => StrArray);

impl From<Vec<&str>> for ParamValue {
    fn from(v: Vec<&str>) -> ParamValue {
        ParamValue::StrArray(v.into_iter().map(String::from).collect())
    }
}

/// Rust types a parameter can be read as ([`super::Parameters::get`]).
pub trait FromParam: Sized {
    /// The type a value must have (after widening) to be read as `Self`.
    const TYPE: ParamType;
    /// Takes the value out, if it has [`Self::TYPE`].
    fn from_param(value: ParamValue) -> Option<Self>;
}

macro_rules! from_param {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        impl FromParam for $t {
            const TYPE: ParamType = ParamType::$v;
            fn from_param(value: ParamValue) -> Option<Self> {
                match value.coerce(ParamType::$v)? {
                    ParamValue::$v(x) => Some(x),
                    _ => None,
                }
            }
        }
    )*};
}
from_param!(bool => Bool, i64 => Int, f64 => Float, String => Str, Vec<u8> => Bytes,
    Vec<bool> => BoolArray, Vec<i64> => IntArray, Vec<f64> => FloatArray,
    Vec<String> => StrArray);

impl FromParam for ParamValue {
    const TYPE: ParamType = ParamType::Bytes; // unused: any type is accepted
    fn from_param(value: ParamValue) -> Option<Self> {
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_widen_to_floats_and_nothing_narrows() {
        assert_eq!(
            ParamValue::Int(1).coerce(ParamType::Float),
            Some(ParamValue::Float(1.0))
        );
        assert_eq!(
            ParamValue::IntArray(vec![1, 2]).coerce(ParamType::FloatArray),
            Some(ParamValue::FloatArray(vec![1.0, 2.0]))
        );
        assert_eq!(ParamValue::Float(1.0).coerce(ParamType::Int), None);
        assert_eq!(ParamValue::Str("1".into()).coerce(ParamType::Int), None);
        assert_eq!(
            ParamValue::StrArray(vec![]).coerce(ParamType::IntArray),
            Some(ParamValue::IntArray(vec![]))
        );
        assert_eq!(f64::from_param(ParamValue::Int(3)), Some(3.0));
    }

    #[test]
    fn parses_what_the_cli_accepts() {
        assert_eq!(ParamValue::parse("1").unwrap(), ParamValue::Int(1));
        assert_eq!(ParamValue::parse("1.5").unwrap(), ParamValue::Float(1.5));
        assert_eq!(ParamValue::parse("true").unwrap(), ParamValue::Bool(true));
        assert_eq!(
            ParamValue::parse("base").unwrap(),
            ParamValue::Str("base".into())
        );
        assert_eq!(
            ParamValue::parse("[1, 2.5]").unwrap(),
            ParamValue::FloatArray(vec![1.0, 2.5])
        );
        assert!(ParamValue::parse("[1, a]").unwrap_err().contains("mixes"));
        assert!(ParamValue::parse("{a: 1}").is_err());
    }
}
