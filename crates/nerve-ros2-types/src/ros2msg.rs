//! The `ros2msg` concatenated schema format used by rosbag2 in MCAP files.

use std::collections::{BTreeSet, HashSet};

use crate::definition::{DefinitionRole, MessageDefinition};
use crate::name::{InterfaceKind, SubType, TypeName};
use crate::parse::{parse_action, parse_msg, parse_srv, ParseError};
use crate::registry::{Registry, RegistryError, MAX_NESTING_DEPTH};

/// The separator line between definitions in a `ros2msg` schema.
pub const SEPARATOR: &str =
    "================================================================================";

fn is_separator(line: &str) -> bool {
    let t = line.trim_end();
    t.len() >= 3 && t.bytes().all(|b| b == b'=')
}

fn count_dashes(text: &str) -> usize {
    text.lines().filter(|l| l.trim_end() == "---").count()
}

/// Parses one section, choosing .msg/.srv/.action syntax from the name and the `---` lines.
fn parse_section(
    name: &TypeName,
    text: &str,
    line_offset: usize,
    origin: &str,
) -> Result<Vec<MessageDefinition>, ParseError> {
    let dashes = count_dashes(text);
    let res = match (name.kind(), dashes) {
        (InterfaceKind::Srv, 1) => parse_srv(name, text),
        (InterfaceKind::Action, 2) => parse_action(name, text),
        _ => parse_msg(name, text).map(|d| vec![d]),
    };
    res.map_err(|mut e| {
        e.line += line_offset;
        e.origin = origin.to_string();
        e
    })
}

pub(crate) fn parse_schema(
    main: &TypeName,
    schema: &str,
) -> Result<Vec<MessageDefinition>, RegistryError> {
    let origin = format!("ros2msg schema of {main}");
    // (name, text, line offset)
    let mut sections: Vec<(TypeName, String, usize)> = vec![(main.clone(), String::new(), 0)];
    let mut expect_header = false;
    for (i, line) in schema.lines().enumerate() {
        if is_separator(line) {
            // rosbag2 writes "\n" before each separator; drop it so section texts round-trip.
            if let Some((_, cur, _)) = sections.last_mut() {
                if cur.ends_with("\n\n") {
                    cur.pop();
                }
            }
            expect_header = true;
            continue;
        }
        if expect_header {
            if line.trim().is_empty() {
                continue;
            }
            let header = line.trim();
            let Some(dep) = header.strip_prefix("MSG:") else {
                let reason = if header.starts_with("IDL:") {
                    format!(
                        "line {}: IDL sections are not supported (ros2idl encoding)",
                        i + 1
                    )
                } else {
                    format!(
                        "line {}: expected `MSG: pkg/Name` after the separator, found `{header}`",
                        i + 1
                    )
                };
                return Err(RegistryError::Schema {
                    name: main.to_string(),
                    reason,
                });
            };
            let dep_name = TypeName::parse(dep.trim())?;
            sections.push((dep_name, String::new(), i + 1));
            expect_header = false;
            continue;
        }
        if let Some((_, cur, _)) = sections.last_mut() {
            cur.push_str(line);
            cur.push('\n');
        }
    }
    if expect_header {
        return Err(RegistryError::Schema {
            name: main.to_string(),
            reason: "separator at the end without a `MSG:` line".into(),
        });
    }
    let mut out = Vec::new();
    for (name, text, offset) in &sections {
        out.extend(parse_section(name, text, *offset, &origin)?);
    }
    Ok(out)
}

impl Registry {
    /// The `ros2msg` schema text for `name` (as rosbag2 writes into MCAP schema records): the
    /// type's definition text followed, depth first and in sorted order, by every dependency
    /// as `\n` + 80 `=` + `\nMSG: pkg/Name\n` + its text.
    ///
    /// Original source text is used where known (so comments survive); generated types are
    /// rendered from their fields. A service `_Event` is written as the `.srv` text, like
    /// rosbag2 does.
    pub fn ros2msg_text(&self, name: &str) -> Result<String, RegistryError> {
        let tn = TypeName::parse(name)?;
        self.check(name)?;
        let mut seen = HashSet::new();
        self.ros2msg_rec(&tn, &mut seen, 0)
    }

    fn text_and_deps(
        &self,
        def: &MessageDefinition,
    ) -> Result<(String, BTreeSet<String>), RegistryError> {
        let sub = def.name.split_subtype().1;
        let srv_text = (matches!(sub, SubType::Event) && def.name.kind() == InterfaceKind::Srv)
            || def.role == DefinitionRole::Service;
        let mut deps = BTreeSet::new();
        let mut add = |d: &MessageDefinition| {
            for n in d.dependencies() {
                deps.insert(n.to_short_string());
            }
        };
        let text = match (&def.source, srv_text, def.role) {
            (Some(src), true, _) => {
                let srv = def.name.interface();
                for sub in [SubType::Request, SubType::Response] {
                    add(self.resolve_name(&srv.with_subtype(sub), Some(&def.name))?);
                }
                src.to_string()
            }
            (Some(src), _, DefinitionRole::Action) => {
                let act = def.name.interface();
                for sub in [SubType::Goal, SubType::Result, SubType::Feedback] {
                    add(self.resolve_name(&act.with_subtype(sub), Some(&def.name))?);
                }
                src.to_string()
            }
            (Some(src), _, _) => {
                add(def);
                src.to_string()
            }
            (None, _, _) => {
                add(def);
                def.to_msg_text()
            }
        };
        Ok((text, deps))
    }

    fn ros2msg_rec(
        &self,
        tn: &TypeName,
        seen: &mut HashSet<String>,
        depth: usize,
    ) -> Result<String, RegistryError> {
        if depth > MAX_NESTING_DEPTH {
            return Err(RegistryError::TooDeep {
                name: tn.to_string(),
                limit: MAX_NESTING_DEPTH,
            });
        }
        let def = self.resolve_name(tn, None)?;
        let (mut out, deps) = self.text_and_deps(def)?;
        for dep in deps {
            if seen.insert(dep.clone()) {
                let dep_name = TypeName::parse(&dep)?;
                out.push('\n');
                out.push_str(SEPARATOR);
                out.push_str("\nMSG: ");
                out.push_str(&dep);
                out.push('\n');
                out.push_str(&self.ros2msg_rec(&dep_name, seen, depth + 1)?);
            }
        }
        Ok(out)
    }
}
