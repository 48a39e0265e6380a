//! Nerve's frames on the network plane: a fixed, versioned header followed by the payload
//! bytes. Everything read from the network passes [`decode`] before use: size limits,
//! header sanity and type identity are checked, and the payload is copied into an
//! 8-byte-aligned buffer that is validated against the expected layout again.
//!
//! Layout (little endian): magic `NRV` + version (4 bytes), kind (1), 3 zero bytes, sender
//! host id (8), checksum (4), 4 zero bytes, then the kind's header ([`SampleHeader`]:
//! 7 x u64, or [`CallHeader`]: 4 x u64 + 2 x u32), then exactly `payload_len` payload
//! bytes. The checksum is the CRC-32 of every other byte of the frame: TCP's 16-bit sum
//! misses some corruption (and a middlebox that rewrites packets recomputes it), and a
//! corrupted sample must be refused, never delivered.

use crate::message::header::{CallHeader, SampleHeader};
use crate::message::TypeInfo;
use crate::transport::shm;
use std::sync::Arc;

pub use crate::transport::remote::Frame;

/// First four bytes of every frame: `NRV` and the wire version.
pub(crate) const MAGIC: [u8; 4] = *b"NRV\x02";
/// Bytes before the kind's header: magic, kind, padding, host id, checksum, padding.
const PREFIX: usize = 24;
/// Where the checksum sits in the prefix; these bytes are not summed.
const SUM_AT: std::ops::Range<usize> = 16..24;
/// Bytes of an encoded [`SampleHeader`].
pub(crate) const SAMPLE_HEADER: usize = 56;
/// Bytes of an encoded [`CallHeader`].
pub(crate) const CALL_HEADER: usize = 40;

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A topic sample.
    Sample = 1,
    /// A service request.
    Request = 2,
    /// A service response.
    Response = 3,
}

/// Why a frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Fewer bytes than the headers need.
    #[error("truncated frame: {got} bytes, the header needs {need}")]
    Truncated {
        /// Bytes received.
        got: usize,
        /// Bytes the header needs.
        need: usize,
    },
    /// Not a Nerve frame of this version.
    #[error("bad magic {0:02x?} (not a Nerve v2 frame)")]
    BadMagic([u8; 4]),
    /// A frame of another kind than expected (or an unknown kind).
    #[error("frame kind {got} where {want:?} was expected")]
    WrongKind {
        /// Kind byte received.
        got: u8,
        /// Kind expected.
        want: Kind,
    },
    /// The header's length disagrees with the bytes that follow it.
    #[error("header says {said} payload bytes, {got} follow")]
    LengthMismatch {
        /// Length in the header.
        said: u64,
        /// Bytes after the header.
        got: usize,
    },
    /// The payload exceeds the receiver's limit.
    #[error("payload of {len} bytes exceeds the limit of {max}")]
    Oversized {
        /// Payload bytes.
        len: usize,
        /// The receiver's limit.
        max: usize,
    },
    /// The payload's type or layout differs from the expected one.
    #[error("wrong type: {0}")]
    WrongType(String),
    /// The frame's bytes do not add up to its checksum: corrupted on the way.
    #[error("checksum {said:08x} in the frame, {computed:08x} computed: corrupted on the way")]
    Checksum {
        /// Checksum the frame carries.
        said: u32,
        /// Checksum of the bytes received.
        computed: u32,
    },
}

impl WireError {
    /// Short name of the refusal, for counters.
    pub fn label(&self) -> &'static str {
        match self {
            WireError::Truncated { .. } => "truncated",
            WireError::BadMagic(_) => "bad-magic",
            WireError::WrongKind { .. } => "wrong-kind",
            WireError::LengthMismatch { .. } => "length-mismatch",
            WireError::Oversized { .. } => "oversized",
            WireError::WrongType(_) => "wrong-type",
            WireError::Checksum { .. } => "checksum",
        }
    }
}

/// Encodes a sample frame.
pub(crate) fn encode_sample(host: u64, h: &SampleHeader, payload: &[u8]) -> Vec<u8> {
    let mut out = sample_header(host, h, payload, payload.len());
    out.extend_from_slice(payload);
    out
}

/// The headers of a sample frame whose `payload` follows in a slice of its own, with
/// room for `reserve` more bytes.
pub(crate) fn sample_header(
    host: u64,
    h: &SampleHeader,
    payload: &[u8],
    reserve: usize,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX + SAMPLE_HEADER + reserve);
    prefix(&mut out, Kind::Sample, host);
    for v in [
        h.seq,
        h.publish_mono_ns,
        h.publish_wall_ns as u64,
        h.publisher_id,
        payload.len() as u64,
        h.type_hash,
        h.origin,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let sum = checksum(&[&out, payload]);
    out[SUM_AT.start..SUM_AT.start + 4].copy_from_slice(&sum.to_le_bytes());
    out
}

/// Encodes a request or response frame.
pub(crate) fn encode_call(kind: Kind, host: u64, h: &CallHeader, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX + CALL_HEADER + payload.len());
    prefix(&mut out, kind, host);
    for v in [h.seq, h.sent_mono_ns, payload.len() as u64, h.type_hash] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&h.reply_slot.to_le_bytes());
    out.extend_from_slice(&h.status.to_le_bytes());
    out.extend_from_slice(payload);
    seal(&mut out);
    out
}

/// Writes the checksum of a whole frame built by hand (tools and tests that craft
/// frames); frames shorter than the prefix are left as they are.
pub fn seal(frame: &mut [u8]) {
    if frame.len() >= PREFIX {
        let sum = checksum(&[frame]);
        frame[SUM_AT.start..SUM_AT.start + 4].copy_from_slice(&sum.to_le_bytes());
    }
}

fn prefix(out: &mut Vec<u8>, kind: Kind, host: u64) {
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&[kind as u8, 0, 0, 0]);
    out.extend_from_slice(&host.to_le_bytes());
    out.extend_from_slice(&[0; SUM_AT.end - SUM_AT.start]);
}

/// CRC-32 of a frame given in slices, read in order, leaving out the bytes at
/// [`SUM_AT`] (the checksum itself and its padding).
fn checksum(parts: &[&[u8]]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    let mut at = 0;
    for p in parts {
        let (start, end) = (at, at + p.len());
        // the part's bytes before, and after, the skipped range
        let before = SUM_AT.start.clamp(start, end) - start;
        let after = SUM_AT.end.clamp(start, end) - start;
        h.update(&p[..before]);
        h.update(&p[after..]);
        at = end;
    }
    h.finalize()
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(a)
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[i..i + 4]);
    u32::from_le_bytes(a)
}

/// A frame as Zenoh may hand it over: one or several byte slices, read in order.
struct Parts<'a> {
    parts: &'a [&'a [u8]],
    len: usize,
}

impl<'a> Parts<'a> {
    fn new(parts: &'a [&'a [u8]]) -> Parts<'a> {
        Parts {
            parts,
            len: parts.iter().map(|p| p.len()).sum(),
        }
    }

    /// Copies bytes `at..at + out.len()` into `out` (the caller checked the length),
    /// handing each copied piece to `each` while it is still in cache.
    fn copy_to(&self, mut at: usize, mut out: &mut [u8], mut each: impl FnMut(&[u8])) {
        for p in self.parts {
            if out.is_empty() {
                return;
            }
            if at >= p.len() {
                at -= p.len();
                continue;
            }
            let n = (p.len() - at).min(out.len());
            out[..n].copy_from_slice(&p[at..at + n]);
            each(&out[..n]);
            out = &mut out[n..];
            at = 0;
        }
    }
}

/// Checks the prefix; returns the sender's host id and the headers' bytes.
fn check_prefix<const N: usize>(
    parts: &Parts<'_>,
    want: Kind,
) -> Result<(u64, [u8; N]), WireError> {
    if parts.len < N {
        return Err(WireError::Truncated {
            got: parts.len,
            need: N,
        });
    }
    let mut b = [0u8; N];
    parts.copy_to(0, &mut b, |_| {});
    let magic = [b[0], b[1], b[2], b[3]];
    if magic != MAGIC {
        return Err(WireError::BadMagic(magic));
    }
    if b[4] != want as u8 || b[5..8] != [0, 0, 0] {
        return Err(WireError::WrongKind { got: b[4], want });
    }
    Ok((u64_at(&b, 8), b))
}

/// Copies the payload that follows `head` (the frame's prefix and headers) into an
/// aligned buffer, the only copy on receipt, after checking its length; the whole frame's
/// checksum is computed as it copies and must agree before the buffer is handed out.
fn payload(
    parts: &Parts<'_>,
    head: &[u8],
    said: u64,
    max: usize,
) -> Result<Arc<Vec<u64>>, WireError> {
    let at = head.len();
    let got = parts.len - at;
    if said != got as u64 {
        return Err(WireError::LengthMismatch { said, got });
    }
    if got > max {
        return Err(WireError::Oversized { len: got, max });
    }
    let mut words = vec![0u64; shm::words_for(got).max(1)];
    // the checksum of the headers, then of the payload as it is copied (one pass)
    let mut sum = crc32fast::Hasher::new();
    sum.update(&head[..SUM_AT.start]);
    sum.update(&head[SUM_AT.end..]);
    parts.copy_to(
        at,
        &mut shm::words_as_bytes_mut(&mut words)[..got],
        |piece| sum.update(piece),
    );
    let (said, computed) = (u32_at(head, SUM_AT.start), sum.finalize());
    if said != computed || u32_at(head, SUM_AT.start + 4) != 0 {
        return Err(WireError::Checksum { said, computed });
    }
    Ok(Arc::new(words))
}

/// Decodes and validates a sample frame of type `ty` whose payload is at most `max` bytes.
pub fn decode_sample(
    b: &[u8],
    ty: &TypeInfo,
    max: usize,
) -> Result<Frame<SampleHeader>, WireError> {
    decode_sample_parts(&[b], ty, max)
}

/// [`decode_sample`] of a frame in several slices (as Zenoh hands over large ones).
pub fn decode_sample_parts(
    parts: &[&[u8]],
    ty: &TypeInfo,
    max: usize,
) -> Result<Frame<SampleHeader>, WireError> {
    let parts = Parts::new(parts);
    let (host, b) = check_prefix::<{ PREFIX + SAMPLE_HEADER }>(&parts, Kind::Sample)?;
    let f = |i: usize| u64_at(&b, PREFIX + 8 * i);
    let header = SampleHeader {
        seq: f(0),
        publish_mono_ns: f(1),
        publish_wall_ns: f(2) as i64,
        publisher_id: f(3),
        payload_len: f(4),
        type_hash: f(5),
        origin: f(6),
    };
    let words = payload(&parts, &b, header.payload_len, max)?;
    if header.type_hash != ty.layout_hash {
        return Err(WireError::WrongType(format!(
            "type hash {:016x} differs from {}'s",
            header.type_hash, ty.name
        )));
    }
    let elems = shm::check_payload(header.type_hash, header.payload_len, &words, ty)
        .map_err(WireError::WrongType)?;
    Ok(Frame {
        host,
        header,
        words,
        elems,
    })
}

/// Decodes and validates a request (`kind` Request) or response frame. Payloads of
/// requests and successful responses must match `ty`; other responses carry UTF-8 text.
pub fn decode_call(
    b: &[u8],
    kind: Kind,
    ty: &TypeInfo,
    max: usize,
) -> Result<Frame<CallHeader>, WireError> {
    decode_call_parts(&[b], kind, ty, max)
}

/// [`decode_call`] of a frame in several slices.
pub fn decode_call_parts(
    parts: &[&[u8]],
    kind: Kind,
    ty: &TypeInfo,
    max: usize,
) -> Result<Frame<CallHeader>, WireError> {
    let parts = Parts::new(parts);
    let (host, b) = check_prefix::<{ PREFIX + CALL_HEADER }>(&parts, kind)?;
    let f = |i: usize| u64_at(&b, PREFIX + 8 * i);
    let header = CallHeader {
        seq: f(0),
        sent_mono_ns: f(1),
        payload_len: f(2),
        type_hash: f(3),
        reply_slot: u32_at(&b, PREFIX + 32),
        status: u32_at(&b, PREFIX + 36),
    };
    let typed = kind == Kind::Request || header.status == 0;
    let words = payload(&parts, &b, header.payload_len, max)?;
    if typed && header.type_hash != ty.layout_hash {
        return Err(WireError::WrongType(format!(
            "type hash {:016x} differs from {}'s",
            header.type_hash, ty.name
        )));
    }
    let elems = if typed {
        shm::check_payload(header.type_hash, header.payload_len, &words, ty)
            .map_err(WireError::WrongType)?
    } else {
        0
    };
    Ok(Frame {
        host,
        header,
        words,
        elems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, nerve_derive::Message)]
    #[repr(C)]
    #[message(name = "test/Blob", elem = u8)]
    struct Blob {
        n: u32,
    }

    #[derive(Clone, Copy, nerve_derive::Message)]
    #[repr(C)]
    #[message(name = "test/Other")]
    struct Other {
        n: u64,
    }

    fn bytes_type() -> TypeInfo {
        TypeInfo::of::<Blob>()
    }

    fn sample(payload: &[u8]) -> Vec<u8> {
        let ty = bytes_type();
        let h = SampleHeader {
            seq: 7,
            publish_mono_ns: 1,
            publish_wall_ns: -2,
            publisher_id: 3,
            payload_len: 0,
            type_hash: ty.layout_hash,
            origin: 9,
        };
        encode_sample(42, &h, payload)
    }

    #[test]
    fn samples_round_trip() {
        let ty = bytes_type();
        let mut p = vec![0u8; ty.elems_offset()];
        p.extend_from_slice(b"hello");
        let f = decode_sample(&sample(&p), &ty, 1 << 20).unwrap();
        assert_eq!(
            (f.host, f.header.seq, f.header.publish_wall_ns),
            (42, 7, -2)
        );
        assert_eq!(f.header.payload_len as usize, p.len());
        assert_eq!(f.elems, 5);
        assert_eq!(&shm::words_as_bytes(&f.words)[..p.len()], &p[..]);
    }

    #[test]
    fn every_kind_of_bad_frame_is_refused_by_name() {
        let ty = bytes_type();
        let good = sample(&vec![0u8; ty.elems_offset() + 3]);
        let cut = &good[..good.len() - 1];
        assert!(matches!(
            decode_sample(cut, &ty, 1 << 20),
            Err(WireError::LengthMismatch { .. })
        ));
        assert!(matches!(
            decode_sample(&good[..10], &ty, 1 << 20),
            Err(WireError::Truncated { .. })
        ));
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(matches!(
            decode_sample(&bad, &ty, 1 << 20),
            Err(WireError::BadMagic(_))
        ));
        let mut bad = good.clone();
        bad[4] = Kind::Request as u8;
        assert!(matches!(
            decode_sample(&bad, &ty, 1 << 20),
            Err(WireError::WrongKind { .. })
        ));
        assert!(matches!(
            decode_sample(&good, &ty, 4),
            Err(WireError::Oversized { .. })
        ));
        let other = TypeInfo::of::<Other>();
        let e = decode_sample(&good, &other, 1 << 20).unwrap_err();
        assert_eq!(e.label(), "wrong-type");
        assert!(e.to_string().contains("type hash"), "{e}");
    }

    #[test]
    fn a_byte_changed_on_the_way_is_refused_by_the_checksum() {
        let ty = bytes_type();
        let mut p = vec![0u8; ty.elems_offset()];
        p.extend_from_slice(b"hello");
        let good = sample(&p);
        // every byte but the magic, the kind and their padding (refused by name before)
        for at in 8..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            let e = decode_sample(&bad, &ty, 1 << 20).unwrap_err();
            if (PREFIX + 32..PREFIX + 40).contains(&at) {
                // the payload length: the bytes that follow disagree with it first
                assert_eq!(e.label(), "length-mismatch", "byte {at}: {e}");
            } else {
                assert_eq!(e.label(), "checksum", "byte {at}: {e}");
            }
        }
        let call = CallHeader {
            seq: 1,
            sent_mono_ns: 2,
            payload_len: 0,
            type_hash: 0,
            reply_slot: 3,
            status: 1,
        };
        let mut bad = encode_call(Kind::Response, 1, &call, b"boom");
        let n = bad.len();
        bad[n - 1] = b'!';
        let e = decode_call(&bad, Kind::Response, &ty, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("corrupted on the way"), "{e}");
        // a frame built by hand is accepted once sealed
        seal(&mut bad);
        assert!(decode_call(&bad, Kind::Response, &ty, 1 << 20).is_ok());
    }

    #[test]
    fn a_frame_in_pieces_decodes_like_a_whole_one() {
        let ty = bytes_type();
        let mut p = vec![0u8; ty.elems_offset()];
        p.extend((0..100u8).collect::<Vec<_>>());
        let whole = sample(&p);
        for cuts in [[1, 2], [40, 72], [71, 73], [80, 120]] {
            let pieces = [
                &whole[..cuts[0]],
                &whole[cuts[0]..cuts[1]],
                &whole[cuts[1]..],
            ];
            let f = decode_sample_parts(&pieces, &ty, 1 << 20).unwrap();
            assert_eq!(&shm::words_as_bytes(&f.words)[..p.len()], &p[..]);
        }
        let short = [&whole[..30], &whole[30..60]];
        assert!(matches!(
            decode_sample_parts(&short, &ty, 1 << 20),
            Err(WireError::Truncated { .. })
        ));
    }

    #[test]
    fn calls_round_trip_and_error_texts_are_untyped() {
        let ty = bytes_type();
        let h = CallHeader {
            seq: 5,
            status: 1,
            reply_slot: 3,
            ..Default::default()
        };
        let f = decode_call(
            &encode_call(Kind::Response, 1, &h, b"boom"),
            Kind::Response,
            &ty,
            64,
        )
        .unwrap();
        assert_eq!((f.header.seq, f.header.status, f.elems), (5, 1, 0));
        assert!(decode_call(
            &encode_call(Kind::Response, 1, &h, b"boom"),
            Kind::Request,
            &ty,
            64
        )
        .is_err());
    }
}
