//! Services on iceoryx2 request-response: the service's type identity
//! ([`ServiceType`], recorded as attributes and checked on open) and the port types Nerve
//! uses.

use super::shm::{decode_type, encode_type, IoxNode, Ipc, Word, MAX_ALIGN};
use crate::error::ServiceError;
use crate::message::header::CallHeader;
use crate::message::{ServiceType, TypeInfo};
use crate::qos::ServiceQos;
use iceoryx2::prelude::*;
use iceoryx2::service::attribute::{AttributeKey, AttributeSpecifier, AttributeValue};
use iceoryx2::service::builder::request_response::{
    RequestResponseCreateError, RequestResponseOpenError,
};
use std::time::{Duration, Instant};

/// A service's iceoryx2 port factory: word payloads behind a [`CallHeader`] both ways.
pub(crate) type RpcService = iceoryx2::service::port_factory::request_response::PortFactory<
    Ipc,
    [Word],
    CallHeader,
    [Word],
    CallHeader,
>;
pub(crate) type IoxClient =
    iceoryx2::port::client::Client<Ipc, [Word], CallHeader, [Word], CallHeader>;
pub(crate) type IoxServer =
    iceoryx2::port::server::Server<Ipc, [Word], CallHeader, [Word], CallHeader>;
pub(crate) type IoxRequestMut =
    iceoryx2::request_mut::RequestMut<Ipc, [Word], CallHeader, [Word], CallHeader>;
pub(crate) type IoxPending =
    iceoryx2::pending_response::PendingResponse<Ipc, [Word], CallHeader, [Word], CallHeader>;
pub(crate) type IoxActiveRequest =
    iceoryx2::active_request::ActiveRequest<Ipc, [Word], CallHeader, [Word], CallHeader>;
pub(crate) type IoxResponseMut = iceoryx2::response_mut::ResponseMut<Ipc, [Word], CallHeader>;
pub(crate) type IoxResponse = iceoryx2::response::Response<Ipc, [Word], CallHeader>;

/// Prefix of every service's iceoryx2 service name.
pub(crate) const SERVICE_PREFIX: &str = "srv:";
/// Attribute naming the service type.
pub(crate) const SERVICE_ATTRIBUTE: &str = "nerve.service";
/// Attribute recording the request type.
pub(crate) const REQUEST_ATTRIBUTE: &str = "nerve.request";
/// Attribute recording the response type.
pub(crate) const RESPONSE_ATTRIBUTE: &str = "nerve.response";
/// Servers a service admits at once: the live one plus a dead one not yet cleaned up, so a
/// restarted server can take over at once.
pub(crate) const MAX_SERVERS: usize = 2;

fn attribute(service: &RpcService, key: &str) -> Option<String> {
    let key = AttributeKey::try_from(key).ok()?;
    Some(service.attributes().key_value(&key, 0)?.to_string())
}

/// Reads the type identity recorded on a service.
pub(crate) fn service_type(service: &RpcService) -> Option<ServiceType> {
    Some(ServiceType {
        name: attribute(service, SERVICE_ATTRIBUTE)?,
        request: decode_type(&attribute(service, REQUEST_ATTRIBUTE)?)?,
        response: decode_type(&attribute(service, RESPONSE_ATTRIBUTE)?)?,
    })
}

/// Opens a service, creating it with `qos` if it does not exist. `ty` = `None` opens any
/// existing service (introspection).
pub(crate) fn open_service(
    node: &IoxNode,
    name: &str,
    ty: Option<&ServiceType>,
    qos: &ServiceQos,
) -> Result<RpcService, ServiceError> {
    let shm_err = |reason: String| ServiceError::Shm {
        service: name.to_string(),
        reason,
    };
    let iox_name = ServiceName::new(&format!("{SERVICE_PREFIX}{name}"))
        .map_err(|e| shm_err(format!("{e:?}")))?;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let builder = node
            .service_builder(&iox_name)
            .request_response::<[Word], [Word]>()
            .request_user_header::<CallHeader>()
            .response_user_header::<CallHeader>();
        match builder.open() {
            Ok(service) => {
                check_existing(name, &service, ty)?;
                return Ok(service);
            }
            Err(RequestResponseOpenError::DoesNotExist) => {}
            Err(
                RequestResponseOpenError::IncompatibleMessagingPattern
                | RequestResponseOpenError::IncompatibleRequestOrResponseType,
            ) => {
                return Err(ServiceError::NotAService {
                    service: name.to_string(),
                    reason: "the name is used by something that is not a Nerve service".into(),
                })
            }
            Err(
                RequestResponseOpenError::ServiceInCorruptedState
                | RequestResponseOpenError::HangsInCreation
                | RequestResponseOpenError::IsMarkedForDestruction
                | RequestResponseOpenError::InternalFailure,
            ) if Instant::now() < deadline => {
                // being created or removed by another process, or left half made by a dead
                // one (cleaned up on the next attempt)
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            Err(e) => return Err(shm_err(format!("open failed: {e:?}"))),
        }
        let Some(ty) = ty else {
            return Err(ServiceError::NotFound {
                service: name.to_string(),
            });
        };
        for t in [&ty.request, &ty.response] {
            if t.align > MAX_ALIGN {
                return Err(ServiceError::UnsupportedLayout {
                    service: name.to_string(),
                    reason: format!(
                        "{} needs {}-byte alignment; Nerve aligns payloads to {MAX_ALIGN} bytes",
                        t.name, t.align
                    ),
                });
            }
        }
        let attrs = type_attributes(ty).map_err(shm_err)?;
        let builder = node
            .service_builder(&iox_name)
            .request_response::<[Word], [Word]>()
            .request_user_header::<CallHeader>()
            .response_user_header::<CallHeader>()
            .max_servers(MAX_SERVERS)
            .max_clients(qos.max_clients)
            .max_nodes(qos.max_clients + MAX_SERVERS + 2)
            .max_active_requests_per_client(qos.max_in_flight)
            .max_loaned_requests(qos.max_in_flight)
            .max_response_buffer_size(2)
            .max_borrowed_responses_per_pending_response(2)
            .enable_safe_overflow_for_requests(false)
            .enable_safe_overflow_for_responses(false);
        match builder.create_with_attributes(&attrs) {
            Ok(service) => return Ok(service),
            Err(
                RequestResponseCreateError::AlreadyExists
                | RequestResponseCreateError::IsBeingCreatedByAnotherInstance,
            ) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            Err(e) => return Err(shm_err(format!("create failed: {e:?}"))),
        }
    }
}

fn type_attributes(ty: &ServiceType) -> Result<AttributeSpecifier, String> {
    let mut spec = AttributeSpecifier::new();
    for (key, value) in [
        (SERVICE_ATTRIBUTE, ty.name.clone()),
        (REQUEST_ATTRIBUTE, encode_type(&ty.request)),
        (RESPONSE_ATTRIBUTE, encode_type(&ty.response)),
    ] {
        let key = AttributeKey::try_from(key).map_err(|e| format!("{e:?}"))?;
        let value = AttributeValue::try_from(value.as_str())
            .map_err(|_| format!("type name {value} is too long"))?;
        spec = spec.define(&key, &value).map_err(|e| format!("{e:?}"))?;
    }
    Ok(spec)
}

fn check_existing(
    name: &str,
    service: &RpcService,
    ty: Option<&ServiceType>,
) -> Result<(), ServiceError> {
    let existing = service_type(service).ok_or_else(|| ServiceError::NotAService {
        service: name.to_string(),
        reason: "the service carries no Nerve type record".into(),
    })?;
    if let Some(ty) = ty {
        let same = |a: &TypeInfo, b: &TypeInfo| a.name == b.name && a.layout_hash == b.layout_hash;
        if existing.name != ty.name
            || !same(&existing.request, &ty.request)
            || !same(&existing.response, &ty.response)
        {
            return Err(ServiceError::TypeMismatch {
                service: name.to_string(),
                existing: existing.describe(),
                requested: ty.describe(),
            });
        }
    }
    Ok(())
}
