//! Output formats: human tables by default, JSON for scripts.

use clap::{Args, ValueEnum};
use std::io::Write;

/// How a command prints data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum Format {
    /// Aligned text for people.
    #[default]
    Human,
    /// JSON for scripts.
    Json,
}

/// `--format` flag.
#[derive(Args, Clone, Copy)]
pub struct FormatArg {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Prints rows as an aligned table with a header.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> std::io::Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.len());
        }
    }
    let mut out = std::io::stdout().lock();
    let line = |cells: Vec<&str>| -> String {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{:<w$}", c, w = widths[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    writeln!(out, "{}", line(header.to_vec()))?;
    for r in rows {
        writeln!(out, "{}", line(r.iter().map(|s| s.as_str()).collect()))?;
    }
    Ok(())
}

/// Prints one JSON value on its own line.
pub fn json(v: &serde_json::Value) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{v}")
}
