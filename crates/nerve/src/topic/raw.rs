//! Type-erased subscribers: read any topic without being compiled against its type (tools
//! such as `nerve topic echo`, recorders, bridges).

use crate::context::Node;
use crate::error::{RecvError, TopicError};
use crate::message::header::SampleHeader;
use crate::message::TypeInfo;
use crate::qos::Qos;
use crate::topic::subscriber::{create_port, Received, Receiver, SubscriberStats};
use crate::transport::shm::{self};
use crate::transport::wait::WaitMode;
use iceoryx2::prelude::*;
use std::time::Duration;

/// A subscriber that accepts any message type: for tools like `nerve topic echo`.
pub struct RawSubscriber {
    pub(crate) rx: Receiver,
    type_info: TypeInfo,
}

impl RawSubscriber {
    /// Subscribes to an existing topic with its own type.
    pub fn create(node: &Node, topic: &str, qos: Qos) -> Result<RawSubscriber, TopicError> {
        RawSubscriber::open(node, topic, None, qos)
    }

    /// Subscribes to a topic of type `ty`, creating it on this host if needed (for
    /// topics whose publishers are all on other hosts).
    pub fn with_type(
        node: &Node,
        topic: &str,
        ty: &TypeInfo,
        qos: Qos,
    ) -> Result<RawSubscriber, TopicError> {
        RawSubscriber::open(node, topic, Some(ty), qos)
    }

    fn open(
        node: &Node,
        topic: &str,
        ty: Option<&TypeInfo>,
        qos: Qos,
    ) -> Result<RawSubscriber, TopicError> {
        crate::name::validate_topic(topic)?;
        let service = shm::open_topic(&node.inner.iox, topic, ty, &qos)?;
        let type_info = shm::topic_type(&service).ok_or_else(|| TopicError::NotATopic {
            topic: topic.to_string(),
            reason: "no Nerve type record".into(),
        })?;
        let depth = qos
            .depth
            .min(service.static_config().subscriber_max_buffer_size());
        let qos = Qos { depth, ..qos };
        let port = create_port(&service, topic, &qos)?;
        let net = crate::topic::subscriber::net_side(node, topic, &type_info, &qos)?;
        Ok(RawSubscriber {
            rx: Receiver::new(
                node.clone(),
                topic.to_string(),
                service,
                port,
                type_info.clone(),
                WaitMode::Block,
                depth,
            )
            .with_net(net),
            type_info,
        })
    }

    /// The topic's message type.
    pub fn type_info(&self) -> &TypeInfo {
        &self.type_info
    }

    /// Counters.
    pub fn stats(&self) -> SubscriberStats {
        self.rx.stats()
    }

    /// Waits up to `timeout` for the next sample.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Option<RawSample>, RecvError> {
        Ok(self
            .rx
            .recv_timeout(timeout)?
            .map(|(inner, elems)| RawSample { inner, elems }))
    }

    /// Number of publishers connected now.
    pub fn publisher_count(&self) -> usize {
        self.rx.publisher_count()
    }

    /// Number of subscribers connected now.
    pub fn subscriber_count(&self) -> usize {
        self.rx.service().dynamic_config().number_of_subscribers()
    }
}

/// A sample of any type, validated against the topic's layout.
pub struct RawSample {
    inner: Received,
    elems: usize,
}

impl RawSample {
    /// Nerve's sample header.
    pub fn header(&self) -> &SampleHeader {
        self.inner.header()
    }
    /// The payload bytes in use (head, padding, elements).
    pub fn bytes(&self) -> &[u8] {
        self.inner.bytes()
    }
    /// Number of slice elements.
    pub fn elems(&self) -> usize {
        self.elems
    }
}
