//! `nerve lifecycle …`: list managed nodes, read their state, trigger transitions.

use crate::failure::{usage, CmdResult, Failure};
use crate::output::{self, Format, FormatArg};
use clap::Subcommand;
use nerve_lifecycle::{check_label, list_managed, LifecycleClient};
use serde_json::json;
use std::time::Duration;

/// Lifecycle commands.
#[derive(Subcommand)]
pub enum LifecycleCommand {
    /// List the managed nodes of the domain and their states.
    List {
        #[command(flatten)]
        format: FormatArg,
        #[command(flatten)]
        wait: WaitArg,
    },
    /// Print a managed node's state and the transitions valid from it.
    Get {
        /// The node's full name, e.g. /robot1/camera.
        node: String,
        #[command(flatten)]
        format: FormatArg,
        #[command(flatten)]
        wait: WaitArg,
    },
    /// Trigger a transition: configure, activate, deactivate, cleanup or shutdown.
    Set {
        /// The node's full name.
        node: String,
        /// The transition's label.
        transition: String,
        #[command(flatten)]
        wait: WaitArg,
    },
}

/// How long to wait for a node and its answer.
#[derive(clap::Args, Clone, Copy)]
pub struct WaitArg {
    /// How long to wait for the node and its answer, in ms.
    #[arg(long, default_value_t = 5000)]
    timeout: u64,
}

fn full_name(target: &str) -> Result<String, Failure> {
    let name = if target.starts_with('/') {
        target.to_string()
    } else {
        format!("/{target}")
    };
    nerve::name::validate_topic(&name).map_err(|e| {
        usage(format!(
            "{target:?} is not a node name (/name or /namespace/name): {e}"
        ))
    })?;
    Ok(name)
}

fn client(node: &nerve::Node, target: &str, wait: WaitArg) -> Result<LifecycleClient, Failure> {
    let timeout = Duration::from_millis(wait.timeout);
    let target = full_name(target)?;
    let c = LifecycleClient::create(node, &target)?.timeout(timeout);
    if !c.wait_for_node(timeout) {
        return Err(Failure::Runtime(anyhow::anyhow!(
            "no managed node {target} within {timeout:?} (nothing serves {target}/change_state; \
             see nerve lifecycle list)"
        )));
    }
    Ok(c)
}

/// Runs a lifecycle command.
pub fn run(ctx: &nerve::Context, cmd: LifecycleCommand) -> CmdResult {
    let node = ctx
        .node(&format!("nerve_lifecycle_{}", std::process::id()))
        .create()?;
    match cmd {
        LifecycleCommand::List { format, wait } => {
            let timeout = Duration::from_millis(wait.timeout);
            let mut rows = Vec::new();
            for name in list_managed(&node).map_err(anyhow::Error::msg)? {
                let state = LifecycleClient::create(&node, &name)
                    .and_then(|c| c.timeout(timeout).get_state())
                    .map(|s| s.to_string())
                    .unwrap_or_else(|e| format!("? ({e})"));
                rows.push((name, state));
            }
            match format.format {
                Format::Json => output::json(&json!(rows
                    .iter()
                    .map(|(n, s)| json!({"node": n, "state": s}))
                    .collect::<Vec<_>>()))?,
                Format::Human if rows.is_empty() => println!("no managed nodes"),
                Format::Human => output::table(
                    &["NODE", "STATE"],
                    &rows
                        .into_iter()
                        .map(|(n, s)| vec![n, s])
                        .collect::<Vec<_>>(),
                )?,
            }
        }
        LifecycleCommand::Get {
            node: t,
            format,
            wait,
        } => {
            let c = client(&node, &t, wait)?;
            let state = c.get_state()?;
            let transitions = c.available_transitions()?;
            match format.format {
                Format::Json => output::json(&json!({
                    "node": c.target(),
                    "state": state.label(),
                    "id": state.id(),
                    "transitions": transitions
                        .iter()
                        .map(|(l, id, goal)| json!({"label": l, "id": id, "goal": goal.label()}))
                        .collect::<Vec<_>>(),
                }))?,
                Format::Human => {
                    println!("{}: {state} [{}]", c.target(), state.id());
                    let list: Vec<String> = transitions
                        .iter()
                        .map(|(l, id, goal)| format!("{l} [{id}] -> {goal}"))
                        .collect();
                    println!(
                        "transitions: {}",
                        if list.is_empty() {
                            "none".into()
                        } else {
                            list.join(", ")
                        }
                    );
                }
            }
        }
        LifecycleCommand::Set {
            node: t,
            transition,
            wait,
        } => {
            check_label(&transition).map_err(|e| usage(e.to_string()))?;
            let c = client(&node, &t, wait)?;
            let before = c.get_state()?;
            let after = c.change_state(&transition)?;
            println!("{}: {transition}: {before} -> {after}", c.target());
        }
    }
    Ok(())
}
