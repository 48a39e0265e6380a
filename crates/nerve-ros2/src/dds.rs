//! The DDS side: raw CDR samples (no decoding on the way through), QoS in both
//! directions, and ROS 2's topic and type naming on DDS.

use nerve_ros2_types::{CDR_BE_HEADER, CDR_LE_HEADER};
use rustdds::no_key::{Decode, DefaultDecoder, DeserializerAdapter, SerializerAdapter};
use rustdds::{policy, QosPolicies, QosPolicyBuilder, RepresentationIdentifier};

/// The Fast DDS profile ROS 2 nodes that receive large messages from the bridge run with
/// (`FASTDDS_DEFAULT_PROFILES_FILE`): a 4 MiB UDP receive buffer, shared memory kept.
/// Fast DDS's default (the kernel's 208 KiB) overflows under one sample's train of
/// DATA_FRAG datagrams, and most samples over a few hundred KiB are then lost.
pub const FASTDDS_LARGE_DATA_PROFILE: &str = include_str!("../fastdds_large_data.xml");

/// A ROS 2 message as it travels: CDR with its 4-byte encapsulation header.
pub struct RawCdr(pub Vec<u8>);

/// A payload RustDDS handed over in an encoding ROS 2 does not use.
#[derive(Debug, thiserror::Error)]
#[error("a payload in an encoding other than plain CDR (ROS 2 uses CDR_LE/CDR_BE)")]
pub struct NotCdr;

/// Passes CDR through in both directions: the body RustDDS has is prefixed with its
/// encapsulation header on the way in, and stripped of it on the way out.
pub struct RawAdapter;

/// The decoder RustDDS calls per received sample.
#[derive(Clone)]
pub struct RawDecoder;

impl DeserializerAdapter<RawCdr> for RawAdapter {
    type Error = NotCdr;
    type Decoded = RawCdr;

    fn supported_encodings() -> &'static [RepresentationIdentifier] {
        &[
            RepresentationIdentifier::CDR_LE,
            RepresentationIdentifier::CDR_BE,
        ]
    }

    fn transform_decoded(decoded: RawCdr) -> RawCdr {
        decoded
    }
}

impl DefaultDecoder<RawCdr> for RawAdapter {
    type Decoder = RawDecoder;
    const DECODER: RawDecoder = RawDecoder;
}

impl<'de> Decode<'de, RawCdr> for RawDecoder {
    type Error = NotCdr;

    fn decode_bytes(
        self,
        input: &'de [u8],
        encoding: RepresentationIdentifier,
    ) -> Result<RawCdr, NotCdr> {
        let header = if encoding == RepresentationIdentifier::CDR_LE {
            CDR_LE_HEADER
        } else if encoding == RepresentationIdentifier::CDR_BE {
            CDR_BE_HEADER
        } else {
            return Err(NotCdr);
        };
        let mut bytes = Vec::with_capacity(4 + input.len());
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(input);
        Ok(RawCdr(bytes))
    }
}

impl SerializerAdapter<RawCdr> for RawAdapter {
    type Error = NotCdr;

    fn output_encoding() -> RepresentationIdentifier {
        RepresentationIdentifier::CDR_LE
    }

    fn to_bytes(value: &RawCdr) -> Result<rustdds::bytes::Bytes, NotCdr> {
        match value.0.get(..4) {
            Some(h) if h[..2] == CDR_LE_HEADER[..2] => {
                Ok(rustdds::bytes::Bytes::copy_from_slice(&value.0[4..]))
            }
            _ => Err(NotCdr),
        }
    }
}

/// The DDS topic of ROS 2 topic `name` (`/ns/topic` → `rt/ns/topic`).
pub fn topic_dds_name(name: &str) -> String {
    format!("rt{name}")
}

/// The ROS 2 topic of DDS topic `dds` (`rt/ns/topic` → `/ns/topic`), if it is one.
pub fn topic_ros_name(dds: &str) -> Option<&str> {
    dds.strip_prefix("rt").filter(|n| n.starts_with('/'))
}

/// Samples a bridge's reliable DDS writer keeps unacknowledged at most: a write beyond
/// waits up to [`WRITE_BLOCK`] for the ROS 2 subscriptions to acknowledge, and is then
/// refused (the bridge counts the sample as not delivered and names the topic). Without
/// the bound RustDDS keeps up to 8192 samples per writer for a slow subscription.
pub const WRITER_WINDOW: usize = 32;

/// How long a write waits for room in [`WRITER_WINDOW`].
pub const WRITE_BLOCK: std::time::Duration = std::time::Duration::from_millis(100);

/// QoS settings of one endpoint, in the terms both sides share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RosQos {
    /// Reliable (or best effort).
    pub reliable: bool,
    /// Transient local (late joiners get the last `depth` samples) or volatile.
    pub transient_local: bool,
    /// Keep-last depth.
    pub depth: usize,
}

impl Default for RosQos {
    /// ROS 2's default for topics: reliable, volatile, keep last 10.
    fn default() -> Self {
        RosQos {
            reliable: true,
            transient_local: false,
            depth: 10,
        }
    }
}

impl RosQos {
    /// The QoS an endpoint announced in discovery.
    pub fn of(qos: &QosPolicies) -> RosQos {
        RosQos {
            reliable: qos.is_reliable(),
            transient_local: matches!(
                qos.durability(),
                Some(
                    policy::Durability::TransientLocal
                        | policy::Durability::Transient
                        | policy::Durability::Persistent
                )
            ),
            depth: match qos.history() {
                Some(policy::History::KeepLast { depth }) => depth.max(1) as usize,
                _ => RosQos::default().depth,
            },
        }
    }

    /// As DDS policies, with the samples a writer keeps unacknowledged bounded
    /// ([`WRITER_WINDOW`], or the depth where it is larger).
    pub fn policies(&self) -> QosPolicies {
        let window = self.depth.max(WRITER_WINDOW).min(i32::MAX as usize) as i32;
        QosPolicyBuilder::new()
            .reliability(if self.reliable {
                policy::Reliability::Reliable {
                    max_blocking_time: rustdds::Duration::from_std(WRITE_BLOCK),
                }
            } else {
                policy::Reliability::BestEffort
            })
            .durability(if self.transient_local {
                policy::Durability::TransientLocal
            } else {
                policy::Durability::Volatile
            })
            .history(policy::History::KeepLast {
                depth: self.depth.min(i32::MAX as usize) as i32,
            })
            .resource_limits(policy::ResourceLimits {
                max_samples: window,
                max_instances: 1,
                max_samples_per_instance: window,
            })
            .build()
    }

    /// The Nerve QoS of a topic fed by ROS 2 publishers with this QoS: transient local
    /// becomes history for late joiners, reliable becomes back-pressure.
    pub fn nerve(&self) -> nerve::Qos {
        let base = if self.reliable {
            nerve::Qos::reliable()
        } else {
            nerve::Qos::sensor()
        };
        let depth = self.depth.clamp(1, nerve::Qos::GUARANTEED_DEPTH);
        let floor = base.depth;
        base.depth(depth.max(floor))
            .history(if self.transient_local { depth } else { 0 })
    }

    /// The ROS 2 QoS a bridge offers for a Nerve topic with `qos`: always reliable (a
    /// reliable writer serves best-effort and reliable subscriptions alike, so no ROS 2
    /// subscription is starved by an offer below its request), transient local where the
    /// Nerve topic keeps history for late joiners.
    pub fn from_nerve(qos: &nerve::Qos) -> RosQos {
        let transient_local = qos.history > 0;
        RosQos {
            reliable: true,
            transient_local,
            // a volatile writer keeps a window of samples to repair from (a large sample
            // lost in part is sent again from it); a transient local one keeps what late
            // joiners get
            depth: if transient_local {
                qos.history.max(1)
            } else {
                WRITER_WINDOW
            },
        }
    }
}

/// Nanoseconds since the Unix epoch of a DDS time stamp.
pub fn timestamp_ns(t: rustdds::Timestamp) -> i64 {
    let ticks = t.to_ticks();
    let secs = (ticks >> 32) as i64;
    let frac = ((ticks & 0xffff_ffff) * 1_000_000_000) >> 32;
    secs.saturating_mul(1_000_000_000)
        .saturating_add(frac as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_map_one_to_one() {
        assert_eq!(topic_dds_name("/ns/chatter"), "rt/ns/chatter");
        assert_eq!(topic_ros_name("rt/ns/chatter"), Some("/ns/chatter"));
        assert_eq!(topic_ros_name("rq/add_two_intsRequest"), None);
        assert_eq!(topic_ros_name("ros_discovery_info"), None);
    }

    #[test]
    fn qos_round_trips_through_dds_policies() {
        for q in [
            RosQos::default(),
            RosQos {
                reliable: false,
                transient_local: true,
                depth: 3,
            },
        ] {
            assert_eq!(RosQos::of(&q.policies()), q);
        }
        let latched = RosQos {
            reliable: true,
            transient_local: true,
            depth: 1,
        };
        assert_eq!(latched.nerve().history, 1);
        assert!(RosQos::from_nerve(&latched.nerve()).transient_local);
    }

    #[test]
    fn raw_cdr_passes_through() {
        let body = [1u8, 2, 3, 4, 5];
        let raw = RawDecoder
            .decode_bytes(&body, RepresentationIdentifier::CDR_LE)
            .unwrap();
        assert_eq!(&raw.0[..4], &CDR_LE_HEADER);
        assert_eq!(&*RawAdapter::to_bytes(&raw).unwrap(), &body);
        assert!(RawDecoder
            .decode_bytes(&body, RepresentationIdentifier::PL_CDR_LE)
            .is_err());
        assert!(RawAdapter::to_bytes(&RawCdr(vec![0, 0, 0, 0, 1])).is_err());
    }
}
