//! Service clients: loan a request in shared memory, send it, and wait for its response
//! (read in place). Calls are synchronous ([`Client::call`]) or pipelined
//! ([`Client::send`] and [`PendingCall`]). [`RawClient`] is the one implementation: it
//! knows its service's types at run time (bindings, tools); [`Client`] is its typed face.

use crate::context::Node;
use crate::error::{CallError, ServiceError};
use crate::message::header::{CallHeader, CallStatus};
use crate::message::{elems_offset, Message, NoElem, TypeInfo};
use crate::service::{Service, ServiceQos, ServiceType};
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
use std::rc::Rc;
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
            name: name.to_string(),
            node,
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
        let raw = RawClient::create(
            &self.node,
            &self.name,
            &ServiceType::of::<S>(),
            self.qos,
            self.mode,
        )?;
        super::record_schemas::<S>(&self.node);
        Ok(Client {
            raw,
            _s: PhantomData,
        })
    }
}

/// Calls one service whose types are known only at run time: requests and responses are
/// bytes, checked against the service's layouts ([`ServiceType`]). Routes, limits and
/// waiting are those of [`Client`], which is a typed wrapper around it. Several clients
/// may call the same service.
pub struct RawClient {
    inner: Rc<ClientInner>,
}

/// Everything a client holds; shared with its calls in flight.
struct ClientInner {
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
    ty: ServiceType,
    seq: Cell<u64>,
    /// Servers on other hosts, used while none serves on this host (network plane on).
    net: Option<Box<dyn RemoteClient>>,
    max_response: usize,
}

impl RawClient {
    /// Opens service `name` (resolved as [`Node::resolve_name`] says) of type `ty`
    /// (creating it if no server made it yet, so a client may start first) and creates a
    /// client that waits for responses as `mode` says. A service of another type is an
    /// error naming both.
    pub fn create(
        node: &Node,
        name: &str,
        ty: &ServiceType,
        qos: ServiceQos,
        mode: WaitMode,
    ) -> Result<RawClient, ServiceError> {
        let name = node.resolve_name(name);
        crate::name::validate_topic(&name)?;
        qos.validate().map_err(|reason| ServiceError::InvalidQos {
            service: name.clone(),
            reason,
        })?;
        let service = rpc::open_service(&node.inner.iox, &name, Some(ty), &qos)?;
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
        let doorbell = &node.inner.ctx.inner.doorbell;
        let bind = |key: String| {
            doorbell.bind_fenced(&key).map_err(|e| ServiceError::Shm {
                service: name.clone(),
                reason: format!("doorbell: {e}"),
            })
        };
        let reply_slot = bind(format!("client:{:032x}", port.id().value()))?;
        let reply_index = reply_slot.index();
        let server_slot = bind(format!("{SERVICE_PREFIX}{name}"))?;
        let ctx = &node.inner.ctx;
        let net = match ctx.remote()? {
            Some(plane) => Some(plane.client(ctx.domain(), &name, (&ty.name, &ty.request))?),
            None => None,
        };
        Ok(RawClient {
            inner: Rc::new(ClientInner {
                net,
                max_response: qos.max_response,
                port,
                service,
                server_slot,
                reply_slot,
                reply_index,
                node: node.clone(),
                name,
                max_request: qos.max_request,
                max_in_flight,
                mode,
                spin: SpinWindow::new(),
                ty: ty.clone(),
                seq: Cell::new(0),
            }),
        })
    }

    /// The service name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The request type's identity.
    pub fn request_type(&self) -> &TypeInfo {
        &self.inner.ty.request
    }

    /// The response type's identity.
    pub fn response_type(&self) -> &TypeInfo {
        &self.inner.ty.response
    }

    /// The doorbell slot servers ring with responses (for executors' wait sets).
    pub(crate) fn reply_slot(&self) -> &SlotRef {
        &self.inner.reply_slot
    }

    /// Number of live servers of the service, on this host (dead ones are reclaimed
    /// first) and, with the network plane on, on others.
    pub fn server_count(&self) -> usize {
        self.inner.node.inner.iox.try_cleanup_dead_nodes();
        self.inner.host_servers() + self.inner.remote_servers()
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
            if self.inner.host_servers() + self.inner.remote_servers() > 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Sends one request given as its bytes (head, then for slice types the elements at
    /// the element offset), copied into a loaned request; the response comes through the
    /// returned call. A payload that does not fit the request type's layout is
    /// [`CallError::BadPayload`] and one over `ServiceQos::max_request`
    /// [`CallError::PayloadTooLarge`]; neither sends anything.
    pub fn send_bytes(&self, payload: &[u8]) -> Result<RawPendingCall, CallError> {
        let ty = &self.inner.ty.request;
        ty.check_len(payload.len())
            .map_err(|reason| CallError::BadPayload {
                service: self.inner.name.clone(),
                type_name: ty.name.clone(),
                len: payload.len(),
                reason,
            })?;
        let mut req = self.loan(payload.len().max(1))?;
        shm::words_as_bytes_mut(req.payload_mut())[..payload.len()].copy_from_slice(payload);
        self.send_request(req, payload.len())
    }

    /// Loans a request of `len` payload bytes (head, then for slice types the elements at
    /// the element offset) in shared memory: write it in place with
    /// [`RawRequestLoan::bytes_mut`], then [`RawRequestLoan::send`] it without a copy. A
    /// length that does not fit the request type's layout is [`CallError::BadPayload`],
    /// one over `ServiceQos::max_request` [`CallError::PayloadTooLarge`], and one loan
    /// more than the calls a client may have in flight [`CallError::TooManyInFlight`].
    /// The bytes are zeroed. Dropping the loan sends nothing.
    pub fn loan_request(&self, len: usize) -> Result<RawRequestLoan, CallError> {
        let ty = &self.inner.ty.request;
        ty.check_len(len).map_err(|reason| CallError::BadPayload {
            service: self.inner.name.clone(),
            type_name: ty.name.clone(),
            len,
            reason,
        })?;
        let mut req = self.loan(len.max(1))?;
        shm::words_as_bytes_mut(req.payload_mut())[..len].fill(0);
        Ok(RawRequestLoan {
            req,
            len,
            client: RawClient {
                inner: self.inner.clone(),
            },
        })
    }

    /// Loans a request of at least `len` bytes (one at least), refusing more than
    /// `ServiceQos::max_request` before anything is sent.
    fn loan(&self, len: usize) -> Result<IoxRequestMut, CallError> {
        let c = &*self.inner;
        if len > c.max_request {
            return Err(CallError::PayloadTooLarge {
                service: c.name.clone(),
                requested: len,
                max: c.max_request,
            });
        }
        let words = shm::words_for(len).max(1);
        let mut attempt = c.port.loan_slice_uninit(words);
        if matches!(attempt, Err(IoxLoanError::OutOfMemory)) {
            // requests may be held by a server that died: reclaim, then retry once
            c.node.inner.iox.try_cleanup_dead_nodes();
            attempt = c.port.loan_slice_uninit(words);
        }
        let uninit = attempt.map_err(|e| match e {
            IoxLoanError::ExceedsMaxLoans => CallError::TooManyInFlight {
                service: c.name.clone(),
                max: c.max_in_flight,
            },
            e => c.shm_err(e),
        })?;
        // SAFETY: the payload is shared memory mapped from a file: every byte is
        // initialized (zero-filled by the kernel, later overwritten by earlier payloads),
        // and u64 has no invalid values.
        Ok(unsafe { uninit.assume_init() })
    }

    /// Sends a loaned request whose first `len` payload bytes are written.
    fn send_request(
        &self,
        mut req: IoxRequestMut,
        len: usize,
    ) -> Result<RawPendingCall, CallError> {
        let c = &*self.inner;
        let seq = c.seq.get() + 1;
        c.seq.set(seq);
        let header = CallHeader {
            seq,
            sent_mono_ns: mono_ns(),
            payload_len: len as u64,
            type_hash: c.ty.request.layout_hash,
            reply_slot: c.reply_index,
            status: 0,
        };
        // a server on this host is preferred; the network is used only without one
        if let Some(net) = &c.net {
            if c.host_servers() == 0 && net.remote_servers() > 0 {
                if net.in_flight() >= c.max_in_flight {
                    return Err(CallError::TooManyInFlight {
                        service: c.name.clone(),
                        max: c.max_in_flight,
                    });
                }
                let payload = &shm::words_as_bytes(req.payload())[..len];
                let call = net.call(
                    &c.node.inner.ctx.inner.doorbell,
                    &header,
                    payload,
                    &c.ty.response,
                    c.max_response,
                    c.reply_index,
                )?;
                return Ok(self.pending(CallRoute::Net(call), seq));
            }
        }
        *req.user_header_mut() = header;
        let pending = req.send().map_err(|e| match e {
            RequestSendError::ExceedsMaxActiveRequests => CallError::TooManyInFlight {
                service: c.name.clone(),
                max: c.max_in_flight,
            },
            e => c.shm_err(e),
        })?;
        c.server_slot.ring();
        if pending.number_of_server_connections() == 0 {
            return Err(CallError::NoServer {
                service: c.name.clone(),
            });
        }
        Ok(self.pending(CallRoute::Shm(pending), seq))
    }

    fn pending(&self, route: CallRoute, seq: u64) -> RawPendingCall {
        RawPendingCall {
            route,
            seq,
            next_check: Cell::new(None),
            client: self.inner.clone(),
        }
    }
}

impl ClientInner {
    fn host_servers(&self) -> usize {
        self.service.dynamic_config().number_of_servers()
    }

    fn remote_servers(&self) -> usize {
        self.net.as_ref().map_or(0, |n| n.remote_servers())
    }

    fn shm_err(&self, e: impl std::fmt::Debug) -> CallError {
        CallError::Shm {
            service: self.name.clone(),
            reason: format!("{e:?}"),
        }
    }

    /// Turns a response into a reply (checked against the response type) or the error
    /// its status carries.
    fn reply(&self, resp: ReplyBuf) -> Result<RawReply, CallError> {
        let h = *resp.header();
        let text = || {
            let bytes = shm::words_as_bytes(resp.words());
            let n = (h.payload_len as usize).min(bytes.len());
            String::from_utf8_lossy(&bytes[..n]).into_owned()
        };
        match h.status {
            s if s == CallStatus::Ok as u32 => {
                let elems =
                    shm::check_payload(h.type_hash, h.payload_len, resp.words(), &self.ty.response)
                        .map_err(|reason| CallError::Malformed {
                            service: self.name.clone(),
                            reason,
                        })?;
                Ok(RawReply { resp, elems })
            }
            s if s == CallStatus::HandlerError as u32 => Err(CallError::Handler {
                service: self.name.clone(),
                message: text(),
            }),
            s if s == CallStatus::Rejected as u32 => Err(CallError::Rejected {
                service: self.name.clone(),
                reason: text(),
            }),
            s if s == CallStatus::ServerGone as u32 => Err(CallError::ServerGone {
                service: self.name.clone(),
            }),
            s => Err(CallError::Malformed {
                service: self.name.clone(),
                reason: format!("unknown status {s}"),
            }),
        }
    }
}

/// Calls one service. Several clients may call the same service.
pub struct Client<S: Service> {
    raw: RawClient,
    _s: PhantomData<S>,
}

impl<S: Service> Client<S> {
    /// The doorbell slot servers ring with responses (for executors' wait sets).
    pub(crate) fn reply_slot(&self) -> &SlotRef {
        self.raw.reply_slot()
    }

    /// The service name.
    pub fn name(&self) -> &str {
        self.raw.name()
    }

    /// The node this client belongs to.
    pub fn node(&self) -> &Node {
        &self.raw.inner.node
    }

    /// Number of live servers of the service, on this host (dead ones are reclaimed
    /// first) and, with the network plane on, on others.
    pub fn server_count(&self) -> usize {
        self.raw.server_count()
    }

    /// Waits until a server serves the service, at most `timeout`; returns whether one does.
    pub fn wait_for_service(&self, timeout: Duration) -> bool {
        self.raw.wait_for_service(timeout)
    }

    /// Loans a request with room for `len` elements after the head. The head is zeroed;
    /// the elements hold unspecified bytes: overwrite them. Fails before anything is sent
    /// if the request would exceed `ServiceQos::max_request`.
    pub fn loan_slice(&self, len: usize) -> Result<RequestLoan<'_, S>, CallError> {
        let bytes = crate::message::slice_bytes::<S::Request>(len).unwrap_or(usize::MAX);
        let req = self.raw.loan(bytes.max(1))?;
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
        crate::message::view_mut::<S::Request>(self.req.payload_mut(), 0).0
    }

    /// The head and the elements, both writable at once (fill a request in one pass).
    pub fn parts_mut(&mut self) -> (&mut S::Request, &mut [<S::Request as Message>::Elem]) {
        crate::message::view_mut::<S::Request>(self.req.payload_mut(), self.elems)
    }

    /// The elements after the head.
    pub fn elems_mut(&mut self) -> &mut [<S::Request as Message>::Elem] {
        crate::message::view_mut::<S::Request>(self.req.payload_mut(), self.elems).1
    }

    /// The elements as raw bytes, for filling large requests with one copy.
    pub fn elem_bytes_mut(&mut self) -> &mut [u8] {
        let off = elems_offset::<S::Request>();
        &mut shm::words_as_bytes_mut(self.req.payload_mut())[off..self.len]
    }

    /// Sends the request; the response comes through the returned call.
    pub fn send(self) -> Result<PendingCall<'c, S>, CallError> {
        Ok(PendingCall {
            raw: self.client.raw.send_request(self.req, self.len)?,
            _c: PhantomData,
        })
    }

    /// Sends the request and waits up to `timeout` for the response.
    pub fn call(self, timeout: Duration) -> Result<Reply<S>, CallError> {
        self.send()?.wait(timeout)
    }
}

impl<S: Service> Deref for RequestLoan<'_, S> {
    type Target = S::Request;
    fn deref(&self) -> &S::Request {
        crate::message::view::<S::Request>(self.req.payload(), 0).0
    }
}

impl<S: Service> DerefMut for RequestLoan<'_, S> {
    fn deref_mut(&mut self) -> &mut S::Request {
        self.head_mut()
    }
}

/// A request of a [`RawClient`] loaned in shared memory ([`RawClient::loan_request`]):
/// write its bytes in place, then [`send`](RawRequestLoan::send) it. It keeps its client
/// alive. Dropping it sends nothing (the memory returns to the client's pool).
pub struct RawRequestLoan {
    req: IoxRequestMut,
    len: usize,
    client: RawClient,
}

impl RawRequestLoan {
    /// The request's payload bytes (head, then elements), writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut shm::words_as_bytes_mut(self.req.payload_mut())[..self.len]
    }

    /// The request's payload bytes.
    pub fn bytes(&self) -> &[u8] {
        &shm::words_as_bytes(self.req.payload())[..self.len]
    }

    /// The payload's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the payload is empty (a request type of no bytes).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sends the request as written; the response comes through the returned call.
    pub fn send(self) -> Result<RawPendingCall, CallError> {
        self.client.send_request(self.req, self.len)
    }
}

/// A call in flight of a [`RawClient`]: take its response when it arrives. It owns what
/// it needs of its client (it may outlive the `RawClient` handle). Dropping it abandons
/// the call.
pub struct RawPendingCall {
    route: CallRoute,
    seq: u64,
    /// When a wait next checks that the server still lives (set by the first wait, kept
    /// across waits so that waiting in slices still checks).
    next_check: Cell<Option<Instant>>,
    client: Rc<ClientInner>,
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

impl RawPendingCall {
    /// The call number (the request header's `seq`).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    fn receive(&self) -> Result<Option<RawReply>, CallError> {
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

    /// Whether the call has ended: a response is there or the server let go of it
    /// ([`try_take`](RawPendingCall::try_take) then returns the response or the error).
    pub fn is_done(&self) -> bool {
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
    pub fn try_take(&self) -> Result<Option<RawReply>, CallError> {
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

    /// Waits up to `timeout` for the response; `Ok(None)` when none came in time, and the
    /// call stays in flight (wait again, e.g. in short slices with other checks between).
    /// A server that dies or stops meanwhile ends the wait within about
    /// [`LIVENESS_CHECK`] with [`CallError::ServerGone`].
    pub fn wait_for(&self, timeout: Duration) -> Result<Option<RawReply>, CallError> {
        let client = &*self.client;
        if self.next_check.get().is_none() {
            self.next_check.set(Some(Instant::now() + LIVENESS_CHECK));
        }
        wait_for(
            client.mode,
            &client.spin,
            &client.reply_slot,
            timeout,
            LIVENESS_CHECK,
            || self.receive(),
            || {
                let now = Instant::now();
                if self.next_check.get().is_some_and(|t| now < t) {
                    return Ok(());
                }
                self.next_check.set(Some(now + LIVENESS_CHECK));
                // a killed server is only noticed once its resources are reclaimed
                client.node.inner.iox.try_cleanup_dead_nodes();
                if self.connected() {
                    Ok(())
                } else {
                    Err(self.server_gone())
                }
            },
        )
    }

    /// Waits up to `timeout` for the response; [`CallError::Timeout`] when none came in
    /// time (the call is then abandoned). A server that dies or stops meanwhile ends the
    /// wait within about [`LIVENESS_CHECK`] with [`CallError::ServerGone`].
    pub fn wait(self, timeout: Duration) -> Result<RawReply, CallError> {
        self.wait_for(timeout)?.ok_or_else(|| CallError::Timeout {
            service: self.client.name.clone(),
            timeout,
        })
    }
}

impl Drop for RawPendingCall {
    /// An abandoned network call leaves the client's count of calls in flight at once
    /// (its Zenoh query ends by itself).
    fn drop(&mut self) {
        if let CallRoute::Net(call) = &self.route {
            call.release();
        }
    }
}

/// A call in flight: take its response when it arrives. Dropping it abandons the call.
pub struct PendingCall<'c, S: Service> {
    raw: RawPendingCall,
    _c: PhantomData<&'c Client<S>>,
}

impl<S: Service> PendingCall<'_, S> {
    /// The call number (the request header's `seq`).
    pub fn seq(&self) -> u64 {
        self.raw.seq()
    }

    /// The untyped call (for executors, which keep calls beside their client).
    pub(crate) fn into_raw(self) -> RawPendingCall {
        self.raw
    }

    /// Takes the response if it arrived; [`CallError::ServerGone`] if the server went away
    /// without responding.
    pub fn try_take(&self) -> Result<Option<Reply<S>>, CallError> {
        Ok(self.raw.try_take()?.map(Reply::from_raw))
    }

    /// Waits up to `timeout` for the response. A server that dies or stops meanwhile ends
    /// the wait within about [`LIVENESS_CHECK`] with [`CallError::ServerGone`].
    pub fn wait(self, timeout: Duration) -> Result<Reply<S>, CallError> {
        self.raw.wait(timeout).map(Reply::from_raw)
    }
}

/// A response of a [`RawClient`]'s call, checked against the response type's layout and
/// read in place in shared memory (or, from another host, in a buffer of its own).
/// Dropping it releases the memory.
pub struct RawReply {
    resp: ReplyBuf,
    elems: usize,
}

impl RawReply {
    /// The response's header (call number, send time).
    pub fn header(&self) -> &CallHeader {
        self.resp.header()
    }

    /// The payload bytes in use (head, padding, elements).
    pub fn bytes(&self) -> &[u8] {
        &shm::words_as_bytes(self.resp.words())[..self.header().payload_len as usize]
    }

    /// Number of slice elements (0 for fixed-size responses).
    pub fn elems(&self) -> usize {
        self.elems
    }
}

/// A response, read in place in shared memory (or, from another host, in a buffer of
/// its own). Dropping it releases the memory.
pub struct Reply<S: Service> {
    raw: RawReply,
    _s: PhantomData<S>,
}

impl<S: Service> Reply<S> {
    /// Types a reply of a call sent by a [`Client<S>`]: its payload was checked against
    /// `TypeInfo::of::<S::Response>()`, which the typed accessors rely on.
    pub(crate) fn from_raw(raw: RawReply) -> Reply<S> {
        Reply {
            raw,
            _s: PhantomData,
        }
    }

    /// The response's header (call number, send time).
    pub fn header(&self) -> &CallHeader {
        self.raw.header()
    }

    /// The elements after the head.
    pub fn elems(&self) -> &[<S::Response as Message>::Elem] {
        crate::message::view::<S::Response>(self.raw.resp.words(), self.raw.elems).1
    }

    /// The whole payload as bytes (head, padding and elements).
    pub fn payload_bytes(&self) -> &[u8] {
        self.raw.bytes()
    }
}

impl<S: Service> Deref for Reply<S> {
    type Target = S::Response;
    fn deref(&self) -> &S::Response {
        crate::message::view::<S::Response>(self.raw.resp.words(), 0).0
    }
}

impl<T, S> Client<S>
where
    T: crate::message::SerdeMessage,
    S: Service<Request = crate::message::Serde<T>>,
{
    /// Encodes `value` with serde into a loaned request and sends it.
    pub fn send_value(&self, value: &T) -> Result<PendingCall<'_, S>, CallError> {
        let bytes =
            crate::message::serde_encode(value).map_err(|reason| CallError::BadPayload {
                service: self.name().to_string(),
                type_name: T::TYPE_NAME.to_string(),
                len: 0,
                reason,
            })?;
        let mut loan = self.loan_slice(bytes.len())?;
        *loan.head_mut() = crate::message::Serde::with_len(bytes.len());
        loan.elems_mut().copy_from_slice(&bytes);
        loan.send()
    }

    /// Calls with a serde-encoded `value` and waits up to `timeout` for the response.
    pub fn call_value(&self, value: &T, timeout: Duration) -> Result<Reply<S>, CallError> {
        self.send_value(value)?.wait(timeout)
    }
}

impl<U, S> Reply<S>
where
    U: crate::message::SerdeMessage,
    S: Service<Response = crate::message::Serde<U>>,
{
    /// Decodes a serde-encoded response (bounded by its bytes; malformed input is an
    /// error).
    pub fn decode(&self) -> Result<U, crate::error::DecodeError> {
        let n = self.encoded_len().min(self.elems().len());
        crate::message::serde_decode(&self.elems()[..n]).map_err(|reason| {
            crate::error::DecodeError {
                type_name: U::TYPE_NAME.to_string(),
                reason,
            }
        })
    }
}
