//! ROS 2 types on Nerve topics (carried as CDR, see `nerve_msgs::ros2`): decoded for
//! `topic echo`, built from JSON for `topic pub`.

use crate::failure::{usage, Failure};
use crate::types::{repeat, PubOptions, SETTLE};
use nerve::message::schema::Schema;
use nerve_ros2_map::carrier::{Ros2Pass, HEAD as ROS2_HEAD};
use serde_json::{json, Value};

/// A ROS 2 type carried as CDR ([`nerve_msgs::ros2::Ros2Cdr`]), with its definitions
/// (the carrier of `nerve_ros2_map`, as the bridge and bags use it).
pub struct Ros2Type {
    pass: Ros2Pass,
    schema: Schema,
}

impl Ros2Type {
    /// The ROS 2 type a topic's schema describes, if it is one.
    pub fn of(schema: &Schema) -> Option<Result<Ros2Type, Failure>> {
        let pass = Ros2Pass::of_schema(schema)?;
        Some(
            pass.map(|pass| Ros2Type {
                pass,
                schema: schema.clone(),
            })
            .map_err(|e| Failure::Runtime(anyhow::anyhow!("on the topic, {e}"))),
        )
    }

    /// ROS 2 type `name` (`pkg/msg/Name`) from the definitions on AMENT_PREFIX_PATH.
    pub fn from_search_path(name: &str) -> Result<Ros2Type, Failure> {
        let search = nerve_ros2_types::SearchPath::from_env();
        let (pass, schema) = Ros2Pass::load(name, &search).map_err(|e| {
            usage(format!(
                "unknown message type {name:?}: not built in (see `nerve types`), not on an \
                 existing topic, and not a ROS 2 type on AMENT_PREFIX_PATH: {e}"
            ))
        })?;
        Ok(Ros2Type { pass, schema })
    }

    /// A carrier payload as the ROS 2 message's fields, or why it does not decode (naming
    /// the type and the payload's size).
    pub fn decode(&self, payload: &[u8]) -> Result<Value, String> {
        let name = self.pass.name();
        let Some(cdr) = payload.get(ROS2_HEAD..) else {
            return Err(format!(
                "{name}: {} bytes, shorter than the carrier's {ROS2_HEAD}-byte head",
                payload.len()
            ));
        };
        nerve_ros2_types::decode(self.pass.registry(), name, cdr)
            .map(|v| nerve_ros2_types::to_json(&v))
            .map_err(|e| format!("{name}: {} bytes of CDR do not decode: {e}", cdr.len()))
    }

    /// A carrier payload as the ROS 2 message's fields (or, for `topic echo`, which goes
    /// on with the next sample, why it does not decode).
    pub fn to_json(&self, payload: &[u8]) -> Value {
        match self.decode(payload) {
            Ok(v) => v,
            Err(e) => {
                json!({"size": payload.len().saturating_sub(ROS2_HEAD), "undecoded": e})
            }
        }
    }

    /// A carrier payload of the ROS 2 message `v` describes (fields left out take their
    /// defaults).
    pub fn payload(&self, v: &Value) -> Result<Vec<u8>, Failure> {
        let name = self.pass.name();
        let value = nerve_ros2_types::from_json(self.pass.registry(), name, v)
            .map_err(|e| usage(format!("{name}: {e}")))?;
        let mut cdr = Vec::new();
        nerve_ros2_types::encode(self.pass.registry(), name, &value, &mut cdr)
            .map_err(|e| usage(format!("{name}: {e}")))?;
        let mut payload = Vec::new();
        self.pass
            .decode(&cdr, nerve::wall_ns(), &mut payload)
            .map_err(|e| usage(format!("{name}: {e}")))?;
        Ok(payload)
    }

    /// Publishes `v` as this type on `topic`.
    pub fn publish(
        &self,
        node: &nerve::Node,
        topic: &str,
        v: &Value,
        opt: &PubOptions,
    ) -> Result<u64, Failure> {
        let bytes = self.payload(v)?;
        let publisher = nerve::RawPublisher::create(node, topic, &self.schema, opt.qos.clone())
            .map_err(|e| Failure::Runtime(e.into()))?;
        publisher.wait_for_subscribers(1, opt.wait);
        let sent = repeat(
            opt,
            || publisher.publish_bytes(&bytes),
            || publisher.update_connections(),
        )?;
        publisher.settle(SETTLE);
        Ok(sent)
    }
}

/// The ROS 2 type of a subscriber's schema, if it carries one.
pub fn ros2_registry(
    schema: Option<&Result<Schema, nerve::message::schema::SchemaError>>,
) -> Result<Option<Ros2Type>, Failure> {
    match schema {
        Some(Ok(s)) => Ros2Type::of(s).transpose(),
        _ => Ok(None),
    }
}

/// The ROS 2 graph a running `nerve bridge ros2` publishes (`None` when no bridge runs).
pub fn graph(node: &nerve::Node) -> Option<nerve_ros2_map::graph::RosGraph> {
    use nerve_ros2_map::graph::GRAPH_TOPIC;
    let names = nerve::introspect::topic_names(node).ok()?;
    if !names.contains(GRAPH_TOPIC) {
        return None;
    }
    let sub = node
        .subscriber::<nerve_msgs::srv::Bytes>(GRAPH_TOPIC)
        .qos(nerve::Qos::latched())
        .create()
        .ok()?;
    let sample = sub
        .recv_timeout(std::time::Duration::from_millis(1500))
        .ok()??;
    serde_json::from_slice(sample.elems()).ok()
}

/// The marker of ROS 2 entities in listings (where the HOST column is).
pub const ROS2: &str = "ROS 2";
