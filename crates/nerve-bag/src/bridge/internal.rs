//! Nerve's own serde-encoded topics, readable in Foxglove: parameter events
//! (`/parameter_events`, [`nerve::param::ParamEvent`]), action status lists
//! (`<action>/_action/status`, [`nerve::action::StatusList`]) and log records (`/rosout`,
//! [`nerve::log::LogRecord`], as `foxglove.Log`, which Foxglove's Log panel shows).
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
use nerve::log::{Level, LogRecord};
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
    /// [`LogRecord`], sent as Foxglove's `foxglove.Log`.
    Log,
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
        } else if is(TypeInfo::of::<Serde<LogRecord>>()) {
            Some(Readable::Log)
        } else {
            None
        }
    }

    /// The schema's name (the Nerve type's).
    pub fn schema_name(self) -> &'static str {
        match self {
            Readable::ParamEvent => ParamEvent::TYPE_NAME,
            Readable::StatusList => StatusList::TYPE_NAME,
            // the name Foxglove's Log panel looks for
            Readable::Log => "foxglove.Log",
        }
    }

    /// The JSON Schema of the form [`Readable::encode`] writes.
    pub fn schema(self) -> Value {
        let mut s = match self {
            Readable::ParamEvent => param_event_schema(),
            Readable::StatusList => status_list_schema(),
            Readable::Log => log_schema(),
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
            Readable::Log => {
                log_record(&nerve::message::decode_serde_payload::<LogRecord>(payload)?)
            }
        };
        out.clear();
        // writing a Value into a Vec cannot fail
        serde_json::to_writer(&mut *out, &value).expect("JSON into memory");
        Ok(())
    }
}

/// Foxglove's `LogLevel` of a level (its numbers: DEBUG 1 to FATAL 5).
fn foxglove_level(l: Level) -> u8 {
    match l {
        Level::Debug => 1,
        Level::Info => 2,
        Level::Warn => 3,
        Level::Error => 4,
        Level::Fatal => 5,
    }
}

/// A record as `foxglove.Log` (plus `function`, which that schema lacks).
fn log_record(r: &LogRecord) -> Value {
    json!({
        "timestamp": time(r.stamp_ns),
        "level": foxglove_level(r.level),
        "message": r.message,
        "name": r.node,
        "file": r.location.file,
        "line": r.location.line,
        "function": r.location.function,
    })
}

fn log_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "timestamp": time_schema(),
            "level": {
                "type": "integer",
                "description": "1 debug, 2 info, 3 warning, 4 error, 5 fatal",
                "minimum": 1,
                "maximum": 5
            },
            "message": { "type": "string" },
            "name": { "type": "string", "description": "the writing node's full name" },
            "file": { "type": "string" },
            "line": { "type": "integer", "minimum": 0 },
            "function": { "type": "string" }
        }
    })
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

    #[test]
    fn a_log_record_reads_as_foxglove_log_with_every_field() {
        let r = LogRecord {
            stamp_ns: 1_700_000_000_000_000_123,
            level: Level::Warn,
            node: "/arm/gripper".into(),
            message: "grip ünï 12.5 N".into(),
            location: nerve::log::SourceLocation {
                file: "gripper.cpp".into(),
                function: "on_goal".into(),
                line: 42,
            },
        };
        // the payload as a type-erased subscriber holds it: the length, then postcard
        let body = postcard::to_allocvec(&r).unwrap();
        let mut payload = (body.len() as u64).to_le_bytes().to_vec();
        payload.extend_from_slice(&body);
        let schema = Schema::of::<Serde<LogRecord>>();
        let readable = Readable::of(&schema).expect("readable");
        assert_eq!(readable.schema_name(), "foxglove.Log");
        let mut out = Vec::new();
        readable.encode(&payload, &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            json!({
                "timestamp": {"sec": 1_700_000_000, "nsec": 123},
                "level": 3,
                "message": "grip ünï 12.5 N",
                "name": "/arm/gripper",
                "file": "gripper.cpp",
                "line": 42,
                "function": "on_goal",
            })
        );
        // every level has its Foxglove number, in order
        let numbers: Vec<u8> = Level::ALL.into_iter().map(foxglove_level).collect();
        assert_eq!(numbers, [1, 2, 3, 4, 5]);
    }
}
