//! [`TransformListener`]: a background thread that feeds a shared [`TfBuffer`] from
//! `/tf` and `/tf_static`.

use crate::buffer::TfBuffer;
use crate::topics::{from_msg, TfTopicError, TF_STATIC_TOPIC, TF_TOPIC};
use nerve::{Context, Qos};
use nerve_msgs::TfMessage;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the thread waits for `/tf` before it looks at `/tf_static` and the stop flag.
const POLL: Duration = Duration::from_millis(10);

/// What the listener thread counts.
#[derive(Default)]
struct Counts {
    stored: AtomicU64,
    refused: AtomicU64,
}

/// Subscribes to `/tf` and `/tf_static` on a thread of its own (owning its node) and
/// stores what arrives in a [`TfBuffer`] that any number of threads look up in. Stopped
/// and joined when dropped.
pub struct TransformListener {
    buffer: Arc<TfBuffer>,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
    thread: Option<JoinHandle<()>>,
}

impl TransformListener {
    /// Starts a listener thread on `ctx` (a node named `node_name`) feeding `buffer`.
    /// Fails, with the thread stopped, when the node or its subscribers cannot be made.
    pub fn spawn(
        ctx: &Context,
        node_name: &str,
        buffer: Arc<TfBuffer>,
    ) -> Result<TransformListener, TfTopicError> {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Counts::default());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = {
            let (ctx, name) = (ctx.clone(), node_name.to_string());
            let (buffer, stop, counts) = (buffer.clone(), stop.clone(), counts.clone());
            std::thread::Builder::new()
                .name("nerve-tf-listener".into())
                .spawn(move || {
                    let opened = (|| -> Result<_, TfTopicError> {
                        let node = ctx.node(&name).create()?;
                        let dynamic = node
                            .subscriber::<TfMessage>(TF_TOPIC)
                            .qos(Qos::default().depth(100))
                            .create()?;
                        let fixed = node
                            .subscriber::<TfMessage>(TF_STATIC_TOPIC)
                            .qos(Qos::latched().depth(8))
                            .create()?;
                        Ok((node, dynamic, fixed))
                    })();
                    let (_node, dynamic, fixed) = match opened {
                        Ok(o) => {
                            let _ = ready_tx.send(Ok(()));
                            o
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let store = |m: &nerve::Sample<TfMessage>, is_static: bool| {
                        for t in m.elems() {
                            let (parent, child, stamp, tf) = from_msg(t);
                            match buffer.set_transform(&parent, &child, stamp, tf, is_static) {
                                Ok(_) => counts.stored.fetch_add(1, Relaxed),
                                Err(_) => counts.refused.fetch_add(1, Relaxed),
                            };
                        }
                    };
                    while !stop.load(Relaxed) {
                        while let Ok(Some(m)) = fixed.try_recv() {
                            store(&m, true);
                        }
                        match dynamic.recv_timeout(POLL) {
                            Ok(Some(m)) => {
                                store(&m, false);
                                while let Ok(Some(m)) = dynamic.try_recv() {
                                    store(&m, false);
                                }
                            }
                            Ok(None) => {}
                            // a receive error (a malformed sample) is not the end
                            Err(_) => std::thread::sleep(POLL),
                        }
                    }
                })
                .map_err(|e| {
                    TfTopicError::Thread(format!("cannot start the listener thread: {e}"))
                })?
        };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(TransformListener {
                buffer,
                stop,
                counts,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(TfTopicError::Thread(
                    "the listener thread ended at start".into(),
                ))
            }
        }
    }

    /// The buffer it feeds.
    pub fn buffer(&self) -> &Arc<TfBuffer> {
        &self.buffer
    }

    /// Transforms stored so far.
    pub fn stored(&self) -> u64 {
        self.counts.stored.load(Relaxed)
    }

    /// Transforms refused so far (bad rotation, second parent, …).
    pub fn refused(&self) -> u64 {
        self.counts.refused.load(Relaxed)
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for TransformListener {
    fn drop(&mut self) {
        self.shut();
    }
}
