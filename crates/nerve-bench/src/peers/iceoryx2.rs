//! Raw iceoryx2 request-response doing the same work as Nerve (the floor under Nerve's
//! path): the client writes the request in a loaned slice, the server copies it into a
//! loaned response, both sides busy-poll. The service and ports are configured as Nerve
//! configures its services by default (16 clients, 2 servers, 8 calls in flight, pools
//! capped alike), so the difference measured is what Nerve's layer adds.

use crate::harness::PeerError;
use crate::peers::echo::{Check, EchoClient, Fill};
use iceoryx2::port::client::Client;
use iceoryx2::prelude::*;
use std::time::{Duration, Instant};

const SYSTEM: &str = "iceoryx2";
/// Longest time one benchmark call may take before it counts as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Slice length the ports are first sized for (grows by powers of two), as in Nerve.
const INITIAL_LEN: usize = 64 * 1024;
/// Most chunks a port pre-allocates, as Nerve's default budget allows (16 MiB / 64 KiB).
const MAX_CHUNKS: usize = 256;

type RawService = iceoryx2::service::port_factory::request_response::PortFactory<
    ipc::Service,
    [u8],
    (),
    [u8],
    (),
>;

fn fail(e: impl std::fmt::Debug) -> PeerError {
    PeerError::Setup {
        system: SYSTEM,
        reason: format!("{e:?}"),
    }
}

fn call_err(e: impl std::fmt::Debug) -> PeerError {
    PeerError::Call {
        system: SYSTEM,
        reason: format!("{e:?}"),
    }
}

fn open(node: &iceoryx2::node::Node<ipc::Service>, name: &str) -> Result<RawService, PeerError> {
    let name = ServiceName::new(name).map_err(fail)?;
    node.service_builder(&name)
        .request_response::<[u8], [u8]>()
        .max_servers(2)
        .max_clients(16)
        .max_nodes(20)
        .max_active_requests_per_client(8)
        .max_loaned_requests(8)
        .max_response_buffer_size(2)
        .max_borrowed_responses_per_pending_response(2)
        .open_or_create()
        .map_err(fail)
}

/// The file prefix of the bench's raw iceoryx2 services (not iceoryx2's default, which
/// other iceoryx2 users of the machine share): [`remove_leftovers`] may then remove what
/// iceoryx2 keeps after its last node.
pub(crate) const PREFIX: &str = "nervebenchsvc_";

fn node() -> Result<iceoryx2::node::Node<ipc::Service>, PeerError> {
    let mut cfg = iceoryx2::config::Config::default();
    cfg.global.prefix = FileName::new(PREFIX.as_bytes()).map_err(fail)?;
    NodeBuilder::new()
        .config(&cfg)
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<ipc::Service>()
        .map_err(fail)
}

/// Removes what the raw peers left in /dev/shm once both sides are gone (iceoryx2 keeps
/// its node counter, `…global_mgmt`, after its last node).
pub fn remove_leftovers() {
    crate::harness::machine::remove_shm_files(PREFIX);
}

/// Serves service `name` (busy-polling, copying each request into its response) until
/// SIGTERM.
pub fn serve(name: &str, ready: &mut dyn FnMut()) -> Result<(), PeerError> {
    let node = node()?;
    let service = open(&node, name)?;
    let server = service
        .server_builder()
        .initial_max_slice_len(INITIAL_LEN)
        .allocation_strategy(AllocationStrategy::PowerOfTwo)
        .max_loaned_responses_per_request(1)
        .override_response_preallocation(|n| n.clamp(4, MAX_CHUNKS))
        .create()
        .map_err(fail)?;
    ready();
    let mut idle: u32 = 0;
    loop {
        match server.receive().map_err(call_err)? {
            Some(active) => {
                idle = 0;
                let req = active.payload();
                let resp = active.loan_slice_uninit(req.len()).map_err(call_err)?;
                let resp = resp.write_from_slice(req);
                resp.send().map_err(call_err)?;
            }
            None => {
                idle = idle.wrapping_add(1);
                if idle.is_multiple_of(1 << 16) && nerve::shutdown::requested() {
                    return Ok(());
                }
                core::hint::spin_loop();
            }
        }
    }
}

/// Client of the raw echo service.
pub struct RawClient {
    // field order is drop order: ports before service and node
    client: Client<ipc::Service, [u8], (), [u8], ()>,
    _service: RawService,
    _node: iceoryx2::node::Node<ipc::Service>,
}

impl RawClient {
    /// Connects to service `name`, waiting up to `timeout` for its server.
    pub fn connect(name: &str, timeout: Duration) -> Result<RawClient, PeerError> {
        let node = node()?;
        let service = open(&node, name)?;
        let client = service
            .client_builder()
            .initial_max_slice_len(INITIAL_LEN)
            .allocation_strategy(AllocationStrategy::PowerOfTwo)
            .max_active_requests(8)
            .override_request_preallocation(|n| n.clamp(4, MAX_CHUNKS))
            .create()
            .map_err(fail)?;
        let deadline = Instant::now() + timeout;
        while service.dynamic_config().number_of_servers() == 0 {
            if Instant::now() > deadline {
                return Err(fail(format!("no server for {name} within {timeout:?}")));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(RawClient {
            client,
            _service: service,
            _node: node,
        })
    }
}

impl EchoClient for RawClient {
    fn call(&mut self, len: usize, fill: Fill<'_>, check: Check<'_>) -> Result<(), PeerError> {
        let mut req = self.client.loan_slice_uninit(len).map_err(call_err)?;
        let bytes = req.payload_mut();
        // SAFETY: the loaned bytes are shared memory mapped from a file, so every byte is
        // initialized (zero-filled, or written by earlier requests), and u8 has no invalid
        // values; `fill` overwrites all of them before the request is sent.
        let bytes = unsafe { &mut *(bytes as *mut [core::mem::MaybeUninit<u8>] as *mut [u8]) };
        fill(bytes);
        // SAFETY: as above, every byte is initialized.
        let req = unsafe { req.assume_init() };
        let pending = req.send().map_err(call_err)?;
        let start = Instant::now();
        let mut spins: u32 = 0;
        loop {
            if let Some(resp) = pending.receive().map_err(call_err)? {
                return check(resp.payload()).map_err(|reason| PeerError::BadResponse {
                    system: SYSTEM,
                    reason,
                });
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) && start.elapsed() > CALL_TIMEOUT {
                return Err(call_err(format!("no response within {CALL_TIMEOUT:?}")));
            }
            core::hint::spin_loop();
        }
    }
}
