//! [`TransformListener`]: a [`Listener`] on a background thread, feeding a shared
//! [`TfBuffer`] from `/tf` and `/tf_static`.

use crate::buffer::TfBuffer;
use crate::topics::{Counts, Listener, TfTopicError};
use nerve::Context;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the thread waits for `/tf` before it looks at `/tf_static` and the stop flag.
const POLL: Duration = Duration::from_millis(10);

/// Runs a [`Listener`] on a thread of its own (owning its node), storing what arrives on
/// `/tf` and `/tf_static` in a [`TfBuffer`] that any number of threads look up in.
/// Stopped and joined when dropped.
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
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = {
            let (ctx, name) = (ctx.clone(), node_name.to_string());
            let (buffer, stop) = (buffer.clone(), stop.clone());
            std::thread::Builder::new()
                .name("nerve-tf-listener".into())
                .spawn(move || {
                    let opened = ctx
                        .node(&name)
                        .create()
                        .map_err(TfTopicError::from)
                        .and_then(|node| Ok((Listener::new(&node, buffer)?, node)));
                    let (mut listener, _node) = match opened {
                        Ok(o) => {
                            let _ = ready_tx.send(Ok(o.0.counts()));
                            o
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    while !stop.load(Relaxed) {
                        // a receive error (a malformed sample) is not the end
                        if listener.wait(POLL).is_err() {
                            std::thread::sleep(POLL);
                        }
                    }
                })
                .map_err(|e| {
                    TfTopicError::Thread(format!("cannot start the listener thread: {e}"))
                })?
        };
        match ready_rx.recv() {
            Ok(Ok(counts)) => Ok(TransformListener {
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

    /// Transforms refused so far (bad rotation, second parent, …) or dropped as too old.
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
