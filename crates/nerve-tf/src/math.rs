//! Rigid transforms: a translation and a unit-quaternion rotation, composed, inverted and
//! interpolated.

/// A 3-vector.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Vec3 {
    /// x.
    pub x: f64,
    /// y.
    pub y: f64,
    /// z.
    pub z: f64,
}

impl Vec3 {
    /// A vector from its components.
    pub const fn new(x: f64, y: f64, z: f64) -> Vec3 {
        Vec3 { x, y, z }
    }

    fn add(self, o: Vec3) -> Vec3 {
        Vec3::new(self.x + o.x, self.y + o.y, self.z + o.z)
    }

    fn scale(self, k: f64) -> Vec3 {
        Vec3::new(self.x * k, self.y * k, self.z * k)
    }

    fn cross(self, o: Vec3) -> Vec3 {
        Vec3::new(
            self.y * o.z - self.z * o.y,
            self.z * o.x - self.x * o.z,
            self.x * o.y - self.y * o.x,
        )
    }

    /// Whether every component is finite.
    pub fn is_finite(self) -> bool {
        self.x.is_finite() && self.y.is_finite() && self.z.is_finite()
    }
}

/// A rotation as a unit quaternion (x, y, z, w), as ROS 2 writes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quat {
    /// x.
    pub x: f64,
    /// y.
    pub y: f64,
    /// z.
    pub z: f64,
    /// w.
    pub w: f64,
}

impl Default for Quat {
    fn default() -> Quat {
        Quat::IDENTITY
    }
}

impl Quat {
    /// No rotation.
    pub const IDENTITY: Quat = Quat {
        x: 0.0,
        y: 0.0,
        z: 0.0,
        w: 1.0,
    };

    /// A quaternion from its components (not normalised).
    pub const fn new(x: f64, y: f64, z: f64, w: f64) -> Quat {
        Quat { x, y, z, w }
    }

    /// The rotation by `angle` radians about the unit axis `axis`.
    pub fn from_axis_angle(axis: Vec3, angle: f64) -> Quat {
        let (s, c) = (angle / 2.0).sin_cos();
        Quat::new(axis.x * s, axis.y * s, axis.z * s, c)
    }

    /// Its length (1 for a rotation).
    pub fn norm(self) -> f64 {
        (self.x * self.x + self.y * self.y + self.z * self.z + self.w * self.w).sqrt()
    }

    fn dot(self, o: Quat) -> f64 {
        self.x * o.x + self.y * o.y + self.z * o.z + self.w * o.w
    }

    fn scale(self, k: f64) -> Quat {
        Quat::new(self.x * k, self.y * k, self.z * k, self.w * k)
    }

    /// The rotation `self` after `o` (Hamilton product).
    pub fn compose(self, o: Quat) -> Quat {
        Quat::new(
            self.w * o.x + self.x * o.w + self.y * o.z - self.z * o.y,
            self.w * o.y - self.x * o.z + self.y * o.w + self.z * o.x,
            self.w * o.z + self.x * o.y - self.y * o.x + self.z * o.w,
            self.w * o.w - self.x * o.x - self.y * o.y - self.z * o.z,
        )
    }

    /// The inverse rotation.
    pub fn conjugate(self) -> Quat {
        Quat::new(-self.x, -self.y, -self.z, self.w)
    }

    /// `v` rotated.
    pub fn rotate(self, v: Vec3) -> Vec3 {
        let u = Vec3::new(self.x, self.y, self.z);
        let t = u.cross(v).scale(2.0);
        v.add(t.scale(self.w)).add(u.cross(t))
    }

    /// Spherical interpolation from `self` (k = 0) to `o` (k = 1), the short way round.
    pub fn slerp(self, o: Quat, k: f64) -> Quat {
        let mut d = self.dot(o);
        let o = if d < 0.0 {
            d = -d;
            o.scale(-1.0)
        } else {
            o
        };
        if d > 0.9995 {
            // nearly equal: linear, renormalised
            let q = Quat::new(
                self.x + (o.x - self.x) * k,
                self.y + (o.y - self.y) * k,
                self.z + (o.z - self.z) * k,
                self.w + (o.w - self.w) * k,
            );
            return q.scale(1.0 / q.norm());
        }
        let theta = d.clamp(-1.0, 1.0).acos();
        let s = theta.sin();
        let (a, b) = (((1.0 - k) * theta).sin() / s, (k * theta).sin() / s);
        Quat::new(
            self.x * a + o.x * b,
            self.y * a + o.y * b,
            self.z * a + o.z * b,
            self.w * a + o.w * b,
        )
    }
}

/// Where a child frame is in its parent: `p_parent = rotation * p_child + translation`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Transform {
    /// The child's origin in the parent.
    pub translation: Vec3,
    /// The child's orientation in the parent.
    pub rotation: Quat,
}

impl Transform {
    /// The identity.
    pub const IDENTITY: Transform = Transform {
        translation: Vec3::new(0.0, 0.0, 0.0),
        rotation: Quat::IDENTITY,
    };

    /// A transform from its parts.
    pub fn new(translation: Vec3, rotation: Quat) -> Transform {
        Transform {
            translation,
            rotation,
        }
    }

    /// `self` after `o`: for `self` = B in A and `o` = C in B, C in A.
    pub fn then(self, o: Transform) -> Transform {
        Transform {
            translation: self.translation.add(self.rotation.rotate(o.translation)),
            rotation: self.rotation.compose(o.rotation),
        }
    }

    /// The inverse: for B in A, A in B.
    pub fn inverse(self) -> Transform {
        let r = self.rotation.conjugate();
        Transform {
            translation: r.rotate(self.translation).scale(-1.0),
            rotation: r,
        }
    }

    /// A point of the child frame in the parent frame.
    pub fn apply(self, p: Vec3) -> Vec3 {
        self.rotation.rotate(p).add(self.translation)
    }

    /// Interpolated between `self` (k = 0) and `o` (k = 1): linear translation, slerp
    /// rotation.
    pub fn interpolate(self, o: Transform, k: f64) -> Transform {
        Transform {
            translation: self
                .translation
                .add(o.translation.add(self.translation.scale(-1.0)).scale(k)),
            rotation: self.rotation.slerp(o.rotation, k),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Vec3, b: Vec3) -> bool {
        (a.x - b.x).abs() < 1e-9 && (a.y - b.y).abs() < 1e-9 && (a.z - b.z).abs() < 1e-9
    }

    #[test]
    fn compose_invert_apply() {
        let yaw90 = Quat::from_axis_angle(Vec3::new(0.0, 0.0, 1.0), std::f64::consts::FRAC_PI_2);
        let t = Transform::new(Vec3::new(1.0, 0.0, 0.0), yaw90);
        // x of the child points along y of the parent
        assert!(close(
            t.apply(Vec3::new(1.0, 0.0, 0.0)),
            Vec3::new(1.0, 1.0, 0.0)
        ));
        let back = t.then(t.inverse());
        assert!(close(back.translation, Vec3::default()));
        assert!((back.rotation.w.abs() - 1.0).abs() < 1e-12);
        let p = Vec3::new(0.3, -2.0, 5.0);
        assert!(close(t.inverse().apply(t.apply(p)), p));
    }

    #[test]
    fn slerp_halfway_and_short_way() {
        let z = Vec3::new(0.0, 0.0, 1.0);
        let a = Quat::IDENTITY;
        let b = Quat::from_axis_angle(z, std::f64::consts::FRAC_PI_2);
        let h = a.slerp(b, 0.5);
        let want = Quat::from_axis_angle(z, std::f64::consts::FRAC_PI_4);
        assert!((h.dot(want).abs() - 1.0).abs() < 1e-12);
        // -b is the same rotation: the result must not go the long way round
        let h2 = a.slerp(b.scale(-1.0), 0.5);
        assert!((h2.dot(want).abs() - 1.0).abs() < 1e-12);
    }
}
