//! The native module `nerve._nerve` of the Python package `nerve` (see
//! `python/nerve/__init__.py` for the API users see, and docs/design.md, "Python").
//!
//! Every object that wraps a `!Send` Nerve value (contexts, nodes, ports, samples, loans)
//! is tied to the thread that created its context ([`affine`]); memory handed to Python
//! is owned by a [`buffer::Buffer`], the `base` of every numpy view of it.

mod action;
mod affine;
mod buffer;
mod errors;
mod exec;
mod lifecycle;
mod ndarray;
mod param;
mod ros2;
mod service;
mod tensor;
mod tf;
mod topic;
mod types;
mod wait;

use pyo3::prelude::*;

/// The native module.
#[pymodule(gil_used = true)]
fn _nerve(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // the package's version: the crate's, which maturin also gives the wheel
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    lifecycle::register(m)?;
    tf::register(m)?;
    m.add_class::<topic::Context>()?;
    m.add_class::<topic::Node>()?;
    m.add_class::<topic::Qos>()?;
    m.add_class::<topic::Header>()?;
    m.add_class::<topic::Publisher>()?;
    m.add_class::<topic::Subscription>()?;
    m.add_class::<buffer::Buffer>()?;
    m.add_class::<buffer::View>()?;
    m.add_class::<types::MessageType>()?;
    m.add_class::<wait::Sleeper>()?;
    m.add_class::<exec::Waiter>()?;
    m.add_class::<exec::TimerRaw>()?;
    m.add_class::<tensor::TensorPool>()?;
    m.add_class::<service::Client>()?;
    m.add_class::<service::Pending>()?;
    m.add_class::<service::Server>()?;
    m.add_class::<param::Parameters>()?;
    m.add_class::<param::ParamClient>()?;
    m.add_class::<action::ActionClientRaw>()?;
    m.add_class::<action::GoalRaw>()?;
    m.add_class::<action::ActionServerRaw>()?;
    m.add_class::<action::ServerGoalRaw>()?;
    m.add_function(wrap_pyfunction!(action::builtin_action_types, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::tensor_freeze, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::tensor_descriptor, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::tensor_publish, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::tensor_view, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::tensor_array, m)?)?;
    m.add_function(wrap_pyfunction!(types::builtin_message_types, m)?)?;
    m.add_function(wrap_pyfunction!(types::builtin_service_types, m)?)?;
    m.add_function(wrap_pyfunction!(wait::wait_any, m)?)?;
    m.add_function(wrap_pyfunction!(wait::mono_ns, m)?)?;
    m.add_function(wrap_pyfunction!(wait::now_ns, m)?)?;
    m.add_function(wrap_pyfunction!(buffer::heap_buffer, m)?)?;
    m.add_function(wrap_pyfunction!(ros2::ros2_decode, m)?)?;
    m.add_function(wrap_pyfunction!(ros2::ros2_encode, m)?)?;
    m.add_function(wrap_pyfunction!(ros2::ros2_message_type, m)?)?;
    m.add_function(wrap_pyfunction!(ros2::ros2_action_type, m)?)?;
    m.add_function(wrap_pyfunction!(ros2::ros2_service_type, m)?)?;
    m.add_function(wrap_pyfunction!(ros2::ros2_action_encode, m)?)?;
    m.add_function(wrap_pyfunction!(ros2::ros2_action_decode, m)?)?;
    Ok(())
}
