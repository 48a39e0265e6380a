//! Publishes 10 MB point clouds at 10 Hz on /points, written in place in shared memory.

use clap::Parser;
use nerve::prelude::*;
use nerve_msgs::{datatype, FrameId, PointCloud, Time};
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    /// Topic.
    #[arg(long, default_value = "/points")]
    topic: String,
    /// Cloud size in bytes.
    #[arg(long, default_value_t = 10_000_000)]
    bytes: usize,
    /// Clouds per second.
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
    /// Stop after N clouds.
    #[arg(long)]
    count: Option<u64>,
    /// Wait for this many subscribers before publishing.
    #[arg(long, default_value_t = 0)]
    wait_subscribers: usize,
}

const POINT_STEP: usize = 16; // x, y, z, intensity as f32

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    nerve::shutdown::install();
    let ctx = Context::from_env()?;
    let node = ctx.node("pointcloud_pub").create()?;
    // room for the cloud head in front of the data; growth up to twice that
    let sample = args.bytes + 4096;
    let qos = Qos::sensor()
        .payload(sample, 2 * sample)
        .shm_budget(4 * sample);
    let points = node
        .publisher::<PointCloud>(&args.topic)
        .qos(qos)
        .create()?;
    if args.wait_subscribers > 0
        && !points.wait_for_subscribers(args.wait_subscribers, Duration::from_secs(10))
    {
        anyhow::bail!("no subscriber on {} within 10 s", args.topic);
    }
    println!(
        "pointcloud_pub: {} byte clouds on {} at {} Hz",
        args.bytes, args.topic, args.rate
    );
    let period = Duration::from_secs_f64(1.0 / args.rate);
    let start = Instant::now();
    let mut k = 0u64;
    while !nerve::shutdown::requested() && args.count.is_none_or(|c| k < c) {
        let mut cloud = points.loan_slice(args.bytes)?;
        cloud.header.stamp = Time::now();
        cloud.header.frame_id = FrameId::new("lidar").expect("fits");
        cloud.height = 1;
        cloud.width = (args.bytes / POINT_STEP) as u32;
        cloud.point_step = POINT_STEP as u32;
        cloud.row_step = (args.bytes / POINT_STEP * POINT_STEP) as u32;
        cloud.is_dense = 1;
        cloud
            .set_fields(&[
                PointCloud::field("x", 0, datatype::FLOAT32, 1),
                PointCloud::field("y", 4, datatype::FLOAT32, 1),
                PointCloud::field("z", 8, datatype::FLOAT32, 1),
                PointCloud::field("intensity", 12, datatype::FLOAT32, 1),
            ])
            .map_err(anyhow::Error::msg)?;
        // the "driver" writes straight into shared memory: no copy on either side
        nerve_examples::fill_cloud(cloud.elems_mut(), k + 1);
        cloud.send()?;
        k += 1;
        nerve_examples::sleep_until_tick(start, period, k);
    }
    println!("pointcloud_pub: sent {k} clouds");
    Ok(())
}
