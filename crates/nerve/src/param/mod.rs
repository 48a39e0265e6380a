//! Parameters: a node's typed, declared, validated configuration, readable and settable
//! from other processes and hosts.
//!
//! A node declares each parameter with a default and a [`ParamDescriptor`] (description,
//! range and step, read-only, opt-in dynamic typing); parameter files named by
//! `NERVE_PARAM_FILES` (what `nerve launch` sets) override the defaults at declaration.
//! Integers widen to floats, so a YAML `1` sets a float parameter. A set of several
//! values can be atomic: every value passes its checks and every validation callback, or
//! nothing changes. Every change is published on [`EVENTS_TOPIC`], and the node answers
//! `nerve param` (and [`ParamClient`]) through one service, `<node>/_params`.
//!
//! ```
//! use nerve::param::{ParamClient, ParamDescriptor, ParamValue, Parameters};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = nerve::Context::from_env()?;
//! let node = ctx.node("driver").create()?;
//! let params = Parameters::create(&node)?;
//! params.declare("max_speed", 1.5, ParamDescriptor::new().range(0.0, 3.0, 0.0))?;
//! params.on_validate(|changes| {
//!     match changes.iter().any(|c| c.new == ParamValue::Float(2.5)) {
//!         true => Err("2.5 scares the safety officer".into()),
//!         false => Ok(()),
//!     }
//! });
//! params.set("max_speed", 2)?; // an integer widens
//! assert_eq!(params.get::<f64>("max_speed")?, 2.0);
//! assert!(params.set("max_speed", 2.5).is_err());
//! assert!(params.set("max_speed", 4.0).is_err()); // out of range
//! # Ok(()) }
//! ```

mod error;
mod exec;
mod file;
mod remote;
mod store;
mod value;

pub use error::ParamError;
pub use file::{matches as node_pattern_matches, to_yaml, FileEntry, ParamFile, MAX_FILE_BYTES};
pub use remote::{
    events_qos, ParamClient, ParamEvent, ParamRequest, ParamResponse, ParamService, EVENTS_TOPIC,
    SERVICE_SUFFIX,
};
pub use store::{
    check_name, ParamChange, ParamDescriptor, ParamInfo, ParamRange, MAX_NAME_LEN, MAX_PARAMS,
    MAX_VALUE_BYTES,
};
pub use value::{FromParam, ParamType, ParamValue};

use crate::context::Node;
use crate::message::Serde;
use crate::service::server::Server;
use crate::topic::publisher::Publisher;
use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use store::ParamStore;

/// The environment variable listing parameter files (separated by `:`) that override
/// declared defaults; `nerve launch` sets it.
pub const PARAM_FILES_ENV: &str = "NERVE_PARAM_FILES";

/// A validation callback: sees a whole set of changes, rejects it with a reason.
type Validator = Box<dyn FnMut(&[ParamChange]) -> Result<(), String>>;
/// A callback run after changes were applied.
type Applier = Box<dyn FnMut(&[ParamChange])>;

/// The full name under which a node's parameters are addressed (`/name`, or with a
/// namespace `/ns/name`).
pub fn node_path(node: &Node) -> String {
    node.full_name()
}

/// Builds [`Parameters`].
pub struct ParametersBuilder {
    node: Node,
    allow_undeclared: bool,
    files: Vec<PathBuf>,
    from_env: bool,
}

impl ParametersBuilder {
    /// Lets remote and local sets create parameters that were never declared (typed by
    /// their first value, dynamically typed after). Off by default.
    pub fn allow_undeclared(mut self, on: bool) -> Self {
        self.allow_undeclared = on;
        self
    }

    /// Reads `path` (YAML or TOML) for values of this node, after those of
    /// `NERVE_PARAM_FILES` (so it wins over them).
    pub fn file(mut self, path: impl Into<PathBuf>) -> Self {
        self.files.push(path.into());
        self
    }

    /// Whether to read the files `NERVE_PARAM_FILES` names (default: yes).
    pub fn from_env(mut self, on: bool) -> Self {
        self.from_env = on;
        self
    }

    /// Reads the files, opens `<node>/_params` and the events topic.
    pub fn create(self) -> Result<Parameters, ParamError> {
        let path = node_path(&self.node);
        let mut files: Vec<PathBuf> = Vec::new();
        if self.from_env {
            if let Ok(list) = std::env::var(PARAM_FILES_ENV) {
                files.extend(list.split(':').filter(|s| !s.is_empty()).map(PathBuf::from));
            }
        }
        files.extend(self.files);
        let mut store = ParamStore::default();
        store.allow_undeclared = self.allow_undeclared;
        for f in &files {
            store.set_overrides(ParamFile::load(f)?.values_for(&path));
        }
        let server = self
            .node
            .service::<ParamService>(&format!("{path}{SERVICE_SUFFIX}"))
            .create()?;
        let events = self
            .node
            .publisher::<Serde<ParamEvent>>(EVENTS_TOPIC)
            .qos(events_qos())
            .create()?;
        Ok(Parameters {
            inner: Rc::new(Inner {
                path,
                store: RefCell::new(store),
                validators: RefCell::new(Vec::new()),
                appliers: RefCell::new(Vec::new()),
                added: RefCell::new((Vec::new(), Vec::new())),
                server,
                events,
            }),
        })
    }
}

/// A node's parameters. Cheap to clone (shared); not `Send`, like the node's ports:
/// serve remote requests with [`handle_pending`](Parameters::handle_pending) or
/// [`crate::Executor::parameters`].
#[derive(Clone)]
pub struct Parameters {
    pub(crate) inner: Rc<Inner>,
}

pub(crate) struct Inner {
    path: String,
    store: RefCell<ParamStore>,
    validators: RefCell<Vec<Validator>>,
    appliers: RefCell<Vec<Applier>>,
    /// Callbacks added from inside a callback (while the lists are borrowed), moved into
    /// them at the next set.
    added: RefCell<(Vec<Validator>, Vec<Applier>)>,
    pub(crate) server: Server<ParamService>,
    events: Publisher<Serde<ParamEvent>>,
}

impl Parameters {
    /// Parameters of `node`, overridden by the files `NERVE_PARAM_FILES` names.
    pub fn create(node: &Node) -> Result<Parameters, ParamError> {
        Parameters::builder(node).create()
    }

    /// Starts building the parameters of `node`.
    pub fn builder(node: &Node) -> ParametersBuilder {
        ParametersBuilder {
            node: node.clone(),
            allow_undeclared: false,
            files: Vec::new(),
            from_env: true,
        }
    }

    /// The node's full name (the key of its parameter-file entries).
    pub fn node_path(&self) -> &str {
        &self.inner.path
    }

    /// Declares `name` with `default` (or the value a parameter file gives it) and
    /// returns the value it now has. The default fixes its type unless the descriptor
    /// allows dynamic typing.
    pub fn declare(
        &self,
        name: &str,
        default: impl Into<ParamValue>,
        descriptor: ParamDescriptor,
    ) -> Result<ParamValue, ParamError> {
        let change = self
            .inner
            .store
            .try_borrow_mut()
            .map_err(|_| ParamError::Reentrant)?
            .declare(name, default.into(), descriptor)?;
        let value = change.new.clone();
        self.publish(vec![change])?;
        Ok(value)
    }

    /// The value of `name` as `T` (integers widen to floats).
    pub fn get<T: FromParam>(&self, name: &str) -> Result<T, ParamError> {
        let store = self.inner.store.borrow();
        let info = store.get(name).ok_or_else(|| ParamError::NotDeclared {
            name: name.to_string(),
        })?;
        let got = info.value.ty();
        T::from_param(info.value.clone()).ok_or(ParamError::WrongType {
            name: name.to_string(),
            expected: T::TYPE,
            got,
        })
    }

    /// The value of `name`, if declared.
    pub fn value(&self, name: &str) -> Option<ParamValue> {
        self.inner.store.borrow().get(name).map(|i| i.value.clone())
    }

    /// The declaration and value of `name`, if declared.
    pub fn describe(&self, name: &str) -> Option<ParamInfo> {
        self.inner.store.borrow().get(name).cloned()
    }

    /// Names of the declared parameters starting with `prefix` (all for `""`), sorted.
    pub fn names(&self, prefix: &str) -> Vec<String> {
        self.inner.store.borrow().names(prefix)
    }

    /// Every parameter's name and value, sorted by name.
    pub fn values(&self) -> Vec<(String, ParamValue)> {
        let store = self.inner.store.borrow();
        store
            .all()
            .map(|i| (i.name.clone(), i.value.clone()))
            .collect()
    }

    /// Adds a validation callback. It sees every set (all its changes at once) before
    /// anything is applied and may reject it with a reason: then nothing changes.
    pub fn on_validate<F>(&self, f: F)
    where
        F: FnMut(&[ParamChange]) -> Result<(), String> + 'static,
    {
        match self.inner.validators.try_borrow_mut() {
            Ok(mut v) => v.push(Box::new(f)),
            // added from inside a callback: joins at the next set
            Err(_) => self.inner.added.borrow_mut().0.push(Box::new(f)),
        }
    }

    /// Adds a callback run after a set was applied (reconfigure the node here).
    pub fn on_set<F>(&self, f: F)
    where
        F: FnMut(&[ParamChange]) + 'static,
    {
        match self.inner.appliers.try_borrow_mut() {
            Ok(mut a) => a.push(Box::new(f)),
            Err(_) => self.inner.added.borrow_mut().1.push(Box::new(f)),
        }
    }

    /// Sets one parameter.
    pub fn set(&self, name: &str, value: impl Into<ParamValue>) -> Result<(), ParamError> {
        self.set_atomically(vec![(name.to_string(), value.into())])
    }

    /// Sets several parameters one by one: each succeeds or fails on its own.
    pub fn set_each(&self, values: Vec<(String, ParamValue)>) -> Vec<Result<(), ParamError>> {
        values
            .into_iter()
            .map(|(n, v)| self.set_atomically(vec![(n, v)]))
            .collect()
    }

    /// Sets several parameters all or nothing: every value must pass its type and range
    /// checks and every validation callback, else no value changes and the first failure
    /// is returned.
    pub fn set_atomically(&self, values: Vec<(String, ParamValue)>) -> Result<(), ParamError> {
        let inner = &self.inner;
        // a set from inside a callback is refused before anything happens: it would
        // otherwise skip the callbacks that are running
        let (Ok(mut validators), Ok(mut appliers)) = (
            inner.validators.try_borrow_mut(),
            inner.appliers.try_borrow_mut(),
        ) else {
            return Err(ParamError::Reentrant);
        };
        {
            let mut added = inner.added.borrow_mut();
            validators.append(&mut added.0);
            appliers.append(&mut added.1);
        }
        drop((validators, appliers));
        let changes = inner
            .store
            .try_borrow()
            .map_err(|_| ParamError::Reentrant)?
            .check_all(values)?;
        {
            let mut validators = inner
                .validators
                .try_borrow_mut()
                .map_err(|_| ParamError::Reentrant)?;
            for v in validators.iter_mut() {
                v(&changes).map_err(|reason| ParamError::Rejected { reason })?;
            }
        }
        inner
            .store
            .try_borrow_mut()
            .map_err(|_| ParamError::Reentrant)?
            .apply(&changes);
        {
            let mut appliers = inner
                .appliers
                .try_borrow_mut()
                .map_err(|_| ParamError::Reentrant)?;
            for a in appliers.iter_mut() {
                a(&changes);
            }
        }
        self.publish(changes)
    }

    fn publish(&self, changes: Vec<ParamChange>) -> Result<(), ParamError> {
        let event = ParamEvent {
            node: self.inner.path.clone(),
            stamp_ns: crate::sys::clock::wall_ns(),
            changes,
        };
        self.inner.events.publish_value(&event)?;
        Ok(())
    }

    /// Answers the remote requests waiting now; returns how many.
    pub fn handle_pending(&self) -> Result<usize, ParamError> {
        let mut n = 0;
        while let Some(req) = self.inner.server.try_take()? {
            self.answer(&req)?;
            n += 1;
        }
        Ok(n)
    }

    /// Waits up to `timeout` for a remote request (spinning briefly first, as service
    /// servers do), then answers every waiting one; returns how many.
    pub fn serve_for(&self, timeout: std::time::Duration) -> Result<usize, ParamError> {
        match self.inner.server.take_timeout(timeout)? {
            Some(req) => {
                self.answer(&req)?;
                Ok(1 + self.handle_pending()?)
            }
            None => Ok(0),
        }
    }

    /// Answers one remote request.
    pub(crate) fn answer(
        &self,
        req: &crate::service::server::Request<'_, ParamService>,
    ) -> Result<(), crate::error::ServeError> {
        let request = match req.decode() {
            Ok(r) => r,
            Err(e) => return req.fail(&e.to_string()),
        };
        let response = match request {
            ParamRequest::List { prefix } => ParamResponse::List(self.names(&prefix)),
            ParamRequest::Get { names } => {
                ParamResponse::Get(names.iter().map(|n| self.value(n)).collect())
            }
            ParamRequest::Describe { names } => {
                ParamResponse::Describe(names.iter().map(|n| self.describe(n)).collect())
            }
            ParamRequest::Set { values, atomic } => {
                let n = values.len();
                let results = if atomic {
                    match self.set_atomically(values) {
                        Ok(()) => vec![Ok(()); n],
                        Err(e) => vec![Err(e.to_string()); n],
                    }
                } else {
                    self.set_each(values)
                        .into_iter()
                        .map(|r| r.map_err(|e| e.to_string()))
                        .collect()
                };
                ParamResponse::Set(results)
            }
        };
        // an answer this request cannot carry (over the response limit) fails the
        // request, not the node
        if let Err(e) = req.reply_value(&response) {
            req.fail(&e.to_string())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
