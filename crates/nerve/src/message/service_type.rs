//! The type identity of a service: its name and its request and response types.

use super::TypeInfo;

/// Type identity of a service: its type name and the layouts of its request and
/// response, recorded on the service and compared when a server or client opens it.
/// Typed endpoints take it from their [`crate::Service`] ([`ServiceType::of`]);
/// type-erased ones ([`crate::RawClient`], [`crate::RawServer`]) are given it at run time,
/// e.g. from two schemas' [`crate::message::schema::Schema::type_info`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceType {
    /// Service type name, e.g. `nerve_msgs/Trigger`.
    pub name: String,
    /// The request message's type identity.
    pub request: TypeInfo,
    /// The response message's type identity.
    pub response: TypeInfo,
}

impl ServiceType {
    /// A service type named `name` with the given request and response types.
    pub fn new(name: impl Into<String>, request: TypeInfo, response: TypeInfo) -> ServiceType {
        ServiceType {
            name: name.into(),
            request,
            response,
        }
    }

    pub(crate) fn describe(&self) -> String {
        format!(
            "{} (request {}, response {})",
            self.name,
            self.request.describe(),
            self.response.describe()
        )
    }
}
