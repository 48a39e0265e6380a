//! [`Registry`]: a set of resolved interface definitions, built from `ros2msg` schemas, from
//! interface files on a search path, or from text.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::definition::{DefinitionRole, MessageDefinition};
use crate::name::{InterfaceKind, NameError, TypeName};
use crate::parse::{parse_interface, parse_msg, ParseError};

/// Maximum nesting depth of message types accepted anywhere in this crate.
pub const MAX_NESTING_DEPTH: usize = 64;

/// Largest interface file read from disk (bytes).
const MAX_FILE_SIZE: u64 = 4 << 20;

/// Errors from building or querying a [`Registry`].
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A malformed type name.
    #[error(transparent)]
    Name(#[from] NameError),
    /// A definition could not be parsed.
    #[error(transparent)]
    Parse(Box<ParseError>),
    /// The type is not in the registry.
    #[error("unknown type `{name}`{}", needed_by.as_ref().map(|n| format!(" (needed by `{n}`)")).unwrap_or_default())]
    UnknownType {
        /// The missing type.
        name: String,
        /// The type whose field refers to it, if any.
        needed_by: Option<String>,
    },
    /// No interface file for the type was found on the search path.
    #[error("type `{name}`{} not found: looked for {file} in {}", needed_by.as_ref().map(|n| format!(" (needed by `{n}`)")).unwrap_or_default(), if searched.is_empty() { "no directories (empty search path; set AMENT_PREFIX_PATH or pass a types directory)".to_string() } else { searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ") })]
    NotFound {
        /// The missing type.
        name: String,
        /// The type whose field refers to it, if any.
        needed_by: Option<String>,
        /// The relative file looked for, e.g. `std_msgs/msg/String.msg`.
        file: String,
        /// Every directory that was searched.
        searched: Vec<PathBuf>,
    },
    /// An interface file could not be read.
    #[error("cannot read interface file `{}`: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Two different definitions for the same type name.
    #[error("conflicting definitions for `{name}`")]
    Conflict {
        /// The type.
        name: String,
    },
    /// A type contains itself, directly or indirectly, or nests deeper than
    /// [`MAX_NESTING_DEPTH`].
    #[error("type `{name}` is recursive or nests more than {limit} levels deep")]
    TooDeep {
        /// The type where the problem was found.
        name: String,
        /// The depth limit.
        limit: usize,
    },
    /// A default value of the type would be unreasonably large.
    #[error("default value of `{name}` would have more than {limit} array elements")]
    TooLarge {
        /// The type.
        name: String,
        /// The element limit.
        limit: usize,
    },
    /// A `ros2msg` schema is malformed.
    #[error("invalid ros2msg schema for `{name}`: {reason}")]
    Schema {
        /// The schema's top-level type.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The type is a service or action composite, which has no wire representation.
    #[error("`{name}` is a {role} definition, not a message; use one of its sub-types (e.g. `{name}_Request`, `{name}_Goal`)")]
    NotAMessage {
        /// The type.
        name: String,
        /// "service" or "action".
        role: &'static str,
    },
}

impl From<ParseError> for RegistryError {
    fn from(e: ParseError) -> Self {
        RegistryError::Parse(Box::new(e))
    }
}

/// Directories searched for interface files (`<dir>/<pkg>/{msg,srv,action}/<Name>.<ext>`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchPath {
    dirs: Vec<PathBuf>,
}

impl SearchPath {
    /// An empty search path.
    pub fn new() -> Self {
        SearchPath::default()
    }

    /// `<prefix>/share` for every entry of the `AMENT_PREFIX_PATH` environment variable (empty if
    /// unset).
    pub fn from_env() -> Self {
        let mut sp = SearchPath::new();
        if let Some(v) = std::env::var_os("AMENT_PREFIX_PATH") {
            for p in std::env::split_paths(&v) {
                if !p.as_os_str().is_empty() {
                    sp.push_prefix(p);
                }
            }
        }
        sp
    }

    /// Adds `<prefix>/share` (an install prefix as listed in `AMENT_PREFIX_PATH`).
    pub fn push_prefix(&mut self, prefix: impl AsRef<Path>) {
        self.push_share_dir(prefix.as_ref().join("share"));
    }

    /// Adds a share directory, i.e. one containing `<pkg>/msg/...`.
    pub fn push_share_dir(&mut self, dir: impl Into<PathBuf>) {
        let dir = dir.into();
        if !self.dirs.contains(&dir) {
            self.dirs.push(dir);
        }
    }

    /// Adds a user-given directory (`--types DIR`): it is searched as a share directory, and
    /// `DIR/share` is added too when it exists. A package directory (`DIR/msg/Foo.msg`, where
    /// `DIR`'s name is the package) also works.
    pub fn push_dir(&mut self, dir: impl Into<PathBuf>) {
        let dir = dir.into();
        let share = dir.join("share");
        self.push_share_dir(dir);
        if share.is_dir() {
            self.push_share_dir(share);
        }
    }

    /// The directories, in search order.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Finds the file defining `interface` (a `pkg/kind/Name` without sub-type suffix).
    fn find(&self, interface: &TypeName) -> Result<PathBuf, (String, Vec<PathBuf>)> {
        let rel = format!(
            "{}/{}/{}.{}",
            interface.package(),
            interface.kind(),
            interface.name(),
            interface.kind().file_extension()
        );
        for d in &self.dirs {
            let p = d.join(&rel);
            if p.is_file() {
                return Ok(p);
            }
            if d.file_name().and_then(|n| n.to_str()) == Some(interface.package()) {
                let p = d.join(interface.kind().as_str()).join(format!(
                    "{}.{}",
                    interface.name(),
                    interface.kind().file_extension()
                ));
                if p.is_file() {
                    return Ok(p);
                }
            }
        }
        Err((rel, self.dirs.clone()))
    }
}

/// Outcome of [`Registry::load_all`].
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Interfaces (message, service or action names) loaded successfully.
    pub loaded: Vec<TypeName>,
    /// Interface files that failed, with the reason.
    pub errors: Vec<RegistryError>,
}

/// A set of interface definitions, keyed by fully qualified type name.
///
/// Cheap to clone (definitions are shared). Build it with [`Registry::from_ros2msg`],
/// [`Registry::load`] / [`Registry::load_all`] (interface files), or
/// [`Registry::add_interface_text`]; query it with [`Registry::get`], hash types with
/// [`Registry::type_hash`], and use it with [`crate::decode`] / [`crate::encode`].
#[derive(Debug, Clone, Default)]
pub struct Registry {
    defs: HashMap<TypeName, Arc<MessageDefinition>>,
}

fn same_definition(a: &MessageDefinition, b: &MessageDefinition) -> bool {
    a.name == b.name && a.fields == b.fields && a.constants == b.constants && a.role == b.role
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Number of definitions (including generated service/action sub-types).
    pub fn len(&self) -> usize {
        self.defs.len()
    }

    /// Whether the registry is empty.
    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    /// All type names, sorted.
    pub fn type_names(&self) -> Vec<&TypeName> {
        let mut v: Vec<&TypeName> = self.defs.keys().collect();
        v.sort();
        v
    }

    /// Adds one definition. Adding an identical definition again is a no-op; a different
    /// definition under an existing name is a [`RegistryError::Conflict`].
    pub fn insert(&mut self, def: MessageDefinition) -> Result<(), RegistryError> {
        if let Some(existing) = self.defs.get(&def.name) {
            if same_definition(existing, &def) {
                return Ok(());
            }
            return Err(RegistryError::Conflict {
                name: def.name.to_string(),
            });
        }
        self.defs.insert(def.name.clone(), Arc::new(def));
        Ok(())
    }

    /// Adds several definitions (see [`Registry::insert`]).
    pub fn extend(
        &mut self,
        defs: impl IntoIterator<Item = MessageDefinition>,
    ) -> Result<(), RegistryError> {
        for d in defs {
            self.insert(d)?;
        }
        Ok(())
    }

    /// Parses `.msg`, `.srv` or `.action` text (chosen by `name`'s namespace) and adds the
    /// resulting definitions. Dependencies are not checked; see [`Registry::check`].
    pub fn add_interface_text(
        &mut self,
        name: &str,
        text: &str,
    ) -> Result<TypeName, RegistryError> {
        let tn = TypeName::parse(name)?;
        let defs = parse_interface(&tn, text)?;
        self.extend(defs)?;
        Ok(tn)
    }

    /// Looks up a definition by any accepted name form (`pkg/Name`, `pkg/msg/Name`, ...).
    pub fn get(&self, name: &str) -> Option<&MessageDefinition> {
        if let Some(d) = self.defs.get(name) {
            return Some(d);
        }
        let tn = TypeName::parse(name).ok()?;
        self.defs.get(&tn).map(|d| &**d)
    }

    /// Looks up a definition by parsed name.
    pub fn get_by_name(&self, name: &TypeName) -> Option<&MessageDefinition> {
        self.defs.get(name).map(|d| &**d)
    }

    /// Whether `name` is defined.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Like [`Registry::get`], but with an error naming the missing type.
    pub fn resolve(&self, name: &str) -> Result<&MessageDefinition, RegistryError> {
        if let Some(d) = self.defs.get(name) {
            return Ok(d);
        }
        let tn = TypeName::parse(name)?;
        self.resolve_name(&tn, None)
    }

    pub(crate) fn resolve_name(
        &self,
        tn: &TypeName,
        needed_by: Option<&TypeName>,
    ) -> Result<&MessageDefinition, RegistryError> {
        self.defs
            .get(tn)
            .map(|d| &**d)
            .ok_or_else(|| RegistryError::UnknownType {
                name: tn.to_string(),
                needed_by: needed_by.map(|n| n.to_string()),
            })
    }

    /// Resolves a message type that can be serialized (not a service/action composite).
    pub(crate) fn resolve_message(&self, name: &str) -> Result<&MessageDefinition, RegistryError> {
        let def = self.resolve(name)?;
        match def.role {
            DefinitionRole::Message => Ok(def),
            DefinitionRole::Service => Err(RegistryError::NotAMessage {
                name: def.name.to_string(),
                role: "service",
            }),
            DefinitionRole::Action => Err(RegistryError::NotAMessage {
                name: def.name.to_string(),
                role: "action",
            }),
        }
    }

    /// Checks that `name` and every type it refers to (transitively) is defined, and that the
    /// type is not recursive.
    pub fn check(&self, name: &str) -> Result<(), RegistryError> {
        let tn = TypeName::parse(name)?;
        let mut done = HashSet::new();
        let mut stack = Vec::new();
        self.check_rec(&tn, None, &mut done, &mut stack)
    }

    fn check_rec<'a>(
        &'a self,
        tn: &'a TypeName,
        needed_by: Option<&TypeName>,
        done: &mut HashSet<&'a TypeName>,
        stack: &mut Vec<&'a TypeName>,
    ) -> Result<(), RegistryError> {
        if done.contains(tn) {
            return Ok(());
        }
        if stack.contains(&tn) || stack.len() >= MAX_NESTING_DEPTH {
            return Err(RegistryError::TooDeep {
                name: tn.to_string(),
                limit: MAX_NESTING_DEPTH,
            });
        }
        let def = self.resolve_name(tn, needed_by)?;
        stack.push(tn);
        for dep in def.dependencies() {
            self.check_rec(dep, Some(tn), done, stack)?;
        }
        stack.pop();
        done.insert(tn);
        Ok(())
    }

    /// All types `name` depends on, transitively (not including `name` itself unless it is
    /// recursive), sorted by full name.
    pub fn dependencies(&self, name: &str) -> Result<Vec<TypeName>, RegistryError> {
        let tn = TypeName::parse(name)?;
        self.closure(&tn)
    }

    pub(crate) fn closure(&self, tn: &TypeName) -> Result<Vec<TypeName>, RegistryError> {
        let root = self.resolve_name(tn, None)?;
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut names: HashMap<String, TypeName> = HashMap::new();
        let mut queue: Vec<(TypeName, TypeName)> = root
            .dependencies()
            .into_iter()
            .map(|d| (d.clone(), tn.clone()))
            .collect();
        while let Some((t, parent)) = queue.pop() {
            let key = t.to_string();
            if seen.insert(key.clone()) {
                let def = self.resolve_name(&t, Some(&parent))?;
                for d in def.dependencies() {
                    queue.push((d.clone(), t.clone()));
                }
                names.insert(key, t);
            }
        }
        Ok(seen.into_iter().filter_map(|k| names.remove(&k)).collect())
    }

    /// Loads `name` (any sub-type name works: `pkg/srv/Foo_Request` loads `pkg/srv/Foo.srv`) and
    /// all its dependencies from the interface files on `search`. Types already in the registry
    /// are not reloaded. Returns the parsed name.
    pub fn load(&mut self, name: &str, search: &SearchPath) -> Result<TypeName, RegistryError> {
        let tn = TypeName::parse(name)?;
        let mut work: Vec<(TypeName, Option<TypeName>)> = vec![(tn.clone(), None)];
        let mut visited: HashSet<TypeName> = HashSet::new();
        while let Some((t, needed_by)) = work.pop() {
            if !visited.insert(t.clone()) {
                continue;
            }
            if !self.defs.contains_key(&t) {
                self.load_file(&t, needed_by.as_ref(), search)?;
            }
            let def = self.resolve_name(&t, needed_by.as_ref())?;
            for d in def.dependencies() {
                if !visited.contains(d) {
                    work.push((d.clone(), Some(t.clone())));
                }
            }
        }
        self.check(tn.as_str())?;
        Ok(tn)
    }

    fn load_file(
        &mut self,
        t: &TypeName,
        needed_by: Option<&TypeName>,
        search: &SearchPath,
    ) -> Result<(), RegistryError> {
        let interface = t.interface();
        let path = search
            .find(&interface)
            .map_err(|(file, searched)| RegistryError::NotFound {
                name: t.to_string(),
                needed_by: needed_by.map(|n| n.to_string()),
                file,
                searched,
            })?;
        let text = read_limited(&path)?;
        let defs = parse_interface(&interface, &text).map_err(|mut e| {
            e.origin = path.display().to_string();
            RegistryError::from(e)
        })?;
        self.extend(defs)?;
        if !self.defs.contains_key(t) {
            return Err(RegistryError::UnknownType {
                name: t.to_string(),
                needed_by: needed_by.map(|n| n.to_string()),
            });
        }
        Ok(())
    }

    /// Loads every `.msg`, `.srv` and `.action` file found on `search` (with dependencies).
    /// Failures (e.g. a dependency that only exists as `.idl`) are collected in the report.
    pub fn load_all(&mut self, search: &SearchPath) -> LoadReport {
        let mut report = LoadReport::default();
        let mut names = BTreeSet::new();
        for dir in search.dirs() {
            let Ok(pkgs) = std::fs::read_dir(dir) else {
                continue;
            };
            for pkg in pkgs.flatten() {
                let pkg_name = pkg.file_name().to_string_lossy().to_string();
                for kind in [
                    InterfaceKind::Msg,
                    InterfaceKind::Srv,
                    InterfaceKind::Action,
                ] {
                    let Ok(files) = std::fs::read_dir(pkg.path().join(kind.as_str())) else {
                        continue;
                    };
                    for f in files.flatten() {
                        let fname = f.file_name().to_string_lossy().to_string();
                        if let Some(stem) =
                            fname.strip_suffix(&format!(".{}", kind.file_extension()))
                        {
                            if let Ok(tn) = TypeName::new(&pkg_name, kind, stem) {
                                names.insert(tn);
                            }
                        }
                    }
                }
            }
        }
        for tn in names {
            match self.load(tn.as_str(), search) {
                Ok(t) => report.loaded.push(t),
                Err(e) => report.errors.push(e),
            }
        }
        report
    }

    /// Adds the definitions from a `ros2msg` schema (what rosbag2 stores in MCAP schema
    /// records) whose top-level type is `type_name`. See [`Registry::from_ros2msg`].
    pub fn add_ros2msg(
        &mut self,
        type_name: &str,
        schema: &str,
    ) -> Result<TypeName, RegistryError> {
        let tn = TypeName::parse(type_name)?;
        let defs = crate::ros2msg::parse_schema(&tn, schema)?;
        let mut staged = self.clone();
        staged.extend(defs)?;
        // Fill in well-known types that rosbag2 leaves out (e.g. for service events).
        for _ in 0..8 {
            let missing = match staged.check(tn.as_str()) {
                Err(RegistryError::UnknownType { name, needed_by }) => (name, needed_by),
                Err(e) => return Err(e),
                Ok(()) => break,
            };
            match well_known_text(&missing.0) {
                Some(text) => {
                    let wk = TypeName::parse(&missing.0)?;
                    staged.insert(parse_msg(&wk, text)?)?;
                }
                None => {
                    return Err(RegistryError::Schema {
                        name: tn.to_string(),
                        reason: format!(
                            "it has no definition for `{}`{}",
                            missing.0,
                            missing
                                .1
                                .map(|n| format!(" (used by `{n}`)"))
                                .unwrap_or_default()
                        ),
                    })
                }
            }
        }
        staged.check(tn.as_str())?;
        *self = staged;
        Ok(tn)
    }

    /// Builds a registry from a `ros2msg` schema: the main type's text, then for each
    /// dependency a line of 80 `=`, a line `MSG: pkg/Name` and its text.
    ///
    /// Service sub-types whose schema is the `.srv` text (as rosbag2 writes for
    /// `pkg/srv/Name_Event`) are understood, and the well-known types `builtin_interfaces/Time`,
    /// `builtin_interfaces/Duration`, `service_msgs/ServiceEventInfo`,
    /// `unique_identifier_msgs/UUID` and `std_msgs/Header` are supplied when the schema omits
    /// them.
    pub fn from_ros2msg(type_name: &str, schema: &str) -> Result<Self, RegistryError> {
        let mut r = Registry::new();
        r.add_ros2msg(type_name, schema)?;
        Ok(r)
    }
}

fn read_limited(path: &Path) -> Result<String, RegistryError> {
    let io = |source| RegistryError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.len() > MAX_FILE_SIZE {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "file too large for an interface definition",
        )));
    }
    std::fs::read_to_string(path).map_err(io)
}

/// Definitions of a few well-known types, used when a `ros2msg` schema omits them.
fn well_known_text(name: &str) -> Option<&'static str> {
    Some(match name {
        "builtin_interfaces/msg/Time" | "builtin_interfaces/msg/Duration" => "int32 sec\nuint32 nanosec\n",
        "service_msgs/msg/ServiceEventInfo" => {
            "uint8 REQUEST_SENT = 0\nuint8 REQUEST_RECEIVED = 1\nuint8 RESPONSE_SENT = 2\nuint8 RESPONSE_RECEIVED = 3\nuint8 event_type\nbuiltin_interfaces/Time stamp\nchar[16] client_gid\nint64 sequence_number\n"
        }
        "unique_identifier_msgs/msg/UUID" => "uint8[16] uuid\n",
        "std_msgs/msg/Header" => "builtin_interfaces/Time stamp\nstring frame_id\n",
        _ => return None,
    })
}
