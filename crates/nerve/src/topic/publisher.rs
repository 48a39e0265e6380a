//! Typed publishers: loan a sample in shared memory, write it in place, send it.

use crate::context::Node;
use crate::error::{LoanError, PublishError, TopicError};
use crate::message::header::SampleHeader;
use crate::message::schema::Schema;
use crate::message::{elems_offset, Message, NoElem, Serde, SerdeMessage, TypeInfo};
use crate::qos::{Overflow, Qos};
use crate::sys::clock::{mono_ns, stamp_ns, WallClock};
use crate::transport::doorbell::SlotRef;
use crate::transport::intra::{Buf, LocalLoan, LocalRoute};
use crate::transport::remote::RemotePublisher;
use crate::transport::ring::{RingWriter, SlotHead};
use crate::transport::shm::{self, IoxPublisher, IoxSampleMut, TopicService};
use crate::transport::shm_ring;
use iceoryx2::port::update_connections::UpdateConnections;
use iceoryx2::port::{BackpressureAction, BackpressureInfo, LoanError as IoxLoanError, SendError};
use iceoryx2::prelude::{AllocationStrategy, BackpressureStrategy, CallbackProgression};
use iceoryx2::service::port_factory::PortFactory as _;
use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest time [`Publisher::wait_for_subscribers`] waits for subscribers to attach.
pub const ATTACH_GRACE: Duration = Duration::from_millis(200);

/// Builds a [`Publisher`].
pub struct PublisherBuilder<M: Message> {
    node: Node,
    topic: String,
    qos: Qos,
    _m: PhantomData<M>,
}

impl<M: Message> PublisherBuilder<M> {
    pub(crate) fn new(node: Node, topic: &str) -> Self {
        PublisherBuilder {
            topic: topic.to_string(),
            node,
            qos: Qos::default(),
            _m: PhantomData,
        }
    }

    /// Sets the quality of service.
    pub fn qos(mut self, qos: Qos) -> Self {
        self.qos = qos;
        self
    }

    /// Opens the topic (creating it if needed) and creates the publisher.
    pub fn create(self) -> Result<Publisher<M>, TopicError> {
        let schema = Schema::of::<M>().encode();
        let tx = Sender::create(
            self.node,
            &self.topic,
            TypeInfo::of::<M>(),
            Some(&schema),
            self.qos,
        )?;
        Ok(Publisher {
            tx,
            _m: PhantomData,
        })
    }
}

impl Sender {
    /// Opens `topic` (resolved here, as [`Node::resolve_name`] says) for messages of type
    /// `ty` (creating it if needed, with `schema`).
    pub(crate) fn create(
        node: Node,
        topic: &str,
        ty: TypeInfo,
        schema: Option<&str>,
        qos: Qos,
    ) -> Result<Sender, TopicError> {
        let topic = node.resolve_name(topic);
        crate::name::validate_topic(&topic)?;
        qos.validate().map_err(|reason| TopicError::InvalidQos {
            topic: topic.clone(),
            reason,
        })?;
        let service = shm::open_topic(&node.inner.iox, &topic, Some(&ty), schema, &qos)?;
        shm::check_qos(&topic, &service, &qos)?;

        let head = ty.elems_offset();
        let elem = ty.elem_size.max(1);
        // payload sizes are counted in bytes here and in 8-byte words by the transport
        let initial = if ty.is_slice() {
            qos.initial_payload.max(head + elem).min(qos.max_payload)
        } else {
            ty.head_size.max(1)
        };
        let sample_bytes = shm::words_for(initial) * 8 + core::mem::size_of::<SampleHeader>();
        let worst = shm::worst_case_samples(&service, &qos);
        // The pool never runs out because readers are slow, where that is possible
        // without cost: a drop-oldest topic's pool holds every sample its readers can hold
        // at once (a slow reader never fails a sensor publisher), and so does a slice
        // topic's, whatever its overflow (iceoryx2 0.10 grows a slice pool for larger
        // samples, but a pool grown for *more* samples overruns its sample table and
        // panics). Pages are touched only as samples are used (iceoryx2 hands back the
        // most recently freed sample first), so memory follows the samples in use. A
        // fixed-size back-pressure topic keeps a pool capped at `shm_budget` and reports
        // `PoolExhausted` when readers hold it all.
        let drop_oldest = matches!(qos.overflow, Overflow::DropOldest);
        let pool = match (drop_oldest, ty.is_slice()) {
            (true, _) => shm::drop_oldest_samples(&service, &qos).min(worst),
            (false, true) => worst,
            (false, false) => qos.pool_samples(worst, sample_bytes),
        };
        let mut builder = service
            .publisher_builder()
            .initial_max_slice_len(shm::words_for(initial))
            .allocation_strategy(if ty.is_slice() {
                AllocationStrategy::PowerOfTwo
            } else {
                AllocationStrategy::Static
            })
            // never the binding limit: `loan_bytes` counts every loan, on the heap or in
            // shared memory, against `max_loans` before it asks iceoryx2 for one
            .max_loaned_samples(qos.max_loans)
            .override_sample_preallocation(move |_| pool);
        // one deadline per publish, shared by every subscriber it waits for (local and in
        // shared memory): a publish never blocks longer than the QoS timeout in total
        let deadline = Arc::new(AtomicU64::new(0));
        if let Overflow::BackPressure { .. } = qos.overflow {
            let deadline = deadline.clone();
            builder = builder
                .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
                .set_backpressure_handler(move |info: &BackpressureInfo| {
                    // SYNC: written by the publishing thread itself before it sends.
                    let end = deadline.load(Ordering::Relaxed);
                    match back_pressure_nap(info.elapsed_time, mono_ns(), end) {
                        None => BackpressureAction::DiscardDataAndFail,
                        Some(nap) => {
                            if !nap.is_zero() {
                                std::thread::sleep(nap);
                            }
                            BackpressureAction::Retry
                        }
                    }
                });
        } else {
            builder = builder.backpressure_strategy(BackpressureStrategy::DiscardData);
        }
        let slot = crate::topic::bind_slot(&node, &topic)?;
        let ctx = &node.inner.ctx;
        let history = service.static_config().history_size();
        let net = match ctx.remote()? {
            Some(plane) => {
                Some(plane.publisher(ctx.domain(), &topic, (&ty, schema), &qos, history)?)
            }
            None => None,
        };
        let port = builder.create().map_err(|e| {
            use iceoryx2::port::publisher::PublisherCreateError as E;
            match e {
                E::ExceedsMaxSupportedPublishers => TopicError::TooManyEndpoints {
                    topic: topic.clone(),
                    kind: "publishers",
                    max: service.static_config().max_publishers(),
                },
                e => TopicError::Shm {
                    topic: topic.clone(),
                    reason: format!("cannot create publisher: {e:?}"),
                },
            }
        })?;
        let id = port.id().value();
        let origin = node.inner.ctx.inner.origin;
        let keeps_history = service.static_config().history_size() > 0;
        let id = (id as u64) ^ ((id >> 64) as u64);
        let inline_bytes =
            (!ty.is_slice() && ty.head_size <= shm_ring::INLINE_MAX).then_some(ty.head_size);
        let template = SampleHeader {
            publisher_id: id,
            type_hash: ty.layout_hash,
            origin,
            ..SampleHeader::default()
        };
        let route = LocalRoute::new(
            node.inner.ctx.inner.local.topic(&topic),
            inline_bytes,
            qos.overflow,
            template,
        );
        // small fixed-size samples reach other processes through a ring of their own,
        // unless the topic keeps history (late joiners find it in iceoryx2's)
        let ring = match inline_bytes.filter(|_| !keeps_history) {
            Some(bytes) => {
                let path = shm_ring::path(&node.inner.ctx.inner.config.file_prefix(), id);
                let back_pressure = matches!(qos.overflow, Overflow::BackPressure { .. });
                // as many slots as the topic's largest queue: every subscriber's own
                // depth fits, and each reader keeps to its depth (see `ring.rs`)
                let slots = service.static_config().subscriber_max_buffer_size();
                let (ring, file) = shm_ring::create(&path, slots, bytes, back_pressure, template)
                    .map_err(|e| TopicError::Shm {
                    topic: topic.clone(),
                    reason: format!("cannot create the topic's ring: {e}"),
                })?;
                Some(SharedRing {
                    writer: RingWriter::new(Arc::new(ring)),
                    _file: file,
                    served: Cell::new(None),
                })
            }
            None => None,
        };
        slot.ring_always();
        let ctx = &node.inner.ctx.inner;
        let lockstep = match &ctx.lockstep {
            Some(ls) => Some(ls.topic(&topic).map_err(|e| TopicError::Shm {
                topic: topic.clone(),
                reason: e.to_string(),
            })?),
            None => None,
        };
        let sim = ctx.clock.is_sim().then(|| ctx.clock.clone());
        Ok(Sender {
            port,
            service,
            slot,
            node,
            topic,
            qos,
            ty,
            id,
            origin,
            seq: Cell::new(0),
            loans: LoanCount::default(),
            route,
            keeps_history,
            ring,
            subscribers_seen: Cell::new(None),
            unconfirmed: Cell::new(false),
            reclaim_due: Cell::new(false),
            wall: WallClock::default(),
            sim,
            lockstep,
            deadline,
            net,
        })
    }
}

/// A publisher's shared-memory ring and its file (unlinked when the publisher goes).
struct SharedRing {
    writer: RingWriter,
    _file: shm_ring::RingFile,
    /// The subscriber count its entries were last kept for.
    served: Cell<Option<usize>>,
}

/// Publishes messages of type `M` on one topic.
pub struct Publisher<M: Message> {
    tx: Sender,
    _m: PhantomData<M>,
}

/// The untyped sending end shared by [`Publisher`] and [`crate::RawPublisher`]: every
/// route, QoS and wake-up; the message type is known only by its [`TypeInfo`].
pub(crate) struct Sender {
    // field order is drop order: the port goes before its service and node
    port: IoxPublisher,
    service: TopicService,
    /// The topic's doorbell slot.
    slot: SlotRef,
    node: Node,
    topic: String,
    qos: Qos,
    ty: TypeInfo,
    id: u64,
    origin: u64,
    seq: Cell<u64>,
    /// Samples on loan now, by any route: `Qos::max_loans` is enforced on this count.
    loans: LoanCount,
    route: LocalRoute,
    /// The topic keeps history (fixed by its creator): every sample goes through shared
    /// memory, where late joiners find it.
    keeps_history: bool,
    /// The ring that carries this publisher's samples to other contexts of the host, for
    /// small fixed-size messages without history (else iceoryx2 carries them).
    ring: Option<SharedRing>,
    /// (doorbell sequence, subscriber count) at the last count.
    subscribers_seen: Cell<Option<(u32, usize)>>,
    /// Samples went through shared memory since subscribers last confirmed they attached
    /// (see [`Sender::linger`]).
    unconfirmed: Cell<bool>,
    wall: WallClock,
    /// The simulation clock that stamps samples (none: the wall clock does).
    sim: Option<crate::time::Clock>,
    /// The topic's receiver count in the domain's deterministic replay.
    lockstep: Option<crate::time::lockstep::TopicCount>,
    /// End of the publish in progress under back-pressure (monotonic ns): every wait for
    /// room, local or in shared memory, ends there.
    deadline: Arc<AtomicU64>,
    /// The network side (the network plane is on).
    net: Option<Box<dyn RemotePublisher>>,
    /// A publish failed for back-pressure: the subscriber that held it back may have
    /// died, so the next publish reclaims dead nodes first, inside its own timeout (done
    /// at the failure itself, the reclaim made that publish return late).
    reclaim_due: Cell<bool>,
}

/// How long a back-pressure wait for a shared-memory queue yields before it sleeps.
const BACK_PRESSURE_SPIN: Duration = Duration::from_millis(1);
/// The longest sleep of a back-pressure wait between two looks at the full queue.
const BACK_PRESSURE_NAP: Duration = Duration::from_micros(500);

/// One step of iceoryx2's wait for room in a full subscriber queue (its back-pressure
/// handler): `None` once the publish's deadline `end_ns` has come (the publish fails),
/// else how long to sleep before the next look: nothing for the first
/// [`BACK_PRESSURE_SPIN`] (iceoryx2 yields between looks), then naps of at most
/// [`BACK_PRESSURE_NAP`] that never pass the deadline. iceoryx2's own wait yields only for
/// its first 10,000 looks and then sleeps 10 ms at a time, which made a publish return up
/// to 10 ms past its timeout; with the naps it stays in its yielding phase for any timeout
/// under 5 s, so a publish returns within a scheduling quantum of its deadline.
fn back_pressure_nap(elapsed: Duration, now_ns: u64, end_ns: u64) -> Option<Duration> {
    if now_ns >= end_ns {
        return None;
    }
    if elapsed < BACK_PRESSURE_SPIN {
        return Some(Duration::ZERO);
    }
    Some(Duration::from_nanos(end_ns - now_ns).min(BACK_PRESSURE_NAP))
}

impl<M: Message> Publisher<M> {
    /// The topic name.
    pub fn topic(&self) -> &str {
        &self.tx.topic
    }

    /// The node this publisher belongs to.
    pub fn node(&self) -> &Node {
        &self.tx.node
    }

    /// The QoS this publisher was created with.
    pub fn qos(&self) -> &Qos {
        &self.tx.qos
    }

    /// This publisher's id as written in every sample header.
    pub fn id(&self) -> u64 {
        self.tx.id
    }

    /// Number of subscribers connected to the topic right now, on this host and (with
    /// the network plane on) on others.
    pub fn subscriber_count(&self) -> usize {
        self.tx.subscriber_count()
    }

    /// Waits until at least `n` subscribers are connected, at most `timeout`, and gives
    /// each a chance to attach to this publisher (subscribers that are receiving confirm
    /// within microseconds; one that is busy elsewhere gets up to [`ATTACH_GRACE`]).
    /// Returns whether `n` subscribers are connected.
    pub fn wait_for_subscribers(&self, n: usize, timeout: Duration) -> bool {
        self.tx.wait_for_subscribers(n, timeout)
    }

    /// Connects subscribers that joined since the last send and hands them the history.
    /// Sending does this too; call it from idle loops of latched publishers.
    pub fn update_connections(&self) {
        self.tx.update_connections()
    }

    /// Waits up to `timeout` until every subscriber on this host (outside this context)
    /// has attached to this publisher, so that what it sent survives its departure: the
    /// shared-memory layer drops a connection's queue when its sender leaves before the
    /// receiver opened it. A short-lived publisher (`nerve topic pub --once`) calls this
    /// before it goes; a reliable one does it on drop. Returns whether all attached.
    pub fn settle(&self, timeout: Duration) -> bool {
        self.tx.settle(Instant::now() + timeout)
    }

    /// The topic's doorbell slot, rung by every new subscriber (for executors' wait sets).
    pub(crate) fn wake_slot(&self) -> &SlotRef {
        &self.tx.slot
    }

    fn make_loan(&self, buf: LoanBuf, elems: usize, len: usize) -> Loan<'_, M> {
        Loan {
            buf,
            elems,
            len,
            publisher: &self.tx,
            _m: PhantomData,
        }
    }
}

impl Sender {
    /// The topic name.
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    /// The type this sender publishes.
    pub(crate) fn type_info(&self) -> &TypeInfo {
        &self.ty
    }

    /// This sender's publisher id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Number of subscribers connected to the topic right now, on this host and (with
    /// the network plane on) on others.
    pub(crate) fn subscriber_count(&self) -> usize {
        self.host_subscribers() + self.remote_subscribers()
    }

    /// Subscribers on this host.
    fn host_subscribers(&self) -> usize {
        self.service.dynamic_config().number_of_subscribers()
    }

    /// Subscribers on other hosts.
    #[inline]
    fn remote_subscribers(&self) -> usize {
        self.net.as_ref().map_or(0, |n| n.remote_subscribers())
    }

    /// See [`Publisher::wait_for_subscribers`].
    pub(crate) fn wait_for_subscribers(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.subscriber_count() < n {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.subscribers_seen.set(None);
        let _ = self.port.update_connections();
        if let Some(r) = &self.ring {
            r.served.set(None);
        }
        self.cached_subscriber_count();
        let acks = self.slot.acks();
        self.slot.ring_always();
        let grace = (Instant::now() + ATTACH_GRACE).min(deadline);
        let remote = self.remote_subscribers();
        self.await_acks(
            acks,
            n.saturating_sub(remote).min(self.host_subscribers()),
            grace,
        );
        true
    }

    /// Waits until `n` confirmations arrived since `acks` or `until` passes; true if they
    /// did.
    fn await_acks(&self, acks: u32, n: usize, until: Instant) -> bool {
        loop {
            if (self.slot.acks().wrapping_sub(acks) as usize) >= n {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// A reliable publisher about to go: samples it sent to a subscriber in another
    /// context that has not attached yet would go with it (the shared-memory layer drops
    /// a connection's queue when its sender leaves before the receiver opened it). So it
    /// rings and waits, at most its back-pressure timeout, until every such subscriber has
    /// confirmed; subscribers that are receiving confirm within microseconds.
    fn linger(&self) {
        if let Overflow::BackPressure { timeout } = self.qos.overflow {
            self.settle(Instant::now() + timeout);
        }
    }

    /// See [`Publisher::settle`].
    pub(crate) fn settle(&self, until: Instant) -> bool {
        if !self.unconfirmed.get() {
            return true;
        }
        let remote = self
            .host_subscribers()
            .saturating_sub(self.route.subscribers());
        if remote == 0 {
            return true;
        }
        let acks = self.slot.acks();
        self.slot.ring_always();
        let done = self.await_acks(acks, remote, until);
        self.unconfirmed.set(!done);
        done
    }

    /// See [`Publisher::update_connections`].
    pub(crate) fn update_connections(&self) {
        let _ = self.port.update_connections();
    }

    /// Whether a sample must also go through shared memory: a subscriber outside this
    /// context exists (every local subscriber also holds a shared-memory port), or the
    /// topic keeps history for late joiners.
    #[inline]
    fn needs_shm(&self, local_subscribers: usize) -> bool {
        self.keeps_history || self.cached_subscriber_count() > local_subscribers
    }

    /// [`Publisher::subscriber_count`], read again only when the topic's doorbell rang
    /// since (every new subscriber rings it; reading the count is not free).
    #[inline]
    fn cached_subscriber_count(&self) -> usize {
        let seq = self.slot.seq();
        match self.subscribers_seen.get() {
            Some((seen, n)) if seen == seq => n,
            _ => {
                let n = self.host_subscribers();
                self.subscribers_seen.set(Some((seq, n)));
                if self
                    .ring
                    .as_ref()
                    .is_some_and(|r| r.served.get() != Some(n))
                {
                    self.serve_ring_readers(n);
                }
                n
            }
        }
    }

    /// Keeps an entry of the shared ring for every subscriber of another context on this
    /// host (reserved where the subscriber has not found the ring yet), so none misses
    /// what is sent from now on; `n` is the subscriber count it was done for.
    fn serve_ring_readers(&self, n: usize) {
        let Some(ring) = &self.ring else { return };
        let local = self.route.local_ids();
        let mut ids = Vec::new();
        self.service.dynamic_config().list_subscribers(|d| {
            let v = d.subscriber_id.value();
            let id = (v as u64) ^ ((v >> 64) as u64);
            if !local.contains(&id) {
                // the subscriber's queue depth: its entry holds no more than that
                ids.push((id, d.buffer_size as u64));
            }
            CallbackProgression::Continue
        });
        // a busy claim lock leaves `served` as it was: done again at the next publish
        if ring
            .writer
            .ring()
            .reserve_for(&ids, ring.writer.head())
            .is_some()
        {
            ring.served.set(Some(n));
        }
    }

    fn check_len(&self, len: usize) -> Result<(), LoanError> {
        if len > self.qos.max_payload {
            return Err(LoanError::PayloadTooLarge {
                topic: self.topic.clone(),
                requested: len,
                max: self.qos.max_payload,
            });
        }
        Ok(())
    }

    /// Loans `len` payload bytes where the sample will travel: a heap buffer if every
    /// subscriber is in this context, shared memory otherwise. At most `Qos::max_loans`
    /// samples are on loan at once whichever route they take, so a program's limit does
    /// not change when a tool subscribes from another process.
    /// The head (the first `ty.head_size` bytes) is zeroed.
    pub(crate) fn loan_bytes(&self, len: usize) -> Result<LoanBuf, LoanError> {
        self.check_len(len)?;
        let ticket =
            self.loans
                .take(self.qos.max_loans)
                .ok_or_else(|| LoanError::TooManyLoans {
                    topic: self.topic.clone(),
                    max: self.qos.max_loans,
                })?;
        let mut buf = if self.ring.is_none() && self.needs_shm(self.route.subscribers()) {
            LoanBuf::Shm(self.loan_shm(len)?, ticket)
        } else {
            LoanBuf::Local(self.route.loan(shm::words_for(len)), ticket)
        };
        let head = self.ty.head_size.min(len);
        shm::words_as_bytes_mut(buf.words_mut())[..head].fill(0);
        Ok(buf)
    }

    fn loan_shm(&self, len: usize) -> Result<IoxSampleMut, LoanError> {
        let words = shm::words_for(len);
        let mut attempt = self.port.loan_slice_uninit(words);
        if matches!(attempt, Err(IoxLoanError::OutOfMemory)) {
            // Samples may be held by a subscriber that died: reclaim its resources and
            // reconnect, then try once more.
            self.node.inner.iox.try_cleanup_dead_nodes();
            let _ = self.port.update_connections();
            attempt = self.port.loan_slice_uninit(words);
        }
        let uninit = attempt.map_err(|e| match e {
            IoxLoanError::OutOfMemory => LoanError::PoolExhausted {
                topic: self.topic.clone(),
            },
            IoxLoanError::ExceedsMaxLoans => LoanError::TooManyLoans {
                topic: self.topic.clone(),
                max: self.qos.max_loans,
            },
            e => LoanError::Shm {
                topic: self.topic.clone(),
                reason: format!("{e:?}"),
            },
        })?;
        // SAFETY: the payload is shared memory mapped from a file: every byte is
        // initialized (zero-filled by the kernel, later overwritten by earlier samples),
        // and u64 has no invalid values.
        Ok(unsafe { uninit.assume_init() })
    }

    /// The next sample's header (sequence number, stamps) and, under back-pressure, the
    /// publish's deadline (monotonic ns; 0 under drop-oldest).
    #[inline]
    fn stamp(&self, len: usize) -> (SampleHeader, u64) {
        let seq = self.seq.get() + 1;
        self.seq.set(seq);
        // under a replay, every handling this sample will cause is owed before anyone can
        // see it (see time::lockstep)
        if let Some(ls) = &self.lockstep {
            ls.sending();
        }
        let mono = stamp_ns();
        let header = SampleHeader {
            seq,
            publish_mono_ns: mono,
            publish_wall_ns: match &self.sim {
                Some(clock) => clock.now_ns(),
                None => self.wall.at(mono),
            },
            publisher_id: self.id,
            payload_len: len as u64,
            type_hash: self.ty.layout_hash,
            origin: self.origin,
        };
        let deadline = match self.qos.overflow {
            Overflow::BackPressure { timeout } => {
                let end = mono.saturating_add(timeout.as_nanos().min(u64::MAX as u128) as u64);
                // SYNC: read by the back-pressure handler on this same thread.
                self.deadline.store(end, Ordering::Relaxed);
                end
            }
            Overflow::DropOldest => 0,
        };
        if self.reclaim_due.take() {
            self.reclaim_dead_subscribers();
        }
        (header, deadline)
    }

    /// Sends a fixed-size sample straight into the local subscribers' rings when that is
    /// its only route (no subscriber outside this context, no history, no other host):
    /// no loan and no buffer. `None` if it must take the general path.
    #[inline]
    pub(crate) fn try_publish_inline(&self, payload: &[u8]) -> Option<Result<(), PublishError>> {
        if !self.route.is_inline() || self.net.as_ref().is_some_and(|n| n.wants_frames()) {
            return None;
        }
        let local = self.route.subscribers();
        let shared = self.needs_shm(local);
        if (shared && self.ring.is_none()) || payload.len() > self.qos.max_payload {
            return None;
        }
        let (header, deadline) = self.stamp(payload.len());
        crate::trace::published(&self.topic, &header);
        let mut result = Ok(());
        if shared {
            result = self.send_ring(&header, payload, deadline, local);
        }
        if local > 0 {
            result = result.and(self.deliver_inline(&header, payload, deadline));
        }
        self.slot.ring();
        Some(result)
    }

    fn deliver_inline(
        &self,
        header: &SampleHeader,
        payload: &[u8],
        deadline: u64,
    ) -> Result<(), PublishError> {
        self.route
            .deliver_inline(header, payload, deadline)
            .map_err(|()| PublishError::BackPressureTimeout {
                topic: self.topic.clone(),
                timeout: self.timeout(),
            })
    }

    /// Writes a sample into this publisher's shared-memory ring (subscribers of other
    /// contexts read it there). Under back-pressure, waits for room up to `deadline`, and
    /// a subscriber that has not found the ring yet makes the publish
    /// [`PublishError::Undelivered`], never a silent loss.
    fn send_ring(
        &self,
        header: &SampleHeader,
        payload: &[u8],
        deadline: u64,
        local: usize,
    ) -> Result<(), PublishError> {
        let Some(ring) = &self.ring else {
            return Ok(());
        };
        let head = SlotHead {
            seq: header.seq,
            mono_ns: header.publish_mono_ns,
            wall_ns: header.publish_wall_ns,
            len: header.payload_len,
        };
        self.unconfirmed.set(true);
        if !ring.writer.push(head, payload, deadline) {
            // a subscriber reserved for may have died before it found the ring, or an
            // entry may be for a subscriber that reads in this context: reclaim dead nodes,
            // keep entries for the living outside it only, and look once more (a publish
            // that found no room in time returns a reclaim's length late)
            self.reclaim_dead_subscribers();
            if ring.writer.push(head, payload, deadline) {
                return Ok(());
            }
            return Err(PublishError::BackPressureTimeout {
                topic: self.topic.clone(),
                timeout: self.timeout(),
            });
        }
        if matches!(self.qos.overflow, Overflow::BackPressure { .. }) {
            let expected = self.cached_subscriber_count().saturating_sub(local);
            let readers = ring.writer.ring().active_readers();
            if readers < expected {
                return Err(PublishError::Undelivered {
                    topic: self.topic.clone(),
                    delivered: readers + local,
                    subscribers: expected + local,
                });
            }
        }
        Ok(())
    }

    /// Stamps the header and sends the sample by every route that has subscribers.
    pub(crate) fn send_loan(&self, buf: LoanBuf, len: usize) -> Result<(), PublishError> {
        let (header, deadline) = self.stamp(len);
        crate::trace::published(&self.topic, &header);
        // Wake a sleeping subscriber now, before the sample is handed over: waking a
        // thread takes tens of µs here (the scheduler, a virtual CPU's exit), handing a
        // sample over a few, so the two overlap instead of adding up. This early ring
        // only hurries the wake-up: a waiter it wakes before the sample is queued looks,
        // finds nothing, arms again and is woken by the ring after the hand-over (below),
        // which alone carries the ordering the handshake needs (see `Slot::ring`).
        self.slot.ring();
        let local = self.route.subscribers();
        let words = shm::words_for(len);
        // shared memory first: a local subscriber that finds the local copy then also
        // finds the note that its shared-memory queue holds one to drain. The network
        // side is asked only while a subscriber on another host exists or the topic keeps
        // history for late joiners there.
        let via_shm = matches!(buf, LoanBuf::Shm(..)) || self.needs_shm(local);
        let net = self.net.as_ref().filter(|n| n.wants_frames());
        let (shared, heap, sent_net) = match buf {
            // the loan counts (its ticket lives) until it is handed over
            LoanBuf::Local(b, _ticket) => {
                // written: from here on the buffer is only read
                let b = b.freeze();
                let shared = if via_shm && self.ring.is_some() {
                    let payload = &shm::words_as_bytes(&b)[..len];
                    self.send_ring(&header, payload, deadline, local)
                } else if via_shm {
                    // a remote subscriber appeared since the loan: it gets a copy
                    self.loan_shm(len)
                        .map_err(PublishError::from)
                        .and_then(|mut s| {
                            s.payload_mut().copy_from_slice(&b[..words]);
                            self.send_shm(s, header)
                        })
                } else {
                    Ok(())
                };
                // the network reads the heap buffer in place
                let sent_net = net.map_or(Ok(()), |n| n.publish_shared(&header, b.clone(), len));
                (shared, Some(b), sent_net)
            }
            LoanBuf::Shm(s, _ticket) => {
                // the network copies a shared-memory sample before it is handed over
                let sent_net = net.map_or(Ok(()), |n| {
                    n.publish_copy(&header, &shm::words_as_bytes(s.payload())[..len])
                });
                // local subscribers read a copy on the heap; remote ones the original
                let copy = (local > 0).then(|| {
                    let mut b = self.route.loan(words);
                    b.words_mut()[..words].copy_from_slice(s.payload());
                    b.freeze()
                });
                (self.send_shm(s, header), copy, sent_net)
            }
        };
        if via_shm && local > 0 && self.ring.is_none() {
            self.route.sent_through_shm();
        }
        let result = match heap {
            Some(b) => shared.and(self.deliver_local(header, b, deadline)),
            None => shared,
        };
        self.slot.ring();
        result.and(sent_net.map_err(PublishError::from))
    }

    fn deliver_local(
        &self,
        header: SampleHeader,
        buf: Buf,
        deadline_ns: u64,
    ) -> Result<(), PublishError> {
        self.route
            .deliver(header, buf, self.qos.overflow, deadline_ns)
            .map_err(|()| PublishError::BackPressureTimeout {
                topic: self.topic.clone(),
                timeout: self.timeout(),
            })
    }

    /// Reclaims what dead subscribers left (their queues stop holding publishes back)
    /// and keeps ring entries for the living only; a publish does it first, inside its
    /// own timeout, after one that failed for back-pressure.
    #[cold]
    fn reclaim_dead_subscribers(&self) {
        self.node.inner.iox.try_cleanup_dead_nodes();
        if self.ring.is_some() {
            self.serve_ring_readers(self.host_subscribers());
        }
    }

    /// The back-pressure timeout (zero under drop-oldest).
    fn timeout(&self) -> Duration {
        match self.qos.overflow {
            Overflow::BackPressure { timeout } => timeout,
            Overflow::DropOldest => Duration::ZERO,
        }
    }

    fn send_shm(&self, mut sample: IoxSampleMut, header: SampleHeader) -> Result<(), PublishError> {
        *sample.user_header_mut() = header;
        let back_pressure = matches!(self.qos.overflow, Overflow::BackPressure { .. });
        let before = if back_pressure {
            self.host_subscribers()
        } else {
            0
        };
        self.unconfirmed.set(true);
        match sample.send() {
            Ok(n) if back_pressure => {
                // a subscriber that has not attached yet and whose queue is full is skipped
                // by the shared-memory layer: under back-pressure that is an error, never a
                // silent loss (subscribers that joined or left meanwhile do not count)
                let expected = before.min(self.host_subscribers());
                if n < expected {
                    Err(PublishError::Undelivered {
                        topic: self.topic.clone(),
                        delivered: n,
                        subscribers: expected,
                    })
                } else {
                    Ok(())
                }
            }
            Ok(_) => Ok(()),
            Err(SendError::UnableToDeliver) => {
                // the subscriber that held it back may have died: the next publish
                // reclaims dead nodes before it sends (see `reclaim_due`)
                self.reclaim_due.set(true);
                Err(PublishError::BackPressureTimeout {
                    topic: self.topic.clone(),
                    timeout: self.timeout(),
                })
            }
            Err(e) => Err(PublishError::Shm {
                topic: self.topic.clone(),
                reason: format!("send failed: {e:?}"),
            }),
        }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        self.linger();
    }
}

/// Where a loaned sample lives until it is sent, with its place in the publisher's
/// [`LoanCount`].
pub(crate) enum LoanBuf {
    /// In shared memory (some subscriber is outside this context).
    Shm(IoxSampleMut, LoanTicket),
    /// On the heap (every subscriber is in this context).
    Local(LocalLoan, LoanTicket),
}

impl LoanBuf {
    pub(crate) fn words(&self) -> &[u64] {
        match self {
            LoanBuf::Shm(s, _) => s.payload(),
            LoanBuf::Local(b, _) => b.words(),
        }
    }

    pub(crate) fn words_mut(&mut self) -> &mut [u64] {
        match self {
            LoanBuf::Shm(s, _) => s.payload_mut(),
            LoanBuf::Local(b, _) => b.words_mut(),
        }
    }
}

/// The samples a publisher has on loan, on the heap and in shared memory alike (a
/// sender and its loans live on one thread).
#[derive(Default)]
struct LoanCount(Rc<Cell<usize>>);

impl LoanCount {
    /// A ticket for one more loan, or `None` when `max` are on loan already.
    fn take(&self, max: usize) -> Option<LoanTicket> {
        let held = self.0.get();
        (held < max).then(|| {
            self.0.set(held + 1);
            LoanTicket(self.0.clone())
        })
    }
}

/// One sample on loan: counted until it is sent or dropped.
pub(crate) struct LoanTicket(Rc<Cell<usize>>);

impl Drop for LoanTicket {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

impl<M: Message<Elem = NoElem>> Publisher<M> {
    /// Loans a zeroed sample in shared memory; write it in place, then [`Loan::send`].
    pub fn loan(&self) -> Result<Loan<'_, M>, LoanError> {
        let len = core::mem::size_of::<M>();
        let s = self.tx.loan_bytes(len.max(1))?;
        Ok(self.make_loan(s, 0, len))
    }

    /// Copies `msg` into a loaned sample and sends it (small messages whose subscribers
    /// are all in this context go straight into their rings, without a loan).
    pub fn publish(&self, msg: &M) -> Result<(), PublishError> {
        if let Some(sent) = self.tx.try_publish_inline(crate::message::as_bytes(msg)) {
            return sent;
        }
        let len = core::mem::size_of::<M>();
        let mut b = self.tx.loan_bytes(len.max(1))?;
        *crate::message::view_mut::<M>(b.words_mut(), 0).0 = *msg;
        self.tx.send_loan(b, len)
    }
}

impl<M: Message> Publisher<M> {
    /// Loans a sample with room for `len` elements after the head. The head is zeroed;
    /// the elements hold unspecified bytes (an earlier sample's): overwrite them.
    pub fn loan_slice(&self, len: usize) -> Result<Loan<'_, M>, LoanError> {
        let bytes =
            crate::message::slice_bytes::<M>(len).ok_or_else(|| LoanError::PayloadTooLarge {
                topic: self.tx.topic.clone(),
                requested: usize::MAX,
                max: self.tx.qos.max_payload,
            })?;
        let s = self.tx.loan_bytes(bytes.max(1))?;
        Ok(self.make_loan(s, len, bytes))
    }

    /// Copies a head and its elements into a loaned sample and sends it.
    pub fn publish_slice(&self, head: &M, elems: &[M::Elem]) -> Result<(), PublishError> {
        if elems.is_empty() {
            // a fixed-size message (slice types never travel inline)
            if let Some(sent) = self.tx.try_publish_inline(crate::message::as_bytes(head)) {
                return sent;
            }
        }
        let mut loan = self.loan_slice(elems.len())?;
        *loan.head_mut() = *head;
        loan.elems_mut().copy_from_slice(elems);
        loan.send()
    }
}

impl<T: SerdeMessage> Publisher<Serde<T>> {
    /// Encodes `value` with serde into a loaned byte slice and sends it.
    pub fn publish_value(&self, value: &T) -> Result<(), PublishError> {
        let bytes = crate::message::serde_encode(value).map_err(|reason| PublishError::Encode {
            topic: self.tx.topic.clone(),
            reason,
        })?;
        let mut loan = self.loan_slice(bytes.len())?;
        *loan.head_mut() = Serde::with_len(bytes.len());
        loan.elems_mut().copy_from_slice(&bytes);
        loan.send()
    }
}

/// A sample loaned from shared memory: write it in place, then [`send`](Loan::send).
/// Dropping it without sending returns the memory to the pool.
pub struct Loan<'p, M: Message> {
    buf: LoanBuf,
    elems: usize,
    /// Payload bytes in use (head, padding, elements).
    len: usize,
    publisher: &'p Sender,
    _m: PhantomData<M>,
}

impl<M: Message> Loan<'_, M> {
    /// The fixed head of the message.
    pub fn head_mut(&mut self) -> &mut M {
        crate::message::view_mut::<M>(self.buf.words_mut(), 0).0
    }

    /// The elements after the head.
    pub fn elems_mut(&mut self) -> &mut [M::Elem] {
        crate::message::view_mut::<M>(self.buf.words_mut(), self.elems).1
    }

    /// The head and the elements, both writable at once (fill a message in one pass).
    pub fn parts_mut(&mut self) -> (&mut M, &mut [M::Elem]) {
        crate::message::view_mut::<M>(self.buf.words_mut(), self.elems)
    }

    /// The elements after the head, read-only.
    pub fn elems(&self) -> &[M::Elem] {
        crate::message::view::<M>(self.buf.words(), self.elems).1
    }

    /// The elements as raw bytes, for filling large payloads with one copy.
    pub fn elem_bytes_mut(&mut self) -> &mut [u8] {
        let off = elems_offset::<M>();
        &mut shm::words_as_bytes_mut(self.buf.words_mut())[off..self.len]
    }

    /// The whole payload in use (head, padding and elements) as raw bytes: for relays
    /// that copy a received [`crate::Sample::payload_bytes`] as it is.
    pub fn payload_bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut shm::words_as_bytes_mut(self.buf.words_mut())[..len]
    }

    /// Sends the sample to every subscriber.
    pub fn send(self) -> Result<(), PublishError> {
        self.publisher.send_loan(self.buf, self.len)
    }
}

impl<M: Message> Deref for Loan<'_, M> {
    type Target = M;
    fn deref(&self) -> &M {
        crate::message::view::<M>(self.buf.words(), 0).0
    }
}

impl<M: Message> DerefMut for Loan<'_, M> {
    fn deref_mut(&mut self) -> &mut M {
        self.head_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_back_pressure_wait_never_naps_past_its_deadline() {
        let ms = |n: u64| n * 1_000_000;
        // at or past the deadline: the publish fails at once
        assert_eq!(
            back_pressure_nap(Duration::from_secs(1), ms(200), ms(200)),
            None
        );
        assert_eq!(back_pressure_nap(Duration::ZERO, ms(201), ms(200)), None);
        // the first millisecond yields (no sleep)
        assert_eq!(
            back_pressure_nap(Duration::from_micros(10), ms(1), ms(200)),
            Some(Duration::ZERO)
        );
        // then naps, never longer than BACK_PRESSURE_NAP nor past the deadline
        assert_eq!(
            back_pressure_nap(Duration::from_millis(5), ms(5), ms(200)),
            Some(BACK_PRESSURE_NAP)
        );
        assert_eq!(
            back_pressure_nap(Duration::from_millis(199), ms(200) - 40_000, ms(200)),
            Some(Duration::from_micros(40))
        );
        // a 5 s timeout stays within iceoryx2's 10,000 yielding looks (no 10 ms sleeps)
        let looks = Duration::from_secs(5).as_nanos() / BACK_PRESSURE_NAP.as_nanos();
        assert!(looks <= 10_000, "{looks} looks");
    }
}
