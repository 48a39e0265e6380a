//! Publishes Imu messages at 100 Hz on /imu until interrupted (or --count N).
//!
//! Run `talker` in one terminal and `listener` in another.

use clap::Parser;
use nerve::prelude::*;
use nerve_msgs::{Imu, Quaternion, Time, Vector3};
use std::time::{Duration, Instant};

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
    nerve::shutdown::install();
    let ctx = Context::from_env()?;
    let node = ctx.node("talker").create()?;
    let imu = node.publisher::<Imu>(&args.topic).create()?;
    println!(
        "talker: publishing Imu on {} at {} Hz (domain {})",
        args.topic,
        args.rate,
        ctx.domain()
    );
    let period = Duration::from_secs_f64(1.0 / args.rate);
    let start = Instant::now();
    let mut k = 0u64;
    while !nerve::shutdown::requested() && args.count.is_none_or(|c| k < c) {
        let t = k as f64 * period.as_secs_f64();
        // write the message in place in shared memory
        let mut m = imu.loan()?;
        m.stamp = Time::now();
        m.orientation = Quaternion {
            x: 0.0,
            y: 0.0,
            z: (t / 2.0).sin(),
            w: (t / 2.0).cos(),
        };
        m.angular_velocity = Vector3 {
            x: 0.0,
            y: 0.0,
            z: 1.0,
        };
        m.linear_acceleration = Vector3 {
            x: 0.0,
            y: 0.0,
            z: 9.81,
        };
        m.send()?;
        k += 1;
        nerve_examples::sleep_until_tick(start, period, k);
    }
    println!("talker: sent {k} messages");
    Ok(())
}
