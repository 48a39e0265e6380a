//! The child processes of `nerve bench replay`: the echo node, the two pipeline processes
//! (every one an [`Executor`] node, so a lockstep replay counts its callbacks) and the CPU
//! hog; and the lidar-like data the bag is made of.

use crate::harness::child::{say, stdin_closed};
use crate::peers::stream::OUSTER_POINT_STEP;
use nerve::prelude::*;
use nerve_msgs::{CmdVel, Odometry, PointCloud, Time};
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The topics of the replayed pipeline.
pub const SCAN: &str = "/scan";
/// Odometry in the bag.
pub const ODOM: &str = "/odom";
/// The filter's output.
pub const FILTERED: &str = "/filtered";
/// The detector's output.
pub const DETECTIONS: &str = "/detections";
/// The fuser's output (a 10 Hz timer in simulation time).
pub const FUSED: &str = "/fused";
/// The pipeline's outputs, in report order.
pub const OUTPUTS: [&str; 3] = [FILTERED, DETECTIONS, FUSED];
/// Angular sectors of the detector.
pub const SECTORS: usize = 16;
/// Bytes per detection (x, y, z, count as f32).
pub const DETECTION_STEP: usize = 16;
/// Period of the fuser's timer.
pub const FUSE_PERIOD: Duration = Duration::from_millis(100);

/// One child's settings (`nerve bench role replay-echo|replay-stage <json>`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeSpec {
    /// echo, filter or detector.
    pub stage: String,
    /// Nerve domain.
    pub domain: u32,
    /// Whether the context joins the domain's replay (`Config::lockstep`).
    pub lockstep: bool,
    /// The echo's input topic.
    pub input: String,
    /// The echo's output topic.
    pub output: String,
    /// Subscribers each output waits for before the node says `ready`.
    pub wait_subscribers: usize,
}

/// A context in `domain`, joining the domain's replay when `lockstep` is set.
pub(super) fn context(domain: u32, lockstep: bool) -> Result<Context, String> {
    let mut cfg = nerve::Config::default()
        .domain(domain)
        .map_err(|e| e.to_string())?;
    cfg.lockstep = lockstep;
    Context::new(cfg).map_err(|e| e.to_string())
}

/// A publisher of `M` on `topic` with the default QoS.
pub(super) fn publisher<M: Message>(node: &Node, topic: &str) -> Result<Publisher<M>, String> {
    node.publisher::<M>(topic)
        .create()
        .map_err(|e| e.to_string())
}

/// A subscriber of `M` on `topic` with sensor QoS of queue depth `depth`.
pub(super) fn subscriber<M: Message>(
    node: &Node,
    topic: &str,
    depth: usize,
) -> Result<Subscriber<M>, String> {
    node.subscriber::<M>(topic)
        .qos(Qos::sensor().depth(depth))
        .create()
        .map_err(|e| e.to_string())
}

/// Waits until `out` has `n` subscribers.
fn ready<M: Message>(out: &Publisher<M>, n: usize, topic: &str) -> Result<(), String> {
    let wait = Duration::from_secs(20);
    if out.wait_for_subscribers(n, wait) {
        Ok(())
    } else {
        Err(format!("{topic}: no subscriber within {wait:?}"))
    }
}

/// Runs a child node until its stdin closes: says `ready` once its outputs have their
/// subscribers, then spins its executor.
pub fn run_node(spec: &NodeSpec) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let ctx = context(spec.domain, spec.lockstep)?;
    let node = ctx
        .node(&format!("replay_{}", spec.stage))
        .create()
        .map_err(|e| err(&e))?;
    let n = spec.wait_subscribers;
    let mut exec = Executor::new();
    match spec.stage.as_str() {
        "echo" => {
            let out = publisher::<CmdVel>(&node, &spec.output)?;
            let sub = subscriber::<CmdVel>(&node, &spec.input, 16)?;
            ready(&out, n, &spec.output)?;
            exec.subscribe(sub, move |s| {
                if let Err(e) = out.publish(s) {
                    eprintln!("echo: {e}");
                }
            })
            .map_err(|e| err(&e))?;
        }
        "filter" => {
            let out = publisher::<PointCloud>(&node, FILTERED)?;
            let sub = subscriber::<PointCloud>(&node, SCAN, 8)?;
            ready(&out, n, FILTERED)?;
            exec.subscribe(sub, move |c| {
                if let Err(e) = filter(c, c.elems(), &out) {
                    eprintln!("filter: {e}");
                }
            })
            .map_err(|e| err(&e))?;
        }
        "detector" => {
            let det = publisher::<PointCloud>(&node, DETECTIONS)?;
            let fused = publisher::<Odometry>(&node, FUSED)?;
            let filtered = subscriber::<PointCloud>(&node, FILTERED, 8)?;
            let odom = subscriber::<Odometry>(&node, ODOM, 16)?;
            ready(&det, n, DETECTIONS)?;
            ready(&fused, n, FUSED)?;
            // the latest detection summary (non-empty sectors, nearest centroid range)
            let seen: Rc<Cell<(u32, f64)>> = Rc::new(Cell::new((0, 0.0)));
            let pose: Rc<Cell<Odometry>> = Rc::new(Cell::new(Odometry::default()));
            {
                let seen = seen.clone();
                exec.subscribe(filtered, move |c| match detect(c, c.elems(), &det) {
                    Ok(s) => seen.set(s),
                    Err(e) => eprintln!("detector: {e}"),
                })
                .map_err(|e| err(&e))?;
            }
            {
                let pose = pose.clone();
                exec.subscribe(odom, move |o| pose.set(**o))
                    .map_err(|e| err(&e))?;
            }
            exec.timer("fuse", FUSE_PERIOD, Overrun::CatchUp, move |tick| {
                let (sectors, nearest) = seen.get();
                let mut m = pose.get();
                m.header.stamp = Time {
                    nanos: tick.deadline_ns as i64,
                };
                m.twist.linear.x = f64::from(sectors);
                m.twist.linear.y = nearest;
                m.twist.angular.z = tick.count as f64;
                if let Err(e) = fused.publish(&m) {
                    eprintln!("fuser: {e}");
                }
            })
            .map_err(|e| err(&e))?;
        }
        other => return Err(format!("unknown replay stage {other:?}")),
    }
    let stop = stdin_closed();
    let handle = exec.handle();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        handle.stop();
    });
    say("ready");
    exec.spin().map_err(|e| err(&e))?;
    say("done");
    Ok(())
}

fn f32_at(p: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]])
}

/// Keeps the points within 40 m in the plane and above -1.5 m (ground and far returns
/// removed), every field of each kept point copied.
fn filter(head: &PointCloud, data: &[u8], out: &Publisher<PointCloud>) -> Result<(), String> {
    let step = (head.point_step as usize).max(12);
    let keep = |p: &[u8]| {
        let (x, y, z) = (f32_at(p, 0), f32_at(p, 4), f32_at(p, 8));
        x * x + y * y <= 1600.0 && z > -1.5
    };
    let kept = data.chunks_exact(step).filter(|p| keep(p)).count();
    let mut loan = out.loan_slice(kept * step).map_err(|e| e.to_string())?;
    *loan.head_mut() = *head;
    loan.head_mut().height = 1;
    loan.head_mut().width = kept as u32;
    loan.head_mut().row_step = (kept * step) as u32;
    for (dst, src) in loan
        .elems_mut()
        .chunks_exact_mut(step)
        .zip(data.chunks_exact(step).filter(|p| keep(p)))
    {
        dst.copy_from_slice(src);
    }
    loan.send().map_err(|e| e.to_string())
}

/// One centroid per angular sector of the filtered cloud (x, y, z, points as f32);
/// returns the non-empty sectors and the nearest centroid's range.
fn detect(
    head: &PointCloud,
    data: &[u8],
    out: &Publisher<PointCloud>,
) -> Result<(u32, f64), String> {
    let step = (head.point_step as usize).max(12);
    let mut sums = [[0f64; 4]; SECTORS];
    for p in data.chunks_exact(step) {
        let (x, y, z) = (f32_at(p, 0), f32_at(p, 4), f32_at(p, 8));
        let a = (y as f64).atan2(x as f64) + std::f64::consts::PI;
        let s = ((a / std::f64::consts::TAU * SECTORS as f64) as usize).min(SECTORS - 1);
        let acc = &mut sums[s];
        acc[0] += x as f64;
        acc[1] += y as f64;
        acc[2] += z as f64;
        acc[3] += 1.0;
    }
    let mut loan = out
        .loan_slice(SECTORS * DETECTION_STEP)
        .map_err(|e| e.to_string())?;
    *loan.head_mut() = PointCloud {
        header: head.header,
        height: 1,
        width: SECTORS as u32,
        point_step: DETECTION_STEP as u32,
        row_step: (SECTORS * DETECTION_STEP) as u32,
        ..Default::default()
    };
    let (mut sectors, mut nearest) = (0u32, f64::INFINITY);
    for (dst, acc) in loan.elems_mut().chunks_exact_mut(DETECTION_STEP).zip(&sums) {
        let n = acc[3].max(1.0);
        let c = [acc[0] / n, acc[1] / n, acc[2] / n];
        if acc[3] > 0.0 {
            sectors += 1;
            nearest = nearest.min((c[0] * c[0] + c[1] * c[1]).sqrt());
        }
        for (i, v) in [c[0], c[1], c[2], acc[3]].iter().enumerate() {
            dst[i * 4..i * 4 + 4].copy_from_slice(&(*v as f32).to_le_bytes());
        }
    }
    loan.send().map_err(|e| e.to_string())?;
    Ok((sectors, if sectors > 0 { nearest } else { 0.0 }))
}

/// Writes sweep `k` of a simulated spinning lidar (`columns` x `beams` points of
/// [`OUSTER_POINT_STEP`] bytes: x, y, z, intensity as f32, then the driver's other fields)
/// into `out`: a room whose walls move with `k`, some returns below the ground and beyond
/// 40 m, so the filter has something to remove.
pub fn sweep(k: u64, columns: usize, beams: usize, out: &mut [u8]) {
    for (i, p) in out.chunks_exact_mut(OUSTER_POINT_STEP).enumerate() {
        let (col, beam) = (i / beams, i % beams);
        let az = col as f64 / columns as f64 * std::f64::consts::TAU;
        let el = (beam as f64 / beams.max(2) as f64 - 0.5) * 0.6;
        // pseudo-random range per point and sweep: walls at 5-60 m
        let mut h = (k.wrapping_mul(0x9e37_79b9_7f4a_7c15)) ^ (i as u64).wrapping_mul(0xff51_afd7);
        h ^= h >> 29;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 32;
        let r = 5.0 + (h % 55_000) as f64 / 1000.0;
        let (x, y, z) = (
            r * el.cos() * az.cos(),
            r * el.cos() * az.sin(),
            r * el.sin(),
        );
        p[..4].copy_from_slice(&(x as f32).to_le_bytes());
        p[4..8].copy_from_slice(&(y as f32).to_le_bytes());
        p[8..12].copy_from_slice(&(z as f32).to_le_bytes());
        p[12..16].copy_from_slice(&((h >> 40) as f32).to_le_bytes());
        p[16..24].copy_from_slice(&k.to_le_bytes());
        p[24..28].copy_from_slice(&(beam as u32).to_le_bytes());
        p[28..].fill(0);
    }
}

/// The CPU hog of the determinism runs: `threads` threads spinning until stdin closes.
pub fn run_hog(threads: usize) -> Result<(), String> {
    let stop = stdin_closed();
    let done = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..threads.max(1))
        .map(|_| {
            let done = done.clone();
            std::thread::spawn(move || {
                let mut x = 1u64;
                while !done.load(Ordering::Relaxed) {
                    for _ in 0..10_000 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    }
                    std::hint::black_box(x);
                }
            })
        })
        .collect();
    say("ready");
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
    done.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
    Ok(())
}
