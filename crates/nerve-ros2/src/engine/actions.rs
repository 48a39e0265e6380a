//! Actions both ways, on any [`RosSide`]: a Nerve action server is offered to ROS 2
//! action clients, a ROS 2 action server to Nerve action clients, with goals, feedback,
//! results, cancels and (towards ROS 2) the goal status.
//!
//! A ROS 2 action is three services and two topics under `<action>/_action/`:
//! - `send_goal` (`Name_SendGoal`: UUID + goal → accepted + stamp),
//! - `cancel_goal` (`action_msgs/srv/CancelGoal`),
//! - `get_result` (`Name_GetResult`: UUID → status + result), answered when the goal ends,
//! - `feedback` (`Name_FeedbackMessage`: UUID + feedback),
//! - `status` (`action_msgs/msg/GoalStatusArray`, transient local).
//!
//! The side reaches them as it reaches any service or topic (DDS: `rq/…Request` and
//! `rr/…Reply`, `rt/…`; rmw_zenoh: keys with the type's RIHS01 hash, which
//! [`action_types`] computes from the definitions).
//!
//! A Nerve action is the goal, cancel and result services and the status topic of
//! [`nerve::action`], with feedback and results pushed on each client's own topics.
//!
//! - A Nerve server (not a bridge's) of an action type with a ROS 2 form is offered to
//!   ROS 2: the bridge serves the ROS 2 side and passes each goal to the Nerve server
//!   through a Nerve [`ActionClient`]; feedback, results, cancels and states come back.
//! - A ROS 2 server (a `<action>/_action/send_goal` server of type
//!   `pkg/action/Name_SendGoal` in the side's graph, neither this bridge's nor another
//!   bridge's) is offered to Nerve: the bridge serves the action with a Nerve
//!   [`ActionServer`], sends each goal to ROS 2 (the ROS 2 server's answer is the Nerve
//!   acceptance or rejection), asks for its result at once (again when a network gives
//!   up on the request first), and forwards feedback, cancels and the result.
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

use crate::dds::RosQos;
use crate::engine::side::{
    Endpoint, Incoming, ReadySet, RosSide, RosType, ServiceClient, ServiceServer, TopicReader,
    TopicWriter,
};
use crate::engine::Shared;
use crate::peers::Peers;
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
use nerve_ros2_types::{Registry, SearchPath};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::PathBuf;
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

/// The service or topic `what` of action `name` (`/fib`, `send_goal` →
/// `/fib/_action/send_goal`).
fn part_name(name: &str, what: &str) -> String {
    format!("{name}/_action/{what}")
}

/// The action a ROS 2 `send_goal` server serves (`/ns/fib/_action/send_goal` →
/// `/ns/fib`).
fn action_of_send_goal(service: &str) -> Option<&str> {
    service
        .strip_suffix("/_action/send_goal")
        .filter(|s| s.len() > 1 && s.starts_with('/'))
}

/// The action type of a `send_goal` service's type (`pkg/action/Name_SendGoal` →
/// `pkg/action/Name`).
fn action_type_of_send_goal(ty: &str) -> Option<&str> {
    ty.strip_suffix("_SendGoal")
        .filter(|t| t.split('/').nth(1) == Some("action"))
}

/// The type of every action's `cancel_goal` service.
const CANCEL_GOAL: &str = "action_msgs/srv/CancelGoal";
/// The type of every action's `status` topic.
const GOAL_STATUS_ARRAY: &str = "action_msgs/msg/GoalStatusArray";

/// The definitions of the types every action uses, as ROS 2 ships them (comments left
/// out), dependencies first: where the type search path lacks them.
const STANDARD: [(&str, &str); 7] = [
    ("builtin_interfaces/msg/Time", "int32 sec\nuint32 nanosec\n"),
    ("unique_identifier_msgs/msg/UUID", "uint8[16] uuid\n"),
    (
        "service_msgs/msg/ServiceEventInfo",
        "uint8 REQUEST_SENT = 0\nuint8 REQUEST_RECEIVED = 1\nuint8 RESPONSE_SENT = 2\n\
         uint8 RESPONSE_RECEIVED = 3\nuint8 event_type\nbuiltin_interfaces/Time stamp\n\
         char[16] client_gid\nint64 sequence_number\n",
    ),
    (
        "action_msgs/msg/GoalInfo",
        "unique_identifier_msgs/UUID goal_id\nbuiltin_interfaces/Time stamp\n",
    ),
    (
        "action_msgs/msg/GoalStatus",
        "int8 STATUS_UNKNOWN = 0\nint8 STATUS_ACCEPTED = 1\nint8 STATUS_EXECUTING = 2\n\
         int8 STATUS_CANCELING = 3\nint8 STATUS_SUCCEEDED = 4\nint8 STATUS_CANCELED = 5\n\
         int8 STATUS_ABORTED = 6\nGoalInfo goal_info\nint8 status\n",
    ),
    (
        "action_msgs/msg/GoalStatusArray",
        "GoalStatus[] status_list\n",
    ),
    (
        "action_msgs/srv/CancelGoal",
        "GoalInfo goal_info\n---\nint8 ERROR_NONE=0\nint8 ERROR_REJECTED=1\n\
         int8 ERROR_UNKNOWN_GOAL_ID=2\nint8 ERROR_GOAL_TERMINATED=3\nint8 return_code\n\
         GoalInfo[] goals_canceling\n",
    ),
];

/// The definition of each of the Fibonacci actions ([`FIBONACCI_TYPES`]).
const FIBONACCI_ACTION: &str = "int32 order\n---\nint32[] sequence\n---\nint32[] sequence\n";

/// The [`STANDARD`] definitions and `more` (a type and its text) in one registry.
fn standard_registry(more: Option<(&str, &str)>) -> Option<Registry> {
    let mut r = Registry::new();
    for (name, text) in STANDARD.iter().copied().chain(more) {
        r.add_interface_text(name, text).ok()?;
    }
    Some(r)
}

/// The RIHS01 hash of `ty`: from its definition on `search`, else from `fallback`.
fn hash_of(ty: &str, search: &SearchPath, fallback: Option<&Registry>) -> Option<String> {
    let mut r = Registry::new();
    let found = r.load(ty, search).ok().and_then(|_| r.type_hash(ty).ok());
    found
        .or_else(|| fallback?.type_hash(ty).ok())
        .map(|h| h.to_string())
}

/// The ROS 2 types of one action's services and topics, with their RIHS01 hashes where
/// the definitions are known (rmw_zenoh puts them in its keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActionTypes {
    /// `pkg/action/Name_SendGoal`.
    pub(crate) send_goal: RosType,
    /// `action_msgs/srv/CancelGoal`.
    pub(crate) cancel_goal: RosType,
    /// `pkg/action/Name_GetResult`.
    pub(crate) get_result: RosType,
    /// `pkg/action/Name_FeedbackMessage`.
    pub(crate) feedback: RosType,
    /// `action_msgs/msg/GoalStatusArray`.
    pub(crate) status: RosType,
}

/// The types of action type `action` (`pkg/action/Name`): its own hashes from `pass` (a
/// type carried as CDR) or from its definition on `search`, else (the Fibonacci actions)
/// from the definition they all share; `action_msgs`' from `search`, else from
/// [`STANDARD`].
pub(crate) fn action_types(
    action: &str,
    pass: Option<&ActionPass>,
    search: &[PathBuf],
) -> ActionTypes {
    let mut path = SearchPath::new();
    for d in search {
        path.push_dir(d.clone());
    }
    let fibonacci = FIBONACCI_TYPES
        .contains(&action)
        .then_some((action, FIBONACCI_ACTION));
    let fallback = standard_registry(fibonacci);
    let own = |suffix: &str| {
        let name = format!("{action}{suffix}");
        let hash = match pass {
            Some(p) => p.registry().type_hash(&name).ok().map(|h| h.to_string()),
            None => hash_of(&name, &path, fallback.as_ref()),
        };
        RosType { name, hash }
    };
    let standard = |name: &str| RosType {
        name: name.to_string(),
        hash: hash_of(name, &path, fallback.as_ref()),
    };
    ActionTypes {
        send_goal: own("_SendGoal"),
        cancel_goal: standard(CANCEL_GOAL),
        get_result: own("_GetResult"),
        feedback: own("_FeedbackMessage"),
        status: standard(GOAL_STATUS_ARRAY),
    }
}

/// The QoS of the status topic the bridge writes: deeper than ROS 2's own (1), so a
/// quick cancel's `canceling` is not overwritten by the `canceled` that follows before
/// it was delivered.
const STATUS_QOS: RosQos = RosQos {
    reliable: true,
    transient_local: true,
    depth: 10,
};

/// How a request of a server answers.
type Req<S> = <<S as RosSide>::Server as ServiceServer>::Request;
/// What names a client's call.
type Call<S> = <<S as RosSide>::Client as ServiceClient>::Call;

/// What the thread reports through.
struct Ctx<'a, S: RosSide> {
    shared: &'a Shared<S>,
    peers: Arc<Peers>,
}

impl<S: RosSide> Ctx<'_, S> {
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

    /// Counts something not delivered and says why.
    fn dropped(&self, topic: &str, reason: String) {
        self.shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
        self.shared.event(Event::Dropped {
            topic: topic.to_string(),
            reason,
        });
    }

    /// Counts `n` requests or samples a server or reader of the side dropped itself.
    fn lost(&self, topic: &str, n: u64, what: &str) {
        if n > 0 {
            self.shared.stats.dropped.fetch_add(n, Ordering::Relaxed);
            self.shared.event(Event::Dropped {
                topic: topic.to_string(),
                reason: format!("{n} {what} dropped on arrival: the bridge's queue was full"),
            });
        }
    }

    /// Answers a request; a failure is counted and named.
    fn reply(&self, name: &str, server: &mut S::Server, to: Req<S>, cdr: Vec<u8>, what: &str) {
        if let Err(e) = server.reply(to, cdr) {
            self.dropped(name, format!("{what} not sent to ROS 2: {e}"));
        }
    }

    /// Writes on a topic; a failure is counted and named. Whether it was sent.
    fn write(&self, name: &str, writer: &mut S::Writer, cdr: Vec<u8>, what: &str) -> bool {
        match writer.write(cdr) {
            Ok(()) => true,
            Err(e) => {
                self.dropped(name, format!("{what} not sent to ROS 2: {e}"));
                false
            }
        }
    }
}

/// A goal of a ROS 2 client, sent on to the Nerve server.
struct RosGoal<A: Action, R> {
    goal: ClientGoal<A>,
    stamp: Stamp,
    state: GoalState,
    /// `get_result` requests waiting for the result.
    waiting: Vec<R>,
}

/// A finished goal's result, kept for late `get_result` requests.
struct Done<R: Message> {
    id: Uuid,
    status: i8,
    result: Option<Msg<R>>,
    at: Instant,
}

/// A Nerve action server offered to ROS 2 clients.
struct OfferedToRos<S: RosSide, F: Form> {
    name: String,
    form: F,
    client: ActionClient<F::A>,
    goal: S::Server,
    cancel: S::Server,
    result: S::Server,
    feedback: S::Writer,
    status: S::Writer,
    goals: HashMap<Uuid, RosGoal<F::A, Req<S>>>,
    done: VecDeque<Done<<F::A as Action>::Result>>,
}

/// A goal of a Nerve client, sent on to the ROS 2 server.
struct NerveGoal<A: Action, C> {
    handle: GoalHandle<A>,
    /// The `get_result` request sent for it.
    result_call: C,
    /// When it was sent.
    asked: Instant,
    cancel_sent: bool,
}

/// A `get_result` request that failed sooner than this after it was sent ends its goal;
/// one that failed later (a network that gives up on requests, rmw_zenoh's queries after
/// [`crate::services::CALL_TIMEOUT`]) is sent again.
const ASK_AGAIN_AFTER: Duration = Duration::from_secs(1);

/// A ROS 2 action server offered to Nerve clients.
struct OfferedToNerve<S: RosSide, F: Form> {
    name: String,
    form: F,
    server: ActionServer<F::A>,
    goal: S::Client,
    cancel: S::Client,
    result: S::Client,
    feedback: S::Reader,
    goals: HashMap<Uuid, NerveGoal<F::A, Call<S>>>,
}

/// A bridged action, whatever its form.
trait Bridged<S: RosSide> {
    /// Moves what waits on both sides.
    fn pump(&mut self, ctx: &Ctx<'_, S>, scratch: &mut Vec<u8>);
    /// The other side went away: every goal ends aborted.
    fn abort_all(&mut self, ctx: &Ctx<'_, S>, scratch: &mut Vec<u8>);
    /// Whether the Nerve server lives (for a Nerve server offered to ROS 2).
    fn server_alive(&self) -> bool {
        true
    }
}

/// A ROS 2 action server offered to Nerve: the graph's `send_goal` server it was made
/// for (another type or hash is another server), and the bridged action.
type ToNerve<S> = (Endpoint, Box<dyn Bridged<S>>);

/// The actions half of a bridge (one thread).
pub(crate) struct Actions<S: RosSide> {
    shared: Arc<Shared<S>>,
    config: BridgeConfig,
    node: Node,
    /// Owns the readers of feedback (each is polled every tick, not waited on).
    ready: S::Ready,
    tokens: Vec<usize>,
    /// Nerve servers offered to ROS 2, by action name.
    to_ros: BTreeMap<String, Box<dyn Bridged<S>>>,
    /// ROS 2 servers offered to Nerve, by action name.
    to_nerve: BTreeMap<String, ToNerve<S>>,
    /// ROS 2 action types carried as CDR, by type (a failure is reported per action).
    passes: HashMap<String, Arc<ActionPass>>,
    /// Names that failed (reported once, tried again later).
    failures: crate::engine::worker::Failures,
    scratch: Vec<u8>,
}

impl<S: RosSide> Actions<S> {
    /// The half, made on its own thread with its own Nerve node.
    pub(crate) fn new(
        shared: Arc<Shared<S>>,
        config: BridgeConfig,
        node: Node,
    ) -> Result<Actions<S>, BridgeError> {
        Ok(Actions {
            ready: shared.side.ready_set()?,
            tokens: Vec::new(),
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

    fn pump(&mut self) {
        // the readers are polled below: what the set noted is not needed
        self.ready.wait(Duration::ZERO, &mut self.tokens);
        self.tokens.clear();
        let ctx = Ctx {
            shared: &self.shared,
            peers: self.shared.peers(),
        };
        for a in self.to_ros.values_mut() {
            a.pump(&ctx, &mut self.scratch);
        }
        for (_, a) in self.to_nerve.values_mut() {
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
        let peers = self.shared.peers();
        // a standby bridge forwards nothing
        let primary = self.shared.side.primary(&peers);
        let servers = if primary {
            self.shared.side.graph(&peers).servers
        } else {
            Vec::new()
        };
        // ROS 2 action servers (neither ours nor bridges'): their send_goal services
        let mut ros_servers: BTreeMap<String, (String, Endpoint)> = BTreeMap::new();
        for e in &servers {
            let (Some(name), Some(ty)) = (
                action_of_send_goal(&e.name),
                action_type_of_send_goal(&e.ros_type),
            ) else {
                continue;
            };
            if self.config.admits(name) {
                ros_servers
                    .entry(name.to_string())
                    .or_insert_with(|| (ty.to_string(), e.clone()));
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
        // a ROS 2 server that went away (or changed its type): its Nerve goals end
        // aborted, its server goes
        let gone: Vec<String> = self
            .to_nerve
            .iter()
            .filter(|(n, (was, _))| {
                ros_servers
                    .get(*n)
                    .is_none_or(|(_, e)| e.ros_type != was.ros_type || e.type_hash != was.type_hash)
            })
            .map(|(n, _)| n.clone())
            .collect();
        let ctx = Ctx {
            shared: &self.shared,
            peers: peers.clone(),
        };
        for n in gone {
            if let Some((_, mut a)) = self.to_nerve.remove(&n) {
                a.abort_all(&ctx, &mut self.scratch);
            }
        }
        for (name, (ty, send_goal)) in &ros_servers {
            if self.to_nerve.contains_key(name) || self.failed_lately(name) {
                continue;
            }
            let offered = if FIBONACCI_TYPES.contains(&ty.as_str()) {
                let form = FibonacciForm {
                    ros_type: ty.clone(),
                };
                self.offer_to_nerve(name, form, None, send_goal, &servers)
            } else {
                self.pass(ty).and_then(|pass| {
                    let form = CdrForm(pass.clone());
                    self.offer_to_nerve(name, form, Some(&pass), send_goal, &servers)
                })
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
                    self.to_nerve.insert(name.clone(), (send_goal.clone(), a));
                }
                Err(e) => self.report(name, e.to_string()),
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
                self.offer_to_ros(name, form, None)
                    .map(|a| (a, OFFERED_FIBONACCI.to_string()))
            } else if *ty == carried {
                // the server says its ROS 2 type on its type topic (not yet: later)
                match self.announced(name) {
                    None => continue,
                    Some(pass) => pass.and_then(|pass| {
                        let ros = pass.name().to_string();
                        self.offer_to_ros(name, CdrForm(pass.clone()), Some(&pass))
                            .map(|a| (a, ros))
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
        let ctx = Ctx {
            shared: &self.shared,
            peers,
        };
        for n in gone {
            if let Some(mut a) = self.to_ros.remove(&n) {
                a.abort_all(&ctx, &mut self.scratch);
            }
        }
        self.failures
            .retain(|n| live.contains(n) || ros_servers.contains_key(n));
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
        let mut search = SearchPath::new();
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

    /// Serves Nerve action `name` to ROS 2 clients.
    fn offer_to_ros<F: Form>(
        &mut self,
        name: &str,
        form: F,
        pass: Option<&ActionPass>,
    ) -> Result<Box<dyn Bridged<S>>, BridgeError> {
        let client = ActionClient::<F::A>::create(&self.node, name)
            .map_err(|e| BridgeError::Nerve(e.to_string()))?;
        client.set_accept_timeout(NERVE_ACCEPT_TIMEOUT);
        let types = action_types(form.ros_type(), pass, &self.config.types);
        let side = &self.shared.side;
        let q = RosQos::default();
        Ok(Box::new(OfferedToRos::<S, F> {
            name: name.to_string(),
            form,
            client,
            goal: side.server(&part_name(name, "send_goal"), &types.send_goal)?,
            cancel: side.server(&part_name(name, "cancel_goal"), &types.cancel_goal)?,
            result: side.server(&part_name(name, "get_result"), &types.get_result)?,
            feedback: side.writer(&part_name(name, "feedback"), &types.feedback, q)?,
            status: side.writer(&part_name(name, "status"), &types.status, STATUS_QOS)?,
            goals: HashMap::new(),
            done: VecDeque::new(),
        }))
    }

    /// Serves ROS 2 action `name` (whose `send_goal` server is `send_goal`; `servers`:
    /// the graph's servers) in Nerve; with the Nerve action type it is served as.
    fn offer_to_nerve<F: Form>(
        &mut self,
        name: &str,
        form: F,
        pass: Option<&ActionPass>,
        send_goal: &Endpoint,
        servers: &[Endpoint],
    ) -> Result<(Box<dyn Bridged<S>>, &'static str), BridgeError> {
        let types = action_types(form.ros_type(), pass, &self.config.types);
        // the ROS 2 server's cancel_goal and get_result as the graph shows them (their
        // hashes); not yet seen: as its send_goal says (no hash where it has none)
        let server_of = |what: &str, ty: &RosType| {
            let service = part_name(name, what);
            servers
                .iter()
                .find(|e| e.name == service && e.ros_type == ty.name)
                .cloned()
                .unwrap_or_else(|| Endpoint {
                    name: service,
                    ros_type: ty.name.clone(),
                    qos: send_goal.qos,
                    keyed: false,
                    type_hash: send_goal.type_hash.as_ref().and(ty.hash.clone()),
                })
        };
        let cancel_server = server_of("cancel_goal", &types.cancel_goal);
        let result_server = server_of("get_result", &types.get_result);
        // a type carried as CDR says which it is, for as long as the server serves
        let server = ActionServer::<F::A>::builder(&self.node, name)
            .policy(GoalPolicy::Parallel { max: MAX_GOALS })
            .create_saying(|node, action| {
                form.announce(node, action)
                    .map(|p| Box::new(p) as Box<dyn std::any::Any>)
            })
            .map_err(|e| BridgeError::Nerve(e.to_string()))?;
        let side = &self.shared.side;
        let a = OfferedToNerve::<S, F> {
            name: name.to_string(),
            form,
            server,
            goal: side.client(&send_goal.name, &types.send_goal, send_goal)?,
            cancel: side.client(&cancel_server.name, &types.cancel_goal, &cancel_server)?,
            result: side.client(&result_server.name, &types.get_result, &result_server)?,
            feedback: side.reader(
                &mut self.ready,
                0,
                &part_name(name, "feedback"),
                &types.feedback,
                RosQos::default(),
                false,
            )?,
            goals: HashMap::new(),
        };
        Ok((Box::new(a), <F::A as Action>::TYPE_NAME))
    }
}

impl<S: RosSide, F: Form> Bridged<S> for OfferedToRos<S, F> {
    fn pump(&mut self, ctx: &Ctx<'_, S>, scratch: &mut Vec<u8>) {
        OfferedToRos::pump(self, ctx, scratch)
    }
    fn abort_all(&mut self, ctx: &Ctx<'_, S>, scratch: &mut Vec<u8>) {
        OfferedToRos::abort_all(self, ctx, scratch)
    }
    fn server_alive(&self) -> bool {
        self.client.server_alive()
    }
}

impl<S: RosSide, F: Form> Bridged<S> for OfferedToNerve<S, F> {
    fn pump(&mut self, ctx: &Ctx<'_, S>, scratch: &mut Vec<u8>) {
        OfferedToNerve::pump(self, ctx, scratch)
    }
    fn abort_all(&mut self, _: &Ctx<'_, S>, _: &mut Vec<u8>) {
        OfferedToNerve::abort_all(self)
    }
}

impl<S: RosSide, F: Form> OfferedToRos<S, F> {
    fn pump(&mut self, ctx: &Ctx<'_, S>, scratch: &mut Vec<u8>) {
        let peers = ctx.peers.clone();
        let mut changed = false;
        let mut finished: Vec<(Uuid, Stamp, i8)> = Vec::new();
        // goals from ROS 2 clients (not bridges')
        while let Some((call, cdr)) = self.goal.take(&peers) {
            let accepted = match self.form.read_send_goal_request(&cdr) {
                Ok((id, goal)) => self.accept(ctx, id, goal),
                Err(e) => {
                    ctx.malformed(&self.name, format!("a send_goal request dropped: {e}"));
                    None
                }
            };
            changed |= accepted.is_some();
            wire::send_goal_response(scratch, accepted.is_some(), accepted.unwrap_or_default());
            let cdr = std::mem::take(scratch);
            ctx.reply(
                &self.name,
                &mut self.goal,
                call,
                cdr,
                "a send_goal response",
            );
        }
        ctx.lost(&self.name, self.goal.lost(), "send_goal requests");
        if std::mem::take(&mut changed) {
            self.publish_status(ctx, &[], scratch);
        }
        // cancels
        while let Some((call, cdr)) = self.cancel.take(&peers) {
            let (code, canceling) = match wire::read_cancel_request(&cdr) {
                Ok((id, before)) => self.cancel(ctx, id, before),
                Err(e) => {
                    ctx.malformed(&self.name, format!("a cancel_goal request dropped: {e}"));
                    (cancel_code::REJECTED, Vec::new())
                }
            };
            changed |= !canceling.is_empty();
            match wire::cancel_response(scratch, code, &canceling) {
                Ok(()) => {
                    let cdr = std::mem::take(scratch);
                    ctx.reply(
                        &self.name,
                        &mut self.cancel,
                        call,
                        cdr,
                        "a cancel_goal response",
                    );
                }
                Err(e) => ctx.malformed(&self.name, format!("a cancel_goal response: {e}")),
            }
        }
        ctx.lost(&self.name, self.cancel.lost(), "cancel_goal requests");
        // each change is published as it happens (a goal may end in this same pump)
        if std::mem::take(&mut changed) {
            self.publish_status(ctx, &[], scratch);
        }
        // result requests: answered when the goal ends (at once if it has)
        self.done.retain(|d| d.at.elapsed() < DONE_TTL);
        while let Some((call, cdr)) = self.result.take(&peers) {
            let id = match wire::read_get_result_request(&cdr) {
                Ok(id) => id,
                Err(e) => {
                    ctx.malformed(&self.name, format!("a get_result request dropped: {e}"));
                    continue;
                }
            };
            if let Some(g) = self.goals.get_mut(&id) {
                if g.waiting.len() < WAITERS_PER_GOAL {
                    g.waiting.push(call);
                } else {
                    ctx.dropped(
                        &self.name,
                        format!("a get_result request: {WAITERS_PER_GOAL} wait for the goal"),
                    );
                }
                continue;
            }
            // a finished goal's result, or STATUS_UNKNOWN for a goal never seen
            let (status, result) = match self.done.iter().find(|d| d.id == id) {
                Some(d) => (d.status, d.result.as_ref()),
                None => (0, None),
            };
            match self.form.get_result_response(scratch, status, result) {
                Ok(()) => {
                    let cdr = std::mem::take(scratch);
                    ctx.reply(&self.name, &mut self.result, call, cdr, "a result");
                }
                Err(e) => ctx.malformed(&self.name, format!("result not sent to ROS 2: {e}")),
            }
        }
        ctx.lost(&self.name, self.result.lost(), "get_result requests");
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
                        let cdr = std::mem::take(scratch);
                        if ctx.write(&self.name, &mut self.feedback, cdr, "feedback") {
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
            self.publish_status(ctx, &[], scratch);
        }
        for (id, state, result) in ended {
            if let Some(stamp) = self.finish(ctx, id, state, result, scratch) {
                finished.push((id, stamp, ros_status(state)));
                changed = true;
            }
        }
        if changed {
            self.publish_status(ctx, &finished, scratch);
        }
    }

    /// Passes a ROS 2 goal to the Nerve server; its acceptance stamp if it was accepted.
    fn accept(&mut self, ctx: &Ctx<'_, S>, id: Uuid, goal: GoalMsg<F::A>) -> Option<Stamp> {
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
    fn cancel(&mut self, ctx: &Ctx<'_, S>, id: Uuid, before: Stamp) -> (i8, Vec<(Uuid, Stamp)>) {
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
        ctx: &Ctx<'_, S>,
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
            ctx.reply(
                &self.name,
                &mut self.result,
                call,
                scratch.clone(),
                "a result",
            );
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
    fn publish_status(
        &mut self,
        ctx: &Ctx<'_, S>,
        finished: &[(Uuid, Stamp, i8)],
        scratch: &mut Vec<u8>,
    ) {
        let mut list: Vec<(Uuid, Stamp, i8)> = self
            .goals
            .iter()
            .map(|(id, g)| (*id, g.stamp, ros_status(g.state)))
            .chain(finished.iter().copied())
            .collect();
        list.sort_by_key(|(id, stamp, _)| (*stamp, *id));
        match wire::status_array(scratch, &list) {
            Ok(()) => {
                let cdr = std::mem::take(scratch);
                ctx.write(&self.name, &mut self.status, cdr, "the goal status");
            }
            Err(e) => ctx.malformed(&self.name, format!("the goal status: {e}")),
        }
    }

    /// The Nerve server went away: every goal ends aborted.
    fn abort_all(&mut self, ctx: &Ctx<'_, S>, scratch: &mut Vec<u8>) {
        let aborted = ros_status(GoalState::Aborted);
        let ids: Vec<Uuid> = self.goals.keys().copied().collect();
        let finished: Vec<(Uuid, Stamp, i8)> = ids
            .into_iter()
            .filter_map(|id| {
                let stamp = self.finish(ctx, id, GoalState::Aborted, None, scratch)?;
                Some((id, stamp, aborted))
            })
            .collect();
        if !finished.is_empty() {
            self.publish_status(ctx, &finished, scratch);
        }
    }
}

impl<S: RosSide, F: Form> OfferedToNerve<S, F> {
    fn pump(&mut self, ctx: &Ctx<'_, S>, scratch: &mut Vec<u8>) {
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
            let result_call = match self.result.call(std::mem::take(scratch)) {
                Ok(call) => call,
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
                    asked: Instant::now(),
                    cancel_sent: false,
                },
            );
        }
        // cancels Nerve clients asked for
        for (id, g) in self.goals.iter_mut() {
            if g.handle.is_canceling() && !g.cancel_sent {
                g.cancel_sent = true;
                wire::cancel_request(scratch, id, Stamp::default());
                if let Err(e) = self.cancel.call(std::mem::take(scratch)) {
                    ctx.dropped(&self.name, format!("cancel not sent to ROS 2: {e}"));
                }
            }
        }
        while let Some((_, answer)) = self.cancel.take() {
            match answer {
                Ok(cdr) => {
                    if let Err(e) = wire::read_cancel_response(&cdr) {
                        ctx.malformed(&self.name, format!("a cancel_goal response: {e}"));
                    }
                }
                Err(e) => ctx.dropped(&self.name, format!("a cancel_goal request: {e}")),
            }
        }
        // feedback of our goals (the ROS 2 server's other clients' goals are not ours)
        loop {
            let Incoming {
                cdr, from_bridge, ..
            } = match self.feedback.take(&ctx.peers) {
                Ok(Some(s)) => s,
                Ok(None) => break,
                Err(reason) => {
                    ctx.malformed(&self.name, format!("feedback dropped: {reason}"));
                    continue;
                }
            };
            if from_bridge {
                continue;
            }
            match self.form.read_feedback(&cdr) {
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
        ctx.lost(&self.name, self.feedback.lost(), "feedback messages");
        // results
        while let Some((call, answer)) = self.result.take() {
            let Some(id) = self
                .goals
                .iter()
                .find(|(_, g)| g.result_call == call)
                .map(|(id, _)| *id)
            else {
                continue; // an answer to a request given up
            };
            let (state, result) = match answer {
                Ok(cdr) => match self.form.read_get_result_response(&cdr) {
                    Ok((status, r)) => match nerve_state(status) {
                        Some(s @ (GoalState::Succeeded | GoalState::Canceled)) => (s, Some(r)),
                        _ => (GoalState::Aborted, Some(r)),
                    },
                    Err(e) => {
                        ctx.malformed(&self.name, format!("a get_result response: {e}"));
                        (GoalState::Aborted, None)
                    }
                },
                Err(e) => {
                    // a request the network gave up on while the goal ran: asked again
                    let again = self
                        .goals
                        .get(&id)
                        .is_some_and(|g| g.asked.elapsed() >= ASK_AGAIN_AFTER);
                    if again {
                        wire::get_result_request(scratch, &id);
                        match self.result.call(std::mem::take(scratch)) {
                            Ok(call) => {
                                if let Some(g) = self.goals.get_mut(&id) {
                                    g.result_call = call;
                                    g.asked = Instant::now();
                                }
                                continue;
                            }
                            Err(e) => ctx.dropped(
                                &self.name,
                                format!("get_result not sent to ROS 2 again: {e}"),
                            ),
                        }
                    } else {
                        ctx.dropped(&self.name, format!("the goal's result: {e}"));
                    }
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
        ctx: &Ctx<'_, S>,
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
        let call = self
            .goal
            .call(buf)
            .map_err(|e| format!("the goal was not sent to ROS 2: {e}"))?;
        let deadline = Instant::now() + ACCEPT_TIMEOUT;
        loop {
            while let Some((answered, answer)) = self.goal.take() {
                if answered != call {
                    continue; // an answer that came too late
                }
                let cdr = answer
                    .map_err(|e| format!("the ROS 2 action server did not take the goal: {e}"))?;
                return match wire::read_send_goal_response(&cdr) {
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
                if let Err(e) = self.cancel.call(buf) {
                    ctx.dropped(&self.name, format!("cancel not sent to ROS 2: {e}"));
                }
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

impl<S: RosSide> crate::engine::worker::Worker for Actions<S> {
    type Side = S;
    fn shared(&self) -> &Shared<S> {
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
    fn names_and_types_map_from_the_graph() {
        assert_eq!(
            action_of_send_goal("/ns/fib/_action/send_goal"),
            Some("/ns/fib")
        );
        assert_eq!(action_of_send_goal("/_action/send_goal"), None);
        assert_eq!(action_of_send_goal("/ns/fib"), None);
        assert_eq!(
            action_type_of_send_goal("test_msgs/action/Fibonacci_SendGoal"),
            Some("test_msgs/action/Fibonacci")
        );
        assert_eq!(action_type_of_send_goal("pkg/srv/Foo_SendGoal"), None);
        assert_eq!(
            part_name("/f", "get_result"),
            "/f/_action/get_result".to_string()
        );
    }

    /// The hashes ROS 2 computes (recorded from Kilted's `.json` type descriptions), with
    /// no definitions on the search path and with them there.
    #[test]
    fn action_types_carry_ros2s_hashes() {
        let fixtures = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../nerve-ros2-types/tests/fixtures/share");
        let want = |name: &str, hash: &str| RosType {
            name: name.into(),
            hash: Some(hash.into()),
        };
        let cancel = want(
            CANCEL_GOAL,
            "RIHS01_573d8b0a534451d7bc2ac8c5ffde8ac14b8593b7001175d0cd6516dcbeb8689a",
        );
        let status = want(
            GOAL_STATUS_ARRAY,
            "RIHS01_6c1684b00f177d37438febe6e709fc4e2b0d4248dca4854946f9ed8b30cda83e",
        );
        let fibonacci = ActionTypes {
            send_goal: want(
                "test_msgs/action/Fibonacci_SendGoal",
                "RIHS01_d807633803e38e164276573cd97e9fbd71e109c290bbf4cc312a0a1c9da7bbd9",
            ),
            cancel_goal: cancel.clone(),
            get_result: want(
                "test_msgs/action/Fibonacci_GetResult",
                "RIHS01_5d30fdeb21d20e117aa5f36c7b4f0b6874f1a8cf7a9c038d58f1156c5737b209",
            ),
            feedback: want(
                "test_msgs/action/Fibonacci_FeedbackMessage",
                "RIHS01_37487bae8cea358366b97003c1ef1ca7ce7c08df36f9e8cca496624226aee64e",
            ),
            status: status.clone(),
        };
        let t = "test_msgs/action/Fibonacci";
        assert_eq!(action_types(t, None, &[]), fibonacci);
        assert_eq!(
            action_types(t, None, std::slice::from_ref(&fixtures)),
            fibonacci
        );
        let mut search = SearchPath::new();
        search.push_dir(fixtures.clone());
        let pass = ActionPass::load(t, &search).unwrap();
        assert_eq!(action_types(t, Some(&pass), &[]), fibonacci);
        // an action without a definition: its own types have no hash
        let unknown = action_types("pkg/action/Unknown", None, &[fixtures]);
        assert_eq!(unknown.send_goal.hash, None);
        assert_eq!(unknown.feedback.name, "pkg/action/Unknown_FeedbackMessage");
        assert_eq!((unknown.cancel_goal, unknown.status), (cancel, status));
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
