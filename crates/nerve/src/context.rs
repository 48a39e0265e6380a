//! [`Context`] (one per process and domain) and [`Node`] (a named participant).

use crate::config::Config;
use crate::error::{ContextError, NetError, NodeError};
use crate::transport::doorbell::{self, Doorbell};
use crate::transport::remote::RemotePlane;
use crate::transport::{intra, shm};
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Entry point: a domain, its configuration and the process's wake-up doorbell.
/// Cheap to clone and shareable between threads.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

pub(crate) struct ContextInner {
    pub(crate) config: Config,
    pub(crate) iox: iceoryx2::config::Config,
    /// The domain's doorbell. Its shared `flock` also marks this process as a live member
    /// of the domain (see [`Drop`] below and `introspect::clean`).
    pub(crate) doorbell: Arc<Doorbell>,
    /// Local endpoints of this context's topics (the same-process fast path).
    pub(crate) local: intra::Registry,
    /// This context's identity in sample headers ([`crate::SampleHeader::origin`]).
    pub(crate) origin: u64,
    /// Robot time (system or simulation).
    pub(crate) clock: crate::time::Clock,
    /// The domain's deterministic replay, when this context takes part in it.
    pub(crate) lockstep: Option<Arc<crate::time::lockstep::Lockstep>>,
}

impl Drop for ContextInner {
    /// The last context of a domain on the host removes the domain-wide files, so a clean
    /// exit leaves /dev/shm and the state directory as they were before.
    fn drop(&mut self) {
        crate::trace::flush();
        if self.doorbell.try_exclusive() {
            shm::remove_domain_files(&self.config);
            self.doorbell.unlink();
        }
    }
}

/// The network plane for `config`: the one place that names the Zenoh plane (contexts
/// reach it through [`RemotePlane`]). Without the `net` feature, a
/// configuration that asks for it is an error naming the missing feature.
fn remote_plane(config: &Config) -> Result<Option<Arc<dyn RemotePlane>>, NetError> {
    #[cfg(feature = "net")]
    {
        Ok(crate::net::plane(config)?.map(|p| p as Arc<dyn RemotePlane>))
    }
    #[cfg(not(feature = "net"))]
    {
        if config.network.enabled {
            return Err(NetError::Open(
                "this build of nerve has no network plane (cargo feature `net`)".into(),
            ));
        }
        Ok(None)
    }
}

impl Context {
    /// Creates a context from `NERVE_CONFIG`, `NERVE_DOMAIN` and `NERVE_STATE_DIR`.
    pub fn from_env() -> Result<Context, ContextError> {
        Context::new(Config::from_env()?)
    }

    /// Creates a context from explicit settings.
    pub fn new(config: Config) -> Result<Context, ContextError> {
        let ctx = Context::open(config)?;
        crate::time::adopt(&ctx.inner.clock);
        Ok(ctx)
    }

    /// A context for Nerve's own helper threads (the simulation clock's feed): its clock
    /// never becomes the process clock. The feed's system-clock context used to be the
    /// process's first, so under `NERVE_SIM_TIME` `time::now_ns()` read the wall clock
    /// while samples were stamped with simulation time.
    pub(crate) fn new_internal(config: Config) -> Result<Context, ContextError> {
        Context::open(config)
    }

    fn open(config: Config) -> Result<Context, ContextError> {
        // publishers of this process may then use light fences (see sys::membarrier)
        crate::sys::membarrier::register();
        let iox = shm::iceoryx_config(&config)?;
        let name = doorbell::file_name(&config);
        // the domain's first user (no one else is alive) removes what dead processes left
        // before anyone can join, so a crash's debris never outlives the next start
        let doorbell = Doorbell::open_first(&name, 0o600, || shm::remove_domain_files(&config))
            .map_err(|reason| ContextError::Doorbell {
                path: doorbell::path(&config),
                reason,
            })?;
        let lockstep = if config.lockstep {
            Some(crate::time::lockstep::Lockstep::join(config.domain)?)
        } else {
            None
        };
        let clock = match &lockstep {
            Some(ls) => crate::time::Clock::lockstep(ls.clone()),
            None if config.sim_time => crate::time::Clock::following(&config)
                .map_err(|reason| ContextError::SimClock { reason })?,
            None => crate::time::Clock::system(),
        };
        Ok(Context {
            inner: Arc::new(ContextInner {
                config,
                iox,
                doorbell: Arc::new(doorbell),
                local: intra::Registry::default(),
                origin: next_origin(),
                clock,
                lockstep,
            }),
        })
    }

    /// The domain id.
    pub fn domain(&self) -> u32 {
        self.inner.config.domain
    }

    /// The namespace relative names resolve under (`/` unless `NERVE_NAMESPACE` or
    /// [`Config::namespace`] set one).
    pub fn namespace(&self) -> &str {
        &self.inner.config.namespace
    }

    /// This context's clock (see [`crate::time`]).
    pub fn clock(&self) -> &crate::time::Clock {
        &self.inner.clock
    }

    /// Whether this context takes part in a deterministic replay (`NERVE_LOCKSTEP`).
    pub fn in_lockstep(&self) -> bool {
        self.inner.lockstep.is_some()
    }

    /// The settings this context was created with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The network plane, when the configuration turns it on (opened on first use, one
    /// per process).
    pub(crate) fn remote(&self) -> Result<Option<Arc<dyn RemotePlane>>, NetError> {
        remote_plane(&self.inner.config)
    }

    /// Starts building a node named `name`.
    pub fn node(&self, name: &str) -> NodeBuilder {
        NodeBuilder {
            namespace: self.inner.config.namespace.clone(),
            remap: self.inner.config.remap.clone(),
            ctx: self.clone(),
            name: name.to_string(),
        }
    }
}

/// A process-unique context identity: process id in the high half, a counter in the low.
fn next_origin() -> u64 {
    static CONTEXTS: AtomicU32 = AtomicU32::new(1);
    (u64::from(std::process::id()) << 32) | u64::from(CONTEXTS.fetch_add(1, Ordering::Relaxed))
}

/// Builds a [`Node`].
pub struct NodeBuilder {
    ctx: Context,
    name: String,
    namespace: String,
    remap: Vec<(String, String)>,
}

impl NodeBuilder {
    /// Puts the node in namespace `ns` (`/` or an absolute name) instead of the context's:
    /// several nodes of one process (a container) can live in different namespaces.
    pub fn namespace(mut self, ns: &str) -> Self {
        self.namespace = ns.to_string();
        self
    }

    /// Adds a remap rule for this node, checked before the context's rules.
    pub fn remap(mut self, from: &str, to: &str) -> Self {
        self.remap.insert(0, (from.to_string(), to.to_string()));
        self
    }

    /// Creates the node. Stale resources of dead processes in the domain are removed first.
    pub fn create(self) -> Result<Node, NodeError> {
        crate::name::validate_node(&self.name)?;
        crate::name::validate_namespace(&self.namespace)?;
        for (from, to) in &self.remap {
            crate::name::validate_relative(from)?;
            crate::name::validate_relative(to)?;
        }
        if self.remap.len() > crate::name::MAX_REMAP_RULES {
            return Err(NodeError::Name(crate::error::NameError {
                name: self.name.clone(),
                reason: format!("more than {} remap rules", crate::name::MAX_REMAP_RULES),
            }));
        }
        let iox = shm::create_node(&self.ctx.inner.iox, &self.name).map_err(|reason| {
            NodeError::Create {
                name: self.name.clone(),
                reason,
            }
        })?;
        // with the network plane on, the process joins it here (once) and other hosts
        // see the node
        let net_token = match self.ctx.remote()? {
            Some(plane) => Some(plane.node(self.ctx.domain(), &self.name)?),
            None => None,
        };
        Ok(Node {
            inner: Rc::new(NodeInner {
                ctx: self.ctx,
                name: self.name,
                namespace: self.namespace,
                remap: self.remap,
                iox,
                _net_token: net_token,
            }),
        })
    }
}

/// A named participant that owns publishers, subscribers, servers and clients. Not `Send`: ports live on
/// the thread that made them (create one node per thread).
#[derive(Clone)]
pub struct Node {
    pub(crate) inner: Rc<NodeInner>,
}

pub(crate) struct NodeInner {
    pub(crate) ctx: Context,
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) remap: Vec<(String, String)>,
    pub(crate) iox: shm::IoxNode,
    /// Announces the node to other hosts while it lives (the network plane is on).
    _net_token: Option<Box<dyn std::any::Any>>,
}

impl Node {
    /// The node's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The node's namespace (`/` for the root).
    pub fn namespace(&self) -> &str {
        &self.inner.namespace
    }

    /// The node's fully qualified name: `/ns/name`, or `/name` in the root namespace.
    /// Parameter files are matched against it.
    pub fn full_name(&self) -> String {
        crate::name::join(&self.inner.namespace, &self.inner.name)
    }

    /// Resolves a topic or service name as this node's publishers, subscribers, servers
    /// and clients do (typed or type-erased, so every binding too): relative names go
    /// under the namespace, private ones (`~/x`) under the node's full name, then remap
    /// rules apply (see [`crate::name::resolve_in_node`]).
    pub fn resolve_name(&self, name: &str) -> String {
        crate::name::resolve_in_node(
            name,
            &self.inner.namespace,
            &self.inner.name,
            &self.inner.remap,
        )
    }

    /// The context the node belongs to.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// Starts building a publisher of `M` on `topic`.
    pub fn publisher<M: crate::message::Message>(
        &self,
        topic: &str,
    ) -> crate::topic::publisher::PublisherBuilder<M> {
        crate::topic::publisher::PublisherBuilder::new(self.clone(), topic)
    }

    /// Starts building a subscriber of `M` on `topic`.
    pub fn subscriber<M: crate::message::Message>(
        &self,
        topic: &str,
    ) -> crate::topic::subscriber::SubscriberBuilder<M> {
        crate::topic::subscriber::SubscriberBuilder::new(self.clone(), topic)
    }

    /// Starts building the server of service `name` of type `S`.
    pub fn service<S: crate::service::Service>(
        &self,
        name: &str,
    ) -> crate::service::server::ServiceBuilder<S> {
        crate::service::server::ServiceBuilder::new(self.clone(), name)
    }

    /// Starts building a client of service `name` of type `S`.
    pub fn client<S: crate::service::Service>(
        &self,
        name: &str,
    ) -> crate::service::client::ClientBuilder<S> {
        crate::service::client::ClientBuilder::new(self.clone(), name)
    }
}
