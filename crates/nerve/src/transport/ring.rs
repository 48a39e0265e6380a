//! Rings of small samples stored inline in their slots: the same-process route of
//! fixed-size messages (one heap ring per publisher and subscriber pair, see `intra.rs`)
//! and the cross-process one (one shared-memory ring per publisher, read by every
//! subscriber of other processes, see `shm_ring.rs`).
//!
//! A slot is one sample: a version word (a sequence lock), the sample's sequence number,
//! its publish stamps, its length, then the payload words. Nothing is shared by
//! reference: a reader copies the slot out (one or two cache lines for small messages),
//! so no reference count bounces between cores and a slot is free as soon as it was read.
//! One writer per ring; readers keep their position to themselves.
//!
//! * **Drop-oldest**: the writer never looks at its readers; a full ring overwrites its
//!   oldest slot. The version word tells a reader a slot was overwritten (it skips ahead;
//!   the sequence gap is counted as loss by the subscriber) or changed while it copied
//!   (it reads again), so a torn sample is never handed out, even when the writer died
//!   in the middle of a write (the slot keeps an odd version).
//! * **Back-pressure**: every reader publishes how far it has read (its `tail`, on cache
//!   lines of its own); the writer keeps a cached limit (the position at which the
//!   fullest reader's queue is full) and reloads the tails only when it reaches it, then
//!   sleeps on a futex until a reader makes room or the publish's deadline passes. A
//!   reader that died is found by its lock (shared rings) and no longer counted, so it
//!   never blocks the writer.
//! * **Depth per reader**: a shared ring has as many slots as the topic's largest queue;
//!   each reader's own QoS depth (in its entry) bounds what it holds: under back-pressure
//!   the writer waits once `depth` samples of that reader are unread, under drop-oldest the
//!   reader skips to the newest `depth` samples (the skipped ones count as lost).
//!
//! Every word is an atomic accessed with explicit orderings, so concurrent reads of a
//! slot being rewritten are well defined (the sequence-lock pattern of Boehm, "Can
//! seqlocks get along with programming language memory models?", 2012).

// the futex sleep and the shared-memory parts are left out of the loom models
#![cfg_attr(nerve_loom, allow(dead_code))]

use crate::message::header::SampleHeader;
use crate::sys::files::{Mapping, OfdLock};
use std::cell::Cell;
// Under `--cfg nerve_loom` the ring's words are loom's atomics (see `crate::loom`), so
// its models (`loom_models` below, `scripts/concurrency`) explore every interleaving the
// memory model allows of the real `push` and `pop` on a heap ring.
use crate::loom::sync::atomic::{fence, AtomicU64, Ordering};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

/// Largest payload stored inline, in bytes: larger messages travel by reference.
pub(crate) const INLINE_MAX: usize = 1024;

/// Words of a slot before the payload: version, sequence number, monotonic and wall-clock
/// stamps, length.
const SLOT_HEAD: usize = 5;

/// Words of a reader entry and of the other shared areas: two cache lines, so neighbours
/// never share a line (nor an adjacent-line prefetch pair).
const AREA: usize = 16;

/// Words of a cache line.
const LINE_WORDS: usize = 8;

/// One cache line of words, aligned as one: the unit a heap ring is allocated in, so its
/// areas and slots start on line boundaries as in a (page-aligned) shared mapping.
#[repr(C, align(64))]
#[derive(Default)]
pub(crate) struct Line([AtomicU64; LINE_WORDS]);

// `InlineRing::words` reads the lines as one slice of words: no padding between them
const _: () = assert!(std::mem::size_of::<Line>() == LINE_WORDS * std::mem::size_of::<AtomicU64>());

/// Header words (the first area): what a reader checks before it trusts the ring.
pub(crate) mod hdr {
    pub(crate) const MAGIC: usize = 0;
    pub(crate) const CAPACITY: usize = 1;
    pub(crate) const PAYLOAD_BYTES: usize = 2;
    pub(crate) const READERS: usize = 3;
    pub(crate) const TYPE_HASH: usize = 4;
    pub(crate) const PUBLISHER: usize = 5;
    pub(crate) const ORIGIN: usize = 6;
    pub(crate) const BACK_PRESSURE: usize = 7;
    pub(crate) const CREATED_NS: usize = 8;
    /// Set by a writer that left cleanly.
    pub(crate) const CLOSED: usize = 9;
}

/// `NRVRING2`: the layout's name and version.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"NRVRING2");

/// Most slots a ring may have.
pub(crate) const MAX_CAPACITY: u64 = 1 << 16;

/// Where a ring's words are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) capacity: u64,
    pub(crate) payload_bytes: usize,
    pub(crate) readers: usize,
}

impl Layout {
    /// Words of a slot: whole cache lines, so no two slots share one (a reader of one
    /// slot never stalls the writer of the next).
    fn slot_words(&self) -> usize {
        (SLOT_HEAD + self.payload_bytes.div_ceil(8)).next_multiple_of(LINE_WORDS)
    }

    /// First word of reader entry `i` (state, tail).
    fn reader(&self, i: usize) -> usize {
        AREA + i * AREA
    }

    /// The writer's wait area: `blocked` and `room` (32-bit futex words) in its first
    /// word, `wake_at` (the tail that should wake the writer, `u64::MAX` when none) in
    /// its second.
    fn wait_area(&self) -> usize {
        AREA + self.readers * AREA
    }

    fn slots(&self) -> usize {
        self.wait_area() + AREA
    }

    /// Words of the whole ring.
    pub(crate) fn words(&self) -> usize {
        self.slots() + self.capacity as usize * self.slot_words()
    }
}

/// The memory a ring lives in.
pub(crate) enum Memory {
    /// Private to the process (same-process route).
    Heap(Box<[Line]>),
    /// A shared mapping of a file in /dev/shm, at least `words` words long.
    Shared { map: Mapping, fd: OwnedFd },
}

/// A ring: its memory, layout and the header fields every sample shares.
pub(crate) struct InlineRing {
    mem: Memory,
    layout: Layout,
    back_pressure: bool,
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

/// Reader entry states: free; read by a live reader (whose lock is held); reserved by
/// the writer for a subscriber that has not found the ring yet (it waits for that
/// subscriber from the position it was reserved at); being filled in.
const FREE: u64 = 0;
const ACTIVE: u64 = 1;
const RESERVED: u64 = 2;
const CLAIMING: u64 = 3;

/// Words of a reader entry: state, tail, subscriber id, depth (0: the ring's capacity).
const E_STATE: usize = 0;
const E_TAIL: usize = 1;
const E_ID: usize = 2;
const E_DEPTH: usize = 3;

impl InlineRing {
    /// A same-process ring of `capacity` slots for payloads of up to `payload_bytes`
    /// bytes, with one reader, written by the publisher `template` names (its id, type
    /// hash and origin).
    pub(crate) fn new(
        capacity: usize,
        payload_bytes: usize,
        back_pressure: bool,
        template: SampleHeader,
    ) -> InlineRing {
        let layout = Layout {
            capacity: (capacity as u64).clamp(1, MAX_CAPACITY),
            payload_bytes,
            readers: 1,
        };
        let ring = InlineRing::heap(layout, back_pressure, template);
        // SYNC: Relaxed: nobody else sees the ring yet.
        ring.state(0).store(ACTIVE, Ordering::Relaxed);
        ring
    }

    /// A ring of `layout` on the heap with every word zero (every reader entry free).
    pub(crate) fn heap(layout: Layout, back_pressure: bool, template: SampleHeader) -> InlineRing {
        let lines = (0..layout.words().div_ceil(LINE_WORDS))
            .map(|_| Line::default())
            .collect();
        InlineRing {
            mem: Memory::Heap(lines),
            layout,
            back_pressure,
            template,
        }
    }

    /// A ring in `mem` (a shared mapping of at least `layout.words()` words whose header
    /// the caller checked or wrote).
    pub(crate) fn in_memory(
        mem: Memory,
        layout: Layout,
        back_pressure: bool,
        template: SampleHeader,
    ) -> InlineRing {
        InlineRing {
            mem,
            layout,
            back_pressure,
            template,
        }
    }

    fn words(&self) -> &[AtomicU64] {
        match &self.mem {
            // SAFETY: `Line` is `repr(C)`: exactly LINE_WORDS AtomicU64 with no padding
            // (asserted at compile time beside it), so the boxed lines are `len * LINE_WORDS` contiguous,
            // initialized AtomicU64 that live as long as `self`; `layout.words()` fits
            // (the lines were allocated for it).
            Memory::Heap(lines) => unsafe {
                std::slice::from_raw_parts(lines.as_ptr() as *const AtomicU64, self.layout.words())
            },
            // SAFETY: the mapping is page-aligned (so aligned for AtomicU64), at least
            // `layout.words()` words long (checked against the file's size when it was
            // opened, or sized so when created) and lives as long as `self`; any bytes
            // are valid AtomicU64 values, and every access goes through atomics (other
            // processes write the file only through atomics too).
            #[cfg(not(nerve_loom))]
            Memory::Shared { map, .. } => unsafe {
                std::slice::from_raw_parts(map.ptr() as *const AtomicU64, self.layout.words())
            },
            // loom's atomics are not plain words: the models use heap rings only
            #[cfg(nerve_loom)]
            Memory::Shared { .. } => unreachable!("loom models heap rings only"),
        }
    }

    #[inline]
    pub(crate) fn word(&self, i: usize) -> &AtomicU64 {
        &self.words()[i]
    }

    /// The 32-bit half `half` (0 or 1) of word `i`, for a futex. Such words are only ever
    /// accessed as 32-bit atomics.
    #[cfg(not(nerve_loom))]
    fn futex_word(&self, i: usize, half: usize) -> &crate::loom::sync::atomic::AtomicU32 {
        use crate::loom::sync::atomic::AtomicU32;
        let w: &AtomicU64 = self.word(i);
        // SAFETY: an AtomicU64 is 8 bytes, 8-aligned, so both 4-byte halves are in bounds
        // and 4-aligned; the halves of the wait area's word are accessed only as
        // AtomicU32 (never through the AtomicU64), so no access mixes sizes; the
        // reference lives no longer than `self`, which owns the memory.
        unsafe { &*(w as *const AtomicU64 as *const AtomicU32).add(half) }
    }

    fn slot(&self, index: u64) -> &[AtomicU64] {
        let start = self.layout.slots() + index as usize * self.layout.slot_words();
        &self.words()[start..start + self.layout.slot_words()]
    }

    /// The version word of slot `index` (tests simulate a writer's death with it).
    #[cfg(test)]
    pub(crate) fn slot_version(&self, index: u64) -> &AtomicU64 {
        &self.slot(index)[0]
    }

    /// The shared file's descriptor (`None` for a heap ring).
    pub(crate) fn fd(&self) -> Option<&OwnedFd> {
        match &self.mem {
            Memory::Heap(_) => None,
            Memory::Shared { fd, .. } => Some(fd),
        }
    }

    /// Largest payload a slot holds, in words.
    pub(crate) fn payload_words(&self) -> usize {
        self.layout.payload_bytes.div_ceil(8)
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

    /// The publisher's id, type hash and origin.
    pub(crate) fn template(&self) -> &SampleHeader {
        &self.template
    }

    /// Whether the writer has gone (cleanly).
    pub(crate) fn is_closed(&self) -> bool {
        // SYNC: Acquire pairs with the Release in `RingWriter::drop`: a reader that sees
        // the ring closed sees every slot the writer wrote before.
        self.word(hdr::CLOSED).load(Ordering::Acquire) != 0
    }

    /// The position a reader that joins now starts at: the newest written (or being
    /// written) sample's successor, found from the slots' versions.
    pub(crate) fn head(&self) -> u64 {
        (0..self.layout.capacity)
            // SYNC: Acquire, as in `RingReader::pop`.
            .map(|i| self.slot(i)[0].load(Ordering::Acquire) / 2)
            .max()
            .unwrap_or(0)
    }

    fn state(&self, i: usize) -> &AtomicU64 {
        self.word(self.layout.reader(i) + E_STATE)
    }

    /// Readers served now: active ones and those reserved for subscribers.
    pub(crate) fn active_readers(&self) -> usize {
        (0..self.layout.readers)
            // SYNC: Relaxed: a count for delivery checks.
            .filter(|&i| matches!(self.state(i).load(Ordering::Relaxed), ACTIVE | RESERVED))
            .count()
    }

    /// Takes the claim lock of a shared ring if no other process holds it (`Ok(None)` for
    /// a heap ring, whose one reader is its own): writer reservations and reader
    /// registrations take turns under it. Both run on the data path (a publish that found
    /// new subscribers, a receive that found a new ring), so neither waits: a busy lock
    /// is an error, and the caller tries again at its next publish or receive (a
    /// subscriber at every receive until it has registered). A process stopped inside
    /// the lock thus stalls no publish or receive; a ring's new subscriber gets that
    /// ring's samples only once the lock is free again.
    fn claim_lock(&self) -> std::io::Result<Option<OfdLock<'_>>> {
        let Some(fd) = self.fd() else {
            return Ok(None);
        };
        OfdLock::wait_at_most(fd, CLAIM_LOCK_BYTE, Duration::ZERO, "the ring's claim lock")
            .map(Some)
    }

    /// The depth of reader entry `i`: its own, at most the ring's capacity.
    fn depth_of(&self, i: usize) -> u64 {
        // SYNC: Relaxed: read after the Acquire load of the entry's state, which its
        // claim released after writing the depth.
        match self
            .word(self.layout.reader(i) + E_DEPTH)
            .load(Ordering::Relaxed)
        {
            0 => self.layout.capacity,
            d => d.min(self.layout.capacity),
        }
    }

    /// Entries (active or reserved) held for subscriber `id`.
    #[cfg(test)]
    pub(crate) fn entries_of(&self, id: u64) -> usize {
        (0..self.layout.readers)
            .filter(|&i| {
                matches!(self.state(i).load(Ordering::Acquire), ACTIVE | RESERVED)
                    && self
                        .word(self.layout.reader(i) + E_ID)
                        .load(Ordering::Relaxed)
                        == id
            })
            .count()
    }

    /// Claims a free entry for subscriber `id` at `start`, in state `to`; a reader
    /// claiming for itself passes its descriptor and holds the entry's lock from then on.
    /// `None` if none is free.
    fn claim(
        &self,
        id: u64,
        start: u64,
        depth: u64,
        to: u64,
        reader_fd: Option<&OwnedFd>,
    ) -> Option<usize> {
        for i in 0..self.layout.readers {
            let e = self.layout.reader(i);
            // SYNC: Relaxed: a hint; the exchange below decides.
            if self.state(i).load(Ordering::Relaxed) != FREE {
                continue;
            }
            if let Some(fd) = reader_fd {
                match OfdLock::try_take(fd, reader_lock_byte(i)) {
                    // released by the reader's `Drop` (or by the kernel when it dies)
                    Ok(Some(lock)) => std::mem::forget(lock),
                    _ => continue,
                }
            }
            // SYNC: the entry is ours once the exchange succeeds (Acquire: after its last
            // owner's release); its tail and id are written before the state that makes
            // it count (Release).
            if self
                .state(i)
                .compare_exchange(FREE, CLAIMING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                self.word(e + E_TAIL).store(start, Ordering::Relaxed);
                self.word(e + E_ID).store(id, Ordering::Relaxed);
                self.word(e + E_DEPTH).store(depth, Ordering::Relaxed);
                self.state(i).store(to, Ordering::Release);
                return Some(i);
            }
            if let Some(fd) = reader_fd {
                let _ = OfdLock::release(fd, reader_lock_byte(i));
            }
        }
        None
    }

    /// Writer side: keeps an entry for every subscriber of `live` (ids and queue depths
    /// of subscribers in other contexts), reserved at `head` for those that have not found
    /// the ring yet, so a subscriber gets every sample from the moment the writer knew of
    /// it, even while it is busy elsewhere; frees reservations of subscribers no longer
    /// listed. Returns how many subscribers have an entry.
    /// `None` if the claim lock is busy: nothing was done, try again later.
    pub(crate) fn reserve_for(&self, live: &[(u64, u64)], head: u64) -> Option<usize> {
        // checks and claims of entries by subscriber id happen under the claim lock, so
        // a subscriber registering meanwhile never ends up with a second entry
        let _claims = self.claim_lock().ok()?;
        let mut served = 0;
        for i in 0..self.layout.readers {
            let e = self.layout.reader(i);
            // SYNC: Acquire pairs with the Release that made the entry count.
            let state = self.state(i).load(Ordering::Acquire);
            let id = self.word(e + E_ID).load(Ordering::Relaxed);
            if state == RESERVED && !live.iter().any(|&(l, _)| l == id) {
                // SYNC: a subscriber claiming it exchanges RESERVED for ACTIVE: one wins.
                let _ = self.state(i).compare_exchange(
                    RESERVED,
                    FREE,
                    Ordering::Release,
                    Ordering::Relaxed,
                );
            }
        }
        for &(id, depth) in live {
            let known = (0..self.layout.readers).any(|i| {
                matches!(self.state(i).load(Ordering::Acquire), ACTIVE | RESERVED)
                    && self
                        .word(self.layout.reader(i) + E_ID)
                        .load(Ordering::Relaxed)
                        == id
            });
            if known || self.claim(id, head, depth, RESERVED, None).is_some() {
                served += 1;
            }
        }
        Some(served)
    }
}

/// The writing end: position and cached minimum tail are the writer's own.
pub(crate) struct RingWriter {
    ring: Arc<InlineRing>,
    head: Cell<u64>,
    /// Slot index of `head` (kept beside it: no division on the hot path).
    index: Cell<u64>,
    /// The position at which the fullest reader was full when the tails were last read
    /// (back-pressure): below it the writer need not look.
    cached_limit: Cell<u64>,
}

/// Longest single sleep of a writer waiting for room: it then looks for room and for
/// dead readers again (a reader that dies never wakes it). Living readers wake it once
/// they freed a batch, so a shorter sleep only lets a writer behind a slow reader wake
/// for every single slot, each time with the spin and the heavy fence (an interrupt on
/// every core) of going back to sleep: at 1 ms a ping-pong beside such a topic paid
/// 1.33x the P99 it paid beside the same load on the standard library's channel, at
/// 10 ms 1.22x (T11 in docs/reliability.md).
const ROOM_RECHECK: Duration = Duration::from_millis(10);

/// How long a writer waiting for room spins before it sleeps: a reader busy on another
/// core frees a slot within far less, and a sleep and its wake-up cost tens of µs.
const ROOM_SPIN_NS: u64 = 5_000;

/// A sleeping writer asks to be woken once this many slots are free (at most half the
/// reader's depth): one wake-up per batch, not one per taken sample. A writer sleeps only
/// after its spin found no room, i.e. when its reader is not running beside it: where
/// threads outnumber cores, each wake-up is a context switch, and waking for 8 of 64 slots
/// made 2:2 CmdVel across processes switch for every 8 messages (1.5 M msg/s; with 32,
/// see docs/design.md).
const ROOM_BATCH: u64 = 32;

impl RingWriter {
    /// The writer of `ring` (one per ring), starting at position `head`.
    pub(crate) fn new(ring: Arc<InlineRing>) -> RingWriter {
        RingWriter {
            ring,
            head: Cell::new(0),
            index: Cell::new(0),
            cached_limit: Cell::new(0),
        }
    }

    /// The ring written.
    pub(crate) fn ring(&self) -> &Arc<InlineRing> {
        &self.ring
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
        if ring.back_pressure && pos >= self.cached_limit.get() && !self.wait_room(pos, deadline_ns)
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
        let next = idx + 1;
        self.index.set(if next == ring.layout.capacity {
            0
        } else {
            next
        });
        true
    }

    /// The position the next sample is written at.
    pub(crate) fn head(&self) -> u64 {
        self.head.get()
    }

    /// The position at which the fullest reader served is full: the smallest `tail +
    /// depth` (`pos + capacity` if no reader is served).
    fn limit(&self, pos: u64) -> u64 {
        let ring = &*self.ring;
        let mut limit = pos + ring.layout.capacity;
        for i in 0..ring.layout.readers {
            let e = ring.layout.reader(i);
            // SYNC: Acquire pairs with the reader's Release store of its tail after it
            // copied a slot out (and with its claim): the slot is free to reuse.
            if matches!(ring.state(i).load(Ordering::Acquire), ACTIVE | RESERVED) {
                let tail = ring.word(e + E_TAIL).load(Ordering::Acquire);
                limit = limit.min(tail + ring.depth_of(i));
            }
        }
        limit
    }

    /// Back-pressure: waits until no active reader has its depth of samples unread: spins
    /// briefly, then sleeps until a reader freed a batch of slots (or [`ROOM_RECHECK`]
    /// passed). Readers whose process died are found by their lock and dropped.
    #[cold]
    #[cfg(nerve_loom)]
    fn wait_room(&self, pos: u64, _deadline_ns: u64) -> bool {
        // the model: wait for the readers' tails alone (the futex sleep and its wake-up
        // handshake are system calls loom cannot run; Miri runs them)
        loop {
            let limit = self.limit(pos);
            self.cached_limit.set(limit);
            if pos < limit {
                return true;
            }
            crate::loom::thread::yield_now();
        }
    }

    #[cold]
    #[cfg(not(nerve_loom))]
    fn wait_room(&self, pos: u64, deadline_ns: u64) -> bool {
        let ring = &*self.ring;
        let wait = ring.layout.wait_area();
        let (blocked, room) = (ring.futex_word(wait, 0), ring.futex_word(wait, 1));
        let wake_at = ring.word(wait + 1);
        let spin_until = crate::sys::clock::stamp_ns() + ROOM_SPIN_NS;
        let mut polls = 0u32;
        loop {
            let limit = self.limit(pos);
            self.cached_limit.set(limit);
            if pos < limit {
                return true;
            }
            polls = polls.wrapping_add(1);
            if !polls.is_multiple_of(64) || crate::sys::clock::stamp_ns() < spin_until {
                core::hint::spin_loop();
                continue;
            }
            self.reap_dead_readers();
            let now = crate::sys::clock::mono_ns();
            if now >= deadline_ns {
                // a last look: the reap above may have freed the room (a writer slowed
                // down past its deadline used to give up without it; found under
                // ThreadSanitizer, `a_dead_reader_never_holds_back_pressure`)
                let limit = self.limit(pos);
                self.cached_limit.set(limit);
                return pos < limit;
            }
            // SYNC: announce the sleeper and the position it waits to write, then the heavy
            // fence (paired with the reader's light fence in `publish_tail`): either the
            // reader sees the request or this writer sees the reader's new tail below.
            blocked.fetch_add(1, Ordering::SeqCst);
            wake_at.store(pos, Ordering::SeqCst);
            crate::transport::doorbell::fence_for_waiters(false);
            let seen = room.load(Ordering::SeqCst);
            // SYNC: SeqCst, after the read of `room`: a request still standing means the
            // reader that takes it bumps `room` later, so the wait below returns.
            if pos >= self.limit(pos) && wake_at.load(Ordering::SeqCst) != u64::MAX {
                let left = Duration::from_nanos(deadline_ns - now).min(ROOM_RECHECK);
                crate::sys::futex::futex_wait(
                    room,
                    seen,
                    crate::transport::doorbell::sleep_limit(left),
                );
            }
            blocked.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Frees the entries of readers whose process died (their lock is free): a dead
    /// reader never holds the writer back.
    fn reap_dead_readers(&self) {
        let ring = &*self.ring;
        let Some(fd) = ring.fd() else { return };
        for i in 0..ring.layout.readers {
            // SYNC: Relaxed: the lock, not this load, decides.
            if ring.state(i).load(Ordering::Relaxed) != ACTIVE {
                continue;
            }
            // the reader holds its entry's lock while it lives (another description)
            if let Ok(Some(lock)) = OfdLock::try_take(fd, reader_lock_byte(i)) {
                // SYNC: Release under the lock: a new reader takes the lock before it
                // claims the entry.
                let _ = ring.state(i).compare_exchange(
                    ACTIVE,
                    FREE,
                    Ordering::Release,
                    Ordering::Relaxed,
                );
                drop(lock);
            }
        }
    }
}

impl Drop for RingWriter {
    fn drop(&mut self) {
        // SYNC: Release: see `InlineRing::is_closed`.
        self.ring.word(hdr::CLOSED).store(1, Ordering::Release);
    }
}

/// The byte of a shared ring's file whose lock its writer holds while it lives.
pub(crate) const WRITER_LOCK_BYTE: u64 = 0;

/// The byte of a shared ring's file locked while entries are claimed for subscribers
/// (past every reader's byte).
const CLAIM_LOCK_BYTE: u64 = 1 << 20;

/// The byte of a shared ring's file whose lock reader `i` holds while it lives.
pub(crate) fn reader_lock_byte(i: usize) -> u64 {
    1 + i as u64
}

/// The reading end.
pub(crate) struct RingReader {
    ring: Arc<InlineRing>,
    /// The reader entry this reader owns.
    entry: usize,
    /// The reader's QoS depth, at most the ring's capacity.
    depth: u64,
    pos: Cell<u64>,
    index: Cell<u64>,
}

impl RingReader {
    /// The reader of a same-process ring (its one reader entry).
    pub(crate) fn new(ring: Arc<InlineRing>) -> RingReader {
        RingReader {
            depth: ring.layout.capacity,
            ring,
            entry: 0,
            pos: Cell::new(0),
            index: Cell::new(0),
        }
    }

    /// The reader of a shared ring for subscriber `id` with queue depth `depth`: takes the
    /// entry the writer reserved for it (reading from where the reservation began), or
    /// claims a free one starting at `start`. The entry's lock is taken on the ring's own
    /// descriptor, which dies with this process. `Ok(None)` if every entry is taken (or
    /// the ring is no shared one); an error if the claim lock is busy: try again later.
    pub(crate) fn register(
        ring: Arc<InlineRing>,
        id: u64,
        start: u64,
        depth: usize,
    ) -> std::io::Result<Option<RingReader>> {
        let depth = (depth as u64).clamp(1, ring.layout.capacity);
        let Some(fd) = ring.fd() else {
            return Ok(None);
        };
        // see `InlineRing::reserve_for`
        let _claims = ring.claim_lock()?;
        let lock = |i: usize| match OfdLock::try_take(fd, reader_lock_byte(i)) {
            Ok(Some(lock)) => {
                // released by `Drop` (or by the kernel when the process dies)
                std::mem::forget(lock);
                true
            }
            _ => false,
        };
        let unlock = |i: usize| {
            let _ = OfdLock::release(fd, reader_lock_byte(i));
        };
        if let Some(reader) = RingReader::take_reservation(&ring, id, depth, lock, unlock) {
            return Ok(Some(reader));
        }
        Ok(ring
            .claim(id, start, depth, ACTIVE, Some(fd))
            .map(|claimed| RingReader::at(ring.clone(), claimed, depth, start)))
    }

    /// The reader of entry `entry` with depth `depth` (at most the capacity), at `pos`.
    fn at(ring: Arc<InlineRing>, entry: usize, depth: u64, pos: u64) -> RingReader {
        RingReader {
            entry,
            depth,
            pos: Cell::new(pos),
            index: Cell::new(pos % ring.layout.capacity),
            ring,
        }
    }

    /// The lock-free core of [`register`](RingReader::register) (the loom models run it
    /// on a heap ring): takes the entry the writer reserved for subscriber `id`, reading
    /// from where the reservation began. `lock(i)` takes entry `i`'s lock for this
    /// process (false: held by another), `unlock(i)` gives it back when the exchange is
    /// lost. `None` if no entry is reserved for `id`.
    pub(crate) fn take_reservation(
        ring: &Arc<InlineRing>,
        id: u64,
        depth: u64,
        mut lock: impl FnMut(usize) -> bool,
        mut unlock: impl FnMut(usize),
    ) -> Option<RingReader> {
        for i in 0..ring.layout.readers {
            let e = ring.layout.reader(i);
            // SYNC: Acquire pairs with the writer's Release of the reservation.
            if ring.state(i).load(Ordering::Acquire) != RESERVED
                || ring.word(e + E_ID).load(Ordering::Relaxed) != id
                || !lock(i)
            {
                continue;
            }
            // the depth is written before the exchange that makes the entry ours (under
            // the claim lock: no other claimer; the writer reads it after the state)
            ring.word(e + E_DEPTH).store(depth, Ordering::Relaxed);
            // SYNC: AcqRel: Acquire, the reservation's tail is the writer's; Release, the
            // depth above is published with the state.
            if ring
                .state(i)
                .compare_exchange(RESERVED, ACTIVE, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                let tail = ring.word(e + E_TAIL).load(Ordering::Relaxed);
                return Some(RingReader::at(ring.clone(), i, depth, tail));
            }
            unlock(i);
        }
        None
    }

    /// The ring read.
    pub(crate) fn ring(&self) -> &Arc<InlineRing> {
        &self.ring
    }

    /// Copies the next sample's payload into `out` (at least the ring's payload words
    /// long) and returns its head, or `None` if nothing new was written. Samples the
    /// writer overwrote before they were read are skipped. The head's length is as the
    /// writer wrote it: the caller checks it.
    #[inline]
    pub(crate) fn pop(&self, out: &mut [u64]) -> Option<SlotHead> {
        let ring = &*self.ring;
        let capacity = ring.layout.capacity;
        loop {
            if self.depth < capacity && !ring.back_pressure {
                self.keep_depth();
            }
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
                let words = (head.len as usize)
                    .div_ceil(8)
                    .min(ring.payload_words())
                    .min(out.len());
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
            let next = (newer + 1).saturating_sub(capacity).max(pos + 1);
            self.pos.set(next);
            self.index.set(next % capacity);
            if ring.back_pressure {
                self.publish_tail(next);
            }
        }
    }

    /// Drop-oldest with a depth below the ring's capacity: while the writer has written
    /// `depth` samples past this reader's position, the oldest unread one is dropped (a
    /// gap the subscriber counts as lost), so at most `depth` stay unread.
    #[inline]
    fn keep_depth(&self) {
        let ring = &*self.ring;
        let capacity = ring.layout.capacity;
        loop {
            let ahead = self.pos.get() + self.depth;
            // SYNC: Acquire, as for the version in `pop` (only compared here).
            let version = ring.slot(ahead % capacity)[0].load(Ordering::Acquire);
            if version < 2 * ahead + 1 {
                return;
            }
            let next = self.pos.get() + 1;
            self.pos.set(next);
            self.index.set(next % capacity);
        }
    }

    #[inline]
    fn advance(&self, next: u64) {
        let ring = &*self.ring;
        self.pos.set(next);
        let idx = self.index.get() + 1;
        self.index
            .set(if idx == ring.layout.capacity { 0 } else { idx });
        if ring.back_pressure {
            self.publish_tail(next);
        }
    }

    fn publish_tail(&self, next: u64) {
        let ring = &*self.ring;
        // SYNC: Release: the copy is done before the writer may reuse the slot.
        ring.word(ring.layout.reader(self.entry) + E_TAIL)
            .store(next, Ordering::Release);
        #[cfg(not(nerve_loom))]
        self.wake_writer(next);
    }

    /// Wakes a writer sleeping for room once this reader freed a batch of its depth.
    #[cfg(not(nerve_loom))]
    fn wake_writer(&self, next: u64) {
        let ring = &*self.ring;
        let wait = ring.layout.wait_area();
        // SYNC: the light fence orders the tail's store before the loads of the writer's
        // request; it pairs with the writer's heavy fence in `wait_room`: either the
        // writer sees this tail or this reader sees the request.
        crate::sys::membarrier::light();
        if ring.futex_word(wait, 0).load(Ordering::Relaxed) > 0 {
            let wake_at = ring.word(wait + 1);
            // the writer waits to write at `want`: wake it once this reader has a batch
            // of its depth free for it (half, at most ROOM_BATCH)
            let want = wake_at.load(Ordering::Relaxed);
            let batch = (self.depth / 2).clamp(1, ROOM_BATCH);
            // SYNC: one reader takes the request; the bump of `room` after it wakes the
            // writer (SeqCst, see `wait_room`).
            if want != u64::MAX
                && next + self.depth >= want.saturating_add(batch)
                && wake_at.swap(u64::MAX, Ordering::SeqCst) != u64::MAX
            {
                let room = ring.futex_word(wait, 1);
                room.fetch_add(1, Ordering::SeqCst);
                crate::sys::futex::futex_wake(room);
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

impl Drop for RingReader {
    fn drop(&mut self) {
        if let Some(fd) = self.ring.fd() {
            // SYNC: Release: this reader's reads are done before the entry is reused.
            self.ring.state(self.entry).store(FREE, Ordering::Release);
            let _ = OfdLock::release(fd, reader_lock_byte(self.entry));
        }
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
        // (Miri interprets: a few hundred samples explore its interleavings)
        let n = if cfg!(miri) { 300 } else { 200_000u64 };
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
        let n = if cfg!(miri) { 300 } else { 100_000u64 };
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

/// Loom models of the heap ring: every interleaving (up to loom's preemption bound) of a
/// writer thread's real `push` against a reader's real `pop`, under the C++ memory model.
/// Run by `scripts/concurrency` (`RUSTFLAGS="--cfg nerve_loom"`).
#[cfg(all(test, nerve_loom))]
mod loom_models {
    use super::*;

    fn head(seq: u64) -> SlotHead {
        SlotHead {
            seq,
            mono_ns: seq,
            wall_ns: seq as i64,
            len: 16,
        }
    }

    /// A payload of two words that both carry `seq` (a torn copy mixes two samples).
    fn payload(seq: u64) -> Vec<u8> {
        [seq.to_ne_bytes(), (!seq).to_ne_bytes()].concat()
    }

    /// Checks a popped sample: whole (its head and both words agree) and newer than the
    /// last; returns its sequence number.
    fn check(h: SlotHead, out: &[u64], last: u64) -> u64 {
        assert_eq!((h.mono_ns, h.wall_ns, h.len), (h.seq, h.seq as i64, 16));
        assert_eq!((out[0], out[1]), (h.seq, !h.seq), "a torn sample");
        assert!(h.seq > last, "{} after {last}", h.seq);
        h.seq
    }

    #[test]
    fn drop_oldest_never_hands_out_a_torn_or_repeated_sample() {
        loom::model(|| {
            // two slots, three samples: the third overwrites the first
            let ring = Arc::new(InlineRing::new(2, 16, false, SampleHeader::default()));
            let w = RingWriter::new(ring.clone());
            let r = RingReader::new(ring);
            let t = loom::thread::spawn(move || {
                for seq in 1..=3 {
                    assert!(w.push(head(seq), &payload(seq), u64::MAX));
                }
            });
            let mut out = [0u64; 2];
            let mut last = 0;
            for _ in 0..3 {
                if let Some(h) = r.pop(&mut out) {
                    last = check(h, &out, last);
                }
            }
            t.join().unwrap();
            // once the writer is done, the newest sample is there to read
            while let Some(h) = r.pop(&mut out) {
                last = check(h, &out, last);
            }
            assert_eq!(last, 3);
        });
    }

    #[test]
    fn back_pressure_loses_nothing_and_reuses_no_slot_early() {
        loom::model(|| {
            let ring = Arc::new(InlineRing::new(2, 16, true, SampleHeader::default()));
            let w = RingWriter::new(ring.clone());
            let r = RingReader::new(ring);
            let t = loom::thread::spawn(move || {
                for seq in 1..=3 {
                    assert!(w.push(head(seq), &payload(seq), u64::MAX));
                }
            });
            let mut out = [0u64; 2];
            let mut last = 0;
            while last < 3 {
                match r.pop(&mut out) {
                    Some(h) => {
                        // nothing skipped: every sample, in order
                        assert_eq!(h.seq, last + 1);
                        last = check(h, &out, last);
                    }
                    None => loom::thread::yield_now(),
                }
            }
            t.join().unwrap();
        });
    }
}
