//! The table "Nerve type ↔ ROS 2 type": each standard message, its ROS 2 type with the
//! `ros2msg` definition (what Foxglove, `ros2 bag` and `mcap-ros2-support` decode), the
//! CDR conversion both ways, and what, if anything, the ROS 2 → Nerve direction loses.
//!
//! One visitor function per message walks the ROS 2 fields in order; the encoder reads
//! the Nerve message and writes CDR, the decoder reads CDR and fills the Nerve message,
//! so the two directions cannot disagree. Nerve → ROS 2 keeps every field of every entry.
//! ROS 2 → Nerve is exact except where an entry says what it [`Standard::loses`] (ROS 2
//! fields Nerve does not carry, such as Imu's `frame_id` or BatteryState's cell
//! temperatures, are ignored on read): [`of_ros`] gives such an entry only when the user
//! names it, so by default those ROS 2 types cross as their CDR ([`crate::carrier`]).
//!
//! Within an exact entry, a value Nerve cannot hold (a frame id longer than
//! [`FrameId`]'s 64 bytes) fails the conversion of that message with
//! [`ConvertError::DoesNotFit`], never cut.

use crate::ConvertError;
use nerve::message::schema::Schema;
use nerve::message::{as_bytes, read_pod, zeroed};
use nerve::{Message, TypeInfo};
use nerve_msgs::lifecycle::{
    self as lc, ChangeStateRequest, ChangeStateResponse, GetAvailableStatesResponse,
    GetAvailableTransitionsResponse, GetStateResponse, TransitionDescription, TransitionEvent,
};
use nerve_msgs::{
    BatteryState, Clock, CmdVel, FixedStr, FrameId, Image, Imu, LaserScan, Odometry, PointCloud,
    Quaternion, TfMessage, Time, TransformStamped, Twist, TwistStamped, Vector3, MAX_POINT_FIELDS,
};
use nerve_ros2_types::{CdrReader, CdrWriter, Endianness};

/// A standard message and its ROS 2 form: one row of the table.
pub struct Standard {
    /// The Nerve type.
    pub type_info: fn() -> TypeInfo,
    /// Its schema.
    pub schema: fn() -> Schema,
    /// The ROS 2 type, e.g. `sensor_msgs/msg/Imu`.
    pub ros_name: &'static str,
    /// Its `ros2msg` definition with dependencies.
    pub text: fn() -> String,
    /// What a ROS 2 message loses on its way to the Nerve type (`None`: nothing, the
    /// conversion is exact). Nerve → ROS 2 loses nothing for any entry.
    pub loses: Option<&'static str>,
    /// Whether the Nerve payload is the CDR body as it is (the conversion is a copy
    /// behind the 4-byte header; a recorder may write it without walking the fields).
    pub as_laid_out: bool,
    /// Nerve payload to CDR (`out` is cleared first).
    pub encode: fn(&[u8], &mut Vec<u8>) -> Result<(), ConvertError>,
    /// CDR to Nerve payload (`out` is cleared first).
    pub decode: fn(&[u8], &mut Vec<u8>) -> Result<(), ConvertError>,
}

impl Standard {
    /// The Nerve type's name, e.g. `nerve_msgs/Imu`.
    pub fn nerve_name(&self) -> String {
        (self.type_info)().name
    }
}

type R = Result<(), ConvertError>;

/// Head size, element size and the offset of the elements in a payload of `M`, without
/// building a [`TypeInfo`] (which allocates its name): conversions run once per message.
pub fn layout_of<M: nerve::Message>() -> (usize, usize, usize) {
    let head = std::mem::size_of::<M>();
    let elem_size = std::mem::size_of::<M::Elem>();
    let align = std::mem::align_of::<M::Elem>().max(1);
    (head, elem_size, head.div_ceil(align) * align)
}

/// Both directions of a field walk.
trait Visit {
    fn u8(&mut self, v: &mut u8) -> R;
    fn u32(&mut self, v: &mut u32) -> R;
    fn u64(&mut self, v: &mut u64) -> R;
    fn f32(&mut self, v: &mut f32) -> R;
    fn f64(&mut self, v: &mut f64) -> R;
    /// A `float64` that Nerve holds as `f32`.
    fn f32_as_f64(&mut self, v: &mut f32) -> R;
    /// A `float64` Nerve does not carry: written 0, ignored on read.
    fn unused_f64(&mut self) -> R;
    fn time(&mut self, t: &mut Time) -> R;
    fn string<const N: usize>(&mut self, s: &mut FixedStr<N>, field: &'static str) -> R;
    /// A string Nerve does not carry: written empty, ignored on read.
    fn unused_string(&mut self) -> R;
    /// A sequence length (the decoder checks it against the bytes left).
    fn seq_len(&mut self, n: &mut usize, min_elem_size: usize) -> R;
    /// A sequence of `n` slice elements of `size` bytes (little-endian plain data).
    fn slice(&mut self, n: &mut usize, size: usize) -> R;
    /// A sequence Nerve does not carry: written empty, skipped on read.
    fn unused_seq(&mut self, size: usize) -> R;

    fn f64s(&mut self, a: &mut [f64]) -> R {
        a.iter_mut().try_for_each(|v| self.f64(v))
    }
    fn vector3(&mut self, v: &mut Vector3) -> R {
        self.f64(&mut v.x)?;
        self.f64(&mut v.y)?;
        self.f64(&mut v.z)
    }
    fn quaternion(&mut self, q: &mut Quaternion) -> R {
        self.f64(&mut q.x)?;
        self.f64(&mut q.y)?;
        self.f64(&mut q.z)?;
        self.f64(&mut q.w)
    }
    /// std_msgs/Header.
    fn header(&mut self, stamp: &mut Time, frame: Option<&mut FrameId>) -> R {
        self.time(stamp)?;
        match frame {
            Some(f) => self.string(f, "header.frame_id"),
            None => self.unused_string(),
        }
    }
    /// A `float32[]` held in a fixed array with a count.
    fn f32_seq_in(&mut self, a: &mut [f32], count: &mut u8, field: &'static str) -> R;
    /// A sequence of `n` slice elements of type `T`, each walked by `each` (elements
    /// whose ROS 2 form differs from their layout: strings inside).
    fn elems<T: nerve::message::Pod>(
        &mut self,
        n: &mut usize,
        min_elem_size: usize,
        each: impl FnMut(&mut Self, &mut T) -> R,
    ) -> R;
}

struct Enc<'a, 'b> {
    w: CdrWriter<'b>,
    elems: &'a [u8],
}

/// A Nerve payload that is not a message of its type.
fn bad_payload(what: &str, reason: String) -> ConvertError {
    ConvertError::Payload {
        what: what.to_string(),
        reason,
    }
}

/// A value the other form cannot hold.
fn does_not_fit(field: &str, reason: String) -> ConvertError {
    ConvertError::DoesNotFit {
        field: field.to_string(),
        reason,
    }
}

impl Visit for Enc<'_, '_> {
    fn u8(&mut self, v: &mut u8) -> R {
        self.w.u8(*v);
        Ok(())
    }
    fn u32(&mut self, v: &mut u32) -> R {
        self.w.u32(*v);
        Ok(())
    }
    fn u64(&mut self, v: &mut u64) -> R {
        self.w.u64(*v);
        Ok(())
    }
    fn f32(&mut self, v: &mut f32) -> R {
        self.w.f32(*v);
        Ok(())
    }
    fn f64(&mut self, v: &mut f64) -> R {
        self.w.f64(*v);
        Ok(())
    }
    fn f32_as_f64(&mut self, v: &mut f32) -> R {
        self.w.f64(f64::from(*v));
        Ok(())
    }
    fn f64s(&mut self, a: &mut [f64]) -> R {
        self.w.f64s(a);
        Ok(())
    }
    fn vector3(&mut self, v: &mut Vector3) -> R {
        self.w.f64s(&[v.x, v.y, v.z]);
        Ok(())
    }
    fn quaternion(&mut self, q: &mut Quaternion) -> R {
        self.w.f64s(&[q.x, q.y, q.z, q.w]);
        Ok(())
    }
    fn unused_f64(&mut self) -> R {
        self.w.f64(0.0);
        Ok(())
    }
    fn time(&mut self, t: &mut Time) -> R {
        let sec = t.nanos.div_euclid(1_000_000_000);
        let sec = i32::try_from(sec).map_err(|_| {
            does_not_fit(
                "stamp",
                format!("{} ns is out of builtin_interfaces/Time's range", t.nanos),
            )
        })?;
        self.w.i32(sec);
        self.w.u32(t.nanos.rem_euclid(1_000_000_000) as u32);
        Ok(())
    }
    fn string<const N: usize>(&mut self, s: &mut FixedStr<N>, _: &'static str) -> R {
        let end = s.0.iter().position(|&b| b == 0).unwrap_or(N);
        Ok(self.w.string(&s.0[..end])?)
    }
    fn unused_string(&mut self) -> R {
        Ok(self.w.string(b"")?)
    }
    fn seq_len(&mut self, n: &mut usize, _: usize) -> R {
        Ok(self.w.len(*n)?)
    }
    fn slice(&mut self, n: &mut usize, size: usize) -> R {
        let bytes = n.saturating_mul(size);
        if bytes > self.elems.len() {
            return Err(bad_payload(
                "slice",
                format!(
                    "{n} elements of {size} bytes asked, {} bytes present",
                    self.elems.len()
                ),
            ));
        }
        self.w.len(*n)?;
        if *n > 0 {
            self.w.align(size.min(8));
        }
        self.w.bytes(&self.elems[..bytes]);
        self.elems = &self.elems[bytes..];
        Ok(())
    }
    fn unused_seq(&mut self, _: usize) -> R {
        self.w.u32(0);
        Ok(())
    }
    fn f32_seq_in(&mut self, a: &mut [f32], count: &mut u8, field: &'static str) -> R {
        let n = *count as usize;
        if n > a.len() {
            return Err(bad_payload(
                field,
                format!("count {n} exceeds its {} slots", a.len()),
            ));
        }
        self.w.len(n)?;
        a[..n].iter().for_each(|&v| self.w.f32(v));
        Ok(())
    }
    fn elems<T: nerve::message::Pod>(
        &mut self,
        n: &mut usize,
        _: usize,
        mut each: impl FnMut(&mut Self, &mut T) -> R,
    ) -> R {
        let size = std::mem::size_of::<T>();
        let elems = self.elems;
        let bytes = n.saturating_mul(size);
        if bytes > elems.len() {
            return Err(bad_payload(
                "slice",
                format!(
                    "{n} elements of {size} bytes asked, {} bytes present",
                    elems.len()
                ),
            ));
        }
        self.w.len(*n)?;
        for k in 0..*n {
            let mut t: T = read_pod(&elems[k * size..])
                .ok_or_else(|| bad_payload("slice", format!("element {k} is cut short")))?;
            each(self, &mut t)?;
        }
        self.elems = &elems[bytes..];
        Ok(())
    }
}

struct Dec<'a, 'b> {
    r: CdrReader<'a>,
    elems: &'b mut Vec<u8>,
}

impl Visit for Dec<'_, '_> {
    fn u8(&mut self, v: &mut u8) -> R {
        *v = self.r.u8()?;
        Ok(())
    }
    fn u32(&mut self, v: &mut u32) -> R {
        *v = self.r.u32()?;
        Ok(())
    }
    fn u64(&mut self, v: &mut u64) -> R {
        *v = self.r.u64()?;
        Ok(())
    }
    fn f32(&mut self, v: &mut f32) -> R {
        *v = self.r.f32()?;
        Ok(())
    }
    fn f64(&mut self, v: &mut f64) -> R {
        *v = self.r.f64()?;
        Ok(())
    }
    fn f32_as_f64(&mut self, v: &mut f32) -> R {
        *v = self.r.f64()? as f32;
        Ok(())
    }
    fn unused_f64(&mut self) -> R {
        self.r.f64()?;
        Ok(())
    }
    fn time(&mut self, t: &mut Time) -> R {
        let sec = self.r.i32()?;
        let nanosec = self.r.u32()?;
        t.nanos = i64::from(sec) * 1_000_000_000 + i64::from(nanosec);
        Ok(())
    }
    fn string<const N: usize>(&mut self, s: &mut FixedStr<N>, field: &'static str) -> R {
        let b = self.r.string()?;
        if b.len() > N {
            return Err(does_not_fit(
                field,
                format!("{} bytes do not fit Nerve's {N}", b.len()),
            ));
        }
        s.0 = [0; N];
        s.0[..b.len()].copy_from_slice(b);
        Ok(())
    }
    fn unused_string(&mut self) -> R {
        self.r.string()?;
        Ok(())
    }
    fn seq_len(&mut self, n: &mut usize, min_elem_size: usize) -> R {
        *n = self.r.len(min_elem_size)?;
        Ok(())
    }
    fn slice(&mut self, n: &mut usize, size: usize) -> R {
        *n = self.r.len(size)?;
        if *n > 0 {
            self.r.align(size.min(8))?;
        }
        self.elems.extend_from_slice(self.r.take(*n * size)?);
        Ok(())
    }
    fn unused_seq(&mut self, size: usize) -> R {
        let n = self.r.len(size)?;
        if n > 0 {
            self.r.align(size.min(8))?;
        }
        self.r.take(n * size)?;
        Ok(())
    }
    fn f32_seq_in(&mut self, a: &mut [f32], count: &mut u8, field: &'static str) -> R {
        let n = self.r.len(4)?;
        if n > a.len() {
            return Err(does_not_fit(
                field,
                format!("{n} values do not fit Nerve's {}", a.len()),
            ));
        }
        for v in &mut a[..n] {
            *v = self.r.f32()?;
        }
        *count = n as u8;
        Ok(())
    }
    fn elems<T: nerve::message::Pod>(
        &mut self,
        n: &mut usize,
        min_elem_size: usize,
        mut each: impl FnMut(&mut Self, &mut T) -> R,
    ) -> R {
        *n = self.r.len(min_elem_size)?;
        for _ in 0..*n {
            let mut t: T = zeroed();
            each(self, &mut t)?;
            self.elems.extend_from_slice(as_bytes(&t));
        }
        Ok(())
    }
}

fn encode<M: Message>(
    payload: &[u8],
    out: &mut Vec<u8>,
    walk: impl FnOnce(&mut Enc<'_, '_>, &mut M, usize) -> R,
) -> R {
    let (_, elem_size, offset) = layout_of::<M>();
    let mut m: M = read_pod(payload).ok_or_else(|| {
        bad_payload(
            M::TYPE_NAME,
            format!(
                "payload of {} bytes is shorter than its head",
                payload.len()
            ),
        )
    })?;
    let elems = payload.get(offset..).unwrap_or(&[]);
    let n = elems.len().checked_div(elem_size).unwrap_or(0);
    let mut e = Enc {
        w: CdrWriter::new(out),
        elems,
    };
    walk(&mut e, &mut m, n)
}

fn decode<M: Message>(
    cdr: &[u8],
    out: &mut Vec<u8>,
    walk: impl FnOnce(&mut Dec<'_, '_>, &mut M, usize) -> R,
) -> R {
    // the elements go straight behind the room for the head, which is written last
    let (head, elem_size, offset) = layout_of::<M>();
    let r = CdrReader::new(cdr)?;
    if r.endianness() == Endianness::Big {
        // sequences are copied as they are into Nerve's little-endian layout
        return Err(does_not_fit(
            "CDR payload",
            "big-endian CDR is not converted to a Nerve message (it crosses as CDR)".into(),
        ));
    }
    let mut m: M = zeroed();
    out.clear();
    out.resize(if elem_size > 0 { offset } else { head }, 0);
    let mut d = Dec { r, elems: out };
    walk(&mut d, &mut m, 0)?;
    out[..head].copy_from_slice(as_bytes(&m));
    Ok(())
}

fn imu<V: Visit>(v: &mut V, m: &mut Imu, _: usize) -> R {
    v.header(&mut m.stamp, None)?;
    v.quaternion(&mut m.orientation)?;
    v.f64s(&mut m.orientation_covariance)?;
    v.vector3(&mut m.angular_velocity)?;
    v.f64s(&mut m.angular_velocity_covariance)?;
    v.vector3(&mut m.linear_acceleration)?;
    v.f64s(&mut m.linear_acceleration_covariance)
}

/// geometry_msgs/Twist: Nerve's `Twist` has its fields and its CDR layout.
fn twist<V: Visit>(v: &mut V, m: &mut Twist, _: usize) -> R {
    v.vector3(&mut m.linear)?;
    v.vector3(&mut m.angular)
}

/// geometry_msgs/TwistStamped, every field.
fn twist_stamped<V: Visit>(v: &mut V, m: &mut TwistStamped, _: usize) -> R {
    v.header(&mut m.header.stamp, Some(&mut m.header.frame_id))?;
    twist(v, &mut m.twist, 0)
}

/// geometry_msgs/TwistStamped from the planar `CmdVel`: Nerve → ROS 2 keeps everything,
/// ROS 2 → Nerve keeps `linear.x` and `angular.z` only, in `f32`.
fn cmd_vel<V: Visit>(v: &mut V, m: &mut CmdVel, _: usize) -> R {
    v.header(&mut m.stamp, None)?;
    v.f32_as_f64(&mut m.linear)?;
    v.unused_f64()?;
    v.unused_f64()?;
    v.unused_f64()?;
    v.unused_f64()?;
    v.f32_as_f64(&mut m.angular)
}

fn clock<V: Visit>(v: &mut V, m: &mut Clock, _: usize) -> R {
    v.time(&mut m.clock)
}

fn battery<V: Visit>(v: &mut V, m: &mut BatteryState, _: usize) -> R {
    v.header(&mut m.stamp, None)?;
    for f in [
        &mut m.voltage,
        &mut m.temperature,
        &mut m.current,
        &mut m.charge,
        &mut m.capacity,
        &mut m.design_capacity,
        &mut m.percentage,
    ] {
        v.f32(f)?;
    }
    v.u8(&mut m.power_supply_status)?;
    v.u8(&mut m.power_supply_health)?;
    v.u8(&mut m.power_supply_technology)?;
    v.u8(&mut m.present)?;
    v.f32_seq_in(&mut m.cell_voltage, &mut m.cell_count, "cell_voltage")?;
    v.unused_seq(4)?; // cell_temperature
    v.unused_string()?; // location
    v.unused_string() // serial_number
}

fn odometry<V: Visit>(v: &mut V, m: &mut Odometry, _: usize) -> R {
    v.header(&mut m.header.stamp, Some(&mut m.header.frame_id))?;
    v.string(&mut m.child_frame_id, "child_frame_id")?;
    v.vector3(&mut m.pose.position)?;
    v.quaternion(&mut m.pose.orientation)?;
    v.f64s(&mut m.pose_covariance)?;
    v.vector3(&mut m.twist.linear)?;
    v.vector3(&mut m.twist.angular)?;
    v.f64s(&mut m.twist_covariance)
}

fn laser_scan<V: Visit>(v: &mut V, m: &mut LaserScan, n: usize) -> R {
    v.header(&mut m.header.stamp, Some(&mut m.header.frame_id))?;
    for f in [
        &mut m.angle_min,
        &mut m.angle_max,
        &mut m.angle_increment,
        &mut m.time_increment,
        &mut m.scan_time,
        &mut m.range_min,
        &mut m.range_max,
    ] {
        v.f32(f)?;
    }
    let mut ranges = n.saturating_sub(m.intensity_count as usize);
    v.slice(&mut ranges, 4)?;
    let mut intensities = m.intensity_count as usize;
    v.slice(&mut intensities, 4)?;
    m.intensity_count = u32::try_from(intensities)
        .map_err(|_| does_not_fit("intensities", format!("{intensities} values")))?;
    Ok(())
}

fn point_cloud<V: Visit>(v: &mut V, m: &mut PointCloud, n: usize) -> R {
    v.header(&mut m.header.stamp, Some(&mut m.header.frame_id))?;
    v.u32(&mut m.height)?;
    v.u32(&mut m.width)?;
    let mut fields = m.field_count as usize;
    v.seq_len(&mut fields, 13)?;
    if fields > MAX_POINT_FIELDS {
        return Err(does_not_fit(
            "fields",
            format!("{fields} point fields, Nerve holds {MAX_POINT_FIELDS}"),
        ));
    }
    m.field_count = fields as u8;
    for f in &mut m.fields[..fields] {
        v.string(&mut f.name, "fields.name")?;
        v.u32(&mut f.offset)?;
        v.u8(&mut f.datatype)?;
        v.u32(&mut f.count)?;
    }
    v.u8(&mut m.is_bigendian)?;
    v.u32(&mut m.point_step)?;
    v.u32(&mut m.row_step)?;
    let mut data = n;
    v.slice(&mut data, 1)?;
    v.u8(&mut m.is_dense)
}

/// tf2_msgs/TFMessage: `geometry_msgs/TransformStamped[] transforms`, the slice's
/// elements one by one (frame names are CDR strings there, 64-byte fields here).
fn tf_message<V: Visit>(v: &mut V, _: &mut TfMessage, n: usize) -> R {
    let mut count = n;
    // a TransformStamped is at least 8 (stamp) + 4 + 4 (two empty strings) + 56 bytes
    v.elems(&mut count, 72, |v, t: &mut TransformStamped| {
        v.header(&mut t.header.stamp, Some(&mut t.header.frame_id))?;
        v.string(&mut t.child_frame_id, "child_frame_id")?;
        v.vector3(&mut t.transform.translation)?;
        v.quaternion(&mut t.transform.rotation)
    })
}

/// A lifecycle_msgs `State` or `Transition`: `uint8 id`, `string label` (a ROS 2 label
/// longer than Nerve's 31 bytes is an error naming `field`, never cut).
fn id_label<V: Visit>(v: &mut V, id: &mut u8, label: &mut lc::Label, field: &'static str) -> R {
    v.u8(id)?;
    v.string(label, field)
}

/// lifecycle_msgs/TransitionDescription: a transition, its start and its goal state.
fn description<V: Visit>(v: &mut V, d: &mut TransitionDescription, field: [&'static str; 3]) -> R {
    id_label(v, &mut d.transition.id, &mut d.transition.label, field[0])?;
    id_label(v, &mut d.start_state.id, &mut d.start_state.label, field[1])?;
    id_label(v, &mut d.goal_state.id, &mut d.goal_state.label, field[2])
}

/// The least CDR bytes of a `State` or `Transition` in a sequence (id, string length).
const MIN_ID_LABEL: usize = 5;

/// lifecycle_msgs/TransitionEvent: `uint64 timestamp`, transition, start and goal state.
fn transition_event<V: Visit>(v: &mut V, m: &mut TransitionEvent, _: usize) -> R {
    v.u64(&mut m.timestamp)?;
    id_label(
        v,
        &mut m.transition.id,
        &mut m.transition.label,
        "transition.label",
    )?;
    id_label(
        v,
        &mut m.start_state.id,
        &mut m.start_state.label,
        "start_state.label",
    )?;
    id_label(
        v,
        &mut m.goal_state.id,
        &mut m.goal_state.label,
        "goal_state.label",
    )
}

/// lifecycle_msgs/srv/ChangeState_Request: `Transition transition`.
fn change_state_request<V: Visit>(v: &mut V, m: &mut ChangeStateRequest, _: usize) -> R {
    id_label(
        v,
        &mut m.transition.id,
        &mut m.transition.label,
        "transition.label",
    )
}

/// lifecycle_msgs/srv/ChangeState_Response: `bool success`.
fn change_state_response<V: Visit>(v: &mut V, m: &mut ChangeStateResponse, _: usize) -> R {
    v.u8(&mut m.success)?;
    m.success = u8::from(m.success != 0);
    Ok(())
}

/// lifecycle_msgs/srv/GetState_Response: `State current_state`.
fn get_state_response<V: Visit>(v: &mut V, m: &mut GetStateResponse, _: usize) -> R {
    let s = &mut m.current_state;
    id_label(v, &mut s.id, &mut s.label, "current_state.label")
}

/// lifecycle_msgs/srv/GetAvailableStates_Response: `State[] available_states`, the
/// message slice's elements.
fn available_states<V: Visit>(v: &mut V, _: &mut GetAvailableStatesResponse, n: usize) -> R {
    let mut count = n;
    v.elems(&mut count, MIN_ID_LABEL, |v, s: &mut lc::State| {
        id_label(v, &mut s.id, &mut s.label, "available_states.label")
    })
}

/// lifecycle_msgs/srv/GetAvailableTransitions_Response: `TransitionDescription[]
/// available_transitions`, the message slice's elements.
fn available_transitions<V: Visit>(
    v: &mut V,
    _: &mut GetAvailableTransitionsResponse,
    n: usize,
) -> R {
    let mut count = n;
    v.elems(
        &mut count,
        3 * MIN_ID_LABEL,
        |v, d: &mut TransitionDescription| {
            description(
                v,
                d,
                [
                    "available_transitions.transition.label",
                    "available_transitions.start_state.label",
                    "available_transitions.goal_state.label",
                ],
            )
        },
    )
}

fn image<V: Visit>(v: &mut V, m: &mut Image, n: usize) -> R {
    v.header(&mut m.header.stamp, Some(&mut m.header.frame_id))?;
    v.u32(&mut m.height)?;
    v.u32(&mut m.width)?;
    v.string(&mut m.encoding, "encoding")?;
    v.u8(&mut m.is_bigendian)?;
    v.u32(&mut m.step)?;
    let mut data = n;
    v.slice(&mut data, 1)
}

macro_rules! standard {
    ($ty:ty, $walk:ident, $ros:expr, $text:expr) => {
        standard!($ty, $walk, $ros, $text, None)
    };
    ($ty:ty, $walk:ident, $ros:expr, $text:expr, $loses:expr) => {
        Standard {
            type_info: TypeInfo::of::<$ty>,
            schema: Schema::of::<$ty>,
            ros_name: $ros,
            text: $text,
            loses: $loses,
            as_laid_out: false,
            encode: |p, out| encode::<$ty>(p, out, |v, m, n| $walk(v, m, n)),
            decode: |c, out| decode::<$ty>(c, out, |v, m, n| $walk(v, m, n)),
        }
    };
}

/// The line between a definition and each of its dependencies in a `ros2msg` schema.
pub const SEPARATOR: &str =
    "================================================================================\n";

fn with_deps(main: &str, deps: &[&str]) -> String {
    let mut s = main.to_string();
    for d in deps {
        s.push_str(SEPARATOR);
        s.push_str(d);
    }
    s
}

const TIME: &str = "MSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n";
const HEADER: &str = "MSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n";
const VECTOR3: &str = "MSG: geometry_msgs/Vector3\nfloat64 x\nfloat64 y\nfloat64 z\n";
const POINT: &str = "MSG: geometry_msgs/Point\nfloat64 x\nfloat64 y\nfloat64 z\n";
const QUATERNION: &str =
    "MSG: geometry_msgs/Quaternion\nfloat64 x\nfloat64 y\nfloat64 z\nfloat64 w\n";
const TWIST: &str =
    "MSG: geometry_msgs/Twist\ngeometry_msgs/Vector3 linear\ngeometry_msgs/Vector3 angular\n";
const POSE: &str =
    "MSG: geometry_msgs/Pose\ngeometry_msgs/Point position\ngeometry_msgs/Quaternion orientation\n";

/// The `geometry_msgs/Twist` definition (Nerve's `Twist` has its layout).
fn twist_text() -> String {
    with_deps(
        TWIST.trim_start_matches("MSG: geometry_msgs/Twist\n"),
        &[VECTOR3],
    )
}

fn imu_text() -> String {
    with_deps(
        "std_msgs/Header header\ngeometry_msgs/Quaternion orientation\n\
         float64[9] orientation_covariance\ngeometry_msgs/Vector3 angular_velocity\n\
         float64[9] angular_velocity_covariance\ngeometry_msgs/Vector3 linear_acceleration\n\
         float64[9] linear_acceleration_covariance\n",
        &[HEADER, TIME, QUATERNION, VECTOR3],
    )
}

fn twist_stamped_text() -> String {
    with_deps(
        "std_msgs/Header header\ngeometry_msgs/Twist twist\n",
        &[HEADER, TIME, TWIST, VECTOR3],
    )
}

fn clock_text() -> String {
    with_deps("builtin_interfaces/Time clock\n", &[TIME])
}

fn battery_text() -> String {
    with_deps(
        "std_msgs/Header header\nfloat32 voltage\nfloat32 temperature\nfloat32 current\n\
         float32 charge\nfloat32 capacity\nfloat32 design_capacity\nfloat32 percentage\n\
         uint8 power_supply_status\nuint8 power_supply_health\nuint8 power_supply_technology\n\
         bool present\nfloat32[] cell_voltage\nfloat32[] cell_temperature\nstring location\n\
         string serial_number\n",
        &[HEADER, TIME],
    )
}

fn odometry_text() -> String {
    with_deps(
        "std_msgs/Header header\nstring child_frame_id\n\
         geometry_msgs/PoseWithCovariance pose\ngeometry_msgs/TwistWithCovariance twist\n",
        &[
            HEADER,
            TIME,
            "MSG: geometry_msgs/PoseWithCovariance\ngeometry_msgs/Pose pose\nfloat64[36] covariance\n",
            POSE,
            POINT,
            QUATERNION,
            "MSG: geometry_msgs/TwistWithCovariance\ngeometry_msgs/Twist twist\nfloat64[36] covariance\n",
            TWIST,
            VECTOR3,
        ],
    )
}

fn laser_scan_text() -> String {
    with_deps(
        "std_msgs/Header header\nfloat32 angle_min\nfloat32 angle_max\nfloat32 angle_increment\n\
         float32 time_increment\nfloat32 scan_time\nfloat32 range_min\nfloat32 range_max\n\
         float32[] ranges\nfloat32[] intensities\n",
        &[HEADER, TIME],
    )
}

fn tf_message_text() -> String {
    with_deps(
        "geometry_msgs/TransformStamped[] transforms\n",
        &[
            "MSG: geometry_msgs/TransformStamped\nstd_msgs/Header header\nstring child_frame_id\n\
             geometry_msgs/Transform transform\n",
            HEADER,
            TIME,
            "MSG: geometry_msgs/Transform\ngeometry_msgs/Vector3 translation\n\
             geometry_msgs/Quaternion rotation\n",
            VECTOR3,
            QUATERNION,
        ],
    )
}

const LC_STATE: &str = "MSG: lifecycle_msgs/State\nuint8 id\nstring label\n";
const LC_TRANSITION: &str = "MSG: lifecycle_msgs/Transition\nuint8 id\nstring label\n";

fn transition_event_text() -> String {
    with_deps(
        "uint64 timestamp\nlifecycle_msgs/Transition transition\n\
         lifecycle_msgs/State start_state\nlifecycle_msgs/State goal_state\n",
        &[LC_TRANSITION, LC_STATE],
    )
}

fn change_state_request_text() -> String {
    with_deps("lifecycle_msgs/Transition transition\n", &[LC_TRANSITION])
}

fn change_state_response_text() -> String {
    "bool success\n".to_string()
}

fn get_state_response_text() -> String {
    with_deps("lifecycle_msgs/State current_state\n", &[LC_STATE])
}

fn available_states_text() -> String {
    with_deps("lifecycle_msgs/State[] available_states\n", &[LC_STATE])
}

fn available_transitions_text() -> String {
    with_deps(
        "lifecycle_msgs/TransitionDescription[] available_transitions\n",
        &[
            "MSG: lifecycle_msgs/TransitionDescription\nlifecycle_msgs/Transition transition\n\
             lifecycle_msgs/State start_state\nlifecycle_msgs/State goal_state\n",
            LC_TRANSITION,
            LC_STATE,
        ],
    )
}

fn point_cloud_text() -> String {
    with_deps(
        "std_msgs/Header header\nuint32 height\nuint32 width\nsensor_msgs/PointField[] fields\n\
         bool is_bigendian\nuint32 point_step\nuint32 row_step\nuint8[] data\nbool is_dense\n",
        &[
            HEADER,
            TIME,
            "MSG: sensor_msgs/PointField\nuint8 INT8=1\nuint8 UINT8=2\nuint8 INT16=3\n\
             uint8 UINT16=4\nuint8 INT32=5\nuint8 UINT32=6\nuint8 FLOAT32=7\nuint8 FLOAT64=8\n\
             string name\nuint32 offset\nuint8 datatype\nuint32 count\n",
        ],
    )
}

fn image_text() -> String {
    with_deps(
        "std_msgs/Header header\nuint32 height\nuint32 width\nstring encoding\n\
         uint8 is_bigendian\nuint32 step\nuint8[] data\n",
        &[HEADER, TIME],
    )
}

/// The table: every standard message with a ROS 2 counterpart (docs/design.md shows it
/// as "Nerve type → ROS 2 type → exact or not"). One Nerve type has one row; a ROS 2
/// type has at most one exact row, and may have lossy ones besides.
pub fn standard() -> [Standard; 12] {
    [
        standard!(
            Imu,
            imu,
            "sensor_msgs/msg/Imu",
            imu_text,
            Some("header.frame_id")
        ),
        Standard {
            as_laid_out: true,
            ..standard!(Twist, twist, "geometry_msgs/msg/Twist", twist_text)
        },
        standard!(
            TwistStamped,
            twist_stamped,
            "geometry_msgs/msg/TwistStamped",
            twist_stamped_text
        ),
        standard!(
            CmdVel,
            cmd_vel,
            "geometry_msgs/msg/TwistStamped",
            twist_stamped_text,
            Some("header.frame_id, linear.y, linear.z, angular.x, angular.y, and float64 precision (kept as float32)")
        ),
        standard!(Clock, clock, "rosgraph_msgs/msg/Clock", clock_text),
        standard!(
            BatteryState,
            battery,
            "sensor_msgs/msg/BatteryState",
            battery_text,
            Some("cell_temperature, location, serial_number")
        ),
        standard!(Odometry, odometry, "nav_msgs/msg/Odometry", odometry_text),
        standard!(
            LaserScan,
            laser_scan,
            "sensor_msgs/msg/LaserScan",
            laser_scan_text
        ),
        standard!(
            PointCloud,
            point_cloud,
            "sensor_msgs/msg/PointCloud2",
            point_cloud_text
        ),
        standard!(Image, image, "sensor_msgs/msg/Image", image_text),
        standard!(
            TfMessage,
            tf_message,
            "tf2_msgs/msg/TFMessage",
            tf_message_text
        ),
        standard!(
            TransitionEvent,
            transition_event,
            "lifecycle_msgs/msg/TransitionEvent",
            transition_event_text
        ),
    ]
}

/// The parts of the `lifecycle_msgs` services that carry data, in their ROS 2 form
/// (`ros_name` is `lifecycle_msgs/srv/<Service>_Request|_Response`), for a ROS 2 bridge:
/// ChangeState's request and response, the responses of GetState, GetAvailableStates
/// and GetAvailableTransitions (their requests are empty). Labels longer than Nerve's 31
/// bytes are conversion errors naming the field.
pub fn lifecycle_services() -> [Standard; 5] {
    [
        standard!(
            ChangeStateRequest,
            change_state_request,
            "lifecycle_msgs/srv/ChangeState_Request",
            change_state_request_text
        ),
        standard!(
            ChangeStateResponse,
            change_state_response,
            "lifecycle_msgs/srv/ChangeState_Response",
            change_state_response_text
        ),
        standard!(
            GetStateResponse,
            get_state_response,
            "lifecycle_msgs/srv/GetState_Response",
            get_state_response_text
        ),
        standard!(
            GetAvailableStatesResponse,
            available_states,
            "lifecycle_msgs/srv/GetAvailableStates_Response",
            available_states_text
        ),
        standard!(
            GetAvailableTransitionsResponse,
            available_transitions,
            "lifecycle_msgs/srv/GetAvailableTransitions_Response",
            available_transitions_text
        ),
    ]
}

/// The ROS 2 form of the Nerve type with `layout_hash` (matched by layout, never by name
/// alone); `None` for a type without a standard ROS 2 counterpart.
pub fn of_nerve(layout_hash: u64) -> Option<Standard> {
    standard()
        .into_iter()
        .find(|s| (s.type_info)().layout_hash == layout_hash)
}

/// Whether two ROS 2 type names are the same type (`pkg/msg/Name` or `pkg/Name`).
fn same_ros_type(a: &str, b: &str) -> bool {
    a.replace("/msg/", "/") == b.replace("/msg/", "/")
}

/// The Nerve type ROS 2 type `ros_name` (`pkg/msg/Name` or `pkg/Name`) becomes: a lossy
/// row whose Nerve type the user named in `lossy` (e.g. `nerve_msgs/CmdVel`), else the
/// exact row; `None` when there is neither (the type then crosses as its CDR).
pub fn of_ros(ros_name: &str, lossy: &[String]) -> Option<Standard> {
    let rows = standard()
        .into_iter()
        .filter(|s| same_ros_type(s.ros_name, ros_name));
    let mut exact = None;
    for s in rows {
        match s.loses {
            Some(_) if lossy.iter().any(|n| *n == s.nerve_name()) => return Some(s),
            Some(_) => {}
            None => exact = exact.or(Some(s)),
        }
    }
    exact
}

/// The rows whose ROS 2 → Nerve direction loses data: (Nerve type, ROS 2 type, what is
/// lost). A user asks for one by its Nerve type's name.
pub fn lossy() -> Vec<(String, &'static str, &'static str)> {
    standard()
        .into_iter()
        .filter_map(|s| s.loses.map(|l| (s.nerve_name(), s.ros_name, l)))
        .collect()
}

/// Checks that each name in `names` is the Nerve type of a lossy row; the error names
/// the wrong one and lists the lossy rows.
pub fn check_lossy(names: &[String]) -> Result<(), String> {
    let rows = lossy();
    for n in names {
        if !rows.iter().any(|(t, _, _)| t == n) {
            let known: Vec<String> = rows
                .iter()
                .map(|(t, r, l)| format!("{t} (from {r}, loses {l})"))
                .collect();
            return Err(format!(
                "{n} is not a lossy ROS 2 form; the lossy forms are: {}",
                known.join("; ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nerve_msgs::lifecycle::TransitionEvent;
    use nerve_ros2_types::Registry;

    /// The CDR of a geometry_msgs/TwistStamped, written field by field.
    fn twist_stamped_cdr(frame: &str, v: [f64; 6]) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut w = CdrWriter::new(&mut buf);
        w.i32(1_700_000_000);
        w.u32(123_456_789);
        w.string(frame.as_bytes()).unwrap();
        w.f64s(&v);
        buf
    }

    #[test]
    fn every_row_writes_what_its_definition_decodes() {
        for s in standard().into_iter().chain(lifecycle_services()) {
            let registry = Registry::from_ros2msg(s.ros_name, &(s.text)()).unwrap();
            let ty = (s.type_info)();
            let payload = vec![0u8; ty.elems_offset()];
            let mut cdr = Vec::new();
            (s.encode)(&payload, &mut cdr).unwrap();
            nerve_ros2_types::validate(&registry, s.ros_name, &cdr)
                .unwrap_or_else(|e| panic!("{}: {e}", s.ros_name));
            let mut back = Vec::new();
            (s.decode)(&cdr, &mut back).unwrap();
            assert_eq!(&back[..], &payload[..], "{}", s.ros_name);
        }
    }

    /// Every row's decoder on damaged CDR: cut at every length, and each byte changed:
    /// never a panic, and whatever decodes converts back to what it decoded to.
    #[test]
    fn damaged_cdr_is_an_error_or_a_message_that_round_trips_never_a_panic() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for s in standard().into_iter().chain(lifecycle_services()) {
            let ty = (s.type_info)();
            // a head of varied bytes may not be a valid message: keep what decodes of it
            let mut payload: Vec<u8> = vec![0; ty.elems_offset()];
            let mut cdr = Vec::new();
            (s.encode)(&payload, &mut cdr).unwrap();
            payload.clear();
            (s.decode)(&cdr, &mut payload).unwrap();
            let mut out = Vec::new();
            for cut in 0..cdr.len() {
                let _ = (s.decode)(&cdr[..cut], &mut out);
            }
            for i in 4..cdr.len() {
                for _ in 0..4 {
                    let mut bad = cdr.clone();
                    bad[i] = next() as u8;
                    if (s.decode)(&bad, &mut out).is_ok() {
                        let mut again = Vec::new();
                        (s.encode)(&out, &mut again)
                            .unwrap_or_else(|e| panic!("{} byte {i}: {e}", s.ros_name));
                        let mut back = Vec::new();
                        (s.decode)(&again, &mut back).unwrap();
                        assert_eq!(back, out, "{} byte {i}", s.ros_name);
                    }
                }
            }
        }
    }

    #[test]
    fn a_ros2_type_becomes_a_nerve_type_only_where_nothing_is_lost() {
        let name = |s: Option<Standard>| s.map(|s| s.nerve_name());
        let none: &[String] = &[];
        assert_eq!(
            name(of_ros("geometry_msgs/msg/TwistStamped", none)).as_deref(),
            Some("nerve_msgs/TwistStamped")
        );
        assert_eq!(
            name(of_ros("geometry_msgs/Twist", none)).as_deref(),
            Some("nerve_msgs/Twist")
        );
        // the lossy forms only when named
        assert_eq!(name(of_ros("sensor_msgs/msg/Imu", none)), None);
        assert_eq!(name(of_ros("sensor_msgs/msg/BatteryState", none)), None);
        let cmd_vel = ["nerve_msgs/CmdVel".to_string()];
        assert_eq!(
            name(of_ros("geometry_msgs/msg/TwistStamped", &cmd_vel)).as_deref(),
            Some("nerve_msgs/CmdVel")
        );
        let imu = ["nerve_msgs/Imu".to_string()];
        assert_eq!(
            name(of_ros("sensor_msgs/msg/Imu", &imu)).as_deref(),
            Some("nerve_msgs/Imu")
        );
        assert!(check_lossy(&cmd_vel).is_ok());
        let e = check_lossy(&["nerve_msgs/Odometry".to_string()]).unwrap_err();
        assert!(
            e.contains("nerve_msgs/Odometry") && e.contains("nerve_msgs/CmdVel"),
            "{e}"
        );
        // one row per Nerve type, found by layout; every Nerve type keeps everything on
        // its way to ROS 2, and every exact row is the one its ROS 2 type leads back to
        for s in standard() {
            let hash = (s.type_info)().layout_hash;
            assert_eq!(of_nerve(hash).map(|r| r.ros_name), Some(s.ros_name));
            if s.loses.is_none() {
                assert_eq!(
                    of_ros(s.ros_name, none).map(|r| (r.type_info)().layout_hash),
                    Some(hash),
                    "{}",
                    s.ros_name
                );
            }
        }
        assert_eq!(
            of_nerve(TypeInfo::of::<TransitionEvent>().layout_hash).map(|s| s.ros_name),
            Some("lifecycle_msgs/msg/TransitionEvent")
        );
    }

    #[test]
    fn a_row_laid_out_as_cdr_says_so_truly() {
        for s in standard().into_iter().filter(|s| s.as_laid_out) {
            let ty = (s.type_info)();
            let payload: Vec<u8> = (0..ty.elems_offset()).map(|i| i as u8).collect();
            let mut cdr = Vec::new();
            (s.encode)(&payload, &mut cdr).unwrap();
            assert_eq!(&cdr[4..], &payload[..], "{}", s.ros_name);
        }
    }

    #[test]
    fn twist_stamped_keeps_every_field_and_a_long_frame_id() {
        let frame = "camera_color_optical_frame";
        let v = [0.1, -2.5e-9, 3.0e300, 0.333_333_333_333_333_3, 5.0, -6.0];
        let cdr = twist_stamped_cdr(frame, v);
        let row = of_ros("geometry_msgs/msg/TwistStamped", &[]).unwrap();
        let mut payload = Vec::new();
        (row.decode)(&cdr, &mut payload).unwrap();
        let m: TwistStamped = read_pod(&payload).unwrap();
        assert_eq!(m.header.frame_id.as_str(), frame);
        assert_eq!(m.header.stamp.nanos, 1_700_000_000_123_456_789);
        let t = m.twist;
        assert_eq!(
            [
                t.linear.x,
                t.linear.y,
                t.linear.z,
                t.angular.x,
                t.angular.y,
                t.angular.z
            ],
            v
        );
        let mut back = Vec::new();
        (row.encode)(&payload, &mut back).unwrap();
        assert_eq!(back, cdr);
    }

    #[test]
    fn a_frame_id_longer_than_nerve_holds_is_refused_by_name_never_cut() {
        let frame = "x".repeat(std::mem::size_of::<FrameId>() + 1);
        let cdr = twist_stamped_cdr(&frame, [0.0; 6]);
        let row = of_ros("geometry_msgs/msg/TwistStamped", &[]).unwrap();
        let e = (row.decode)(&cdr, &mut Vec::new()).unwrap_err();
        assert!(e.does_not_fit(), "{e}");
        assert!(e.to_string().contains("header.frame_id"), "{e}");
        assert!(e.to_string().contains("65 bytes"), "{e}");
    }

    #[test]
    fn an_image_from_a_realsense_frame_crosses() {
        let frame = "camera_color_optical_frame";
        let mut buf = Vec::new();
        let mut w = CdrWriter::new(&mut buf);
        w.i32(5);
        w.u32(6);
        w.string(frame.as_bytes()).unwrap();
        w.u32(1); // height
        w.u32(2); // width
        w.string(b"mono8").unwrap();
        w.u8(0);
        w.u32(2); // step
        w.len(2).unwrap();
        w.bytes(&[7, 8]);
        let row = of_ros("sensor_msgs/msg/Image", &[]).unwrap();
        let mut payload = Vec::new();
        (row.decode)(&buf, &mut payload).unwrap();
        let img: Image = read_pod(&payload).unwrap();
        assert_eq!(img.header.frame_id.as_str(), frame);
        assert_eq!(&payload[TypeInfo::of::<Image>().elems_offset()..], &[7, 8]);
        let mut back = Vec::new();
        (row.encode)(&payload, &mut back).unwrap();
        assert_eq!(back, buf);
    }

    #[test]
    fn cmd_vel_reaches_ros2_whole_and_comes_back_only_as_asked() {
        let cmd = CmdVel {
            stamp: Time { nanos: 42 },
            linear: 0.5,
            angular: -0.25,
        };
        let row = of_nerve(TypeInfo::of::<CmdVel>().layout_hash).unwrap();
        assert_eq!(row.ros_name, "geometry_msgs/msg/TwistStamped");
        let mut cdr = Vec::new();
        (row.encode)(as_bytes(&cmd), &mut cdr).unwrap();
        // the exact form reads it back whole
        let exact = of_ros(row.ros_name, &[]).unwrap();
        let mut p = Vec::new();
        (exact.decode)(&cdr, &mut p).unwrap();
        let ts: TwistStamped = read_pod(&p).unwrap();
        assert_eq!((ts.twist.linear.x, ts.twist.angular.z), (0.5, -0.25));
        assert_eq!(ts.header.stamp.nanos, 42);
    }
}
