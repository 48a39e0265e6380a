//! `parameters`: Nerve parameters in Foxglove's Parameters panel.
//!
//! A Foxglove parameter is named `<node>.<parameter>` with the node's full name, e.g.
//! `/robot/driver.max_speed`, as ROS 2's foxglove_bridge names them (split at the first
//! `.`; Nerve node names hold none). Every node serving its parameters (a
//! `<node>/_params` service, see [`nerve::param`]) is listed.
//!
//! - `getParameters` asks each node through a [`ParamClient`] (all nodes when no name is
//!   given; at most [`MAX_LISTED`] values).
//! - `setParameters` sets each node's values all or nothing, through the node's own
//!   validation. When a node refuses, the values already set on other nodes by the same
//!   request are set back, so a refused request leaves every parameter as it was; the
//!   client gets the current values and the refusal's reason as an error status.
//! - `subscribeParameterUpdates`: every change a node publishes on
//!   [`nerve::param::EVENTS_TOPIC`] (whoever made it) is pushed to the subscribed clients.
//!
//! The work runs on one thread ([`run`]); the server's callbacks only queue requests (at
//! most [`MAX_PENDING`]; more are answered at once with an error status).

use crossbeam_channel::{Receiver, Sender};
use foxglove::websocket::{
    AnyClient, GetParametersResponder, Parameter, ParameterHandler, ParameterType, ParameterValue,
    SetParametersResponder,
};
use foxglove::WebSocketServerHandle;
use nerve::message::Serde;
use nerve::param::{events_qos, ParamClient, ParamEvent, ParamValue, EVENTS_TOPIC, SERVICE_SUFFIX};
use nerve::Context;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Parameter requests waiting for the parameter thread; more are refused at once.
pub const MAX_PENDING: usize = 64;
/// Most values one `getParameters` answers with.
pub const MAX_LISTED: usize = 4096;
/// Nodes whose parameter clients are kept.
pub const MAX_NODES: usize = 256;
/// Longest the bridge waits for a node's answer.
pub const NODE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a Foxglove parameter cannot be set.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParamSetError {
    /// The name is not `<node>.<parameter>`.
    #[error("parameter {0:?} is not named <node>.<parameter> (e.g. /robot/driver.max_speed)")]
    Name(String),
    /// The value has no Nerve form.
    #[error("parameter {name}: {reason}")]
    Value {
        /// The Foxglove name.
        name: String,
        /// Why.
        reason: String,
    },
}

/// Splits a Foxglove parameter name into the node's full name and the parameter's.
pub fn split_name(name: &str) -> Result<(&str, &str), ParamSetError> {
    match name.split_once('.') {
        Some((node, param)) if node.starts_with('/') && node.len() > 1 && !param.is_empty() => {
            Ok((node, param))
        }
        _ => Err(ParamSetError::Name(name.into())),
    }
}

/// A Nerve value as a Foxglove parameter named `name`.
pub fn to_foxglove(name: String, v: &ParamValue) -> Parameter {
    let array = |name, values: Vec<ParameterValue>| Parameter {
        name,
        r#type: None,
        value: Some(ParameterValue::Array(values)),
    };
    match v {
        ParamValue::Bool(b) => Parameter::bool(name, *b),
        ParamValue::Int(i) => Parameter::integer(name, *i),
        ParamValue::Float(f) => Parameter::float64(name, *f),
        ParamValue::Str(s) => Parameter::string(name, s.clone()),
        ParamValue::Bytes(b) => Parameter::byte_array(name, b),
        ParamValue::BoolArray(a) => {
            array(name, a.iter().map(|b| ParameterValue::Bool(*b)).collect())
        }
        ParamValue::IntArray(a) => Parameter::integer_array(name, a.iter().copied()),
        ParamValue::FloatArray(a) => Parameter::float64_array(name, a.iter().copied()),
        ParamValue::StrArray(a) => array(
            name,
            a.iter()
                .map(|s| ParameterValue::String(s.clone()))
                .collect(),
        ),
    }
}

/// A Foxglove value as a Nerve value, shaped like the parameter's current value
/// (`current`) where the protocol leaves it open (a whole number for a float parameter,
/// an empty array).
pub fn from_foxglove(
    p: &Parameter,
    current: Option<&ParamValue>,
) -> Result<ParamValue, ParamSetError> {
    let err = |reason: &str| ParamSetError::Value {
        name: p.name.clone(),
        reason: reason.into(),
    };
    let float = matches!(
        current,
        Some(ParamValue::Float(_)) | Some(ParamValue::FloatArray(_))
    ) || matches!(
        p.r#type,
        Some(ParameterType::Float64) | Some(ParameterType::Float64Array)
    );
    let Some(v) = &p.value else {
        return Err(err("no value (Nerve parameters cannot be unset)"));
    };
    Ok(match v {
        ParameterValue::Bool(b) => ParamValue::Bool(*b),
        ParameterValue::Integer(i) if float => ParamValue::Float(*i as f64),
        ParameterValue::Integer(i) => ParamValue::Int(*i),
        ParameterValue::Float64(f) => ParamValue::Float(*f),
        ParameterValue::String(_) if p.r#type == Some(ParameterType::ByteArray) => {
            return Err(err(
                "byte arrays are set with `nerve param set`, not from Foxglove",
            ))
        }
        ParameterValue::String(s) => ParamValue::Str(s.clone()),
        ParameterValue::Dict(_) => return Err(err("a dictionary has no Nerve form")),
        ParameterValue::Array(a) => {
            let all = |f: fn(&ParameterValue) -> bool| a.iter().all(f);
            if a.is_empty() {
                match current {
                    Some(
                        c @ (ParamValue::BoolArray(_)
                        | ParamValue::IntArray(_)
                        | ParamValue::FloatArray(_)
                        | ParamValue::StrArray(_)),
                    ) => empty_like(c),
                    _ => ParamValue::FloatArray(Vec::new()),
                }
            } else if all(|v| matches!(v, ParameterValue::Bool(_))) {
                ParamValue::BoolArray(
                    a.iter()
                        .map(|v| matches!(v, ParameterValue::Bool(true)))
                        .collect(),
                )
            } else if !float && all(|v| matches!(v, ParameterValue::Integer(_))) {
                ParamValue::IntArray(
                    a.iter()
                        .filter_map(|v| match v {
                            ParameterValue::Integer(i) => Some(*i),
                            _ => None,
                        })
                        .collect(),
                )
            } else if all(|v| matches!(v, ParameterValue::Integer(_) | ParameterValue::Float64(_)))
            {
                ParamValue::FloatArray(
                    a.iter()
                        .filter_map(|v| match v {
                            ParameterValue::Integer(i) => Some(*i as f64),
                            ParameterValue::Float64(f) => Some(*f),
                            _ => None,
                        })
                        .collect(),
                )
            } else if all(|v| matches!(v, ParameterValue::String(_))) {
                ParamValue::StrArray(
                    a.iter()
                        .filter_map(|v| match v {
                            ParameterValue::String(s) => Some(s.clone()),
                            _ => None,
                        })
                        .collect(),
                )
            } else {
                return Err(err("an array mixing kinds of values has no Nerve form"));
            }
        }
    })
}

fn empty_like(v: &ParamValue) -> ParamValue {
    match v {
        ParamValue::BoolArray(_) => ParamValue::BoolArray(Vec::new()),
        ParamValue::IntArray(_) => ParamValue::IntArray(Vec::new()),
        ParamValue::StrArray(_) => ParamValue::StrArray(Vec::new()),
        _ => ParamValue::FloatArray(Vec::new()),
    }
}

/// A request from a client, on its way to the parameter thread.
pub enum Request {
    /// `getParameters`.
    Get(Vec<String>, GetParametersResponder),
    /// `setParameters`.
    Set(AnyClient, Vec<Parameter>, SetParametersResponder),
}

/// The server's parameter handler: queues each request for [`run`].
pub struct Handler(pub Sender<Request>);

impl ParameterHandler for Handler {
    fn get(
        &self,
        client: AnyClient,
        names: Vec<String>,
        _request_id: Option<String>,
        responder: GetParametersResponder,
    ) {
        if let Err(e) = self.0.try_send(Request::Get(names, responder)) {
            client.send_error(format!(
                "the bridge has {MAX_PENDING} parameter requests waiting; try again"
            ));
            if let Request::Get(_, r) = e.into_inner() {
                r.respond(Vec::new());
            }
        }
    }

    fn set(
        &self,
        client: AnyClient,
        parameters: Vec<Parameter>,
        _request_id: Option<String>,
        responder: SetParametersResponder,
    ) {
        if let Err(e) = self
            .0
            .try_send(Request::Set(client.clone(), parameters, responder))
        {
            client.send_error(format!(
                "the bridge has {MAX_PENDING} parameter requests waiting; nothing was set"
            ));
            if let Request::Set(_, _, r) = e.into_inner() {
                r.respond(Vec::new());
            }
        }
    }
}

/// The parameter thread's clients, one per node, made on first use.
struct Nodes<'a> {
    node: &'a nerve::Node,
    clients: BTreeMap<String, ParamClient>,
}

impl Nodes<'_> {
    fn client(&mut self, target: &str) -> Result<&ParamClient, String> {
        if !self.clients.contains_key(target) {
            if self.clients.len() >= MAX_NODES {
                self.clients.clear();
            }
            let c = ParamClient::create(self.node, target)
                .map_err(|e| e.to_string())?
                .timeout(NODE_TIMEOUT);
            self.clients.insert(target.to_string(), c);
        }
        Ok(&self.clients[target])
    }

    /// Values of `names` on `target`; a failed call drops the client, to be made anew.
    fn get(&mut self, target: &str, names: &[&str]) -> Result<Vec<Option<ParamValue>>, String> {
        let r = self
            .client(target)
            .and_then(|c| c.get(names).map_err(|e| e.to_string()));
        if r.is_err() {
            self.clients.remove(target);
        }
        r
    }

    fn set(&mut self, target: &str, values: Vec<(String, ParamValue)>) -> Result<(), String> {
        self.client(target)
            .and_then(|c| c.set_atomically(values).map_err(|e| e.to_string()))
    }

    /// The full names of the nodes serving parameters.
    fn targets(&self) -> Vec<String> {
        nerve::introspect::list_services(self.node)
            .unwrap_or_default()
            .into_iter()
            .filter(|s| s.servers > 0)
            .filter_map(|s| s.name.strip_suffix(SERVICE_SUFFIX).map(String::from))
            .collect()
    }

    /// Every parameter of every node, at most [`MAX_LISTED`].
    fn all(&mut self) -> Vec<Parameter> {
        let mut out = Vec::new();
        for target in self.targets() {
            let names = self
                .client(&target)
                .and_then(|c| c.list("").map_err(|e| e.to_string()))
                .unwrap_or_default();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let Ok(values) = self.get(&target, &names) else {
                continue;
            };
            for (n, v) in names.iter().zip(values) {
                if out.len() >= MAX_LISTED {
                    return out;
                }
                if let Some(v) = v {
                    out.push(to_foxglove(format!("{target}.{n}"), &v));
                }
            }
        }
        out
    }

    /// The named parameters' current values (unknown names left out).
    fn named(&mut self, names: &[String]) -> Vec<Parameter> {
        let mut by_node: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for n in names.iter().take(MAX_LISTED) {
            if let Ok((node, p)) = split_name(n) {
                by_node.entry(node).or_default().push(p);
            }
        }
        let mut out = Vec::new();
        for (node, params) in by_node {
            if let Ok(values) = self.get(node, &params) {
                for (p, v) in params.iter().zip(values) {
                    if let Some(v) = v {
                        out.push(to_foxglove(format!("{node}.{p}"), &v));
                    }
                }
            }
        }
        out
    }

    /// Sets `params`, each node all or nothing; on a refusal the nodes already set are set
    /// back. Returns the reason of a refusal.
    fn set_all(&mut self, params: &[Parameter]) -> Result<(), String> {
        let mut by_node: BTreeMap<String, Vec<&Parameter>> = BTreeMap::new();
        for p in params {
            let (node, _) = split_name(&p.name).map_err(|e| e.to_string())?;
            by_node.entry(node.to_string()).or_default().push(p);
        }
        // every value is converted (against the current ones) before anything is set
        let mut plan = Vec::new();
        for (node, ps) in &by_node {
            let names: Vec<&str> = ps
                .iter()
                .map(|p| split_name(&p.name).map(|(_, n)| n).unwrap_or_default())
                .collect();
            let current = self.get(node, &names).map_err(|e| format!("{node}: {e}"))?;
            let mut values = Vec::new();
            let mut old = Vec::new();
            for ((p, n), cur) in ps.iter().zip(&names).zip(current) {
                let Some(cur) = cur else {
                    return Err(format!("{node} has no parameter {n}"));
                };
                values.push((
                    n.to_string(),
                    from_foxglove(p, Some(&cur)).map_err(|e| e.to_string())?,
                ));
                old.push((n.to_string(), cur));
            }
            plan.push((node.clone(), values, old));
        }
        for (i, (node, values, _)) in plan.iter().enumerate() {
            if let Err(why) = self.set(node, values.clone()) {
                for (done, _, old) in plan[..i].iter().rev() {
                    let _ = self.set(done, old.clone());
                }
                return Err(why);
            }
        }
        Ok(())
    }
}

/// The parameter thread: answers queued requests and pushes every change published on
/// the events topic to the subscribed clients, until `stop`.
pub fn run(
    ctx: &Context,
    rx: &Receiver<Request>,
    server: &Mutex<Option<WebSocketServerHandle>>,
    stop: &AtomicBool,
) {
    let Ok(node) = ctx.node("nerve_bridge_params").create() else {
        return;
    };
    let events = node
        .subscriber::<Serde<ParamEvent>>(EVENTS_TOPIC)
        .qos(events_qos())
        .create()
        .ok();
    let mut nodes = Nodes {
        node: &node,
        clients: BTreeMap::new(),
    };
    while !stop.load(Ordering::Relaxed) {
        if let Ok(req) = rx.recv_timeout(Duration::from_millis(20)) {
            match req {
                Request::Get(names, responder) => {
                    let values = if names.is_empty() {
                        nodes.all()
                    } else {
                        nodes.named(&names)
                    };
                    responder.respond(values);
                }
                Request::Set(client, params, responder) => {
                    let outcome = nodes.set_all(&params);
                    let names: Vec<String> = params.iter().map(|p| p.name.clone()).collect();
                    let now = nodes.named(&names);
                    if let Err(why) = outcome {
                        client.send_error(format!("parameters not set: {why}"));
                    }
                    responder.respond(now);
                }
            }
        }
        let Some(events) = &events else { continue };
        while let Ok(Some(s)) = events.try_recv() {
            let Ok(ev) = s.decode() else { continue };
            let changed: Vec<Parameter> = ev
                .changes
                .iter()
                .map(|c| to_foxglove(format!("{}.{}", ev.node, c.name), &c.new))
                .collect();
            if let Some(server) = server.lock().expect("poisoned").as_ref() {
                server.publish_parameter_values(changed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_at_the_first_dot_after_the_node() {
        assert_eq!(
            split_name("/robot/driver.max_speed").unwrap(),
            ("/robot/driver", "max_speed")
        );
        assert_eq!(split_name("/n.a.b").unwrap(), ("/n", "a.b"));
        for bad in ["speed", "/n.", ".x", "n.x"] {
            assert!(split_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn values_cross_both_ways_shaped_like_the_current_value() {
        for v in [
            ParamValue::Bool(true),
            ParamValue::Int(-3),
            ParamValue::Float(2.0),
            ParamValue::Str("x".into()),
            ParamValue::BoolArray(vec![true, false]),
            ParamValue::IntArray(vec![1, 2]),
            ParamValue::FloatArray(vec![1.0, 2.5]),
            ParamValue::StrArray(vec!["a".into()]),
        ] {
            let p = to_foxglove("/n.p".into(), &v);
            assert_eq!(from_foxglove(&p, Some(&v)).unwrap(), v);
        }
        // a whole number typed into a float parameter stays a float
        let p = Parameter::integer("/n.speed", 2);
        assert_eq!(
            from_foxglove(&p, Some(&ParamValue::Float(1.0))).unwrap(),
            ParamValue::Float(2.0)
        );
        assert!(from_foxglove(&Parameter::empty("/n.p"), None).is_err());
    }
}
