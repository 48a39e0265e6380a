//! CDR (XCDR1) decoding, validation and encoding of dynamic values, byte-compatible with
//! Fast DDS / `rmw_fastrtps` as used by ROS 2.
//!
//! Layout rules: a 4-byte encapsulation header (`00 01 00 00` little endian, `00 00 00 00` big
//! endian; options ignored on read); primitives aligned to their size relative to the first
//! byte after the header; strings are a `u32` length including the NUL, the bytes and a NUL;
//! wstrings are a `u32` count of UTF-16 code units followed by each unit as a 4-byte value
//! (what Fast DDS writes for ROS `wstring`); sequences (bounded or not) are a `u32` count then
//! the elements (the elements are aligned only when there is at least one); fixed arrays have
//! no count. Trailing bytes after the message are ignored (DDS pads payloads).

use crate::definition::{
    BaseType, Container, FieldType, MessageDefinition, PrimitiveType, EMPTY_PLACEHOLDER_FIELD,
};
use crate::registry::{Registry, RegistryError, MAX_NESTING_DEPTH};
use crate::value::{Array, Struct, Value};

/// Byte order of CDR data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endianness {
    /// Little endian (`CDR_LE`, header `00 01`).
    Little,
    /// Big endian (`CDR_BE`, header `00 00`).
    Big,
}

/// The encapsulation header written by [`encode`]: plain CDR, little endian.
pub const CDR_LE_HEADER: [u8; 4] = [0x00, 0x01, 0x00, 0x00];
/// The encapsulation header of plain CDR, big endian.
pub const CDR_BE_HEADER: [u8; 4] = [0x00, 0x00, 0x00, 0x00];

fn join_path(seg: &str, path: &str) -> String {
    if path.is_empty() {
        seg.to_string()
    } else if path.starts_with('[') {
        format!("{seg}{path}")
    } else {
        format!("{seg}.{path}")
    }
}

fn show_path(path: &str) -> String {
    if path.is_empty() {
        "message".to_string()
    } else {
        format!("field `{path}`")
    }
}

/// Why CDR bytes could not be decoded or validated. Paths are dotted field paths with
/// indices (`points[3].x`); offsets are byte offsets into the whole buffer, header included.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The type is unknown or not a message.
    #[error(transparent)]
    Registry(Box<RegistryError>),
    /// Fewer than 4 bytes: no encapsulation header.
    #[error("CDR data too short for the 4-byte encapsulation header ({len} bytes)")]
    MissingHeader {
        /// Buffer length.
        len: usize,
    },
    /// The encapsulation is not plain CDR (e.g. PL_CDR or XCDR2).
    #[error("unsupported CDR encapsulation {:02x} {:02x} (expected 00 01 for CDR_LE or 00 00 for CDR_BE)", header[0], header[1])]
    UnsupportedEncapsulation {
        /// The first two header bytes.
        header: [u8; 2],
    },
    /// The data ends before the message does.
    #[error(
        "truncated CDR data: {} needs {needed} bytes at offset {offset}, only {available} left",
        show_path(path)
    )]
    Truncated {
        /// Field path.
        path: String,
        /// Byte offset.
        offset: usize,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// A sequence or string length that cannot fit in the remaining bytes.
    #[error(
        "{} has length {length} at offset {offset}, but only {remaining} bytes are left",
        show_path(path)
    )]
    LengthPastEnd {
        /// Field path.
        path: String,
        /// Byte offset of the length.
        offset: usize,
        /// The length read.
        length: u64,
        /// Bytes left after the length.
        remaining: usize,
    },
    /// A bounded sequence or string longer than its bound.
    #[error(
        "{} has length {length} at offset {offset}, exceeding its bound of {bound}",
        show_path(path)
    )]
    BoundExceeded {
        /// Field path.
        path: String,
        /// Byte offset of the length.
        offset: usize,
        /// The length read.
        length: u64,
        /// The declared bound.
        bound: u32,
    },
    /// A bool byte other than 0 or 1.
    #[error(
        "{} has invalid bool byte {value:#04x} at offset {offset}",
        show_path(path)
    )]
    InvalidBool {
        /// Field path.
        path: String,
        /// Byte offset.
        offset: usize,
        /// The byte.
        value: u8,
    },
    /// A string that is not valid UTF-8.
    #[error("{} at offset {offset} is not valid UTF-8", show_path(path))]
    InvalidUtf8 {
        /// Field path.
        path: String,
        /// Byte offset of the string's length.
        offset: usize,
    },
    /// A wstring with an invalid code unit or unpaired surrogate.
    #[error(
        "{} at offset {offset} has invalid wide character {value:#x}",
        show_path(path)
    )]
    InvalidWChar {
        /// Field path.
        path: String,
        /// Byte offset of the character.
        offset: usize,
        /// The 32-bit value read.
        value: u32,
    },
    /// Nesting deeper than [`MAX_NESTING_DEPTH`].
    #[error("{} nests more than {limit} levels deep", show_path(path))]
    TooDeep {
        /// Field path.
        path: String,
        /// The limit.
        limit: usize,
    },
}

impl From<RegistryError> for DecodeError {
    fn from(e: RegistryError) -> Self {
        DecodeError::Registry(Box::new(e))
    }
}

impl DecodeError {
    fn in_field(mut self, seg: &str) -> Self {
        if let Some(p) = self.path_mut() {
            *p = join_path(seg, p);
        }
        self
    }

    fn path_mut(&mut self) -> Option<&mut String> {
        match self {
            DecodeError::Truncated { path, .. }
            | DecodeError::LengthPastEnd { path, .. }
            | DecodeError::BoundExceeded { path, .. }
            | DecodeError::InvalidBool { path, .. }
            | DecodeError::InvalidUtf8 { path, .. }
            | DecodeError::InvalidWChar { path, .. }
            | DecodeError::TooDeep { path, .. } => Some(path),
            _ => None,
        }
    }

    /// The field path the error refers to (empty for the message itself or header errors).
    pub fn path(&self) -> &str {
        match self {
            DecodeError::Truncated { path, .. }
            | DecodeError::LengthPastEnd { path, .. }
            | DecodeError::BoundExceeded { path, .. }
            | DecodeError::InvalidBool { path, .. }
            | DecodeError::InvalidUtf8 { path, .. }
            | DecodeError::InvalidWChar { path, .. }
            | DecodeError::TooDeep { path, .. } => path,
            _ => "",
        }
    }
}

/// Reads the encapsulation header and returns the byte order of the payload.
pub fn encapsulation(bytes: &[u8]) -> Result<Endianness, DecodeError> {
    if bytes.len() < 4 {
        return Err(DecodeError::MissingHeader { len: bytes.len() });
    }
    match [bytes[0], bytes[1]] {
        [a, b] if [a, b] == CDR_LE_HEADER[..2] => Ok(Endianness::Little),
        [a, b] if [a, b] == CDR_BE_HEADER[..2] => Ok(Endianness::Big),
        header => Err(DecodeError::UnsupportedEncapsulation { header }),
    }
}

/// Reads CDR field by field, refusing what runs past the end or breaks the format: the
/// one CDR reader of Nerve (the dynamic [`decode`] and [`validate`] walk with it; the
/// ROS 2 forms of Nerve's messages, bag encodings and the bridge's hand-written
/// services read through it). Alignment is relative to the body, after the 4-byte
/// encapsulation header; a big-endian payload is read in its byte order by every
/// scalar method, while [`CdrReader::take`] gives raw bytes as they are.
pub struct CdrReader<'a> {
    data: &'a [u8],
    pos: usize,
    big: bool,
}

const HEADER: usize = 4;

impl<'a> CdrReader<'a> {
    /// Checks the encapsulation header (plain CDR, either byte order).
    pub fn new(bytes: &'a [u8]) -> Result<CdrReader<'a>, DecodeError> {
        reader(bytes)
    }

    /// The byte order of the payload.
    pub fn endianness(&self) -> Endianness {
        if self.big {
            Endianness::Big
        } else {
            Endianness::Little
        }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The offset of the next byte in the whole buffer (header included).
    pub fn offset(&self) -> usize {
        self.pos + HEADER
    }

    fn truncated(&self, needed: usize) -> DecodeError {
        DecodeError::Truncated {
            path: String::new(),
            offset: self.offset(),
            needed,
            available: self.remaining(),
        }
    }

    /// Skips padding to a multiple of `n` from the body start.
    pub fn align(&mut self, n: usize) -> Result<(), DecodeError> {
        let pad = (n - self.pos % n) % n;
        if pad > self.remaining() {
            return Err(self.truncated(pad));
        }
        self.pos += pad;
        Ok(())
    }

    /// The next `n` bytes, unaligned and as they are.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.truncated(n));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        self.align(N)?;
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        if self.big {
            a.reverse();
        }
        Ok(a) // now little endian
    }

    /// A `uint8` (or `byte`, `char`; a `bool` unchecked).
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    /// A `uint32`.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array::<4>()?))
    }

    /// An `int32`.
    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_le_bytes(self.array::<4>()?))
    }

    /// A `uint64`.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array::<8>()?))
    }

    /// An `int64`.
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(self.array::<8>()?))
    }

    /// A `float32`.
    pub fn f32(&mut self) -> Result<f32, DecodeError> {
        Ok(f32::from_le_bytes(self.array::<4>()?))
    }

    /// A `float64`.
    pub fn f64(&mut self) -> Result<f64, DecodeError> {
        Ok(f64::from_le_bytes(self.array::<8>()?))
    }

    /// A `string`'s bytes, without its NUL (unchecked UTF-8: see [`validate`]).
    pub fn string(&mut self) -> Result<&'a [u8], DecodeError> {
        self.string_bytes(None).map(|(_, b)| b)
    }

    /// A sequence length, checked against the bytes left for elements of at least
    /// `min_elem_size` bytes each.
    pub fn len(&mut self, min_elem_size: usize) -> Result<usize, DecodeError> {
        self.seq_len(None, min_elem_size)
    }

    /// Reads a sequence length and checks it against the bound and the bytes left
    /// (`min_elem` = smallest possible encoded element).
    fn seq_len(&mut self, bound: Option<u32>, min_elem: usize) -> Result<usize, DecodeError> {
        let at = self.offset();
        let len = self.u32()?;
        if let Some(b) = bound {
            if len > b {
                return Err(DecodeError::BoundExceeded {
                    path: String::new(),
                    offset: at,
                    length: len.into(),
                    bound: b,
                });
            }
        }
        let len_us = len as usize;
        if len_us.saturating_mul(min_elem) > self.remaining() {
            return Err(DecodeError::LengthPastEnd {
                path: String::new(),
                offset: at,
                length: len.into(),
                remaining: self.remaining(),
            });
        }
        Ok(len_us)
    }

    fn bool(&mut self) -> Result<bool, DecodeError> {
        let at = self.offset();
        match self.take(1)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(DecodeError::InvalidBool {
                path: String::new(),
                offset: at,
                value,
            }),
        }
    }

    /// Returns the string bytes without the terminating NUL.
    fn string_bytes(&mut self, bound: Option<u32>) -> Result<(usize, &'a [u8]), DecodeError> {
        self.align(4)?;
        let at = self.offset();
        let len = self.u32()?;
        if len as usize > self.remaining() {
            return Err(DecodeError::LengthPastEnd {
                path: String::new(),
                offset: at,
                length: len.into(),
                remaining: self.remaining(),
            });
        }
        let mut bytes = self.take(len as usize)?;
        if let [rest @ .., 0] = bytes {
            bytes = rest;
        }
        if let Some(b) = bound {
            if bytes.len() > b as usize {
                return Err(DecodeError::BoundExceeded {
                    path: String::new(),
                    offset: at,
                    length: bytes.len() as u64,
                    bound: b,
                });
            }
        }
        Ok((at, bytes))
    }

    fn owned_string(&mut self, bound: Option<u32>) -> Result<String, DecodeError> {
        let (at, bytes) = self.string_bytes(bound)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_string()),
            Err(_) => Err(DecodeError::InvalidUtf8 {
                path: String::new(),
                offset: at,
            }),
        }
    }

    fn check_string(&mut self, bound: Option<u32>) -> Result<(), DecodeError> {
        let (at, bytes) = self.string_bytes(bound)?;
        std::str::from_utf8(bytes)
            .map(|_| ())
            .map_err(|_| DecodeError::InvalidUtf8 {
                path: String::new(),
                offset: at,
            })
    }

    /// Reads a wstring, feeding each char to `sink`.
    fn wstring_with(
        &mut self,
        bound: Option<u32>,
        mut sink: impl FnMut(char),
    ) -> Result<(), DecodeError> {
        let at = self.offset();
        let len = self.seq_len(None, 4)?;
        if let Some(b) = bound {
            if len > b as usize {
                return Err(DecodeError::BoundExceeded {
                    path: String::new(),
                    offset: at,
                    length: len as u64,
                    bound: b,
                });
            }
        }
        let mut pending_high: Option<(u32, usize)> = None;
        for _ in 0..len {
            let off = self.offset();
            let unit = self.u32()?;
            let bad = |value: u32, offset: usize| DecodeError::InvalidWChar {
                path: String::new(),
                offset,
                value,
            };
            if let Some((high, high_off)) = pending_high.take() {
                if (0xDC00..0xE000).contains(&unit) {
                    let c = 0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00);
                    sink(char::from_u32(c).ok_or_else(|| bad(c, high_off))?);
                    continue;
                }
                return Err(bad(high, high_off));
            }
            if (0xD800..0xDC00).contains(&unit) {
                pending_high = Some((unit, off));
            } else {
                sink(char::from_u32(unit).ok_or_else(|| bad(unit, off))?);
            }
        }
        if let Some((high, off)) = pending_high {
            return Err(DecodeError::InvalidWChar {
                path: String::new(),
                offset: off,
                value: high,
            });
        }
        Ok(())
    }
}

fn index_err(e: DecodeError, i: usize) -> DecodeError {
    e.in_field(&format!("[{i}]"))
}

fn min_size(base: &BaseType) -> usize {
    match base {
        BaseType::Primitive(p) => p.size(),
        BaseType::String { .. } | BaseType::WString { .. } => 4,
        BaseType::Nested(_) => 1,
    }
}

macro_rules! read_numeric_vec {
    ($r:expr, $n:expr, $t:ty, $variant:ident) => {{
        const SIZE: usize = std::mem::size_of::<$t>();
        if $n > 0 {
            $r.align(SIZE)?;
        }
        let bytes = $r.take($n.saturating_mul(SIZE))?;
        let v: Vec<$t> = if $r.big == cfg!(target_endian = "big") {
            // Same byte order as the host: one memcpy.
            let mut v: Vec<$t> = vec![<$t as bytemuck::Zeroable>::zeroed(); $n];
            bytemuck::cast_slice_mut::<$t, u8>(&mut v).copy_from_slice(bytes);
            v
        } else {
            bytes
                .chunks_exact(SIZE)
                .map(|c| {
                    let mut a = [0u8; SIZE];
                    a.copy_from_slice(c);
                    if $r.big {
                        <$t>::from_be_bytes(a)
                    } else {
                        <$t>::from_le_bytes(a)
                    }
                })
                .collect()
        };
        Array::$variant(v)
    }};
}

macro_rules! read_scalar {
    ($r:expr, $t:ty, $variant:ident) => {{
        Value::$variant(<$t>::from_le_bytes(
            $r.array::<{ std::mem::size_of::<$t>() }>()?,
        ))
    }};
}

struct Decoder<'r> {
    reg: &'r Registry,
}

impl Decoder<'_> {
    fn structure(
        &self,
        def: &MessageDefinition,
        r: &mut CdrReader<'_>,
        depth: usize,
    ) -> Result<Struct, DecodeError> {
        if depth > MAX_NESTING_DEPTH {
            return Err(DecodeError::TooDeep {
                path: String::new(),
                limit: MAX_NESTING_DEPTH,
            });
        }
        if def.is_empty_placeholder() {
            // rosidl's placeholder byte of an empty message is not exposed in values.
            r.take(1)?;
            return Ok(Struct::new());
        }
        let mut fields = Vec::with_capacity(def.fields.len());
        for f in &def.fields {
            let v = self
                .field(&def.name, &f.ty, r, depth)
                .map_err(|e| e.in_field(&f.name))?;
            fields.push((f.name.clone(), v));
        }
        Ok(Struct { fields })
    }

    fn field(
        &self,
        owner: &crate::name::TypeName,
        ty: &FieldType,
        r: &mut CdrReader<'_>,
        depth: usize,
    ) -> Result<Value, DecodeError> {
        let n = match ty.container {
            Container::Single => return self.single(owner, &ty.base, r, depth),
            Container::Array(n) => {
                let n = n as usize;
                if n.saturating_mul(min_size(&ty.base)) > r.remaining() {
                    return Err(r.truncated(n.saturating_mul(min_size(&ty.base))));
                }
                n
            }
            Container::BoundedSequence(b) => r.seq_len(Some(b), min_size(&ty.base))?,
            Container::Sequence => r.seq_len(None, min_size(&ty.base))?,
        };
        Ok(Value::Array(self.elements(owner, &ty.base, n, r, depth)?))
    }

    fn single(
        &self,
        owner: &crate::name::TypeName,
        base: &BaseType,
        r: &mut CdrReader<'_>,
        depth: usize,
    ) -> Result<Value, DecodeError> {
        Ok(match base {
            BaseType::Primitive(p) => match p {
                PrimitiveType::Bool => Value::Bool(r.bool()?),
                PrimitiveType::Byte | PrimitiveType::Char | PrimitiveType::UInt8 => {
                    Value::UInt8(r.take(1)?[0])
                }
                PrimitiveType::Int8 => Value::Int8(r.take(1)?[0] as i8),
                PrimitiveType::Int16 => read_scalar!(r, i16, Int16),
                PrimitiveType::UInt16 => read_scalar!(r, u16, UInt16),
                PrimitiveType::Int32 => read_scalar!(r, i32, Int32),
                PrimitiveType::UInt32 => read_scalar!(r, u32, UInt32),
                PrimitiveType::Int64 => read_scalar!(r, i64, Int64),
                PrimitiveType::UInt64 => read_scalar!(r, u64, UInt64),
                PrimitiveType::Float32 => read_scalar!(r, f32, Float32),
                PrimitiveType::Float64 => read_scalar!(r, f64, Float64),
            },
            BaseType::String { bound } => Value::String(r.owned_string(*bound)?),
            BaseType::WString { bound } => {
                let mut s = String::new();
                r.wstring_with(*bound, |c| s.push(c))?;
                Value::WString(s)
            }
            BaseType::Nested(t) => {
                let def = self.reg.resolve_name(t, Some(owner))?;
                Value::Struct(self.structure(def, r, depth + 1)?)
            }
        })
    }

    fn elements(
        &self,
        owner: &crate::name::TypeName,
        base: &BaseType,
        n: usize,
        r: &mut CdrReader<'_>,
        depth: usize,
    ) -> Result<Array, DecodeError> {
        Ok(match base {
            BaseType::Primitive(p) => match p {
                PrimitiveType::Bool => {
                    let mut v = Vec::with_capacity(n);
                    for i in 0..n {
                        v.push(r.bool().map_err(|e| index_err(e, i))?);
                    }
                    Array::Bool(v)
                }
                PrimitiveType::Byte | PrimitiveType::Char | PrimitiveType::UInt8 => {
                    Array::UInt8(r.take(n)?.to_vec())
                }
                PrimitiveType::Int8 => read_numeric_vec!(r, n, i8, Int8),
                PrimitiveType::Int16 => read_numeric_vec!(r, n, i16, Int16),
                PrimitiveType::UInt16 => read_numeric_vec!(r, n, u16, UInt16),
                PrimitiveType::Int32 => read_numeric_vec!(r, n, i32, Int32),
                PrimitiveType::UInt32 => read_numeric_vec!(r, n, u32, UInt32),
                PrimitiveType::Int64 => read_numeric_vec!(r, n, i64, Int64),
                PrimitiveType::UInt64 => read_numeric_vec!(r, n, u64, UInt64),
                PrimitiveType::Float32 => read_numeric_vec!(r, n, f32, Float32),
                PrimitiveType::Float64 => read_numeric_vec!(r, n, f64, Float64),
            },
            BaseType::String { bound } => {
                let mut v = Vec::with_capacity(n.min(4096));
                for i in 0..n {
                    v.push(r.owned_string(*bound).map_err(|e| index_err(e, i))?);
                }
                Array::String(v)
            }
            BaseType::WString { bound } => {
                let mut v = Vec::with_capacity(n.min(4096));
                for i in 0..n {
                    let mut s = String::new();
                    r.wstring_with(*bound, |c| s.push(c))
                        .map_err(|e| index_err(e, i))?;
                    v.push(s);
                }
                Array::WString(v)
            }
            BaseType::Nested(t) => {
                let def = self.reg.resolve_name(t, Some(owner))?;
                let mut v = Vec::with_capacity(n.min(4096));
                for i in 0..n {
                    v.push(
                        self.structure(def, r, depth + 1)
                            .map_err(|e| index_err(e, i))?,
                    );
                }
                Array::Struct(v)
            }
        })
    }

    // ---- validation: same walk, nothing allocated ----

    fn check_structure(
        &self,
        def: &MessageDefinition,
        r: &mut CdrReader<'_>,
        depth: usize,
    ) -> Result<(), DecodeError> {
        if depth > MAX_NESTING_DEPTH {
            return Err(DecodeError::TooDeep {
                path: String::new(),
                limit: MAX_NESTING_DEPTH,
            });
        }
        for f in &def.fields {
            self.check_field(&def.name, &f.ty, r, depth)
                .map_err(|e| e.in_field(&f.name))?;
        }
        Ok(())
    }

    fn check_field(
        &self,
        owner: &crate::name::TypeName,
        ty: &FieldType,
        r: &mut CdrReader<'_>,
        depth: usize,
    ) -> Result<(), DecodeError> {
        let n = match ty.container {
            Container::Single => return self.check_one(owner, &ty.base, r, depth),
            Container::Array(n) => n as usize,
            Container::BoundedSequence(b) => r.seq_len(Some(b), min_size(&ty.base))?,
            Container::Sequence => r.seq_len(None, min_size(&ty.base))?,
        };
        self.check_elements(owner, &ty.base, n, r, depth)
    }

    fn check_one(
        &self,
        owner: &crate::name::TypeName,
        base: &BaseType,
        r: &mut CdrReader<'_>,
        depth: usize,
    ) -> Result<(), DecodeError> {
        match base {
            BaseType::Primitive(PrimitiveType::Bool) => {
                r.bool()?;
            }
            BaseType::Primitive(p) => {
                r.align(p.size())?;
                r.take(p.size())?;
            }
            BaseType::String { bound } => r.check_string(*bound)?,
            BaseType::WString { bound } => r.wstring_with(*bound, |_| {})?,
            BaseType::Nested(t) => {
                let def = self.reg.resolve_name(t, Some(owner))?;
                self.check_structure(def, r, depth + 1)?;
            }
        }
        Ok(())
    }

    fn check_elements(
        &self,
        owner: &crate::name::TypeName,
        base: &BaseType,
        n: usize,
        r: &mut CdrReader<'_>,
        depth: usize,
    ) -> Result<(), DecodeError> {
        if n == 0 {
            return Ok(());
        }
        match base {
            BaseType::Primitive(PrimitiveType::Bool) => {
                for i in 0..n {
                    r.bool().map_err(|e| index_err(e, i))?;
                }
            }
            BaseType::Primitive(p) => {
                let size = p.size();
                r.align(size)?;
                r.take(n.saturating_mul(size))?;
            }
            BaseType::String { bound } => {
                for i in 0..n {
                    r.check_string(*bound).map_err(|e| index_err(e, i))?;
                }
            }
            BaseType::WString { bound } => {
                for i in 0..n {
                    r.wstring_with(*bound, |_| {})
                        .map_err(|e| index_err(e, i))?;
                }
            }
            BaseType::Nested(t) => {
                let def = self.reg.resolve_name(t, Some(owner))?;
                for i in 0..n {
                    self.check_structure(def, r, depth + 1)
                        .map_err(|e| index_err(e, i))?;
                }
            }
        }
        Ok(())
    }
}

fn reader(bytes: &[u8]) -> Result<CdrReader<'_>, DecodeError> {
    let big = encapsulation(bytes)? == Endianness::Big;
    Ok(CdrReader {
        data: &bytes[HEADER..],
        pos: 0,
        big,
    })
}

/// Decodes a CDR-encoded message of type `type_name` (header included) into a
/// [`Value::Struct`]. Trailing bytes after the message are ignored.
pub fn decode(registry: &Registry, type_name: &str, bytes: &[u8]) -> Result<Value, DecodeError> {
    let def = registry.resolve_message(type_name)?;
    let mut r = reader(bytes)?;
    let s = Decoder { reg: registry }.structure(def, &mut r, 0)?;
    Ok(Value::Struct(s))
}

/// Like [`decode`], also returning the number of bytes the message occupied (header
/// included), so trailing padding can be told apart.
pub fn decode_with_len(
    registry: &Registry,
    type_name: &str,
    bytes: &[u8],
) -> Result<(Value, usize), DecodeError> {
    let def = registry.resolve_message(type_name)?;
    let mut r = reader(bytes)?;
    let s = Decoder { reg: registry }.structure(def, &mut r, 0)?;
    Ok((Value::Struct(s), r.offset()))
}

/// Checks that `bytes` is a well-formed CDR message of type `type_name` without building a
/// value (no allocation on success): header, lengths, bounds, bools, UTF-8 and wide
/// characters. `validate(..).is_ok()` exactly when [`decode`] would succeed.
pub fn validate(registry: &Registry, type_name: &str, bytes: &[u8]) -> Result<(), DecodeError> {
    let def = registry.resolve_message(type_name)?;
    let mut r = reader(bytes)?;
    Decoder { reg: registry }.check_structure(def, &mut r, 0)
}

// ------------------------------------------------------------------------------------------
// Encoding

/// Why a value could not be encoded as the requested type. Paths are dotted field paths.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// The type is unknown or not a message.
    #[error(transparent)]
    Registry(Box<RegistryError>),
    /// The value's kind does not match the field type.
    #[error("{}: expected {expected}, found {found}", show_path(path))]
    WrongKind {
        /// Field path.
        path: String,
        /// The field type (.msg spelling).
        expected: String,
        /// The value kind found.
        found: String,
    },
    /// A number that does not fit the field type.
    #[error("{}: value {value} is out of range for {ty}", show_path(path))]
    OutOfRange {
        /// Field path.
        path: String,
        /// The value.
        value: String,
        /// The field type.
        ty: String,
    },
    /// A fixed array with the wrong number of elements.
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
    /// A bounded sequence or string longer than its bound (or a length above `u32::MAX`).
    #[error("{}: length {length} exceeds the bound of {bound}", show_path(path))]
    BoundExceeded {
        /// Field path.
        path: String,
        /// Actual length (elements, bytes for strings, UTF-16 units for wstrings).
        length: usize,
        /// The bound.
        bound: u64,
    },
    /// A field of the type is missing from the struct value.
    #[error("{}: missing from the value", show_path(path))]
    MissingField {
        /// Field path.
        path: String,
    },
    /// The struct value has a field the type does not have.
    #[error("{}: not a field of `{type_name}`", show_path(path))]
    UnknownField {
        /// Field path.
        path: String,
        /// The struct's type.
        type_name: String,
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

impl From<RegistryError> for EncodeError {
    fn from(e: RegistryError) -> Self {
        EncodeError::Registry(Box::new(e))
    }
}

impl EncodeError {
    fn in_field(mut self, seg: &str) -> Self {
        match &mut self {
            EncodeError::WrongKind { path, .. }
            | EncodeError::OutOfRange { path, .. }
            | EncodeError::ArrayLength { path, .. }
            | EncodeError::BoundExceeded { path, .. }
            | EncodeError::MissingField { path }
            | EncodeError::UnknownField { path, .. }
            | EncodeError::TooDeep { path, .. } => *path = join_path(seg, path),
            EncodeError::Registry(_) => {}
        }
        self
    }
}

/// Appends CDR (little endian) field by field: the one CDR writer of Nerve (the dynamic
/// [`encode`] writes with it, and so do the ROS 2 forms of Nerve's messages, bag
/// encodings and the bridge's hand-written services). Alignment is relative to the body,
/// after the 4-byte encapsulation header.
pub struct CdrWriter<'a> {
    out: &'a mut Vec<u8>,
    base: usize,
    pad: u8,
}

impl<'a> CdrWriter<'a> {
    /// Clears `buf` and writes the little-endian encapsulation header.
    pub fn new(buf: &'a mut Vec<u8>) -> CdrWriter<'a> {
        buf.clear();
        buf.extend_from_slice(&CDR_LE_HEADER);
        CdrWriter {
            out: buf,
            base: HEADER,
            pad: 0,
        }
    }

    /// Raw bytes, unaligned.
    pub fn bytes(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }

    /// A `uint8` (or `bool`, `byte`, `char`).
    pub fn u8(&mut self, v: u8) {
        self.out.push(v);
    }

    /// A `uint32`.
    pub fn u32(&mut self, v: u32) {
        self.put(&v.to_le_bytes());
    }

    /// An `int32`.
    pub fn i32(&mut self, v: i32) {
        self.put(&v.to_le_bytes());
    }

    /// A `uint64`.
    pub fn u64(&mut self, v: u64) {
        self.put(&v.to_le_bytes());
    }

    /// An `int64`.
    pub fn i64(&mut self, v: i64) {
        self.put(&v.to_le_bytes());
    }

    /// A `float32`.
    pub fn f32(&mut self, v: f32) {
        self.put(&v.to_le_bytes());
    }

    /// A `float64`.
    pub fn f64(&mut self, v: f64) {
        self.put(&v.to_le_bytes());
    }

    /// Consecutive `float64`s (a fixed array or a run of fields): aligned once.
    pub fn f64s(&mut self, v: &[f64]) {
        self.align(8);
        self.out.reserve(v.len() * 8);
        for x in v {
            self.out.extend_from_slice(&x.to_le_bytes());
        }
    }

    /// A `string`: its length with the NUL, the bytes, the NUL.
    pub fn string(&mut self, s: &[u8]) -> Result<(), EncodeError> {
        self.len_u32(s.len() + 1)?;
        self.bytes(s);
        self.u8(0);
        Ok(())
    }

    /// A sequence length (refused above CDR's 32 bits).
    pub fn len(&mut self, n: usize) -> Result<(), EncodeError> {
        self.len_u32(n)
    }

    /// Bytes written so far (header included).
    pub fn written(&self) -> usize {
        self.out.len()
    }

    /// Pads to a multiple of `n` from the body start.
    pub fn align(&mut self, n: usize) {
        let rel = self.out.len() - self.base;
        let pad = (n - rel % n) % n;
        for _ in 0..pad {
            self.out.push(self.pad);
        }
    }

    fn put(&mut self, bytes: &[u8]) {
        self.align(bytes.len());
        self.out.extend_from_slice(bytes);
    }

    fn len_u32(&mut self, n: usize) -> Result<(), EncodeError> {
        let n = u32::try_from(n).map_err(|_| EncodeError::BoundExceeded {
            path: String::new(),
            length: n,
            bound: u32::MAX.into(),
        })?;
        self.put(&n.to_le_bytes());
        Ok(())
    }
}

fn wrong(ty: &dyn std::fmt::Display, found: &str) -> EncodeError {
    EncodeError::WrongKind {
        path: String::new(),
        expected: ty.to_string(),
        found: found.to_string(),
    }
}

fn int_of(v: &Value) -> Option<i128> {
    match *v {
        Value::Int8(x) => Some(x.into()),
        Value::UInt8(x) => Some(x.into()),
        Value::Int16(x) => Some(x.into()),
        Value::UInt16(x) => Some(x.into()),
        Value::Int32(x) => Some(x.into()),
        Value::UInt32(x) => Some(x.into()),
        Value::Int64(x) => Some(x.into()),
        Value::UInt64(x) => Some(x.into()),
        _ => None,
    }
}

macro_rules! write_numeric_vec {
    ($w:expr, $v:expr, $t:ty) => {{
        let size = std::mem::size_of::<$t>();
        if !$v.is_empty() {
            $w.align(size);
        }
        if cfg!(target_endian = "little") {
            $w.out.extend_from_slice(bytemuck::cast_slice::<$t, u8>($v));
        } else {
            for x in $v.iter() {
                $w.out.extend_from_slice(&x.to_le_bytes());
            }
        }
    }};
}

struct Encoder<'r> {
    reg: &'r Registry,
}

impl Encoder<'_> {
    fn structure(
        &self,
        def: &MessageDefinition,
        s: &Struct,
        w: &mut CdrWriter<'_>,
        depth: usize,
    ) -> Result<(), EncodeError> {
        if depth > MAX_NESTING_DEPTH {
            return Err(EncodeError::TooDeep {
                path: String::new(),
                limit: MAX_NESTING_DEPTH,
            });
        }
        if def.is_empty_placeholder() {
            // Empty message: accept `{}` (or the placeholder itself) and write one zero byte.
            if let Some((name, _)) = s
                .fields
                .iter()
                .find(|(n, _)| &**n != EMPTY_PLACEHOLDER_FIELD)
            {
                return Err(EncodeError::UnknownField {
                    path: name.to_string(),
                    type_name: def.name.to_string(),
                });
            }
            w.out.push(0);
            return Ok(());
        }
        if s.fields.len() != def.fields.len() {
            for (name, _) in &s.fields {
                if def.field(name).is_none() {
                    return Err(EncodeError::UnknownField {
                        path: name.to_string(),
                        type_name: def.name.to_string(),
                    });
                }
            }
        }
        for (i, f) in def.fields.iter().enumerate() {
            let v = match s.fields.get(i) {
                Some((n, v)) if *n == f.name => v,
                _ => s.get(&f.name).ok_or_else(|| EncodeError::MissingField {
                    path: f.name.to_string(),
                })?,
            };
            self.field(&def.name, &f.ty, v, w, depth)
                .map_err(|e| e.in_field(&f.name))?;
        }
        Ok(())
    }

    fn field(
        &self,
        owner: &crate::name::TypeName,
        ty: &FieldType,
        v: &Value,
        w: &mut CdrWriter<'_>,
        depth: usize,
    ) -> Result<(), EncodeError> {
        if ty.container == Container::Single {
            return self.single(owner, ty, &ty.base, v, w, depth);
        }
        let Value::Array(a) = v else {
            return Err(wrong(ty, v.kind_name()));
        };
        match ty.container {
            Container::Array(n) if a.len() != n as usize => {
                return Err(EncodeError::ArrayLength {
                    path: String::new(),
                    expected: n,
                    found: a.len(),
                })
            }
            Container::Array(_) => {}
            Container::BoundedSequence(b) if a.len() > b as usize => {
                return Err(EncodeError::BoundExceeded {
                    path: String::new(),
                    length: a.len(),
                    bound: b.into(),
                })
            }
            _ => w.len_u32(a.len())?,
        }
        self.elements(owner, ty, a, w, depth)
    }

    fn single(
        &self,
        owner: &crate::name::TypeName,
        ty: &FieldType,
        base: &BaseType,
        v: &Value,
        w: &mut CdrWriter<'_>,
        depth: usize,
    ) -> Result<(), EncodeError> {
        match base {
            BaseType::Primitive(p) => self.primitive(*p, v, w),
            BaseType::String { bound } => {
                let s = v.as_str().ok_or_else(|| wrong(ty, v.kind_name()))?;
                write_string(w, s, *bound)
            }
            BaseType::WString { bound } => {
                let s = v.as_str().ok_or_else(|| wrong(ty, v.kind_name()))?;
                write_wstring(w, s, *bound)
            }
            BaseType::Nested(t) => {
                let Value::Struct(s) = v else {
                    return Err(wrong(ty, v.kind_name()));
                };
                let def = self.reg.resolve_name(t, Some(owner))?;
                self.structure(def, s, w, depth + 1)
            }
        }
    }

    fn primitive(
        &self,
        p: PrimitiveType,
        v: &Value,
        w: &mut CdrWriter<'_>,
    ) -> Result<(), EncodeError> {
        let range = |v: &Value| EncodeError::OutOfRange {
            path: String::new(),
            value: crate::value::msg_literal(v),
            ty: p.msg_name().to_string(),
        };
        macro_rules! int {
            ($t:ty) => {{
                let i = int_of(v).ok_or_else(|| wrong(&p.msg_name(), v.kind_name()))?;
                let x = <$t>::try_from(i).map_err(|_| range(v))?;
                w.put(&x.to_le_bytes());
            }};
        }
        match p {
            PrimitiveType::Bool => {
                let b = v.as_bool().ok_or_else(|| wrong(&"bool", v.kind_name()))?;
                w.out.push(u8::from(b));
            }
            PrimitiveType::Byte | PrimitiveType::Char | PrimitiveType::UInt8 => int!(u8),
            PrimitiveType::Int8 => int!(i8),
            PrimitiveType::Int16 => int!(i16),
            PrimitiveType::UInt16 => int!(u16),
            PrimitiveType::Int32 => int!(i32),
            PrimitiveType::UInt32 => int!(u32),
            PrimitiveType::Int64 => int!(i64),
            PrimitiveType::UInt64 => int!(u64),
            PrimitiveType::Float32 => {
                let x = match *v {
                    Value::Float32(x) => x,
                    Value::Float64(x) => x as f32,
                    _ => return Err(wrong(&"float32", v.kind_name())),
                };
                w.put(&x.to_le_bytes());
            }
            PrimitiveType::Float64 => {
                let x = match *v {
                    Value::Float64(x) => x,
                    Value::Float32(x) => x.into(),
                    _ => return Err(wrong(&"float64", v.kind_name())),
                };
                w.put(&x.to_le_bytes());
            }
        }
        Ok(())
    }

    fn elements(
        &self,
        owner: &crate::name::TypeName,
        ty: &FieldType,
        a: &Array,
        w: &mut CdrWriter<'_>,
        depth: usize,
    ) -> Result<(), EncodeError> {
        use PrimitiveType as P;
        let mismatch = || wrong(ty, &format!("{} array", a.kind_name()));
        match (&ty.base, a) {
            (BaseType::Primitive(P::Bool), Array::Bool(v)) => {
                w.out.extend(v.iter().map(|b| u8::from(*b)))
            }
            (BaseType::Primitive(P::Byte | P::Char | P::UInt8), Array::UInt8(v)) => {
                w.out.extend_from_slice(v)
            }
            (BaseType::Primitive(P::Int8), Array::Int8(v)) => write_numeric_vec!(w, v, i8),
            (BaseType::Primitive(P::Int16), Array::Int16(v)) => write_numeric_vec!(w, v, i16),
            (BaseType::Primitive(P::UInt16), Array::UInt16(v)) => write_numeric_vec!(w, v, u16),
            (BaseType::Primitive(P::Int32), Array::Int32(v)) => write_numeric_vec!(w, v, i32),
            (BaseType::Primitive(P::UInt32), Array::UInt32(v)) => write_numeric_vec!(w, v, u32),
            (BaseType::Primitive(P::Int64), Array::Int64(v)) => write_numeric_vec!(w, v, i64),
            (BaseType::Primitive(P::UInt64), Array::UInt64(v)) => write_numeric_vec!(w, v, u64),
            (BaseType::Primitive(P::Float32), Array::Float32(v)) => write_numeric_vec!(w, v, f32),
            (BaseType::Primitive(P::Float64), Array::Float64(v)) => write_numeric_vec!(w, v, f64),
            (BaseType::String { bound }, Array::String(v) | Array::WString(v)) => {
                for (i, s) in v.iter().enumerate() {
                    write_string(w, s, *bound).map_err(|e| e.in_field(&format!("[{i}]")))?;
                }
            }
            (BaseType::WString { bound }, Array::WString(v) | Array::String(v)) => {
                for (i, s) in v.iter().enumerate() {
                    write_wstring(w, s, *bound).map_err(|e| e.in_field(&format!("[{i}]")))?;
                }
            }
            (BaseType::Nested(t), Array::Struct(v)) => {
                let def = self.reg.resolve_name(t, Some(owner))?;
                for (i, s) in v.iter().enumerate() {
                    self.structure(def, s, w, depth + 1)
                        .map_err(|e| e.in_field(&format!("[{i}]")))?;
                }
            }
            _ => return Err(mismatch()),
        }
        Ok(())
    }
}

fn write_string(w: &mut CdrWriter<'_>, s: &str, bound: Option<u32>) -> Result<(), EncodeError> {
    if let Some(b) = bound {
        if s.len() > b as usize {
            return Err(EncodeError::BoundExceeded {
                path: String::new(),
                length: s.len(),
                bound: b.into(),
            });
        }
    }
    w.len_u32(s.len() + 1)?;
    w.out.extend_from_slice(s.as_bytes());
    w.out.push(0);
    Ok(())
}

fn write_wstring(w: &mut CdrWriter<'_>, s: &str, bound: Option<u32>) -> Result<(), EncodeError> {
    let units = s.encode_utf16().count();
    if let Some(b) = bound {
        if units > b as usize {
            return Err(EncodeError::BoundExceeded {
                path: String::new(),
                length: units,
                bound: b.into(),
            });
        }
    }
    w.len_u32(units)?;
    for u in s.encode_utf16() {
        w.out.extend_from_slice(&u32::from(u).to_le_bytes());
    }
    Ok(())
}

/// Encodes `value` (a [`Value::Struct`]) as a CDR message of type `type_name`, appending the
/// little-endian encapsulation header and the payload to `out`. On error `out` is left as it
/// was.
///
/// Integer values are accepted for any integer field they fit in, and `float32`/`float64`
/// values for either float type; everything else must match the field type.
pub fn encode(
    registry: &Registry,
    type_name: &str,
    value: &Value,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    encode_with_padding(registry, type_name, value, out, 0)
}

/// [`encode`] with a chosen value for alignment padding bytes (normally 0). Useful in tests
/// to locate padding when comparing with other implementations, whose padding bytes are
/// unspecified.
#[doc(hidden)]
pub fn encode_with_padding(
    registry: &Registry,
    type_name: &str,
    value: &Value,
    out: &mut Vec<u8>,
    pad: u8,
) -> Result<(), EncodeError> {
    let def = registry.resolve_message(type_name)?;
    let Value::Struct(s) = value else {
        return Err(wrong(&def.name, value.kind_name()));
    };
    let start = out.len();
    out.extend_from_slice(&CDR_LE_HEADER);
    let base = out.len();
    let res = Encoder { reg: registry }.structure(def, s, &mut CdrWriter { out, base, pad }, 0);
    if res.is_err() {
        out.truncate(start);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_is_relative_to_the_body() {
        let mut buf = Vec::new();
        let mut w = CdrWriter::new(&mut buf);
        w.u8(1);
        w.f64(2.0);
        w.string(b"ab").unwrap();
        assert_eq!(w.written(), 4 + 8 + 8 + 4 + 3);
        let mut r = CdrReader::new(&buf).unwrap();
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(r.f64().unwrap(), 2.0);
        assert_eq!(r.string().unwrap(), b"ab");
        assert_eq!(r.remaining(), 0);
        assert!(r.u8().is_err());
    }

    #[test]
    fn lies_are_refused() {
        let mut buf = Vec::new();
        CdrWriter::new(&mut buf).u32(1 << 30);
        assert!(CdrReader::new(&buf).unwrap().len(1).is_err());
        assert!(CdrReader::new(&[0, 2, 0, 0]).is_err());
        assert!(CdrReader::new(&[0, 1]).is_err());
    }

    #[test]
    fn big_endian_scalars_are_read_in_their_order() {
        let mut r = CdrReader::new(&[0, 0, 0, 0, 0, 0, 1, 2]).unwrap();
        assert_eq!(r.endianness(), Endianness::Big);
        assert_eq!(r.u32().unwrap(), 0x0102);
    }
}
