//! ROS 2 action types in Nerve: the Fibonacci actions become Nerve's own
//! ([`nerve_msgs::action::Fibonacci`], field by field), any other action crosses as CDR
//! ([`Ros2Action`]): goal, feedback and result are the CDR of `pkg/action/Name_Goal`,
//! `_Feedback` and `_Result` behind the action's RIHS01 hash ([`Ros2ActionCdr`]), checked
//! against the action's definition (its `.action` file on the type search path) both
//! ways. [`ActionPass`] also writes and reads the messages ROS 2 actions use on the wire
//! (`_SendGoal_Request`, `_FeedbackMessage`, `_GetResult_Response`), so the bridge and the
//! tools share one conversion.

use crate::ConvertError;
use nerve_msgs::ros2::{Ros2Action, Ros2ActionCdr};
use nerve_ros2_types::{
    decode, encode, validate, Array, Registry, RegistryError, SearchPath, Struct, TypeName, Value,
};

/// The ROS 2 action types that are [`nerve_msgs::action::Fibonacci`] field by field
/// (`int32 order` → `int32[] sequence`).
pub const FIBONACCI_TYPES: [&str; 3] = [
    "test_msgs/action/Fibonacci",
    "example_interfaces/action/Fibonacci",
    "action_tutorials_interfaces/action/Fibonacci",
];

/// The Nerve action type ROS 2 action type `ros` crosses as when it has a native form
/// (`test_msgs/action/Fibonacci` → `nerve_msgs/Fibonacci`); `None`: it crosses as
/// [`Ros2Action`].
pub fn native_action(ros: &str) -> Option<&'static str> {
    FIBONACCI_TYPES
        .contains(&ros)
        .then_some(<nerve_msgs::action::Fibonacci as nerve::action::Action>::TYPE_NAME)
}

/// The Nerve action type name of every ROS 2 action carried as CDR.
pub const CARRIER: &str = <Ros2Action as nerve::action::Action>::TYPE_NAME;

/// Bytes of a [`Ros2ActionCdr`] head before the CDR.
pub const HEAD: usize = std::mem::size_of::<Ros2ActionCdr>();

/// A ROS 2 goal id (`unique_identifier_msgs/UUID`).
pub type Uuid = [u8; 16];

/// Which message of an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The goal.
    Goal,
    /// Feedback.
    Feedback,
    /// The result.
    Result,
}

impl Part {
    fn suffix(self) -> &'static str {
        match self {
            Part::Goal => "_Goal",
            Part::Feedback => "_Feedback",
            Part::Result => "_Result",
        }
    }
}

/// One ROS 2 action type carried as CDR: its definitions and hash, and the conversions
/// of its messages.
pub struct ActionPass {
    name: String,
    registry: Registry,
    hash: [u8; 32],
}

fn fail(name: &str, reason: impl std::fmt::Display) -> ConvertError {
    ConvertError::Definition {
        ros_type: name.to_string(),
        reason: reason.to_string(),
    }
}

impl ActionPass {
    /// ROS 2 action type `name` (`pkg/action/Name`) from the `.action` file on `search`.
    pub fn load(name: &str, search: &SearchPath) -> Result<ActionPass, RegistryError> {
        let tn = TypeName::parse(name)?;
        let canonical = tn.interface().to_string();
        if !canonical.contains("/action/") {
            return Err(RegistryError::UnknownType {
                name: format!("{name} (not an action type: expected pkg/action/Name)"),
                needed_by: None,
            });
        }
        let mut registry = Registry::new();
        // the `.action` file with every type it generates and uses (the hash covers all)
        registry.load(&canonical, search)?;
        let hash = registry.type_hash(&canonical)?;
        Ok(ActionPass {
            name: canonical,
            hash: *hash.as_bytes(),
            registry,
        })
    }

    /// ROS 2 action type `name` from its `ros2msg` definition (what
    /// [`ActionPass::type_schema`] carries and `nerve types gen-cpp` writes into a C++
    /// header), checked against `rihs01` (the hash the definition was generated with): a
    /// definition that hashes otherwise is refused naming both.
    pub fn from_ros2msg(name: &str, text: &str, rihs01: &str) -> Result<ActionPass, ConvertError> {
        let tn = TypeName::parse(name).map_err(|e| fail(name, e))?;
        let canonical = tn.interface().to_string();
        if !canonical.contains("/action/") {
            return Err(fail(name, "not an action type: expected pkg/action/Name"));
        }
        let registry = Registry::from_ros2msg(&canonical, text).map_err(|e| fail(name, e))?;
        let hash = registry.type_hash(&canonical).map_err(|e| fail(name, e))?;
        if hash.to_string() != rihs01 {
            return Err(fail(
                name,
                format!("its definition hashes to {hash}, not {rihs01} (regenerate its header)"),
            ));
        }
        Ok(ActionPass {
            name: canonical,
            hash: *hash.as_bytes(),
            registry,
        })
    }

    /// The action type, `pkg/action/Name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its RIHS01 hash (what [`Ros2ActionCdr::action_hash`] holds).
    pub fn hash(&self) -> [u8; 32] {
        self.hash
    }

    /// The definitions of the action and of the types it uses.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The ROS 2 type of `part`, e.g. `pkg/action/Name_Goal`.
    pub fn type_of(&self, part: Part) -> String {
        format!("{}{}", self.name, part.suffix())
    }

    /// The schema that names this action type on its servers' [`type_topic`].
    pub fn type_schema(&self) -> Result<nerve::message::schema::Schema, ConvertError> {
        let text = self
            .registry
            .ros2msg_text(&self.name)
            .map_err(|e| fail(&self.name, e))?;
        Ok(nerve_msgs::ros2::ros2_schema(
            &self.name,
            &self.hash_text(),
            &text,
        ))
    }

    /// Its RIHS01 hash as text (`RIHS01_<hex>`).
    pub fn hash_text(&self) -> String {
        nerve_ros2_types::Rihs01(self.hash).to_string()
    }

    /// The head of this action's [`Ros2ActionCdr`] messages.
    pub fn head(&self) -> Ros2ActionCdr {
        Ros2ActionCdr {
            action_hash: self.hash,
        }
    }

    /// Checks a Nerve message of `part` (its head and CDR): its action is this one and
    /// its CDR decodes as the part's type.
    pub fn check(&self, part: Part, head: &Ros2ActionCdr, cdr: &[u8]) -> Result<(), ConvertError> {
        if head.action_hash != self.hash {
            return Err(ConvertError::Payload {
                what: format!("a {} message", self.type_of(part)),
                reason: format!(
                    "it is of another action type (RIHS01_{}; {} is RIHS01_{})",
                    hex(&head.action_hash),
                    self.name,
                    hex(&self.hash)
                ),
            });
        }
        Ok(validate(&self.registry, &self.type_of(part), cdr)?)
    }

    fn encode_value(&self, ty: &str, v: &Value, out: &mut Vec<u8>) -> Result<(), ConvertError> {
        out.clear();
        Ok(encode(&self.registry, ty, v, out)?)
    }

    fn decode_part(&self, part: Part, cdr: &[u8]) -> Result<Value, ConvertError> {
        Ok(decode(&self.registry, &self.type_of(part), cdr)?)
    }

    /// The default message of `part` (every field its default), as CDR.
    pub fn default_cdr(&self, part: Part) -> Result<Vec<u8>, ConvertError> {
        let ty = self.type_of(part);
        let v = Value::default_for(&self.registry, &ty).map_err(|e| fail(&ty, e))?;
        let mut out = Vec::new();
        self.encode_value(&ty, &v, &mut out)?;
        Ok(out)
    }

    /// A message of `part` as JSON (or why its CDR does not decode).
    pub fn to_json(&self, part: Part, cdr: &[u8]) -> Result<serde_json::Value, ConvertError> {
        Ok(nerve_ros2_types::to_json(&self.decode_part(part, cdr)?))
    }

    /// The CDR of the message of `part` that `v` describes (fields left out take their
    /// defaults).
    pub fn from_json(&self, part: Part, v: &serde_json::Value) -> Result<Vec<u8>, ConvertError> {
        let ty = self.type_of(part);
        let value = nerve_ros2_types::from_json(&self.registry, &ty, v).map_err(|e| {
            ConvertError::Payload {
                what: ty.clone(),
                reason: e.to_string(),
            }
        })?;
        let mut out = Vec::new();
        self.encode_value(&ty, &value, &mut out)?;
        Ok(out)
    }

    /// A wire message of this action (`suffix`, e.g. `_SendGoal_Request`) of a goal id
    /// and the message of `part` (`field`).
    fn with_id(
        &self,
        suffix: &str,
        id: &Uuid,
        field: &str,
        part: Part,
        cdr: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), ConvertError> {
        let ty = format!("{}{suffix}", self.name);
        let inner = self.decode_part(part, cdr)?;
        let mut uuid = Struct::new();
        uuid.push("uuid", Value::Array(Array::UInt8(id.to_vec())));
        let mut s = Struct::new();
        s.push("goal_id", Value::Struct(uuid));
        s.push(field, inner);
        self.encode_value(&ty, &Value::Struct(s), out)
    }

    /// The goal id and the message of `part` (`field`) of a wire message.
    fn split_id(
        &self,
        suffix: &str,
        field: &str,
        part: Part,
        cdr: &[u8],
    ) -> Result<(Uuid, Vec<u8>), ConvertError> {
        let ty = format!("{}{suffix}", self.name);
        let v = decode(&self.registry, &ty, cdr)?;
        let missing = |what: &str| ConvertError::Payload {
            what: ty.clone(),
            reason: format!("no {what}"),
        };
        let id = v
            .get("goal_id.uuid")
            .and_then(Value::as_array)
            .and_then(Array::as_u8_slice)
            .and_then(|u| Uuid::try_from(u).ok())
            .ok_or_else(|| missing("goal_id.uuid"))?;
        let inner = v.get(field).ok_or_else(|| missing(field))?;
        let mut out = Vec::new();
        self.encode_value(&self.type_of(part), inner, &mut out)?;
        Ok((id, out))
    }

    /// `_SendGoal_Request` (`goal_id`, `goal`) of a goal's CDR.
    pub fn send_goal_request(
        &self,
        id: &Uuid,
        goal: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), ConvertError> {
        self.with_id("_SendGoal_Request", id, "goal", Part::Goal, goal, out)
    }

    /// The goal id and the goal's CDR of a `_SendGoal_Request`.
    pub fn read_send_goal_request(&self, cdr: &[u8]) -> Result<(Uuid, Vec<u8>), ConvertError> {
        self.split_id("_SendGoal_Request", "goal", Part::Goal, cdr)
    }

    /// `_FeedbackMessage` (`goal_id`, `feedback`) of a feedback's CDR.
    pub fn feedback_message(
        &self,
        id: &Uuid,
        feedback: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), ConvertError> {
        self.with_id(
            "_FeedbackMessage",
            id,
            "feedback",
            Part::Feedback,
            feedback,
            out,
        )
    }

    /// The goal id and the feedback's CDR of a `_FeedbackMessage`.
    pub fn read_feedback_message(&self, cdr: &[u8]) -> Result<(Uuid, Vec<u8>), ConvertError> {
        self.split_id("_FeedbackMessage", "feedback", Part::Feedback, cdr)
    }

    /// `_GetResult_Response` (`status`, `result`) of a result's CDR.
    pub fn get_result_response(
        &self,
        status: i8,
        result: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), ConvertError> {
        let ty = format!("{}_GetResult_Response", self.name);
        let mut s = Struct::new();
        s.push("status", Value::Int8(status));
        s.push("result", self.decode_part(Part::Result, result)?);
        self.encode_value(&ty, &Value::Struct(s), out)
    }

    /// The status and the result's CDR of a `_GetResult_Response`.
    pub fn read_get_result_response(&self, cdr: &[u8]) -> Result<(i8, Vec<u8>), ConvertError> {
        let ty = format!("{}_GetResult_Response", self.name);
        let v = decode(&self.registry, &ty, cdr)?;
        let status = match v.get("status") {
            Some(Value::Int8(s)) => *s,
            _ => {
                return Err(ConvertError::Payload {
                    what: ty,
                    reason: "no int8 status".into(),
                })
            }
        };
        let result = v.get("result").ok_or_else(|| ConvertError::Payload {
            what: ty.clone(),
            reason: "no result".into(),
        })?;
        let mut out = Vec::new();
        self.encode_value(&self.type_of(Part::Result), result, &mut out)?;
        Ok((status, out))
    }
}

/// The topic on which a Nerve server of a ROS 2 action type carried as CDR says which
/// type it serves (every such server is a [`Ros2Action`] to Nerve): the topic's schema
/// names the action type, its RIHS01 hash and its `ros2msg` definition (no message is
/// ever sent: the schema is read from the topic's record). The ROS 2 bridge offers the
/// server to ROS 2 as that type.
pub fn type_topic(action: &str) -> String {
    format!("{action}/_action/ros2_type")
}

/// What is wrong with a server's type announcement.
#[derive(Debug, thiserror::Error)]
pub enum AnnounceError {
    /// The topic could not be opened or written.
    #[error("the type topic of {action}: {reason}")]
    Topic {
        /// The action.
        action: String,
        /// Why.
        reason: String,
    },
}

/// Says on [`type_topic`] that action `action` (served by `node`) is of `pass`'s type;
/// keep the publisher as long as the server.
pub fn announce(
    node: &nerve::Node,
    action: &str,
    pass: &ActionPass,
) -> Result<nerve::RawPublisher, AnnounceError> {
    let fail = |e: &dyn std::fmt::Display| AnnounceError::Topic {
        action: action.to_string(),
        reason: e.to_string(),
    };
    let schema = pass.type_schema().map_err(|e| fail(&e))?;
    nerve::RawPublisher::create(node, &type_topic(action), &schema, nerve::Qos::default())
        .map_err(|e| fail(&e))
}

/// Opens the Nerve server `builder` describes as a server of ROS 2 action type `pass`: it
/// says its type on [`type_topic`] (under the action's resolved name) for as long as it
/// serves, so the ROS 2 bridge offers it to ROS 2 as that type and Nerve's tools name it.
/// The one way to open a [`Ros2Action`] server (`create` refuses one: it would say
/// nothing of its type).
pub fn create_server(
    builder: nerve::action::ActionServerBuilder<Ros2Action>,
    pass: &ActionPass,
) -> Result<nerve::action::ActionServer<Ros2Action>, nerve::action::ActionError> {
    builder.create_saying(say(pass))
}

/// What [`nerve::action::ActionServerBuilder::create_saying`] calls to say that a server
/// is of ROS 2 action type `pass` (for servers opened by type name, as the erased layer
/// does).
pub fn say(
    pass: &ActionPass,
) -> impl FnOnce(&nerve::Node, &str) -> Result<Box<dyn std::any::Any>, String> + '_ {
    move |node, name| {
        announce(node, name, pass)
            .map(|p| Box::new(p) as Box<dyn std::any::Any>)
            .map_err(|e| e.to_string())
    }
}

/// The ROS 2 action type a [`type_topic`]'s schema names: its name and RIHS01 hash
/// (`None` for a schema that names no ROS 2 type).
pub fn announced(schema: &nerve::message::schema::Schema) -> Option<(&str, &str)> {
    let (name, hash, _) = nerve_msgs::ros2::ros2_type(schema)?;
    Some((name, hash))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass() -> ActionPass {
        let mut dir = std::env::temp_dir();
        dir.push(format!("nerve_action_pass_{}", std::process::id()));
        let share = dir.join("demo_msgs/action");
        std::fs::create_dir_all(&share).unwrap();
        std::fs::write(
            share.join("Count.action"),
            "uint8 flag\nint64 to\n---\nuint8 code\nfloat64[] sums\n---\nstring note\nint32 at\n",
        )
        .unwrap();
        let uuid = dir.join("unique_identifier_msgs/msg");
        std::fs::create_dir_all(&uuid).unwrap();
        std::fs::write(uuid.join("UUID.msg"), "uint8[16] uuid\n").unwrap();
        let time = dir.join("builtin_interfaces/msg");
        std::fs::create_dir_all(&time).unwrap();
        std::fs::write(time.join("Time.msg"), "int32 sec\nuint32 nanosec\n").unwrap();
        let event = dir.join("service_msgs/msg");
        std::fs::create_dir_all(&event).unwrap();
        std::fs::write(
            event.join("ServiceEventInfo.msg"),
            "uint8 event_type\nbuiltin_interfaces/Time stamp\nchar[16] client_gid\nint64 sequence_number\n",
        )
        .unwrap();
        let mut search = SearchPath::new();
        search.push_dir(&dir);
        ActionPass::load("demo_msgs/action/Count", &search).unwrap()
    }

    #[test]
    fn an_action_from_its_ros2msg_text_is_the_action_from_its_files() {
        let p = pass();
        let text = p.registry().ros2msg_text(p.name()).unwrap();
        let q = ActionPass::from_ros2msg(p.name(), &text, &p.hash_text()).unwrap();
        assert_eq!(q.hash(), p.hash());
        assert_eq!(q.name(), "demo_msgs/action/Count");
        assert_eq!(
            q.default_cdr(Part::Result).unwrap(),
            p.default_cdr(Part::Result).unwrap()
        );
        let other = "RIHS01_".to_string() + &"0".repeat(64);
        let e = ActionPass::from_ros2msg(p.name(), &text, &other)
            .err()
            .unwrap();
        assert!(e.to_string().contains("regenerate"), "{e}");
        let e = ActionPass::from_ros2msg("demo_msgs/msg/Count", &text, &other)
            .err()
            .unwrap();
        assert!(e.to_string().contains("not an action type"), "{e}");
    }

    #[test]
    fn a_ros2_action_server_says_its_type_and_cannot_be_opened_without() {
        use nerve::action::{ActionError, ActionServer};
        let dir = std::env::temp_dir().join(format!("nerve_action_say_{}", std::process::id()));
        let config = nerve::Config::default().domain(613).unwrap().state_dir(dir);
        let ctx = nerve::Context::new(config).unwrap();
        let node = ctx.node("say").create().unwrap();
        // opened as any other action type, it would say nothing of its ROS 2 type
        let unsaid = ActionServer::<Ros2Action>::builder(&node, "/unsaid").create();
        match unsaid {
            Err(ActionError::Unsaid { action, reason }) => {
                assert_eq!(action, "/unsaid");
                assert!(reason.contains("create_server"), "{reason}");
            }
            Err(e) => panic!("another error: {e}"),
            Ok(_) => panic!("a Ros2Action server opened without saying its type"),
        }
        let p = pass();
        let server =
            create_server(ActionServer::<Ros2Action>::builder(&node, "/counted"), &p).unwrap();
        let info = nerve::introspect::topic_info(&node, &type_topic("/counted")).unwrap();
        let schema = info.schema.unwrap().unwrap();
        let hash = p.hash_text();
        assert_eq!(
            announced(&schema),
            Some(("demo_msgs/action/Count", hash.as_str()))
        );
        drop(server);
    }

    #[test]
    fn wire_messages_round_trip_with_the_ids_and_padding_of_ros2() {
        let p = pass();
        assert_eq!(p.name(), "demo_msgs/action/Count");
        let id: Uuid = core::array::from_fn(|i| i as u8 + 1);
        let goal = p
            .from_json(Part::Goal, &serde_json::json!({"flag": 1, "to": -5}))
            .unwrap();
        let mut wire = Vec::new();
        p.send_goal_request(&id, &goal, &mut wire).unwrap();
        // header, uuid, flag, padding to 8 (relative to the CDR body), to
        assert_eq!(wire.len(), 4 + 16 + 8 + 8);
        assert_eq!(p.read_send_goal_request(&wire).unwrap(), (id, goal.clone()));
        // the result after an int8 status: its padding differs from the result alone
        let result = p
            .from_json(
                Part::Result,
                &serde_json::json!({"code": 3, "sums": [1.5, 2.5]}),
            )
            .unwrap();
        p.get_result_response(4, &result, &mut wire).unwrap();
        assert_eq!(
            p.read_get_result_response(&wire).unwrap(),
            (4, result.clone())
        );
        assert_eq!(
            p.to_json(Part::Result, &result).unwrap(),
            serde_json::json!({"code": 3, "sums": [1.5, 2.5]})
        );
        let fb = p
            .from_json(Part::Feedback, &serde_json::json!({"note": "hi", "at": 7}))
            .unwrap();
        p.feedback_message(&id, &fb, &mut wire).unwrap();
        assert_eq!(p.read_feedback_message(&wire).unwrap(), (id, fb.clone()));
        // a message cut short, a message of another action, a field that is not there
        assert!(p.read_feedback_message(&wire[..wire.len() - 2]).is_err());
        p.check(Part::Feedback, &p.head(), &fb).unwrap();
        let other = Ros2ActionCdr {
            action_hash: [7; 32],
        };
        let e = p
            .check(Part::Feedback, &other, &fb)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("another action type") && e.contains("demo_msgs/action/Count"),
            "{e}"
        );
        assert!(p.check(Part::Goal, &p.head(), &fb).is_err());
        let e = p
            .from_json(Part::Goal, &serde_json::json!({"tto": 1}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("tto"), "{e}");
        assert_eq!(p.default_cdr(Part::Result).unwrap().len(), 4 + 8);
        let schema = p.type_schema().unwrap();
        assert_eq!(
            announced(&schema),
            Some(("demo_msgs/action/Count", p.hash_text().as_str()))
        );
        assert_eq!(
            announced(&nerve::message::schema::Schema::of::<Ros2ActionCdr>()),
            None
        );
        assert_eq!(
            native_action("test_msgs/action/Fibonacci"),
            Some("nerve_msgs/Fibonacci")
        );
        assert_eq!(native_action("demo_msgs/action/Count"), None);
    }
}
