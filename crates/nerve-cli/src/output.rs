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
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", render(header, rows))
}

/// The table as text: columns two spaces apart, aligned by display width (comfy-table),
/// so `µs`, names in other scripts and wide characters line up; no trailing spaces.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::NOTHING)
        .set_content_arrangement(comfy_table::ContentArrangement::Disabled)
        .set_header(header.to_vec())
        .add_rows(rows.iter().cloned());
    let last = header.len().saturating_sub(1);
    for (i, c) in t.column_iter_mut().enumerate() {
        c.set_padding((0, if i == last { 0 } else { 2 }));
    }
    t.lines()
        .map(|l| l.trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Prints one JSON value on its own line.
pub fn json(v: &serde_json::Value) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{v}")
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn columns_align_by_display_width_not_bytes() {
        let rows = vec![
            vec!["/imu".to_string(), "12.5 µs".to_string(), "x".to_string()],
            vec!["/カメラ".to_string(), "3 ms".to_string(), "y".to_string()],
        ];
        let text = render(&["TOPIC", "LATENCY", "NOTE"], &rows);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        // the last column starts at the same display column on every line
        let col = |l: &str, needle: &str| {
            let at = l.find(needle).expect(needle);
            unicode_width::UnicodeWidthStr::width(&l[..at])
        };
        assert_eq!(col(lines[0], "NOTE"), col(lines[1], "x"), "{text}");
        assert_eq!(col(lines[0], "NOTE"), col(lines[2], "y"), "{text}");
        assert_eq!(lines[1], "/imu     12.5 µs  x", "{text}");
        assert!(lines.iter().all(|l| !l.ends_with(' ')), "{text}");
    }
}
