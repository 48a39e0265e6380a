//! Messages as JSON through their [`Schema`]: any type a process derived can be shown and
//! written by tools and scripts that were never compiled against it.
//!
//! Structs are objects in field order; arrays are arrays, except `[u8; N]` holding text
//! (printable ASCII up to the first zero byte, zeros after), which is a string, as frame
//! ids are (and `nerve_msgs::FixedStr`, see [`FIXED_STR_TAG`]); 128-bit integers are
//! decimal strings (JSON numbers lose precision past 2^53); a slice message adds
//! `elems_len` and `elems`. Numbers follow [`number`]: what [`to_json`] prints,
//! [`from_json`] reads back as the same bytes (NaN payloads aside).

pub mod number;

use super::schema::{Prim, Schema, Shape};
use number::{f32_from_json, f32_to_json, f64_from_json, f64_to_json, int_from_json};
use serde_json::{Map, Value};

/// The tag `nerve_msgs::FixedStr<N>` (a hand-written `Pod`) XORs into the layout hash of
/// `[u8; N]`: an opaque shape with that hash is NUL-padded text, shown as a string.
pub const FIXED_STR_TAG: u64 = 0x5354_5221;

/// Building a message from JSON failed; the message names the field and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{type_name}: {reason}")]
pub struct JsonError {
    /// The message type.
    pub type_name: String,
    /// What is wrong, naming the field.
    pub reason: String,
}

/// A message's payload bytes as JSON: the head and, for slice messages, `elems_len` and
/// at most `max_elems` of its `elems` elements (`usize::MAX`: all of them; fewer shown
/// than `elems_len` says is a shortened view that [`from_json`] refuses). `bytes` must
/// hold the message as validated by a subscriber (shorter input shows what fits and
/// `null` for the rest).
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

/// Whether an opaque shape is a `nerve_msgs::FixedStr` (see [`FIXED_STR_TAG`]).
fn is_fixed_str(size: usize, hash: u64) -> bool {
    hash == bytes_shape(size).layout_hash() ^ FIXED_STR_TAG
}

fn bytes_shape(len: usize) -> Shape {
    Shape::Array {
        elem: Box::new(Shape::Prim(Prim::U8)),
        len,
    }
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
        Shape::Opaque { size, hash, .. } if is_fixed_str(*size, *hash) => {
            match bytes.get(..*size).map(fixed_text) {
                Some(Some(s)) => Value::String(s),
                Some(None) => value(&bytes_shape(*size), bytes),
                None => Value::Null,
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

/// A fixed string's text: UTF-8 up to the first zero byte (empty too) and only zeros
/// after it; other bytes show as an array.
fn fixed_text(b: &[u8]) -> Option<String> {
    let end = b.iter().position(|&x| x == 0).unwrap_or(b.len());
    let (s, rest) = b.split_at(end);
    let s = std::str::from_utf8(s).ok()?;
    rest.iter().all(|&x| x == 0).then(|| s.to_string())
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
        Prim::F32 => f32_to_json(f32::from_ne_bytes(w[..4].try_into().unwrap_or_default())),
        Prim::F64 => f64_to_json(f64::from_ne_bytes(w[..8].try_into().unwrap_or_default())),
    }
}

/// Builds a message's payload bytes from JSON. Fields not given are zero and returned by
/// name (for the caller to report); a field the type does not have, a value of the wrong
/// kind or out of its type's range, or an array of the wrong length is an error naming
/// the field. Slice messages take their elements from `elems`; an `elems_len` that is not
/// the number of `elems` (a shortened echo) is an error.
pub fn from_json(schema: &Schema, v: &Value) -> Result<(Vec<u8>, Vec<String>), JsonError> {
    from_json_over(schema, &[], v)
}

/// As [`from_json`], but fields not given keep their bytes in `head` (a default message's
/// head; shorter than the head: zero beyond it). Fields of `elems` not given are zero.
pub fn from_json_over(
    schema: &Schema,
    head: &[u8],
    v: &Value,
) -> Result<(Vec<u8>, Vec<String>), JsonError> {
    let err = |reason: String| JsonError {
        type_name: schema.name.clone(),
        reason,
    };
    let Value::Object(obj) = v else {
        return Err(err("expected a JSON object".into()));
    };
    let mut head_obj = obj.clone();
    let elems = head_obj.remove("elems");
    let elems_len = head_obj.remove("elems_len");
    let info = schema.type_info();
    let mut missing = Vec::new();
    let mut bytes = vec![0u8; info.head_size];
    let given = head.len().min(bytes.len());
    bytes[..given].copy_from_slice(&head[..given]);
    write(
        &schema.head,
        &Value::Object(head_obj),
        &mut bytes,
        "",
        &mut missing,
    )
    .map_err(err)?;
    match (elems, &schema.elem) {
        (None, None) if elems_len.is_some() => {
            return Err(err("the type has no elems (elems_len given)".into()))
        }
        (None, _) if elems_len.is_some() => {
            return Err(err("elems_len given without elems".into()))
        }
        (None, _) => {}
        (Some(_), None) => return Err(err("the type has no elems".into())),
        (Some(Value::Array(items)), Some(elem)) => {
            if let Some(n) = &elems_len {
                if n.as_u64() != Some(items.len() as u64) {
                    return Err(err(format!(
                        "elems_len is {n} but elems holds {} (a shortened echo cannot be \
                         published: echo it without --max-elems)",
                        items.len()
                    )));
                }
            }
            let size = elem.size();
            bytes.resize(info.elems_offset() + items.len() * size, 0);
            for (i, item) in items.iter().enumerate() {
                let at = info.elems_offset() + i * size;
                write(
                    elem,
                    item,
                    &mut bytes[at..at + size],
                    &format!("elems[{i}]"),
                    &mut missing,
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
        Shape::Opaque { size, hash, .. } if is_fixed_str(*size, *hash) => {
            write(&bytes_shape(*size), v, out, path, missing)
        }
        Shape::Opaque { size, .. } => {
            // a hand-written type's bytes, as `to_json` shows them
            if !v.is_array() {
                return Err(format!(
                    "{}: a hand-written type without a field layout is written as an array \
                     of its {size} bytes",
                    at(path)
                ));
            }
            write(&bytes_shape(*size), v, out, path, missing)
        }
        Shape::Array { elem, len } => {
            if let (Shape::Prim(Prim::U8), Value::String(s)) = (&**elem, v) {
                if s.len() > *len {
                    return Err(format!("{}: {} bytes do not fit {len}", at(path), s.len()));
                }
                out.fill(0);
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
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn write_prim(p: Prim, v: &Value, out: &mut [u8]) -> Result<(), number::NumberError> {
    macro_rules! put {
        ($t:ty) => {{
            let x: $t = int_from_json(v, p.name())?;
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
        Prim::U128 => put!(u128),
        Prim::I128 => put!(i128),
        Prim::F32 => out.copy_from_slice(&f32_from_json(v)?.to_ne_bytes()),
        Prim::F64 => out.copy_from_slice(&f64_from_json(v)?.to_ne_bytes()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Clone, Copy, Debug, PartialEq, nerve_derive::Pod)]
    #[repr(C)]
    struct Stamp {
        sec: i32,
        nanosec: u32,
    }

    #[derive(Clone, Copy, Debug, PartialEq, nerve_derive::Message)]
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

    #[derive(Clone, Copy, Debug, PartialEq, nerve_derive::Message)]
    #[repr(C)]
    #[message(name = "test/Prims", elem = f64)]
    struct Prims {
        f64_: f64,
        u64_: u64,
        i64_: i64,
        f32_: f32,
        u32_: u32,
        i32_: i32,
        u16_: u16,
        i16_: i16,
        u8_: u8,
        i8_: i8,
        pad: [u8; 6],
    }

    /// Prints the message as JSON text and reads the text back, as echo and pub do.
    fn through_text(schema: &Schema, bytes: &[u8], elems: usize) -> Vec<u8> {
        let text = to_json(schema, bytes, elems, usize::MAX).to_string();
        let v: Value = serde_json::from_str(&text).unwrap();
        let (back, missing) = from_json(schema, &v).unwrap();
        assert!(missing.is_empty(), "{missing:?}");
        back
    }

    fn prims_bytes(p: &Prims, elems: &[f64]) -> Vec<u8> {
        let mut b = crate::message::as_bytes(p).to_vec();
        b.resize(crate::message::elems_offset::<Prims>(), 0);
        for e in elems {
            b.extend_from_slice(&e.to_ne_bytes());
        }
        b
    }

    #[test]
    fn every_primitive_survives_echo_and_pub_bit_for_bit() {
        let schema = Schema::of::<Prims>();
        let limits = [
            Prims {
                f64_: 0.9364630260594403,
                u64_: u64::MAX,
                i64_: i64::MIN,
                f32_: f32::MAX,
                u32_: u32::MAX,
                i32_: i32::MIN,
                u16_: u16::MAX,
                i16_: i16::MIN,
                u8_: u8::MAX,
                i8_: i8::MIN,
                pad: [0; 6],
            },
            Prims {
                f64_: -0.0,
                u64_: 0,
                i64_: i64::MAX,
                f32_: -0.0,
                u32_: 0,
                i32_: i32::MAX,
                u16_: 0,
                i16_: i16::MAX,
                u8_: 0,
                i8_: i8::MAX,
                pad: [0; 6],
            },
            Prims {
                f64_: f64::MIN_POSITIVE / 2.0,
                f32_: f32::from_bits(1),
                ..limits_zero()
            },
            Prims {
                f64_: f64::INFINITY,
                f32_: f32::NEG_INFINITY,
                ..limits_zero()
            },
        ];
        // 100 elements (more than echo used to show), with every kind of f64 among them
        let mut elems: Vec<f64> = (0..100).map(|i| i as f64 / 7.0).collect();
        elems[..6].copy_from_slice(&[
            5e-324,
            f64::MIN_POSITIVE / 2.0,
            -0.0,
            f64::NEG_INFINITY,
            f64::MAX,
            0.9364630260594403,
        ]);
        for p in limits {
            let bytes = prims_bytes(&p, &elems);
            assert_eq!(through_text(&schema, &bytes, elems.len()), bytes, "{p:?}");
        }
        // NaN comes back as NaN (its payload bits are not kept)
        let nan = Prims {
            f64_: f64::NAN,
            f32_: f32::NAN,
            ..limits_zero()
        };
        let back = through_text(&schema, &prims_bytes(&nan, &[f64::NAN]), 1);
        let head = crate::message::read_pod::<Prims>(&back).unwrap();
        assert!(head.f64_.is_nan() && head.f32_.is_nan());
        let v = to_json(&schema, &prims_bytes(&nan, &[f64::NAN]), 1, usize::MAX);
        assert_eq!((&v["f64_"], &v["elems"][0]), (&json!("NaN"), &json!("NaN")));
    }

    fn limits_zero() -> Prims {
        crate::message::zeroed()
    }

    #[test]
    fn numbers_out_of_range_or_of_the_wrong_kind_name_the_field() {
        let schema = Schema::of::<Prims>();
        let e = |v: Value| from_json(&schema, &v).unwrap_err().to_string();
        let f32_over = e(json!({"f32_": 1e39}));
        assert!(f32_over.contains("f32_:") && f32_over.contains("out of range for f32"));
        assert!(e(json!({"elems": [1.0, "fast"]})).contains("elems[1]:"));
        for (field, past) in [
            ("u8_", json!(256)),
            ("i8_", json!(-129)),
            ("u16_", json!(65536)),
            ("i16_", json!(32768)),
            ("u32_", json!(4294967296_u64)),
            ("i32_", json!(-2147483649_i64)),
            ("u64_", json!(-1)),
            ("i64_", json!(9223372036854775808_u64)),
        ] {
            let msg = e(json!({ field: past }));
            assert!(
                msg.contains(&format!("{field}:")) && msg.contains("out of range"),
                "{msg}"
            );
        }
        // no silent bool-to-integer conversion: the schema has no bool here
        let msg = e(json!({"u8_": true}));
        assert!(
            msg.contains("u8_:") && msg.contains("expected an integer"),
            "{msg}"
        );
        assert!(e(json!({"i32_": 1.5})).contains("i32_:"));
    }

    #[test]
    fn a_shortened_echo_is_refused_and_elements_are_all_shown() {
        let schema = Schema::of::<Reading>();
        let mut v = json!({"elems": (0..100).map(f64::from).collect::<Vec<_>>()});
        let (bytes, _) = from_json(&schema, &v).unwrap();
        let all = to_json(&schema, &bytes, 100, usize::MAX);
        assert_eq!(all["elems"].as_array().unwrap().len(), 100);
        assert_eq!(all["elems"][99], json!(99.0));
        let short = to_json(&schema, &bytes, 100, 3);
        assert_eq!(
            (short["elems_len"].clone(), short["elems"].clone()),
            (json!(100), json!([0.0, 1.0, 2.0]))
        );
        let e = from_json(&schema, &short).unwrap_err().to_string();
        assert!(e.contains("elems_len is 100 but elems holds 3"), "{e}");
        // the whole echo reads back
        v["elems_len"] = json!(100);
        assert_eq!(from_json(&schema, &all).unwrap().0, bytes);
        assert_eq!(from_json(&schema, &v).unwrap().0, bytes);
    }

    #[test]
    fn fields_not_given_keep_the_base_bytes() {
        let schema = Schema::of::<Reading>();
        let base = Reading {
            stamp: Stamp { sec: 5, nanosec: 6 },
            frame: *b"odometry",
            values: [1, 2, 3, 4],
            big: 9,
        };
        let (bytes, missing) = from_json_over(
            &schema,
            crate::message::as_bytes(&base),
            &json!({"stamp": {"sec": 1}, "frame": "map"}),
        )
        .unwrap();
        let head = crate::message::read_pod::<Reading>(&bytes).unwrap();
        assert_eq!(head.stamp, Stamp { sec: 1, nanosec: 6 });
        assert_eq!(
            &head.frame, b"map\0\0\0\0\0",
            "a shorter text clears the rest"
        );
        assert_eq!((head.values, head.big), ([1, 2, 3, 4], 9));
        assert_eq!(missing, ["stamp.nanosec", "values", "big"]);
    }
}
