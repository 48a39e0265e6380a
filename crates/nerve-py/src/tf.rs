//! Transforms (`nerve.tf`): the shared buffer, its listener thread and the broadcasters.
//! The buffer is `Send + Sync` (any Python thread may look up); broadcasters hold ports
//! and belong to their context's thread ([`Affine`]).

use crate::affine::Affine;
use crate::errors::{err, NerveError, NodeError, PublishError};
use crate::topic::{Context, Node};
use nerve_tf::{
    Quat, TfBuffer, TfError as RustTfError, Transform, TransformListener, TreeLimits, Vec3, LATEST,
};
use pyo3::create_exception;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

create_exception!(
    _nerve,
    TfError,
    NerveError,
    "A transform could not be stored or looked up (the message names frames and times)."
);

type Vec3T = (f64, f64, f64);
type QuatT = (f64, f64, f64, f64);

fn tf_err(e: RustTfError) -> PyErr {
    err::<TfError>(e)
}

fn to_transform(t: Vec3T, r: QuatT) -> Transform {
    Transform::new(Vec3::new(t.0, t.1, t.2), Quat::new(r.0, r.1, r.2, r.3))
}

fn from_transform(t: Transform) -> (Vec3T, QuatT) {
    let (v, q) = (t.translation, t.rotation);
    ((v.x, v.y, v.z), (q.x, q.y, q.z, q.w))
}

fn time(t: Option<i64>) -> i64 {
    t.unwrap_or(LATEST)
}

/// The shared transform buffer (`nerve.tf.Buffer` wraps it).
#[pyclass(name = "TfBufferRaw", module = "nerve._nerve", frozen)]
pub struct TfBufferRaw {
    pub(crate) inner: Arc<TfBuffer>,
}

#[pymethods]
impl TfBufferRaw {
    #[new]
    #[pyo3(signature = (window_s = 10.0, max_frames = 10_000, max_history = 10_000))]
    fn new(window_s: f64, max_frames: usize, max_history: usize) -> PyResult<Self> {
        if !(window_s.is_finite() && window_s > 0.0 && window_s <= 1e6) {
            return Err(PyErr::new::<pyo3::exceptions::PyValueError, _>(format!(
                "window_s must be above 0 and at most 1e6 s, not {window_s}"
            )));
        }
        if max_frames == 0 || max_history < 2 {
            return Err(PyErr::new::<pyo3::exceptions::PyValueError, _>(
                "max_frames must be at least 1 and max_history at least 2",
            ));
        }
        Ok(TfBufferRaw {
            inner: Arc::new(TfBuffer::new(TreeLimits {
                window_ns: (window_s * 1e9) as i64,
                max_frames,
                max_history,
            })),
        })
    }

    /// Stores `child` in `parent` at `stamp_ns`; False (and a warning) when dropped as
    /// older than the window.
    #[pyo3(signature = (parent, child, stamp_ns, translation, rotation, is_static = false))]
    fn set_transform(
        &self,
        parent: &str,
        child: &str,
        stamp_ns: i64,
        translation: Vec3T,
        rotation: QuatT,
        is_static: bool,
    ) -> PyResult<bool> {
        self.inner
            .set_transform(
                parent,
                child,
                stamp_ns,
                to_transform(translation, rotation),
                is_static,
            )
            .map_err(tf_err)
    }

    /// `source` in `target` at `time_ns` (None: latest): (translation, rotation xyzw).
    #[pyo3(signature = (target, source, time_ns = None))]
    fn lookup_transform(
        &self,
        target: &str,
        source: &str,
        time_ns: Option<i64>,
    ) -> PyResult<(Vec3T, QuatT)> {
        self.inner
            .lookup_transform(target, source, time(time_ns))
            .map(from_transform)
            .map_err(tf_err)
    }

    /// Whether the lookup would succeed now.
    #[pyo3(signature = (target, source, time_ns = None))]
    fn can_transform(&self, target: &str, source: &str, time_ns: Option<i64>) -> bool {
        self.inner.can_transform(target, source, time(time_ns))
    }

    /// The lookup, waiting up to `timeout` seconds (GIL released, Ctrl-C heard).
    #[pyo3(signature = (target, source, time_ns = None, timeout = 1.0))]
    fn wait_for_transform(
        &self,
        py: Python<'_>,
        target: &str,
        source: &str,
        time_ns: Option<i64>,
        timeout: f64,
    ) -> PyResult<(Vec3T, QuatT)> {
        if !(timeout.is_finite() && timeout >= 0.0) {
            return Err(PyErr::new::<pyo3::exceptions::PyValueError, _>(format!(
                "timeout must be a finite number of seconds >= 0, not {timeout}"
            )));
        }
        let deadline = Instant::now() + Duration::from_secs_f64(timeout.min(1e9));
        loop {
            let step = deadline
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(100));
            let buffer = self.inner.clone();
            let (t, s) = (target.to_string(), source.to_string());
            let r = py.detach(move || {
                buffer.wait_for_transform(t.as_str(), s.as_str(), time(time_ns), step)
            });
            match r {
                Ok(t) => return Ok(from_transform(t)),
                Err(e) if Instant::now() >= deadline => return Err(tf_err(e)),
                Err(_) => py.check_signals()?,
            }
        }
    }

    /// The time `None` means for the two frames: None when the chain is all static.
    fn latest_stamp(&self, target: &str, source: &str) -> PyResult<Option<i64>> {
        self.inner.latest_stamp(target, source).map_err(tf_err)
    }

    /// Every frame: name, parent, static, newest_ns, held, rate_hz.
    fn frames<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inner
            .frames()
            .into_iter()
            .map(|f| {
                let d = PyDict::new(py);
                d.set_item("name", f.name)?;
                d.set_item("parent", f.parent)?;
                d.set_item("static", f.is_static)?;
                d.set_item("newest_ns", f.newest_ns)?;
                d.set_item("held", f.held)?;
                d.set_item("rate_hz", f.rate_hz)?;
                Ok(d)
            })
            .collect()
    }

    /// Times the clock followed jumped back and the buffer cleared.
    #[getter]
    fn time_jumps(&self) -> u64 {
        self.inner.time_jumps()
    }

    /// Frames held.
    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

/// A thread feeding a buffer from /tf and /tf_static.
#[pyclass(name = "TfListenerRaw", module = "nerve._nerve", frozen)]
pub struct TfListenerRaw {
    inner: Mutex<Option<TransformListener>>,
}

#[pymethods]
impl TfListenerRaw {
    #[new]
    fn new(ctx: &Context, name: &str, buffer: &TfBufferRaw) -> PyResult<Self> {
        let listener = TransformListener::spawn(ctx.inner.get()?, name, buffer.inner.clone())
            .map_err(err::<NodeError>)?;
        Ok(TfListenerRaw {
            inner: Mutex::new(Some(listener)),
        })
    }

    /// Stops and joins the thread (GIL released).
    fn stop(&self, py: Python<'_>) {
        let l = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        py.detach(move || drop(l));
    }

    /// (stored, refused) transforms so far.
    fn counts(&self) -> (u64, u64) {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or((0, 0), |l| (l.stored(), l.refused()))
    }
}

type Item = (String, String, i64, Vec3T, QuatT);

fn msgs(items: Vec<Item>) -> PyResult<Vec<nerve_msgs::TransformStamped>> {
    items
        .into_iter()
        .map(|(p, c, stamp, t, r)| {
            nerve_tf::to_msg(&p, &c, stamp, to_transform(t, r)).map_err(err::<TfError>)
        })
        .collect()
}

/// Publishes (parent, child, stamp_ns, translation, rotation) on /tf.
#[pyclass(name = "TfBroadcasterRaw", module = "nerve._nerve", frozen)]
pub struct TfBroadcasterRaw {
    inner: Affine<nerve_tf::Broadcaster>,
}

#[pymethods]
impl TfBroadcasterRaw {
    #[new]
    fn new(node: &Node) -> PyResult<Self> {
        let b = nerve_tf::Broadcaster::new(node.inner.get()?).map_err(err::<NodeError>)?;
        Ok(TfBroadcasterRaw {
            inner: Affine::new(b, node.inner.graveyard(), "Broadcaster"),
        })
    }

    /// Sends the transforms in one message.
    fn send(&self, items: Vec<Item>) -> PyResult<()> {
        let m = msgs(items)?;
        self.inner.get()?.send(&m).map_err(err::<PublishError>)
    }
}

/// Publishes static transforms on /tf_static, latched (all kept, resent together).
#[pyclass(name = "TfStaticBroadcasterRaw", module = "nerve._nerve", frozen)]
pub struct TfStaticBroadcasterRaw {
    inner: Affine<RefCell<nerve_tf::StaticBroadcaster>>,
}

#[pymethods]
impl TfStaticBroadcasterRaw {
    #[new]
    fn new(node: &Node) -> PyResult<Self> {
        let b = nerve_tf::StaticBroadcaster::new(node.inner.get()?).map_err(err::<NodeError>)?;
        Ok(TfStaticBroadcasterRaw {
            inner: Affine::new(RefCell::new(b), node.inner.graveyard(), "StaticBroadcaster"),
        })
    }

    /// Adds (or replaces, by child) static transforms and sends them all.
    fn send(&self, items: Vec<Item>) -> PyResult<()> {
        let m = msgs(items)?;
        let cell = self.inner.get()?;
        let mut b = cell
            .try_borrow_mut()
            .map_err(|_| err::<PublishError>("the static broadcaster is busy"))?;
        b.send(&m).map_err(err::<PublishError>)
    }

    /// Hands the static transforms to subscribers that joined since the last send.
    fn update_connections(&self) -> PyResult<()> {
        let cell = self.inner.get()?;
        if let Ok(b) = cell.try_borrow() {
            b.update_connections();
        }
        Ok(())
    }
}

/// Registers the classes and the exception.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TfError", m.py().get_type::<TfError>())?;
    m.add_class::<TfBufferRaw>()?;
    m.add_class::<TfListenerRaw>()?;
    m.add_class::<TfBroadcasterRaw>()?;
    m.add_class::<TfStaticBroadcasterRaw>()?;
    Ok(())
}
