//! `nerve log …`: the log records nodes publish on `/rosout` (`nerve::log`).

use crate::failure::{usage, CmdResult};
use crate::output::{Format, FormatArg};
use clap::{Args, Subcommand};
use nerve::log::{log_qos, Level, LogRecord, LOG_TOPIC};
use nerve::Serde;
use serde_json::json;
use std::io::Write;
use std::time::Duration;

/// Log commands.
#[derive(Subcommand)]
pub enum LogCommand {
    /// Print the domain's log records as they come (each publisher's last 16 first),
    /// until Ctrl-C or --count.
    Echo(EchoArgs),
}

/// Options of `log echo`.
#[derive(Args)]
pub struct EchoArgs {
    /// Least severe level shown: debug, info, warn, error or fatal.
    #[arg(long, default_value = "debug", value_parser = parse_level)]
    level: Level,
    /// Only the records of this node (its full name, e.g. /arm/gripper).
    #[arg(long)]
    node: Option<String>,
    /// Stop after this many records.
    #[arg(long)]
    count: Option<usize>,
    #[command(flatten)]
    format: FormatArg,
}

fn parse_level(s: &str) -> Result<Level, String> {
    s.parse().map_err(|e: nerve::log::LogError| e.to_string())
}

/// Runs a log command.
pub fn run(ctx: &nerve::Context, cmd: LogCommand) -> CmdResult {
    match cmd {
        LogCommand::Echo(a) => echo(ctx, &a),
    }
}

fn echo(ctx: &nerve::Context, a: &EchoArgs) -> CmdResult {
    if a.count == Some(0) {
        return Err(usage("--count must be at least 1"));
    }
    let node = ctx.node("nerve_log_echo").create()?;
    let sub = node
        .subscriber::<Serde<LogRecord>>(LOG_TOPIC)
        .qos(log_qos())
        .create()?;
    let mut shown = 0usize;
    let mut out = std::io::stdout().lock();
    while a.count.is_none_or(|c| shown < c) && !nerve::shutdown::requested() {
        let Some(s) = sub.recv_timeout(Duration::from_millis(100))? else {
            continue;
        };
        let r = s.decode()?;
        if r.level < a.level || a.node.as_ref().is_some_and(|n| *n != r.node) {
            continue;
        }
        match a.format.format {
            Format::Human => writeln!(out, "{r}")?,
            Format::Json => writeln!(
                out,
                "{}",
                json!({
                    "stamp_ns": r.stamp_ns,
                    "level": r.level.name(),
                    "node": r.node,
                    "message": r.message,
                    "file": r.location.file,
                    "function": r.location.function,
                    "line": r.location.line,
                })
            )?,
        }
        out.flush()?;
        shown += 1;
    }
    let lost = sub.stats().lost;
    if lost > 0 {
        eprintln!("{lost} records were lost (the reader fell behind)");
    }
    Ok(())
}
