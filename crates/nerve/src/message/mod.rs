//! Message types: plain data placed directly in shared memory, header + slice messages,
//! and a serde fallback for arbitrary types.
//!
//! Every topic carries one message type. Its identity is the type name plus a layout hash
//! computed at compile time from the size, alignment, field names and field types, so two
//! programs that disagree on a struct's definition never read each other's bytes.

pub mod header;
pub mod json;
pub mod schema;
mod service_type;

pub use service_type::ServiceType;

use core::marker::PhantomData;
use serde::{de::DeserializeOwned, Serialize};

/// Plain data: a `#[repr(C)]` type without padding for which every bit pattern is valid.
///
/// Derive it with `#[derive(nerve::Pod)]`; implemented here for the primitive numbers and
/// arrays of `Pod`.
///
/// # Safety
/// Implementors must be `#[repr(C)]` (or primitive), contain no padding bytes, no pointers
/// or references, and every bit pattern must be a valid value. `LAYOUT_HASH` must change
/// whenever the layout changes.
pub unsafe trait Pod: Copy + Send + Sync + 'static {
    /// Fingerprint of the memory layout (sizes, alignment, field names and types).
    const LAYOUT_HASH: u64;

    /// The layout (see [`schema`]): field names, types and offsets for derived types;
    /// size, alignment and hash alone for hand-written ones.
    fn shape() -> schema::Shape {
        schema::Shape::Opaque {
            size: core::mem::size_of::<Self>(),
            align: core::mem::align_of::<Self>(),
            hash: Self::LAYOUT_HASH,
        }
    }
}

/// A type that can be sent on a topic.
///
/// The value itself (the *head*) is plain data; `Elem` is the element type of the optional
/// variable-length slice that follows it (`NoElem` for fixed-size messages).
/// Derive with `#[derive(nerve::Message)]` and `#[message(name = "pkg/Type", elem = u8)]`.
pub trait Message: Pod {
    /// Type name shown by tools and used in type checks, e.g. `nerve_msgs/Imu`.
    const TYPE_NAME: &'static str;
    /// Element type of the trailing slice, or [`NoElem`] for fixed-size messages.
    type Elem: Pod;
}

/// Element type of fixed-size messages: they carry no trailing slice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[repr(C)]
pub struct NoElem;

// SAFETY: zero-sized, no bytes at all.
unsafe impl Pod for NoElem {
    const LAYOUT_HASH: u64 = layout::hash_str(layout::FNV_OFFSET, "NoElem");
}

macro_rules! primitive_pod {
    ($($t:ty => $p:ident),*) => {$(
        // SAFETY: primitive numbers have no padding and every bit pattern is valid.
        unsafe impl Pod for $t {
            const LAYOUT_HASH: u64 = layout::hash_str(layout::FNV_OFFSET, stringify!($t));
            fn shape() -> schema::Shape {
                schema::Shape::Prim(schema::Prim::$p)
            }
        }
    )*};
}
primitive_pod!(u8 => U8, u16 => U16, u32 => U32, u64 => U64, u128 => U128, i8 => I8,
    i16 => I16, i32 => I32, i64 => I64, i128 => I128, f32 => F32, f64 => F64);

// SAFETY: an array of Pod is Pod: elements are laid out contiguously without padding.
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {
    const LAYOUT_HASH: u64 = layout::hash_u64(layout::hash_u64(T::LAYOUT_HASH, N as u64), 0x5b5d);
    fn shape() -> schema::Shape {
        schema::Shape::Array {
            elem: Box::new(T::shape()),
            len: N,
        }
    }
}

/// Compile-time FNV-1a hashing used to fingerprint layouts (public for the derive macro).
pub mod layout {
    /// FNV-1a offset basis.
    pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

    /// Mixes the bytes of `s` into `h`.
    pub const fn hash_str(mut h: u64, s: &str) -> u64 {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            h ^= b[i] as u64;
            h = h.wrapping_mul(FNV_PRIME);
            i += 1;
        }
        // terminator so that ("ab","c") and ("a","bc") differ
        h ^= 0xff;
        h.wrapping_mul(FNV_PRIME)
    }

    /// Mixes the little-endian bytes of `v` into `h`.
    pub const fn hash_u64(mut h: u64, v: u64) -> u64 {
        let b = v.to_le_bytes();
        let mut i = 0;
        while i < 8 {
            h ^= b[i] as u64;
            h = h.wrapping_mul(FNV_PRIME);
            i += 1;
        }
        h
    }
}

/// Everything a topic records about its message type; compared when a topic is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeInfo {
    /// Type name, e.g. `nerve_msgs/Imu`.
    pub name: String,
    /// Layout fingerprint of head and element.
    pub layout_hash: u64,
    /// Size of the fixed head in bytes.
    pub head_size: usize,
    /// Size of one slice element in bytes (0 for fixed-size messages).
    pub elem_size: usize,
    /// Alignment of one slice element.
    pub elem_align: usize,
    /// Alignment of the payload in shared memory.
    pub align: usize,
}

impl TypeInfo {
    /// "name (layout 0123456789abcdef)", for messages.
    pub(crate) fn describe(&self) -> String {
        format!("{} (layout {:016x})", self.name, self.layout_hash)
    }
}

/// Largest alignment of a message head or slice element: payloads are 8-byte aligned in
/// shared memory, on the heap and when decoded from the network.
pub const MAX_ALIGN: usize = 8;

/// Fails to compile (in a `const` context) for a message whose head or element needs more
/// than [`MAX_ALIGN`]-byte alignment. `#[derive(Message)]` calls it where the type is
/// defined; [`TypeInfo::of`], which every endpoint calls when it is created, calls it for
/// every other implementation, so no endpoint of such a type can be built.
///
/// ```compile_fail
/// #[derive(Clone, Copy, nerve::Message)]
/// #[repr(C, align(16))]
/// #[message(name = "demo/Wide")]
/// struct Wide { x: u64, y: u64 }
/// ```
/// ```
/// #[derive(Clone, Copy, nerve::Message)]
/// #[repr(C)]
/// #[message(name = "demo/Narrow")]
/// struct Narrow { x: u64, y: u64 }
/// let _ = nerve::TypeInfo::of::<Narrow>();
/// ```
pub const fn assert_supported_layout<M: Message>() {
    assert!(
        core::mem::align_of::<M>() <= MAX_ALIGN && core::mem::align_of::<M::Elem>() <= MAX_ALIGN,
        "nerve: a message head or element may need at most 8-byte alignment"
    );
}

impl TypeInfo {
    /// Type identity of message `M`. Does not compile for a type that needs more than
    /// [`MAX_ALIGN`]-byte alignment (see [`assert_supported_layout`]).
    pub fn of<M: Message>() -> Self {
        const { assert_supported_layout::<M>() };
        TypeInfo {
            name: M::TYPE_NAME.to_string(),
            layout_hash: layout::hash_u64(M::LAYOUT_HASH, M::Elem::LAYOUT_HASH),
            head_size: core::mem::size_of::<M>(),
            elem_size: core::mem::size_of::<M::Elem>(),
            elem_align: core::mem::align_of::<M::Elem>(),
            align: payload_align::<M>(),
        }
    }

    /// Byte offset of the slice after the head.
    pub fn elems_offset(&self) -> usize {
        let a = self.elem_align.max(1);
        self.head_size.div_ceil(a) * a
    }

    /// Checks that a payload of `len` bytes given whole (type-erased publishers, loans,
    /// clients and servers) fits this layout: exactly the head for a fixed-size message,
    /// the head up to the element offset plus whole elements for a slice message. The
    /// error says what the layout expects.
    pub fn check_len(&self, len: usize) -> Result<(), String> {
        if self.elem_size == 0 && len != self.head_size {
            return Err(format!("the message has {} bytes", self.head_size));
        }
        if self.elem_size > 0
            && (len < self.elems_offset()
                || !(len - self.elems_offset()).is_multiple_of(self.elem_size))
        {
            return Err(format!(
                "expected {} head bytes and a multiple of {} element bytes",
                self.elems_offset(),
                self.elem_size
            ));
        }
        Ok(())
    }

    /// Whether this message has a variable-length slice.
    pub fn is_slice(&self) -> bool {
        self.elem_size > 0
    }
}

/// Payload alignment in shared memory: at least 8 so headers of any message read fast.
pub(crate) fn payload_align<M: Message>() -> usize {
    core::mem::align_of::<M>()
        .max(core::mem::align_of::<M::Elem>())
        .max(8)
}

/// Byte offset of the element slice of `M` after its head.
pub fn elems_offset<M: Message>() -> usize {
    let a = core::mem::align_of::<M::Elem>();
    core::mem::size_of::<M>().div_ceil(a) * a
}

/// Views `words`, a payload of `M`, as its head and its `n` slice elements.
///
/// Checked: panics if `words` is shorter than the head and `n` elements. Payloads are
/// loaned at their length or validated against it before anything views them, so a
/// short one is a bug in Nerve, never bad input. Alignment is checked at compile time:
/// `words` starts 8-byte aligned and `M` and its `Elem` need at most [`MAX_ALIGN`].
pub(crate) fn view<M: Message>(words: &[u64], n: usize) -> (&M, &[M::Elem]) {
    let off = check_view::<M>(words.len(), n);
    let base = words.as_ptr().cast::<u8>();
    // SAFETY: check_view proved that `words` holds the head (size_of::<M>() bytes at its
    // start) and n elements at `off` (a multiple of align_of::<Elem>()), both aligned as
    // stated above; M and Elem are Pod, so any bytes are valid values; the borrows are
    // tied to `words`.
    unsafe {
        (
            &*base.cast::<M>(),
            core::slice::from_raw_parts(base.add(off).cast::<M::Elem>(), n),
        )
    }
}

/// [`view`], writable: the head and the elements, both at once (they never overlap).
pub(crate) fn view_mut<M: Message>(words: &mut [u64], n: usize) -> (&mut M, &mut [M::Elem]) {
    let off = check_view::<M>(words.len(), n);
    let base = words.as_mut_ptr().cast::<u8>();
    // SAFETY: as in `view`; both come from one pointer to `words`, the head covers bytes
    // 0..size_of::<M>() and the elements start at off >= size_of::<M>(), so the two
    // mutable borrows never overlap; both are tied to `words`.
    unsafe {
        (
            &mut *base.cast::<M>(),
            core::slice::from_raw_parts_mut(base.add(off).cast::<M::Elem>(), n),
        )
    }
}

/// Checks that `len_words` words hold an `M` with `n` elements; the elements' offset.
fn check_view<M: Message>(len_words: usize, n: usize) -> usize {
    const {
        assert!(
            core::mem::align_of::<M>() <= MAX_ALIGN
                && core::mem::align_of::<M::Elem>() <= MAX_ALIGN,
            "a message needs at most MAX_ALIGN-byte alignment"
        )
    };
    let off = elems_offset::<M>();
    let need = slice_bytes::<M>(n);
    assert!(
        need.is_some_and(|b| b <= len_words.saturating_mul(8)),
        "a payload of {} words is too short for {} with {n} elements",
        len_words,
        M::TYPE_NAME
    );
    off
}

/// Payload bytes of an `M` with `elems` slice elements (head, padding, elements); `None`
/// when that overflows.
pub(crate) fn slice_bytes<M: Message>(elems: usize) -> Option<usize> {
    elems
        .checked_mul(core::mem::size_of::<M::Elem>())
        .and_then(|b| b.checked_add(elems_offset::<M>()))
}

/// Head of a serde-encoded message: its encoded length; the bytes follow as a `[u8]` slice.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct SerdeHead {
    /// Length of the encoded value in bytes.
    pub len: u64,
}

/// Serde fallback: a topic of `Serde<T>` carries any `T: Serialize + DeserializeOwned`,
/// encoded with [postcard](https://docs.rs/postcard) into a loaned byte slice (one copy on
/// each side). Postcard's wire format is specified and stable across its 1.x releases,
/// compact (varints) and maintained; the encoding's name and version are part of the
/// type identity ([`SERDE_ENCODING`]), so processes that encode differently refuse each
/// other's topics instead of misreading them.
#[repr(C)]
pub struct Serde<T> {
    head: SerdeHead,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Serde<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Serde<T> {}

/// The serde fallback's encoding and its version, part of every `Serde<T>` layout hash.
pub const SERDE_ENCODING: &str = "postcard-1";

// SAFETY: #[repr(C)] with one u64 (SerdeHead) and a zero-sized marker: no padding, every
// bit pattern valid, no pointers.
unsafe impl<T: 'static> Pod for Serde<T> {
    const LAYOUT_HASH: u64 = layout::hash_str(
        layout::hash_str(layout::FNV_OFFSET, "nerve/Serde"),
        SERDE_ENCODING,
    );
}

/// Types that can travel as `Serde<T>`: name them for type checks.
pub trait SerdeMessage: Serialize + DeserializeOwned + 'static {
    /// Type name recorded on the topic, e.g. `my_robot/Plan`.
    const TYPE_NAME: &'static str;
}

impl<T: SerdeMessage> Message for Serde<T> {
    const TYPE_NAME: &'static str = T::TYPE_NAME;
    type Elem = u8;
}

impl<T> Serde<T> {
    /// Encoded length in bytes.
    pub fn encoded_len(&self) -> usize {
        self.head.len as usize
    }
    pub(crate) fn with_len(len: usize) -> Self {
        Serde {
            head: SerdeHead { len: len as u64 },
            _t: PhantomData,
        }
    }
}

/// Encodes a serde value into bytes ([`SERDE_ENCODING`]).
pub(crate) fn serde_encode<T: Serialize>(value: &T) -> Result<Vec<u8>, String> {
    postcard::to_stdvec(value).map_err(|e| e.to_string())
}

/// Decodes a serde value, bounded by `bytes` (never reads past it; sequence lengths that
/// the bytes cannot hold fail instead of allocating).
pub(crate) fn serde_decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    postcard::from_bytes(bytes).map_err(|e| e.to_string())
}

/// Decodes the value a [`Serde<T>`] message carries from the message's payload bytes, as
/// a type-erased subscriber or a bag holds them (the head, then the encoded bytes). Reads
/// nothing past `payload`; a length the payload cannot hold is an error.
pub fn decode_serde_payload<T: SerdeMessage>(
    payload: &[u8],
) -> Result<T, crate::error::DecodeError> {
    let err = |reason: String| crate::error::DecodeError {
        type_name: T::TYPE_NAME.to_string(),
        reason,
    };
    let head = read_pod::<Serde<T>>(payload)
        .map(|s| s.head)
        .ok_or_else(|| {
            err(format!(
                "a payload of {} bytes is shorter than its head",
                payload.len()
            ))
        })?;
    let body = payload
        .get(elems_offset::<Serde<T>>()..)
        .unwrap_or_default();
    let body = usize::try_from(head.len)
        .ok()
        .and_then(|n| body.get(..n))
        .ok_or_else(|| {
            err(format!(
                "its head says {} encoded bytes, the payload holds {}",
                head.len,
                body.len()
            ))
        })?;
    serde_decode(body).map_err(err)
}

/// Reinterprets plain data as bytes.
pub fn as_bytes<T: Pod>(v: &T) -> &[u8] {
    // naming the hash evaluates any layout check a Pod type carries in it
    let _ = T::LAYOUT_HASH;
    // SAFETY: T is Pod: no padding, so all size_of::<T>() bytes are initialized.
    unsafe { core::slice::from_raw_parts(v as *const T as *const u8, core::mem::size_of::<T>()) }
}

/// Reads a `T` from the start of `bytes` (unaligned), or `None` if too short.
pub fn read_pod<T: Pod>(bytes: &[u8]) -> Option<T> {
    let _ = T::LAYOUT_HASH; // evaluates any layout check in it
    if bytes.len() < core::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: length checked; T is Pod so any bit pattern is valid; read_unaligned has no
    // alignment requirement.
    Some(unsafe { core::ptr::read_unaligned(bytes.as_ptr() as *const T) })
}

/// A zeroed value of plain data.
pub fn zeroed<T: Pod>() -> T {
    let _ = T::LAYOUT_HASH; // evaluates any layout check in it
                            // SAFETY: T is Pod: the all-zero bit pattern is valid.
    unsafe { core::mem::zeroed() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_fallback_round_trips_and_refuses_lying_bytes() {
        let v = (String::from("plan"), vec![(1.5f32, -2.0f32); 3]);
        let bytes = serde_encode(&v).unwrap();
        assert_eq!(
            serde_decode::<(String, Vec<(f32, f32)>)>(&bytes).unwrap(),
            v
        );
        // a length prefix of ~4 GB over five bytes: an error, no allocation, no panic
        assert!(serde_decode::<Vec<u8>>(&[0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
        assert!(serde_decode::<String>(&bytes[..3]).is_err(), "truncated");
    }

    #[derive(Clone, Copy, nerve_derive::Message)]
    #[repr(C)]
    struct A {
        x: f64,
        y: u32,
        z: u32,
    }

    #[derive(Clone, Copy, nerve_derive::Message)]
    #[repr(C)]
    #[message(name = "A")]
    struct B {
        x: f64,
        y: u32,
        w: u32,
    }

    #[derive(Clone, Copy, nerve_derive::Message)]
    #[repr(C)]
    #[message(name = "test/Cloud", elem = f32)]
    struct Cloud {
        n: u32,
    }

    #[test]
    fn same_name_different_fields_have_different_layouts() {
        assert_eq!(TypeInfo::of::<A>().name, TypeInfo::of::<B>().name);
        assert_ne!(
            TypeInfo::of::<A>().layout_hash,
            TypeInfo::of::<B>().layout_hash
        );
    }

    #[test]
    fn slice_message_offsets() {
        let t = TypeInfo::of::<Cloud>();
        assert_eq!(t.head_size, 4);
        assert_eq!(t.elem_size, 4);
        assert_eq!(t.elems_offset(), elems_offset::<Cloud>());
        assert!(t.is_slice());
        assert!(!TypeInfo::of::<A>().is_slice());
    }

    #[test]
    fn serde_decode_rejects_garbage() {
        let r: Result<String, _> = serde_decode(&[0xff; 4]);
        assert!(r.is_err());
        let v = serde_encode(&"hello".to_string()).unwrap();
        assert_eq!(serde_decode::<String>(&v).unwrap(), "hello");
    }
}
