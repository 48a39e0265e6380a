//! The report: one directory for one or several suites (`report.json`, `report.md`, a
//! self-contained `index.html` with inline SVG plots), the summary that opens it, the
//! figures published elsewhere that it quotes, and the helpers every suite's section uses.
//!
//! A suite returns its part as a [`SuiteOutput`] (rows, skipped, checks, and a
//! [`Section`] rendered to Markdown and HTML); [`Bundle`] puts the parts together.

pub mod bundle;
mod format;
mod output;
pub mod plot;
pub mod published;
mod section;
pub mod summary;

pub use bundle::{versions, Bundle, Interruption};
pub use format::{human_bytes, num};
pub use output::{why_missing, Measured, Skipped, SuiteOutput, Verdict};
pub use section::{figure, html_table, json_rows, md_table, Section};
