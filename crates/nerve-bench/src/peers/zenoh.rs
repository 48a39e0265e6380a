//! Zenoh queryable/get echo, two peers over loopback TCP.
//!
//! Both sides run in Zenoh `peer` mode with multicast and gossip scouting disabled: the server
//! listens on `tcp/127.0.0.1:<port>` and connects to nothing, the client connects to that one
//! endpoint and listens on nothing. Nothing talks to anything but loopback.
//!
//! Per call the client fills a fresh `Vec<u8>` (it becomes the query payload), sends it with
//! `Session::get` (consolidation `None`, so the reply is handed over on arrival instead of at
//! the end of the query), and checks the payload of the first reply in place. The reply is
//! taken in a callback on Zenoh's receive task and handed to the calling thread through a
//! slot (a mutex and a condition variable), as the server answers in its callback: the
//! default FIFO channel would add a hand-over to and from a channel per call. The server
//! copies the query payload into a fresh `Vec<u8>` and replies with it. An empty query
//! payload is the stop signal, so calls with `len == 0` are refused.
//!
//! Two configurations: plain (`shm` off), as Zenoh runs between machines, and with Zenoh
//! 1.10's shared memory (`shm` on, as a competent user would choose on one host): both
//! sessions enable it, the client writes its request into a buffer of its own
//! shared-memory provider and the server its response into one of its own, so only
//! references cross the socket.

use std::borrow::Cow;
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use zenoh::bytes::ZBytes;
use zenoh::key_expr::KeyExpr;
use zenoh::query::{ConsolidationMode, Query};
use zenoh::shm::{BlockOn, GarbageCollect, ShmProvider, ShmProviderBuilder};
use zenoh::Wait;
use zenoh::{Config, Session};

use crate::harness::PeerError;
use crate::peers::echo::{Check, EchoClient, Fill};

/// System name used in errors.
const SYSTEM: &str = "zenoh";
/// Timeout of one call (the query's own timeout; the reply wait adds a little slack).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Slack on top of a query's own timeout when waiting for its reply.
const RECV_SLACK: Duration = Duration::from_secs(1);
/// Timeout of a readiness probe inside [`Client::connect`].
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// How long [`Client::stop`] waits for the server to acknowledge.
const STOP_TIMEOUT: Duration = Duration::from_secs(2);

fn setup(reason: String) -> PeerError {
    PeerError::setup(SYSTEM, reason)
}

fn call_err(reason: String) -> PeerError {
    PeerError::call(SYSTEM, reason)
}

/// Builds a loopback-only peer configuration.
///
/// `listen`/`connect` are JSON5 arrays of endpoints. Multicast scouting and gossip are off, so
/// the only session is the configured TCP link; connection retries start at 20 ms (instead of
/// 1 s) so a client started before its server links up quickly.
pub fn loopback_config(listen: &str, connect: &str) -> Result<Config, PeerError> {
    let mut c = Config::default();
    let entries = [
        ("mode", r#""peer""#),
        ("scouting/multicast/enabled", "false"),
        ("scouting/gossip/enabled", "false"),
        ("listen/endpoints", listen),
        ("connect/endpoints", connect),
        // plain Zenoh: no implicit shared memory for large messages (the stream suite
        // measures Zenoh with shared memory separately)
        ("transport/shared_memory/enabled", "false"),
        (
            "connect/retry",
            "{period_init_ms: 20, period_max_ms: 200, period_increase_factor: 1.5}",
        ),
    ];
    for (key, value) in entries {
        c.insert_json5(key, value)
            .map_err(|e| setup(format!("config {key} = {value}: {e}")))?;
    }
    Ok(c)
}

fn endpoint(port: u16) -> String {
    format!(r#"["tcp/127.0.0.1:{port}"]"#)
}

/// The loopback configuration, with Zenoh's shared memory on or off.
fn config(listen: &str, connect: &str, shm: bool) -> Result<Config, PeerError> {
    let mut c = loopback_config(listen, connect)?;
    c.insert_json5("transport/shared_memory/enabled", &shm.to_string())
        .map_err(|e| setup(format!("config transport/shared_memory/enabled: {e}")))?;
    Ok(c)
}

/// A shared-memory provider for buffers of up to `max` bytes, a few in flight.
fn provider(max: usize) -> Result<ShmProvider<zenoh::shm::PosixShmProviderBackend>, PeerError> {
    ShmProviderBuilder::default_backend(4 * max.max(4096))
        .wait()
        .map_err(|e| setup(format!("shared-memory provider of {max} bytes: {e}")))
}

/// A buffer of `len` bytes from `provider` (waiting for garbage collection when full).
fn shm_buffer(
    provider: &ShmProvider<zenoh::shm::PosixShmProviderBackend>,
    len: usize,
) -> Result<zenoh::shm::ZShmMut, String> {
    provider
        .alloc(len)
        .with_policy::<BlockOn<GarbageCollect>>()
        .wait()
        .map_err(|e| format!("shared-memory allocation of {len} bytes: {e:?}"))
}

fn key_expr(key: &str) -> Result<KeyExpr<'static>, PeerError> {
    KeyExpr::try_from(key.to_owned()).map_err(|e| setup(format!("bad key expression {key:?}: {e}")))
}

/// What the queryable callback tells [`serve`]'s thread.
enum Event {
    /// An empty query arrived and was answered: stop serving.
    Stop,
    /// Replying failed: stop serving with this error.
    Failed(String),
}

/// Answers one query: copies its payload into a fresh buffer (from `shm` when given) and
/// replies with it.
fn answer(
    query: Query,
    key: &KeyExpr<'static>,
    shm: Option<&ShmProvider<zenoh::shm::PosixShmProviderBackend>>,
) -> Option<Event> {
    let (response, stop): (ZBytes, bool) = match query.payload() {
        None => (ZBytes::default(), true),
        Some(p) if p.is_empty() => (ZBytes::default(), true),
        Some(p) => match (p.to_bytes(), shm) {
            // Shared memory: one copy into a buffer of the server's provider.
            (bytes, Some(provider)) => match shm_buffer(provider, bytes.len()) {
                Ok(mut buf) => {
                    buf.copy_from_slice(&bytes);
                    (buf.into(), false)
                }
                Err(e) => return Some(Event::Failed(e)),
            },
            // Contiguous payload: one copy into the response buffer.
            (Cow::Borrowed(s), None) => (s.to_vec().into(), false),
            // Fragmented payload: `to_bytes` already copied it into a fresh buffer, which
            // becomes the response (still exactly one copy).
            (Cow::Owned(v), None) => (v.into(), false),
        },
    };
    if let Err(e) = query.reply(key.clone(), response).wait() {
        return Some(Event::Failed(format!("reply failed: {e}")));
    }
    // Dropping the query sends the final response, which closes the client's reply channel.
    drop(query);
    stop.then_some(Event::Stop)
}

/// Serves echo queries on `key` with a Zenoh peer listening on `tcp/127.0.0.1:<port>`.
///
/// Calls `ready` once the queryable is declared. Runs until the process is killed, or until a
/// query with an empty payload arrives (answered with an empty reply, then `Ok(())`), or until
/// a reply fails (`Err`).
///
/// Queries are answered in a callback, i.e. directly on Zenoh's receive task, which avoids
/// a hand-over to another thread: a `FifoChannel` + `recv()` loop costs one more thread
/// wake-up per call (measured on a 2-core VM, 64 B median round trip: callback ~306 us,
/// channel ~452 us). Per query the payload is copied into a new `Vec<u8>` that becomes the
/// reply payload.
///
/// With `shm`, responses of up to `max_payload` bytes are written into the server's own
/// shared-memory provider.
pub fn serve(
    port: u16,
    key: &str,
    shm: bool,
    max_payload: usize,
    ready: &mut dyn FnMut(),
) -> Result<(), PeerError> {
    let ke = key_expr(key)?;
    let provider = shm.then(|| provider(max_payload)).transpose()?;
    let session = zenoh::open(config(&endpoint(port), "[]", shm)?)
        .wait()
        .map_err(|e| {
            setup(format!(
                "cannot open a session on tcp/127.0.0.1:{port}: {e}"
            ))
        })?;
    let (tx, rx) = mpsc::channel::<Event>();
    let reply_key = ke.clone();
    let queryable = session
        .declare_queryable(&ke)
        .callback(move |query| {
            if let Some(event) = answer(query, &reply_key, provider.as_ref()) {
                let _ = tx.send(event);
            }
        })
        .wait()
        .map_err(|e| setup(format!("cannot declare a queryable on {key}: {e}")))?;
    ready();
    let outcome = rx.recv();
    let _ = queryable.undeclare().wait();
    let _ = session.close().wait();
    match outcome {
        Ok(Event::Stop) => Ok(()),
        Ok(Event::Failed(reason)) => Err(call_err(reason)),
        Err(_) => Err(call_err("the queryable stopped unexpectedly".into())),
    }
}

/// What one query's reply callback hands to the calling thread.
enum Outcome {
    /// The query is in flight.
    Waiting,
    /// Its first reply (an error reply as `Err` with its text).
    Reply(Result<ZBytes, String>),
    /// It ended without a reply (no queryable reachable, or Zenoh's own timeout).
    Ended,
}

/// Where the reply callback of the current query leaves its outcome. Replies and ends of
/// earlier queries (one that timed out here may still answer) carry an older number and are
/// ignored.
struct Slot {
    state: Mutex<(u64, Outcome)>,
    ready: Condvar,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            state: Mutex::new((0, Outcome::Waiting)),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, (u64, Outcome)> {
        // the state is a plain value, valid whatever a panicking holder left
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts query `seq`.
    fn start(&self, seq: u64) {
        *self.lock() = (seq, Outcome::Waiting);
    }

    /// Records `outcome` for query `seq` if it is the current one and has none yet.
    fn settle(&self, seq: u64, outcome: Outcome) {
        let mut s = self.lock();
        if s.0 == seq && matches!(s.1, Outcome::Waiting) {
            s.1 = outcome;
            self.ready.notify_one();
        }
    }

    /// Waits up to `timeout` for query `seq`'s outcome.
    fn wait(&self, seq: u64, timeout: Duration) -> Outcome {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        loop {
            if s.0 == seq && !matches!(s.1, Outcome::Waiting) {
                return std::mem::replace(&mut s.1, Outcome::Waiting);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Outcome::Waiting;
            }
            s = self
                .ready
                .wait_timeout(s, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// The reply callback's state: it settles its query on the first reply, and on being
/// dropped (Zenoh drops a query's callback when the query ends) settles it as ended.
struct ReplyHandler {
    slot: Arc<Slot>,
    seq: u64,
}

impl ReplyHandler {
    fn reply(&self, reply: zenoh::query::Reply) {
        let outcome = match reply.into_result() {
            Ok(sample) => Ok(sample.payload().clone()),
            Err(e) => Err(String::from_utf8_lossy(&e.payload().to_bytes()).into_owned()),
        };
        self.slot.settle(self.seq, Outcome::Reply(outcome));
    }
}

impl Drop for ReplyHandler {
    fn drop(&mut self) {
        self.slot.settle(self.seq, Outcome::Ended);
    }
}

/// Client side of the Zenoh echo: a peer session connected to the server's endpoint.
///
/// Dropping it closes the session (Zenoh bounds the close by a 10 s timeout).
pub struct Client {
    session: Session,
    key: KeyExpr<'static>,
    slot: Arc<Slot>,
    seq: u64,
    /// The client's shared-memory provider, when the session uses shared memory.
    shm: Option<ShmProvider<zenoh::shm::PosixShmProviderBackend>>,
}

impl Client {
    /// Opens a peer session connected to `tcp/127.0.0.1:<port>` and waits, up to `timeout`,
    /// until a probe `get` on `key` (8-byte payload) is answered, so the route to the server's
    /// queryable exists before anything is measured.
    ///
    /// With `shm`, the session uses Zenoh's shared memory and requests of up to
    /// `max_payload` bytes are written into the client's own provider.
    pub fn connect(
        port: u16,
        key: &str,
        shm: bool,
        max_payload: usize,
        timeout: Duration,
    ) -> Result<Client, PeerError> {
        let deadline = Instant::now() + timeout;
        let key = key_expr(key)?;
        let shm = shm.then(|| provider(max_payload)).transpose()?;
        let session = zenoh::open(config("[]", &endpoint(port), shm.is_some())?)
            .wait()
            .map_err(|e| {
                setup(format!(
                    "cannot open a session to tcp/127.0.0.1:{port}: {e}"
                ))
            })?;
        let mut client = Client {
            session,
            key,
            slot: Arc::new(Slot::new()),
            seq: 0,
            shm,
        };
        let mut last = String::from("no probe sent");
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(setup(format!(
                    "no queryable answered on {} within {timeout:?} ({last})",
                    client.key
                )));
            }
            let probe = 0x5a5a_5a5a_5a5a_5a5a_u64.to_le_bytes().to_vec();
            match client.query(probe.into(), left.min(PROBE_TIMEOUT)) {
                Ok(payload) if payload.len() == 8 => return Ok(client),
                Ok(payload) => last = format!("probe answered with {} bytes", payload.len()),
                Err(PeerError::Call { reason, .. }) => last = reason,
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(20).min(left));
        }
    }

    /// Sends one query carrying `payload` and returns the payload of the first reply, taken
    /// in Zenoh's reply callback. No reply within `timeout` (plus 1 s slack), a query that
    /// ended without a reply (no queryable reachable), an error reply and a transport failure
    /// are all `Err`.
    fn query(&mut self, payload: ZBytes, timeout: Duration) -> Result<ZBytes, PeerError> {
        let len = payload.len();
        self.seq += 1;
        let seq = self.seq;
        self.slot.start(seq);
        let handler = ReplyHandler {
            slot: self.slot.clone(),
            seq,
        };
        self.session
            .get(&self.key)
            .payload(payload)
            .consolidation(ConsolidationMode::None)
            .timeout(timeout)
            .callback(move |reply| handler.reply(reply))
            .wait()
            .map_err(|e| call_err(format!("get on {} failed: {e}", self.key)))?;
        match self.slot.wait(seq, timeout + RECV_SLACK) {
            Outcome::Reply(Ok(bytes)) => Ok(bytes),
            Outcome::Reply(Err(text)) => Err(call_err(format!("error reply: {text}"))),
            Outcome::Ended => Err(call_err(format!(
                "the {len}-byte query on {} ended without a reply (no queryable reachable)",
                self.key
            ))),
            Outcome::Waiting => Err(call_err(format!(
                "no reply to a {len}-byte query within {timeout:?}"
            ))),
        }
    }

    /// Tells the server to stop (a query with an empty payload) and waits up to 2 s for its
    /// acknowledgement. Best effort: failures are ignored, the server process is killed by its
    /// owner anyway.
    pub fn stop(&mut self) {
        let _ = self.query(ZBytes::default(), STOP_TIMEOUT);
    }
}

impl EchoClient for Client {
    fn call(&mut self, len: usize, fill: Fill<'_>, check: Check<'_>) -> Result<(), PeerError> {
        if len == 0 {
            return Err(call_err(
                "a zero-length payload is reserved as the stop signal".into(),
            ));
        }
        let request: ZBytes = match &self.shm {
            Some(provider) => {
                let mut buf = shm_buffer(provider, len).map_err(call_err)?;
                fill(&mut buf);
                buf.into()
            }
            None => {
                let mut buf = vec![0u8; len];
                fill(&mut buf);
                buf.into()
            }
        };
        let payload = self.query(request, CALL_TIMEOUT)?;
        // Contiguous payloads are checked where they arrived; a fragmented one is first copied
        // into contiguous memory, which is part of Zenoh's cost.
        let bytes = payload.to_bytes();
        check(&bytes).map_err(|reason| PeerError::BadResponse {
            system: SYSTEM,
            reason,
        })
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.session.close().wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slot_hands_over_the_current_query_only() {
        let slot = Arc::new(Slot::new());
        let short = Duration::from_millis(1);
        slot.start(1);
        // the late end of an earlier query changes nothing
        slot.settle(0, Outcome::Ended);
        assert!(matches!(slot.wait(1, short), Outcome::Waiting));
        slot.settle(1, Outcome::Reply(Ok(ZBytes::from(vec![1u8, 2]))));
        // the callback ending after its reply does not overwrite the reply
        drop(ReplyHandler {
            slot: slot.clone(),
            seq: 1,
        });
        match slot.wait(1, short) {
            Outcome::Reply(Ok(b)) => assert_eq!(&*b.to_bytes(), &[1u8, 2][..]),
            _ => panic!("the reply of query 1 was lost"),
        }
        // a query whose callback ends without a reply has ended
        slot.start(2);
        drop(ReplyHandler {
            slot: slot.clone(),
            seq: 2,
        });
        assert!(matches!(slot.wait(2, short), Outcome::Ended));
        // a reply settled on another thread wakes the waiting one
        slot.start(3);
        let other = slot.clone();
        let t = std::thread::spawn(move || other.settle(3, Outcome::Reply(Err("no".into()))));
        assert!(matches!(
            slot.wait(3, Duration::from_secs(10)),
            Outcome::Reply(Err(e)) if e == "no"
        ));
        t.join().unwrap();
    }
}
