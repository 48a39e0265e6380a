//! Type-erased subscribers: read any topic without being compiled against its type (tools
//! such as `nerve topic echo`, recorders, bridges).

use crate::context::Node;
use crate::error::LoanError;
use crate::error::{PublishError, RecvError, TopicError};
use crate::message::header::SampleHeader;
use crate::message::schema::{Schema, SchemaError};
use crate::message::TypeInfo;
use crate::qos::Qos;
use crate::topic::publisher::Sender;
use crate::topic::subscriber::{create_port, Receiver, SubscriberStats};
use crate::transport::route::{LoanBuf, LoanCount, LoanTicket, Received};
use crate::transport::shm::{self};
use crate::transport::wait::WaitMode;
use iceoryx2::prelude::*;
use std::time::Duration;

/// A subscriber that accepts any message type: for tools like `nerve topic echo`.
pub struct RawSubscriber {
    pub(crate) rx: Receiver,
    type_info: TypeInfo,
    schema: Option<Result<Schema, SchemaError>>,
    /// Samples taken with [`RawSubscriber::try_recv_held`] and not dropped yet.
    held: LoanCount,
    /// The most of them at once (`Qos::max_borrowed`).
    max_held: usize,
}

impl RawSubscriber {
    /// Subscribes to an existing topic with its own type. Like every endpoint, the name
    /// resolves as [`Node::resolve_name`] says (namespace, private names, remap rules);
    /// [`RawSubscriber::topic`] tells the result.
    pub fn create(node: &Node, topic: &str, qos: Qos) -> Result<RawSubscriber, TopicError> {
        RawSubscriber::open(node, topic, None, None, qos)
    }

    /// Subscribes to a topic of type `ty`, creating it on this host if needed (for
    /// topics whose publishers are all on other hosts).
    pub fn with_type(
        node: &Node,
        topic: &str,
        ty: &TypeInfo,
        qos: Qos,
    ) -> Result<RawSubscriber, TopicError> {
        RawSubscriber::open(node, topic, Some(ty), None, qos)
    }

    /// Subscribes to a topic of the type `schema` describes, creating it on this host
    /// with the schema recorded if needed (for topics whose publishers are all on other
    /// hosts: see [`crate::net::remote_schema`]).
    pub fn with_schema(
        node: &Node,
        topic: &str,
        schema: &Schema,
        qos: Qos,
    ) -> Result<RawSubscriber, TopicError> {
        let text = schema.encode();
        RawSubscriber::open(node, topic, Some(&schema.type_info()), Some(&text), qos)
    }

    fn open(
        node: &Node,
        topic: &str,
        ty: Option<&TypeInfo>,
        schema: Option<&str>,
        qos: Qos,
    ) -> Result<RawSubscriber, TopicError> {
        let topic = &node.resolve_name(topic);
        crate::name::validate_topic(topic)?;
        let service = shm::open_topic(&node.inner.iox, topic, ty, schema, &qos)?;
        let schema = shm::topic_schema(&node.inner.iox, &service);
        let type_info = shm::topic_type(&service).ok_or_else(|| TopicError::NotATopic {
            topic: topic.to_string(),
            reason: "no Nerve type record".into(),
        })?;
        let depth = qos
            .depth
            .min(service.static_config().subscriber_max_buffer_size());
        let qos = Qos { depth, ..qos };
        let max_held = qos.max_borrowed;
        let port = create_port(&service, topic, &qos)?;
        let slot = crate::topic::bind_slot(node, topic)?;
        let net = crate::topic::subscriber::net_side(node, topic, &type_info, &qos, &slot)?;
        Ok(RawSubscriber {
            rx: Receiver::new(
                node.clone(),
                topic.to_string(),
                service,
                port,
                type_info.clone(),
                WaitMode::Block,
                depth,
                slot,
            )
            .with_net(net),
            type_info,
            schema,
            held: LoanCount::default(),
            max_held,
        })
    }

    /// The topic's resolved name.
    pub fn topic(&self) -> &str {
        self.rx.topic()
    }

    /// The next queued sample, to be kept (bindings' shared samples): counted until it is
    /// dropped, on every route alike (shared memory, same process, network). With
    /// `Qos::max_borrowed` of them held, a queued sample is not taken:
    /// [`RecvError::TooManyHeld`], and it stays queued until one is dropped.
    pub fn try_recv_held(&self) -> Result<Option<RawSample>, RecvError> {
        let Some(ticket) = self.held.take(self.max_held) else {
            if !self.rx.has_samples() {
                return Ok(None);
            }
            return Err(RecvError::TooManyHeld {
                topic: self.topic().to_string(),
                max: self.max_held,
            });
        };
        Ok(self.rx.try_recv()?.map(|(inner, elems)| RawSample {
            inner,
            elems,
            _held: Some(ticket),
        }))
    }

    /// The topic's schema (see [`crate::message::schema`]): `None` when the topic has none
    /// recorded, an error when the recorded one cannot be trusted.
    pub fn schema(&self) -> Option<&Result<Schema, SchemaError>> {
        self.schema.as_ref()
    }

    /// The topic's message type.
    pub fn type_info(&self) -> &TypeInfo {
        &self.type_info
    }

    /// Counters.
    pub fn stats(&self) -> SubscriberStats {
        self.rx.stats()
    }

    /// How [`RawSubscriber::recv_timeout`] waits (blocking by default).
    pub fn set_wait_mode(&mut self, mode: WaitMode) {
        self.rx.set_mode(mode);
    }

    /// The next sample if one is queued, without waiting.
    #[inline]
    pub fn try_recv(&self) -> Result<Option<RawSample>, RecvError> {
        Ok(self.rx.try_recv()?.map(|(inner, elems)| RawSample {
            inner,
            elems,
            _held: None,
        }))
    }

    /// Waits up to `timeout` for the next sample.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Option<RawSample>, RecvError> {
        Ok(self
            .rx
            .recv_timeout(timeout)?
            .map(|(inner, elems)| RawSample {
                inner,
                elems,
                _held: None,
            }))
    }

    /// Number of publishers connected now.
    pub fn publisher_count(&self) -> usize {
        self.rx.publisher_count()
    }

    /// Number of subscribers connected now.
    pub fn subscriber_count(&self) -> usize {
        self.rx.service().dynamic_config().number_of_subscribers()
    }
}

/// A sample of any type, validated against the topic's layout.
pub struct RawSample {
    inner: Received,
    elems: usize,
    /// Counts it while held, when taken to be kept.
    _held: Option<LoanTicket>,
}

impl RawSample {
    /// Nerve's sample header.
    #[inline]
    pub fn header(&self) -> &SampleHeader {
        self.inner.header()
    }
    /// The payload bytes in use (head, padding, elements).
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        self.inner.bytes()
    }
    /// Number of slice elements.
    #[inline]
    pub fn elems(&self) -> usize {
        self.elems
    }
}

/// A publisher of any message type, known by its schema: for tools (`nerve topic pub`),
/// replay and bindings. Every payload is checked against the type's layout before it is
/// sent; routes, QoS and wake-ups are those of [`crate::Publisher`].
pub struct RawPublisher {
    tx: Sender,
}

impl RawPublisher {
    /// Publishes on `topic` (resolved as [`Node::resolve_name`] says) with the type
    /// `schema` describes, creating the topic (and recording the schema) if needed; a
    /// topic of another type is an error naming both.
    pub fn create(
        node: &Node,
        topic: &str,
        schema: &Schema,
        qos: Qos,
    ) -> Result<RawPublisher, TopicError> {
        let text = schema.encode();
        let tx = Sender::create(node.clone(), topic, schema.type_info(), Some(&text), qos)?;
        Ok(RawPublisher { tx })
    }

    /// The topic's type identity.
    pub fn type_info(&self) -> &TypeInfo {
        self.tx.type_info()
    }

    /// The topic's resolved name.
    pub fn topic(&self) -> &str {
        self.tx.topic()
    }

    /// This publisher's id as written in every sample header.
    #[inline]
    pub fn id(&self) -> u64 {
        self.tx.id()
    }

    /// Number of subscribers connected to the topic right now, on this host and (with
    /// the network plane on) on others.
    pub fn subscriber_count(&self) -> usize {
        self.tx.subscriber_count()
    }

    /// Connects subscribers that joined since the last send and hands them the history
    /// (see [`crate::Publisher::update_connections`]).
    pub fn update_connections(&self) {
        self.tx.update_connections()
    }

    /// Waits until at least `n` subscribers are connected (see
    /// [`crate::Publisher::wait_for_subscribers`]).
    pub fn wait_for_subscribers(&self, n: usize, timeout: Duration) -> bool {
        self.tx.wait_for_subscribers(n, timeout)
    }

    /// See [`crate::Publisher::settle`].
    pub fn settle(&self, timeout: Duration) -> bool {
        self.tx.settle(std::time::Instant::now() + timeout)
    }

    /// Sends one message given as its bytes (head, then for slice types the elements at
    /// the element offset), copied into a loaned sample.
    pub fn publish_bytes(&self, payload: &[u8]) -> Result<(), PublishError> {
        let ty = self.tx.type_info();
        ty.check_len(payload.len())
            .map_err(|reason| PublishError::BadPayload {
                topic: self.tx.topic().to_string(),
                type_name: ty.name.clone(),
                len: payload.len(),
                reason,
            })?;
        let mut buf = self.tx.loan_bytes(payload.len().max(1))?;
        shm::words_as_bytes_mut(buf.words_mut())[..payload.len()].copy_from_slice(payload);
        self.tx.send_loan(buf, payload.len())
    }

    /// Loans a sample of `len` payload bytes (the head, then for slice types the
    /// elements), head zeroed, to be written in place and sent with
    /// [`RawPublisher::send`]. A length that does not fit the layout is refused.
    #[inline]
    pub fn loan(&self, len: usize) -> Result<RawLoan, LoanError> {
        let ty = self.tx.type_info();
        ty.check_len(len).map_err(|reason| LoanError::BadLength {
            topic: self.tx.topic().to_string(),
            type_name: ty.name.clone(),
            len,
            reason,
        })?;
        Ok(RawLoan {
            buf: self.tx.loan_bytes(len.max(1))?,
            len,
            publisher: self.tx.id(),
        })
    }

    /// Sends a loan of this publisher; another publisher's loan is refused (nothing
    /// sent, the loan is dropped).
    #[inline]
    pub fn send(&self, loan: RawLoan) -> Result<(), PublishError> {
        if loan.publisher != self.tx.id() {
            return Err(PublishError::BadPayload {
                topic: self.tx.topic().to_string(),
                type_name: self.tx.type_info().name.clone(),
                len: loan.len,
                reason: "the loan belongs to another publisher".into(),
            });
        }
        self.tx.send_loan(loan.buf, loan.len)
    }
}

/// A sample loaned by a [`RawPublisher`]: owned (bindings keep it in an object), written
/// in place, sent with [`RawPublisher::send`] or returned to the pool when dropped.
pub struct RawLoan {
    buf: LoanBuf,
    len: usize,
    publisher: u64,
}

impl RawLoan {
    /// Payload length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The payload bytes, written in place.
    #[inline]
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut shm::words_as_bytes_mut(self.buf.words_mut())[..self.len]
    }

    /// The payload bytes.
    pub fn bytes(&self) -> &[u8] {
        &shm::words_as_bytes(self.buf.words())[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::schema::Schema;

    #[derive(Clone, Copy, nerve_derive::Message)]
    #[repr(C)]
    #[message(name = "raw_test/Samples", elem = u32)]
    struct Samples {
        id: u64,
    }

    /// Payloads that do not fit the layout are refused by name and nothing is sent;
    /// fitting ones arrive intact.
    #[test]
    fn raw_payloads_are_checked_against_the_layout() {
        let dir = std::env::temp_dir().join("nerve-tests/");
        let cfg = crate::config::Config::default()
            .domain(979)
            .unwrap()
            .state_dir(dir);
        let ctx = crate::context::Context::new(cfg).unwrap();
        let node = ctx.node("raw_pub").create().unwrap();
        let sub = node.subscriber::<Samples>("/raw/samples").create().unwrap();
        let publisher = RawPublisher::create(
            &node,
            "/raw/samples",
            &Schema::of::<Samples>(),
            Qos::default(),
        )
        .unwrap();
        for len in [0, 7, 10, 13] {
            let e = publisher.publish_bytes(&vec![0u8; len]).unwrap_err();
            assert!(matches!(e, PublishError::BadPayload { .. }), "{len}: {e}");
            assert!(e.to_string().contains("raw_test/Samples"), "{e}");
        }
        assert!(sub.try_recv().unwrap().is_none(), "nothing was sent");
        let mut good = 5u64.to_ne_bytes().to_vec();
        good.extend(7u32.to_ne_bytes());
        good.extend(9u32.to_ne_bytes());
        publisher.publish_bytes(&good).unwrap();
        let s = sub.recv_timeout(Duration::from_secs(1)).unwrap().unwrap();
        assert_eq!((s.id, s.elems()), (5, &[7u32, 9][..]));
    }

    /// Type-erased endpoints (what the C ABI, Python, the CLI and the bridges use) resolve
    /// names as the typed ones do: namespace, private names, remap rules (before, they
    /// took the name as given and refused relative ones).
    #[test]
    fn raw_endpoints_resolve_names_as_typed_ones() {
        let dir = std::env::temp_dir().join("nerve-tests/");
        let cfg = crate::config::Config::default()
            .domain(974)
            .unwrap()
            .state_dir(dir)
            .namespace("/robot1")
            .unwrap()
            .remap("cmd", "/base/cmd")
            .unwrap();
        let ctx = crate::context::Context::new(cfg).unwrap();
        let node = ctx.node("talker").create().unwrap();
        let schema = Schema::of::<Samples>();
        let typed = node.subscriber::<Samples>("chatter").create().unwrap();
        assert_eq!(typed.topic(), "/robot1/chatter");
        let publisher = RawPublisher::create(&node, "chatter", &schema, Qos::default()).unwrap();
        assert_eq!(publisher.topic(), "/robot1/chatter");
        let raw = RawSubscriber::create(&node, "chatter", Qos::default()).unwrap();
        assert_eq!(raw.topic(), "/robot1/chatter");
        let remapped = RawPublisher::create(&node, "cmd", &schema, Qos::default()).unwrap();
        assert_eq!(remapped.topic(), "/base/cmd");
        let private =
            RawSubscriber::with_schema(&node, "~/state", &schema, Qos::default()).unwrap();
        assert_eq!(private.topic(), "/robot1/talker/state");
        let ty = schema.type_info();
        let absolute = RawSubscriber::with_type(&node, "/imu", &ty, Qos::default()).unwrap();
        assert_eq!(absolute.topic(), "/imu");
        let e = RawPublisher::create(&node, "1bad", &schema, Qos::default())
            .err()
            .unwrap();
        assert!(e.to_string().contains("/robot1/1bad"), "{e}");
        // one topic: the raw publisher reaches the typed and the raw subscriber
        publisher.publish_bytes(&5u64.to_ne_bytes()).unwrap();
        let s = typed.recv_timeout(Duration::from_secs(1)).unwrap().unwrap();
        assert_eq!(s.id, 5);
        let s = raw.recv_timeout(Duration::from_secs(1)).unwrap().unwrap();
        assert_eq!(s.bytes()[..8], 5u64.to_ne_bytes());
    }

    /// `Qos::max_loans` is the same limit whoever subscribes: loans live on the heap while
    /// no subscriber is outside this context and in shared memory once one is, and both
    /// count alike (before, heap loans were not counted at all, so a program holding 10
    /// loans worked alone and failed after 2 once `nerve topic echo` attached).
    #[test]
    fn max_loans_holds_alike_with_and_without_a_subscriber_elsewhere() {
        let dir = std::env::temp_dir().join("nerve-tests/");
        let cfg = crate::config::Config::default()
            .domain(975)
            .unwrap()
            .state_dir(dir);
        let ctx = crate::context::Context::new(cfg.clone()).unwrap();
        let node = ctx.node("raw_loans").create().unwrap();
        let max = 3;
        let qos = Qos {
            max_loans: max,
            ..Qos::default()
        };
        let schema = Schema::of::<Samples>();
        let publisher = RawPublisher::create(&node, "/raw/loans", &schema, qos).unwrap();
        // 64 KiB of elements after the 8-byte head
        let len = 8 + 64 * 1024;
        let hold = |p: &RawPublisher| {
            let loans: Vec<RawLoan> = (0..max)
                .map(|i| p.loan(len).unwrap_or_else(|e| panic!("loan {i}: {e}")))
                .collect();
            let beyond = p.loan(len).err().expect("a loan beyond max_loans");
            (loans, beyond)
        };
        let (loans, alone) = hold(&publisher);
        assert!(loans.iter().all(|l| matches!(l.buf, LoanBuf::Local(..))));
        assert!(
            matches!(alone, LoanError::TooManyLoans { max: 3, .. }),
            "{alone}"
        );
        assert!(alone.to_string().contains("max_loans"), "{alone}");
        drop(loans);

        // a subscriber in another context (as `nerve topic echo` in another process)
        let other = crate::context::Context::new(cfg).unwrap();
        let echo = other.node("raw_loans_echo").create().unwrap();
        let sub = RawSubscriber::create(&echo, "/raw/loans", Qos::default()).unwrap();
        assert_eq!(publisher.subscriber_count(), 1);
        let (mut loans, watched) = hold(&publisher);
        assert!(loans.iter().all(|l| matches!(l.buf, LoanBuf::Shm(..))));
        assert_eq!(watched.to_string(), alone.to_string());
        // a loan sent or dropped gives its place back
        let mut last = loans.pop().unwrap();
        last.bytes_mut()[..8].copy_from_slice(&7u64.to_ne_bytes());
        publisher.send(last).unwrap();
        loans.push(publisher.loan(len).unwrap());
        loans.pop();
        loans.push(publisher.loan(len).unwrap());
        let s = sub.recv_timeout(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!(s.bytes()[..8], 7u64.to_ne_bytes());
    }

    #[derive(Clone, Copy, nerve_derive::Message)]
    #[repr(C)]
    #[message(name = "raw_test/ManyFields")]
    struct ManyFields {
        zeta_first_field_with_a_long_name: u64,
        alpha_second_field_with_a_long_name: u64,
        mu_third_field_with_a_long_name: [f64; 3],
        beta_fourth_field_with_a_long_name: u32,
        omega_fifth_field_with_a_long_name: u32,
        gamma_sixth_field_with_a_long_name: [u16; 4],
        delta_seventh_field_with_a_long_name: u64,
        epsilon_eighth_field_with_a_long_name: u64,
        eta_ninth_field_with_a_long_name: f64,
        theta_tenth_field_with_a_long_name: f64,
    }

    /// A schema recorded over several attribute values comes back whole: iceoryx2 keeps
    /// values sorted, so chunks carry their index (before, a schema over 256 bytes came
    /// back in the chunks' sort order and was refused as malformed).
    #[test]
    fn a_schema_over_several_record_chunks_comes_back_in_order() {
        let dir = std::env::temp_dir().join("nerve-tests/");
        let cfg = crate::config::Config::default()
            .domain(978)
            .unwrap()
            .state_dir(dir);
        let ctx = crate::context::Context::new(cfg).unwrap();
        let node = ctx.node("raw_chunks").create().unwrap();
        let expected = Schema::of::<ManyFields>();
        assert!(
            expected.encode().len() > 2 * 254,
            "{}",
            expected.encode().len()
        );
        let _publisher = node
            .publisher::<ManyFields>("/raw/chunks")
            .create()
            .unwrap();
        let sub = RawSubscriber::create(&node, "/raw/chunks", Qos::default()).unwrap();
        assert_eq!(sub.schema().cloned().unwrap().unwrap(), expected);
    }
}
