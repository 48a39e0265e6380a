//! Access control from one policy file: who may publish, subscribe, serve and call which
//! names across hosts, mapped to Zenoh's `access_control` and mutual TLS.
//!
//! The policy is a TOML file, the same on every host (in the spirit of SROS2's
//! permissions):
//!
//! ```toml
//! default = "deny"                # what no rule decides: "allow" or "deny"
//!
//! [tls]                           # mutual TLS (optional: else the Zenoh file's own)
//! ca = "ca.pem"                   # relative to this file; {host} is this host's name
//! cert = "{host}/cert.pem"
//! key = "{host}/key.pem"
//!
//! [subjects]                      # subject -> hosts (certificate common names)
//! robots = ["robot1", "robot2"]
//! base = ["base"]
//!
//! [[rules]]
//! id = "robots_own_topics"        # named in denials, `nerve topic info` and Zenoh
//! permission = "allow"
//! subjects = ["robots"]
//! actions = ["publish", "subscribe"]   # publish, subscribe, serve, call
//! names = ["/robot1/**", "/tf"]        # Nerve names; `*` one segment, `**` the rest
//! ```
//!
//! A deny rule wins over an allow rule; where none matches, `default` decides (Zenoh's
//! own order). A host named by no subject gets `default` for everything.
//!
//! What Zenoh enforces: hosts, by the common name of the certificate their TLS link
//! presents (signed by the CA every host trusts). Every host enforces the policy on what
//! it receives from and sends to each other host, so a host that lies about its own
//! policy is still refused by the others. What it cannot enforce: nodes (every node of a
//! process shares its Zenoh session and certificate) and processes of one host (they
//! meet through shared memory, outside Zenoh). The plane therefore checks the policy for
//! its own host when an endpoint is declared, so a denied endpoint is visible there (a
//! log line, `nerve topic info`), but only the other hosts' Zenoh makes it binding.
//!
//! Each action maps to the Zenoh messages that carry it, on every key space Nerve uses
//! for a name (see the module docs of [`crate::net`]); the subject is always the remote
//! host of a link:
//!
//! | action | from the subject (ingress) | to the subject (egress) |
//! |---|---|---|
//! | publish | put, delete on `t`, `o`; history queryable and replies on `h`; `live/pub` token | subscriber declarations on `t`, `o`; history queries on `h` |
//! | subscribe | subscriber declarations on `t`, `o`; history queries on `h`; `live/sub` token | put, delete on `t`, `o`; history queryable and replies on `h` |
//! | serve | queryable declarations and replies on `s`; `live/srv` token | queries on `s` |
//! | call | queries on `s`; `live/cli` token | queryable declarations and replies on `s` |
//!
//! Discovery (liveliness subscribers and queries, node tokens, every host's own tokens
//! going out) and the `info`/`schema` queryables are allowed to every named subject, so
//! a default-deny policy needs rules only for the names themselves.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A policy file that cannot be used, naming the file and (where it has one) the line.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum PolicyError {
    /// The file cannot be read.
    #[error("policy {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The TOML is malformed, a key is unknown or a value has the wrong type.
    #[error("policy {path}:{line}: {reason}")]
    Syntax {
        /// The file.
        path: String,
        /// Line from 1 (0: unknown).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A rule names a subject that `[subjects]` does not define.
    #[error(
        "policy {path}:{line}: rule {rule:?} names unknown subject {subject:?} (defined: {known})"
    )]
    UnknownSubject {
        /// The file.
        path: String,
        /// Line of the rule's `subjects`.
        line: usize,
        /// The rule.
        rule: String,
        /// The unknown subject.
        subject: String,
        /// The subjects defined.
        known: String,
    },
    /// A name pattern breaks the grammar.
    #[error("policy {path}:{line}: bad name pattern {pattern:?}: {reason}")]
    BadPattern {
        /// The file.
        path: String,
        /// Line of the pattern.
        line: usize,
        /// The pattern.
        pattern: String,
        /// What is wrong.
        reason: String,
    },
    /// A value is out of its allowed set (an action, a permission, a duplicate id, a host
    /// name Zenoh cannot carry).
    #[error("policy {path}:{line}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// Line of the value.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// Allow or deny.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Permission {
    /// Allowed.
    Allow,
    /// Denied.
    Deny,
}

impl Permission {
    fn as_str(self) -> &'static str {
        match self {
            Permission::Allow => "allow",
            Permission::Deny => "deny",
        }
    }
}

/// What an endpoint does with a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Publish a topic.
    Publish,
    /// Subscribe to a topic.
    Subscribe,
    /// Serve a service.
    Serve,
    /// Call a service.
    Call,
}

impl Action {
    /// Every action.
    pub const ALL: [Action; 4] = [
        Action::Publish,
        Action::Subscribe,
        Action::Serve,
        Action::Call,
    ];

    /// The action's name in a policy file.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Publish => "publish",
            Action::Subscribe => "subscribe",
            Action::Serve => "serve",
            Action::Call => "call",
        }
    }

    /// The endpoint that performs it (for messages: "publisher", …).
    pub fn endpoint(self) -> &'static str {
        match self {
            Action::Publish => "publisher",
            Action::Subscribe => "subscriber",
            Action::Serve => "server",
            Action::Call => "client",
        }
    }

    /// (messages, flow, key-space templates) of the Zenoh checks that carry the action
    /// for the remote subject; `{p}` is the pattern as key chunks.
    fn zenoh(
        self,
    ) -> &'static [(
        &'static [&'static str],
        &'static str,
        &'static [&'static str],
    )] {
        const T: &[&str] = &["nerve/*/t/{p}", "nerve/*/o/{p}"];
        const H: &[&str] = &["nerve/*/h/*/{p}"];
        const S: &[&str] = &["nerve/*/s/{p}"];
        match self {
            Action::Publish => &[
                (&["put", "delete"], "ingress", T),
                (&["declare_queryable", "reply"], "ingress", H),
                (
                    &["liveliness_token"],
                    "ingress",
                    &["nerve/*/live/pub/*/*/*/*/{p}"],
                ),
                (&["declare_subscriber"], "egress", T),
                (&["query"], "egress", H),
            ],
            Action::Subscribe => &[
                (&["declare_subscriber"], "ingress", T),
                (&["query"], "ingress", H),
                (
                    &["liveliness_token"],
                    "ingress",
                    &["nerve/*/live/sub/*/*/*/*/{p}"],
                ),
                (&["put", "delete"], "egress", T),
                (&["declare_queryable", "reply"], "egress", H),
            ],
            Action::Serve => &[
                (&["declare_queryable", "reply"], "ingress", S),
                (
                    &["liveliness_token"],
                    "ingress",
                    &["nerve/*/live/srv/*/*/*/*/{p}"],
                ),
                (&["query"], "egress", S),
            ],
            Action::Call => &[
                (&["query"], "ingress", S),
                (
                    &["liveliness_token"],
                    "ingress",
                    &["nerve/*/live/cli/*/*/*/*/{p}"],
                ),
                (&["declare_queryable", "reply"], "egress", S),
            ],
        }
    }
}

/// A name pattern: Nerve name segments, `*` (one segment) and `**` (any number of
/// segments, zero included; last only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern(String);

impl Pattern {
    /// Parses `/seg/*/…/**`.
    pub fn parse(text: &str) -> Result<Pattern, String> {
        let Some(rest) = text.strip_prefix('/') else {
            return Err("must start with '/' (patterns are absolute Nerve names)".into());
        };
        if rest.is_empty() {
            return Err("needs a segment after '/' (`/**` matches every name)".into());
        }
        let segs: Vec<&str> = rest.split('/').collect();
        for (i, s) in segs.iter().enumerate() {
            match *s {
                "*" => {}
                "**" if i + 1 == segs.len() => {}
                "**" => return Err("`**` may only be the last segment".into()),
                s if crate::name::validate_topic(&format!("/{s}")).is_ok() => {}
                s => {
                    return Err(format!(
                        "segment {s:?}: segments are `*`, `**` or start with a letter or '_' \
                         and hold only letters, digits and '_'"
                    ))
                }
            }
        }
        Ok(Pattern(text.to_string()))
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether Nerve name `name` (`/a/b`) matches.
    pub fn matches(&self, name: &str) -> bool {
        let p: Vec<&str> = self.0[1..].split('/').collect();
        let n: Vec<&str> = name.trim_start_matches('/').split('/').collect();
        for (i, seg) in p.iter().enumerate() {
            match *seg {
                "**" => return true,
                "*" if i < n.len() => {}
                s if n.get(i) == Some(&s) => {}
                _ => return false,
            }
        }
        p.len() == n.len()
    }

    /// The pattern as Zenoh key chunks.
    fn key(&self) -> &str {
        &self.0[1..]
    }
}

/// One rule of a policy.
#[derive(Clone, Debug)]
pub struct Rule {
    /// Its id (named in denials).
    pub id: String,
    /// Line of the rule's id (else its permission) in the file.
    pub line: usize,
    /// Allow or deny.
    pub permission: Permission,
    /// The subjects it applies to.
    pub subjects: Vec<String>,
    /// The actions it covers.
    pub actions: Vec<Action>,
    /// The names it covers.
    pub names: Vec<Pattern>,
}

/// The TLS files of a policy, as written (`{host}` not yet replaced).
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The CA every host trusts.
    pub ca: String,
    /// This host's certificate.
    pub cert: String,
    /// This host's private key.
    pub key: String,
}

/// An access-control policy (see the module docs).
#[derive(Clone, Debug)]
pub struct Policy {
    /// The file it was read from.
    pub path: PathBuf,
    /// What no rule decides.
    pub default: Permission,
    /// Mutual TLS settings, if the policy sets them.
    pub tls: Option<TlsFiles>,
    /// Subjects: name and hosts (certificate common names), in file order.
    pub subjects: Vec<(String, Vec<String>)>,
    /// Rules, in file order.
    pub rules: Vec<Rule>,
}

/// Why an endpoint is denied: the rule (or the default) that decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// The deny rule's id, or `default` when no rule allowed it under `default = "deny"`.
    pub rule: String,
    /// Where that rule is, `file:line`.
    pub at: String,
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rule {:?} ({})", self.rule, self.at)
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePolicy {
    default: Option<toml::Spanned<String>>,
    tls: Option<FileTls>,
    #[serde(default)]
    subjects: std::collections::BTreeMap<String, toml::Spanned<Vec<toml::Spanned<String>>>>,
    #[serde(default)]
    rules: Vec<FileRule>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTls {
    ca: String,
    cert: String,
    key: String,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRule {
    id: Option<toml::Spanned<String>>,
    permission: toml::Spanned<String>,
    subjects: toml::Spanned<Vec<String>>,
    actions: Vec<toml::Spanned<String>>,
    names: Vec<toml::Spanned<String>>,
}

/// Whether `s` can be an id or a host name in Zenoh's configuration.
fn plain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn permission(path: &str, line: usize, s: &str) -> Result<Permission, PolicyError> {
    match s {
        "allow" => Ok(Permission::Allow),
        "deny" => Ok(Permission::Deny),
        other => Err(PolicyError::Invalid {
            path: path.into(),
            line,
            reason: format!("permission {other:?}: expected \"allow\" or \"deny\""),
        }),
    }
}

impl Policy {
    /// Reads and checks a policy file.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Policy::parse(path, &text)
    }

    /// Parses and checks the text of a policy file; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Policy, PolicyError> {
        let p = path.display().to_string();
        let line = |offset: usize| crate::config::line_of(text, offset);
        let f: FilePolicy = toml::from_str(text).map_err(|e| PolicyError::Syntax {
            path: p.clone(),
            line: e.span().map(|s| line(s.start)).unwrap_or(0),
            reason: e.message().trim().to_string(),
        })?;
        let default = match &f.default {
            Some(d) => permission(&p, line(d.span().start), d.get_ref())?,
            None => Permission::Deny,
        };
        let mut subjects = Vec::new();
        for (name, hosts) in &f.subjects {
            let at = line(hosts.span().start);
            let bad = |reason: String| PolicyError::Invalid {
                path: p.clone(),
                line: at,
                reason,
            };
            if !plain(name) {
                return Err(bad(format!(
                    "subject name {name:?}: use letters, digits, '-', '_' and '.'"
                )));
            }
            if hosts.get_ref().is_empty() {
                return Err(bad(format!("subject {name:?} names no host")));
            }
            let mut list = Vec::new();
            for h in hosts.get_ref() {
                if !plain(h.get_ref()) {
                    return Err(PolicyError::Invalid {
                        path: p.clone(),
                        line: line(h.span().start),
                        reason: format!(
                            "host {:?}: a certificate common name of letters, digits, '-', '_' and '.'",
                            h.get_ref()
                        ),
                    });
                }
                list.push(h.get_ref().clone());
            }
            subjects.push((name.clone(), list));
        }
        let known = || {
            subjects
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut rules: Vec<Rule> = Vec::new();
        for (i, r) in f.rules.iter().enumerate() {
            // the line of its id (else of its permission): what a reader looks for
            let rule_line = line(
                r.id.as_ref()
                    .map_or(r.permission.span().start, |i| i.span().start),
            );
            let id = match &r.id {
                Some(id) => {
                    if !plain(id.get_ref()) {
                        return Err(PolicyError::Invalid {
                            path: p.clone(),
                            line: line(id.span().start),
                            reason: format!(
                                "rule id {:?}: use letters, digits, '-', '_' and '.'",
                                id.get_ref()
                            ),
                        });
                    }
                    id.get_ref().clone()
                }
                None => format!("rule{}", i + 1),
            };
            if rules.iter().any(|o| o.id == id) {
                return Err(PolicyError::Invalid {
                    path: p.clone(),
                    line: rule_line,
                    reason: format!("rule id {id:?} is used twice"),
                });
            }
            let permission =
                permission(&p, line(r.permission.span().start), r.permission.get_ref())?;
            let s_line = line(r.subjects.span().start);
            if r.subjects.get_ref().is_empty() {
                return Err(PolicyError::Invalid {
                    path: p.clone(),
                    line: s_line,
                    reason: format!("rule {id:?} names no subject"),
                });
            }
            for s in r.subjects.get_ref() {
                if !subjects.iter().any(|(n, _)| n == s) {
                    return Err(PolicyError::UnknownSubject {
                        path: p.clone(),
                        line: s_line,
                        rule: id,
                        subject: s.clone(),
                        known: known(),
                    });
                }
            }
            let mut actions = Vec::new();
            for a in &r.actions {
                let action = Action::ALL
                    .into_iter()
                    .find(|x| x.as_str() == a.get_ref())
                    .ok_or_else(|| PolicyError::Invalid {
                        path: p.clone(),
                        line: line(a.span().start),
                        reason: format!(
                            "action {:?}: expected publish, subscribe, serve or call",
                            a.get_ref()
                        ),
                    })?;
                actions.push(action);
            }
            let mut names = Vec::new();
            for n in &r.names {
                names.push(Pattern::parse(n.get_ref()).map_err(|reason| {
                    PolicyError::BadPattern {
                        path: p.clone(),
                        line: line(n.span().start),
                        pattern: n.get_ref().clone(),
                        reason,
                    }
                })?);
            }
            if actions.is_empty() || names.is_empty() {
                return Err(PolicyError::Invalid {
                    path: p.clone(),
                    line: rule_line,
                    reason: format!("rule {id:?} needs at least one action and one name"),
                });
            }
            rules.push(Rule {
                id,
                line: rule_line,
                permission,
                subjects: r.subjects.get_ref().clone(),
                actions,
                names,
            });
        }
        Ok(Policy {
            path: path.to_path_buf(),
            default,
            tls: f.tls.map(|t| TlsFiles {
                ca: t.ca,
                cert: t.cert,
                key: t.key,
            }),
            subjects,
            rules,
        })
    }

    /// Whether `host` may do `action` on `name`: `None` if allowed, else the deciding
    /// rule. The same order as Zenoh's: a matching deny rule, then a matching allow rule,
    /// then the default; a host that no subject names gets the default.
    pub fn check(&self, host: &str, action: Action, name: &str) -> Option<Denial> {
        let mine: Vec<&str> = self
            .subjects
            .iter()
            .filter(|(_, hosts)| hosts.iter().any(|h| h == host))
            .map(|(n, _)| n.as_str())
            .collect();
        let applies = |r: &&Rule| {
            r.subjects.iter().any(|s| mine.contains(&s.as_str()))
                && r.actions.contains(&action)
                && r.names.iter().any(|p| p.matches(name))
        };
        let at = |line: usize| format!("{}:{line}", self.path.display());
        if let Some(r) = self
            .rules
            .iter()
            .filter(applies)
            .find(|r| r.permission == Permission::Deny)
        {
            return Some(Denial {
                rule: r.id.clone(),
                at: at(r.line),
            });
        }
        if self.default == Permission::Allow
            || self
                .rules
                .iter()
                .filter(applies)
                .any(|r| r.permission == Permission::Allow)
        {
            return None;
        }
        Some(Denial {
            rule: "default".into(),
            at: format!("{} (default = \"deny\")", self.path.display()),
        })
    }

    /// The TLS files for `host`: `{host}` replaced, relative paths resolved against the
    /// policy file's directory.
    pub fn tls_files(&self, host: &str) -> Option<[PathBuf; 3]> {
        let t = self.tls.as_ref()?;
        let base = self.path.parent().unwrap_or(Path::new("."));
        let f = |s: &str| base.join(s.replace("{host}", host));
        Some([f(&t.ca), f(&t.cert), f(&t.key)])
    }

    /// Zenoh's `access_control` object (JSON) for this policy: one Zenoh subject per
    /// host, each Nerve rule expanded to the messages, flows and key spaces of its
    /// actions (see the module docs), plus the discovery rule.
    pub fn zenoh_access_control(&self) -> serde_json::Value {
        use serde_json::json;
        let mut hosts: Vec<&str> = self
            .subjects
            .iter()
            .flat_map(|(_, h)| h.iter().map(String::as_str))
            .collect();
        hosts.sort_unstable();
        hosts.dedup();
        let subject_id = |h: &str| format!("host:{h}");
        let subjects: Vec<_> = hosts
            .iter()
            .map(|h| json!({ "id": subject_id(h), "cert_common_names": [h] }))
            .collect();
        let mut rules = Vec::new();
        let mut policies = Vec::new();
        if !hosts.is_empty() {
            let both = json!(["ingress", "egress"]);
            let discovery = [
                (
                    "nerve.discovery",
                    json!(["liveliness_query", "declare_liveliness_subscriber"]),
                    both.clone(),
                    json!(["nerve/*/live/**"]),
                ),
                (
                    "nerve.discovery.out",
                    json!(["liveliness_token"]),
                    json!(["egress"]),
                    json!(["nerve/*/live/**"]),
                ),
                (
                    "nerve.nodes",
                    json!(["liveliness_token"]),
                    both.clone(),
                    json!(["nerve/*/live/node/**"]),
                ),
                (
                    "nerve.info",
                    json!(["declare_queryable", "query", "reply"]),
                    both,
                    json!(["nerve/*/info/**", "nerve/*/schema/**"]),
                ),
            ];
            let mut ids = Vec::new();
            for (id, messages, flows, keys) in discovery {
                rules.push(json!({ "id": id, "messages": messages, "flows": flows,
                                   "permission": "allow", "key_exprs": keys }));
                ids.push(id);
            }
            policies.push(json!({ "id": "nerve.discovery", "rules": ids,
                "subjects": hosts.iter().map(|h| subject_id(h)).collect::<Vec<_>>() }));
        }
        for r in &self.rules {
            let mut ids = Vec::new();
            for a in &r.actions {
                for (n, (messages, flow, spaces)) in a.zenoh().iter().enumerate() {
                    let keys: Vec<String> = r
                        .names
                        .iter()
                        .flat_map(|p| spaces.iter().map(|s| s.replace("{p}", p.key())))
                        .collect();
                    let id = format!("{}.{}.{n}", r.id, a.as_str());
                    rules.push(json!({ "id": id, "messages": messages, "flows": [flow],
                        "permission": r.permission.as_str(), "key_exprs": keys }));
                    ids.push(id);
                }
            }
            let mut subjects: Vec<String> = self
                .subjects
                .iter()
                .filter(|(n, _)| r.subjects.contains(n))
                .flat_map(|(_, h)| h.iter().map(|h| subject_id(h)))
                .collect();
            subjects.sort_unstable();
            subjects.dedup();
            policies.push(json!({ "id": r.id, "rules": ids, "subjects": subjects }));
        }
        json!({
            "enabled": true,
            "default_permission": self.default.as_str(),
            "rules": rules,
            "subjects": subjects,
            "policies": policies,
        })
    }

    /// Zenoh's `transport/link/tls` object (JSON) for `host`: mutual TLS with the
    /// policy's files, if it sets them.
    pub fn zenoh_tls(&self, host: &str) -> Option<serde_json::Value> {
        let [ca, cert, key] = self.tls_files(host)?;
        let s = |p: PathBuf| p.display().to_string();
        Some(serde_json::json!({
            "root_ca_certificate": s(ca),
            "enable_mtls": true,
            "listen_certificate": s(cert.clone()),
            "listen_private_key": s(key.clone()),
            "connect_certificate": s(cert),
            "connect_private_key": s(key),
        }))
    }

    /// The Zenoh configuration this policy adds for `host`, as JSON5 text (what
    /// `nerve policy zenoh` prints and the plane inserts).
    pub fn zenoh_json5(&self, host: &str) -> String {
        let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
        let mut out = format!(
            "// generated by nerve from {} for host {host:?}\n{{\n",
            self.path.display()
        );
        if let Some(tls) = self.zenoh_tls(host) {
            let _ = writeln!(
                out,
                "  transport: {{ link: {{ tls: {} }} }},",
                pretty(&tls).replace('\n', "\n  ")
            );
        }
        let _ = writeln!(
            out,
            "  access_control: {}\n}}",
            pretty(&self.zenoh_access_control()).replace('\n', "\n  ")
        );
        out
    }

    /// Refuses links that would not identify their peer: subjects are certificate
    /// names, so with any subject every endpoint must be TLS (`tls/`, `quic/`): a peer
    /// over plain TCP would match no subject and bypass every deny rule. `listen` is not
    /// checked in client mode (a client does not listen); an empty `listen` outside it is
    /// Zenoh's default, TCP.
    pub fn check_links(
        &self,
        mode: &str,
        listen: &[String],
        connect: &[String],
    ) -> Result<(), String> {
        if self.subjects.is_empty() {
            return Ok(());
        }
        let tls = |e: &String| e.starts_with("tls/") || e.starts_with("quic/");
        let why = |what: &str| {
            Err(format!(
                "policy {} names hosts by their TLS certificate, but {what}: peers over it \
                 would match no subject; use tls/ endpoints",
                self.path.display()
            ))
        };
        if mode != "client" && listen.is_empty() {
            return why("no listen endpoint is set (Zenoh's default listens on TCP)");
        }
        let listening = if mode == "client" { &[][..] } else { listen };
        match listening.iter().chain(connect).find(|e| !tls(e)) {
            Some(e) => why(&format!("endpoint {e} is not TLS")),
            None => Ok(()),
        }
    }

    /// Inserts this policy's access control (and TLS, if it sets it) into `zc` for
    /// `host`. A Zenoh file that already enables access control is refused: one policy
    /// decides.
    pub(crate) fn apply(&self, zc: &mut zenoh::Config, host: &str) -> Result<(), String> {
        if zc.get_json("access_control/enabled").ok().as_deref() == Some("true") {
            return Err(format!(
                "the Zenoh configuration enables access_control itself and the policy {} \
                 sets it too; keep one",
                self.path.display()
            ));
        }
        zc.insert_json5("access_control", &self.zenoh_access_control().to_string())
            .map_err(|e| format!("access control from {}: {e}", self.path.display()))?;
        if let Some(tls) = self.zenoh_tls(host) {
            zc.insert_json5("transport/link/tls", &tls.to_string())
                .map_err(|e| format!("TLS settings from {}: {e}", self.path.display()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
default = "allow"

[tls]
ca = "ca.pem"
cert = "{host}/cert.pem"
key = "{host}/key.pem"

[subjects]
b = ["hostb"]
robots = ["robot1", "robot2"]

[[rules]]
id = "no_secret"
permission = "deny"
subjects = ["b"]
actions = ["publish", "subscribe"]
names = ["/secret/**"]

[[rules]]
id = "robot_cmd"
permission = "deny"
subjects = ["robots"]
actions = ["call"]
names = ["/arm/*/move"]
"#;

    fn parse(text: &str) -> Result<Policy, PolicyError> {
        Policy::parse(Path::new("/etc/nerve/policy.toml"), text)
    }

    #[test]
    fn patterns_match_nerve_names() {
        let p = Pattern::parse("/secret/**").unwrap();
        assert!(p.matches("/secret/data") && p.matches("/secret/a/b") && p.matches("/secret"));
        assert!(!p.matches("/open/secret") && !p.matches("/secrets"));
        let p = Pattern::parse("/arm/*/move").unwrap();
        assert!(p.matches("/arm/left/move"));
        assert!(!p.matches("/arm/move") && !p.matches("/arm/left/move/x"));
        assert!(Pattern::parse("/**").unwrap().matches("/anything/at/all"));
        for bad in ["secret", "/", "/a/**/b", "/a b", "/1x", "/a//b"] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_policy_decides_as_zenoh_does() {
        let p = parse(GOOD).unwrap();
        let d = p.check("hostb", Action::Subscribe, "/secret/data").unwrap();
        assert_eq!(d.rule, "no_secret");
        assert_eq!(d.at, "/etc/nerve/policy.toml:14");
        assert!(p.check("hostb", Action::Publish, "/secret/x").is_some());
        assert!(
            p.check("hostb", Action::Serve, "/secret/x").is_none(),
            "not its actions"
        );
        assert!(p.check("hostb", Action::Publish, "/open/x").is_none());
        assert!(
            p.check("hosta", Action::Publish, "/secret/x").is_none(),
            "no subject names a"
        );
        assert_eq!(
            p.check("robot2", Action::Call, "/arm/left/move")
                .unwrap()
                .rule,
            "robot_cmd"
        );
        // default deny: an allow rule admits, a deny rule wins over it, others are denied
        let p = parse(
            "[subjects]\nb = [\"hostb\"]\n\
             [[rules]]\nid = \"all\"\npermission = \"allow\"\nsubjects = [\"b\"]\n\
             actions = [\"publish\", \"subscribe\"]\nnames = [\"/**\"]\n\
             [[rules]]\nid = \"quiet\"\npermission = \"deny\"\nsubjects = [\"b\"]\n\
             actions = [\"publish\"]\nnames = [\"/quiet\"]\n",
        )
        .unwrap();
        assert!(p.check("hostb", Action::Publish, "/x/y").is_none());
        assert_eq!(
            p.check("hostb", Action::Publish, "/quiet").unwrap().rule,
            "quiet"
        );
        assert_eq!(
            p.check("hostb", Action::Serve, "/x").unwrap().rule,
            "default"
        );
        assert_eq!(
            p.check("hostc", Action::Publish, "/x").unwrap().rule,
            "default"
        );
    }

    #[test]
    fn bad_policies_name_the_file_and_line() {
        let err = |text: &str| parse(text).unwrap_err().to_string();
        let e = err("default = \"allow\"\n\n[subjects]\nb = [\"hostb\"]\nwho = 1\n");
        assert!(e.contains("policy.toml:5"), "{e}");
        let e = err("default = \"allow\"\nsubjets = {}\n");
        assert!(e.contains("policy.toml:2") && e.contains("subjets"), "{e}");
        let e = err("default = \"maybe\"\n");
        assert!(e.contains("policy.toml:1") && e.contains("maybe"), "{e}");
        let e = err(
            "[subjects]\nb = [\"hostb\"]\n[[rules]]\npermission = \"deny\"\n\
             subjects = [\"c\"]\nactions = [\"publish\"]\nnames = [\"/x\"]\n",
        );
        assert!(
            e.contains("policy.toml:5") && e.contains("unknown subject \"c\"") && e.contains("b"),
            "{e}"
        );
        let e = err(
            "[subjects]\nb = [\"hostb\"]\n[[rules]]\npermission = \"deny\"\n\
             subjects = [\"b\"]\nactions = [\"publish\"]\nnames = [\"/x\",\n \"y/**\"]\n",
        );
        assert!(e.contains("policy.toml:8") && e.contains("\"y/**\""), "{e}");
        let e = err(
            "[subjects]\nb = [\"hostb\"]\n[[rules]]\npermission = \"deny\"\n\
             subjects = [\"b\"]\nactions = [\"publish\", \"write\"]\nnames = [\"/x\"]\n",
        );
        assert!(e.contains("policy.toml:6") && e.contains("write"), "{e}");
        let e = err(
            "[subjects]\nb = [\"hostb\"]\n[[rules]]\npermission = \"deny\"\n\
             subjects = [\"b\"]\nactions = [\"publish\"]\nnames = [\"/x\"]\ncolour = 1\n",
        );
        assert!(e.contains("colour"), "{e}");
        let e = err("[subjects]\nb = [\"host b\"]\n");
        assert!(e.contains("policy.toml:2") && e.contains("host b"), "{e}");
        let missing = Policy::load(Path::new("/nonexistent/p.toml")).unwrap_err();
        assert!(
            missing.to_string().contains("/nonexistent/p.toml"),
            "{missing}"
        );
    }

    #[test]
    fn the_zenoh_mapping_covers_every_key_space_and_zenoh_accepts_it() {
        let p = parse(GOOD).unwrap();
        let ac = p.zenoh_access_control();
        assert_eq!(ac["default_permission"], "allow");
        let rules = ac["rules"].as_array().unwrap();
        let keys_of = |id: &str| {
            let r = rules
                .iter()
                .find(|r| r["id"] == id)
                .unwrap_or_else(|| panic!("{id}"));
            (
                r["key_exprs"].to_string(),
                r["messages"].to_string(),
                r["flows"].to_string(),
            )
        };
        let (k, m, f) = keys_of("no_secret.publish.0");
        assert!(
            k.contains("nerve/*/t/secret/**") && k.contains("nerve/*/o/secret/**"),
            "{k}"
        );
        assert!(m.contains("put") && f.contains("ingress"), "{m} {f}");
        let (k, _, _) = keys_of("no_secret.publish.2");
        assert!(k.contains("nerve/*/live/pub/*/*/*/*/secret/**"), "{k}");
        let (k, m, f) = keys_of("no_secret.subscribe.3");
        assert!(k.contains("nerve/*/t/secret/**") && m.contains("put") && f.contains("egress"));
        let (k, _, _) = keys_of("no_secret.subscribe.1");
        assert!(k.contains("nerve/*/h/*/secret/**"), "{k}");
        let (k, m, _) = keys_of("robot_cmd.call.0");
        assert!(
            k.contains("nerve/*/s/arm/*/move") && m.contains("query"),
            "{k} {m}"
        );
        let policies = ac["policies"].to_string();
        assert!(policies.contains("host:robot1") && policies.contains("host:hostb"));
        // Zenoh takes the generated settings as they are
        let mut zc = zenoh::Config::default();
        p.apply(&mut zc, "hostb").unwrap();
        assert_eq!(
            zc.get_json("transport/link/tls/listen_certificate")
                .unwrap(),
            "\"/etc/nerve/hostb/cert.pem\""
        );
        assert_eq!(zc.get_json("access_control/enabled").unwrap(), "true");
        let e = p.apply(&mut zc, "hostb").unwrap_err();
        assert!(e.contains("keep one"), "{e}");
        // every link must identify its peer
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let tls = v(&["tls/10.0.0.1:7447"]);
        assert!(p.check_links("peer", &tls, &tls).is_ok());
        let e = p
            .check_links("peer", &tls, &v(&["tcp/10.0.0.2:7447"]))
            .unwrap_err();
        assert!(
            e.contains("tcp/10.0.0.2:7447") && e.contains("policy.toml"),
            "{e}"
        );
        assert!(p
            .check_links("peer", &[], &tls)
            .unwrap_err()
            .contains("default"));
        assert!(p.check_links("client", &[], &tls).is_ok());
        // the printed JSON5 is a Zenoh configuration too
        let text = p.zenoh_json5("hostb");
        let dir = std::env::temp_dir().join(format!("nerve-policy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("z.json5");
        std::fs::write(&f, &text).unwrap();
        zenoh::Config::from_file(&f).unwrap_or_else(|e| panic!("{e}\n{text}"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
