//! The attachment rmw_zenoh puts on every sample, request and reply, and the GID it
//! carries.
//!
//! ```text
//! | sequence number: i64 LE | source timestamp (ns since the UNIX epoch): i64 LE | GID length: u8 (16) | GID: 16 bytes |
//! ```
//!
//! (zenoh-cpp's `ext::Serializer` writes the GID array with a LEB128 length, which for
//! 16 is the single byte `0x10`.) An entity's GID is the XXH3-128 hash of its liveliness
//! token's key expression, low 64 bits then high 64 bits, each little-endian
//! (`liveliness::Entity` in `rmw_zenoh_cpp`).

use std::fmt;

/// The length of a GID (`RMW_GID_STORAGE_SIZE`).
pub const GID_LEN: usize = 16;

/// The 16-byte global id of a publisher, subscription, service or client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Gid(pub [u8; GID_LEN]);

impl Gid {
    /// The GID rmw_zenoh gives the entity whose liveliness token has key expression
    /// `token_key`: XXH3-128 of the key, low then high 64 bits, little-endian.
    pub fn from_token_key(token_key: &str) -> Gid {
        Gid(twox_hash::XxHash3_128::oneshot(token_key.as_bytes()).to_le_bytes())
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8; GID_LEN] {
        &self.0
    }
}

impl fmt::Display for Gid {
    /// Lowercase hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// What is wrong with an attachment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AttachmentError {
    /// The sample has no attachment at all (it was not sent by rmw_zenoh).
    #[error("no attachment (not sent by rmw_zenoh)")]
    Missing,
    /// Shorter than the 17 bytes of sequence number, timestamp and GID length.
    #[error("attachment of {len} bytes is shorter than the 17 before the GID")]
    Truncated {
        /// Its length.
        len: usize,
    },
    /// The GID length byte is not 16.
    #[error("attachment declares a GID of {declared} bytes, rmw_zenoh's GIDs have {GID_LEN}")]
    GidLength {
        /// The length byte.
        declared: u8,
    },
    /// The GID length byte does not match the bytes that follow it.
    #[error("attachment declares a {declared}-byte GID but {remaining} bytes follow")]
    Inconsistent {
        /// The length byte.
        declared: u8,
        /// The bytes after it.
        remaining: usize,
    },
}

/// The attachment of a sample (or request or reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attachment {
    /// The sender's sequence number (each publisher counts from 1).
    pub sequence_number: i64,
    /// When it was sent, in nanoseconds since the UNIX epoch.
    pub source_timestamp_ns: i64,
    /// The sender's GID.
    pub gid: Gid,
}

impl Attachment {
    /// The length of an encoded attachment.
    pub const LEN: usize = 8 + 8 + 1 + GID_LEN;

    /// The bytes rmw_zenoh writes.
    pub fn encode(&self) -> [u8; Attachment::LEN] {
        let mut out = [0u8; Attachment::LEN];
        out[0..8].copy_from_slice(&self.sequence_number.to_le_bytes());
        out[8..16].copy_from_slice(&self.source_timestamp_ns.to_le_bytes());
        out[16] = GID_LEN as u8;
        out[17..].copy_from_slice(&self.gid.0);
        out
    }

    /// Reads an attachment; anything but exactly the 33 bytes rmw_zenoh writes is an
    /// error naming what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<Attachment, AttachmentError> {
        let (Some(seq), Some(ts), Some(&declared)) =
            (bytes.get(0..8), bytes.get(8..16), bytes.get(16))
        else {
            return Err(AttachmentError::Truncated { len: bytes.len() });
        };
        let rest = &bytes[17..];
        if usize::from(declared) != rest.len() {
            return Err(AttachmentError::Inconsistent {
                declared,
                remaining: rest.len(),
            });
        }
        let gid: [u8; GID_LEN] = rest
            .try_into()
            .map_err(|_| AttachmentError::GidLength { declared })?;
        let le = |b: &[u8]| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            i64::from_le_bytes(a)
        };
        Ok(Attachment {
            sequence_number: le(seq),
            source_timestamp_ns: le(ts),
            gid: Gid(gid),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture() -> Vec<u8> {
        let text =
            std::fs::read_to_string("/work/shared/ros2/rmw_zenoh/attachment-real-humble.hex")
                .expect("attachment-real-humble.hex");
        let hex = text.trim();
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    /// attachment-real-humble.hex: decoded, then encoded back byte for byte.
    #[test]
    fn real_humble_attachment_both_ways() {
        let bytes = capture();
        assert_eq!(bytes.len(), Attachment::LEN);
        let a = Attachment::decode(&bytes).unwrap();
        assert_eq!(a.sequence_number, 216);
        assert_eq!(a.source_timestamp_ns, 0x18c4_f862_01e1_da34);
        // a plausible wall clock (2026-07-23)
        assert!(
            (1_700_000_000_000_000_000..1_800_000_000_000_000_000).contains(&a.source_timestamp_ns)
        );
        assert_eq!(a.gid.to_string(), "f07168d3856ce9f689254cbed6252151");
        assert_eq!(a.encode().as_slice(), bytes.as_slice());
    }

    /// The GID in the real attachment is XXH3-128 of the same publisher's real liveliness
    /// token (liveliness-token-real-humble.txt): the two captures agree byte for byte.
    #[test]
    fn real_gid_is_the_hash_of_the_real_token() {
        let token =
            std::fs::read_to_string("/work/shared/ros2/rmw_zenoh/liveliness-token-real-humble.txt")
                .expect("liveliness-token-real-humble.txt");
        let gid = Gid::from_token_key(token.trim());
        assert_eq!(gid, Attachment::decode(&capture()).unwrap().gid);
    }

    #[test]
    fn short_and_inconsistent_input_is_named() {
        let good = capture();
        for len in [0, 1, 8, 16] {
            assert_eq!(
                Attachment::decode(&good[..len]),
                Err(AttachmentError::Truncated { len })
            );
        }
        assert_eq!(
            Attachment::decode(&good[..20]),
            Err(AttachmentError::Inconsistent {
                declared: 16,
                remaining: 3
            })
        );
        let mut long = good.clone();
        long.push(0);
        assert_eq!(
            Attachment::decode(&long),
            Err(AttachmentError::Inconsistent {
                declared: 16,
                remaining: 17
            })
        );
        let mut other = good[..17].to_vec();
        other[16] = 24;
        other.extend_from_slice(&[0; 24]);
        assert_eq!(
            Attachment::decode(&other),
            Err(AttachmentError::GidLength { declared: 24 })
        );
        // a LEB128 continuation byte is not a length rmw_zenoh writes
        let mut cont = good[..17].to_vec();
        cont[16] = 0x80;
        assert!(Attachment::decode(&cont).is_err());
    }

    #[test]
    fn round_trip() {
        let a = Attachment {
            sequence_number: -1,
            source_timestamp_ns: i64::MAX,
            gid: Gid([7; 16]),
        };
        assert_eq!(Attachment::decode(&a.encode()).unwrap(), a);
    }
}
