//! Per-sample routing: which delivery paths a sample takes, and in which order a receive
//! looks at its sources. The one home of route selection (issue 42): the topic layer's
//! `Sender` and `Receiver` own a [`SendRoute`] and a [`RecvRoute`] and call them.
//!
//! A publisher's sample goes to the subscribers of its context through the same-process
//! route ([`super::intra`]: inline rings or the by-reference queue), to subscribers of
//! other contexts on this host through its shared-memory ring ([`super::shm_ring`], small
//! fixed-size types without history) or iceoryx2 ([`super::shm`]), and to other hosts
//! through the network plane ([`super::remote`]). The early doorbell ring before the
//! hand-over and the one after it, the back-pressure deadline shared by every path and the
//! mapping of each path's failure to a [`PublishError`] live here with the hand-over.
//!
//! A receive looks at this host first (the network first on every `FAIRNESS`th receive):
//! the local queue and inline rings before shared memory, except while shared memory may
//! hold history from before the subscriber joined and on every `FAIRNESS`th receive; the
//! shared-memory rings of other contexts' publishers or iceoryx2 only while a publisher
//! outside this context may exist (or once after a ring). It never delivers a sample twice:
//! shared-memory copies of this context's samples delivered in-process are skipped by
//! origin and stamp, history the network hands over twice by sequence number.
//! See docs/design.md, "Same-process fast path" and "Small messages across processes".

use crate::context::Node;
use crate::error::{LoanError, PublishError, RecvError, TopicError};
use crate::message::header::SampleHeader;
use crate::message::TypeInfo;
use crate::qos::{Overflow, Qos};
use crate::transport::doorbell::{Slot, SlotRef};
use crate::transport::intra::{
    Buf, LocalLoan, LocalQueue, LocalRoute, LocalSample, LocalTopic, RingReader, INLINE_MAX,
};
use crate::transport::remote::{RemotePublisher, RemoteSubscriber};
use crate::transport::ring::{RingWriter, SlotHead};
use crate::transport::shm::{
    self, IoxPublisher, IoxSample, IoxSampleMut, IoxSubscriber, TopicService,
};
use crate::transport::shm_ring::{self, OpenError};
use crate::transport::wait::Predictor;
use iceoryx2::port::update_connections::UpdateConnections;
use iceoryx2::port::{LoanError as IoxLoanError, SendError};
use iceoryx2::prelude::CallbackProgression;
use iceoryx2::service::port_factory::PortFactory as _;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest time [`crate::Publisher::wait_for_subscribers`] waits for subscribers to attach.
pub const ATTACH_GRACE: Duration = Duration::from_millis(200);

/// A publisher's shared-memory ring and its file (unlinked when the publisher goes).
struct SharedRing {
    writer: RingWriter,
    _file: shm_ring::RingFile,
    /// The subscriber count its entries were last kept for.
    served: Cell<Option<usize>>,
}

/// A publisher's delivery paths and what it knows of its subscribers: picks the paths
/// of every sample and hands it over on each (see the module docs).
pub(crate) struct SendRoute {
    // field order is drop order: the port goes before its service and node
    port: IoxPublisher,
    service: TopicService,
    /// The topic's doorbell slot.
    slot: SlotRef,
    node: Node,
    topic: String,
    qos: Qos,
    /// The same-process route (subscribers of this context).
    local: LocalRoute,
    /// The topic keeps history (fixed by its creator): every sample goes through shared
    /// memory, where late joiners find it.
    keeps_history: bool,
    /// The ring that carries this publisher's samples to other contexts of the host, for
    /// small fixed-size messages without history (else iceoryx2 carries them).
    ring: Option<SharedRing>,
    /// (doorbell sequence, subscriber count) at the last count.
    subscribers_seen: Cell<Option<(u32, usize)>>,
    /// Samples went through shared memory since subscribers last confirmed they attached
    /// (see [`SendRoute::linger`]).
    unconfirmed: Cell<bool>,
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
pub(crate) fn back_pressure_nap(elapsed: Duration, now_ns: u64, end_ns: u64) -> Option<Duration> {
    if now_ns >= end_ns {
        return None;
    }
    if elapsed < BACK_PRESSURE_SPIN {
        return Some(Duration::ZERO);
    }
    Some(Duration::from_nanos(end_ns - now_ns).min(BACK_PRESSURE_NAP))
}

impl SendRoute {
    /// The routes of a new publisher (`template`: its header fields that never change):
    /// the same-process route, and for a small fixed-size type without history its
    /// shared-memory ring; then rings the doorbell (subscribers count publishers again).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        port: IoxPublisher,
        service: TopicService,
        slot: SlotRef,
        node: Node,
        topic: String,
        qos: Qos,
        ty: &TypeInfo,
        template: SampleHeader,
        deadline: Arc<AtomicU64>,
        net: Option<Box<dyn RemotePublisher>>,
    ) -> Result<SendRoute, TopicError> {
        let id = template.publisher_id;
        let keeps_history = service.static_config().history_size() > 0;

        let inline_bytes =
            (!ty.is_slice() && ty.head_size <= shm_ring::INLINE_MAX).then_some(ty.head_size);
        let local = LocalRoute::new(
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
        Ok(SendRoute {
            port,
            service,
            slot,
            node,
            topic,
            qos,
            local,
            keeps_history,
            ring,
            subscribers_seen: Cell::new(None),
            unconfirmed: Cell::new(false),
            deadline,
            net,
            reclaim_due: Cell::new(false),
        })
    }

    /// The topic name.
    #[inline]
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    /// The node the publisher belongs to.
    pub(crate) fn node(&self) -> &Node {
        &self.node
    }

    /// The QoS the publisher was created with.
    #[inline]
    pub(crate) fn qos(&self) -> &Qos {
        &self.qos
    }

    /// The topic's doorbell slot.
    pub(crate) fn slot(&self) -> &SlotRef {
        &self.slot
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

    /// See [`crate::Publisher::wait_for_subscribers`].
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

    /// See [`crate::Publisher::settle`].
    pub(crate) fn settle(&self, until: Instant) -> bool {
        if !self.unconfirmed.get() {
            return true;
        }
        let remote = self
            .host_subscribers()
            .saturating_sub(self.local.subscribers());
        if remote == 0 {
            return true;
        }
        let acks = self.slot.acks();
        self.slot.ring_always();
        let done = self.await_acks(acks, remote, until);
        self.unconfirmed.set(!done);
        done
    }

    /// See [`crate::Publisher::update_connections`].
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

    /// [`crate::Publisher::subscriber_count`], read again only when the topic's doorbell rang
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
        let local = self.local.local_ids();
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

    /// A buffer of `len` payload bytes where the sample will travel: on the heap if every
    /// subscriber is in this context (or a shared-memory ring carries it to the others),
    /// in shared memory otherwise; `ticket` is its place in the publisher's loan count.
    #[inline]
    pub(crate) fn loan(&self, len: usize, ticket: LoanTicket) -> Result<LoanBuf, LoanError> {
        Ok(
            if self.ring.is_none() && self.needs_shm(self.local.subscribers()) {
                LoanBuf::Shm(self.loan_shm(len)?, ticket)
            } else {
                LoanBuf::Local(self.local.loan(shm::words_for(len)), ticket)
            },
        )
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

    /// Starts a publish stamped at `mono` (monotonic ns): under back-pressure, sets and
    /// returns its deadline (0 under drop-oldest); after one that failed for
    /// back-pressure, reclaims dead subscribers first.
    #[inline]
    pub(crate) fn begin(&self, mono: u64) -> u64 {
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
        deadline
    }

    /// Whether a fixed-size sample of `len` bytes can go straight into the local
    /// subscribers' rings and this publisher's shared-memory ring (no subscriber outside
    /// this context reached otherwise, no history, no other host): the number of local
    /// subscribers and whether the shared ring must carry it, or `None` if it must take
    /// the general path.
    #[inline]
    pub(crate) fn inline_route(&self, len: usize) -> Option<(usize, bool)> {
        if !self.local.is_inline() || self.net.as_ref().is_some_and(|n| n.wants_frames()) {
            return None;
        }
        let local = self.local.subscribers();
        let shared = self.needs_shm(local);
        if (shared && self.ring.is_none()) || len > self.qos.max_payload {
            return None;
        }
        Some((local, shared))
    }

    /// Sends a stamped fixed-size sample by the routes [`SendRoute::inline_route`] chose:
    /// no loan and no buffer.
    #[inline]
    pub(crate) fn send_inline(
        &self,
        header: &SampleHeader,
        payload: &[u8],
        deadline: u64,
        (local, shared): (usize, bool),
    ) -> Result<(), PublishError> {
        let mut result = Ok(());
        if shared {
            result = self.send_ring(header, payload, deadline, local);
        }
        if local > 0 {
            result = result.and(self.deliver_inline(header, payload, deadline));
        }
        self.slot.ring();
        result
    }

    fn deliver_inline(
        &self,
        header: &SampleHeader,
        payload: &[u8],
        deadline: u64,
    ) -> Result<(), PublishError> {
        self.local
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

    /// Sends a stamped sample (`len` payload bytes in `buf`) by every route that has
    /// subscribers; `deadline` ends every back-pressure wait of this publish.
    #[inline]
    pub(crate) fn send(
        &self,
        buf: LoanBuf,
        header: SampleHeader,
        deadline: u64,
        len: usize,
    ) -> Result<(), PublishError> {
        // Wake a sleeping subscriber now, before the sample is handed over: waking a
        // thread takes tens of µs here (the scheduler, a virtual CPU's exit), handing a
        // sample over a few, so the two overlap instead of adding up. This early ring
        // only hurries the wake-up: a waiter it wakes before the sample is queued looks,
        // finds nothing, arms again and is woken by the ring after the hand-over (below),
        // which alone carries the ordering the handshake needs (see `Slot::ring`).
        self.slot.ring();
        let local = self.local.subscribers();
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
                    let mut b = self.local.loan(words);
                    b.words_mut()[..words].copy_from_slice(s.payload());
                    b.freeze()
                });
                (self.send_shm(s, header), copy, sent_net)
            }
        };
        if via_shm && local > 0 && self.ring.is_none() {
            self.local.sent_through_shm();
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
        self.local
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

impl Drop for SendRoute {
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
pub(crate) struct LoanCount(Rc<Cell<usize>>);

impl LoanCount {
    /// A ticket for one more loan, or `None` when `max` are on loan already.
    pub(crate) fn take(&self, max: usize) -> Option<LoanTicket> {
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

/// A subscriber's sources and the rules by which a receive polls them (see the module
/// docs): its queue and inline rings on the same-process route, the shared-memory rings of
/// other contexts' publishers, iceoryx2, and the network plane.
pub(crate) struct RecvRoute {
    // field order is drop order: the port goes before its service and node
    port: IoxSubscriber,
    service: TopicService,
    /// The topic's doorbell slot.
    slot: SlotRef,
    node: Node,
    topic: String,
    expected: TypeInfo,
    stats: RefCell<StatsState>,
    /// Doorbell sequence last acknowledged (see `RecvRoute::acknowledge`).
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

/// See `RecvRoute::polls`.
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
    #[inline]
    pub(crate) fn header(&self) -> &SampleHeader {
        match self {
            Received::Shm(s) => s.user_header(),
            Received::Local(l) | Received::Net(l) => &l.header,
            Received::Inline(h, _) | Received::Shared(h, _) => h,
        }
    }

    /// The payload words.
    #[inline]
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
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        let len = self.header().payload_len as usize;
        &shm::words_as_bytes(self.words())[..len]
    }
}

/// Checks a received sample against the topic's layout; returns the number of elements.
pub(crate) fn validate(s: &Received, ty: &TypeInfo) -> Result<usize, String> {
    let h = s.header();
    shm::check_payload(h.type_hash, h.payload_len, s.words(), ty)
}

impl RecvRoute {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        node: Node,
        topic: String,
        service: TopicService,
        port: IoxSubscriber,
        expected: TypeInfo,
        depth: usize,
        slot: SlotRef,
    ) -> RecvRoute {
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
        RecvRoute {
            port,
            service,
            slot,
            node,
            topic,
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
    pub(crate) fn with_net(mut self, net: Option<Box<dyn RemoteSubscriber>>) -> RecvRoute {
        self.net = net;
        self
    }

    /// If the doorbell rang since we last looked, attach to any new publisher and confirm,
    /// so a publisher waiting in `wait_for_subscribers` knows nothing it sends is lost.
    pub(crate) fn acknowledge(&self, slot: &Slot) {
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

    /// The next valid sample of any source, without waiting: the network every
    /// `FAIRNESS`th receive first, else this host first (`arrivals`: the predictor told
    /// of every sample taken, in [`super::wait::WaitMode::Predictive`]).
    pub(crate) fn try_recv(
        &self,
        arrivals: Option<&Predictor>,
    ) -> Result<Option<(Received, usize)>, RecvError> {
        crate::trace::asking(false);
        let Some(net) = &self.net else {
            return self.try_recv_host(arrivals);
        };
        // every FAIRNESS-th receive looks at the network first
        if self.polls.get() % FAIRNESS == FAIRNESS / 2 {
            if let Some(s) = self.try_net(net.as_ref(), arrivals) {
                return Ok(Some(s));
            }
        }
        match self.try_recv_host(arrivals)? {
            Some(s) => Ok(Some(s)),
            None => Ok(self.try_net(net.as_ref(), arrivals)),
        }
    }

    /// The next valid sample from another host. History handed over twice (by a
    /// publisher and again after a reconnect) is skipped by sequence number.
    fn try_net(
        &self,
        net: &dyn RemoteSubscriber,
        arrivals: Option<&Predictor>,
    ) -> Option<(Received, usize)> {
        while let Some(s) = net.pop() {
            if self
                .stats
                .borrow()
                .seen(s.header.publisher_id, s.header.seq)
            {
                continue;
            }
            if let Some(accepted) = self.accept(Received::Net(s), arrivals) {
                return Some(accepted);
            }
        }
        None
    }

    /// The next sample from this host (same process or shared memory).
    fn try_recv_host(
        &self,
        arrivals: Option<&Predictor>,
    ) -> Result<Option<(Received, usize)>, RecvError> {
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
            if let Some(s) = self.try_local(arrivals) {
                return Ok(Some(s));
            }
            if !self.shm_dirty.get() {
                return Ok(None);
            }
            local_tried = true;
        }
        if self.ring_topic {
            if let Some(got) = self.try_shared(arrivals) {
                return Ok(Some(got));
            }
            // iceoryx2 carries nothing of a ring topic, except from a writer without a
            // ring (not Nerve's, or one whose ring has not appeared yet): only then look
            if self.ringless.get() == 0 {
                self.shm_first.set(false);
                self.shm_dirty.set(foreign());
                return Ok(if local_tried {
                    None
                } else {
                    self.try_local(arrivals)
                });
            }
        }
        loop {
            let s = self.port.receive().map_err(|e| match e {
                iceoryx2::port::ReceiveError::ExceedsMaxBorrows => RecvError::TooManyHeld {
                    topic: self.topic.clone(),
                    max: self
                        .service
                        .static_config()
                        .subscriber_max_borrowed_samples(),
                },
                e => RecvError::Shm {
                    topic: self.topic.clone(),
                    reason: format!("{e:?}"),
                },
            })?;
            let Some(s) = s else {
                self.shm_first.set(false);
                self.shm_dirty.set(foreign());
                return Ok(if local_tried {
                    None
                } else {
                    self.try_local(arrivals)
                });
            };
            let h = s.user_header();
            if h.origin == self.origin
                && (h.publish_mono_ns >= self.since_ns
                    || self.stats.borrow().seen(h.publisher_id, h.seq))
            {
                continue; // delivered in-process already
            }
            if let Some(accepted) = self.accept(Received::Shm(s), arrivals) {
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
    fn try_local(&self, arrivals: Option<&Predictor>) -> Option<(Received, usize)> {
        let created = self.local_topic.created();
        let active = self.local_topic.publishers() > 0;
        if !active && !self.local_dirty.get() && created == self.local_created.get() {
            return None;
        }
        self.local_created.set(created);
        if let Some(s) = self.try_rings(arrivals) {
            self.local_dirty.set(true);
            return Some(s);
        }
        while let Some(s) = (!self.inline).then(|| self.local.pop()).flatten() {
            if let Some(accepted) = self.accept(Received::Local(s), arrivals) {
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
    fn try_rings(&self, arrivals: Option<&Predictor>) -> Option<(Received, usize)> {
        self.refresh_readers();
        let readers = self.readers.borrow();
        self.take_round_robin(
            readers.iter(),
            readers.len(),
            &self.next_reader,
            Received::Inline,
            arrivals,
        )
    }

    /// The next valid sample of the shared-memory rings of other contexts' publishers.
    fn try_shared(&self, arrivals: Option<&Predictor>) -> Option<(Received, usize)> {
        let shared = self.shared.borrow();
        let readers = shared.iter().map(|s| &s.reader);
        self.take_round_robin(
            readers,
            shared.len(),
            &self.next_shared,
            Received::Shared,
            arrivals,
        )
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
        arrivals: Option<&Predictor>,
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
                if let Some(accepted) = self.accept(wrap(header, buf), arrivals) {
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
    fn accept(&self, s: Received, arrivals: Option<&Predictor>) -> Option<(Received, usize)> {
        match validate(&s, &self.expected) {
            Ok(elems) => {
                crate::trace::taken(&self.topic, s.header());
                let mut stats = self.stats.borrow_mut();
                stats.account(s.header());
                if let Some(predictor) = arrivals {
                    predictor.arrived(s.header().publish_mono_ns);
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

impl Drop for RecvRoute {
    fn drop(&mut self) {
        self.local_topic.detach(&self.local);
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
