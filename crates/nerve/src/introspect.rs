//! Introspection for tools: list topics and nodes, subscribe without knowing the type,
//! and remove stale resources of dead processes.

use crate::config::Config;
use crate::context::{Context, Node};
use crate::error::{ServiceError, TopicError};
use crate::message::schema::{Schema, SchemaError};
use crate::message::TypeInfo;
use crate::qos::Qos;
use crate::qos::ServiceQos;
use crate::transport::doorbell::{self, Doorbell};
use crate::transport::rpc;
use crate::transport::shm::{self, Ipc, TOPIC_PREFIX};
use iceoryx2::node::NodeView;
use iceoryx2::prelude::*;
use std::collections::BTreeSet;

/// What `nerve topic list` shows of a topic.
#[derive(Clone, Debug)]
pub struct TopicInfo {
    /// Topic name.
    pub name: String,
    /// Message type.
    pub type_info: TypeInfo,
    /// Publishers connected now.
    pub publishers: usize,
    /// Subscribers connected now.
    pub subscribers: usize,
    /// Samples kept for late joiners.
    pub history: usize,
    /// Largest subscriber queue depth.
    pub max_depth: usize,
    /// `drop-oldest` or `back-pressure`.
    pub overflow: &'static str,
    /// Most publishers.
    pub max_publishers: usize,
    /// Most subscribers.
    pub max_subscribers: usize,
    /// The type's schema as recorded on the topic (`None`: none recorded; an error: the
    /// record cannot be trusted).
    pub schema: Option<Result<crate::message::schema::Schema, crate::message::schema::SchemaError>>,
}

/// The names of the domain's topics, without opening them (cheap enough to poll).
pub fn topic_names(node: &Node) -> Result<BTreeSet<String>, String> {
    let mut names = BTreeSet::new();
    Ipc::list(&node.inner.ctx.inner.iox, |details| {
        let n = details.static_details.name().as_str().to_string();
        if let Some(t) = n.strip_prefix(TOPIC_PREFIX) {
            if matches!(
                details.static_details.messaging_pattern(),
                iceoryx2::service::static_config::messaging_pattern::MessagingPattern::PublishSubscribe(_)
            ) {
                names.insert(t.to_string());
            }
        }
        CallbackProgression::Continue
    })
    .map_err(|e| format!("cannot list topics: {e:?}"))?;
    Ok(names)
}

/// Lists the topics of the context's domain. `node` is used to open each topic for its
/// live counts.
pub fn list_topics(node: &Node) -> Result<Vec<TopicInfo>, String> {
    let mut out = Vec::new();
    for name in topic_names(node)? {
        // a topic may vanish between listing and opening: skip it
        if let Ok(info) = topic_info(node, &name) {
            out.push(info);
        }
    }
    Ok(out)
}

/// Details of one topic.
pub fn topic_info(node: &Node, topic: &str) -> Result<TopicInfo, TopicError> {
    crate::name::validate_topic(topic)?;
    let service = shm::open_topic(&node.inner.iox, topic, None, None, &Qos::default())?;
    let type_info = shm::topic_type(&service).ok_or_else(|| TopicError::NotATopic {
        topic: topic.to_string(),
        reason: "no Nerve type record".into(),
    })?;
    let cfg = service.static_config();
    let dynamic = service.dynamic_config();
    Ok(TopicInfo {
        name: topic.to_string(),
        type_info,
        publishers: dynamic.number_of_publishers(),
        subscribers: dynamic.number_of_subscribers(),
        history: cfg.history_size(),
        max_depth: cfg.subscriber_max_buffer_size(),
        overflow: if cfg.has_safe_overflow() {
            "drop-oldest"
        } else {
            "back-pressure"
        },
        max_publishers: cfg.max_publishers(),
        max_subscribers: cfg.max_subscribers(),
        schema: shm::topic_schema(&node.inner.iox, &service),
    })
}

/// The nodes at either end of a topic or service, by name (a node of a dead process, or
/// one whose details cannot be read, is named by its id).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoints {
    /// Names of the nodes publishing (a topic) or serving (a service).
    pub publishers: Vec<String>,
    /// Names of the nodes subscribing (a topic) or calling (a service).
    pub subscribers: Vec<String>,
}

/// Names of the domain's nodes by iceoryx2 node id.
fn node_names(node: &Node) -> std::collections::HashMap<String, String> {
    let mut names = std::collections::HashMap::new();
    let _ = iceoryx2::node::Node::<Ipc>::list(&node.inner.ctx.inner.iox, |state| {
        if let NodeState::Alive(v) = &state {
            if let Some(d) = v.details() {
                names.insert(format!("{:?}", v.id()), d.name().as_str().to_string());
            }
        }
        CallbackProgression::Continue
    });
    names
}

/// The nodes publishing and subscribing to `topic`, sorted, one entry per endpoint.
pub fn topic_endpoints(node: &Node, topic: &str) -> Result<Endpoints, TopicError> {
    crate::name::validate_topic(topic)?;
    let service = shm::open_topic(&node.inner.iox, topic, None, None, &Qos::default())?;
    let names = node_names(node);
    let name = |id: &iceoryx2::identifiers::UniqueNodeId| {
        let id = format!("{id:?}");
        names.get(&id).cloned().unwrap_or(id)
    };
    let mut out = Endpoints::default();
    let dynamic = service.dynamic_config();
    dynamic.list_publishers(|p| {
        out.publishers.push(name(&p.node_id));
        CallbackProgression::Continue
    });
    dynamic.list_subscribers(|s| {
        out.subscribers.push(name(&s.node_id));
        CallbackProgression::Continue
    });
    out.publishers.sort();
    out.subscribers.sort();
    Ok(out)
}

/// The nodes serving (as [`Endpoints::publishers`]) and calling (as
/// [`Endpoints::subscribers`]) service `name`, sorted.
pub fn service_endpoints(node: &Node, name: &str) -> Result<Endpoints, ServiceError> {
    crate::name::validate_topic(name)?;
    let service = rpc::open_service(&node.inner.iox, name, None, &ServiceQos::default())?;
    let names = node_names(node);
    let lookup = |id: &iceoryx2::identifiers::UniqueNodeId| {
        let id = format!("{id:?}");
        names.get(&id).cloned().unwrap_or(id)
    };
    let mut out = Endpoints::default();
    let dynamic = service.dynamic_config();
    dynamic.list_servers(|s| {
        out.publishers.push(lookup(&s.node_id));
        CallbackProgression::Continue
    });
    dynamic.list_clients(|c| {
        out.subscribers.push(lookup(&c.node_id));
        CallbackProgression::Continue
    });
    out.publishers.sort();
    out.subscribers.sort();
    Ok(out)
}

/// What `nerve service list` shows of a service.
#[derive(Clone, Debug)]
pub struct ServiceInfo {
    /// Service name.
    pub name: String,
    /// Service type name.
    pub type_name: String,
    /// Request message type.
    pub request: TypeInfo,
    /// Response message type.
    pub response: TypeInfo,
    /// Servers registered now (live, or dead and not yet reclaimed).
    pub servers: usize,
    /// Clients connected now.
    pub clients: usize,
    /// Most clients.
    pub max_clients: usize,
    /// Calls one client may have in flight.
    pub max_in_flight: usize,
}

/// Records `schema` in the node's domain, where [`recorded_schema`] finds it by type:
/// typed service endpoints record their request and response this way (topics record
/// theirs on the topic). Written once per type, as a file of the domain named by the
/// layout hash and removed with the domain's other files.
pub fn record_schema(node: &Node, schema: &Schema) -> Result<(), SchemaError> {
    shm::write_schema_file(&node.inner.iox, schema)
}

/// The schema recorded in the node's domain for type `ty` ([`record_schema`]), or on a
/// topic too large to hold it: `None` when there is none, an error when it cannot be read
/// or describes another type (it is never trusted unchecked).
pub fn recorded_schema(node: &Node, ty: &TypeInfo) -> Option<Result<Schema, SchemaError>> {
    shm::read_schema_file(&node.inner.iox, ty)
}

/// Lists the services of the context's domain.
pub fn list_services(node: &Node) -> Result<Vec<ServiceInfo>, String> {
    let mut names = BTreeSet::new();
    Ipc::list(&node.inner.ctx.inner.iox, |details| {
        let n = details.static_details.name().as_str().to_string();
        if let Some(s) = n.strip_prefix(rpc::SERVICE_PREFIX) {
            names.insert(s.to_string());
        }
        CallbackProgression::Continue
    })
    .map_err(|e| format!("cannot list services: {e:?}"))?;
    // a service may vanish between listing and opening: skip it
    Ok(names
        .into_iter()
        .filter_map(|name| service_info(node, &name).ok())
        .collect())
}

/// Details of one service.
pub fn service_info(node: &Node, name: &str) -> Result<ServiceInfo, ServiceError> {
    crate::name::validate_topic(name)?;
    let service = rpc::open_service(&node.inner.iox, name, None, &ServiceQos::default())?;
    let ty = rpc::service_type(&service).ok_or_else(|| ServiceError::NotAService {
        service: name.to_string(),
        reason: "no Nerve type record".into(),
    })?;
    let cfg = service.static_config();
    let dynamic = service.dynamic_config();
    Ok(ServiceInfo {
        name: name.to_string(),
        type_name: ty.name,
        request: ty.request,
        response: ty.response,
        servers: dynamic.number_of_servers(),
        clients: dynamic.number_of_clients(),
        max_clients: cfg.max_clients(),
        max_in_flight: cfg.max_active_requests_per_client(),
    })
}

/// What `nerve node list` shows of a node.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    /// Node name.
    pub name: String,
    /// Process id.
    pub pid: i32,
    /// Executable name.
    pub executable: String,
    /// `alive`, `dead` (crashed, resources not yet reclaimed) or `inaccessible`.
    pub state: &'static str,
}

/// Lists the nodes of the context's domain.
pub fn list_nodes(ctx: &Context) -> Result<Vec<NodeInfo>, String> {
    let mut out = Vec::new();
    iceoryx2::node::Node::<Ipc>::list(&ctx.inner.iox, |state| {
        let (view_state, details) = match &state {
            NodeState::Alive(v) => ("alive", v.details().clone()),
            NodeState::Dead(v) => ("dead", v.details().clone()),
            NodeState::Inaccessible(_) | NodeState::Undefined(_) => ("inaccessible", None),
        };
        let (name, pid, executable) = match details {
            Some(d) => (
                d.name().as_str().to_string(),
                d.process_id().value(),
                d.executable().to_string(),
            ),
            None => (String::new(), 0, String::new()),
        };
        out.push(NodeInfo {
            name,
            pid,
            executable,
            state: view_state,
        });
        CallbackProgression::Continue
    })
    .map_err(|e| format!("cannot list nodes: {e:?}"))?;
    out.sort_by(|a, b| a.name.cmp(&b.name).then(a.pid.cmp(&b.pid)));
    Ok(out)
}

/// Files of a domain in /dev/shm and the state directory.
pub fn domain_files(config: &Config) -> BTreeSet<String> {
    shm::domain_files(config)
}

/// The domain's doorbell file: every live context holds a shared lock on it, so the
/// kernel's locks on it (`/proc/locks`) name the processes that use the domain.
pub fn doorbell_path(config: &Config) -> String {
    doorbell::path(config)
}

/// Why [`clean`] or [`stale`] could not look at a domain.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    /// The configuration names no usable state directory.
    #[error(transparent)]
    Config(#[from] crate::error::ContextError),
    /// iceoryx2 could not list the domain's nodes.
    #[error("cannot list the nodes of the domain: {0}")]
    ListNodes(String),
    /// The domain's doorbell could not be opened.
    #[error("cannot open {path}: {source}")]
    Doorbell {
        /// The doorbell's path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// What [`clean`] would remove in a domain, found by [`stale`] without removing anything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StaleReport {
    /// Nodes of dead processes whose records are still there: (name, pid).
    pub dead_nodes: Vec<(String, i32)>,
    /// Files [`clean`] would remove: every file of the domain when no live process uses
    /// it; otherwise the dead nodes' own records (their services go too once no live
    /// node uses them, which is not foreseen here).
    pub files: Vec<String>,
    /// Whether live processes use the domain.
    pub domain_in_use: bool,
}

/// A look at a domain: what is stale, the dead nodes to reclaim and every file.
struct Survey {
    report: StaleReport,
    dead: Vec<iceoryx2::node::DeadNodeView<Ipc>>,
    files: BTreeSet<String>,
}

/// Looks at a domain without changing anything in it: its files, its dead nodes, and
/// whether live processes use it (found in the kernel's lock table, so a context that is
/// joining or leaving the domain is not disturbed).
fn survey(config: &Config) -> Result<Survey, CleanError> {
    let iox = shm::iceoryx_config(config)?;
    let files = domain_files(config);
    let mut dead = Vec::new();
    iceoryx2::node::Node::<Ipc>::list(&iox, |state| {
        if let NodeState::Dead(v) = state {
            dead.push(v);
        }
        CallbackProgression::Continue
    })
    .map_err(|e| CleanError::ListNodes(format!("{e:?}")))?;
    let dead_nodes = dead
        .iter()
        .map(|v| {
            v.details()
                .as_ref()
                .map(|d| (d.name().as_str().to_string(), d.process_id().value()))
                .unwrap_or_default()
        })
        .collect();
    let domain_in_use = doorbell::in_use(config);
    let stale_files = if domain_in_use {
        // a node's records: its folder (named by its id) and its monitor file under
        // iceoryx2's node folder
        let node_dir = iox.global.node_dir().to_string();
        let ids: Vec<String> = dead.iter().map(|v| v.id().value().to_string()).collect();
        files
            .iter()
            .filter(|f| {
                f.strip_prefix(&node_dir)
                    .is_some_and(|rel| ids.iter().any(|id| rel.contains(id.as_str())))
            })
            .cloned()
            .collect()
    } else {
        files.iter().cloned().collect()
    };
    Ok(Survey {
        report: StaleReport {
            dead_nodes,
            files: stale_files,
            domain_in_use,
        },
        dead,
        files,
    })
}

/// What [`clean`] would remove in a domain, without removing anything (for `nerve
/// doctor`). Takes a [`Config`], not a [`Context`]: a context would itself count as a
/// live user, and the first one of a domain clears what is stale.
pub fn stale(config: &Config) -> Result<StaleReport, CleanError> {
    Ok(survey(config)?.report)
}

/// Result of [`clean`].
#[derive(Clone, Debug, Default)]
pub struct CleanReport {
    /// Dead nodes whose resources were reclaimed: (name, pid).
    pub dead_nodes: Vec<(String, i32)>,
    /// Files that disappeared.
    pub removed_files: Vec<String>,
    /// Whether live processes use the domain (then only dead nodes' resources are touched).
    pub domain_in_use: bool,
}

/// Removes resources of dead processes in a domain (those [`stale`] lists). When no live
/// process uses the domain, the domain-wide files (doorbell, iceoryx2's management
/// segment) go too. Takes a [`Config`], not a [`Context`]: a context would itself count
/// as a live user.
pub fn clean(config: &Config) -> Result<CleanReport, CleanError> {
    let Survey {
        report: found,
        dead,
        files: before,
    } = survey(config)?;
    let mut report = CleanReport::default();
    for (v, node) in dead.into_iter().zip(found.dead_nodes) {
        if v.try_remove_stale_resources().is_ok() {
            report.dead_nodes.push(node);
        }
    }
    let bell = Doorbell::open(&doorbell::file_name(config), 0o600).map_err(|source| {
        CleanError::Doorbell {
            path: doorbell::path(config),
            source,
        }
    })?;
    if bell.try_exclusive() {
        // No live context holds the doorbell: nobody uses the domain, so every file with
        // the domain's prefix is stale, also ones whose node records are gone.
        shm::remove_domain_files(config);
        bell.unlink();
    } else {
        report.domain_in_use = true;
    }
    drop(bell);
    let after = domain_files(config);
    report.removed_files = before.difference(&after).cloned().collect();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// `stale` lists what `clean` then removes, removing nothing itself; a domain a live
    /// context uses has nothing stale of it (no dead node).
    #[test]
    fn stale_lists_what_clean_removes_and_removes_nothing() {
        let dir = std::env::temp_dir().join(format!("nerve-stale-{}/", std::process::id()));
        let cfg = Config::default().domain(965).unwrap().state_dir(&dir);
        clean(&cfg).unwrap();
        // a file a killed process left, in a domain no one uses
        let junk = format!("/dev/shm/{}junk", cfg.file_prefix());
        std::fs::write(&junk, b"x").unwrap();
        let found = stale(&cfg).unwrap();
        assert!(!found.domain_in_use, "{found:?}");
        assert_eq!(found.files, vec![junk.clone()]);
        assert!(found.dead_nodes.is_empty(), "{found:?}");
        assert!(Path::new(&junk).exists(), "stale removes nothing");
        assert_eq!(stale(&cfg).unwrap(), found, "and changes nothing");
        let cleaned = clean(&cfg).unwrap();
        assert_eq!(cleaned.removed_files, found.files);
        assert!(!Path::new(&junk).exists());

        let ctx = Context::new(cfg.clone()).unwrap();
        let _node = ctx.node("live").create().unwrap();
        let found = stale(&cfg).unwrap();
        assert!(found.domain_in_use, "{found:?}");
        assert!(
            found.files.is_empty() && found.dead_nodes.is_empty(),
            "{found:?}"
        );
        drop(_node);
        drop(ctx);
        let _ = clean(&cfg);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
