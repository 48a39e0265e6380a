//! Foxglove's own schemas for the messages that have one (`nerve bag record --schemas
//! foxglove`): point clouds as `foxglove.PointCloud`, images as `foxglove.RawImage`,
//! laser scans as `foxglove.LaserScan`, protobuf-encoded with the `foxglove` crate's
//! types. Foxglove opens these without a ROS 2 message definition; ROS 2's tools do not
//! read them, and `nerve bag play` skips them (it replays CDR channels only). Every
//! other type keeps its ROS 2 form.

use crate::BagError;
use foxglove::messages::{
    packed_element_field::NumericType, LaserScan as FoxScan, PackedElementField,
    PointCloud as FoxCloud, RawImage, Timestamp,
};
use foxglove::Encode;
use nerve::message::read_pod;
use nerve::{Message, TypeInfo};
use nerve_msgs::{datatype, Header, Image, LaserScan, PointCloud};

/// A Nerve message in a Foxglove schema.
pub struct Form {
    /// Foxglove's schema name, e.g. `foxglove.PointCloud`.
    pub name: String,
    /// The schema (a protobuf `FileDescriptorSet`).
    pub data: Vec<u8>,
    encode: fn(&[u8], &mut Vec<u8>) -> Result<(), BagError>,
}

impl Form {
    /// Writes the protobuf form of a Nerve payload into `out` (cleared first).
    pub fn encode(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), BagError> {
        out.clear();
        (self.encode)(payload, out)
    }
}

/// The Foxglove form of the type with this layout hash, if it has one.
pub fn form(layout_hash: u64) -> Option<Form> {
    fn of<F: Encode>(encode: fn(&[u8], &mut Vec<u8>) -> Result<(), BagError>) -> Option<Form> {
        let schema = F::get_schema()?;
        Some(Form {
            name: schema.name,
            data: schema.data.into_owned(),
            encode,
        })
    }
    if layout_hash == TypeInfo::of::<PointCloud>().layout_hash {
        of::<FoxCloud>(point_cloud)
    } else if layout_hash == TypeInfo::of::<Image>().layout_hash {
        of::<RawImage>(image)
    } else if layout_hash == TypeInfo::of::<LaserScan>().layout_hash {
        of::<FoxScan>(laser_scan)
    } else {
        None
    }
}

fn head_and_elems<M: Message>(payload: &[u8]) -> Result<(M, &[u8]), BagError> {
    let (_, _, offset) = nerve_ros2_map::standard::layout_of::<M>();
    let head: M = read_pod(payload).ok_or_else(|| BagError::Convert {
        what: M::TYPE_NAME.to_string(),
        reason: format!(
            "payload of {} bytes is shorter than its head",
            payload.len()
        ),
    })?;
    Ok((head, payload.get(offset..).unwrap_or(&[])))
}

fn stamp(h: &Header) -> Option<Timestamp> {
    let ns = h.stamp.nanos.max(0);
    Timestamp::new_checked(
        u32::try_from(ns / 1_000_000_000).ok()?,
        (ns % 1_000_000_000) as u32,
    )
}

fn write(m: &impl Encode, what: &str, out: &mut Vec<u8>) -> Result<(), BagError> {
    m.encode(out).map_err(|e| BagError::Convert {
        what: what.into(),
        reason: e.to_string(),
    })
}

fn point_cloud(payload: &[u8], out: &mut Vec<u8>) -> Result<(), BagError> {
    let (c, data) = head_and_elems::<PointCloud>(payload)?;
    let numeric = |d: u8| match d {
        datatype::UINT8 => NumericType::Uint8,
        datatype::INT8 => NumericType::Int8,
        datatype::UINT16 => NumericType::Uint16,
        datatype::INT16 => NumericType::Int16,
        datatype::UINT32 => NumericType::Uint32,
        datatype::INT32 => NumericType::Int32,
        datatype::FLOAT32 => NumericType::Float32,
        datatype::FLOAT64 => NumericType::Float64,
        _ => NumericType::Unknown,
    };
    let m = FoxCloud {
        timestamp: stamp(&c.header),
        frame_id: c.header.frame_id.as_str().into_owned(),
        pose: None,
        point_stride: c.point_step,
        fields: c
            .fields()
            .iter()
            .map(|f| PackedElementField {
                name: f.name.as_str().into_owned(),
                offset: f.offset,
                r#type: numeric(f.datatype) as i32,
            })
            .collect(),
        data: foxglove::bytes::Bytes::copy_from_slice(data),
    };
    write(&m, "nerve_msgs/PointCloud as foxglove.PointCloud", out)
}

fn image(payload: &[u8], out: &mut Vec<u8>) -> Result<(), BagError> {
    let (i, data) = head_and_elems::<Image>(payload)?;
    let m = RawImage {
        timestamp: stamp(&i.header),
        frame_id: i.header.frame_id.as_str().into_owned(),
        width: i.width,
        height: i.height,
        encoding: i.encoding.as_str().into_owned(),
        step: i.step,
        data: foxglove::bytes::Bytes::copy_from_slice(data),
    };
    write(&m, "nerve_msgs/Image as foxglove.RawImage", out)
}

fn laser_scan(payload: &[u8], out: &mut Vec<u8>) -> Result<(), BagError> {
    let (s, elems) = head_and_elems::<LaserScan>(payload)?;
    let values: Vec<f64> = elems
        .chunks_exact(4)
        .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
        .collect();
    let n_int = (s.intensity_count as usize).min(values.len() / 2);
    let (ranges, intensities) = values.split_at(values.len() - n_int);
    let m = FoxScan {
        timestamp: stamp(&s.header),
        frame_id: s.header.frame_id.as_str().into_owned(),
        pose: None,
        start_angle: f64::from(s.angle_min),
        end_angle: f64::from(s.angle_max),
        ranges: ranges.to_vec(),
        intensities: intensities.to_vec(),
    };
    write(&m, "nerve_msgs/LaserScan as foxglove.LaserScan", out)
}
