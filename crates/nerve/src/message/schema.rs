//! Self-describing message types: the layout of every derived type (field names,
//! primitive types, offsets, fixed arrays, nested structs and the slice element), so that
//! tools, Python, recorders and bridges read a topic without being compiled against it.
//!
//! `#[derive(Message)]` and `#[derive(Pod)]` describe each type ([`crate::Pod::shape`]);
//! [`Schema::of`] assembles a message's schema, which travels with its topic. The layout
//! hash stays the identity: a schema whose recomputed hash differs from the one it claims
//! is refused, so a schema can never describe bytes other than those of its type.
//!
//! # Encoding, version 1
//! One line of printable ASCII, fields separated by `|`, compact enough for the topic's
//! service record and trivial to parse in any language:
//!
//! ```text
//! nerve-schema/1|type=demo/Pose|hash=5d2c…|head=Pose|elem=-|struct Pose 24 8 x:0:f64 y:8:f64 theta:16:f64
//! ```
//!
//! - `type`: the message type name; `hash`: its layout hash (16 hex digits);
//! - `head`, `elem`: shapes of the head and of the slice element (`-`: no slice);
//! - `struct <name> <size> <align> <field>:<offset>:<shape>…`: one per nested struct,
//!   referenced by name from shapes (a second, different struct of the same Rust name
//!   is written `name~2`);
//! - shapes: `u8 u16 u32 u64 u128 i8 i16 i32 i64 i128 f32 f64`, `[<shape>;<len>]`, a
//!   struct name, or `opaque(<size>,<align>,<hash>)` for hand-written plain-data types.
//!
//! Later versions change the first field; decoders refuse versions they do not know.

use super::layout;
use super::{Message, Pod, TypeInfo, MAX_ALIGN};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// First field of every encoded schema of this version.
pub const SCHEMA_MAGIC: &str = "nerve-schema/1";
/// Longest encoded schema a decoder accepts (what travels is bounded further by each
/// transport; see the design notes).
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Most nested structs in one schema.
const MAX_STRUCTS: usize = 256;
/// Most fields of one struct.
const MAX_FIELDS: usize = 1024;
/// Deepest nesting of structs and arrays.
const MAX_DEPTH: usize = 32;
/// Longest type or field name.
const MAX_NAME: usize = 128;
/// Largest size of one type in bytes.
const MAX_SIZE: usize = 1 << 30;

/// A primitive number type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Prim {
    U8,
    U16,
    U32,
    U64,
    U128,
    I8,
    I16,
    I32,
    I64,
    I128,
    F32,
    F64,
}

impl Prim {
    /// Every primitive.
    pub const ALL: [Prim; 12] = [
        Prim::U8,
        Prim::U16,
        Prim::U32,
        Prim::U64,
        Prim::U128,
        Prim::I8,
        Prim::I16,
        Prim::I32,
        Prim::I64,
        Prim::I128,
        Prim::F32,
        Prim::F64,
    ];

    /// Its Rust name (`u8`, `f64`, …), as written in schemas.
    pub fn name(self) -> &'static str {
        match self {
            Prim::U8 => "u8",
            Prim::U16 => "u16",
            Prim::U32 => "u32",
            Prim::U64 => "u64",
            Prim::U128 => "u128",
            Prim::I8 => "i8",
            Prim::I16 => "i16",
            Prim::I32 => "i32",
            Prim::I64 => "i64",
            Prim::I128 => "i128",
            Prim::F32 => "f32",
            Prim::F64 => "f64",
        }
    }

    /// Size in bytes.
    pub fn size(self) -> usize {
        match self {
            Prim::U8 | Prim::I8 => 1,
            Prim::U16 | Prim::I16 => 2,
            Prim::U32 | Prim::I32 | Prim::F32 => 4,
            Prim::U64 | Prim::I64 | Prim::F64 => 8,
            Prim::U128 | Prim::I128 => 16,
        }
    }

    /// Alignment in bytes (as Rust lays it out on this platform).
    pub fn align(self) -> usize {
        match self {
            Prim::U128 | Prim::I128 => core::mem::align_of::<u128>(),
            p => p.size(),
        }
    }

    fn parse(s: &str) -> Option<Prim> {
        Prim::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// The layout of one type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A primitive number.
    Prim(Prim),
    /// A fixed-length array.
    Array {
        /// Element shape.
        elem: Box<Shape>,
        /// Number of elements.
        len: usize,
    },
    /// A `#[repr(C)]` struct without padding.
    Struct(StructShape),
    /// A hand-written plain-data type: only its size, alignment and layout hash are known.
    Opaque {
        /// Size in bytes.
        size: usize,
        /// Alignment in bytes.
        align: usize,
        /// Its layout hash.
        hash: u64,
    },
}

/// A struct's name (the Rust type name), size, alignment and fields in memory order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StructShape {
    /// Rust type name (part of the layout hash).
    pub name: String,
    /// Size in bytes.
    pub size: usize,
    /// Alignment in bytes.
    pub align: usize,
    /// Fields in memory order.
    pub fields: Vec<Field>,
}

/// One field of a struct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Field name (`0`, `1`, … for tuple structs).
    pub name: String,
    /// Byte offset in the struct.
    pub offset: usize,
    /// Its layout.
    pub shape: Shape,
}

impl Shape {
    /// Size in bytes.
    pub fn size(&self) -> usize {
        match self {
            Shape::Prim(p) => p.size(),
            Shape::Array { elem, len } => elem.size().saturating_mul(*len),
            Shape::Struct(s) => s.size,
            Shape::Opaque { size, .. } => *size,
        }
    }

    /// Alignment in bytes.
    pub fn align(&self) -> usize {
        match self {
            Shape::Prim(p) => p.align(),
            Shape::Array { elem, .. } => elem.align(),
            Shape::Struct(s) => s.align,
            Shape::Opaque { align, .. } => *align,
        }
    }

    /// The layout hash, computed as the derive computes it: the identity this shape must
    /// match.
    pub fn layout_hash(&self) -> u64 {
        match self {
            Shape::Prim(p) => layout::hash_str(layout::FNV_OFFSET, p.name()),
            Shape::Array { elem, len } => {
                layout::hash_u64(layout::hash_u64(elem.layout_hash(), *len as u64), 0x5b5d)
            }
            Shape::Struct(s) => {
                let mut h = layout::hash_str(layout::FNV_OFFSET, &s.name);
                h = layout::hash_u64(h, s.size as u64);
                h = layout::hash_u64(h, s.align as u64);
                for f in &s.fields {
                    h = layout::hash_str(h, &f.name);
                    h = layout::hash_u64(h, f.shape.layout_hash());
                }
                h
            }
            Shape::Opaque { hash, .. } => *hash,
        }
    }
}

/// A message type's schema: its name, identity, head and slice element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    /// Message type name, e.g. `nerve_msgs/Imu`.
    pub name: String,
    /// Layout hash of head and element (the type's identity on topics).
    pub layout_hash: u64,
    /// The fixed head.
    pub head: Shape,
    /// The slice element, for header + slice messages.
    pub elem: Option<Shape>,
    /// A type of another system carried in its own encoding (see [`Foreign`]).
    pub foreign: Option<Foreign>,
}

/// A message type of another system whose messages travel in that system's encoding
/// as the slice of a carrier message (a ROS 2 type as CDR bytes, say): the carrier's
/// layout is the [`Schema`]'s, and this part names the real type. Its identity is mixed
/// into the layout hash, so two foreign types on one carrier never share a topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Foreign {
    /// The type system and its encoding.
    pub kind: ForeignKind,
    /// The type's identity in its own system (a ROS 2 type's `RIHS01_…` hash).
    pub type_hash: String,
    /// The type's definition in its own language (ROS 2: the concatenated `ros2msg`
    /// text, as rosbag2 writes it into MCAP schema records).
    pub definition: String,
}

/// Which system a [`Foreign`] type comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForeignKind {
    /// A ROS 2 message (`ros2msg` definition, XCDR1 payload with its encapsulation header).
    Ros2Cdr,
}

impl ForeignKind {
    /// The name in the encoded schema.
    pub fn name(self) -> &'static str {
        match self {
            ForeignKind::Ros2Cdr => "ros2cdr",
        }
    }
}

/// Bytes the encoded definition escapes (`%XX`): everything but printable ASCII, and
/// the schema's own separators.
const DEFINITION_ESCAPES: &percent_encoding::AsciiSet =
    &percent_encoding::CONTROLS.add(b'|').add(b'%').add(b' ');

/// A schema that cannot be trusted: malformed, too large, or not matching its hash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// More bytes than any schema may have.
    #[error("schema of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Not a schema of a version this build knows.
    #[error("not a schema of version 1 (starts with {start:?})")]
    Version {
        /// What it starts with.
        start: String,
    },
    /// A part of the text is malformed.
    #[error("malformed schema: {0}")]
    Malformed(String),
    /// The layout it describes is impossible (padding, misalignment, sizes that do not
    /// add up, recursion, limits).
    #[error("schema of {name} describes an impossible layout: {reason}")]
    Layout {
        /// Type name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The file holding a large schema cannot be read (missing, or not this user's).
    #[error("schema file unreadable: {0}")]
    Unreadable(String),
    /// The layout it describes hashes to another identity than the one it claims.
    #[error(
        "schema of {name} does not match its layout hash: claims {claimed:016x}, describes \
         {computed:016x}"
    )]
    HashMismatch {
        /// Type name.
        name: String,
        /// The hash it claims.
        claimed: u64,
        /// The hash of what it describes.
        computed: u64,
    },
}

impl Schema {
    /// The schema of message `M`.
    pub fn of<M: Message>() -> Schema {
        let info = TypeInfo::of::<M>();
        Schema {
            name: M::TYPE_NAME.to_string(),
            layout_hash: info.layout_hash,
            head: M::shape(),
            elem: (core::mem::size_of::<M::Elem>() > 0).then(M::Elem::shape),
            foreign: None,
        }
    }

    /// The schema of a foreign type carried by message `M` (whose slice holds the foreign
    /// encoding): named `name`, its identity derived from the carrier's layout and the
    /// foreign type's hash.
    pub fn foreign<M: Message>(name: &str, foreign: Foreign) -> Schema {
        let mut schema = Schema {
            name: name.to_string(),
            foreign: Some(foreign),
            ..Schema::of::<M>()
        };
        schema.layout_hash = schema.computed_hash();
        schema
    }

    /// The layout hash of what this schema describes (head and element, as
    /// [`TypeInfo::of`] computes it, and the foreign type's identity where there is one).
    pub fn computed_hash(&self) -> u64 {
        let elem = match &self.elem {
            Some(e) => e.layout_hash(),
            None => <super::NoElem as Pod>::LAYOUT_HASH,
        };
        let layout = layout::hash_u64(self.head.layout_hash(), elem);
        match &self.foreign {
            None => layout,
            Some(f) => layout::hash_str(layout::hash_str(layout, f.kind.name()), &f.type_hash),
        }
    }

    /// The type identity topics compare, derived from the schema.
    pub fn type_info(&self) -> TypeInfo {
        let (elem_size, elem_align) = self.elem.as_ref().map_or((0, 1), |e| (e.size(), e.align()));
        TypeInfo {
            name: self.name.clone(),
            layout_hash: self.layout_hash,
            head_size: self.head.size(),
            elem_size,
            elem_align,
            align: self.head.align().max(elem_align).max(MAX_ALIGN),
        }
    }

    /// Encodes the schema (version 1, see the module docs).
    pub fn encode(&self) -> String {
        let mut table = StructTable::default();
        let head = table.shape(&self.head);
        let elem = self
            .elem
            .as_ref()
            .map_or("-".to_string(), |e| table.shape(e));
        let mut out = format!(
            "{SCHEMA_MAGIC}|type={}|hash={:016x}|head={head}|elem={elem}",
            self.name, self.layout_hash
        );
        if let Some(f) = &self.foreign {
            let def = percent_encoding::utf8_percent_encode(&f.definition, DEFINITION_ESCAPES);
            let _ = write!(
                out,
                "|foreign={}|id={}|def={def}",
                f.kind.name(),
                f.type_hash
            );
        }
        for line in table.lines {
            out.push('|');
            out.push_str(&line);
        }
        out
    }

    /// Decodes and checks a schema from another process, a file or the network: its
    /// size, grammar and limits, that the layout is one the derive produces (no padding,
    /// aligned fields, sizes that add up, no recursion), and that it hashes to the
    /// identity it claims. Nothing about it is trusted before that.
    pub fn decode(text: &str) -> Result<Schema, SchemaError> {
        if text.len() > MAX_SCHEMA_BYTES {
            return Err(SchemaError::TooLarge {
                len: text.len(),
                max: MAX_SCHEMA_BYTES,
            });
        }
        let malformed = |m: String| SchemaError::Malformed(m);
        let mut parts = text.split('|');
        let magic = parts.next().unwrap_or_default();
        if magic != SCHEMA_MAGIC {
            return Err(SchemaError::Version {
                start: magic.chars().take(32).collect(),
            });
        }
        let mut field = |key: &str| -> Result<&str, SchemaError> {
            let part = parts
                .next()
                .ok_or_else(|| malformed(format!("missing {key}=")))?;
            part.strip_prefix(key)
                .and_then(|p| p.strip_prefix('='))
                .ok_or_else(|| malformed(format!("expected {key}=…, found {part:?}")))
        };
        let name = field("type")?.to_string();
        check_type_name(&name)?;
        let hash = field("hash")?;
        let layout_hash = u64::from_str_radix(hash, 16)
            .ok()
            .filter(|_| hash.len() == 16)
            .ok_or_else(|| malformed(format!("hash {hash:?} is not 16 hex digits")))?;
        let head = field("head")?.to_string();
        let elem = field("elem")?.to_string();
        let mut parts = parts.peekable();
        let foreign = match parts.peek().and_then(|p| p.strip_prefix("foreign=")) {
            None => None,
            Some(kind) => {
                let kind = match kind {
                    "ros2cdr" => ForeignKind::Ros2Cdr,
                    k => return Err(malformed(format!("unknown foreign type system {k:?}"))),
                };
                parts.next();
                let mut next = |key: &str| -> Result<&str, SchemaError> {
                    let part = parts.next().unwrap_or_default();
                    part.strip_prefix(key)
                        .and_then(|p| p.strip_prefix('='))
                        .ok_or_else(|| malformed(format!("expected {key}=…, found {part:?}")))
                };
                let type_hash = next("id")?;
                check_type_name(type_hash)?;
                let definition = percent_encoding::percent_decode_str(next("def")?)
                    .decode_utf8()
                    .map_err(|_| malformed("the foreign definition is not UTF-8".into()))?
                    .into_owned();
                Some(Foreign {
                    kind,
                    type_hash: type_hash.to_string(),
                    definition,
                })
            }
        };
        let mut defs: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for line in parts {
            let words: Vec<&str> = line.split(' ').collect();
            if words.first() != Some(&"struct") || words.len() < 4 {
                return Err(malformed(format!(
                    "expected a struct definition, found {line:?}"
                )));
            }
            if defs.len() == MAX_STRUCTS {
                return Err(malformed(format!("more than {MAX_STRUCTS} structs")));
            }
            if defs
                .insert(words[1].to_string(), words[2..].to_vec())
                .is_some()
            {
                return Err(malformed(format!("struct {} defined twice", words[1])));
            }
        }
        let layout_err = |reason: String| SchemaError::Layout {
            name: name.clone(),
            reason,
        };
        let resolver = Resolver { defs: &defs };
        let head = resolver.shape(&head, 0).map_err(layout_err)?;
        let elem = match elem.as_str() {
            "-" => None,
            e => Some(resolver.shape(e, 0).map_err(layout_err)?),
        };
        if !matches!(head, Shape::Struct(_) | Shape::Opaque { .. }) {
            return Err(layout_err("the head is not a struct".into()));
        }
        if head.align() > MAX_ALIGN || elem.as_ref().is_some_and(|e| e.align() > MAX_ALIGN) {
            return Err(layout_err(format!("alignment above {MAX_ALIGN} bytes")));
        }
        if elem.as_ref().is_some_and(|e| e.size() == 0) {
            return Err(layout_err("a slice element of size 0".into()));
        }
        let schema = Schema {
            name,
            layout_hash,
            head,
            elem,
            foreign,
        };
        let computed = schema.computed_hash();
        if computed != layout_hash {
            return Err(SchemaError::HashMismatch {
                name: schema.name,
                claimed: layout_hash,
                computed,
            });
        }
        Ok(schema)
    }
}

/// Collects the structs of a schema while encoding, naming each once.
#[derive(Default)]
struct StructTable {
    /// Struct definitions seen, with the key they were given.
    seen: Vec<(StructShape, String)>,
    lines: Vec<String>,
}

impl StructTable {
    fn shape(&mut self, shape: &Shape) -> String {
        match shape {
            Shape::Prim(p) => p.name().to_string(),
            Shape::Array { elem, len } => format!("[{};{len}]", self.shape(elem)),
            Shape::Opaque { size, align, hash } => format!("opaque({size},{align},{hash:016x})"),
            Shape::Struct(s) => self.key(s),
        }
    }

    fn key(&mut self, s: &StructShape) -> String {
        if let Some((_, key)) = self.seen.iter().find(|(d, _)| d == s) {
            return key.clone();
        }
        let same_name = self.seen.iter().filter(|(d, _)| d.name == s.name).count();
        let key = match same_name {
            0 => s.name.clone(),
            n => format!("{}~{}", s.name, n + 1),
        };
        self.seen.push((s.clone(), key.clone()));
        let mut line = format!("struct {key} {} {}", s.size, s.align);
        for f in &s.fields {
            let shape = self.shape(&f.shape);
            let _ = write!(line, " {}:{}:{shape}", f.name, f.offset);
        }
        self.lines.push(line);
        key
    }
}

/// Turns shape texts into shapes, checking every layout rule on the way.
struct Resolver<'a> {
    defs: &'a BTreeMap<String, Vec<&'a str>>,
}

impl Resolver<'_> {
    fn shape(&self, text: &str, depth: usize) -> Result<Shape, String> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "nested deeper than {MAX_DEPTH} levels (or recursive)"
            ));
        }
        if let Some(p) = Prim::parse(text) {
            return Ok(Shape::Prim(p));
        }
        if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            let (elem, len) = inner
                .rsplit_once(';')
                .ok_or_else(|| format!("array {text:?} has no length"))?;
            let len: usize = len
                .parse()
                .map_err(|_| format!("array length {len:?} is not a number"))?;
            let elem = self.shape(elem, depth + 1)?;
            if elem.size().checked_mul(len).is_none_or(|s| s > MAX_SIZE) {
                return Err(format!("array {text:?} is larger than {MAX_SIZE} bytes"));
            }
            return Ok(Shape::Array {
                elem: Box::new(elem),
                len,
            });
        }
        if let Some(args) = text
            .strip_prefix("opaque(")
            .and_then(|t| t.strip_suffix(')'))
        {
            let a: Vec<&str> = args.split(',').collect();
            let [size, align, hash] = a[..] else {
                return Err(format!("{text:?}: expected opaque(size,align,hash)"));
            };
            let size: usize = size.parse().map_err(|_| format!("{text:?}: bad size"))?;
            let align: usize = align
                .parse()
                .map_err(|_| format!("{text:?}: bad alignment"))?;
            let hash = u64::from_str_radix(hash, 16).map_err(|_| format!("{text:?}: bad hash"))?;
            if size > MAX_SIZE || !align.is_power_of_two() || align > MAX_ALIGN {
                return Err(format!("{text:?}: impossible size or alignment"));
            }
            return Ok(Shape::Opaque { size, align, hash });
        }
        let words = self
            .defs
            .get(text)
            .ok_or_else(|| format!("unknown type {text:?}"))?;
        self.struct_shape(text, words, depth).map(Shape::Struct)
    }

    fn struct_shape(&self, key: &str, words: &[&str], depth: usize) -> Result<StructShape, String> {
        let name = key.split('~').next().unwrap_or(key).to_string();
        check_ident(&name)?;
        let num = |w: &str, what: &str| -> Result<usize, String> {
            w.parse()
                .map_err(|_| format!("struct {key}: {what} {w:?} is not a number"))
        };
        let size = num(words[0], "size")?;
        let align = num(words[1], "alignment")?;
        if size > MAX_SIZE || !align.is_power_of_two() || align > MAX_ALIGN {
            return Err(format!(
                "struct {key}: impossible size {size} or alignment {align}"
            ));
        }
        let fields = &words[2..];
        if fields.len() > MAX_FIELDS {
            return Err(format!("struct {key}: more than {MAX_FIELDS} fields"));
        }
        let mut end = 0usize;
        let mut max_align = 1;
        let mut out = Vec::with_capacity(fields.len());
        for f in fields {
            let mut it = f.splitn(3, ':');
            let (Some(fname), Some(offset), Some(shape)) = (it.next(), it.next(), it.next()) else {
                return Err(format!(
                    "struct {key}: field {f:?} is not name:offset:shape"
                ));
            };
            check_ident(fname)?;
            let offset = num(offset, "offset")?;
            let shape = self.shape(shape, depth + 1)?;
            if offset != end || offset % shape.align() != 0 {
                return Err(format!(
                    "struct {key}: field {fname} at {offset} (expected {end}: no padding, \
                     aligned to {})",
                    shape.align()
                ));
            }
            end = offset
                .checked_add(shape.size())
                .filter(|e| *e <= size)
                .ok_or_else(|| format!("struct {key}: field {fname} ends past its size {size}"))?;
            max_align = max_align.max(shape.align());
            out.push(Field {
                name: fname.to_string(),
                offset,
                shape,
            });
        }
        if end != size || align < max_align || size % align != 0 {
            return Err(format!(
                "struct {key}: fields cover {end} of {size} bytes, alignment {align} (fields \
                 need {max_align})"
            ));
        }
        Ok(StructShape {
            name,
            size,
            align,
            fields: out,
        })
    }
}

/// A Rust identifier (struct or field name; digits alone for tuple fields).
fn check_ident(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= MAX_NAME
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    ok.then_some(())
        .ok_or_else(|| format!("{s:?} is not a valid name"))
}

/// A message type name: printable, none of the encoding's separators.
fn check_type_name(s: &str) -> Result<(), SchemaError> {
    let ok = !s.is_empty()
        && s.len() <= 4 * MAX_NAME
        && s.bytes()
            .all(|b| b.is_ascii_graphic() && b != b'|' && b != b'=');
    ok.then_some(())
        .ok_or_else(|| SchemaError::Malformed(format!("type name {s:?} is not valid")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, nerve_derive::Pod)]
    #[repr(C)]
    struct Inner {
        a: u32,
        b: [u16; 2],
    }

    #[derive(Clone, Copy, nerve_derive::Message)]
    #[repr(C)]
    #[message(name = "test/Outer", elem = Inner)]
    struct Outer {
        id: u64,
        inner: Inner,
        more: [Inner; 2],
        t: f64,
    }

    #[test]
    fn derived_schemas_round_trip_and_match_their_hash() {
        let s = Schema::of::<Outer>();
        assert_eq!(
            s.computed_hash(),
            s.layout_hash,
            "the derive and the schema agree"
        );
        assert_eq!(s.type_info(), TypeInfo::of::<Outer>());
        let text = s.encode();
        assert!(
            text.starts_with("nerve-schema/1|type=test/Outer|"),
            "{text}"
        );
        assert_eq!(
            text.matches("struct Inner ").count(),
            1,
            "nested types once: {text}"
        );
        assert_eq!(Schema::decode(&text).unwrap(), s);
    }

    #[test]
    fn a_foreign_type_round_trips_and_its_hash_is_its_identity() {
        let def = "# a comment | with separators %\nstring data\n".to_string();
        let foreign = |hash: &str| Foreign {
            kind: ForeignKind::Ros2Cdr,
            type_hash: hash.into(),
            definition: def.clone(),
        };
        let a = Schema::foreign::<Outer>("std_msgs/msg/String", foreign("RIHS01_aa"));
        let text = a.encode();
        assert!(text.is_ascii() && !text.contains('\n'), "{text}");
        assert_eq!(Schema::decode(&text).unwrap(), a);
        let b = Schema::foreign::<Outer>("std_msgs/msg/String", foreign("RIHS01_bb"));
        assert_ne!(
            a.layout_hash, b.layout_hash,
            "another type hash, another identity"
        );
        assert_ne!(a.layout_hash, Schema::of::<Outer>().layout_hash);
        // a schema that swaps the foreign identity but keeps the hash is refused
        let lie = text.replace("id=RIHS01_aa", "id=RIHS01_bb");
        assert!(matches!(
            Schema::decode(&lie),
            Err(SchemaError::HashMismatch { .. })
        ));
        let unknown = text.replace("foreign=ros2cdr", "foreign=corba");
        assert!(matches!(
            Schema::decode(&unknown),
            Err(SchemaError::Malformed(_))
        ));
    }

    #[test]
    fn lying_or_broken_schemas_are_refused_by_name() {
        let text = Schema::of::<Outer>().encode();
        // another hash than the layout's
        let hash = format!("hash={:016x}", Schema::of::<Outer>().layout_hash);
        let lie = text.replace(&hash, "hash=0000000000000007");
        assert!(matches!(
            Schema::decode(&lie),
            Err(SchemaError::HashMismatch { .. })
        ));
        // a field moved: padding the derive never produces
        let moved = text.replace("inner:8:", "inner:12:");
        assert!(matches!(
            Schema::decode(&moved),
            Err(SchemaError::Layout { .. })
        ));
        // a renamed field changes the identity
        let renamed = text.replace(" t:", " u:");
        assert!(matches!(
            Schema::decode(&renamed),
            Err(SchemaError::HashMismatch { .. })
        ));
        let recursive =
            "nerve-schema/1|type=x/R|hash=0000000000000000|head=R|elem=-|struct R 8 8 r:0:R";
        assert!(matches!(
            Schema::decode(recursive),
            Err(SchemaError::Layout { .. })
        ));
        assert!(matches!(
            Schema::decode(&"x".repeat(MAX_SCHEMA_BYTES + 1)),
            Err(SchemaError::TooLarge { .. })
        ));
        assert!(matches!(
            Schema::decode("nerve-schema/9;type=x"),
            Err(SchemaError::Version { .. })
        ));
        for garbage in [
            "",
            "|||",
            "nerve-schema/1",
            "nerve-schema/1|type=a|hash=zz",
            &text[..40],
        ] {
            assert!(Schema::decode(garbage).is_err(), "{garbage:?}");
        }
        let huge = "nerve-schema/1|type=x/H|hash=0000000000000000|head=H|elem=-|struct H 8 8 a:0:[u64;99999999999]";
        assert!(Schema::decode(huge).is_err());
    }

    #[test]
    fn two_structs_of_one_name_stay_apart() {
        let a = StructShape {
            name: "Header".into(),
            size: 8,
            align: 8,
            fields: vec![Field {
                name: "x".into(),
                offset: 0,
                shape: Shape::Prim(Prim::F64),
            }],
        };
        let mut b = a.clone();
        b.fields[0].shape = Shape::Prim(Prim::U64);
        let head = StructShape {
            name: "Both".into(),
            size: 16,
            align: 8,
            fields: vec![
                Field {
                    name: "a".into(),
                    offset: 0,
                    shape: Shape::Struct(a),
                },
                Field {
                    name: "b".into(),
                    offset: 8,
                    shape: Shape::Struct(b),
                },
            ],
        };
        let mut s = Schema {
            name: "t/Both".into(),
            layout_hash: 0,
            head: Shape::Struct(head),
            elem: None,
            foreign: None,
        };
        s.layout_hash = s.computed_hash();
        let text = s.encode();
        assert!(text.contains("struct Header~2 "), "{text}");
        assert_eq!(Schema::decode(&text).unwrap(), s);
    }
}
