//! [`LifecyclePublisher`]: a publisher that sends only while its node is active.

use nerve::{Message, NoElem, PublishError, Publisher};
use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// A publisher gated by its managed node's state: while the node is not active, every
/// sample is dropped and counted ([`dropped`](LifecyclePublisher::dropped)). The gate
/// costs one relaxed load of the node's state per publish.
pub struct LifecyclePublisher<M: Message> {
    publisher: Publisher<M>,
    state: Arc<AtomicU8>,
    dropped: Cell<u64>,
}

impl<M: Message> LifecyclePublisher<M> {
    pub(crate) fn new(publisher: Publisher<M>, state: Arc<AtomicU8>) -> Self {
        LifecyclePublisher {
            publisher,
            state,
            dropped: Cell::new(0),
        }
    }

    /// Whether samples go out now (the node is active).
    #[inline]
    pub fn is_active(&self) -> bool {
        // SYNC: Relaxed: a gate, no data travels with it; the node changes it on this
        // thread (ports are !Send).
        self.state.load(Ordering::Relaxed) == crate::State::Active.id()
    }

    #[inline]
    fn gate(&self) -> bool {
        let open = self.is_active();
        if !open {
            self.dropped.set(self.dropped.get() + 1);
        }
        open
    }

    /// Publishes a head and its elements if the node is active (see
    /// [`publish`](LifecyclePublisher::publish)).
    pub fn publish_slice(&self, head: &M, elems: &[M::Elem]) -> Result<bool, PublishError> {
        if !self.gate() {
            return Ok(false);
        }
        self.publisher.publish_slice(head, elems).map(|()| true)
    }

    /// Samples dropped because the node was not active.
    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }

    /// The publisher itself (loans go through it, ungated: check
    /// [`is_active`](LifecyclePublisher::is_active) first).
    pub fn inner(&self) -> &Publisher<M> {
        &self.publisher
    }
}

impl<M: Message<Elem = NoElem>> LifecyclePublisher<M> {
    /// Publishes `msg` if the node is active: `Ok(true)` sent, `Ok(false)` dropped.
    pub fn publish(&self, msg: &M) -> Result<bool, PublishError> {
        if !self.gate() {
            return Ok(false);
        }
        self.publisher.publish(msg).map(|()| true)
    }
}
