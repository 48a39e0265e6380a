//! Parameters for Python: a node's declared parameters with validation callbacks, served
//! to other processes, and a client of another node's parameters.

use crate::affine::Affine;
use crate::errors::{err, ParamError};
use crate::topic::Node;
use crate::wait::{blocking, duration};
use nerve::param::{self, ParamDescriptor, ParamInfo, ParamValue};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// A Python value as a parameter value: bool, int, float, str, bytes, or a list of
/// bools, ints (floats among them make it floats) or strs.
pub(crate) fn to_value(v: &Bound<'_, PyAny>) -> PyResult<ParamValue> {
    if v.is_instance_of::<PyBool>() {
        return Ok(ParamValue::Bool(v.extract()?));
    }
    if v.is_instance_of::<PyInt>() {
        return v.extract::<i64>().map(ParamValue::Int).map_err(|_| {
            PyTypeError::new_err(format!("{v} does not fit a 64-bit signed parameter"))
        });
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(ParamValue::Float(v.extract()?));
    }
    if v.is_instance_of::<PyString>() {
        return Ok(ParamValue::Str(v.extract()?));
    }
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(ParamValue::Bytes(b.as_bytes().to_vec()));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items: Vec<ParamValue> = v
            .try_iter()?
            .map(|x| to_value(&x?))
            .collect::<PyResult<_>>()?;
        let all = |f: fn(&ParamValue) -> bool| items.iter().all(f);
        return Ok(if items.is_empty() {
            ParamValue::StrArray(Vec::new())
        } else if all(|x| matches!(x, ParamValue::Bool(_))) {
            ParamValue::BoolArray(
                items
                    .iter()
                    .map(|x| matches!(x, ParamValue::Bool(true)))
                    .collect(),
            )
        } else if all(|x| matches!(x, ParamValue::Int(_))) {
            ParamValue::IntArray(
                items
                    .iter()
                    .map(|x| if let ParamValue::Int(i) = x { *i } else { 0 })
                    .collect(),
            )
        } else if all(|x| matches!(x, ParamValue::Int(_) | ParamValue::Float(_))) {
            ParamValue::FloatArray(
                items
                    .iter()
                    .map(|x| match x {
                        ParamValue::Int(i) => *i as f64,
                        ParamValue::Float(f) => *f,
                        _ => 0.0,
                    })
                    .collect(),
            )
        } else if all(|x| matches!(x, ParamValue::Str(_))) {
            ParamValue::StrArray(
                items
                    .into_iter()
                    .map(|x| {
                        if let ParamValue::Str(s) = x {
                            s
                        } else {
                            String::new()
                        }
                    })
                    .collect(),
            )
        } else {
            return Err(PyTypeError::new_err(
                "a parameter list holds only bools, only numbers or only strs",
            ));
        });
    }
    Err(PyTypeError::new_err(format!(
        "a parameter is a bool, int, float, str, bytes or a list of them, not {}",
        v.get_type().name()?
    )))
}

/// A parameter value as a Python value.
pub(crate) fn to_py<'py>(py: Python<'py>, v: &ParamValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        ParamValue::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        ParamValue::Int(i) => i.into_pyobject(py)?.into_any(),
        ParamValue::Float(f) => f.into_pyobject(py)?.into_any(),
        ParamValue::Str(s) => s.into_pyobject(py)?.into_any(),
        ParamValue::Bytes(b) => PyBytes::new(py, b).into_any(),
        ParamValue::BoolArray(v) => PyList::new(py, v)?.into_any(),
        ParamValue::IntArray(v) => PyList::new(py, v)?.into_any(),
        ParamValue::FloatArray(v) => PyList::new(py, v)?.into_any(),
        ParamValue::StrArray(v) => PyList::new(py, v)?.into_any(),
    })
}

fn values_of(d: &Bound<'_, PyDict>) -> PyResult<Vec<(String, ParamValue)>> {
    d.iter()
        .map(|(k, v)| Ok((k.extract::<String>()?, to_value(&v)?)))
        .collect()
}

fn info_dict<'py>(py: Python<'py>, i: &ParamInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &i.name)?;
    d.set_item("type", i.ty.name())?;
    d.set_item("value", to_py(py, &i.value)?)?;
    d.set_item("description", &i.descriptor.description)?;
    d.set_item("range", i.descriptor.range.map(|r| (r.min, r.max, r.step)))?;
    d.set_item("read_only", i.descriptor.read_only)?;
    d.set_item("dynamic_typing", i.descriptor.dynamic_typing)?;
    Ok(d)
}

fn changes_list<'py>(
    py: Python<'py>,
    changes: &[param::ParamChange],
) -> PyResult<Bound<'py, PyList>> {
    let items: Vec<Bound<'py, PyTuple>> = changes
        .iter()
        .map(|c| {
            let old = match &c.old {
                Some(v) => to_py(py, v)?,
                None => py.None().into_bound(py),
            };
            PyTuple::new(
                py,
                [
                    c.name.clone().into_pyobject(py)?.into_any(),
                    old,
                    to_py(py, &c.new)?,
                ],
            )
        })
        .collect::<PyResult<_>>()?;
    PyList::new(py, items)
}

/// A node's parameters (see `nerve.Parameters` for the documented API).
#[pyclass(frozen, module = "nerve._nerve")]
pub struct Parameters {
    inner: Affine<param::Parameters>,
}

#[pymethods]
impl Parameters {
    #[new]
    #[pyo3(signature = (node, allow_undeclared=false, files=Vec::new(), from_env=true))]
    fn new(
        node: &Node,
        allow_undeclared: bool,
        files: Vec<String>,
        from_env: bool,
    ) -> PyResult<Self> {
        let mut b = param::Parameters::builder(node.inner.get()?)
            .allow_undeclared(allow_undeclared)
            .from_env(from_env);
        for f in files {
            b = b.file(f);
        }
        let p = b.create().map_err(err::<ParamError>)?;
        Ok(Parameters {
            inner: Affine::new(p, node.inner.graveyard(), "Parameters"),
        })
    }

    /// The node's full name (the key of its parameter-file entries).
    #[getter]
    fn node_path(&self) -> PyResult<String> {
        Ok(self.inner.get()?.node_path().to_string())
    }

    /// Declares `name` with `default` (or the value a parameter file gives it); returns
    /// the value it now has.
    #[pyo3(signature = (name, default, description="", range=None, read_only=false, dynamic_typing=false))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments, one per descriptor field
    fn declare<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        default: &Bound<'py, PyAny>,
        description: &str,
        range: Option<(f64, f64, f64)>,
        read_only: bool,
        dynamic_typing: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut d = ParamDescriptor::new().description(description);
        if let Some((min, max, step)) = range {
            d = d.range(min, max, step);
        }
        if read_only {
            d = d.read_only();
        }
        if dynamic_typing {
            d = d.dynamic_typing();
        }
        let v = self
            .inner
            .get()?
            .declare(name, to_value(default)?, d)
            .map_err(err::<ParamError>)?;
        to_py(py, &v)
    }

    /// The value of `name` (ParamError if it is not declared).
    fn get<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        match self.inner.get()?.value(name) {
            Some(v) => to_py(py, &v),
            None => Err(err::<ParamError>(format!(
                "parameter {name:?} is not declared"
            ))),
        }
    }

    /// Sets one parameter (ParamError with the reason if refused).
    fn set(&self, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.inner
            .get()?
            .set(name, to_value(value)?)
            .map_err(err::<ParamError>)
    }

    /// Sets several parameters all or nothing.
    fn set_atomically(&self, values: &Bound<'_, PyDict>) -> PyResult<()> {
        self.inner
            .get()?
            .set_atomically(values_of(values)?)
            .map_err(err::<ParamError>)
    }

    /// Sets several parameters one by one: a reason per refused name, None per set one.
    fn set_each(&self, values: &Bound<'_, PyDict>) -> PyResult<Vec<(String, Option<String>)>> {
        let values = values_of(values)?;
        let names: Vec<String> = values.iter().map(|(n, _)| n.clone()).collect();
        let results = self.inner.get()?.set_each(values);
        Ok(names
            .into_iter()
            .zip(results)
            .map(|(n, r)| (n, r.err().map(|e| e.to_string())))
            .collect())
    }

    /// Names starting with `prefix`, sorted.
    #[pyo3(signature = (prefix=""))]
    fn names(&self, prefix: &str) -> PyResult<Vec<String>> {
        Ok(self.inner.get()?.names(prefix))
    }

    /// Every parameter's value by name.
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (n, v) in self.inner.get()?.values() {
            d.set_item(n, to_py(py, &v)?)?;
        }
        Ok(d)
    }

    /// The declaration and value of `name` as a dict, or None.
    fn describe<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.inner
            .get()?
            .describe(name)
            .map(|i| info_dict(py, &i))
            .transpose()
    }

    /// Adds a validation callback: called with a list of (name, old, new) for every set;
    /// returning a str rejects the whole set with that reason (so does raising).
    fn on_validate(&self, callback: Py<PyAny>) -> PyResult<()> {
        self.inner.get()?.on_validate(move |changes| {
            Python::attach(|py| {
                let list = changes_list(py, changes).map_err(|e| e.to_string())?;
                match callback.call1(py, (list,)) {
                    Ok(r) if r.is_none(py) => Ok(()),
                    Ok(r) => Err(r
                        .extract::<String>(py)
                        .unwrap_or_else(|_| "rejected by a validation callback".into())),
                    Err(e) => Err(format!("validation callback raised: {e}")),
                }
            })
        });
        Ok(())
    }

    /// Adds a callback run with the (name, old, new) list after each set was applied.
    fn on_set(&self, callback: Py<PyAny>) -> PyResult<()> {
        self.inner.get()?.on_set(move |changes| {
            Python::attach(|py| {
                if let Ok(list) = changes_list(py, changes) {
                    if let Err(e) = callback.call1(py, (list,)) {
                        e.print(py);
                    }
                }
            })
        });
        Ok(())
    }

    /// Answers remote requests waiting now; returns how many.
    fn handle_pending(&self) -> PyResult<usize> {
        self.inner
            .get()?
            .handle_pending()
            .map_err(err::<ParamError>)
    }

    /// Waits up to `timeout` seconds (GIL released) for remote requests and answers them;
    /// returns how many.
    #[pyo3(signature = (timeout=1.0))]
    fn serve(&self, py: Python<'_>, timeout: f64) -> PyResult<usize> {
        let limit = duration(timeout, "timeout")?;
        let p = self.inner.get()?;
        Ok(blocking(py, limit, |slice| {
            match p.serve_for(slice).map_err(err::<ParamError>)? {
                0 => Ok(None),
                n => Ok(Some(n)),
            }
        })?
        .unwrap_or(0))
    }
}

/// A client of another node's parameters.
#[pyclass(frozen, module = "nerve._nerve")]
pub struct ParamClient {
    inner: Affine<param::ParamClient>,
}

#[pymethods]
impl ParamClient {
    #[new]
    #[pyo3(signature = (node, target, timeout=2.0))]
    fn new(node: &Node, target: &str, timeout: f64) -> PyResult<Self> {
        let c = param::ParamClient::create(node.inner.get()?, target)
            .map_err(err::<ParamError>)?
            .timeout(duration(timeout, "timeout")?);
        Ok(ParamClient {
            inner: Affine::new(c, node.inner.graveyard(), "ParamClient"),
        })
    }

    /// Waits (GIL released) up to `timeout` seconds for the node; returns whether it
    /// serves its parameters.
    fn wait_for_node(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let limit = duration(timeout, "timeout")?;
        let c = self.inner.get()?;
        Ok(blocking(py, limit, |slice| Ok(c.wait_for_node(slice).then_some(())))?.is_some())
    }

    /// Names starting with `prefix`.
    #[pyo3(signature = (prefix=""))]
    fn list(&self, py: Python<'_>, prefix: &str) -> PyResult<Vec<String>> {
        let c = self.inner.get()?;
        crate::wait::detached(py, || c.list(prefix)).map_err(err::<ParamError>)
    }

    /// Values of `names` by name (None for names the node lacks).
    fn get<'py>(&self, py: Python<'py>, names: Vec<String>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.inner.get()?;
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let values = crate::wait::detached(py, || c.get(&refs)).map_err(err::<ParamError>)?;
        let d = PyDict::new(py);
        for (n, v) in names.iter().zip(values) {
            match v {
                Some(v) => d.set_item(n, to_py(py, &v)?)?,
                None => d.set_item(n, py.None())?,
            }
        }
        Ok(d)
    }

    /// Declarations of `names` (dicts, None for names the node lacks).
    fn describe<'py>(
        &self,
        py: Python<'py>,
        names: Vec<String>,
    ) -> PyResult<Vec<Option<Bound<'py, PyDict>>>> {
        let c = self.inner.get()?;
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let infos = crate::wait::detached(py, || c.describe(&refs)).map_err(err::<ParamError>)?;
        infos
            .iter()
            .map(|i| i.as_ref().map(|i| info_dict(py, i)).transpose())
            .collect()
    }

    /// Sets values one by one: a reason per refused name, None per set one.
    fn set_each(
        &self,
        py: Python<'_>,
        values: &Bound<'_, PyDict>,
    ) -> PyResult<Vec<(String, Option<String>)>> {
        let values = values_of(values)?;
        let names: Vec<String> = values.iter().map(|(n, _)| n.clone()).collect();
        let c = self.inner.get()?;
        let results =
            crate::wait::detached(py, || c.set_each(values)).map_err(err::<ParamError>)?;
        Ok(names
            .into_iter()
            .zip(results)
            .map(|(n, r)| (n, r.err()))
            .collect())
    }

    /// Sets values all or nothing (ParamError with the node's reason if refused).
    fn set_atomically(&self, py: Python<'_>, values: &Bound<'_, PyDict>) -> PyResult<()> {
        let values = values_of(values)?;
        let c = self.inner.get()?;
        crate::wait::detached(py, || c.set_atomically(values)).map_err(err::<ParamError>)
    }
}
