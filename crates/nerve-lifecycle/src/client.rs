//! Driving managed nodes of other processes: [`LifecycleClient`] (blocking calls for
//! tools), [`ChangeCall`] (a change in flight, polled by a supervisor loop) and
//! [`list_managed`].

use crate::error::ClientError;
use crate::node::{CHANGE_STATE, GET_AVAILABLE_TRANSITIONS, GET_STATE};
use crate::state::{State, Transition, LABELS};
use nerve::message::{as_bytes, read_pod};
use nerve::{CallError, Client, Node, RawClient, RawPendingCall, ServiceQos, ServiceType};
use nerve_msgs::lifecycle::{
    ChangeState, ChangeStateRequest, GetAvailableTransitions, GetState, TransitionDescription,
};
use nerve_msgs::srv::Empty;
use std::time::Duration;

/// The full names of the managed nodes of the domain (those whose `change_state` has a
/// server now), sorted.
pub fn list_managed(node: &Node) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = nerve::introspect::list_services(node)?
        .into_iter()
        .filter(|s| s.servers > 0 && s.type_name == <ChangeState as nerve::Service>::TYPE_NAME)
        .filter_map(|s| s.name.strip_suffix(CHANGE_STATE).map(String::from))
        .collect();
    out.sort();
    Ok(out)
}

/// Checks a transition label given by a user (`configure`, `activate`, `deactivate`,
/// `cleanup`, `shutdown`).
pub fn check_label(label: &str) -> Result<(), ClientError> {
    if LABELS.contains(&label) {
        Ok(())
    } else {
        Err(ClientError::UnknownTransition {
            label: label.to_string(),
        })
    }
}

fn request(label: &str) -> ChangeStateRequest {
    let id = Transition::ALL
        .iter()
        .find(|t| t.label() == label)
        .map_or(0, |t| t.id());
    ChangeStateRequest {
        transition: nerve_msgs::lifecycle::Transition {
            id,
            label: crate::state::label(label),
        },
    }
}

fn call_error(node: &str, what: String, e: CallError) -> ClientError {
    match e {
        CallError::Timeout { timeout, .. } => ClientError::Timeout {
            node: node.to_string(),
            what,
            timeout,
        },
        CallError::Handler { message, .. } => ClientError::Refused {
            node: node.to_string(),
            reason: message,
        },
        CallError::NoServer { service } | CallError::ServerGone { service } => {
            ClientError::NoNode {
                node: node.to_string(),
                service,
            }
        }
        source => ClientError::Call {
            node: node.to_string(),
            source,
        },
    }
}

fn state_of(node: &str, id: u8) -> Result<State, ClientError> {
    State::from_id(id).ok_or_else(|| ClientError::Malformed {
        node: node.to_string(),
        reason: format!("unknown state id {id}"),
    })
}

/// A client of one managed node's services.
pub struct LifecycleClient {
    target: String,
    change: RawClient,
    get: Client<GetState>,
    transitions: Client<GetAvailableTransitions>,
    timeout: Duration,
}

impl LifecycleClient {
    /// A client of the managed node `target` (its full name, `/ns/name`). Calls wait
    /// 5 s by default.
    pub fn create(node: &Node, target: &str) -> Result<LifecycleClient, ClientError> {
        let open = |source| ClientError::Open {
            node: target.to_string(),
            source,
        };
        let change = RawClient::create(
            node,
            &format!("{target}{CHANGE_STATE}"),
            &ServiceType::of::<ChangeState>(),
            ServiceQos::default(),
            nerve::WaitMode::default(),
        )
        .map_err(open)?;
        let get = node
            .client::<GetState>(&format!("{target}{GET_STATE}"))
            .create()
            .map_err(open)?;
        let transitions = node
            .client::<GetAvailableTransitions>(&format!("{target}{GET_AVAILABLE_TRANSITIONS}"))
            .create()
            .map_err(open)?;
        Ok(LifecycleClient {
            target: target.to_string(),
            change,
            get,
            transitions,
            timeout: Duration::from_secs(5),
        })
    }

    /// Sets how long a call waits for its answer.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The node's full name.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Whether the node serves its lifecycle now.
    pub fn is_served(&self) -> bool {
        self.change.server_count() > 0
    }

    /// Waits up to `timeout` for the node to serve its lifecycle.
    pub fn wait_for_node(&self, timeout: Duration) -> bool {
        self.change.wait_for_service(timeout)
    }

    fn no_node(&self) -> ClientError {
        ClientError::NoNode {
            node: self.target.clone(),
            service: format!("{}{CHANGE_STATE}", self.target),
        }
    }

    /// The node's state.
    pub fn get_state(&self) -> Result<State, ClientError> {
        if self.get.server_count() == 0 {
            return Err(self.no_node());
        }
        let reply = self
            .get
            .call(&Empty {}, self.timeout)
            .map_err(|e| call_error(&self.target, "get_state".into(), e))?;
        state_of(&self.target, reply.current_state.id)
    }

    /// The transitions valid now: (label, id, goal state).
    pub fn available_transitions(&self) -> Result<Vec<(String, u8, State)>, ClientError> {
        if self.transitions.server_count() == 0 {
            return Err(self.no_node());
        }
        let reply = self
            .transitions
            .call(&Empty {}, self.timeout)
            .map_err(|e| call_error(&self.target, "get_available_transitions".into(), e))?;
        reply
            .elems()
            .iter()
            .map(|d: &TransitionDescription| {
                Ok((
                    d.transition.label.as_str().into_owned(),
                    d.transition.id,
                    state_of(&self.target, d.goal_state.id)?,
                ))
            })
            .collect()
    }

    /// Sends a transition by label; the answer comes through the returned call.
    pub fn start_change(&self, label: &str) -> Result<ChangeCall, ClientError> {
        check_label(label)?;
        if self.change.server_count() == 0 {
            return Err(self.no_node());
        }
        let call = self
            .change
            .send_bytes(as_bytes(&request(label)))
            .map_err(|e| call_error(&self.target, format!("transition {label}"), e))?;
        Ok(ChangeCall {
            node: self.target.clone(),
            label: label.to_string(),
            call,
        })
    }

    /// Asks for a transition by label and waits for it; then returns the state reached.
    pub fn change_state(&self, label: &str) -> Result<State, ClientError> {
        let call = self.start_change(label)?;
        match call.wait_for(self.timeout)? {
            Some(true) => self.get_state(),
            Some(false) => Err(ClientError::Failed {
                node: self.target.clone(),
                transition: label.to_string(),
                state: self.get_state()?,
            }),
            None => Err(ClientError::Timeout {
                node: self.target.clone(),
                what: format!("transition {label}"),
                timeout: self.timeout,
            }),
        }
    }
}

/// A transition asked for and not answered yet.
pub struct ChangeCall {
    node: String,
    label: String,
    call: RawPendingCall,
}

impl ChangeCall {
    /// The transition's label.
    pub fn label(&self) -> &str {
        &self.label
    }

    fn answer(&self, reply: Option<nerve::RawReply>) -> Result<Option<bool>, ClientError> {
        let Some(reply) = reply else {
            return Ok(None);
        };
        let resp: nerve_msgs::lifecycle::ChangeStateResponse =
            read_pod(reply.bytes()).ok_or_else(|| ClientError::Malformed {
                node: self.node.clone(),
                reason: format!("a change_state answer of {} bytes", reply.bytes().len()),
            })?;
        Ok(Some(resp.success != 0))
    }

    /// The answer if it came: `Some(true)` the goal was reached, `Some(false)` a callback
    /// failed or erred; `None` not yet.
    pub fn poll(&self) -> Result<Option<bool>, ClientError> {
        let r = self
            .call
            .try_take()
            .map_err(|e| call_error(&self.node, format!("transition {}", self.label), e))?;
        self.answer(r)
    }

    /// Waits up to `timeout` for the answer (`None`: none came; the call stays).
    pub fn wait_for(&self, timeout: Duration) -> Result<Option<bool>, ClientError> {
        let r = self
            .call
            .wait_for(timeout)
            .map_err(|e| call_error(&self.node, format!("transition {}", self.label), e))?;
        self.answer(r)
    }
}
