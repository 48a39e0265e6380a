//! Composed nodes: several nodes in one process, sharing one [`nerve::Context`] (so topics
//! between them take the same-process path).
//!
//! Rust has no stable ABI, so components are not loaded from shared libraries: a container
//! is a binary that registers its component factories by name, statically. `nerve launch`
//! tells it which nodes to run in `NERVE_COMPONENTS` (JSON: a list of `{component, name,
//! namespace, remap, params}`); [`Container::run`] starts each on its own thread (a
//! [`nerve::Node`] is not `Send`: one node per thread).
//!
//! ```no_run
//! use nerve_launch::component::{ComponentSpec, Container};
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     Container::new()
//!         .register("ticker", |ctx: &nerve::Context, spec: &ComponentSpec| {
//!             let node = spec.node(ctx)?;
//!             // ... make publishers with relative names, loop until shutdown ...
//!             while !nerve::shutdown::requested() {
//!                 std::thread::sleep(std::time::Duration::from_millis(100));
//!             }
//!             drop(node);
//!             Ok(())
//!         })
//!         .run()?;
//!     Ok(())
//! }
//! ```

use crate::error::{BoxError, ContainerError};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The environment variable holding a container's node list.
pub const COMPONENTS_ENV: &str = "NERVE_COMPONENTS";
/// Most nodes in one container.
pub const MAX_NODES: usize = 64;

/// A factory: builds and runs one node until shutdown.
pub type Factory =
    Arc<dyn Fn(&nerve::Context, &ComponentSpec) -> Result<(), BoxError> + Send + Sync>;

/// One node a container runs, as the launch file describes it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentSpec {
    /// The registered component.
    pub component: String,
    /// The node's name.
    pub name: String,
    /// Its namespace.
    #[serde(default = "root")]
    pub namespace: String,
    /// Its remap rules.
    #[serde(default)]
    pub remap: Vec<(String, String)>,
    #[serde(default)]
    params: BTreeMap<String, serde_json::Value>,
}

fn root() -> String {
    "/".into()
}

impl ComponentSpec {
    /// Creates the node: its name, namespace and remap rules applied.
    pub fn node(&self, ctx: &nerve::Context) -> Result<nerve::Node, nerve::NodeError> {
        let mut b = ctx.node(&self.name).namespace(&self.namespace);
        // rules are checked in order: the first one given must come first
        for (from, to) in self.remap.iter().rev() {
            b = b.remap(from, to);
        }
        b.create()
    }

    /// The node's full name (`/ns/name`).
    pub fn full_name(&self) -> String {
        nerve::name::join(&self.namespace, &self.name)
    }

    /// The names of its parameters.
    pub fn param_names(&self) -> impl Iterator<Item = &str> {
        self.params.keys().map(String::as_str)
    }

    /// A string parameter.
    pub fn param_str(&self, key: &str) -> Option<&str> {
        self.params.get(key)?.as_str()
    }

    /// A numeric parameter (integers too).
    pub fn param_f64(&self, key: &str) -> Option<f64> {
        self.params.get(key)?.as_f64()
    }

    /// An integer parameter.
    pub fn param_i64(&self, key: &str) -> Option<i64> {
        self.params.get(key)?.as_i64()
    }

    /// A boolean parameter.
    pub fn param_bool(&self, key: &str) -> Option<bool> {
        self.params.get(key)?.as_bool()
    }
}

/// A process of composed nodes: register factories, then [`Container::run`].
#[derive(Default)]
pub struct Container {
    factories: BTreeMap<String, Factory>,
}

impl Container {
    /// A container with no components.
    pub fn new() -> Container {
        Container::default()
    }

    /// Registers a component factory under `name` (a later registration replaces it).
    pub fn register<F>(mut self, name: &str, factory: F) -> Container
    where
        F: Fn(&nerve::Context, &ComponentSpec) -> Result<(), BoxError> + Send + Sync + 'static,
    {
        self.factories.insert(name.to_string(), Arc::new(factory));
        self
    }

    /// The registered component names.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }

    /// Reads [`COMPONENTS_ENV`], installs the SIGINT/SIGTERM handlers, creates one context
    /// from the environment and runs every node on its own thread until all return. The
    /// first failure requests shutdown of the others and is returned.
    pub fn run(self) -> Result<(), ContainerError> {
        let text = std::env::var(COMPONENTS_ENV).map_err(|_| {
            ContainerError::Spec("not set (start the container with nerve launch)".into())
        })?;
        self.run_specs(parse_specs(&text)?)
    }

    /// Runs the given nodes (what [`Container::run`] does after reading the environment).
    pub fn run_specs(self, specs: Vec<ComponentSpec>) -> Result<(), ContainerError> {
        let registered = || self.components().collect::<Vec<_>>().join(", ");
        let mut jobs = Vec::new();
        for s in specs {
            let Some(f) = self.factories.get(&s.component) else {
                return Err(ContainerError::UnknownComponent {
                    name: s.component.clone(),
                    node: s.full_name(),
                    registered: registered(),
                });
            };
            jobs.push((f.clone(), s));
        }
        nerve::shutdown::install();
        let ctx = nerve::Context::from_env()?;
        let mut threads = Vec::new();
        for (f, spec) in jobs {
            let ctx = ctx.clone();
            let label = (spec.component.clone(), spec.full_name());
            let t = std::thread::Builder::new()
                .name(spec.name.clone())
                .spawn(move || {
                    let r = f(&ctx, &spec).map_err(|e| e.to_string());
                    if r.is_err() {
                        nerve::shutdown::request();
                    }
                    r
                })
                .map_err(|e| ContainerError::Component {
                    component: label.0.clone(),
                    node: label.1.clone(),
                    reason: format!("cannot start its thread: {e}"),
                })?;
            threads.push((label, t));
        }
        let mut first = None;
        for ((component, node), t) in threads {
            let r = match t.join() {
                Ok(r) => r,
                Err(p) => {
                    nerve::shutdown::request();
                    Err(panic_text(&p))
                }
            };
            if let Err(reason) = r {
                first.get_or_insert(ContainerError::Component {
                    component,
                    node,
                    reason,
                });
            }
        }
        first.map_or(Ok(()), Err)
    }
}

/// Parses a `NERVE_COMPONENTS` value.
pub fn parse_specs(text: &str) -> Result<Vec<ComponentSpec>, ContainerError> {
    let specs: Vec<ComponentSpec> =
        serde_json::from_str(text).map_err(|e| ContainerError::Spec(e.to_string()))?;
    if specs.len() > MAX_NODES {
        return Err(ContainerError::Spec(format!("more than {MAX_NODES} nodes")));
    }
    Ok(specs)
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_component_names_the_registered_ones() {
        let specs = parse_specs(r#"[{"component":"nope","name":"n","namespace":"/r1"}]"#).unwrap();
        let c = Container::new()
            .register("talker", |_, _| Ok(()))
            .register("listener", |_, _| Ok(()));
        let e = c.run_specs(specs).unwrap_err().to_string();
        assert!(
            e.contains("\"nope\"") && e.contains("/r1/n") && e.contains("listener, talker"),
            "{e}"
        );
        assert!(parse_specs(r#"[{"component":"a"}]"#).is_err());
        assert!(parse_specs(r#"[{"component":"a","name":"b","extra":1}]"#).is_err());
    }

    #[test]
    fn params_read() {
        let s = &parse_specs(
            r#"[{"component":"a","name":"b","params":{"rate":10,"frame":"base","on":true}}]"#,
        )
        .unwrap()[0];
        assert_eq!(s.param_f64("rate"), Some(10.0));
        assert_eq!(s.param_i64("rate"), Some(10));
        assert_eq!(s.param_str("frame"), Some("base"));
        assert_eq!(s.param_bool("on"), Some(true));
        assert_eq!(s.full_name(), "/b");
    }
}
