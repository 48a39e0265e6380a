//! `nerve-stress`: runs Nerve's reliability scenarios and prints what held.
//!
//! `nerve-stress publisher-kill --rounds 10000`, `nerve-stress soak --seconds 3600`,
//! `nerve-stress all --format json`. Exit 0 when every scenario passed, 1 when one failed
//! or could not run, 2 on bad arguments.

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use nerve_stress::{Options, Outcome, Scenario};

#[derive(Parser)]
#[command(
    name = "nerve-stress",
    version,
    about = "Nerve's reliability scenarios"
)]
struct Args {
    /// publisher-kill, subscriber-kill, restart-all, users, stopped, mixed-qos, discovery,
    /// soak, or all.
    scenario: String,
    /// Rounds of the scenarios that go in rounds.
    #[arg(long, default_value_t = 20)]
    rounds: u64,
    /// Seconds of the scenarios that run for a time (soak; mixed-qos per phase).
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Processes of the scenarios that start many (discovery: four nodes each).
    #[arg(long, default_value_t = 50)]
    processes: usize,
    /// Domain id (its own: nothing else may run in it).
    #[arg(long)]
    domain: Option<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Table,
    Json,
}

fn main() {
    // a role needs no scenario: `nerve-stress role <role> <json>`
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("role") {
        let code = match (argv.get(2), argv.get(3)) {
            (Some(role), Some(spec)) => match nerve_stress::run_role(role, spec) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("nerve-stress role {role}: {e:#}");
                    1
                }
            },
            _ => {
                eprintln!("usage: nerve-stress role <role> <json>");
                2
            }
        };
        std::process::exit(code);
    }
    let args = Args::parse();
    std::process::exit(match run(&args) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("nerve-stress: {e:#}");
            if e.downcast_ref::<nerve_stress::StressError>()
                .is_some_and(|e| matches!(e, nerve_stress::StressError::Options(_)))
            {
                2
            } else {
                1
            }
        }
    });
}

fn run(args: &Args) -> anyhow::Result<bool> {
    let scenarios: Vec<Scenario> = if args.scenario == "all" {
        Scenario::ALL.to_vec()
    } else {
        vec![Scenario::parse(&args.scenario).ok_or_else(|| {
            nerve_stress::StressError::Options(format!(
                "unknown scenario {:?} (publisher-kill, subscriber-kill, restart-all, \
                 users, stopped, mixed-qos, discovery, soak, all)",
                args.scenario
            ))
        })?]
    };
    let domain = args.domain.unwrap_or(900 + std::process::id() % 90);
    let state_dir = std::env::temp_dir().join(format!("nerve-stress-{}", std::process::id()));
    let opts = Options {
        rounds: args.rounds,
        seconds: args.seconds,
        processes: args.processes,
        domain,
        state_dir: state_dir.clone(),
        role_command: (
            std::env::current_exe().context("the path of this program")?,
            vec!["role".to_string()],
        ),
        progress: args.format == Format::Table,
    };
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut all_passed = true;
    for s in scenarios {
        let o = nerve_stress::run(s, &opts)?;
        all_passed &= o.passed;
        if args.format == Format::Table {
            print!("{}", o.text());
        }
        outcomes.push(o);
    }
    if args.format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&outcomes)?);
    }
    let _ = std::fs::remove_dir_all(&state_dir);
    Ok(all_passed)
}
