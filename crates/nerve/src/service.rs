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
use crate::transport::rpc::ServiceType;

/// A service type: a request message and a response message under one name.
pub trait Service: 'static {
    /// Service type name shown by tools and checked on open, e.g. `nerve_msgs/Trigger`.
    const TYPE_NAME: &'static str;
    /// The request message.
    type Request: Message;
    /// The response message.
    type Response: Message;
}

pub(crate) fn service_type<S: Service>() -> ServiceType {
    ServiceType {
        name: S::TYPE_NAME.to_string(),
        request: TypeInfo::of::<S::Request>(),
        response: TypeInfo::of::<S::Response>(),
    }
}

/// What a handler returns: `Ok` once it replied; an error's message reaches the client as
/// [`crate::CallError::Handler`].
pub type HandlerResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

const MIB: usize = 1 << 20;

/// Limits of a service. The creator's settings fix the service's capacity (clients, calls in
/// flight); payload limits and memory are per endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceQos {
    /// Clients the service admits at once.
    pub max_clients: usize,
    /// Calls one client may have in flight at once.
    pub max_in_flight: usize,
    /// Payload bytes each endpoint's shared memory is first sized for (grows by powers of
    /// two up to the maxima).
    pub initial_payload: usize,
    /// Largest request in bytes; larger requests fail before anything is sent.
    pub max_request: usize,
    /// Largest response in bytes.
    pub max_response: usize,
    /// Shared memory one endpoint may pre-allocate for its payload pool, in bytes.
    pub shm_budget: usize,
}

impl Default for ServiceQos {
    fn default() -> Self {
        ServiceQos {
            max_clients: 16,
            max_in_flight: 8,
            initial_payload: 64 * 1024,
            max_request: 64 * MIB,
            max_response: 64 * MIB,
            shm_budget: 16 * MIB,
        }
    }
}

impl ServiceQos {
    /// Sets the largest request and response in bytes (and lowers the initial size to fit).
    pub fn max_payload(mut self, request: usize, response: usize) -> Self {
        self.max_request = request;
        self.max_response = response;
        self.initial_payload = self.initial_payload.min(request.max(response));
        self
    }

    /// Sets the calls one client may have in flight.
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n;
        self
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.max_clients == 0 || self.max_in_flight == 0 {
            return Err("max_clients and max_in_flight must be at least 1".into());
        }
        if self.initial_payload > self.max_request.max(self.max_response) {
            return Err(format!(
                "initial_payload {} exceeds both maxima",
                self.initial_payload
            ));
        }
        Ok(())
    }

    /// Payload chunks an endpoint pre-allocates: what the service's capacity needs, capped by
    /// the memory budget (at least 4).
    pub(crate) fn pool(&self, worst_case: usize) -> usize {
        let chunk = self.initial_payload.max(1);
        worst_case.min((self.shm_budget / chunk).max(4)).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_validation_and_pool() {
        ServiceQos::default().validate().unwrap();
        assert!(ServiceQos::default().max_in_flight(0).validate().is_err());
        let q = ServiceQos::default();
        assert_eq!(q.pool(1000), 256, "16 MiB of 64 KiB chunks");
        assert_eq!(q.pool(10), 10);
    }
}
