//! `nerve replay`: a bag through a set of nodes in lockstep (see `nerve_bag::replay`).

use crate::failure::{usage, CmdResult, Failure};
use anyhow::Context as _;
use clap::Args;
use nerve::time::lockstep::{Lockstep, LockstepError};
use nerve_bag::replay::{ReplayOptions, ReplayReport};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

/// Arguments of `nerve replay`.
#[derive(Args)]
pub struct ReplayArgs {
    /// The bag to replay (an MCAP file or a rosbag2 directory).
    pub bag: PathBuf,
    /// Record the nodes' outputs to this MCAP file.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Compare the outputs with this bag, message by message; exit 1 at the first
    /// difference.
    #[arg(long, value_name = "EXPECTED.mcap")]
    pub check: Option<PathBuf>,
    /// Fields --check ignores: `field.path` on every topic or `/topic:field.path`.
    #[arg(long, value_name = "FIELD")]
    pub ignore: Vec<String>,
    /// Only these topics of the bag.
    #[arg(long, num_args = 1..)]
    pub topics: Option<Vec<String>>,
    /// Write the report (counts, digests, speed) as JSON to this file.
    #[arg(long, value_name = "REPORT.json")]
    pub report: Option<PathBuf>,
    /// Replay a damaged bag as far as it can be read (the damage is reported on stderr)
    /// instead of refusing it; --check then compares with a damaged bag as far as it can
    /// be read too.
    #[arg(long)]
    pub tolerate_damage: bool,
    /// How long the nodes' executors must stay unchanged before the replay starts, ms.
    #[arg(long, default_value_t = 500)]
    pub settle_ms: u64,
    /// Longest wait for one step (a callback that blocks longer ends the replay), s.
    #[arg(long, default_value_t = 30.0)]
    pub stall_timeout: f64,
    /// The nodes: a launch file (`.toml`) or a program and its arguments.
    #[arg(last = true, required = true, value_name = "LAUNCH_FILE_OR_COMMAND")]
    pub command: Vec<String>,
}

/// Runs `nerve replay`. `domain` is the domain asked for with `--domain`, else a free one
/// is chosen (the replay needs a domain of its own).
pub fn run(domain: Option<u32>, args: ReplayArgs) -> CmdResult {
    if !(args.stall_timeout.is_finite() && args.stall_timeout > 0.0) {
        return Err(usage(format!(
            "--stall-timeout must be a positive number of seconds, got {}",
            args.stall_timeout
        )));
    }
    if !args.bag.exists() {
        return Err(usage(format!("{}: no such bag", args.bag.display())));
    }
    if let Some(c) = &args.check {
        if !c.exists() {
            return Err(usage(format!("--check {}: no such bag", c.display())));
        }
    }
    let (domain, lockstep) = match domain {
        Some(d) => (d, Lockstep::create(d)?),
        None => free_domain()?,
    };
    // --check compares a recording: without -o it goes to a scratch file
    let scratch = (args.check.is_some() && args.output.is_none())
        .then(|| std::env::temp_dir().join(format!("nerve-replay-{}.mcap", std::process::id())));
    let output = args.output.clone().or_else(|| scratch.clone());
    let mut child = spawn(&args.command, domain)?;
    let result = replay(&args, output.clone(), &lockstep, &mut child);
    stop(&mut child);
    let outcome = result.and_then(|report| finish(&args, output.as_deref(), &report));
    if let Some(p) = scratch {
        let _ = std::fs::remove_file(p);
    }
    outcome
}

/// Prints and writes the report, then checks the outputs if asked.
fn finish(args: &ReplayArgs, output: Option<&std::path::Path>, report: &ReplayReport) -> CmdResult {
    print_report(report);
    crate::bag::report_damage(
        &report.damage,
        &format!("replayed {} messages", report.messages),
    );
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_string_pretty(report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let (Some(expected), Some(actual)) = (&args.check, output) {
        let opts = nerve_bag::compare::CompareOptions {
            ignore: args.ignore.clone(),
            on_damage: crate::bag::on_damage(args.tolerate_damage),
        };
        let cmp = nerve_bag::compare::compare(actual, expected, &opts)?;
        crate::bag::report_damage(
            &cmp.damage,
            &format!("compared {} messages", cmp.messages_compared),
        );
        match cmp.first_difference {
            None => println!(
                "check: identical to {} ({} messages compared)",
                expected.display(),
                cmp.messages_compared
            ),
            Some(d) => {
                return Err(Failure::Runtime(anyhow::anyhow!(
                    "check against {} failed: {d}",
                    expected.display()
                )))
            }
        }
    }
    Ok(())
}

fn replay(
    args: &ReplayArgs,
    output: Option<PathBuf>,
    lockstep: &std::sync::Arc<Lockstep>,
    child: &mut Child,
) -> Result<ReplayReport, Failure> {
    let mut opts = ReplayOptions {
        settle: Duration::from_millis(args.settle_ms),
        stall_timeout: Duration::from_secs_f64(args.stall_timeout),
        output,
        ..ReplayOptions::default()
    };
    opts.play.topics = args.topics.clone();
    opts.play.on_damage = crate::bag::on_damage(args.tolerate_damage);
    let program = args.command[0].clone();
    let mut check = || -> Result<(), String> {
        match child.try_wait() {
            Ok(Some(status)) => Err(format!("{program} exited ({status}) during the replay")),
            _ => Ok(()),
        }
    };
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "[{elapsed_precise}] {bar:30} {pos}/{len} messages {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let r = nerve_bag::replay::replay(lockstep, &args.bag, &opts, &mut check, |p| {
        if let Some(t) = p.total {
            bar.set_length(t);
        }
        bar.set_position(p.published);
        bar.set_message(format!("bag time {:.1} s", p.bag_seconds));
    });
    bar.finish_and_clear();
    match r {
        Ok(report) => Ok(report),
        Err(nerve_bag::BagError::Replay(LockstepError::Interrupted)) => {
            eprintln!("replay interrupted");
            Err(Failure::Interrupted)
        }
        Err(e) => Err(Failure::Runtime(anyhow::anyhow!("replay failed: {e}"))),
    }
}

/// A domain nobody uses, with its lockstep segment made.
fn free_domain() -> Result<(u32, std::sync::Arc<Lockstep>), Failure> {
    let base = 500 + std::process::id() % 400;
    for i in 0..400 {
        let d = 500 + (base - 500 + i) % 400;
        let cfg = nerve::Config::default()
            .domain(d)
            .map_err(anyhow::Error::from)?;
        let prefix = cfg.file_prefix();
        let used = std::fs::read_dir("/dev/shm")
            .map(|rd| {
                rd.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            })
            .unwrap_or(false);
        if used {
            continue;
        }
        match Lockstep::create(d) {
            Ok(ls) => return Ok((d, ls)),
            Err(LockstepError::Busy { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Failure::Runtime(anyhow::anyhow!(
        "no free domain between 500 and 899 for the replay: choose one with --domain"
    )))
}

/// Starts the nodes in a process group of their own, in the replay's domain.
fn spawn(command: &[String], domain: u32) -> Result<Child, Failure> {
    let mut cmd = if command.len() == 1 && command[0].ends_with(".toml") {
        let me = std::env::current_exe().context("cannot find the nerve binary")?;
        let mut c = Command::new(me);
        c.arg("launch").arg(&command[0]);
        c
    } else {
        let mut c = Command::new(&command[0]);
        c.args(&command[1..]);
        c
    };
    cmd.env("NERVE_DOMAIN", domain.to_string())
        .env("NERVE_LOCKSTEP", "1")
        .env("NERVE_SIM_TIME", "1")
        .process_group(0);
    cmd.spawn()
        .with_context(|| format!("cannot start {}", command[0]))
        .map_err(Failure::Runtime)
}

/// Ends the nodes: SIGTERM to their group, SIGKILL after 5 s.
fn stop(child: &mut Child) {
    use rustix::process::{kill_process_group, Pid, Signal};
    let group = Pid::from_raw(child.id() as i32);
    if let Some(g) = group {
        let _ = kill_process_group(g, Signal::TERM);
    }
    let end = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < end {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // the group may be gone already (ESRCH is fine)
    if let Some(g) = group {
        let _ = kill_process_group(g, Signal::KILL);
    }
    let _ = child.wait();
}

fn print_report(r: &ReplayReport) {
    println!(
        "replayed {} messages ({:.2} s of bag time) in {:.3} s: {:.1}x real time, {:.1} us per message, {} clock steps, {} executors",
        r.messages, r.bag_seconds, r.wall_seconds, r.speedup, r.per_message_us, r.clock_steps, r.executors
    );
    for (topic, n) in &r.outputs {
        let digest = r.digests.get(topic).map_or("", |d| &d[..16.min(d.len())]);
        println!("  {topic}: {n} messages, sha256 {digest}…");
    }
    if r.outputs_lost > 0 {
        println!(
            "  the recorder lost {} output messages (a step published more than its queue)",
            r.outputs_lost
        );
    }
    for (t, why) in &r.unrecorded {
        println!("  {t}: not recorded: {why}");
    }
}
