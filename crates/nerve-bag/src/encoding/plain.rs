//! CDR of a Nerve type's own layout, with a `ros2msg` schema generated from its Nerve
//! schema: how types that have no ROS 2 equivalent are recorded.
//!
//! Why CDR and not JSON or the raw layout: every MCAP tool that reads ROS 2 bags decodes
//! it field by field from the schema alone, and it costs nothing. A Nerve head has no
//! padding and every field sits at a multiple of its size, which is where CDR (aligning
//! to the field size, at most 8, from the body start) puts it too; elements of the slice
//! are laid out the same way. So the CDR of a message is the 4-byte encapsulation header,
//! the head bytes as they are, a `uint32` element count (aligned to 4) and the element
//! bytes as they are (aligned to their own alignment). Recording copies the payload out
//! of shared memory once, as it must anyway; no field is touched.
//!
//! The schema maps `u8`…`f64` to `uint8`…`float64`, 128-bit integers and hand-written
//! (opaque) types to `uint8[N]`, nested arrays to one flat array (same bytes), nested
//! structs to messages of the same package, and the slice to a sequence `elems`.
//! Numeric field names (tuple structs) become `f0`, `f1`, ….

use crate::BagError;
use nerve::message::schema::{Prim, Schema, Shape, StructShape};
use nerve_ros2_types::{CdrReader, CdrWriter, Endianness};
use std::collections::BTreeMap;

/// The plain CDR encoding of one type.
pub struct Plain {
    schema: Schema,
    /// The schema's type identity, kept (building it allocates).
    ty: nerve::TypeInfo,
    head_size: usize,
    /// Element size, CDR alignment and Nerve payload offset of the slice, if any.
    elem: Option<(usize, usize, usize)>,
}

impl Plain {
    /// The encoding of `schema` (any valid Nerve schema).
    pub fn new(schema: &Schema) -> Result<Plain, BagError> {
        let ty = schema.type_info();
        let elem = schema
            .elem
            .as_ref()
            .map(|e| (e.size(), cdr_align(e), ty.elems_offset()));
        if elem.is_some_and(|(size, ..)| size == 0) {
            return Err(BagError::Convert {
                what: schema.name.clone(),
                reason: "slice element of size 0".into(),
            });
        }
        Ok(Plain {
            schema: schema.clone(),
            ty: ty.clone(),
            head_size: ty.head_size,
            elem,
        })
    }

    fn package(&self) -> String {
        match self.schema.name.split_once('/') {
            Some((pkg, _)) if !pkg.is_empty() => ident(pkg).to_lowercase(),
            _ => "nerve".to_string(),
        }
    }

    /// The ROS 2 type name, `<package>/msg/<Type>`.
    pub fn ros_name(&self) -> String {
        let base = self.schema.name.rsplit('/').next().unwrap_or("Message");
        format!("{}/msg/{}", self.package(), type_ident(base))
    }

    /// The `ros2msg` definition: the head's fields, `elems` for the slice, and every
    /// nested struct as a dependency.
    pub fn text(&self) -> String {
        let pkg = self.package();
        let mut deps = BTreeMap::new();
        let mut main = String::new();
        match &self.schema.head {
            Shape::Struct(s) => fields(&pkg, s, &mut main, &mut deps),
            other => main.push_str(&field_line(&pkg, other, "value", &mut deps)),
        }
        if let Some(e) = &self.schema.elem {
            let line = match e {
                Shape::Array { .. } | Shape::Opaque { .. } => {
                    // a sequence of arrays does not exist in ros2msg: wrap the element
                    let name = format!("{}Elem", type_ident(&self.schema.name));
                    let wrapped = StructShape {
                        name: name.clone(),
                        size: e.size(),
                        align: e.align(),
                        fields: vec![nerve::message::schema::Field {
                            name: "value".into(),
                            offset: 0,
                            shape: e.clone(),
                        }],
                    };
                    let mut body = String::new();
                    fields(&pkg, &wrapped, &mut body, &mut deps);
                    deps.insert(name.clone(), body);
                    format!("{pkg}/{name}[] elems\n")
                }
                other => {
                    let t = field_line(&pkg, other, "elems", &mut deps);
                    t.replacen(" elems", "[] elems", 1)
                }
            };
            main.push_str(&line);
        }
        for (name, body) in deps {
            main.push_str(nerve_ros2_map::standard::SEPARATOR);
            main.push_str(&format!("MSG: {pkg}/{name}\n{body}"));
        }
        main
    }

    /// Nerve payload to CDR.
    pub fn encode(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), BagError> {
        self.ty
            .check_len(payload.len())
            .map_err(|reason| BagError::Convert {
                what: self.schema.name.clone(),
                reason: format!("payload of {} bytes: {reason}", payload.len()),
            })?;
        let mut w = CdrWriter::new(out);
        w.bytes(&payload[..self.head_size]);
        if let Some((size, align, offset)) = self.elem {
            let elems = &payload[offset..];
            w.len(elems.len() / size)?;
            if !elems.is_empty() {
                w.align(align);
            }
            w.bytes(elems);
        }
        Ok(())
    }

    /// CDR to Nerve payload.
    pub fn decode(&self, cdr: &[u8], out: &mut Vec<u8>) -> Result<(), BagError> {
        let mut r = CdrReader::new(cdr)?;
        if r.endianness() == Endianness::Big {
            // the payload is copied as it is into Nerve's little-endian layout
            return Err(BagError::Convert {
                what: "CDR payload".into(),
                reason: "big-endian CDR is not converted to a Nerve message".into(),
            });
        }
        out.clear();
        out.extend_from_slice(r.take(self.head_size)?);
        if let Some((size, align, offset)) = self.elem {
            let n = r.len(size)?;
            if n > 0 {
                r.align(align)?;
            }
            out.resize(offset, 0);
            out.extend_from_slice(r.take(n * size)?);
        }
        Ok(())
    }
}

/// CDR alignment of a shape: its largest primitive (at most 8); opaque bytes align to 1.
fn cdr_align(s: &Shape) -> usize {
    match s {
        Shape::Prim(Prim::U128 | Prim::I128) => 1,
        Shape::Prim(p) => p.size().min(8),
        Shape::Array { elem, .. } => cdr_align(elem),
        Shape::Struct(s) => s
            .fields
            .iter()
            .map(|f| cdr_align(&f.shape))
            .max()
            .unwrap_or(1),
        Shape::Opaque { .. } => 1,
    }
}

fn ident(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic()) {
        out.insert(0, 'f');
    }
    out
}

fn type_ident(s: &str) -> String {
    let base = s.rsplit(['/', ':']).next().unwrap_or(s);
    let id: String = base.chars().filter(char::is_ascii_alphanumeric).collect();
    match id.chars().next() {
        Some(c) if c.is_ascii_alphabetic() => {
            let mut out = c.to_ascii_uppercase().to_string();
            out.push_str(&id[1..]);
            out
        }
        _ => format!("T{id}"),
    }
}

fn fields(pkg: &str, s: &StructShape, out: &mut String, deps: &mut BTreeMap<String, String>) {
    for f in &s.fields {
        out.push_str(&field_line(pkg, &f.shape, &ident(&f.name), deps));
    }
}

/// One `type name` line; nested structs are added to `deps`.
fn field_line(pkg: &str, shape: &Shape, name: &str, deps: &mut BTreeMap<String, String>) -> String {
    // flatten nested arrays: [[T; a]; b] has the bytes of [T; a * b]
    let mut len = 1usize;
    let mut inner = shape;
    let mut array = false;
    while let Shape::Array { elem, len: n } = inner {
        len = len.saturating_mul(*n);
        inner = elem;
        array = true;
    }
    let (ty, extra) = match inner {
        Shape::Prim(p) => match p {
            Prim::U128 | Prim::I128 => ("uint8".to_string(), 16),
            p => (prim_name(*p).to_string(), 1),
        },
        Shape::Opaque { size, .. } => ("uint8".to_string(), *size),
        Shape::Struct(s) => {
            let tname = type_ident(&s.name);
            if !deps.contains_key(&tname) {
                deps.insert(tname.clone(), String::new());
                let mut body = String::new();
                fields(pkg, s, &mut body, deps);
                deps.insert(tname.clone(), body);
            }
            (format!("{pkg}/{tname}"), 1)
        }
        Shape::Array { .. } => unreachable!("arrays were flattened"),
    };
    let total = len.saturating_mul(extra);
    if array || extra > 1 {
        format!("{ty}[{total}] {name}\n")
    } else {
        format!("{ty} {name}\n")
    }
}

fn prim_name(p: Prim) -> &'static str {
    match p {
        Prim::U8 => "uint8",
        Prim::U16 => "uint16",
        Prim::U32 => "uint32",
        Prim::U64 => "uint64",
        Prim::I8 => "int8",
        Prim::I16 => "int16",
        Prim::I32 => "int32",
        Prim::I64 => "int64",
        Prim::F32 => "float32",
        Prim::F64 => "float64",
        Prim::U128 | Prim::I128 => "uint8",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, nerve::Pod)]
    #[repr(C)]
    struct Point {
        x: f32,
        y: f32,
    }

    #[derive(Clone, Copy, nerve::Message)]
    #[repr(C)]
    #[message(name = "demo/Track", elem = Point)]
    struct Track {
        id: u32,
        flags: u16,
        kind: u8,
        level: u8,
        mean: f64,
        grid: [[u16; 2]; 2],
    }

    #[test]
    fn custom_types_are_cdr_as_laid_out() {
        let schema = Schema::of::<Track>();
        let p = Plain::new(&schema).unwrap();
        assert_eq!(p.ros_name(), "demo/msg/Track");
        let text = p.text();
        assert!(text.starts_with(
            "uint32 id\nuint16 flags\nuint8 kind\nuint8 level\nfloat64 mean\nuint16[4] grid\n\
             demo/Point[] elems\n"
        ));
        assert!(
            text.contains("MSG: demo/Point\nfloat32 x\nfloat32 y\n"),
            "{text}"
        );
        let t = Track {
            id: 7,
            flags: 1,
            kind: 2,
            level: 3,
            mean: 0.5,
            grid: [[1, 2], [3, 4]],
        };
        let mut payload = nerve::message::as_bytes(&t).to_vec();
        for i in 0..3u8 {
            payload.extend_from_slice(&[i; 8]);
        }
        let mut cdr = Vec::new();
        p.encode(&payload, &mut cdr).unwrap();
        // header, head (24), count, elements (4-aligned: no padding here)
        assert_eq!(cdr.len(), 4 + 24 + 4 + 24);
        assert_eq!(&cdr[4..28], &payload[..24]);
        assert_eq!(&cdr[28..32], &3u32.to_le_bytes());
        let mut back = Vec::new();
        p.decode(&cdr, &mut back).unwrap();
        assert_eq!(back, payload);
        assert!(p.decode(&cdr[..cdr.len() - 1], &mut back).is_err());
        assert!(p.encode(&payload[..payload.len() - 1], &mut cdr).is_err());
    }
}
