//! Which Nerve type a ROS 2 type travels as: a standard message Nerve holds exactly
//! (converted once, so Nerve subscribers get zero-copy samples of their own type), a
//! lossy standard form only where the user named it ([`BridgeConfig::lossy`]), or any
//! other type as CDR in a [`nerve_msgs::ros2::Ros2Cdr`] carrier whose schema holds the definition and
//! RIHS01 hash (found on the type search path, else asked of the publishing node:
//! [`crate::type_description`]). The choice is the one table of
//! [`nerve_ros2_map::standard`], the same bags use.

use crate::type_description::{Learner, Learning};
use crate::{BridgeConfig, BridgeError, BridgeStats, Event};
use nerve::message::schema::Schema;
use nerve_msgs::ros2::{ros2_schema, ros2_type};
use nerve_ros2_map::carrier::Ros2Pass;
use nerve_ros2_map::standard::{of_nerve, of_ros, Standard};
use nerve_ros2_map::ConvertError;
use nerve_ros2_types::{RegistryError, SearchPath};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// How messages of one ROS 2 type cross.
pub enum Carrier {
    /// A standard message: CDR is converted to and from Nerve's own type.
    Native(Standard),
    /// Any other type: the CDR bytes travel unchanged, checked against the definition.
    Cdr(Arc<Ros2Pass>),
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
    pub fn to_nerve(
        &self,
        cdr: &[u8],
        stamp_ns: i64,
        out: &mut Vec<u8>,
    ) -> Result<(), ConvertError> {
        out.clear();
        match &self.carrier {
            Carrier::Native(s) => (s.decode)(cdr, out),
            Carrier::Cdr(pass) => pass.decode(cdr, stamp_ns, out),
        }
    }

    /// The CDR message of a Nerve payload (`out` is cleared first).
    pub fn to_ros(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), ConvertError> {
        out.clear();
        match &self.carrier {
            Carrier::Native(s) => (s.encode)(payload, out),
            // a Nerve publisher's bytes are checked before ROS 2 sees them
            Carrier::Cdr(pass) => pass.encode(payload, out),
        }
    }
}

/// The RIHS01 type hash (`RIHS01_<hex>`) of a route's ROS 2 type: the one its carrier
/// schema holds, else computed from the definition (a native standard type's `ros2msg`
/// text).
pub fn route_type_hash(route: &TypeRoute) -> Result<String, BridgeError> {
    if let Some((_, hash, _)) = nerve_msgs::ros2::ros2_type(&route.schema) {
        return Ok(hash.to_owned());
    }
    let err = |e: nerve_ros2_types::RegistryError| BridgeError::Type {
        ros_type: route.ros_name.clone(),
        reason: format!("no type hash: {e}"),
    };
    let hash = match &route.carrier {
        Carrier::Native(s) => {
            nerve_ros2_types::Registry::from_ros2msg(&route.ros_name, &(s.text)())
                .and_then(|r| r.type_hash(&route.ros_name))
                .map_err(err)?
        }
        Carrier::Cdr(pass) => pass.registry().type_hash(pass.name()).map_err(err)?,
    };
    Ok(hash.to_string())
}

/// Counts a message on `topic` that did not convert: malformed, or holding a value the
/// other form cannot keep (not delivered, named with the field); the event to report,
/// for the first ones and then at powers of two.
pub(crate) fn count_unconverted(
    stats: &BridgeStats,
    topic: &str,
    route: &TypeRoute,
    e: &ConvertError,
) -> Option<Event> {
    let counter = if e.does_not_fit() {
        &stats.dropped
    } else {
        &stats.malformed
    };
    let n = counter.fetch_add(1, Ordering::Relaxed);
    if n >= 16 && !n.is_power_of_two() {
        return None;
    }
    let topic = topic.to_string();
    Some(if e.does_not_fit() {
        Event::Dropped {
            topic,
            reason: format!(
                "{} message not converted to {}: {e}",
                route.ros_name, route.schema.name
            ),
        }
    } else {
        Event::Malformed {
            topic,
            reason: format!("{} message dropped: {e}", route.ros_name),
        }
    })
}

/// Most types a catalog remembers.
const MAX_TYPES: usize = 4096;

/// Resolves ROS 2 types once each and remembers the answer (also a failure, so it is
/// reported once per type, not once per message).
pub struct Catalog {
    search: SearchPath,
    native: bool,
    lossy: Vec<String>,
    routes: HashMap<String, Result<Arc<TypeRoute>, BridgeError>>,
    /// Asks the publishers of a type found nowhere on the search path (REP-2016).
    learner: Option<Learner>,
}

impl Catalog {
    /// A catalog that looks for definitions in `search` (share directories: each holds
    /// `<pkg>/msg/<Name>.msg`); with `native`, standard types Nerve holds exactly become
    /// Nerve's own.
    pub fn new(dirs: Vec<PathBuf>, native: bool) -> Catalog {
        let mut search = SearchPath::new();
        for d in dirs {
            search.push_dir(d);
        }
        Catalog {
            search,
            native,
            lossy: Vec::new(),
            routes: HashMap::new(),
            learner: None,
        }
    }

    /// The catalog of a bridge's settings: its type directories, whether standard types
    /// become Nerve's own, and the lossy forms the user asked for.
    pub fn of(config: &BridgeConfig) -> Catalog {
        Catalog::new(config.types.clone(), config.native).with_lossy(config.lossy.clone())
    }

    /// The same catalog, converting ROS 2 types to the lossy Nerve forms named in `lossy`
    /// (Nerve type names, see [`BridgeConfig::lossy`]).
    pub fn with_lossy(mut self, lossy: Vec<String>) -> Catalog {
        self.lossy = lossy;
        self
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
        // a type still asked of its publishers has no answer yet
        if !self.learning(ros_name) {
            self.remember(ros_name.to_string(), route.clone());
        }
        route
    }

    fn resolve(&mut self, ros_name: &str) -> Result<TypeRoute, BridgeError> {
        if self.native {
            if let Some(s) = of_ros(ros_name, &self.lossy) {
                return Ok(TypeRoute {
                    ros_name: ros_name.to_string(),
                    schema: (s.schema)(),
                    carrier: Carrier::Native(s),
                });
            }
        }
        let (pass, schema) = match Ros2Pass::load(ros_name, &self.search) {
            Ok(found) => found,
            Err(e @ RegistryError::NotFound { .. }) if self.learner.is_some() => {
                return self.learned(ros_name, e);
            }
            Err(e) => {
                return Err(BridgeError::Type {
                    ros_type: ros_name.to_string(),
                    reason: e.to_string(),
                })
            }
        };
        Ok(TypeRoute {
            ros_name: ros_name.to_string(),
            schema,
            carrier: Carrier::Cdr(Arc::new(pass)),
        })
    }

    // ---- types learned from the wire (REP-2016): crate::type_description ----

    /// The same catalog, asking the publishers of a type with no definition on the
    /// search path for its description ([`Learner`]).
    pub(crate) fn with_learner(mut self, learner: Learner) -> Catalog {
        self.learner = Some(learner);
        self
    }

    /// Whether ROS 2 type `ros_name` is still being asked of its publishers (not an
    /// answer yet: ask [`Catalog::for_ros`] again later).
    pub(crate) fn learning(&self, ros_name: &str) -> bool {
        self.learner.as_ref().is_some_and(|l| l.asking(ros_name))
    }

    /// The route of a type not found on the search path, from its publishers' answer.
    fn learned(
        &mut self,
        ros_name: &str,
        not_found: RegistryError,
    ) -> Result<TypeRoute, BridgeError> {
        let fail = |reason: String| BridgeError::Type {
            ros_type: ros_name.to_string(),
            reason,
        };
        let Some(learner) = self.learner.as_mut() else {
            return Err(fail(not_found.to_string()));
        };
        let text = match learner.learn(ros_name) {
            Learning::Learned(text) => text,
            Learning::Pending => {
                return Err(fail(format!(
                    "{not_found}; asking its publishers for its type description"
                )))
            }
            Learning::Failed(why) => return Err(fail(format!("{not_found}; {why}"))),
        };
        let pass = Ros2Pass::new(ros_name, &text).map_err(|e| fail(e.to_string()))?;
        let hash = pass
            .registry()
            .type_hash(pass.name())
            .map_err(|e| fail(e.to_string()))?;
        Ok(TypeRoute {
            ros_name: ros_name.to_string(),
            schema: ros2_schema(pass.name(), &hash.to_string(), &text),
            carrier: Carrier::Cdr(Arc::new(pass)),
        })
    }

    // ---- end of types learned from the wire ----

    /// The route of a Nerve topic's type towards ROS 2: a ROS 2 type carried as CDR, or
    /// a standard message; `None` for types ROS 2 has no form of here.
    pub fn for_nerve(&mut self, schema: &Schema) -> Option<Result<Arc<TypeRoute>, BridgeError>> {
        if let Some((name, hash, text)) = ros2_type(schema) {
            let key = format!("{name}@{hash}");
            if let Some(r) = self.routes.get(&key) {
                return Some(r.clone());
            }
            let route = Ros2Pass::new(name, text)
                .map_err(|e| BridgeError::Type {
                    ros_type: name.to_string(),
                    reason: e.to_string(),
                })
                .map(|pass| {
                    Arc::new(TypeRoute {
                        ros_name: name.to_string(),
                        schema: schema.clone(),
                        carrier: Carrier::Cdr(Arc::new(pass)),
                    })
                });
            self.remember(key, route.clone());
            return Some(route);
        }
        let s = of_nerve(schema.layout_hash)?;
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
    fn a_ros2_type_becomes_nerves_own_only_where_nothing_is_lost() {
        let nerve_type = |c: &mut Catalog, ros: &str| c.for_ros(ros).map(|r| r.schema.name.clone());
        let mut c = Catalog::new(Vec::new(), true);
        // every field at full precision, not the planar f32 CmdVel
        assert_eq!(
            nerve_type(&mut c, "geometry_msgs/msg/TwistStamped").unwrap(),
            "nerve_msgs/TwistStamped"
        );
        assert_eq!(
            nerve_type(&mut c, "sensor_msgs/msg/Image").unwrap(),
            "nerve_msgs/Image"
        );
        // Nerve's Imu has no frame id: the type crosses as CDR, so its definition is
        // looked for (none here)
        let e = nerve_type(&mut c, "sensor_msgs/msg/Imu").unwrap_err();
        assert!(e.to_string().contains("not found"), "{e}");
        // the lossy form when named
        let mut c = Catalog::new(Vec::new(), true).with_lossy(vec!["nerve_msgs/CmdVel".into()]);
        assert_eq!(
            nerve_type(&mut c, "geometry_msgs/msg/TwistStamped").unwrap(),
            "nerve_msgs/CmdVel"
        );
        // and towards ROS 2, every standard type has its form: Twist too
        let twist = nerve::message::schema::Schema::of::<nerve_msgs::Twist>();
        let r = c.for_nerve(&twist).unwrap().unwrap();
        assert_eq!(r.ros_name, "geometry_msgs/msg/Twist");
        let mut config = BridgeConfig::from_env().unwrap();
        config.lossy = vec!["nerve_msgs/Odometry".into()];
        let e = config.check().unwrap_err().to_string();
        assert!(e.contains("nerve_msgs/Odometry is not a lossy"), "{e}");
    }

    #[test]
    fn a_frame_id_that_does_not_fit_is_counted_not_delivered_and_named() {
        let mut c = Catalog::new(Vec::new(), true);
        let route = c.for_ros("sensor_msgs/msg/Image").unwrap();
        let frame = "f".repeat(70);
        let mut cdr = Vec::new();
        let mut w = nerve_ros2_types::CdrWriter::new(&mut cdr);
        w.i32(1);
        w.u32(2);
        w.string(frame.as_bytes()).unwrap();
        w.u32(0); // height
        w.u32(0); // width
        w.string(b"mono8").unwrap();
        w.u8(0);
        w.u32(0); // step
        w.len(0).unwrap();
        let e = route.to_nerve(&cdr, 0, &mut Vec::new()).unwrap_err();
        let stats = BridgeStats::default();
        let ev = count_unconverted(&stats, "/camera/image", &route, &e).unwrap();
        assert_eq!(stats.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(stats.malformed.load(Ordering::Relaxed), 0);
        let Event::Dropped { topic, reason } = ev else {
            panic!("{ev:?}");
        };
        assert_eq!(topic, "/camera/image");
        assert!(
            reason.contains("header.frame_id") && reason.contains("70 bytes"),
            "{reason}"
        );
        // a message cut short (inside the frame id) is malformed, counted apart
        let e = route.to_nerve(&cdr[..20], 0, &mut Vec::new()).unwrap_err();
        assert!(matches!(
            count_unconverted(&stats, "/camera/image", &route, &e),
            Some(Event::Malformed { .. })
        ));
        assert_eq!(stats.malformed.load(Ordering::Relaxed), 1);
    }

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
}
