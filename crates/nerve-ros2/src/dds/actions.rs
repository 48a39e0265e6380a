//! Actions both ways: a Nerve action server is offered to ROS 2 action clients, a ROS 2
//! action server to Nerve action clients, with goals, feedback, results, cancels and
//! (towards ROS 2) the goal status.
//!
//! A ROS 2 action on DDS is three services and two topics under `<action>/_action/`
//! (with the request/reply mapping of [`crate::services`]):
//! - `send_goal` (`Name_SendGoal`: UUID + goal → accepted + stamp),
//! - `cancel_goal` (`action_msgs/srv/CancelGoal`),
//! - `get_result` (`Name_GetResult`: UUID → status + result), answered when the goal ends,
//! - `feedback` (`Name_FeedbackMessage`: UUID + feedback),
//! - `status` (`action_msgs/msg/GoalStatusArray`, transient local).
//!
//! A Nerve action is the goal, cancel and result services and the status topic of
//! [`nerve::action`], with feedback and results pushed on each client's own topics.
//!
//! - A Nerve server (not a bridge's) of an action type with a ROS 2 form is offered to
//!   ROS 2: the bridge serves the ROS 2 side and passes each goal to the Nerve server
//!   through a Nerve [`ActionClient`]; feedback, results, cancels and states come back.
//! - A ROS 2 server (a reader of `rq/<action>/_action/send_goalRequest` that is neither
//!   this bridge's nor another bridge's) is offered to Nerve: the bridge serves the action
//!   with a Nerve [`ActionServer`], sends each goal to ROS 2 (the ROS 2 server's answer is
//!   the Nerve acceptance or rejection), asks for its result at once, and forwards
//!   feedback, cancels and the result.
//!
//! How an action type's messages cross is its [`Form`] (the one table is
//! [`nerve_ros2_map::action`]):
//! - the Fibonacci actions (`test_msgs`, `example_interfaces` and
//!   `action_tutorials_interfaces`: `int32 order` → `int32[]`) are converted field by
//!   field to [`nerve_msgs::action::Fibonacci`] (`i64 order` → a sequence of `i64`); a
//!   number that does not fit ROS 2's `int32` is refused, not cut;
//! - a ROS 2 server of any other action type is served in Nerve as a [`Ros2Action`]:
//!   goal, feedback and result travel as their CDR behind the action's hash, checked
//!   against the action's definition (its `.action` file on the type search path); a
//!   Nerve server of such an action says its ROS 2 type on its type topic
//!   ([`nerve_ros2_map::action::announce`]) and is offered to ROS 2 as that type.
//!
//! Goals in flight are bounded ([`MAX_GOALS`] per action) and forgotten when they end
//! (a finished goal's result is kept a while for a `get_result` that comes late).

use crate::dds::Shared;
use crate::dds::{RawAdapter, RawCdr, RosQos};
use crate::peers::Peers;
use crate::types::{dds_type_of_ros, ros_type_of_dds};
use crate::{BridgeConfig, BridgeError, Event};
use nerve::action::{
    Action, ActionClient, ActionServer, ClientGoal, GoalHandle, GoalPolicy, GoalState,
};
use nerve::message::Message;
use nerve::service::ServiceType;
use nerve::Node;
use nerve_msgs::action::{Fibonacci, FibonacciGoal, FibonacciSequence};
use nerve_msgs::ros2::{Ros2Action, Ros2ActionCdr};
use nerve_ros2_map::action::{ActionPass, Part};
use nerve_ros2_map::ConvertError;
use rustdds::no_key::{DataReader, DataWriter};
use rustdds::{RTPSEntity, SampleIdentity, Timestamp, TopicKind, WriteOptionsBuilder, GUID};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Goals in flight per bridged action; more are refused.
pub const MAX_GOALS: usize = 256;
/// Results of finished goals kept for a `get_result` that comes after the goal ended.
const DONE_KEPT: usize = 256;
/// How long such a result is kept.
const DONE_TTL: Duration = Duration::from_secs(60);
/// How long a Nerve goal waits for the ROS 2 server's acceptance (Nerve clients wait 5 s).
const ACCEPT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a ROS 2 goal waits for the Nerve server's acceptance.
const NERVE_ACCEPT_TIMEOUT: Duration = Duration::from_secs(3);
/// How often the thread looks at both sides while actions cross (feedback and results
/// wait at most this long in the bridge).
const TICK: Duration = Duration::from_millis(5);
/// `get_result` requests one goal holds at most.
const WAITERS_PER_GOAL: usize = 16;

pub use nerve_ros2_map::action::FIBONACCI_TYPES;
/// The ROS 2 type a Nerve Fibonacci server is offered as.
pub const OFFERED_FIBONACCI: &str = "test_msgs/action/Fibonacci";

/// action_msgs/srv/CancelGoal return codes.
mod cancel_code {
    pub const NONE: i8 = 0;
    pub const REJECTED: i8 = 1;
    pub const UNKNOWN_GOAL_ID: i8 = 2;
    pub const GOAL_TERMINATED: i8 = 3;
}

pub use nerve_ros2_map::action::Uuid;

/// A builtin_interfaces/Time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp {
    /// Seconds since the Unix epoch.
    pub sec: i32,
    /// Nanoseconds in the second.
    pub nanosec: u32,
}

impl Stamp {
    fn now() -> Stamp {
        let d = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Stamp {
            sec: i32::try_from(d.as_secs()).unwrap_or(i32::MAX),
            nanosec: d.subsec_nanos(),
        }
    }
    fn is_zero(&self) -> bool {
        self.sec == 0 && self.nanosec == 0
    }
}

/// What is wrong with an action message on the wire.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The CDR does not decode.
    #[error(transparent)]
    Cdr(#[from] nerve_ros2_types::DecodeError),
    /// A value CDR cannot hold.
    #[error(transparent)]
    Encode(#[from] nerve_ros2_types::EncodeError),
    /// A Nerve number does not fit ROS 2's `int32`.
    #[error("{0} does not fit a ROS 2 int32")]
    OutOfRange(i64),
    /// A message of an action carried as CDR that does not convert.
    #[error(transparent)]
    Convert(#[from] ConvertError),
}

/// The action_msgs/GoalStatus number of a Nerve goal state.
pub fn ros_status(s: GoalState) -> i8 {
    match s {
        GoalState::Accepted => 1,
        GoalState::Executing => 2,
        GoalState::Canceling => 3,
        GoalState::Succeeded => 4,
        GoalState::Canceled => 5,
        GoalState::Aborted => 6,
    }
}

/// The Nerve goal state of an action_msgs/GoalStatus number (0, unknown, is `None`).
pub fn nerve_state(status: i8) -> Option<GoalState> {
    Some(match status {
        1 => GoalState::Accepted,
        2 => GoalState::Executing,
        3 => GoalState::Canceling,
        4 => GoalState::Succeeded,
        5 => GoalState::Canceled,
        6 => GoalState::Aborted,
        _ => return None,
    })
}

/// The UUID a Nerve goal id travels as in ROS 2 (its 16 bytes, little-endian).
pub fn uuid_of(id: nerve::action::GoalId) -> Uuid {
    let mut u = [0u8; 16];
    u[..8].copy_from_slice(&id.client.to_le_bytes());
    u[8..].copy_from_slice(&id.seq.to_le_bytes());
    u
}

/// Hand-written CDR of the Fibonacci action's ROS 2 messages.
pub mod wire {
    use super::{Stamp, Uuid, WireError};
    use nerve_ros2_types::{CdrReader, CdrWriter};

    fn uuid(r: &mut CdrReader<'_>) -> Result<Uuid, WireError> {
        let mut u = [0u8; 16];
        u.copy_from_slice(r.take(16)?);
        Ok(u)
    }
    fn stamp(r: &mut CdrReader<'_>) -> Result<Stamp, WireError> {
        Ok(Stamp {
            sec: r.i32()?,
            nanosec: r.u32()?,
        })
    }
    fn put_stamp(w: &mut CdrWriter<'_>, s: Stamp) {
        w.i32(s.sec);
        w.u32(s.nanosec);
    }
    fn int32s(r: &mut CdrReader<'_>) -> Result<Vec<i64>, WireError> {
        let n = r.len(4)?;
        (0..n).map(|_| Ok(i64::from(r.i32()?))).collect()
    }
    fn put_int32s(w: &mut CdrWriter<'_>, v: &[i64]) -> Result<(), WireError> {
        w.len(v.len())?;
        for x in v {
            w.i32(i32::try_from(*x).map_err(|_| WireError::OutOfRange(*x))?);
        }
        Ok(())
    }

    /// `Fibonacci_SendGoal_Request`: `UUID goal_id`, `int32 order`.
    pub fn send_goal_request(out: &mut Vec<u8>, id: &Uuid, order: i64) -> Result<(), WireError> {
        let order = i32::try_from(order).map_err(|_| WireError::OutOfRange(order))?;
        let mut w = CdrWriter::new(out);
        w.bytes(id);
        w.i32(order);
        Ok(())
    }
    /// Reads a `Fibonacci_SendGoal_Request`.
    pub fn read_send_goal_request(cdr: &[u8]) -> Result<(Uuid, i64), WireError> {
        let mut r = CdrReader::new(cdr)?;
        Ok((uuid(&mut r)?, i64::from(r.i32()?)))
    }
    /// `Fibonacci_SendGoal_Response`: `bool accepted`, `Time stamp`.
    pub fn send_goal_response(out: &mut Vec<u8>, accepted: bool, at: Stamp) {
        let mut w = CdrWriter::new(out);
        w.u8(u8::from(accepted));
        put_stamp(&mut w, at);
    }
    /// Reads a `Fibonacci_SendGoal_Response`.
    pub fn read_send_goal_response(cdr: &[u8]) -> Result<(bool, Stamp), WireError> {
        let mut r = CdrReader::new(cdr)?;
        Ok((r.u8()? != 0, stamp(&mut r)?))
    }
    /// `Fibonacci_GetResult_Request`: `UUID goal_id`.
    pub fn get_result_request(out: &mut Vec<u8>, id: &Uuid) {
        CdrWriter::new(out).bytes(id);
    }
    /// Reads a `Fibonacci_GetResult_Request`.
    pub fn read_get_result_request(cdr: &[u8]) -> Result<Uuid, WireError> {
        uuid(&mut CdrReader::new(cdr)?)
    }
    /// `Fibonacci_GetResult_Response`: `int8 status`, `int32[] sequence`.
    pub fn get_result_response(
        out: &mut Vec<u8>,
        status: i8,
        seq: &[i64],
    ) -> Result<(), WireError> {
        let mut w = CdrWriter::new(out);
        w.u8(status as u8);
        put_int32s(&mut w, seq)
    }
    /// Reads a `Fibonacci_GetResult_Response`.
    pub fn read_get_result_response(cdr: &[u8]) -> Result<(i8, Vec<i64>), WireError> {
        let mut r = CdrReader::new(cdr)?;
        Ok((r.u8()? as i8, int32s(&mut r)?))
    }
    /// `Fibonacci_FeedbackMessage`: `UUID goal_id`, `int32[] sequence`.
    pub fn feedback(out: &mut Vec<u8>, id: &Uuid, seq: &[i64]) -> Result<(), WireError> {
        let mut w = CdrWriter::new(out);
        w.bytes(id);
        put_int32s(&mut w, seq)
    }
    /// Reads a `Fibonacci_FeedbackMessage`.
    pub fn read_feedback(cdr: &[u8]) -> Result<(Uuid, Vec<i64>), WireError> {
        let mut r = CdrReader::new(cdr)?;
        Ok((uuid(&mut r)?, int32s(&mut r)?))
    }
    /// `CancelGoal_Request`: `GoalInfo goal_info` (`UUID goal_id`, `Time stamp`).
    pub fn cancel_request(out: &mut Vec<u8>, id: &Uuid, at: Stamp) {
        let mut w = CdrWriter::new(out);
        w.bytes(id);
        put_stamp(&mut w, at);
    }
    /// Reads a `CancelGoal_Request`.
    pub fn read_cancel_request(cdr: &[u8]) -> Result<(Uuid, Stamp), WireError> {
        let mut r = CdrReader::new(cdr)?;
        Ok((uuid(&mut r)?, stamp(&mut r)?))
    }
    /// `CancelGoal_Response`: `int8 return_code`, `GoalInfo[] goals_canceling`.
    pub fn cancel_response(
        out: &mut Vec<u8>,
        code: i8,
        goals: &[(Uuid, Stamp)],
    ) -> Result<(), WireError> {
        let mut w = CdrWriter::new(out);
        w.u8(code as u8);
        w.len(goals.len())?;
        for (id, at) in goals {
            w.bytes(id);
            put_stamp(&mut w, *at);
        }
        Ok(())
    }
    /// Reads a `CancelGoal_Response`: the return code and how many goals cancel.
    pub fn read_cancel_response(cdr: &[u8]) -> Result<(i8, usize), WireError> {
        let mut r = CdrReader::new(cdr)?;
        let code = r.u8()? as i8;
        Ok((code, r.len(24)?))
    }
    /// `GoalStatusArray`: `GoalStatus[] status_list` (`GoalInfo goal_info`, `int8 status`).
    pub fn status_array(out: &mut Vec<u8>, goals: &[(Uuid, Stamp, i8)]) -> Result<(), WireError> {
        let mut w = CdrWriter::new(out);
        w.len(goals.len())?;
        for (id, at, status) in goals {
            w.bytes(id);
            put_stamp(&mut w, *at);
            w.u8(*status as u8);
        }
        Ok(())
    }
    /// Reads a `GoalStatusArray`.
    #[cfg(test)]
    pub fn read_status_array(cdr: &[u8]) -> Result<Vec<(Uuid, Stamp, i8)>, WireError> {
        let mut r = CdrReader::new(cdr)?;
        let n = r.len(25)?;
        (0..n)
            .map(|_| Ok((uuid(&mut r)?, stamp(&mut r)?, r.u8()? as i8)))
            .collect()
    }
}

/// A Nerve message: its head and its slice's elements.
pub struct Msg<M: Message> {
    /// The head.
    pub head: M,
    /// The elements.
    pub elems: Vec<M::Elem>,
}

/// The goal of action `A` as a Nerve message.
type GoalMsg<A> = Msg<<A as Action>::Goal>;
/// Feedback of action `A` as a Nerve message.
type FeedbackMsg<A> = Msg<<A as Action>::Feedback>;
/// The result of action `A` as a Nerve message.
type ResultMsg<A> = Msg<<A as Action>::Result>;

/// How one action type's messages cross: its Nerve action type, and the messages ROS 2
/// actions use on the wire, written from and read into Nerve messages.
pub trait Form: 'static {
    /// The Nerve action type.
    type A: Action;
    /// The ROS 2 action type (`pkg/action/Name`).
    fn ros_type(&self) -> &str;
    /// A `_SendGoal_Request`'s goal id and goal.
    fn read_send_goal_request(&self, cdr: &[u8]) -> Result<(Uuid, GoalMsg<Self::A>), WireError>;
    /// Writes a `_SendGoal_Request` of a goal.
    fn send_goal_request(
        &self,
        out: &mut Vec<u8>,
        id: &Uuid,
        goal: &<Self::A as Action>::Goal,
        elems: &[<<Self::A as Action>::Goal as Message>::Elem],
    ) -> Result<(), WireError>;
    /// Writes a `_FeedbackMessage` of feedback.
    fn feedback(
        &self,
        out: &mut Vec<u8>,
        id: &Uuid,
        feedback: &<Self::A as Action>::Feedback,
        elems: &[<<Self::A as Action>::Feedback as Message>::Elem],
    ) -> Result<(), WireError>;
    /// A `_FeedbackMessage`'s goal id and feedback.
    fn read_feedback(&self, cdr: &[u8]) -> Result<(Uuid, FeedbackMsg<Self::A>), WireError>;
    /// Writes a `_GetResult_Response` of a status and a result (`None`: the default
    /// result, for a goal that ended without one or was never seen).
    fn get_result_response(
        &self,
        out: &mut Vec<u8>,
        status: i8,
        result: Option<&ResultMsg<Self::A>>,
    ) -> Result<(), WireError>;
    /// A `_GetResult_Response`'s status and result.
    fn read_get_result_response(&self, cdr: &[u8]) -> Result<(i8, ResultMsg<Self::A>), WireError>;
    /// The result a goal ends with when there is none (the type's default).
    fn default_result(&self) -> Result<ResultMsg<Self::A>, WireError>;
    /// For a type carried as CDR: says it on the action's type topic
    /// ([`nerve_ros2_map::action::announce`]), so Nerve's tools name it.
    fn announce(&self, _node: &Node, _action: &str) -> Result<Option<nerve::RawPublisher>, String> {
        Ok(None)
    }
}

/// Ends a Nerve goal with `result`, or with the default result of `form`.
fn end<F: Form>(
    form: &F,
    handle: &GoalHandle<F::A>,
    state: GoalState,
    result: Option<ResultMsg<F::A>>,
) -> Result<(), nerve::action::ActionError> {
    match result.or_else(|| form.default_result().ok()) {
        Some(r) => handle.end_with(state, r.elems.len(), |head, elems| {
            *head = r.head;
            elems.copy_from_slice(&r.elems);
        }),
        None => handle.end_with(state, 0, |_, _| {}),
    }
}

/// The Fibonacci actions, field by field as [`Fibonacci`].
pub struct FibonacciForm {
    ros_type: String,
}

fn sequence(seq: Vec<i64>) -> Msg<FibonacciSequence> {
    Msg {
        head: FibonacciSequence {
            len: seq.len() as u64,
        },
        elems: seq,
    }
}

impl Form for FibonacciForm {
    type A = Fibonacci;
    fn ros_type(&self) -> &str {
        &self.ros_type
    }
    fn read_send_goal_request(&self, cdr: &[u8]) -> Result<(Uuid, Msg<FibonacciGoal>), WireError> {
        let (id, order) = wire::read_send_goal_request(cdr)?;
        Ok((
            id,
            Msg {
                head: FibonacciGoal { order },
                elems: Vec::new(),
            },
        ))
    }
    fn send_goal_request(
        &self,
        out: &mut Vec<u8>,
        id: &Uuid,
        goal: &FibonacciGoal,
        _: &[nerve::message::NoElem],
    ) -> Result<(), WireError> {
        wire::send_goal_request(out, id, goal.order)
    }
    fn feedback(
        &self,
        out: &mut Vec<u8>,
        id: &Uuid,
        _: &FibonacciSequence,
        elems: &[i64],
    ) -> Result<(), WireError> {
        wire::feedback(out, id, elems)
    }
    fn read_feedback(&self, cdr: &[u8]) -> Result<(Uuid, Msg<FibonacciSequence>), WireError> {
        let (id, seq) = wire::read_feedback(cdr)?;
        Ok((id, sequence(seq)))
    }
    fn get_result_response(
        &self,
        out: &mut Vec<u8>,
        status: i8,
        result: Option<&Msg<FibonacciSequence>>,
    ) -> Result<(), WireError> {
        wire::get_result_response(out, status, result.map_or(&[][..], |r| &r.elems))
    }
    fn read_get_result_response(
        &self,
        cdr: &[u8],
    ) -> Result<(i8, Msg<FibonacciSequence>), WireError> {
        let (status, seq) = wire::read_get_result_response(cdr)?;
        Ok((status, sequence(seq)))
    }
    fn default_result(&self) -> Result<Msg<FibonacciSequence>, WireError> {
        Ok(sequence(Vec::new()))
    }
}

/// Any other ROS 2 action type, carried as CDR ([`Ros2Action`]).
pub struct CdrForm(pub Arc<ActionPass>);

impl CdrForm {
    fn msg(&self, cdr: Vec<u8>) -> Msg<Ros2ActionCdr> {
        Msg {
            head: self.0.head(),
            elems: cdr,
        }
    }
    /// The CDR of a Nerve message of `part`, checked: of this action, decoding as its type.
    fn cdr<'a>(
        &self,
        part: Part,
        head: &Ros2ActionCdr,
        elems: &'a [u8],
    ) -> Result<&'a [u8], WireError> {
        self.0.check(part, head, elems)?;
        Ok(elems)
    }
}

impl Form for CdrForm {
    type A = Ros2Action;
    fn ros_type(&self) -> &str {
        self.0.name()
    }
    fn read_send_goal_request(&self, cdr: &[u8]) -> Result<(Uuid, Msg<Ros2ActionCdr>), WireError> {
        let (id, goal) = self.0.read_send_goal_request(cdr)?;
        Ok((id, self.msg(goal)))
    }
    fn send_goal_request(
        &self,
        out: &mut Vec<u8>,
        id: &Uuid,
        goal: &Ros2ActionCdr,
        elems: &[u8],
    ) -> Result<(), WireError> {
        let goal = self.cdr(Part::Goal, goal, elems)?;
        Ok(self.0.send_goal_request(id, goal, out)?)
    }
    fn feedback(
        &self,
        out: &mut Vec<u8>,
        id: &Uuid,
        feedback: &Ros2ActionCdr,
        elems: &[u8],
    ) -> Result<(), WireError> {
        let feedback = self.cdr(Part::Feedback, feedback, elems)?;
        Ok(self.0.feedback_message(id, feedback, out)?)
    }
    fn read_feedback(&self, cdr: &[u8]) -> Result<(Uuid, Msg<Ros2ActionCdr>), WireError> {
        let (id, feedback) = self.0.read_feedback_message(cdr)?;
        Ok((id, self.msg(feedback)))
    }
    fn get_result_response(
        &self,
        out: &mut Vec<u8>,
        status: i8,
        result: Option<&Msg<Ros2ActionCdr>>,
    ) -> Result<(), WireError> {
        let default;
        let cdr = match result {
            Some(r) => self.cdr(Part::Result, &r.head, &r.elems)?,
            None => {
                default = self.0.default_cdr(Part::Result)?;
                &default
            }
        };
        Ok(self.0.get_result_response(status, cdr, out)?)
    }
    fn read_get_result_response(&self, cdr: &[u8]) -> Result<(i8, Msg<Ros2ActionCdr>), WireError> {
        let (status, result) = self.0.read_get_result_response(cdr)?;
        Ok((status, self.msg(result)))
    }
    fn default_result(&self) -> Result<Msg<Ros2ActionCdr>, WireError> {
        Ok(self.msg(self.0.default_cdr(Part::Result)?))
    }
    fn announce(&self, node: &Node, action: &str) -> Result<Option<nerve::RawPublisher>, String> {
        nerve_ros2_map::action::announce(node, action, &self.0)
            .map(Some)
            .map_err(|e| e.to_string())
    }
}

/// A DDS reader of raw CDR.
type Reader = DataReader<RawCdr, RawAdapter>;
/// A DDS writer of raw CDR.
type Writer = DataWriter<RawCdr, RawAdapter>;

/// The DDS topics of ROS 2 action `name`'s service `svc` (request, reply).
fn service_topics(name: &str, svc: &str) -> (String, String) {
    (
        format!("rq{name}/_action/{svc}Request"),
        format!("rr{name}/_action/{svc}Reply"),
    )
}

/// A ROS 2 action name from the request topic of its `send_goal` service.
fn action_of_goal_request_topic(dds: &str) -> Option<&str> {
    dds.strip_prefix("rq")
        .and_then(|s| s.strip_suffix("/_action/send_goalRequest"))
        .filter(|s| s.starts_with('/'))
}

/// `pkg::action::dds_::Name_SendGoal_Request_` → `pkg/action/Name`.
fn action_type_of_goal_request(dds_type: &str) -> Option<String> {
    let ros = ros_type_of_dds(dds_type)?;
    ros.strip_suffix("_SendGoal_Request").map(str::to_string)
}

/// What the thread reports through, and who is who on the DDS side.
struct Ctx<'a> {
    shared: &'a Shared,
    me: GUID,
    peers: Arc<Peers>,
}

impl Ctx<'_> {
    /// Whether a DDS sample from `writer` is from a ROS 2 node (not a bridge).
    fn foreign(&self, writer: GUID) -> bool {
        writer.prefix != self.me.prefix && !self.peers.is_bridge_participant(writer.prefix.as_ref())
    }
    /// Counts a malformed message; reports the first ones, then at powers of two.
    fn malformed(&self, topic: &str, reason: String) {
        let n = self.shared.stats.malformed.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= 4 || n.is_power_of_two() {
            self.shared.event(Event::Malformed {
                topic: topic.to_string(),
                reason,
            });
        }
    }
    fn dropped(&self, topic: &str, reason: String) {
        self.shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
        self.shared.event(Event::Dropped {
            topic: topic.to_string(),
            reason,
        });
    }
}

/// Writes `cdr`, as a reply to `related` if given; returns the sample's identity.
fn write(
    w: &Writer,
    cdr: Vec<u8>,
    related: Option<SampleIdentity>,
) -> Result<SampleIdentity, String> {
    let mut opts = WriteOptionsBuilder::new().source_timestamp(Timestamp::now());
    if let Some(id) = related {
        opts = opts.related_sample_identity(id);
    }
    w.write_with_options(RawCdr(cdr), opts.build())
        .map_err(|e| e.to_string())
}

/// A goal of a ROS 2 client, sent on to the Nerve server.
struct RosGoal<A: Action> {
    goal: ClientGoal<A>,
    stamp: Stamp,
    state: GoalState,
    /// `get_result` requests waiting for the result.
    waiting: Vec<SampleIdentity>,
}

/// A finished goal's result, kept for late `get_result` requests.
struct Done<R: Message> {
    id: Uuid,
    status: i8,
    result: Option<Msg<R>>,
    at: Instant,
}

/// A Nerve action server offered to ROS 2 clients.
struct OfferedToRos<F: Form> {
    name: String,
    form: F,
    client: ActionClient<F::A>,
    goal_rq: Reader,
    goal_rr: Writer,
    cancel_rq: Reader,
    cancel_rr: Writer,
    result_rq: Reader,
    result_rr: Writer,
    feedback: Writer,
    status: Writer,
    goals: HashMap<Uuid, RosGoal<F::A>>,
    done: VecDeque<Done<<F::A as Action>::Result>>,
}

/// A goal of a Nerve client, sent on to the ROS 2 server.
struct NerveGoal<A: Action> {
    handle: GoalHandle<A>,
    /// The `get_result` request sent for it.
    result_call: Option<SampleIdentity>,
    cancel_sent: bool,
}

/// A ROS 2 action server offered to Nerve clients.
struct OfferedToNerve<F: Form> {
    name: String,
    form: F,
    server: ActionServer<F::A>,
    goal_rq: Writer,
    goal_rr: Reader,
    cancel_rq: Writer,
    cancel_rr: Reader,
    result_rq: Writer,
    result_rr: Reader,
    feedback: Reader,
    goals: HashMap<Uuid, NerveGoal<F::A>>,
}

/// A bridged action, whatever its form.
trait Bridged {
    /// Moves what waits on both sides.
    fn pump(&mut self, ctx: &Ctx<'_>, scratch: &mut Vec<u8>);
    /// The other side went away: every goal ends aborted.
    fn abort_all(&mut self, scratch: &mut Vec<u8>);
    /// Whether the Nerve server lives (for a Nerve server offered to ROS 2).
    fn server_alive(&self) -> bool {
        true
    }
}

/// The actions part of a bridge (one thread).
pub(crate) struct Actions {
    shared: Arc<Shared>,
    config: BridgeConfig,
    node: Node,
    dds_pub: rustdds::Publisher,
    dds_sub: rustdds::Subscriber,
    /// Nerve servers offered to ROS 2, by action name.
    to_ros: BTreeMap<String, Box<dyn Bridged>>,
    /// ROS 2 servers offered to Nerve, by action name.
    to_nerve: BTreeMap<String, Box<dyn Bridged>>,
    /// ROS 2 action types carried as CDR, by type (a failure is reported per action).
    passes: HashMap<String, Arc<ActionPass>>,
    /// Names that failed (reported once, tried again later).
    failures: crate::engine::worker::Failures,
    scratch: Vec<u8>,
}

impl Actions {
    pub(crate) fn new(
        shared: Arc<Shared>,
        config: BridgeConfig,
        node: Node,
    ) -> Result<Actions, BridgeError> {
        let (dds_pub, dds_sub) = (
            shared.side.dds_publisher().clone(),
            shared.side.dds_subscriber().clone(),
        );
        Ok(Actions {
            dds_pub,
            dds_sub,
            shared,
            config,
            node,
            to_ros: BTreeMap::new(),
            to_nerve: BTreeMap::new(),
            passes: HashMap::new(),
            failures: Default::default(),
            scratch: Vec::new(),
        })
    }

    /// Runs until the bridge stops.
    pub(crate) fn run(mut self) {
        crate::engine::worker::run(&mut self, TICK);
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            shared: &self.shared,
            me: self.shared.side.participant.guid(),
            peers: self.shared.peers(),
        }
    }

    fn pump(&mut self) {
        let ctx = Ctx {
            shared: &self.shared,
            me: self.shared.side.participant.guid(),
            peers: self.shared.peers(),
        };
        for a in self.to_ros.values_mut() {
            a.pump(&ctx, &mut self.scratch);
        }
        for a in self.to_nerve.values_mut() {
            a.pump(&ctx, &mut self.scratch);
        }
    }

    fn report(&mut self, name: &str, reason: String) {
        self.failures.report(&self.shared, name, reason);
    }

    fn failed_lately(&self, name: &str) -> bool {
        self.failures.lately(name)
    }

    fn sync(&mut self) {
        let ctx = self.ctx();
        let (me, peers) = (ctx.me, ctx.peers.clone());
        // a standby bridge forwards nothing
        let primary = self.shared.primary();
        // ROS 2 servers: readers of send_goal request topics, neither ours nor bridges'
        let mut ros_servers: BTreeMap<String, String> = BTreeMap::new();
        for r in self
            .shared
            .side
            .participant
            .discovered_readers()
            .into_iter()
            .filter(|_| primary)
        {
            let d = &r.subscription_topic_data;
            let prefix = d.key().prefix;
            if prefix == me.prefix || peers.is_bridge_participant(prefix.as_ref()) {
                continue;
            }
            if let (Some(name), Some(ty)) = (
                action_of_goal_request_topic(d.topic_name()),
                action_type_of_goal_request(d.type_name()),
            ) {
                if self.config.admits(name) {
                    ros_servers.insert(name.to_string(), ty);
                }
            }
        }
        // Nerve servers that are not ours: `<action>/_action/goal` services
        let nerve_servers: Vec<(String, ServiceType)> =
            nerve::introspect::list_services(&self.node)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|s| {
                    let action = nerve::action::names::action_of_goal_service(&s.name)?.to_string();
                    let ours = usize::from(self.to_nerve.contains_key(&action));
                    (primary
                        && s.servers > ours
                        && self.config.admits(&action)
                        && !ros_servers.contains_key(&action))
                    .then(|| {
                        let ty = ServiceType::new(s.type_name, s.request, s.response);
                        (action, ty)
                    })
                })
                .collect();
        for (name, ty) in &ros_servers {
            if self.to_nerve.contains_key(name) || self.failed_lately(name) {
                continue;
            }
            let offered = if FIBONACCI_TYPES.contains(&ty.as_str()) {
                let form = FibonacciForm {
                    ros_type: ty.clone(),
                };
                self.offer_to_nerve(name, form)
            } else {
                self.pass(ty)
                    .and_then(|pass| self.offer_to_nerve(name, CdrForm(pass)))
            };
            match offered {
                Ok((a, nerve_type)) => {
                    self.shared.event(Event::Bridged {
                        kind: crate::Kind::Action,
                        topic: name.clone(),
                        ros_type: ty.clone(),
                        nerve_type: nerve_type.to_string(),
                        to_ros: false,
                    });
                    self.to_nerve.insert(name.clone(), a);
                }
                Err(e) => self.report(name, e.to_string()),
            }
        }
        // a ROS 2 server that went away: its Nerve goals end aborted, its server goes
        let gone: Vec<String> = self
            .to_nerve
            .keys()
            .filter(|n| !ros_servers.contains_key(*n))
            .cloned()
            .collect();
        for n in gone {
            if let Some(mut a) = self.to_nerve.remove(&n) {
                a.abort_all(&mut self.scratch);
            }
        }
        let fibonacci = ServiceType::of::<nerve::action::GoalService<Fibonacci>>();
        let carried = ServiceType::of::<nerve::action::GoalService<Ros2Action>>();
        for (name, ty) in &nerve_servers {
            if self.to_ros.contains_key(name) || self.failed_lately(name) {
                continue;
            }
            let offered = if *ty == fibonacci {
                let form = FibonacciForm {
                    ros_type: OFFERED_FIBONACCI.to_string(),
                };
                self.offer_to_ros(name, form)
                    .map(|a| (a, OFFERED_FIBONACCI.to_string()))
            } else if *ty == carried {
                // the server says its ROS 2 type on its type topic (not yet: later)
                match self.announced(name) {
                    None => continue,
                    Some(pass) => pass.and_then(|pass| {
                        let ros = pass.name().to_string();
                        self.offer_to_ros(name, CdrForm(pass)).map(|a| (a, ros))
                    }),
                }
            } else {
                self.report(
                    name,
                    format!(
                        "Nerve action type {} has no ROS 2 form (actions that cross: {}, and \
                         ROS 2 action types carried as CDR)",
                        ty.name,
                        <Fibonacci as Action>::TYPE_NAME
                    ),
                );
                continue;
            };
            match offered {
                Ok((a, ros_type)) => {
                    self.shared.event(Event::Bridged {
                        kind: crate::Kind::Action,
                        topic: name.clone(),
                        ros_type,
                        nerve_type: ty.name.clone(),
                        to_ros: true,
                    });
                    self.to_ros.insert(name.clone(), a);
                }
                Err(e) => self.report(name, e.to_string()),
            }
        }

        // a Nerve server that went away (or died): its ROS 2 goals end aborted
        let live: HashSet<&str> = nerve_servers.iter().map(|(n, _)| n.as_str()).collect();
        let gone: Vec<String> = self
            .to_ros
            .iter()
            .filter(|(n, a)| !live.contains(n.as_str()) || !a.server_alive())
            .map(|(n, _)| n.clone())
            .collect();
        for n in gone {
            if let Some(mut a) = self.to_ros.remove(&n) {
                a.abort_all(&mut self.scratch);
            }
        }
        self.failures
            .retain(|n| live.contains(n) || ros_servers.contains_key(n));
    }

    fn topic(&self, name: &str, ros_type: &str) -> Result<rustdds::Topic, BridgeError> {
        let dds_type = dds_type_of_ros(ros_type)
            .ok_or_else(|| BridgeError::Config(format!("{ros_type} is not a ROS 2 type")))?;
        self.shared
            .side
            .participant
            .create_topic(
                name.to_string(),
                dds_type,
                &RosQos::default().policies(),
                TopicKind::NoKey,
            )
            .map_err(|e| BridgeError::Dds(format!("{name}: {e}")))
    }

    fn reader(&self, name: &str, ros_type: &str, qos: RosQos) -> Result<Reader, BridgeError> {
        let topic = self.topic(name, ros_type)?;
        self.dds_sub
            .create_datareader_no_key::<RawCdr, RawAdapter>(&topic, Some(qos.policies()))
            .map_err(|e| BridgeError::Dds(format!("{name}: {e}")))
    }

    fn writer(&self, name: &str, ros_type: &str, qos: RosQos) -> Result<Writer, BridgeError> {
        let topic = self.topic(name, ros_type)?;
        self.dds_pub
            .create_datawriter_no_key::<RawCdr, RawAdapter>(&topic, Some(qos.policies()))
            .map_err(|e| BridgeError::Dds(format!("{name}: {e}")))
    }

    /// The ROS 2 type a Nerve server of action `name` carried as CDR announced
    /// ([`nerve_ros2_map::action::type_topic`]), from the definition on the type search
    /// path (its hash must be the announced one); `None` while it said nothing.
    fn announced(&mut self, name: &str) -> Option<Result<Arc<ActionPass>, BridgeError>> {
        let topic = nerve_ros2_map::action::type_topic(name);
        let info = nerve::introspect::topic_info(&self.node, &topic).ok()?;
        let said = match &info.schema {
            Some(Ok(schema)) => nerve_ros2_map::action::announced(schema)
                .map(|(ros, hash)| (ros.to_string(), hash.to_string())),
            _ => None,
        };
        let Some((ros, hash)) = said else {
            return Some(Err(BridgeError::Config(format!(
                "{topic}: its schema names no ROS 2 action type"
            ))));
        };
        Some(self.pass(&ros).and_then(|pass| {
            if pass.hash_text() == hash {
                Ok(pass)
            } else {
                Err(BridgeError::Type {
                    ros_type: ros.clone(),
                    reason: format!(
                        "the Nerve server's definition ({hash}) differs from the one on the \
                         type search path ({})",
                        pass.hash_text()
                    ),
                })
            }
        }))
    }

    /// ROS 2 action type `ty` carried as CDR, from its definition on the type search path.
    fn pass(&mut self, ty: &str) -> Result<Arc<ActionPass>, BridgeError> {
        if let Some(p) = self.passes.get(ty) {
            return Ok(p.clone());
        }
        let mut search = nerve_ros2_types::SearchPath::new();
        for d in &self.config.types {
            search.push_dir(d.clone());
        }
        let pass = ActionPass::load(ty, &search).map_err(|e| BridgeError::Type {
            ros_type: ty.to_string(),
            reason: e.to_string(),
        })?;
        let pass = Arc::new(pass);
        self.passes.insert(ty.to_string(), pass.clone());
        Ok(pass)
    }

    fn offer_to_ros<F: Form>(
        &mut self,
        name: &str,
        form: F,
    ) -> Result<Box<dyn Bridged>, BridgeError> {
        let client = ActionClient::<F::A>::create(&self.node, name)
            .map_err(|e| BridgeError::Nerve(e.to_string()))?;
        client.set_accept_timeout(NERVE_ACCEPT_TIMEOUT);
        let ty = form.ros_type().to_string();
        let q = RosQos::default();
        let (goal_rq, goal_rr) = service_topics(name, "send_goal");
        let (cancel_rq, cancel_rr) = service_topics(name, "cancel_goal");
        let (result_rq, result_rr) = service_topics(name, "get_result");
        let cancel = "action_msgs/srv/CancelGoal";
        Ok(Box::new(OfferedToRos {
            name: name.to_string(),
            form,
            client,
            goal_rq: self.reader(&goal_rq, &format!("{ty}_SendGoal_Request"), q)?,
            goal_rr: self.writer(&goal_rr, &format!("{ty}_SendGoal_Response"), q)?,
            cancel_rq: self.reader(&cancel_rq, &format!("{cancel}_Request"), q)?,
            cancel_rr: self.writer(&cancel_rr, &format!("{cancel}_Response"), q)?,
            result_rq: self.reader(&result_rq, &format!("{ty}_GetResult_Request"), q)?,
            result_rr: self.writer(&result_rr, &format!("{ty}_GetResult_Response"), q)?,
            feedback: self.writer(
                &format!("rt{name}/_action/feedback"),
                &format!("{ty}_FeedbackMessage"),
                q,
            )?,
            status: self.writer(
                &format!("rt{name}/_action/status"),
                "action_msgs/msg/GoalStatusArray",
                // deeper than ROS 2's own (1): a quick cancel's `canceling` is not
                // overwritten by the `canceled` that follows before it was delivered
                RosQos {
                    reliable: true,
                    transient_local: true,
                    depth: 10,
                },
            )?,
            goals: HashMap::new(),
            done: VecDeque::new(),
        }))
    }

    /// Serves ROS 2 action `name` in Nerve; with the Nerve action type it is served as.
    fn offer_to_nerve<F: Form>(
        &mut self,
        name: &str,
        form: F,
    ) -> Result<(Box<dyn Bridged>, &'static str), BridgeError> {
        // a type carried as CDR says which it is, for as long as the server serves
        let server = ActionServer::<F::A>::builder(&self.node, name)
            .policy(GoalPolicy::Parallel { max: MAX_GOALS })
            .create_saying(|node, action| {
                form.announce(node, action)
                    .map(|p| Box::new(p) as Box<dyn std::any::Any>)
            })
            .map_err(|e| BridgeError::Nerve(e.to_string()))?;
        let q = RosQos::default();
        let (goal_rq, goal_rr) = service_topics(name, "send_goal");
        let (cancel_rq, cancel_rr) = service_topics(name, "cancel_goal");
        let (result_rq, result_rr) = service_topics(name, "get_result");
        let cancel = "action_msgs/srv/CancelGoal";
        let ty = form.ros_type().to_string();
        let a = OfferedToNerve {
            name: name.to_string(),
            form,
            server,
            goal_rq: self.writer(&goal_rq, &format!("{ty}_SendGoal_Request"), q)?,
            goal_rr: self.reader(&goal_rr, &format!("{ty}_SendGoal_Response"), q)?,
            cancel_rq: self.writer(&cancel_rq, &format!("{cancel}_Request"), q)?,
            cancel_rr: self.reader(&cancel_rr, &format!("{cancel}_Response"), q)?,
            result_rq: self.writer(&result_rq, &format!("{ty}_GetResult_Request"), q)?,
            result_rr: self.reader(&result_rr, &format!("{ty}_GetResult_Response"), q)?,
            feedback: self.reader(
                &format!("rt{name}/_action/feedback"),
                &format!("{ty}_FeedbackMessage"),
                q,
            )?,
            goals: HashMap::new(),
        };
        Ok((Box::new(a), <F::A as Action>::TYPE_NAME))
    }
}

impl<F: Form> Bridged for OfferedToRos<F> {
    fn pump(&mut self, ctx: &Ctx<'_>, scratch: &mut Vec<u8>) {
        OfferedToRos::pump(self, ctx, scratch)
    }
    fn abort_all(&mut self, scratch: &mut Vec<u8>) {
        OfferedToRos::abort_all(self, scratch)
    }
    fn server_alive(&self) -> bool {
        self.client.server_alive()
    }
}

impl<F: Form> Bridged for OfferedToNerve<F> {
    fn pump(&mut self, ctx: &Ctx<'_>, scratch: &mut Vec<u8>) {
        OfferedToNerve::pump(self, ctx, scratch)
    }
    fn abort_all(&mut self, _: &mut Vec<u8>) {
        OfferedToNerve::abort_all(self)
    }
}

impl<F: Form> OfferedToRos<F> {
    fn pump(&mut self, ctx: &Ctx<'_>, scratch: &mut Vec<u8>) {
        let mut changed = false;
        let mut finished: Vec<(Uuid, Stamp, i8)> = Vec::new();
        // goals from ROS 2 clients
        while let Ok(Some(s)) = self.goal_rq.take_next_sample() {
            let info = s.sample_info();
            if !ctx.foreign(info.writer_guid()) {
                continue;
            }
            let call = info.sample_identity();
            let accepted = match self.form.read_send_goal_request(&s.value().0) {
                Ok((id, goal)) => self.accept(ctx, id, goal),
                Err(e) => {
                    ctx.malformed(&self.name, format!("a send_goal request dropped: {e}"));
                    None
                }
            };
            changed |= accepted.is_some();
            wire::send_goal_response(scratch, accepted.is_some(), accepted.unwrap_or_default());
            let _ = write(&self.goal_rr, std::mem::take(scratch), Some(call));
        }
        if std::mem::take(&mut changed) {
            self.publish_status(&[], scratch);
        }
        // cancels
        while let Ok(Some(s)) = self.cancel_rq.take_next_sample() {
            let info = s.sample_info();
            if !ctx.foreign(info.writer_guid()) {
                continue;
            }
            let call = info.sample_identity();
            let (code, canceling) = match wire::read_cancel_request(&s.value().0) {
                Ok((id, before)) => self.cancel(ctx, id, before),
                Err(e) => {
                    ctx.malformed(&self.name, format!("a cancel_goal request dropped: {e}"));
                    (cancel_code::REJECTED, Vec::new())
                }
            };
            changed |= !canceling.is_empty();
            if wire::cancel_response(scratch, code, &canceling).is_ok() {
                let _ = write(&self.cancel_rr, std::mem::take(scratch), Some(call));
            }
        }
        // each change is published as it happens (a goal may end in this same pump)
        if std::mem::take(&mut changed) {
            self.publish_status(&[], scratch);
        }
        // result requests: answered when the goal ends (at once if it has)
        self.done.retain(|d| d.at.elapsed() < DONE_TTL);
        while let Ok(Some(s)) = self.result_rq.take_next_sample() {
            let info = s.sample_info();
            if !ctx.foreign(info.writer_guid()) {
                continue;
            }
            let call = info.sample_identity();
            let id = match wire::read_get_result_request(&s.value().0) {
                Ok(id) => id,
                Err(e) => {
                    ctx.malformed(&self.name, format!("a get_result request dropped: {e}"));
                    continue;
                }
            };
            if let Some(g) = self.goals.get_mut(&id) {
                if g.waiting.len() < WAITERS_PER_GOAL {
                    g.waiting.push(call);
                }
                continue;
            }
            // a finished goal's result, or STATUS_UNKNOWN for a goal never seen
            let (status, result) = match self.done.iter().find(|d| d.id == id) {
                Some(d) => (d.status, d.result.as_ref()),
                None => (0, None),
            };
            if self
                .form
                .get_result_response(scratch, status, result)
                .is_ok()
            {
                let _ = write(&self.result_rr, std::mem::take(scratch), Some(call));
            }
        }
        // feedback and results from the Nerve server
        type Ended<R> = (Uuid, GoalState, Option<Msg<R>>);
        let mut ended: Vec<Ended<<F::A as Action>::Result>> = Vec::new();
        for (id, g) in self.goals.iter_mut() {
            while let Some(f) = g.goal.try_feedback() {
                let state = f.state();
                // feedback sent before a cancel carries the state before it: states
                // only move on (accepted, executing, canceling)
                if (state as u32) > (g.state as u32) && !state.is_terminal() {
                    g.state = state;
                    changed = true;
                }
                match self.form.feedback(scratch, id, &f, f.elems()) {
                    Ok(()) => {
                        if write(&self.feedback, std::mem::take(scratch), None).is_ok() {
                            ctx.shared.stats.to_ros.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(e) => ctx.malformed(&self.name, format!("feedback not sent to ROS 2: {e}")),
                }
            }
            match g.goal.try_result() {
                Ok(Some(r)) => {
                    let result = Msg {
                        head: *r,
                        elems: r.elems().to_vec(),
                    };
                    ended.push((*id, r.state(), Some(result)))
                }
                Ok(None) => {}
                Err(e) => {
                    ctx.dropped(&self.name, format!("goal {}: {e}", g.goal.id()));
                    ended.push((*id, GoalState::Aborted, None));
                }
            }
        }
        if std::mem::take(&mut changed) {
            self.publish_status(&[], scratch);
        }
        for (id, state, result) in ended {
            if let Some(stamp) = self.finish(ctx, id, state, result, scratch) {
                finished.push((id, stamp, ros_status(state)));
                changed = true;
            }
        }
        if changed {
            self.publish_status(&finished, scratch);
        }
    }

    /// Passes a ROS 2 goal to the Nerve server; its acceptance stamp if it was accepted.
    fn accept(&mut self, ctx: &Ctx<'_>, id: Uuid, goal: GoalMsg<F::A>) -> Option<Stamp> {
        if self.goals.contains_key(&id) || self.done.iter().any(|d| d.id == id) {
            return None; // a goal id sent before
        }
        if self.goals.len() >= MAX_GOALS {
            ctx.dropped(
                &self.name,
                format!("goal refused: {MAX_GOALS} goals in flight"),
            );
            return None;
        }
        let sent = self.client.send_goal_with(goal.elems.len(), |h, e| {
            *h = goal.head;
            e.copy_from_slice(&goal.elems);
        });
        match sent {
            Ok(goal) => {
                let stamp = Stamp::now();
                self.goals.insert(
                    id,
                    RosGoal {
                        goal,
                        stamp,
                        state: GoalState::Accepted,
                        waiting: Vec::new(),
                    },
                );
                ctx.shared.stats.calls.fetch_add(1, Ordering::Relaxed);
                Some(stamp)
            }
            // the Nerve server's rejection is ROS 2's: accepted = false
            Err(nerve::action::ActionError::Rejected { .. }) => None,
            Err(e) => {
                ctx.dropped(&self.name, format!("goal not sent to Nerve: {e}"));
                None
            }
        }
    }

    /// Cancels the goals a ROS 2 cancel request names: one goal, or (a zero id) every
    /// goal accepted at or before `before` (every goal when that is zero).
    fn cancel(&mut self, ctx: &Ctx<'_>, id: Uuid, before: Stamp) -> (i8, Vec<(Uuid, Stamp)>) {
        let targets: Vec<Uuid> = if id == [0; 16] {
            self.goals
                .iter()
                .filter(|(_, g)| before.is_zero() || g.stamp <= before)
                .map(|(id, _)| *id)
                .collect()
        } else if self.goals.contains_key(&id) {
            vec![id]
        } else if self.done.iter().any(|d| d.id == id) {
            return (cancel_code::GOAL_TERMINATED, Vec::new());
        } else {
            return (cancel_code::UNKNOWN_GOAL_ID, Vec::new());
        };
        let mut canceling = Vec::new();
        let mut terminated = false;
        for t in targets {
            let Some(g) = self.goals.get_mut(&t) else {
                continue;
            };
            match g.goal.cancel() {
                Ok(GoalState::Canceling) => {
                    g.state = GoalState::Canceling;
                    canceling.push((t, g.stamp));
                }
                // canceled before it ran: its result comes as the goal's end
                Ok(GoalState::Canceled) => canceling.push((t, g.stamp)),
                Ok(s) if s.is_terminal() => terminated = true,
                Ok(_) => {}
                Err(e) => ctx.dropped(&self.name, format!("cancel not sent to Nerve: {e}")),
            }
        }
        let code = if !canceling.is_empty() {
            cancel_code::NONE
        } else if terminated {
            cancel_code::GOAL_TERMINATED
        } else {
            cancel_code::REJECTED
        };
        (code, canceling)
    }

    /// Ends a goal: answers its `get_result` requests, keeps the result a while, forgets
    /// the goal. Returns its stamp (`None` if it was not in flight).
    fn finish(
        &mut self,
        ctx: &Ctx<'_>,
        id: Uuid,
        state: GoalState,
        mut result: Option<ResultMsg<F::A>>,
        scratch: &mut Vec<u8>,
    ) -> Option<Stamp> {
        let g = self.goals.remove(&id)?;
        let mut status = ros_status(state);
        if let Err(e) = self
            .form
            .get_result_response(scratch, status, result.as_ref())
        {
            ctx.malformed(&self.name, format!("result not sent to ROS 2: {e}"));
            status = ros_status(GoalState::Aborted);
            result = None;
            let _ = self.form.get_result_response(scratch, status, None);
        }
        for call in g.waiting {
            let _ = write(&self.result_rr, scratch.clone(), Some(call));
        }
        if self.done.len() >= DONE_KEPT {
            self.done.pop_front();
        }
        self.done.push_back(Done {
            id,
            status,
            result,
            at: Instant::now(),
        });
        Some(g.stamp)
    }

    /// Publishes the status of every goal in flight and of `finished`.
    fn publish_status(&self, finished: &[(Uuid, Stamp, i8)], scratch: &mut Vec<u8>) {
        let mut list: Vec<(Uuid, Stamp, i8)> = self
            .goals
            .iter()
            .map(|(id, g)| (*id, g.stamp, ros_status(g.state)))
            .chain(finished.iter().copied())
            .collect();
        list.sort_by_key(|(id, stamp, _)| (*stamp, *id));
        if wire::status_array(scratch, &list).is_ok() {
            let _ = write(&self.status, std::mem::take(scratch), None);
        }
    }

    /// The Nerve server went away: every goal ends aborted.
    fn abort_all(&mut self, scratch: &mut Vec<u8>) {
        let mut finished = Vec::new();
        let ids: Vec<Uuid> = self.goals.keys().copied().collect();
        for id in ids {
            if let Some(g) = self.goals.remove(&id) {
                let status = ros_status(GoalState::Aborted);
                let _ = self.form.get_result_response(scratch, status, None);
                for call in g.waiting {
                    let _ = write(&self.result_rr, scratch.clone(), Some(call));
                }
                finished.push((id, g.stamp, status));
            }
        }
        if !finished.is_empty() {
            self.publish_status(&finished, scratch);
        }
    }
}

impl<F: Form> OfferedToNerve<F> {
    fn pump(&mut self, ctx: &Ctx<'_>, scratch: &mut Vec<u8>) {
        // goals, cancels and result requests of Nerve clients (the Nerve server answers
        // cancels and result requests itself; a goal is accepted if ROS 2 accepts it)
        let server = self.server.clone();
        let mut accepted = Vec::new();
        let handled = server.handle_pending_with(
            |req| self.send_goal(ctx, uuid_of(req.id()), req.goal(), req.elems()),
            |h| accepted.push(h),
        );
        if let Err(e) = handled {
            ctx.dropped(&self.name, format!("Nerve goal requests: {e}"));
        }
        for handle in accepted {
            let id = uuid_of(handle.id());
            wire::get_result_request(scratch, &id);
            let result_call = match write(&self.result_rq, std::mem::take(scratch), None) {
                Ok(call) => Some(call),
                Err(e) => {
                    ctx.dropped(&self.name, format!("get_result not sent to ROS 2: {e}"));
                    let _ = end(&self.form, &handle, GoalState::Aborted, None);
                    continue;
                }
            };
            self.goals.insert(
                id,
                NerveGoal {
                    handle,
                    result_call,
                    cancel_sent: false,
                },
            );
        }
        // cancels Nerve clients asked for
        for (id, g) in self.goals.iter_mut() {
            if g.handle.is_canceling() && !g.cancel_sent {
                g.cancel_sent = true;
                wire::cancel_request(scratch, id, Stamp::default());
                if let Err(e) = write(&self.cancel_rq, std::mem::take(scratch), None) {
                    ctx.dropped(&self.name, format!("cancel not sent to ROS 2: {e}"));
                }
            }
        }
        while let Ok(Some(s)) = self.cancel_rr.take_next_sample() {
            if let Err(e) = wire::read_cancel_response(&s.value().0) {
                ctx.malformed(&self.name, format!("a cancel_goal response: {e}"));
            }
        }
        // feedback of our goals (the ROS 2 server's other clients' goals are not ours)
        while let Ok(Some(s)) = self.feedback.take_next_sample() {
            if !ctx.foreign(s.sample_info().writer_guid()) {
                continue;
            }
            match self.form.read_feedback(&s.value().0) {
                Ok((id, f)) => {
                    let Some(g) = self.goals.get(&id) else {
                        continue;
                    };
                    let sent = g.handle.feedback_with(f.elems.len(), |head, elems| {
                        *head = f.head;
                        elems.copy_from_slice(&f.elems);
                    });
                    match sent {
                        Ok(()) => {
                            ctx.shared.stats.to_nerve.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            ctx.dropped(&self.name, format!("feedback not sent to Nerve: {e}"))
                        }
                    }
                }
                Err(e) => ctx.malformed(&self.name, format!("feedback dropped: {e}")),
            }
        }
        // results
        while let Ok(Some(s)) = self.result_rr.take_next_sample() {
            let Some(call) = s.sample_info().related_sample_identity() else {
                continue;
            };
            let Some(id) = self
                .goals
                .iter()
                .find(|(_, g)| g.result_call == Some(call))
                .map(|(id, _)| *id)
            else {
                continue; // another client's
            };
            let (state, result) = match self.form.read_get_result_response(&s.value().0) {
                Ok((status, r)) => match nerve_state(status) {
                    Some(s @ (GoalState::Succeeded | GoalState::Canceled)) => (s, Some(r)),
                    _ => (GoalState::Aborted, Some(r)),
                },
                Err(e) => {
                    ctx.malformed(&self.name, format!("a get_result response: {e}"));
                    (GoalState::Aborted, None)
                }
            };
            if let Some(g) = self.goals.remove(&id) {
                let ended = end(&self.form, &g.handle, state, result);
                match ended {
                    Ok(()) => {
                        ctx.shared.stats.calls.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => ctx.dropped(&self.name, format!("result not sent to Nerve: {e}")),
                }
            }
        }
    }

    /// Sends a Nerve goal to the ROS 2 server and waits for its answer.
    fn send_goal(
        &mut self,
        ctx: &Ctx<'_>,
        id: Uuid,
        goal: &<F::A as Action>::Goal,
        elems: &[<<F::A as Action>::Goal as Message>::Elem],
    ) -> Result<(), String> {
        if self.goals.len() >= MAX_GOALS {
            return Err(format!(
                "the bridge has {MAX_GOALS} goals of {} in flight",
                self.name
            ));
        }
        let mut buf = Vec::new();
        self.form
            .send_goal_request(&mut buf, &id, goal, elems)
            .map_err(|e| format!("the goal does not convert: {e}"))?;
        let call = write(&self.goal_rq, buf, None)
            .map_err(|e| format!("the goal was not sent to ROS 2: {e}"))?;
        let deadline = Instant::now() + ACCEPT_TIMEOUT;
        loop {
            while let Ok(Some(s)) = self.goal_rr.take_next_sample() {
                if s.sample_info().related_sample_identity() != Some(call) {
                    continue; // an answer to another client, or one that came too late
                }
                return match wire::read_send_goal_response(&s.value().0) {
                    Ok((true, _)) => Ok(()),
                    Ok((false, _)) => Err("the ROS 2 action server rejected the goal".into()),
                    Err(e) => {
                        ctx.malformed(&self.name, format!("a send_goal response: {e}"));
                        Err(format!("the ROS 2 server's answer does not decode: {e}"))
                    }
                };
            }
            if Instant::now() >= deadline {
                // should it accept the goal later, it is canceled there
                let mut buf = Vec::new();
                wire::cancel_request(&mut buf, &id, Stamp::default());
                let _ = write(&self.cancel_rq, buf, None);
                return Err(format!(
                    "the ROS 2 action server did not answer the goal in {ACCEPT_TIMEOUT:?}"
                ));
            }
            std::thread::sleep(TICK);
        }
    }

    /// The ROS 2 server went away: every goal ends aborted.
    fn abort_all(&mut self) {
        for (_, g) in self.goals.drain() {
            let _ = end(&self.form, &g.handle, GoalState::Aborted, None);
        }
    }
}

impl crate::engine::worker::Worker for Actions {
    type Side = crate::dds::DdsSide;
    fn shared(&self) -> &Shared {
        &self.shared
    }
    fn config(&self) -> &BridgeConfig {
        &self.config
    }
    fn refresh(&mut self) {
        self.sync();
    }
    fn busy(&self) -> bool {
        !(self.to_ros.is_empty() && self.to_nerve.is_empty())
    }
    fn pump(&mut self) {
        Actions::pump(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_types_map_from_dds() {
        assert_eq!(
            action_of_goal_request_topic("rq/ns/fib/_action/send_goalRequest"),
            Some("/ns/fib")
        );
        assert_eq!(action_of_goal_request_topic("rq/ns/fibRequest"), None);
        assert_eq!(
            action_type_of_goal_request("test_msgs::action::dds_::Fibonacci_SendGoal_Request_")
                .as_deref(),
            Some("test_msgs/action/Fibonacci")
        );
        assert_eq!(
            service_topics("/f", "get_result"),
            (
                "rq/f/_action/get_resultRequest".to_string(),
                "rr/f/_action/get_resultReply".to_string()
            )
        );
    }

    #[test]
    fn states_map_both_ways() {
        for s in [
            GoalState::Accepted,
            GoalState::Executing,
            GoalState::Canceling,
            GoalState::Succeeded,
            GoalState::Canceled,
            GoalState::Aborted,
        ] {
            assert_eq!(nerve_state(ros_status(s)), Some(s));
        }
        assert_eq!(ros_status(GoalState::Canceled), 5);
        assert_eq!(ros_status(GoalState::Aborted), 6);
        assert_eq!(nerve_state(0), None);
        let id = nerve::action::GoalId { client: 7, seq: 2 };
        assert_eq!(uuid_of(id)[0], 7);
        assert_eq!(uuid_of(id)[8], 2);
    }

    #[test]
    fn messages_round_trip_and_bad_bytes_are_errors() {
        let id: Uuid = core::array::from_fn(|i| i as u8 + 1);
        let at = Stamp {
            sec: 1_700_000_000,
            nanosec: 5,
        };
        let mut b = Vec::new();
        wire::send_goal_request(&mut b, &id, 10).unwrap();
        assert_eq!(b.len(), 4 + 16 + 4);
        assert_eq!(wire::read_send_goal_request(&b).unwrap(), (id, 10));
        assert!(wire::send_goal_request(&mut b, &id, 1 << 40).is_err());
        wire::send_goal_response(&mut b, true, at);
        assert_eq!(b.len(), 4 + 4 + 8, "bool, padding, Time");
        assert_eq!(wire::read_send_goal_response(&b).unwrap(), (true, at));
        let seq = [0, 1, 1, 2, 3];
        wire::feedback(&mut b, &id, &seq).unwrap();
        assert_eq!(wire::read_feedback(&b).unwrap(), (id, seq.to_vec()));
        assert!(wire::feedback(&mut b, &id, &[i64::MAX]).is_err());
        wire::get_result_response(&mut b, 4, &seq).unwrap();
        assert_eq!(
            wire::read_get_result_response(&b).unwrap(),
            (4, seq.to_vec())
        );
        wire::get_result_request(&mut b, &id);
        assert_eq!(wire::read_get_result_request(&b).unwrap(), id);
        wire::cancel_request(&mut b, &id, at);
        assert_eq!(wire::read_cancel_request(&b).unwrap(), (id, at));
        wire::cancel_response(&mut b, 0, &[(id, at), (id, at)]).unwrap();
        assert_eq!(wire::read_cancel_response(&b).unwrap(), (0, 2));
        let list = [(id, at, 2i8), ([9; 16], at, 5)];
        wire::status_array(&mut b, &list).unwrap();
        assert_eq!(wire::read_status_array(&b).unwrap(), list.to_vec());
        // truncated bytes are errors, not panics
        for n in 0..b.len() {
            assert!(wire::read_status_array(&b[..n]).is_err());
            let _ = wire::read_feedback(&b[..n]);
            let _ = wire::read_get_result_response(&b[..n]);
            let _ = wire::read_cancel_request(&b[..n]);
            let _ = wire::read_send_goal_request(&b[..n]);
        }
        // a sequence length past the end
        let mut bad = vec![0, 1, 0, 0];
        bad.extend_from_slice(&[0; 16]);
        bad.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(wire::read_feedback(&bad).is_err());
    }
}
