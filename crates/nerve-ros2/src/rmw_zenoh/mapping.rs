//! The bridge's names and QoS on rmw_zenoh: the bridge's node name, its mark among the
//! bridges, and QoS both ways.

use super::qos::{Durability, Qos, Reliability};
use super::side::ZenohError;
use crate::dds::RosQos;
use crate::BridgeError;

/// The prefix of the ROS 2 node name of every bridge (`nerve_bridge_<pid>`, as the DDS
/// mode names its node too): endpoints of nodes so named are never bridged.
pub const BRIDGE_NODE_PREFIX: &str = "nerve_bridge_";

/// What marks a rmw_zenoh bridge in the Nerve node list (after
/// [`crate::peers::NODE_PREFIX`]).
pub(crate) const ZENOH_MARK: char = 'z';

impl From<ZenohError> for BridgeError {
    fn from(e: ZenohError) -> BridgeError {
        BridgeError::Zenoh(e.to_string())
    }
}

/// The ROS 2 QoS of an rmw_zenoh profile, for the Nerve side.
pub(crate) fn ros_qos(q: &Qos) -> RosQos {
    RosQos {
        reliable: q.reliability != Reliability::BestEffort,
        transient_local: q.durability == Durability::TransientLocal,
        depth: usize::try_from(q.depth).unwrap_or(usize::MAX).max(1),
    }
}

/// The rmw_zenoh profile of a ROS 2 QoS.
pub(crate) fn zenoh_qos(q: &RosQos) -> Qos {
    Qos {
        reliability: if q.reliable {
            Reliability::Reliable
        } else {
            Reliability::BestEffort
        },
        durability: if q.transient_local {
            Durability::TransientLocal
        } else {
            Durability::Volatile
        },
        ..Qos::keep_last(q.depth.max(1) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_maps_both_ways() {
        let q = RosQos {
            reliable: false,
            transient_local: true,
            depth: 5,
        };
        let z = zenoh_qos(&q);
        assert_eq!(z.reliability, Reliability::BestEffort);
        assert_eq!(z.durability, Durability::TransientLocal);
        assert_eq!(z.depth, 5);
        assert_eq!(ros_qos(&z), q);
        assert_eq!(ros_qos(&Qos::default()).depth, 42);
    }
}
