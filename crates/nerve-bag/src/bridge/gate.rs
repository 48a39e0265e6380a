//! The bridge's front door: the WebSocket subprotocol names every Foxglove client offers.
//!
//! The `foxglove` crate's server (0.30) accepts only `foxglove.sdk.v1` and
//! `foxglove.sdk.v1.1` and answers HTTP 400 to anything else. Foxglove's own npm client
//! (`@foxglove/ws-protocol`'s `FoxgloveClient`), Lichtblick and Foxglove Studio releases
//! from before the SDK offer `foxglove.websocket.v1`, the same protocol under its first
//! name (foxglove_bridge broke its users the same way, its issue #382). So the bridge
//! listens itself, reads each client's upgrade request, and hands the connection to the
//! SDK's server on a loopback port:
//! - a client offering an SDK name is passed on unchanged;
//! - a client offering only `foxglove.websocket.v1` is passed on as `foxglove.sdk.v1`
//!   (the protocol with inline schemas, which that client expects), and the server's
//!   answer is rewritten to the name the client offered, as RFC 6455 requires;
//! - any other client is refused with 400 and a body naming what it offered and what the
//!   bridge speaks.
//!
//! After the handshake the gate copies client → server bytes as they come, and server →
//! client WebSocket frames through a queue of its own per client ([`Outbox`], `backlog`
//! frames), with `TCP_NODELAY` on both sockets. The queue is what makes per-client drop
//! counts possible: the SDK (0.30) drops the oldest messages of a slow client without
//! counting them anywhere one can read, so the gate drains the SDK's socket at once and
//! does the dropping itself, oldest message data first (control messages are never
//! dropped), counting per client and telling the client with a status message (at most
//! one per [`DROP_REPORT_PERIOD`]). Connections are bounded ([`MAX_CONNECTIONS`]), a
//! handshake must arrive within [`HANDSHAKE_TIMEOUT`] and fit in [`MAX_HEAD`] bytes.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The name the Foxglove SDK gives the protocol with inline schemas.
pub const SDK_V1: &str = "foxglove.sdk.v1";
/// The SDK's protocol with a per-connection schema table.
pub const SDK_V1_1: &str = "foxglove.sdk.v1.1";
/// The protocol's first name, offered by `@foxglove/ws-protocol`, Lichtblick and Foxglove
/// Studio before the SDK.
pub const LEGACY_V1: &str = "foxglove.websocket.v1";

/// Clients connected through the gate at once; more are answered 503.
pub const MAX_CONNECTIONS: usize = 64;
/// Longest a client may take to send its upgrade request.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest upgrade request (or server answer) read.
pub const MAX_HEAD: usize = 16 * 1024;
/// Headers read in one request or answer.
const MAX_HEADERS: usize = 64;
/// The copy buffer of each direction.
const PUMP_BUFFER: usize = 64 * 1024;
/// Shortest time between two status messages telling a client of its drops.
pub const DROP_REPORT_PERIOD: Duration = Duration::from_secs(2);
/// Largest WebSocket frame passed from the server (a bigger one ends the connection).
pub const MAX_FRAME: u64 = 1 << 31;

/// What a client's offer makes of its connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// It offers a name the SDK speaks: passed on unchanged.
    Native,
    /// It offers only the protocol's first name: passed on as [`SDK_V1`], answered as
    /// [`LEGACY_V1`].
    Legacy,
    /// Nothing the bridge speaks: refused with this reason.
    Refuse(String),
}

/// Chooses the route for the subprotocols a client offered (all the header's values).
pub(crate) fn route(offered: &[String]) -> Route {
    if offered.iter().any(|p| p == SDK_V1 || p == SDK_V1_1) {
        Route::Native
    } else if offered.iter().any(|p| p == LEGACY_V1) {
        Route::Legacy
    } else if offered.is_empty() {
        Route::Refuse(format!(
            "no Sec-WebSocket-Protocol header: a Foxglove client offers one of \
             {SDK_V1_1}, {SDK_V1}, {LEGACY_V1}"
        ))
    } else {
        Route::Refuse(format!(
            "unsupported WebSocket subprotocol {}: this bridge speaks {SDK_V1_1}, {SDK_V1}, \
             {LEGACY_V1}",
            offered.join(", ")
        ))
    }
}

/// A request or answer head: its first line and headers, as read.
struct Head {
    /// The head's bytes as received.
    raw: Vec<u8>,
    start: String,
    headers: Vec<(String, Vec<u8>)>,
    /// Bytes read past the head (the first WebSocket frames, if the peer sent them early).
    rest: Vec<u8>,
}

impl Head {
    /// The subprotocols named by every `Sec-WebSocket-Protocol` header.
    fn protocols(&self) -> Vec<String> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("sec-websocket-protocol"))
            .flat_map(|(_, v)| {
                String::from_utf8_lossy(v)
                    .split(',')
                    .map(|p| p.trim().to_owned())
                    .collect::<Vec<_>>()
            })
            .filter(|p| !p.is_empty())
            .collect()
    }

    /// The head with its `Sec-WebSocket-Protocol` headers replaced by one naming `proto`
    /// (a head without one, such as a refusal, stays without).
    fn with_protocol(&self, proto: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(self.start.as_bytes());
        out.extend_from_slice(b"\r\n");
        let mut written = false;
        for (name, value) in &self.headers {
            if name.eq_ignore_ascii_case("sec-websocket-protocol") {
                if !written {
                    out.extend_from_slice(format!("{name}: {proto}\r\n").as_bytes());
                    written = true;
                }
                continue;
            }
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out
    }
}

/// Why a head could not be read.
#[derive(Debug)]
enum HeadError {
    /// The peer closed, failed or timed out before a whole head.
    Closed,
    TooLarge,
    Malformed(String),
}

/// Reads one HTTP head (request when `request`, else response) from `s`.
fn read_head(s: &mut TcpStream, request: bool) -> Result<Head, HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = s.read(&mut chunk).map_err(|_| HeadError::Closed)?;
        if n == 0 {
            return Err(HeadError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let parsed = if request {
            let mut req = httparse::Request::new(&mut headers);
            req.parse(&buf).map(|st| match st {
                httparse::Status::Complete(len) => Some((
                    len,
                    format!(
                        "{} {} HTTP/1.{}",
                        req.method.unwrap_or("GET"),
                        req.path.unwrap_or("/"),
                        req.version.unwrap_or(1)
                    ),
                    collect(req.headers),
                )),
                httparse::Status::Partial => None,
            })
        } else {
            let mut res = httparse::Response::new(&mut headers);
            res.parse(&buf).map(|st| match st {
                httparse::Status::Complete(len) => Some((
                    len,
                    format!(
                        "HTTP/1.{} {} {}",
                        res.version.unwrap_or(1),
                        res.code.unwrap_or(0),
                        res.reason.unwrap_or("")
                    ),
                    collect(res.headers),
                )),
                httparse::Status::Partial => None,
            })
        };
        match parsed {
            Ok(Some((len, start, headers))) => {
                return Ok(Head {
                    raw: buf[..len].to_vec(),
                    start,
                    headers,
                    rest: buf[len..].to_vec(),
                })
            }
            Ok(None) if buf.len() < MAX_HEAD => {}
            Ok(None) => return Err(HeadError::TooLarge),
            Err(e) => return Err(HeadError::Malformed(e.to_string())),
        }
    }
}

fn collect(headers: &[httparse::Header<'_>]) -> Vec<(String, Vec<u8>)> {
    headers
        .iter()
        .map(|h| (h.name.to_owned(), h.value.to_vec()))
        .collect()
}

/// Answers `s` with an HTTP error and `reason` as the body, then closes it.
fn refuse(mut s: TcpStream, status: &str, reason: &str) {
    let body = format!("{reason}\n");
    let answer = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(answer.as_bytes());
    let _ = s.shutdown(Shutdown::Both);
}

/// The front door: a listening socket and its accepting thread.
pub(crate) struct Gate {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
    /// Messages dropped for slow clients, all clients together.
    dropped: Arc<AtomicU64>,
}

impl Gate {
    /// Listens on `host:port` and passes accepted clients to the server at `backend`,
    /// queueing at most `backlog` messages for each.
    pub(crate) fn start(
        host: &str,
        port: u16,
        backend: SocketAddr,
        backlog: usize,
    ) -> io::Result<Gate> {
        let listener = TcpListener::bind((host, port))?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicU64::new(0));
        let acceptor = {
            let (stop, dropped) = (stop.clone(), dropped.clone());
            let backlog = backlog.max(1);
            std::thread::Builder::new()
                .name("bridge-gate".into())
                .spawn(move || accept(&listener, backend, backlog, &stop, &dropped))?
        };
        Ok(Gate {
            addr,
            stop,
            acceptor: Some(acceptor),
            dropped,
        })
    }

    /// Messages dropped for slow clients so far, all clients together.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The port the gate listens on.
    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Stops accepting. Connections already passed on end with the server.
    pub(crate) fn stop(&mut self) {
        // SYNC: Relaxed: the flag carries no data; the acceptor reads it after the
        // wake-up connection below returns from accept.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.acceptor.take() {
            // wake the blocking accept with a connection of our own
            let mut wake = self.addr;
            if wake.ip().is_unspecified() {
                wake.set_ip(match wake {
                    SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                    SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                });
            }
            if TcpStream::connect_timeout(&wake, Duration::from_secs(1)).is_ok() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept(
    listener: &TcpListener,
    backend: SocketAddr,
    backlog: usize,
    stop: &AtomicBool,
    dropped: &Arc<AtomicU64>,
) {
    let live = Arc::new(AtomicUsize::new(0));
    for client in listener.incoming() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(client) = client else { continue };
        if live.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
            refuse(
                client,
                "503 Service Unavailable",
                &format!("the bridge serves at most {MAX_CONNECTIONS} clients at once"),
            );
            continue;
        }
        // SYNC: Relaxed: a count only, read to bound the threads; it guards no data
        live.fetch_add(1, Ordering::Relaxed);
        let (counted, dropped) = (live.clone(), dropped.clone());
        let spawned = std::thread::Builder::new()
            .name("bridge-client".into())
            .spawn(move || {
                serve(client, backend, backlog, &dropped);
                counted.fetch_sub(1, Ordering::Relaxed);
            });
        if spawned.is_err() {
            // no thread: the client went with the closure, unserved; count it out
            live.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// One client: its handshake, then bytes both ways until either side closes.
fn serve(mut client: TcpStream, backend: SocketAddr, backlog: usize, dropped: &Arc<AtomicU64>) {
    let _ = client.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
    let _ = client.set_nodelay(true);
    let request = match read_head(&mut client, true) {
        Ok(h) => h,
        Err(HeadError::TooLarge) => {
            return refuse(
                client,
                "431 Request Header Fields Too Large",
                &format!("the upgrade request is over {MAX_HEAD} bytes"),
            )
        }
        Err(HeadError::Malformed(why)) => {
            return refuse(
                client,
                "400 Bad Request",
                &format!("malformed HTTP request: {why}"),
            )
        }
        Err(HeadError::Closed) => return,
    };
    let route = route(&request.protocols());
    let head = match &route {
        Route::Native => request.raw.clone(),
        Route::Legacy => request.with_protocol(SDK_V1),
        Route::Refuse(reason) => return refuse(client, "400 Bad Request", reason),
    };
    let Ok(mut server) = TcpStream::connect_timeout(&backend, HANDSHAKE_TIMEOUT) else {
        return refuse(
            client,
            "503 Service Unavailable",
            "the bridge's server is not running",
        );
    };
    let _ = server.set_nodelay(true);
    if server.write_all(&head).is_err() || server.write_all(&request.rest).is_err() {
        return;
    }
    // the server's answer is read whole: after it come frames, which the outbox handles
    let _ = server.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
    let Ok(answer) = read_head(&mut server, false) else {
        return;
    };
    let _ = server.set_read_timeout(None);
    let head = match route {
        // the answer names the protocol the client offered, or the client must fail
        Route::Legacy => answer.with_protocol(LEGACY_V1),
        _ => answer.raw.clone(),
    };
    if client.write_all(&head).is_err() {
        return;
    }
    let _ = client.set_read_timeout(None);
    let upgraded = answer.start.split_whitespace().nth(1) == Some("101");
    pump_both(
        client,
        server,
        upgraded.then_some(backlog),
        answer.rest,
        dropped,
    );
}

/// Copies client → server on this thread and server → client on others (through an
/// [`Outbox`] of `backlog` frames once upgraded; bytes as they come otherwise), until
/// both end. `early`: server bytes read past its answer.
fn pump_both(
    client: TcpStream,
    server: TcpStream,
    backlog: Option<usize>,
    early: Vec<u8>,
    dropped: &Arc<AtomicU64>,
) {
    let (Ok(client2), Ok(server2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let dropped = dropped.clone();
    let back = std::thread::Builder::new()
        .name("bridge-client-out".into())
        .spawn(move || match backlog {
            Some(backlog) => pump_frames(server2, client2, backlog, early, &dropped),
            None => {
                let mut client2 = client2;
                if client2.write_all(&early).is_ok() {
                    pump(server2, client2);
                }
            }
        });
    pump(client, server);
    if let Ok(back) = back {
        let _ = back.join();
    }
}

/// One WebSocket frame from the server, whole.
struct Frame {
    bytes: Vec<u8>,
    /// A Foxglove message-data frame (binary, opcode byte 1, unfragmented): may be dropped.
    droppable: bool,
}

/// The length of the frame at the start of `buf` and whether it is message data; `None`
/// while incomplete; an error for a frame over [`MAX_FRAME`].
fn frame_len(buf: &[u8]) -> Result<Option<(usize, bool)>, String> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let (fin, opcode) = (buf[0] & 0x80 != 0, buf[0] & 0x0f);
    let masked = buf[1] & 0x80 != 0;
    let (len, mut at) = match buf[1] & 0x7f {
        126 if buf.len() >= 4 => (u64::from(u16::from_be_bytes([buf[2], buf[3]])), 4),
        127 if buf.len() >= 10 => (
            u64::from_be_bytes(buf[2..10].try_into().expect("8 bytes")),
            10,
        ),
        126 | 127 => return Ok(None),
        n => (u64::from(n), 2),
    };
    if len > MAX_FRAME {
        return Err(format!("a frame of {len} bytes (at most {MAX_FRAME})"));
    }
    if masked {
        at += 4;
    }
    let total = at + len as usize;
    if buf.len() < total {
        return Ok(None);
    }
    // masked payloads are not looked into (servers do not mask)
    let droppable = fin && opcode == 2 && !masked && len > 0 && buf[at] == 0x01;
    Ok(Some((total, droppable)))
}

/// A text frame (server to client, unmasked) holding `text`.
fn text_frame(text: &str) -> Vec<u8> {
    let mut f = vec![0x81];
    let n = text.len();
    if n < 126 {
        f.push(n as u8);
    } else if n <= usize::from(u16::MAX) {
        f.push(126);
        f.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        f.push(127);
        f.extend_from_slice(&(n as u64).to_be_bytes());
    }
    f.extend_from_slice(text.as_bytes());
    f
}

/// A client's queue of server frames: bounded to `backlog` frames; when full, the oldest
/// message data goes (counted), or, with none to drop, the reader waits.
struct Outbox {
    queue: Mutex<OutboxState>,
    ready: Condvar,
    backlog: usize,
}

struct OutboxState {
    frames: VecDeque<Frame>,
    /// The server side ended: what is queued is written, then the client is closed.
    ended: bool,
    /// The client side failed: the reader stops.
    broken: bool,
    /// Dropped since the client was last told, and in all.
    unreported: u64,
    total: u64,
}

impl Outbox {
    /// Queues a frame; false once the client is gone.
    fn push(&self, f: Frame, dropped: &AtomicU64) -> bool {
        let mut q = self.queue.lock().expect("poisoned");
        while q.frames.len() >= self.backlog && !q.broken {
            if let Some(i) = q.frames.iter().position(|f| f.droppable) {
                q.frames.remove(i);
                q.unreported += 1;
                q.total += 1;
                // SYNC: Relaxed: a count only
                dropped.fetch_add(1, Ordering::Relaxed);
            } else {
                q = self.ready.wait(q).expect("poisoned");
            }
        }
        if q.broken {
            return false;
        }
        q.frames.push_back(f);
        self.ready.notify_all();
        true
    }
}

/// Reads whole frames from the server into an [`Outbox`] on this thread, and writes them
/// to the client on another, telling the client of its drops.
fn pump_frames(
    mut server: TcpStream,
    client: TcpStream,
    backlog: usize,
    early: Vec<u8>,
    dropped: &AtomicU64,
) {
    let outbox = Arc::new(Outbox {
        queue: Mutex::new(OutboxState {
            frames: VecDeque::new(),
            ended: false,
            broken: false,
            unreported: 0,
            total: 0,
        }),
        ready: Condvar::new(),
        backlog,
    });
    let writer = {
        let outbox = outbox.clone();
        std::thread::Builder::new()
            .name("bridge-client-write".into())
            .spawn(move || write_frames(&outbox, client))
    };
    let Ok(writer) = writer else { return };
    let mut buf = early;
    let mut chunk = vec![0u8; PUMP_BUFFER];
    'read: loop {
        loop {
            match frame_len(&buf) {
                Ok(Some((n, droppable))) => {
                    let bytes: Vec<u8> = buf.drain(..n).collect();
                    if !outbox.push(Frame { bytes, droppable }, dropped) {
                        break 'read;
                    }
                }
                Ok(None) => break,
                Err(_) => break 'read,
            }
        }
        match server.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    {
        let mut q = outbox.queue.lock().expect("poisoned");
        q.ended = true;
        outbox.ready.notify_all();
    }
    let _ = writer.join();
    let _ = server.shutdown(Shutdown::Read);
}

/// Writes queued frames to the client until the server side ended and the queue is empty
/// (or the client fails).
fn write_frames(outbox: &Outbox, mut client: TcpStream) {
    let mut last_report: Option<Instant> = None;
    loop {
        let (frame, report) = {
            let mut q = outbox.queue.lock().expect("poisoned");
            while q.frames.is_empty() && !q.ended {
                q = outbox.ready.wait(q).expect("poisoned");
            }
            let Some(f) = q.frames.pop_front() else {
                break; // ended and empty
            };
            outbox.ready.notify_all();
            let due =
                q.unreported > 0 && last_report.is_none_or(|t| t.elapsed() >= DROP_REPORT_PERIOD);
            let report = due.then(|| {
                let r = (q.unreported, q.total);
                q.unreported = 0;
                r
            });
            (f, report)
        };
        if let Some((now, total)) = report {
            last_report = Some(Instant::now());
            let status = serde_json::json!({
                "op": "status",
                "level": 1,
                "id": "nerve-bridge-client-drops",
                "message": format!(
                    "nerve bridge: {now} messages dropped for this client since the last \
                     report ({total} in all): the connection is slower than the data"
                ),
            });
            if client.write_all(&text_frame(&status.to_string())).is_err() {
                break;
            }
        }
        if client.write_all(&frame.bytes).is_err() {
            break;
        }
    }
    let mut q = outbox.queue.lock().expect("poisoned");
    q.broken = true;
    q.frames.clear();
    outbox.ready.notify_all();
    drop(q);
    let _ = client.shutdown(Shutdown::Write);
}

/// Copies `from` → `to` until `from` ends or either fails, then closes both directions
/// that depend on it.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = vec![0u8; PUMP_BUFFER];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn sdk_names_pass_legacy_is_renamed_others_are_refused_by_name() {
        assert_eq!(route(&offer(&[SDK_V1])), Route::Native);
        assert_eq!(route(&offer(&[SDK_V1_1])), Route::Native);
        assert_eq!(route(&offer(&[LEGACY_V1, SDK_V1])), Route::Native);
        assert_eq!(route(&offer(&[LEGACY_V1])), Route::Legacy);
        let Route::Refuse(why) = route(&offer(&["mqtt", "foxglove.sdk.v2"])) else {
            panic!("refused")
        };
        assert!(
            why.contains("mqtt, foxglove.sdk.v2") && why.contains(LEGACY_V1),
            "{why}"
        );
        let Route::Refuse(why) = route(&[]) else {
            panic!("refused")
        };
        assert!(why.contains("no Sec-WebSocket-Protocol header"), "{why}");
    }

    #[test]
    fn a_head_is_read_whole_and_its_protocol_replaced() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut tx = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (mut rx, _) = listener.accept().expect("accept");
        // split across writes, with frame bytes right behind the head
        tx.write_all(b"GET /x HTTP/1.1\r\nHost: a\r\nSec-WebSocket-Protocol: ")
            .expect("write");
        tx.write_all(
            b"foxglove.websocket.v1, other\r\nsec-websocket-protocol: third\r\n\r\n\x81\x00",
        )
        .expect("write");
        let head = read_head(&mut rx, true).expect("head");
        assert_eq!(head.protocols(), offer(&[LEGACY_V1, "other", "third"]));
        assert_eq!(head.rest, b"\x81\x00");
        let text = String::from_utf8(head.with_protocol(SDK_V1)).expect("utf-8");
        assert_eq!(
            text,
            "GET /x HTTP/1.1\r\nHost: a\r\nSec-WebSocket-Protocol: foxglove.sdk.v1\r\n\r\n"
        );
    }

    #[test]
    fn frames_are_cut_whole_and_only_message_data_is_droppable() {
        // a message-data frame (binary, first byte 1), 200 bytes: 16-bit length
        let mut data = vec![0x82, 126, 0, 200, 0x01];
        data.extend_from_slice(&[7; 199]);
        assert_eq!(frame_len(&data), Ok(Some((204, true))));
        for cut in 0..data.len() {
            assert_eq!(frame_len(&data[..cut]), Ok(None), "cut at {cut}");
        }
        // a text frame, a binary time frame (opcode byte 2), a fragment: kept
        let text = text_frame("{\"op\":\"status\"}");
        assert_eq!(frame_len(&text), Ok(Some((text.len(), false))));
        assert_eq!(frame_len(&[0x82, 2, 0x02, 0]), Ok(Some((4, false))));
        assert_eq!(frame_len(&[0x02, 2, 0x01, 0]), Ok(Some((4, false))));
        // a length past the limit ends the connection, it is not buffered
        let mut huge = vec![0x82, 127];
        huge.extend_from_slice(&u64::MAX.to_be_bytes());
        assert!(frame_len(&huge).is_err());
        let long = text_frame(&"x".repeat(70_000));
        assert_eq!(frame_len(&long), Ok(Some((long.len(), false))));
    }

    #[test]
    fn a_full_outbox_drops_the_oldest_message_data_and_keeps_control_frames() {
        let outbox = Outbox {
            queue: Mutex::new(OutboxState {
                frames: VecDeque::new(),
                ended: false,
                broken: false,
                unreported: 0,
                total: 0,
            }),
            ready: Condvar::new(),
            backlog: 3,
        };
        let dropped = AtomicU64::new(0);
        let frame = |b: u8, droppable| Frame {
            bytes: vec![b],
            droppable,
        };
        assert!(outbox.push(frame(1, true), &dropped));
        assert!(outbox.push(frame(2, false), &dropped));
        assert!(outbox.push(frame(3, true), &dropped));
        assert!(outbox.push(frame(4, true), &dropped));
        assert!(outbox.push(frame(5, false), &dropped));
        let q = outbox.queue.lock().unwrap();
        let kept: Vec<u8> = q.frames.iter().map(|f| f.bytes[0]).collect();
        assert_eq!(kept, vec![2, 4, 5]);
        assert_eq!((q.unreported, q.total), (2, 2));
        assert_eq!(dropped.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn an_oversized_or_malformed_head_is_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut tx = TcpStream::connect(addr).expect("connect");
        let (mut rx, _) = listener.accept().expect("accept");
        tx.write_all(b"GET / HTTP/1.1\r\n").expect("write");
        let long = format!("X-Long: {}\r\n", "a".repeat(MAX_HEAD));
        tx.write_all(long.as_bytes()).expect("write");
        assert!(matches!(read_head(&mut rx, true), Err(HeadError::TooLarge)));

        let mut tx = TcpStream::connect(addr).expect("connect");
        let (mut rx, _) = listener.accept().expect("accept");
        tx.write_all(b"\x16\x03\x01 not http\r\n\r\n")
            .expect("write");
        assert!(matches!(
            read_head(&mut rx, true),
            Err(HeadError::Malformed(_))
        ));
    }
}
