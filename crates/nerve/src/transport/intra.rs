//! Same-process fast path: a publisher hands samples to the subscribers of its own
//! [`Context`](crate::Context) through bounded in-memory queues. No shared memory and no
//! system call is involved unless a subscriber sleeps (then the doorbell wakes it).
//!
//! Fixed-size messages of up to [`INLINE_MAX`] bytes travel inline: each (publisher,
//! subscriber) pair has a single-producer ring whose slots hold the whole sample
//! (`ring.rs`), so nothing but the slot crosses cores. Larger and slice messages live in
//! a reference-counted heap buffer: every local subscriber reads the publisher's buffer
//! in place (zero copy within the process), and the buffer returns to the publisher's
//! small pool once the last reader drops it.
//!
//! Routes: local subscribers always receive local publishers' samples here. The publisher
//! sends through shared memory only when a subscriber outside this context exists or the
//! topic keeps history; local subscribers skip those copies (see `Receiver`).

use crate::message::header::SampleHeader;
use crate::qos::Overflow;
use crate::transport::ring::{InlineRing, RingWriter, SlotHead};
pub(crate) use crate::transport::ring::{RingReader, INLINE_MAX};
use crossbeam_queue::ArrayQueue;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// A payload buffer shared by the publisher's pool and the samples that read it.
pub(crate) type Buf = Arc<Vec<u64>>;

/// Buffers a publisher keeps for reuse (more in flight are freed when their readers
/// drop them, so memory stays bounded by the pool plus the subscribers' queues).
const POOL_MAX: usize = 8;

/// A buffer loaned from a [`LocalRoute`]: nothing else references it until it is
/// delivered, so it can be written in place.
pub(crate) struct LocalLoan(Buf);

impl LocalLoan {
    /// The buffer's words.
    pub(crate) fn words(&self) -> &[u64] {
        &self.0
    }

    /// Ends the loan once the sample is written: the buffer can then be shared with any
    /// number of readers (subscribers, the network plane), and nothing writes it again
    /// until every reader has dropped it.
    pub(crate) fn freeze(self) -> Buf {
        self.0
    }

    /// The buffer's words, writable.
    pub(crate) fn words_mut(&mut self) -> &mut [u64] {
        // SAFETY: `LocalRoute::loan` made sure nothing else references this buffer (no
        // Weak references exist, and the pool gave it up), and a loan hands out no clone
        // of its Arc: clones exist only after `freeze`, which consumes it. &mut self makes
        // this access exclusive.
        unsafe { (*(Arc::as_ptr(&self.0) as *mut Vec<u64>)).as_mut_slice() }
    }
}

/// A sample on the local route: Nerve's header plus the payload buffer.
pub(crate) struct LocalSample {
    pub(crate) header: SampleHeader,
    pub(crate) buf: Buf,
}

impl LocalSample {
    /// The payload words (whole words covering `header.payload_len` bytes).
    pub(crate) fn words(&self) -> &[u64] {
        &self.buf[..crate::transport::shm::words_for(self.header.payload_len as usize)]
    }
}

/// The topics with local endpoints in one context.
#[derive(Default)]
pub(crate) struct Registry {
    topics: Mutex<HashMap<String, Arc<LocalTopic>>>,
}

impl Registry {
    /// The local state of `topic`, created on first use. Topics no endpoint holds any
    /// more are dropped here, so the registry holds the topics in use.
    pub(crate) fn topic(&self, topic: &str) -> Arc<LocalTopic> {
        let mut topics = lock(&self.topics);
        topics.retain(|_, t| Arc::strong_count(t) > 1);
        topics.entry(topic.to_string()).or_default().clone()
    }
}

/// The local subscribers of one topic in one context.
#[derive(Default)]
pub(crate) struct LocalTopic {
    /// Bumped on every change of `subscribers`, so publishers re-read the list only then.
    epoch: AtomicU64,
    subscribers: Mutex<Vec<Arc<LocalQueue>>>,
    /// Publishers of this context on the topic.
    publishers: AtomicUsize,
    /// Publishers of this context ever created on the topic.
    created: AtomicU64,
    /// Samples of this context's publishers that also went through shared memory while
    /// local subscribers existed: those subscribers' shared-memory queues then hold
    /// copies they must drain (and skip), or a reliable publisher would block on them.
    shm_sends: AtomicU64,
}

impl LocalTopic {
    /// Number of publishers this context ever created on the topic.
    pub(crate) fn created(&self) -> u64 {
        // SYNC: Acquire pairs with the Release increment in `LocalRoute::new`.
        self.created.load(Ordering::Acquire)
    }

    /// Number of this context's publishers on the topic.
    pub(crate) fn publishers(&self) -> usize {
        // SYNC: Acquire pairs with the Release decrement in `LocalRoute::drop`: reading 0
        // means every sample a departed publisher queued is visible to the reader.
        self.publishers.load(Ordering::Acquire)
    }

    /// Number of samples this context's publishers sent through shared memory while
    /// local subscribers existed (see `shm_sends`).
    #[inline]
    pub(crate) fn shm_sends(&self) -> u64 {
        // SYNC: Acquire pairs with the Release in `LocalRoute::sent_through_shm`: a reader
        // that sees the new count finds the sample in its shared-memory queue.
        self.shm_sends.load(Ordering::Acquire)
    }

    /// Adds a subscriber's queue.
    pub(crate) fn attach(&self, q: Arc<LocalQueue>) {
        lock(&self.subscribers).push(q);
        // SYNC: Release publishes the new list to publishers that load the epoch (Acquire).
        self.epoch.fetch_add(1, Ordering::Release);
    }

    /// Removes a subscriber's queue.
    pub(crate) fn detach(&self, q: &Arc<LocalQueue>) {
        lock(&self.subscribers).retain(|x| !Arc::ptr_eq(x, q));
        // SYNC: see attach.
        self.epoch.fetch_add(1, Ordering::Release);
    }
}

/// A subscriber's queue on the local route: a lock-free bounded queue of its QoS depth
/// (several publishers may push, its subscriber pops).
pub(crate) struct LocalQueue {
    entries: ArrayQueue<LocalSample>,
    /// The subscriber's depth: the capacity of each inline ring made for it.
    depth: usize,
    /// The subscriber's id in iceoryx2 (publishers reserve shared-ring entries only for
    /// subscribers of other contexts).
    pub(crate) id: u64,
    /// Inline rings of the local publishers (one each), and a count bumped whenever the
    /// list changes or one of its writers leaves, so the subscriber re-reads it then.
    rings: Mutex<Vec<Arc<InlineRing>>>,
    rings_epoch: AtomicU64,
    /// Publishers sleeping until the queue has room (back-pressure).
    blocked: AtomicU32,
    /// Bumped (and woken) by the subscriber when it takes a sample while a publisher
    /// sleeps: the futex word blocked publishers wait on.
    room: AtomicU32,
}

/// Longest single sleep of a blocked publisher before it looks at the queue again: the
/// subscriber's check of `blocked` is not fenced (that would cost every receive), so a
/// wake-up can be missed; this bounds what a miss costs.
const ROOM_RECHECK: Duration = Duration::from_millis(1);

impl LocalQueue {
    /// An empty queue holding at most `depth` samples, of the subscriber `id`.
    pub(crate) fn new(depth: usize, id: u64) -> LocalQueue {
        LocalQueue {
            entries: ArrayQueue::new(depth.max(1)),
            depth: depth.max(1),
            id,
            rings: Mutex::new(Vec::new()),
            rings_epoch: AtomicU64::new(0),
            blocked: AtomicU32::new(0),
            room: AtomicU32::new(0),
        }
    }

    /// Queues `s`, sleeping (not spinning) until there is room or `deadline_ns`
    /// (monotonic) passes; gives the sample back on timeout.
    fn push_until(&self, mut s: LocalSample, deadline_ns: u64) -> Result<(), LocalSample> {
        loop {
            s = match self.entries.push(s) {
                Ok(()) => return Ok(()),
                Err(back) => back,
            };
            let now = crate::sys::clock::mono_ns();
            if now >= deadline_ns {
                return Err(s);
            }
            // SYNC: announce the sleeper before reading the futex word and trying again;
            // the subscriber bumps `room` after a pop when it sees a sleeper.
            self.blocked.fetch_add(1, Ordering::SeqCst);
            let seen = self.room.load(Ordering::SeqCst);
            s = match self.entries.push(s) {
                Ok(()) => {
                    self.blocked.fetch_sub(1, Ordering::Relaxed);
                    return Ok(());
                }
                Err(back) => back,
            };
            let left = Duration::from_nanos(deadline_ns - now).min(ROOM_RECHECK);
            crate::sys::futex::futex_wait(&self.room, seen, left);
            self.blocked.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Takes the oldest sample, waking a publisher that waits for room.
    #[inline]
    pub(crate) fn pop(&self) -> Option<LocalSample> {
        let s = self.entries.pop();
        // SYNC: Relaxed: a sleeper missed here looks again within ROOM_RECHECK.
        if s.is_some() && self.blocked.load(Ordering::Relaxed) > 0 {
            self.room.fetch_add(1, Ordering::SeqCst);
            crate::sys::futex::futex_wake(&self.room);
        }
        s
    }

    /// The subscriber's QoS depth.
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }

    /// Whether nothing is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Changes whenever the list of inline rings changed or a writer left.
    #[inline]
    pub(crate) fn rings_epoch(&self) -> u64 {
        // SYNC: Acquire pairs with the Release in `add_ring`/`ring_closed`: the reader then
        // finds the new list (under its mutex) and the closed flags.
        self.rings_epoch.load(Ordering::Acquire)
    }

    /// Brings `readers` up to date with the rings of this queue: a reader for every new
    /// ring; readers of rings whose writer left and that are drained are dropped.
    pub(crate) fn refresh_readers(&self, readers: &mut Vec<RingReader>) {
        let mut rings = lock(&self.rings);
        for ring in rings.iter() {
            if !readers.iter().any(|r| Arc::ptr_eq(r.ring(), ring)) {
                readers.push(RingReader::new(ring.clone()));
            }
        }
        readers.retain(|r| !r.is_done());
        rings.retain(|ring| readers.iter().any(|r| Arc::ptr_eq(r.ring(), ring)));
    }

    fn add_ring(&self, ring: Arc<InlineRing>) {
        lock(&self.rings).push(ring);
        // SYNC: Release publishes the new list; see `rings_epoch`.
        self.rings_epoch.fetch_add(1, Ordering::Release);
    }

    fn ring_closed(&self) {
        // SYNC: see `rings_epoch`.
        self.rings_epoch.fetch_add(1, Ordering::Release);
    }
}

/// A publisher's side of the local route: a cached list of local subscribers and a pool
/// of payload buffers.
pub(crate) struct LocalRoute {
    topic: Arc<LocalTopic>,
    seen_epoch: Cell<u64>,
    subscribers: RefCell<Vec<Arc<LocalQueue>>>,
    pool: RefCell<Vec<Buf>>,
    /// Inline delivery (fixed-size messages of up to [`INLINE_MAX`] bytes): the payload
    /// size, and one ring writer per local subscriber.
    inline: Option<Inline>,
}

/// A route's inline rings.
struct Inline {
    payload_bytes: usize,
    back_pressure: bool,
    /// The publisher's id, type hash and origin, shared by all its samples.
    template: SampleHeader,
    writers: RefCell<Vec<(Arc<LocalQueue>, RingWriter)>>,
}

impl LocalRoute {
    /// The route of a publisher on `topic`. Samples of `inline_bytes` (a fixed size of at
    /// most [`INLINE_MAX`]) travel inline in rings; `None` sends them by reference.
    /// `template` holds what every sample's header shares (publisher, type, origin).
    pub(crate) fn new(
        topic: Arc<LocalTopic>,
        inline_bytes: Option<usize>,
        overflow: Overflow,
        template: SampleHeader,
    ) -> LocalRoute {
        // SYNC: counts; the samples themselves are published by the queue.
        topic.publishers.fetch_add(1, Ordering::Relaxed);
        topic.created.fetch_add(1, Ordering::Release);
        LocalRoute {
            topic,
            seen_epoch: Cell::new(u64::MAX),
            subscribers: RefCell::new(Vec::new()),
            pool: RefCell::new(Vec::new()),
            inline: inline_bytes
                .filter(|&n| n <= INLINE_MAX)
                .map(|payload_bytes| Inline {
                    payload_bytes,
                    back_pressure: matches!(overflow, Overflow::BackPressure { .. }),
                    template,
                    writers: RefCell::new(Vec::new()),
                }),
        }
    }

    /// Number of local subscribers now (re-reads the list only if it changed).
    #[inline]
    pub(crate) fn subscribers(&self) -> usize {
        // SYNC: Acquire pairs with the Release in attach/detach.
        let epoch = self.topic.epoch.load(Ordering::Acquire);
        if epoch != self.seen_epoch.get() {
            let list = lock(&self.topic.subscribers).clone();
            if let Some(inline) = &self.inline {
                inline.connect(&list);
            }
            *self.subscribers.borrow_mut() = list;
            self.seen_epoch.set(epoch);
        }
        self.subscribers.borrow().len()
    }

    /// A buffer of at least `words` words that no one else reads: a pooled one whose
    /// readers are done, or a new one.
    pub(crate) fn loan(&self, words: usize) -> LocalLoan {
        let mut pool = self.pool.borrow_mut();
        // the cheap count filters; get_mut confirms with the fence that orders the last
        // reader's accesses before our writes
        let free = pool
            .iter_mut()
            .position(|b| Arc::strong_count(b) == 1 && Arc::get_mut(b).is_some());
        let mut buf = match free {
            Some(i) => pool.swap_remove(i),
            None => Arc::new(Vec::new()),
        };
        if let Some(v) = Arc::get_mut(&mut buf) {
            if v.len() < words {
                v.resize(words, 0);
            }
        }
        LocalLoan(buf)
    }

    /// Notes that a sample also went through shared memory while local subscribers
    /// existed: they drain (and skip) their shared-memory copies.
    pub(crate) fn sent_through_shm(&self) {
        // SYNC: Release after the shared-memory send (see `LocalTopic::shm_sends`).
        self.topic.shm_sends.fetch_add(1, Ordering::Release);
    }

    /// The iceoryx2 ids of this context's subscribers of the topic.
    pub(crate) fn local_ids(&self) -> Vec<u64> {
        self.subscribers.borrow().iter().map(|q| q.id).collect()
    }

    /// Whether samples travel inline in rings (fixed-size messages of up to
    /// [`INLINE_MAX`] bytes).
    #[inline]
    pub(crate) fn is_inline(&self) -> bool {
        self.inline.is_some()
    }

    /// Writes a sample of an inline route into every local subscriber's ring (see
    /// [`LocalRoute::deliver`] for overflow and the deadline). No buffer is involved.
    #[inline]
    pub(crate) fn deliver_inline(
        &self,
        header: &SampleHeader,
        payload: &[u8],
        deadline_ns: u64,
    ) -> Result<(), ()> {
        match &self.inline {
            Some(inline) => inline.deliver(header, payload, deadline_ns),
            None => Err(()),
        }
    }

    /// Hands `buf` to every local subscriber, then keeps it for reuse. Under drop-oldest
    /// a full queue loses its oldest sample (the subscriber counts the gap); under
    /// back-pressure the publisher sleeps until there is room, up to `deadline_ns`
    /// (monotonic) for the whole publish, then gives up on that subscriber.
    pub(crate) fn deliver(
        &self,
        header: SampleHeader,
        buf: Buf,
        overflow: Overflow,
        deadline_ns: u64,
    ) -> Result<(), ()> {
        if let Some(inline) = &self.inline {
            let bytes = crate::transport::shm::words_as_bytes(&buf);
            let result =
                inline.deliver(&header, &bytes[..header.payload_len as usize], deadline_ns);
            self.keep(buf);
            return result;
        }
        let mut result = Ok(());
        for q in self.subscribers.borrow().iter() {
            let s = LocalSample {
                header,
                buf: buf.clone(),
            };
            match overflow {
                Overflow::DropOldest => {
                    q.entries.force_push(s);
                }
                Overflow::BackPressure { .. } => {
                    if q.push_until(s, deadline_ns).is_err() {
                        result = Err(());
                    }
                }
            }
        }
        self.keep(buf);
        result
    }

    /// Keeps `buf` for reuse if the pool has room.
    fn keep(&self, buf: Buf) {
        let mut pool = self.pool.borrow_mut();
        if pool.len() < POOL_MAX {
            pool.push(buf);
        }
    }
}

impl Inline {
    /// Keeps a writer for every subscriber in `list`: existing ones stay (their rings
    /// keep their place), new subscribers get a new ring, departed ones' writers go.
    fn connect(&self, list: &[Arc<LocalQueue>]) {
        let mut writers = self.writers.borrow_mut();
        writers.retain(|(q, _)| list.iter().any(|x| Arc::ptr_eq(x, q)));
        for q in list {
            if !writers.iter().any(|(x, _)| Arc::ptr_eq(x, q)) {
                let ring = Arc::new(InlineRing::new(
                    q.depth,
                    self.payload_bytes,
                    self.back_pressure,
                    self.template,
                ));
                q.add_ring(ring.clone());
                writers.push((q.clone(), RingWriter::new(ring)));
            }
        }
    }

    /// Writes the sample into every subscriber's ring; under back-pressure a ring that
    /// stays full until `deadline_ns` misses it (an error, never a silent loss).
    #[inline]
    fn deliver(&self, header: &SampleHeader, payload: &[u8], deadline_ns: u64) -> Result<(), ()> {
        let head = SlotHead {
            seq: header.seq,
            mono_ns: header.publish_mono_ns,
            wall_ns: header.publish_wall_ns,
            len: header.payload_len,
        };
        let mut result = Ok(());
        for (_, w) in self.writers.borrow().iter() {
            if !w.push(head, payload, deadline_ns) {
                result = Err(());
            }
        }
        result
    }
}

impl Drop for Inline {
    fn drop(&mut self) {
        for (q, w) in self.writers.get_mut().drain(..) {
            drop(w);
            q.ring_closed();
        }
    }
}

impl Drop for LocalRoute {
    fn drop(&mut self) {
        // SYNC: Release publishes this publisher's queued samples (see publishers()).
        self.topic.publishers.fetch_sub(1, Ordering::Release);
    }
}

/// Locks a mutex, recovering from poisoning (the guarded data stays consistent: every
/// critical section here is a single push, pop or list update).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(seq: u64) -> SampleHeader {
        SampleHeader {
            seq,
            payload_len: 8,
            ..Default::default()
        }
    }

    #[test]
    fn the_registry_forgets_topics_nobody_uses() {
        let r = Registry::default();
        for i in 0..100 {
            drop(r.topic(&format!("/t{i}")));
        }
        let kept = r.topic("/kept");
        drop(r.topic("/other"));
        assert_eq!(lock(&r.topics).len(), 2, "the one held and the newest");
        drop(kept);
    }

    #[test]
    fn drop_oldest_bounds_the_queue() {
        let topic = Arc::new(LocalTopic::default());
        let q = Arc::new(LocalQueue::new(2, 0));
        topic.attach(q.clone());
        let route = LocalRoute::new(topic.clone(), None, Overflow::DropOldest, header(0));
        assert_eq!(route.subscribers(), 1);
        for seq in 1..=5 {
            let buf = route.loan(1);
            route
                .deliver(header(seq), buf.freeze(), Overflow::DropOldest, 0)
                .ok();
        }
        assert_eq!(q.pop().map(|s| s.header.seq), Some(4));
        assert_eq!(q.pop().map(|s| s.header.seq), Some(5));
        assert!(q.pop().is_none());
        topic.detach(&q);
        assert_eq!(route.subscribers(), 0);
    }

    #[test]
    fn back_pressure_times_out_and_keeps_what_was_queued() {
        let topic = Arc::new(LocalTopic::default());
        let q = Arc::new(LocalQueue::new(1, 0));
        topic.attach(q.clone());
        let route = LocalRoute::new(topic, None, Overflow::DropOldest, header(0));
        route.subscribers();
        let bp = Overflow::BackPressure {
            timeout: Duration::from_millis(5),
        };
        let deadline = || crate::sys::clock::mono_ns() + 5_000_000;
        assert!(route
            .deliver(header(1), route.loan(1).freeze(), bp, deadline())
            .is_ok());
        assert_eq!(
            route.deliver(header(2), route.loan(1).freeze(), bp, deadline()),
            Err(())
        );
        assert_eq!(q.pop().map(|s| s.header.seq), Some(1));
        assert!(q.pop().is_none());
    }

    #[test]
    fn buffers_are_reused_once_readers_drop_them() {
        let topic = Arc::new(LocalTopic::default());
        let q = Arc::new(LocalQueue::new(4, 0));
        topic.attach(q.clone());
        let route = LocalRoute::new(topic, None, Overflow::DropOldest, header(0));
        route.subscribers();
        let b = route.loan(4);
        let first = Arc::as_ptr(&b.0);
        route
            .deliver(header(1), b.freeze(), Overflow::DropOldest, 0)
            .ok();
        // still held by the queued sample: a new loan gets another buffer
        let held = route.loan(4);
        assert_ne!(Arc::as_ptr(&held.0), first);
        drop(held);
        drop(q.pop());
        // the reader dropped it: the pool hands it out again
        assert_eq!(Arc::as_ptr(&route.loan(4).0), first);
    }
}
