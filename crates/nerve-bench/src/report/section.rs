//! One suite's part of the report, written once for Markdown and HTML: the section
//! builder and the table and figure helpers every suite uses.

use super::output::{Skipped, SuiteOutput, Verdict};
use super::plot::escape;
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;

/// One suite's part of the report, written once for Markdown and HTML: every suite
/// builds its section with this, so headings, paragraphs, tables and figures look the same
/// in both and in every suite.
#[derive(Default)]
pub struct Section {
    pub(super) markdown: String,
    pub(super) html: String,
}

impl Section {
    /// Starts a section: a `## title` heading (the HTML page adds the suite's own) and an
    /// introductory paragraph.
    pub fn new(title: &str, intro: &str) -> Section {
        Section {
            markdown: format!("## {title}\n\n{intro}\n\n"),
            html: format!("<p>{}</p>\n", escape(intro)),
        }
    }

    /// A paragraph.
    pub fn paragraph(&mut self, text: &str) {
        let _ = write!(self.markdown, "{text}\n\n");
        let _ = writeln!(self.html, "<p>{}</p>", escape(text));
    }

    /// A list of items.
    pub fn list(&mut self, items: &[String]) {
        self.html.push_str("<ul>");
        for i in items {
            let _ = writeln!(self.markdown, "- {i}");
            let _ = write!(self.html, "<li>{}</li>", escape(i));
        }
        self.markdown.push('\n');
        self.html.push_str("</ul>\n");
    }

    /// A sub-heading.
    pub fn heading(&mut self, title: &str) {
        let _ = write!(self.markdown, "### {title}\n\n");
        let _ = writeln!(self.html, "<h3>{}</h3>", escape(title));
    }

    /// A table under an optional sub-heading.
    pub fn table(&mut self, title: Option<&str>, head: &[&str], rows: &[Vec<String>]) {
        if let Some(t) = title {
            self.heading(t);
        }
        self.markdown.push_str(&md_table(head, rows));
        self.markdown.push('\n');
        self.html.push_str(&html_table(head, rows));
    }

    /// A plot with its caption (the page shows the plot; Markdown keeps the caption).
    pub fn figure(&mut self, svg: &str, caption: &str) {
        self.html.push_str(&figure(svg, caption));
    }

    /// The section's Markdown so far, e.g. to embed it in a suite's standalone report.
    pub fn markdown(&self) -> &str {
        &self.markdown
    }

    /// The suite's output with this section as its Markdown and HTML.
    pub fn finish(
        self,
        suite: &str,
        rows: Vec<Value>,
        skipped: Vec<Skipped>,
        checks: Vec<Verdict>,
        summary: String,
    ) -> SuiteOutput {
        SuiteOutput {
            suite: suite.into(),
            rows,
            skipped,
            checks,
            markdown: self.markdown,
            html: self.html,
            summary,
        }
    }
}

/// Rows as JSON values for [`SuiteOutput::rows`].
pub fn json_rows<T: Serialize>(rows: &[T]) -> Vec<Value> {
    rows.iter()
        .filter_map(|r| serde_json::to_value(r).ok())
        .collect()
}

/// An HTML table from a header row and rows of cells (escaped here).
pub fn html_table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = String::from("<table>\n<tr>");
    for h in head {
        let _ = write!(s, "<th>{}</th>", escape(h));
    }
    s.push_str("</tr>\n");
    for r in rows {
        s.push_str("<tr>");
        for c in r {
            let _ = write!(s, "<td>{}</td>", escape(c));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</table>\n");
    s
}

/// A Markdown table from a header row and rows of cells.
pub fn md_table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = format!("| {} |\n|{}\n", head.join(" | "), "---|".repeat(head.len()));
    for r in rows {
        let _ = writeln!(s, "| {} |", r.join(" | "));
    }
    s
}

/// A figure: `svg` wrapped with a caption.
pub fn figure(svg: &str, caption: &str) -> String {
    format!(
        "<figure>{svg}<figcaption>{}</figcaption></figure>\n",
        escape(caption)
    )
}
