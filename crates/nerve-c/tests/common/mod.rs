//! Helpers the C ABI tests share: calling the ABI as C does, from Rust.
#![allow(dead_code)]

use nerve::message::schema::Schema;
use nerve_c::*;
use nerve_msgs::srv;
use std::ffi::{CStr, CString};
use std::ptr::null;

/// The message of the last failed call on this thread.
pub fn last_error() -> String {
    // SAFETY: nerve_last_error returns a valid NUL-terminated string.
    unsafe { CStr::from_ptr(nerve_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Asserts `NERVE_OK`, showing the last error otherwise.
pub fn ok(code: nerve_status_t) {
    assert_eq!(code, nerve_status_t::NERVE_OK, "{}", last_error());
}

/// A context of `domain` with its state in `dir` (created), network off.
pub fn context(domain: u32, dir: &std::path::Path) -> nerve_context_t {
    let mut ctx = nerve_context_t::default();
    ok(context_in(domain, dir, None, None, &mut ctx));
    ctx
}

/// Opens a context of `domain` with its state in `dir` (created), network off, with the
/// namespace and remap rules given (None: the environment's); the status of the call.
pub fn context_in(
    domain: u32,
    dir: &std::path::Path,
    namespace: Option<&str>,
    remap: Option<&str>,
    ctx: &mut nerve_context_t,
) -> nerve_status_t {
    std::fs::create_dir_all(dir).unwrap();
    let state = CString::new(dir.to_str().unwrap()).unwrap();
    let namespace = namespace.map(|n| CString::new(n).unwrap());
    let remap = remap.map(|r| CString::new(r).unwrap());
    let opts = nerve_context_options_t {
        config_path: null(),
        domain,
        set_domain: true,
        state_dir: state.as_ptr(),
        network: 0,
        node_namespace: namespace.as_ref().map_or(null(), |n| n.as_ptr()),
        remap: remap.as_ref().map_or(null(), |r| r.as_ptr()),
    };
    // SAFETY: valid options (strings alive until the call returns) and out-pointer.
    unsafe { nerve_context_create(&opts, ctx) }
}

/// A node of `ctx`.
pub fn node(ctx: nerve_context_t, name: &str) -> nerve_node_t {
    let mut n = nerve_node_t::default();
    let name = CString::new(name).unwrap();
    // SAFETY: valid strings and out-pointer.
    ok(unsafe { nerve_node_create(ctx, name.as_ptr(), &mut n) });
    n
}

/// The schema text of `M`.
pub fn schema_of<M: nerve::Message>() -> CString {
    CString::new(Schema::of::<M>().encode()).unwrap()
}

/// The strings of `nerve_msgs/AddTwoInts`'s type, kept alive for [`AddTwoInts::ty`].
pub struct AddTwoInts {
    name: CString,
    request: CString,
    response: CString,
}

impl AddTwoInts {
    /// The type's strings.
    pub fn new() -> AddTwoInts {
        AddTwoInts {
            name: CString::new("nerve_msgs/AddTwoInts").unwrap(),
            request: schema_of::<srv::TwoInts>(),
            response: schema_of::<srv::Int>(),
        }
    }

    /// The C description (valid while `self` lives).
    pub fn ty(&self) -> nerve_service_type_t {
        nerve_service_type_t {
            type_name: self.name.as_ptr(),
            request_schema: self.request.as_ptr(),
            request_hash: 0,
            response_schema: self.response.as_ptr(),
            response_hash: 0,
            max_payload: 0,
        }
    }
}
