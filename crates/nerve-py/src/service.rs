//! Services for Python: type-erased clients and servers (`nerve::RawClient`,
//! `nerve::RawServer`) of any service whose request and response have schemas.

use crate::affine::Affine;
use crate::buffer::{Buffer, Owner};
use crate::errors::{err, CallError, ServeError, ServiceError};
use crate::topic::Node;
use crate::types::MessageType;
use crate::wait::{blocking, duration, SameThread};
use nerve::{
    RawClient, RawPendingCall, RawReply, RawRequest, RawServer, ServiceQos, ServiceType, WaitMode,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::time::Duration;

fn service_type(name: &str, request: &MessageType, response: &MessageType) -> ServiceType {
    ServiceType {
        name: name.to_string(),
        request: request.info.clone(),
        response: response.info.clone(),
    }
}

/// Opens a client or server (`open`) of the service `name` of type `type_name`.
fn open<T: 'static>(
    node: &Node,
    name: &str,
    ty: (&str, &MessageType, &MessageType),
    max_payload: Option<usize>,
    open: impl FnOnce(
        &nerve::Node,
        &str,
        &ServiceType,
        ServiceQos,
        WaitMode,
    ) -> Result<T, nerve::ServiceError>,
    what: &'static str,
) -> PyResult<Affine<T>> {
    let ty_schemas = (ty.1, ty.2);
    let ty = service_type(ty.0, ty.1, ty.2);
    let qos = match max_payload {
        Some(m) => ServiceQos::default().max_payload(m, m),
        None => ServiceQos::default(),
    };
    let n = node.inner.get()?;
    let endpoint = open(n, name, &ty, qos, WaitMode::Adaptive).map_err(err::<ServiceError>)?;
    // best effort, as for typed Rust endpoints: tools and bridges describe the payloads
    let _ = nerve::introspect::record_schema(n, &ty_schemas.0.schema);
    let _ = nerve::introspect::record_schema(n, &ty_schemas.1.schema);
    Ok(Affine::new(endpoint, node.inner.graveyard(), what))
}

/// A client of the service `name` of type `type_name` (request and response types).
pub(crate) fn client(
    node: &Node,
    name: &str,
    ty: (&str, &MessageType, &MessageType),
    max_payload: Option<usize>,
) -> PyResult<Client> {
    let inner = open(node, name, ty, max_payload, RawClient::create, "Client")?;
    Ok(Client { inner })
}

/// A server of the service `name` (one per service: a second raises ServiceError).
pub(crate) fn server(
    node: &Node,
    name: &str,
    ty: (&str, &MessageType, &MessageType),
    max_payload: Option<usize>,
) -> PyResult<Server> {
    let inner = open(node, name, ty, max_payload, RawServer::create, "Server")?;
    Ok(Server { inner })
}

/// Calls one service.
#[pyclass(frozen, module = "nerve._nerve")]
pub struct Client {
    inner: Affine<RawClient>,
}

#[pymethods]
impl Client {
    /// Waits (GIL released) until a server exists; returns whether one does.
    #[pyo3(signature = (timeout=1.0))]
    fn wait_for_service(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let c = SameThread(self.inner.get()?);
        let found = blocking(py, duration(timeout, "timeout")?, |slice| {
            Ok(c.0.wait_for_service(slice).then_some(()))
        })?;
        Ok(found.is_some())
    }

    /// Servers reachable now.
    fn server_count(&self) -> PyResult<usize> {
        Ok(self.inner.get()?.server_count())
    }

    /// Sends a request (its payload bytes, checked against the layout); the call goes on
    /// in the background until its Pending is waited for or dropped.
    fn send(&self, data: &[u8]) -> PyResult<Pending> {
        let call = self
            .inner
            .get()?
            .send_bytes(data)
            .map_err(err::<CallError>)?;
        Ok(Pending {
            inner: Affine::new(call, self.inner.graveyard(), "pending call"),
        })
    }
}

/// A call in flight.
#[pyclass(frozen, module = "nerve._nerve")]
pub struct Pending {
    inner: Affine<RawPendingCall>,
}

fn reply_buffer(r: RawReply, gy: &std::sync::Arc<crate::affine::Graveyard>) -> Buffer {
    let b = r.bytes();
    let mem = (b.as_ptr(), b.len());
    let h = *r.header();
    Buffer::new(
        Owner::Reply(Affine::new(r, gy, "reply")),
        mem,
        false,
        None,
        "reply",
    )
    .with_call(h)
}

#[pymethods]
impl Pending {
    /// The reply if it arrived (None if not yet); a failed call raises CallError.
    fn try_take(&self) -> PyResult<Option<Buffer>> {
        let call = self.inner.get()?;
        let r = call.try_take().map_err(err::<CallError>)?;
        Ok(r.map(|r| reply_buffer(r, self.inner.graveyard())))
    }

    /// Waits (GIL released) up to `timeout` seconds for the reply; raises CallError when
    /// the call fails or times out.
    fn wait(&self, py: Python<'_>, timeout: f64) -> PyResult<Buffer> {
        let limit = duration(timeout, "timeout")?;
        let call = SameThread(self.inner.get()?);
        let got = blocking(py, limit, |slice| {
            call.0
                .wait_for(slice)
                .map(|r| r.map(SameThread))
                .map_err(err::<CallError>)
        })?;
        match got {
            Some(r) => Ok(reply_buffer(r.0, self.inner.graveyard())),
            None => Err(err::<CallError>(format!(
                "no reply within {:.3} s",
                limit.as_secs_f64()
            ))),
        }
    }

    /// Whether the reply arrived or the call ended.
    fn done(&self) -> PyResult<bool> {
        Ok(self.inner.get()?.is_done())
    }

    /// The call's sequence number.
    #[getter]
    fn seq(&self) -> PyResult<u64> {
        Ok(self.inner.get()?.seq())
    }
}

/// Serves one service.
#[pyclass(frozen, module = "nerve._nerve")]
pub struct Server {
    pub(crate) inner: Affine<RawServer>,
}

fn request_buffer(r: RawRequest, gy: &std::sync::Arc<crate::affine::Graveyard>) -> Buffer {
    let b = r.bytes();
    let mem = (b.as_ptr(), b.len());
    let h = *r.header();
    Buffer::new(
        Owner::Request(Affine::new(r, gy, "request")),
        mem,
        false,
        None,
        "request",
    )
    .with_call(h)
}

fn with_request<R>(
    buf: &Buffer,
    f: impl FnOnce(&RawRequest) -> Result<R, nerve::ServeError>,
) -> PyResult<R> {
    buf.with_owner(|o| match o {
        Owner::Request(r) => f(r.get()?).map_err(err::<ServeError>),
        _ => Err(PyValueError::new_err("not a request of this server")),
    })?
}

#[pymethods]
impl Server {
    /// The next request if one is queued.
    fn try_take(&self) -> PyResult<Option<Buffer>> {
        let s = self.inner.get()?;
        let r = s.try_take().map_err(err::<ServeError>)?;
        Ok(r.map(|r| request_buffer(r, self.inner.graveyard())))
    }

    /// Waits (GIL released) up to `timeout` seconds for a request.
    fn take(&self, py: Python<'_>, timeout: f64) -> PyResult<Option<Buffer>> {
        if let Some(r) = self.try_take()? {
            return Ok(Some(r));
        }
        let s = SameThread(self.inner.get()?);
        let got = blocking(py, duration(timeout, "timeout")?, |slice| {
            s.0.take_timeout(slice.max(Duration::from_micros(1)))
                .map(|r| r.map(SameThread))
                .map_err(err::<ServeError>)
        })?;
        Ok(got.map(|r| request_buffer(r.0, self.inner.graveyard())))
    }

    /// Answers `request` with the response payload `data` (checked against the layout).
    fn reply(&self, request: &Buffer, data: &[u8]) -> PyResult<()> {
        self.inner.get()?;
        with_request(request, |r| r.reply_bytes(data))
    }

    /// Answers `request` with an error: the client's call raises CallError with `message`.
    fn fail(&self, request: &Buffer, message: &str) -> PyResult<()> {
        self.inner.get()?;
        with_request(request, |r| r.fail(message))
    }

    /// Clients connected now.
    fn client_count(&self) -> PyResult<usize> {
        Ok(self.inner.get()?.client_count())
    }
}
