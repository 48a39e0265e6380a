//! The bridge's engine, written once for every ROS 2 network: which topics and services
//! cross and when, their QoS, the conversion of their messages, loops between bridges,
//! and the counting of everything that could not be delivered. A network is reached
//! through a [`RosSide`]: DDS ([`crate::dds::DdsSide`]) or rmw_zenoh
//! ([`crate::rmw_zenoh::ZenohSide`]).
//!
//! - `topics`: ROS 2 → Nerve and Nerve → ROS 2, demand-driven (only topics with a
//!   subscriber on the other side carry traffic);
//! - `services`: servers of either side offered to the other's clients;
//! - `actions`: action servers of either side offered to the other's clients (goals,
//!   feedback, results, cancels, the goal status);
//! - `graph`: ROS 2's graph published into Nerve, Nerve's nodes announced to ROS 2;
//! - `params`: a node's parameters of either side offered to the other's clients
//!   (ROS 2's parameter services ↔ a Nerve node's `<node>/_params`);
//! - `changes`: whether either graph changed (the threads compare them only then);
//! - `worker`: the loop of the threads that move calls.

pub(crate) mod actions;
pub(crate) mod changes;
pub(crate) mod graph;
pub(crate) mod params;
pub(crate) mod services;
pub mod side;
pub(crate) mod topics;
pub(crate) mod worker;

pub use side::{
    Endpoint, Incoming, ReadySet, RosSide, ServiceClient, ServiceServer, SideGraph, TopicReader,
    TopicWriter,
};

use crate::graph::NotCarried;
use crate::peers::Peers;
use crate::{BridgeConfig, BridgeError, BridgeStats, Event};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Locks a mutex whose holder may have panicked (the data stays usable: every holder
/// leaves it consistent between statements).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// State all threads of a bridge share.
pub(crate) struct Shared<S: RosSide> {
    /// The ROS 2 network.
    pub(crate) side: S,
    /// Set when the bridge stops.
    pub(crate) stop: AtomicBool,
    /// What crossed and what did not.
    pub(crate) stats: BridgeStats,
    events: Box<dyn Fn(Event) + Send + Sync>,
    /// Nerve topics the ROS 2 → Nerve half publishes (the other half discounts them).
    pub(crate) inbound_topics: Mutex<HashSet<String>>,
    /// Ids of the Nerve publishers of the ROS 2 → Nerve half (their samples never go back).
    pub(crate) inbound_publishers: Mutex<HashSet<u64>>,
    /// ROS 2 topics with publishers that the ROS 2 → Nerve half carries nothing of, and
    /// why (published with the ROS 2 graph, so every door says the same).
    pub(crate) not_carried: Mutex<BTreeMap<String, NotCarried>>,
    /// ROS 2 topics whose subscriptions ask for more than the Nerve topic offers, and
    /// why (published with the ROS 2 graph).
    pub(crate) qos_mismatches: Mutex<BTreeMap<String, String>>,
    /// The bridges alive, as [`changes::Changes`] last scanned them.
    pub(crate) peers: Mutex<Arc<Peers>>,
    /// Whether either graph changed (each thread compares them only then).
    pub(crate) changes: changes::Changes,
    /// The Nerve domain's state directory (its services, nodes and ports are files there).
    pub(crate) nerve_state_dir: std::path::PathBuf,
    /// The Nerve domain.
    pub(crate) nerve: nerve::Context,
}

impl<S: RosSide> Shared<S> {
    /// The state of a bridge on `side`, reporting to `events`.
    pub(crate) fn new(
        side: S,
        config: &BridgeConfig,
        nerve: nerve::Context,
        events: Box<dyn Fn(Event) + Send + Sync>,
    ) -> Shared<S> {
        Shared {
            side,
            stop: AtomicBool::new(false),
            stats: BridgeStats::default(),
            events,
            inbound_topics: Mutex::default(),
            inbound_publishers: Mutex::default(),
            not_carried: Mutex::default(),
            qos_mismatches: Mutex::default(),
            peers: Mutex::default(),
            changes: changes::Changes::new(config.refresh),
            nerve_state_dir: config.nerve.state_dir.clone(),
            nerve,
        }
    }

    /// Reports something.
    pub(crate) fn event(&self, e: Event) {
        (self.events)(e)
    }

    /// The bridges alive now (scanned again when a Nerve node comes or goes or a bridge's
    /// process ends, at the next look of [`changes::Changes`], and at least once a
    /// [`changes::SAFETY`] period).
    pub(crate) fn peers(&self) -> Arc<Peers> {
        lock(&self.peers).clone()
    }

    /// Whether the bridge is stopping.
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// What one thread of a bridge runs, made on that thread with its own Nerve node (ports
/// belong to the thread that made them).
pub(crate) type Half<S> =
    fn(Arc<Shared<S>>, BridgeConfig, nerve::Node) -> Result<Box<dyn FnOnce()>, BridgeError>;

/// Starts one thread per half, each with a Nerve node named `node_name`; returns once
/// every half has started, or stops those started and returns the first failure.
pub(crate) fn start<S: RosSide>(
    shared: &Arc<Shared<S>>,
    config: &BridgeConfig,
    node_name: &str,
    halves: &[(&'static str, Half<S>)],
) -> Result<Vec<JoinHandle<()>>, BridgeError> {
    let mut threads = Vec::new();
    for &(name, half) in halves {
        let (for_half, config, ctx, node_name) = (
            shared.clone(),
            config.clone(),
            shared.nerve.clone(),
            node_name.to_string(),
        );
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let made = ctx
                    .node(&node_name)
                    .create()
                    .map_err(|e| BridgeError::Nerve(e.to_string()))
                    .and_then(|node| half(for_half, config, node));
                match made {
                    Ok(run) => {
                        let _ = tx.send(Ok(()));
                        run()
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| BridgeError::Config(format!("thread: {e}")))?;
        threads.push(handle);
        let started = rx
            .recv()
            .unwrap_or_else(|_| Err(BridgeError::Config(format!("{name} thread died"))));
        if let Err(e) = started {
            shared.stop.store(true, Ordering::Relaxed);
            for t in threads {
                let _ = t.join();
            }
            return Err(e);
        }
    }
    Ok(threads)
}
