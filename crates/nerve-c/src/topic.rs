//! QoS, publishers with loans, subscribers and samples.

use crate::context::NodeObj;
use crate::handle::{self, Kind};
use crate::status::{
    bytes, c_str, err, guard, loan_status, nerve_status_t, nerve_status_t::*, out, publish_status,
    Error, Result,
};
use crate::types::{
    nerve_loan_t, nerve_node_t, nerve_publisher_t, nerve_sample_t, nerve_subscriber_t,
};
use nerve::message::schema::Schema;
use nerve::{Overflow, RawLoan, RawPublisher, RawSample, RawSubscriber, SampleHeader};
use std::ffi::{c_char, c_void};
use std::rc::Rc;
use std::time::Duration;

/// A topic's quality of service (see the Rust `nerve::Qos`). Fill it with
/// `nerve_qos_default` (or `_sensor`, `_reliable`, `_latched`), then adjust.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct nerve_qos_t {
    /// Samples queued per subscriber (at least 1).
    pub depth: u32,
    /// Samples kept for late joiners.
    pub history: u32,
    /// Every sample delivered: a publisher waits up to `timeout_ns` for a full queue.
    /// False: the oldest queued sample is dropped.
    pub reliable: bool,
    /// How long a reliable publisher waits for room.
    pub timeout_ns: u64,
    /// Largest payload in bytes (0: the default).
    pub max_payload: u64,
    /// Samples a subscriber may hold at once (0: the default).
    pub max_borrowed: u32,
    /// Samples a publisher may have loaned at once (0: the default).
    pub max_loans: u32,
}

impl From<&nerve::Qos> for nerve_qos_t {
    fn from(q: &nerve::Qos) -> nerve_qos_t {
        let (reliable, timeout_ns) = match q.overflow {
            Overflow::BackPressure { timeout } => (true, timeout.as_nanos() as u64),
            _ => (false, 1_000_000_000),
        };
        nerve_qos_t {
            depth: q.depth as u32,
            history: q.history as u32,
            reliable,
            timeout_ns,
            max_payload: 0,
            max_borrowed: 0,
            max_loans: 0,
        }
    }
}

/// The Rust QoS of a C one (null: the default).
fn qos_of(q: *const nerve_qos_t) -> Result<nerve::Qos> {
    // SAFETY: null or a valid `nerve_qos_t` (the documented contract).
    let Some(q) = (unsafe { q.as_ref() }) else {
        return Ok(nerve::Qos::default());
    };
    if q.depth == 0 {
        return Err(Error::new(
            NERVE_ERR_INVALID_ARGUMENT,
            "qos.depth must be at least 1",
        ));
    }
    let mut r = nerve::Qos::default()
        .depth(q.depth as usize)
        .history(q.history as usize);
    if q.reliable {
        r = r.overflow(Overflow::BackPressure {
            timeout: Duration::from_nanos(q.timeout_ns),
        });
    }
    if q.max_payload > 0 {
        let m = usize::try_from(q.max_payload)
            .map_err(|_| Error::new(NERVE_ERR_INVALID_ARGUMENT, "qos.max_payload is too large"))?;
        let initial = r.initial_payload.min(m);
        r = r.payload(initial, m);
    }
    if q.max_borrowed > 0 {
        r.max_borrowed = q.max_borrowed as usize;
    }
    if q.max_loans > 0 {
        r.max_loans = q.max_loans as usize;
    }
    Ok(r)
}

/// The default QoS: depth 4, drop-oldest.
///
/// # Safety
/// `qos` is null (ignored) or points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_qos_default(qos: *mut nerve_qos_t) {
    // SAFETY: null or writable (the documented contract).
    if let Some(q) = unsafe { qos.as_mut() } {
        *q = nerve_qos_t::from(&nerve::Qos::default());
    }
}

/// Sensor streams: newest wins, a slow reader never slows the publisher.
///
/// # Safety
/// `qos` is null (ignored) or points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_qos_sensor(qos: *mut nerve_qos_t) {
    // SAFETY: null or writable (the documented contract).
    if let Some(q) = unsafe { qos.as_mut() } {
        *q = nerve_qos_t::from(&nerve::Qos::sensor());
    }
}

/// Every sample delivered: the publisher waits up to 1 s for a full queue.
///
/// # Safety
/// `qos` is null (ignored) or points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_qos_reliable(qos: *mut nerve_qos_t) {
    // SAFETY: null or writable (the documented contract).
    if let Some(q) = unsafe { qos.as_mut() } {
        *q = nerve_qos_t::from(&nerve::Qos::reliable());
    }
}

/// The last sample kept for late joiners.
///
/// # Safety
/// `qos` is null (ignored) or points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_qos_latched(qos: *mut nerve_qos_t) {
    // SAFETY: null or writable (the documented contract).
    if let Some(q) = unsafe { qos.as_mut() } {
        *q = nerve_qos_t::from(&nerve::Qos::latched());
    }
}

/// Decodes and checks a schema argument.
pub(crate) fn schema_arg(text: *const c_char, what: &str) -> Result<Schema> {
    let text = c_str(text, what)?;
    Schema::decode(text).map_err(|e| Error::new(NERVE_ERR_SCHEMA, format!("{what}: {e}")))
}

/// Fails unless `schema` is the type the caller compiled against (`expected_hash`, 0 to
/// skip): a generated header out of date with its schema text.
pub(crate) fn check_hash(schema: &Schema, expected_hash: u64) -> Result<()> {
    if expected_hash != 0 && schema.layout_hash != expected_hash {
        return Err(Error::new(
            NERVE_ERR_TYPE_MISMATCH,
            format!(
                "type {}: the schema describes layout {:#018x} but the caller's struct is \
                 {:#018x} (regenerate its header)",
                schema.name, schema.layout_hash, expected_hash
            ),
        ));
    }
    Ok(())
}

/// A publisher in the table.
#[derive(Clone)]
pub(crate) struct Pub(pub(crate) Rc<RawPublisher>);

/// A subscriber in the table.
#[derive(Clone)]
pub(crate) struct Sub(pub(crate) Rc<RawSubscriber>);

/// A loan in the table: the sample and the publisher that sends it.
pub(crate) struct Loan {
    publisher: Rc<RawPublisher>,
    loan: RawLoan,
}

/// Creates a publisher of the type `schema` (a `nerve-schema/1` text) on `topic`
/// (absolute, relative to the node's namespace, or private `~/x`; remap rules apply:
/// `nerve_publisher_topic_name` tells the result). A
/// topic of another type fails with `NERVE_ERR_TOPIC` naming both types and layouts;
/// `expected_hash` (0: unchecked) must equal the schema's layout hash.
///
/// # Safety
/// `topic` and `schema` are NUL-terminated; `qos` is null or valid; `out_pub` writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_publisher_create(
    node: nerve_node_t,
    topic: *const c_char,
    schema: *const c_char,
    expected_hash: u64,
    qos: *const nerve_qos_t,
    out_pub: *mut nerve_publisher_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_pub, "out_pub")?;
        let topic = c_str(topic, "topic")?;
        let schema = schema_arg(schema, "schema")?;
        check_hash(&schema, expected_hash)?;
        let qos = qos_of(qos)?;
        let (n, ctx) = handle::get::<NodeObj>(node.id, Kind::Node)?;
        let p = RawPublisher::create(&n.0, topic, &schema, qos).map_err(err(NERVE_ERR_TOPIC))?;
        slot.id = handle::insert(Kind::Publisher, ctx, Pub(Rc::new(p)))?;
        Ok(NERVE_OK)
    })
}

/// Copies the publisher's resolved topic name (namespace and remap rules applied, e.g.
/// `/robot1/chatter` for `chatter`) into `buf` (`cap` bytes, NUL terminated); `needed`
/// (may be null) receives its length plus one.
///
/// # Safety
/// `buf` points to `cap` writable bytes (or is null with `cap` 0); `needed` is null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_publisher_topic_name(
    publisher: nerve_publisher_t,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let name = handle::with(publisher.id, Kind::Publisher, |p: &Pub, _| {
            p.0.topic().to_string()
        })?;
        // SAFETY: forwarded contract of this function.
        unsafe { crate::context::copy_str(&name, buf, cap, needed) }
    })
}

/// Releases a publisher handle (loans in flight keep it alive until sent or dropped).
/// Any thread may call it: from another thread than the owner's the release is done
/// at the owner's next call or executor spin (a no-op if the owner has exited).
#[no_mangle]
pub extern "C" fn nerve_publisher_destroy(publisher: nerve_publisher_t) -> nerve_status_t {
    guard(|| handle::release(publisher.id, Kind::Publisher).map(|_| NERVE_OK))
}

/// Loans a sample of `len` payload bytes (head, then slice elements) in shared memory:
/// `*data` points to it (8-byte aligned, zeroed head) until `nerve_sample_send` or
/// `nerve_loan_discard`.
///
/// # Safety
/// `out_loan` and `data` point to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_publisher_loan(
    publisher: nerve_publisher_t,
    len: usize,
    out_loan: *mut nerve_loan_t,
    data: *mut *mut c_void,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_loan, "out_loan")?;
        let data = out(data, "data")?;
        // the loan is written straight into its slot of the table (the fast path)
        let made = handle::derive(
            publisher.id,
            Kind::Publisher,
            Kind::Loan,
            |p: &Pub| {
                let loan =
                    p.0.loan(len)
                        .map_err(|e| Error::new(loan_status(&e, NERVE_ERR_LOAN), e.to_string()))?;
                Ok(Some(Loan {
                    publisher: p.0.clone(),
                    loan,
                }))
            },
            |l: &mut Loan| l.loan.bytes_mut().as_mut_ptr(),
        )?;
        if let Some((id, ptr)) = made {
            slot.id = id;
            // the loan owns its payload; the caller writes it through this pointer
            *data = ptr.cast();
        }
        Ok(NERVE_OK)
    })
}

/// Sends a loan; the loan handle is released (using it again is
/// `NERVE_ERR_STALE_HANDLE`), whether or not the send succeeds.
#[no_mangle]
pub extern "C" fn nerve_sample_send(loan: nerve_loan_t) -> nerve_status_t {
    guard(|| {
        let (l, _) = handle::remove::<Loan>(loan.id, Kind::Loan)?;
        l.publisher
            .send(l.loan)
            .map_err(|e| Error::new(publish_status(&e), e.to_string()))?;
        Ok(NERVE_OK)
    })
}

/// Returns a loan to the pool unsent.
#[no_mangle]
pub extern "C" fn nerve_loan_discard(loan: nerve_loan_t) -> nerve_status_t {
    guard(|| handle::release_typed::<Loan>(loan.id, Kind::Loan).map(|_| NERVE_OK))
}

/// Copies `len` bytes (a payload of the publisher's type) into a new sample and sends it.
///
/// # Safety
/// `data` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn nerve_publisher_publish(
    publisher: nerve_publisher_t,
    data: *const c_void,
    len: usize,
) -> nerve_status_t {
    guard(|| {
        let payload = bytes(data.cast(), len, "data")?;
        handle::with(publisher.id, Kind::Publisher, |p: &Pub, _| {
            p.0.publish_bytes(payload)
        })?
        .map_err(|e| Error::new(publish_status(&e), e.to_string()))?;
        Ok(NERVE_OK)
    })
}

/// Subscribers connected now.
///
/// # Safety
/// `count` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_publisher_subscriber_count(
    publisher: nerve_publisher_t,
    count: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let c = out(count, "count")?;
        *c = handle::with(publisher.id, Kind::Publisher, |p: &Pub, _| {
            p.0.subscriber_count()
        })?;
        Ok(NERVE_OK)
    })
}

/// Waits up to `timeout_ns` until at least `n` subscribers are connected:
/// `NERVE_OK`, or `NERVE_NOTHING` when the time ran out.
#[no_mangle]
pub extern "C" fn nerve_publisher_wait_for_subscribers(
    publisher: nerve_publisher_t,
    n: usize,
    timeout_ns: u64,
) -> nerve_status_t {
    guard(|| {
        let (p, _) = handle::get::<Pub>(publisher.id, Kind::Publisher)?;
        Ok(
            if p.0
                .wait_for_subscribers(n, Duration::from_nanos(timeout_ns))
            {
                NERVE_OK
            } else {
                NERVE_NOTHING
            },
        )
    })
}

/// Creates a subscriber of `topic` (resolved as for `nerve_publisher_create`). With
/// `schema` null the topic must exist and record
/// its schema, and its own type is used; otherwise a topic of another type fails with
/// `NERVE_ERR_TOPIC` naming both.
///
/// # Safety
/// `topic` is NUL-terminated, `schema` null or NUL-terminated; `qos` null or valid;
/// `out_sub` writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_subscriber_create(
    node: nerve_node_t,
    topic: *const c_char,
    schema: *const c_char,
    expected_hash: u64,
    qos: *const nerve_qos_t,
    out_sub: *mut nerve_subscriber_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_sub, "out_sub")?;
        let topic = c_str(topic, "topic")?;
        let qos = qos_of(qos)?;
        let (n, ctx) = handle::get::<NodeObj>(node.id, Kind::Node)?;
        let s = if schema.is_null() {
            RawSubscriber::create(&n.0, topic, qos)
        } else {
            let schema = schema_arg(schema, "schema")?;
            check_hash(&schema, expected_hash)?;
            RawSubscriber::with_schema(&n.0, topic, &schema, qos)
        }
        .map_err(err(NERVE_ERR_TOPIC))?;
        slot.id = handle::insert(Kind::Subscriber, ctx, Sub(Rc::new(s)))?;
        Ok(NERVE_OK)
    })
}

/// Copies the subscriber's resolved topic name into `buf`, as
/// `nerve_publisher_topic_name`.
///
/// # Safety
/// `buf` points to `cap` writable bytes (or is null with `cap` 0); `needed` is null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_subscriber_topic_name(
    sub: nerve_subscriber_t,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let name = handle::with(sub.id, Kind::Subscriber, |s: &Sub, _| {
            s.0.topic().to_string()
        })?;
        // SAFETY: forwarded contract of this function.
        unsafe { crate::context::copy_str(&name, buf, cap, needed) }
    })
}

/// Releases a subscriber handle. Samples taken from it stay readable until released.
#[no_mangle]
pub extern "C" fn nerve_subscriber_destroy(sub: nerve_subscriber_t) -> nerve_status_t {
    guard(|| handle::release(sub.id, Kind::Subscriber).map(|_| NERVE_OK))
}

/// Where a received sample is and what its header says.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct nerve_sample_view_t {
    /// The payload (head, then slice elements), 8-byte aligned; read-only.
    pub data: *const c_void,
    /// Payload bytes.
    pub len: usize,
    /// Slice elements.
    pub elems: usize,
    /// Sequence number per publisher, from 1.
    pub seq: u64,
    /// Publish time, monotonic clock (ns).
    pub stamp_ns: u64,
    /// Publish time, wall clock (ns since the Unix epoch).
    pub wall_ns: i64,
    /// The publisher's id.
    pub publisher_id: u64,
}

pub(crate) fn view_of(data: &[u8], elems: usize, h: &SampleHeader) -> nerve_sample_view_t {
    nerve_sample_view_t {
        data: data.as_ptr().cast(),
        len: data.len(),
        elems,
        seq: h.seq,
        stamp_ns: h.publish_mono_ns,
        wall_ns: h.publish_wall_ns,
        publisher_id: h.publisher_id,
    }
}

/// Slices of the longest wait, so a wait forever still sees a shutdown request.
const WAIT_SLICE: Duration = Duration::from_millis(200);

/// Runs `step` (a wait of at most the slice it is given) until it yields something,
/// `timeout_ns` passes (negative: forever, 0: one try without waiting) or a shutdown
/// is requested (`nerve_shutdown_requested`).
pub(crate) fn wait_loop<T>(
    timeout_ns: i64,
    mut step: impl FnMut(Duration) -> Result<Option<T>>,
) -> Result<Option<T>> {
    if timeout_ns == 0 {
        return step(Duration::ZERO);
    }
    let end = (timeout_ns > 0).then(|| nerve::mono_ns().saturating_add(timeout_ns as u64));
    loop {
        let left = match end {
            Some(e) => Duration::from_nanos(e.saturating_sub(nerve::mono_ns())),
            None => WAIT_SLICE,
        };
        if let Some(v) = step(left.min(WAIT_SLICE))? {
            return Ok(Some(v));
        }
        if left <= WAIT_SLICE || nerve::shutdown::requested() {
            return Ok(None);
        }
    }
}

/// Takes the next sample: waits up to `timeout_ns` (0: only what is queued, negative:
/// until one comes or a shutdown is requested). `NERVE_OK` with the sample and its view,
/// or `NERVE_NOTHING`.
///
/// # Safety
/// `out_sample` and `view` point to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_subscriber_take(
    sub: nerve_subscriber_t,
    timeout_ns: i64,
    out_sample: *mut nerve_sample_t,
    view: *mut nerve_sample_view_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_sample, "out_sample")?;
        let view = out(view, "view")?;
        // what is queued, written straight into its slot of the table (the fast path)
        let inspect = |s: &mut RawSample| view_of(s.bytes(), s.elems(), s.header());
        let queued = handle::derive(
            sub.id,
            Kind::Subscriber,
            Kind::Sample,
            |s: &Sub| s.0.try_recv().map_err(err(NERVE_ERR_RECV)),
            inspect,
        )?;
        if let Some((id, v)) = queued {
            slot.id = id;
            *view = v;
            return Ok(NERVE_OK);
        }
        if timeout_ns == 0 {
            return Ok(NERVE_NOTHING);
        }
        let (s, ctx) = handle::get::<Sub>(sub.id, Kind::Subscriber)?;
        let got = wait_loop(timeout_ns, |d| {
            s.0.recv_timeout(d).map_err(err(NERVE_ERR_RECV))
        })?;
        let Some(mut sample) = got else {
            return Ok(NERVE_NOTHING);
        };
        *view = inspect(&mut sample);
        slot.id = handle::insert(Kind::Sample, ctx, sample)?;
        Ok(NERVE_OK)
    })
}

/// The view of a sample taken earlier.
///
/// # Safety
/// `view` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_sample_view(
    sample: nerve_sample_t,
    view: *mut nerve_sample_view_t,
) -> nerve_status_t {
    guard(|| {
        let v = out(view, "view")?;
        *v = handle::with(sample.id, Kind::Sample, |s: &RawSample, _| {
            view_of(s.bytes(), s.elems(), s.header())
        })?;
        Ok(NERVE_OK)
    })
}

/// Releases a sample (its memory returns to the publisher's pool).
#[no_mangle]
pub extern "C" fn nerve_sample_release(sample: nerve_sample_t) -> nerve_status_t {
    guard(|| handle::release_typed::<RawSample>(sample.id, Kind::Sample).map(|_| NERVE_OK))
}

/// Publishers connected now.
///
/// # Safety
/// `count` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_subscriber_publisher_count(
    sub: nerve_subscriber_t,
    count: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let c = out(count, "count")?;
        *c = handle::with(sub.id, Kind::Subscriber, |s: &Sub, _| s.0.publisher_count())?;
        Ok(NERVE_OK)
    })
}

/// Counters of a subscriber.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct nerve_subscriber_stats_t {
    /// Samples received.
    pub received: u64,
    /// Samples lost (queue overflow, gaps in sequence numbers).
    pub lost: u64,
    /// Malformed samples dropped.
    pub malformed: u64,
}

/// A subscriber's counters.
///
/// # Safety
/// `stats` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_subscriber_stats(
    sub: nerve_subscriber_t,
    stats: *mut nerve_subscriber_stats_t,
) -> nerve_status_t {
    guard(|| {
        let o = out(stats, "stats")?;
        let s = handle::with(sub.id, Kind::Subscriber, |s: &Sub, _| s.0.stats())?;
        *o = nerve_subscriber_stats_t {
            received: s.received,
            lost: s.lost,
            malformed: s.malformed,
        };
        Ok(NERVE_OK)
    })
}

/// Checks a message type's schema text and, when its hash is the unsealed marker (all
/// zeros, as `NERVE_MESSAGE` writes it), fills in the layout hash the Rust derive computes
/// (a C++ type's hash is not known at compile time); any other hash must match. The
/// sealed text goes to `buf`, the hash to `hash`.
///
/// # Safety
/// `text` is NUL-terminated; `buf` holds `cap` writable bytes; `needed` and `hash` are
/// null or writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_schema_seal(
    text: *const c_char,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
    hash: *mut u64,
) -> nerve_status_t {
    guard(|| {
        let t = c_str(text, "text")?;
        let sealed = crate::codegen::seal(t).map_err(err(NERVE_ERR_SCHEMA))?;
        // SAFETY: null or writable (the documented contract).
        if let Some(h) = unsafe { hash.as_mut() } {
            *h = sealed.layout_hash;
        }
        // SAFETY: forwarded contract.
        unsafe { crate::context::copy_str(&sealed.encode(), buf, cap, needed) }
    })
}
