//! What the core asks of a network plane: the traits through which nodes, topics and
//! services reach other hosts. The Zenoh plane (`crate::net`, cargo feature `net`)
//! implements them; a context reaches it only through [`RemotePlane`], so the core never
//! names Zenoh and builds without it (then every context stays on its host).

use crate::error::NetError;
use crate::message::header::{CallHeader, CallStatus, SampleHeader};
use crate::message::TypeInfo;
use crate::qos::Qos;
use crate::transport::doorbell::{Doorbell, SlotRef};
use crate::transport::intra::{Buf, LocalSample};
use std::any::Any;
use std::sync::Arc;

/// A process's way to other hosts.
pub(crate) trait RemotePlane: Send + Sync {
    /// Announces node `name` to other hosts while the returned guard lives.
    fn node(&self, domain: u32, name: &str) -> Result<Box<dyn Any>, NetError>;

    /// A publisher's side on other hosts; `history` samples are kept for late joiners, and
    /// the encoded schema of `ty` (if any) is offered to other hosts' tools.
    fn publisher(
        &self,
        domain: u32,
        topic: &str,
        ty: (&TypeInfo, Option<&str>),
        qos: &Qos,
        history: usize,
    ) -> Result<Box<dyn RemotePublisher>, NetError>;

    /// A subscriber's side on other hosts: samples are queued and the topic's `slot` is
    /// rung.
    fn subscriber(
        &self,
        slot: SlotRef,
        domain: u32,
        topic: &str,
        ty: &TypeInfo,
        qos: &Qos,
    ) -> Result<Box<dyn RemoteSubscriber>, NetError>;

    /// A server's side on other hosts: requests of type `request` (at most `max_request`
    /// bytes) are queued, at most `depth`, and the service's `slot` is rung.
    fn server(
        &self,
        slot: SlotRef,
        domain: u32,
        name: &str,
        service: (&str, &TypeInfo),
        max_request: usize,
        depth: usize,
    ) -> Result<Box<dyn RemoteServer>, NetError>;

    /// A client's side on other hosts.
    fn client(
        &self,
        domain: u32,
        name: &str,
        service: (&str, &TypeInfo),
    ) -> Result<Box<dyn RemoteClient>, NetError>;
}

/// A publisher's side on other hosts.
pub(crate) trait RemotePublisher {
    /// Subscribers on other hosts now.
    fn remote_subscribers(&self) -> usize;
    /// Whether a sample must be handed over: a subscriber on another host exists, a
    /// Zenoh subscriber outside Nerve listens, or the topic keeps history for late joiners
    /// on other hosts.
    fn wants_frames(&self) -> bool;
    /// Publishes a sample whose payload stays in a heap buffer (read in place).
    fn publish_shared(&self, header: &SampleHeader, buf: Buf, len: usize) -> Result<(), NetError>;
    /// Publishes a sample whose payload lives elsewhere (copied once).
    fn publish_copy(&self, header: &SampleHeader, payload: &[u8]) -> Result<(), NetError>;
}

/// A subscriber's side on other hosts.
pub(crate) trait RemoteSubscriber {
    /// The next validated sample from another host.
    fn pop(&self) -> Option<LocalSample>;
    /// Whether nothing is queued.
    fn is_empty(&self) -> bool;
    /// Frames refused on this topic in this process so far.
    fn refused(&self) -> u64;
}

/// A server's side on other hosts.
pub(crate) trait RemoteServer {
    /// The next validated request from another host.
    fn pop(&self) -> Option<RemoteRequest>;
    /// Whether a request is queued.
    fn has_requests(&self) -> bool;
    /// Malformed or refused requests so far.
    fn rejected(&self) -> u64;
}

/// A validated request from another host, with the way back to its caller.
pub(crate) struct RemoteRequest {
    /// Its header.
    pub(crate) header: CallHeader,
    /// Its payload words.
    pub(crate) words: Buf,
    /// Slice elements in the payload.
    pub(crate) elems: usize,
    /// Answers it.
    pub(crate) reply: Box<dyn RemoteReply>,
}

/// The way back to a remote caller.
pub(crate) trait RemoteReply {
    /// Sends the response (status, the response type's hash and its payload).
    fn respond(
        &self,
        request: &CallHeader,
        status: CallStatus,
        type_hash: u64,
        payload: &[u8],
    ) -> Result<(), NetError>;
}

/// What a remote call ends with: the response frame, or why there is none (a reason
/// starting with "malformed" is a response that broke its type).
pub(crate) type RemoteOutcome = Result<Frame<CallHeader>, String>;

/// A client's side on other hosts.
pub(crate) trait RemoteClient {
    /// Servers on other hosts now.
    fn remote_servers(&self) -> usize;
    /// Calls in flight over the network.
    fn in_flight(&self) -> usize;
    /// Sends a request to the nearest remote server; slot `reply_slot` of `bell` is rung
    /// when the call ends. Responses are validated against `response` (at most
    /// `max_response` bytes).
    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        bell: &Arc<Doorbell>,
        header: &CallHeader,
        payload: &[u8],
        response: &TypeInfo,
        max_response: usize,
        reply_slot: u32,
    ) -> Result<Arc<dyn RemoteCall>, NetError>;
}

/// A call in flight over the network.
pub(crate) trait RemoteCall: Send + Sync {
    /// Leaves the client's count of calls in flight (once).
    fn release(&self);
    /// Takes the outcome if it is there.
    fn take(&self) -> Option<RemoteOutcome>;
    /// Whether the call ended.
    fn is_done(&self) -> bool;
}

/// A decoded frame: the sender's host, its header, and the payload in an aligned buffer
/// (whole words covering the payload; the tail of the last word is zero).
#[derive(Debug)]
#[cfg_attr(not(feature = "net"), allow(dead_code))]
pub struct Frame<H> {
    /// Host id of the sender.
    pub host: u64,
    /// The sample or call header.
    pub header: H,
    /// Payload words.
    pub words: Buf,
    /// Slice elements in the payload (0 for fixed-size messages and error texts).
    pub elems: usize,
}
