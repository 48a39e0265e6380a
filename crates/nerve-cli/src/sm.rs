//! `nerve sm …`: state machines running anywhere in the domain.

use crate::failure::{usage, CmdResult, Failure};
use crate::output::{self, Format, FormatArg};
use clap::{Args, Subcommand};
use nerve::machine::{event_qos, event_topic, spec_topic, MachineSpec, SpecText, TransitionEvent};
use nerve::{Qos, Serde};
use serde_json::json;
use std::time::{Duration, Instant};

/// State machine commands.
#[derive(Subcommand)]
pub enum SmCommand {
    /// Print a machine's states, transitions and current state.
    Show(ShowArgs),
}

/// Options of `sm show`.
#[derive(Args)]
pub struct ShowArgs {
    /// Machine name (its topics are /<name>/spec and /<name>/event).
    machine: String,
    /// Seconds to wait for the machine's spec.
    #[arg(long, default_value_t = 2.0)]
    timeout: f64,
    #[command(flatten)]
    format: FormatArg,
}

/// Runs a state machine command.
pub fn run(ctx: &nerve::Context, cmd: SmCommand) -> CmdResult {
    match cmd {
        SmCommand::Show(a) => show(ctx, &a),
    }
}

fn show(ctx: &nerve::Context, a: &ShowArgs) -> CmdResult {
    if !(a.timeout.is_finite() && a.timeout > 0.0 && a.timeout <= 3600.0) {
        return Err(usage(format!(
            "--timeout must be in (0, 3600] s, not {}",
            a.timeout
        )));
    }
    let spec_name = spec_topic(&a.machine);
    nerve::name::validate_topic(&spec_name).map_err(|e| {
        usage(format!(
            "invalid machine name {:?}: {}",
            a.machine, e.reason
        ))
    })?;
    let node = ctx.node("nerve_sm_show").create()?;
    let missing = || {
        Failure::Runtime(anyhow::anyhow!(
            "no state machine named {:?} is running in domain {}",
            a.machine,
            ctx.domain()
        ))
    };
    if nerve::introspect::topic_info(&node, &spec_name).map_or(true, |t| t.publishers == 0) {
        return Err(missing());
    }
    // events first: joining the spec topic makes the machine connect both
    let events = node
        .subscriber::<TransitionEvent>(&event_topic(&a.machine))
        .qos(event_qos())
        .create()?;
    let specs = node
        .subscriber::<Serde<SpecText>>(&spec_name)
        .qos(Qos::latched())
        .create()?;
    let deadline = Instant::now() + Duration::from_secs_f64(a.timeout);
    let spec = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match specs.recv_timeout(left.min(Duration::from_millis(50)))? {
            Some(s) => break MachineSpec::from_toml(&s.decode()?.toml)?,
            None if left.is_zero() => return Err(missing()),
            None => {}
        }
    };
    // the last event kept for late joiners, then whatever is queued behind it (a busy
    // machine keeps sending: read what is there, do not wait for it to go quiet)
    let mut last: Option<TransitionEvent> =
        events.recv_timeout(Duration::from_millis(200))?.map(|e| *e);
    while let Some(e) = events.try_recv()? {
        last = Some(*e);
    }
    let current = last.as_ref().map(|e| e.to_state().to_string());
    match a.format.format {
        Format::Json => output::json(&json!({
            "machine": spec.name,
            "current": current,
            "transitions_so_far": last.map(|e| e.seq),
            "spec": spec,
        }))?,
        Format::Human => {
            println!("machine {} (initial {})", spec.name, spec.initial);
            let rows: Vec<Vec<String>> = spec
                .states
                .iter()
                .map(|s| {
                    let mut kind = Vec::new();
                    if let Some(ms) = s.timeout_ms {
                        kind.push(format!("timeout {ms} ms -> {}", s.timeout_trigger));
                    }
                    if let Some(t) = &s.pass_through {
                        kind.push(format!("pass-through -> {t}"));
                    }
                    let mark = if current.as_deref() == Some(s.name.as_str()) {
                        "*"
                    } else {
                        ""
                    };
                    vec![mark.to_string(), s.name.clone(), kind.join(", ")]
                })
                .collect();
            output::table(&["", "STATE", "BEHAVIOUR"], &rows)?;
            let rows: Vec<Vec<String>> = spec
                .transitions
                .iter()
                .map(|t| {
                    vec![
                        t.trigger.clone(),
                        t.from.join("|"),
                        t.to.clone(),
                        t.guard.clone().unwrap_or_default(),
                        t.action.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            println!();
            output::table(&["TRIGGER", "FROM", "TO", "GUARD", "ACTION"], &rows)?;
            match &last {
                Some(e) => println!(
                    "\ncurrent state: {} (after {} transitions; last: {} --{}--> {})",
                    e.to_state(),
                    e.seq,
                    e.from_state(),
                    e.trigger_name(),
                    e.to_state()
                ),
                None => println!("\ncurrent state: unknown (no event seen)"),
            }
        }
    }
    Ok(())
}
