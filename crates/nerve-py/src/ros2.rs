//! ROS 2 messages carried as CDR on Nerve topics (`nerve_msgs/Ros2Cdr`, see
//! `nerve_msgs::ros2`): their fields by name, numeric arrays as numpy arrays.

use nerve::message::schema::Schema;
use nerve_ros2_map::action::{ActionPass, Part};
use nerve_ros2_types::{Array, Registry, Value};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::sync::{Arc, Mutex};

/// A ROS 2 type's name and definitions.
type Definitions = Arc<(String, Registry)>;

/// Definitions already parsed, by schema text (bounded: a process sees few types).
static REGISTRIES: Mutex<Vec<(String, Definitions)>> = Mutex::new(Vec::new());
const MAX_CACHED: usize = 64;

fn registry(schema_text: &str) -> PyResult<Definitions> {
    let mut cache = REGISTRIES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, r)) = cache.iter().find(|(t, _)| t == schema_text) {
        return Ok(r.clone());
    }
    let schema = Schema::decode(schema_text).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let (name, _, text) = nerve_msgs::ros2::ros2_type(&schema).ok_or_else(|| {
        PyValueError::new_err(format!(
            "{} is not a ROS 2 type carried as CDR",
            schema.name
        ))
    })?;
    let reg = Registry::from_ros2msg(name, text)
        .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))?;
    let entry = Arc::new((name.to_string(), reg));
    if cache.len() >= MAX_CACHED {
        cache.remove(0);
    }
    cache.push((schema_text.to_string(), entry.clone()));
    Ok(entry)
}

fn numpy<'py, T: Copy>(py: Python<'py>, v: &[T], dtype: &str) -> PyResult<Bound<'py, PyAny>> {
    let n = std::mem::size_of_val(v);
    // SAFETY: `v` is a slice of plain numbers (no padding, every bit pattern valid); its
    // `n` bytes are read once, as bytes, while the borrow keeps them alive.
    let bytes = unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), n) };
    let np = py.import("numpy")?;
    np.getattr("frombuffer")?
        .call1((PyBytes::new(py, bytes), dtype))
}

fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Int8(x) => x.into_pyobject(py)?.into_any(),
        Value::UInt8(x) => x.into_pyobject(py)?.into_any(),
        Value::Int16(x) => x.into_pyobject(py)?.into_any(),
        Value::UInt16(x) => x.into_pyobject(py)?.into_any(),
        Value::Int32(x) => x.into_pyobject(py)?.into_any(),
        Value::UInt32(x) => x.into_pyobject(py)?.into_any(),
        Value::Int64(x) => x.into_pyobject(py)?.into_any(),
        Value::UInt64(x) => x.into_pyobject(py)?.into_any(),
        Value::Float32(x) => x.into_pyobject(py)?.into_any(),
        Value::Float64(x) => x.into_pyobject(py)?.into_any(),
        Value::String(s) | Value::WString(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(a) => match a {
            Array::Bool(x) => PyList::new(py, x)?.into_any(),
            Array::Int8(x) => numpy(py, x, "int8")?,
            Array::UInt8(x) => numpy(py, x, "uint8")?,
            Array::Int16(x) => numpy(py, x, "<i2")?,
            Array::UInt16(x) => numpy(py, x, "<u2")?,
            Array::Int32(x) => numpy(py, x, "<i4")?,
            Array::UInt32(x) => numpy(py, x, "<u4")?,
            Array::Int64(x) => numpy(py, x, "<i8")?,
            Array::UInt64(x) => numpy(py, x, "<u8")?,
            Array::Float32(x) => numpy(py, x, "<f4")?,
            Array::Float64(x) => numpy(py, x, "<f8")?,
            Array::String(x) | Array::WString(x) => PyList::new(py, x)?.into_any(),
            Array::Struct(x) => {
                let items = x
                    .iter()
                    .map(|s| struct_to_py(py, s))
                    .collect::<PyResult<Vec<_>>>()?;
                PyList::new(py, items)?.into_any()
            }
        },
        Value::Struct(s) => struct_to_py(py, s)?,
    })
}

fn struct_to_py<'py>(py: Python<'py>, s: &nerve_ros2_types::Struct) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    for (k, v) in &s.fields {
        d.set_item(&**k, to_py(py, v)?)?;
    }
    Ok(d.into_any())
}

/// The message type ROS 2 type `name` (`pkg/msg/Name`, or a service's
/// `pkg/srv/Name_Request`) travels as in Nerve, decided as the ROS 2 bridge decides it
/// ([`nerve_ros2_map`]): a standard type Nerve holds exactly is Nerve's own, any other is
/// carried as CDR with its definition, found on AMENT_PREFIX_PATH. A name found nowhere is
/// a ValueError naming where it was looked for.
#[pyfunction]
pub fn ros2_message_type(name: &str) -> PyResult<crate::types::MessageType> {
    if let Some(s) = nerve_ros2_map::of_ros(name, &[]) {
        return Ok(crate::types::MessageType::new((s.schema)()));
    }
    let search = nerve_ros2_types::SearchPath::from_env();
    let (_, schema) = nerve_ros2_map::carrier::Ros2Pass::load(name, &search)
        .map_err(|e| PyValueError::new_err(format!("ROS 2 type {name}: {e}")))?;
    Ok(crate::types::MessageType::new(schema))
}

/// The payload (carrier head, then CDR) of the ROS 2 message `json` (JSON text) describes,
/// of the type `schema_text` carries; fields left out take their defaults. A field the
/// type does not have, or a value that does not fit its field, is a ValueError naming it.
#[pyfunction]
pub fn ros2_encode<'py>(
    py: Python<'py>,
    schema_text: &str,
    json: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let reg = registry(schema_text)?;
    let fail = |e: &dyn std::fmt::Display| PyValueError::new_err(format!("{}: {e}", reg.0));
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| fail(&e))?;
    let value = nerve_ros2_types::from_json(&reg.1, &reg.0, &v).map_err(|e| fail(&e))?;
    let mut payload = 0i64.to_le_bytes().to_vec();
    nerve_ros2_types::encode(&reg.1, &reg.0, &value, &mut payload).map_err(|e| fail(&e))?;
    Ok(PyBytes::new(py, &payload))
}

/// The service type ROS 2 service type `name` (`pkg/srv/Name`) crosses as, decided as the
/// ROS 2 bridge decides it ([`nerve_ros2_map::service`]): (service type name, request and
/// response message type names). A standard service is Nerve's own
/// (`std_srvs/srv/SetBool` is `nerve_msgs/SetBool`); any other is carried as CDR with its
/// definition from AMENT_PREFIX_PATH (a ValueError names why it is not there).
#[pyfunction]
pub fn ros2_service_type(name: &str) -> PyResult<(String, String, String)> {
    if let Some(n) = nerve_ros2_map::service::native_of_ros(name) {
        let t = n.nerve_type;
        return Ok((t.name, t.request.name, t.response.name));
    }
    let (request, response) = (format!("{name}_Request"), format!("{name}_Response"));
    ros2_message_type(&request)?;
    ros2_message_type(&response)?;
    Ok((name.to_string(), request, response))
}

/// ROS 2 action types carried as CDR, by name (bounded: a process sees few types).
static ACTIONS: Mutex<Vec<Arc<ActionPass>>> = Mutex::new(Vec::new());

/// ROS 2 action type `name` (`pkg/action/Name`) from the `.action` files on
/// AMENT_PREFIX_PATH.
pub(crate) fn action_pass(name: &str) -> PyResult<Arc<ActionPass>> {
    let mut cache = ACTIONS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = cache.iter().find(|p| p.name() == name) {
        return Ok(p.clone());
    }
    let search = nerve_ros2_types::SearchPath::from_env();
    let pass = ActionPass::load(name, &search)
        .map_err(|e| PyValueError::new_err(format!("ROS 2 action type {name}: {e}")))?;
    let pass = Arc::new(pass);
    if cache.len() >= MAX_CACHED {
        cache.remove(0);
    }
    cache.push(pass.clone());
    Ok(pass)
}

/// The Nerve action type ROS 2 action type `name` is served as: Nerve's own for the
/// Fibonacci actions (`nerve_msgs/Fibonacci`), else `nerve_msgs/Ros2Action` (CDR with the
/// definition from AMENT_PREFIX_PATH, which must be there: a ValueError names why not).
#[pyfunction]
pub fn ros2_action_type(name: &str) -> PyResult<&'static str> {
    if let Some(native) = nerve_ros2_map::action::native_action(name) {
        return Ok(native);
    }
    action_pass(name)?;
    Ok(nerve_ros2_map::action::CARRIER)
}

fn part_of(part: &str) -> PyResult<Part> {
    Ok(match part {
        "goal" => Part::Goal,
        "feedback" => Part::Feedback,
        "result" => Part::Result,
        other => {
            return Err(PyValueError::new_err(format!(
                "an action's part is goal, feedback or result, not {other:?}"
            )))
        }
    })
}

/// The payload (the action's hash, then CDR) of the goal, feedback or result (`part`) of
/// ROS 2 action `action` that `json` describes; fields left out take their defaults.
#[pyfunction]
pub fn ros2_action_encode<'py>(
    py: Python<'py>,
    action: &str,
    part: &str,
    json: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let pass = action_pass(action)?;
    let part = part_of(part)?;
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| PyValueError::new_err(format!("{action}: {e}")))?;
    let cdr = pass
        .from_json(part, &v)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let mut payload = pass.head().action_hash.to_vec();
    payload.extend_from_slice(&cdr);
    Ok(PyBytes::new(py, &payload))
}

/// The fields of a goal, feedback or result (`part`) payload of ROS 2 action `action`,
/// by name; a payload of another action type, or one that does not decode, is a
/// ValueError naming why.
#[pyfunction]
pub fn ros2_action_decode<'py>(
    py: Python<'py>,
    action: &str,
    part: &str,
    payload: &[u8],
) -> PyResult<Bound<'py, PyAny>> {
    let pass = action_pass(action)?;
    let part = part_of(part)?;
    let head = nerve::message::read_pod::<nerve_msgs::ros2::Ros2ActionCdr>(payload)
        .ok_or_else(|| PyValueError::new_err(format!("{action}: a payload cut short")))?;
    let cdr = &payload[nerve_ros2_map::action::HEAD..];
    pass.check(part, &head, cdr)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let value = nerve_ros2_types::decode(pass.registry(), &pass.type_of(part), cdr)
        .map_err(|e| PyValueError::new_err(format!("{action}: {e}")))?;
    to_py(py, &value)
}

/// The fields of a ROS 2 message carried as CDR, by name: `schema_text` is its topic's
/// schema, `payload` the message's bytes (carrier head, then CDR). Numeric arrays come
/// as numpy arrays; a message that does not decode is a ValueError naming why.
#[pyfunction]
pub fn ros2_decode<'py>(
    py: Python<'py>,
    schema_text: &str,
    payload: &[u8],
) -> PyResult<Bound<'py, PyAny>> {
    let reg = registry(schema_text)?;
    let head = std::mem::size_of::<nerve_msgs::ros2::Ros2Cdr>();
    let cdr = payload.get(head..).unwrap_or_default();
    let value = nerve_ros2_types::decode(&reg.1, &reg.0, cdr)
        .map_err(|e| PyValueError::new_err(format!("{}: {e}", reg.0)))?;
    to_py(py, &value)
}
