//! The thread that feeds a simulation clock from the clock topic.

use super::{wire, SimSource, CLOCK_TOPIC};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often the feed thread looks whether its clock is still wanted.
const POLL: Duration = Duration::from_millis(100);

/// A running feed; dropping it stops the thread (within [`POLL`]).
pub(crate) struct Feed {
    stop: Arc<AtomicBool>,
}

impl Drop for Feed {
    fn drop(&mut self) {
        // SYNC: Relaxed is enough: the flag carries no data, the thread only stops.
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Feed {
    /// Starts a thread with a context of its own (on the system clock, or it would feed
    /// itself) that sets `target` from every clock message of `config`'s domain.
    pub(crate) fn start(
        config: &crate::config::Config,
        target: Weak<SimSource>,
    ) -> std::io::Result<Feed> {
        let mut cfg = config.clone();
        cfg.sim_time = false;
        cfg.lockstep = false;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        // the port is created on the thread (ports are not Send); its errors come back
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<(), String>>(1);
        std::thread::Builder::new()
            .name("nerve-clock".into())
            .spawn(move || {
                let setup = (|| {
                    let ctx =
                        crate::context::Context::new_internal(cfg).map_err(|e| e.to_string())?;
                    let node = ctx
                        .node(&format!("_nerve_clock_{}", std::process::id()))
                        .create()
                        .map_err(|e| e.to_string())?;
                    let sub = node
                        .subscriber::<wire::Clock>(CLOCK_TOPIC)
                        .create()
                        .map_err(|e| e.to_string())?;
                    Ok::<_, String>((ctx, node, sub))
                })();
                let (_ctx, _node, sub) = match setup {
                    Ok(s) => {
                        let _ = ready_tx.send(Ok(()));
                        s
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                while !flag.load(Ordering::Relaxed) {
                    let Some(target) = target.upgrade() else {
                        return;
                    };
                    match sub.recv_timeout(POLL) {
                        Ok(Some(s)) => {
                            // only the newest of a burst matters
                            let mut t = s.clock.nanos;
                            while let Ok(Some(s)) = sub.try_recv() {
                                t = s.clock.nanos;
                            }
                            target.words().set(t);
                        }
                        Ok(None) => {}
                        Err(e) => {
                            eprintln!(
                                "nerve: the simulation clock stopped following {CLOCK_TOPIC}: {e}"
                            );
                            return;
                        }
                    }
                }
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Feed { stop }),
            Ok(Err(e)) => Err(std::io::Error::other(format!(
                "cannot follow {CLOCK_TOPIC}: {e}"
            ))),
            Err(_) => Err(std::io::Error::other(format!(
                "cannot follow {CLOCK_TOPIC}: its thread ended"
            ))),
        }
    }
}
