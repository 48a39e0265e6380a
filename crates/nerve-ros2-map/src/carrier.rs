//! ROS 2 types Nerve has no exact native form of, carried as CDR ([`Ros2Cdr`]): what the
//! ROS 2 bridge publishes them as in Nerve, what a bag holds of them (schema name,
//! `ros2msg` definition, the CDR bytes unchanged), and what any bag, rosbag2's included,
//! replays them as.
//!
//! Every message is checked against its definition both ways ([`nerve_ros2_types::validate`],
//! which allocates nothing): a bag holds only messages ROS 2's tools decode, and a replay
//! publishes only messages Nerve's subscribers decode.

use crate::ConvertError;
use nerve::message::schema::Schema;
use nerve_msgs::ros2::{ros2_schema, ros2_type, Ros2Cdr};
use nerve_ros2_types::{Registry, RegistryError, SearchPath, TypeName};

/// Bytes of the carrier's head ([`Ros2Cdr::source_stamp_ns`]) before the CDR.
pub const HEAD: usize = std::mem::size_of::<Ros2Cdr>();

/// The conversion of one ROS 2 type: the payload's CDR, checked, unchanged.
pub struct Ros2Pass {
    /// The ROS 2 type, `pkg/msg/Name`.
    name: String,
    registry: Registry,
}

/// The definitions of ROS 2 type `name` from `ros2msg` text, with the type's canonical
/// name (`pkg/msg/Name`).
fn registry_of(name: &str, definition: &str) -> Result<(String, Registry), ConvertError> {
    let fail = |reason: String| ConvertError::Definition {
        ros_type: name.to_string(),
        reason,
    };
    let canonical = TypeName::parse(name)
        .map_err(|e| fail(e.to_string()))?
        .to_string();
    let registry =
        Registry::from_ros2msg(&canonical, definition).map_err(|e| fail(e.to_string()))?;
    Ok((canonical, registry))
}

/// The Nerve schema of ROS 2 type `name` carried as [`Ros2Cdr`], from its `ros2msg`
/// definition (a bag's schema record): the definition is kept as it is, the RIHS01 hash
/// is computed from it.
pub fn schema_of(name: &str, definition: &str) -> Result<Schema, ConvertError> {
    let (canonical, registry) = registry_of(name, definition)?;
    let hash = registry
        .type_hash(&canonical)
        .map_err(|e| ConvertError::Definition {
            ros_type: canonical.clone(),
            reason: format!("its type hash: {e}"),
        })?;
    Ok(ros2_schema(&canonical, &hash.to_string(), definition))
}

impl Ros2Pass {
    /// The conversion of ROS 2 type `name` defined by `definition` (`ros2msg` text).
    pub fn new(name: &str, definition: &str) -> Result<Ros2Pass, ConvertError> {
        let (name, registry) = registry_of(name, definition)?;
        Ok(Ros2Pass { name, registry })
    }

    /// ROS 2 type `name` (`pkg/msg/Name`) from the interface files on `search`, and the
    /// schema of the Nerve topics that carry it (its RIHS01 hash and `ros2msg` text).
    pub fn load(name: &str, search: &SearchPath) -> Result<(Ros2Pass, Schema), RegistryError> {
        let mut registry = Registry::new();
        registry.load(name, search)?;
        let hash = registry.type_hash(name)?;
        let text = registry.ros2msg_text(name)?;
        let schema = ros2_schema(name, &hash.to_string(), &text);
        let pass = Ros2Pass {
            name: name.to_string(),
            registry,
        };
        Ok((pass, schema))
    }

    /// The conversion of the ROS 2 type a carrier schema describes; `None` for a schema
    /// that is not a [`Ros2Cdr`] carrier.
    pub fn of_schema(schema: &Schema) -> Option<Result<Ros2Pass, ConvertError>> {
        let (name, _, definition) = ros2_type(schema)?;
        Some(Ros2Pass::new(name, definition))
    }

    /// The ROS 2 type.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The definitions of the type and of the types it uses.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    fn check(&self, cdr: &[u8]) -> Result<(), ConvertError> {
        Ok(nerve_ros2_types::validate(&self.registry, &self.name, cdr)?)
    }

    /// Writes the CDR a [`Ros2Cdr`] payload carries into `out` (cleared first), after
    /// checking that it decodes as the type.
    pub fn encode(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), ConvertError> {
        let cdr = payload.get(HEAD..).ok_or_else(|| ConvertError::Payload {
            what: format!("a {} message", self.name),
            reason: format!("{} bytes, shorter than the {HEAD}-byte head", payload.len()),
        })?;
        self.check(cdr)?;
        out.clear();
        out.extend_from_slice(cdr);
        Ok(())
    }

    /// Writes the [`Ros2Cdr`] payload of a CDR message into `out` (cleared first): the
    /// source time stamp, then the CDR unchanged, after checking that it decodes.
    pub fn decode(
        &self,
        cdr: &[u8],
        source_stamp_ns: i64,
        out: &mut Vec<u8>,
    ) -> Result<(), ConvertError> {
        self.check(cdr)?;
        out.clear();
        out.reserve(HEAD + cdr.len());
        out.extend_from_slice(&source_stamp_ns.to_le_bytes());
        out.extend_from_slice(cdr);
        Ok(())
    }
}

/// The source time stamp of a [`Ros2Cdr`] payload (None when it is unknown, 0).
pub fn source_stamp(payload: &[u8]) -> Option<u64> {
    let head: [u8; HEAD] = payload.get(..HEAD)?.try_into().ok()?;
    let ns = i64::from_le_bytes(head);
    (ns > 0).then_some(ns as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdr_passes_unchanged_and_bad_cdr_is_refused() {
        let schema = schema_of("std_msgs/String", "string data\n").unwrap();
        let (name, hash, def) = nerve_msgs::ros2::ros2_type(&schema).unwrap();
        assert_eq!(name, "std_msgs/msg/String");
        assert_eq!(
            hash,
            "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
        );
        assert_eq!(def, "string data\n");
        let pass = Ros2Pass::new(name, def).unwrap();
        let cdr = [0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0];
        let mut payload = Vec::new();
        pass.decode(&cdr, 42, &mut payload).unwrap();
        assert_eq!(&payload[..HEAD], &42i64.to_le_bytes());
        assert_eq!(source_stamp(&payload), Some(42));
        let mut back = Vec::new();
        pass.encode(&payload, &mut back).unwrap();
        assert_eq!(back, cdr);
        // a length past the end, a cut, no head
        let mut bad = cdr;
        bad[4] = 200;
        assert!(pass.decode(&bad, 0, &mut payload).is_err());
        assert!(pass.decode(&cdr[..6], 0, &mut payload).is_err());
        assert!(pass.encode(&[0; 4], &mut back).is_err());
        let e = schema_of("std_msgs/msg/String", "strin data\n").unwrap_err();
        assert!(e.to_string().contains("std_msgs/msg/String"), "{e}");
    }
}
