//! Type-erased clients and servers of the built-in action types, for bindings (Python,
//! C) that know an action only by its type name: goals, feedback and results cross as
//! message payloads (head, then slice elements), one copy each way. A ROS 2 action type
//! carried as CDR is [`Ros2Action`] here; the binding checks its messages against the
//! ROS 2 definition (`nerve_ros2_map::action`).

use crate::action::{EchoAction, Fibonacci};
use crate::ros2::Ros2Action;
use nerve::action::{
    Action, ActionClient, ActionError, ActionServer, ClientGoal, GoalHandle, GoalPolicy, GoalState,
};
use nerve::message::{as_bytes, elems_offset, read_pod, Message};
use std::time::Duration;

/// Why an erased action call failed.
#[derive(Debug, thiserror::Error)]
pub enum ErasedError {
    /// The action type is not built in.
    #[error("unknown action type {name:?}; built in: {known}")]
    UnknownType {
        /// The name asked for.
        name: String,
        /// The built-in names.
        known: String,
    },
    /// A payload does not fit its message type.
    #[error("{0}")]
    Payload(String),
    /// The action layer failed.
    #[error(transparent)]
    Action(#[from] ActionError),
}

/// A message's payload (head, padding, elements), as bindings hold it.
pub fn payload<M: Message>(head: &M, elems: &[M::Elem]) -> Vec<u8> {
    let off = elems_offset::<M>();
    let esize = std::mem::size_of::<M::Elem>();
    let mut out = vec![
        0u8;
        if esize == 0 {
            std::mem::size_of::<M>()
        } else {
            off + std::mem::size_of_val(elems)
        }
    ];
    out[..std::mem::size_of::<M>()].copy_from_slice(as_bytes(head));
    for (i, e) in elems.iter().enumerate() {
        out[off + i * esize..off + (i + 1) * esize].copy_from_slice(as_bytes(e));
    }
    out
}

/// The head and element count of a payload of `M`, or why it does not fit.
fn parse<M: Message>(bytes: &[u8]) -> Result<(M, usize), ErasedError> {
    let head = read_pod::<M>(bytes).ok_or_else(|| {
        ErasedError::Payload(format!(
            "{} bytes are too short for a {} ({} bytes)",
            bytes.len(),
            M::TYPE_NAME,
            std::mem::size_of::<M>()
        ))
    })?;
    let esize = std::mem::size_of::<M::Elem>();
    if esize == 0 {
        return Ok((head, 0));
    }
    let rest = bytes.len().saturating_sub(elems_offset::<M>());
    if !rest.is_multiple_of(esize) {
        return Err(ErasedError::Payload(format!(
            "{} bytes do not hold whole {} elements",
            bytes.len(),
            M::TYPE_NAME
        )));
    }
    Ok((head, rest / esize))
}

/// Copies the elements of a payload into `dst`.
fn fill_elems<M: Message>(bytes: &[u8], dst: &mut [M::Elem]) {
    let off = elems_offset::<M>();
    for (i, d) in dst.iter_mut().enumerate() {
        let esize = std::mem::size_of::<M::Elem>();
        if let Some(e) = bytes.get(off + i * esize..).and_then(read_pod::<M::Elem>) {
            *d = e;
        }
    }
}

/// A client of an action known by name.
pub trait ErasedClient {
    /// The action's resolved name (namespace and remap rules applied).
    fn name(&self) -> String;
    /// Waits up to `t` for a server; whether one is there.
    fn wait_for_server(&self, t: Duration) -> bool;
    /// Sends a goal given as its payload and waits for its acceptance.
    fn send_goal(&self, goal: &[u8]) -> Result<Box<dyn ErasedGoal>, ErasedError>;
}

/// A goal a client sent.
pub trait ErasedGoal {
    /// The goal's id.
    fn id(&self) -> String;
    /// The next feedback payload that arrived.
    fn try_feedback(&self) -> Option<Vec<u8>>;
    /// Waits up to `t` for the result: its state and payload, or None.
    fn result(&self, t: Duration) -> Result<Option<(GoalState, Vec<u8>)>, ActionError>;
    /// Asks the server to cancel it; its state after the request.
    fn cancel(&self) -> Result<GoalState, ActionError>;
}

impl<A: Action> ErasedClient for ActionClient<A> {
    fn name(&self) -> String {
        ActionClient::name(self).to_string()
    }
    fn wait_for_server(&self, t: Duration) -> bool {
        ActionClient::wait_for_server(self, t)
    }
    fn send_goal(&self, goal: &[u8]) -> Result<Box<dyn ErasedGoal>, ErasedError> {
        let (head, n) = parse::<A::Goal>(goal)?;
        let g = self.send_goal_with(n, |h, e| {
            *h = head;
            fill_elems::<A::Goal>(goal, e);
        })?;
        Ok(Box::new(g))
    }
}

impl<A: Action> ErasedGoal for ClientGoal<A> {
    fn id(&self) -> String {
        ClientGoal::id(self).to_string()
    }
    fn try_feedback(&self) -> Option<Vec<u8>> {
        ClientGoal::try_feedback(self).map(|f| payload::<A::Feedback>(&f, f.elems()))
    }
    fn result(&self, t: Duration) -> Result<Option<(GoalState, Vec<u8>)>, ActionError> {
        match ClientGoal::result(self, t) {
            Ok(r) => Ok(Some((r.state(), payload::<A::Result>(&r, r.elems())))),
            Err(ActionError::Timeout { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
    fn cancel(&self) -> Result<GoalState, ActionError> {
        ClientGoal::cancel(self)
    }
}

/// A goal handle handed to an acceptance callback.
pub type OnAccepted<'a> = &'a mut dyn FnMut(Box<dyn ErasedServerGoal>);

/// A server of an action known by name.
pub trait ErasedServer {
    /// The action's resolved name (namespace and remap rules applied).
    fn name(&self) -> String;
    /// Waits up to `t` for a goal, cancel or result request.
    fn wait(&self, t: Duration) -> Result<bool, ActionError>;
    /// Handles waiting requests: `on_goal` accepts (Ok) or rejects (the reason) each
    /// new goal's payload, `on_accepted` gets each accepted goal; returns how many
    /// requests were handled.
    fn handle_pending(
        &self,
        on_goal: &mut dyn FnMut(&[u8]) -> Result<(), String>,
        on_accepted: OnAccepted<'_>,
    ) -> Result<usize, ActionError>;
    /// The goals it holds now.
    fn goals(&self) -> Vec<Box<dyn ErasedServerGoal>>;
    /// The goal, cancel and result services, for the executor's wait.
    fn waitables(&self) -> [&dyn nerve::Waitable; 3];
}

/// A goal a server accepted.
pub trait ErasedServerGoal {
    /// The goal's id.
    fn id(&self) -> String;
    /// The goal's payload.
    fn goal(&self) -> Vec<u8>;
    /// Whether its client asked to cancel it.
    fn is_canceling(&self) -> bool;
    /// Sends feedback given as its payload.
    fn feedback(&self, bytes: &[u8]) -> Result<(), ErasedError>;
    /// Ends it with a result payload.
    fn end(&self, state: GoalState, bytes: &[u8]) -> Result<(), ErasedError>;
}

impl<A: Action> ErasedServer for ActionServer<A> {
    fn name(&self) -> String {
        ActionServer::name(self).to_string()
    }
    fn wait(&self, t: Duration) -> Result<bool, ActionError> {
        ActionServer::wait(self, t)
    }
    fn handle_pending(
        &self,
        on_goal: &mut dyn FnMut(&[u8]) -> Result<(), String>,
        on_accepted: OnAccepted<'_>,
    ) -> Result<usize, ActionError> {
        ActionServer::handle_pending_with(
            self,
            |g| on_goal(&payload::<A::Goal>(g.goal(), g.elems())),
            |h| on_accepted(Box::new(h)),
        )
    }
    fn waitables(&self) -> [&dyn nerve::Waitable; 3] {
        ActionServer::waitables(self)
    }
    fn goals(&self) -> Vec<Box<dyn ErasedServerGoal>> {
        ActionServer::goals(self)
            .into_iter()
            .map(|g| Box::new(g) as Box<dyn ErasedServerGoal>)
            .collect()
    }
}

impl<A: Action> ErasedServerGoal for GoalHandle<A> {
    fn id(&self) -> String {
        GoalHandle::id(self).to_string()
    }
    fn goal(&self) -> Vec<u8> {
        payload::<A::Goal>(GoalHandle::goal(self), self.elems())
    }
    fn is_canceling(&self) -> bool {
        GoalHandle::is_canceling(self)
    }
    fn feedback(&self, bytes: &[u8]) -> Result<(), ErasedError> {
        let (head, n) = parse::<A::Feedback>(bytes)?;
        self.feedback_with(n, |h, e| {
            *h = head;
            fill_elems::<A::Feedback>(bytes, e);
        })
        .map_err(ErasedError::from)
    }
    fn end(&self, state: GoalState, bytes: &[u8]) -> Result<(), ErasedError> {
        let (head, n) = parse::<A::Result>(bytes)?;
        self.end_with(state, n, |h, e| {
            *h = head;
            fill_elems::<A::Result>(bytes, e);
        })
        .map_err(ErasedError::from)
    }
}

/// Opens `open::<A>` for the built-in action type named `ty`.
macro_rules! by_type {
    ($ty:expr, $open:ident, $($a:ty),*) => {
        match $ty {
            $(t if t == <$a as Action>::TYPE_NAME => $open::<$a>,)*
            other => {
                return Err(ErasedError::UnknownType {
                    name: other.to_string(),
                    known: [$(<$a as Action>::TYPE_NAME),*].join(", "),
                })
            }
        }
    };
}

/// A client of the built-in action type named `action_type` on `name`.
pub fn client(
    node: &nerve::Node,
    name: &str,
    action_type: &str,
) -> Result<Box<dyn ErasedClient>, ErasedError> {
    fn open<A: Action>(n: &nerve::Node, name: &str) -> Result<Box<dyn ErasedClient>, ErasedError> {
        Ok(Box::new(ActionClient::<A>::create(n, name)?))
    }
    let f = by_type!(action_type, open, Fibonacci, EchoAction, Ros2Action);
    f(node, name)
}

/// What says which type a server serves (see
/// [`nerve::action::ActionServerBuilder::create_saying`]).
pub type Say<'a> =
    Box<dyn FnOnce(&nerve::Node, &str) -> Result<Box<dyn std::any::Any>, String> + 'a>;

/// A server of the built-in action type named `action_type` on `name`; `say` says which
/// type it serves, as a type that carries others needs ([`Ros2Action`]: the ROS 2 action
/// type, `nerve_ros2_map::action::say`).
pub fn server(
    node: &nerve::Node,
    name: &str,
    action_type: &str,
    policy: GoalPolicy,
    say: Option<Say<'_>>,
) -> Result<Box<dyn ErasedServer>, ErasedError> {
    fn open<A: Action>(
        n: &nerve::Node,
        name: &str,
        policy: GoalPolicy,
        say: Option<Say<'_>>,
    ) -> Result<Box<dyn ErasedServer>, ErasedError> {
        let builder = ActionServer::<A>::builder(n, name).policy(policy);
        Ok(Box::new(match say {
            Some(say) => builder.create_saying(say)?,
            None => builder.create()?,
        }))
    }
    let f = by_type!(action_type, open, Fibonacci, EchoAction, Ros2Action);
    f(node, name, policy, say)
}
