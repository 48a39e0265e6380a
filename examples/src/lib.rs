//! Shared code of the examples: the Imu talker and listener, checksums for payload
//! integrity, and absolute-deadline pacing.

/// The README's Rust examples, run as doctests exactly as written.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExamples;

use nerve::prelude::*;
use nerve_msgs::{Imu, Quaternion, Time, Vector3};
use std::time::{Duration, Instant};

/// Publishes Imu messages on `topic` at `rate` Hz until shutdown or `count` messages,
/// first waiting for `wait_for` subscribers if given. Returns how many were sent.
pub fn talker(
    topic: &str,
    rate: f64,
    count: Option<u64>,
    wait_for: Option<usize>,
) -> anyhow::Result<u64> {
    let ctx = Context::from_env()?;
    let node = ctx.node("talker").create()?;
    let imu = node.publisher::<Imu>(topic).create()?;
    if let Some(n) = wait_for {
        anyhow::ensure!(
            imu.wait_for_subscribers(n, Duration::from_secs(10)),
            "no subscriber on {topic} within 10 s"
        );
    }
    println!(
        "talker: publishing Imu on {topic} at {rate} Hz (domain {})",
        ctx.domain()
    );
    let period = Duration::from_secs_f64(1.0 / rate);
    let start = Instant::now();
    let mut k = 0u64;
    while !nerve::shutdown::requested() && count.is_none_or(|c| k < c) {
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
        sleep_until_tick(start, period, k);
    }
    println!("talker: sent {k} messages");
    Ok(k)
}

/// What the listener saw.
#[derive(Debug, Clone, Copy)]
pub struct ListenerReport {
    /// Messages received.
    pub received: u64,
    /// Messages lost (sequence gaps).
    pub lost: u64,
    /// Mean publish-to-receive latency in µs.
    pub mean_latency_us: f64,
    /// Largest publish-to-receive latency in µs.
    pub max_latency_us: f64,
}

/// Receives Imu messages on `topic` until shutdown, `count` messages, or `idle` without one;
/// prints a line a second (or every message when `verbose`).
pub fn listener(
    topic: &str,
    count: Option<u64>,
    idle: Duration,
    verbose: bool,
) -> anyhow::Result<ListenerReport> {
    let ctx = Context::from_env()?;
    let node = ctx.node("listener").create()?;
    let sub = node.subscriber::<Imu>(topic).create()?;
    println!(
        "listener: waiting for Imu on {topic} (domain {})",
        ctx.domain()
    );
    let (mut n, mut sum, mut max) = (0u64, 0u64, 0u64);
    let mut last_report = Instant::now();
    let mut last_msg = Instant::now();
    while !nerve::shutdown::requested() && count.is_none_or(|c| n < c) {
        let Some(m) = sub.recv_timeout(Duration::from_millis(200))? else {
            if last_msg.elapsed() >= idle {
                break;
            }
            continue;
        };
        last_msg = Instant::now();
        n += 1;
        let latency = nerve::mono_ns().saturating_sub(m.header().publish_mono_ns);
        sum += latency;
        max = max.max(latency);
        if verbose {
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
                sum as f64 / n as f64 / 1e3
            );
            last_report = Instant::now();
        }
    }
    let report = ListenerReport {
        received: n,
        lost: sub.stats().lost,
        mean_latency_us: if n > 0 {
            sum as f64 / n as f64 / 1e3
        } else {
            0.0
        },
        max_latency_us: max as f64 / 1e3,
    };
    println!(
        "listener: received {} messages, {} lost",
        report.received, report.lost
    );
    Ok(report)
}

/// FNV-1a over bytes: a cheap checksum that catches torn or stale payloads.
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for chunk in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h ^= u64::from_le_bytes(w);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Fills `data` with a pattern that depends on `seq`, and stores the checksum of
/// everything before the last 8 bytes in those bytes.
pub fn fill_cloud(data: &mut [u8], seq: u64) {
    let n = data.len().saturating_sub(8);
    let mut x = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for chunk in data[..n].chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
    let c = checksum(&data[..n]);
    data[n..].copy_from_slice(&c.to_le_bytes());
}

/// Verifies a payload written by [`fill_cloud`].
pub fn verify_cloud(data: &[u8]) -> bool {
    if data.len() < 8 {
        return false;
    }
    let n = data.len() - 8;
    checksum(&data[..n]).to_le_bytes() == data[n..]
}

/// Sleeps until `start + period * k`, absolute, so rates do not drift.
pub fn sleep_until_tick(start: std::time::Instant, period: Duration, k: u64) {
    let next = start + period.mul_f64(k as f64);
    if let Some(d) = next.checked_duration_since(std::time::Instant::now()) {
        std::thread::sleep(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloud_checksum_detects_corruption() {
        let mut d = vec![0u8; 1000];
        fill_cloud(&mut d, 7);
        assert!(verify_cloud(&d));
        d[10] ^= 1;
        assert!(!verify_cloud(&d));
    }
}
