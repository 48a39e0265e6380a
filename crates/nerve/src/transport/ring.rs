//! A single-producer, single-consumer ring of small samples stored inline in the slots:
//! the same-process route of fixed-size messages (see `intra.rs`).
//!
//! Each (publisher, subscriber) pair of a process has a ring of its own, as iceoryx2 has a
//! queue per connection, so no slot is ever contended by two writers. A slot is one
//! sample: a version word (a sequence lock), the sample's sequence number, its publish
//! stamp, its length, then the payload words. Nothing is shared by reference: the reader
//! copies the slot out (one or two cache lines for small messages), so no reference count
//! bounces between cores and a slot is free as soon as it was read.
//!
//! * **Drop-oldest**: the writer never looks at the reader; a full ring overwrites its
//!   oldest slot. The version word tells the reader a slot was overwritten (it skips
//!   ahead; the sequence gap is counted as loss by the subscriber) or changed while it
//!   copied (it reads again), so a torn sample is never handed out.
//! * **Back-pressure**: the reader publishes how far it has read (`tail`, on a cache line
//!   of its own); the writer keeps a cached copy and reloads it only when the ring looks
//!   full, then sleeps on a futex until the reader makes room or the publish's deadline
//!   passes.
//!
//! Every word is an atomic accessed with explicit orderings, so concurrent reads of a
//! slot being rewritten are well defined (the sequence-lock pattern of Boehm, "Can
//! seqlocks get along with programming language memory models?", 2012). No `unsafe`.

use crate::message::header::SampleHeader;
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Largest payload stored inline, in bytes: larger messages travel by reference.
pub(crate) const INLINE_MAX: usize = 1024;

/// Words of a slot before the payload: version, sequence number, monotonic and wall-clock
/// stamps, length.
const SLOT_HEAD: usize = 5;

/// Longest single sleep of a writer waiting for room: the reader's check for a sleeping
/// writer is not fenced (that would cost every receive), so a wake-up can be missed;
/// this bounds what a miss costs.
const ROOM_RECHECK: Duration = Duration::from_millis(1);

/// The ring shared by one writer and one reader.
pub(crate) struct InlineRing {
    /// Samples the reader has taken (written by the reader only under back-pressure).
    tail: CachePadded<AtomicU64>,
    /// Writer asleep until there is room (back-pressure), and the futex word it sleeps on.
    blocked: CachePadded<AtomicU32>,
    room: AtomicU32,
    /// The writer has gone: once empty, the ring can be forgotten.
    closed: AtomicBool,
    /// Slots of `slot_words` words each.
    slots: Box<[AtomicU64]>,
    slot_words: usize,
    capacity: u64,
    /// Whether the reader must publish `tail` (back-pressure rings only).
    track_tail: bool,
    /// The header fields every sample of this ring shares (publisher, type, origin); the
    /// reader fills in the rest from the slot.
    template: SampleHeader,
}

/// A sample's place in a slot: its sequence number, stamps and payload length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotHead {
    pub(crate) seq: u64,
    pub(crate) mono_ns: u64,
    pub(crate) wall_ns: i64,
    pub(crate) len: u64,
}

impl InlineRing {
    /// A ring of `capacity` slots for payloads of up to `payload_bytes` bytes, written by
    /// the publisher `template` names (its id, type hash and origin).
    pub(crate) fn new(
        capacity: usize,
        payload_bytes: usize,
        back_pressure: bool,
        template: SampleHeader,
    ) -> InlineRing {
        let capacity = capacity.max(1);
        let slot_words = SLOT_HEAD + payload_bytes.div_ceil(8);
        InlineRing {
            tail: CachePadded::new(AtomicU64::new(0)),
            blocked: CachePadded::new(AtomicU32::new(0)),
            room: AtomicU32::new(0),
            closed: AtomicBool::new(false),
            slots: (0..capacity * slot_words)
                .map(|_| AtomicU64::new(0))
                .collect(),
            slot_words,
            capacity: capacity as u64,
            track_tail: back_pressure,
            template,
        }
    }

    /// The whole header of a sample read from this ring.
    #[inline]
    pub(crate) fn header(&self, head: SlotHead) -> SampleHeader {
        SampleHeader {
            seq: head.seq,
            publish_mono_ns: head.mono_ns,
            publish_wall_ns: head.wall_ns,
            payload_len: head.len,
            ..self.template
        }
    }

    /// Largest payload a slot holds, in words.
    pub(crate) fn payload_words(&self) -> usize {
        self.slot_words - SLOT_HEAD
    }

    fn slot(&self, index: u64) -> &[AtomicU64] {
        let start = index as usize * self.slot_words;
        &self.slots[start..start + self.slot_words]
    }

    /// Whether the writer has gone.
    pub(crate) fn is_closed(&self) -> bool {
        // SYNC: Acquire pairs with the Release in `RingWriter::drop`: a reader that sees
        // the ring closed sees every slot the writer wrote before.
        self.closed.load(Ordering::Acquire)
    }
}

/// The writing end: position and cached tail are the writer's own.
pub(crate) struct RingWriter {
    ring: Arc<InlineRing>,
    head: Cell<u64>,
    /// Slot index of `head` (kept beside it: no division on the hot path).
    index: Cell<u64>,
    cached_tail: Cell<u64>,
}

impl RingWriter {
    /// The writer of `ring` (one per ring).
    pub(crate) fn new(ring: Arc<InlineRing>) -> RingWriter {
        RingWriter {
            ring,
            head: Cell::new(0),
            index: Cell::new(0),
            cached_tail: Cell::new(0),
        }
    }

    /// Writes one sample: overwrites the oldest when full (drop-oldest), or waits for
    /// room until `deadline_ns` (monotonic) under back-pressure and returns `false` if
    /// none came. `payload` must fit a slot (checked: a longer one is refused); its last
    /// word is padded with zeros.
    #[inline]
    pub(crate) fn push(&self, head: SlotHead, payload: &[u8], deadline_ns: u64) -> bool {
        let ring = &*self.ring;
        if payload.len() > ring.payload_words() * 8 {
            return false;
        }
        let pos = self.head.get();
        if ring.track_tail
            && pos - self.cached_tail.get() >= ring.capacity
            && !self.wait_room(pos, deadline_ns)
        {
            return false;
        }
        let idx = self.index.get();
        let slot = ring.slot(idx);
        // SYNC: the odd version marks the slot as being written; the Release fence orders
        // it before the data stores, so a reader that sees any new data also sees the odd
        // (or a later) version when it re-reads (Boehm's writer side).
        slot[0].store(2 * pos + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        slot[1].store(head.seq, Ordering::Relaxed);
        slot[2].store(head.mono_ns, Ordering::Relaxed);
        slot[3].store(head.wall_ns as u64, Ordering::Relaxed);
        slot[4].store(head.len, Ordering::Relaxed);
        let words = &slot[SLOT_HEAD..];
        let mut chunks = payload.chunks_exact(8);
        for (w, c) in words.iter().zip(&mut chunks) {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            w.store(u64::from_ne_bytes(b), Ordering::Relaxed);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            words[payload.len() / 8].store(u64::from_ne_bytes(b), Ordering::Relaxed);
        }
        // SYNC: Release publishes the slot's data to the reader's Acquire load of the
        // version.
        slot[0].store(2 * pos + 2, Ordering::Release);
        self.head.set(pos + 1);
        self.index
            .set(if idx + 1 == ring.capacity { 0 } else { idx + 1 });
        true
    }

    /// Back-pressure: waits until the reader took the sample `capacity` places back.
    #[cold]
    fn wait_room(&self, pos: u64, deadline_ns: u64) -> bool {
        let ring = &*self.ring;
        loop {
            // SYNC: Acquire pairs with the reader's Release store of `tail` after it copied
            // a slot out: the slot is free to be overwritten.
            let tail = ring.tail.load(Ordering::Acquire);
            self.cached_tail.set(tail);
            if pos - tail < ring.capacity {
                return true;
            }
            let now = crate::sys::clock::mono_ns();
            if now >= deadline_ns {
                return false;
            }
            // SYNC: announce the sleeper before reading the futex word and looking again;
            // the reader bumps `room` after a take when it sees a sleeper.
            ring.blocked.fetch_add(1, Ordering::SeqCst);
            let seen = ring.room.load(Ordering::SeqCst);
            if pos - ring.tail.load(Ordering::SeqCst) >= ring.capacity {
                let left = Duration::from_nanos(deadline_ns - now).min(ROOM_RECHECK);
                crate::sys::futex::futex_wait(&ring.room, seen, left);
            }
            ring.blocked.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for RingWriter {
    fn drop(&mut self) {
        // SYNC: Release: see `InlineRing::is_closed`.
        self.ring.closed.store(true, Ordering::Release);
    }
}

/// The reading end.
pub(crate) struct RingReader {
    ring: Arc<InlineRing>,
    pos: Cell<u64>,
    index: Cell<u64>,
}

impl RingReader {
    /// The reader of `ring` (one per ring).
    pub(crate) fn new(ring: Arc<InlineRing>) -> RingReader {
        RingReader {
            ring,
            pos: Cell::new(0),
            index: Cell::new(0),
        }
    }

    /// The ring read.
    pub(crate) fn ring(&self) -> &Arc<InlineRing> {
        &self.ring
    }

    /// Copies the next sample's payload into `out` (at least the ring's payload words
    /// long) and returns its head, or `None` if nothing new was written. Samples the
    /// writer overwrote before they were read are skipped.
    #[inline]
    pub(crate) fn pop(&self, out: &mut [u64]) -> Option<SlotHead> {
        let ring = &*self.ring;
        loop {
            let pos = self.pos.get();
            let slot = ring.slot(self.index.get());
            // SYNC: Acquire pairs with the writer's Release store of the version.
            let version = slot[0].load(Ordering::Acquire);
            let want = 2 * pos + 2;
            if version < want {
                return None; // not written yet (or being written for the first time)
            }
            if version == want {
                let head = SlotHead {
                    seq: slot[1].load(Ordering::Relaxed),
                    mono_ns: slot[2].load(Ordering::Relaxed),
                    wall_ns: slot[3].load(Ordering::Relaxed) as i64,
                    len: slot[4].load(Ordering::Relaxed),
                };
                let words = (head.len as usize).div_ceil(8).min(ring.payload_words());
                for (o, w) in out[..words].iter_mut().zip(&slot[SLOT_HEAD..]) {
                    *o = w.load(Ordering::Relaxed);
                }
                // SYNC: the Acquire fence orders the data loads before the version's
                // re-read: an unchanged version proves no write overlapped the copy.
                fence(Ordering::Acquire);
                if slot[0].load(Ordering::Relaxed) == version {
                    self.advance(pos + 1);
                    return Some(head);
                }
            }
            // Overwritten by a later lap (drop-oldest): the writer is at `newer` or past
            // it, so the oldest sample that may still be held is `capacity - 1` behind.
            let newer = slot[0].load(Ordering::Relaxed).saturating_sub(1) / 2;
            let next = (newer + 1).saturating_sub(ring.capacity).max(pos + 1);
            self.pos.set(next);
            self.index.set(next % ring.capacity);
        }
    }

    fn advance(&self, next: u64) {
        let ring = &*self.ring;
        self.pos.set(next);
        let idx = self.index.get() + 1;
        self.index.set(if idx == ring.capacity { 0 } else { idx });
        if ring.track_tail {
            // SYNC: Release: the copy is done before the writer may reuse the slot.
            ring.tail.store(next, Ordering::Release);
            // SYNC: Relaxed: a sleeper missed here looks again within ROOM_RECHECK.
            if ring.blocked.load(Ordering::Relaxed) > 0 {
                ring.room.fetch_add(1, Ordering::SeqCst);
                crate::sys::futex::futex_wake(&ring.room);
            }
        }
    }

    /// Whether a sample waits to be read.
    pub(crate) fn has_sample(&self) -> bool {
        // SYNC: Acquire, as in `pop`.
        self.ring.slot(self.index.get())[0].load(Ordering::Acquire) >= 2 * self.pos.get() + 2
    }

    /// Whether the writer has gone and everything it wrote was read.
    pub(crate) fn is_done(&self) -> bool {
        self.ring.is_closed() && !self.has_sample()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(seq: u64) -> SlotHead {
        SlotHead {
            seq,
            mono_ns: seq * 10,
            wall_ns: -(seq as i64),
            len: 16,
        }
    }

    fn b(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    fn pair(capacity: usize, back_pressure: bool) -> (RingWriter, RingReader) {
        let ring = Arc::new(InlineRing::new(
            capacity,
            16,
            back_pressure,
            SampleHeader::default(),
        ));
        (RingWriter::new(ring.clone()), RingReader::new(ring))
    }

    #[test]
    fn samples_come_out_in_order_with_their_payload() {
        let (w, r) = pair(4, false);
        let mut out = [0u64; 2];
        assert_eq!(r.pop(&mut out), None);
        for seq in 1..=3 {
            assert!(w.push(head(seq), &b(&[seq, seq + 100]), 0));
        }
        for seq in 1..=3 {
            assert_eq!(r.pop(&mut out), Some(head(seq)));
            assert_eq!(out, [seq, seq + 100]);
        }
        assert_eq!(r.pop(&mut out), None);
    }

    #[test]
    fn drop_oldest_keeps_the_newest_capacity_samples() {
        let (w, r) = pair(3, false);
        for seq in 1..=10 {
            assert!(w.push(head(seq), &b(&[seq, 0]), 0));
        }
        let mut out = [0u64; 2];
        let got: Vec<u64> = std::iter::from_fn(|| r.pop(&mut out).map(|h| h.seq)).collect();
        assert_eq!(got, vec![8, 9, 10]);
        // and the ring goes on after the skip
        assert!(w.push(head(11), &b(&[11, 0]), 0));
        assert_eq!(r.pop(&mut out).map(|h| h.seq), Some(11));
    }

    #[test]
    fn back_pressure_refuses_when_full_and_resumes_after_a_take() {
        let (w, r) = pair(2, true);
        let soon = || crate::sys::clock::mono_ns() + 2_000_000;
        assert!(w.push(head(1), &b(&[1, 0]), soon()));
        assert!(w.push(head(2), &b(&[2, 0]), soon()));
        assert!(
            !w.push(head(3), &b(&[3, 0]), soon()),
            "full: refused at the deadline"
        );
        let mut out = [0u64; 2];
        assert_eq!(r.pop(&mut out).map(|h| h.seq), Some(1));
        assert!(w.push(head(3), &b(&[3, 0]), soon()));
        let got: Vec<u64> = std::iter::from_fn(|| r.pop(&mut out).map(|h| h.seq)).collect();
        assert_eq!(got, vec![2, 3], "nothing lost under back-pressure");
    }

    #[test]
    fn an_oversized_payload_is_refused() {
        let (w, r) = pair(2, false);
        assert!(!w.push(head(1), &b(&[1, 2, 3]), 0));
        assert_eq!(r.pop(&mut [0u64; 3]), None);
    }

    #[test]
    fn a_closed_ring_is_done_once_drained() {
        let (w, r) = pair(2, false);
        w.push(head(1), &b(&[1, 1]), 0);
        drop(w);
        assert!(!r.is_done());
        r.pop(&mut [0u64; 2]);
        assert!(r.is_done());
    }

    /// A writer overwriting as fast as it can never shows a torn sample to a reader on
    /// another thread: every payload word equals the sequence number it was written with.
    #[test]
    fn a_reader_racing_an_overwriting_writer_never_sees_a_torn_sample() {
        let ring = Arc::new(InlineRing::new(2, 64, false, SampleHeader::default()));
        let w = RingWriter::new(ring.clone());
        let r = RingReader::new(ring);
        let n = 200_000u64;
        std::thread::scope(|s| {
            s.spawn(move || {
                for seq in 1..=n {
                    let h = SlotHead {
                        seq,
                        mono_ns: seq,
                        wall_ns: 0,
                        len: 64,
                    };
                    w.push(h, &b(&[seq; 8]), 0);
                }
            });
            let mut out = [0u64; 8];
            let mut last = 0;
            while last < n {
                if let Some(h) = r.pop(&mut out) {
                    assert!(h.seq > last, "in order");
                    assert_eq!(h.mono_ns, h.seq);
                    assert!(
                        out.iter().all(|&v| v == h.seq),
                        "torn: {out:?} for {}",
                        h.seq
                    );
                    last = h.seq;
                }
            }
        });
    }

    /// Under back-pressure a reader on another thread gets every sample, in order.
    #[test]
    fn back_pressure_across_threads_loses_nothing() {
        let ring = Arc::new(InlineRing::new(4, 8, true, SampleHeader::default()));
        let w = RingWriter::new(ring.clone());
        let r = RingReader::new(ring);
        let n = 100_000u64;
        std::thread::scope(|s| {
            s.spawn(move || {
                for seq in 1..=n {
                    let h = SlotHead {
                        seq,
                        mono_ns: 0,
                        wall_ns: 0,
                        len: 8,
                    };
                    assert!(w.push(h, &b(&[seq]), u64::MAX), "sample {seq} refused");
                }
            });
            let mut out = [0u64; 1];
            let mut expect = 1;
            while expect <= n {
                if let Some(h) = r.pop(&mut out) {
                    assert_eq!((h.seq, out[0]), (expect, expect));
                    expect += 1;
                }
            }
        });
    }
}
