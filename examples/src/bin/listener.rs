//! Receives Imu messages on /imu and prints one line per second (or every message with -v).

use clap::Parser;
use nerve::prelude::*;
use nerve_msgs::Imu;
use std::time::{Duration, Instant};

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
    let ctx = Context::from_env()?;
    let node = ctx.node("listener").create()?;
    let sub = node.subscriber::<Imu>(&args.topic).create()?;
    println!(
        "listener: waiting for Imu on {} (domain {})",
        args.topic,
        ctx.domain()
    );
    let mut n = 0u64;
    let mut last_report = Instant::now();
    let mut latency_sum = 0u64;
    while !nerve::shutdown::requested() && args.count.is_none_or(|c| n < c) {
        let Some(m) = sub.recv_timeout(Duration::from_millis(200))? else {
            continue;
        };
        n += 1;
        let latency = nerve::mono_ns().saturating_sub(m.header().publish_mono_ns);
        latency_sum += latency;
        if args.verbose {
            println!(
                "seq {} accel z {:.2} latency {:.1} us",
                m.header().seq,
                m.linear_acceleration.z,
                latency as f64 / 1e3
            );
        } else if last_report.elapsed() >= Duration::from_secs(1) {
            let s = sub.stats();
            println!(
                "listener: {} received, {} lost, mean latency {:.1} us",
                s.received,
                s.lost,
                latency_sum as f64 / n as f64 / 1e3
            );
            last_report = Instant::now();
        }
    }
    println!("listener: received {n} messages, {} lost", sub.stats().lost);
    Ok(())
}
