//! A loaded launch: every process with its arguments substituted, checked and ordered.

use std::path::PathBuf;
use std::time::Duration;

/// Everything a launch starts, in start order (dependencies first).
#[derive(Clone, Debug)]
pub struct Plan {
    /// The top-level launch file.
    pub file: PathBuf,
    /// The processes and containers, in an order that respects `after`.
    pub processes: Vec<ProcessSpec>,
}

impl Plan {
    /// Number of plain processes (not containers).
    pub fn process_count(&self) -> usize {
        self.processes.iter().filter(|p| !p.is_container()).count()
    }

    /// Number of containers.
    pub fn container_count(&self) -> usize {
        self.processes.iter().filter(|p| p.is_container()).count()
    }

    /// The process called `name`.
    pub fn process(&self, name: &str) -> Option<&ProcessSpec> {
        self.processes.iter().find(|p| p.name == name)
    }
}

/// One process (or container) of a launch.
#[derive(Clone, Debug)]
pub struct ProcessSpec {
    /// Unique name; prefixes its output lines.
    pub name: String,
    /// Where it is declared (`file:line`).
    pub origin: String,
    /// The executable, resolved (absolute, or as found on `PATH`).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its namespace (`NERVE_NAMESPACE`), `/` for the root.
    pub namespace: String,
    /// Its remap rules (`NERVE_REMAP`).
    pub remap: Vec<(String, String)>,
    /// Environment variables set for it (the file's, then its own).
    pub env: Vec<(String, String)>,
    /// Parameter files (`NERVE_PARAM_FILES`), before the generated one.
    pub param_files: Vec<PathBuf>,
    /// Inline parameters, written to a generated YAML file keyed `"/**"`.
    pub params: Vec<(String, ParamValue)>,
    /// Processes that must be ready before this one starts.
    pub after: Vec<String>,
    /// When the process counts as ready.
    pub ready: Ready,
    /// How long it may take to become ready.
    pub ready_timeout: Duration,
    /// Restarting after an unexpected exit (`None`: never).
    pub respawn: Option<Respawn>,
    /// How it is stopped.
    pub shutdown: ShutdownTimeouts,
    /// What its exit (once no respawn is left) does to the launch.
    pub on_exit: OnExit,
    /// The nodes a container runs (empty for a plain process).
    pub components: Vec<ComponentNode>,
    /// Whether this is a `[[container]]`.
    pub container: bool,
}

impl ProcessSpec {
    /// Whether this is a container of composed nodes.
    pub fn is_container(&self) -> bool {
        self.container
    }
}

/// A parameter value from a launch file.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamValue {
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    List(Vec<ParamValue>),
    /// A table.
    Map(Vec<(String, ParamValue)>),
}

impl ParamValue {
    /// The value as JSON (for `NERVE_COMPONENTS`; YAML files are written from it too).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            ParamValue::Bool(b) => Value::Bool(*b),
            ParamValue::Int(i) => Value::from(*i),
            ParamValue::Float(f) => serde_json::Number::from_f64(*f)
                .map(Value::Number)
                .unwrap_or(Value::Null),
            ParamValue::Str(s) => Value::String(s.clone()),
            ParamValue::List(l) => Value::Array(l.iter().map(ParamValue::to_json).collect()),
            ParamValue::Map(m) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
        }
    }
}

/// When a started process counts as ready (its dependents may start).
#[derive(Clone, Debug)]
pub enum Ready {
    /// As soon as it is started.
    Started,
    /// When the topic has a publisher.
    Topic(String),
    /// When the service has a server.
    Service(String),
    /// When a line of its output matches the regular expression.
    Line(String),
    /// After a fixed delay.
    Delay(Duration),
    /// When the launcher has driven the managed node through `configure` (and
    /// `activate`) by its `change_state` service; on shutdown it is brought down again
    /// (deactivate, cleanup, shutdown) before any signal.
    Lifecycle {
        /// The node's full name.
        node: String,
        /// The state to reach.
        goal: LifecycleGoal,
    },
}

/// The state a managed node is brought up to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LifecycleGoal {
    /// configure.
    Inactive,
    /// configure, then activate.
    Active,
}

impl LifecycleGoal {
    /// The transitions that lead there from unconfigured.
    pub fn transitions(self) -> &'static [&'static str] {
        match self {
            LifecycleGoal::Inactive => &["configure"],
            LifecycleGoal::Active => &["configure", "activate"],
        }
    }

    /// `active` or `inactive`.
    pub fn label(self) -> &'static str {
        match self {
            LifecycleGoal::Inactive => "inactive",
            LifecycleGoal::Active => "active",
        }
    }
}

impl std::fmt::Display for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ready::Started => write!(f, "start"),
            Ready::Topic(t) => write!(f, "a publisher on {t}"),
            Ready::Service(s) => write!(f, "a server of {s}"),
            Ready::Line(r) => write!(f, "an output line matching {r:?}"),
            Ready::Delay(d) => write!(f, "a delay of {d:?}"),
            Ready::Lifecycle { node, goal } => {
                write!(f, "managed node {node} to be {}", goal.label())
            }
        }
    }
}

/// Restart policy: exponential backoff from `delay` (doubling, capped at `max_delay`), at
/// most `max` restarts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Respawn {
    /// Most restarts.
    pub max: u32,
    /// Delay before the first restart.
    pub delay: Duration,
    /// Longest delay.
    pub max_delay: Duration,
}

/// How long a process gets after SIGINT, then after SIGTERM, before SIGKILL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShutdownTimeouts {
    /// Wait after SIGINT.
    pub sigint: Duration,
    /// Wait after SIGTERM.
    pub sigterm: Duration,
}

impl Default for ShutdownTimeouts {
    fn default() -> Self {
        ShutdownTimeouts {
            sigint: Duration::from_secs(5),
            sigterm: Duration::from_secs(2),
        }
    }
}

/// What a process's final exit does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnExit {
    /// The launch shuts down (the default: every process is required). The launch fails
    /// unless the process exited with status 0.
    Shutdown,
    /// Nothing: the launch goes on without it. A process that exits with status 0 before
    /// it was ready counts as ready (a one-shot step its dependents wait for); one that
    /// fails before it was ready still ends the launch.
    Ignore,
}

/// A node a container runs.
#[derive(Clone, Debug)]
pub struct ComponentNode {
    /// The registered component that builds it.
    pub component: String,
    /// The node's name.
    pub name: String,
    /// Its namespace (absolute).
    pub namespace: String,
    /// Its remap rules.
    pub remap: Vec<(String, String)>,
    /// Its parameters.
    pub params: Vec<(String, ParamValue)>,
}
