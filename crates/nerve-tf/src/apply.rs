//! Applying a looked-up transform to data: points, poses and point clouds (in place).

use crate::math::{Quat, Transform, Vec3};
use nerve_msgs::{datatype, FrameId, PointCloud, Pose};

/// Why a point cloud could not be transformed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CloudError {
    /// The cloud has no `x`, `y` or `z` field.
    #[error("point cloud has no {0:?} field")]
    MissingField(&'static str),
    /// `x`, `y` and `z` are not all float32 or all float64.
    #[error("point cloud field {field:?} has datatype {datatype}; x, y and z must all be float32 (7) or all float64 (8)")]
    FieldType {
        /// The field.
        field: &'static str,
        /// Its datatype code.
        datatype: u8,
    },
    /// Big-endian data.
    #[error("point cloud is big-endian; only little-endian clouds are transformed")]
    BigEndian,
    /// The layout does not fit the data.
    #[error("point cloud layout does not fit its data: {0}")]
    Layout(String),
    /// The target frame's name does not fit `frame_id`.
    #[error("frame name {0:?} is longer than {max} bytes", max = std::mem::size_of::<FrameId>())]
    FrameName(String),
}

/// `points` (in the transform's child frame) moved into its parent frame, in place.
pub fn transform_points(t: &Transform, points: &mut [Vec3]) {
    for p in points {
        *p = t.apply(*p);
    }
}

/// `pose` (in the transform's child frame) in its parent frame.
pub fn transform_pose(t: &Transform, pose: &Pose) -> Pose {
    let (p, o) = (pose.position, pose.orientation);
    let v = t.apply(Vec3::new(p.x, p.y, p.z));
    let q = t.rotation.compose(Quat::new(o.x, o.y, o.z, o.w));
    Pose {
        position: nerve_msgs::Vector3 {
            x: v.x,
            y: v.y,
            z: v.z,
        },
        orientation: nerve_msgs::Quaternion {
            x: q.x,
            y: q.y,
            z: q.z,
            w: q.w,
        },
    }
}

/// Moves every point of a cloud (its head and its `height * row_step` data bytes) by
/// `t` in place: the `x`, `y`, `z` fields (all float32 or all float64, little-endian)
/// are rewritten and `header.frame_id` becomes `target_frame`. Other fields are left
/// as they are. Points are transformed in double precision.
pub fn transform_cloud(
    t: &Transform,
    cloud: &mut PointCloud,
    data: &mut [u8],
    target_frame: &str,
) -> Result<(), CloudError> {
    if cloud.is_bigendian != 0 {
        return Err(CloudError::BigEndian);
    }
    let find = |name: &'static str| {
        cloud
            .fields()
            .iter()
            .find(|f| f.name.as_str() == name)
            .copied()
            .ok_or(CloudError::MissingField(name))
    };
    let (fx, fy, fz) = (find("x")?, find("y")?, find("z")?);
    let width = match fx.datatype {
        datatype::FLOAT32 => 4,
        datatype::FLOAT64 => 8,
        d => {
            return Err(CloudError::FieldType {
                field: "x",
                datatype: d,
            })
        }
    };
    for (name, f) in [("y", fy), ("z", fz)] {
        if f.datatype != fx.datatype {
            return Err(CloudError::FieldType {
                field: name,
                datatype: f.datatype,
            });
        }
    }
    let (step, row_step) = (cloud.point_step as usize, cloud.row_step as usize);
    let (w, h) = (cloud.width as usize, cloud.height as usize);
    let layout = |m: String| CloudError::Layout(m);
    let last = [fx.offset, fy.offset, fz.offset]
        .into_iter()
        .max()
        .unwrap_or(0) as usize
        + width;
    if last > step {
        return Err(layout(format!(
            "fields end at byte {last}, past point_step {step}"
        )));
    }
    if w.checked_mul(step).is_none_or(|b| b > row_step) {
        return Err(layout(format!(
            "width {w} x point_step {step} is more than row_step {row_step}"
        )));
    }
    if h.checked_mul(row_step).is_none_or(|b| b > data.len()) {
        return Err(layout(format!(
            "height {h} x row_step {row_step} is more than the {} data bytes",
            data.len()
        )));
    }
    let target =
        FrameId::new(target_frame).map_err(|_| CloudError::FrameName(target_frame.to_string()))?;
    let offs = [fx.offset as usize, fy.offset as usize, fz.offset as usize];
    for row in 0..h {
        for col in 0..w {
            let base = row * row_step + col * step;
            let get = |d: &[u8], o: usize| -> f64 {
                let at = base + o;
                if width == 4 {
                    f32::from_le_bytes(d[at..at + 4].try_into().unwrap_or([0; 4])) as f64
                } else {
                    f64::from_le_bytes(d[at..at + 8].try_into().unwrap_or([0; 8]))
                }
            };
            let p = Vec3::new(get(data, offs[0]), get(data, offs[1]), get(data, offs[2]));
            let q = t.apply(p);
            for (o, v) in offs.into_iter().zip([q.x, q.y, q.z]) {
                let at = base + o;
                if width == 4 {
                    data[at..at + 4].copy_from_slice(&(v as f32).to_le_bytes());
                } else {
                    data[at..at + 8].copy_from_slice(&v.to_le_bytes());
                }
            }
        }
    }
    cloud.header.frame_id = target;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_poses_and_clouds_move_into_the_parent() {
        let yaw90 = Quat::from_axis_angle(Vec3::new(0.0, 0.0, 1.0), std::f64::consts::FRAC_PI_2);
        let t = Transform::new(Vec3::new(1.0, 0.0, 0.0), yaw90);
        let mut pts = [Vec3::new(1.0, 0.0, 0.0), Vec3::new(0.0, 0.0, 2.0)];
        transform_points(&t, &mut pts);
        assert!((pts[0].x - 1.0).abs() < 1e-12 && (pts[0].y - 1.0).abs() < 1e-12);
        assert!((pts[1].x - 1.0).abs() < 1e-12 && (pts[1].z - 2.0).abs() < 1e-12);
        let pose = transform_pose(&t, &Pose::default());
        assert_eq!(pose.position.x, 1.0);
        assert!((pose.orientation.z - yaw90.z).abs() < 1e-12);

        // two float32 points with an intensity between them
        let mut cloud = PointCloud {
            height: 1,
            width: 2,
            point_step: 16,
            row_step: 32,
            ..PointCloud::default()
        };
        cloud
            .set_fields(&[
                PointCloud::field("x", 0, datatype::FLOAT32, 1),
                PointCloud::field("y", 4, datatype::FLOAT32, 1),
                PointCloud::field("z", 8, datatype::FLOAT32, 1),
                PointCloud::field("intensity", 12, datatype::FLOAT32, 1),
            ])
            .unwrap();
        let mut data = Vec::new();
        for p in [[1.0f32, 0.0, 0.0, 7.0], [0.0, 1.0, 3.0, 8.0]] {
            for v in p {
                data.extend_from_slice(&v.to_le_bytes());
            }
        }
        transform_cloud(&t, &mut cloud, &mut data, "base_link").unwrap();
        let f = |i: usize| f32::from_le_bytes(data[i * 4..i * 4 + 4].try_into().unwrap());
        assert_eq!((f(0), f(1), f(2), f(3)), (1.0, 1.0, 0.0, 7.0));
        assert!((f(4) - 0.0).abs() < 1e-6 && (f(5) - 0.0).abs() < 1e-6);
        assert_eq!((f(6), f(7)), (3.0, 8.0));
        assert_eq!(cloud.header.frame_id.as_str(), "base_link");
        // bad layouts are errors, not panics
        let mut short = data[..20].to_vec();
        let e = transform_cloud(&t, &mut cloud, &mut short, "x").unwrap_err();
        assert!(matches!(e, CloudError::Layout(_)), "{e}");
        cloud
            .set_fields(&[PointCloud::field("x", 0, 7, 1)])
            .unwrap();
        assert_eq!(
            transform_cloud(&t, &mut cloud, &mut data, "x"),
            Err(CloudError::MissingField("y"))
        );
    }
}
