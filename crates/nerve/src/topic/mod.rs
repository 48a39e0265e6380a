//! Topics: typed publishers and subscribers, their loans and samples, and the
//! type-erased subscriber for tools.

pub(crate) mod publisher;
pub(crate) mod raw;
pub(crate) mod subscriber;

use crate::context::Node;
use crate::error::TopicError;
use crate::transport::doorbell::SlotRef;

/// Binds the topic's doorbell slot (rung when a sample arrives or a publisher appears).
pub(crate) fn bind_slot(node: &Node, topic: &str) -> Result<SlotRef, TopicError> {
    node.inner
        .ctx
        .inner
        .doorbell
        .bind(topic)
        .map_err(|e| TopicError::Shm {
            topic: topic.to_string(),
            reason: format!("doorbell: {e}"),
        })
}
