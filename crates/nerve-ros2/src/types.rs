//! Which Nerve type a ROS 2 type travels as: a standard message Nerve has natively
//! (converted once, so Nerve subscribers get zero-copy samples of their own type), or
//! any other type as CDR in a [`Ros2Cdr`] carrier whose schema holds the definition and
//! RIHS01 hash (found on the type search path).

use crate::BridgeError;
use nerve::message::schema::Schema;
use nerve_bag::encoding::{ros2::standard, Standard};
use nerve_msgs::ros2::{ros2_schema, ros2_type, Ros2Cdr};
use nerve_ros2_types::{Registry, SearchPath};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// How messages of one ROS 2 type cross.
pub enum Carrier {
    /// A standard message: CDR is converted to and from Nerve's own type.
    Native(Standard),
    /// Any other type: the CDR bytes travel unchanged, checked against the definition.
    Cdr {
        /// The definitions the type needs.
        registry: Arc<Registry>,
    },
}

/// One ROS 2 type's route.
pub struct TypeRoute {
    /// The ROS 2 type, `pkg/msg/Name`.
    pub ros_name: String,
    /// The Nerve topic's schema.
    pub schema: Schema,
    /// How payloads cross.
    pub carrier: Carrier,
}

impl TypeRoute {
    /// The Nerve payload of a CDR message (`out` is cleared first); for a CDR carrier
    /// the bytes are checked against the definition first.
    pub fn to_nerve(&self, cdr: &[u8], stamp_ns: i64, out: &mut Vec<u8>) -> Result<(), String> {
        out.clear();
        match &self.carrier {
            Carrier::Native(s) => (s.decode)(cdr, out).map_err(|e| e.to_string()),
            Carrier::Cdr { registry } => {
                nerve_ros2_types::validate(registry, &self.ros_name, cdr)
                    .map_err(|e| e.to_string())?;
                out.extend_from_slice(&stamp_ns.to_le_bytes());
                out.extend_from_slice(cdr);
                Ok(())
            }
        }
    }

    /// The CDR message of a Nerve payload (`out` is cleared first).
    pub fn to_ros(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        out.clear();
        match &self.carrier {
            Carrier::Native(s) => (s.encode)(payload, out).map_err(|e| e.to_string()),
            Carrier::Cdr { registry } => {
                let head = std::mem::size_of::<Ros2Cdr>();
                let cdr = payload.get(head..).unwrap_or_default();
                // a Nerve publisher's bytes are checked before ROS 2 sees them
                nerve_ros2_types::validate(registry, &self.ros_name, cdr)
                    .map_err(|e| format!("{} message dropped: {e}", self.ros_name))?;
                out.extend_from_slice(cdr);
                Ok(())
            }
        }
    }
}

/// Most types a catalog remembers.
const MAX_TYPES: usize = 4096;

/// Resolves ROS 2 types once each and remembers the answer (also a failure, so it is
/// reported once per type, not once per message).
pub struct Catalog {
    search: SearchPath,
    native: bool,
    routes: HashMap<String, Result<Arc<TypeRoute>, BridgeError>>,
}

impl Catalog {
    /// A catalog that looks for definitions in `search` (share directories: each holds
    /// `<pkg>/msg/<Name>.msg`); with `native`, standard types become Nerve's own.
    pub fn new(dirs: Vec<PathBuf>, native: bool) -> Catalog {
        let mut search = SearchPath::new();
        for d in dirs {
            search.push_dir(d);
        }
        Catalog {
            search,
            native,
            routes: HashMap::new(),
        }
    }

    /// Keeps an answer; a graph with more types than [`MAX_TYPES`] starts the cache anew
    /// (routes in use hold their own `Arc`).
    fn remember(&mut self, key: String, route: Result<Arc<TypeRoute>, BridgeError>) {
        if self.routes.len() >= MAX_TYPES {
            self.routes.clear();
        }
        self.routes.insert(key, route);
    }

    /// Whether standard types become Nerve's own.
    pub fn native(&self) -> bool {
        self.native
    }

    /// The route of ROS 2 type `ros_name` (`pkg/msg/Name`); `Err` again for a type that
    /// failed before.
    pub fn for_ros(&mut self, ros_name: &str) -> Result<Arc<TypeRoute>, BridgeError> {
        if let Some(r) = self.routes.get(ros_name) {
            return r.clone();
        }
        let route = self.resolve(ros_name).map(Arc::new);
        self.remember(ros_name.to_string(), route.clone());
        route
    }

    fn resolve(&self, ros_name: &str) -> Result<TypeRoute, BridgeError> {
        if self.native {
            if let Some(s) = standard().into_iter().find(|s| s.ros_name == ros_name) {
                return Ok(TypeRoute {
                    ros_name: ros_name.to_string(),
                    schema: (s.schema)(),
                    carrier: Carrier::Native(s),
                });
            }
        }
        let type_err = |e: nerve_ros2_types::RegistryError| BridgeError::Type {
            ros_type: ros_name.to_string(),
            reason: e.to_string(),
        };
        let mut registry = Registry::new();
        registry.load(ros_name, &self.search).map_err(type_err)?;
        let hash = registry.type_hash(ros_name).map_err(type_err)?;
        let text = registry.ros2msg_text(ros_name).map_err(type_err)?;
        Ok(TypeRoute {
            ros_name: ros_name.to_string(),
            schema: ros2_schema(ros_name, &hash.to_string(), &text),
            carrier: Carrier::Cdr {
                registry: Arc::new(registry),
            },
        })
    }

    /// The route of a Nerve topic's type towards ROS 2: a ROS 2 type carried as CDR, or
    /// a standard message; `None` for types ROS 2 has no form of here.
    pub fn for_nerve(&mut self, schema: &Schema) -> Option<Result<Arc<TypeRoute>, BridgeError>> {
        if let Some((name, hash, text)) = ros2_type(schema) {
            let key = format!("{name}@{hash}");
            if let Some(r) = self.routes.get(&key) {
                return Some(r.clone());
            }
            let route = Registry::from_ros2msg(name, text)
                .map_err(|e| BridgeError::Type {
                    ros_type: name.to_string(),
                    reason: e.to_string(),
                })
                .map(|registry| {
                    Arc::new(TypeRoute {
                        ros_name: name.to_string(),
                        schema: schema.clone(),
                        carrier: Carrier::Cdr {
                            registry: Arc::new(registry),
                        },
                    })
                });
            self.remember(key, route.clone());
            return Some(route);
        }
        let s = standard()
            .into_iter()
            .find(|s| (s.type_info)().layout_hash == schema.layout_hash)?;
        Some(Ok(Arc::new(TypeRoute {
            ros_name: s.ros_name.to_string(),
            schema: schema.clone(),
            carrier: Carrier::Native(s),
        })))
    }
}

/// The ROS 2 type name of a DDS type name (`std_msgs::msg::dds_::String_` →
/// `std_msgs/msg/String`).
pub fn ros_type_of_dds(dds: &str) -> Option<String> {
    let (pkg, rest) = dds.split_once("::")?;
    let (kind, rest) = rest.split_once("::dds_::")?;
    let name = rest.strip_suffix('_')?;
    (!pkg.is_empty() && !name.is_empty() && !name.contains("::"))
        .then(|| format!("{pkg}/{kind}/{name}"))
}

/// The DDS type name of a ROS 2 type name (`std_msgs/msg/String` →
/// `std_msgs::msg::dds_::String_`).
pub fn dds_type_of_ros(ros: &str) -> Option<String> {
    let mut parts = ros.split('/');
    let (pkg, kind, name) = (parts.next()?, parts.next()?, parts.next()?);
    parts
        .next()
        .is_none()
        .then(|| format!("{pkg}::{kind}::dds_::{name}_"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dds_type_names_map_both_ways() {
        assert_eq!(
            ros_type_of_dds("std_msgs::msg::dds_::String_").as_deref(),
            Some("std_msgs/msg/String")
        );
        assert_eq!(
            dds_type_of_ros("test_msgs/srv/Arrays_Request").as_deref(),
            Some("test_msgs::srv::dds_::Arrays_Request_")
        );
        assert_eq!(ros_type_of_dds("DDS::ParticipantBuiltinTopicData"), None);
    }
}
