//! Transforms on topics: broadcasters publish `nerve_msgs/TfMessage` on `/tf` (dynamic)
//! and `/tf_static` (static, latched: late joiners get them), a [`Listener`] feeds a
//! [`TfBuffer`] from both (on the caller's thread; [`crate::TransformListener`] runs one
//! on a thread of its own).

use crate::buffer::TfBuffer;
use crate::error::TfError;
use crate::math::{Quat, Transform, Vec3};
use nerve::{Node, Publisher, Qos, Subscriber};
use nerve_msgs::{FrameId, Header, Quaternion, TfMessage, Time, TransformStamped, Vector3};
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// The topic of dynamic transforms.
pub const TF_TOPIC: &str = "/tf";
/// The topic of static transforms.
pub const TF_STATIC_TOPIC: &str = "/tf_static";

/// Static transforms one broadcaster keeps (each message carries them all).
pub const MAX_STATIC: usize = 1024;

/// Why a broadcaster or listener failed.
#[derive(Debug, thiserror::Error)]
pub enum TfTopicError {
    /// The topic could not be opened.
    #[error(transparent)]
    Topic(#[from] nerve::TopicError),
    /// A message could not be sent.
    #[error(transparent)]
    Publish(#[from] nerve::PublishError),
    /// A message could not be received.
    #[error(transparent)]
    Recv(#[from] nerve::RecvError),
    /// A transform was refused.
    #[error(transparent)]
    Transform(#[from] TfError),
    /// The node could not be made.
    #[error(transparent)]
    Node(#[from] nerve::NodeError),
    /// The listener thread could not start.
    #[error("{0}")]
    Thread(String),
    /// A frame name does not fit a message's frame field.
    #[error("frame name {name:?} is longer than {max} bytes")]
    NameTooLong {
        /// The name.
        name: String,
        /// The field's size.
        max: usize,
    },
}

fn frame_id(name: &str) -> Result<FrameId, TfTopicError> {
    FrameId::new(name).map_err(|_| TfTopicError::NameTooLong {
        name: name.to_string(),
        max: std::mem::size_of::<FrameId>(),
    })
}

/// A transform as a message.
pub fn to_msg(
    parent: &str,
    child: &str,
    stamp_ns: i64,
    t: Transform,
) -> Result<TransformStamped, TfTopicError> {
    let (v, q) = (t.translation, t.rotation);
    Ok(TransformStamped {
        header: Header {
            stamp: Time { nanos: stamp_ns },
            frame_id: frame_id(parent)?,
        },
        child_frame_id: frame_id(child)?,
        transform: nerve_msgs::Transform {
            translation: Vector3 {
                x: v.x,
                y: v.y,
                z: v.z,
            },
            rotation: Quaternion {
                x: q.x,
                y: q.y,
                z: q.z,
                w: q.w,
            },
        },
    })
}

/// A message as (parent, child, stamp, transform); the names are borrowed from the
/// message (copied only if they are not valid UTF-8).
pub fn from_msg(m: &TransformStamped) -> (Cow<'_, str>, Cow<'_, str>, i64, Transform) {
    let (v, q) = (m.transform.translation, m.transform.rotation);
    (
        m.header.frame_id.as_str(),
        m.child_frame_id.as_str(),
        m.header.stamp.nanos,
        Transform::new(Vec3::new(v.x, v.y, v.z), Quat::new(q.x, q.y, q.z, q.w)),
    )
}

/// Publishes dynamic transforms on `/tf`.
pub struct Broadcaster {
    publisher: Publisher<TfMessage>,
}

impl Broadcaster {
    /// A broadcaster of `node`.
    pub fn new(node: &Node) -> Result<Broadcaster, TfTopicError> {
        let publisher = node
            .publisher::<TfMessage>(TF_TOPIC)
            .qos(Qos::default().depth(100))
            .create()?;
        Ok(Broadcaster { publisher })
    }

    /// Sends transforms (one message).
    pub fn send(&self, transforms: &[TransformStamped]) -> Result<(), TfTopicError> {
        Ok(self.publisher.publish_slice(&TfMessage {}, transforms)?)
    }
}

/// Publishes static transforms on `/tf_static`, latched: every message carries all of this
/// broadcaster's static transforms, so a late joiner gets them in one.
pub struct StaticBroadcaster {
    publisher: Publisher<TfMessage>,
    kept: Vec<TransformStamped>,
}

impl StaticBroadcaster {
    /// A static broadcaster of `node`.
    pub fn new(node: &Node) -> Result<StaticBroadcaster, TfTopicError> {
        let publisher = node
            .publisher::<TfMessage>(TF_STATIC_TOPIC)
            .qos(Qos::latched().depth(8))
            .create()?;
        Ok(StaticBroadcaster {
            publisher,
            kept: Vec::new(),
        })
    }

    /// Adds (or replaces, by child frame) static transforms and sends them all.
    pub fn send(&mut self, transforms: &[TransformStamped]) -> Result<(), TfTopicError> {
        for t in transforms {
            let at = self
                .kept
                .iter()
                .position(|k| k.child_frame_id == t.child_frame_id);
            match at {
                Some(i) => self.kept[i] = *t,
                None if self.kept.len() < MAX_STATIC => self.kept.push(*t),
                None => {
                    return Err(TfTopicError::Transform(TfError::TooManyFrames {
                        frame: t.child_frame_id.as_str().into_owned(),
                        max: MAX_STATIC,
                    }))
                }
            }
        }
        Ok(self.publisher.publish_slice(&TfMessage {}, &self.kept)?)
    }

    /// Hands the static transforms to subscribers that joined since the last send.
    pub fn update_connections(&self) {
        self.publisher.update_connections();
    }
}

/// What a listener counted; shared with the thread of a [`crate::TransformListener`].
#[derive(Debug, Default)]
pub(crate) struct Counts {
    pub(crate) stored: AtomicU64,
    pub(crate) refused: AtomicU64,
}

/// Subscribes to `/tf` and `/tf_static` and stores what arrived in a [`TfBuffer`], on
/// the caller's thread ([`Listener::update`], [`Listener::wait`]); the buffer is shared
/// with any number of reader threads.
pub struct Listener {
    dynamic: Subscriber<TfMessage>,
    fixed: Subscriber<TfMessage>,
    buffer: Arc<TfBuffer>,
    counts: Arc<Counts>,
}

impl Listener {
    /// A listener of `node` feeding `buffer`, which from now on follows the clock of the
    /// node's context ([`TfBuffer::follow_clock`]: a jump back of simulation time clears
    /// its dynamic histories).
    pub fn new(node: &Node, buffer: Arc<TfBuffer>) -> Result<Listener, TfTopicError> {
        let listener = Listener {
            dynamic: node
                .subscriber::<TfMessage>(TF_TOPIC)
                .qos(Qos::default().depth(100))
                .create()?,
            fixed: node
                .subscriber::<TfMessage>(TF_STATIC_TOPIC)
                .qos(Qos::latched().depth(8))
                .create()?,
            buffer,
            counts: Arc::default(),
        };
        listener.buffer.follow_clock(node.context().clock());
        Ok(listener)
    }

    /// Stores what arrived in the buffer; returns the transforms stored. A refused
    /// transform (bad rotation, second parent) or one dropped as too old is counted
    /// ([`Listener::refused`]) and the rest go on. A jump back of the clock the buffer
    /// follows since the last update clears its dynamic histories first.
    pub fn update(&mut self) -> Result<usize, TfTopicError> {
        self.buffer.check_clock();
        let mut n = 0;
        for (sub, is_static) in [(&self.fixed, true), (&self.dynamic, false)] {
            while let Some(m) = sub.try_recv()? {
                n += self.store(&m, is_static);
            }
        }
        Ok(n)
    }

    /// Waits up to `timeout` for `/tf` (static transforms are taken as they come), then
    /// stores what arrived ([`Listener::update`]).
    pub fn wait(&mut self, timeout: Duration) -> Result<usize, TfTopicError> {
        let mut n = 0;
        if let Some(m) = self.dynamic.recv_timeout(timeout)? {
            // each insert acts on a jump back of the clock first
            n += self.store(&m, false);
        }
        Ok(n + self.update()?)
    }

    fn store(&self, m: &nerve::Sample<TfMessage>, is_static: bool) -> usize {
        let mut n = 0;
        for t in m.elems() {
            match self.buffer.set_msg(t, is_static) {
                Ok(true) => n += 1,
                Ok(false) | Err(_) => {
                    self.counts.refused.fetch_add(1, Relaxed);
                }
            }
        }
        self.counts.stored.fetch_add(n as u64, Relaxed);
        n
    }

    /// Transforms stored so far.
    pub fn stored(&self) -> u64 {
        self.counts.stored.load(Relaxed)
    }

    /// Transforms refused (bad input) or dropped as too old so far.
    pub fn refused(&self) -> u64 {
        self.counts.refused.load(Relaxed)
    }

    /// The buffer it feeds.
    pub fn buffer(&self) -> &Arc<TfBuffer> {
        &self.buffer
    }

    pub(crate) fn counts(&self) -> Arc<Counts> {
        self.counts.clone()
    }
}
