//! Topic and node names.
//!
//! Grammar: a topic name is absolute, `/` followed by one or more segments separated by
//! `/`; a segment starts with a letter or `_` and continues with letters, digits and `_`.
//! At most 200 bytes. Examples: `/imu`, `/robot1/lidar/points`. Node names are one segment.
//!
//! Namespaces and remapping: a *relative* name (no leading `/`, e.g. `chatter` or
//! `lidar/points`) resolves under the node's namespace (`/robot1` + `chatter` =
//! `/robot1/chatter`; in the root namespace `/` it is `/chatter`); an absolute name stays
//! as it is. A *private* name (`~` or `~/x`, as in ROS) resolves under the node's own
//! full name (`/robot1/talker/x` for node `talker` in `/robot1`). Then the first remap rule
//! whose `from` (resolved the same way) equals the resolved name replaces it with its `to`
//! (resolved the same way). See [`resolve_in_node`]: every door (typed and type-erased
//! endpoints, so the C ABI, Python, the CLI and the bridges) resolves through it, by way
//! of [`crate::Node::resolve_name`].

use crate::error::NameError;

/// Longest topic name in bytes.
pub const MAX_TOPIC_LEN: usize = 200;

fn valid_segment(seg: &str) -> bool {
    let mut chars = seg.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Checks a topic name against the grammar.
pub fn validate_topic(name: &str) -> Result<(), NameError> {
    let err = |reason: &str| NameError {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.len() > MAX_TOPIC_LEN {
        return Err(err("longer than 200 bytes"));
    }
    let Some(rest) = name.strip_prefix('/') else {
        return Err(err("must start with '/'"));
    };
    if rest.is_empty() {
        return Err(err("needs at least one segment after '/'"));
    }
    for seg in rest.split('/') {
        if !valid_segment(seg) {
            return Err(err(
                "segments must start with a letter or '_' and hold only letters, digits and '_'",
            ));
        }
    }
    Ok(())
}

/// Checks a node name (one segment, at most 64 bytes).
pub fn validate_node(name: &str) -> Result<(), NameError> {
    if name.len() > 64 || !valid_segment(name) {
        return Err(NameError {
            name: name.to_string(),
            reason: "node names start with a letter or '_', hold only letters, digits and '_', at most 64 bytes".into(),
        });
    }
    Ok(())
}

/// Checks a namespace: `/` (the root) or an absolute name.
pub fn validate_namespace(ns: &str) -> Result<(), NameError> {
    if ns == "/" {
        return Ok(());
    }
    validate_topic(ns).map_err(|e| NameError {
        name: ns.to_string(),
        reason: format!("namespace: {}", e.reason),
    })
}

/// Checks a name that may be relative (`chatter`, `lidar/points`), private (`~`,
/// `~/state`) or absolute (`/imu`).
pub fn validate_relative(name: &str) -> Result<(), NameError> {
    if name.starts_with('/') {
        return validate_topic(name);
    }
    if name == "~" {
        return Ok(());
    }
    let rest = name.strip_prefix("~/").unwrap_or(name);
    validate_topic(&format!("/{rest}")).map_err(|e| NameError {
        name: name.to_string(),
        reason: e.reason,
    })
}

/// Joins `name` to `namespace` when it is relative (no remapping).
pub fn join(namespace: &str, name: &str) -> String {
    if name.starts_with('/') {
        name.to_string()
    } else if namespace == "/" || namespace.is_empty() {
        format!("/{name}")
    } else {
        format!("{}/{name}", namespace.trim_end_matches('/'))
    }
}

/// Joins `name` as a node named `node` in `namespace` sees it: a private name (`~`,
/// `~/x`) under the node's full name, otherwise as [`join`] does. Without a node a private
/// name stays as it is (and is refused where it is checked: it is not absolute).
fn expand(namespace: &str, node: Option<&str>, name: &str) -> String {
    match name.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => match node {
            Some(node) => format!("{}{rest}", join(namespace, node)),
            None => name.to_string(),
        },
        _ => join(namespace, name),
    }
}

/// Resolves a topic or service name of the node `node` in `namespace`: a relative name
/// goes under `namespace`, a private one (`~`, `~/x`) under `namespace/node`, then the
/// first rule of `remap` whose `from` (resolved the same way) equals it is replaced by its
/// `to` (resolved the same way). Names are not checked here: the endpoints check the
/// result, so an invalid relative name is reported as the full name it resolved to.
pub fn resolve_in_node(
    name: &str,
    namespace: &str,
    node: &str,
    remap: &[(String, String)],
) -> String {
    resolve_with(name, namespace, Some(node), remap)
}

/// Resolves a name as [`resolve_in_node`] does, for a caller that is not a node (a launch
/// file's readiness topic): private names stay unresolved.
pub fn resolve(name: &str, namespace: &str, remap: &[(String, String)]) -> String {
    resolve_with(name, namespace, None, remap)
}

fn resolve_with(
    name: &str,
    namespace: &str,
    node: Option<&str>,
    remap: &[(String, String)],
) -> String {
    let full = expand(namespace, node, name);
    for (from, to) in remap {
        if expand(namespace, node, from) == full {
            return expand(namespace, node, to);
        }
    }
    full
}

/// Parses remap rules `from:=to` separated by `;` (empty rules are skipped; at most 256).
/// Both sides may be relative or absolute names.
pub fn parse_remap(text: &str) -> Result<Vec<(String, String)>, NameError> {
    let mut out = Vec::new();
    for rule in text.split(';').map(str::trim).filter(|r| !r.is_empty()) {
        let Some((from, to)) = rule.split_once(":=") else {
            return Err(NameError {
                name: rule.to_string(),
                reason: "a remap rule is from:=to".into(),
            });
        };
        let (from, to) = (from.trim(), to.trim());
        validate_relative(from)?;
        validate_relative(to)?;
        if out.len() == MAX_REMAP_RULES {
            return Err(NameError {
                name: rule.to_string(),
                reason: format!("more than {MAX_REMAP_RULES} remap rules"),
            });
        }
        out.push((from.to_string(), to.to_string()));
    }
    Ok(out)
}

/// Most remap rules a configuration holds.
pub const MAX_REMAP_RULES: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_and_remap() {
        assert_eq!(resolve("chatter", "/", &[]), "/chatter");
        assert_eq!(resolve("chatter", "/robot1", &[]), "/robot1/chatter");
        assert_eq!(resolve("lidar/points", "/r1", &[]), "/r1/lidar/points");
        assert_eq!(resolve("/imu", "/robot1", &[]), "/imu");
        let rules = parse_remap("chatter:=/talk; /imu:=imu_raw ;;").unwrap();
        assert_eq!(
            rules,
            vec![
                ("chatter".to_string(), "/talk".to_string()),
                ("/imu".to_string(), "imu_raw".to_string())
            ]
        );
        assert_eq!(resolve("chatter", "/r1", &rules), "/talk");
        assert_eq!(resolve("/r1/chatter", "/r1", &rules), "/talk");
        assert_eq!(resolve("/chatter", "/r1", &rules), "/chatter");
        assert_eq!(resolve("/imu", "/r1", &rules), "/r1/imu_raw");
        assert_eq!(resolve("/imu", "/", &rules), "/imu_raw");
        // first matching rule wins, no chaining
        let chain = parse_remap("a:=b;b:=c").unwrap();
        assert_eq!(resolve("a", "/", &chain), "/b");
        for bad in ["a", "a:=", ":=b", "a:=1b", "a-b:=c", "a:=b:=c"] {
            assert!(parse_remap(bad).is_err(), "{bad} accepted");
        }
        validate_namespace("/").unwrap();
        validate_namespace("/robot1/arm").unwrap();
        // private names go under the node's full name, in remap rules too
        assert_eq!(resolve_in_node("~", "/r1", "talker", &[]), "/r1/talker");
        assert_eq!(
            resolve_in_node("~/state", "/r1", "talker", &[]),
            "/r1/talker/state"
        );
        assert_eq!(resolve_in_node("~/a/b", "/", "talker", &[]), "/talker/a/b");
        assert_eq!(
            resolve_in_node("chatter", "/r1", "talker", &[]),
            "/r1/chatter"
        );
        let private = parse_remap("~/state:=/status;odom:=~/odom").unwrap();
        assert_eq!(resolve_in_node("~/state", "/r1", "n", &private), "/status");
        assert_eq!(
            resolve_in_node("/r1/n/state", "/r1", "n", &private),
            "/status"
        );
        assert_eq!(resolve_in_node("odom", "/r1", "n", &private), "/r1/n/odom");
        // without a node a private name is left as it is, and is no topic name
        assert_eq!(resolve("~/state", "/r1", &[]), "~/state");
        assert!(validate_topic(&resolve("~/state", "/r1", &[])).is_err());
        for bad in ["~x:=a", "~/:=a", "a:=~/1b", "a:=~~"] {
            assert!(parse_remap(bad).is_err(), "{bad} accepted");
        }
        for bad in ["", "robot1", "/robot1/", "//"] {
            assert!(validate_namespace(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn grammar() {
        for ok in ["/a", "/a/b_c", "/_x/y2", "/robot1/lidar/points"] {
            validate_topic(ok).unwrap();
        }
        for bad in ["", "/", "a/b", "/a/", "//a", "/1a", "/a-b", "/a b", "/ä"] {
            assert!(validate_topic(bad).is_err(), "{bad} accepted");
        }
        assert!(validate_topic(&format!("/{}", "a".repeat(250))).is_err());
        validate_node("talker").unwrap();
        assert!(validate_node("bad/name").is_err());
    }
}
