//! The lookup walk, one for [`TfTree`](crate::TfTree) and [`TfBuffer`](crate::TfBuffer):
//! from both frames up to their common ancestor, each edge read at one time, composed.
//! A store answers a few questions about its frames ([`Frames`]); how an edge is read
//! between two stamps ([`interpolate`]) lives here too.

use crate::error::TfError;
use crate::math::Transform;
use crate::tree::LATEST;

/// What the walk asks of a store of frames (frames by index).
pub(crate) trait Frames {
    /// The parent of frame `i`, if it has one.
    fn parent(&self, i: u32) -> Option<u32>;
    /// The name of frame `i` (for errors).
    fn name(&self, i: u32) -> &str;
    /// The newest stamp of frame `i`'s edge if it is dynamic and holds any.
    fn newest(&self, i: u32) -> Option<i64>;
    /// Frame `i` in its parent at `time` ([`LATEST`]: the newest held).
    fn edge_at(&self, i: u32, time: i64) -> Result<Transform, TfError>;
}

fn depth<F: Frames + ?Sized>(f: &F, mut i: u32) -> usize {
    let mut d = 0;
    while let Some(p) = f.parent(i) {
        i = p;
        d += 1;
    }
    d
}

fn root<F: Frames + ?Sized>(f: &F, mut i: u32) -> u32 {
    while let Some(p) = f.parent(i) {
        i = p;
    }
    i
}

/// The common ancestor of `a` and `b`, if they are in one tree.
fn common<F: Frames + ?Sized>(f: &F, mut a: u32, mut b: u32) -> Option<u32> {
    let (mut da, mut db) = (depth(f, a), depth(f, b));
    while da > db {
        a = f.parent(a)?;
        da -= 1;
    }
    while db > da {
        b = f.parent(b)?;
        db -= 1;
    }
    while a != b {
        a = f.parent(a)?;
        b = f.parent(b)?;
    }
    Some(a)
}

/// The common ancestor of `t` and `s`, or the error naming both trees.
fn top<F: Frames + ?Sized>(f: &F, t: u32, s: u32) -> Result<u32, TfError> {
    common(f, t, s).ok_or_else(|| TfError::NotConnected {
        target: f.name(t).to_string(),
        source_frame: f.name(s).to_string(),
        target_root: f.name(root(f, t)).to_string(),
        source_root: f.name(root(f, s)).to_string(),
    })
}

/// The newest time every dynamic edge from `from` up to `top` has (at most `t`).
fn latest_common<F: Frames + ?Sized>(f: &F, mut from: u32, top: u32, mut t: i64) -> i64 {
    while from != top {
        if let Some(n) = f.newest(from) {
            t = t.min(n);
        }
        match f.parent(from) {
            Some(p) => from = p,
            None => break,
        }
    }
    t
}

/// `from` in `top` (an ancestor) at `time`.
fn up<F: Frames + ?Sized>(f: &F, mut from: u32, top: u32, time: i64) -> Result<Transform, TfError> {
    let mut acc = Transform::IDENTITY;
    while from != top {
        acc = f.edge_at(from, time)?.then(acc);
        match f.parent(from) {
            Some(p) => from = p,
            None => break,
        }
    }
    Ok(acc)
}

/// The newest stamp every dynamic edge between `t` and `s` has, given their common
/// ancestor `top`; `None` when every edge is static.
fn newest_between<F: Frames + ?Sized>(f: &F, t: u32, s: u32, top: u32) -> Option<i64> {
    let newest = latest_common(f, s, top, i64::MAX);
    let newest = latest_common(f, t, top, newest);
    (newest != i64::MAX).then_some(newest)
}

/// Frame `s` in frame `t` at `time_ns` ([`LATEST`]: the newest time every dynamic edge
/// of the chain has): both walked up to their common ancestor, each edge read at that
/// time. Allocates nothing unless it fails.
pub(crate) fn lookup<F: Frames + ?Sized>(
    f: &F,
    t: u32,
    s: u32,
    time_ns: i64,
) -> Result<Transform, TfError> {
    if t == s {
        return Ok(Transform::IDENTITY);
    }
    let top = top(f, t, s)?;
    let time = if time_ns == LATEST {
        newest_between(f, t, s, top).unwrap_or(LATEST)
    } else {
        time_ns
    };
    let source_in_top = up(f, s, top, time)?;
    let target_in_top = up(f, t, top, time)?;
    Ok(target_in_top.inverse().then(source_in_top))
}

/// The time [`LATEST`] means for `t` and `s`: `None` when every edge between them is
/// static (or they are the same frame).
pub(crate) fn latest_stamp<F: Frames + ?Sized>(
    f: &F,
    t: u32,
    s: u32,
) -> Result<Option<i64>, TfError> {
    let top = top(f, t, s)?;
    Ok(newest_between(f, t, s, top))
}

/// An edge at `time` between its entries `(t0, x0)` and `(t1, x1)` (`t0 <= time <= t1`):
/// linear translation, slerp rotation. The stamps are subtracted as integers and only
/// the small differences become `f64`: epoch nanoseconds (about 1.7e18) are not exact
/// in an `f64` (256 ns apart), their differences are.
pub(crate) fn interpolate(
    (t0, x0): (i64, Transform),
    (t1, x1): (i64, Transform),
    time: i64,
) -> Transform {
    if time >= t1 || t1 <= t0 {
        return x1;
    }
    if time <= t0 {
        return x0;
    }
    let span = (i128::from(t1) - i128::from(t0)) as f64;
    let k = (i128::from(time) - i128::from(t0)) as f64 / span;
    x0.interpolate(x1, k)
}
