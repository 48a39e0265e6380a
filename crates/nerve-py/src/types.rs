//! Message types known at run time, from their schema: Python builds its message classes
//! (attribute access over the memory, numpy dtypes for arrays and slices) from
//! [`MessageType::describe`].

use crate::buffer::kind_of;
use crate::errors::{err, SchemaError};
use nerve::message::schema::{Prim, Schema, Shape};
use nerve::TypeInfo;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

/// Tag XOR-ed into the layout hash of `nerve_msgs::FixedStr<N>` (a hand-written `Pod`):
/// an opaque field with this hash is a NUL-padded UTF-8 string.
const FIXED_STR_TAG: u64 = 0x5354_5221;

/// A message type: its schema, layout and identity.
#[pyclass(frozen, module = "nerve._nerve")]
pub struct MessageType {
    pub(crate) schema: Schema,
    pub(crate) info: TypeInfo,
}

impl MessageType {
    pub(crate) fn new(schema: Schema) -> MessageType {
        MessageType {
            info: schema.type_info(),
            schema,
        }
    }
}

fn is_fixed_str(size: usize, hash: u64) -> bool {
    let bytes = Shape::Array {
        elem: Box::new(Shape::Prim(Prim::U8)),
        len: size,
    };
    hash == bytes.layout_hash() ^ FIXED_STR_TAG
}

/// A shape as Python tuples: `("prim", kind, name)`, `("array", shape, len)`,
/// `("struct", name, size, [(field, offset, shape), ...])`, `("str", size)` or
/// `("opaque", size)`.
fn describe<'py>(py: Python<'py>, shape: &Shape) -> PyResult<Bound<'py, PyTuple>> {
    match shape {
        Shape::Prim(p) => {
            let kind = kind_of(p.name()).unwrap_or(0);
            ("prim", kind, p.name()).into_pyobject(py)
        }
        Shape::Array { elem, len } => ("array", describe(py, elem)?, *len).into_pyobject(py),
        Shape::Struct(s) => {
            let fields = PyList::empty(py);
            for f in &s.fields {
                fields.append((f.name.as_str(), f.offset, describe(py, &f.shape)?))?;
            }
            ("struct", s.name.as_str(), s.size, fields).into_pyobject(py)
        }
        Shape::Opaque { size, hash, .. } if is_fixed_str(*size, *hash) => {
            ("str", *size).into_pyobject(py)
        }
        Shape::Opaque { size, .. } => ("opaque", *size).into_pyobject(py),
    }
}

#[pymethods]
impl MessageType {
    /// Parses and checks an encoded schema (`nerve-schema/1|...`), as `nerve topic info`
    /// prints it; a malformed one or one whose layout does not match its hash raises
    /// `SchemaError`.
    #[staticmethod]
    fn from_schema_text(text: &str) -> PyResult<MessageType> {
        Schema::decode(text)
            .map(MessageType::new)
            .map_err(err::<SchemaError>)
    }

    /// The type name, e.g. `nerve_msgs/Imu`.
    #[getter]
    fn name(&self) -> &str {
        &self.schema.name
    }

    /// The layout hash (the type's identity on topics).
    #[getter]
    fn layout_hash(&self) -> u64 {
        self.schema.layout_hash
    }

    /// Size of the fixed head in bytes.
    #[getter]
    fn head_size(&self) -> usize {
        self.info.head_size
    }

    /// Size of one slice element (0: no slice).
    #[getter]
    fn elem_size(&self) -> usize {
        self.info.elem_size
    }

    /// Byte offset of the slice after the head.
    #[getter]
    fn elems_offset(&self) -> usize {
        self.info.elems_offset()
    }

    /// The encoded schema.
    #[getter]
    fn schema_text(&self) -> String {
        self.schema.encode()
    }

    /// The ROS 2 type (`pkg/msg/Name`) this type carries as CDR with its definition, or
    /// None for any other type.
    #[getter]
    fn ros2(&self) -> Option<&str> {
        nerve_msgs::ros2::ros2_type(&self.schema).map(|(name, _, _)| name)
    }

    /// `(head, elem)` shapes as tuples (elem is None without a slice).
    fn describe<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyTuple>, Option<Bound<'py, PyTuple>>)> {
        let head = describe(py, &self.schema.head)?;
        let elem = match &self.schema.elem {
            Some(e) => Some(describe(py, e)?),
            None => None,
        };
        Ok((head, elem))
    }

    fn __repr__(&self) -> String {
        format!("MessageType({})", self.schema.name)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<MessageType>().is_ok_and(|o| {
            o.get().schema.layout_hash == self.schema.layout_hash
                && o.get().schema.name == self.schema.name
        })
    }

    fn __hash__(&self) -> u64 {
        self.schema.layout_hash
    }
}

/// The standard message types (`nerve_msgs`), the lifecycle messages
/// (`nerve_msgs::lifecycle`: transition events and the lifecycle services' payloads) and
/// the tensor descriptor.
#[pyfunction]
pub(crate) fn builtin_message_types() -> Vec<MessageType> {
    use nerve_msgs::lifecycle as lc;
    let mut all: Vec<Schema> = nerve_msgs::schemas();
    all.extend([
        Schema::of::<lc::TransitionEvent>(),
        Schema::of::<lc::ChangeStateRequest>(),
        Schema::of::<lc::ChangeStateResponse>(),
        Schema::of::<lc::GetStateResponse>(),
        Schema::of::<lc::GetAvailableStatesResponse>(),
        Schema::of::<lc::GetAvailableTransitionsResponse>(),
        Schema::of::<nerve::tensor::TensorDescriptor>(),
    ]);
    all.into_iter().map(MessageType::new).collect()
}

/// A service type as `(name, request type name, response type name)`.
fn service_names<S: nerve::Service>() -> (&'static str, &'static str, &'static str) {
    (
        S::TYPE_NAME,
        <S::Request as nerve::Message>::TYPE_NAME,
        <S::Response as nerve::Message>::TYPE_NAME,
    )
}

/// The standard service types and the lifecycle services (`nerve_msgs::lifecycle`) as
/// `(name, request type name, response type name)`.
#[pyfunction]
pub(crate) fn builtin_service_types() -> Vec<(&'static str, &'static str, &'static str)> {
    use nerve_msgs::lifecycle as lc;
    let mut all: Vec<_> = nerve_msgs::srv::services()
        .into_iter()
        .map(|s| (s.name, s.request, s.response))
        .collect();
    all.extend([
        service_names::<lc::ChangeState>(),
        service_names::<lc::GetState>(),
        service_names::<lc::GetAvailableStates>(),
        service_names::<lc::GetAvailableTransitions>(),
    ]);
    all
}
