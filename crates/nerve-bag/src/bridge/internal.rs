//! Nerve's own serde-encoded topics, readable in Foxglove: parameter events
//! (`/parameter_events`, [`nerve::param::ParamEvent`]) and action status lists
//! (`<action>/_action/status`, [`nerve::action::StatusList`]).
//!
//! Their Nerve schema is a length and a byte slice (the postcard encoding of
//! [`nerve::Serde`] messages), which a generic tool can only show as bytes. The bridge
//! decodes each sample and sends it as JSON (message encoding `json`) with a JSON Schema
//! naming every field (schema encoding `jsonschema`). Nothing is rounded or dropped: a
//! float that JSON cannot write (NaN, ±inf) is sent as the string `"NaN"`, `"inf"` or
//! `"-inf"`, a goal id as the text `nerve action` prints (`<client, 16 hex digits>-<seq>`),
//! and integers as JSON integers, exactly (a reader that parses every number as an f64,
//! as JavaScript does, rounds those beyond 2^53 itself).

use nerve::action::{GoalStatus, StatusList};
use nerve::message::schema::Schema;
use nerve::param::{ParamChange, ParamEvent, ParamValue};
use nerve::{Serde, SerdeMessage, TypeInfo};
use serde_json::{json, Value};

/// The message encoding of these channels.
pub const MESSAGE_ENCODING: &str = "json";
/// The schema encoding of these channels.
pub const SCHEMA_ENCODING: &str = "jsonschema";

/// One of the types this module makes readable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readable {
    /// [`ParamEvent`].
    ParamEvent,
    /// [`StatusList`].
    StatusList,
}

impl Readable {
    /// The readable form of the type `schema` describes, if it is one of these (same
    /// name and layout hash).
    pub fn of(schema: &Schema) -> Option<Readable> {
        let is = |t: TypeInfo| schema.name == t.name && schema.layout_hash == t.layout_hash;
        if is(TypeInfo::of::<Serde<ParamEvent>>()) {
            Some(Readable::ParamEvent)
        } else if is(TypeInfo::of::<Serde<StatusList>>()) {
            Some(Readable::StatusList)
        } else {
            None
        }
    }

    /// The schema's name (the Nerve type's).
    pub fn schema_name(self) -> &'static str {
        match self {
            Readable::ParamEvent => ParamEvent::TYPE_NAME,
            Readable::StatusList => StatusList::TYPE_NAME,
        }
    }

    /// The JSON Schema of the form [`Readable::encode`] writes.
    pub fn schema(self) -> Value {
        let mut s = match self {
            Readable::ParamEvent => param_event_schema(),
            Readable::StatusList => status_list_schema(),
        };
        s["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
        s["title"] = json!(self.schema_name());
        s
    }

    /// The JSON Schema as the channel carries it.
    pub fn schema_data(self) -> Vec<u8> {
        self.schema().to_string().into_bytes()
    }

    /// Converts a sample's payload (as a type-erased subscriber holds it) into its JSON
    /// form, into `out`.
    pub fn encode(self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), nerve::DecodeError> {
        let value = match self {
            Readable::ParamEvent => param_event(
                &nerve::message::decode_serde_payload::<ParamEvent>(payload)?,
            ),
            Readable::StatusList => status_list(
                &nerve::message::decode_serde_payload::<StatusList>(payload)?,
            ),
        };
        out.clear();
        // writing a Value into a Vec cannot fail
        serde_json::to_writer(&mut *out, &value).expect("JSON into memory");
        Ok(())
    }
}

/// `{sec, nsec}` (Foxglove's time) of ns since the epoch; `nsec` in 0..1e9.
fn time(ns: i64) -> Value {
    json!({ "sec": ns.div_euclid(1_000_000_000), "nsec": ns.rem_euclid(1_000_000_000) })
}

fn time_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "sec": { "type": "integer" },
            "nsec": { "type": "integer", "minimum": 0, "maximum": 999_999_999 }
        }
    })
}

/// A float as JSON: a number, or for NaN and ±inf a string.
fn float(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else if v.is_nan() {
        json!("NaN")
    } else if v > 0.0 {
        json!("inf")
    } else {
        json!("-inf")
    }
}

/// `{type, value}` of a parameter value (`type` as `nerve param` names it).
fn param_value(v: &ParamValue) -> Value {
    let value = match v {
        ParamValue::Bool(b) => json!(b),
        ParamValue::Int(i) => json!(i),
        ParamValue::Float(f) => float(*f),
        ParamValue::Str(s) => json!(s),
        ParamValue::Bytes(b) => json!(b),
        ParamValue::BoolArray(a) => json!(a),
        ParamValue::IntArray(a) => json!(a),
        ParamValue::FloatArray(a) => Value::Array(a.iter().map(|f| float(*f)).collect()),
        ParamValue::StrArray(a) => json!(a),
    };
    json!({ "type": v.ty().name(), "value": value })
}

fn param_value_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "type": {
                "type": "string",
                "enum": ["bool", "int", "float", "string", "bytes", "bool[]", "int[]",
                         "float[]", "string[]"]
            },
            "value": {
                "description": "a boolean, integer, float (\"NaN\", \"inf\" or \"-inf\" \
                                where JSON has no number), string, bytes (0 to 255 each) \
                                or an array of one of these, as `type` says"
            }
        }
    })
}

fn param_change(c: &ParamChange) -> Value {
    json!({
        "name": c.name,
        "value": param_value(&c.new),
        "old": c.old.as_ref().map_or(Value::Null, param_value),
    })
}

fn param_event(e: &ParamEvent) -> Value {
    json!({
        "node": e.node,
        "stamp": time(e.stamp_ns),
        "changes": e.changes.iter().map(param_change).collect::<Vec<_>>(),
    })
}

fn param_event_schema() -> Value {
    let mut old = param_value_schema();
    old["type"] = json!(["object", "null"]);
    old["description"] = json!("the value before the change; null for a new parameter");
    json!({
        "type": "object",
        "properties": {
            "node": { "type": "string", "description": "the node's full name" },
            "stamp": time_schema(),
            "changes": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": { "type": "string" },
                        "value": param_value_schema(),
                        "old": old
                    }
                }
            }
        }
    })
}

fn goal_status(g: &GoalStatus) -> Value {
    let id = nerve::action::GoalId {
        client: g.goal.0,
        seq: g.goal.1,
    };
    json!({
        "goal_id": id.to_string(),
        "state": format!("{:?}", g.state),
        "terminal": g.state.is_terminal(),
    })
}

fn status_list(s: &StatusList) -> Value {
    json!({
        "action_type": s.action_type,
        "goals": s.goals.iter().map(goal_status).collect::<Vec<_>>(),
    })
}

fn status_list_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "action_type": { "type": "string" },
            "goals": {
                "type": "array",
                "description": "every goal the server holds, oldest first",
                "items": {
                    "type": "object",
                    "properties": {
                        "goal_id": {
                            "type": "string",
                            "description": "<client, 16 hex digits>-<goal number>"
                        },
                        "state": {
                            "type": "string",
                            "enum": ["Accepted", "Executing", "Canceling", "Succeeded",
                                     "Aborted", "Canceled"]
                        },
                        "terminal": { "type": "boolean" }
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nerve::action::GoalState;

    #[test]
    fn goal_states_in_the_schema_are_the_states() {
        let names: Vec<String> = [
            GoalState::Accepted,
            GoalState::Executing,
            GoalState::Canceling,
            GoalState::Succeeded,
            GoalState::Aborted,
            GoalState::Canceled,
        ]
        .iter()
        .map(|s| format!("{s:?}"))
        .collect();
        let schema = status_list_schema();
        let listed = &schema["properties"]["goals"]["items"]["properties"]["state"]["enum"];
        assert_eq!(listed, &json!(names));
    }

    #[test]
    fn parameter_types_in_the_schema_are_the_types() {
        use nerve::param::ParamType;
        let names: Vec<&str> = [
            ParamType::Bool,
            ParamType::Int,
            ParamType::Float,
            ParamType::Str,
            ParamType::Bytes,
            ParamType::BoolArray,
            ParamType::IntArray,
            ParamType::FloatArray,
            ParamType::StrArray,
        ]
        .iter()
        .map(|t| t.name())
        .collect();
        let listed = &param_value_schema()["properties"]["type"]["enum"];
        assert_eq!(listed, &json!(names));
    }

    #[test]
    fn floats_json_cannot_write_are_named_not_lost() {
        assert_eq!(float(0.1), json!(0.1));
        assert_eq!(float(f64::NAN), json!("NaN"));
        assert_eq!(float(f64::INFINITY), json!("inf"));
        assert_eq!(float(f64::NEG_INFINITY), json!("-inf"));
        assert_eq!(time(-1), json!({"sec": -1, "nsec": 999_999_999}));
    }
}
