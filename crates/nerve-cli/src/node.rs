//! `nerve node …`

use crate::output::{self, Format, FormatArg};
use crate::CmdResult;
use clap::Subcommand;
use serde_json::json;

/// Node commands.
#[derive(Subcommand)]
pub enum NodeCommand {
    /// List the nodes of the domain.
    List(FormatArg),
}

/// Runs a node command.
pub fn run(ctx: &nerve::Context, cmd: NodeCommand) -> CmdResult {
    match cmd {
        NodeCommand::List(f) => {
            let nodes = nerve::introspect::list_nodes(ctx).map_err(anyhow::Error::msg)?;
            match f.format {
                Format::Json => output::json(&json!(nodes
                    .iter()
                    .map(|n| json!({"name": n.name, "pid": n.pid, "state": n.state, "executable": n.executable}))
                    .collect::<Vec<_>>()))?,
                Format::Human => output::table(
                    &["NAME", "PID", "STATE", "EXECUTABLE"],
                    &nodes
                        .iter()
                        .map(|n| vec![n.name.clone(), n.pid.to_string(), n.state.to_string(), n.executable.clone()])
                        .collect::<Vec<_>>(),
                )?,
            }
            Ok(())
        }
    }
}
