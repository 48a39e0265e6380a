//! What the services, actions and parameters threads share: the names that failed
//! (reported once, tried again later), and the loop that compares the graphs every
//! refresh and looks at calls in flight every tick.

use super::side::RosSide;
use super::Shared;
use crate::{BridgeConfig, Event};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Names that could not be bridged: each is reported once (until it goes away) and
/// tried again after [`crate::RETRY`] (another bridge may have held it).
#[derive(Default)]
pub(crate) struct Failures {
    when: HashMap<String, Instant>,
    reported: HashSet<String>,
}

impl Failures {
    /// Records that `name` failed; the first time, reports why.
    pub(crate) fn report<S: RosSide>(&mut self, shared: &Shared<S>, name: &str, reason: String) {
        self.when.insert(name.to_string(), Instant::now());
        if self.reported.insert(name.to_string()) {
            shared.event(Event::NotBridged {
                topic: name.to_string(),
                reason,
            });
        }
    }

    /// Whether `name` failed too recently to try again.
    pub(crate) fn lately(&self, name: &str) -> bool {
        self.when
            .get(name)
            .is_some_and(|t| t.elapsed() < crate::RETRY)
    }

    /// Forgets the names that are gone (a name that comes back is reported again).
    pub(crate) fn retain(&mut self, live: impl Fn(&str) -> bool) {
        self.reported.retain(|n| live(n));
        self.when.retain(|n, _| live(n));
    }
}

/// A thread that compares the graphs and moves calls.
pub(crate) trait Worker {
    /// The ROS 2 network it works on.
    type Side: RosSide;
    /// The state shared with the other threads.
    fn shared(&self) -> &Shared<Self::Side>;
    /// The bridge's settings.
    fn config(&self) -> &BridgeConfig;
    /// Compares both graphs: offers what is new, withdraws what is gone.
    fn refresh(&mut self);
    /// Whether anything is bridged (else the thread sleeps until the next refresh).
    fn busy(&self) -> bool;
    /// Moves requests and answers.
    fn pump(&mut self);
    /// When the next pump is worth it, if later than one tick from now (a worker with
    /// nothing in flight may look less often).
    fn next_pump(&self) -> Option<Instant> {
        None
    }
}

/// Runs a worker until the bridge stops: a refresh every `config.refresh` when either
/// graph changed (else every [`crate::changes::SAFETY`]), a pump every `tick` while it is
/// busy.
pub(crate) fn run(w: &mut impl Worker, tick: Duration) {
    let mut next_refresh = Instant::now();
    let mut gate = crate::engine::changes::Gate::default();
    while !w.shared().stop.load(Ordering::Relaxed) {
        if Instant::now() >= next_refresh {
            if gate.due(w.shared()) {
                w.refresh();
            }
            next_refresh = Instant::now() + w.config().refresh;
        }
        if !w.busy() {
            std::thread::sleep(next_refresh.saturating_duration_since(Instant::now()));
            continue;
        }
        w.pump();
        let wake = w
            .next_pump()
            .map_or(tick, |at| at.saturating_duration_since(Instant::now()))
            .max(tick)
            .min(next_refresh.saturating_duration_since(Instant::now()));
        std::thread::sleep(wake);
    }
}
