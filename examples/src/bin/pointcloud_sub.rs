//! Receives point clouds on /points in place and verifies each one's checksum.

use clap::Parser;
use nerve::prelude::*;
use nerve_msgs::PointCloud;
use std::time::Duration;

#[derive(Parser)]
struct Args {
    /// Topic.
    #[arg(long, default_value = "/points")]
    topic: String,
    /// Stop after N clouds.
    #[arg(long)]
    count: Option<u64>,
    /// Give up after this many seconds without a cloud.
    #[arg(long, default_value_t = 3600.0)]
    idle_timeout: f64,
    /// Print a JSON summary at the end.
    #[arg(long)]
    json: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    nerve::shutdown::install();
    let ctx = Context::from_env()?;
    let node = ctx.node("pointcloud_sub").create()?;
    let sub = node.subscriber::<PointCloud>(&args.topic).create()?;
    if !args.json {
        println!("pointcloud_sub: waiting for clouds on {}", args.topic);
    }
    let (mut n, mut bad, mut latency_max) = (0u64, 0u64, 0u64);
    let mut bytes = 0usize;
    while !nerve::shutdown::requested() && args.count.is_none_or(|c| n < c) {
        let Some(cloud) = sub.recv_timeout(Duration::from_secs_f64(args.idle_timeout))? else {
            break;
        };
        n += 1;
        bytes = cloud.elems().len();
        latency_max =
            latency_max.max(nerve::mono_ns().saturating_sub(cloud.header().publish_mono_ns));
        if !nerve_examples::verify_cloud(cloud.elems()) {
            bad += 1;
        }
        if !args.json {
            println!(
                "cloud seq {} {} points ({} bytes) checksum {}",
                cloud.header().seq,
                cloud.width,
                bytes,
                if nerve_examples::verify_cloud(cloud.elems()) {
                    "ok"
                } else {
                    "BAD"
                }
            );
        }
    }
    let s = sub.stats();
    let summary = serde_json::json!({
        "received": n, "bad_checksum": bad, "lost": s.lost, "bytes": bytes,
        "latency_max_us": latency_max as f64 / 1e3,
    });
    println!("{summary}");
    Ok(())
}
