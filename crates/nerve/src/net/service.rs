//! Services on the network plane: a server's Zenoh queryable queues validated requests
//! beside its shared-memory ones; a client with no server on its own host sends its
//! request as a Zenoh query to the nearest remote server.

use super::discovery::EntityKind;
use super::topic::RemoteWatch;
use super::{service_key, Plane};
use crate::error::NetError;
use crate::message::header::{CallHeader, CallStatus};
use crate::message::TypeInfo;
use crate::net::wire::{self, Frame, Kind};
use crate::sys::clock::mono_ns;
use crate::transport::doorbell::{Doorbell, SlotRef};
use crate::transport::remote::{
    RemoteCall, RemoteClient, RemoteOutcome, RemoteReply, RemoteRequest, RemoteServer,
};
use crossbeam_queue::ArrayQueue;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use zenoh::liveliness::LivelinessToken;
use zenoh::query::{ConsolidationMode, Query, QueryTarget};
use zenoh::Wait;

/// Longest a network call stays open on Zenoh's side (a client's own wait is usually
/// shorter and ends it first).
pub const NET_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// A validated request that came over the network.
struct NetRequest {
    query: Query,
    header: CallHeader,
    words: Arc<Vec<u64>>,
    elems: usize,
}

/// The way back to a caller on another host: the query's reply.
struct NetReply {
    query: Query,
    host: u64,
}

impl RemoteReply for NetReply {
    fn respond(
        &self,
        request: &CallHeader,
        status: CallStatus,
        type_hash: u64,
        payload: &[u8],
    ) -> Result<(), NetError> {
        let mut h = status_header(request, status, payload.len());
        h.type_hash = type_hash;
        reply_frame(&self.query, self.host, &h, payload)
    }
}

/// A server's network side.
pub(crate) struct NetServer {
    inbox: Arc<ArrayQueue<NetRequest>>,
    rejected: Arc<AtomicU64>,
    host: u64,
    _queryable: zenoh::query::Queryable<()>,
    _token: LivelinessToken,
}

fn reply_frame(query: &Query, host: u64, h: &CallHeader, payload: &[u8]) -> Result<(), NetError> {
    query
        .reply(
            query.key_expr().clone(),
            wire::encode_call(Kind::Response, host, h, payload),
        )
        .wait()
        .map_err(|e| NetError::Send {
            key: query.key_expr().to_string(),
            reason: e.to_string(),
        })
}

fn status_header(request: &CallHeader, status: CallStatus, len: usize) -> CallHeader {
    CallHeader {
        seq: request.seq,
        sent_mono_ns: mono_ns(),
        payload_len: len as u64,
        type_hash: 0,
        reply_slot: 0,
        status: status as u32,
    }
}

impl NetServer {
    pub(crate) fn new(
        plane: &Plane,
        slot: SlotRef,
        domain: u32,
        name: &str,
        (service_type, request): (&str, &TypeInfo),
        max_request: usize,
        depth: usize,
    ) -> Result<NetServer, NetError> {
        let key = service_key(domain, name);
        let inbox = Arc::new(ArrayQueue::new(depth.max(1)));
        let rejected = Arc::new(AtomicU64::new(0));
        let (q, r, ty, host) = (inbox.clone(), rejected.clone(), request.clone(), plane.host);
        let queryable = plane
            .session
            .declare_queryable(key.clone())
            .callback(move |query: Query| {
                let parts: Vec<&[u8]> = query
                    .payload()
                    .map(|p| p.slices().collect())
                    .unwrap_or_default();
                let refuse = |query: &Query, h: &CallHeader, why: String| {
                    // SYNC: a statistic.
                    r.fetch_add(1, Ordering::Relaxed);
                    let _ = reply_frame(
                        query,
                        host,
                        &status_header(h, CallStatus::Rejected, why.len()),
                        why.as_bytes(),
                    );
                };
                match wire::decode_call_parts(&parts, Kind::Request, &ty, max_request) {
                    Ok(Frame {
                        header,
                        words,
                        elems,
                        ..
                    }) => {
                        let req = NetRequest {
                            query,
                            header,
                            words,
                            elems,
                        };
                        if let Err(req) = q.push(req) {
                            let why = "the server's queue is full".to_string();
                            refuse(&req.query, &req.header, why);
                        } else {
                            slot.ring();
                        }
                    }
                    Err(e) => refuse(
                        &query,
                        &CallHeader::default(),
                        format!("malformed request: {e}"),
                    ),
                }
            })
            .wait()
            .map_err(|e| NetError::Declare {
                what: "queryable",
                key,
                reason: e.to_string(),
            })?;
        let token = plane.token(plane.token_key(
            domain,
            EntityKind::Server,
            (service_type, request.layout_hash),
            name,
        ))?;
        Ok(NetServer {
            inbox,
            rejected,
            host: plane.host,
            _queryable: queryable,
            _token: token,
        })
    }
}

impl RemoteServer for NetServer {
    fn pop(&self) -> Option<RemoteRequest> {
        self.inbox.pop().map(|r| RemoteRequest {
            header: r.header,
            words: r.words,
            elems: r.elems,
            reply: Box::new(NetReply {
                query: r.query,
                host: self.host,
            }),
        })
    }

    fn has_requests(&self) -> bool {
        !self.inbox.is_empty()
    }

    fn rejected(&self) -> u64 {
        // SYNC: a statistic.
        self.rejected.load(Ordering::Relaxed)
    }
}

/// Most network queries a client keeps open at once, abandoned ones included (a query
/// ends with its reply or after [`NET_CALL_TIMEOUT`]).
pub const MAX_QUERIES: usize = 256;

/// A network call in flight.
struct NetCall {
    outcome: Mutex<Option<RemoteOutcome>>,
    /// The client's count of calls in flight, and whether this call left it already.
    in_flight: Arc<AtomicUsize>,
    released: AtomicBool,
}

impl RemoteCall for NetCall {
    /// Leaves the client's count of calls in flight (once): the call ended or its
    /// caller let go of it.
    fn release(&self) {
        // SYNC: a flag and a count; the outcome is published by the mutex.
        if !self.released.swap(true, Ordering::Relaxed) {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn take(&self) -> Option<RemoteOutcome> {
        super::lock(&self.outcome).take()
    }

    fn is_done(&self) -> bool {
        super::lock(&self.outcome).is_some()
    }
}

impl NetCall {
    fn set(&self, o: RemoteOutcome) {
        let mut g = super::lock(&self.outcome);
        if g.is_none() {
            *g = Some(o);
        }
    }
}

/// Ends a call whose query finished without a reply (the closure holding it is dropped
/// when Zenoh finishes the query).
struct Finish {
    call: Arc<NetCall>,
    bell: Arc<Doorbell>,
    slot: u32,
    queries: Arc<AtomicUsize>,
}

impl Drop for Finish {
    fn drop(&mut self) {
        self.call
            .set(Err("no server answered (it went away or timed out)".into()));
        self.call.release();
        // SYNC: a count.
        self.queries.fetch_sub(1, Ordering::Relaxed);
        self.bell.slot_at(self.slot).ring();
    }
}

/// A client's network side.
pub(crate) struct NetClient {
    session: zenoh::Session,
    key: String,
    host: u64,
    servers: RemoteWatch,
    /// Calls its caller still holds (bounded by the client's `max_in_flight`).
    in_flight: Arc<AtomicUsize>,
    /// Zenoh queries still open, abandoned calls included (bounded by [`MAX_QUERIES`]).
    queries: Arc<AtomicUsize>,
    _token: LivelinessToken,
}

impl NetClient {
    pub(crate) fn new(
        plane: &Plane,
        domain: u32,
        name: &str,
        (service_type, request): (&str, &TypeInfo),
    ) -> Result<NetClient, NetError> {
        let servers = RemoteWatch::new(plane, domain, EntityKind::Server, name)?;
        let token = plane.token(plane.token_key(
            domain,
            EntityKind::Client,
            (service_type, request.layout_hash),
            name,
        ))?;
        Ok(NetClient {
            session: plane.session.clone(),
            key: service_key(domain, name),
            host: plane.host,
            servers,
            in_flight: Arc::default(),
            queries: Arc::default(),
            _token: token,
        })
    }
}

impl RemoteClient for NetClient {
    /// Servers on other hosts.
    fn remote_servers(&self) -> usize {
        self.servers.count()
    }

    /// Calls in flight over the network.
    fn in_flight(&self) -> usize {
        // SYNC: a count.
        self.in_flight.load(Ordering::Relaxed)
    }

    fn call(
        &self,
        bell: &Arc<Doorbell>,
        header: &CallHeader,
        payload: &[u8],
        response: &TypeInfo,
        max_response: usize,
        reply_slot: u32,
    ) -> Result<Arc<dyn RemoteCall>, NetError> {
        // SYNC: counts.
        if self.queries.load(Ordering::Relaxed) >= MAX_QUERIES {
            return Err(NetError::Send {
                key: self.key.clone(),
                reason: format!(
                    "{MAX_QUERIES} calls still wait on the network (abandoned ones end \
                     within {NET_CALL_TIMEOUT:?})"
                ),
            });
        }
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.queries.fetch_add(1, Ordering::Relaxed);
        let call = Arc::new(NetCall {
            outcome: Mutex::new(None),
            in_flight: self.in_flight.clone(),
            released: AtomicBool::new(false),
        });
        let finish = Finish {
            call: call.clone(),
            bell: bell.clone(),
            slot: reply_slot,
            queries: self.queries.clone(),
        };
        let ty = response.clone();
        let frame = wire::encode_call(Kind::Request, self.host, header, payload);
        self.session
            .get(self.key.clone())
            .payload(frame)
            .target(QueryTarget::BestMatching)
            .consolidation(ConsolidationMode::None)
            .timeout(NET_CALL_TIMEOUT)
            .callback(move |reply| {
                let outcome = match reply.result() {
                    Ok(s) => wire::decode_call_parts(
                        &s.payload().slices().collect::<Vec<_>>(),
                        Kind::Response,
                        &ty,
                        max_response.max(64 * 1024),
                    )
                    .map_err(|e| format!("malformed response: {e}")),
                    Err(e) => Err(format!("error reply: {:?}", e.payload().to_bytes())),
                };
                finish.call.set(outcome);
                finish.bell.slot_at(finish.slot).ring();
            })
            .wait()
            .map_err(|e| NetError::Send {
                key: self.key.clone(),
                reason: e.to_string(),
            })?;
        Ok(call)
    }
}
