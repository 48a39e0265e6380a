//! Python exceptions, named after the Rust error enums, all under `NerveError`.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _nerve,
    NerveError,
    PyException,
    "Base of every Nerve error."
);
create_exception!(
    _nerve,
    ContextError,
    NerveError,
    "A context could not be opened (config, domain, state directory)."
);
create_exception!(
    _nerve,
    NodeError,
    NerveError,
    "A node could not be created."
);
create_exception!(
    _nerve,
    TopicError,
    NerveError,
    "A topic could not be opened (type mismatch, QoS, limits)."
);
create_exception!(
    _nerve,
    LoanError,
    NerveError,
    "No sample could be loaned (pool, size, loans)."
);
create_exception!(
    _nerve,
    PublishError,
    NerveError,
    "A sample could not be published."
);
create_exception!(_nerve, RecvError, NerveError, "Receiving failed.");
create_exception!(
    _nerve,
    ServiceError,
    NerveError,
    "A service endpoint could not be created."
);
create_exception!(
    _nerve,
    CallError,
    NerveError,
    "A service call failed (no server, timeout, handler error, ...)."
);
create_exception!(
    _nerve,
    ServeError,
    NerveError,
    "A server could not take or answer a request."
);
create_exception!(
    _nerve,
    SchemaError,
    NerveError,
    "A schema is malformed or does not match its type."
);
create_exception!(
    _nerve,
    TensorError,
    NerveError,
    "A tensor pool operation failed (full, stale descriptor, bad shape)."
);
create_exception!(
    _nerve,
    WaitError,
    NerveError,
    "Waiting on several endpoints failed."
);
create_exception!(
    _nerve,
    ClosedError,
    NerveError,
    "An object was used after it was closed, sent or released."
);

create_exception!(
    _nerve,
    ParamError,
    NerveError,
    "A parameter could not be declared, read or set (type, range, read-only, refused)."
);
create_exception!(
    _nerve,
    ActionError,
    NerveError,
    "An action failed (rejected goal, server gone, timeout, unknown goal)."
);

/// Converts a Rust error into the Python exception `E` with its message.
pub(crate) fn err<E: pyo3::PyTypeInfo>(e: impl std::fmt::Display) -> PyErr {
    PyErr::new::<E, _>(e.to_string())
}

/// Registers the exceptions on the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("NerveError", py.get_type::<NerveError>())?;
    m.add("ContextError", py.get_type::<ContextError>())?;
    m.add("NodeError", py.get_type::<NodeError>())?;
    m.add("TopicError", py.get_type::<TopicError>())?;
    m.add("LoanError", py.get_type::<LoanError>())?;
    m.add("PublishError", py.get_type::<PublishError>())?;
    m.add("RecvError", py.get_type::<RecvError>())?;
    m.add("ServiceError", py.get_type::<ServiceError>())?;
    m.add("CallError", py.get_type::<CallError>())?;
    m.add("ServeError", py.get_type::<ServeError>())?;
    m.add("SchemaError", py.get_type::<SchemaError>())?;
    m.add("TensorError", py.get_type::<TensorError>())?;
    m.add("WaitError", py.get_type::<WaitError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("ParamError", py.get_type::<ParamError>())?;
    m.add("ActionError", py.get_type::<ActionError>())?;
    Ok(())
}
