//! The demo: a talker and a listener in two processes exchange Imu messages at 100 Hz
//! through shared memory for a few seconds, then the result is printed.
//!
//! `cargo run --release -p nerve-examples --bin demo`

use clap::Parser;
use std::process::{Command, Stdio};
use std::time::Duration;

#[derive(Parser)]
struct Args {
    /// Internal: run one side.
    #[arg(long)]
    role: Option<String>,
    /// Seconds to run.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    nerve::shutdown::install();
    let count = (args.seconds * 100.0).round().max(1.0) as u64;
    match args.role.as_deref() {
        Some("talker") => {
            nerve_examples::talker("/demo/imu", 100.0, Some(count), Some(1))?;
            return Ok(());
        }
        Some("listener") => {
            let r =
                nerve_examples::listener("/demo/imu", Some(count), Duration::from_secs(5), false)?;
            println!(
                "RESULT received={} lost={} mean_latency_us={:.1} max_latency_us={:.1}",
                r.received, r.lost, r.mean_latency_us, r.max_latency_us
            );
            return Ok(());
        }
        Some(other) => anyhow::bail!("unknown role {other:?}"),
        None => {}
    }
    let exe = std::env::current_exe()?;
    let seconds = args.seconds.to_string();
    println!(
        "Nerve demo: talker -> listener, Imu (304 B) at 100 Hz for {seconds} s over shared memory"
    );
    let listener = Command::new(&exe)
        .args(["--role", "listener", "--seconds", &seconds])
        .stdout(Stdio::piped())
        .spawn()?;
    let mut talker = Command::new(&exe)
        .args(["--role", "talker", "--seconds", &seconds])
        .spawn()?;
    let listener = listener.wait_with_output()?;
    talker.wait()?;
    let out = String::from_utf8_lossy(&listener.stdout);
    print!("{out}");
    let result = out
        .lines()
        .find(|l| l.starts_with("RESULT"))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "listener failed: {}",
                String::from_utf8_lossy(&listener.stderr)
            )
        })?;
    anyhow::ensure!(
        result.contains(&format!("received={count}")),
        "listener did not receive every message: {result}"
    );
    println!(
        "ok: {count} messages delivered in order; see `nerve --help` to inspect a running system"
    );
    Ok(())
}
