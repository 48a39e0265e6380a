//! Managed (lifecycle) nodes for Python: callbacks in Python, the state machine, the
//! services and the events in Rust (`nerve-lifecycle`).

use crate::affine::Affine;
use crate::errors::{err, NerveError};
use crate::topic::Node;
use crate::wait::{blocking, duration};
use nerve_lifecycle::{CallbackReturn, ManagedNode, State, StateWatch, TransitionError};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::{Arc, Mutex};

create_exception!(
    _nerve,
    LifecycleError,
    NerveError,
    "A transition was refused (invalid from the current state, or another in progress), \
     its callback failed or raised, or the node's services failed."
);

/// Registers the classes and the exception on the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("LifecycleError", m.py().get_type::<LifecycleError>())?;
    m.add_class::<ManagedNodeRaw>()?;
    m.add_class::<LifecycleGate>()?;
    Ok(())
}

/// What a Python callback returned: None or True succeed, False fails, the strings
/// "success", "failure" and "error" say so; anything else (or an exception) is an error.
fn outcome(py: Python<'_>, r: PyResult<Py<PyAny>>, last: &Mutex<Option<String>>) -> CallbackReturn {
    let keep = |text: String| {
        if let Ok(mut l) = last.lock() {
            *l = Some(text);
        }
    };
    match r {
        Ok(v) if v.is_none(py) => CallbackReturn::Success,
        Ok(v) => {
            let v = v.bind(py);
            if let Ok(b) = v.extract::<bool>() {
                return if b {
                    CallbackReturn::Success
                } else {
                    CallbackReturn::Failure
                };
            }
            match v.extract::<String>().as_deref() {
                Ok("success") => CallbackReturn::Success,
                Ok("failure") => CallbackReturn::Failure,
                Ok("error") => CallbackReturn::Error,
                _ => {
                    keep(format!("a lifecycle callback returned {v}: expected None, a bool or \"success\"/\"failure\"/\"error\""));
                    CallbackReturn::Error
                }
            }
        }
        Err(e) => {
            keep(e.to_string());
            CallbackReturn::Error
        }
    }
}

/// A managed node (see `nerve.ManagedNode` for the documented API).
#[pyclass(frozen, module = "nerve._nerve")]
pub struct ManagedNodeRaw {
    pub(crate) inner: Affine<ManagedNode>,
    watch: StateWatch,
    last_error: Arc<Mutex<Option<String>>>,
}

#[pymethods]
impl ManagedNodeRaw {
    #[new]
    fn new(node: &Node) -> PyResult<Self> {
        let m = ManagedNode::create(node.inner.get()?).map_err(err::<LifecycleError>)?;
        Ok(ManagedNodeRaw {
            watch: m.watch(),
            inner: Affine::new(m, node.inner.graveyard(), "ManagedNode"),
            last_error: Arc::new(Mutex::new(None)),
        })
    }

    /// The node's full name.
    #[getter]
    fn name(&self) -> PyResult<String> {
        Ok(self.inner.get()?.name().to_string())
    }

    /// The current state's label.
    #[getter]
    fn state(&self) -> String {
        self.watch.state().label().to_string()
    }

    /// The current state's ROS 2 id.
    #[getter]
    fn state_id(&self) -> u8 {
        self.watch.state().id()
    }

    /// The labels of the transitions valid now.
    fn available_transitions(&self) -> Vec<String> {
        self.watch
            .state()
            .transitions()
            .iter()
            .map(|t| t.label().to_string())
            .collect()
    }

    /// The text of the last exception a callback raised (None if none did).
    #[getter]
    fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|l| l.clone())
    }

    /// Sets the callback of `hook` (configure, activate, deactivate, cleanup, shutdown,
    /// error); it gets the label of the state the transition started from.
    fn set_callback(&self, hook: &str, callback: Py<PyAny>) -> PyResult<()> {
        let m = self.inner.get()?;
        let last = self.last_error.clone();
        let f = move |from: State| {
            Python::attach(|py| outcome(py, callback.call1(py, (from.label(),)), &last))
        };
        match hook {
            "configure" => m.on_configure(f),
            "activate" => m.on_activate(f),
            "deactivate" => m.on_deactivate(f),
            "cleanup" => m.on_cleanup(f),
            "shutdown" => m.on_shutdown(f),
            "error" => m.on_error(f),
            other => {
                return Err(PyValueError::new_err(format!(
                    "no lifecycle callback {other:?} (configure, activate, deactivate, \
                     cleanup, shutdown, error)"
                )))
            }
        }
        Ok(())
    }

    /// Runs the transition `label` now; returns the state reached. Raises
    /// LifecycleError when it is refused or its callback fails or raises.
    fn trigger(&self, label: &str) -> PyResult<String> {
        let m = self.inner.get()?;
        match m.trigger_label(label) {
            Ok(s) => Ok(s.label().to_string()),
            Err(e @ TransitionError::Failed { .. }) => {
                let extra = match self.last_error.lock().ok().and_then(|mut l| l.take()) {
                    Some(text) => format!(" ({text})"),
                    None => String::new(),
                };
                Err(err::<LifecycleError>(format!("{e}{extra}")))
            }
            Err(e) => Err(err::<LifecycleError>(e)),
        }
    }

    /// A gate that says whether the node is active (for lifecycle publishers).
    fn gate(&self) -> LifecycleGate {
        LifecycleGate {
            watch: self.watch.clone(),
        }
    }

    /// Answers the lifecycle requests waiting now; returns how many.
    fn handle_pending(&self) -> PyResult<usize> {
        self.inner
            .get()?
            .handle_pending()
            .map_err(err::<LifecycleError>)
    }

    /// Waits up to `timeout` seconds (GIL released) for lifecycle requests and answers
    /// them; returns how many.
    #[pyo3(signature = (timeout=1.0))]
    fn serve(&self, py: Python<'_>, timeout: f64) -> PyResult<usize> {
        let limit = duration(timeout, "timeout")?;
        let m = self.inner.get()?;
        Ok(blocking(py, limit, |slice| {
            match m.serve_for(slice).map_err(err::<LifecycleError>)? {
                0 => Ok(None),
                n => Ok(Some(n)),
            }
        })?
        .unwrap_or(0))
    }
}

/// Whether a managed node is active: one relaxed load, from any thread.
#[pyclass(frozen, module = "nerve._nerve")]
pub struct LifecycleGate {
    watch: StateWatch,
}

#[pymethods]
impl LifecycleGate {
    /// Whether the node is active now.
    fn is_active(&self) -> bool {
        self.watch.is_active()
    }
}
