//! Receives Imu messages on /imu and prints one line per second (or every message with -v).

use clap::Parser;
use std::time::Duration;

#[derive(Parser)]
struct Args {
    /// Topic to listen on.
    #[arg(long, default_value = "/imu")]
    topic: String,
    /// Stop after N messages (default: run until Ctrl-C).
    #[arg(long)]
    count: Option<u64>,
    /// Print every message.
    #[arg(short, long)]
    verbose: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    nerve::shutdown::install();
    nerve_examples::listener(&args.topic, args.count, Duration::MAX, args.verbose)?;
    Ok(())
}
