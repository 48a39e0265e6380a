//! What the engine's names, types and QoS are on rmw_zenoh: the bridge's node name, the
//! RIHS01 hashes its endpoints announce, and QoS both ways.

use super::names::TYPE_HASH_NOT_SUPPORTED;
use super::qos::{Durability, Qos, Reliability};
use super::side::ZenohError;
use crate::dds::RosQos;
use crate::services::{ServiceForm, ServiceRoute};
use crate::types::{Carrier, TypeRoute};
use crate::BridgeError;
use nerve_msgs::ros2::ros2_type;
use nerve_ros2_types::{Registry, SearchPath};

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

/// The RIHS01 type hash (`RIHS01_<hex>`) of a route's ROS 2 type: the one its carrier
/// schema holds, else computed from the definition (a native standard type's `ros2msg`
/// text).
pub(crate) fn route_type_hash(route: &TypeRoute) -> Result<String, BridgeError> {
    if let Some((_, hash, _)) = ros2_type(&route.schema) {
        return Ok(hash.to_owned());
    }
    let err = |e: nerve_ros2_types::RegistryError| BridgeError::Type {
        ros_type: route.ros_name.clone(),
        reason: format!("no type hash: {e}"),
    };
    let hash = match &route.carrier {
        Carrier::Native(s) => Registry::from_ros2msg(&route.ros_name, &(s.text)())
            .and_then(|r| r.type_hash(&route.ros_name))
            .map_err(err)?,
        Carrier::Cdr(pass) => pass.registry().type_hash(pass.name()).map_err(err)?,
    };
    Ok(hash.to_string())
}

/// The type hash a bridge's queryable of `route` announces: the RIHS01 hash of the
/// service type (`pkg/srv/Name`: its request, response and event) from the carrier's
/// definitions or the search path, else `TypeHashNotSupported` (as Humble announces;
/// the queryable answers every hash either way).
pub(crate) fn service_type_hash(route: &ServiceRoute, search: &[std::path::PathBuf]) -> String {
    let of_carrier = match &route.form {
        ServiceForm::Cdr { request, .. } => match &request.carrier {
            Carrier::Cdr(pass) => pass.registry().type_hash(&route.ros_type).ok(),
            Carrier::Native(_) => None,
        },
        ServiceForm::Native(_) => None,
    };
    of_carrier
        .or_else(|| {
            let mut path = SearchPath::new();
            for d in search {
                path.push_dir(d.clone());
            }
            let mut r = Registry::new();
            r.load(&route.ros_type, &path).ok()?;
            r.type_hash(&route.ros_type).ok()
        })
        .map_or_else(|| TYPE_HASH_NOT_SUPPORTED.to_owned(), |h| h.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::service_route;
    use crate::types::Catalog;

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

    /// A native standard type's hash is computed from its `ros2msg` text, a carrier's
    /// read from its schema.
    #[test]
    fn route_hashes() {
        let mut c = Catalog::new(Vec::new(), true).with_lossy(vec!["nerve_msgs/Imu".into()]);
        let imu = c.for_ros("sensor_msgs/msg/Imu").unwrap();
        assert_eq!(
            route_type_hash(&imu).unwrap(),
            "RIHS01_7d9a00ff131080897a5ec7e26e315954b8eae3353c3f995c55faf71574000b5b"
        );
        let schema =
            nerve_msgs::ros2::ros2_schema("std_msgs/msg/String", "RIHS01_ab", "string data\n");
        let r = c.for_nerve(&schema).unwrap().unwrap();
        assert_eq!(route_type_hash(&r).unwrap(), "RIHS01_ab");
    }

    fn fixtures() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../nerve-ros2-types/tests/fixtures/share")
    }

    /// A service carried as CDR announces the RIHS01 hash ROS 2 computes for the service
    /// type (recorded in the fixture from a real ROS 2); a standard service found nowhere
    /// on the type path announces `TypeHashNotSupported`.
    #[test]
    fn service_type_hashes() {
        let search = vec![fixtures()];
        let mut catalog = Catalog::new(search.clone(), true);
        let basic = service_route(&mut catalog, "test_msgs/srv/BasicTypes").unwrap();
        assert!(matches!(basic.form, ServiceForm::Cdr { .. }));
        assert_eq!(
            service_type_hash(&basic, &search),
            "RIHS01_da348697437c103cc9a9322ac1bdbdcf8eb11a85de22f7f2492ca1df416e1a5f"
        );
        let trigger = service_route(&mut catalog, "std_srvs/srv/Trigger").unwrap();
        assert!(matches!(trigger.form, ServiceForm::Native(_)));
        assert_eq!(
            service_type_hash(&trigger, &search),
            TYPE_HASH_NOT_SUPPORTED
        );
    }
}
