//! Parameter files: YAML or TOML, keyed by node name with wildcards.
//!
//! ```yaml
//! /robot1/driver:          # a node's full name
//!   max_speed: 1           # an integer widens to a float parameter
//!   pid: {kp: 0.5, ki: 0}  # nested maps flatten to `pid.kp`, `pid.ki`
//! "/**":                   # every node; `*` matches one name segment, `**` any number
//!   use_sim_time: false
//! ```
//! ROS 2 files (with `ros__parameters` under each node) read as they are. Where several
//! entries match a node, an exact name beats a wildcard and a later entry beats an
//! earlier one; a later file beats an earlier one.

use super::error::ParamError;
use super::value::ParamValue;
use crate::config::line_of;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::path::Path;

/// Largest parameter file read.
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// Deepest nesting of maps in a parameter file.
const MAX_DEPTH: usize = 32;

/// A parsed value: a leaf or a map of named subtrees (flattened with `.`).
#[derive(Debug)]
pub(crate) enum ParamTree {
    Leaf(ParamValue),
    Map(Vec<(String, ParamTree)>),
}

impl<'de> Deserialize<'de> for ParamTree {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TreeVisitor)
    }
}

struct TreeVisitor;

/// One array element while the array's type is being worked out.
enum Elem {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl<'de> Deserialize<'de> for Elem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match ParamTree::deserialize(d)? {
            ParamTree::Leaf(ParamValue::Bool(b)) => Ok(Elem::Bool(b)),
            ParamTree::Leaf(ParamValue::Int(i)) => Ok(Elem::Int(i)),
            ParamTree::Leaf(ParamValue::Float(f)) => Ok(Elem::Float(f)),
            ParamTree::Leaf(ParamValue::Str(s)) => Ok(Elem::Str(s)),
            _ => Err(de::Error::custom(
                "array elements must be booleans, numbers or strings (no nested arrays or maps)",
            )),
        }
    }
}

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = ParamTree;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a boolean, number, string, array of one of those, or a map")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<ParamTree, E> {
        Ok(ParamTree::Leaf(ParamValue::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<ParamTree, E> {
        Ok(ParamTree::Leaf(ParamValue::Int(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<ParamTree, E> {
        i64::try_from(v)
            .map(|i| ParamTree::Leaf(ParamValue::Int(i)))
            .map_err(|_| E::custom(format!("integer {v} does not fit in 64-bit signed")))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<ParamTree, E> {
        Ok(ParamTree::Leaf(ParamValue::Float(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<ParamTree, E> {
        Ok(ParamTree::Leaf(ParamValue::Str(v.to_string())))
    }
    fn visit_unit<E: de::Error>(self) -> Result<ParamTree, E> {
        Err(E::custom(
            "a parameter needs a value (null/empty is not one)",
        ))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ParamTree, A::Error> {
        let mut elems = Vec::new();
        while let Some(e) = seq.next_element::<Elem>()? {
            elems.push(e);
        }
        let all = |f: fn(&Elem) -> bool| elems.iter().all(f);
        let value = if all(|e| matches!(e, Elem::Bool(_))) && !elems.is_empty() {
            ParamValue::BoolArray(
                elems
                    .into_iter()
                    .map(|e| matches!(e, Elem::Bool(true)))
                    .collect(),
            )
        } else if all(|e| matches!(e, Elem::Int(_))) {
            ParamValue::IntArray(
                elems
                    .into_iter()
                    .map(|e| if let Elem::Int(i) = e { i } else { 0 })
                    .collect(),
            )
        } else if all(|e| matches!(e, Elem::Int(_) | Elem::Float(_))) {
            // integers among floats widen
            ParamValue::FloatArray(
                elems
                    .into_iter()
                    .map(|e| match e {
                        Elem::Int(i) => i as f64,
                        Elem::Float(f) => f,
                        _ => 0.0,
                    })
                    .collect(),
            )
        } else if all(|e| matches!(e, Elem::Str(_))) {
            ParamValue::StrArray(
                elems
                    .into_iter()
                    .map(|e| {
                        if let Elem::Str(s) = e {
                            s
                        } else {
                            String::new()
                        }
                    })
                    .collect(),
            )
        } else {
            return Err(de::Error::custom(
                "array mixes element types (all booleans, all numbers or all strings)",
            ));
        };
        Ok(ParamTree::Leaf(value))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ParamTree, A::Error> {
        let mut entries: Vec<(String, ParamTree)> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if entries.iter().any(|(k, _)| *k == key) {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            let value = map.next_value::<ParamTree>()?;
            entries.push((key, value));
        }
        Ok(ParamTree::Map(entries))
    }
}

/// The parameters a file gives one node pattern.
#[derive(Clone, Debug, PartialEq)]
pub struct FileEntry {
    /// The node pattern (`/robot1/driver`, `/**`, `/*/driver`).
    pub pattern: String,
    /// Parameter names (flattened with `.`) and values, in file order.
    pub values: Vec<(String, ParamValue)>,
}

/// A parsed parameter file.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamFile {
    /// Where it was read from.
    pub path: String,
    /// Its node entries, in file order.
    pub entries: Vec<FileEntry>,
}

impl ParamFile {
    /// Reads a file: TOML for `.toml`, YAML otherwise. Errors name the file and line.
    pub fn load(path: &Path) -> Result<ParamFile, ParamError> {
        let shown = path.display().to_string();
        let err = |line: Option<usize>, reason: String| ParamError::File {
            path: shown.clone(),
            line,
            reason,
        };
        let meta = std::fs::metadata(path).map_err(|e| err(None, e.to_string()))?;
        if meta.len() > MAX_FILE_BYTES {
            return Err(err(
                None,
                format!(
                    "{} bytes, more than the {MAX_FILE_BYTES} allowed",
                    meta.len()
                ),
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| err(None, e.to_string()))?;
        let toml = path.extension().is_some_and(|e| e == "toml");
        ParamFile::parse(&shown, &text, toml)
    }

    /// Parses `text` (TOML when `toml`, else YAML); `path` names it in errors.
    pub fn parse(path: &str, text: &str, toml: bool) -> Result<ParamFile, ParamError> {
        let err = |line: Option<usize>, reason: String| ParamError::File {
            path: path.to_string(),
            line,
            reason,
        };
        let tree: ParamTree = if toml {
            toml::from_str(text).map_err(|e| {
                let line = e.span().map(|s| line_of(text, s.start));
                err(line, e.message().to_string())
            })?
        } else {
            serde_yaml_ng::from_str(text).map_err(|e| {
                let line = e.location().map(|l| l.line());
                // the message repeats the location; keep the reason alone
                let msg = e.to_string();
                let reason = msg.split(" at line ").next().unwrap_or(&msg).to_string();
                err(line, reason)
            })?
        };
        let ParamTree::Map(nodes) = tree else {
            return Err(err(
                Some(1),
                "expected a map of node names to their parameters".into(),
            ));
        };
        let mut entries = Vec::new();
        for (pattern, tree) in nodes {
            let key_line = find_line(text, &pattern);
            let tree = match tree {
                // ROS 2 layout: node: {ros__parameters: {...}}
                ParamTree::Map(mut m) if m.len() == 1 && m[0].0 == "ros__parameters" => m
                    .pop()
                    .map(|(_, t)| t)
                    .unwrap_or(ParamTree::Map(Vec::new())),
                t => t,
            };
            let ParamTree::Map(params) = tree else {
                return Err(err(
                    key_line,
                    format!("node {pattern:?}: expected a map of parameter names to values"),
                ));
            };
            check_pattern(&pattern).map_err(|r| err(key_line, r))?;
            let mut values = Vec::new();
            flatten(String::new(), params, 0, &mut values)
                .map_err(|r| err(key_line, format!("node {pattern:?}: {r}")))?;
            for (name, _) in &values {
                super::store::check_name(name).map_err(|e| {
                    err(
                        find_line(text, name.rsplit('.').next().unwrap_or(name)),
                        e.to_string(),
                    )
                })?;
            }
            entries.push(FileEntry {
                pattern: normalize(&pattern),
                values,
            });
        }
        Ok(ParamFile {
            path: path.to_string(),
            entries,
        })
    }

    /// The values this file gives the node `full_name`, in precedence order (apply in
    /// order; later wins): wildcard entries first, then exact ones, each in file order.
    pub fn values_for(&self, full_name: &str) -> Vec<(String, ParamValue)> {
        let mut out = Vec::new();
        for exact in [false, true] {
            for e in &self.entries {
                let is_exact = !e.pattern.contains('*');
                if is_exact == exact && matches(&e.pattern, full_name) {
                    out.extend(e.values.iter().cloned());
                }
            }
        }
        out
    }
}

/// Renders `values` of node `full_name` as a YAML parameter file.
pub fn to_yaml(full_name: &str, values: &[(String, ParamValue)]) -> String {
    let mut map = serde_json::Map::new();
    for (k, v) in values {
        map.insert(k.clone(), v.to_json());
    }
    let mut root = serde_json::Map::new();
    root.insert(full_name.to_string(), serde_json::Value::Object(map));
    serde_yaml_ng::to_string(&root).unwrap_or_default()
}

fn flatten(
    prefix: String,
    map: Vec<(String, ParamTree)>,
    depth: usize,
    out: &mut Vec<(String, ParamValue)>,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} maps"));
    }
    for (k, t) in map {
        let name = if prefix.is_empty() {
            k
        } else {
            format!("{prefix}.{k}")
        };
        match t {
            ParamTree::Leaf(v) => out.push((name, v)),
            ParamTree::Map(m) => flatten(name, m, depth + 1, out)?,
        }
    }
    Ok(())
}

fn normalize(pattern: &str) -> String {
    if pattern.starts_with('/') {
        pattern.to_string()
    } else {
        format!("/{pattern}")
    }
}

fn check_pattern(pattern: &str) -> Result<(), String> {
    let p = normalize(pattern);
    for seg in p[1..].split('/') {
        let ok = seg == "*"
            || seg == "**"
            || (!seg.is_empty() && seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        if !ok {
            return Err(format!(
                "node pattern {pattern:?}: segments are names, `*` (one segment) or `**` (any)"
            ));
        }
    }
    Ok(())
}

/// Whether node pattern `pattern` (normalized) matches the node `full_name`.
pub fn matches(pattern: &str, full_name: &str) -> bool {
    let p: Vec<&str> = pattern.trim_start_matches('/').split('/').collect();
    let n: Vec<&str> = full_name.trim_start_matches('/').split('/').collect();
    fn go(p: &[&str], n: &[&str]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some(&"**"), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some(&"*"), Some(_)) => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    go(&p, &n)
}

/// The first line mentioning `key` as a key (best effort, for errors after parsing).
fn find_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let t = l.trim_start().trim_start_matches(['"', '\'', '[']);
            t.starts_with(key)
        })
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_and_toml_files_give_the_same_values() {
        let yaml = "/robot1/driver:\n  max_speed: 1\n  pid: {kp: 0.5, ki: 0}\n  names: [a, b]\n\"/**\":\n  use_sim_time: false\n";
        let toml = "[\"/robot1/driver\"]\nmax_speed = 1\nnames = [\"a\", \"b\"]\n[\"/robot1/driver\".pid]\nkp = 0.5\nki = 0\n[\"/**\"]\nuse_sim_time = false\n";
        let y = ParamFile::parse("p.yaml", yaml, false).unwrap();
        let t = ParamFile::parse("p.toml", toml, true).unwrap();
        let vy = y.values_for("/robot1/driver");
        let vt = t.values_for("/robot1/driver");
        assert_eq!(vy.len(), 5);
        for v in &vy {
            assert!(vt.contains(v), "{v:?} missing from the TOML reading");
        }
        assert!(vy.contains(&("pid.kp".into(), ParamValue::Float(0.5))));
        assert!(vy.contains(&("max_speed".into(), ParamValue::Int(1))));
        assert_eq!(
            y.values_for("/other"),
            vec![("use_sim_time".into(), ParamValue::Bool(false))]
        );
    }

    #[test]
    fn ros2_layout_reads_as_is() {
        let f = ParamFile::parse(
            "p.yaml",
            "driver:\n  ros__parameters:\n    rate: 10\n",
            false,
        )
        .unwrap();
        assert_eq!(
            f.values_for("/driver"),
            vec![("rate".into(), ParamValue::Int(10))]
        );
    }

    #[test]
    fn wildcards() {
        assert!(matches("/**", "/a"));
        assert!(matches("/**", "/a/b/c"));
        assert!(matches("/*/driver", "/r1/driver"));
        assert!(!matches("/*/driver", "/driver"));
        assert!(matches("/**/driver", "/driver"));
        assert!(matches("/**/driver", "/a/b/driver"));
        assert!(!matches("/a/*", "/a/b/c"));
    }

    #[test]
    fn exact_entries_beat_wildcards() {
        let f = ParamFile::parse(
            "p.yaml",
            "/driver:\n  rate: 1\n\"/**\":\n  rate: 2\n",
            false,
        )
        .unwrap();
        let v = f.values_for("/driver");
        assert_eq!(v.last().unwrap(), &("rate".into(), ParamValue::Int(1)));
    }

    #[test]
    fn bad_files_name_the_file_and_line() {
        let e = ParamFile::parse("bad.yaml", "/driver:\n  rate: 1\n  names: [a, 1]\n", false)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.yaml:3:"), "{e}");
        assert!(e.contains("mixes"), "{e}");
        let e = ParamFile::parse("bad.toml", "[driver]\nrate = 1\nrate = 2\n", true)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.toml:3:"), "{e}");
        let e = ParamFile::parse("bad.yaml", "/driver:\n  rate: 1\n  rate: 2\n", false)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.yaml:") && e.contains("duplicate"), "{e}");
        let e = ParamFile::parse("bad.yaml", "/dri ver:\n  rate: 1\n", false)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.yaml:1:"), "{e}");
        let e = ParamFile::parse("bad.yaml", "- 1\n- 2\n", false)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.yaml:"), "{e}");
        let e = ParamFile::parse("bad.yaml", "/driver:\n  9lives: 1\n", false)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.yaml:2:"), "{e}");
    }
}
