//! Typed subscribers: samples are read in place in shared memory and released on drop.

use crate::context::Node;
use crate::error::{DecodeError, RecvError, TopicError};
use crate::message::header::SampleHeader;
use crate::message::{Message, Serde, SerdeMessage, TypeInfo};
use crate::qos::Qos;
use crate::sys::clock::mono_ns;
use crate::sys::clock::precise_timers;
use crate::transport::doorbell::{Slot, SlotRef};
use crate::transport::intra::{LocalQueue, LocalSample, LocalTopic, RingReader, INLINE_MAX};
use crate::transport::remote::RemoteSubscriber;
use crate::transport::shm::{self, IoxSample, IoxSubscriber, TopicService};
use crate::transport::shm_ring::{self, OpenError};
use crate::transport::wait::{wait_for, Predictor, SpinWindow, WaitMode, MAX_SLEEP};
use iceoryx2::prelude::CallbackProgression;
use iceoryx2::service::port_factory::PortFactory as _;
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::ops::Deref;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Builds a [`Subscriber`].
pub struct SubscriberBuilder<M: Message> {
    node: Node,
    topic: String,
    qos: Qos,
    mode: WaitMode,
    _m: PhantomData<M>,
}

impl<M: Message> SubscriberBuilder<M> {
    pub(crate) fn new(node: Node, topic: &str) -> Self {
        SubscriberBuilder {
            topic: topic.to_string(),
            node,
            qos: Qos::default(),
            mode: WaitMode::default(),
            _m: PhantomData,
        }
    }

    /// Sets the quality of service.
    pub fn qos(mut self, qos: Qos) -> Self {
        self.qos = qos;
        self
    }

    /// Sets how blocking receives wait.
    pub fn wait_mode(mut self, mode: WaitMode) -> Self {
        self.mode = mode;
        self
    }

    /// Opens the topic (creating it if needed) and creates the subscriber.
    pub fn create(self) -> Result<Subscriber<M>, TopicError> {
        let topic = self.node.resolve_name(&self.topic);
        crate::name::validate_topic(&topic)?;
        self.qos
            .validate()
            .map_err(|reason| TopicError::InvalidQos {
                topic: topic.clone(),
                reason,
            })?;
        let ty = TypeInfo::of::<M>();
        let schema = crate::message::schema::Schema::of::<M>().encode();
        let service = shm::open_topic(
            &self.node.inner.iox,
            &topic,
            Some(&ty),
            Some(&schema),
            &self.qos,
        )?;
        shm::check_qos(&topic, &service, &self.qos)?;
        let port = create_port(&service, &topic, &self.qos)?;
        let slot = super::bind_slot(&self.node, &topic)?;
        let net = net_side(&self.node, &topic, &ty, &self.qos, &slot)?;
        Ok(Subscriber {
            rx: Receiver::new(
                self.node,
                topic,
                service,
                port,
                ty,
                self.mode,
                self.qos.depth,
                slot,
            )
            .with_net(net),
            _m: PhantomData,
        })
    }
}

/// The subscriber's network side, when the network plane is on.
pub(crate) fn net_side(
    node: &Node,
    topic: &str,
    ty: &TypeInfo,
    qos: &Qos,
    slot: &SlotRef,
) -> Result<Option<Box<dyn RemoteSubscriber>>, TopicError> {
    let ctx = &node.inner.ctx;
    Ok(match ctx.remote()? {
        Some(plane) => Some(plane.subscriber(slot.clone(), ctx.domain(), topic, ty, qos)?),
        None => None,
    })
}

pub(crate) fn create_port(
    service: &TopicService,
    topic: &str,
    qos: &Qos,
) -> Result<IoxSubscriber, TopicError> {
    service
        .subscriber_builder()
        .buffer_size(qos.depth)
        .create()
        .map_err(|e| {
            use iceoryx2::port::subscriber::SubscriberCreateError as E;
            match e {
                E::ExceedsMaxSupportedSubscribers => TopicError::TooManyEndpoints {
                    topic: topic.to_string(),
                    kind: "subscribers",
                    max: service.static_config().max_subscribers(),
                },
                e => TopicError::Shm {
                    topic: topic.to_string(),
                    reason: format!("cannot create subscriber: {e:?}"),
                },
            }
        })
}

/// Counters of a subscriber.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SubscriberStats {
    /// Samples handed to the application.
    pub received: u64,
    /// Samples lost: gaps in publishers' sequence numbers (dropped as oldest on overflow).
    pub lost: u64,
    /// Samples dropped because they broke the topic's layout.
    pub malformed: u64,
    /// Of `received`, samples that came by the same-process route (no shared memory).
    pub in_process: u64,
    /// Of `received`, samples that came from another host over the network plane.
    pub network: u64,
    /// Frames from the network refused on this topic in this process (malformed,
    /// truncated, oversized or of another type; shared by its subscribers here).
    pub network_refused: u64,
}

/// Most publishers whose sequence numbers a subscriber tracks at once.
const MAX_TRACKED_PUBLISHERS: usize = 64;

#[derive(Default)]
pub(crate) struct StatsState {
    pub(crate) counts: SubscriberStats,
    /// (publisher id, last sequence number), most recent first, bounded.
    last_seq: Vec<(u64, u64)>,
}

impl StatsState {
    /// Whether `seq` of `publisher` (or a later one) was delivered already.
    fn seen(&self, publisher: u64, seq: u64) -> bool {
        self.last_seq
            .iter()
            .any(|&(id, last)| id == publisher && seq <= last)
    }

    pub(crate) fn account(&mut self, h: &SampleHeader) {
        self.counts.received += 1;
        match self
            .last_seq
            .iter()
            .position(|(id, _)| *id == h.publisher_id)
        {
            Some(i) => {
                let last = self.last_seq[i].1;
                if h.seq > last + 1 {
                    self.counts.lost += h.seq - last - 1;
                }
                self.last_seq[i].1 = h.seq.max(last);
                if i > 0 {
                    let e = self.last_seq.remove(i);
                    self.last_seq.insert(0, e);
                }
            }
            None => {
                if self.last_seq.len() == MAX_TRACKED_PUBLISHERS {
                    self.last_seq.pop();
                }
                self.last_seq.insert(0, (h.publisher_id, h.seq));
            }
        }
    }
}

/// Untyped receiving end shared by [`Subscriber`] and [`RawSubscriber`].
pub(crate) struct Receiver {
    // field order is drop order: the port goes before its service and node
    port: IoxSubscriber,
    service: TopicService,
    /// The topic's doorbell slot.
    slot: SlotRef,
    node: Node,
    topic: String,
    mode: WaitMode,
    spin: SpinWindow,
    predictor: Predictor,
    expected: TypeInfo,
    stats: RefCell<StatsState>,
    /// Doorbell sequence last acknowledged (see `Receiver::acknowledge`).
    seen_ring: Cell<u32>,
    /// This subscriber's queue on the same-process route, and the topic it is listed on.
    local: Arc<LocalQueue>,
    local_topic: Arc<LocalTopic>,
    /// The context's identity, and when this subscriber joined the local route: samples
    /// of this context stamped since then came in-process; their shared-memory copies
    /// are skipped.
    origin: u64,
    since_ns: u64,
    /// Read shared memory before the local queue (history from before we joined waits
    /// there); cleared once it is empty.
    shm_first: Cell<bool>,
    /// Whether the topic keeps history (shared memory may then hold samples of local
    /// publishers that must be drained).
    history: bool,
    /// Shared memory may hold something: a publisher outside this context was seen since
    /// the queue was last found empty. While false, receiving costs no shared-memory poll.
    shm_dirty: Cell<bool>,
    /// The local queue may hold samples (a local publisher existed since it was drained).
    local_dirty: Cell<bool>,
    /// Local publishers ever created, as last seen (one that came and went since then
    /// may have left samples).
    local_created: Cell<u64>,
    /// (doorbell sequence, shared-memory publisher count) at the last count.
    publishers_seen: Cell<Option<(u32, usize)>>,
    /// [`LocalTopic::shm_sends`] when last looked at: a change means this context's
    /// publishers put copies of local samples in our shared-memory queue, to be drained.
    local_shm_sends: Cell<u64>,
    /// Receives so far; every `FAIRNESS`th one looks at shared memory first, so a busy
    /// local route cannot starve remote publishers.
    polls: Cell<u32>,
    /// Samples from other hosts (the network plane is on).
    net: Option<Box<dyn RemoteSubscriber>>,
    /// The type travels inline on the local route (fixed size, at most [`INLINE_MAX`]
    /// bytes): the by-reference queue stays empty and is not looked at.
    inline: bool,
    /// Readers of the local publishers' inline rings, the queue's ring count they were
    /// made at, and the ring to look at first (round robin between publishers).
    readers: RefCell<Vec<RingReader>>,
    readers_epoch: Cell<u64>,
    next_reader: Cell<usize>,
    /// Buffers inline samples are copied into; one is reused once its sample is dropped.
    inline_pool: RefCell<Vec<InlineBuf>>,
    /// Samples of other contexts come through their publishers' shared-memory rings
    /// (inline type, no history), not through iceoryx2.
    ring_topic: bool,
    /// Readers of those rings, the ring to look at first, and publisher ids not to open
    /// again (this context's own, or a file that was refused).
    shared: RefCell<Vec<SharedReader>>,
    next_shared: Cell<usize>,
    passed_over: RefCell<Vec<u64>>,
    /// Publishers of other contexts seen without a ring at the last look.
    ringless: Cell<usize>,
    /// A ring's claim lock was busy at the last look: look again at the next receive,
    /// not only after the next ring (a last sample's ring may already have come).
    rings_pending: Cell<bool>,
}

/// A reader of one publisher's shared-memory ring.
struct SharedReader {
    id: u64,
    path: String,
    reader: RingReader,
}

/// See `Receiver::polls`.
const FAIRNESS: u32 = 16;

/// A buffer an inline sample is copied into (owned by its receiver's thread).
type InlineBuf = Rc<Vec<u64>>;

/// Inline buffers a receiver keeps for reuse (more are freed as their samples drop).
const INLINE_POOL: usize = 8;

/// Where a received sample lives: in shared memory or in a same-process buffer.
pub(crate) enum Received {
    Shm(IoxSample),
    Local(LocalSample),
    /// Copied out of a same-process inline ring.
    Inline(SampleHeader, InlineBuf),
    /// Copied out of another context's shared-memory ring.
    Shared(SampleHeader, InlineBuf),
    /// From another host, decoded into a heap buffer.
    Net(LocalSample),
}

impl Received {
    /// Nerve's header.
    pub(crate) fn header(&self) -> &SampleHeader {
        match self {
            Received::Shm(s) => s.user_header(),
            Received::Local(l) | Received::Net(l) => &l.header,
            Received::Inline(h, _) | Received::Shared(h, _) => h,
        }
    }

    /// The payload words.
    pub(crate) fn words(&self) -> &[u64] {
        match self {
            Received::Shm(s) => s.payload(),
            Received::Local(l) | Received::Net(l) => l.words(),
            Received::Inline(h, b) | Received::Shared(h, b) => {
                &b[..shm::words_for(h.payload_len as usize)]
            }
        }
    }

    /// The payload bytes in use.
    pub(crate) fn bytes(&self) -> &[u8] {
        let len = self.header().payload_len as usize;
        &shm::words_as_bytes(self.words())[..len]
    }
}

/// Receives messages of type `M` from one topic.
pub struct Subscriber<M: Message> {
    rx: Receiver,
    _m: PhantomData<M>,
}

/// Checks a received sample against the topic's layout; returns the number of elements.
pub(crate) fn validate(s: &Received, ty: &TypeInfo) -> Result<usize, String> {
    let h = s.header();
    shm::check_payload(h.type_hash, h.payload_len, s.words(), ty)
}

impl Receiver {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        node: Node,
        topic: String,
        service: TopicService,
        port: IoxSubscriber,
        expected: TypeInfo,
        mode: WaitMode,
        depth: usize,
        slot: SlotRef,
    ) -> Receiver {
        let ctx = &node.inner.ctx.inner;
        let id = port.id().value();
        let id = (id as u64) ^ ((id >> 64) as u64);
        let local = Arc::new(LocalQueue::new(depth, id));
        let local_topic = ctx.local.topic(&topic);
        local_topic.attach(local.clone());
        // ringing tells publishers to count subscribers again
        slot.ring_always();
        // stamped after joining: anything stamped later was delivered to our queue
        let since_ns = crate::sys::clock::stamp_ns();
        let origin = ctx.origin;
        let history = service.static_config().history_size() > 0;
        let inline = !expected.is_slice() && expected.head_size <= INLINE_MAX;
        Receiver {
            port,
            service,
            slot,
            node,
            topic,
            mode,
            spin: SpinWindow::new(),
            predictor: Predictor::default(),
            expected,
            stats: RefCell::new(StatsState::default()),
            seen_ring: Cell::new(0),
            local,
            local_topic,
            origin,
            since_ns,
            shm_first: Cell::new(history),
            history,
            shm_dirty: Cell::new(true),
            publishers_seen: Cell::new(None),
            local_shm_sends: Cell::new(0),
            local_dirty: Cell::new(true),
            local_created: Cell::new(0),
            polls: Cell::new(0),
            net: None,
            inline,
            readers: RefCell::new(Vec::new()),
            readers_epoch: Cell::new(u64::MAX),
            next_reader: Cell::new(0),
            inline_pool: RefCell::new(Vec::new()),
            ring_topic: inline && !history,
            shared: RefCell::new(Vec::new()),
            next_shared: Cell::new(0),
            passed_over: RefCell::new(Vec::new()),
            ringless: Cell::new(0),
            rings_pending: Cell::new(false),
        }
    }

    /// Adds the network side (the network plane is on).
    pub(crate) fn with_net(mut self, net: Option<Box<dyn RemoteSubscriber>>) -> Receiver {
        self.net = net;
        self
    }

    /// If the doorbell rang since we last looked, attach to any new publisher and confirm,
    /// so a publisher waiting in `wait_for_subscribers` knows nothing it sends is lost.
    fn acknowledge(&self, slot: &Slot) {
        let seq = slot.seq();
        if seq != self.seen_ring.get() {
            self.seen_ring.set(seq);
            let _ = self.port.has_samples();
            if self.ring_topic {
                self.discover_rings();
            }
            slot.ack();
        }
    }

    pub(crate) fn try_recv(&self) -> Result<Option<(Received, usize)>, RecvError> {
        crate::trace::asking(false);
        let Some(net) = &self.net else {
            return self.try_recv_host();
        };
        // every FAIRNESS-th receive looks at the network first
        if self.polls.get() % FAIRNESS == FAIRNESS / 2 {
            if let Some(s) = self.try_net(net.as_ref()) {
                return Ok(Some(s));
            }
        }
        match self.try_recv_host()? {
            Some(s) => Ok(Some(s)),
            None => Ok(self.try_net(net.as_ref())),
        }
    }

    /// The next valid sample from another host. History handed over twice (by a
    /// publisher and again after a reconnect) is skipped by sequence number.
    fn try_net(&self, net: &dyn RemoteSubscriber) -> Option<(Received, usize)> {
        while let Some(s) = net.pop() {
            if self
                .stats
                .borrow()
                .seen(s.header.publisher_id, s.header.seq)
            {
                continue;
            }
            if let Some(accepted) = self.accept(Received::Net(s)) {
                return Some(accepted);
            }
        }
        None
    }

    /// The next sample from this host (same process or shared memory).
    fn try_recv_host(&self) -> Result<Option<(Received, usize)>, RecvError> {
        let polls = self.polls.get().wrapping_add(1);
        self.polls.set(polls);
        let seq_before = self.slot.seq();
        let (known, rang) = if self.ring_topic {
            let (foreign, rang) = self.foreign_publishers();
            if rang || self.rings_pending.get() {
                self.discover_rings();
            }
            (Some(foreign), rang)
        } else {
            // A ring (every send to a sleeping subscriber is one) makes the count stale;
            // it is read again only once the queues are found empty (`foreign` below),
            // not before the look that fetches the sample the ring announced: the count
            // is a scan of iceoryx2's dynamic config, cold in a process that slept.
            match self.publishers_seen.get() {
                Some((seen, n)) if seen == seq_before => {
                    (Some(n > self.local_topic.publishers()), false)
                }
                _ => (None, true),
            }
        };
        // Whether a publisher outside this context may exist; a stale count is read now
        // and filed under the sequence read before the look (a ring after that one is
        // still news at the next receive).
        let foreign = || {
            self.history
                || known.unwrap_or_else(|| {
                    let n = self.service.dynamic_config().number_of_publishers();
                    self.publishers_seen.set(Some((seq_before, n)));
                    n > self.local_topic.publishers()
                })
        };
        let sends = self.local_topic.shm_sends();
        // after a ring, look at shared memory once even if no foreign publisher is left:
        // one may have sent and gone between two looks
        if self.history
            || known == Some(true)
            || rang
            || sends != self.local_shm_sends.replace(sends)
        {
            self.shm_dirty.set(true);
        }
        let shm_first = self.shm_first.get() || polls.is_multiple_of(FAIRNESS);
        let mut local_tried = false;
        if !shm_first || !self.shm_dirty.get() {
            if let Some(s) = self.try_local() {
                return Ok(Some(s));
            }
            if !self.shm_dirty.get() {
                return Ok(None);
            }
            local_tried = true;
        }
        if self.ring_topic {
            if let Some(got) = self.try_shared() {
                return Ok(Some(got));
            }
            // iceoryx2 carries nothing of a ring topic, except from a writer without a
            // ring (not Nerve's, or one whose ring has not appeared yet): only then look
            if self.ringless.get() == 0 {
                self.shm_first.set(false);
                self.shm_dirty.set(foreign());
                return Ok(if local_tried { None } else { self.try_local() });
            }
        }
        loop {
            let s = self.port.receive().map_err(|e| RecvError::Shm {
                topic: self.topic.clone(),
                reason: format!("{e:?}"),
            })?;
            let Some(s) = s else {
                self.shm_first.set(false);
                self.shm_dirty.set(foreign());
                return Ok(if local_tried { None } else { self.try_local() });
            };
            let h = s.user_header();
            if h.origin == self.origin
                && (h.publish_mono_ns >= self.since_ns
                    || self.stats.borrow().seen(h.publisher_id, h.seq))
            {
                continue; // delivered in-process already
            }
            if let Some(accepted) = self.accept(Received::Shm(s)) {
                return Ok(Some(accepted));
            }
        }
    }

    /// Whether a publisher outside this context may exist, and whether the doorbell rang
    /// since the last look. The shared-memory count is read again only after a ring
    /// (every new publisher rings, and so does a send to a sleeping subscriber).
    #[inline]
    fn foreign_publishers(&self) -> (bool, bool) {
        let seq = self.slot.seq();
        let (shm, rang) = match self.publishers_seen.get() {
            Some((seen, n)) if seen == seq => (n, false),
            _ => {
                let n = self.service.dynamic_config().number_of_publishers();
                self.publishers_seen.set(Some((seq, n)));
                (n, true)
            }
        };
        (shm > self.local_topic.publishers(), rang)
    }

    /// The next valid sample of the local route. Skips the queue while no publisher of
    /// this context exists and it was found empty since the last one left.
    fn try_local(&self) -> Option<(Received, usize)> {
        let created = self.local_topic.created();
        let active = self.local_topic.publishers() > 0;
        if !active && !self.local_dirty.get() && created == self.local_created.get() {
            return None;
        }
        self.local_created.set(created);
        if let Some(s) = self.try_rings() {
            self.local_dirty.set(true);
            return Some(s);
        }
        while let Some(s) = (!self.inline).then(|| self.local.pop()).flatten() {
            if let Some(accepted) = self.accept(Received::Local(s)) {
                self.local_dirty.set(true);
                return Some(accepted);
            }
        }
        // empty: with no local publisher left, nothing more can arrive until one appears
        self.local_dirty.set(active);
        None
    }

    /// Brings the ring readers up to date if the queue's rings changed.
    #[inline]
    fn refresh_readers(&self) {
        let epoch = self.local.rings_epoch();
        if epoch != self.readers_epoch.get() {
            self.readers_epoch.set(epoch);
            self.local.refresh_readers(&mut self.readers.borrow_mut());
        }
    }

    /// The next valid sample of the local publishers' inline rings, round robin.
    fn try_rings(&self) -> Option<(Received, usize)> {
        self.refresh_readers();
        let readers = self.readers.borrow();
        self.take_round_robin(
            readers.iter(),
            readers.len(),
            &self.next_reader,
            Received::Inline,
        )
    }

    /// The next valid sample of the shared-memory rings of other contexts' publishers.
    fn try_shared(&self) -> Option<(Received, usize)> {
        let shared = self.shared.borrow();
        let readers = shared.iter().map(|s| &s.reader);
        self.take_round_robin(readers, shared.len(), &self.next_shared, Received::Shared)
    }

    /// Takes the next valid sample of `n` ring readers, starting after the one that gave
    /// the last sample (`next`), so no publisher starves another.
    #[inline]
    fn take_round_robin<'r>(
        &self,
        readers: impl Iterator<Item = &'r RingReader> + Clone,
        n: usize,
        next: &Cell<usize>,
        wrap: fn(SampleHeader, InlineBuf) -> Received,
    ) -> Option<(Received, usize)> {
        let start = next.get().min(n);
        for (i, r) in readers
            .clone()
            .enumerate()
            .skip(start)
            .chain(readers.enumerate().take(start))
        {
            while let Some(copied) = self.copy_out(r) {
                next.set(i + 1);
                let Ok((header, buf)) = copied else {
                    self.stats.borrow_mut().counts.malformed += 1;
                    continue;
                };
                if let Some(accepted) = self.accept(wrap(header, buf)) {
                    return Some(accepted);
                }
            }
        }
        None
    }

    /// Copies the next sample of `r` into an inline buffer nobody else holds: a pooled
    /// one whose sample was dropped, or a new one (kept if the pool has room). `Err` for
    /// a sample whose length does not fit a slot (a writer that lies).
    #[inline]
    fn copy_out(&self, r: &RingReader) -> Option<Result<(SampleHeader, InlineBuf), ()>> {
        let mut pool = self.inline_pool.borrow_mut();
        let fits = |len: u64| len as usize <= r.ring().payload_words() * 8;
        if let Some(b) = pool.iter_mut().find(|b| Rc::strong_count(b) == 1) {
            // one strong reference and no weak ones: the pool's alone, so writable
            let head = r.pop(Rc::get_mut(b)?)?;
            if !fits(head.len) {
                return Some(Err(()));
            }
            return Some(Ok((r.ring().header(head), b.clone())));
        }
        if !r.has_sample() {
            return None;
        }
        let mut fresh = Rc::new(vec![0u64; shm::words_for(INLINE_MAX)]);
        let head = r.pop(Rc::get_mut(&mut fresh)?)?;
        if !fits(head.len) {
            return Some(Err(()));
        }
        if pool.len() < INLINE_POOL {
            pool.push(fresh.clone());
        }
        Some(Ok((r.ring().header(head), fresh)))
    }

    /// Finds the rings of the topic's publishers in other contexts (by the publisher ids
    /// iceoryx2 lists) and reads the new ones; forgets rings whose publisher left once
    /// they are drained, unlinking the file of one that was killed. A ring made after
    /// this subscriber joined is read from its start, an older one from its newest
    /// sample on.
    fn discover_rings(&self) {
        let mut ids = Vec::new();
        self.service.dynamic_config().list_publishers(|d| {
            let v = d.publisher_id.value();
            ids.push((v as u64) ^ ((v >> 64) as u64));
            CallbackProgression::Continue
        });
        let mut shared = self.shared.borrow_mut();
        shared.retain(|s| {
            if s.reader.has_sample() || (ids.contains(&s.id) && !s.reader.is_done()) {
                return true;
            }
            if shm_ring::writer_died(s.reader.ring()) {
                shm_ring::unlink_if_same(s.reader.ring(), &s.path);
            }
            false
        });
        let mut passed_over = self.passed_over.borrow_mut();
        passed_over.retain(|id| ids.contains(id));
        let prefix = self.node.inner.ctx.inner.config.file_prefix();
        let mut ringless = 0;
        let mut pending = false;
        for id in ids {
            if passed_over.contains(&id) || shared.iter().any(|s| s.id == id) {
                continue;
            }
            let path = shm_ring::path(&prefix, id);
            match shm_ring::open(&path, self.expected.layout_hash) {
                Ok(ring) if ring.template().origin == self.origin => passed_over.push(id),
                Ok(ring) => {
                    let start = if shm_ring::created_ns(&ring) >= self.since_ns {
                        0
                    } else {
                        ring.head()
                    };
                    match RingReader::register(
                        Arc::new(ring),
                        self.local.id,
                        start,
                        self.local.depth(),
                    ) {
                        Ok(Some(reader)) => shared.push(SharedReader { id, path, reader }),
                        // every reader entry is taken: samples of this publisher cannot
                        // reach this subscriber, which counts it as malformed input
                        Ok(None) => {
                            self.stats.borrow_mut().counts.malformed += 1;
                            passed_over.push(id);
                        }
                        // its claim lock is busy (the publisher reserving, or a process
                        // stopped inside it): tried again at the next receive
                        Err(_) => {
                            ringless += 1;
                            pending = true;
                        }
                    }
                }
                // not there yet (the publisher creates it): looked for again at the next
                // ring; meanwhile iceoryx2 is read too
                Err(OpenError::Missing) => ringless += 1,
                Err(OpenError::Refused(why)) => {
                    // once per file: it is passed over from now on
                    eprintln!("nerve subscriber of {}: ring refused: {why}", self.topic);
                    self.stats.borrow_mut().counts.malformed += 1;
                    passed_over.push(id);
                }
            }
        }
        self.ringless.set(ringless);
        self.rings_pending.set(pending);
    }

    /// Validates and counts a sample; malformed ones are counted and dropped, never
    /// handed to the application.
    fn accept(&self, s: Received) -> Option<(Received, usize)> {
        match validate(&s, &self.expected) {
            Ok(elems) => {
                crate::trace::taken(&self.topic, s.header());
                let mut stats = self.stats.borrow_mut();
                stats.account(s.header());
                if self.mode == WaitMode::Predictive {
                    self.predictor.arrived(s.header().publish_mono_ns);
                }
                stats.counts.in_process +=
                    u64::from(matches!(s, Received::Local(_) | Received::Inline(..)));
                stats.counts.network += u64::from(matches!(s, Received::Net(_)));
                Some((s, elems))
            }
            Err(_) => {
                self.stats.borrow_mut().counts.malformed += 1;
                None
            }
        }
    }

    pub(crate) fn recv_timeout(
        &self,
        timeout: Duration,
    ) -> Result<Option<(Received, usize)>, RecvError> {
        crate::trace::asking(true);
        let r = match self.mode {
            WaitMode::Predictive => self.recv_predictive(timeout),
            mode => self.wait(mode, timeout),
        };
        crate::trace::asked();
        r
    }

    fn wait(
        &self,
        mode: WaitMode,
        timeout: Duration,
    ) -> Result<Option<(Received, usize)>, RecvError> {
        let slot = &self.slot;
        wait_for(
            mode,
            &self.spin,
            slot,
            timeout,
            MAX_SLEEP,
            || self.try_recv(),
            || {
                self.acknowledge(slot);
                Ok(())
            },
        )
    }

    /// [`WaitMode::Predictive`]: sleep until shortly before the next sample is due, spin
    /// across its due time, then sleep until woken.
    fn recv_predictive(&self, timeout: Duration) -> Result<Option<(Received, usize)>, RecvError> {
        if let Some(s) = self.try_recv()? {
            return Ok(Some(s));
        }
        precise_timers();
        let start = Instant::now();
        let now = mono_ns();
        if let Some(plan) = self.predictor.plan(now) {
            let sleep = Duration::from_nanos(plan.wake_at.saturating_sub(now));
            if !sleep.is_zero() {
                if let Some(s) = self.wait(WaitMode::Block, sleep.min(timeout))? {
                    return Ok(Some(s));
                }
                if sleep >= timeout {
                    return Ok(None);
                }
                self.predictor
                    .woke_late(mono_ns().saturating_sub(plan.wake_at));
            }
            let left = timeout.saturating_sub(start.elapsed());
            let spin = Duration::from_nanos(plan.spin_until.saturating_sub(mono_ns())).min(left);
            if !spin.is_zero() {
                if let Some(s) = self.wait(WaitMode::Spin, spin)? {
                    return Ok(Some(s));
                }
            }
        }
        self.wait(WaitMode::Block, timeout.saturating_sub(start.elapsed()))
    }

    pub(crate) fn set_mode(&mut self, mode: WaitMode) {
        self.mode = mode;
    }

    pub(crate) fn stats(&self) -> SubscriberStats {
        let mut counts = self.stats.borrow().counts;
        counts.network_refused = self.net.as_ref().map_or(0, |n| n.refused());
        counts
    }

    pub(crate) fn publisher_count(&self) -> usize {
        self.service.dynamic_config().number_of_publishers()
    }

    pub(crate) fn slot(&self) -> &SlotRef {
        &self.slot
    }

    pub(crate) fn has_samples(&self) -> bool {
        self.refresh_readers();
        // after a ring, look for new publishers as a receive does: the ring of one that
        // joined from another context is read only once discovered (wait sets and
        // executors ask this, not `try_recv`, before they sleep again)
        if self.foreign_publishers().1 {
            self.shm_dirty.set(true);
            if self.ring_topic {
                self.discover_rings();
            }
        }
        !self.local.is_empty()
            || self.readers.borrow().iter().any(|r| r.has_sample())
            || self.shared.borrow().iter().any(|s| s.reader.has_sample())
            || self.net.as_ref().is_some_and(|n| !n.is_empty())
            || self.port.has_samples().unwrap_or(true)
    }

    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    pub(crate) fn node(&self) -> &Node {
        &self.node
    }

    pub(crate) fn service(&self) -> &TopicService {
        &self.service
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.local_topic.detach(&self.local);
    }
}

impl<M: Message> Subscriber<M> {
    /// The topic name.
    pub fn topic(&self) -> &str {
        self.rx.topic()
    }

    /// The node this subscriber belongs to.
    pub fn node(&self) -> &Node {
        self.rx.node()
    }

    /// Counters: received, lost (sequence gaps) and malformed samples.
    pub fn stats(&self) -> SubscriberStats {
        self.rx.stats()
    }

    /// Number of publishers connected to the topic right now.
    pub fn publisher_count(&self) -> usize {
        self.rx.publisher_count()
    }

    fn wrap(s: Option<(Received, usize)>) -> Option<Sample<M>> {
        s.map(|(inner, elems)| Sample {
            inner,
            elems,
            _m: PhantomData,
        })
    }

    /// Returns the next sample if one is queued, without waiting.
    pub fn try_recv(&self) -> Result<Option<Sample<M>>, RecvError> {
        self.rx.try_recv().map(Self::wrap)
    }

    /// Waits up to `timeout` for the next sample, as the wait mode says.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Option<Sample<M>>, RecvError> {
        self.rx.recv_timeout(timeout).map(Self::wrap)
    }

    /// Waits without limit for the next sample.
    pub fn recv(&self) -> Result<Sample<M>, RecvError> {
        loop {
            if let Some(s) = self.recv_timeout(Duration::from_secs(3600))? {
                return Ok(s);
            }
        }
    }

    /// A blocking iterator over samples; ends on the first receive error.
    pub fn iter(&self) -> impl Iterator<Item = Sample<M>> + '_ {
        std::iter::from_fn(move || self.recv().ok())
    }

    pub(crate) fn receiver(&self) -> &Receiver {
        &self.rx
    }
}

/// A received sample, read in place (in shared memory, or in the publisher's buffer when
/// both are in one process). Dropping it releases the memory.
pub struct Sample<M: Message> {
    inner: Received,
    elems: usize,
    _m: PhantomData<M>,
}

impl<M: Message> Sample<M> {
    /// Nerve's header: sequence number, publish times, publisher id.
    pub fn header(&self) -> &SampleHeader {
        self.inner.header()
    }

    /// The elements after the head (empty for fixed-size messages).
    pub fn elems(&self) -> &[M::Elem] {
        crate::message::view::<M>(self.inner.words(), self.elems).1
    }

    /// The whole payload as bytes (head, padding and elements).
    pub fn payload_bytes(&self) -> &[u8] {
        self.inner.bytes()
    }
}

impl<M: Message> Deref for Sample<M> {
    type Target = M;
    fn deref(&self) -> &M {
        crate::message::view::<M>(self.inner.words(), 0).0
    }
}

impl<T: SerdeMessage> Sample<Serde<T>> {
    /// Decodes the serde value (bounded by the sample's bytes; malformed input is an error).
    pub fn decode(&self) -> Result<T, DecodeError> {
        let n = self.encoded_len().min(self.elems);
        crate::message::serde_decode(&self.elems()[..n]).map_err(|reason| DecodeError {
            type_name: T::TYPE_NAME.to_string(),
            reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(id: u64, seq: u64) -> SampleHeader {
        SampleHeader {
            seq,
            publisher_id: id,
            ..Default::default()
        }
    }

    #[test]
    fn gaps_are_counted_per_publisher() {
        let mut s = StatsState::default();
        for (id, seq) in [(1, 1), (2, 10), (1, 2), (1, 5), (2, 11), (2, 13)] {
            s.account(&h(id, seq));
        }
        assert_eq!(s.counts.received, 6);
        assert_eq!(s.counts.lost, 2 + 1);
    }

    #[test]
    fn tracked_publishers_are_bounded() {
        let mut s = StatsState::default();
        for id in 0..1000 {
            s.account(&h(id, 1));
        }
        assert_eq!(s.last_seq.len(), MAX_TRACKED_PUBLISHERS);
    }
}
