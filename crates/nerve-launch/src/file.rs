//! Launch files (TOML): parsing with exact spans, substitution, includes and checks.
//!
//! Every value is read as a `toml::Spanned`, so every problem is reported as
//! `file:line:col: field: reason`. All problems of a file are collected, not just the first.

use crate::error::{Diagnostic, LaunchError};
use crate::plan::{
    ComponentNode, LifecycleGoal, OnExit, ParamValue, Plan, ProcessSpec, Ready, Respawn,
    ShutdownTimeouts,
};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// Deepest include nesting.
pub const MAX_INCLUDE_DEPTH: usize = 16;
/// Most processes and containers in one launch.
pub const MAX_PROCESSES: usize = 256;
/// Most nodes in one container.
pub const MAX_COMPONENTS: usize = 64;
/// Largest launch file.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Longest duration a launch file may give.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);
/// Most restarts a respawn policy may allow.
pub const MAX_RESPAWNS: u32 = 10_000;
/// Default ready timeout.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(30);

type S<T> = Spanned<T>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    args: BTreeMap<String, S<RawArg>>,
    #[serde(default)]
    env: BTreeMap<String, S<String>>,
    #[serde(default)]
    include: Vec<S<RawInclude>>,
    #[serde(default)]
    process: Vec<S<RawProcess>>,
    #[serde(default)]
    container: Vec<S<RawProcess>>,
    shutdown: Option<S<RawShutdown>>,
    ready_timeout: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArg {
    default: Option<S<String>>,
    #[allow(dead_code)] // documentation for readers of the file and `--check`
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInclude {
    file: S<String>,
    namespace: Option<S<String>>,
    #[serde(default)]
    args: BTreeMap<String, S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProcess {
    name: S<String>,
    cmd: S<Vec<S<String>>>,
    namespace: Option<S<String>>,
    #[serde(default)]
    remap: BTreeMap<String, S<String>>,
    #[serde(default)]
    params: BTreeMap<String, S<toml::Value>>,
    #[serde(default)]
    param_files: Vec<S<String>>,
    #[serde(default)]
    env: BTreeMap<String, S<String>>,
    #[serde(default)]
    after: Vec<S<String>>,
    ready: Option<S<RawReady>>,
    ready_timeout: Option<S<String>>,
    respawn: Option<S<RawRespawn>>,
    shutdown: Option<S<RawShutdown>>,
    exit: Option<S<String>>,
    #[serde(default)]
    node: Vec<S<RawNode>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReady {
    topic: Option<S<String>>,
    service: Option<S<String>>,
    line: Option<S<String>>,
    delay: Option<S<String>>,
    /// A managed node's goal state (`active` or `inactive`).
    lifecycle: Option<S<String>>,
    /// The managed node (default: the process's name, in its namespace).
    node: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRespawn {
    max: Option<S<i64>>,
    delay: Option<S<String>>,
    max_delay: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShutdown {
    sigint: Option<S<String>>,
    sigterm: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    component: S<String>,
    name: S<String>,
    namespace: Option<S<String>>,
    #[serde(default)]
    remap: BTreeMap<String, S<String>>,
    #[serde(default)]
    params: BTreeMap<String, S<toml::Value>>,
}

/// Entry point for launch files.
pub struct LaunchFile;

impl LaunchFile {
    /// Loads `path` with command-line arguments `(name, value)` (overriding the defaults of
    /// its `[args]`), substitutes, follows includes and checks everything: names unique,
    /// `after` targets present and acyclic, executables found, durations valid.
    pub fn load<K: AsRef<str>, V: AsRef<str>>(
        path: impl AsRef<Path>,
        args: &[(K, V)],
    ) -> Result<Plan, LaunchError> {
        let path = path.as_ref();
        let given: Vec<(String, String)> = args
            .iter()
            .map(|(k, v)| (k.as_ref().to_string(), v.as_ref().to_string()))
            .collect();
        let mut l = Loader::default();
        let scope = Parent {
            namespace: "/".into(),
            env: Vec::new(),
            shutdown: ShutdownTimeouts::default(),
            ready_timeout: DEFAULT_READY_TIMEOUT,
        };
        l.load_file(path, Given::CommandLine(given), &scope, 0)?;
        l.finish(path)
    }

    /// Parses command-line arguments of the form `name:=value`.
    pub fn parse_args(args: &[String]) -> Result<Vec<(String, String)>, LaunchError> {
        args.iter()
            .map(|a| match a.split_once(":=") {
                Some((k, v)) if valid_arg_name(k) => Ok((k.to_string(), v.to_string())),
                Some(_) => Err(LaunchError::Argument {
                    arg: a.clone(),
                    reason: "argument names hold letters, digits, '_' and '-'".into(),
                }),
                None => Err(LaunchError::Argument {
                    arg: a.clone(),
                    reason: "expected name:=value".into(),
                }),
            })
            .collect()
    }
}

fn valid_arg_name(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 64
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// What the including side gives a file.
enum Given {
    /// From the command line: unknown names are an `Argument` error.
    CommandLine(Vec<(String, String)>),
    /// From an `[[include]]`: unknown names are located at the include.
    Include(Vec<(String, String, Diagnostic)>),
}

/// What a file inherits from the file including it.
struct Parent {
    namespace: String,
    env: Vec<(String, String)>,
    shutdown: ShutdownTimeouts,
    ready_timeout: Duration,
}

/// One file's text, for locating spans.
struct Src {
    path: PathBuf,
    dir: PathBuf,
    text: String,
}

impl Src {
    fn diag(&self, span: Range<usize>, field: &str, reason: impl Into<String>) -> Diagnostic {
        let (line, col) = line_col(&self.text, span.start);
        Diagnostic {
            file: self.path.clone(),
            line,
            col,
            field: field.to_string(),
            reason: reason.into(),
        }
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let col = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
    (line, col)
}

/// A process before the whole launch is known.
struct Pending {
    spec: ProcessSpec,
    after: Vec<(String, Diagnostic)>,
    at: Diagnostic,
}

#[derive(Default)]
struct Loader {
    errors: Vec<Diagnostic>,
    out: Vec<Pending>,
    names: HashMap<String, String>,
    stack: Vec<PathBuf>,
}

impl Loader {
    fn load_file(
        &mut self,
        path: &Path,
        given: Given,
        parent: &Parent,
        depth: usize,
    ) -> Result<(), LaunchError> {
        let whole = |reason: String| Diagnostic {
            file: path.to_path_buf(),
            line: 0,
            col: 0,
            field: String::new(),
            reason,
        };
        let canon = std::fs::canonicalize(path)
            .map_err(|e| LaunchError::Invalid(vec![whole(format!("cannot open: {e}"))]))?;
        let meta = std::fs::metadata(&canon)
            .map_err(|e| LaunchError::Invalid(vec![whole(format!("cannot open: {e}"))]))?;
        if meta.len() > MAX_FILE_BYTES {
            return Err(LaunchError::Invalid(vec![whole(format!(
                "larger than {MAX_FILE_BYTES} bytes"
            ))]));
        }
        let text = std::fs::read_to_string(&canon)
            .map_err(|e| LaunchError::Invalid(vec![whole(format!("cannot read: {e}"))]))?;
        let src = Src {
            path: path.to_path_buf(),
            dir: canon.parent().map(Path::to_path_buf).unwrap_or_default(),
            text,
        };
        let raw: RawFile = match toml::from_str(&src.text) {
            Ok(r) => r,
            Err(e) => {
                let span = e.span().unwrap_or(0..0);
                // toml leaves the message of some syntax errors empty
                let msg = match e.message().trim() {
                    "" => "invalid TOML".to_string(),
                    m => m.to_string(),
                };
                let field = backticked(&msg)
                    .or_else(|| {
                        let t = src.text.get(span.clone())?.trim();
                        (!t.is_empty() && t.len() <= 40 && !t.contains('\n')).then(|| t.to_string())
                    })
                    .unwrap_or_default();
                let d = if span.is_empty() && span.start == 0 {
                    whole(msg)
                } else {
                    src.diag(span, &field, msg)
                };
                return Err(LaunchError::Invalid(vec![d]));
            }
        };
        self.stack.push(canon.clone());

        // arguments: defaults, then what was given
        let mut args: BTreeMap<String, Option<String>> = BTreeMap::new();
        for (name, a) in &raw.args {
            if !valid_arg_name(name) || name == "dir" {
                self.errors.push(src.diag(
                    a.span(),
                    &format!("args.{name}"),
                    "argument names hold letters, digits, '_' and '-' (and `dir` is reserved)",
                ));
            }
            args.insert(
                name.clone(),
                a.get_ref().default.as_ref().map(|d| d.get_ref().clone()),
            );
        }
        let declared = || raw.args.keys().cloned().collect::<Vec<_>>().join(", ");
        match given {
            Given::CommandLine(list) => {
                for (k, v) in list {
                    match args.get_mut(&k) {
                        Some(slot) => *slot = Some(v),
                        None => {
                            self.stack.pop();
                            return Err(LaunchError::Argument {
                                arg: format!("{k}:={v}"),
                                reason: format!(
                                    "{} declares no such argument (it has: {})",
                                    path.display(),
                                    if raw.args.is_empty() {
                                        "none".into()
                                    } else {
                                        declared()
                                    }
                                ),
                            });
                        }
                    }
                }
            }
            Given::Include(list) => {
                for (k, v, at) in list {
                    match args.get_mut(&k) {
                        Some(slot) => *slot = Some(v),
                        None => self.errors.push(Diagnostic {
                            reason: format!(
                                "{} declares no argument {k:?} (it has: {})",
                                path.display(),
                                if raw.args.is_empty() {
                                    "none".into()
                                } else {
                                    declared()
                                }
                            ),
                            ..at
                        }),
                    }
                }
            }
        }
        let mut vars = BTreeMap::new();
        for (name, v) in args {
            match v {
                Some(v) => {
                    vars.insert(name, v);
                }
                None => self.errors.push(src.diag(
                    raw.args[&name].span(),
                    &format!("args.{name}"),
                    "required argument not given (name:=value on the command line, or args in the include)",
                )),
            }
        }
        // a default may use the environment or ${dir}, not other arguments
        let vars: BTreeMap<String, String> = vars
            .into_iter()
            .map(|(k, v)| {
                let span = raw.args[&k].span();
                let field = format!("args.{k}");
                let v = self
                    .subst_str(&src, &BTreeMap::new(), &v, span, &field)
                    .unwrap_or(v);
                (k, v)
            })
            .collect();
        let sc = Scope {
            src: &src,
            vars: &vars,
        };

        // file-wide settings
        let mut env = parent.env.clone();
        for (k, v) in &raw.env {
            if let Some(v) = self.subst(&sc, v, &format!("env.{k}")) {
                set_env(&mut env, k, v);
            }
        }
        let mut shutdown = parent.shutdown;
        if let Some(s) = &raw.shutdown {
            shutdown = self.shutdown(&sc, s, "shutdown", shutdown);
        }
        let mut ready_timeout = parent.ready_timeout;
        if let Some(t) = &raw.ready_timeout {
            if let Some(d) = self.duration(&sc, t, "ready_timeout") {
                ready_timeout = d;
            }
        }
        let here = Parent {
            namespace: parent.namespace.clone(),
            env,
            shutdown,
            ready_timeout,
        };

        for p in &raw.process {
            self.process(&sc, p, &here, false);
        }
        for p in &raw.container {
            self.process(&sc, p, &here, true);
        }

        for (i, inc) in raw.include.iter().enumerate() {
            let field = format!("include[{i}]");
            let r = inc.get_ref();
            let Some(file) = self.subst(&sc, &r.file, &format!("{field}.file")) else {
                continue;
            };
            let target = src.dir.join(&file);
            let at = src.diag(r.file.span(), &format!("{field}.file"), "");
            if depth + 1 > MAX_INCLUDE_DEPTH {
                self.errors.push(Diagnostic {
                    reason: format!("includes nest deeper than {MAX_INCLUDE_DEPTH}"),
                    ..at
                });
                continue;
            }
            match std::fs::canonicalize(&target) {
                Err(e) => {
                    self.errors.push(Diagnostic {
                        reason: format!("cannot open {}: {e}", target.display()),
                        ..at
                    });
                    continue;
                }
                Ok(c) if self.stack.contains(&c) => {
                    self.errors.push(Diagnostic {
                        reason: format!("include cycle: {} includes itself", c.display()),
                        ..at
                    });
                    continue;
                }
                Ok(_) => {}
            }
            let mut namespace = here.namespace.clone();
            if let Some(ns) = &r.namespace {
                if let Some(ns) =
                    self.namespace(&sc, ns, &format!("{field}.namespace"), &here.namespace)
                {
                    namespace = ns;
                }
            }
            let mut list = Vec::new();
            for (k, v) in &r.args {
                let f = format!("{field}.args.{k}");
                if let Some(val) = self.subst(&sc, v, &f) {
                    list.push((k.clone(), val, src.diag(v.span(), &f, "")));
                }
            }
            let child = Parent {
                namespace,
                env: here.env.clone(),
                shutdown: here.shutdown,
                ready_timeout: here.ready_timeout,
            };
            match self.load_file(&target, Given::Include(list), &child, depth + 1) {
                Ok(()) => {}
                Err(LaunchError::Invalid(mut d)) => self.errors.append(&mut d),
                Err(e) => self.errors.push(Diagnostic {
                    reason: e.to_string(),
                    ..src.diag(r.file.span(), &format!("{field}.file"), "")
                }),
            }
        }
        self.stack.pop();
        Ok(())
    }

    fn process(&mut self, sc: &Scope<'_>, p: &S<RawProcess>, parent: &Parent, container: bool) {
        let src = sc.src;
        let r = p.get_ref();
        let kind = if container { "container" } else { "process" };
        let name = r.name.get_ref().clone();
        let field = |f: &str| format!("{kind}[{name}].{f}");
        let at = src.diag(p.span(), &format!("{kind}[{name}]"), "");
        let origin = format!("{}:{}", at.file.display(), at.line);
        if !valid_arg_name(&name) || name.starts_with('-') {
            self.errors.push(src.diag(
                r.name.span(),
                &format!("{kind}.name"),
                format!("{name:?}: names hold 1 to 64 letters, digits, '_' and '-'"),
            ));
        }
        if let Some(first) = self.names.get(&name) {
            self.errors.push(src.diag(
                r.name.span(),
                &format!("{kind}.name"),
                format!("{name:?} is already the name of the process at {first}"),
            ));
        } else {
            self.names.insert(name.clone(), origin.clone());
        }
        if self.out.len() >= MAX_PROCESSES {
            self.errors.push(src.diag(
                p.span(),
                &format!("{kind}[{name}]"),
                format!("more than {MAX_PROCESSES} processes"),
            ));
            return;
        }

        // command
        let mut cmd = Vec::new();
        for (i, c) in r.cmd.get_ref().iter().enumerate() {
            if let Some(v) = self.subst(sc, c, &field(&format!("cmd[{i}]"))) {
                cmd.push(v);
            }
        }
        let mut program = PathBuf::new();
        if r.cmd.get_ref().is_empty() {
            self.errors
                .push(src.diag(r.cmd.span(), &field("cmd"), "empty: name an executable"));
        } else if cmd.len() == r.cmd.get_ref().len() {
            match resolve_program(&cmd[0], &src.dir) {
                Ok(p) => program = p,
                Err(reason) => {
                    self.errors
                        .push(src.diag(r.cmd.get_ref()[0].span(), &field("cmd"), reason))
                }
            }
        }
        let args = cmd.into_iter().skip(1).collect();

        let namespace = match &r.namespace {
            Some(ns) => self
                .namespace(sc, ns, &field("namespace"), &parent.namespace)
                .unwrap_or_else(|| parent.namespace.clone()),
            None => parent.namespace.clone(),
        };
        let remap = self.remap(sc, &r.remap, p.span(), &field("remap"));
        let params = self.params(sc, &r.params, &field("params"));
        let mut param_files = Vec::new();
        for (i, f) in r.param_files.iter().enumerate() {
            let fname = field(&format!("param_files[{i}]"));
            if let Some(v) = self.subst(sc, f, &fname) {
                let path = src.dir.join(v);
                if !path.is_file() {
                    self.errors.push(src.diag(
                        f.span(),
                        &fname,
                        format!("no such file {}", path.display()),
                    ));
                }
                param_files.push(path);
            }
        }
        let mut env = parent.env.clone();
        for (k, v) in &r.env {
            if let Some(v) = self.subst(sc, v, &field(&format!("env.{k}"))) {
                set_env(&mut env, k, v);
            }
        }
        let mut after = Vec::new();
        for a in &r.after {
            if let Some(v) = self.subst(sc, a, &field("after")) {
                after.push((v, src.diag(a.span(), &field("after"), "")));
            }
        }
        let ready = match &r.ready {
            None => Ready::Started,
            Some(rd) => self.ready(sc, rd, &field("ready"), &namespace, &remap, &name),
        };
        let ready_timeout = match &r.ready_timeout {
            Some(t) => self
                .duration(sc, t, &field("ready_timeout"))
                .unwrap_or(parent.ready_timeout),
            None => parent.ready_timeout,
        };
        let respawn = r
            .respawn
            .as_ref()
            .map(|rs| self.respawn(sc, rs, &field("respawn")));
        let shutdown = match &r.shutdown {
            Some(s) => self.shutdown(sc, s, &field("shutdown"), parent.shutdown),
            None => parent.shutdown,
        };
        let on_exit = match &r.exit {
            None => OnExit::Shutdown,
            Some(e) => match self.subst(sc, e, &field("exit")).as_deref() {
                Some("shutdown") | None => OnExit::Shutdown,
                Some("ignore") => OnExit::Ignore,
                Some(other) => {
                    self.errors.push(src.diag(
                        e.span(),
                        &field("exit"),
                        format!("{other:?}: expected \"shutdown\" or \"ignore\""),
                    ));
                    OnExit::Shutdown
                }
            },
        };
        let mut components = Vec::new();
        if !container && !r.node.is_empty() {
            self.errors.push(src.diag(
                r.node[0].span(),
                &field("node"),
                "only a [[container]] has nodes",
            ));
        }
        if container && r.node.is_empty() {
            self.errors.push(src.diag(
                p.span(),
                &field("node"),
                "a container needs at least one [[container.node]]",
            ));
        }
        if r.node.len() > MAX_COMPONENTS {
            self.errors.push(src.diag(
                p.span(),
                &field("node"),
                format!("more than {MAX_COMPONENTS} nodes"),
            ));
        }
        if container {
            let mut seen = HashMap::new();
            for (i, n) in r.node.iter().enumerate().take(MAX_COMPONENTS) {
                let nf = |f: &str| field(&format!("node[{i}].{f}"));
                let nr = n.get_ref();
                let component = self.subst(sc, &nr.component, &nf("component"));
                let nname = self.subst(sc, &nr.name, &nf("name"));
                let nns = match &nr.namespace {
                    Some(ns) => self
                        .namespace(sc, ns, &nf("namespace"), &namespace)
                        .unwrap_or_else(|| namespace.clone()),
                    None => namespace.clone(),
                };
                if let Some(nm) = &nname {
                    if let Err(e) = nerve::name::validate_node(nm) {
                        self.errors
                            .push(src.diag(nr.name.span(), &nf("name"), e.to_string()));
                    } else if seen.insert(nerve::name::join(&nns, nm), ()).is_some() {
                        self.errors.push(src.diag(
                            nr.name.span(),
                            &nf("name"),
                            format!(
                                "two nodes named {} in this container",
                                nerve::name::join(&nns, nm)
                            ),
                        ));
                    }
                }
                let nremap = self.remap(sc, &nr.remap, n.span(), &nf("remap"));
                let nparams = self.params(sc, &nr.params, &nf("params"));
                if let (Some(component), Some(name)) = (component, nname) {
                    if component.is_empty() {
                        self.errors
                            .push(src.diag(nr.component.span(), &nf("component"), "empty"));
                    }
                    components.push(ComponentNode {
                        component,
                        name,
                        namespace: nns,
                        remap: nremap,
                        params: nparams,
                    });
                }
            }
        }
        self.out.push(Pending {
            spec: ProcessSpec {
                name,
                origin,
                program,
                args,
                namespace,
                remap,
                env,
                param_files,
                params,
                after: Vec::new(),
                ready,
                ready_timeout,
                respawn,
                shutdown,
                on_exit,
                components,
                container,
            },
            after,
            at,
        });
    }

    fn subst(&mut self, sc: &Scope<'_>, v: &S<String>, field: &str) -> Option<String> {
        self.subst_str(sc.src, sc.vars, v.get_ref(), v.span(), field)
    }

    /// Replaces `${arg}`, `${env:VAR}` and `${dir}`; `$$` is a literal `$`.
    fn subst_str(
        &mut self,
        src: &Src,
        vars: &BTreeMap<String, String>,
        s: &str,
        span: Range<usize>,
        field: &str,
    ) -> Option<String> {
        match substitute(s, vars, &src.dir) {
            Ok(v) => Some(v),
            Err(reason) => {
                self.errors.push(src.diag(span, field, reason));
                None
            }
        }
    }

    fn namespace(
        &mut self,
        sc: &Scope<'_>,
        v: &S<String>,
        field: &str,
        base: &str,
    ) -> Option<String> {
        let ns = self.subst(sc, v, field)?;
        let ns = ns.trim_end_matches('/');
        let full = if ns.is_empty() {
            if v.get_ref().starts_with('/') {
                "/".to_string()
            } else {
                base.to_string()
            }
        } else {
            nerve::name::join(base, ns)
        };
        match nerve::name::validate_namespace(&full) {
            Ok(()) => Some(full),
            Err(e) => {
                self.errors
                    .push(sc.src.diag(v.span(), field, e.to_string()));
                None
            }
        }
    }

    fn remap(
        &mut self,
        sc: &Scope<'_>,
        m: &BTreeMap<String, S<String>>,
        at: Range<usize>,
        field: &str,
    ) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (from, to) in m {
            let f = format!("{field}.{from}");
            let Some(to_v) = self.subst(sc, to, &f) else {
                continue;
            };
            let check = nerve::name::validate_relative(from)
                .and_then(|()| nerve::name::validate_relative(&to_v));
            match check {
                Ok(()) => out.push((from.clone(), to_v)),
                Err(e) => self.errors.push(sc.src.diag(to.span(), &f, e.to_string())),
            }
        }
        if out.len() > nerve::name::MAX_REMAP_RULES {
            self.errors.push(sc.src.diag(
                at,
                field,
                format!("more than {} rules", nerve::name::MAX_REMAP_RULES),
            ));
        }
        out
    }

    fn params(
        &mut self,
        sc: &Scope<'_>,
        m: &BTreeMap<String, S<toml::Value>>,
        field: &str,
    ) -> Vec<(String, ParamValue)> {
        let mut out = Vec::new();
        for (k, v) in m {
            let f = format!("{field}.{k}");
            match param_value(v.get_ref(), sc.vars, &sc.src.dir) {
                Ok(p) => out.push((k.clone(), p)),
                Err(reason) => self.errors.push(sc.src.diag(v.span(), &f, reason)),
            }
        }
        out
    }

    fn duration(&mut self, sc: &Scope<'_>, v: &S<String>, field: &str) -> Option<Duration> {
        let text = self.subst(sc, v, field)?;
        match parse_duration(&text) {
            Ok(d) => Some(d),
            Err(reason) => {
                self.errors.push(sc.src.diag(v.span(), field, reason));
                None
            }
        }
    }

    fn shutdown(
        &mut self,
        sc: &Scope<'_>,
        s: &S<RawShutdown>,
        field: &str,
        base: ShutdownTimeouts,
    ) -> ShutdownTimeouts {
        let mut out = base;
        if let Some(v) = &s.get_ref().sigint {
            if let Some(d) = self.duration(sc, v, &format!("{field}.sigint")) {
                out.sigint = d;
            }
        }
        if let Some(v) = &s.get_ref().sigterm {
            if let Some(d) = self.duration(sc, v, &format!("{field}.sigterm")) {
                out.sigterm = d;
            }
        }
        out
    }

    fn respawn(&mut self, sc: &Scope<'_>, s: &S<RawRespawn>, field: &str) -> Respawn {
        let r = s.get_ref();
        let mut out = Respawn {
            max: 3,
            delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
        };
        if let Some(m) = &r.max {
            match u32::try_from(*m.get_ref()) {
                Ok(v) if v <= MAX_RESPAWNS => out.max = v,
                _ => self.errors.push(sc.src.diag(
                    m.span(),
                    &format!("{field}.max"),
                    format!("{}: expected 0 to {MAX_RESPAWNS}", m.get_ref()),
                )),
            }
        }
        if let Some(v) = &r.delay {
            if let Some(d) = self.duration(sc, v, &format!("{field}.delay")) {
                out.delay = d;
            }
        }
        if let Some(v) = &r.max_delay {
            if let Some(d) = self.duration(sc, v, &format!("{field}.max_delay")) {
                out.max_delay = d;
            }
        }
        if out.max_delay < out.delay {
            out.max_delay = out.delay;
        }
        out
    }

    fn ready(
        &mut self,
        sc: &Scope<'_>,
        s: &S<RawReady>,
        field: &str,
        namespace: &str,
        remap: &[(String, String)],
        process: &str,
    ) -> Ready {
        let r = s.get_ref();
        let set = [&r.topic, &r.service, &r.line, &r.delay, &r.lifecycle]
            .iter()
            .filter(|o| o.is_some())
            .count();
        if set > 1 {
            self.errors.push(sc.src.diag(
                s.span(),
                field,
                "give one of topic, service, line, delay or lifecycle",
            ));
            return Ready::Started;
        }
        if let Some(n) = &r.node {
            if r.lifecycle.is_none() {
                self.errors.push(sc.src.diag(
                    n.span(),
                    &format!("{field}.node"),
                    "node goes with lifecycle readiness (ready = { lifecycle = \"active\", node = \"...\" })",
                ));
                return Ready::Started;
            }
        }
        if let Some(l) = &r.lifecycle {
            return self.lifecycle_ready(sc, l, r.node.as_ref(), field, namespace, process);
        }
        let name = |l: &mut Loader, v: &S<String>, f: &str| -> Option<String> {
            let t = l.subst(sc, v, f)?;
            let full = nerve::name::resolve(&t, namespace, remap);
            match nerve::name::validate_topic(&full) {
                Ok(()) => Some(full),
                Err(e) => {
                    l.errors.push(sc.src.diag(v.span(), f, e.to_string()));
                    None
                }
            }
        };
        if let Some(t) = &r.topic {
            return name(self, t, &format!("{field}.topic")).map_or(Ready::Started, Ready::Topic);
        }
        if let Some(t) = &r.service {
            return name(self, t, &format!("{field}.service"))
                .map_or(Ready::Started, Ready::Service);
        }
        if let Some(l) = &r.line {
            let f = format!("{field}.line");
            let Some(text) = self.subst(sc, l, &f) else {
                return Ready::Started;
            };
            return match regex::RegexBuilder::new(&text).size_limit(1 << 20).build() {
                Ok(_) => Ready::Line(text),
                Err(e) => {
                    let reason = format!("invalid regular expression: {e}");
                    self.errors.push(sc.src.diag(l.span(), &f, reason));
                    Ready::Started
                }
            };
        }
        if let Some(d) = &r.delay {
            return self
                .duration(sc, d, &format!("{field}.delay"))
                .map_or(Ready::Started, Ready::Delay);
        }
        Ready::Started
    }

    /// `ready = { lifecycle = "active" | "inactive", node = "..." }`.
    fn lifecycle_ready(
        &mut self,
        sc: &Scope<'_>,
        l: &S<String>,
        node: Option<&S<String>>,
        field: &str,
        namespace: &str,
        process: &str,
    ) -> Ready {
        let f = format!("{field}.lifecycle");
        let goal = match self.subst(sc, l, &f).as_deref() {
            Some("active") => LifecycleGoal::Active,
            Some("inactive") => LifecycleGoal::Inactive,
            Some(other) => {
                self.errors.push(sc.src.diag(
                    l.span(),
                    &f,
                    format!("{other:?}: expected \"active\" or \"inactive\""),
                ));
                return Ready::Started;
            }
            None => return Ready::Started,
        };
        let nf = format!("{field}.node");
        let (given, span) = match node {
            Some(n) => match self.subst(sc, n, &nf) {
                Some(v) => (v, n.span()),
                None => return Ready::Started,
            },
            None => (process.to_string(), l.span()),
        };
        // node names are never remapped: a relative one is under the process's namespace
        let full = if given.starts_with('/') {
            nerve::name::validate_topic(&given).map(|()| given.clone())
        } else {
            nerve::name::validate_node(&given).map(|()| nerve::name::join(namespace, &given))
        };
        match full {
            Ok(node) => Ready::Lifecycle { node, goal },
            Err(e) => {
                let reason = match node {
                    Some(_) => format!("{given:?}: {e}"),
                    None => format!(
                        "the process name {given:?} is not a node name ({e}): give ready.node"
                    ),
                };
                self.errors.push(sc.src.diag(span, &nf, reason));
                Ready::Started
            }
        }
    }

    /// Checks `after` and orders the processes.
    fn finish(mut self, path: &Path) -> Result<Plan, LaunchError> {
        let index: HashMap<String, usize> = self
            .out
            .iter()
            .enumerate()
            .map(|(i, p)| (p.spec.name.clone(), i))
            .collect();
        let mut deps: Vec<Vec<usize>> = vec![Vec::new(); self.out.len()];
        for (i, p) in self.out.iter().enumerate() {
            for (a, at) in &p.after {
                match index.get(a) {
                    Some(&j) if j == i => self.errors.push(Diagnostic {
                        reason: format!("{a} cannot start after itself"),
                        ..at.clone()
                    }),
                    Some(&j) => deps[i].push(j),
                    None => self.errors.push(Diagnostic {
                        reason: format!("no process or container named {a:?}"),
                        ..at.clone()
                    }),
                }
            }
        }
        // Kahn's algorithm, stable in declaration order
        let n = self.out.len();
        let mut order = Vec::with_capacity(n);
        let mut done = vec![false; n];
        while order.len() < n {
            let next = (0..n).find(|&i| !done[i] && deps[i].iter().all(|&d| done[d]));
            match next {
                Some(i) => {
                    done[i] = true;
                    order.push(i);
                }
                None => {
                    // every process left waits on another one left: name one cycle
                    let start = (0..n).find(|&i| !done[i]).unwrap_or(0);
                    let mut path = vec![start];
                    let mut cur = start;
                    while let Some(&next) = deps[cur].iter().find(|&&d| !done[d]) {
                        if let Some(pos) = path.iter().position(|&p| p == next) {
                            path.drain(..pos);
                            path.push(next);
                            break;
                        }
                        path.push(next);
                        cur = next;
                    }
                    let names: Vec<&str> = path
                        .iter()
                        .map(|&i| self.out[i].spec.name.as_str())
                        .collect();
                    let first = &self.out[path[0]];
                    let at = first
                        .after
                        .first()
                        .map(|a| a.1.clone())
                        .unwrap_or_else(|| first.at.clone());
                    self.errors.push(Diagnostic {
                        reason: format!("dependency cycle: {}", names.join(" -> ")),
                        ..at
                    });
                    break;
                }
            }
        }
        if !self.errors.is_empty() {
            return Err(LaunchError::Invalid(self.errors));
        }
        let mut slots: Vec<Option<Pending>> = self.out.into_iter().map(Some).collect();
        let processes = order
            .into_iter()
            .filter_map(|i| {
                let mut p = slots[i].take()?;
                p.spec.after = p.after.into_iter().map(|a| a.0).collect();
                Some(p.spec)
            })
            .collect();
        Ok(Plan {
            file: path.to_path_buf(),
            processes,
        })
    }
}

struct Scope<'a> {
    src: &'a Src,
    vars: &'a BTreeMap<String, String>,
}

fn set_env(env: &mut Vec<(String, String)>, k: &str, v: String) {
    if let Some(slot) = env.iter_mut().find(|(key, _)| key == k) {
        slot.1 = v;
    } else {
        env.push((k.to_string(), v));
    }
}

fn backticked(msg: &str) -> Option<String> {
    let start = msg.find('`')? + 1;
    let len = msg[start..].find('`')?;
    Some(msg[start..start + len].to_string())
}

/// Substitutes `${name}` (an argument), `${env:VAR}` and `${dir}`; `$$` is `$`.
pub fn substitute(s: &str, vars: &BTreeMap<String, String>, dir: &Path) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push('$');
            rest = r;
            continue;
        }
        let Some(body) = after.strip_prefix('{') else {
            out.push('$');
            rest = after;
            continue;
        };
        let Some(end) = body.find('}') else {
            return Err(format!("unterminated `${{` in {s:?}"));
        };
        let key = &body[..end];
        if let Some(var) = key.strip_prefix("env:") {
            match std::env::var(var) {
                Ok(v) => out.push_str(&v),
                Err(_) => {
                    return Err(format!(
                        "environment variable {var} (`${{{key}}}`) is not set"
                    ))
                }
            }
        } else if key == "dir" {
            out.push_str(&dir.display().to_string());
        } else if let Some(v) = vars.get(key) {
            out.push_str(v);
        } else {
            let known: Vec<&str> = vars.keys().map(String::as_str).collect();
            return Err(format!(
                "`${{{key}}}` names no argument (declared: {})",
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            ));
        }
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn param_value(
    v: &toml::Value,
    vars: &BTreeMap<String, String>,
    dir: &Path,
) -> Result<ParamValue, String> {
    Ok(match v {
        toml::Value::String(s) => ParamValue::Str(substitute(s, vars, dir)?),
        toml::Value::Integer(i) => ParamValue::Int(*i),
        toml::Value::Float(f) if f.is_finite() => ParamValue::Float(*f),
        toml::Value::Float(_) => return Err("parameters must be finite numbers".into()),
        toml::Value::Boolean(b) => ParamValue::Bool(*b),
        toml::Value::Datetime(_) => {
            return Err("dates are not parameter values (quote it as a string)".into())
        }
        toml::Value::Array(a) => ParamValue::List(
            a.iter()
                .map(|x| param_value(x, vars, dir))
                .collect::<Result<_, _>>()?,
        ),
        toml::Value::Table(t) => ParamValue::Map(
            t.iter()
                .map(|(k, x)| Ok((k.clone(), param_value(x, vars, dir)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

/// Parses a duration: a number and a unit, `ns`, `us`, `ms`, `s`, `m` or `h` (`200ms`,
/// `1.5s`). At most a day.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || format!("{text:?}: expected a duration like 200ms, 1.5s or 2m");
    let n: f64 = num.parse().map_err(|_| bad())?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(bad()),
    };
    let secs = n * scale;
    if !secs.is_finite() || secs > MAX_DURATION.as_secs_f64() {
        return Err(format!("{text:?}: longer than a day"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Finds an executable: a name with a `/` is a path (relative to the launch file's
/// directory), anything else is looked up on `PATH`.
fn resolve_program(cmd: &str, dir: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if cmd.is_empty() {
        return Err("empty executable name".into());
    }
    if cmd.contains('/') {
        let p = dir.join(cmd);
        return if executable(&p) {
            Ok(p)
        } else {
            Err(format!("{} is not an executable file", p.display()))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in std::env::split_paths(&path) {
        let p = d.join(cmd);
        if executable(&p) {
            return Ok(p);
        }
    }
    Err(format!("executable {cmd:?} not found on PATH"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("200ms").unwrap(), Duration::from_millis(200));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        for bad in ["", "5", "ms", "-1s", "1 parsec", "2d", "25h"] {
            assert!(parse_duration(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn substitution() {
        let vars = BTreeMap::from([("robot".to_string(), "r1".to_string())]);
        let dir = Path::new("/x");
        assert_eq!(substitute("/${robot}/a", &vars, dir).unwrap(), "/r1/a");
        assert_eq!(substitute("${dir}/p", &vars, dir).unwrap(), "/x/p");
        assert_eq!(substitute("$$5 $x", &vars, dir).unwrap(), "$5 $x");
        assert!(substitute("${nope}", &vars, dir)
            .unwrap_err()
            .contains("robot"));
        assert!(substitute("${robot", &vars, dir).is_err());
        assert!(substitute("${env:NERVE_SURELY_UNSET_VAR}", &vars, dir).is_err());
    }

    #[test]
    fn line_and_column() {
        assert_eq!(line_col("a\nbc\nd", 3), (2, 2));
        assert_eq!(line_col("abc", 0), (1, 1));
    }
}
