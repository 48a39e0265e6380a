//! Typed subscribers: samples are read in place in shared memory and released on drop.

use crate::context::Node;
use crate::error::{DecodeError, RecvError, TopicError};
use crate::message::header::SampleHeader;
use crate::message::{Message, Serde, SerdeMessage, TypeInfo};
use crate::qos::Qos;
use crate::sys::clock::mono_ns;
use crate::sys::clock::precise_timers;
use crate::transport::doorbell::SlotRef;
use crate::transport::remote::RemoteSubscriber;
use crate::transport::route::{Received, RecvRoute};
use crate::transport::shm::{self, IoxSubscriber, TopicService};
use crate::transport::wait::{wait_for, Predictor, SpinWindow, WaitMode, MAX_SLEEP};
use iceoryx2::service::port_factory::PortFactory as _;
use std::marker::PhantomData;
use std::ops::Deref;
use std::time::{Duration, Instant};

pub use crate::transport::route::SubscriberStats;

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

/// Untyped receiving end shared by [`Subscriber`] and [`crate::RawSubscriber`]: how a
/// blocking receive waits; its [`RecvRoute`] holds the sources and polls them.
pub(crate) struct Receiver {
    route: RecvRoute,
    mode: WaitMode,
    spin: SpinWindow,
    predictor: Predictor,
}

/// Receives messages of type `M` from one topic.
pub struct Subscriber<M: Message> {
    rx: Receiver,
    _m: PhantomData<M>,
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
        Receiver {
            route: RecvRoute::new(node, topic, service, port, expected, depth, slot),
            mode,
            spin: SpinWindow::new(),
            predictor: Predictor::default(),
        }
    }

    /// Adds the network side (the network plane is on).
    pub(crate) fn with_net(mut self, net: Option<Box<dyn RemoteSubscriber>>) -> Receiver {
        self.route = self.route.with_net(net);
        self
    }

    /// The predictor told of every sample taken, in [`WaitMode::Predictive`].
    #[inline]
    fn arrivals(&self) -> Option<&Predictor> {
        (self.mode == WaitMode::Predictive).then_some(&self.predictor)
    }

    /// The next valid sample of any source, without waiting.
    #[inline]
    pub(crate) fn try_recv(&self) -> Result<Option<(Received, usize)>, RecvError> {
        self.route.try_recv(self.arrivals())
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
        let slot = self.route.slot();
        wait_for(
            mode,
            &self.spin,
            slot,
            timeout,
            MAX_SLEEP,
            || self.try_recv(),
            || {
                self.route.acknowledge(slot);
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
        self.route.stats()
    }

    pub(crate) fn publisher_count(&self) -> usize {
        self.route.publisher_count()
    }

    pub(crate) fn slot(&self) -> &SlotRef {
        self.route.slot()
    }

    pub(crate) fn has_samples(&self) -> bool {
        self.route.has_samples()
    }

    pub(crate) fn topic(&self) -> &str {
        self.route.topic()
    }

    pub(crate) fn node(&self) -> &Node {
        self.route.node()
    }

    pub(crate) fn service(&self) -> &TopicService {
        self.route.service()
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
