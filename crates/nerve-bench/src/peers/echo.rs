//! The echo contract every system under test implements: a client makes one synchronous
//! call (it writes the whole request, the server copies it into the whole response, the
//! client checks the whole response), a server answers until it is told to stop.

use crate::harness::PeerError;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// Writes a request payload in place (called once per call with the request buffer).
pub type Fill<'a> = &'a mut dyn FnMut(&mut [u8]);
/// Checks a response payload in place.
pub type Check<'a> = &'a mut dyn FnMut(&[u8]) -> Result<(), String>;

/// Client side of an echo system.
pub trait EchoClient {
    /// One synchronous call with a `len`-byte request: `fill` writes the request in the
    /// system's send buffer (shared memory where the system has it), `check` reads the
    /// response where it arrived. Returns once the response was checked.
    fn call(&mut self, len: usize, fill: Fill<'_>, check: Check<'_>) -> Result<(), PeerError>;
}

/// The work of every echo call without any transport: the client thread writes the
/// request, a server thread on the server's core copies it into the response, the client
/// checks the response; the two threads hand over by spinning on one atomic word. What
/// remains is the work and the data crossing between the two cores: no system can answer
/// faster. The service suite reports what each system adds to it.
pub struct WorkloadOnly {
    shared: Arc<Handover>,
    server: Option<std::thread::JoinHandle<()>>,
}

/// The buffers and the turn word the two threads of [`WorkloadOnly`] share.
struct Handover {
    /// Request and response.
    buffers: Mutex<(Vec<u8>, Vec<u8>)>,
    /// [`IDLE`], [`REQUESTED`], [`ANSWERED`] or [`STOP`].
    turn: AtomicU8,
}

const IDLE: u8 = 0;
const REQUESTED: u8 = 1;
const ANSWERED: u8 = 2;
const STOP: u8 = 3;

impl WorkloadOnly {
    /// Starts the server thread (pinned to `server_cpu` when given).
    pub fn start(server_cpu: Option<usize>) -> WorkloadOnly {
        let shared = Arc::new(Handover {
            buffers: Mutex::new((Vec::new(), Vec::new())),
            turn: AtomicU8::new(IDLE),
        });
        let s = shared.clone();
        let server = std::thread::spawn(move || {
            if let Some(cpu) = server_cpu {
                crate::harness::machine::pin_to_cpu(cpu);
            }
            loop {
                // SYNC: Acquire pairs with the client's Release: its request is written.
                match s.turn.load(Ordering::Acquire) {
                    REQUESTED => {
                        {
                            let mut b = s.buffers.lock().unwrap_or_else(|e| e.into_inner());
                            let (req, resp) = &mut *b;
                            resp.resize(req.len(), 0);
                            resp.copy_from_slice(req);
                        }
                        // SYNC: Release hands the response to the client.
                        s.turn.store(ANSWERED, Ordering::Release);
                    }
                    STOP => return,
                    _ => std::hint::spin_loop(),
                }
            }
        });
        WorkloadOnly {
            shared,
            server: Some(server),
        }
    }
}

impl Drop for WorkloadOnly {
    fn drop(&mut self) {
        // SYNC: Release: the server stops at its next look.
        self.shared.turn.store(STOP, Ordering::Release);
        if let Some(t) = self.server.take() {
            let _ = t.join();
        }
    }
}

impl EchoClient for WorkloadOnly {
    fn call(&mut self, len: usize, fill: Fill<'_>, check: Check<'_>) -> Result<(), PeerError> {
        {
            let mut b = self
                .shared
                .buffers
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            b.0.resize(len, 0);
            fill(&mut b.0);
        }
        // SYNC: Release hands the request to the server thread.
        self.shared.turn.store(REQUESTED, Ordering::Release);
        // SYNC: Acquire pairs with the server's Release of the response.
        while self.shared.turn.load(Ordering::Acquire) != ANSWERED {
            if self.server.as_ref().is_none_or(|t| t.is_finished()) {
                return Err(PeerError::Call {
                    system: "workload",
                    reason: "the server thread ended".into(),
                });
            }
            std::hint::spin_loop();
        }
        let b = self
            .shared
            .buffers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        check(&b.1).map_err(|reason| PeerError::BadResponse {
            system: "workload",
            reason,
        })
    }
}
