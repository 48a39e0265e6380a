//! The live bridge between a Nerve domain and a ROS 2 domain: ROS 2 nodes and Nerve nodes
//! in one robot, with no code change on either side.
//!
//! The ROS 2 side is DDS (RTPS) through RustDDS and `ros2-client`: it interoperates with
//! Fast DDS (the default RMW of every ROS 2 release) and Cyclone DDS. Samples cross as
//! raw CDR (never decoded on the DDS side): a standard message Nerve holds exactly is
//! converted once into Nerve's own type (the table of `nerve_ros2_map`, which bags use
//! too; a lossy form only where [`BridgeConfig::lossy`] names it), any other ROS 2 type
//! travels as CDR in a [`nerve_msgs::ros2::Ros2Cdr`] carrier whose schema holds its
//! definition and RIHS01 hash. See `docs/design.md` ("ROS 2 in the loop").
//!
//! - [`Bridge::start`] runs a bridge in two threads (ROS 2 → Nerve and Nerve → ROS 2)
//!   until it is dropped or [`Bridge::stop`] is called.
//! - Only topics with a subscriber on the other side carry traffic; samples from bridges
//!   are never forwarded again ([`peers`]).

mod actions;
mod changes;
mod config;
pub mod dds;
pub mod graph;
mod inbound;
mod outbound;
mod params;
pub mod peers;
pub mod rmw_zenoh;
pub mod services;
pub mod type_description;
pub mod types;
mod worker;

pub use config::BridgeConfig;

use peers::Peers;
use rustdds::RTPSEntity;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What can go wrong in a bridge.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BridgeError {
    /// A setting is wrong.
    #[error("bridge configuration: {0}")]
    Config(String),
    /// The DDS side failed.
    #[error("DDS: {0}")]
    Dds(String),
    /// The Nerve side failed.
    #[error("Nerve: {0}")]
    Nerve(String),
    /// The rmw_zenoh side failed.
    #[error("Zenoh: {0}")]
    Zenoh(String),
    /// A ROS 2 type cannot be bridged.
    #[error("ROS 2 type {ros_type}: {reason}")]
    Type {
        /// The type's name.
        ros_type: String,
        /// Why.
        reason: String,
    },
}

/// Something a bridge reports as it runs (the CLI prints them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A topic or service now crosses.
    Bridged {
        /// Topic or service.
        kind: Kind,
        /// The topic or service (the same name on both sides).
        topic: String,
        /// Its ROS 2 type.
        ros_type: String,
        /// Its Nerve type.
        nerve_type: String,
        /// Nerve → ROS 2 (else ROS 2 → Nerve).
        to_ros: bool,
    },
    /// A topic cannot cross (reported once per topic until it goes away).
    NotBridged {
        /// The topic.
        topic: String,
        /// Why (names the type and where its definition was looked for).
        reason: String,
    },
    /// A message that does not decode against its type was dropped (reported for the
    /// first ones, then at powers of two).
    Malformed {
        /// The topic.
        topic: String,
        /// What was wrong.
        reason: String,
    },
    /// A message could not be delivered on the other side.
    Dropped {
        /// The topic.
        topic: String,
        /// Why.
        reason: String,
    },
}

/// What crosses a bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A topic.
    Topic,
    /// A service (offered by a server on the side it comes from).
    Service,
    /// An action (offered by a server on the side it comes from).
    Action,
}

/// Counters of a running bridge.
#[derive(Debug, Default)]
pub struct BridgeStats {
    /// Messages forwarded ROS 2 → Nerve.
    pub to_nerve: AtomicU64,
    /// Messages forwarded Nerve → ROS 2.
    pub to_ros: AtomicU64,
    /// Messages that did not decode against their type.
    pub malformed: AtomicU64,
    /// Messages the other side refused.
    pub dropped: AtomicU64,
    /// Messages not forwarded because a bridge sent them (loop prevention).
    pub loops_cut: AtomicU64,
    /// Service calls answered across the bridge (both ways).
    pub calls: AtomicU64,
}

/// How long a bridge waits before it tries again to bridge a name that failed (another
/// bridge may have held it, a type may have been installed).
pub(crate) const RETRY: Duration = Duration::from_secs(2);

/// State both halves of a bridge share.
pub(crate) struct Shared {
    participant: rustdds::DomainParticipant,
    stop: AtomicBool,
    stats: BridgeStats,
    events: Box<dyn Fn(Event) + Send + Sync>,
    /// Nerve topics the ROS 2 → Nerve half publishes (the other half discounts them).
    inbound_topics: Mutex<HashSet<String>>,
    /// ROS 2 topics with publishers that the ROS 2 → Nerve half carries nothing of, and
    /// why (published with the ROS 2 graph, so every door says the same).
    not_carried: Mutex<std::collections::BTreeMap<String, graph::NotCarried>>,
    /// The bridges alive, as [`changes::Changes`] last scanned them.
    peers: Mutex<Arc<Peers>>,
    /// Whether either graph changed (each thread compares them only then).
    changes: changes::Changes,
    /// The Nerve domain's state directory (its services, nodes and ports are files there).
    nerve_state_dir: std::path::PathBuf,
    nerve: nerve::Context,
    /// The ROS 2 side's context (nodes that stand for Nerve's in ROS 2's graph).
    ros: ros2_client::Context,
}

impl Shared {
    /// Whether this bridge forwards (see [`Peers::is_primary`]).
    fn primary(&self) -> bool {
        self.peers()
            .is_primary(self.participant.guid().prefix.as_ref())
    }

    /// The bridges alive now (scanned again when a Nerve node comes or goes or a bridge's
    /// process ends, at the next look of [`changes::Changes`], and at least once a
    /// [`changes::SAFETY`] period).
    fn peers(&self) -> Arc<Peers> {
        self.peers.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The name of the ROS 2 node that stands for the bridge (in namespace `/`).
fn ros_node_base() -> String {
    format!("nerve_bridge_{}", std::process::id())
}

/// A running bridge.
pub struct Bridge {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    // the ROS 2 node that names the bridge in ROS 2's graph
    _ros: ros2_client::Node,
    _ros_context: ros2_client::Context,
}

impl Bridge {
    /// Starts a bridge (three threads: ROS 2 → Nerve topics, Nerve → ROS 2 topics, and
    /// services both ways); `events` receives what it reports.
    pub fn start(
        config: BridgeConfig,
        events: impl Fn(Event) + Send + Sync + 'static,
    ) -> Result<Bridge, BridgeError> {
        config.check()?;
        let dds_err = |e: &dyn std::fmt::Display| {
            BridgeError::Dds(format!("ROS 2 domain {}: {e}", config.ros_domain))
        };
        let mut builder = rustdds::DomainParticipantBuilder::new(config.ros_domain);
        if config.localhost_only {
            builder = builder.with_only_networks([std::net::Ipv4Addr::LOCALHOST]);
        }
        let participant = builder.build().map_err(|e| dds_err(&e))?;
        let ros_context =
            ros2_client::Context::from_domain_participant(participant).map_err(|e| dds_err(&e))?;
        let participant = ros_context.domain_participant();
        let prefix = participant.guid().prefix;
        let nerve_ctx = nerve::Context::new(config.nerve.clone())
            .map_err(|e| BridgeError::Nerve(e.to_string()))?;
        let node_name = peers::node_name(prefix.as_ref());
        let ros_name = ros2_client::NodeName::new("/", &ros_node_base())
            .map_err(|e| BridgeError::Config(format!("{e:?}")))?;
        let ros = ros_context
            .new_node(
                ros_name,
                ros2_client::NodeOptions::new().enable_rosout(false),
            )
            .map_err(|e| BridgeError::Dds(format!("{e:?}")))?;
        let shared = Arc::new(Shared {
            participant,
            stop: AtomicBool::new(false),
            stats: BridgeStats::default(),
            events: Box::new(events),
            inbound_topics: Mutex::new(HashSet::new()),
            not_carried: Mutex::default(),
            peers: Mutex::default(),
            changes: changes::Changes::new(config.refresh),
            nerve_state_dir: config.nerve.state_dir.clone(),
            nerve: nerve_ctx.clone(),
            ros: ros_context.clone(),
        });
        let mut threads = Vec::new();
        for half in [
            "ros2-to-nerve",
            "nerve-to-ros2",
            "services",
            "actions",
            "params",
            "types",
        ] {
            let (for_half, config, ctx, name) = (
                shared.clone(),
                config.clone(),
                nerve_ctx.clone(),
                node_name.clone(),
            );
            // each half owns its Nerve node (ports belong to the thread that made them)
            let (tx, rx) = std::sync::mpsc::channel();
            let handle = std::thread::Builder::new()
                .name(half.into())
                .spawn(move || {
                    let node = match ctx.node(&name).create() {
                        Ok(n) => n,
                        Err(e) => {
                            let _ = tx.send(Err(BridgeError::Nerve(e.to_string())));
                            return;
                        }
                    };
                    let run: Box<dyn FnOnce()> = match half {
                        "ros2-to-nerve" => match inbound::Inbound::new(for_half, config, node) {
                            Ok(h) => Box::new(move || h.run()),
                            Err(e) => {
                                let _ = tx.send(Err(e));
                                return;
                            }
                        },
                        "nerve-to-ros2" => match outbound::Outbound::new(for_half, config, node) {
                            Ok(h) => Box::new(move || h.run()),
                            Err(e) => {
                                let _ = tx.send(Err(e));
                                return;
                            }
                        },
                        "actions" => match actions::Actions::new(for_half, config, node) {
                            Ok(h) => Box::new(move || h.run()),
                            Err(e) => {
                                let _ = tx.send(Err(e));
                                return;
                            }
                        },
                        "params" => match params::Params::new(for_half, config, node) {
                            Ok(h) => Box::new(move || h.run()),
                            Err(e) => {
                                let _ = tx.send(Err(e));
                                return;
                            }
                        },
                        // get_type_description on the bridge's ROS 2 node (REP-2016)
                        "types" => match type_description::Describer::new(
                            for_half,
                            config,
                            node,
                            &format!("/{}", ros_node_base()),
                        ) {
                            Ok(h) => Box::new(move || h.run()),
                            Err(e) => {
                                let _ = tx.send(Err(e));
                                return;
                            }
                        },
                        _ => match services::Services::new(for_half, config, node) {
                            Ok(h) => Box::new(move || h.run()),
                            Err(e) => {
                                let _ = tx.send(Err(e));
                                return;
                            }
                        },
                    };
                    let _ = tx.send(Ok(()));
                    run()
                })
                .map_err(|e| BridgeError::Config(format!("thread: {e}")))?;
            threads.push(handle);
            let started = rx
                .recv()
                .unwrap_or_else(|_| Err(BridgeError::Config(format!("{half} thread died"))));
            if let Err(e) = started {
                shared.stop.store(true, Ordering::Relaxed);
                for t in threads {
                    let _ = t.join();
                }
                return Err(e);
            }
        }
        Ok(Bridge {
            shared,
            threads,
            _ros: ros,
            _ros_context: ros_context,
        })
    }

    /// The bridge's counters.
    pub fn stats(&self) -> &BridgeStats {
        &self.shared.stats
    }

    /// Stops both halves and waits for them.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.halt();
    }
}
