//! `nerve node …`

use crate::failure::CmdResult;
use crate::output::{self, Format, FormatArg};
use clap::Subcommand;
use nerve::scheduler::{stats_qos, STATS_PERIOD, STATS_TOPIC};
use nerve::{SchedulerReport, Serde};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Node commands.
#[derive(Subcommand)]
pub enum NodeCommand {
    /// List the nodes of the domain, and the scheduled nodes with their rate, jitter
    /// and misses.
    List(FormatArg),
}

/// The latest report of every live scheduler of the domain (none if no scheduler
/// publishes).
fn scheduler_reports(ctx: &nerve::Context) -> anyhow::Result<Vec<SchedulerReport>> {
    let node = ctx.node("nerve_node_list").create()?;
    let publishers = nerve::introspect::topic_info(&node, STATS_TOPIC).map_or(0, |t| t.publishers);
    if publishers == 0 {
        return Ok(Vec::new());
    }
    let sub = node
        .subscriber::<Serde<SchedulerReport>>(STATS_TOPIC)
        .qos(stats_qos())
        .create()?;
    let mut latest: BTreeMap<(u32, String), SchedulerReport> = BTreeMap::new();
    let deadline = Instant::now() + STATS_PERIOD + Duration::from_millis(200);
    while latest.len() < publishers {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        if let Some(s) = sub.recv_timeout(left)? {
            let r = s.decode()?;
            latest.insert((r.pid, r.name.clone()), r);
        }
    }
    Ok(latest.into_values().collect())
}

/// Runs a node command.
pub fn run(ctx: &nerve::Context, cmd: NodeCommand) -> CmdResult {
    match cmd {
        NodeCommand::List(f) => {
            let mut nodes = nerve::introspect::list_nodes(ctx).map_err(anyhow::Error::msg)?;
            // one entry per node of a process: a node that works on several threads has
            // one node per thread (ports belong to the thread that made them), as the
            // ROS 2 bridge does; the list comes sorted by name and pid
            nodes.dedup_by(|a, b| a.name == b.name && a.pid == b.pid && a.state == b.state);
            let schedulers = scheduler_reports(ctx)?;
            let (host, remote) = crate::remote::discover(ctx)?;
            let mut seen = std::collections::HashSet::new();
            let remote: Vec<_> = remote
                .into_iter()
                .filter(|e| e.kind == nerve::net::EntityKind::Node)
                .filter(|e| seen.insert((e.name.clone(), e.host_id.clone())))
                .collect();
            // ROS 2's nodes, where a bridge runs
            let cli = ctx
                .node(&format!("nerve_cli_{}", std::process::id()))
                .create()?;
            let ros2 = crate::ros2::graph(&cli).unwrap_or_default().nodes;
            match f.format {
                Format::Json => output::json(&json!({
                    "nodes": nodes
                        .iter()
                        .map(|n| json!({"name": n.name, "pid": n.pid, "state": n.state,
                            "executable": n.executable, "host": host}))
                        .chain(remote.iter().map(|e| json!({"name": e.name, "host": e.host,
                            "state": "alive", "remote": true})))
                        .chain(ros2.iter().map(|n| json!({"name": n, "host": crate::ros2::ROS2,
                            "state": "alive", "ros2": true})))
                        .collect::<Vec<_>>(),
                    "schedulers": schedulers,
                }))?,
                Format::Human => {
                    let mut rows: Vec<Vec<String>> = nodes
                        .iter()
                        .map(|n| {
                            vec![
                                n.name.clone(),
                                host.clone(),
                                n.pid.to_string(),
                                n.state.to_string(),
                                n.executable.clone(),
                            ]
                        })
                        .collect();
                    rows.extend(remote.iter().map(|e| {
                        vec![
                            e.name.clone(),
                            e.host.clone(),
                            "-".into(),
                            "alive".into(),
                            "-".into(),
                        ]
                    }));
                    rows.extend(ros2.iter().map(|n| {
                        vec![
                            n.clone(),
                            crate::ros2::ROS2.into(),
                            "-".into(),
                            "alive".into(),
                            "-".into(),
                        ]
                    }));
                    output::table(&["NAME", "HOST", "PID", "STATE", "EXECUTABLE"], &rows)?;
                    if !schedulers.is_empty() {
                        println!();
                        let rows: Vec<Vec<String>> = schedulers
                            .iter()
                            .flat_map(|s| {
                                s.nodes.iter().map(move |n| {
                                    vec![
                                        format!("{}:{}", s.name, s.pid),
                                        n.name.clone(),
                                        n.priority.to_string(),
                                        format!("{}", n.rate_hz),
                                        format!("{:.2}", n.achieved_hz),
                                        format!("{:.1}", n.jitter_us.p99),
                                        format!("{:.1}", n.jitter_us.max),
                                        n.deadline_misses.to_string(),
                                        n.budget_overruns.to_string(),
                                        if n.stopped { "stopped" } else { "running" }.to_string(),
                                    ]
                                })
                            })
                            .collect();
                        output::table(
                            &[
                                "SCHEDULER",
                                "NODE",
                                "PRIO",
                                "RATE_HZ",
                                "ACHIEVED_HZ",
                                "JITTER_P99_US",
                                "JITTER_MAX_US",
                                "DEADLINE_MISSES",
                                "BUDGET_OVERRUNS",
                                "STATE",
                            ],
                            &rows,
                        )?;
                    }
                }
            }
            Ok(())
        }
    }
}
