//! `nerve bridge foxglove`: live topics in Foxglove (see nerve_bag::bridge).

use crate::output::{self, Format};
use crate::{usage, CmdResult, Failure};
use clap::Subcommand;
use nerve_bag::bridge::{Bridge, BridgeOptions};
use nerve_bag::record::Selection;
use std::time::{Duration, Instant};

/// Bridges to other tools.
#[derive(Subcommand)]
pub enum BridgeCommand {
    /// Serve the domain's topics to Foxglove over WebSocket (Ctrl-C to stop).
    Foxglove {
        /// Port to listen on (0: any free port, printed at start).
        #[arg(long, default_value_t = 8765)]
        port: u16,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// Offer only these topics (default: every topic, including later ones).
        #[arg(long, num_args = 1..)]
        topics: Vec<String>,
        /// Messages queued per client before the oldest are dropped.
        #[arg(long, default_value_t = 256)]
        backlog: usize,
        /// Do not offer Nerve services to Foxglove's Service Call panel.
        #[arg(long)]
        no_services: bool,
        /// Longest a service call from Foxglove may take, in seconds.
        #[arg(long, default_value_t = 5.0)]
        call_timeout: f64,
        /// Stop after this many seconds.
        #[arg(long)]
        duration: Option<f64>,
        /// Output format of the final counts.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
}

/// Runs a bridge command.
pub fn run(ctx: impl FnOnce() -> Result<nerve::Context, Failure>, cmd: BridgeCommand) -> CmdResult {
    let BridgeCommand::Foxglove {
        port,
        host,
        topics,
        backlog,
        no_services,
        call_timeout,
        duration,
        format,
    } = cmd;
    if !(call_timeout.is_finite() && call_timeout > 0.0 && call_timeout < 1e6) {
        return Err(usage(format!(
            "--call-timeout must be a positive number of seconds, got {call_timeout}"
        )));
    }
    for t in &topics {
        nerve::name::validate_topic(t).map_err(|e| usage(e.to_string()))?;
    }
    if backlog == 0 {
        return Err(usage("--backlog must be at least 1"));
    }
    let limit = match duration {
        Some(d) if !(d.is_finite() && d >= 0.0) => {
            return Err(usage(format!(
                "--duration must be a non-negative number, got {d}"
            )))
        }
        d => d.map(Duration::from_secs_f64),
    };
    let opts = BridgeOptions {
        host,
        port,
        selection: Selection {
            all: topics.is_empty(),
            topics,
            ..Selection::default()
        },
        backlog,
        services: !no_services,
        call_timeout: Duration::from_secs_f64(call_timeout),
        ..BridgeOptions::default()
    };
    let host = opts.host.clone();
    let ctx = ctx()?;
    let bridge = Bridge::start(&ctx, opts)?;
    // the line scripts and tests wait for
    println!("listening on ws://{host}:{}", bridge.port());
    let started = Instant::now();
    while !nerve::shutdown::requested() && limit.is_none_or(|l| started.elapsed() < l) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = bridge.stats();
    let services = bridge.service_stats();
    bridge.stop();
    match format {
        Format::Json => output::json(&serde_json::json!({
            "topics": stats,
            "services": services,
        }))?,
        Format::Human => {
            let rows: Vec<Vec<String>> = stats
                .iter()
                .map(|t| {
                    vec![
                        t.topic.clone(),
                        t.schema_name.clone(),
                        t.forwarded.to_string(),
                        t.lost.to_string(),
                        t.failed.to_string(),
                    ]
                })
                .collect();
            output::table(&["TOPIC", "SCHEMA", "FORWARDED", "LOST", "FAILED"], &rows)?;
            for t in stats.iter().filter(|t| t.error.is_some()) {
                println!("{}: {}", t.topic, t.error.as_deref().unwrap_or_default());
            }
            if !services.is_empty() {
                let rows: Vec<Vec<String>> = services
                    .iter()
                    .map(|s| {
                        vec![
                            s.service.clone(),
                            s.type_name.clone(),
                            s.calls.to_string(),
                            s.failed.to_string(),
                        ]
                    })
                    .collect();
                output::table(&["SERVICE", "TYPE", "CALLS", "FAILED"], &rows)?;
            }
        }
    }
    Ok(())
}
