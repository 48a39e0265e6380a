//! Unix-domain-socket echo: the floor of any copying transport.
//!
//! One blocking `SOCK_STREAM` connection between the client and the server. Every frame is an
//! 8-byte little-endian payload length followed by the payload. The server answers each
//! request with a frame of the same length holding a copy of the request.

use std::io::{self, Read, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness::PeerError;
use crate::peers::echo::{Check, EchoClient, Fill};

/// System name used in errors.
const SYSTEM: &str = "uds";
/// Length of the frame header (payload length, `u64` little endian).
const HEADER: usize = 8;
/// Largest payload a frame may carry.
pub const MAX_PAYLOAD: usize = 64 << 20;
/// How long the server waits for its one client to connect.
const ACCEPT_TIMEOUT: Duration = Duration::from_secs(60);
/// Read/write timeout of the client socket: a dead server gives an error, never a hang.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

fn setup(reason: String) -> PeerError {
    PeerError::setup(SYSTEM, reason)
}

fn call_err(reason: String) -> PeerError {
    PeerError::call(SYSTEM, reason)
}

/// Removes the socket file when dropped (also on error paths of [`serve`]).
struct SocketFile<'a>(&'a Path);

impl Drop for SocketFile<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

/// Serves echo calls on a Unix-domain socket at `path` until the client disconnects.
///
/// Removes a stale file at `path`, binds, calls `ready` once listening, accepts ONE connection
/// (waiting at most 60 s for it), then answers frames until the client closes the connection
/// at a frame boundary, which returns `Ok(())`. Blocking sockets throughout.
///
/// Work per call: the request payload is read into a reusable request buffer, then **copied
/// into a separate reusable response buffer** (behind its header) and the response frame is
/// written with one `write_all`, so the server writes the whole response like every other
/// system. A payload length above [`MAX_PAYLOAD`] (64 MiB) is rejected with
/// [`PeerError::Call`]. The socket file is removed when this returns.
pub fn serve(path: &Path, ready: &mut dyn FnMut()) -> Result<(), PeerError> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(setup(format!(
                "cannot remove stale socket file {}: {e}",
                path.display()
            )));
        }
    }
    let listener = UnixListener::bind(path)
        .map_err(|e| setup(format!("cannot bind {}: {e}", path.display())))?;
    let _file = SocketFile(path);
    ready();
    wait_readable(&listener, ACCEPT_TIMEOUT)?;
    let (mut stream, _) = listener
        .accept()
        .map_err(|e| setup(format!("accept on {} failed: {e}", path.display())))?;
    drop(listener);

    let mut request: Vec<u8> = Vec::new();
    let mut response: Vec<u8> = Vec::new();
    loop {
        let mut header = [0u8; HEADER];
        if !read_header(&mut stream, &mut header)? {
            return Ok(());
        }
        let len = frame_len(header)?;
        request.resize(len, 0);
        stream
            .read_exact(&mut request)
            .map_err(|e| call_err(format!("reading a {len}-byte request: {e}")))?;
        response.resize(HEADER + len, 0);
        response[..HEADER].copy_from_slice(&header);
        response[HEADER..].copy_from_slice(&request);
        stream
            .write_all(&response)
            .map_err(|e| call_err(format!("writing a {len}-byte response: {e}")))?;
    }
}

/// Waits until `listener` has a pending connection, at most `timeout`.
fn wait_readable(listener: &UnixListener, timeout: Duration) -> Result<(), PeerError> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(setup(format!(
                "no client connected within {} s",
                timeout.as_secs()
            )));
        }
        let mut pfd = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: `pfd` is a valid, initialised pollfd that lives across the call, and we pass
        // a count of exactly one entry; the fd is owned by `listener`, which outlives the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc > 0 {
            return Ok(());
        }
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(setup(format!("poll on the listening socket failed: {e}")));
            }
        }
    }
}

/// Reads a frame header. Returns `Ok(false)` on a clean EOF before its first byte.
fn read_header(stream: &mut UnixStream, header: &mut [u8; HEADER]) -> Result<bool, PeerError> {
    let mut filled = 0;
    while filled < HEADER {
        match stream.read(&mut header[filled..]) {
            Ok(0) if filled == 0 => return Ok(false),
            Ok(0) => {
                return Err(call_err(format!(
                    "connection closed inside a frame header ({filled} of {HEADER} bytes)"
                )));
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(call_err(format!("reading a frame header: {e}"))),
        }
    }
    Ok(true)
}

/// Decodes and bounds-checks a frame length.
fn frame_len(header: [u8; HEADER]) -> Result<usize, PeerError> {
    let len = u64::from_le_bytes(header);
    match usize::try_from(len) {
        Ok(len) if len <= MAX_PAYLOAD => Ok(len),
        _ => Err(call_err(format!(
            "frame length {len} exceeds the {MAX_PAYLOAD}-byte limit"
        ))),
    }
}

/// Client side of the Unix-domain-socket echo: one blocking connection, reusable buffers.
pub struct Client {
    stream: UnixStream,
    /// Header + request payload, written with one `write_all`.
    request: Vec<u8>,
    /// Response payload, read in place and checked there.
    response: Vec<u8>,
}

impl Client {
    /// Connects to the server at `path`, retrying every 5 ms until `timeout` has passed (the
    /// server process may still be starting). Sets 10 s read and write timeouts on the socket.
    pub fn connect(path: &Path, timeout: Duration) -> Result<Client, PeerError> {
        let deadline = Instant::now() + timeout;
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) => {
                    if Instant::now() >= deadline {
                        return Err(setup(format!(
                            "cannot connect to {} within {:?}: {e}",
                            path.display(),
                            timeout
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        };
        stream
            .set_read_timeout(Some(CALL_TIMEOUT))
            .and_then(|()| stream.set_write_timeout(Some(CALL_TIMEOUT)))
            .map_err(|e| setup(format!("cannot set socket timeouts: {e}")))?;
        Ok(Client {
            stream,
            request: Vec::new(),
            response: Vec::new(),
        })
    }
}

impl EchoClient for Client {
    fn call(&mut self, len: usize, fill: Fill<'_>, check: Check<'_>) -> Result<(), PeerError> {
        if len > MAX_PAYLOAD {
            return Err(call_err(format!(
                "payload of {len} bytes exceeds the {MAX_PAYLOAD}-byte limit"
            )));
        }
        let header = (len as u64).to_le_bytes();
        self.request.resize(HEADER + len, 0);
        self.request[..HEADER].copy_from_slice(&header);
        fill(&mut self.request[HEADER..]);
        self.stream
            .write_all(&self.request)
            .map_err(|e| call_err(format!("writing a {len}-byte request: {e}")))?;

        let mut rheader = [0u8; HEADER];
        self.stream
            .read_exact(&mut rheader)
            .map_err(|e| call_err(format!("reading the response header: {e}")))?;
        let rlen = frame_len(rheader)?;
        if rlen != len {
            return Err(PeerError::BadResponse {
                system: SYSTEM,
                reason: format!("response of {rlen} bytes to a {len}-byte request"),
            });
        }
        self.response.resize(len, 0);
        self.stream
            .read_exact(&mut self.response)
            .map_err(|e| call_err(format!("reading a {len}-byte response: {e}")))?;
        check(&self.response).map_err(|reason| PeerError::BadResponse {
            system: SYSTEM,
            reason,
        })
    }
}
