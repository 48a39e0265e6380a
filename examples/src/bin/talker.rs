//! Publishes Imu messages at 100 Hz on /imu until interrupted (or --count N).
//!
//! Run `talker` in one terminal and `listener` in another.

use clap::Parser;

#[derive(Parser)]
struct Args {
    /// Topic to publish on.
    #[arg(long, default_value = "/imu")]
    topic: String,
    /// Messages per second.
    #[arg(long, default_value_t = 100.0)]
    rate: f64,
    /// Stop after N messages (default: run until Ctrl-C).
    #[arg(long)]
    count: Option<u64>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.rate > 0.0 && args.rate.is_finite(),
        "--rate must be a positive number"
    );
    nerve::shutdown::install();
    nerve_examples::talker(&args.topic, args.rate, args.count, None)?;
    Ok(())
}
