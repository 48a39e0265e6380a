//! Typed publishers: loan a sample in shared memory, write it in place, send it.

use crate::context::Node;
use crate::error::{LoanError, PublishError, TopicError};
use crate::message::header::SampleHeader;
use crate::message::schema::Schema;
use crate::message::{elems_offset, Message, NoElem, Serde, SerdeMessage, TypeInfo};
use crate::qos::{Overflow, Qos};
use crate::sys::clock::{mono_ns, stamp_ns, WallClock};
use crate::transport::doorbell::SlotRef;
use crate::transport::route::{back_pressure_nap, LoanBuf, LoanCount, SendRoute};
use crate::transport::shm;
use iceoryx2::port::BackpressureAction;
use iceoryx2::port::BackpressureInfo;
use iceoryx2::prelude::{AllocationStrategy, BackpressureStrategy};
use iceoryx2::service::port_factory::PortFactory as _;
use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::transport::route::ATTACH_GRACE;

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
        let id = (id as u64) ^ ((id >> 64) as u64);
        let template = SampleHeader {
            publisher_id: id,
            type_hash: ty.layout_hash,
            origin,
            ..SampleHeader::default()
        };
        let route = SendRoute::new(
            port,
            service,
            slot,
            node.clone(),
            topic.clone(),
            qos,
            &ty,
            template,
            deadline,
            net,
        )?;
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
            route,
            ty,
            id,
            origin,
            seq: Cell::new(0),
            loans: LoanCount::default(),
            wall: WallClock::default(),
            sim,
            lockstep,
        })
    }
}

/// Publishes messages of type `M` on one topic.
pub struct Publisher<M: Message> {
    tx: Sender,
    _m: PhantomData<M>,
}

/// The untyped sending end shared by [`Publisher`] and [`crate::RawPublisher`]: stamps
/// samples and counts loans; its [`SendRoute`] holds every route, QoS and wake-up. The
/// message type is known only by its [`TypeInfo`].
pub(crate) struct Sender {
    route: SendRoute,
    ty: TypeInfo,
    id: u64,
    origin: u64,
    seq: Cell<u64>,
    /// Samples on loan now, by any route: `Qos::max_loans` is enforced on this count.
    loans: LoanCount,
    wall: WallClock,
    /// The simulation clock that stamps samples (none: the wall clock does).
    sim: Option<crate::time::Clock>,
    /// The topic's receiver count in the domain's deterministic replay.
    lockstep: Option<crate::time::lockstep::TopicCount>,
}

impl<M: Message> Publisher<M> {
    /// The topic name.
    pub fn topic(&self) -> &str {
        self.tx.topic()
    }

    /// The node this publisher belongs to.
    pub fn node(&self) -> &Node {
        self.tx.route.node()
    }

    /// The QoS this publisher was created with.
    pub fn qos(&self) -> &Qos {
        self.tx.route.qos()
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
        self.tx.route.slot()
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
    #[inline]
    pub(crate) fn topic(&self) -> &str {
        self.route.topic()
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
        self.route.subscriber_count()
    }

    /// See [`Publisher::wait_for_subscribers`].
    pub(crate) fn wait_for_subscribers(&self, n: usize, timeout: Duration) -> bool {
        self.route.wait_for_subscribers(n, timeout)
    }

    /// See [`Publisher::settle`].
    pub(crate) fn settle(&self, until: Instant) -> bool {
        self.route.settle(until)
    }

    /// See [`Publisher::update_connections`].
    pub(crate) fn update_connections(&self) {
        self.route.update_connections()
    }

    fn check_len(&self, len: usize) -> Result<(), LoanError> {
        let max = self.route.qos().max_payload;
        if len > max {
            return Err(LoanError::PayloadTooLarge {
                topic: self.topic().to_string(),
                requested: len,
                max,
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
        let max = self.route.qos().max_loans;
        let ticket = self
            .loans
            .take(max)
            .ok_or_else(|| LoanError::TooManyLoans {
                topic: self.topic().to_string(),
                max,
            })?;
        let mut buf = self.route.loan(len, ticket)?;
        let head = self.ty.head_size.min(len);
        shm::words_as_bytes_mut(buf.words_mut())[..head].fill(0);
        Ok(buf)
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
        let deadline = self.route.begin(mono);
        (header, deadline)
    }

    /// Sends a fixed-size sample straight into the local subscribers' rings (and this
    /// publisher's shared-memory ring) when those are its only routes (see
    /// [`SendRoute::inline_route`]): no loan and no buffer. `None` if it must take the
    /// general path.
    #[inline]
    pub(crate) fn try_publish_inline(&self, payload: &[u8]) -> Option<Result<(), PublishError>> {
        let routes = self.route.inline_route(payload.len())?;
        let (header, deadline) = self.stamp(payload.len());
        crate::trace::published(self.topic(), &header);
        Some(self.route.send_inline(&header, payload, deadline, routes))
    }

    /// Stamps the header and sends the sample by every route that has subscribers.
    pub(crate) fn send_loan(&self, buf: LoanBuf, len: usize) -> Result<(), PublishError> {
        let (header, deadline) = self.stamp(len);
        crate::trace::published(self.topic(), &header);
        self.route.send(buf, header, deadline, len)
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
                topic: self.tx.topic().to_string(),
                requested: usize::MAX,
                max: self.tx.route.qos().max_payload,
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
            topic: self.tx.topic().to_string(),
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
