//! `nerve service …`

use crate::failure::{usage, CmdResult};
use crate::output::{self, Format, FormatArg};
use crate::remote;
use crate::types::{self, find_service};
use clap::Subcommand;
use nerve::net::EntityKind;
use serde_json::json;
use std::time::Duration;

/// Service commands.
#[derive(Subcommand)]
pub enum ServiceCommand {
    /// List the services of the domain.
    List(FormatArg),
    /// Call a service once and print the response as JSON.
    Call {
        /// Service name, e.g. /add.
        name: String,
        /// Service type (full or short name, see `nerve types`), e.g. AddTwoInts.
        service_type: String,
        /// Request as JSON; fields left out keep their defaults, e.g. '{"a": 2, "b": 3}'.
        request: String,
        /// How long to wait for a server and then for the response, in ms.
        #[arg(long, default_value_t = 5000)]
        timeout: u64,
        #[command(flatten)]
        format: FormatArg,
    },
}

/// Runs a service command.
pub fn run(ctx: &nerve::Context, cmd: ServiceCommand) -> CmdResult {
    let node = ctx
        .node(&format!("nerve_cli_{}", std::process::id()))
        .create()?;
    match cmd {
        ServiceCommand::List(f) => {
            let list = nerve::introspect::list_services(&node).map_err(anyhow::Error::msg)?;
            let (host, remote) = remote::discover(ctx)?;
            let remote = remote::group(&remote, EntityKind::Server, EntityKind::Client);
            // ROS 2's services, where a bridge runs
            let ros2 = crate::ros2::graph(&node).unwrap_or_default().services;
            match f.format {
                Format::Json => {
                    let mut all: Vec<serde_json::Value> = list
                        .iter()
                        .map(|s| {
                            json!({
                                "name": s.name, "type": s.type_name, "host": host,
                                "request": s.request.name, "response": s.response.name,
                                "servers": s.servers, "clients": s.clients,
                                "max_clients": s.max_clients, "max_in_flight": s.max_in_flight,
                            })
                        })
                        .collect();
                    all.extend(remote::json_rows(&remote, ("servers", "clients")));
                    all.extend(ros2.iter().map(|(name, ty)| {
                        json!({"name": name, "type": ty, "host": crate::ros2::ROS2, "ros2": true})
                    }));
                    output::json(&json!(all))?
                }
                Format::Human => {
                    let mut rows: Vec<Vec<String>> = list
                        .iter()
                        .map(|s| {
                            vec![
                                s.name.clone(),
                                s.type_name.clone(),
                                host.clone(),
                                s.servers.to_string(),
                                s.clients.to_string(),
                            ]
                        })
                        .collect();
                    rows.extend(remote::table_rows(&remote));
                    rows.extend(ros2.iter().map(|(name, ty)| {
                        vec![
                            name.clone(),
                            ty.clone(),
                            crate::ros2::ROS2.into(),
                            "1+".into(),
                            "-".into(),
                        ]
                    }));
                    output::table(&["NAME", "TYPE", "HOST", "SERVERS", "CLIENTS"], &rows)?
                }
            }
            Ok(())
        }
        ServiceCommand::Call {
            name,
            service_type,
            request,
            timeout,
            format,
        } => {
            let entry = find_service(&service_type).ok_or_else(|| {
                usage(format!(
                    "unknown service type {service_type:?}; `nerve types` lists the known ones"
                ))
            })?;
            let value: serde_json::Value = serde_json::from_str(&request)
                .map_err(|e| usage(format!("request is not valid JSON: {e}")))?;
            let response = (entry.call)(&node, &name, &value, Duration::from_millis(timeout))?;
            match format.format {
                Format::Json => output::json(&response)?,
                Format::Human => println!("{}", types::pretty(&response)),
            }
            Ok(())
        }
    }
}
