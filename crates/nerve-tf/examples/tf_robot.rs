//! A small robot's transforms for `nerve tf tree` / `echo` / `monitor`: map -> odom
//! (dynamic, 10 Hz), odom -> base_link (dynamic, 50 Hz, driving a circle), base_link ->
//! camera (dynamic, 30 Hz, a pan unit) and base_link -> lidar (static).
//!
//! `cargo run -p nerve-tf --example tf_robot -- [SECONDS]` (default 30), in the domain
//! of `NERVE_DOMAIN`.

use nerve::Context;
use nerve_tf::{to_msg, Broadcaster, Quat, StaticBroadcaster, Transform, Vec3};
use std::time::{Duration, Instant};

fn yaw(x: f64, y: f64, z: f64, angle: f64) -> Transform {
    Transform::new(
        Vec3::new(x, y, z),
        Quat::from_axis_angle(Vec3::new(0.0, 0.0, 1.0), angle),
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(30.0);
    nerve::shutdown::install();
    let ctx = Context::from_env()?;
    let node = ctx.node("tf_robot").create()?;
    let mut statics = StaticBroadcaster::new(&node)?;
    statics.send(&[to_msg(
        "base_link",
        "lidar",
        nerve::wall_ns(),
        yaw(0.2, 0.0, 0.5, 0.0),
    )?])?;
    let dynamic = Broadcaster::new(&node)?;
    let start = Instant::now();
    let mut tick = 0u64;
    // 150 Hz base tick: odom -> base_link every 3rd (50 Hz), camera every 5th (30 Hz),
    // map -> odom every 15th (10 Hz)
    while start.elapsed().as_secs_f64() < seconds && !nerve::shutdown::requested() {
        let now = nerve::wall_ns();
        let t = start.elapsed().as_secs_f64();
        let mut out = Vec::new();
        if tick.is_multiple_of(3) {
            out.push(to_msg(
                "odom",
                "base_link",
                now,
                yaw(t.cos(), t.sin(), 0.0, t),
            )?);
        }
        if tick.is_multiple_of(5) {
            out.push(to_msg(
                "base_link",
                "camera",
                now,
                yaw(0.3, 0.0, 0.4, (t * 2.0).sin()),
            )?);
        }
        if tick.is_multiple_of(15) {
            out.push(to_msg("map", "odom", now, yaw(1.0, 2.0, 0.0, 0.01 * t))?);
            statics.update_connections();
        }
        if !out.is_empty() {
            dynamic.send(&out)?;
        }
        tick += 1;
        let next = Duration::from_secs_f64(tick as f64 / 150.0);
        if let Some(wait) = next.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    Ok(())
}
