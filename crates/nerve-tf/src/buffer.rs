//! [`TfBuffer`]: the frame tree shared by many threads. Readers never lock and never make
//! a writer wait; a lookup allocates nothing.
//!
//! # Layout
//! - Frames live in a table allocated once for `max_frames` entries and filled
//!   append-only ([`OnceLock`] per slot, a published count); a frame is never removed.
//! - Names resolve through an open-addressing index of `2 × max_frames` atomic slots,
//!   filled append-only: a reader probes it without locking or allocating.
//! - Each frame keeps its history (stamp, transform in its parent) in a ring of atomic
//!   words, published seqlock-style: the one writer makes the frame's sequence odd,
//!   writes, makes it even; a reader copies what it needs and retries if the sequence
//!   moved. Payload words are `AtomicU64` (bit-cast `f64`), so a racing read is never a
//!   data race, only a retry. A full ring whose oldest entry is still inside the window
//!   grows by doubling (up to `max_history`); the old ring is kept until the buffer is
//!   dropped, so a reader still holding its pointer reads valid memory.
//! - Writers serialize on one mutex that readers never touch.
//!
//! # Time
//! As in tf2: a dynamic stamp more than the window before the newest its edge holds is
//! dropped with a warning (`Ok(false)`), for that edge only; the buffer forgets its
//! dynamic histories only when the clock it follows ([`TfBuffer::follow_clock`], a
//! context's clock: simulation time included) jumps back.

use crate::error::TfError;
use crate::math::{Quat, Transform, Vec3};
use crate::tree::{too_old, validate, warn_dropped, Dropped, FrameInfo, TreeLimits, LATEST};
use crate::walk::{self, Frames};
use nerve::time::Clock;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

const NO_PARENT: u32 = u32::MAX;
/// Words of one history entry: stamp, translation (3), rotation (4).
const WORDS: usize = 8;
/// Entries of a frame's first ring.
const FIRST_RING: usize = 16;

type Entry = [AtomicU64; WORDS];

/// A frame's history ring (a power of two long).
struct Ring {
    slots: Box<[Entry]>,
}

impl Ring {
    fn new(cap: usize) -> Box<Ring> {
        let slots = (0..cap)
            .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
            .collect();
        Box::new(Ring { slots })
    }

    fn mask(&self) -> u64 {
        self.slots.len() as u64 - 1
    }

    fn stamp(&self, at: u64) -> i64 {
        self.slots[(at & self.mask()) as usize][0].load(Relaxed) as i64
    }

    fn raw(&self, at: u64) -> [u64; WORDS] {
        let e = &self.slots[(at & self.mask()) as usize];
        std::array::from_fn(|k| e[k].load(Relaxed))
    }

    fn write(&self, at: u64, words: [u64; WORDS]) {
        let e = &self.slots[(at & self.mask()) as usize];
        for (slot, w) in e.iter().zip(words) {
            slot.store(w, Relaxed);
        }
    }
}

fn encode(stamp: i64, t: Transform) -> [u64; WORDS] {
    let (v, q) = (t.translation, t.rotation);
    [
        stamp as u64,
        v.x.to_bits(),
        v.y.to_bits(),
        v.z.to_bits(),
        q.x.to_bits(),
        q.y.to_bits(),
        q.z.to_bits(),
        q.w.to_bits(),
    ]
}

fn decode(w: [u64; WORDS]) -> (i64, Transform) {
    let f = |k: usize| f64::from_bits(w[k]);
    (
        w[0] as i64,
        Transform::new(
            Vec3::new(f(1), f(2), f(3)),
            Quat::new(f(4), f(5), f(6), f(7)),
        ),
    )
}

/// One frame: its name, its parent (set once) and its seqlocked history.
struct Frame {
    name: Box<str>,
    parent: AtomicU32,
    /// Even: stable; odd: the writer is changing the fields below.
    seq: AtomicU64,
    ring: AtomicPtr<Ring>,
    /// Logical index of the oldest entry held.
    start: AtomicU64,
    /// Entries held.
    len: AtomicU64,
    is_static: AtomicBool,
    /// Transforms stored since the frame appeared (for rates in tools).
    stored: AtomicU64,
}

/// What one consistent read of a frame's history found at a time.
#[derive(Clone, Copy)]
enum Edge {
    /// Nothing held (a root, or cleared).
    Empty,
    /// An exact entry, or the two around the time.
    Found { lo: [u64; WORDS], hi: [u64; WORDS] },
    /// The time is outside the entries held.
    Outside {
        oldest: i64,
        newest: i64,
        future: bool,
    },
}

/// A frame resolved once by [`TfBuffer::frame`]: lookups by handle skip the name index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameHandle(u32);

/// What names a frame in a lookup: its name (`&str`) or a [`FrameHandle`].
pub trait AsFrame {
    /// The frame's index in `buffer`.
    #[doc(hidden)]
    fn resolve(&self, buffer: &TfBuffer) -> Result<u32, TfError>;
}

impl AsFrame for &str {
    fn resolve(&self, buffer: &TfBuffer) -> Result<u32, TfError> {
        buffer.find(self).ok_or_else(|| TfError::UnknownFrame {
            frame: (*self).to_string(),
        })
    }
}

impl AsFrame for &String {
    fn resolve(&self, buffer: &TfBuffer) -> Result<u32, TfError> {
        self.as_str().resolve(buffer)
    }
}

impl AsFrame for FrameHandle {
    fn resolve(&self, buffer: &TfBuffer) -> Result<u32, TfError> {
        if (self.0 as usize) < buffer.count.load(Acquire) {
            Ok(self.0)
        } else {
            Err(TfError::UnknownFrame {
                frame: format!("#{} (a handle of another buffer)", self.0),
            })
        }
    }
}

/// The writers' side, behind the mutex readers never take.
struct Writer {
    /// Every ring ever published, kept until the buffer is dropped (a reader may still
    /// hold a pointer to a replaced one).
    // boxed: readers hold pointers to the `Ring` itself, which must not move when the
    // vector grows
    #[allow(clippy::vec_box)]
    rings: Vec<Box<Ring>>,
    /// The clock followed ([`TfBuffer::follow_clock`]) and how many of its jumps back
    /// the buffer has acted on.
    clock: Option<(Clock, u32)>,
}

/// A transform buffer for many threads: lookups (`&self`, lock-free, allocation-free)
/// run concurrently with inserts, which never wait for a reader. Share it in an `Arc`.
pub struct TfBuffer {
    limits: TreeLimits,
    frames: Box<[OnceLock<Frame>]>,
    count: AtomicUsize,
    /// Open addressing: frame index + 1, 0 = empty.
    index: Box<[AtomicU32]>,
    writer: Mutex<Writer>,
    jumps: AtomicU64,
    /// Threads in [`TfBuffer::wait_for_transform`].
    waiters: AtomicUsize,
    wake_lock: Mutex<()>,
    wake: Condvar,
}

fn hash(name: &str) -> u64 {
    // FNV-1a: no allocation, no per-process seed needed (names are not adversarial
    // beyond the frame limit)
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl TfBuffer {
    /// An empty buffer with `limits` (window, history per frame, frames), following no
    /// clock until [`TfBuffer::follow_clock`] (a listener gives its node's).
    pub fn new(limits: TreeLimits) -> TfBuffer {
        let limits = TreeLimits {
            max_history: limits.max_history.clamp(2, 1 << 24),
            max_frames: limits.max_frames.clamp(1, 1 << 24),
            window_ns: limits.window_ns.max(0),
        };
        let slots = (limits.max_frames * 2).next_power_of_two();
        TfBuffer {
            limits,
            frames: (0..limits.max_frames).map(|_| OnceLock::new()).collect(),
            count: AtomicUsize::new(0),
            index: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            writer: Mutex::new(Writer {
                rings: Vec::new(),
                clock: None,
            }),
            jumps: AtomicU64::new(0),
            waiters: AtomicUsize::new(0),
            wake_lock: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    /// The buffer's limits.
    pub fn limits(&self) -> TreeLimits {
        self.limits
    }

    /// Frames held.
    pub fn len(&self) -> usize {
        self.count.load(Acquire)
    }

    /// Whether it holds no frame.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many times the clock it follows jumped back and the buffer cleared its dynamic
    /// histories.
    pub fn time_jumps(&self) -> u64 {
        self.jumps.load(Relaxed)
    }

    fn get(&self, i: u32) -> &Frame {
        // every index below the published count has its frame set before the count moved
        self.frames[i as usize]
            .get()
            .expect("frames below the published count are set")
    }

    fn find(&self, name: &str) -> Option<u32> {
        let mask = self.index.len() as u64 - 1;
        let mut h = hash(name) & mask;
        loop {
            // SYNC: Acquire pairs with the Release store in `intern`: the frame the slot
            // names is set before the slot is.
            let v = self.index[h as usize].load(Acquire);
            if v == 0 {
                return None;
            }
            if &*self.get(v - 1).name == name {
                return Some(v - 1);
            }
            h = (h + 1) & mask;
        }
    }

    /// A handle for `name`, for lookups that skip the name index; `None` for a frame
    /// nobody published yet.
    pub fn frame(&self, name: &str) -> Option<FrameHandle> {
        self.find(name).map(FrameHandle)
    }

    /// The name of a frame.
    pub fn frame_name(&self, frame: FrameHandle) -> Option<&str> {
        (frame.resolve(self).ok()).map(|i| &*self.get(i).name)
    }

    fn ring(&self, f: &Frame) -> &Ring {
        // SAFETY: `ring` always points at a ring owned by `Writer::rings` (or the first
        // one, also there), and rings are only freed when the buffer is dropped; `&self`
        // keeps the buffer alive. The pointer may be a replaced ring: still valid memory,
        // and a read through it is discarded by the sequence check.
        unsafe { &*f.ring.load(Acquire) }
    }

    /// One consistent read of frame `f`'s history at `time` (LATEST: the newest).
    fn edge(&self, f: &Frame, time: i64) -> Edge {
        loop {
            // SYNC: Acquire pairs with the writer's final Release store of `seq`: what it
            // wrote before is visible.
            let s1 = f.seq.load(Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let ring = self.ring(f);
            let start = f.start.load(Relaxed);
            let len = f.len.load(Relaxed).min(ring.slots.len() as u64);
            let is_static = f.is_static.load(Relaxed);
            let e = if len == 0 {
                Edge::Empty
            } else {
                let last = start.wrapping_add(len - 1);
                let (oldest, newest) = (ring.stamp(start), ring.stamp(last));
                if is_static || time == LATEST || time == newest {
                    let w = ring.raw(last);
                    Edge::Found { lo: w, hi: w }
                } else if time < oldest || time > newest {
                    Edge::Outside {
                        oldest,
                        newest,
                        future: time > newest,
                    }
                } else {
                    // first entry with stamp >= time (stamps ascend in the ring)
                    let (mut lo, mut hi) = (0u64, len - 1);
                    while lo < hi {
                        let mid = lo + (hi - lo) / 2;
                        if ring.stamp(start.wrapping_add(mid)) < time {
                            lo = mid + 1;
                        } else {
                            hi = mid;
                        }
                    }
                    let upper = ring.raw(start.wrapping_add(lo));
                    let lower = if lo == 0 {
                        upper
                    } else {
                        ring.raw(start.wrapping_add(lo - 1))
                    };
                    Edge::Found {
                        lo: lower,
                        hi: upper,
                    }
                }
            };
            // SYNC: the Acquire fence orders the relaxed payload reads above before the
            // second sequence read (the seqlock reader's side, pairing with the writer's
            // Release fence after making the sequence odd).
            fence(Acquire);
            if f.seq.load(Relaxed) == s1 {
                return e;
            }
        }
    }

    /// Frame `source` in frame `target` at `time_ns` ([`LATEST`]: the newest time every
    /// dynamic edge of the chain has), through their common ancestor, each edge
    /// interpolated (linear translation, slerp rotation). The result maps points of
    /// `source` into `target`. Frames by name or [`FrameHandle`]; lock-free and, unless
    /// it fails, allocation-free.
    pub fn lookup_transform(
        &self,
        target: impl AsFrame,
        source: impl AsFrame,
        time_ns: i64,
    ) -> Result<Transform, TfError> {
        let (t, s) = (target.resolve(self)?, source.resolve(self)?);
        let mut result = walk::lookup(self, t, s, time_ns);
        // LATEST is chosen from the edges' newest stamps, then each edge is read at it:
        // a writer that evicted that time in between (a full count-bounded history)
        // makes it stale; choose again (a few times, then report what happened)
        let mut tries = 0;
        while time_ns == LATEST
            && tries < 8
            && matches!(
                result,
                Err(TfError::Extrapolation {
                    direction: "past",
                    ..
                })
            )
        {
            result = walk::lookup(self, t, s, time_ns);
            tries += 1;
        }
        result
    }

    /// The time [`LATEST`] means for `target` and `source` now: the newest stamp every
    /// dynamic edge between them has; `None` when every edge is static (or the two are
    /// the same frame).
    pub fn latest_stamp(
        &self,
        target: impl AsFrame,
        source: impl AsFrame,
    ) -> Result<Option<i64>, TfError> {
        walk::latest_stamp(self, target.resolve(self)?, source.resolve(self)?)
    }

    /// Whether [`TfBuffer::lookup_transform`] would succeed now.
    pub fn can_transform(&self, target: impl AsFrame, source: impl AsFrame, time_ns: i64) -> bool {
        self.lookup_transform(target, source, time_ns).is_ok()
    }

    /// [`TfBuffer::lookup_transform`], waiting up to `timeout` for the transforms to
    /// arrive; on timeout, the last lookup's error. Waiting takes a lock writers touch
    /// only while someone waits (to wake them).
    pub fn wait_for_transform(
        &self,
        target: impl AsFrame + Copy,
        source: impl AsFrame + Copy,
        time_ns: i64,
        timeout: Duration,
    ) -> Result<Transform, TfError> {
        let deadline = Instant::now() + timeout;
        // SYNC: SeqCst, with the writer's SeqCst fence before it reads `waiters`: either
        // the writer sees this waiter, or this thread's lookup below sees the write.
        self.waiters.fetch_add(1, SeqCst);
        let _done = Decrement(&self.waiters);
        let mut guard = lock(&self.wake_lock);
        loop {
            let result = self.lookup_transform(target, source, time_ns);
            let now = Instant::now();
            if result.is_ok() || now >= deadline {
                return result;
            }
            // a short cap as well: a lookup may also fail because another frame's
            // history moved (LATEST), which rings no bell of its own
            let wait = (deadline - now).min(Duration::from_millis(50));
            guard = match self.wake.wait_timeout(guard, wait) {
                Ok((g, _)) => g,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Stores `t`, frame `child` in frame `parent` at `stamp_ns`, as
    /// [`crate::TfTree::set_transform`] does (same checks, same errors): a dynamic stamp
    /// more than the window before the newest its edge holds, or older than everything a
    /// full history holds, is dropped with a warning on stderr (`Ok(false)`, tf2's
    /// `TF_OLD_DATA`) and nothing else changes. A jump back of the clock followed
    /// ([`TfBuffer::follow_clock`]) is acted on first. Writers take turns; readers never
    /// wait.
    pub fn set_transform(
        &self,
        parent: &str,
        child: &str,
        stamp_ns: i64,
        t: Transform,
        is_static: bool,
    ) -> Result<bool, TfError> {
        let t = validate(parent, child, &t)?;
        let mut w = lock(&self.writer);
        self.follow_jumps(&mut w);
        let new_child = usize::from(self.find(child).is_none());
        let p = self.intern(&mut w, parent, new_child)?;
        let c = self.intern(&mut w, child, 0)?;
        let frame = self.get(c);
        match self.parent(c) {
            Some(existing) if existing != p => {
                return Err(TfError::TwoParents {
                    child: child.into(),
                    existing: self.get(existing).name.to_string(),
                    requested: parent.into(),
                })
            }
            Some(_) => {}
            None => {
                let mut f = Some(p);
                while let Some(i) = f {
                    if i == c {
                        return Err(TfError::Loop {
                            parent: parent.into(),
                            child: child.into(),
                        });
                    }
                    f = self.parent(i);
                }
                // SYNC: Release publishes the parent frame (set before) to readers that
                // load the parent with Acquire.
                frame.parent.store(p, Release);
            }
        }
        let stored = if is_static {
            self.write(frame, |ring, _, _| {
                ring.write(0, encode(stamp_ns, t));
                (0, 1, true)
            });
            true
        } else {
            self.insert_dynamic(&mut w, (parent, child, c), stamp_ns, t)
        };
        drop(w);
        if stored {
            frame.stored.fetch_add(1, Relaxed);
            // SYNC: SeqCst fence between the seqlock's publication and the read of
            // `waiters`, against the SeqCst increment in `wait_for_transform`.
            fence(SeqCst);
            if self.waiters.load(Relaxed) > 0 {
                let _g = lock(&self.wake_lock);
                self.wake.notify_all();
            }
        }
        Ok(stored)
    }

    /// Stores a message's transform ([`TfBuffer::set_transform`]).
    pub fn set_msg(
        &self,
        m: &nerve_msgs::TransformStamped,
        is_static: bool,
    ) -> Result<bool, TfError> {
        let (parent, child, stamp, t) = crate::topics::from_msg(m);
        self.set_transform(&parent, &child, stamp, t, is_static)
    }

    /// The frame's index for `name`, made (with its first ring) if new. `others_new`
    /// frames must still fit after it (both frames of an edge, or neither).
    fn intern(&self, w: &mut Writer, name: &str, others_new: usize) -> Result<u32, TfError> {
        if let Some(i) = self.find(name) {
            return Ok(i);
        }
        let n = self.count.load(Relaxed);
        if n + others_new >= self.limits.max_frames {
            return Err(TfError::TooManyFrames {
                frame: name.to_string(),
                max: self.limits.max_frames,
            });
        }
        let ring = Ring::new(FIRST_RING.min(self.limits.max_history.next_power_of_two()));
        let ptr = &*ring as *const Ring as *mut Ring;
        w.rings.push(ring);
        let frame = Frame {
            name: name.into(),
            parent: AtomicU32::new(NO_PARENT),
            seq: AtomicU64::new(0),
            ring: AtomicPtr::new(ptr),
            start: AtomicU64::new(0),
            len: AtomicU64::new(0),
            is_static: AtomicBool::new(false),
            stored: AtomicU64::new(0),
        };
        if self.frames[n].set(frame).is_err() {
            unreachable!("frame slots past the count are empty (one writer at a time)");
        }
        // SYNC: Release publishes the frame to readers of the count (Acquire).
        self.count.store(n + 1, Release);
        let mask = self.index.len() as u64 - 1;
        let mut h = hash(name) & mask;
        while self.index[h as usize].load(Relaxed) != 0 {
            h = (h + 1) & mask;
        }
        // SYNC: Release publishes the frame (set above) to `find`, which loads with
        // Acquire.
        self.index[h as usize].store(n as u32 + 1, Release);
        Ok(n as u32)
    }

    /// Changes frame `f`'s history as `change` says: it gets the ring, start and length
    /// and returns the new start, length and staticness. Seqlock writer side.
    fn write(&self, f: &Frame, change: impl FnOnce(&Ring, u64, u64) -> (u64, u64, bool)) {
        let s = f.seq.load(Relaxed);
        f.seq.store(s.wrapping_add(1), Relaxed);
        // SYNC: the Release fence orders the odd sequence before the payload writes below
        // (a reader that sees any of them sees the sequence moved).
        fence(Release);
        let ring = self.ring(f);
        let (start, len, is_static) = change(ring, f.start.load(Relaxed), f.len.load(Relaxed));
        f.start.store(start, Relaxed);
        f.len.store(len, Relaxed);
        f.is_static.store(is_static, Relaxed);
        // SYNC: Release publishes the payload with the even sequence.
        f.seq.store(s.wrapping_add(2), Release);
    }

    /// Stores a dynamic transform of frame `c` (named `child`, in `parent`); `false` (and
    /// a warning) when it is dropped as too old.
    fn insert_dynamic(
        &self,
        w: &mut Writer,
        (parent, child, c): (&str, &str, u32),
        stamp: i64,
        t: Transform,
    ) -> bool {
        let f = self.get(c);
        let (window, max) = (self.limits.window_ns, self.limits.max_history as u64);
        // writers are serialized: plain reads of our own fields are stable here
        let held = if f.is_static.load(Relaxed) {
            0
        } else {
            f.len.load(Relaxed)
        };
        if held > 0 {
            let ring = self.ring(f);
            let newest = ring.stamp(f.start.load(Relaxed) + held - 1);
            if too_old(stamp, newest, window) {
                let why = Dropped::Old {
                    newest_ns: newest,
                    window_ns: window,
                };
                warn_dropped(parent, child, stamp, why);
                return false;
            }
        }
        // grow a full ring whose oldest entry is still inside the window
        let (start, len) = if f.is_static.load(Relaxed) {
            (0, 0)
        } else {
            (f.start.load(Relaxed), f.len.load(Relaxed))
        };
        let ring = self.ring(f);
        let cap = ring.slots.len() as u64;
        if len == cap && cap < max.next_power_of_two() {
            let newest = ring.stamp(start + len - 1).max(stamp);
            if ring.stamp(start) >= newest.saturating_sub(window) {
                let bigger = Ring::new(cap as usize * 2);
                for k in 0..len {
                    bigger.write(k, ring.raw(start + k));
                }
                let ptr = &*bigger as *const Ring as *mut Ring;
                w.rings.push(bigger);
                let s = f.seq.load(Relaxed);
                f.seq.store(s.wrapping_add(1), Relaxed);
                // SYNC: as in `write`: the odd sequence before the new ring and start.
                fence(Release);
                f.ring.store(ptr, Release);
                f.start.store(0, Relaxed);
                // SYNC: Release publishes the new ring with the even sequence.
                f.seq.store(s.wrapping_add(2), Release);
            }
        }
        let was_static = f.is_static.load(Relaxed);
        let mut kept = true;
        self.write(f, |ring, start, len| {
            let (mut start, mut len) = if was_static { (0, 0) } else { (start, len) };
            let cap = ring.slots.len() as u64;
            // position: first entry with a stamp >= the new one (usually the end)
            let mut pos = len;
            while pos > 0 && ring.stamp(start.wrapping_add(pos - 1)) >= stamp {
                pos -= 1;
            }
            if pos < len && ring.stamp(start.wrapping_add(pos)) == stamp {
                ring.write(start.wrapping_add(pos), encode(stamp, t));
            } else {
                if len == cap || len == max {
                    if pos == 0 {
                        // older than everything in a full history: not kept
                        kept = false;
                        return (start, len, false);
                    }
                    start = start.wrapping_add(1);
                    len -= 1;
                    pos -= 1;
                }
                let mut k = len;
                while k > pos {
                    ring.write(start.wrapping_add(k), ring.raw(start.wrapping_add(k - 1)));
                    k -= 1;
                }
                ring.write(start.wrapping_add(pos), encode(stamp, t));
                len += 1;
            }
            let newest = ring.stamp(start.wrapping_add(len - 1));
            while len > 1 && ring.stamp(start) < newest.saturating_sub(window) {
                start = start.wrapping_add(1);
                len -= 1;
            }
            (start, len, false)
        });
        if !kept {
            warn_dropped(parent, child, stamp, Dropped::Full { max: max as usize });
        }
        kept
    }

    /// Forgets every dynamic history (static transforms, frames and parents stay).
    fn clear_dynamic(&self) {
        for i in 0..self.count.load(Relaxed) {
            let f = self.get(i as u32);
            if !f.is_static.load(Relaxed) {
                self.write(f, |_, _, _| (0, 0, false));
            }
        }
    }

    /// Follows `clock` (a context's clock, see `nerve::time`; a [`crate::Listener`] gives
    /// its node's): whenever it jumps back (simulation time played again), the buffer
    /// forgets every dynamic history (static transforms, frames and parents stay), as
    /// tf2's buffer does on its clock's jump back, and counts it in
    /// [`TfBuffer::time_jumps`]. A buffer follows the last clock given; a jump is acted
    /// on at the next insert or [`TfBuffer::check_clock`].
    pub fn follow_clock(&self, clock: &Clock) {
        let mut w = lock(&self.writer);
        // a jump of the clock followed so far is not lost
        self.follow_jumps(&mut w);
        w.clock = Some((clock.clone(), clock.jumps_back()));
    }

    /// Acts on jumps back of the clock followed since the last look (listeners call it at
    /// every update); whether the buffer cleared its dynamic histories.
    pub fn check_clock(&self) -> bool {
        self.follow_jumps(&mut lock(&self.writer))
    }

    /// The one place that decides a reset: the clock followed jumped back since the last
    /// look.
    fn follow_jumps(&self, w: &mut Writer) -> bool {
        let Some((clock, seen)) = &mut w.clock else {
            return false;
        };
        let jumps = clock.jumps_back();
        if jumps == *seen {
            return false;
        }
        *seen = jumps;
        self.clear_dynamic();
        let n = self.jumps.fetch_add(1, Relaxed) + 1;
        eprintln!(
            "nerve-tf: the clock jumped back (to {} ns): cleared every dynamic transform \
             (time jump {n})",
            clock.now_ns()
        );
        true
    }

    /// Forgets every transform, dynamic and static (frames and their parents stay, as
    /// frames are never removed: the frame limit counts every frame ever seen).
    pub fn clear(&self) {
        let _w = lock(&self.writer);
        for i in 0..self.count.load(Relaxed) {
            self.write(self.get(i as u32), |_, _, _| (0, 0, false));
        }
    }

    /// Every frame, in the order they appeared (for tools).
    pub fn frames(&self) -> Vec<FrameInfo> {
        (0..self.len() as u32)
            .map(|i| {
                let f = self.get(i);
                let (newest, oldest, held, is_static) = loop {
                    let s1 = f.seq.load(Acquire);
                    if s1 & 1 == 1 {
                        std::hint::spin_loop();
                        continue;
                    }
                    let ring = self.ring(f);
                    let start = f.start.load(Relaxed);
                    let len = f.len.load(Relaxed).min(ring.slots.len() as u64);
                    let is_static = f.is_static.load(Relaxed);
                    let (o, n) = (
                        ring.stamp(start),
                        ring.stamp(start.wrapping_add(len.max(1) - 1)),
                    );
                    // SYNC: as in `edge`.
                    fence(Acquire);
                    if f.seq.load(Relaxed) == s1 {
                        break (n, o, len, is_static);
                    }
                };
                let rate_hz = (!is_static && held > 1 && newest > oldest)
                    .then(|| (held - 1) as f64 / ((newest - oldest) as f64 / 1e9));
                FrameInfo {
                    name: f.name.to_string(),
                    parent: self.parent(i).map(|p| self.get(p).name.to_string()),
                    is_static,
                    newest_ns: (held > 0).then_some(newest),
                    held: held as usize,
                    rate_hz,
                }
            })
            .collect()
    }

    /// Transforms stored for `frame` (as child) since it appeared.
    pub fn stored(&self, frame: impl AsFrame) -> Result<u64, TfError> {
        Ok(self.get(frame.resolve(self)?).stored.load(Relaxed))
    }
}

impl Frames for TfBuffer {
    fn parent(&self, i: u32) -> Option<u32> {
        // SYNC: Acquire pairs with the Release store setting the parent: the parent frame
        // is published before.
        match self.get(i).parent.load(Acquire) {
            NO_PARENT => None,
            p => Some(p),
        }
    }

    fn name(&self, i: u32) -> &str {
        &self.get(i).name
    }

    fn newest(&self, i: u32) -> Option<i64> {
        let f = self.get(i);
        match self.edge(f, LATEST) {
            Edge::Found { hi, .. } if !f.is_static.load(Relaxed) => Some(hi[0] as i64),
            _ => None,
        }
    }

    fn edge_at(&self, i: u32, time: i64) -> Result<Transform, TfError> {
        let f = self.get(i);
        let parent_name = || {
            self.parent(i)
                .map_or(String::new(), |p| self.name(p).into())
        };
        match self.edge(f, time) {
            Edge::Found { hi, .. } if time == LATEST => Ok(decode(hi).1),
            Edge::Found { lo, hi } => Ok(walk::interpolate(decode(lo), decode(hi), time)),
            Edge::Outside {
                oldest,
                newest,
                future,
            } => Err(TfError::Extrapolation {
                parent: parent_name(),
                child: f.name.to_string(),
                time_ns: time,
                direction: if future { "future" } else { "past" },
                oldest_ns: oldest,
                newest_ns: newest,
            }),
            Edge::Empty => Err(TfError::NoData {
                parent: parent_name(),
                child: f.name.to_string(),
            }),
        }
    }
}

impl std::fmt::Debug for TfBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TfBuffer")
            .field("frames", &self.len())
            .field("limits", &self.limits)
            .field("time_jumps", &self.time_jumps())
            .finish()
    }
}

/// A mutex's guard, whatever a panicking holder left (the data are atomics or rings,
/// consistent at every step).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct Decrement<'a>(&'a AtomicUsize);

impl Drop for Decrement<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const S: i64 = 1_000_000_000;

    fn tr(x: f64, y: f64, z: f64) -> Transform {
        Transform::new(Vec3::new(x, y, z), Quat::IDENTITY)
    }

    fn close(a: Vec3, b: Vec3) {
        assert!(
            (a.x - b.x).abs() < 1e-9 && (a.y - b.y).abs() < 1e-9 && (a.z - b.z).abs() < 1e-9,
            "{a:?} != {b:?}"
        );
    }

    fn robot() -> TfBuffer {
        let b = TfBuffer::new(TreeLimits::default());
        b.set_transform("base", "lidar", 0, tr(0.2, 0.0, 0.5), true)
            .unwrap();
        for k in 0..=10 {
            let s = k * S / 10;
            b.set_transform("odom", "base", s, tr(k as f64 * 0.1, 0.0, 0.0), false)
                .unwrap();
            b.set_transform("map", "odom", s, tr(1.0, 2.0, 0.0), false)
                .unwrap();
        }
        b
    }

    #[test]
    fn lookups_match_the_tree() {
        let b = robot();
        let l = b.lookup_transform("map", "lidar", S / 2).unwrap();
        close(l.translation, Vec3::new(1.7, 2.0, 0.5));
        assert_eq!(b.latest_stamp("map", "lidar").unwrap(), Some(S));
        assert_eq!(b.latest_stamp("base", "lidar").unwrap(), None);
        let l = b.lookup_transform("map", "base", LATEST).unwrap();
        close(l.translation, Vec3::new(2.0, 2.0, 0.0));
        let back = b.lookup_transform("lidar", "map", S / 2).unwrap();
        close(back.apply(Vec3::new(1.7, 2.0, 0.5)), Vec3::default());
        // by handle
        let (m, li) = (b.frame("map").unwrap(), b.frame("lidar").unwrap());
        assert_eq!(b.frame_name(m), Some("map"));
        let h = b.lookup_transform(m, li, S / 4).unwrap();
        close(h.translation, Vec3::new(1.45, 2.0, 0.5));
        assert!(b.frame("nowhere").is_none());
        let e = b.lookup_transform("map", "nowhere", LATEST).unwrap_err();
        assert_eq!(e.to_string(), "unknown frame \"nowhere\"");
        let e = b
            .lookup_transform("map", "base", 2 * S)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("future") && e.contains("0 to 1000000000 ns"),
            "{e}"
        );
        b.set_transform("world", "other", 0, Transform::IDENTITY, true)
            .unwrap();
        let e = b
            .lookup_transform("lidar", "other", LATEST)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tree of map") && e.contains("tree of world"),
            "{e}"
        );
        let frames = b.frames();
        let base = frames.iter().find(|f| f.name == "base").unwrap();
        assert_eq!(base.parent.as_deref(), Some("odom"));
        assert_eq!((base.held, base.newest_ns), (11, Some(S)));
        assert!((base.rate_hz.unwrap() - 10.0).abs() < 1e-9);
        assert!(frames.iter().find(|f| f.name == "lidar").unwrap().is_static);
        assert_eq!(b.stored("base").unwrap(), 11);
    }

    #[test]
    fn bad_input_is_refused_naming_the_frames() {
        let b = robot();
        let nan = Transform::new(Vec3::default(), Quat::new(f64::NAN, 0.0, 0.0, 1.0));
        let e = b.set_transform("base", "imu", 0, nan, false).unwrap_err();
        assert!(e.to_string().contains("base -> imu"), "{e}");
        let long = Transform::new(Vec3::default(), Quat::new(0.0, 0.0, 0.0, 2.0));
        assert!(matches!(
            b.set_transform("base", "imu", 0, long, false),
            Err(TfError::BadRotation { .. })
        ));
        assert!(
            b.frame("imu").is_none(),
            "a refused transform makes no frame"
        );
        let e = b
            .set_transform("map", "base", 0, Transform::IDENTITY, false)
            .unwrap_err();
        assert_eq!(
            e,
            TfError::TwoParents {
                child: "base".into(),
                existing: "odom".into(),
                requested: "map".into()
            }
        );
        assert!(matches!(
            b.set_transform("lidar", "map", 0, Transform::IDENTITY, false),
            Err(TfError::Loop { .. })
        ));
    }

    #[test]
    fn histories_are_bounded_by_window_count_and_frames() {
        let limits = TreeLimits {
            window_ns: S,
            max_history: 50,
            max_frames: 3,
        };
        let b = TfBuffer::new(limits);
        for k in 0..1000 {
            b.set_transform("a", "b", k * S / 100, tr(k as f64, 0.0, 0.0), false)
                .unwrap();
        }
        let info = &b.frames()[1];
        assert_eq!(info.held, 50);
        // the newest 50 (0.01 s apart) are held
        let e = b.lookup_transform("a", "b", 9 * S).unwrap_err().to_string();
        assert!(e.contains("past"), "{e}");
        close(
            b.lookup_transform("a", "b", 9990 * S / 1000)
                .unwrap()
                .translation,
            Vec3::new(999.0, 0.0, 0.0),
        );
        // older than the window: dropped
        let b2 = TfBuffer::new(limits);
        for k in 0..300 {
            b2.set_transform("a", "b", k * S / 100, Transform::IDENTITY, false)
                .unwrap();
        }
        assert_eq!(
            b2.set_transform("a", "b", 0, Transform::IDENTITY, false),
            Ok(false)
        );
        assert_eq!(b2.time_jumps(), 0);
        // the window: 1 s back from the newest
        let info = &b2.frames()[1];
        assert_eq!(info.held, 50);
        b.set_transform("a", "c", 0, Transform::IDENTITY, true)
            .unwrap();
        let e = b
            .set_transform("a", "d", 0, Transform::IDENTITY, true)
            .unwrap_err();
        assert_eq!(
            e,
            TfError::TooManyFrames {
                frame: "d".into(),
                max: 3
            }
        );
        assert_eq!(b.len(), 3);
    }

    #[test]
    fn rings_grow_inside_the_window_and_out_of_order_stamps_are_placed() {
        let b = TfBuffer::new(TreeLimits::default());
        // 2 s at 1 kHz: 2,001 entries, all inside the 10 s window
        for k in 0..=2000 {
            b.set_transform("a", "b", k * S / 1000, tr(k as f64, 0.0, 0.0), false)
                .unwrap();
        }
        assert_eq!(b.frames()[1].held, 2001);
        close(
            b.lookup_transform("a", "b", S / 2 + S / 2000)
                .unwrap()
                .translation,
            Vec3::new(500.5, 0.0, 0.0),
        );
        // an older stamp (inside the window) is placed in order
        b.set_transform("x", "y", 10 * S, tr(10.0, 0.0, 0.0), false)
            .unwrap();
        b.set_transform("x", "y", 12 * S, tr(12.0, 0.0, 0.0), false)
            .unwrap();
        b.set_transform("x", "y", 11 * S + S / 2, tr(13.0, 0.0, 0.0), false)
            .unwrap();
        close(
            b.lookup_transform("x", "y", 11 * S).unwrap().translation,
            Vec3::new(12.0, 0.0, 0.0),
        );
        // an equal stamp replaces
        b.set_transform("x", "y", 12 * S, tr(20.0, 0.0, 0.0), false)
            .unwrap();
        close(
            b.lookup_transform("x", "y", LATEST).unwrap().translation,
            Vec3::new(20.0, 0.0, 0.0),
        );
        assert_eq!(b.frames().iter().find(|f| f.name == "y").unwrap().held, 3);
    }

    /// tf2's rule: a stamp more than the window (10 s) before its edge's newest is
    /// dropped for that edge only (`Ok(false)`); one inside the window, however far back,
    /// is placed in order. Stamps going back never clear the buffer: only its clock does.
    #[test]
    fn an_old_stamp_is_dropped_for_its_edge_only() {
        let b = robot();
        for k in 2..=12 {
            b.set_transform("odom", "base", k * S, tr(k as f64, 0.0, 0.0), false)
                .unwrap();
            b.set_transform("map", "odom", k * S, tr(1.0, 2.0, k as f64), false)
                .unwrap();
        }
        let held = |name: &str| b.frames().into_iter().find(|f| f.name == name).unwrap();
        let (base, odom) = (held("base"), held("odom"));
        let stored = b.stored("base").unwrap();
        // 11 s before the newest (12 s): older than the window
        assert_eq!(
            b.set_transform("odom", "base", S, tr(-1.0, 0.0, 0.0), false),
            Ok(false)
        );
        assert_eq!(held("base"), base);
        assert_eq!(held("odom"), odom);
        assert_eq!(b.stored("base").unwrap(), stored);
        assert_eq!(b.time_jumps(), 0);
        // the window held: 2 s to 12 s
        close(
            b.lookup_transform("odom", "base", 2 * S)
                .unwrap()
                .translation,
            Vec3::new(2.0, 0.0, 0.0),
        );
        close(
            b.lookup_transform("map", "base", 5 * S + S / 2)
                .unwrap()
                .translation,
            Vec3::new(6.5, 2.0, 5.5),
        );
        // 1.5 s back, inside the window: kept, in order, nothing else changes
        assert_eq!(
            b.set_transform("odom", "base", 10 * S + S / 2, tr(-3.0, 0.0, 0.0), false),
            Ok(true)
        );
        assert_eq!(held("base").held, base.held + 1);
        assert_eq!(held("odom"), odom);
        assert_eq!(b.time_jumps(), 0);
        close(
            b.lookup_transform("map", "base", 10 * S + S / 2)
                .unwrap()
                .translation,
            Vec3::new(-2.0, 2.0, 10.5),
        );
        // a full history drops what would go before everything it holds
        let small = TfBuffer::new(TreeLimits {
            max_history: 4,
            ..TreeLimits::default()
        });
        for k in 1..=4 {
            small
                .set_transform("a", "b", k * S, Transform::IDENTITY, false)
                .unwrap();
        }
        assert_eq!(
            small.set_transform("a", "b", S / 2, Transform::IDENTITY, false),
            Ok(false)
        );
        assert_eq!(small.frames()[1].held, 4);
        assert!(!small.can_transform("a", "b", S / 2));
    }

    /// tf2's reset: when the clock followed jumps back (simulation time played again),
    /// every dynamic history is forgotten once, static transforms kept; moving forward
    /// changes nothing.
    #[test]
    fn a_clock_jump_back_clears_the_dynamic_histories() {
        let clock = Clock::manual();
        clock.set(10 * S);
        let b = robot();
        b.follow_clock(&clock);
        clock.set(11 * S);
        assert!(!b.check_clock(), "forward is no jump");
        assert!(b.can_transform("map", "lidar", S / 2));
        clock.set(5 * S);
        assert!(b.check_clock());
        assert!(!b.check_clock(), "one jump clears once");
        assert_eq!(b.time_jumps(), 1);
        let e = b.lookup_transform("map", "base", 0).unwrap_err();
        assert!(matches!(e, TfError::NoData { .. }), "{e}");
        assert!(b.can_transform("base", "lidar", 123), "static kept");
        // the next insert acts on a jump itself, before it stores
        b.set_transform("odom", "base", 3 * S, tr(3.0, 0.0, 0.0), false)
            .unwrap();
        b.set_transform("map", "odom", 3 * S, tr(1.0, 2.0, 0.0), false)
            .unwrap();
        clock.set(S);
        b.set_transform("odom", "base", 0, tr(5.0, 0.0, 0.0), false)
            .unwrap();
        assert_eq!(b.time_jumps(), 2);
        assert_eq!(b.latest_stamp("odom", "base").unwrap(), Some(0));
        assert!(!b.can_transform("map", "odom", 3 * S));
        // a clock followed before keeps its pending jump when another is given
        clock.set(0);
        b.follow_clock(&Clock::manual());
        assert_eq!(b.time_jumps(), 3);
    }

    /// A chain of two dynamic edges at epoch stamps (1.7e18 ns), interpolated, against
    /// an oracle in exact integer arithmetic: within 1e-9 m (an `f64` holds such stamps
    /// only to 256 ns, which subtracting them as `f64` turned into up to 2e-5 m here).
    #[test]
    fn epoch_stamps_interpolate_exactly_through_dynamic_edges() {
        let t0: i64 = 1_700_000_000_123_456_789;
        let span: i64 = 100_000_000;
        let b = TfBuffer::new(TreeLimits::default());
        let mut tree = crate::TfTree::new(TreeLimits::default());
        for (stamp, k) in [(t0, 0.0), (t0 + span, 1.0)] {
            let edges = [
                ("map", "odom", tr(10.0 * k, -4.0 * k, 0.0)),
                ("odom", "base", tr(2.0 + 5.0 * k, 0.0, 1.0)),
            ];
            for (p, c, t) in edges {
                b.set_transform(p, c, stamp, t, false).unwrap();
                tree.set_transform(p, c, stamp, t, false).unwrap();
            }
        }
        for d in [1, 3, 12_345_677, 50_000_001, 77_777_777, span - 1] {
            // x = 2 + 15 d / span, y = -4 d / span, each fraction exact in integers
            let frac = |m: i64| {
                let n = i128::from(m) * i128::from(d);
                let (q, r) = (n / i128::from(span), n % i128::from(span));
                q as f64 + r as f64 / span as f64
            };
            let want = Vec3::new(2.0 + frac(15), frac(-4), 1.0);
            let at = t0 + d;
            close(
                b.lookup_transform("map", "base", at).unwrap().translation,
                want,
            );
            close(tree.lookup("map", "base", at).unwrap().translation, want);
        }
    }

    /// The buffer and the tree answer every lookup alike (the walk is one): a tree of
    /// frames with static and dynamic edges, every pair at exact, interpolated, latest
    /// and out-of-range times.
    #[test]
    fn the_buffer_and_the_tree_answer_alike() {
        let b = TfBuffer::new(TreeLimits::default());
        let mut tree = crate::TfTree::new(TreeLimits::default());
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let names = ["w", "a", "b", "c", "d", "e", "f", "g", "h"];
        // w is the root; frame k hangs from one before it; h is in a tree of its own
        for k in 1..names.len() - 1 {
            let parent = names[(next() * k as f64) as usize];
            let is_static = k % 3 == 0;
            for step in 0..=(if is_static { 0 } else { 20 }) {
                let angle = next() * 3.0;
                let t = Transform::new(
                    Vec3::new(next(), next(), next()),
                    Quat::from_axis_angle(Vec3::new(0.0, 0.0, 1.0), angle),
                );
                let stamp = step * S / 10 + k as i64;
                b.set_transform(parent, names[k], stamp, t, is_static)
                    .unwrap();
                tree.set_transform(parent, names[k], stamp, t, is_static)
                    .unwrap();
            }
        }
        b.set_transform("x", "h", 0, Transform::IDENTITY, true)
            .unwrap();
        tree.set_transform("x", "h", 0, Transform::IDENTITY, true)
            .unwrap();
        let times = [LATEST, 0, 7, S / 10 + 4, S / 3, S + 5, 3 * S, -S];
        let (mut found, mut refused) = (0, 0);
        for target in names {
            for source in names {
                for time in times {
                    let got = b.lookup_transform(target, source, time);
                    assert_eq!(
                        got,
                        tree.lookup(target, source, time),
                        "{target} <- {source} at {time}"
                    );
                    match got {
                        Ok(_) => found += 1,
                        Err(_) => refused += 1,
                    }
                }
            }
        }
        // both kinds of answer were compared
        assert!(found > 0 && refused > 0, "{found} found, {refused} refused");
    }

    #[test]
    fn wait_for_transform_wakes_when_the_transform_arrives() {
        let b = Arc::new(TfBuffer::new(TreeLimits::default()));
        let e = b
            .wait_for_transform("a", "b", LATEST, Duration::from_millis(20))
            .unwrap_err();
        assert!(matches!(e, TfError::UnknownFrame { .. }));
        let writer = {
            let b = b.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                b.set_transform("a", "b", 5, tr(1.0, 0.0, 0.0), false)
                    .unwrap();
            })
        };
        let t = b
            .wait_for_transform("a", "b", 5, Duration::from_secs(30))
            .unwrap();
        close(t.translation, Vec3::new(1.0, 0.0, 0.0));
        writer.join().unwrap();
    }

    /// Readers on other threads always see a consistent transform: the writer stores
    /// translations (k, 2k, 3k) with identity rotation; a torn read would break the
    /// ratio.
    #[test]
    fn concurrent_readers_never_see_torn_transforms() {
        let b = Arc::new(TfBuffer::new(TreeLimits {
            max_history: 4096,
            ..TreeLimits::default()
        }));
        b.set_transform("root", "a", 0, Transform::IDENTITY, false)
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (b, stop) = (b.clone(), stop.clone());
                std::thread::spawn(move || {
                    let (r, a) = (b.frame("root").unwrap(), b.frame("a").unwrap());
                    let mut seen = 0u64;
                    while !stop.load(Relaxed) {
                        let t = b.lookup_transform(r, a, LATEST).unwrap();
                        let v = t.translation;
                        assert_eq!((v.y, v.z), (2.0 * v.x, 3.0 * v.x), "torn read");
                        seen += 1;
                    }
                    seen
                })
            })
            .collect();
        for k in 1..20_000i64 {
            let x = k as f64;
            b.set_transform("root", "a", k * 1000, tr(x, 2.0 * x, 3.0 * x), false)
                .unwrap();
        }
        stop.store(true, Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
    }
}
