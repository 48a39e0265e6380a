//! Actions for Python: clients and servers of the action types built into the package
//! (`nerve_msgs/Fibonacci`, `nerve_msgs/EchoAction`). Goals, feedback and results cross
//! into Python as message payloads (one copy each way); the Python layer wraps them in
//! the message classes of their schemas.

use crate::affine::Affine;
use crate::errors::{err, ActionError as PyActionError};
use crate::topic::Node;
use crate::wait::{blocking, duration};
use nerve::action::{
    Action, ActionClient, ActionError, ActionServer, ClientGoal, GoalHandle, GoalPolicy, GoalState,
};
use nerve::message::{as_bytes, elems_offset, read_pod, Message};
use nerve_msgs::action::{EchoAction, Fibonacci};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::time::Duration;

/// A message's payload (head, padding, elements), as Python messages hold it.
fn payload<M: Message>(head: &M, elems: &[M::Elem]) -> Vec<u8> {
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
fn parse<M: Message>(bytes: &[u8]) -> Result<(M, usize), String> {
    let head = read_pod::<M>(bytes).ok_or_else(|| {
        format!(
            "{} bytes are too short for a {} ({} bytes)",
            bytes.len(),
            M::TYPE_NAME,
            std::mem::size_of::<M>()
        )
    })?;
    let esize = std::mem::size_of::<M::Elem>();
    if esize == 0 {
        return Ok((head, 0));
    }
    let rest = bytes.len().saturating_sub(elems_offset::<M>());
    if !rest.is_multiple_of(esize) {
        return Err(format!(
            "{} bytes do not hold whole {} elements",
            bytes.len(),
            M::TYPE_NAME
        ));
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

fn state_of(name: &str) -> PyResult<GoalState> {
    Ok(match name {
        "succeeded" => GoalState::Succeeded,
        "aborted" => GoalState::Aborted,
        "canceled" => GoalState::Canceled,
        other => {
            return Err(PyValueError::new_err(format!(
                "a goal ends succeeded, aborted or canceled, not {other:?}"
            )))
        }
    })
}

trait DynClient {
    fn wait_for_server(&self, t: Duration) -> bool;
    fn send_goal(&self, goal: &[u8]) -> Result<Box<dyn DynGoal>, String>;
}

trait DynGoal {
    fn id(&self) -> String;
    fn try_feedback(&self) -> Option<Vec<u8>>;
    fn result(&self, t: Duration) -> Result<Option<(GoalState, Vec<u8>)>, ActionError>;
    fn cancel(&self) -> Result<GoalState, ActionError>;
}

impl<A: Action> DynClient for ActionClient<A> {
    fn wait_for_server(&self, t: Duration) -> bool {
        ActionClient::wait_for_server(self, t)
    }
    fn send_goal(&self, goal: &[u8]) -> Result<Box<dyn DynGoal>, String> {
        let (head, n) = parse::<A::Goal>(goal)?;
        let g = self
            .send_goal_with(n, |h, e| {
                *h = head;
                fill_elems::<A::Goal>(goal, e);
            })
            .map_err(|e| e.to_string())?;
        Ok(Box::new(g))
    }
}

impl<A: Action> DynGoal for ClientGoal<A> {
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
type OnAccepted<'a> = &'a mut dyn FnMut(Box<dyn DynServerGoal>);

pub(crate) trait DynServer {
    fn wait(&self, t: Duration) -> Result<bool, ActionError>;
    fn handle_pending(
        &self,
        on_goal: &mut dyn FnMut(&[u8]) -> Result<(), String>,
        on_accepted: OnAccepted<'_>,
    ) -> Result<usize, ActionError>;
    fn goals(&self) -> Vec<Box<dyn DynServerGoal>>;
    /// The goal, cancel and result services, for the executor's wait.
    fn waitables(&self) -> [&dyn nerve::Waitable; 3];
}

pub(crate) trait DynServerGoal {
    fn id(&self) -> String;
    fn goal(&self) -> Vec<u8>;
    fn is_canceling(&self) -> bool;
    fn feedback(&self, bytes: &[u8]) -> Result<(), String>;
    fn end(&self, state: GoalState, bytes: &[u8]) -> Result<(), String>;
}

impl<A: Action> DynServer for ActionServer<A> {
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
    fn goals(&self) -> Vec<Box<dyn DynServerGoal>> {
        ActionServer::goals(self)
            .into_iter()
            .map(|g| Box::new(g) as Box<dyn DynServerGoal>)
            .collect()
    }
}

impl<A: Action> DynServerGoal for GoalHandle<A> {
    fn id(&self) -> String {
        GoalHandle::id(self).to_string()
    }
    fn goal(&self) -> Vec<u8> {
        payload::<A::Goal>(GoalHandle::goal(self), self.elems())
    }
    fn is_canceling(&self) -> bool {
        GoalHandle::is_canceling(self)
    }
    fn feedback(&self, bytes: &[u8]) -> Result<(), String> {
        let (head, n) = parse::<A::Feedback>(bytes)?;
        self.feedback_with(n, |h, e| {
            *h = head;
            fill_elems::<A::Feedback>(bytes, e);
        })
        .map_err(|e| e.to_string())
    }
    fn end(&self, state: GoalState, bytes: &[u8]) -> Result<(), String> {
        let (head, n) = parse::<A::Result>(bytes)?;
        self.end_with(state, n, |h, e| {
            *h = head;
            fill_elems::<A::Result>(bytes, e);
        })
        .map_err(|e| e.to_string())
    }
}

/// Opens `open::<A>` for the built-in action type named `ty`.
macro_rules! by_type {
    ($ty:expr, $open:ident, $($a:ty),*) => {
        match $ty {
            $(t if t == <$a as Action>::TYPE_NAME => $open::<$a>(),)*
            other => Err(PyValueError::new_err(format!(
                "unknown action type {other:?}; built in: {}",
                [$(<$a as Action>::TYPE_NAME),*].join(", ")
            ))),
        }
    };
}

/// The built-in action types: (name, goal, feedback, result) message type names.
#[pyfunction]
pub(crate) fn builtin_action_types() -> Vec<(&'static str, &'static str, &'static str, &'static str)>
{
    nerve_msgs::action::actions()
        .into_iter()
        .map(|a| (a.name, a.goal, a.feedback, a.result))
        .collect()
}

/// A client of an action (see `nerve.ActionClient`).
#[pyclass(frozen, module = "nerve._nerve")]
pub struct ActionClientRaw {
    inner: Affine<Box<dyn DynClient>>,
}

#[pymethods]
impl ActionClientRaw {
    #[new]
    fn new(node: &Node, name: &str, action_type: &str) -> PyResult<Self> {
        let n = node.inner.get()?;
        type Open = fn(&nerve::Node, &str) -> Result<Box<dyn DynClient>, ActionError>;
        fn open<A: Action>() -> PyResult<Open> {
            Ok(|n, name| Ok(Box::new(ActionClient::<A>::create(n, name)?) as Box<dyn DynClient>))
        }
        let f = by_type!(action_type, open, Fibonacci, EchoAction)?;
        let c = f(n, name).map_err(err::<PyActionError>)?;
        Ok(ActionClientRaw {
            inner: Affine::new(c, node.inner.graveyard(), "ActionClient"),
        })
    }

    /// Waits (GIL released) up to `timeout` seconds for a server.
    fn wait_for_server(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let limit = duration(timeout, "timeout")?;
        let c = self.inner.get()?;
        Ok(blocking(py, limit, |slice| {
            Ok(c.wait_for_server(slice).then_some(()))
        })?
        .is_some())
    }

    /// Sends a goal given as its payload and waits for its acceptance.
    fn send_goal(&self, py: Python<'_>, goal: &[u8]) -> PyResult<GoalRaw> {
        let c = self.inner.get()?;
        let g = crate::wait::detached(py, || c.send_goal(goal)).map_err(err::<PyActionError>)?;
        Ok(GoalRaw {
            inner: Affine::new(g, self.inner.graveyard(), "Goal"),
        })
    }
}

/// A goal a client sent.
#[pyclass(frozen, module = "nerve._nerve")]
pub struct GoalRaw {
    inner: Affine<Box<dyn DynGoal>>,
}

#[pymethods]
impl GoalRaw {
    /// The goal's id.
    #[getter]
    fn id(&self) -> PyResult<String> {
        Ok(self.inner.get()?.id())
    }

    /// The next feedback payload that arrived, or None.
    fn try_feedback<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        Ok(self
            .inner
            .get()?
            .try_feedback()
            .map(|b| PyBytes::new(py, &b)))
    }

    /// Waits (GIL released) up to `timeout` seconds for the result: (state, payload).
    fn result<'py>(
        &self,
        py: Python<'py>,
        timeout: f64,
    ) -> PyResult<(String, Bound<'py, PyBytes>)> {
        let limit = duration(timeout, "timeout")?;
        let g = self.inner.get()?;
        let got = blocking(py, limit, |slice| {
            g.result(slice).map_err(err::<PyActionError>)
        })?;
        match got {
            Some((state, bytes)) => Ok((state.name().to_string(), PyBytes::new(py, &bytes))),
            None => Err(err::<PyActionError>(format!(
                "goal {} has no result after {timeout} s",
                g.id()
            ))),
        }
    }

    /// Asks the server to cancel the goal; returns its state after the request.
    fn cancel(&self, py: Python<'_>) -> PyResult<String> {
        let g = self.inner.get()?;
        crate::wait::detached(py, || g.cancel())
            .map(|s| s.name().to_string())
            .map_err(err::<PyActionError>)
    }
}

/// A server of an action (see `nerve.ActionServer`).
#[pyclass(frozen, module = "nerve._nerve")]
pub struct ActionServerRaw {
    pub(crate) inner: Affine<Box<dyn DynServer>>,
}

#[pymethods]
impl ActionServerRaw {
    #[new]
    #[pyo3(signature = (node, name, action_type, policy="queue", max=8))]
    fn new(node: &Node, name: &str, action_type: &str, policy: &str, max: usize) -> PyResult<Self> {
        let policy = match policy {
            "reject" => GoalPolicy::RejectNew,
            "queue" => GoalPolicy::Queue { max },
            "preempt" => GoalPolicy::Preempt,
            "parallel" => GoalPolicy::Parallel { max: max.max(1) },
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown goal policy {other:?} (reject, queue, preempt, parallel)"
                )))
            }
        };
        type Open = fn(&nerve::Node, &str, GoalPolicy) -> Result<Box<dyn DynServer>, ActionError>;
        fn open<A: Action>() -> PyResult<Open> {
            Ok(|n, name, policy| {
                Ok(Box::new(
                    ActionServer::<A>::builder(n, name)
                        .policy(policy)
                        .create()?,
                ) as Box<dyn DynServer>)
            })
        }
        let f = by_type!(action_type, open, Fibonacci, EchoAction)?;
        let s = f(node.inner.get()?, name, policy).map_err(err::<PyActionError>)?;
        Ok(ActionServerRaw {
            inner: Affine::new(s, node.inner.graveyard(), "ActionServer"),
        })
    }

    /// Waits (GIL released) up to `timeout` seconds for a goal, cancel or result request.
    fn wait(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let limit = duration(timeout, "timeout")?;
        let s = self.inner.get()?;
        Ok(blocking(py, limit, |slice| {
            Ok(s.wait(slice).map_err(err::<PyActionError>)?.then_some(()))
        })?
        .is_some())
    }

    /// Handles waiting requests; `on_goal(payload)` returns None to accept a goal or a
    /// reason to reject it, `on_accepted(goal)` (if given) gets each accepted goal as a
    /// ServerGoalRaw. Returns how many requests were handled. An exception of
    /// `on_accepted` is raised once the requests are handled.
    #[pyo3(signature = (on_goal, on_accepted=None))]
    fn handle_pending(
        &self,
        py: Python<'_>,
        on_goal: Py<PyAny>,
        on_accepted: Option<Py<PyAny>>,
    ) -> PyResult<usize> {
        let mut cb = |goal: &[u8]| -> Result<(), String> {
            match on_goal.call1(py, (PyBytes::new(py, goal),)) {
                Ok(r) if r.is_none(py) => Ok(()),
                Ok(r) => Err(r
                    .extract::<String>(py)
                    .unwrap_or_else(|_| "rejected by the goal callback".into())),
                Err(e) => Err(format!("goal callback raised: {e}")),
            }
        };
        let gy = self.inner.graveyard();
        let mut raised: Option<PyErr> = None;
        let mut accepted = |h: Box<dyn DynServerGoal>| {
            let (Some(f), None) = (&on_accepted, &raised) else {
                return;
            };
            let goal = ServerGoalRaw {
                inner: Affine::new(h, gy, "ServerGoal"),
            };
            if let Err(e) = f.call1(py, (goal,)) {
                raised = Some(e);
            }
        };
        let n = self
            .inner
            .get()?
            .handle_pending(&mut cb, &mut accepted)
            .map_err(err::<PyActionError>)?;
        match raised {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    /// The goals being worked on (executing or canceling), oldest first.
    fn goals(&self) -> PyResult<Vec<ServerGoalRaw>> {
        let g = self.inner.graveyard();
        Ok(self
            .inner
            .get()?
            .goals()
            .into_iter()
            .map(|h| ServerGoalRaw {
                inner: Affine::new(h, g, "ServerGoal"),
            })
            .collect())
    }
}

/// A goal a server accepted.
#[pyclass(frozen, module = "nerve._nerve")]
pub struct ServerGoalRaw {
    inner: Affine<Box<dyn DynServerGoal>>,
}

#[pymethods]
impl ServerGoalRaw {
    /// The goal's id.
    #[getter]
    fn id(&self) -> PyResult<String> {
        Ok(self.inner.get()?.id())
    }
    /// The goal's payload.
    fn goal<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(py, &self.inner.get()?.goal()))
    }
    /// Whether its client asked to cancel it.
    #[getter]
    fn is_canceling(&self) -> PyResult<bool> {
        Ok(self.inner.get()?.is_canceling())
    }
    /// Sends feedback given as its payload to the goal's client.
    fn feedback(&self, payload: &[u8]) -> PyResult<()> {
        self.inner
            .get()?
            .feedback(payload)
            .map_err(err::<PyActionError>)
    }
    /// Ends the goal (`succeeded`, `aborted` or `canceled`) with a result payload.
    fn end(&self, state: &str, payload: &[u8]) -> PyResult<()> {
        let state = state_of(state)?;
        self.inner
            .get()?
            .end(state, payload)
            .map_err(err::<PyActionError>)
    }
}
