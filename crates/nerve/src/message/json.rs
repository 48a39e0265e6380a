//! Messages as JSON through their [`Schema`]: any type a process derived can be shown and
//! written by tools and scripts that were never compiled against it.
//!
//! Structs are objects in field order; arrays are arrays, except `[u8; N]` holding text
//! (printable ASCII up to the first zero byte, zeros after), which is a string, as frame
//! ids are; 128-bit integers are decimal strings (JSON numbers lose precision past 2^53);
//! a slice message adds `elems_len` and `elems`.

use super::schema::{Prim, Schema, Shape};
use serde_json::{Map, Number, Value};

/// Building a message from JSON failed; the message names the field and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{type_name}: {reason}")]
pub struct JsonError {
    /// The message type.
    pub type_name: String,
    /// What is wrong, naming the field.
    pub reason: String,
}

/// A message's payload bytes as JSON: the head and, for slice messages, at most
/// `max_elems` of its `elems` elements. `bytes` must hold the message as validated by a
/// subscriber (shorter input shows what fits and `null` for the rest).
pub fn to_json(schema: &Schema, bytes: &[u8], elems: usize, max_elems: usize) -> Value {
    let mut v = value(&schema.head, bytes);
    if let (Some(elem), Value::Object(obj)) = (&schema.elem, &mut v) {
        let offset = schema.type_info().elems_offset();
        let size = elem.size();
        let shown = (0..elems.min(max_elems))
            .map(|i| value(elem, bytes.get(offset + i * size..).unwrap_or_default()))
            .collect();
        obj.insert("elems_len".into(), Value::from(elems));
        obj.insert("elems".into(), Value::Array(shown));
    }
    v
}

fn value(shape: &Shape, bytes: &[u8]) -> Value {
    match shape {
        Shape::Prim(p) => prim(*p, bytes),
        Shape::Array { elem, len } if **elem == Shape::Prim(Prim::U8) => {
            let b = bytes.get(..*len).unwrap_or_default();
            match text(b) {
                Some(s) => Value::String(s),
                None => Value::Array(b.iter().map(|&x| Value::from(x)).collect()),
            }
        }
        Shape::Array { elem, len } => {
            let size = elem.size();
            Value::Array(
                (0..*len)
                    .map(|i| value(elem, bytes.get(i * size..).unwrap_or_default()))
                    .collect(),
            )
        }
        Shape::Struct(s) => {
            let mut obj = Map::new();
            for f in &s.fields {
                let v = value(&f.shape, bytes.get(f.offset..).unwrap_or_default());
                obj.insert(f.name.clone(), v);
            }
            Value::Object(obj)
        }
        Shape::Opaque { size, .. } => Value::Array(
            bytes
                .get(..*size)
                .unwrap_or_default()
                .iter()
                .map(|&x| Value::from(x))
                .collect(),
        ),
    }
}

/// Printable ASCII up to the first zero byte and only zeros after it.
fn text(b: &[u8]) -> Option<String> {
    let end = b.iter().position(|&x| x == 0).unwrap_or(b.len());
    let (s, rest) = b.split_at(end);
    (!s.is_empty()
        && s.iter().all(|c| c.is_ascii_graphic() || *c == b' ')
        && rest.iter().all(|&x| x == 0))
    .then(|| String::from_utf8_lossy(s).into_owned())
}

fn prim(p: Prim, bytes: &[u8]) -> Value {
    let Some(b) = bytes.get(..p.size()) else {
        return Value::Null;
    };
    let mut w = [0u8; 16];
    w[..b.len()].copy_from_slice(b);
    let u = u128::from_ne_bytes(w);
    // native endianness: the bytes were written by this machine's kind (little-endian)
    match p {
        Prim::U8 => Value::from(b[0]),
        Prim::I8 => Value::from(b[0] as i8),
        Prim::U16 => Value::from(u16::from_ne_bytes([b[0], b[1]])),
        Prim::I16 => Value::from(i16::from_ne_bytes([b[0], b[1]])),
        Prim::U32 => Value::from(u32::from_ne_bytes(w[..4].try_into().unwrap_or_default())),
        Prim::I32 => Value::from(i32::from_ne_bytes(w[..4].try_into().unwrap_or_default())),
        Prim::U64 => Value::from(u64::from_ne_bytes(w[..8].try_into().unwrap_or_default())),
        Prim::I64 => Value::from(i64::from_ne_bytes(w[..8].try_into().unwrap_or_default())),
        Prim::U128 => Value::String(u.to_string()),
        Prim::I128 => Value::String((u as i128).to_string()),
        Prim::F32 => float(f32::from_ne_bytes(w[..4].try_into().unwrap_or_default()) as f64),
        Prim::F64 => float(f64::from_ne_bytes(w[..8].try_into().unwrap_or_default())),
    }
}

fn float(x: f64) -> Value {
    Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// Builds a message's payload bytes from JSON. Fields not given are zero and returned by
/// name (for the caller to report); a field the type does not have, a value of the wrong
/// kind or out of its type's range, or an array of the wrong length is an error naming
/// the field. Slice messages take their elements from `elems`.
pub fn from_json(schema: &Schema, v: &Value) -> Result<(Vec<u8>, Vec<String>), JsonError> {
    let err = |reason: String| JsonError {
        type_name: schema.name.clone(),
        reason,
    };
    let Value::Object(obj) = v else {
        return Err(err("expected a JSON object".into()));
    };
    let mut head_obj = obj.clone();
    let elems = head_obj.remove("elems");
    head_obj.remove("elems_len");
    let info = schema.type_info();
    let mut missing = Vec::new();
    let mut bytes = vec![0u8; info.head_size];
    write(
        &schema.head,
        &Value::Object(head_obj),
        &mut bytes,
        "",
        &mut missing,
    )
    .map_err(err)?;
    match (elems, &schema.elem) {
        (None, _) => {}
        (Some(_), None) => return Err(err("the type has no elems".into())),
        (Some(Value::Array(items)), Some(elem)) => {
            let size = elem.size();
            bytes.resize(info.elems_offset() + items.len() * size, 0);
            for (i, item) in items.iter().enumerate() {
                let at = info.elems_offset() + i * size;
                write(
                    elem,
                    item,
                    &mut bytes[at..at + size],
                    &format!("elems[{i}]"),
                    &mut Vec::new(),
                )
                .map_err(err)?;
            }
        }
        (Some(_), Some(_)) => return Err(err("elems: expected an array".into())),
    }
    Ok((bytes, missing))
}

fn write(
    shape: &Shape,
    v: &Value,
    out: &mut [u8],
    path: &str,
    missing: &mut Vec<String>,
) -> Result<(), String> {
    let at = |p: &str| {
        if p.is_empty() {
            "the message".to_string()
        } else {
            p.to_string()
        }
    };
    match shape {
        Shape::Prim(p) => write_prim(*p, v, out).map_err(|e| format!("{}: {e}", at(path))),
        Shape::Array { elem, len } => {
            if let (Shape::Prim(Prim::U8), Value::String(s)) = (&**elem, v) {
                if s.len() > *len {
                    return Err(format!("{}: {} bytes do not fit {len}", at(path), s.len()));
                }
                out[..s.len()].copy_from_slice(s.as_bytes());
                return Ok(());
            }
            let Value::Array(items) = v else {
                return Err(format!("{}: expected an array of {len}", at(path)));
            };
            if items.len() != *len {
                return Err(format!(
                    "{}: expected {len} elements, got {}",
                    at(path),
                    items.len()
                ));
            }
            let size = elem.size();
            for (i, item) in items.iter().enumerate() {
                write(
                    elem,
                    item,
                    &mut out[i * size..(i + 1) * size],
                    &format!("{path}[{i}]"),
                    missing,
                )?;
            }
            Ok(())
        }
        Shape::Struct(s) => {
            let Value::Object(obj) = v else {
                return Err(format!("{}: expected an object", at(path)));
            };
            if let Some(unknown) = obj.keys().find(|k| !s.fields.iter().any(|f| &f.name == *k)) {
                let p = join(path, unknown);
                return Err(format!("{} has no field {p:?}", s.name));
            }
            for f in &s.fields {
                let p = join(path, &f.name);
                let field = &mut out[f.offset..f.offset + f.shape.size()];
                match obj.get(&f.name) {
                    Some(fv) => write(&f.shape, fv, field, &p, missing)?,
                    None => missing.push(p),
                }
            }
            Ok(())
        }
        Shape::Opaque { .. } => Err(format!(
            "{}: a hand-written type without a field layout cannot be written from JSON",
            at(path)
        )),
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn write_prim(p: Prim, v: &Value, out: &mut [u8]) -> Result<(), String> {
    let range = || format!("{v} is out of range for {}", p.name());
    let int = || -> Result<i128, String> {
        match v {
            Value::Number(n) => n
                .as_i64()
                .map(i128::from)
                .or_else(|| n.as_u64().map(i128::from))
                .ok_or_else(|| format!("{n} is not an integer")),
            Value::String(s) => s
                .parse::<i128>()
                .map_err(|_| format!("{s:?} is not an integer")),
            Value::Bool(b) => Ok(i128::from(*b)),
            other => Err(format!("expected a number, got {other}")),
        }
    };
    macro_rules! put {
        ($t:ty) => {{
            let x = <$t>::try_from(int()?).map_err(|_| range())?;
            out.copy_from_slice(&x.to_ne_bytes());
        }};
    }
    match p {
        Prim::U8 => put!(u8),
        Prim::I8 => put!(i8),
        Prim::U16 => put!(u16),
        Prim::I16 => put!(i16),
        Prim::U32 => put!(u32),
        Prim::I32 => put!(i32),
        Prim::U64 => put!(u64),
        Prim::I64 => put!(i64),
        Prim::I128 => put!(i128),
        Prim::U128 => {
            let x = match v {
                Value::String(s) => s.parse::<u128>().map_err(|_| range())?,
                _ => u128::try_from(int()?).map_err(|_| range())?,
            };
            out.copy_from_slice(&x.to_ne_bytes());
        }
        Prim::F32 | Prim::F64 => {
            let x = v
                .as_f64()
                .ok_or_else(|| format!("expected a number, got {v}"))?;
            if p == Prim::F32 {
                if x.is_finite() && x.abs() > f32::MAX as f64 {
                    return Err(range());
                }
                out.copy_from_slice(&(x as f32).to_ne_bytes());
            } else {
                out.copy_from_slice(&x.to_ne_bytes());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Clone, Copy, Debug, PartialEq, crate::Pod)]
    #[repr(C)]
    struct Stamp {
        sec: i32,
        nanosec: u32,
    }

    #[derive(Clone, Copy, Debug, PartialEq, crate::Message)]
    #[repr(C)]
    #[message(name = "test/Reading", elem = f32)]
    struct Reading {
        stamp: Stamp,
        frame: [u8; 8],
        values: [i16; 4],
        big: u64,
    }

    #[test]
    fn json_round_trips_through_the_schema() {
        let schema = Schema::of::<Reading>();
        let v = json!({
            "stamp": {"sec": -3, "nanosec": 7},
            "frame": "base",
            "values": [1, -2, 3, 32767],
            "big": u64::MAX,
            "elems": [0.5, 1.5]
        });
        let (bytes, missing) = from_json(&schema, &v).unwrap();
        assert!(missing.is_empty(), "{missing:?}");
        let head = crate::message::read_pod::<Reading>(&bytes).unwrap();
        assert_eq!(
            head.stamp,
            Stamp {
                sec: -3,
                nanosec: 7
            }
        );
        assert_eq!(&head.frame, b"base\0\0\0\0");
        assert_eq!(head.big, u64::MAX, "no precision lost past 2^53");
        let back = to_json(&schema, &bytes, 2, 64);
        assert_eq!(back["stamp"], v["stamp"]);
        assert_eq!(back["frame"], "base");
        assert_eq!(back["values"], v["values"]);
        assert_eq!(back["big"], v["big"]);
        assert_eq!(back["elems"], json!([0.5, 1.5]));
        assert_eq!(back["elems_len"], 2);
    }

    #[test]
    fn bad_json_names_the_field() {
        let schema = Schema::of::<Reading>();
        let e = |v: Value| from_json(&schema, &v).unwrap_err().to_string();
        assert!(e(json!({"stamp": {"secs": 1}})).contains("\"stamp.secs\""));
        assert!(e(json!({"values": [1, 2]})).contains("values: expected 4 elements"));
        assert!(e(json!({"values": [1, 2, 3, 40000]})).contains("values[3]"));
        assert!(e(json!({"frame": "far too long"})).contains("frame"));
        assert!(e(json!([1])).contains("expected a JSON object"));
        let (_, missing) = from_json(&schema, &json!({"big": 1})).unwrap();
        assert_eq!(missing, ["stamp", "frame", "values"]);
        let (_, missing) = from_json(&schema, &json!({"stamp": {"sec": 1}})).unwrap();
        assert_eq!(missing, ["stamp.nanosec", "frame", "values", "big"]);
    }
}
