//! Topics on the network plane: a publisher sends to Zenoh only while a subscriber on
//! another host exists (on `nerve/<d>/t/<topic>`) or a Zenoh subscriber outside Nerve
//! listens (on `nerve/<d>/o/<topic>`); a subscriber validates every frame and queues it for
//! the application beside its shared-memory and same-process routes.

use super::discovery::{Counters, EntityKind};
use super::{lock, outside_key, topic_key, Plane};
use crate::error::NetError;
use crate::message::header::SampleHeader;
use crate::message::TypeInfo;
use crate::net::wire;
use crate::qos::{Overflow, Qos};
use crate::transport::doorbell::SlotRef;
use crate::transport::intra::{Buf, LocalSample};
use crate::transport::remote::{RemotePublisher, RemoteSubscriber};
use bytes::Bytes;
use crossbeam_queue::ArrayQueue;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use zenoh::bytes::ZBytes;
use zenoh::liveliness::LivelinessToken;
use zenoh::qos::{CongestionControl, Reliability};
use zenoh::Wait;

/// Watches the liveliness tokens of one kind of endpoint on one name and counts those
/// of other hosts.
pub(crate) struct RemoteWatch {
    count: Arc<AtomicUsize>,
    _sub: zenoh::pubsub::Subscriber<()>,
}

impl RemoteWatch {
    pub(crate) fn new(
        plane: &Plane,
        domain: u32,
        kind: EntityKind,
        name: &str,
    ) -> Result<RemoteWatch, NetError> {
        let key = format!(
            "nerve/{domain}/live/{}/*/*/*/*/{}",
            kind.chunk(),
            name.trim_start_matches('/')
        );
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        // SYNC: a count only; the data itself travels through Zenoh.
        let (_, sub) =
            plane.watch_tokens(key, |_| Some(()), move |n| c.store(n, Ordering::Relaxed))?;
        Ok(RemoteWatch { count, _sub: sub })
    }

    /// Endpoints on other hosts now.
    #[inline]
    pub(crate) fn count(&self) -> usize {
        // SYNC: see `new`.
        self.count.load(Ordering::Relaxed)
    }
}

/// A publisher's network side.
pub(crate) struct NetPublisher {
    publisher: zenoh::pubsub::Publisher<'static>,
    subscribers: RemoteWatch,
    /// The topic's samples for Zenoh subscribers outside Nerve.
    outside: Outside,
    /// This process's network counters of the topic (frames sent).
    counters: Arc<Counters>,
    host: u64,
    /// The last frames of a topic that keeps history, for late joiners on other hosts.
    history: Option<History>,
    _token: LivelinessToken,
    /// Keeps the type's schema offered to other hosts.
    _schema: Option<Arc<str>>,
}

/// A publisher's Zenoh publisher on `nerve/<d>/o/<topic>`, the key that Zenoh
/// applications outside Nerve subscribe to, and whether one matches it now (Zenoh's
/// matching status). Nerve's own subscribers listen on `nerve/<d>/t/<topic>` only, so they
/// never make this key match: a subscriber on this host never costs a frame.
struct Outside {
    publisher: zenoh::pubsub::Publisher<'static>,
    matching: Arc<AtomicBool>,
    _listener: zenoh::matching::MatchingListener<()>,
}

impl Outside {
    fn new(
        plane: &Plane,
        key: String,
        (congestion, reliability): (CongestionControl, Reliability),
    ) -> Result<Outside, NetError> {
        let declare = |what: &'static str, e: zenoh::Error| NetError::Declare {
            what,
            key: key.clone(),
            reason: e.to_string(),
        };
        let publisher = plane
            .session
            .declare_publisher(key.clone())
            .congestion_control(congestion)
            .reliability(reliability)
            .express(true)
            .wait()
            .map_err(|e| declare("publisher", e))?;
        let matching = Arc::new(AtomicBool::new(false));
        let m = matching.clone();
        // Zenoh calls back with the current status when it is declared, then on changes
        let listener = publisher
            .matching_listener()
            // SYNC: a flag only; the samples themselves travel through Zenoh.
            .callback(move |s| m.store(s.matching(), Ordering::Relaxed))
            .wait()
            .map_err(|e| declare("matching listener", e))?;
        Ok(Outside {
            publisher,
            matching,
            _listener: listener,
        })
    }

    /// Whether a Zenoh subscriber outside Nerve listens now.
    #[inline]
    fn listens(&self) -> bool {
        // SYNC: see `new`.
        self.matching.load(Ordering::Relaxed)
    }
}

/// A publisher's last `depth` samples (headers and references to their heap buffers, no
/// frames: those are built only when a late joiner asks) and the queryable that hands them
/// to subscribers on other hosts as they join (`nerve/<d>/h/<uid>/<topic>`).
struct History {
    samples: Arc<Mutex<VecDeque<Kept>>>,
    depth: usize,
    _queryable: zenoh::query::Queryable<()>,
}

/// One sample of a [`History`].
#[derive(Clone)]
struct Kept {
    header: SampleHeader,
    buf: Buf,
    len: usize,
}

/// Key of the history queryables of `topic` (any publisher).
fn history_key(domain: u32, uid: &str, topic: &str) -> String {
    format!("nerve/{domain}/h/{uid}/{}", topic.trim_start_matches('/'))
}

impl NetPublisher {
    pub(crate) fn new(
        plane: &Plane,
        domain: u32,
        topic: &str,
        (ty, schema): (&TypeInfo, Option<&str>),
        qos: &Qos,
        history: usize,
    ) -> Result<NetPublisher, NetError> {
        let schema = schema.map(|s| plane.offer_schema(domain, ty.layout_hash, s));
        let key = topic_key(domain, topic);
        let reliable = matches!(qos.overflow, Overflow::BackPressure { .. });
        let (congestion, reliability) = if reliable {
            (CongestionControl::Block, Reliability::Reliable)
        } else {
            (CongestionControl::Drop, Reliability::BestEffort)
        };
        let publisher = plane
            .session
            .declare_publisher(key.clone())
            .congestion_control(congestion)
            .reliability(reliability)
            .express(true)
            .wait()
            .map_err(|e| NetError::Declare {
                what: "publisher",
                key: key.clone(),
                reason: e.to_string(),
            })?;
        let subscribers = RemoteWatch::new(plane, domain, EntityKind::Subscriber, topic)?;
        let outside = Outside::new(plane, outside_key(domain, topic), (congestion, reliability))?;
        let host = plane.host;
        let history = if history > 0 {
            let samples: Arc<Mutex<VecDeque<Kept>>> =
                Arc::new(Mutex::new(VecDeque::with_capacity(history)));
            let (kept, key) = (samples.clone(), history_key(domain, &plane.uid(), topic));
            let reply_key = key.clone();
            let queryable = plane
                .session
                .declare_queryable(key.clone())
                .callback(move |query| {
                    // the lock is held only to take references: replies go out without it,
                    // so a slow link never blocks the publisher
                    let snapshot: Vec<Kept> = lock(&kept).iter().cloned().collect();
                    for k in snapshot {
                        let frame = shared_frame(host, &k.header, k.buf, k.len);
                        let _ = query.reply(reply_key.clone(), frame).wait();
                    }
                })
                .wait()
                .map_err(|e| NetError::Declare {
                    what: "history queryable",
                    key,
                    reason: e.to_string(),
                })?;
            Some(History {
                samples,
                depth: history,
                _queryable: queryable,
            })
        } else {
            None
        };
        let token = plane.token(plane.token_key(
            domain,
            EntityKind::Publisher,
            (&ty.name, ty.layout_hash),
            topic,
        ))?;
        Ok(NetPublisher {
            publisher,
            subscribers,
            outside,
            counters: plane.counters(domain, topic),
            host: plane.host,
            history,
            _token: token,
            _schema: schema,
        })
    }

    /// Where a sample goes now: to Nerve's subscribers on other hosts, to Zenoh
    /// subscribers outside Nerve (two reads of two counters, no other work).
    #[inline]
    fn destinations(&self) -> (bool, bool) {
        (self.remote_subscribers() > 0, self.outside.listens())
    }

    /// Sends a frame to the destinations asked for; Zenoh owns it from here (both read
    /// the same bytes).
    fn send(&self, frame: ZBytes, (nerve, outside): (bool, bool)) -> Result<(), NetError> {
        let put = |publisher: &zenoh::pubsub::Publisher<'static>, frame: ZBytes| {
            self.counters.sent();
            publisher.put(frame).wait().map_err(|e| NetError::Send {
                key: publisher.key_expr().to_string(),
                reason: e.to_string(),
            })
        };
        match (nerve, outside) {
            // both are tried, whatever the first gives
            (true, true) => {
                put(&self.publisher, frame.clone()).and(put(&self.outside.publisher, frame))
            }
            (true, false) => put(&self.publisher, frame),
            (false, true) => put(&self.outside.publisher, frame),
            (false, false) => Ok(()),
        }
    }
}

impl RemotePublisher for NetPublisher {
    /// Subscribers on other hosts.
    #[inline]
    fn remote_subscribers(&self) -> usize {
        self.subscribers.count()
    }

    /// Whether frames are needed for this sample: a subscriber on another host exists, a
    /// Zenoh subscriber outside Nerve listens, or the topic keeps history for late joiners
    /// on other hosts.
    #[inline]
    fn wants_frames(&self) -> bool {
        self.history.is_some() || self.remote_subscribers() > 0 || self.outside.listens()
    }

    /// Publishes a sample whose payload is in a heap buffer: kept for late joiners (a
    /// reference, if the topic keeps history) and sent, read in place by Zenoh, if a
    /// subscriber on another host exists or a Zenoh subscriber outside Nerve listens. No
    /// frame is built otherwise.
    fn publish_shared(&self, header: &SampleHeader, buf: Buf, len: usize) -> Result<(), NetError> {
        let to = self.destinations();
        if let Some(h) = &self.history {
            h.keep(Kept {
                header: *header,
                buf: buf.clone(),
                len,
            });
        }
        if to.0 || to.1 {
            self.send(shared_frame(self.host, header, buf, len), to)?;
        }
        Ok(())
    }

    /// Publishes a sample whose payload lives elsewhere (shared memory about to be
    /// handed over): copied once, and only if a subscriber on another host exists, a
    /// Zenoh subscriber outside Nerve listens or the topic keeps history.
    fn publish_copy(&self, header: &SampleHeader, payload: &[u8]) -> Result<(), NetError> {
        if self.history.is_none() {
            let to = self.destinations();
            if to.0 || to.1 {
                self.send(wire::encode_sample(self.host, header, payload).into(), to)?;
            }
            return Ok(());
        }
        let mut words = vec![0u64; crate::transport::shm::words_for(payload.len())];
        crate::transport::shm::words_as_bytes_mut(&mut words)[..payload.len()]
            .copy_from_slice(payload);
        self.publish_shared(header, Arc::new(words), payload.len())
    }
}

impl History {
    /// Keeps `k` as the newest sample, forgetting the oldest beyond the depth.
    fn keep(&self, k: Kept) {
        let mut samples = lock(&self.samples);
        if samples.len() == self.depth {
            samples.pop_front();
        }
        samples.push_back(k);
    }
}

/// The frame of a sample whose payload stays in a heap buffer: Zenoh reads it there (no
/// copy) and the buffer is released once Zenoh is done.
fn shared_frame(host: u64, header: &SampleHeader, buf: Buf, len: usize) -> ZBytes {
    let mut w = ZBytes::writer();
    let bytes = &crate::transport::shm::words_as_bytes(&buf)[..len];
    w.append(wire::sample_header(host, header, bytes, 0).into());
    w.append(Bytes::from_owner(Payload { buf, len }).into());
    w.finish()
}

/// The first `len` bytes of a payload buffer, as Zenoh's zero-copy input.
struct Payload {
    buf: Buf,
    len: usize,
}

impl AsRef<[u8]> for Payload {
    fn as_ref(&self) -> &[u8] {
        &crate::transport::shm::words_as_bytes(&self.buf)[..self.len]
    }
}

/// Longest a late joiner waits for other hosts' history.
const HISTORY_TIMEOUT: Duration = Duration::from_secs(5);

/// A subscriber's network side: frames are decoded on Zenoh's thread into a bounded
/// inbox, and the topic's doorbell wakes the subscriber.
pub(crate) struct NetSubscriber {
    inbox: Arc<ArrayQueue<LocalSample>>,
    counters: Arc<Counters>,
    _sub: zenoh::pubsub::Subscriber<()>,
    _token: LivelinessToken,
}

impl NetSubscriber {
    pub(crate) fn new(
        plane: &Plane,
        slot: SlotRef,
        domain: u32,
        topic: &str,
        ty: &TypeInfo,
        qos: &Qos,
    ) -> Result<NetSubscriber, NetError> {
        let key = topic_key(domain, topic);
        let inbox = Arc::new(ArrayQueue::new(qos.depth.max(1)));
        let counters = plane.counters(domain, topic);
        let (q, c, ty2, own) = (inbox.clone(), counters.clone(), ty.clone(), plane.host);
        let name = topic.to_string();
        let max = qos.max_payload;
        let accept = Arc::new(move |payload: &ZBytes| {
            // large frames come in pieces: they are copied once, into the aligned buffer
            // the subscriber reads
            let parts: Vec<&[u8]> = payload.slices().collect();
            match wire::decode_sample_parts(&parts, &ty2, max) {
                Ok(f) if f.host == own => {} // reached us through shared memory
                Ok(f) => {
                    let mut header = f.header;
                    // publisher ids are unique per host only
                    header.publisher_id ^= f.host.rotate_left(17);
                    c.arrived();
                    push(
                        &q,
                        LocalSample {
                            header,
                            buf: f.words,
                        },
                    );
                    slot.ring();
                }
                Err(e) => {
                    if c.refused(&e) {
                        // once per topic and reason; the counters keep the count
                        eprintln!("nerve: a network sample of {name} was refused: {e}");
                    }
                }
            }
        });
        let live = accept.clone();
        let sub = plane
            .session
            .declare_subscriber(key.clone())
            .callback(move |s| live(s.payload()))
            .wait()
            .map_err(|e| NetError::Declare {
                what: "subscriber",
                key,
                reason: e.to_string(),
            })?;
        if qos.history > 0 {
            // a late joiner: the publishers on other hosts hand over their history (what
            // also arrives live is skipped by sequence number)
            let key = history_key(domain, "*", topic);
            plane
                .session
                .get(key.clone())
                .consolidation(zenoh::query::ConsolidationMode::None)
                .timeout(HISTORY_TIMEOUT)
                .callback(move |reply| {
                    if let Ok(s) = reply.result() {
                        accept(s.payload());
                    }
                })
                .wait()
                .map_err(|e| NetError::Declare {
                    what: "history query",
                    key,
                    reason: e.to_string(),
                })?;
        }
        // declared after the subscriber: whoever sees the token can reach the subscriber
        let token = plane.token(plane.token_key(
            domain,
            EntityKind::Subscriber,
            (&ty.name, ty.layout_hash),
            topic,
        ))?;
        Ok(NetSubscriber {
            inbox,
            counters,
            _sub: sub,
            _token: token,
        })
    }
}

impl RemoteSubscriber for NetSubscriber {
    #[inline]
    fn pop(&self) -> Option<LocalSample> {
        self.inbox.pop()
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.inbox.is_empty()
    }

    fn refused(&self) -> u64 {
        self.counters.refused_total()
    }
}

/// Queues a sample from the network. Never waits: this runs on Zenoh's receive thread,
/// which serves every topic of the session, so a full inbox loses its oldest sample
/// whatever the QoS (the subscriber counts the gap as lost); back-pressure across hosts
/// is Zenoh's reliable channel pushing back on the link, not a wait here.
fn push(q: &ArrayQueue<LocalSample>, s: LocalSample) {
    q.force_push(s);
}
