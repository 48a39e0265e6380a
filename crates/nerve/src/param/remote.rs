//! Parameters across processes and hosts: the `<node>/_params` service, its client and
//! the parameter-events topic.

use super::error::ParamError;
use super::store::{ParamChange, ParamInfo};
use super::value::ParamValue;
use crate::context::Node;
use crate::message::{Serde, SerdeMessage};
use crate::service::client::Client;
use crate::service::Service;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The topic every parameter change is published on.
pub const EVENTS_TOPIC: &str = "/parameter_events";

/// QoS of [`EVENTS_TOPIC`], for every node's publisher and every reader (whoever opens
/// the topic first fixes its limits): one publisher per node with parameters.
pub fn events_qos() -> crate::qos::Qos {
    crate::qos::Qos::default().max_endpoints(256, 64).depth(64)
}
/// A node's parameter service is its full name plus this suffix.
pub const SERVICE_SUFFIX: &str = "/_params";

/// A request to a node's parameter service.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ParamRequest {
    /// Names starting with `prefix`.
    List {
        /// The prefix (`""`: all).
        prefix: String,
    },
    /// Values of `names`.
    Get {
        /// The names.
        names: Vec<String>,
    },
    /// Declarations of `names`.
    Describe {
        /// The names.
        names: Vec<String>,
    },
    /// Sets `values`, all or nothing when `atomic`.
    Set {
        /// Names and values.
        values: Vec<(String, ParamValue)>,
        /// All or nothing.
        atomic: bool,
    },
}

/// The answer of a node's parameter service.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ParamResponse {
    /// Sorted names.
    List(Vec<String>),
    /// A value per name asked (`None`: not declared).
    Get(Vec<Option<ParamValue>>),
    /// A declaration per name asked.
    Describe(Vec<Option<ParamInfo>>),
    /// An outcome per value set (for an atomic set: all the same).
    Set(Vec<Result<(), String>>),
}

/// One set (or declaration) on one node, as published on [`EVENTS_TOPIC`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamEvent {
    /// The node's full name.
    pub node: String,
    /// When, in ns since the Unix epoch.
    pub stamp_ns: i64,
    /// What changed (all changes of one set).
    pub changes: Vec<ParamChange>,
}

impl SerdeMessage for ParamRequest {
    const TYPE_NAME: &'static str = "nerve/ParamRequest";
}
impl SerdeMessage for ParamResponse {
    const TYPE_NAME: &'static str = "nerve/ParamResponse";
}
impl SerdeMessage for ParamEvent {
    const TYPE_NAME: &'static str = "nerve/ParamEvent";
}

/// The parameter service type.
pub struct ParamService;
impl Service for ParamService {
    const TYPE_NAME: &'static str = "nerve/Parameters";
    type Request = Serde<ParamRequest>;
    type Response = Serde<ParamResponse>;
}

/// Reads and sets the parameters of another node, in this process, another process or
/// another host.
pub struct ParamClient {
    client: Client<ParamService>,
    target: String,
    timeout: Duration,
}

impl ParamClient {
    /// The full name of the node this client talks to.
    pub fn target(&self) -> &str {
        &self.target
    }
}

impl ParamClient {
    /// A client of the node named `target` (`/robot1/driver`; a relative name such as
    /// `driver` is in the calling node's namespace), calling from `node`. Calls time out
    /// after 2 s unless [`timeout`](Self::timeout) says otherwise.
    pub fn create(node: &Node, target: &str) -> Result<ParamClient, ParamError> {
        let target = if target.starts_with('/') {
            target.to_string()
        } else {
            crate::name::join(node.namespace(), target)
        };
        let client = node
            .client::<ParamService>(&format!("{target}{SERVICE_SUFFIX}"))
            .create()?;
        Ok(ParamClient {
            client,
            target,
            timeout: Duration::from_secs(2),
        })
    }

    /// Sets how long a call waits for the node.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Waits up to `timeout` for the node to serve its parameters.
    pub fn wait_for_node(&self, timeout: Duration) -> bool {
        self.client.wait_for_service(timeout)
    }

    fn call(&self, req: &ParamRequest) -> Result<ParamResponse, ParamError> {
        let reply = self.client.call_value(req, self.timeout)?;
        reply.decode().map_err(|e| ParamError::Remote {
            node: self.target.clone(),
            reason: e.to_string(),
        })
    }

    fn unexpected(&self) -> ParamError {
        ParamError::Remote {
            node: self.target.clone(),
            reason: "answered with another kind of response".into(),
        }
    }

    /// Names of the node's parameters starting with `prefix`.
    pub fn list(&self, prefix: &str) -> Result<Vec<String>, ParamError> {
        match self.call(&ParamRequest::List {
            prefix: prefix.into(),
        })? {
            ParamResponse::List(v) => Ok(v),
            _ => Err(self.unexpected()),
        }
    }

    /// Values of `names` (`None` for names the node does not have).
    pub fn get(&self, names: &[&str]) -> Result<Vec<Option<ParamValue>>, ParamError> {
        let names = names.iter().map(|s| s.to_string()).collect();
        match self.call(&ParamRequest::Get { names })? {
            ParamResponse::Get(v) => Ok(v),
            _ => Err(self.unexpected()),
        }
    }

    /// Declarations of `names`.
    pub fn describe(&self, names: &[&str]) -> Result<Vec<Option<ParamInfo>>, ParamError> {
        let names = names.iter().map(|s| s.to_string()).collect();
        match self.call(&ParamRequest::Describe { names })? {
            ParamResponse::Describe(v) => Ok(v),
            _ => Err(self.unexpected()),
        }
    }

    /// Sets `values` one by one; an outcome per value (the reason when refused).
    pub fn set_each(
        &self,
        values: Vec<(String, ParamValue)>,
    ) -> Result<Vec<Result<(), String>>, ParamError> {
        match self.call(&ParamRequest::Set {
            values,
            atomic: false,
        })? {
            ParamResponse::Set(v) => Ok(v),
            _ => Err(self.unexpected()),
        }
    }

    /// Sets `values` all or nothing; a refusal comes back as [`ParamError::Remote`]
    /// with the node's reason.
    pub fn set_atomically(&self, values: Vec<(String, ParamValue)>) -> Result<(), ParamError> {
        match self.call(&ParamRequest::Set {
            values,
            atomic: true,
        })? {
            ParamResponse::Set(v) => match v.into_iter().find_map(Result::err) {
                None => Ok(()),
                Some(reason) => Err(ParamError::Remote {
                    node: self.target.clone(),
                    reason,
                }),
            },
            _ => Err(self.unexpected()),
        }
    }
}
