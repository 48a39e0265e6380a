//! Types learned from the wire (REP-2016): a ROS 2 type with no definition on the type
//! search path is asked of the node that publishes it.
//!
//! Every ROS 2 node since Iron serves the types it uses on `<node>/get_type_description`
//! (`type_description_interfaces/srv/GetTypeDescription`) and announces each endpoint's
//! RIHS01 type hash in discovery (DDS USER_DATA `typehash=RIHS01_…;`). The bridge asks
//! the nodes of the publishing participant for the type and its announced hash
//! (`Learner`), and takes the answer only when it hashes to what the publisher
//! announced: the description itself, and the definition made of it ([`definition`]).
//! The definition is the interface files the node sent along (`.msg` sources: comments,
//! constants and defaults kept) when they hash the same, else the description's fields
//! (the wire layout, which is all the hash covers: a description has no constants and
//! no parsed defaults). Answers are kept by hash (at most [`MAX_LEARNED`]).
//!
//! A reply is untrusted input: it is refused, naming what was wrong, when it is larger
//! than [`MAX_REPLY_BYTES`], describes more than [`MAX_TYPES`] types or a type with more
//! than [`MAX_FIELDS`] fields, names longer than [`MAX_NAME`] bytes, nests deeper than
//! [`nerve_ros2_types::MAX_NESTING_DEPTH`] (or recursively), or holds a field type ROS 2
//! messages cannot.
//!
//! The bridge's own ROS 2 node answers `get_type_description` too (`Describer`).

use crate::dds::{RawAdapter, RawCdr, RosQos};
use crate::BridgeError;
use nerve_ros2_types::hash::{FieldDescription, IndividualTypeDescription};
use nerve_ros2_types::{
    BaseType, CdrReader, CdrWriter, Container, DefinitionRole, EncodeError, Field, FieldType,
    MessageDefinition, PrimitiveType, Registry, Rihs01, TypeDescription, TypeName,
};
use rustdds::no_key::{DataReader, DataWriter};
use rustdds::{RTPSEntity, SampleIdentity, Timestamp, TopicKind, WriteOptionsBuilder};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest reply taken (bytes of CDR).
pub const MAX_REPLY_BYTES: usize = 1 << 20;
/// Most types one description may hold (the type and every type it references), and
/// most interface files sent along.
pub const MAX_TYPES: usize = 256;
/// Most fields of one type.
pub const MAX_FIELDS: usize = 1024;
/// Longest type or field name (bytes; `type_name` is `string<=255` in the interface).
pub const MAX_NAME: usize = 255;
/// Most answers (learned types and refusals) kept, by hash.
pub const MAX_LEARNED: usize = 256;
/// Most nodes of one participant asked for one type.
const MAX_NODES: usize = 8;
/// How long the nodes of a publisher have to answer before the type is refused.
const ASK_TIMEOUT: Duration = Duration::from_secs(8);
/// How long an ask waits for more nodes of the publisher to be discovered before the
/// refusals of those it knows end it (a node refuses the types it does not use itself,
/// and another node in the same process may be the publisher).
const SETTLE: Duration = Duration::from_secs(2);
/// How long a request goes unanswered before it is sent again (it may have been
/// written before the node's reader matched).
const RESEND: Duration = Duration::from_secs(1);

/// The service each node offers (`<node>/get_type_description`).
const SERVICE: &str = "/get_type_description";
/// Its DDS request and reply types.
const REQUEST_TYPE: &str = "type_description_interfaces::srv::dds_::GetTypeDescription_Request_";
const REPLY_TYPE: &str = "type_description_interfaces::srv::dds_::GetTypeDescription_Response_";

/// Why a type description was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DescriptionError {
    /// The reply does not decode as a `GetTypeDescription` response.
    #[error("the reply is malformed: {0}")]
    Malformed(String),
    /// The reply is larger than a limit.
    #[error("the reply holds {what}: {found}, more than the {limit} taken")]
    TooLarge {
        /// What is counted.
        what: String,
        /// How many.
        found: usize,
        /// The limit.
        limit: usize,
    },
    /// The node answered `successful: false`.
    #[error("the node refused: {0}")]
    Refused(String),
    /// The node described another type.
    #[error("the node described {served}, not {asked}")]
    WrongType {
        /// The type asked for.
        asked: String,
        /// The type described.
        served: String,
    },
    /// The description does not hash to what the publisher announced.
    #[error("the description hashes to {served}, the publisher announced {announced}")]
    HashMismatch {
        /// The hash in the publisher's discovery data.
        announced: Rihs01,
        /// The hash of what the node served.
        served: Rihs01,
    },
    /// A field ROS 2 messages cannot hold, or a name that is not one.
    #[error("{type_name} field `{field}`: {reason}")]
    BadField {
        /// The type.
        type_name: String,
        /// The field.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The described types do not form a definition (a missing, duplicated, recursive
    /// or too deeply nested type).
    #[error("{0}")]
    Definition(String),
}

/// One interface file a node sent along (`type_description_interfaces/msg/TypeSource`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeSource {
    /// The type, `pkg/msg/Name`.
    pub type_name: String,
    /// `msg`, `idl`, or empty when none.
    pub encoding: String,
    /// The file's text.
    pub raw_file_contents: String,
}

/// A `GetTypeDescription` response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Whether the node knew the type with that hash.
    pub successful: bool,
    /// Why not.
    pub failure_reason: String,
    /// The type and every type it references.
    pub description: TypeDescription,
    /// The interface files, when asked for and known.
    pub sources: Vec<TypeSource>,
}

/// The CDR of a `GetTypeDescription` request for `type_name` with hash `hash`, asking for
/// the interface files too.
pub fn request(type_name: &str, hash: &Rihs01) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = CdrWriter::new(&mut out);
    // two short strings: their lengths fit CDR's 32 bits
    let _ = w.string(type_name.as_bytes());
    let _ = w.string(hash.to_string().as_bytes());
    w.u8(1); // include_type_sources
    out
}

/// The CDR of a `GetTypeDescription` response (what a node answers).
pub fn encode_reply(reply: &Reply) -> Result<Vec<u8>, EncodeError> {
    fn individual(w: &mut CdrWriter<'_>, d: &IndividualTypeDescription) -> Result<(), EncodeError> {
        w.string(d.type_name.as_bytes())?;
        w.len(d.fields.len())?;
        for f in &d.fields {
            w.string(f.name.as_bytes())?;
            w.u8(f.type_id);
            w.u64(f.capacity);
            w.u64(f.string_capacity);
            w.string(f.nested_type_name.as_bytes())?;
            w.string(f.default_value.as_bytes())?;
        }
        Ok(())
    }
    let mut out = Vec::new();
    let mut w = CdrWriter::new(&mut out);
    w.u8(u8::from(reply.successful));
    w.string(reply.failure_reason.as_bytes())?;
    individual(&mut w, &reply.description.type_description)?;
    w.len(reply.description.referenced_type_descriptions.len())?;
    for d in &reply.description.referenced_type_descriptions {
        individual(&mut w, d)?;
    }
    w.len(reply.sources.len())?;
    for s in &reply.sources {
        w.string(s.type_name.as_bytes())?;
        w.string(s.encoding.as_bytes())?;
        w.string(s.raw_file_contents.as_bytes())?;
    }
    w.len(0)?; // extra_information
    Ok(out)
}

fn malformed(e: impl std::fmt::Display) -> DescriptionError {
    DescriptionError::Malformed(e.to_string())
}

fn too_large(what: impl Into<String>, found: usize, limit: usize) -> DescriptionError {
    DescriptionError::TooLarge {
        what: what.into(),
        found,
        limit,
    }
}

/// A string of at most `limit` bytes (`what` names it in the error).
fn text(r: &mut CdrReader<'_>, what: &str, limit: usize) -> Result<String, DescriptionError> {
    let b = r.string().map_err(malformed)?;
    if b.len() > limit {
        return Err(too_large(
            format!("a {what} of that many bytes"),
            b.len(),
            limit,
        ));
    }
    String::from_utf8(b.to_vec())
        .map_err(|_| DescriptionError::Malformed(format!("a {what} that is not UTF-8")))
}

/// A sequence length of at most `limit` elements.
fn count(r: &mut CdrReader<'_>, what: &str, limit: usize) -> Result<usize, DescriptionError> {
    // every element holds at least one 4-byte string length
    let n = r.len(4).map_err(malformed)?;
    if n > limit {
        return Err(too_large(what, n, limit));
    }
    Ok(n)
}

fn individual(r: &mut CdrReader<'_>) -> Result<IndividualTypeDescription, DescriptionError> {
    let type_name = text(r, "type name", MAX_NAME)?;
    let n = count(r, &format!("{type_name}'s fields"), MAX_FIELDS)?;
    let mut fields = Vec::with_capacity(n);
    for _ in 0..n {
        let name = text(r, "field name", MAX_NAME)?;
        let type_id = r.u8().map_err(malformed)?;
        let capacity = r.u64().map_err(malformed)?;
        let string_capacity = r.u64().map_err(malformed)?;
        let nested_type_name = text(r, "nested type name", MAX_NAME)?;
        let default_value = text(r, "default value", MAX_REPLY_BYTES)?;
        fields.push(FieldDescription {
            name,
            type_id,
            capacity,
            string_capacity,
            nested_type_name,
            default_value,
        });
    }
    Ok(IndividualTypeDescription { type_name, fields })
}

/// Decodes a `GetTypeDescription` response, refusing one past the limits.
pub fn decode_reply(cdr: &[u8]) -> Result<Reply, DescriptionError> {
    if cdr.len() > MAX_REPLY_BYTES {
        return Err(too_large("bytes", cdr.len(), MAX_REPLY_BYTES));
    }
    let mut r = CdrReader::new(cdr).map_err(malformed)?;
    let successful = match r.u8().map_err(malformed)? {
        0 => false,
        1 => true,
        v => return Err(malformed(format!("`successful` is {v}, not a bool"))),
    };
    let failure_reason = text(&mut r, "failure reason", MAX_REPLY_BYTES)?;
    let main = individual(&mut r)?;
    let n = count(&mut r, "referenced types", MAX_TYPES - 1)?;
    let mut refs = Vec::with_capacity(n);
    for _ in 0..n {
        refs.push(individual(&mut r)?);
    }
    let n = count(&mut r, "type sources", MAX_TYPES)?;
    let mut sources = Vec::with_capacity(n);
    for _ in 0..n {
        sources.push(TypeSource {
            type_name: text(&mut r, "type name", MAX_NAME)?,
            encoding: text(&mut r, "source encoding", MAX_NAME)?,
            raw_file_contents: text(&mut r, "source", MAX_REPLY_BYTES)?,
        });
    }
    // extra_information (key/value pairs) is not used, but must be whole
    let n = count(&mut r, "extra information entries", MAX_TYPES)?;
    for _ in 0..2 * n {
        text(&mut r, "extra information", MAX_REPLY_BYTES)?;
    }
    Ok(Reply {
        successful,
        failure_reason,
        description: TypeDescription {
            type_description: main,
            referenced_type_descriptions: refs,
        },
        sources,
    })
}

/// Whether `name` is a ROS 2 field name (a letter, then letters, digits, underscores).
fn is_field_name(name: &str) -> bool {
    let mut c = name.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic())
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// The field type of a `FieldType` (REP-2011 ids).
fn field_type(f: &FieldDescription) -> Result<FieldType, String> {
    let bound = |what: &str, n: u64| {
        u32::try_from(n)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{what} {n} is not a size from 1 to {}", u32::MAX))
    };
    let (base_id, container) = match f.type_id {
        id @ 1..=47 => (id, Container::Single),
        id @ 49..=95 => (id - 48, Container::Array(bound("array size", f.capacity)?)),
        id @ 97..=143 => (
            id - 96,
            Container::BoundedSequence(bound("sequence bound", f.capacity)?),
        ),
        id @ 145..=191 => (id - 144, Container::Sequence),
        id => return Err(format!("type id {id} is not a field type")),
    };
    if matches!(container, Container::Single | Container::Sequence) && f.capacity != 0 {
        return Err(format!("capacity {} on a type without one", f.capacity));
    }
    let prim = |p| BaseType::Primitive(p);
    let base = match base_id {
        1 => BaseType::Nested(TypeName::parse(&f.nested_type_name).map_err(|e| e.to_string())?),
        2 => prim(PrimitiveType::Int8),
        3 => prim(PrimitiveType::UInt8),
        4 => prim(PrimitiveType::Int16),
        5 => prim(PrimitiveType::UInt16),
        6 => prim(PrimitiveType::Int32),
        7 => prim(PrimitiveType::UInt32),
        8 => prim(PrimitiveType::Int64),
        9 => prim(PrimitiveType::UInt64),
        10 => prim(PrimitiveType::Float32),
        11 => prim(PrimitiveType::Float64),
        15 => prim(PrimitiveType::Bool),
        16 => prim(PrimitiveType::Byte),
        17 => BaseType::String { bound: None },
        18 => BaseType::WString { bound: None },
        21 => BaseType::String {
            bound: Some(bound("string bound", f.string_capacity)?),
        },
        22 => BaseType::WString {
            bound: Some(bound("string bound", f.string_capacity)?),
        },
        id => {
            return Err(format!(
                "type id {id} (long double, IDL char or wchar, or a fixed-size string) has \
                 no ROS 2 message form"
            ))
        }
    };
    if !matches!(base_id, 21 | 22) && f.string_capacity != 0 {
        return Err(format!(
            "string capacity {} on a type without one",
            f.string_capacity
        ));
    }
    if base_id != 1 && !f.nested_type_name.is_empty() {
        return Err(format!(
            "nested type name `{}` on a type that nests none",
            f.nested_type_name
        ));
    }
    Ok(FieldType { base, container })
}

/// The message definition of one described type (its fields: a description holds no
/// constants, and defaults are left to the interface files).
fn message(d: &IndividualTypeDescription) -> Result<MessageDefinition, DescriptionError> {
    let name = TypeName::parse(&d.type_name)
        .map_err(|e| DescriptionError::Definition(format!("type name: {e}")))?;
    if d.fields.len() > MAX_FIELDS {
        return Err(too_large(
            format!("{}'s fields", d.type_name),
            d.fields.len(),
            MAX_FIELDS,
        ));
    }
    let mut seen = HashSet::new();
    let mut fields = Vec::with_capacity(d.fields.len());
    for f in &d.fields {
        let bad = |reason: String| DescriptionError::BadField {
            type_name: d.type_name.clone(),
            field: f.name.clone(),
            reason,
        };
        if !is_field_name(&f.name) {
            return Err(bad("not a ROS 2 field name".into()));
        }
        if !seen.insert(f.name.as_str()) {
            return Err(bad("named twice".into()));
        }
        fields.push(Field {
            name: f.name.as_str().into(),
            ty: field_type(f).map_err(bad)?,
            default: None,
        });
    }
    if fields.is_empty() {
        return Err(DescriptionError::Definition(format!(
            "{} has no fields (ROS 2 gives an empty message a placeholder field)",
            d.type_name
        )));
    }
    Ok(MessageDefinition {
        name,
        fields,
        constants: Vec::new(),
        role: DefinitionRole::Message,
        source: None,
    })
}

/// The definitions of the interface files a node sent, when they are `.msg` (`.srv`,
/// `.action`) files of every type and hash to `announced`.
fn from_sources(asked: &str, announced: &Rihs01, sources: &[TypeSource]) -> Option<Registry> {
    let mut reg = Registry::new();
    for s in sources {
        if !matches!(s.encoding.as_str(), "msg" | "srv" | "action") {
            return None;
        }
        reg.add_interface_text(&s.type_name, &s.raw_file_contents)
            .ok()?;
    }
    (reg.type_hash(asked).ok()? == *announced).then_some(reg)
}

/// The `ros2msg` definition of ROS 2 message type `asked` from a node's reply, checked
/// against the hash its publisher announced (see [`definitions`]).
pub fn definition(
    asked: &str,
    announced: &Rihs01,
    reply: &Reply,
) -> Result<String, DescriptionError> {
    ros2msg_of(&definitions(asked, announced, reply)?, asked)
}

/// The definitions of ROS 2 type `asked` (a message, or a service `pkg/srv/Name` with its
/// `_Request`, `_Response` and `_Event`) and of the types it references, from a node's
/// reply, checked against the hash its endpoints announced: the description must hash to
/// it, and so must the definitions made of it.
pub fn definitions(
    asked: &str,
    announced: &Rihs01,
    reply: &Reply,
) -> Result<Registry, DescriptionError> {
    if !reply.successful {
        return Err(DescriptionError::Refused(reply.failure_reason.clone()));
    }
    let desc = &reply.description;
    let canonical = |n: &str| TypeName::parse(n).map(|t| t.to_string()).ok();
    if canonical(&desc.type_description.type_name) != canonical(asked) {
        return Err(DescriptionError::WrongType {
            asked: asked.to_string(),
            served: desc.type_description.type_name.clone(),
        });
    }
    let types = 1 + desc.referenced_type_descriptions.len();
    if types > MAX_TYPES {
        return Err(too_large("types", types, MAX_TYPES));
    }
    let served = desc.hash();
    if served != *announced {
        return Err(DescriptionError::HashMismatch {
            announced: *announced,
            served,
        });
    }
    let mut reg = Registry::new();
    for d in std::iter::once(&desc.type_description).chain(&desc.referenced_type_descriptions) {
        reg.insert(message(d)?)
            .map_err(|e| DescriptionError::Definition(e.to_string()))?;
    }
    // every referenced type is there, nothing recurses or nests past the limit
    reg.check(asked)
        .map_err(|e| DescriptionError::Definition(e.to_string()))?;
    let ours = reg
        .type_hash(asked)
        .map_err(|e| DescriptionError::Definition(e.to_string()))?;
    if ours != *announced {
        return Err(DescriptionError::Definition(format!(
            "its fields make a definition that hashes to {ours}, not {announced}"
        )));
    }
    Ok(from_sources(asked, announced, &reply.sources).unwrap_or(reg))
}

/// The `ros2msg` text of message type `wanted` in checked definitions (the type asked
/// for, or one it references, such as a service's `_Request`): the text the carrier reads
/// back, which must hash as the definitions do.
pub fn ros2msg_of(reg: &Registry, wanted: &str) -> Result<String, DescriptionError> {
    let def = |e: nerve_ros2_types::RegistryError| DescriptionError::Definition(e.to_string());
    let ours = reg.type_hash(wanted).map_err(def)?;
    let text = reg.ros2msg_text(wanted).map_err(def)?;
    let back = Registry::from_ros2msg(wanted, &text)
        .and_then(|r| r.type_hash(wanted))
        .map_err(|e| DescriptionError::Definition(format!("its ros2msg text: {e}")))?;
    if back != ours {
        return Err(DescriptionError::Definition(format!(
            "its ros2msg text hashes to {back}, not {ours}"
        )));
    }
    Ok(text)
}

/// The RIHS01 hash in an endpoint's USER_DATA (`typehash=RIHS01_…;`), if it has one.
pub fn announced_hash(user_data: &[u8]) -> Option<Rihs01> {
    const KEY: &[u8] = b"typehash=";
    let at = user_data.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let rest = &user_data[at..];
    let end = rest.iter().position(|b| *b == b';').unwrap_or(rest.len());
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

/// What is known of a type asked of its publishers.
pub(crate) enum Learning {
    /// The nodes have not answered yet (ask again later).
    Pending,
    /// The type's checked `ros2msg` definition.
    Learned(Arc<str>),
    /// Why the type could not be learned.
    Failed(String),
}

/// The DDS writer of a node's type description requests.
type Requests = DataWriter<RawCdr, RawAdapter>;
/// The DDS reader of its replies.
type Replies = DataReader<RawCdr, RawAdapter>;

/// One node asked for one type.
struct NodeAsk {
    /// The node, `/ns/name`.
    node: String,
    requests: Requests,
    replies: Replies,
    sent: Vec<SampleIdentity>,
    last_sent: Option<Instant>,
    /// The node's answer, when it refused or its reply was refused.
    refused: Option<String>,
}

/// One type asked of the nodes of its publishers.
struct Ask {
    /// The type asked for.
    asked: String,
    /// The names it was wanted by (`pkg/msg/Name`, `pkg/Name`).
    wanted: HashSet<String>,
    /// The GUID prefixes of the publishing participants.
    participants: Vec<Vec<u8>>,
    since: Instant,
    nodes: Vec<NodeAsk>,
}

/// Asks ROS 2 nodes for the types they publish and keeps the answers (by hash).
pub(crate) struct Learner {
    participant: rustdds::DomainParticipant,
    publisher: rustdds::Publisher,
    subscriber: rustdds::Subscriber,
    asks: HashMap<Rihs01, Ask>,
    answers: HashMap<Rihs01, Result<Arc<Registry>, String>>,
}

impl Learner {
    /// A learner that asks through `participant`.
    pub(crate) fn new(participant: &rustdds::DomainParticipant) -> Result<Learner, BridgeError> {
        let qos = rustdds::QosPolicies::qos_none();
        let dds = |e: rustdds::dds::CreateError| BridgeError::Dds(e.to_string());
        Ok(Learner {
            participant: participant.clone(),
            publisher: participant.create_publisher(&qos).map_err(dds)?,
            subscriber: participant.create_subscriber(&qos).map_err(dds)?,
            asks: HashMap::new(),
            answers: HashMap::new(),
        })
    }

    /// Whether message type `ros_name` is being asked of its publishers now.
    pub(crate) fn asking(&self, ros_name: &str) -> bool {
        self.asks.values().any(|a| a.wanted.contains(ros_name))
    }

    /// What is known of ROS 2 message type `ros_name` from the nodes that publish it:
    /// asks them (once per hash), and looks at their answers (never blocks).
    ///
    /// Only topics' types are learned: a service's endpoints announce the hashes of its
    /// request and response messages, while a node keeps (and describes) the service by
    /// the service's own hash, which nothing announces.
    pub(crate) fn learn(&mut self, ros_name: &str) -> Learning {
        let Ok(tn) = TypeName::parse(ros_name) else {
            return Learning::Failed(format!("{ros_name} is not a ROS 2 type name"));
        };
        let (asked, dds_type) = (tn.to_string(), tn.to_dds_name());
        let me = self.participant.guid().prefix;
        let mut hashes: HashMap<Rihs01, Vec<Vec<u8>>> = HashMap::new();
        for w in self.participant.discovered_writers() {
            let d = &w.publication_topic_data;
            if d.type_name != dds_type || d.key.prefix == me {
                continue;
            }
            if let Some(h) = announced_hash(&w.user_data) {
                hashes
                    .entry(h)
                    .or_default()
                    .push(d.key.prefix.as_ref().to_vec());
            }
        }
        if hashes.len() > 1 {
            let mut all: Vec<String> = hashes.keys().map(|h| h.to_string()).collect();
            all.sort();
            return Learning::Failed(format!(
                "its publishers announce {} definitions ({}): none is taken",
                all.len(),
                all.join(", ")
            ));
        }
        let Some(&hash) = hashes.keys().next() else {
            return Learning::Failed(
                "its publishers announce no type hash, so none can be asked for its \
                 description (ROS 2 before Iron)"
                    .into(),
            );
        };
        let answer = match self.answers.get(&hash) {
            Some(a) => a.clone(),
            None => {
                let participants = hashes.remove(&hash).unwrap_or_default();
                let ask = self.asks.entry(hash).or_insert_with(|| Ask {
                    asked,
                    wanted: HashSet::new(),
                    participants: Vec::new(),
                    since: Instant::now(),
                    nodes: Vec::new(),
                });
                ask.participants = participants;
                ask.wanted.insert(ros_name.to_string());
                let Some(answer) = self.step(&hash) else {
                    return Learning::Pending;
                };
                self.asks.remove(&hash);
                if self.answers.len() >= MAX_LEARNED {
                    self.answers.clear();
                }
                self.answers.insert(hash, answer.clone());
                answer
            }
        };
        match answer.and_then(|reg| ros2msg_of(&reg, ros_name).map_err(|e| e.to_string())) {
            Ok(text) => Learning::Learned(text.into()),
            Err(why) => Learning::Failed(why),
        }
    }

    /// Moves the ask of `hash` on: finds the nodes to ask, sends the requests, reads the
    /// replies; the answer once there is one.
    fn step(&mut self, hash: &Rihs01) -> Option<Result<Arc<Registry>, String>> {
        let ask = self.asks.get_mut(hash)?;
        // the nodes of the publishing participants that offer the service
        let known: HashSet<String> = ask.nodes.iter().map(|n| n.node.clone()).collect();
        for r in self.participant.discovered_readers() {
            let d = &r.subscription_topic_data;
            if ask.nodes.len() >= MAX_NODES
                || !ask
                    .participants
                    .iter()
                    .any(|p| p == d.key().prefix.as_ref())
            {
                continue;
            }
            let Some(node) = d
                .topic_name()
                .strip_prefix("rq")
                .and_then(|t| t.strip_suffix("Request"))
                .and_then(|t| t.strip_suffix(SERVICE))
            else {
                continue;
            };
            if known.contains(node) || d.type_name() != REQUEST_TYPE {
                continue;
            }
            match endpoints(&self.participant, &self.publisher, &self.subscriber, node) {
                Ok((requests, replies)) => ask.nodes.push(NodeAsk {
                    node: node.to_string(),
                    requests,
                    replies,
                    sent: Vec::new(),
                    last_sent: None,
                    refused: None,
                }),
                Err(e) => {
                    return Some(Err(format!("asking {node} for it: {e}")));
                }
            }
        }
        let req = request(&ask.asked, hash);
        for n in ask.nodes.iter_mut().filter(|n| n.refused.is_none()) {
            // sent again while unanswered: a request written before the node matched
            // this writer is not delivered (volatile)
            if n.last_sent.is_none_or(|t| t.elapsed() >= RESEND) {
                let opts = WriteOptionsBuilder::new()
                    .source_timestamp(Timestamp::now())
                    .build();
                if let Ok(id) = n.requests.write_with_options(RawCdr(req.clone()), opts) {
                    n.sent.push(id);
                    n.last_sent = Some(Instant::now());
                }
            }
            while let Ok(Some(sample)) = n.replies.take_next_sample() {
                let Some(id) = sample.sample_info().related_sample_identity() else {
                    continue;
                };
                if !n.sent.contains(&id) {
                    continue; // another client's
                }
                let RawCdr(cdr) = sample.value();
                match decode_reply(cdr).and_then(|r| definitions(&ask.asked, hash, &r)) {
                    Ok(reg) => return Some(Ok(Arc::new(reg))),
                    Err(e) => {
                        n.refused = Some(format!("{}: {e}", n.node));
                        break;
                    }
                }
            }
        }
        let all_refused = !ask.nodes.is_empty() && ask.nodes.iter().all(|n| n.refused.is_some());
        let waited = ask.since.elapsed();
        if !(all_refused && waited >= SETTLE) && waited < ASK_TIMEOUT {
            return None;
        }
        let why = if ask.nodes.is_empty() {
            format!("no node of its publishers offers {SERVICE} (REP-2016) within {ASK_TIMEOUT:?}")
        } else {
            let said: Vec<String> = ask
                .nodes
                .iter()
                .map(|n| {
                    n.refused
                        .clone()
                        .unwrap_or_else(|| format!("{} did not answer", n.node))
                })
                .collect();
            format!(
                "asked its publishers for its type description (REP-2016): {}",
                said.join("; ")
            )
        };
        Some(Err(why))
    }
}

/// The request writer and reply reader of `node`'s type description service.
fn endpoints(
    participant: &rustdds::DomainParticipant,
    publisher: &rustdds::Publisher,
    subscriber: &rustdds::Subscriber,
    node: &str,
) -> Result<(Requests, Replies), String> {
    let qos = RosQos::default().policies();
    let topic = |name: String, ty: &str| {
        participant
            .create_topic(name, ty.to_string(), &qos, TopicKind::NoKey)
            .map_err(|e| e.to_string())
    };
    let rq = topic(format!("rq{node}{SERVICE}Request"), REQUEST_TYPE)?;
    let rr = topic(format!("rr{node}{SERVICE}Reply"), REPLY_TYPE)?;
    let writer = publisher
        .create_datawriter_no_key::<RawCdr, RawAdapter>(&rq, Some(qos.clone()))
        .map_err(|e| e.to_string())?;
    let reader = subscriber
        .create_datareader_no_key::<RawCdr, RawAdapter>(&rr, Some(qos))
        .map_err(|e| e.to_string())?;
    Ok((writer, reader))
}

/// A `GetTypeDescription` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The type, `pkg/msg/Name`.
    pub type_name: String,
    /// Its RIHS01 hash, as text.
    pub type_hash: String,
    /// Whether the interface files are wanted too.
    pub include_type_sources: bool,
}

/// Decodes a `GetTypeDescription` request.
pub fn decode_request(cdr: &[u8]) -> Result<Request, DescriptionError> {
    let mut r = CdrReader::new(cdr).map_err(malformed)?;
    Ok(Request {
        type_name: text(&mut r, "type name", MAX_NAME)?,
        type_hash: text(&mut r, "type hash", MAX_NAME)?,
        include_type_sources: r.u8().map_err(malformed)? != 0,
    })
}

/// A refusal (`successful: false`) saying why.
fn refusal(reason: String) -> Reply {
    Reply {
        successful: false,
        failure_reason: reason,
        description: TypeDescription {
            type_description: IndividualTypeDescription {
                type_name: String::new(),
                fields: Vec::new(),
            },
            referenced_type_descriptions: Vec::new(),
        },
        sources: Vec::new(),
    }
}

/// The answer to `req` from the definitions in `registry` (which hold the type asked
/// for, or not): its description and, when asked, its interface files; a refusal for a
/// type it does not hold or whose hash differs.
pub fn answer(req: &Request, registry: Option<&Registry>) -> Reply {
    let Ok(asked) = req.type_hash.parse::<Rihs01>() else {
        return refusal(format!("`{}` is not a RIHS01 type hash", req.type_hash));
    };
    let Some(reg) = registry else {
        return refusal(format!("{} is not a type this bridge knows", req.type_name));
    };
    let description = match reg.type_description(&req.type_name) {
        Ok(d) => d,
        Err(e) => return refusal(e.to_string()),
    };
    let ours = description.hash();
    if ours != asked {
        return refusal(format!(
            "this bridge's {} hashes to {ours}, not {asked}",
            req.type_name
        ));
    }
    let sources = if req.include_type_sources {
        std::iter::once(&description.type_description)
            .chain(&description.referenced_type_descriptions)
            .filter_map(|d| {
                let src = reg.get(&d.type_name)?.source.as_ref()?;
                Some(TypeSource {
                    type_name: d.type_name.clone(),
                    encoding: "msg".into(),
                    raw_file_contents: src.to_string(),
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    Reply {
        successful: true,
        failure_reason: String::new(),
        description,
        sources,
    }
}

/// Answers `get_type_description` on the bridge's ROS 2 node (REP-2016) for the ROS 2
/// types it knows: those on its type search path, and those Nerve topics carry (with
/// their definition and hash: what Nerve publishes to ROS 2, and what the bridge
/// learned).
pub(crate) struct Describer {
    shared: Arc<crate::dds::Shared>,
    config: crate::BridgeConfig,
    node: nerve::Node,
    search: nerve_ros2_types::SearchPath,
    requests: DataReader<RawCdr, RawAdapter>,
    replies: DataWriter<RawCdr, RawAdapter>,
}

impl Describer {
    /// The service of the bridge's ROS 2 node `ros_node` (`/name`).
    pub(crate) fn new(
        shared: Arc<crate::dds::Shared>,
        config: crate::BridgeConfig,
        node: nerve::Node,
        ros_node: &str,
    ) -> Result<Describer, BridgeError> {
        let (publisher, subscriber) = (
            shared.side.dds_publisher().clone(),
            shared.side.dds_subscriber().clone(),
        );
        let qos = RosQos::default().policies();
        let dds = |e: &dyn std::fmt::Display| BridgeError::Dds(format!("{ros_node}{SERVICE}: {e}"));
        let topic = |name: String, ty: &str| {
            shared
                .side
                .participant
                .create_topic(name, ty.to_string(), &qos, TopicKind::NoKey)
                .map_err(|e| dds(&e))
        };
        let rq = topic(format!("rq{ros_node}{SERVICE}Request"), REQUEST_TYPE)?;
        let rr = topic(format!("rr{ros_node}{SERVICE}Reply"), REPLY_TYPE)?;
        let requests = subscriber
            .create_datareader_no_key::<RawCdr, RawAdapter>(&rq, Some(qos.clone()))
            .map_err(|e| dds(&e))?;
        let replies = publisher
            .create_datawriter_no_key::<RawCdr, RawAdapter>(&rr, Some(qos.clone()))
            .map_err(|e| dds(&e))?;
        let mut search = nerve_ros2_types::SearchPath::new();
        for d in &config.types {
            search.push_dir(d.clone());
        }
        Ok(Describer {
            shared,
            config,
            node,
            search,
            requests,
            replies,
        })
    }

    /// Runs until the bridge stops (requests are answered at each refresh).
    pub(crate) fn run(mut self) {
        let refresh = self.config.refresh;
        crate::engine::worker::run(&mut self, refresh);
    }

    /// The definitions of ROS 2 type `name` with hash `hash` the bridge knows.
    fn registry(&self, name: &str, hash: &str) -> Option<Registry> {
        // a Nerve topic that carries it
        for t in nerve::introspect::list_topics(&self.node).unwrap_or_default() {
            let Some(Ok(schema)) = t.schema else {
                continue;
            };
            if let Some((n, h, text)) = nerve_msgs::ros2::ros2_type(&schema) {
                if h == hash && TypeName::parse(n).ok() == TypeName::parse(name).ok() {
                    if let Ok(reg) = Registry::from_ros2msg(n, text) {
                        return Some(reg);
                    }
                }
            }
        }
        let mut reg = Registry::new();
        reg.load(name, &self.search).ok()?;
        Some(reg)
    }
}

impl crate::engine::worker::Worker for Describer {
    type Side = crate::dds::DdsSide;
    fn shared(&self) -> &crate::dds::Shared {
        &self.shared
    }
    fn config(&self) -> &crate::BridgeConfig {
        &self.config
    }
    fn refresh(&mut self) {
        while let Ok(Some(sample)) = self.requests.take_next_sample() {
            let id = sample.sample_info().sample_identity();
            let RawCdr(cdr) = sample.value();
            let reply = match decode_request(cdr) {
                Ok(req) => answer(&req, self.registry(&req.type_name, &req.type_hash).as_ref()),
                Err(e) => refusal(format!("the request: {e}")),
            };
            let Ok(cdr) = encode_reply(&reply) else {
                continue;
            };
            let opts = WriteOptionsBuilder::new()
                .source_timestamp(Timestamp::now())
                .related_sample_identity(id)
                .build();
            let _ = self.replies.write_with_options(RawCdr(cdr), opts);
        }
    }
    fn busy(&self) -> bool {
        false
    }
    fn pump(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRING_HASH: &str =
        "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";

    /// What a node answers for `name`, described from interface texts (`(name, text)`).
    fn reply_of(name: &str, texts: &[(&str, &str)], with_sources: bool) -> (Reply, Rihs01) {
        let mut reg = Registry::new();
        for (n, t) in texts {
            reg.add_interface_text(n, t).unwrap();
        }
        let description = reg.type_description(name).unwrap();
        let hash = description.hash();
        let sources = if with_sources {
            texts
                .iter()
                .map(|(n, t)| TypeSource {
                    type_name: n.to_string(),
                    encoding: TypeName::parse(n).unwrap().kind().as_str().into(),
                    raw_file_contents: t.to_string(),
                })
                .collect()
        } else {
            Vec::new()
        };
        let reply = Reply {
            successful: true,
            failure_reason: String::new(),
            description,
            sources,
        };
        (reply, hash)
    }

    fn through_cdr(reply: &Reply) -> Reply {
        decode_reply(&encode_reply(reply).unwrap()).unwrap()
    }

    const POSE: (&str, &str) = (
        "my_pkg/msg/Pose2",
        "# a planar pose\nint32 MAX_X=10\nmy_pkg/Point2 position\nfloat64 theta 0.5\nstring<=8 frame\nuint8[4] flags\nmy_pkg/Point2[<=3] corners\n",
    );
    const POINT: (&str, &str) = ("my_pkg/msg/Point2", "float64 x\nfloat64 y\n");

    #[test]
    fn a_served_description_becomes_the_definition_its_publisher_announced() {
        let (reply, hash) = reply_of(
            "std_msgs/msg/String",
            &[("std_msgs/msg/String", "# a comment\nstring data\n")],
            true,
        );
        assert_eq!(hash.to_string(), STRING_HASH);
        let reply = through_cdr(&reply);
        let text = definition("std_msgs/msg/String", &hash, &reply).unwrap();
        // the node's own file, comment and all
        assert_eq!(text, "# a comment\nstring data\n");

        // nested types, bounds, arrays; constants and defaults come from the sources
        let (reply, hash) = reply_of("my_pkg/msg/Pose2", &[POSE, POINT], true);
        let text = definition("my_pkg/msg/Pose2", &hash, &through_cdr(&reply)).unwrap();
        assert!(
            text.contains("int32 MAX_X=10") && text.contains("theta 0.5"),
            "{text}"
        );
        let schema = nerve_ros2_map::carrier::schema_of("my_pkg/msg/Pose2", &text).unwrap();
        assert_eq!(
            nerve_msgs::ros2::ros2_type(&schema).unwrap().1,
            hash.to_string()
        );

        // without sources: the fields alone, which hash the same
        let (reply, hash) = reply_of("my_pkg/msg/Pose2", &[POSE, POINT], false);
        let text = definition("my_pkg/msg/Pose2", &hash, &through_cdr(&reply)).unwrap();
        assert!(
            !text.contains("MAX_X") && text.contains("string<=8 frame"),
            "{text}"
        );
        let reg = Registry::from_ros2msg("my_pkg/msg/Pose2", &text).unwrap();
        assert_eq!(reg.type_hash("my_pkg/msg/Pose2").unwrap(), hash);
    }

    #[test]
    fn sources_that_do_not_hash_as_announced_are_not_taken() {
        let (mut reply, hash) = reply_of("my_pkg/msg/Point2", &[POINT], true);
        reply.sources[0].raw_file_contents = "float64 x\nfloat64 y\nfloat64 z\n".into();
        let text = definition("my_pkg/msg/Point2", &hash, &reply).unwrap();
        assert!(!text.contains('z'), "{text}");
    }

    #[test]
    fn a_description_that_does_not_hash_as_announced_is_refused_naming_both_hashes() {
        let (mut reply, hash) = reply_of("my_pkg/msg/Point2", &[POINT], false);
        // a forged field type under the announced hash
        reply.description.type_description.fields[1].type_id = 10;
        let e = definition("my_pkg/msg/Point2", &hash, &reply).unwrap_err();
        let DescriptionError::HashMismatch { announced, served } = &e else {
            panic!("{e}");
        };
        assert_eq!(*announced, hash);
        assert_ne!(*served, hash);
        let msg = e.to_string();
        assert!(
            msg.contains(&hash.to_string()) && msg.contains(&served.to_string()),
            "{msg}"
        );
        // another announced hash
        let (reply, _) = reply_of(
            "std_msgs/msg/String",
            &[("std_msgs/msg/String", "string data\n")],
            false,
        );
        let other: Rihs01 = format!("RIHS01_{}", "0".repeat(64)).parse().unwrap();
        assert!(matches!(
            definition("std_msgs/msg/String", &other, &reply),
            Err(DescriptionError::HashMismatch { .. })
        ));
        // another type, a refusal
        assert!(matches!(
            definition("std_msgs/msg/Header", &other, &reply),
            Err(DescriptionError::WrongType { .. })
        ));
        let refused = Reply {
            successful: false,
            failure_reason: "Type not currently in use by this node".into(),
            ..reply
        };
        let e = definition("std_msgs/msg/String", &other, &refused).unwrap_err();
        assert!(e.to_string().contains("not currently in use"), "{e}");
    }

    /// A description (hashing to what it claims) of `n` types each nesting the next.
    fn chain(n: usize, last_nests_first: bool) -> (Reply, Rihs01) {
        let t = |i: usize| IndividualTypeDescription {
            type_name: format!("deep/msg/T{i:03}"),
            fields: vec![FieldDescription {
                name: "next".into(),
                type_id: 1,
                capacity: 0,
                string_capacity: 0,
                nested_type_name: format!(
                    "deep/msg/T{:03}",
                    if i + 1 == n && last_nests_first {
                        0
                    } else {
                        i + 1
                    }
                ),
                default_value: String::new(),
            }],
        };
        let mut refs: Vec<_> = (1..n).map(t).collect();
        let last = IndividualTypeDescription {
            type_name: format!("deep/msg/T{n:03}"),
            fields: vec![FieldDescription {
                name: "x".into(),
                type_id: 6,
                capacity: 0,
                string_capacity: 0,
                nested_type_name: String::new(),
                default_value: String::new(),
            }],
        };
        if !last_nests_first {
            refs.push(last);
        }
        let description = TypeDescription {
            type_description: t(0),
            referenced_type_descriptions: refs,
        };
        let hash = description.hash();
        let reply = Reply {
            successful: true,
            failure_reason: String::new(),
            description,
            sources: Vec::new(),
        };
        (reply, hash)
    }

    #[test]
    fn hostile_descriptions_are_refused_with_what_was_wrong() {
        // recursive, and nested past the limit, under their own (matching) hashes
        let (reply, hash) = chain(3, true);
        let e = definition("deep/msg/T000", &hash, &reply).unwrap_err();
        assert!(e.to_string().contains("recursive"), "{e}");
        let (reply, hash) = chain(nerve_ros2_types::MAX_NESTING_DEPTH + 5, false);
        let e = definition("deep/msg/T000", &hash, &through_cdr(&reply)).unwrap_err();
        assert!(e.to_string().contains("levels deep"), "{e}");
        let (reply, hash) = chain(3, false);
        assert!(definition("deep/msg/T000", &hash, &reply).is_ok());
        // a referenced type missing
        let (mut reply, _) = chain(3, false);
        reply.description.referenced_type_descriptions.pop();
        let hash = reply.description.hash();
        let e = definition("deep/msg/T000", &hash, &reply).unwrap_err();
        assert!(e.to_string().contains("deep/msg/T003"), "{e}");

        // field types ROS 2 messages cannot hold, names that are not names
        let bad = |f: &dyn Fn(&mut FieldDescription)| {
            let (mut reply, _) = reply_of("my_pkg/msg/Point2", &[POINT], false);
            f(&mut reply.description.type_description.fields[0]);
            let hash = reply.description.hash();
            definition("my_pkg/msg/Point2", &hash, &reply)
                .unwrap_err()
                .to_string()
        };
        let e = bad(&|f| f.type_id = 12);
        assert!(
            e.contains("my_pkg/msg/Point2 field `x`") && e.contains("long double"),
            "{e}"
        );
        let e = bad(&|f| f.type_id = 200);
        assert!(e.contains("type id 200"), "{e}");
        let e = bad(&|f| f.name = "x\nint32 y".into());
        assert!(e.contains("not a ROS 2 field name"), "{e}");
        let e = bad(&|f| {
            f.type_id = 11 + 48;
            f.capacity = u64::from(u32::MAX) + 1;
        });
        assert!(e.contains("array size"), "{e}");
        let e = bad(&|f| f.nested_type_name = "a/msg/B".into());
        assert!(e.contains("nests none"), "{e}");

        // too many fields, too many types: refused as they are read
        let (mut reply, _) = reply_of("my_pkg/msg/Point2", &[POINT], false);
        let f = reply.description.type_description.fields[0].clone();
        reply.description.type_description.fields = (0..=MAX_FIELDS)
            .map(|i| FieldDescription {
                name: format!("f{i}"),
                ..f.clone()
            })
            .collect();
        let e = decode_reply(&encode_reply(&reply).unwrap()).unwrap_err();
        assert!(
            matches!(e, DescriptionError::TooLarge { found, limit: MAX_FIELDS, .. } if found == MAX_FIELDS + 1),
            "{e}"
        );
        let (mut reply, _) = chain(2, false);
        let one = reply.description.referenced_type_descriptions[0].clone();
        reply.description.referenced_type_descriptions = vec![one; MAX_TYPES];
        let e = decode_reply(&encode_reply(&reply).unwrap()).unwrap_err();
        assert!(e.to_string().contains("referenced types"), "{e}");

        // lengths past the end, cut replies, oversized replies: errors, no allocation
        let (reply, _) = reply_of("my_pkg/msg/Point2", &[POINT], false);
        let cdr = encode_reply(&reply).unwrap();
        for cut in 0..cdr.len() {
            assert!(decode_reply(&cdr[..cut]).is_err(), "cut at {cut}");
        }
        let mut huge = Vec::new();
        let mut w = CdrWriter::new(&mut huge);
        w.u8(1);
        w.string(b"").unwrap();
        w.string(b"my_pkg/msg/Point2").unwrap();
        w.u32(u32::MAX); // fields
        assert!(matches!(
            decode_reply(&huge),
            Err(DescriptionError::Malformed(_))
        ));
        let e = decode_reply(&vec![0; MAX_REPLY_BYTES + 1]).unwrap_err();
        assert!(matches!(e, DescriptionError::TooLarge { .. }), "{e}");
        let mut not_bool = cdr.clone();
        not_bool[4] = 7;
        assert!(decode_reply(&not_bool).is_err());
    }

    #[test]
    fn the_type_hash_is_read_from_an_endpoints_user_data() {
        let text = format!("typehash={STRING_HASH};");
        let mut user_data = (text.len() as u32).to_le_bytes().to_vec();
        user_data.extend_from_slice(text.as_bytes());
        assert_eq!(announced_hash(&user_data).unwrap().to_string(), STRING_HASH);
        assert_eq!(announced_hash(b""), None);
        assert_eq!(announced_hash(b"typehash=RIHS01_12;"), None);
        // the request names the type and the hash, and asks for the interface files
        let req = request("std_msgs/msg/String", &STRING_HASH.parse().unwrap());
        let mut r = CdrReader::new(&req).unwrap();
        assert_eq!(r.string().unwrap(), b"std_msgs/msg/String");
        assert_eq!(r.string().unwrap(), STRING_HASH.as_bytes());
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn the_bridge_answers_for_a_type_it_knows_with_its_hash_only() {
        let mut reg = Registry::new();
        reg.add_interface_text("my_pkg/msg/Pose2", POSE.1).unwrap();
        reg.add_interface_text("my_pkg/msg/Point2", POINT.1)
            .unwrap();
        let hash = reg.type_hash("my_pkg/msg/Pose2").unwrap();
        let req = Request {
            type_name: "my_pkg/msg/Pose2".into(),
            type_hash: hash.to_string(),
            include_type_sources: true,
        };
        let mut cdr = Vec::new();
        let mut w = CdrWriter::new(&mut cdr);
        w.string(req.type_name.as_bytes()).unwrap();
        w.string(req.type_hash.as_bytes()).unwrap();
        w.u8(1);
        assert_eq!(decode_request(&cdr).unwrap(), req);
        // what the bridge answers is what it learns from
        let reply = through_cdr(&answer(&req, Some(&reg)));
        assert!(reply.successful, "{}", reply.failure_reason);
        assert_eq!(reply.sources.len(), 2);
        let text = definition("my_pkg/msg/Pose2", &hash, &reply).unwrap();
        assert!(text.contains("int32 MAX_X=10"), "{text}");
        // another hash, an unknown type, a hash that is not one
        let other = Request {
            type_hash: format!("RIHS01_{}", "1".repeat(64)),
            ..req.clone()
        };
        let r = answer(&other, Some(&reg));
        assert!(
            !r.successful && r.failure_reason.contains(&hash.to_string()),
            "{}",
            r.failure_reason
        );
        assert!(!answer(&req, None).successful);
        let bad = Request {
            type_hash: "RIHS01_x".into(),
            ..req
        };
        assert!(answer(&bad, Some(&reg))
            .failure_reason
            .contains("not a RIHS01"));
    }

    #[test]
    fn a_type_no_publisher_announces_is_refused_naming_both_places_looked() {
        let participant = rustdds::DomainParticipantBuilder::new(231)
            .with_only_networks([std::net::Ipv4Addr::LOCALHOST])
            .build()
            .unwrap();
        let dir = std::env::temp_dir().join(format!("nerve_no_types_{}", std::process::id()));
        let mut c = crate::types::Catalog::new(vec![dir.clone()], true)
            .with_learner(Learner::new(&participant).unwrap());
        let e = c.for_ros("my_pkg/msg/Unknown").err().unwrap().to_string();
        assert!(!c.learning("my_pkg/msg/Unknown"));
        assert!(
            e.contains("my_pkg/msg/Unknown.msg") && e.contains(&dir.display().to_string()),
            "{e}"
        );
        assert!(e.contains("announce no type hash"), "{e}");
        // remembered: the same answer again, once
        assert_eq!(
            c.for_ros("my_pkg/msg/Unknown").err().unwrap().to_string(),
            e
        );
    }
}
