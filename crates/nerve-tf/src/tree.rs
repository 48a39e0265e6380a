//! The frame tree and its bounded histories.

use crate::error::TfError;
use crate::math::Transform;
use std::collections::{HashMap, VecDeque};

/// The time of [`TfTree::lookup`] that means "the latest time every edge of the chain
/// has" (tf2's `Time(0)`).
pub const LATEST: i64 = i64::MIN;

/// How much a tree keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeLimits {
    /// How far back each edge's history reaches from its newest stamp (ns).
    pub window_ns: i64,
    /// Transforms kept per edge at most, whatever their stamps.
    pub max_history: usize,
    /// Frames the tree may hold.
    pub max_frames: usize,
}

impl Default for TreeLimits {
    /// 10 s of history, at most 10,000 transforms per edge, 10,000 frames.
    fn default() -> TreeLimits {
        TreeLimits {
            window_ns: 10_000_000_000,
            max_history: 10_000,
            max_frames: 10_000,
        }
    }
}

/// Rotations whose norm is this close to 1 are normalised; others are refused.
const NORM_TOLERANCE: f64 = 1e-3;

struct Frame {
    name: String,
    parent: Option<u32>,
    is_static: bool,
    /// (stamp ns, this frame in its parent), oldest first.
    history: VecDeque<(i64, Transform)>,
}

/// What the tree knows of one frame (for tools: `nerve tf tree`).
#[derive(Clone, Debug, PartialEq)]
pub struct FrameInfo {
    /// The frame.
    pub name: String,
    /// Its parent, if it has one.
    pub parent: Option<String>,
    /// Whether its transform is static.
    pub is_static: bool,
    /// The newest stamp of its transform (ns), if any.
    pub newest_ns: Option<i64>,
    /// Transforms held.
    pub held: usize,
    /// Average rate over the history held (Hz), for a dynamic frame with two or more.
    pub rate_hz: Option<f64>,
}

/// A tree of frames: each frame's transform in its parent over time.
pub struct TfTree {
    limits: TreeLimits,
    frames: Vec<Frame>,
    index: HashMap<String, u32>,
}

fn check_name(name: &str) -> Result<(), TfError> {
    let bad = |reason| {
        Err(TfError::InvalidName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > 256 {
        return bad("longer than 256 bytes");
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("contains whitespace or control characters");
    }
    Ok(())
}

/// Checks an edge before it is stored: both names valid, not the same frame, a finite
/// translation and a unit rotation (within 1e-3), which comes back normalised.
pub(crate) fn validate(parent: &str, child: &str, t: &Transform) -> Result<Transform, TfError> {
    check_name(parent)?;
    check_name(child)?;
    let norm = t.rotation.norm();
    if !norm.is_finite() || (norm - 1.0).abs() > NORM_TOLERANCE {
        let q = t.rotation;
        return Err(TfError::BadRotation {
            parent: parent.into(),
            child: child.into(),
            rotation: [q.x, q.y, q.z, q.w],
            norm,
        });
    }
    if !t.translation.is_finite() {
        let v = t.translation;
        return Err(TfError::BadTranslation {
            parent: parent.into(),
            child: child.into(),
            translation: [v.x, v.y, v.z],
        });
    }
    if parent == child {
        return Err(TfError::Loop {
            parent: parent.into(),
            child: child.into(),
        });
    }
    let mut t = *t;
    let q = t.rotation;
    t.rotation = crate::math::Quat::new(q.x / norm, q.y / norm, q.z / norm, q.w / norm);
    Ok(t)
}

/// Whether a dynamic stamp is too old to keep: more than `window_ns` before the newest
/// stamp its edge holds (tf2's rule: such data is dropped, with the warning
/// `TF_OLD_DATA`, and nothing else changes).
pub(crate) fn too_old(stamp_ns: i64, newest_ns: i64, window_ns: i64) -> bool {
    stamp_ns < newest_ns.saturating_sub(window_ns)
}

/// Why a dynamic transform was dropped.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Dropped {
    /// More than the window before the newest stamp its edge holds ([`too_old`]).
    Old {
        /// The edge's newest stamp (ns).
        newest_ns: i64,
        /// The window (ns).
        window_ns: i64,
    },
    /// Older than everything a history holding its most transforms holds.
    Full {
        /// The history's bound.
        max: usize,
    },
}

/// Says on stderr that a transform was dropped (tf2's `TF_OLD_DATA` warning), naming the
/// frames, the stamp and why; the caller returns `false`.
pub(crate) fn warn_dropped(parent: &str, child: &str, stamp_ns: i64, why: Dropped) {
    let prefix = "nerve-tf: TF_OLD_DATA ignoring data from the past for frame";
    match why {
        Dropped::Old {
            newest_ns,
            window_ns,
        } => eprintln!(
            "{prefix} {child} (in {parent}) at {stamp_ns} ns: {} ns before the newest it \
             holds ({newest_ns} ns), beyond its {window_ns} ns window",
            i128::from(newest_ns) - i128::from(stamp_ns)
        ),
        Dropped::Full { max } => eprintln!(
            "{prefix} {child} (in {parent}) at {stamp_ns} ns: older than all {max} \
             transforms its full history holds"
        ),
    }
}

impl TfTree {
    /// An empty tree with `limits`.
    pub fn new(limits: TreeLimits) -> TfTree {
        TfTree {
            limits,
            frames: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// The tree's limits.
    pub fn limits(&self) -> TreeLimits {
        self.limits
    }

    /// Frames held.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether it holds no frame.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Forgets every frame (a replayed bag restarted, time jumped back).
    pub fn clear(&mut self) {
        self.frames.clear();
        self.index.clear();
    }

    fn id(&self, name: &str) -> Result<u32, TfError> {
        self.index
            .get(name)
            .copied()
            .ok_or_else(|| TfError::UnknownFrame {
                frame: name.to_string(),
            })
    }

    fn intern(&mut self, name: &str, others_new: usize) -> Result<u32, TfError> {
        if let Some(&i) = self.index.get(name) {
            return Ok(i);
        }
        if self.frames.len() + others_new >= self.limits.max_frames {
            return Err(TfError::TooManyFrames {
                frame: name.to_string(),
                max: self.limits.max_frames,
            });
        }
        let i = self.frames.len() as u32;
        self.frames.push(Frame {
            name: name.to_string(),
            parent: None,
            is_static: false,
            history: VecDeque::new(),
        });
        self.index.insert(name.to_string(), i);
        Ok(i)
    }

    /// Stores `t`, frame `child` in frame `parent` at `stamp_ns`. A static transform holds
    /// at every time and replaces the previous one. The rotation must be a unit quaternion
    /// (within 1e-3, then normalised) and the translation finite; a frame keeps its first
    /// parent; an edge that would close a loop is refused. A stamp more than the window
    /// before the newest its edge holds, or older than everything a full history holds,
    /// is dropped with a warning on stderr (`Ok(false)`, tf2's `TF_OLD_DATA`); nothing
    /// else changes.
    pub fn set_transform(
        &mut self,
        parent: &str,
        child: &str,
        stamp_ns: i64,
        t: Transform,
        is_static: bool,
    ) -> Result<bool, TfError> {
        let t = validate(parent, child, &t)?;
        // both frames exist afterwards: room for both, or neither is made
        let new_child = usize::from(!self.index.contains_key(child));
        let p = self.intern(parent, new_child)?;
        let c = self.intern(child, 0)?;
        match self.frames[c as usize].parent {
            Some(existing) if existing != p => {
                return Err(TfError::TwoParents {
                    child: child.into(),
                    existing: self.frames[existing as usize].name.clone(),
                    requested: parent.into(),
                })
            }
            Some(_) => {}
            None => {
                // the parent must not descend from the child
                let mut f = Some(p);
                while let Some(i) = f {
                    if i == c {
                        return Err(TfError::Loop {
                            parent: parent.into(),
                            child: child.into(),
                        });
                    }
                    f = self.frames[i as usize].parent;
                }
                self.frames[c as usize].parent = Some(p);
            }
        }
        let limits = self.limits;
        let frame = &mut self.frames[c as usize];
        if is_static {
            frame.is_static = true;
            frame.history.clear();
            frame.history.push_back((stamp_ns, t));
            return Ok(true);
        }
        frame.is_static = false;
        let h = &mut frame.history;
        if let Some(newest) = h.back().map(|e| e.0) {
            if too_old(stamp_ns, newest, limits.window_ns) {
                let why = Dropped::Old {
                    newest_ns: newest,
                    window_ns: limits.window_ns,
                };
                warn_dropped(parent, child, stamp_ns, why);
                return Ok(false);
            }
        }
        // usually the newest: appended; otherwise placed in order (an equal stamp replaces)
        let at = h.partition_point(|e| e.0 < stamp_ns);
        if h.get(at).is_some_and(|e| e.0 == stamp_ns) {
            h[at].1 = t;
        } else if at == 0 && h.len() >= limits.max_history {
            // older than everything a full history holds: it would go first
            let why = Dropped::Full {
                max: limits.max_history,
            };
            warn_dropped(parent, child, stamp_ns, why);
            return Ok(false);
        } else {
            h.insert(at, (stamp_ns, t));
        }
        let newest = h.back().map_or(stamp_ns, |e| e.0);
        while h.len() > limits.max_history
            || h.front()
                .is_some_and(|e| e.0 < newest.saturating_sub(limits.window_ns))
        {
            h.pop_front();
        }
        Ok(true)
    }

    /// Frame `source` in frame `target` at `time_ns` ([`LATEST`]: the newest time the
    /// whole chain has), through their common ancestor, each edge interpolated. The
    /// result maps points of `source` into `target`. Allocates nothing.
    pub fn lookup(&self, target: &str, source: &str, time_ns: i64) -> Result<Transform, TfError> {
        crate::walk::lookup(self, self.id(target)?, self.id(source)?, time_ns)
    }

    /// Whether [`TfTree::lookup`] would succeed.
    pub fn can_transform(&self, target: &str, source: &str, time_ns: i64) -> bool {
        self.lookup(target, source, time_ns).is_ok()
    }

    /// Every frame, in the order they appeared.
    pub fn frames(&self) -> Vec<FrameInfo> {
        self.frames
            .iter()
            .map(|f| {
                let (first, last) = (f.history.front(), f.history.back());
                let rate_hz = match (first, last) {
                    (Some(a), Some(b)) if !f.is_static && f.history.len() > 1 && b.0 > a.0 => {
                        Some((f.history.len() - 1) as f64 / ((b.0 - a.0) as f64 / 1e9))
                    }
                    _ => None,
                };
                FrameInfo {
                    name: f.name.clone(),
                    parent: f.parent.map(|p| self.frames[p as usize].name.clone()),
                    is_static: f.is_static,
                    newest_ns: last.map(|e| e.0),
                    held: f.history.len(),
                    rate_hz,
                }
            })
            .collect()
    }
}

impl crate::walk::Frames for TfTree {
    fn parent(&self, i: u32) -> Option<u32> {
        self.frames[i as usize].parent
    }

    fn name(&self, i: u32) -> &str {
        &self.frames[i as usize].name
    }

    fn newest(&self, i: u32) -> Option<i64> {
        let f = &self.frames[i as usize];
        (!f.is_static)
            .then(|| f.history.back().map(|e| e.0))
            .flatten()
    }

    fn edge_at(&self, i: u32, time_ns: i64) -> Result<Transform, TfError> {
        let f = &self.frames[i as usize];
        let h = &f.history;
        let (Some(first), Some(last)) = (h.front(), h.back()) else {
            // a frame known only as a parent has no edge; callers never ask for it
            return Ok(Transform::IDENTITY);
        };
        if f.is_static || time_ns == LATEST {
            return Ok(last.1);
        }
        let extrapolation = |direction| {
            let parent = f
                .parent
                .map_or(String::new(), |p| self.frames[p as usize].name.clone());
            TfError::Extrapolation {
                parent,
                child: f.name.clone(),
                time_ns,
                direction,
                oldest_ns: first.0,
                newest_ns: last.0,
            }
        };
        if time_ns < first.0 {
            return Err(extrapolation("past"));
        }
        if time_ns > last.0 {
            return Err(extrapolation("future"));
        }
        let at = h.partition_point(|e| e.0 < time_ns);
        if at == 0 || h[at].0 == time_ns {
            return Ok(h[at].1);
        }
        Ok(crate::walk::interpolate(h[at - 1], h[at], time_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::{Quat, Vec3};

    const S: i64 = 1_000_000_000;

    fn tr(x: f64, y: f64, z: f64) -> Transform {
        Transform::new(Vec3::new(x, y, z), Quat::IDENTITY)
    }

    fn yaw(x: f64, y: f64, angle: f64) -> Transform {
        Transform::new(
            Vec3::new(x, y, 0.0),
            Quat::from_axis_angle(Vec3::new(0.0, 0.0, 1.0), angle),
        )
    }

    fn close(a: Vec3, b: Vec3) {
        assert!(
            (a.x - b.x).abs() < 1e-9 && (a.y - b.y).abs() < 1e-9 && (a.z - b.z).abs() < 1e-9,
            "{a:?} != {b:?}"
        );
    }

    /// map -> odom -> base -> {lidar (static), camera (static)}
    fn robot() -> TfTree {
        let mut t = TfTree::new(TreeLimits::default());
        t.set_transform("base", "lidar", 0, tr(0.2, 0.0, 0.5), true)
            .unwrap();
        t.set_transform("base", "camera", 0, tr(0.3, 0.0, 0.4), true)
            .unwrap();
        for k in 0..=10 {
            let s = k * S / 10;
            t.set_transform("odom", "base", s, tr(k as f64 * 0.1, 0.0, 0.0), false)
                .unwrap();
            t.set_transform("map", "odom", s, yaw(1.0, 2.0, 0.0), false)
                .unwrap();
        }
        t
    }

    #[test]
    fn chains_compose_through_the_common_ancestor() {
        let t = robot();
        // lidar and camera share base: static, any time
        let c_in_l = t.lookup("lidar", "camera", LATEST).unwrap();
        close(c_in_l.translation, Vec3::new(0.1, 0.0, -0.1));
        // map <- odom <- base <- lidar at 0.5 s: base at x = 0.5 in odom
        let l_in_map = t.lookup("map", "lidar", S / 2).unwrap();
        close(l_in_map.translation, Vec3::new(1.0 + 0.5 + 0.2, 2.0, 0.5));
        // the reverse is the inverse
        let map_in_l = t.lookup("lidar", "map", S / 2).unwrap();
        close(map_in_l.apply(l_in_map.translation), Vec3::default());
        // latest: the newest time both dynamic edges have (1 s)
        let latest = t.lookup("map", "base", LATEST).unwrap();
        close(latest.translation, Vec3::new(2.0, 2.0, 0.0));
    }

    #[test]
    fn interpolates_translation_linearly_and_rotation_by_slerp() {
        let mut t = TfTree::new(TreeLimits::default());
        t.set_transform("a", "b", 0, yaw(0.0, 0.0, 0.0), false)
            .unwrap();
        t.set_transform(
            "a",
            "b",
            S,
            yaw(2.0, 0.0, std::f64::consts::FRAC_PI_2),
            false,
        )
        .unwrap();
        let mid = t.lookup("a", "b", S / 2).unwrap();
        close(mid.translation, Vec3::new(1.0, 0.0, 0.0));
        // half of 90 degrees about z: x of b points at 45 degrees
        let h = std::f64::consts::FRAC_1_SQRT_2;
        close(
            mid.rotation.rotate(Vec3::new(1.0, 0.0, 0.0)),
            Vec3::new(h, h, 0.0),
        );
    }

    #[test]
    fn errors_name_frames_and_times() {
        let mut t = robot();
        let e = t.lookup("map", "nowhere", LATEST).unwrap_err();
        assert_eq!(e.to_string(), "unknown frame \"nowhere\"");
        t.set_transform("world", "other", 0, tr(0.0, 0.0, 0.0), true)
            .unwrap();
        let e = t.lookup("lidar", "other", LATEST).unwrap_err().to_string();
        assert!(
            e.contains("not connected") && e.contains("tree of map") && e.contains("tree of world"),
            "{e}"
        );
        let e = t.lookup("map", "base", 2 * S).unwrap_err().to_string();
        assert!(
            e.contains("future") && e.contains("0 to 1000000000 ns"),
            "{e}"
        );
        let e = t.lookup("map", "base", -1).unwrap_err().to_string();
        assert!(e.contains("past"), "{e}");
        let e = t
            .set_transform("map", "base", 0, tr(0.0, 0.0, 0.0), false)
            .unwrap_err();
        assert_eq!(
            e,
            TfError::TwoParents {
                child: "base".into(),
                existing: "odom".into(),
                requested: "map".into()
            }
        );
        let e = t
            .set_transform("lidar", "map", 0, tr(0.0, 0.0, 0.0), false)
            .unwrap_err();
        assert!(matches!(e, TfError::Loop { .. }), "{e}");
        let nan = Transform::new(Vec3::default(), Quat::new(f64::NAN, 0.0, 0.0, 1.0));
        let e = t
            .set_transform("base", "imu", 0, nan, false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("base -> imu") && e.contains("not a unit quaternion"),
            "{e}"
        );
        let long = Transform::new(Vec3::default(), Quat::new(0.0, 0.0, 0.0, 2.0));
        assert!(matches!(
            t.set_transform("base", "imu", 0, long, false),
            Err(TfError::BadRotation { .. })
        ));
        assert!(matches!(
            t.set_transform("", "imu", 0, Transform::IDENTITY, false),
            Err(TfError::InvalidName { .. })
        ));
    }

    #[test]
    fn histories_and_frames_are_bounded() {
        let limits = TreeLimits {
            window_ns: S,
            max_history: 50,
            max_frames: 3,
        };
        let mut t = TfTree::new(limits);
        for k in 0..1000 {
            t.set_transform("a", "b", k * S / 100, tr(0.0, 0.0, 0.0), false)
                .unwrap();
        }
        let info = &t.frames()[1];
        assert_eq!(info.held, 50);
        assert!((info.rate_hz.unwrap() - 100.0).abs() < 1e-6);
        // older than the window: dropped, not an error
        assert_eq!(
            t.set_transform("a", "b", 0, Transform::IDENTITY, false),
            Ok(false)
        );
        // inside the window but before everything the full history holds (the newest 50,
        // from 9.5 s): dropped too
        assert_eq!(
            t.set_transform("a", "b", 9 * S, Transform::IDENTITY, false),
            Ok(false)
        );
        assert_eq!(t.frames()[1].held, 50);
        let e = t.lookup("a", "b", 9 * S).unwrap_err();
        assert!(
            matches!(e, TfError::Extrapolation { oldest_ns, .. } if oldest_ns == 950 * S / 100),
            "{e}"
        );
        t.set_transform("a", "c", 0, Transform::IDENTITY, true)
            .unwrap();
        let e = t
            .set_transform("a", "d", 0, Transform::IDENTITY, true)
            .unwrap_err();
        assert_eq!(
            e,
            TfError::TooManyFrames {
                frame: "d".into(),
                max: 3
            }
        );
        // a refused edge leaves no half-made frame behind
        assert_eq!(t.len(), 3);
        t.clear();
        assert!(t.is_empty());
    }
}
