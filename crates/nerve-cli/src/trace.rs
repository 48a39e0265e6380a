//! `nerve trace …`: per-hop latency from the events traced processes wrote
//! (`NERVE_TRACE=<dir>`; see nerve::trace).

use crate::failure::{usage, CmdResult, Failure};
use crate::output::{self, Format};
use clap::Subcommand;
use nerve::trace::{self, Report, SegmentKind, Stats};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Trace commands.
#[derive(Subcommand)]
pub enum TraceCommand {
    /// Run a command with tracing on (NERVE_TRACE set for it and its children), then
    /// report.
    Run {
        /// Where the trace files go.
        #[arg(long, default_value = "nerve-trace")]
        dir: PathBuf,
        /// HTML timeline to write after the run.
        #[arg(long)]
        html: Option<PathBuf>,
        /// The command and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Per-hop and end-to-end latency of a trace directory.
    Report {
        /// The trace directory (default: $NERVE_TRACE, else nerve-trace).
        dir: Option<PathBuf>,
        /// Write an HTML timeline of the last chains here.
        #[arg(long)]
        html: Option<PathBuf>,
        /// Chains of each path kept for the timeline.
        #[arg(long, default_value_t = 20)]
        keep: usize,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

fn row(name: &str, what: &str, s: &Stats) -> Vec<String> {
    vec![
        name.to_string(),
        what.to_string(),
        s.count.to_string(),
        us(s.p50),
        us(s.p99),
        us(s.max),
    ]
}

/// Runs a trace command.
pub fn run(cmd: TraceCommand) -> CmdResult {
    match cmd {
        TraceCommand::Run { dir, html, command } => {
            std::fs::create_dir_all(&dir)
                .map_err(|e| Failure::Runtime(anyhow::anyhow!("{}: {e}", dir.display())))?;
            let dir = dir.canonicalize()?;
            let status = std::process::Command::new(&command[0])
                .args(&command[1..])
                .env(trace::ENV, &dir)
                .status()
                .map_err(|e| usage(format!("cannot run {:?}: {e}", command[0])))?;
            if !status.success() {
                eprintln!("note: {} exited with {status}", command[0]);
            }
            report(&dir, html.as_deref(), 20, Format::Human)
        }
        TraceCommand::Report {
            dir,
            html,
            keep,
            format,
        } => {
            let dir = dir
                .or_else(|| std::env::var_os(trace::ENV).map(PathBuf::from))
                .unwrap_or_else(|| PathBuf::from("nerve-trace"));
            report(&dir, html.as_deref(), keep, format)
        }
    }
}

fn report(dir: &Path, html: Option<&Path>, keep: usize, format: Format) -> CmdResult {
    let events = trace::read_dir(dir)?;
    if events.is_empty() {
        return Err(Failure::Runtime(anyhow::anyhow!(
            "{}: no trace events (run the processes with NERVE_TRACE={} or `nerve trace run`)",
            dir.display(),
            dir.display()
        )));
    }
    let r = trace::analyze(&events, keep);
    if let Some(path) = html {
        std::fs::write(path, timeline(&r))
            .map_err(|e| Failure::Runtime(anyhow::anyhow!("{}: {e}", path.display())))?;
    }
    match format {
        Format::Json => output::json(&serde_json::to_value(&r)?)?,
        Format::Human => {
            let mut rows = Vec::new();
            for (topic, wait, transport) in &r.hops {
                rows.push(row(topic, "wait", wait));
                rows.push(row(topic, "transport", transport));
            }
            for (stage, cb) in &r.stages {
                rows.push(row(stage, "callback", cb));
            }
            for (path, total) in &r.paths {
                rows.push(row(path, "end to end", total));
            }
            output::table(
                &["HOP", "PART", "COUNT", "P50 US", "P99 US", "MAX US"],
                &rows,
            )?;
            if r.unmatched_takes > 0 {
                println!(
                    "{} samples were taken whose publisher did not trace (their wait and \
                     transport use the publish time they carry)",
                    r.unmatched_takes
                );
            }
            if let Some(p) = html {
                println!("timeline: {}", p.display());
            }
        }
    }
    Ok(())
}

/// A self-contained HTML page: one row per chain, its parts as coloured bars.
fn timeline(r: &Report) -> String {
    let width = 900.0;
    let row_h = 18.0;
    let left = 220.0;
    let max = r
        .chains
        .iter()
        .map(|c| c.total_ns)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let scale = (width - left - 20.0) / max;
    let height = 40.0 + row_h * r.chains.len() as f64;
    let mut svg = format!(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' \
         font-family='sans-serif' font-size='11'>"
    );
    for (i, c) in r.chains.iter().enumerate() {
        let y = 20.0 + row_h * i as f64;
        let _ = write!(
            svg,
            "<text x='4' y='{}'>{}</text>",
            y + 12.0,
            escape(&format!("{} ({} us)", c.path, us(c.total_ns)))
        );
        for s in &c.segments {
            let color = match s.kind {
                SegmentKind::Wait => "#f2b134",
                SegmentKind::Transport => "#4c8bf5",
                SegmentKind::Callback => "#3aa76d",
            };
            let x = left + s.start_ns as f64 * scale;
            let w = (s.end_ns.saturating_sub(s.start_ns) as f64 * scale).max(1.0);
            let _ = write!(
                svg,
                "<rect x='{x:.1}' y='{y:.1}' width='{w:.1}' height='{:.1}' fill='{color}'>\
                 <title>{} {:?}: {} us</title></rect>",
                row_h - 4.0,
                escape(&s.label),
                s.kind,
                us(s.end_ns.saturating_sub(s.start_ns))
            );
        }
    }
    let _ = write!(
        svg,
        "<text x='{left}' y='{}'>0 .. {} us</text></svg>",
        height - 4.0,
        us(max as u64)
    );
    format!(
        "<!doctype html><html><head><meta charset='utf-8'><title>Nerve trace</title></head>\
         <body><h1>Nerve trace: the last chains</h1><p>Wait (yellow), transport (blue), \
         callback (green); hover a bar for its time.</p>{svg}</body></html>\n"
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&#39;")
}
