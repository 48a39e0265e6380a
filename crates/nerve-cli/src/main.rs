//! `nerve`: introspection and tooling for Nerve systems.
//!
//! Exit codes: 0 success (and broken pipe), 1 runtime error, 2 usage error.

mod action;
mod bag;
#[cfg(feature = "bench")]
mod bench;
mod bridge;
mod clean;
mod doctor;
mod failure;
mod gen_headers;
mod json_arg;
mod launch;
mod lifecycle;
mod log;
mod node;
mod output;
mod param;
mod policy;
mod remote;
mod replay;
mod ros2;
mod router;
mod service;
mod sm;
mod tf;
mod topic;
mod trace;
mod types;

use clap::{Parser, Subcommand};
use failure::{describe, usage, CmdResult, Failure};
use std::process::ExitCode;

/// Nerve robotics middleware tool.
#[derive(Parser)]
#[command(
    name = "nerve",
    version,
    about = "Nerve robotics middleware: introspection and tools"
)]
struct Cli {
    /// Domain id (overrides NERVE_DOMAIN).
    #[arg(long, global = true)]
    domain: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect, echo and publish topics.
    #[command(subcommand)]
    Topic(topic::TopicCommand),
    /// List and call services.
    #[command(subcommand)]
    Service(service::ServiceCommand),
    /// Read and set the parameters of running nodes.
    #[command(subcommand)]
    Param(param::ParamCommand),
    /// List actions, inspect their goals, send goals.
    #[command(subcommand)]
    Action(action::ActionCommand),
    /// Record, replay and inspect bags (MCAP, readable by ROS 2 tools and Foxglove).
    #[command(subcommand)]
    Bag(bag::BagCommand),
    /// Bridge the domain to other tools (Foxglove) and to ROS 2.
    #[command(subcommand)]
    Bridge(bridge::BridgeCommand),
    /// Benchmark Nerve side by side with other middleware.
    #[cfg(feature = "bench")]
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Benchmark Nerve side by side with other middleware (not in this build: it was
    /// built without the `bench` feature).
    #[cfg(not(feature = "bench"))]
    Bench(NotBuilt),
    /// Inspect nodes.
    #[command(subcommand)]
    Node(node::NodeCommand),
    /// Read the log records nodes write (/rosout).
    #[command(subcommand)]
    Log(log::LogCommand),
    /// Inspect state machines.
    #[command(subcommand)]
    Sm(sm::SmCommand),
    /// Transforms: the frame tree, one transform, per-frame rates and delays.
    #[command(subcommand)]
    Tf(tf::TfCommand),
    /// Per-hop latency through a pipeline, from traced processes (NERVE_TRACE).
    #[command(subcommand)]
    Trace(trace::TraceCommand),
    /// List managed nodes, read their lifecycle state, trigger transitions.
    #[command(subcommand)]
    Lifecycle(lifecycle::LifecycleCommand),
    /// Access control across hosts: check a policy file, show the Zenoh settings it
    /// generates.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Start and supervise a system from a launch file (TOML); --check only checks it.
    Launch(launch::LaunchArgs),
    /// Replay a bag through nodes in lockstep (deterministic: every callback a message
    /// sets off returns before the next), recording and checking their outputs.
    Replay(replay::ReplayArgs),
    /// Run a Zenoh router for hosts that meet through one (robots behind a base station);
    /// processes reach it with a Zenoh file in client or peer mode that connects to it.
    Router(router::RouterArgs),
    /// Remove shared memory and state left by dead processes.
    Clean(clean::CleanArgs),
    /// Check this machine for what Nerve, its tests and benchmarks need, and say how to
    /// fix what is missing (exit 1 when a check of a purpose asked for fails).
    Doctor(doctor::DoctorArgs),
    /// List the message and service types the tool can decode, publish and call;
    /// `types gen-cpp` and `types gen-c` generate C++ and C headers of message types.
    Types(types::TypesArgs),
}

/// The arguments of a command left out of this build (taken as they come, so that the
/// command can say which feature it needs).
#[cfg(not(feature = "bench"))]
#[derive(clap::Args)]
struct NotBuilt {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    _args: Vec<String>,
}

fn config(domain: &Option<String>) -> Result<nerve::Config, Failure> {
    let mut cfg = nerve::Config::from_env().map_err(|e| usage(e.to_string()))?;
    if let Some(d) = domain {
        cfg.domain = nerve::config::parse_domain(d).map_err(|e| usage(e.to_string()))?;
    }
    Ok(cfg)
}

fn run(cli: Cli) -> CmdResult {
    nerve::shutdown::install();
    let cfg = config(&cli.domain)?;
    let ctx = || nerve::Context::new(cfg.clone());
    match cli.command {
        Command::Topic(c) => topic::run(&ctx()?, c),
        Command::Service(c) => service::run(&ctx()?, c),
        Command::Param(c) => param::run(&ctx()?, c),
        Command::Action(c) => action::run(&ctx()?, c),
        #[cfg(feature = "bench")]
        Command::Bench(c) => bench::run(c),
        #[cfg(not(feature = "bench"))]
        Command::Bench(_) => Err(usage(
            "this nerve was built without the `bench` feature: build it with default \
             features (cargo build --release -p nerve-cli) to run benchmarks",
        )),
        Command::Bag(c) => bag::run(|| Ok(ctx()?), c),
        Command::Bridge(c) => bridge::run(|| Ok(ctx()?), c),
        Command::Node(c) => node::run(&ctx()?, c),
        Command::Log(c) => log::run(&ctx()?, c),
        Command::Sm(c) => sm::run(&ctx()?, c),
        Command::Lifecycle(c) => lifecycle::run(&ctx()?, c),
        Command::Tf(c) => tf::run(&ctx()?, c),
        Command::Trace(c) => trace::run(c),
        // no context here: it would count as a live user of the domain
        Command::Router(a) => router::run(a),
        Command::Clean(a) => clean::run(&cfg, a),
        // no context either: the leftover check must not count as a user (nor clean)
        Command::Doctor(a) => doctor::run(&cfg, a),
        // no context either: the launcher makes one only for readiness checks
        Command::Launch(a) => launch::run(&cfg, a),
        // no context: a policy is checked without joining the domain
        Command::Policy(c) => policy::run(cfg.network.host_name.clone(), c),
        // the replay chooses a domain of its own unless --domain names one
        Command::Replay(a) => replay::run(cli.domain.is_some().then_some(cfg.domain), a),
        Command::Types(a) => match a.command {
            None => types::list(&ctx()?, a.format.format),
            // a context only for --topic: it would count as a live user of the domain
            Some(types::TypesCommand::GenCpp(g)) => {
                gen_headers::run(&g, nerve_c::codegen::Lang::Cpp, || Ok(ctx()?))
            }
            Some(types::TypesCommand::GenC(g)) => {
                gen_headers::run(&g, nerve_c::codegen::Lang::C, || Ok(ctx()?))
            }
        },
    }
}

fn main() -> ExitCode {
    // `nerve launch` re-runs this binary as its guardian (cleans up if the launcher dies)
    nerve_launch::run_guardian_if_requested();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    ExitCode::from(2)
                } else {
                    ExitCode::SUCCESS
                };
            }
            let text = e.to_string();
            let line = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid arguments")
                .trim_start_matches("error: ");
            eprintln!("error: {line} (see nerve --help)");
            return ExitCode::from(2);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(m)) => {
            eprintln!("error: {m}");
            ExitCode::from(2)
        }
        Err(Failure::Interrupted) => ExitCode::from(nerve_bench_harness::interrupt::EXIT_STATUS),
        Err(Failure::Runtime(e)) => {
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {}", describe(&e));
            ExitCode::from(1)
        }
    }
}
