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
//! - [`Bridge::start`] runs a bridge on a [`Side`] (DDS or rmw_zenoh) until it is dropped
//!   or [`Bridge::stop`] is called; the [`engine`] does the work, written once against a
//!   [`engine::RosSide`] that [`dds`] and [`rmw_zenoh`] implement.
//! - Only topics with a subscriber on the other side carry traffic; samples from bridges
//!   are never forwarded again ([`peers`]).

mod config;
pub mod dds;
pub mod engine;
/// ROS 2's graph as a bridge publishes it (its home is `nerve_ros2_map`, which the
/// tools read without linking the bridge).
pub use nerve_ros2_map::graph;
pub mod peers;
pub mod rmw_zenoh;
pub mod services;
pub mod type_description;
pub mod types;

pub use config::BridgeConfig;

use engine::RosSide;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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

/// The name of the ROS 2 node that stands for the bridge (in namespace `/`).
fn ros_node_base() -> String {
    format!("nerve_bridge_{}", std::process::id())
}

/// The ROS 2 network a bridge joins.
pub enum Side {
    /// DDS (RTPS) through RustDDS: Fast DDS and Cyclone DDS, the default RMWs.
    Dds,
    /// rmw_zenoh (`rmw_zenoh_cpp`): a Zenoh session opened with this configuration
    /// (typically [`rmw_zenoh::peer_config`] connected to rmw_zenoh's router). Transient
    /// local topics need time stamps on the session (`timestamping/enabled`, as rmw_zenoh's
    /// default configuration and [`rmw_zenoh::peer_config`] have it).
    Zenoh(Box<zenoh::Config>),
}

/// The state of a running bridge, on its side.
enum Running {
    Dds(Arc<engine::Shared<dds::DdsSide>>),
    Zenoh(Arc<engine::Shared<rmw_zenoh::ZenohEngineSide>>),
}

/// A running bridge.
pub struct Bridge {
    running: Running,
    threads: Vec<JoinHandle<()>>,
}

impl Bridge {
    /// Starts a bridge between the Nerve domain of `config` and ROS 2 domain
    /// `config.ros_domain` on `side`, one thread per half (topics each way, services,
    /// actions, parameters and the graph, and on DDS type descriptions); `events`
    /// receives what it reports. It runs until it is dropped or [`Bridge::stop`] is
    /// called.
    pub fn start(
        config: BridgeConfig,
        side: Side,
        events: impl Fn(Event) + Send + Sync + 'static,
    ) -> Result<Bridge, BridgeError> {
        config.check()?;
        let nerve = nerve::Context::new(config.nerve.clone())
            .map_err(|e| BridgeError::Nerve(e.to_string()))?;
        let events: Box<dyn Fn(Event) + Send + Sync> = Box::new(events);
        match side {
            Side::Dds => {
                let side = dds::DdsSide::new(&config, &ros_node_base())?;
                let shared = Arc::new(engine::Shared::new(side, &config, nerve, events));
                let threads = engine::start(&shared, &config, &node_name(&shared), &dds::HALVES)?;
                Ok(Bridge {
                    running: Running::Dds(shared),
                    threads,
                })
            }
            Side::Zenoh(zenoh) => {
                let side = rmw_zenoh::ZenohEngineSide::open(&config, *zenoh)?;
                let shared = Arc::new(engine::Shared::new(side, &config, nerve, events));
                let threads =
                    engine::start(&shared, &config, &node_name(&shared), &rmw_zenoh::HALVES)?;
                Ok(Bridge {
                    running: Running::Zenoh(shared),
                    threads,
                })
            }
        }
    }

    /// The bridge's counters.
    pub fn stats(&self) -> &BridgeStats {
        match &self.running {
            Running::Dds(s) => &s.stats,
            Running::Zenoh(s) => &s.stats,
        }
    }

    /// What names this bridge among the bridges on the Nerve domain (its Nerve node is
    /// `_ros2_bridge_<id>`): the DDS participant's GUID prefix in hex, or `z` and the
    /// Zenoh session id.
    pub fn id(&self) -> &str {
        match &self.running {
            Running::Dds(s) => s.side.bridge_id(),
            Running::Zenoh(s) => s.side.bridge_id(),
        }
    }

    /// The rmw_zenoh side (its session, its ROS 2 node and graph), when it runs on one.
    pub fn zenoh(&self) -> Option<&rmw_zenoh::ZenohSide> {
        match &self.running {
            Running::Dds(_) => None,
            Running::Zenoh(s) => Some(s.side.side()),
        }
    }

    /// Stops every half and waits for them.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        let stop = match &self.running {
            Running::Dds(s) => &s.stop,
            Running::Zenoh(s) => &s.stop,
        };
        stop.store(true, Ordering::Relaxed);
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

/// The name of the bridge's Nerve node (see [`peers`]).
fn node_name<S: engine::RosSide>(shared: &engine::Shared<S>) -> String {
    format!("{}{}", peers::NODE_PREFIX, shared.side.bridge_id())
}
