//! Actions for Python: clients and servers of the action types built into the package
//! (`nerve_msgs/Fibonacci`, `nerve_msgs/EchoAction`) and of ROS 2 action types by their
//! ROS 2 names (`test_msgs/action/Fibonacci` is `nerve_msgs/Fibonacci`, any other is
//! carried as CDR, see `nerve_ros2_map::action`). Goals, feedback and results cross into
//! Python as message payloads (one copy each way); the Python layer wraps them in the
//! message classes of their schemas, or reads a ROS 2 type's as its fields.

use crate::affine::Affine;
use crate::errors::{err, ActionError as PyActionError};
use crate::topic::Node;
use crate::wait::{blocking, duration};
use nerve::action::{GoalPolicy, GoalState};
use nerve_msgs::erased::{ErasedClient as DynClient, ErasedGoal as DynGoal};
pub(crate) use nerve_msgs::erased::{ErasedServer as DynServer, ErasedServerGoal as DynServerGoal};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// An unknown action type is a ValueError; every other failure an ActionError.
fn erased_err(e: nerve_msgs::erased::ErasedError) -> PyErr {
    match e {
        nerve_msgs::erased::ErasedError::UnknownType { .. } => PyValueError::new_err(e.to_string()),
        other => err::<PyActionError>(other),
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

/// The erased type of `action_type`: a built-in type as it is, a ROS 2 action type
/// (`pkg/action/Name`) as it crosses ([`crate::ros2::ros2_action_type`]), with its
/// definitions if it is carried as CDR.
fn erased_type(
    action_type: &str,
) -> PyResult<(
    String,
    Option<std::sync::Arc<nerve_ros2_map::action::ActionPass>>,
)> {
    if !action_type.contains("/action/") {
        return Ok((action_type.to_string(), None));
    }
    let ty = crate::ros2::ros2_action_type(action_type)?;
    let pass = (ty == nerve_ros2_map::action::CARRIER)
        .then(|| crate::ros2::action_pass(action_type))
        .transpose()?;
    Ok((ty.to_string(), pass))
}

#[pymethods]
impl ActionClientRaw {
    #[new]
    fn new(node: &Node, name: &str, action_type: &str) -> PyResult<Self> {
        let (ty, _) = erased_type(action_type)?;
        let c = nerve_msgs::erased::client(node.inner.get()?, name, &ty).map_err(erased_err)?;
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
        let (ty, pass) = erased_type(action_type)?;
        let n = node.inner.get()?;
        // a ROS 2 action type carried as CDR: the server says which (kept with it)
        let say = pass
            .as_deref()
            .map(|p| Box::new(nerve_ros2_map::action::say(p)) as nerve_msgs::erased::Say<'_>);
        let s = nerve_msgs::erased::server(n, name, &ty, policy, say).map_err(erased_err)?;
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
