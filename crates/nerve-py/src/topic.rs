//! Contexts, nodes, QoS, publishers and subscriptions.

use crate::affine::{Affine, Graveyard};
use crate::buffer::{Buffer, Owner};
use crate::errors::{err, ContextError, LoanError, NodeError, PublishError, RecvError, TopicError};
use crate::types::MessageType;
use crate::wait::{blocking, SameThread};
use nerve::{Overflow, RawPublisher, RawSample, RawSubscriber, SampleHeader, WaitMode};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::Arc;
use std::time::Duration;

/// A Nerve domain seen from this process: the unit that owns shared memory, the doorbell
/// and the network plane. Everything made from it belongs to the thread that made it.
#[pyclass(frozen, module = "nerve._nerve")]
pub struct Context {
    pub(crate) inner: Affine<nerve::Context>,
}

#[pymethods]
impl Context {
    /// Opens a context: settings from `NERVE_*` variables, or from the TOML file
    /// `config`, then `domain`, `state_dir`, `network` and `sim_time` (follow a
    /// simulation clock on `/clock`) override them.
    #[new]
    #[pyo3(signature = (domain=None, *, config=None, state_dir=None, network=None, sim_time=None))]
    fn new(
        domain: Option<u32>,
        config: Option<std::path::PathBuf>,
        state_dir: Option<std::path::PathBuf>,
        network: Option<bool>,
        sim_time: Option<bool>,
    ) -> PyResult<Context> {
        let mut cfg = match config {
            Some(path) => nerve::Config::from_file(&path),
            None => nerve::Config::from_env(),
        }
        .map_err(err::<ContextError>)?;
        if let Some(d) = domain {
            cfg = cfg.domain(d).map_err(err::<ContextError>)?;
        }
        if let Some(dir) = state_dir {
            cfg = cfg.state_dir(dir);
        }
        if let Some(on) = network {
            cfg = cfg.network(on);
        }
        if let Some(on) = sim_time {
            cfg.sim_time = on;
        }
        let ctx = nerve::Context::new(cfg).map_err(err::<ContextError>)?;
        Ok(Context {
            inner: Affine::new(ctx, &Graveyard::new(), "Context"),
        })
    }

    /// The domain id.
    #[getter]
    fn domain(&self) -> PyResult<u32> {
        Ok(self.inner.get()?.domain())
    }

    /// Whether this context follows a simulation clock.
    #[getter]
    fn sim_time(&self) -> PyResult<bool> {
        Ok(self.inner.get()?.clock().is_sim())
    }

    /// Robot time now on this context's clock, ns since the Unix epoch (simulation time
    /// in simulation: 0 until the first clock message).
    fn now_ns(&self) -> PyResult<i64> {
        Ok(self.inner.get()?.clock().now_ns())
    }

    /// Creates a node (`name` must be unique among this process's nodes).
    fn node(&self, name: &str) -> PyResult<Node> {
        let node = self
            .inner
            .get()?
            .node(name)
            .create()
            .map_err(err::<NodeError>)?;
        Ok(Node {
            inner: Affine::new(node, self.inner.graveyard(), "Node"),
        })
    }

    /// Values other threads dropped that wait for this thread (for tests).
    #[getter]
    fn _parked(&self) -> usize {
        self.inner.graveyard().waiting()
    }

    fn __repr__(&self) -> PyResult<String> {
        Ok(format!("Context(domain={})", self.inner.get()?.domain()))
    }
}

/// Quality of service of a topic (see the Rust `nerve::Qos`).
#[pyclass(frozen, from_py_object, module = "nerve._nerve")]
#[derive(Clone)]
pub struct Qos {
    pub(crate) inner: nerve::Qos,
}

#[pymethods]
impl Qos {
    /// Builds a QoS: `depth` queued samples per subscriber, `history` kept for late
    /// joiners, `reliable` (back-pressure with `timeout` seconds) or drop-oldest,
    /// `max_payload` bytes, `max_borrowed` samples a subscriber may hold at once,
    /// `max_loans` samples a publisher may loan at once.
    #[new]
    #[pyo3(signature = (*, depth=4, history=0, reliable=false, timeout=1.0, max_payload=None, max_borrowed=None, max_loans=None))]
    fn new(
        depth: usize,
        history: usize,
        reliable: bool,
        timeout: f64,
        max_payload: Option<usize>,
        max_borrowed: Option<usize>,
        max_loans: Option<usize>,
    ) -> PyResult<Qos> {
        if depth == 0 {
            return Err(PyValueError::new_err("Qos depth must be at least 1"));
        }
        let mut q = nerve::Qos::default().depth(depth).history(history);
        if reliable {
            q = q.overflow(Overflow::BackPressure {
                timeout: crate::wait::duration(timeout, "timeout")?,
            });
        }
        if let Some(m) = max_payload {
            let initial = q.initial_payload.min(m);
            q = q.payload(initial, m);
        }
        if let Some(b) = max_borrowed {
            q.max_borrowed = b;
        }
        if let Some(l) = max_loans {
            q.max_loans = l;
        }
        Ok(Qos { inner: q })
    }

    /// Sensor streams: newest wins, a slow reader never slows the publisher.
    #[staticmethod]
    fn sensor() -> Qos {
        Qos {
            inner: nerve::Qos::sensor(),
        }
    }

    /// Every sample delivered: the publisher waits up to 1 s for a full queue.
    #[staticmethod]
    fn reliable() -> Qos {
        Qos {
            inner: nerve::Qos::reliable(),
        }
    }

    /// The last sample kept for late joiners.
    #[staticmethod]
    fn latched() -> Qos {
        Qos {
            inner: nerve::Qos::latched(),
        }
    }

    /// Queue depth per subscriber.
    #[getter]
    fn depth(&self) -> usize {
        self.inner.depth
    }

    /// Samples kept for late joiners.
    #[getter]
    fn history(&self) -> usize {
        self.inner.history
    }

    /// Whether publishers wait for full queues.
    #[getter]
    fn reliable_(&self) -> bool {
        matches!(self.inner.overflow, Overflow::BackPressure { .. })
    }

    fn __repr__(&self) -> String {
        format!(
            "Qos(depth={}, history={}, reliable={})",
            self.inner.depth,
            self.inner.history,
            self.reliable_()
        )
    }
}

/// A sample's header: sequence number and publish stamps.
#[pyclass(frozen, get_all, module = "nerve._nerve")]
pub struct Header {
    /// Sequence number per publisher, from 1.
    seq: u64,
    /// Publish time, monotonic clock (ns; `nerve.mono_ns()` / `time.monotonic_ns()`).
    stamp_ns: u64,
    /// Publish time, wall clock (ns since the Unix epoch).
    wall_ns: i64,
    /// The publisher's id.
    publisher_id: u64,
    /// Payload length in bytes.
    payload_len: u64,
}

impl From<SampleHeader> for Header {
    fn from(h: SampleHeader) -> Header {
        Header {
            seq: h.seq,
            stamp_ns: h.publish_mono_ns,
            wall_ns: h.publish_wall_ns,
            publisher_id: h.publisher_id,
            payload_len: h.payload_len,
        }
    }
}

#[pymethods]
impl Header {
    fn __repr__(&self) -> String {
        format!(
            "Header(seq={}, stamp_ns={}, publisher_id={:#x})",
            self.seq, self.stamp_ns, self.publisher_id
        )
    }
}

/// A node: the owner of publishers, subscriptions, clients and servers.
#[pyclass(frozen, module = "nerve._nerve")]
pub struct Node {
    pub(crate) inner: Affine<nerve::Node>,
}

fn wait_mode(name: &str) -> PyResult<WaitMode> {
    Ok(match name {
        "adaptive" => WaitMode::Adaptive,
        "spin" => WaitMode::Spin,
        "block" => WaitMode::Block,
        "predictive" => WaitMode::Predictive,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown wait mode {other:?} (adaptive, spin, block, predictive)"
            )))
        }
    })
}

#[pymethods]
impl Node {
    /// The node's name.
    #[getter]
    fn name(&self) -> PyResult<String> {
        Ok(self.inner.get()?.name().to_string())
    }

    /// A publisher of `ty` on `topic` (created if needed; a topic of another type raises
    /// `TopicError` naming both).
    #[pyo3(signature = (ty, topic, qos=None))]
    fn _publisher(
        &self,
        ty: Py<MessageType>,
        topic: &str,
        qos: Option<Qos>,
    ) -> PyResult<Publisher> {
        let qos = qos.map_or_else(nerve::Qos::default, |q| q.inner);
        let p = RawPublisher::create(self.inner.get()?, topic, &ty.get().schema, qos)
            .map_err(err::<TopicError>)?;
        Ok(Publisher {
            inner: Affine::new(p, self.inner.graveyard(), "Publisher"),
            ty,
        })
    }

    /// A subscription to `topic`; with `ty` None the topic must exist and carry a schema,
    /// and its own type is used.
    #[pyo3(signature = (ty, topic, qos=None, wait="adaptive"))]
    fn _subscription(
        &self,
        py: Python<'_>,
        ty: Option<Py<MessageType>>,
        topic: &str,
        qos: Option<Qos>,
        wait: &str,
    ) -> PyResult<Subscription> {
        let qos = qos.map_or_else(nerve::Qos::default, |q| q.inner);
        let mode = wait_mode(wait)?;
        let node = self.inner.get()?;
        let mut sub = match &ty {
            Some(t) => RawSubscriber::with_schema(node, topic, &t.get().schema, qos),
            None => RawSubscriber::create(node, topic, qos),
        }
        .map_err(err::<TopicError>)?;
        sub.set_wait_mode(mode);
        let ty = match ty {
            Some(t) => t,
            None => match sub.schema() {
                Some(Ok(s)) => Py::new(py, MessageType::new(s.clone()))?,
                Some(Err(e)) => {
                    return Err(err::<TopicError>(format!(
                        "topic {topic}: its recorded schema cannot be used: {e}"
                    )))
                }
                None => {
                    return Err(err::<TopicError>(format!(
                        "topic {topic} (type {}) records no schema; pass the message type",
                        sub.type_info().name
                    )))
                }
            },
        };
        Ok(Subscription {
            inner: Affine::new(sub, self.inner.graveyard(), "Subscription"),
            ty,
        })
    }

    /// A client of the service `name` of type `type_name`.
    #[pyo3(signature = (name, type_name, request, response, max_payload=None))]
    fn _client(
        &self,
        name: &str,
        type_name: &str,
        request: &MessageType,
        response: &MessageType,
        max_payload: Option<usize>,
    ) -> PyResult<crate::service::Client> {
        crate::service::client(self, name, (type_name, request, response), max_payload)
    }

    /// A server of the service `name` of type `type_name`.
    #[pyo3(signature = (name, type_name, request, response, max_payload=None))]
    fn _server(
        &self,
        name: &str,
        type_name: &str,
        request: &MessageType,
        response: &MessageType,
        max_payload: Option<usize>,
    ) -> PyResult<crate::service::Server> {
        crate::service::server(self, name, (type_name, request, response), max_payload)
    }

    fn __repr__(&self) -> PyResult<String> {
        Ok(format!("Node({:?})", self.inner.get()?.name()))
    }
}

/// Publishes one message type on one topic.
#[pyclass(frozen, module = "nerve._nerve")]
pub struct Publisher {
    inner: Affine<RawPublisher>,
    ty: Py<MessageType>,
}

impl Publisher {
    /// Sends `data` (the payload bytes) as one sample.
    pub(crate) fn publish_raw(&self, data: &[u8]) -> PyResult<()> {
        self.inner
            .get()?
            .publish_bytes(data)
            .map_err(err::<PublishError>)
    }
}

#[pymethods]
impl Publisher {
    /// The message type.
    #[getter]
    fn message_type(&self, py: Python<'_>) -> Py<MessageType> {
        self.ty.clone_ref(py)
    }

    /// The topic name.
    #[getter]
    fn topic(&self) -> PyResult<String> {
        Ok(self.inner.get()?.topic().to_string())
    }

    /// Loans a sample of `nbytes` payload bytes in shared memory (head zeroed).
    fn loan(&self, nbytes: usize) -> PyResult<Buffer> {
        let raw = self.inner.get()?;
        let mut loan = raw.loan(nbytes).map_err(err::<LoanError>)?;
        let b = loan.bytes_mut();
        let mem = (b.as_ptr(), b.len());
        let gy = self.inner.graveyard();
        Ok(Buffer::new(
            Owner::Loan(Affine::new(loan, gy, "loan")),
            mem,
            true,
            None,
            "loan",
        ))
    }

    /// Sends a loan of this publisher. Refused while views of it (numpy arrays, nested
    /// messages) exist, so nothing can write to a sample after it is sent.
    fn send(&self, buf: &Bound<'_, Buffer>) -> PyResult<()> {
        let raw = self.inner.get()?;
        // references: the caller's variable and this argument's own
        let owner = buf.get().take()?;
        let Owner::Loan(loan) = owner else {
            return Err(err::<PublishError>(
                "only a loan of a publisher can be sent; publish() copies other messages",
            ));
        };
        raw.send(loan.into_inner()?).map_err(err::<PublishError>)
    }

    /// Copies `buf` (a message of this type) into a new sample and sends it.
    fn publish_buffer(&self, buf: &Buffer) -> PyResult<()> {
        let data = buf.to_vec()?;
        self.publish_bytes(&data)
    }

    /// Sends `data` (the payload bytes: head, then slice elements) as one sample.
    fn publish_bytes(&self, data: &[u8]) -> PyResult<()> {
        self.publish_raw(data)
    }

    /// Waits (GIL released) until at least `n` subscribers are connected.
    #[pyo3(signature = (n=1, timeout=1.0))]
    fn wait_for_subscribers(&self, py: Python<'_>, n: usize, timeout: f64) -> PyResult<bool> {
        let raw = SameThread(self.inner.get()?);
        blocking(
            py,
            crate::wait::duration(timeout, "timeout")?,
            move |slice| {
                let r = &raw;
                Ok(r.0.wait_for_subscribers(n, slice).then_some(true))
            },
        )
        .map(|r| r.unwrap_or(false))
    }

    fn __repr__(&self) -> PyResult<String> {
        Ok(format!(
            "Publisher({}, {})",
            self.inner.get()?.topic(),
            self.inner.get()?.type_info().name
        ))
    }
}

/// Receives one topic.
#[pyclass(frozen, module = "nerve._nerve")]
pub struct Subscription {
    pub(crate) inner: Affine<RawSubscriber>,
    ty: Py<MessageType>,
}

pub(crate) fn sample_buffer(s: RawSample, gy: &Arc<Graveyard>) -> Buffer {
    let b = s.bytes();
    let mem = (b.as_ptr(), b.len());
    let h = *s.header();
    Buffer::new(
        Owner::Sample(Affine::new(s, gy, "sample")),
        mem,
        false,
        Some(h),
        "sample",
    )
}

#[pymethods]
impl Subscription {
    /// The message type.
    #[getter]
    fn message_type(&self, py: Python<'_>) -> Py<MessageType> {
        self.ty.clone_ref(py)
    }

    /// The next sample if one is queued.
    fn try_recv(&self) -> PyResult<Option<Buffer>> {
        let sub = self.inner.get()?;
        let s = sub.try_recv().map_err(err::<RecvError>)?;
        Ok(s.map(|s| sample_buffer(s, self.inner.graveyard())))
    }

    /// Waits up to `timeout` seconds (None: forever) for the next sample, with the GIL
    /// released; Ctrl-C interrupts it within 50 ms.
    #[pyo3(signature = (timeout=None))]
    fn recv(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Buffer>> {
        let sub = self.inner.get()?;
        if let Some(s) = sub.try_recv().map_err(err::<RecvError>)? {
            return Ok(Some(sample_buffer(s, self.inner.graveyard())));
        }
        let limit = match timeout {
            Some(t) => crate::wait::duration(t, "timeout")?,
            None => Duration::MAX,
        };
        let shared = SameThread(sub);
        let got = blocking(py, limit, move |slice| {
            let s = &shared;
            s.0.recv_timeout(slice)
                .map(|r| r.map(SameThread))
                .map_err(err::<RecvError>)
        })?;
        Ok(got.map(|s| sample_buffer(s.0, self.inner.graveyard())))
    }

    /// Counters: received, lost, malformed, in_process, network, network_refused.
    fn stats(&self) -> PyResult<std::collections::HashMap<&'static str, u64>> {
        let s = self.inner.get()?.stats();
        Ok([
            ("received", s.received),
            ("lost", s.lost),
            ("malformed", s.malformed),
            ("in_process", s.in_process),
            ("network", s.network),
            ("network_refused", s.network_refused),
        ]
        .into_iter()
        .collect())
    }

    /// Publishers connected now.
    fn publisher_count(&self) -> PyResult<usize> {
        Ok(self.inner.get()?.publisher_count())
    }

    fn __repr__(&self) -> String {
        format!("Subscription({})", self.ty.get().schema.name)
    }
}
