//! Standard robotics messages for Nerve, laid out for shared memory.
//!
//! Fixed-size messages (`CmdVel` 16 B, `BatteryState` 104 B, `Imu` 304 B, `Odometry`
//! 736 B) are plain `#[repr(C)]` data placed directly in shared memory. `LaserScan`,
//! `PointCloud` and `Image` are header + slice messages: a fixed head followed by a
//! variable-length array loaned at the needed length and written in place.
//!
//! Sizes of the fixed messages match the HORUS benchmark messages (seeds/004) so that
//! the benchmark compares like with like; the size is asserted at compile time.
#![warn(missing_docs)]

pub mod action;
pub mod erased;
pub mod lifecycle;
pub mod ros2;
pub mod srv;

use nerve::{Message, Pod};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_big_array::BigArray;

/// A point in time: nanoseconds since the Unix epoch (wall clock) or since boot
/// (monotonic), as the producer documents.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Pod, Serialize, Deserialize,
)]
#[repr(C)]
pub struct Time {
    /// Nanoseconds.
    pub nanos: i64,
}

impl Time {
    /// The current wall-clock time.
    pub fn now() -> Time {
        Time {
            nanos: nerve::wall_ns(),
        }
    }
    /// Seconds as floating point.
    pub fn as_secs_f64(&self) -> f64 {
        self.nanos as f64 * 1e-9
    }
}

/// A fixed-capacity, NUL-padded UTF-8 name (frame ids, field names, encodings).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct FixedStr<const N: usize>(pub [u8; N]);

// The derive does not support generics, so FixedStr implements Pod by hand.
// SAFETY: a single byte array: no padding, every bit pattern valid.
unsafe impl<const N: usize> nerve::Pod for FixedStr<N> {
    const LAYOUT_HASH: u64 = <[u8; N] as nerve::Pod>::LAYOUT_HASH ^ 0x5354_5221;
}

impl<const N: usize> Default for FixedStr<N> {
    fn default() -> Self {
        FixedStr([0; N])
    }
}

impl<const N: usize> FixedStr<N> {
    /// Builds from text; fails if it does not fit.
    pub fn new(s: &str) -> Result<Self, String> {
        if s.len() > N {
            return Err(format!("{s:?} is longer than {N} bytes"));
        }
        let mut b = [0; N];
        b[..s.len()].copy_from_slice(s.as_bytes());
        Ok(FixedStr(b))
    }
    /// The text up to the first NUL (invalid UTF-8 is replaced).
    pub fn as_str(&self) -> std::borrow::Cow<'_, str> {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(N);
        String::from_utf8_lossy(&self.0[..end])
    }
}

impl<const N: usize> std::fmt::Debug for FixedStr<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl<const N: usize> Serialize for FixedStr<N> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_str())
    }
}

impl<'de, const N: usize> Deserialize<'de> for FixedStr<N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        FixedStr::new(&s).map_err(serde::de::Error::custom)
    }
}

/// Coordinate frame name, at most 64 bytes (room for names such as
/// `camera_color_optical_frame` or a namespaced `robot_3/front_lidar_link`; ROS 2 has no
/// limit, and a longer one is refused by name wherever it would be cut).
pub type FrameId = FixedStr<64>;

/// Standard header: when and in which frame the data was taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Serialize, Deserialize)]
#[repr(C)]
pub struct Header {
    /// Acquisition time.
    pub stamp: Time,
    /// Coordinate frame.
    pub frame_id: FrameId,
}

/// A 3-vector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Serialize, Deserialize)]
#[repr(C)]
pub struct Vector3 {
    /// x
    pub x: f64,
    /// y
    pub y: f64,
    /// z
    pub z: f64,
}

/// A rotation quaternion.
#[derive(Clone, Copy, Debug, PartialEq, Pod, Serialize, Deserialize)]
#[repr(C)]
pub struct Quaternion {
    /// x
    pub x: f64,
    /// y
    pub y: f64,
    /// z
    pub z: f64,
    /// w
    pub w: f64,
}

impl Default for Quaternion {
    fn default() -> Self {
        Quaternion {
            x: 0.0,
            y: 0.0,
            z: 0.0,
            w: 1.0,
        }
    }
}

/// Where a child frame is in its parent (like geometry_msgs/Transform): a point `p` of the
/// child is `rotation * p + translation` in the parent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Serialize, Deserialize)]
#[repr(C)]
pub struct Transform {
    /// The child's origin in the parent, m.
    pub translation: Vector3,
    /// The child's orientation in the parent (a unit quaternion).
    pub rotation: Quaternion,
}

/// A child frame's transform in its parent at a time (like
/// geometry_msgs/TransformStamped): `header.frame_id` is the parent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Serialize, Deserialize)]
#[repr(C)]
pub struct TransformStamped {
    /// When, and the parent frame.
    pub header: Header,
    /// The child frame.
    pub child_frame_id: FrameId,
    /// The child in the parent.
    pub transform: Transform,
}

/// Transforms broadcast together on `/tf` or `/tf_static` (like tf2_msgs/TFMessage):
/// the slice holds the `TransformStamped`s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/TfMessage", elem = TransformStamped)]
pub struct TfMessage {}

/// Position and orientation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Serialize, Deserialize)]
#[repr(C)]
pub struct Pose {
    /// Position.
    pub position: Vector3,
    /// Orientation.
    pub orientation: Quaternion,
}

/// Linear and angular velocity (48 B).
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/Twist")]
pub struct Twist {
    /// m/s
    pub linear: Vector3,
    /// rad/s
    pub angular: Vector3,
}

/// A velocity in a frame at a time (like geometry_msgs/TwistStamped; 120 B): the exact
/// Nerve form of a ROS 2 `TwistStamped` (every field at full precision, where
/// [`CmdVel`] keeps only the planar part in `f32`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/TwistStamped")]
pub struct TwistStamped {
    /// When, and the frame the velocity is given in.
    pub header: Header,
    /// Linear (m/s) and angular (rad/s) velocity.
    pub twist: Twist,
}

/// Velocity command for a planar base (16 B).
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/CmdVel")]
pub struct CmdVel {
    /// When the command was issued.
    pub stamp: Time,
    /// Forward velocity, m/s.
    pub linear: f32,
    /// Yaw rate, rad/s.
    pub angular: f32,
}

/// Simulation time (8 B), as `nerve bag play --clock` publishes it on `/clock`; its ROS 2
/// form is `rosgraph_msgs/msg/Clock`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/Clock")]
pub struct Clock {
    /// The current simulation time (the recorded time of the bag being replayed).
    pub clock: Time,
}

/// Battery status (104 B).
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/BatteryState")]
pub struct BatteryState {
    /// Measurement time.
    pub stamp: Time,
    /// Volts.
    pub voltage: f32,
    /// Degrees Celsius.
    pub temperature: f32,
    /// Amperes (negative when discharging).
    pub current: f32,
    /// Ah.
    pub charge: f32,
    /// Ah.
    pub capacity: f32,
    /// Ah.
    pub design_capacity: f32,
    /// 0..1.
    pub percentage: f32,
    /// Charging status (ROS power_supply_status codes).
    pub power_supply_status: u8,
    /// Health (ROS power_supply_health codes).
    pub power_supply_health: u8,
    /// Chemistry (ROS power_supply_technology codes).
    pub power_supply_technology: u8,
    /// 1 if a battery is present.
    pub present: u8,
    /// Number of valid entries in `cell_voltage`.
    pub cell_count: u8,
    /// Padding, keep zero.
    pub reserved: [u8; 3],
    /// Volts per cell.
    pub cell_voltage: [f32; 15],
}

/// Inertial measurement (304 B). The frame is the topic's convention: the size matches
/// the HORUS benchmark message, which leaves no room for a frame id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/Imu")]
pub struct Imu {
    /// Measurement time.
    pub stamp: Time,
    /// Orientation estimate.
    pub orientation: Quaternion,
    /// Row-major 3x3 covariance of the orientation.
    pub orientation_covariance: [f64; 9],
    /// rad/s.
    pub angular_velocity: Vector3,
    /// Row-major 3x3 covariance.
    pub angular_velocity_covariance: [f64; 9],
    /// m/s².
    pub linear_acceleration: Vector3,
    /// Row-major 3x3 covariance.
    pub linear_acceleration_covariance: [f64; 9],
}

/// Pose and velocity estimate (736 B).
#[derive(Clone, Copy, Debug, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/Odometry")]
pub struct Odometry {
    /// Time and frame of the pose.
    pub header: Header,
    /// Frame of the twist.
    pub child_frame_id: FrameId,
    /// Pose in `header.frame_id`.
    pub pose: Pose,
    /// Row-major 6x6 covariance of the pose.
    #[serde(with = "BigArray")]
    pub pose_covariance: [f64; 36],
    /// Velocity in `child_frame_id`.
    pub twist: Twist,
    /// Row-major 6x6 covariance of the twist.
    #[serde(with = "BigArray")]
    pub twist_covariance: [f64; 36],
}

impl Default for Odometry {
    fn default() -> Self {
        Odometry {
            header: Header::default(),
            child_frame_id: FrameId::default(),
            pose: Pose::default(),
            pose_covariance: [0.0; 36],
            twist: Twist::default(),
            twist_covariance: [0.0; 36],
        }
    }
}

/// Planar laser scan; followed by `f32` ranges in metres (and, if `intensity_count` is
/// non-zero, that many intensities after the ranges).
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/LaserScan", elem = f32)]
pub struct LaserScan {
    /// Time of the first ray and the scanner frame.
    pub header: Header,
    /// Start angle, rad.
    pub angle_min: f32,
    /// End angle, rad.
    pub angle_max: f32,
    /// Angle between rays, rad.
    pub angle_increment: f32,
    /// Time between rays, s.
    pub time_increment: f32,
    /// Time between scans, s.
    pub scan_time: f32,
    /// Shortest valid range, m.
    pub range_min: f32,
    /// Longest valid range, m.
    pub range_max: f32,
    /// Number of intensities that follow the ranges (0 or the number of ranges).
    pub intensity_count: u32,
}

/// Description of one field of a point (like sensor_msgs/PointField).
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Serialize, Deserialize)]
#[repr(C)]
pub struct PointField {
    /// Field name, e.g. "x", "intensity".
    pub name: FixedStr<16>,
    /// Byte offset in a point.
    pub offset: u32,
    /// Data type (see the `datatype` constants).
    pub datatype: u8,
    /// Padding, keep zero.
    pub reserved: [u8; 3],
    /// Number of elements.
    pub count: u32,
}

/// PointField data type codes (as sensor_msgs/PointField).
pub mod datatype {
    /// i8
    pub const INT8: u8 = 1;
    /// u8
    pub const UINT8: u8 = 2;
    /// i16
    pub const INT16: u8 = 3;
    /// u16
    pub const UINT16: u8 = 4;
    /// i32
    pub const INT32: u8 = 5;
    /// u32
    pub const UINT32: u8 = 6;
    /// f32
    pub const FLOAT32: u8 = 7;
    /// f64
    pub const FLOAT64: u8 = 8;
}

/// Most fields a point cloud describes.
pub const MAX_POINT_FIELDS: usize = 12;

/// Point cloud (like sensor_msgs/PointCloud2); followed by `height * row_step` data bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/PointCloud", elem = u8)]
pub struct PointCloud {
    /// Acquisition time and sensor frame.
    pub header: Header,
    /// Rows (1 for unordered clouds).
    pub height: u32,
    /// Points per row.
    pub width: u32,
    /// Bytes per point.
    pub point_step: u32,
    /// Bytes per row.
    pub row_step: u32,
    /// 1 if the data is big-endian.
    pub is_bigendian: u8,
    /// 1 if there are no invalid points.
    pub is_dense: u8,
    /// Number of valid entries in `fields`.
    pub field_count: u8,
    /// Padding, keep zero.
    pub reserved: u8,
    /// Layout of one point.
    pub fields: [PointField; MAX_POINT_FIELDS],
    /// Padding, keep zero.
    pub reserved2: u32,
}

impl PointCloud {
    /// The valid field descriptions.
    pub fn fields(&self) -> &[PointField] {
        &self.fields[..(self.field_count as usize).min(MAX_POINT_FIELDS)]
    }

    /// Sets the field descriptions; fails if there are more than [`MAX_POINT_FIELDS`].
    pub fn set_fields(&mut self, fields: &[PointField]) -> Result<(), String> {
        if fields.len() > MAX_POINT_FIELDS {
            return Err(format!(
                "{} point fields, at most {MAX_POINT_FIELDS}",
                fields.len()
            ));
        }
        self.fields = [PointField::default(); MAX_POINT_FIELDS];
        self.fields[..fields.len()].copy_from_slice(fields);
        self.field_count = fields.len() as u8;
        Ok(())
    }

    /// Convenience: a field description.
    pub fn field(name: &str, offset: u32, datatype: u8, count: u32) -> PointField {
        PointField {
            name: FixedStr::new(name).unwrap_or_default(),
            offset,
            datatype,
            reserved: [0; 3],
            count,
        }
    }
}

/// Camera image; followed by `height * step` data bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/Image", elem = u8)]
pub struct Image {
    /// Acquisition time and camera frame.
    pub header: Header,
    /// Rows.
    pub height: u32,
    /// Columns.
    pub width: u32,
    /// Pixel encoding, e.g. "rgb8", "mono16".
    pub encoding: FixedStr<16>,
    /// 1 if multi-byte pixels are big-endian.
    pub is_bigendian: u8,
    /// Padding, keep zero.
    pub reserved: [u8; 3],
    /// Bytes per row.
    pub step: u32,
}

const _: () = {
    assert!(std::mem::size_of::<CmdVel>() == 16);
    assert!(std::mem::size_of::<BatteryState>() == 104);
    assert!(std::mem::size_of::<Imu>() == 304);
    assert!(std::mem::size_of::<Odometry>() == 816);
    assert!(std::mem::size_of::<Header>() == 72);
    assert!(std::mem::size_of::<TransformStamped>() == 192);
    assert!(std::mem::size_of::<TwistStamped>() == 120);
};

/// The schema of every standard message (and of the service payloads in [`srv`]), for
/// tools and bindings that know types only at run time.
pub fn schemas() -> Vec<nerve::message::schema::Schema> {
    use nerve::message::schema::Schema;
    vec![
        Schema::of::<Twist>(),
        Schema::of::<TwistStamped>(),
        Schema::of::<CmdVel>(),
        Schema::of::<Clock>(),
        Schema::of::<BatteryState>(),
        Schema::of::<Imu>(),
        Schema::of::<Odometry>(),
        Schema::of::<LaserScan>(),
        Schema::of::<PointCloud>(),
        Schema::of::<Image>(),
        Schema::of::<TfMessage>(),
        Schema::of::<srv::Empty>(),
        Schema::of::<srv::Outcome>(),
        Schema::of::<srv::Bool>(),
        Schema::of::<srv::TwoInts>(),
        Schema::of::<srv::Int>(),
        Schema::of::<srv::Bytes>(),
        Schema::of::<action::FibonacciGoal>(),
        Schema::of::<action::FibonacciSequence>(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use nerve::TypeInfo;

    #[test]
    fn sizes_and_names() {
        assert_eq!(TypeInfo::of::<Imu>().name, "nerve_msgs/Imu");
        assert_eq!(TypeInfo::of::<PointCloud>().elem_size, 1);
        assert_eq!(TypeInfo::of::<LaserScan>().elem_size, 4);
        assert!(!TypeInfo::of::<Odometry>().is_slice());
    }

    #[test]
    fn fixed_str() {
        let f = FrameId::new("base_link").unwrap();
        assert_eq!(f.as_str(), "base_link");
        assert!(FrameId::new(&"x".repeat(65)).is_err());
        // the frame ids of real robots fit
        let long = "camera_color_optical_frame";
        assert_eq!(long.len(), 26);
        assert_eq!(FrameId::new(long).unwrap().as_str(), long);
        assert_eq!(FrameId::new(&"x".repeat(64)).unwrap().as_str().len(), 64);
        let j = serde_json::to_string(&Header {
            stamp: Time { nanos: 5 },
            frame_id: f,
        })
        .unwrap();
        assert_eq!(j, r#"{"stamp":{"nanos":5},"frame_id":"base_link"}"#);
    }
}
