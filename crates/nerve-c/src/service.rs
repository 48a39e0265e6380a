//! Service clients (calls with a timeout, and calls in flight) and servers.

use crate::context::{copy_str, NodeObj};
use crate::handle::{self, Kind};
use crate::status::{
    bytes, c_str, call_error, err, guard, nerve_status_t, nerve_status_t::*, out, serve_status,
    Error, Result,
};
use crate::topic::{check_hash, nerve_sample_view_t, schema_arg, wait_loop};
use crate::types::{
    nerve_client_t, nerve_node_t, nerve_pending_t, nerve_reply_t, nerve_request_t, nerve_server_t,
};
use nerve::message::header::CallHeader;
use nerve::{
    RawClient, RawPendingCall, RawReply, RawRequest, RawServer, ServiceQos, ServiceType, WaitMode,
};
use std::ffi::{c_char, c_void};
use std::rc::Rc;
use std::time::Duration;

/// A service's type: its name and the schemas of request and response (with the layout
/// hashes the caller compiled against, 0 to skip that check).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct nerve_service_type_t {
    /// The service type's name, e.g. `nerve_msgs/AddTwoInts`.
    pub type_name: *const c_char,
    /// The request's `nerve-schema/1` text.
    pub request_schema: *const c_char,
    /// The request layout the caller compiled against (0: unchecked).
    pub request_hash: u64,
    /// The response's `nerve-schema/1` text.
    pub response_schema: *const c_char,
    /// The response layout the caller compiled against (0: unchecked).
    pub response_hash: u64,
    /// Largest request and response payload in bytes (0: the default).
    pub max_payload: u64,
}

fn service_type(
    t: *const nerve_service_type_t,
) -> Result<(ServiceType, ServiceQos, [nerve::message::schema::Schema; 2])> {
    // SAFETY: null or a valid struct (the documented contract).
    let t = unsafe { t.as_ref() }
        .ok_or_else(|| Error::new(NERVE_ERR_NULL, "the service type is null"))?;
    let name = c_str(t.type_name, "type_name")?;
    let req = schema_arg(t.request_schema, "request_schema")?;
    check_hash(&req, t.request_hash)?;
    let resp = schema_arg(t.response_schema, "response_schema")?;
    check_hash(&resp, t.response_hash)?;
    let qos = match t.max_payload {
        0 => ServiceQos::default(),
        m => {
            let m = usize::try_from(m)
                .map_err(|_| Error::new(NERVE_ERR_INVALID_ARGUMENT, "max_payload is too large"))?;
            ServiceQos::default().max_payload(m, m)
        }
    };
    Ok((
        ServiceType {
            name: name.to_string(),
            request: req.type_info(),
            response: resp.type_info(),
        },
        qos,
        [req, resp],
    ))
}

/// A client in the table.
#[derive(Clone)]
pub(crate) struct ClientObj(pub(crate) Rc<RawClient>);
/// A server in the table.
#[derive(Clone)]
pub(crate) struct ServerObj(pub(crate) Rc<RawServer>);

boxed!(ClientObj, ServerObj, RawPendingCall);

/// The view of a request.
pub(crate) fn request_view(r: &RawRequest) -> nerve_sample_view_t {
    call_view(r.bytes(), r.elems(), r.header())
}

fn call_view(bytes: &[u8], elems: usize, h: &CallHeader) -> nerve_sample_view_t {
    nerve_sample_view_t {
        data: bytes.as_ptr().cast(),
        len: bytes.len(),
        elems,
        seq: h.seq,
        stamp_ns: h.sent_mono_ns,
        wall_ns: 0,
        publisher_id: 0,
    }
}

/// Opens a client or server (`create`) of the service `name` of type `ty` on `node`;
/// returns its handle.
fn open<T: handle::Stored>(
    node: nerve_node_t,
    name: *const c_char,
    ty: *const nerve_service_type_t,
    kind: Kind,
    create: impl FnOnce(
        &nerve::Node,
        &str,
        &ServiceType,
        ServiceQos,
    ) -> std::result::Result<T, nerve::ServiceError>,
) -> Result<u64> {
    let name = c_str(name, "name")?;
    let (ty, qos, schemas) = service_type(ty)?;
    let (n, ctx) = handle::get::<NodeObj>(node.id, Kind::Node)?;
    let endpoint = create(&n.0, name, &ty, qos).map_err(err(NERVE_ERR_SERVICE))?;
    // best effort, as for typed Rust endpoints: tools and bridges describe the payloads
    for s in &schemas {
        let _ = nerve::introspect::record_schema(&n.0, s);
    }
    handle::insert(kind, ctx, endpoint)
}

/// Creates a client of the service `name` (absolute, relative to the node's namespace,
/// or private `~/x`; remap rules apply: `nerve_client_service_name` tells the result).
///
/// # Safety
/// `name` is NUL-terminated; `ty` points to a valid type; `out_client` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_client_create(
    node: nerve_node_t,
    name: *const c_char,
    ty: *const nerve_service_type_t,
    out_client: *mut nerve_client_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_client, "out_client")?;
        slot.id = open(node, name, ty, Kind::Client, |n, name, ty, qos| {
            RawClient::create(n, name, ty, qos, WaitMode::Adaptive).map(|c| ClientObj(Rc::new(c)))
        })?;
        Ok(NERVE_OK)
    })
}

/// Copies the service's resolved name (namespace and remap rules applied, e.g.
/// `/robot1/add`) into `buf` (`cap` bytes, NUL terminated); `needed` (may be null)
/// receives its length plus one.
///
/// # Safety
/// `buf` points to `cap` writable bytes (or is null with `cap` 0); `needed` is null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_client_service_name(
    client: nerve_client_t,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let name = handle::with(client.id, Kind::Client, |c: &ClientObj, _| {
            c.0.name().to_string()
        })?;
        // SAFETY: forwarded contract of this function.
        unsafe { copy_str(&name, buf, cap, needed) }
    })
}

/// Releases a client handle (calls in flight keep it alive).
#[no_mangle]
pub extern "C" fn nerve_client_destroy(client: nerve_client_t) -> nerve_status_t {
    guard(|| handle::release(client.id, Kind::Client).map(|_| NERVE_OK))
}

/// Waits up to `timeout_ns` for a server: `NERVE_OK` or `NERVE_NOTHING`.
#[no_mangle]
pub extern "C" fn nerve_client_wait_for_service(
    client: nerve_client_t,
    timeout_ns: u64,
) -> nerve_status_t {
    guard(|| {
        let (c, _) = handle::get::<ClientObj>(client.id, Kind::Client)?;
        Ok(if c.0.wait_for_service(Duration::from_nanos(timeout_ns)) {
            NERVE_OK
        } else {
            NERVE_NOTHING
        })
    })
}

/// Sends a request (`len` payload bytes, copied) and returns the call in flight.
///
/// # Safety
/// `data` points to `len` readable bytes; `out_pending` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_client_send(
    client: nerve_client_t,
    data: *const c_void,
    len: usize,
    out_pending: *mut nerve_pending_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_pending, "out_pending")?;
        let payload = bytes(data.cast(), len, "data")?;
        let (call, ctx) = handle::with(client.id, Kind::Client, |c: &ClientObj, ctx| {
            c.0.send_bytes(payload).map(|p| (p, ctx))
        })?
        .map_err(call_error)?;
        slot.id = handle::insert(Kind::Pending, ctx, call)?;
        Ok(NERVE_OK)
    })
}

pub(crate) fn store_reply(
    r: RawReply,
    ctx: u32,
    out_reply: &mut nerve_reply_t,
    view: &mut nerve_sample_view_t,
) -> Result<()> {
    *view = call_view(r.bytes(), r.elems(), r.header());
    out_reply.id = handle::insert(Kind::Reply, ctx, r)?;
    Ok(())
}

/// Waits up to `timeout_ns` (0: only check, negative: until it ends) for the reply of
/// a call in flight: `NERVE_OK` with the reply (the pending handle is released),
/// `NERVE_NOTHING` while it is still in flight, or the call's error
/// (`NERVE_ERR_SERVER_GONE`, `NERVE_ERR_HANDLER_FAILED`, ...: the typed codes of
/// `nerve_status_t`; the pending handle is released).
///
/// # Safety
/// `out_reply` and `view` are writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_pending_wait(
    pending: nerve_pending_t,
    timeout_ns: i64,
    out_reply: *mut nerve_reply_t,
    view: *mut nerve_sample_view_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_reply, "out_reply")?;
        let view = out(view, "view")?;
        let ctx = handle::context_of(pending.id, Kind::Pending)?;
        let got = wait_loop(timeout_ns, |d| {
            let r = handle::with(pending.id, Kind::Pending, |p: &RawPendingCall, _| {
                if d.is_zero() {
                    p.try_take()
                } else {
                    p.wait_for(d)
                }
            })?;
            match r {
                Ok(r) => Ok(r),
                Err(e) => {
                    let _ = handle::release(pending.id, Kind::Pending);
                    Err(call_error(e))
                }
            }
        })?;
        match got {
            Some(r) => {
                handle::release(pending.id, Kind::Pending)?;
                store_reply(r, ctx, slot, view)?;
                Ok(NERVE_OK)
            }
            None => Ok(NERVE_NOTHING),
        }
    })
}

/// Forgets a call in flight (its reply, if one comes, is dropped).
#[no_mangle]
pub extern "C" fn nerve_pending_destroy(pending: nerve_pending_t) -> nerve_status_t {
    guard(|| handle::release(pending.id, Kind::Pending).map(|_| NERVE_OK))
}

/// Calls the service: sends `len` bytes and waits up to `timeout_ns` for the reply.
/// `NERVE_ERR_TIMEOUT` when none came in time; the other failures have their typed codes
/// (`NERVE_ERR_NO_SERVER`, `NERVE_ERR_HANDLER_FAILED`, `NERVE_ERR_TOO_LARGE`, ...).
///
/// # Safety
/// `data` points to `len` readable bytes; `out_reply` and `view` are writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_client_call(
    client: nerve_client_t,
    data: *const c_void,
    len: usize,
    timeout_ns: u64,
    out_reply: *mut nerve_reply_t,
    view: *mut nerve_sample_view_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_reply, "out_reply")?;
        let view = out(view, "view")?;
        let payload = bytes(data.cast(), len, "data")?;
        let (c, ctx) = handle::get::<ClientObj>(client.id, Kind::Client)?;
        let call = c.0.send_bytes(payload).map_err(call_error)?;
        let r = call
            .wait(Duration::from_nanos(timeout_ns))
            .map_err(call_error)?;
        store_reply(r, ctx, slot, view)?;
        Ok(NERVE_OK)
    })
}

/// Releases a reply.
#[no_mangle]
pub extern "C" fn nerve_reply_release(reply: nerve_reply_t) -> nerve_status_t {
    guard(|| handle::release_typed::<nerve::RawReply>(reply.id, Kind::Reply).map(|_| NERVE_OK))
}

/// Creates the server of the service `name` (one per service).
///
/// # Safety
/// `name` is NUL-terminated; `ty` points to a valid type; `out_server` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_server_create(
    node: nerve_node_t,
    name: *const c_char,
    ty: *const nerve_service_type_t,
    out_server: *mut nerve_server_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_server, "out_server")?;
        slot.id = open(node, name, ty, Kind::Server, |n, name, ty, qos| {
            RawServer::create(n, name, ty, qos, WaitMode::Adaptive).map(|s| ServerObj(Rc::new(s)))
        })?;
        Ok(NERVE_OK)
    })
}

/// Copies the service's resolved name into `buf`, as `nerve_client_service_name`.
///
/// # Safety
/// `buf` points to `cap` writable bytes (or is null with `cap` 0); `needed` is null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_server_service_name(
    server: nerve_server_t,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let name = handle::with(server.id, Kind::Server, |s: &ServerObj, _| {
            s.0.name().to_string()
        })?;
        // SAFETY: forwarded contract of this function.
        unsafe { copy_str(&name, buf, cap, needed) }
    })
}

/// Releases a server handle.
#[no_mangle]
pub extern "C" fn nerve_server_destroy(server: nerve_server_t) -> nerve_status_t {
    guard(|| handle::release(server.id, Kind::Server).map(|_| NERVE_OK))
}

/// Takes the next request: waits up to `timeout_ns` (0: only what is queued, negative:
/// until one comes). `NERVE_OK` with the request and its view, or `NERVE_NOTHING`.
///
/// # Safety
/// `out_request` and `view` are writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_server_take(
    server: nerve_server_t,
    timeout_ns: i64,
    out_request: *mut nerve_request_t,
    view: *mut nerve_sample_view_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_request, "out_request")?;
        let view = out(view, "view")?;
        let (s, ctx) = handle::get::<ServerObj>(server.id, Kind::Server)?;
        let got = wait_loop(timeout_ns, |d| {
            if d.is_zero() {
                s.0.try_take()
            } else {
                s.0.take_timeout(d)
            }
            .map_err(err(NERVE_ERR_SERVE))
        })?;
        let Some(req) = got else {
            return Ok(NERVE_NOTHING);
        };
        *view = call_view(req.bytes(), req.elems(), req.header());
        slot.id = handle::insert(Kind::Request, ctx, req)?;
        Ok(NERVE_OK)
    })
}

/// Answers a request with `len` bytes (a response payload, copied); the request
/// handle is released.
///
/// # Safety
/// `data` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn nerve_request_reply(
    request: nerve_request_t,
    data: *const c_void,
    len: usize,
) -> nerve_status_t {
    guard(|| {
        let payload = bytes(data.cast(), len, "data")?;
        let (r, _) = handle::remove::<RawRequest>(request.id, Kind::Request)?;
        r.reply_bytes(payload)
            .map_err(|e| Error::new(serve_status(&e), e.to_string()))?;
        Ok(NERVE_OK)
    })
}

/// Answers a request with a failure: the caller's call fails with `message`; the
/// request handle is released.
///
/// # Safety
/// `message` is NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn nerve_request_fail(
    request: nerve_request_t,
    message: *const c_char,
) -> nerve_status_t {
    guard(|| {
        let message = c_str(message, "message")?;
        let (r, _) = handle::remove::<RawRequest>(request.id, Kind::Request)?;
        r.fail(message)
            .map_err(|e| Error::new(serve_status(&e), e.to_string()))?;
        Ok(NERVE_OK)
    })
}

/// The view of a request or reply taken earlier (`kind` of handle told by the call).
///
/// # Safety
/// `view` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_request_view(
    request: nerve_request_t,
    view: *mut nerve_sample_view_t,
) -> nerve_status_t {
    guard(|| {
        let v = out(view, "view")?;
        *v = handle::with(request.id, Kind::Request, |r: &RawRequest, _| {
            request_view(r)
        })?;
        Ok(NERVE_OK)
    })
}

/// Drops a request unanswered (the caller's call fails as dropped by the server).
#[no_mangle]
pub extern "C" fn nerve_request_release(request: nerve_request_t) -> nerve_status_t {
    guard(|| {
        handle::release_typed::<nerve::RawRequest>(request.id, Kind::Request).map(|_| NERVE_OK)
    })
}
