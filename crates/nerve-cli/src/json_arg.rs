//! A message given as JSON on the command line: inline, from a file (`@PATH`) or from
//! standard input (`-`). Linux refuses one argument over 128 KiB, so a large message
//! (ROS 2's `test_msgs` UnboundedSequences fixture is 354 KB of JSON) comes from a file
//! or a pipe. One way for `topic pub`, `service call` and `action send_goal`.

use crate::failure::{usage, Failure};
use serde_json::Value;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;

/// Most bytes of JSON read from a file or standard input (far above any message a
/// topic, service or action carries, which Nerve bounds well below it).
const MAX_BYTES: u64 = 1 << 30;

/// Where a message's JSON comes from, as its argument says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JsonArg {
    /// The JSON itself.
    Inline(String),
    /// `-`: standard input, read to its end.
    Stdin,
    /// `@PATH`: a file.
    File(PathBuf),
}

impl JsonArg {
    /// Reads an argument (clap's value parser): `-` is standard input, `@PATH` a file,
    /// anything else the JSON itself (which never starts with `@`, nor is `-` alone).
    pub fn parse(arg: &str) -> Result<JsonArg, String> {
        match arg {
            "-" => Ok(JsonArg::Stdin),
            "@" => Err("`@` needs a file name: @PATH reads the JSON from PATH".into()),
            _ => Ok(match arg.strip_prefix('@') {
                Some(path) => JsonArg::File(PathBuf::from(path)),
                None => JsonArg::Inline(arg.to_string()),
            }),
        }
    }

    /// Where the JSON came from, as errors name it.
    fn source(&self) -> String {
        match self {
            JsonArg::Inline(_) => "the argument".into(),
            JsonArg::Stdin => "stdin".into(),
            JsonArg::File(p) => p.display().to_string(),
        }
    }

    /// The JSON value; `what` names it in errors (a type name, "the request"). A file or
    /// standard input is read once, whatever is done with the value then. Errors name the
    /// source: a file that cannot be read (exit 1), text that is not UTF-8 or not JSON,
    /// with its line and column (usage errors, exit 2).
    pub fn value(&self, what: &str) -> Result<Value, Failure> {
        let bytes = match self {
            JsonArg::Inline(text) => {
                return serde_json::from_str(text)
                    .map_err(|e| usage(format!("invalid JSON for {what}: {e}")));
            }
            JsonArg::Stdin => {
                let stdin = std::io::stdin();
                if stdin.is_terminal() {
                    return Err(usage(format!(
                        "`-` reads the JSON for {what} from standard input, which is a \
                         terminal: pipe it in, or give @FILE"
                    )));
                }
                read_bounded(stdin.lock(), &self.source())?
            }
            JsonArg::File(path) => {
                let file = std::fs::File::open(path).map_err(|e| {
                    Failure::Runtime(anyhow::anyhow!("cannot read {}: {e}", path.display()))
                })?;
                read_bounded(file, &self.source())?
            }
        };
        parse(&bytes, &self.source(), what)
    }
}

/// Everything `r` holds, at most [`MAX_BYTES`]; `source` names it in errors.
fn read_bounded(r: impl Read, source: &str) -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    r.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::Runtime(anyhow::anyhow!("cannot read {source}: {e}")))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(usage(format!(
            "{source}: more than {} MiB of JSON",
            MAX_BYTES >> 20
        )));
    }
    Ok(bytes)
}

/// The JSON value of `bytes` read from `source`.
fn parse(bytes: &[u8], source: &str, what: &str) -> Result<Value, Failure> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let (line, column) = position(&bytes[..e.valid_up_to()]);
        usage(format!(
            "the JSON for {what} in {source}:{line}:{column} is not UTF-8"
        ))
    })?;
    if text.trim().is_empty() {
        return Err(usage(format!("{source} is empty: no JSON for {what}")));
    }
    serde_json::from_str(text).map_err(|e| {
        // serde_json's text ends with " at line L column C": said here as source:L:C
        let full = e.to_string();
        let reason = full
            .rsplit_once(" at line ")
            .map_or(full.as_str(), |(r, _)| r);
        usage(format!(
            "invalid JSON for {what} in {source}:{}:{}: {reason}",
            e.line(),
            e.column()
        ))
    })
}

/// The 1-based line and column (in bytes, as serde_json counts them) just after `before`.
fn position(before: &[u8]) -> (usize, usize) {
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.len()
        - before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1)
        + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(f: Failure) -> String {
        match f {
            Failure::Usage(m) => m,
            Failure::Runtime(e) => e.to_string(),
            Failure::Interrupted => "interrupted".into(),
        }
    }

    #[test]
    fn arguments_name_their_source() {
        assert_eq!(JsonArg::parse("-"), Ok(JsonArg::Stdin));
        assert_eq!(
            JsonArg::parse("@big.json"),
            Ok(JsonArg::File("big.json".into()))
        );
        assert_eq!(
            JsonArg::parse("{\"a\": 1}"),
            Ok(JsonArg::Inline("{\"a\": 1}".into()))
        );
        assert!(JsonArg::parse("@").is_err());
    }

    #[test]
    fn errors_give_source_line_and_column() {
        let e = message(parse(b"{\n  \"a\": 1,\n  oops\n}", "m.json", "CmdVel").unwrap_err());
        assert_eq!(
            e,
            "invalid JSON for CmdVel in m.json:3:3: key must be a string"
        );
        let e = message(parse(b"{\"a\":\n \"\xff\"}", "stdin", "the goal").unwrap_err());
        assert_eq!(e, "the JSON for the goal in stdin:2:3 is not UTF-8");
        let e = message(parse(b" \n", "stdin", "the goal").unwrap_err());
        assert_eq!(e, "stdin is empty: no JSON for the goal");
        assert_eq!(
            parse(b" {\"a\": [1, 2]}\n", "f", "x").ok(),
            Some(serde_json::json!({"a": [1, 2]}))
        );
    }
}
