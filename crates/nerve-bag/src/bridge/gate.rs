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
//! After the handshake the gate only copies bytes, both ways, with `TCP_NODELAY` on both
//! sockets. Connections are bounded ([`MAX_CONNECTIONS`]), a handshake must arrive within
//! [`HANDSHAKE_TIMEOUT`] and fit in [`MAX_HEAD`] bytes.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

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
}

impl Gate {
    /// Listens on `host:port` and passes accepted clients to the server at `backend`.
    pub(crate) fn start(host: &str, port: u16, backend: SocketAddr) -> io::Result<Gate> {
        let listener = TcpListener::bind((host, port))?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("bridge-gate".into())
                .spawn(move || accept(&listener, backend, &stop))?
        };
        Ok(Gate {
            addr,
            stop,
            acceptor: Some(acceptor),
        })
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

fn accept(listener: &TcpListener, backend: SocketAddr, stop: &AtomicBool) {
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
        let counted = live.clone();
        let spawned = std::thread::Builder::new()
            .name("bridge-client".into())
            .spawn(move || {
                serve(client, backend);
                counted.fetch_sub(1, Ordering::Relaxed);
            });
        if spawned.is_err() {
            // no thread: the client went with the closure, unserved; count it out
            live.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// One client: its handshake, then bytes both ways until either side closes.
fn serve(mut client: TcpStream, backend: SocketAddr) {
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
    if route == Route::Legacy {
        // the answer names the protocol the client offered, or the client must fail
        let _ = server.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
        let Ok(answer) = read_head(&mut server, false) else {
            return;
        };
        if client.write_all(&answer.with_protocol(LEGACY_V1)).is_err()
            || client.write_all(&answer.rest).is_err()
        {
            return;
        }
        let _ = server.set_read_timeout(None);
    }
    let _ = client.set_read_timeout(None);
    pump_both(client, server);
}

/// Copies client → server on this thread and server → client on another, until both end.
fn pump_both(client: TcpStream, server: TcpStream) {
    let (Ok(client2), Ok(server2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let back = std::thread::Builder::new()
        .name("bridge-client-out".into())
        .spawn(move || pump(server2, client2));
    pump(client, server);
    if let Ok(back) = back {
        let _ = back.join();
    }
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
