//! `nerve clean`: reclaim what dead processes left behind.

use crate::failure::CmdResult;
use crate::output::{self, Format};
use clap::Args;
use serde_json::json;

/// Arguments of `nerve clean`.
#[derive(Args)]
pub struct CleanArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// Runs `nerve clean`.
pub fn run(cfg: &nerve::Config, args: CleanArgs) -> CmdResult {
    let report = nerve::introspect::clean(cfg).map_err(anyhow::Error::msg)?;
    match args.format {
        Format::Json => output::json(&json!({
            "dead_nodes": report.dead_nodes.iter().map(|(n, p)| json!({"name": n, "pid": p})).collect::<Vec<_>>(),
            "removed_files": report.removed_files,
            "domain_in_use": report.domain_in_use,
        }))?,
        Format::Human => {
            if report.dead_nodes.is_empty() && report.removed_files.is_empty() {
                println!("nothing to clean in domain {}", cfg.domain);
            }
            for (name, pid) in &report.dead_nodes {
                println!("reclaimed dead node {name} (pid {pid})");
            }
            for f in &report.removed_files {
                println!("removed {f}");
            }
        }
    }
    Ok(())
}
