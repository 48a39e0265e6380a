//! Service clients: loan a request in shared memory, send it, and wait for its response
//! (read in place). Calls are synchronous ([`Client::call`]) or pipelined
//! ([`Client::send`] and [`PendingCall`]).

use crate::context::Node;
use crate::error::{CallError, ServiceError};
use crate::message::header::{CallHeader, CallStatus};
use crate::message::{elems_offset, Message, NoElem, TypeInfo};
use crate::service::{service_type, Service, ServiceQos};
use crate::sys::clock::mono_ns;
use crate::transport::doorbell::SlotRef;
use crate::transport::remote::Frame;
use crate::transport::remote::{RemoteCall, RemoteClient};
use crate::transport::rpc::{
    self, IoxClient, IoxPending, IoxRequestMut, IoxResponse, RpcService, SERVICE_PREFIX,
};
use crate::transport::shm;
use crate::transport::wait::{wait_for, SpinWindow, WaitMode};
use iceoryx2::port::client::RequestSendError;
use iceoryx2::port::LoanError as IoxLoanError;
use iceoryx2::prelude::AllocationStrategy;
use iceoryx2::service::port_factory::PortFactory as _;
use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a waiting client checks that its server still lives (reclaiming dead
/// processes' resources): a server that dies mid-call is noticed within about this time.
pub const LIVENESS_CHECK: Duration = Duration::from_millis(50);

/// Builds a [`Client`].
pub struct ClientBuilder<S: Service> {
    node: Node,
    name: String,
    qos: ServiceQos,
    mode: WaitMode,
    _s: PhantomData<S>,
}

impl<S: Service> ClientBuilder<S> {
    pub(crate) fn new(node: Node, name: &str) -> Self {
        ClientBuilder {
            node,
            name: name.to_string(),
            qos: ServiceQos::default(),
            mode: WaitMode::default(),
            _s: PhantomData,
        }
    }

    /// Sets the limits (the service's capacity if this client creates it).
    pub fn qos(mut self, qos: ServiceQos) -> Self {
        self.qos = qos;
        self
    }

    /// Sets how the client waits for responses.
    pub fn wait_mode(mut self, mode: WaitMode) -> Self {
        self.mode = mode;
        self
    }

    /// Opens the service (creating it if no server made it yet, so a client may start
    /// first) and creates the client.
    pub fn create(self) -> Result<Client<S>, ServiceError> {
        let name = self.name;
        crate::name::validate_topic(&name)?;
        let qos = self.qos;
        qos.validate().map_err(|reason| ServiceError::InvalidQos {
            service: name.clone(),
            reason,
        })?;
        let service = rpc::open_service(
            &self.node.inner.iox,
            &name,
            Some(&service_type::<S>()),
            &qos,
        )?;
        // the service's limit wins over this client's wish
        let max_in_flight = qos
            .max_in_flight
            .min(service.static_config().max_active_requests_per_client());
        let pool_qos = qos.clone();
        let port = service
            .client_builder()
            .initial_max_slice_len(shm::words_for(qos.initial_payload))
            .allocation_strategy(AllocationStrategy::PowerOfTwo)
            .max_active_requests(max_in_flight)
            .override_request_preallocation(move |n| pool_qos.pool(n))
            .create()
            .map_err(|e| {
                use iceoryx2::service::port_factory::client::ClientCreateError as E;
                match e {
                    E::ExceedsMaxSupportedClients => ServiceError::TooManyClients {
                        service: name.clone(),
                        max: service.static_config().max_clients(),
                    },
                    e => ServiceError::Shm {
                        service: name.clone(),
                        reason: format!("cannot create client: {e:?}"),
                    },
                }
            })?;
        let doorbell = &self.node.inner.ctx.inner.doorbell;
        let bind = |key: String| {
            doorbell.bind(&key).map_err(|e| ServiceError::Shm {
                service: name.clone(),
                reason: format!("doorbell: {e}"),
            })
        };
        let reply_slot = bind(format!("client:{:032x}", port.id().value()))?;
        let reply_index = reply_slot.index();
        let server_slot = bind(format!("{SERVICE_PREFIX}{name}"))?;
        let ctx = &self.node.inner.ctx;
        let request_type = TypeInfo::of::<S::Request>();
        let net = match ctx.remote()? {
            Some(plane) => {
                Some(plane.client(ctx.domain(), &name, (S::TYPE_NAME, &request_type))?)
            }
            None => None,
        };
        Ok(Client {
            net,
            max_response: qos.max_response,
            port,
            service,
            server_slot,
            reply_slot,
            reply_index,
            node: self.node,
            name,
            max_request: qos.max_request,
            max_in_flight,
            mode: self.mode,
            spin: SpinWindow::new(),
            response_type: TypeInfo::of::<S::Response>(),
            request_hash: request_type.layout_hash,
            seq: Cell::new(0),
            _s: PhantomData,
        })
    }
}

/// Calls one service. Several clients may call the same service.
pub struct Client<S: Service> {
    // field order is drop order: the port goes before its service and node
    port: IoxClient,
    service: RpcService,
    /// The service's doorbell slot (servers wait on it) and this client's own (servers
    /// ring it with responses).
    server_slot: SlotRef,
    reply_slot: SlotRef,
    reply_index: u32,
    node: Node,
    name: String,
    max_request: usize,
    max_in_flight: usize,
    mode: WaitMode,
    spin: SpinWindow,
    response_type: TypeInfo,
    request_hash: u64,
    seq: Cell<u64>,
    /// Servers on other hosts, used while none serves on this host (network plane on).
    net: Option<Box<dyn RemoteClient>>,
    max_response: usize,
    _s: PhantomData<S>,
}

impl<S: Service> Client<S> {
    /// The doorbell slot servers ring with responses (for executors' wait sets).
    pub(crate) fn reply_slot(&self) -> &SlotRef {
        &self.reply_slot
    }

    /// The service name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node this client belongs to.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// Number of live servers of the service, on this host (dead ones are reclaimed
    /// first) and, with the network plane on, on others.
    pub fn server_count(&self) -> usize {
        self.node.inner.iox.try_cleanup_dead_nodes();
        self.host_servers() + self.remote_servers()
    }

    fn host_servers(&self) -> usize {
        self.service.dynamic_config().number_of_servers()
    }

    fn remote_servers(&self) -> usize {
        self.net.as_ref().map_or(0, |n| n.remote_servers())
    }

    /// Waits until a server serves the service, at most `timeout`; returns whether one does.
    pub fn wait_for_service(&self, timeout: Duration) -> bool {
        // reclaim dead servers once; a server that appears later is alive
        let live = self.server_count();
        if live > 0 {
            return true;
        }
        let deadline = Instant::now() + timeout;
        loop {
            if self.host_servers() + self.remote_servers() > 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn shm_err(&self, e: impl std::fmt::Debug) -> CallError {
        CallError::Shm {
            service: self.name.clone(),
            reason: format!("{e:?}"),
        }
    }

    fn loan(&self, len: usize) -> Result<IoxRequestMut, CallError> {
        if len > self.max_request {
            return Err(CallError::PayloadTooLarge {
                service: self.name.clone(),
                requested: len,
                max: self.max_request,
            });
        }
        let words = shm::words_for(len).max(1);
        let mut attempt = self.port.loan_slice_uninit(words);
        if matches!(attempt, Err(IoxLoanError::OutOfMemory)) {
            // requests may be held by a server that died: reclaim, then retry once
            self.node.inner.iox.try_cleanup_dead_nodes();
            attempt = self.port.loan_slice_uninit(words);
        }
        let uninit = attempt.map_err(|e| match e {
            IoxLoanError::ExceedsMaxLoans => CallError::TooManyInFlight {
                service: self.name.clone(),
                max: self.max_in_flight,
            },
            e => self.shm_err(e),
        })?;
        // SAFETY: the payload is shared memory mapped from a file: every byte is
        // initialized (zero-filled by the kernel, later overwritten by earlier payloads),
        // and u64 has no invalid values.
        Ok(unsafe { uninit.assume_init() })
    }

    /// Loans a request with room for `len` elements after the head. The head is zeroed;
    /// the elements hold unspecified bytes: overwrite them. Fails before anything is sent
    /// if the request would exceed `ServiceQos::max_request`.
    pub fn loan_slice(&self, len: usize) -> Result<RequestLoan<'_, S>, CallError> {
        let bytes = len
            .checked_mul(core::mem::size_of::<<S::Request as Message>::Elem>())
            .and_then(|b| b.checked_add(elems_offset::<S::Request>()))
            .unwrap_or(usize::MAX);
        let req = self.loan(bytes.max(1))?;
        let mut loan = RequestLoan {
            req,
            elems: len,
            len: bytes,
            client: self,
        };
        *loan.head_mut() = crate::message::zeroed::<S::Request>();
        Ok(loan)
    }

    /// Sends a head and its elements; the response comes through the returned call.
    pub fn send_slice(
        &self,
        head: &S::Request,
        elems: &[<S::Request as Message>::Elem],
    ) -> Result<PendingCall<'_, S>, CallError> {
        let mut loan = self.loan_slice(elems.len())?;
        *loan.head_mut() = *head;
        loan.elems_mut().copy_from_slice(elems);
        loan.send()
    }

    /// Calls with a head and its elements and waits up to `timeout` for the response.
    pub fn call_slice(
        &self,
        head: &S::Request,
        elems: &[<S::Request as Message>::Elem],
        timeout: Duration,
    ) -> Result<Reply<S>, CallError> {
        self.send_slice(head, elems)?.wait(timeout)
    }

    fn send_request(
        &self,
        mut req: IoxRequestMut,
        len: usize,
    ) -> Result<PendingCall<'_, S>, CallError> {
        let seq = self.seq.get() + 1;
        self.seq.set(seq);
        let header = CallHeader {
            seq,
            sent_mono_ns: mono_ns(),
            payload_len: len as u64,
            type_hash: self.request_hash,
            reply_slot: self.reply_index,
            status: 0,
        };
        // a server on this host is preferred; the network is used only without one
        if let Some(net) = &self.net {
            if self.host_servers() == 0 && net.remote_servers() > 0 {
                if net.in_flight() >= self.max_in_flight {
                    return Err(CallError::TooManyInFlight {
                        service: self.name.clone(),
                        max: self.max_in_flight,
                    });
                }
                let payload = &shm::words_as_bytes(req.payload())[..len];
                let call = net.call(
                    &self.node.inner.ctx.inner.doorbell,
                    &header,
                    payload,
                    &self.response_type,
                    self.max_response,
                    self.reply_index,
                )?;
                return Ok(PendingCall {
                    route: CallRoute::Net(call),
                    seq,
                    client: self,
                });
            }
        }
        *req.user_header_mut() = header;
        let pending = req.send().map_err(|e| match e {
            RequestSendError::ExceedsMaxActiveRequests => CallError::TooManyInFlight {
                service: self.name.clone(),
                max: self.max_in_flight,
            },
            e => self.shm_err(e),
        })?;
        self.server_slot.ring();
        if pending.number_of_server_connections() == 0 {
            return Err(CallError::NoServer {
                service: self.name.clone(),
            });
        }
        Ok(PendingCall {
            route: CallRoute::Shm(pending),
            seq,
            client: self,
        })
    }

    fn reply(&self, resp: ReplyBuf) -> Result<Reply<S>, CallError> {
        let h = *resp.header();
        let text = || {
            let bytes = shm::words_as_bytes(resp.words());
            let n = (h.payload_len as usize).min(bytes.len());
            String::from_utf8_lossy(&bytes[..n]).into_owned()
        };
        match h.status {
            s if s == CallStatus::Ok as u32 => {
                let elems = shm::check_payload(
                    h.type_hash,
                    h.payload_len,
                    resp.words(),
                    &self.response_type,
                )
                .map_err(|reason| CallError::Malformed {
                    service: self.name.clone(),
                    reason,
                })?;
                Ok(Reply {
                    resp,
                    elems,
                    _s: PhantomData,
                })
            }
            s if s == CallStatus::HandlerError as u32 => Err(CallError::Handler {
                service: self.name.clone(),
                message: text(),
            }),
            s if s == CallStatus::Rejected as u32 => Err(CallError::Rejected {
                service: self.name.clone(),
                reason: text(),
            }),
            s => Err(CallError::Malformed {
                service: self.name.clone(),
                reason: format!("unknown status {s}"),
            }),
        }
    }
}

impl<S: Service> Client<S>
where
    S::Request: Message<Elem = NoElem>,
{
    /// Sends `req`; the response comes through the returned call.
    pub fn send(&self, req: &S::Request) -> Result<PendingCall<'_, S>, CallError> {
        self.send_slice(req, &[])
    }

    /// Calls with `req` and waits up to `timeout` for the response.
    pub fn call(&self, req: &S::Request, timeout: Duration) -> Result<Reply<S>, CallError> {
        self.send(req)?.wait(timeout)
    }
}

/// A request loaned in shared memory: write it in place, then [`send`](RequestLoan::send)
/// or [`call`](RequestLoan::call). Dropping it sends nothing.
pub struct RequestLoan<'c, S: Service> {
    req: IoxRequestMut,
    elems: usize,
    len: usize,
    client: &'c Client<S>,
}

impl<'c, S: Service> RequestLoan<'c, S> {
    /// The fixed head of the request.
    pub fn head_mut(&mut self) -> &mut S::Request {
        // SAFETY: the payload holds at least size_of::<Request>() bytes (loaned so), is
        // 8-byte aligned (transport words), align_of::<Request>() <= 8 is asserted at
        // compile time by TypeInfo::of (which created this client); Request is Pod, so
        // any bytes are valid; the borrow is tied to &mut self.
        unsafe { &mut *(self.req.payload_mut().as_mut_ptr() as *mut S::Request) }
    }

    /// The elements after the head.
    pub fn elems_mut(&mut self) -> &mut [<S::Request as Message>::Elem] {
        let n = self.elems;
        // SAFETY: the payload was loaned with room for n elements at elems_offset, aligned
        // for Elem (payload alignment >= align_of Elem); Elem is Pod.
        unsafe {
            let p =
                (self.req.payload_mut().as_mut_ptr() as *mut u8).add(elems_offset::<S::Request>());
            core::slice::from_raw_parts_mut(p as *mut <S::Request as Message>::Elem, n)
        }
    }

    /// The elements as raw bytes, for filling large requests with one copy.
    pub fn elem_bytes_mut(&mut self) -> &mut [u8] {
        let off = elems_offset::<S::Request>();
        &mut shm::words_as_bytes_mut(self.req.payload_mut())[off..self.len]
    }

    /// Sends the request; the response comes through the returned call.
    pub fn send(self) -> Result<PendingCall<'c, S>, CallError> {
        self.client.send_request(self.req, self.len)
    }

    /// Sends the request and waits up to `timeout` for the response.
    pub fn call(self, timeout: Duration) -> Result<Reply<S>, CallError> {
        self.send()?.wait(timeout)
    }
}

impl<S: Service> Deref for RequestLoan<'_, S> {
    type Target = S::Request;
    fn deref(&self) -> &S::Request {
        // SAFETY: the payload holds at least size_of::<Request>() bytes (loaned so), is
        // 8-byte aligned, align_of::<Request>() <= 8 is asserted at compile time by
        // TypeInfo::of; Request is Pod; the borrow is tied to &self.
        unsafe { &*(self.req.payload().as_ptr() as *const S::Request) }
    }
}

impl<S: Service> DerefMut for RequestLoan<'_, S> {
    fn deref_mut(&mut self) -> &mut S::Request {
        self.head_mut()
    }
}

/// A call in flight: take its response when it arrives. Dropping it abandons the call.
pub struct PendingCall<'c, S: Service> {
    route: CallRoute,
    seq: u64,
    client: &'c Client<S>,
}

/// How a call travels.
enum CallRoute {
    /// To a server on this host.
    Shm(IoxPending),
    /// To a server on another host.
    Net(Arc<dyn RemoteCall>),
}

/// Where a response lives.
enum ReplyBuf {
    Shm(IoxResponse),
    Net(Frame<CallHeader>),
}

impl ReplyBuf {
    fn header(&self) -> &CallHeader {
        match self {
            ReplyBuf::Shm(r) => r.user_header(),
            ReplyBuf::Net(f) => &f.header,
        }
    }

    fn words(&self) -> &[u64] {
        match self {
            ReplyBuf::Shm(r) => r.payload(),
            ReplyBuf::Net(f) => &f.words,
        }
    }
}

impl<S: Service> PendingCall<'_, S> {
    /// The call number (the request header's `seq`).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    fn receive(&self) -> Result<Option<Reply<S>>, CallError> {
        let resp = match &self.route {
            CallRoute::Shm(p) => p
                .receive()
                .map_err(|e| self.client.shm_err(e))?
                .map(ReplyBuf::Shm),
            CallRoute::Net(call) => match call.take() {
                Some(Ok(frame)) => Some(ReplyBuf::Net(frame)),
                Some(Err(reason)) if reason.starts_with("malformed") => {
                    return Err(CallError::Malformed {
                        service: self.client.name.clone(),
                        reason,
                    })
                }
                Some(Err(_)) => return Err(self.server_gone()),
                None => None,
            },
        };
        resp.map(|r| self.client.reply(r)).transpose()
    }

    /// Whether the server still holds the call (or a response is there).
    fn connected(&self) -> bool {
        match &self.route {
            CallRoute::Shm(p) => p.is_connected() || p.has_response(),
            CallRoute::Net(call) => call.is_done() || self.client.remote_servers() > 0,
        }
    }

    /// Whether the call has ended: a response is there or the server let go of it.
    pub(crate) fn is_done(&self) -> bool {
        match &self.route {
            CallRoute::Shm(p) => p.has_response() || !p.is_connected(),
            CallRoute::Net(call) => call.is_done(),
        }
    }

    fn server_gone(&self) -> CallError {
        CallError::ServerGone {
            service: self.client.name.clone(),
        }
    }

    /// Takes the response if it arrived; [`CallError::ServerGone`] if the server went away
    /// without responding.
    pub fn try_take(&self) -> Result<Option<Reply<S>>, CallError> {
        if let Some(r) = self.receive()? {
            return Ok(Some(r));
        }
        if !self.connected() {
            // the server may have responded just before it let go of the request
            return match self.receive()? {
                Some(r) => Ok(Some(r)),
                None => Err(self.server_gone()),
            };
        }
        Ok(None)
    }

    /// Waits up to `timeout` for the response. A server that dies or stops meanwhile ends
    /// the wait within about [`LIVENESS_CHECK`] with [`CallError::ServerGone`].
    pub fn wait(self, timeout: Duration) -> Result<Reply<S>, CallError> {
        let client = self.client;
        let slot = &client.reply_slot;
        let mut next_check = Instant::now() + LIVENESS_CHECK;
        let got = wait_for(
            client.mode,
            &client.spin,
            slot,
            timeout,
            LIVENESS_CHECK,
            || self.receive(),
            || {
                let now = Instant::now();
                if now < next_check {
                    return Ok(());
                }
                next_check = now + LIVENESS_CHECK;
                // a killed server is only noticed once its resources are reclaimed
                client.node.inner.iox.try_cleanup_dead_nodes();
                if self.connected() {
                    Ok(())
                } else {
                    Err(self.server_gone())
                }
            },
        )?;
        got.ok_or(CallError::Timeout {
            service: client.name.clone(),
            timeout,
        })
    }
}

impl<S: Service> Drop for PendingCall<'_, S> {
    /// An abandoned network call leaves the client's count of calls in flight at once
    /// (its Zenoh query ends by itself).
    fn drop(&mut self) {
        if let CallRoute::Net(call) = &self.route {
            call.release();
        }
    }
}

/// A response, read in place in shared memory (or, from another host, in a buffer of
/// its own). Dropping it releases the memory.
pub struct Reply<S: Service> {
    resp: ReplyBuf,
    elems: usize,
    _s: PhantomData<S>,
}

impl<S: Service> Reply<S> {
    /// The response's header (call number, send time).
    pub fn header(&self) -> &CallHeader {
        self.resp.header()
    }

    /// The elements after the head.
    pub fn elems(&self) -> &[<S::Response as Message>::Elem] {
        // SAFETY: check_payload proved the payload holds `elems` elements at elems_offset,
        // aligned (payload alignment >= align_of Elem); Elem is Pod.
        unsafe {
            let p = (self.resp.words().as_ptr() as *const u8).add(elems_offset::<S::Response>());
            core::slice::from_raw_parts(p as *const <S::Response as Message>::Elem, self.elems)
        }
    }

    /// The whole payload as bytes (head, padding and elements).
    pub fn payload_bytes(&self) -> &[u8] {
        &shm::words_as_bytes(self.resp.words())[..self.header().payload_len as usize]
    }
}

impl<S: Service> Deref for Reply<S> {
    type Target = S::Response;
    fn deref(&self) -> &S::Response {
        // SAFETY: check_payload proved the payload holds at least size_of::<Response>()
        // bytes at an address aligned for it, and Response is Pod.
        unsafe { &*(self.resp.words().as_ptr() as *const S::Response) }
    }
}
