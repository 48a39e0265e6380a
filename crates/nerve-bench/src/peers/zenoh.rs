//! Zenoh queryable/get echo, two peers over loopback TCP.
//!
//! Both sides run in Zenoh `peer` mode with multicast and gossip scouting disabled: the server
//! listens on `tcp/127.0.0.1:<port>` and connects to nothing, the client connects to that one
//! endpoint and listens on nothing. Nothing talks to anything but loopback.
//!
//! Per call the client fills a fresh `Vec<u8>` (it becomes the query payload), sends it with
//! `Session::get` (consolidation `None`, so the reply is handed over on arrival instead of at
//! the end of the query), and checks the payload of the first reply in place. The server copies
//! the query payload into a fresh `Vec<u8>` and replies with it. An empty query payload is the
//! stop signal, so calls with `len == 0` are refused.

use std::borrow::Cow;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use zenoh::bytes::ZBytes;
use zenoh::key_expr::KeyExpr;
use zenoh::query::{ConsolidationMode, Query};
use zenoh::Wait;
use zenoh::{Config, Session};

use crate::echo::{Check, EchoClient, Fill, PeerError};

/// System name used in errors.
const SYSTEM: &str = "zenoh";
/// Timeout of one call (the query's own timeout; the reply wait adds a little slack).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Slack on top of [`CALL_TIMEOUT`] when waiting for the reply channel.
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

/// Answers one query: copies its payload into a fresh buffer and replies with it.
fn answer(query: Query, key: &KeyExpr<'static>) -> Option<Event> {
    let (response, stop): (Vec<u8>, bool) = match query.payload() {
        None => (Vec::new(), true),
        Some(p) if p.is_empty() => (Vec::new(), true),
        Some(p) => match p.to_bytes() {
            // Contiguous payload: one copy into the response buffer.
            Cow::Borrowed(s) => (s.to_vec(), false),
            // Fragmented payload: `to_bytes` already copied it into a fresh buffer, which
            // becomes the response (still exactly one copy).
            Cow::Owned(v) => (v, false),
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
pub fn serve(port: u16, key: &str, ready: &mut dyn FnMut()) -> Result<(), PeerError> {
    let ke = key_expr(key)?;
    let session = zenoh::open(loopback_config(&endpoint(port), "[]")?)
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
            if let Some(event) = answer(query, &reply_key) {
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

/// Client side of the Zenoh echo: a peer session connected to the server's endpoint.
///
/// Dropping it closes the session (Zenoh bounds the close by a 10 s timeout).
pub struct Client {
    session: Session,
    key: KeyExpr<'static>,
}

impl Client {
    /// Opens a peer session connected to `tcp/127.0.0.1:<port>` and waits, up to `timeout`,
    /// until a probe `get` on `key` (8-byte payload) is answered, so the route to the server's
    /// queryable exists before anything is measured.
    pub fn connect(port: u16, key: &str, timeout: Duration) -> Result<Client, PeerError> {
        let deadline = Instant::now() + timeout;
        let key = key_expr(key)?;
        let session = zenoh::open(loopback_config("[]", &endpoint(port))?)
            .wait()
            .map_err(|e| {
                setup(format!(
                    "cannot open a session to tcp/127.0.0.1:{port}: {e}"
                ))
            })?;
        let client = Client { session, key };
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
            match client.query(probe, left.min(PROBE_TIMEOUT)) {
                Ok(payload) if payload.len() == 8 => return Ok(client),
                Ok(payload) => last = format!("probe answered with {} bytes", payload.len()),
                Err(PeerError::Call { reason, .. }) => last = reason,
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(20).min(left));
        }
    }

    /// Sends one query carrying `payload` and returns the payload of the first reply. No reply
    /// within `timeout` (plus 1 s slack), a query that ended without a reply (no queryable
    /// reachable), an error reply and a transport failure are all `Err`.
    fn query(&self, payload: Vec<u8>, timeout: Duration) -> Result<ZBytes, PeerError> {
        let len = payload.len();
        let replies = self
            .session
            .get(&self.key)
            .payload(payload)
            .consolidation(ConsolidationMode::None)
            .timeout(timeout)
            .wait()
            .map_err(|e| call_err(format!("get on {} failed: {e}", self.key)))?;
        let reply = match replies.recv_timeout(timeout + RECV_SLACK) {
            Ok(Some(reply)) => reply,
            Ok(None) => {
                return Err(call_err(format!(
                    "no reply to a {len}-byte query within {timeout:?}"
                )))
            }
            Err(_) => {
                return Err(call_err(format!(
                    "the {len}-byte query on {} ended without a reply (no queryable reachable)",
                    self.key
                )))
            }
        };
        match reply.into_result() {
            Ok(sample) => Ok(sample.payload().clone()),
            Err(e) => Err(call_err(format!(
                "error reply: {}",
                String::from_utf8_lossy(&e.payload().to_bytes())
            ))),
        }
    }

    /// Tells the server to stop (a query with an empty payload) and waits up to 2 s for its
    /// acknowledgement. Best effort: failures are ignored, the server process is killed by its
    /// owner anyway.
    pub fn stop(&mut self) {
        let _ = self.query(Vec::new(), STOP_TIMEOUT);
    }
}

impl EchoClient for Client {
    fn call(&mut self, len: usize, fill: Fill<'_>, check: Check<'_>) -> Result<(), PeerError> {
        if len == 0 {
            return Err(call_err(
                "a zero-length payload is reserved as the stop signal".into(),
            ));
        }
        let mut request = vec![0u8; len];
        fill(&mut request);
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
