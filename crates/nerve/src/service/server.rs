//! Service servers: take requests read in place in shared memory, answer each with one
//! response loaned in shared memory. [`RawServer`] is the one implementation: it knows
//! its service's types at run time (bindings, tools); [`Server`] is its typed face.

use crate::context::{Context, Node};
use crate::error::{ServeError, ServiceError};
use crate::message::header::{CallHeader, CallStatus};
use crate::message::{elems_offset, Message, NoElem, TypeInfo};
use crate::service::{HandlerResult, Service, ServiceQos, ServiceType};
use crate::sys::clock::mono_ns;
use crate::transport::doorbell::SlotRef;
use crate::transport::remote::{RemoteRequest, RemoteServer};
use crate::transport::rpc::{
    self, IoxActiveRequest, IoxResponseMut, IoxServer, RpcService, SERVICE_PREFIX,
};
use crate::transport::shm;
use crate::transport::wait::{wait_for, SpinWindow, WaitMode, MAX_SLEEP};
use iceoryx2::port::LoanError as IoxLoanError;
use iceoryx2::prelude::AllocationStrategy;
use iceoryx2::service::port_factory::PortFactory as _;
use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Builds a [`Server`].
pub struct ServiceBuilder<S: Service> {
    node: Node,
    name: String,
    qos: ServiceQos,
    mode: WaitMode,
    _s: PhantomData<S>,
}

impl<S: Service> ServiceBuilder<S> {
    pub(crate) fn new(node: Node, name: &str) -> Self {
        ServiceBuilder {
            name: name.to_string(),
            node,
            qos: ServiceQos::default(),
            mode: WaitMode::default(),
            _s: PhantomData,
        }
    }

    /// Sets the service's limits (used if this server creates the service).
    pub fn qos(mut self, qos: ServiceQos) -> Self {
        self.qos = qos;
        self
    }

    /// Sets how the server waits for requests.
    pub fn wait_mode(mut self, mode: WaitMode) -> Self {
        self.mode = mode;
        self
    }

    /// Opens the service (creating it if needed) and becomes its server. Fails with
    /// [`ServiceError::AlreadyServed`] if another live server serves it.
    pub fn create(self) -> Result<Server<S>, ServiceError> {
        let raw = RawServer::create(
            &self.node,
            &self.name,
            &ServiceType::of::<S>(),
            self.qos,
            self.mode,
        )?;
        super::record_schemas::<S>(&self.node);
        Ok(Server {
            raw,
            _s: PhantomData,
        })
    }
}

/// Serves one service whose types are known only at run time: requests and responses
/// are bytes, checked against the service's layouts ([`ServiceType`]). Routes, limits and
/// waiting are those of [`Server`], which is a typed wrapper around it.
pub struct RawServer {
    inner: Rc<ServerInner>,
}

/// Everything a server holds; shared with the requests it has taken.
struct ServerInner {
    // field order is drop order: the port goes before its service and node
    port: IoxServer,
    service: RpcService,
    /// The service's doorbell slot, rung by clients after they sent.
    slot: SlotRef,
    node: Node,
    name: String,
    qos: ServiceQos,
    mode: WaitMode,
    spin: SpinWindow,
    ty: ServiceType,
    rejected: Cell<u64>,
    /// Requests from other hosts (the network plane is on).
    net: Option<Box<dyn RemoteServer>>,
}

/// Where a taken request lives.
enum Incoming {
    Shm(IoxActiveRequest),
    Net(RemoteRequest),
}

impl Incoming {
    fn words(&self) -> &[u64] {
        match self {
            Incoming::Shm(a) => a.payload(),
            Incoming::Net(n) => &n.words,
        }
    }
}

/// Where a response is written until it is sent.
enum Outgoing {
    Shm(IoxResponseMut),
    Net(Vec<u64>),
}

impl Outgoing {
    fn words(&self) -> &[u64] {
        match self {
            Outgoing::Shm(r) => r.payload(),
            Outgoing::Net(v) => v,
        }
    }

    fn words_mut(&mut self) -> &mut [u64] {
        match self {
            Outgoing::Shm(r) => r.payload_mut(),
            Outgoing::Net(v) => v,
        }
    }
}

impl RawServer {
    /// Opens service `name` (resolved as [`Node::resolve_name`] says) of type `ty`
    /// (creating it if needed) and becomes its server, waiting for requests as `mode`
    /// says. Fails with [`ServiceError::AlreadyServed`] if another live server serves it;
    /// a service of another type is an error naming both.
    pub fn create(
        node: &Node,
        name: &str,
        ty: &ServiceType,
        qos: ServiceQos,
        mode: WaitMode,
    ) -> Result<RawServer, ServiceError> {
        let name = node.resolve_name(name);
        crate::name::validate_topic(&name)?;
        qos.validate().map_err(|reason| ServiceError::InvalidQos {
            service: name.clone(),
            reason,
        })?;
        let iox = &node.inner.iox;
        let service = rpc::open_service(iox, &name, Some(ty), &qos)?;
        let servers = || service.dynamic_config().number_of_servers();
        if servers() > 0 {
            // a dead server may still be registered: reclaim it before judging
            iox.try_cleanup_dead_nodes();
            if servers() > 0 {
                return Err(ServiceError::AlreadyServed { service: name });
            }
        }
        let pool_qos = qos.clone();
        let port = service
            .server_builder()
            .initial_max_slice_len(shm::words_for(qos.initial_payload))
            .allocation_strategy(AllocationStrategy::PowerOfTwo)
            .max_loaned_responses_per_request(1)
            .override_response_preallocation(move |n| pool_qos.pool(n))
            .create()
            .map_err(|e| ServiceError::Shm {
                service: name.clone(),
                reason: format!("cannot create server: {e:?}"),
            })?;
        if servers() > 1 {
            // two servers started at once: neither may serve alone, so this one yields
            return Err(ServiceError::AlreadyServed { service: name });
        }
        let ctx = &node.inner.ctx;
        let slot = ctx
            .inner
            .doorbell
            .bind_fenced(&format!("{SERVICE_PREFIX}{name}"))
            .map_err(|e| ServiceError::Shm {
                service: name.clone(),
                reason: format!("doorbell: {e}"),
            })?;
        let net = match ctx.remote()? {
            Some(plane) => Some(plane.server(
                slot.clone(),
                ctx.domain(),
                &name,
                (&ty.name, &ty.request),
                qos.max_request,
                qos.max_in_flight.max(16),
            )?),
            None => None,
        };
        Ok(RawServer {
            inner: Rc::new(ServerInner {
                net,
                port,
                service,
                slot,
                node: node.clone(),
                name,
                qos,
                mode,
                spin: SpinWindow::new(),
                ty: ty.clone(),
                rejected: Cell::new(0),
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

    /// Number of clients connected to the service.
    pub fn client_count(&self) -> usize {
        self.inner.service.dynamic_config().number_of_clients()
    }

    /// The doorbell slot clients ring after sending (for executors' wait sets).
    pub(crate) fn wake_slot(&self) -> &SlotRef {
        &self.inner.slot
    }

    /// Whether a request is queued (a failing check counts as ready: taking reports it).
    pub(crate) fn has_requests(&self) -> bool {
        let s = &*self.inner;
        s.port.has_requests().unwrap_or(true) || s.net.as_ref().is_some_and(|n| n.has_requests())
    }

    /// Requests rejected so far because they violated the request type's layout (from
    /// this host and, with the network plane on, from others).
    pub fn rejected(&self) -> u64 {
        let s = &*self.inner;
        s.rejected.get() + s.net.as_ref().map_or(0, |n| n.rejected())
    }

    fn request(&self, incoming: Incoming, header: CallHeader, elems: usize) -> RawRequest {
        RawRequest {
            incoming,
            header,
            elems,
            replied: Cell::new(false),
            server: self.inner.clone(),
        }
    }

    /// Takes the next request if one is queued. Requests that violate the request type's
    /// layout never come out: they are answered with [`CallStatus::Rejected`] and counted
    /// ([`rejected`](RawServer::rejected)).
    pub fn try_take(&self) -> Result<Option<RawRequest>, ServeError> {
        let s = &*self.inner;
        loop {
            let Some(active) = s.port.receive().map_err(|e| s.shm_err(e))? else {
                // requests from other hosts were validated on arrival
                return Ok(s.net.as_ref().and_then(|n| n.pop()).map(|n| {
                    let (header, elems) = (n.header, n.elems);
                    self.request(Incoming::Net(n), header, elems)
                }));
            };
            let h = *active.user_header();
            match shm::check_payload(h.type_hash, h.payload_len, active.payload(), &s.ty.request) {
                Ok(elems) => return Ok(Some(self.request(Incoming::Shm(active), h, elems))),
                Err(reason) => {
                    // never hand garbage to the handler: tell the client why and go on
                    s.rejected.set(s.rejected.get() + 1);
                    let _ = s.send_status(
                        &Incoming::Shm(active),
                        h,
                        CallStatus::Rejected,
                        &format!("malformed request: {reason}"),
                    );
                }
            }
        }
    }

    /// Waits up to `timeout` for a request (spinning or sleeping as the wait mode says).
    pub fn take_timeout(&self, timeout: Duration) -> Result<Option<RawRequest>, ServeError> {
        Ok(self.take_until(timeout, None)?.flatten())
    }

    /// Like `take_timeout`, but returns `Some(None)` as soon as `stop` is seen set.
    fn take_until(
        &self,
        timeout: Duration,
        stop: Option<&AtomicBool>,
    ) -> Result<Option<Option<RawRequest>>, ServeError> {
        let s = &*self.inner;
        wait_for(
            s.mode,
            &s.spin,
            &s.slot,
            timeout,
            MAX_SLEEP,
            || {
                // SYNC: Acquire pairs with the Release store of whoever stops us.
                if stop.is_some_and(|s| s.load(Ordering::Acquire)) {
                    return Ok(Some(None));
                }
                Ok(self.try_take()?.map(Some))
            },
            || Ok(()),
        )
    }
}

impl ServerInner {
    fn shm_err(&self, e: impl std::fmt::Debug) -> ServeError {
        ServeError::Shm {
            service: self.name.clone(),
            reason: format!("{e:?}"),
        }
    }

    fn loan(&self, incoming: &Incoming, len: usize) -> Result<Outgoing, ServeError> {
        if len > self.qos.max_response {
            return Err(ServeError::PayloadTooLarge {
                service: self.name.clone(),
                requested: len,
                max: self.qos.max_response,
            });
        }
        let words = shm::words_for(len).max(1);
        let active = match incoming {
            Incoming::Shm(a) => a,
            Incoming::Net(_) => return Ok(Outgoing::Net(vec![0; words])),
        };
        let mut attempt = active.loan_slice_uninit(words);
        if matches!(attempt, Err(IoxLoanError::OutOfMemory)) {
            // responses may be held by a client that died: reclaim, then retry once
            self.node.inner.iox.try_cleanup_dead_nodes();
            attempt = active.loan_slice_uninit(words);
        }
        let uninit = attempt.map_err(|e| self.shm_err(e))?;
        // SAFETY: the payload is shared memory mapped from a file: every byte is
        // initialized (zero-filled by the kernel, later overwritten by earlier payloads),
        // and u64 has no invalid values.
        Ok(Outgoing::Shm(unsafe { uninit.assume_init() }))
    }

    fn send(
        &self,
        resp: Outgoing,
        incoming: &Incoming,
        request: CallHeader,
        status: CallStatus,
        type_hash: u64,
        len: usize,
    ) -> Result<(), ServeError> {
        let mut resp = match (resp, incoming) {
            (Outgoing::Shm(r), _) => r,
            (Outgoing::Net(v), Incoming::Net(req)) => {
                let bytes = &shm::words_as_bytes(&v)[..len];
                return Ok(req.reply.respond(&req.header, status, type_hash, bytes)?);
            }
            (Outgoing::Net(_), _) => {
                return Err(self.shm_err("a network response without a network request"))
            }
        };
        *resp.user_header_mut() = CallHeader {
            seq: request.seq,
            sent_mono_ns: mono_ns(),
            payload_len: len as u64,
            type_hash,
            reply_slot: 0,
            status: status as u32,
        };
        let result = resp.send();
        self.node
            .inner
            .ctx
            .inner
            .doorbell
            .slot_at(request.reply_slot)
            .ring();
        // a client that went away meanwhile is not the server's failure
        match result {
            Ok(()) | Err(iceoryx2::port::SendError::ConnectionBrokenSinceSenderNoLongerExists) => {
                Ok(())
            }
            Err(e) => Err(self.shm_err(e)),
        }
    }

    fn send_status(
        &self,
        incoming: &Incoming,
        request: CallHeader,
        status: CallStatus,
        text: &str,
    ) -> Result<(), ServeError> {
        // an error text longer than the response limit is cut, never refused
        let text = &text[..floor_char_boundary(text, self.qos.max_response)];
        let mut resp = self.loan(incoming, text.len())?;
        shm::words_as_bytes_mut(resp.words_mut())[..text.len()].copy_from_slice(text.as_bytes());
        self.send(resp, incoming, request, status, 0, text.len())
    }
}

/// A request taken by a [`RawServer`], checked against the request type's layout and
/// read in place in shared memory. It owns what it needs of its server (it may outlive
/// the `RawServer` handle). Answer it once with [`reply_bytes`](RawRequest::reply_bytes)
/// or [`fail`](RawRequest::fail); dropped unanswered, it answers
/// [`CallStatus::Rejected`], so every request gets exactly one answer.
pub struct RawRequest {
    incoming: Incoming,
    header: CallHeader,
    elems: usize,
    replied: Cell<bool>,
    server: Rc<ServerInner>,
}

impl RawRequest {
    /// The request's header (call number, send time).
    pub fn header(&self) -> &CallHeader {
        &self.header
    }

    /// The payload bytes in use (head, padding, elements).
    pub fn bytes(&self) -> &[u8] {
        &shm::words_as_bytes(self.incoming.words())[..self.header.payload_len as usize]
    }

    /// Number of slice elements (0 for fixed-size requests).
    pub fn elems(&self) -> usize {
        self.elems
    }

    /// Whether the client still waits for the response.
    pub fn client_waits(&self) -> bool {
        match &self.incoming {
            Incoming::Shm(a) => a.is_connected(),
            Incoming::Net(_) => true,
        }
    }

    fn already_replied(&self) -> ServeError {
        ServeError::AlreadyReplied {
            service: self.server.name.clone(),
            seq: self.header.seq,
        }
    }

    /// Answers with a response given as its bytes (head, then for slice types the
    /// elements at the element offset), copied into a loaned response. A payload that
    /// does not fit the response type's layout is [`ServeError::BadPayload`] and one over
    /// `ServiceQos::max_response` [`ServeError::PayloadTooLarge`]; neither sends anything
    /// (the request may still be answered).
    pub fn reply_bytes(&self, payload: &[u8]) -> Result<(), ServeError> {
        let ty = &self.server.ty.response;
        ty.check_len(payload.len())
            .map_err(|reason| ServeError::BadPayload {
                service: self.server.name.clone(),
                type_name: ty.name.clone(),
                len: payload.len(),
                reason,
            })?;
        let mut resp = self.loan_reply(payload.len().max(1))?;
        shm::words_as_bytes_mut(resp.words_mut())[..payload.len()].copy_from_slice(payload);
        self.send_reply(resp, payload.len())
    }

    /// Answers with an error: the client's call fails with
    /// [`crate::CallError::Handler`] carrying `message`.
    pub fn fail(&self, message: &str) -> Result<(), ServeError> {
        if self.replied.replace(true) {
            return Err(self.already_replied());
        }
        self.server.send_status(
            &self.incoming,
            self.header,
            CallStatus::HandlerError,
            message,
        )
    }

    /// Answers that the server this one stands for (a bridged server on another system)
    /// went away before responding: the client's call fails with
    /// [`crate::CallError::ServerGone`], as when a Nerve server dies, not with a timeout.
    pub fn server_gone(&self, reason: &str) -> Result<(), ServeError> {
        if self.replied.replace(true) {
            return Err(self.already_replied());
        }
        self.server
            .send_status(&self.incoming, self.header, CallStatus::ServerGone, reason)
    }

    /// Loans a response of at least `len` bytes, unless the request was answered.
    fn loan_reply(&self, len: usize) -> Result<Outgoing, ServeError> {
        if self.replied.get() {
            return Err(self.already_replied());
        }
        self.server.loan(&self.incoming, len)
    }

    /// Sends a loaned response whose first `len` bytes are written, as the answer.
    fn send_reply(&self, resp: Outgoing, len: usize) -> Result<(), ServeError> {
        if self.replied.replace(true) {
            return Err(self.already_replied());
        }
        self.server.send(
            resp,
            &self.incoming,
            self.header,
            CallStatus::Ok,
            self.server.ty.response.layout_hash,
            len,
        )
    }

    /// Answers a request its handler returned from without replying: with the handler's
    /// error, or [`CallStatus::Rejected`] when it returned `Ok`.
    fn finish(&self, result: HandlerResult) -> Result<(), ServeError> {
        if self.replied.replace(true) {
            return Ok(());
        }
        let (status, text) = match result {
            Err(e) => (CallStatus::HandlerError, e.to_string()),
            Ok(()) => (
                CallStatus::Rejected,
                "the handler returned without a response".to_string(),
            ),
        };
        self.server
            .send_status(&self.incoming, self.header, status, &text)
    }
}

impl Drop for RawRequest {
    /// A request dropped unanswered is answered `Rejected`, so its client never waits in
    /// vain (a failure to send is the client's `ServerGone` then).
    fn drop(&mut self) {
        if !self.replied.replace(true) {
            let _ = self.server.send_status(
                &self.incoming,
                self.header,
                CallStatus::Rejected,
                "the request was dropped without a response",
            );
        }
    }
}

/// Serves one service: take requests and answer each with one response.
pub struct Server<S: Service> {
    raw: RawServer,
    _s: PhantomData<S>,
}

impl<S: Service> Server<S> {
    /// The service name.
    pub fn name(&self) -> &str {
        self.raw.name()
    }

    /// The node this server belongs to.
    pub fn node(&self) -> &Node {
        &self.raw.inner.node
    }

    /// Number of clients connected to the service.
    pub fn client_count(&self) -> usize {
        self.raw.client_count()
    }

    /// The doorbell slot clients ring after sending (for executors' wait sets).
    pub(crate) fn wake_slot(&self) -> &SlotRef {
        self.raw.wake_slot()
    }

    /// Whether a request is queued (a failing check counts as ready: taking reports it).
    pub(crate) fn has_requests(&self) -> bool {
        self.raw.has_requests()
    }

    /// Requests rejected so far because they violated the request type's layout (from
    /// this host and, with the network plane on, from others).
    pub fn rejected(&self) -> u64 {
        self.raw.rejected()
    }

    /// Takes the next request if one is queued.
    pub fn try_take(&self) -> Result<Option<Request<'_, S>>, ServeError> {
        Ok(self.raw.try_take()?.map(Request::from_raw))
    }

    /// Waits up to `timeout` for a request (spinning or sleeping as the wait mode says).
    pub fn take_timeout(&self, timeout: Duration) -> Result<Option<Request<'_, S>>, ServeError> {
        Ok(self.raw.take_timeout(timeout)?.map(Request::from_raw))
    }

    /// Answers every request queued now with `handler`; returns how many. For callers that
    /// poll (executors, wait loops).
    pub fn handle_pending<F>(&self, handler: &mut F) -> Result<usize, ServeError>
    where
        F: FnMut(&Request<'_, S>) -> HandlerResult,
    {
        let mut n = 0;
        while let Some(req) = self.try_take()? {
            self.handle(req, handler)?;
            n += 1;
        }
        Ok(n)
    }

    pub(crate) fn handle<F>(&self, req: Request<'_, S>, handler: &mut F) -> Result<(), ServeError>
    where
        F: FnMut(&Request<'_, S>) -> HandlerResult,
    {
        let result = handler(&req);
        req.raw.finish(result)
    }

    /// Answers requests with `handler` until `stop` is set (checked at least every
    /// second and whenever the service's doorbell rings).
    pub fn serve_until<F>(&self, stop: &AtomicBool, mut handler: F) -> Result<(), ServeError>
    where
        F: FnMut(&Request<'_, S>) -> HandlerResult,
    {
        loop {
            match self.raw.take_until(MAX_SLEEP, Some(stop))? {
                Some(Some(req)) => self.handle(Request::from_raw(req), &mut handler)?,
                Some(None) => return Ok(()),
                None => {}
            }
        }
    }

    /// Answers requests with `handler` until SIGINT or SIGTERM (see [`crate::sys::signals`]).
    pub fn serve<F>(&self, mut handler: F) -> Result<(), ServeError>
    where
        F: FnMut(&Request<'_, S>) -> HandlerResult,
    {
        while !crate::sys::signals::requested() {
            if let Some(req) = self.take_timeout(Duration::from_millis(100))? {
                self.handle(req, &mut handler)?;
            }
        }
        Ok(())
    }
}

/// A request taken by a server, read in place in shared memory. Answer it once with
/// [`reply`](Request::reply), [`reply_slice`](Request::reply_slice),
/// [`loan_reply_slice`](Request::loan_reply_slice) or [`fail`](Request::fail); dropped
/// unanswered, it answers [`CallStatus::Rejected`].
pub struct Request<'s, S: Service> {
    raw: RawRequest,
    _s: PhantomData<&'s Server<S>>,
}

impl<'s, S: Service> Request<'s, S> {
    /// Types a request taken by a [`Server<S>`]'s raw server: its payload was checked
    /// against `TypeInfo::of::<S::Request>()`, which the typed accessors rely on.
    fn from_raw(raw: RawRequest) -> Self {
        Request {
            raw,
            _s: PhantomData,
        }
    }

    /// The request's header (call number, send time).
    pub fn header(&self) -> &CallHeader {
        self.raw.header()
    }

    /// The elements after the request's head.
    pub fn elems(&self) -> &[<S::Request as Message>::Elem] {
        crate::message::view::<S::Request>(self.raw.incoming.words(), self.raw.elems).1
    }

    /// The whole request payload as bytes (head, padding and elements).
    pub fn payload_bytes(&self) -> &[u8] {
        self.raw.bytes()
    }

    /// Whether the client still waits for the response.
    pub fn client_waits(&self) -> bool {
        self.raw.client_waits()
    }

    /// Loans a response with room for `len` elements; write it, then [`ReplyLoan::send`].
    /// The head is zeroed; the elements hold unspecified bytes: overwrite them.
    pub fn loan_reply_slice(&self, len: usize) -> Result<ReplyLoan<'_, 's, S>, ServeError> {
        let bytes = crate::message::slice_bytes::<S::Response>(len).unwrap_or(usize::MAX);
        let resp = self.raw.loan_reply(bytes.max(1))?;
        let mut loan = ReplyLoan {
            resp,
            elems: len,
            len: bytes,
            request: self,
        };
        *loan.head_mut() = crate::message::zeroed::<S::Response>();
        Ok(loan)
    }

    /// Copies a head and its elements into a loaned response and sends it.
    pub fn reply_slice(
        &self,
        head: &S::Response,
        elems: &[<S::Response as Message>::Elem],
    ) -> Result<(), ServeError> {
        let mut loan = self.loan_reply_slice(elems.len())?;
        *loan.head_mut() = *head;
        loan.elems_mut().copy_from_slice(elems);
        loan.send()
    }

    /// Answers with an error: the client's call fails with
    /// [`crate::CallError::Handler`] carrying `message`.
    pub fn fail(&self, message: &str) -> Result<(), ServeError> {
        self.raw.fail(message)
    }
}

impl<S: Service> Request<'_, S>
where
    S::Response: Message<Elem = NoElem>,
{
    /// Copies `resp` into a loaned response and sends it.
    pub fn reply(&self, resp: &S::Response) -> Result<(), ServeError> {
        let mut loan = self.loan_reply_slice(0)?;
        *loan.head_mut() = *resp;
        loan.send()
    }
}

impl<S: Service> Deref for Request<'_, S> {
    type Target = S::Request;
    fn deref(&self) -> &S::Request {
        crate::message::view::<S::Request>(self.raw.incoming.words(), 0).0
    }
}

/// A response loaned in shared memory: write it in place, then [`send`](ReplyLoan::send).
pub struct ReplyLoan<'r, 's, S: Service> {
    resp: Outgoing,
    elems: usize,
    len: usize,
    request: &'r Request<'s, S>,
}

impl<S: Service> ReplyLoan<'_, '_, S> {
    /// The fixed head of the response.
    pub fn head_mut(&mut self) -> &mut S::Response {
        crate::message::view_mut::<S::Response>(self.resp.words_mut(), 0).0
    }

    /// The elements after the head.
    pub fn elems_mut(&mut self) -> &mut [<S::Response as Message>::Elem] {
        crate::message::view_mut::<S::Response>(self.resp.words_mut(), self.elems).1
    }

    /// The elements as raw bytes, for filling large responses with one copy.
    pub fn elem_bytes_mut(&mut self) -> &mut [u8] {
        let off = elems_offset::<S::Response>();
        &mut shm::words_as_bytes_mut(self.resp.words_mut())[off..self.len]
    }

    /// Sends the response to the waiting client.
    pub fn send(self) -> Result<(), ServeError> {
        self.request.raw.send_reply(self.resp, self.len)
    }
}

impl<S: Service> Deref for ReplyLoan<'_, '_, S> {
    type Target = S::Response;
    fn deref(&self) -> &S::Response {
        crate::message::view::<S::Response>(self.resp.words(), 0).0
    }
}

impl<S: Service> DerefMut for ReplyLoan<'_, '_, S> {
    fn deref_mut(&mut self) -> &mut S::Response {
        self.head_mut()
    }
}

/// A server running on its own thread with its own node; stopped and joined on
/// [`stop`](ServiceThread::stop) or drop.
pub struct ServiceThread {
    stop: Arc<AtomicBool>,
    ctx: Context,
    key: String,
    join: Option<std::thread::JoinHandle<Result<(), ServeError>>>,
}

impl ServiceThread {
    /// Starts a thread with node `node_name` that serves `service` with `handler`. Returns
    /// once the server exists (or failed to start).
    pub fn spawn<S, F>(
        ctx: &Context,
        node_name: &str,
        service: &str,
        qos: ServiceQos,
        handler: F,
    ) -> Result<ServiceThread, ServiceError>
    where
        S: Service,
        F: FnMut(&Request<'_, S>) -> HandlerResult + Send + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let (started_tx, started_rx) = std::sync::mpsc::sync_channel(1);
        let (thread_ctx, thread_stop) = (ctx.clone(), stop.clone());
        let (node_name, name) = (node_name.to_string(), service.to_string());
        let join = std::thread::Builder::new()
            .name(format!("nerve-srv{name}"))
            .spawn(move || {
                let made = thread_ctx
                    .node(&node_name)
                    .create()
                    .map_err(|e| ServiceError::Shm {
                        service: name.clone(),
                        reason: e.to_string(),
                    })
                    .and_then(|node| node.service::<S>(&name).qos(qos).create());
                match made {
                    Ok(server) => {
                        let _ = started_tx.send(Ok(()));
                        server.serve_until(&thread_stop, handler)
                    }
                    Err(e) => {
                        let _ = started_tx.send(Err(e));
                        Ok(())
                    }
                }
            })
            .map_err(|e| ServiceError::Shm {
                service: service.to_string(),
                reason: format!("cannot start thread: {e}"),
            })?;
        let started = started_rx.recv().unwrap_or_else(|_| {
            Err(ServiceError::Shm {
                service: service.to_string(),
                reason: "server thread ended before it started".into(),
            })
        });
        let thread = ServiceThread {
            stop,
            ctx: ctx.clone(),
            key: format!("{SERVICE_PREFIX}{service}"),
            join: Some(join),
        };
        started.map(|()| thread)
    }

    /// Stops the server and returns what its loop returned.
    pub fn stop(mut self) -> Result<(), ServeError> {
        self.halt()
    }

    fn halt(&mut self) -> Result<(), ServeError> {
        // SYNC: Release pairs with the Acquire load in serve_until.
        self.stop.store(true, Ordering::Release);
        self.ctx.inner.doorbell.ring_key(&self.key);
        match self.join.take().map(|j| j.join()) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(ServeError::Shm {
                service: self.key.clone(),
                reason: "the handler panicked".into(),
            }),
            None => Ok(()),
        }
    }
}

impl Drop for ServiceThread {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

/// The largest index <= `max` that is a char boundary of `s`.
fn floor_char_boundary(s: &str, max: usize) -> usize {
    let mut i = max.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl<T, S> Request<'_, S>
where
    T: crate::message::SerdeMessage,
    S: Service<Request = crate::message::Serde<T>>,
{
    /// Decodes a serde-encoded request (bounded by its bytes; malformed input is an
    /// error).
    pub fn decode(&self) -> Result<T, crate::error::DecodeError> {
        let n = self.encoded_len().min(self.elems().len());
        crate::message::serde_decode(&self.elems()[..n]).map_err(|reason| {
            crate::error::DecodeError {
                type_name: T::TYPE_NAME.to_string(),
                reason,
            }
        })
    }
}

impl<U, S> Request<'_, S>
where
    U: crate::message::SerdeMessage,
    S: Service<Response = crate::message::Serde<U>>,
{
    /// Encodes `value` with serde into a loaned response and sends it.
    pub fn reply_value(&self, value: &U) -> Result<(), ServeError> {
        let bytes =
            crate::message::serde_encode(value).map_err(|reason| ServeError::BadPayload {
                service: self.raw.server.name.clone(),
                type_name: U::TYPE_NAME.to_string(),
                len: 0,
                reason,
            })?;
        let mut loan = self.loan_reply_slice(bytes.len())?;
        *loan.head_mut() = crate::message::Serde::with_len(bytes.len());
        loan.elems_mut().copy_from_slice(&bytes);
        loan.send()
    }
}

/// A request kept after it was answered, read in place: its shared memory stays loaned
/// until this is dropped (how an action server keeps a goal without copying it).
pub(crate) struct KeptRequest<M: Message> {
    raw: RawRequest,
    _m: PhantomData<M>,
}

impl<S: Service> Request<'_, S> {
    /// Keeps the request's payload past its answer. A request not yet answered is
    /// answered `Rejected` when the kept request is dropped.
    pub(crate) fn keep(self) -> KeptRequest<S::Request> {
        KeptRequest {
            raw: self.raw,
            _m: PhantomData,
        }
    }
}

impl<M: Message> KeptRequest<M> {
    /// The head.
    pub(crate) fn head(&self) -> &M {
        crate::message::view::<M>(self.raw.incoming.words(), 0).0
    }

    /// The elements after the head.
    pub(crate) fn elems(&self) -> &[M::Elem] {
        crate::message::view::<M>(self.raw.incoming.words(), self.raw.elems).1
    }
}
