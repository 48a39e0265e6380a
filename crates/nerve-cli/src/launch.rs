//! `nerve launch`: start a system from a launch file and supervise it until Ctrl-C.

use crate::failure::{usage, CmdResult, Failure};
use clap::{Args, ValueEnum};
use nerve_launch::{
    Containment, EndedBy, Event, Guardian, LaunchError, LaunchFile, Output, StartOptions,
};
use std::path::PathBuf;
use std::sync::Arc;

/// Arguments of `nerve launch`.
#[derive(Args)]
pub struct LaunchArgs {
    /// Only load and check the file (and its includes), print a summary and exit.
    #[arg(long)]
    check: bool,
    /// How the processes and everything they start are kept together: a cgroup of the
    /// launch's own where cgroup v2 is writable (auto), a cgroup or fail (cgroup), or
    /// process groups with every descendant tracked (process-groups).
    #[arg(long, value_enum, default_value_t = Contain::Auto)]
    containment: Contain,
    /// The launch file (TOML).
    file: PathBuf,
    /// Arguments of the launch file, `name:=value`.
    args: Vec<String>,
}

/// `--containment`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Contain {
    /// A cgroup where cgroup v2 is writable, process groups otherwise.
    Auto,
    /// A cgroup, or the launch does not start.
    Cgroup,
    /// Process groups plus the child subreaper, every descendant tracked.
    ProcessGroups,
}

/// Runs `nerve launch`.
/// Writes `launch: <what>` to stderr in one write, so the line never mixes with the
/// processes' lines, which reach the same terminal or pipe in one write each.
fn say(what: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let line = format!("launch: {what}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

pub fn run(cfg: &nerve::Config, a: LaunchArgs) -> CmdResult {
    let args = LaunchFile::parse_args(&a.args).map_err(|e| usage(e.to_string()))?;
    let plan = match LaunchFile::load(&a.file, &args) {
        Ok(p) => p,
        // one located problem per line
        Err(LaunchError::Invalid(d)) => {
            let lines: Vec<String> = d.iter().map(|d| d.to_string()).collect();
            return Err(usage(lines.join("\nerror: ")));
        }
        Err(e @ LaunchError::Argument { .. }) => return Err(usage(e.to_string())),
        Err(e) => return Err(Failure::Runtime(e.into())),
    };
    if a.check {
        println!(
            "ok: {} processes, {} containers",
            plan.process_count(),
            plan.container_count()
        );
        return Ok(());
    }
    let mut opts = StartOptions::new(cfg.clone());
    opts.output = Output::Prefixed;
    opts.handle_signals = true;
    opts.guardian = Guardian::CurrentExe;
    opts.on_event = Some(Arc::new(|e: &Event| say(format_args!("{e}"))));
    opts.containment = match a.containment {
        Contain::Auto => Containment::Auto,
        Contain::Cgroup => Containment::Cgroup,
        Contain::ProcessGroups => Containment::ProcessGroups,
    };
    say(format_args!(
        "{} ({} processes, {} containers, domain {})",
        a.file.display(),
        plan.process_count(),
        plan.container_count(),
        cfg.domain
    ));
    let running = plan.start(opts)?;
    say(format_args!("containment: {}", running.containment()));
    let report = running.wait();
    for p in &report.shutdown.processes {
        let how = match p.ended_by {
            EndedBy::AlreadyExited => continue,
            EndedBy::Sigint => "SIGINT",
            EndedBy::Sigterm => "SIGTERM (ignored SIGINT)",
            EndedBy::Sigkill => "SIGKILL (ignored SIGINT and SIGTERM)",
        };
        say(format_args!(
            "{} stopped by {how} in {} ms",
            p.name,
            p.took.as_millis()
        ));
    }
    for (name, n) in report.respawns.iter().filter(|r| r.1 > 0) {
        say(format_args!("{name} respawned {n} times"));
    }
    if report.success {
        say(format_args!("done ({})", report.reason));
        Ok(())
    } else {
        Err(Failure::Runtime(anyhow::anyhow!(
            "launch failed: {}",
            report.reason
        )))
    }
}
