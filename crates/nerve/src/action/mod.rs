//! Actions: long-running goals with feedback, a result and cancellation ("drive to this
//! pose", "grasp that").
//!
//! An [`Action`] names three messages: the goal, its feedback and its result. Any
//! [`Message`] works: plain-data messages (with a slice for large data) travel in shared
//! memory without copies, `Serde<T>` carries anything serde can encode.
//!
//! How it travels, and why no result is ever lost:
//! - A client opens, before it sends any goal, two topics of its own:
//!   `<action>/_action/feedback/c<id>` and `<action>/_action/result/c<id>`. The server
//!   publishes a goal's feedback and its result only there, so feedback reaches the
//!   goal's own client and nobody else (ros2/design#193), and the result is pushed the
//!   moment the goal ends: there is no "get result" request that could come too late
//!   (rclcpp#980, #1757).
//! - Goals are sent on the `<action>/_action/goal` service: its answer is the
//!   acceptance (or a rejection with a reason). Cancels go to `<action>/_action/cancel`.
//! - The server keeps every finished goal's result for a bounded time and count, and
//!   answers `<action>/_action/result` with it: a client that missed the push (it
//!   started listening late, or asks from another process such as `nerve action`) still
//!   gets it.
//! - The state of every goal the server holds is published on `<action>/_action/status`.
//! - A client waiting on a goal checks every [`LIVENESS_CHECK`](crate::LIVENESS_CHECK)
//!   that the server lives: a server that dies mid-goal is [`ActionError::ServerGone`]
//!   within about that time.
//!
//! The server decides how goals share it with a [`GoalPolicy`]: reject new goals while
//! one is active, queue them, preempt the active one, or run several in parallel.
//!
//! ```
//! use nerve::action::{Action, ActionClient, ActionServer, GoalState};
//! use std::time::Duration;
//!
//! #[derive(Clone, Copy, nerve::Message)]
//! #[repr(C)]
//! #[message(name = "demo/CountGoal")]
//! struct CountGoal { to: u64 }
//! #[derive(Clone, Copy, nerve::Message)]
//! #[repr(C)]
//! #[message(name = "demo/CountFeedback")]
//! struct CountFeedback { at: u64 }
//! #[derive(Clone, Copy, nerve::Message)]
//! #[repr(C)]
//! #[message(name = "demo/CountResult")]
//! struct CountResult { sum: u64 }
//!
//! struct Count;
//! impl Action for Count {
//!     const TYPE_NAME: &'static str = "demo/Count";
//!     type Goal = CountGoal;
//!     type Feedback = CountFeedback;
//!     type Result = CountResult;
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = nerve::Context::from_env()?;
//! let ctx2 = ctx.clone();
//! let (ready_tx, ready) = std::sync::mpsc::channel();
//! let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
//! let done2 = done.clone();
//! // the server: its own thread and node (ports are not Send), until the caller is done
//! let server = std::thread::spawn(move || -> Result<(), nerve::action::ActionError> {
//!     let node = ctx2.node("counter").create()?;
//!     let server = ActionServer::<Count>::builder(&node, "/count").create()?;
//!     ready_tx.send(()).unwrap();
//!     while !done2.load(std::sync::atomic::Ordering::Relaxed) {
//!         server.wait(Duration::from_millis(20))?;
//!         server.handle_pending(|_goal| Ok(()))?; // accept every goal
//!         for goal in server.goals() {
//!             let mut sum = 0;
//!             for at in 1..=goal.goal().to {
//!                 sum += at;
//!                 goal.feedback(&CountFeedback { at })?;
//!             }
//!             goal.succeed(&CountResult { sum })?;
//!         }
//!     }
//!     Ok(())
//! });
//! ready.recv()?;
//! let node = ctx.node("caller").create()?;
//! let client = ActionClient::<Count>::create(&node, "/count")?;
//! client.wait_for_server(Duration::from_secs(5));
//! let goal = client.send_goal(&CountGoal { to: 4 })?;
//! let result = goal.result(Duration::from_secs(5))?;
//! assert_eq!((result.state(), result.sum), (GoalState::Succeeded, 10));
//! let feedback: Vec<u64> = std::iter::from_fn(|| goal.try_feedback()).map(|f| f.at).collect();
//! assert_eq!(feedback, [1, 2, 3, 4]);
//! done.store(true, std::sync::atomic::Ordering::Relaxed);
//! server.join().unwrap()?;
//! # Ok(()) }
//! ```

mod client;
mod error;
mod exec;
mod server;
#[cfg(test)]
mod tests;

pub use client::{ActionClient, ClientGoal, Feedback, GoalResult};
pub use error::ActionError;
pub use server::{ActionServer, ActionServerBuilder, GoalHandle, GoalRequest};

use crate::message::schema::{Field, Shape, StructShape};
use crate::message::{layout, Message, Pod};
use crate::service::Service;
use std::fmt;

/// An action type: a goal, its feedback and its result, under one name.
pub trait Action: 'static {
    /// Action type name, e.g. `nerve_msgs/NavigateToPose`.
    const TYPE_NAME: &'static str;
    /// What is asked.
    type Goal: Message;
    /// What is reported while it runs.
    type Feedback: Message;
    /// What it ends with.
    type Result: Message;
    /// Whether this type carries other action types, each server saying which it serves
    /// (ROS 2 action types carried as CDR): [`ActionServerBuilder::create`] refuses it,
    /// and the layer that knows the carried type opens the server with
    /// [`ActionServerBuilder::create_saying`], so no server of it goes unnamed.
    const CARRIER: bool = false;
}

/// Identifies a goal: the client that sent it and its number there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, nerve::Pod)]
#[repr(C)]
pub struct GoalId {
    /// The sending client (random, never 0).
    pub client: u64,
    /// The client's goal number, from 1.
    pub seq: u64,
}

impl fmt::Display for GoalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}-{}", self.client, self.seq)
    }
}

impl std::str::FromStr for GoalId {
    type Err = String;
    fn from_str(s: &str) -> Result<GoalId, String> {
        let bad = || format!("goal id {s:?}: expected <16 hex digits>-<number>");
        let (c, n) = s.split_once('-').ok_or_else(bad)?;
        Ok(GoalId {
            client: u64::from_str_radix(c, 16).map_err(|_| bad())?,
            seq: n.parse().map_err(|_| bad())?,
        })
    }
}

/// Where a goal is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[repr(u32)]
pub enum GoalState {
    /// Accepted, waiting to execute (queued).
    Accepted = 1,
    /// Executing.
    Executing = 2,
    /// Executing, and asked to cancel.
    Canceling = 3,
    /// Ended: it reached its goal.
    Succeeded = 4,
    /// Ended: the server gave up.
    Aborted = 5,
    /// Ended: canceled (by its client, or preempted by a newer goal).
    Canceled = 6,
}

impl GoalState {
    /// Whether the goal has ended.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            GoalState::Succeeded | GoalState::Aborted | GoalState::Canceled
        )
    }

    /// The state a number on the wire stands for.
    pub fn from_u32(v: u32) -> Option<GoalState> {
        Some(match v {
            1 => GoalState::Accepted,
            2 => GoalState::Executing,
            3 => GoalState::Canceling,
            4 => GoalState::Succeeded,
            5 => GoalState::Aborted,
            6 => GoalState::Canceled,
            _ => return None,
        })
    }

    /// Its name as tools print it.
    pub fn name(self) -> &'static str {
        match self {
            GoalState::Accepted => "accepted",
            GoalState::Executing => "executing",
            GoalState::Canceling => "canceling",
            GoalState::Succeeded => "succeeded",
            GoalState::Aborted => "aborted",
            GoalState::Canceled => "canceled",
        }
    }
}

impl fmt::Display for GoalState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a server shares itself between goals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoalPolicy {
    /// One goal at a time; a new goal is rejected while one is active.
    RejectNew,
    /// One goal executes; up to `max` more wait their turn; beyond that, rejected.
    Queue {
        /// Most waiting goals.
        max: usize,
    },
    /// A new goal preempts: the executing goal is asked to cancel (it sees
    /// [`GoalState::Canceling`]), a waiting one ends canceled, and the new goal executes
    /// next.
    Preempt,
    /// Up to `max` goals execute at once; beyond that, rejected.
    Parallel {
        /// Most goals at once.
        max: usize,
    },
}

/// A message of an action with its goal id and state in front: what goals, feedback and
/// results travel as. Its head is `M`'s head after 24 bytes; its slice is `M`'s.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Tagged<M> {
    /// The goal.
    pub goal: GoalId,
    /// A [`GoalState`] as a number (0 in goals).
    pub state: u32,
    /// Reserved (0).
    pub reserved: u32,
    /// The message.
    pub msg: M,
}

impl<M: Message> Tagged<M> {
    /// Fails to compile for a message whose size is not a multiple of 8 bytes (it would
    /// leave padding after it); add an explicit padding field to such a message.
    pub(crate) const NO_PADDING: () = assert!(
        core::mem::size_of::<Tagged<M>>() == 24 + core::mem::size_of::<M>(),
        "an action's goal, feedback and result must be a multiple of 8 bytes in size: add \
         an explicit padding field"
    );
}

// SAFETY: #[repr(C)]: GoalId (two u64), two u32, then M at offset 24; M is Pod (no
// padding inside it) and its alignment is at most 8 (MAX_ALIGN, asserted by TypeInfo::of),
// so no padding sits before it; NO_PADDING, evaluated in LAYOUT_HASH and so wherever the
// type is used as plain data (every byte-level use names LAYOUT_HASH), proves none
// follows it. Every bit pattern of each field is valid, so of the whole.
unsafe impl<M: Message> Pod for Tagged<M> {
    // evaluated wherever the type is used as plain data (TypeInfo, as_bytes, read_pod,
    // zeroed): a padded Tagged<M> fails to compile there
    const LAYOUT_HASH: u64 = {
        let () = Tagged::<M>::NO_PADDING;
        layout::hash_u64(
            layout::hash_str(layout::FNV_OFFSET, "nerve/action/Tagged"),
            M::LAYOUT_HASH,
        )
    };
    fn shape() -> Shape {
        Shape::Struct(StructShape {
            name: "Tagged".into(),
            size: core::mem::size_of::<Self>(),
            align: core::mem::align_of::<Self>(),
            fields: vec![
                Field {
                    name: "goal".into(),
                    offset: 0,
                    shape: GoalId::shape(),
                },
                Field {
                    name: "state".into(),
                    offset: 16,
                    shape: u32::shape(),
                },
                Field {
                    name: "reserved".into(),
                    offset: 20,
                    shape: u32::shape(),
                },
                Field {
                    name: "msg".into(),
                    offset: 24,
                    shape: M::shape(),
                },
            ],
        })
    }
}

impl<M: Message> Message for Tagged<M> {
    const TYPE_NAME: &'static str = M::TYPE_NAME;
    type Elem = M::Elem;
}

/// The answer to a goal: accepted (a rejection is a failed call carrying the reason).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, nerve::Message)]
#[repr(C)]
#[message(name = "nerve/action/GoalReply")]
pub struct GoalReply {
    /// The goal's state after acceptance ([`GoalState::Accepted`] or `Executing`).
    pub state: u32,
    /// Reserved (0).
    pub reserved: u32,
    /// When the server accepted it (wall clock, ns since the Unix epoch).
    pub stamp_ns: i64,
}

/// A cancel request for one goal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, nerve::Message)]
#[repr(C)]
#[message(name = "nerve/action/CancelRequest")]
pub struct CancelRequest {
    /// The goal.
    pub goal: GoalId,
}

/// The answer to a cancel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, nerve::Message)]
#[repr(C)]
#[message(name = "nerve/action/CancelReply")]
pub struct CancelReply {
    /// The goal's state after the request (`Canceling`, `Canceled`, or the state it
    /// ended in before the cancel came).
    pub state: u32,
    /// 1 if the cancel was taken, 0 if the goal had already ended.
    pub taken: u32,
}

/// A request for a finished goal's result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, nerve::Message)]
#[repr(C)]
#[message(name = "nerve/action/ResultRequest")]
pub struct ResultRequest {
    /// The goal.
    pub goal: GoalId,
}

/// One goal's state, as published on `<action>/_action/status`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GoalStatus {
    /// The goal.
    pub goal: (u64, u64),
    /// Its state.
    pub state: GoalState,
}

/// Every goal a server holds (active, and ended ones it keeps results of).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StatusList {
    /// The action's type name.
    pub action_type: String,
    /// The goals, oldest first.
    pub goals: Vec<GoalStatus>,
}

impl crate::message::SerdeMessage for StatusList {
    const TYPE_NAME: &'static str = "nerve/action/StatusList";
}

/// The goal service of action `A`.
pub struct GoalService<A>(std::marker::PhantomData<A>);
impl<A: Action> Service for GoalService<A> {
    const TYPE_NAME: &'static str = A::TYPE_NAME;
    type Request = Tagged<A::Goal>;
    type Response = GoalReply;
}

/// The cancel service (of every action).
pub struct CancelService;
impl Service for CancelService {
    const TYPE_NAME: &'static str = "nerve/action/Cancel";
    type Request = CancelRequest;
    type Response = CancelReply;
}

/// The result service of action `A`.
pub struct ResultService<A>(std::marker::PhantomData<A>);
impl<A: Action> Service for ResultService<A> {
    const TYPE_NAME: &'static str = A::TYPE_NAME;
    type Request = ResultRequest;
    type Response = Tagged<A::Result>;
}

/// QoS of an action's three services on both sides: 64 clients (a client per
/// process that sends goals, tools included).
pub(crate) fn service_qos() -> crate::qos::ServiceQos {
    crate::qos::ServiceQos {
        max_clients: 64,
        ..crate::qos::ServiceQos::default()
    }
}

/// QoS of an action's status topic, for the server and every reader: latched, one
/// publisher, many readers.
pub fn status_qos() -> crate::qos::Qos {
    crate::qos::Qos::latched().max_endpoints(2, 64)
}

/// The names an action's endpoints use under its name.
pub mod names {
    /// The goal service.
    pub fn goal(action: &str) -> String {
        format!("{action}/_action/goal")
    }
    /// The cancel service.
    pub fn cancel(action: &str) -> String {
        format!("{action}/_action/cancel")
    }
    /// The result service.
    pub fn result(action: &str) -> String {
        format!("{action}/_action/result")
    }
    /// The status topic.
    pub fn status(action: &str) -> String {
        format!("{action}/_action/status")
    }
    /// A client's feedback topic.
    pub fn feedback_of(action: &str, client: u64) -> String {
        format!("{action}/_action/feedback/c{client:016x}")
    }
    /// A client's result topic.
    pub fn result_of(action: &str, client: u64) -> String {
        format!("{action}/_action/result/c{client:016x}")
    }
    /// The action a goal service name belongs to, if it is one.
    pub fn action_of_goal_service(service: &str) -> Option<&str> {
        service.strip_suffix("/_action/goal")
    }
}
