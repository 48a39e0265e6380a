//! How a Nerve topic is written to and read from a bag: the schema other tools decode
//! and the conversion of each payload.
//!
//! - Standard messages are written as their ROS 2 equivalents (`ros2msg` schema, CDR),
//!   so a bag opens as a ROS 2 bag in Foxglove, `ros2 bag` and `mcap-ros2-support`: the
//!   ROS 2 form is the one the ROS 2 bridge uses, from the one table in
//!   [`nerve_ros2_map::standard`].
//! - Every other type is written as CDR too, with a `ros2msg` schema generated from its
//!   Nerve schema: generic tools decode it field by field, and the payload needs no
//!   conversion, since a Nerve head without padding is already laid out as CDR (see
//!   [`plain`]).
//!
//! - ROS 2 types carried as CDR ([`nerve_msgs::ros2::Ros2Cdr`], what the ROS 2 bridge
//!   and `nerve topic pub` use for types Nerve has no native form of) are written as the
//!   ROS 2 type itself: its name, its `ros2msg` definition, the CDR bytes unchanged (see
//!   [`nerve_ros2_map::carrier`]). Any rosbag2 bag is replayed the same way.
//!
//! Each channel also carries the Nerve schema in its metadata, so a bag is replayed with
//! the exact type it was recorded with.

pub mod foxglove;
pub mod plain;

use crate::BagError;
use nerve::message::schema::Schema;
/// ROS 2 types carried as CDR (their one home is [`nerve_ros2_map::carrier`]).
pub use nerve_ros2_map::carrier as ros2cdr;
use nerve_ros2_map::standard::{self as ros2, Standard};
use nerve_ros2_map::ConvertError;

impl From<ConvertError> for BagError {
    fn from(e: ConvertError) -> BagError {
        let what = match &e {
            ConvertError::DoesNotFit { field, .. } => field.clone(),
            ConvertError::Payload { what, .. } => what.clone(),
            ConvertError::Definition { ros_type, .. } => {
                format!("the ROS 2 definition of {ros_type}")
            }
            ConvertError::Malformed(_) | ConvertError::Encode(_) => "CDR payload".into(),
        };
        let reason = match e {
            ConvertError::DoesNotFit { reason, .. }
            | ConvertError::Payload { reason, .. }
            | ConvertError::Definition { reason, .. } => reason,
            ConvertError::Malformed(e) => e.to_string(),
            ConvertError::Encode(e) => e.to_string(),
        };
        BagError::Convert { what, reason }
    }
}

impl From<nerve_ros2_types::DecodeError> for BagError {
    fn from(e: nerve_ros2_types::DecodeError) -> BagError {
        ConvertError::from(e).into()
    }
}

impl From<nerve_ros2_types::EncodeError> for BagError {
    fn from(e: nerve_ros2_types::EncodeError) -> BagError {
        ConvertError::from(e).into()
    }
}

/// The MCAP message encoding of every channel Nerve writes.
pub const MESSAGE_ENCODING: &str = "cdr";
/// The MCAP schema encoding of every schema Nerve writes.
pub const SCHEMA_ENCODING: &str = "ros2msg";
/// The MCAP message and schema encoding of channels in a Foxglove schema.
pub const PROTOBUF: &str = "protobuf";

/// Which schemas a recording uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schemas {
    /// ROS 2 types (CDR, `ros2msg`) for every channel: ROS 2's tools and Foxglove read
    /// them, and `nerve bag play` replays them.
    #[default]
    Ros2,
    /// Foxglove's own schemas (protobuf) where a message has one (point clouds, images,
    /// laser scans), ROS 2 types for the rest.
    Foxglove,
}

enum Conversion {
    Standard(Standard),
    Plain(Box<plain::Plain>),
    Foxglove(foxglove::Form),
    Ros2(Box<ros2cdr::Ros2Pass>),
}

/// How one topic's type is written: schema name and text, and the payload conversion.
pub struct Encoding {
    /// Schema name in the bag, e.g. `sensor_msgs/msg/Imu`.
    pub schema_name: String,
    /// The schema: `ros2msg` text, or a protobuf `FileDescriptorSet` (Foxglove schemas).
    pub schema_data: Vec<u8>,
    /// How the schema is written (`ros2msg` or `protobuf`).
    pub schema_encoding: &'static str,
    /// How each message is written (`cdr` or `protobuf`).
    pub message_encoding: &'static str,
    conversion: Conversion,
}

impl Encoding {
    /// The encoding of the type `schema` describes: the ROS 2 type itself for a ROS 2
    /// type carried as CDR, its ROS 2 form for a standard message (matched by layout
    /// hash, never by name alone), else CDR of its own layout.
    pub fn for_schema(schema: &Schema) -> Result<Encoding, BagError> {
        if let Some((name, _, definition)) = nerve_msgs::ros2::ros2_type(schema) {
            let pass = ros2cdr::Ros2Pass::new(name, definition)?;
            return Ok(Encoding {
                schema_name: pass.name().to_string(),
                schema_data: definition.as_bytes().to_vec(),
                schema_encoding: SCHEMA_ENCODING,
                message_encoding: MESSAGE_ENCODING,
                conversion: Conversion::Ros2(Box::new(pass)),
            });
        }
        if let Some(std) = ros2::of_nerve(schema.layout_hash) {
            if std.as_laid_out {
                // the payload is written as it is, under the row's ROS 2 name
                return Ok(Encoding {
                    schema_name: std.ros_name.to_string(),
                    schema_data: (std.text)().into_bytes(),
                    schema_encoding: SCHEMA_ENCODING,
                    message_encoding: MESSAGE_ENCODING,
                    conversion: Conversion::Plain(Box::new(plain::Plain::new(schema)?)),
                });
            }
            return Ok(Encoding {
                schema_name: std.ros_name.to_string(),
                schema_data: (std.text)().into_bytes(),
                schema_encoding: SCHEMA_ENCODING,
                message_encoding: MESSAGE_ENCODING,
                conversion: Conversion::Standard(std),
            });
        }
        let plain = plain::Plain::new(schema)?;
        Ok(Encoding {
            schema_name: plain.ros_name(),
            schema_data: plain.text().into_bytes(),
            schema_encoding: SCHEMA_ENCODING,
            message_encoding: MESSAGE_ENCODING,
            conversion: Conversion::Plain(Box::new(plain)),
        })
    }

    /// The encoding of `schema` in the given schemas: with [`Schemas::Foxglove`], the
    /// Foxglove form where the message has one, else [`Encoding::for_schema`].
    pub fn for_schema_in(schema: &Schema, schemas: Schemas) -> Result<Encoding, BagError> {
        if schemas == Schemas::Foxglove {
            if let Some(form) = foxglove::form(schema.layout_hash) {
                return Ok(Encoding {
                    schema_name: form.name.clone(),
                    schema_data: form.data.clone(),
                    schema_encoding: PROTOBUF,
                    message_encoding: PROTOBUF,
                    conversion: Conversion::Foxglove(form),
                });
            }
        }
        Encoding::for_schema(schema)
    }

    /// The Nerve schema of a standard message known by its ROS 2 name (to replay bags
    /// that other tools wrote): only a Nerve type that holds the ROS 2 message exactly
    /// (the same choice as the ROS 2 bridge's default); `None` where there is none, and
    /// the type is replayed as its CDR.
    pub fn nerve_schema_of_ros(ros_name: &str) -> Option<Schema> {
        ros2::of_ros(ros_name, &[]).map(|s| (s.schema)())
    }

    /// Whether payloads are written as they are (only the CDR header and a sequence
    /// length are added).
    pub fn is_zero_conversion(&self) -> bool {
        matches!(self.conversion, Conversion::Plain(_))
    }

    /// The time a payload's source stamped it, where the type carries one (a ROS 2 type
    /// carried as CDR; rosbag2 writes it as the MCAP publish time).
    pub fn source_stamp(&self, payload: &[u8]) -> Option<u64> {
        match &self.conversion {
            Conversion::Ros2(_) => ros2cdr::source_stamp(payload),
            _ => None,
        }
    }

    /// Writes the CDR form of a Nerve payload into `out` (cleared first).
    pub fn encode(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), BagError> {
        match &self.conversion {
            Conversion::Standard(s) => (s.encode)(payload, out).map_err(|e| standard_error(s, e)),
            Conversion::Plain(p) => p.encode(payload, out),
            Conversion::Foxglove(f) => f.encode(payload, out),
            Conversion::Ros2(r) => Ok(r.encode(payload, out)?),
        }
    }

    /// Writes the Nerve payload a CDR message holds into `out` (cleared first); a ROS 2
    /// type carried as CDR gets no source time stamp (see [`Encoding::decode_stamped`]).
    pub fn decode(&self, cdr: &[u8], out: &mut Vec<u8>) -> Result<(), BagError> {
        self.decode_stamped(cdr, 0, out)
    }

    /// Like [`Encoding::decode`], with the message's source time stamp (ns since the Unix
    /// epoch), which a ROS 2 type carried as CDR holds in its head.
    pub fn decode_stamped(
        &self,
        cdr: &[u8],
        source_stamp_ns: i64,
        out: &mut Vec<u8>,
    ) -> Result<(), BagError> {
        match &self.conversion {
            Conversion::Standard(s) => (s.decode)(cdr, out).map_err(|e| standard_error(s, e)),
            Conversion::Plain(p) => p.decode(cdr, out),
            Conversion::Ros2(r) => Ok(r.decode(cdr, source_stamp_ns, out)?),
            Conversion::Foxglove(f) => Err(BagError::Convert {
                what: f.name.clone(),
                reason: "a Foxglove schema is written, not read back (record with ROS 2 \
                         schemas to replay)"
                    .into(),
            }),
        }
    }
}

/// A conversion error of a standard message, naming its ROS 2 type.
fn standard_error(s: &Standard, e: ConvertError) -> BagError {
    match BagError::from(e) {
        BagError::Convert { what, reason } => BagError::Convert {
            what: format!("{} {what}", s.ros_name),
            reason,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nerve::message::as_bytes;
    use nerve::Message;
    use nerve::TypeInfo;
    use nerve_msgs::*;

    fn round_trip<M: Message>(payload: &[u8]) -> Vec<u8> {
        let enc = Encoding::for_schema(&Schema::of::<M>()).unwrap();
        let mut cdr = Vec::new();
        enc.encode(payload, &mut cdr).unwrap();
        let mut back = Vec::new();
        enc.decode(&cdr, &mut back).unwrap();
        assert_eq!(back, payload, "{}", enc.schema_name);
        cdr
    }

    fn slice_payload<M: Message>(head: &M, elems: &[u8]) -> Vec<u8> {
        let ty = TypeInfo::of::<M>();
        let mut p = as_bytes(head).to_vec();
        p.resize(ty.elems_offset(), 0);
        p.extend_from_slice(elems);
        p
    }

    #[test]
    fn standard_messages_round_trip_through_their_ros2_form() {
        let imu = Imu {
            stamp: Time {
                nanos: 1_700_000_000_123_456_789,
            },
            orientation_covariance: [1.5; 9],
            ..Default::default()
        };
        let cdr = round_trip::<Imu>(as_bytes(&imu));
        // header: stamp (8) + empty frame_id (4 + 1), then 3 bytes of padding before the
        // 8-aligned quaternion: 4 + 13 + 3 + 32 + 72 + 24 + 72 + 24 + 72
        assert_eq!(cdr.len(), 4 + 16 + 32 + 72 * 3 + 48);
        let mut odom = Odometry::default();
        odom.header.frame_id = FrameId::new("odom").unwrap();
        odom.child_frame_id = FrameId::new("base_link").unwrap();
        odom.pose_covariance[35] = 7.0;
        round_trip::<Odometry>(as_bytes(&odom));
        let cmd = CmdVel {
            stamp: Time { nanos: -5 },
            linear: 0.25,
            angular: -1.5,
        };
        round_trip::<CmdVel>(as_bytes(&cmd));
        let bat = BatteryState {
            cell_count: 3,
            cell_voltage: [
                3.7, 3.8, 3.9, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            ],
            present: 1,
            ..Default::default()
        };
        round_trip::<BatteryState>(as_bytes(&bat));
        let mut cloud = PointCloud {
            width: 3,
            height: 1,
            point_step: 4,
            row_step: 12,
            ..Default::default()
        };
        cloud
            .set_fields(&[PointCloud::field("x", 0, datatype::FLOAT32, 1)])
            .unwrap();
        let data: Vec<u8> = (0..12).collect();
        round_trip::<PointCloud>(&slice_payload(&cloud, &data));
        let scan = LaserScan {
            intensity_count: 2,
            ..Default::default()
        };
        let ranges: Vec<u8> = (0..16).collect();
        round_trip::<LaserScan>(&slice_payload(&scan, &ranges));
        let img = Image {
            width: 2,
            height: 2,
            step: 2,
            encoding: FixedStr::new("mono8").unwrap(),
            ..Default::default()
        };
        round_trip::<Image>(&slice_payload(&img, &[1, 2, 3, 4]));
        let tw = Twist {
            linear: Vector3 {
                x: 1.0,
                y: 2.0,
                z: 3.0,
            },
            ..Default::default()
        };
        let cdr = round_trip::<Twist>(as_bytes(&tw));
        assert_eq!(&cdr[4..], as_bytes(&tw), "Twist is written as it is");
        let mut ts = TwistStamped::default();
        ts.header.frame_id = FrameId::new("camera_color_optical_frame").unwrap();
        ts.twist.angular.x = 0.1;
        round_trip::<TwistStamped>(as_bytes(&ts));
    }

    #[test]
    fn malformed_cdr_is_an_error_not_a_panic() {
        let enc = Encoding::for_schema(&Schema::of::<PointCloud>()).unwrap();
        let mut cdr = Vec::new();
        let cloud = PointCloud::default();
        enc.encode(&slice_payload(&cloud, &[9; 64]), &mut cdr)
            .unwrap();
        let mut out = Vec::new();
        for cut in 0..cdr.len() {
            assert!(enc.decode(&cdr[..cut], &mut out).is_err(), "cut at {cut}");
        }
        // a data length that lies
        let mut bad = cdr.clone();
        let at = bad.len() - 64 - 1 - 4;
        bad[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(enc.decode(&bad, &mut out).is_err());
        // a stamp out of builtin_interfaces/Time's range cannot be written
        let imu = Imu {
            stamp: Time { nanos: i64::MAX },
            ..Default::default()
        };
        let enc = Encoding::for_schema(&Schema::of::<Imu>()).unwrap();
        assert!(enc.encode(as_bytes(&imu), &mut cdr).is_err());
    }

    #[test]
    fn tf_messages_are_tf2_msgs_tfmessage() {
        let mut a = TransformStamped::default();
        a.header.stamp = Time {
            nanos: 1_700_000_000_000_000_005,
        };
        a.header.frame_id = FrameId::new("map").unwrap();
        a.child_frame_id = FrameId::new("odom").unwrap();
        a.transform.translation.x = 1.5;
        let mut b = a;
        b.header.frame_id = FrameId::new("base_link").unwrap();
        b.child_frame_id = FrameId::new("lidar").unwrap();
        b.transform.rotation = Quaternion {
            x: 0.0,
            y: 0.0,
            z: std::f64::consts::FRAC_1_SQRT_2,
            w: std::f64::consts::FRAC_1_SQRT_2,
        };
        let elems: Vec<u8> = [a, b].iter().flat_map(|t| as_bytes(t).to_vec()).collect();
        let cdr = round_trip::<TfMessage>(&slice_payload(&TfMessage {}, &elems));
        let enc = Encoding::for_schema(&Schema::of::<TfMessage>()).unwrap();
        assert_eq!(enc.schema_name, "tf2_msgs/msg/TFMessage");
        let text = String::from_utf8(enc.schema_data.clone()).unwrap();
        assert!(text.starts_with("geometry_msgs/TransformStamped[] transforms\n"));
        assert!(text.contains("MSG: geometry_msgs/Transform\n"));
        // CDR: header, count 2, then the first stamp (sec, nanosec) and "map"
        assert_eq!(&cdr[4..8], &2u32.to_le_bytes());
        assert_eq!(&cdr[8..12], &1_700_000_000i32.to_le_bytes());
        assert_eq!(&cdr[12..16], &5u32.to_le_bytes());
        assert_eq!(&cdr[16..24], b"\x04\0\0\0map\0");
        assert_eq!(
            Encoding::nerve_schema_of_ros("tf2_msgs/msg/TFMessage").map(|s| s.name),
            Some("nerve_msgs/TfMessage".to_string())
        );
        // an empty message, and a cut one
        round_trip::<TfMessage>(&slice_payload(&TfMessage {}, &[]));
        let mut out = Vec::new();
        for cut in 0..cdr.len() {
            assert!(enc.decode(&cdr[..cut], &mut out).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn lifecycle_transition_events_are_lifecycle_msgs() {
        use nerve_msgs::lifecycle::{State, Transition, TransitionEvent};
        let label = |s: &str| FixedStr::new(s).unwrap();
        let ev = TransitionEvent {
            timestamp: 7,
            transition: Transition {
                id: 1,
                label: label("configure"),
            },
            start_state: State {
                id: 1,
                label: label("unconfigured"),
            },
            goal_state: State {
                id: 10,
                label: label("configuring"),
            },
        };
        let cdr = round_trip::<TransitionEvent>(as_bytes(&ev));
        let enc = Encoding::for_schema(&Schema::of::<TransitionEvent>()).unwrap();
        assert_eq!(enc.schema_name, "lifecycle_msgs/msg/TransitionEvent");
        // header, u64 timestamp, id 1, padding, "configure" with its length
        assert_eq!(&cdr[4..12], &7u64.to_le_bytes());
        assert_eq!(&cdr[12..30], b"\x01\0\0\0\x0a\0\0\0configure\0");
        let mut out = Vec::new();
        for cut in 0..cdr.len() {
            assert!(enc.decode(&cdr[..cut], &mut out).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn ros_names_lead_back_to_nerve_types() {
        let s = Encoding::nerve_schema_of_ros("sensor_msgs/msg/PointCloud2").unwrap();
        assert_eq!(s.name, "nerve_msgs/PointCloud");
        let s = Encoding::nerve_schema_of_ros("geometry_msgs/Twist").unwrap();
        assert_eq!(s.name, "nerve_msgs/Twist");
        // the exact form, as the ROS 2 bridge chooses: never the planar CmdVel
        let s = Encoding::nerve_schema_of_ros("geometry_msgs/msg/TwistStamped").unwrap();
        assert_eq!(s.name, "nerve_msgs/TwistStamped");
        // Nerve's Imu has no frame id: a ROS 2 Imu is replayed as its CDR
        assert!(Encoding::nerve_schema_of_ros("sensor_msgs/msg/Imu").is_none());
        assert!(Encoding::nerve_schema_of_ros("std_msgs/msg/String").is_none());
    }
}
