//! The DDS side: raw CDR samples (no decoding on the way through), QoS in both
//! directions, and ROS 2's topic and type naming on DDS; [`DdsSide`] is the engine's
//! [`crate::engine::RosSide`] on DDS.

mod nodes;
pub(crate) mod services;
pub mod side;

pub use side::DdsSide;

/// The state of a DDS bridge's threads.
pub(crate) type Shared = crate::engine::Shared<DdsSide>;

/// The threads of a DDS bridge: the engine's topics, services, actions, parameters and
/// graph, and (on DDS only so far) the bridge's type descriptions.
pub(crate) const HALVES: [(&str, crate::engine::Half<DdsSide>); 7] = [
    ("ros2-to-nerve", |s, c, n| {
        let h = crate::engine::topics::inbound::Inbound::new(s, c, n)?;
        Ok(Box::new(move || h.run()))
    }),
    ("nerve-to-ros2", |s, c, n| {
        let h = crate::engine::topics::outbound::Outbound::new(s, c, n)?;
        Ok(Box::new(move || h.run()))
    }),
    ("services", |s, c, n| {
        let h = crate::engine::services::Services::new(s, c, n)?;
        Ok(Box::new(move || h.run()))
    }),
    ("actions", |s, c, n| {
        let h = crate::engine::actions::Actions::new(s, c, n)?;
        Ok(Box::new(move || h.run()))
    }),
    ("params", |s, c, n| {
        let h = crate::engine::params::Params::new(s, c, n)?;
        Ok(Box::new(move || h.run()))
    }),
    // get_type_description on the bridge's ROS 2 node (REP-2016)
    ("types", |s, c, n| {
        let name = format!("/{}", crate::ros_node_base());
        let h = crate::type_description::Describer::new(s, c, n, &name)?;
        Ok(Box::new(move || h.run()))
    }),
    ("graph", |s, c, n| {
        let h = crate::engine::graph::GraphHalf::new(s, c, n);
        Ok(Box::new(move || h.run()))
    }),
];

use nerve_ros2_types::{CDR_BE_HEADER, CDR_LE_HEADER};
use rustdds::no_key::{Decode, DefaultDecoder, DeserializerAdapter, SerializerAdapter};
use rustdds::{policy, QosPolicies, QosPolicyBuilder, RepresentationIdentifier};

/// The Fast DDS profile ROS 2 nodes that receive large messages from the bridge run with
/// (`FASTDDS_DEFAULT_PROFILES_FILE`): a 4 MiB UDP receive buffer, shared memory kept.
/// Fast DDS's default (the kernel's 208 KiB) overflows under one sample's train of
/// DATA_FRAG datagrams, and most samples over a few hundred KiB are then lost.
pub const FASTDDS_LARGE_DATA_PROFILE: &str = include_str!("../../fastdds_large_data.xml");

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

/// Keyed ROS 2 topics (`@key` members, e.g. Kilted's `test_msgs/msg/KeyedLong`) are read
/// as one instance: Nerve topics carry samples, not instances, and every sample still
/// holds its key members, so nothing is lost on the way in. The key is `()` because the
/// `@key` members are not known here (REP-2016 type descriptions carry none); RustDDS
/// then keeps one history for the topic, as for a no-key one. No keyed writer of
/// [`RawCdr`] exists (there is no keyed [`SerializerAdapter`]), so no key hash is ever
/// sent from this.
impl rustdds::Keyed for RawCdr {
    type K = ();

    fn key(&self) {}
}

impl rustdds::with_key::DeserializerAdapter<RawCdr> for RawAdapter {
    type DecodedKey = ();

    fn transform_decoded_key(decoded_key: ()) {
        decoded_key
    }
}

impl rustdds::with_key::DefaultDecoder<RawCdr> for RawAdapter {
    type Decoder = RawDecoder;
    const DECODER: RawDecoder = RawDecoder;
}

impl<'de> rustdds::with_key::Decode<'de, RawCdr, ()> for RawDecoder {
    /// A serialized key (a dispose) of a keyed topic: the one instance.
    fn decode_key_bytes(self, _: &'de [u8], _: RepresentationIdentifier) -> Result<(), NotCdr> {
        Ok(())
    }
}

/// Whether a discovered DDS endpoint (writer or reader) is of a keyed topic: its entity
/// kind says so (RTPS 9.3.1.2), and a DDS implementation matches it only with endpoints
/// of the same kind (Fast DDS: "inconsistent topic").
pub fn is_keyed(endpoint: rustdds::GUID) -> bool {
    // the low nibble: 0x02 writer with key, 0x07 reader with key (user-defined or built-in)
    matches!(u8::from(endpoint.entity_id.entity_kind) & 0x0f, 0x02 | 0x07)
}

/// Why a keyed ROS 2 subscription of `topic` (type `ros_type`) gets nothing from the
/// bridge: a Fast DDS reader of a keyed topic takes a sample only with its key hash, which
/// the bridge cannot compute (the `@key` members are in no ROS 2 type description, and
/// RustDDS sends none with a sample), and a no-key writer it does not match at all.
pub fn keyed_subscription_refused(topic: &str, ros_type: &str) -> String {
    format!(
        "a ROS 2 subscription reads {topic} as a keyed DDS topic ({ros_type} has @key \
         members): the bridge writes no-key topics to ROS 2 (a keyed reader takes a sample \
         only with its key hash, and no ROS 2 type description names the members to hash), \
         so it receives nothing"
    )
}

/// A DDS reader of a ROS 2 topic, no-key or keyed (read as one instance: see
/// [`RawCdr`]'s `Keyed`).
pub enum TopicReader {
    /// A no-key topic (every ROS 2 type without `@key` members).
    NoKey(rustdds::no_key::DataReader<RawCdr, RawAdapter>),
    /// A keyed topic.
    Keyed(rustdds::with_key::DataReader<RawCdr, RawAdapter>),
}

/// One sample taken from a [`TopicReader`].
pub struct Taken {
    /// The sample; `None` for a keyed topic's dispose or unregister (no data).
    pub value: Option<RawCdr>,
    /// The writer that sent it.
    pub writer: rustdds::GUID,
    /// Its source time stamp, if it had one.
    pub stamp: Option<rustdds::Timestamp>,
}

impl TopicReader {
    /// The next sample not yet taken.
    pub fn take_next(&mut self) -> rustdds::dds::result::ReadResult<Option<Taken>> {
        Ok(match self {
            TopicReader::NoKey(r) => r.take_next_sample()?.map(|s| {
                let info = s.sample_info();
                let (writer, stamp) = (info.writer_guid(), info.source_timestamp());
                Taken {
                    value: Some(s.into_value()),
                    writer,
                    stamp,
                }
            }),
            TopicReader::Keyed(r) => r.take_next_sample()?.map(|s| {
                let info = s.sample_info();
                let (writer, stamp) = (info.writer_guid(), info.source_timestamp());
                Taken {
                    value: s.into_value().value(),
                    writer,
                    stamp,
                }
            }),
        })
    }
}

impl rustdds::mio1::event::Source for TopicReader {
    fn register(
        &mut self,
        registry: &rustdds::mio1::Registry,
        token: rustdds::mio1::Token,
        interests: rustdds::mio1::Interest,
    ) -> std::io::Result<()> {
        match self {
            TopicReader::NoKey(r) => r.register(registry, token, interests),
            TopicReader::Keyed(r) => r.register(registry, token, interests),
        }
    }

    fn reregister(
        &mut self,
        registry: &rustdds::mio1::Registry,
        token: rustdds::mio1::Token,
        interests: rustdds::mio1::Interest,
    ) -> std::io::Result<()> {
        match self {
            TopicReader::NoKey(r) => r.reregister(registry, token, interests),
            TopicReader::Keyed(r) => r.reregister(registry, token, interests),
        }
    }

    fn deregister(&mut self, registry: &rustdds::mio1::Registry) -> std::io::Result<()> {
        match self {
            TopicReader::NoKey(r) => r.deregister(registry),
            TopicReader::Keyed(r) => r.deregister(registry),
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
    fn the_entity_kind_says_whether_an_endpoint_is_of_a_keyed_topic() {
        let guid = |kind: u8| {
            let mut b = [7u8; 16];
            b[15] = kind;
            rustdds::GUID::from_bytes(b)
        };
        // RTPS 9.3.1.2: writer with key 0x02, no key 0x03; reader with key 0x07, no key
        // 0x04; the high nibble 0xc0 marks built-in endpoints
        for keyed in [0x02, 0x07, 0xc2, 0xc7] {
            assert!(is_keyed(guid(keyed)), "{keyed:#x}");
        }
        for no_key in [0x03, 0x04, 0xc3, 0xc4, 0x01, 0xc1] {
            assert!(!is_keyed(guid(no_key)), "{no_key:#x}");
        }
    }

    #[test]
    fn a_keyed_topic_is_read_as_one_instance_with_its_samples_unchanged() {
        use rustdds::with_key::Decode as _;
        use rustdds::Keyed as _;
        let body = [9u8, 0, 0, 0, 42, 0, 0, 0];
        let raw = <RawDecoder as rustdds::no_key::Decode<'_, RawCdr>>::decode_bytes(
            RawDecoder,
            &body,
            RepresentationIdentifier::CDR_LE,
        )
        .unwrap();
        assert_eq!(&raw.0[4..], &body);
        // every sample and every serialized key (a dispose) is the one instance
        assert_eq!(raw.key(), ());
        assert_eq!(
            RawDecoder
                .decode_key_bytes(&body, RepresentationIdentifier::CDR_BE)
                .unwrap(),
            ()
        );
    }

    #[test]
    fn the_refusal_of_a_keyed_subscription_names_topic_and_type() {
        let why = keyed_subscription_refused("/k", "test_msgs/msg/KeyedLong");
        assert!(
            why.contains("reads /k as a keyed DDS topic (test_msgs/msg/KeyedLong"),
            "{why}"
        );
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
