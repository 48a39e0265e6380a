//! `nerve service …`

use crate::failure::{client_failure, no_server, usage, CmdResult, Failure};
use crate::json_arg::JsonArg;
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
        /// Service type: built in (full or short name, see `nerve types`), e.g.
        /// AddTwoInts, or a ROS 2 service type (`pkg/srv/Name`, its `.srv` file on
        /// AMENT_PREFIX_PATH), e.g. test_msgs/srv/BasicTypes.
        service_type: String,
        /// Request as JSON; fields left out keep their defaults, e.g. '{"a": 2, "b": 3}'.
        /// `@FILE` reads it from a file, `-` from standard input (Linux refuses one
        /// argument over 128 KiB).
        #[arg(value_parser = JsonArg::parse, value_name = "JSON|@FILE|-")]
        request: JsonArg,
        /// How long to wait for a server and then for the response, in ms.
        #[arg(long, default_value_t = 5000)]
        timeout: u64,
        #[command(flatten)]
        format: FormatArg,
    },
}

/// Calls a service of ROS 2 type `ros_type` (`pkg/srv/Name`) as the ROS 2 bridge serves
/// it (the one route of [`nerve_ros2::services::service_route`]): a standard service is
/// Nerve's own type (its JSON is that type's), any other crosses as CDR, built from and
/// shown as the ROS 2 request and response (definitions on AMENT_PREFIX_PATH).
fn call_ros2(
    node: &nerve::Node,
    name: &str,
    ros_type: &str,
    request: &serde_json::Value,
    timeout: Duration,
) -> Result<serde_json::Value, Failure> {
    use nerve_ros2::services::{service_route, ServiceForm};
    let search = nerve_ros2_types::SearchPath::from_env();
    let mut catalog = nerve_ros2::types::Catalog::new(search.dirs().to_vec(), true);
    let route = service_route(&mut catalog, ros_type).map_err(|e| {
        usage(format!(
            "unknown service type {ros_type:?}: not built in (`nerve types` lists those), and \
             {e}"
        ))
    })?;
    let (req_schema, resp_schema) = match &route.form {
        ServiceForm::Native(_) => {
            let entry = find_service(&route.nerve_type.name).ok_or_else(|| {
                Failure::Runtime(anyhow::anyhow!(
                    "{ros_type} is Nerve's {}, which this tool cannot call",
                    route.nerve_type.name
                ))
            })?;
            return (entry.call)(node, name, request, timeout);
        }
        ServiceForm::Cdr { request, response } => (&request.schema, &response.schema),
    };
    let carried = |schema| {
        crate::ros2::Ros2Type::of(schema).unwrap_or_else(|| {
            Err(Failure::Runtime(anyhow::anyhow!(
                "{ros_type}: {} is not carried as CDR",
                schema.name
            )))
        })
    };
    let (req_type, resp_type) = (carried(req_schema)?, carried(resp_schema)?);
    let payload = req_type.payload(request)?;
    let client = nerve::RawClient::create(
        node,
        name,
        &route.nerve_type,
        nerve::ServiceQos::default(),
        nerve::WaitMode::Block,
    )
    .map_err(client_failure)?;
    if !client.wait_for_service(timeout) {
        return Err(no_server(name, timeout));
    }
    let reply = client.send_bytes(&payload)?.wait(timeout)?;
    // a response that does not decode is a failure, never printed as if it were one
    resp_type.decode(reply.bytes()).map_err(|e| {
        Failure::Runtime(anyhow::anyhow!(
            "service {name}: the response does not decode as {e}"
        ))
    })
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
            let value = request.value("the request")?;
            let timeout = Duration::from_millis(timeout);
            let response = match find_service(&service_type) {
                Some(entry) => (entry.call)(&node, &name, &value, timeout)?,
                None if service_type.matches('/').count() == 2 => {
                    call_ros2(&node, &name, &service_type, &value, timeout)?
                }
                None => {
                    return Err(usage(format!(
                        "unknown service type {service_type:?}: not built in (`nerve types` \
                         lists those) and not a ROS 2 type (pkg/srv/Name)"
                    )))
                }
            };
            match format.format {
                Format::Json => output::json(&response)?,
                Format::Human => println!("{}", types::pretty(&response)),
            }
            Ok(())
        }
    }
}
