//! Services: typed request/response between processes, both payloads loaned in shared
//! memory. A service type pairs a request and a response message under one name; servers
//! and clients check that identity when they open a service.
//!
//! ```
//! use nerve::prelude::*;
//! use std::time::Duration;
//!
//! #[derive(Clone, Copy, nerve::Message)]
//! #[repr(C)]
//! #[message(name = "demo/AddRequest")]
//! struct AddRequest { a: i64, b: i64 }
//!
//! #[derive(Clone, Copy, nerve::Message)]
//! #[repr(C)]
//! #[message(name = "demo/AddResponse")]
//! struct AddResponse { sum: i64 }
//!
//! struct Add;
//! impl nerve::Service for Add {
//!     const TYPE_NAME: &'static str = "demo/Add";
//!     type Request = AddRequest;
//!     type Response = AddResponse;
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = Context::from_env()?;
//! // server thread: its own node, answers until stopped or dropped
//! let server = nerve::ServiceThread::spawn::<Add, _>(&ctx, "adder", "/add", Default::default(),
//!     |req| req.reply(&AddResponse { sum: req.a + req.b }).map_err(Into::into))?;
//! let node = ctx.node("caller").create()?;
//! let client = node.client::<Add>("/add").create()?;
//! client.wait_for_service(Duration::from_secs(1));
//! let reply = client.call(&AddRequest { a: 2, b: 3 }, Duration::from_millis(100))?;
//! assert_eq!(reply.sum, 5);
//! server.stop()?;
//! # Ok(()) }
//! ```

use crate::message::{Message, TypeInfo};

/// A service type: a request message and a response message under one name.
pub trait Service: 'static {
    /// Service type name shown by tools and checked on open, e.g. `nerve_msgs/Trigger`.
    const TYPE_NAME: &'static str;
    /// The request message.
    type Request: Message;
    /// The response message.
    type Response: Message;
}

pub use crate::message::ServiceType;

impl ServiceType {
    /// The type identity of service `S`.
    pub fn of<S: Service>() -> ServiceType {
        ServiceType::new(
            S::TYPE_NAME,
            TypeInfo::of::<S::Request>(),
            TypeInfo::of::<S::Response>(),
        )
    }
}

/// Records the schemas of `S`'s request and response in the node's domain (once per
/// type), so tools and bridges can describe the service's payloads
/// ([`crate::introspect::recorded_schema`]). Best effort: a service works without them.
fn record_schemas<S: Service>(node: &crate::context::Node) {
    use crate::message::schema::Schema;
    let iox = &node.inner.iox;
    let _ = crate::transport::shm::write_schema_file(iox, &Schema::of::<S::Request>());
    let _ = crate::transport::shm::write_schema_file(iox, &Schema::of::<S::Response>());
}

/// What a handler returns: `Ok` once it replied; an error's message reaches the client as
/// [`crate::CallError::Handler`].
pub type HandlerResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

pub use crate::qos::ServiceQos;

pub(crate) mod client;
pub(crate) mod server;
