//! A small perception pipeline to replay deterministically (`nerve replay`, issue 33).
//!
//! Three nodes, each runnable as its own process or all in one:
//! - `filter`: `/scan` (`nerve_msgs::LaserScan`) → `/filtered`: readings outside the
//!   scan's `[range_min, range_max]` are dropped (set to +inf, "no return" as REP 117
//!   has it, so every ray keeps its angle); the input's stamp is kept.
//! - `detector`: keeps the latest `/filtered` scan and, on a 10 Hz executor timer (so it
//!   runs in simulation time under a replay), publishes `/detections`: clusters of
//!   consecutive rays (centroid, size, points), stamped with `nerve::time::now_ns()`.
//! - `fuser`: `/detections` + `/odom` (`nerve_msgs::Odometry`) → `/fused`: every
//!   detection in the odometry frame, using the latest pose.
//!
//! ```text
//! replay_pipeline filter|detector|fuser [--slow-ms N] [--depth N] [--crash-after N] [--gain G]
//! replay_pipeline all [--threads N] [--slow ROLE --slow-ms N] [--depth N] [--crash-after N]
//! replay_pipeline gen-bag OUT.mcap [--seconds S] [--scan-hz H] [--odom-hz H] [--overwrite]
//! ```
//!
//! Everything a node computes is plain f32/f64 arithmetic of its inputs and the robot
//! clock: no randomness, no wall clock. `gen-bag` writes a bag of `/scan` and `/odom` from
//! formulas of time alone (from 1 700 000 000 s since the epoch), without a recorder.

use clap::{Args, Parser, Subcommand, ValueEnum};
use nerve::prelude::*;
use nerve::{CallbackGroup, MultiThreadedExecutor};
use nerve_msgs::{FrameId, Header, LaserScan, Odometry, Time};
use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Most clusters a detection message holds.
const MAX_CLUSTERS: usize = 16;
/// Rays closer than this (m) in range belong to one cluster.
const CLUSTER_GAP: f32 = 0.3;
/// Fewest rays of a cluster.
const CLUSTER_MIN_POINTS: u32 = 2;
/// First time of a generated bag, ns since the epoch.
const EPOCH_NS: u64 = 1_700_000_000_000_000_000;

/// One cluster of consecutive rays, in the scanner's frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, nerve::Pod)]
#[repr(C)]
struct Cluster {
    /// Centroid x, m.
    x: f32,
    /// Centroid y, m.
    y: f32,
    /// Distance between its first and last point, m.
    size: f32,
    /// Rays in it.
    points: u32,
}

/// Clusters found in one scan (`/detections`).
#[derive(Clone, Copy, Debug, Default, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "replay_pipeline/Detections")]
struct Detections {
    /// Robot time of the detection (`nerve::time::now_ns()`), frame of the scan.
    header: Header,
    /// Stamp of the scan the clusters come from.
    scan_stamp: Time,
    /// Clusters used in `clusters`.
    count: u32,
    /// Valid rays of that scan.
    valid_rays: u32,
    clusters: [Cluster; MAX_CLUSTERS],
}

/// One detection in the odometry frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, nerve::Pod)]
#[repr(C)]
struct Target {
    /// Position in the odometry frame, m.
    x: f64,
    y: f64,
    /// Distance from the robot, m.
    range: f64,
    /// Size times the fuser's gain.
    score: f64,
}

/// Detections placed with the latest odometry (`/fused`).
#[derive(Clone, Copy, Debug, Default, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "replay_pipeline/Fused")]
struct Fused {
    /// The detection's stamp, in the odometry frame.
    header: Header,
    /// Stamp of the odometry used (0: none yet).
    odom_stamp: Time,
    /// The robot's pose used: x, y (m), yaw (rad).
    robot_x: f64,
    robot_y: f64,
    robot_yaw: f64,
    /// Targets used in `targets`.
    count: u32,
    /// Odometry messages seen so far.
    odom_seen: u32,
    targets: [Target; MAX_CLUSTERS],
}

#[derive(Parser)]
#[command(about = "A laser perception pipeline (filter, detector, fuser) for deterministic replay")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// /scan → /filtered: drops readings outside the scan's range limits.
    Filter(NodeArgs),
    /// /filtered → /detections on a 10 Hz timer: clusters of consecutive rays.
    Detector(NodeArgs),
    /// /detections + /odom → /fused: detections in the odometry frame.
    Fuser(NodeArgs),
    /// All three nodes in this process.
    All(AllArgs),
    /// Writes a deterministic input bag (/scan, /odom) without a recorder.
    GenBag(GenArgs),
}

#[derive(Args, Clone)]
struct NodeArgs {
    /// Sleep this many ms in every callback (of the role named by --slow under `all`).
    #[arg(long, default_value_t = 0)]
    slow_ms: u64,
    /// Subscriber queue depth.
    #[arg(long, default_value_t = 10)]
    depth: usize,
    /// Exit with status 3 after handling this many messages (crash detection tests).
    #[arg(long)]
    crash_after: Option<u64>,
    /// The fuser's gain on each target's score.
    #[arg(long, default_value_t = 1.0)]
    gain: f64,
    /// The detector's rate, Hz.
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
}

#[derive(Args)]
struct AllArgs {
    #[command(flatten)]
    node: NodeArgs,
    /// Worker threads (2 or more: a `MultiThreadedExecutor`, one mutually exclusive
    /// group per node).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// The role that --slow-ms slows down.
    #[arg(long, value_enum)]
    slow: Option<Role>,
}

#[derive(Args)]
struct GenArgs {
    /// The bag to write.
    out: PathBuf,
    /// Seconds of data.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Scans a second.
    #[arg(long, default_value_t = 20.0)]
    scan_hz: f64,
    /// Odometry messages a second.
    #[arg(long, default_value_t = 50.0)]
    odom_hz: f64,
    /// Rays per scan.
    #[arg(long, default_value_t = 181)]
    rays: usize,
    /// Replace OUT if it exists.
    #[arg(long)]
    overwrite: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Role {
    Filter,
    Detector,
    Fuser,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Filter => "filter",
            Role::Detector => "detector",
            Role::Fuser => "fuser",
        }
    }
}

/// The detector's latest scan: head and ranges.
type Latest = Rc<RefCell<Option<(LaserScan, Vec<f32>)>>>;

/// Messages this process handled (for --crash-after).
static HANDLED: AtomicU64 = AtomicU64::new(0);

/// What every callback of a role does besides its work.
#[derive(Clone, Copy)]
struct Behaviour {
    slow: Duration,
    crash_after: Option<u64>,
}

impl Behaviour {
    /// A message was handled: maybe sleep (--slow-ms), maybe crash (--crash-after).
    fn handled(&self, role: Role) {
        if !self.slow.is_zero() {
            std::thread::sleep(self.slow);
        }
        let n = HANDLED.fetch_add(1, Ordering::SeqCst) + 1;
        if self.crash_after.is_some_and(|c| n >= c) {
            eprintln!(
                "replay_pipeline {}: crashing after {n} messages (--crash-after)",
                role.name()
            );
            std::process::exit(3);
        }
    }
    /// A timer fired: maybe sleep.
    fn ticked(&self) {
        if !self.slow.is_zero() {
            std::thread::sleep(self.slow);
        }
    }
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Filter(a) => run_one(Role::Filter, a),
        Cmd::Detector(a) => run_one(Role::Detector, a),
        Cmd::Fuser(a) => run_one(Role::Fuser, a),
        Cmd::All(a) => run_all(a),
        Cmd::GenBag(a) => gen_bag(&a),
    };
    if let Err(e) = r {
        eprintln!("replay_pipeline: {e:#}");
        std::process::exit(1);
    }
}

fn behaviour(args: &NodeArgs, slowed: bool) -> Behaviour {
    Behaviour {
        slow: if slowed {
            Duration::from_millis(args.slow_ms)
        } else {
            Duration::ZERO
        },
        crash_after: args.crash_after,
    }
}

fn run_one(role: Role, args: NodeArgs) -> anyhow::Result<()> {
    let ctx = Context::from_env()?;
    let mut exec = Executor::new();
    let b = behaviour(&args, true);
    add_role(&ctx, &mut exec, role, &args, b)?;
    println!(
        "replay_pipeline {}: ready (domain {}{})",
        role.name(),
        ctx.config().domain,
        if ctx.in_lockstep() { ", lockstep" } else { "" }
    );
    exec.spin()?;
    Ok(())
}

fn run_all(args: AllArgs) -> anyhow::Result<()> {
    if args.slow.is_none() && args.node.slow_ms > 0 {
        anyhow::bail!("--slow-ms under `all` needs --slow ROLE (filter, detector or fuser)");
    }
    let roles = [Role::Filter, Role::Detector, Role::Fuser];
    let ctx = Context::from_env()?;
    let lockstep = if ctx.in_lockstep() { ", lockstep" } else { "" };
    if args.threads <= 1 {
        let mut exec = Executor::new();
        for role in roles {
            let b = behaviour(&args.node, args.slow == Some(role));
            add_role(&ctx, &mut exec, role, &args.node, b)?;
        }
        println!(
            "replay_pipeline all: ready (domain {}{lockstep})",
            ctx.config().domain
        );
        exec.spin()?;
        return Ok(());
    }
    let mut mt = MultiThreadedExecutor::new(args.threads);
    for role in roles {
        let group = mt.group(CallbackGroup::MutuallyExclusive);
        let b = behaviour(&args.node, args.slow == Some(role));
        let (ctx, node_args) = (ctx.clone(), args.node.clone());
        mt.add(group, move |exec| {
            add_role(&ctx, exec, role, &node_args, b)
                .map_err(|e| nerve::ExecError::Thread(format!("{}: {e:#}", role.name())))
        });
    }
    println!(
        "replay_pipeline all: ready ({} threads, domain {}{lockstep})",
        args.threads,
        ctx.config().domain
    );
    mt.spin(Duration::from_millis(500))?;
    Ok(())
}

/// Creates `role`'s node, ports and callbacks on `exec`.
fn add_role(
    ctx: &Context,
    exec: &mut Executor,
    role: Role,
    args: &NodeArgs,
    b: Behaviour,
) -> anyhow::Result<()> {
    let qos = Qos::sensor().depth(args.depth);
    let node = ctx.node(role.name()).create()?;
    match role {
        Role::Filter => {
            let out = node.publisher::<LaserScan>("/filtered").create()?;
            let scans = node.subscriber::<LaserScan>("/scan").qos(qos).create()?;
            let mut ranges = Vec::new();
            exec.subscribe(scans, move |s: &Sample<LaserScan>| {
                let head = **s;
                filter_ranges(&head, s.elems(), &mut ranges);
                if let Err(e) = out.publish_slice(&head, &ranges) {
                    eprintln!("replay_pipeline filter: {e}");
                }
                b.handled(Role::Filter);
            })?;
        }
        Role::Detector => {
            let out = node.publisher::<Detections>("/detections").create()?;
            let filtered = node
                .subscriber::<LaserScan>("/filtered")
                .qos(qos)
                .create()?;
            let latest: Latest = Rc::new(RefCell::new(None));
            let keep = latest.clone();
            exec.subscribe(filtered, move |s: &Sample<LaserScan>| {
                let mut slot = keep.borrow_mut();
                let (head, ranges) = slot.get_or_insert_with(Default::default);
                *head = **s;
                ranges.clear();
                ranges.extend_from_slice(s.elems());
                drop(slot);
                b.handled(Role::Detector);
            })?;
            if !(args.rate > 0.0 && args.rate.is_finite()) {
                anyhow::bail!("--rate must be a positive number of Hz");
            }
            let period = Duration::from_secs_f64(1.0 / args.rate);
            exec.timer("detect", period, Overrun::Skip, move |_| {
                if let Some((head, ranges)) = &*latest.borrow() {
                    let d = detect(head, ranges, nerve::time::now_ns());
                    if let Err(e) = out.publish(&d) {
                        eprintln!("replay_pipeline detector: {e}");
                    }
                }
                b.ticked();
            })?;
        }
        Role::Fuser => {
            let out = node.publisher::<Fused>("/fused").create()?;
            let dets = node
                .subscriber::<Detections>("/detections")
                .qos(qos.clone())
                .create()?;
            let odoms = node.subscriber::<Odometry>("/odom").qos(qos).create()?;
            let pose: Rc<RefCell<(Option<Odometry>, u32)>> = Rc::new(RefCell::new((None, 0)));
            let keep = pose.clone();
            exec.subscribe(odoms, move |s: &Sample<Odometry>| {
                let mut p = keep.borrow_mut();
                p.0 = Some(**s);
                p.1 += 1;
                drop(p);
                b.handled(Role::Fuser);
            })?;
            let gain = args.gain;
            exec.subscribe(dets, move |s: &Sample<Detections>| {
                let (odom, seen) = *pose.borrow();
                let f = fuse(s, odom.as_ref(), seen, gain);
                if let Err(e) = out.publish(&f) {
                    eprintln!("replay_pipeline fuser: {e}");
                }
                b.handled(Role::Fuser);
            })?;
        }
    }
    Ok(())
}

/// The scan's ranges with readings outside its limits (or not finite) set to +inf.
fn filter_ranges(scan: &LaserScan, input: &[f32], out: &mut Vec<f32>) {
    // the ranges come first; intensities (if any) follow and are left out
    let n = if scan.intensity_count > 0 {
        input.len().saturating_sub(scan.intensity_count as usize)
    } else {
        input.len()
    };
    out.clear();
    out.extend(input[..n].iter().map(|&r| {
        if r.is_finite() && r >= scan.range_min && r <= scan.range_max {
            r
        } else {
            f32::INFINITY
        }
    }));
}

/// Clusters of consecutive valid rays whose ranges differ by less than [`CLUSTER_GAP`].
fn detect(scan: &LaserScan, ranges: &[f32], now_ns: i64) -> Detections {
    let mut d = Detections {
        header: Header {
            stamp: Time { nanos: now_ns },
            frame_id: scan.header.frame_id,
        },
        scan_stamp: scan.header.stamp,
        ..Default::default()
    };
    let valid = |r: f32| r.is_finite() && r >= scan.range_min && r <= scan.range_max;
    d.valid_rays = ranges.iter().filter(|&&r| valid(r)).count() as u32;
    let point = |i: usize| {
        let a = scan.angle_min + i as f32 * scan.angle_increment;
        (ranges[i] * a.cos(), ranges[i] * a.sin())
    };
    let mut i = 0;
    while i < ranges.len() && (d.count as usize) < MAX_CLUSTERS {
        if !valid(ranges[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i + 1 < ranges.len()
            && valid(ranges[i + 1])
            && (ranges[i + 1] - ranges[i]).abs() < CLUSTER_GAP
        {
            i += 1;
        }
        let end = i;
        i += 1;
        let points = (end - start + 1) as u32;
        if points < CLUSTER_MIN_POINTS {
            continue;
        }
        let (mut sx, mut sy) = (0.0f32, 0.0f32);
        for k in start..=end {
            let (x, y) = point(k);
            sx += x;
            sy += y;
        }
        let (x0, y0) = point(start);
        let (x1, y1) = point(end);
        d.clusters[d.count as usize] = Cluster {
            x: sx / points as f32,
            y: sy / points as f32,
            size: ((x1 - x0).powi(2) + (y1 - y0).powi(2)).sqrt(),
            points,
        };
        d.count += 1;
    }
    d
}

/// The yaw of a quaternion, rad.
fn yaw_of(q: &nerve_msgs::Quaternion) -> f64 {
    (2.0 * (q.w * q.z + q.x * q.y)).atan2(1.0 - 2.0 * (q.y * q.y + q.z * q.z))
}

/// The detections in the odometry frame (the scanner sits at the robot's origin).
fn fuse(d: &Detections, odom: Option<&Odometry>, odom_seen: u32, gain: f64) -> Fused {
    let (x, y, yaw) = odom.map_or((0.0, 0.0, 0.0), |o| {
        (
            o.pose.position.x,
            o.pose.position.y,
            yaw_of(&o.pose.orientation),
        )
    });
    let mut f = Fused {
        header: Header {
            stamp: d.header.stamp,
            frame_id: odom.map_or(FrameId::new("odom").expect("fits"), |o| o.header.frame_id),
        },
        odom_stamp: odom.map_or(Time::default(), |o| o.header.stamp),
        robot_x: x,
        robot_y: y,
        robot_yaw: yaw,
        count: d.count.min(MAX_CLUSTERS as u32),
        odom_seen,
        ..Default::default()
    };
    let (s, c) = yaw.sin_cos();
    for (t, cl) in f.targets.iter_mut().zip(&d.clusters[..f.count as usize]) {
        let (cx, cy) = (cl.x as f64, cl.y as f64);
        *t = Target {
            x: x + c * cx - s * cy,
            y: y + s * cx + c * cy,
            range: (cx * cx + cy * cy).sqrt(),
            score: gain * cl.size as f64,
        };
    }
    f
}

/// Writes the input bag: /scan and /odom from formulas of time, in time order (odometry
/// first at equal times).
fn gen_bag(a: &GenArgs) -> anyhow::Result<()> {
    for (name, v) in [
        ("--seconds", a.seconds),
        ("--scan-hz", a.scan_hz),
        ("--odom-hz", a.odom_hz),
    ] {
        if !(v > 0.0 && v.is_finite()) {
            anyhow::bail!("{name} must be a positive number");
        }
    }
    if a.rays < 2 {
        anyhow::bail!("--rays must be at least 2");
    }
    let times = |hz: f64| -> Vec<u64> {
        let n = (a.seconds * hz).round() as u64;
        (0..n)
            .map(|k| (k as f64 * 1e9 / hz).round() as u64)
            .collect()
    };
    let (scans, odoms) = (times(a.scan_hz), times(a.odom_hz));
    let mut bag = nerve_bag::write::BagWriter::create(&a.out, a.overwrite)?;
    bag.add_topic::<LaserScan>("/scan")?;
    bag.add_topic::<Odometry>("/odom")?;
    let (mut i, mut j) = (0, 0);
    let mut ranges = Vec::with_capacity(a.rays);
    while i < scans.len() || j < odoms.len() {
        if j < odoms.len() && (i >= scans.len() || odoms[j] <= scans[i]) {
            let t = odoms[j];
            bag.write("/odom", EPOCH_NS + t, &odometry(t))?;
            j += 1;
        } else {
            let t = scans[i];
            let head = scan(i as u64, t, a.rays, &mut ranges);
            bag.write_slice("/scan", EPOCH_NS + t, &head, &ranges)?;
            i += 1;
        }
    }
    bag.finish()?;
    println!(
        "replay_pipeline gen-bag: {} scans, {} odometry messages over {} s in {}",
        scans.len(),
        odoms.len(),
        a.seconds,
        a.out.display()
    );
    Ok(())
}

/// Scan `k` at `t` ns after the start: a wall, three moving objects, and readings too
/// close or too far on a fixed pattern.
fn scan(k: u64, t: u64, rays: usize, ranges: &mut Vec<f32>) -> LaserScan {
    let secs = t as f64 * 1e-9;
    let (amin, amax) = (-std::f64::consts::FRAC_PI_2, std::f64::consts::FRAC_PI_2);
    let inc = (amax - amin) / (rays - 1) as f64;
    ranges.clear();
    for i in 0..rays {
        let a = amin + i as f64 * inc;
        let mut r = 8.0 + 0.5 * (3.0 * a).sin();
        for j in 0..3 {
            let jf = j as f64;
            let centre = -1.0 + jf + 0.3 * (secs * (0.5 + 0.2 * jf)).sin();
            let dist = 2.0 + 1.5 * jf + 0.5 * (0.7 * secs + jf).cos();
            if (a - centre).abs() < 0.08 + 0.02 * jf {
                r = r.min(dist);
            }
        }
        let i = i as u64;
        if (i * 7 + k).is_multiple_of(29) {
            r = 0.02; // closer than range_min
        } else if (i * 11 + k).is_multiple_of(31) {
            r = 60.0; // farther than range_max
        }
        ranges.push(r as f32);
    }
    LaserScan {
        header: Header {
            stamp: Time {
                nanos: (EPOCH_NS + t) as i64,
            },
            frame_id: FrameId::new("laser").expect("fits"),
        },
        angle_min: amin as f32,
        angle_max: amax as f32,
        angle_increment: inc as f32,
        time_increment: 0.0,
        scan_time: 0.05,
        range_min: 0.1,
        range_max: 30.0,
        intensity_count: 0,
    }
}

/// The robot's odometry at `t` ns after the start: a slow curve.
fn odometry(t: u64) -> Odometry {
    let s = t as f64 * 1e-9;
    let yaw = 0.1 * s;
    let mut o = Odometry::default();
    o.header.stamp = Time {
        nanos: (EPOCH_NS + t) as i64,
    };
    o.header.frame_id = FrameId::new("odom").expect("fits");
    o.child_frame_id = FrameId::new("base_link").expect("fits");
    o.pose.position.x = 0.5 * s;
    o.pose.position.y = 0.2 * s.sin();
    o.pose.orientation.z = (yaw / 2.0).sin();
    o.pose.orientation.w = (yaw / 2.0).cos();
    o.twist.linear.x = 0.5;
    o.twist.angular.z = 0.1;
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_drops_out_of_range_readings_and_the_detector_clusters() {
        let mut ranges = Vec::new();
        let head = scan(0, 0, 181, &mut ranges);
        let mut filtered = Vec::new();
        filter_ranges(&head, &ranges, &mut filtered);
        assert_eq!(filtered.len(), ranges.len(), "every ray keeps its angle");
        assert!(
            filtered.iter().any(|r| r.is_infinite()),
            "some readings dropped"
        );
        assert!(filtered
            .iter()
            .all(|&r| r.is_infinite() || (0.1..=30.0).contains(&r)));
        let d = detect(&head, &filtered, 42);
        assert!(d.count >= 3, "the three objects at least: {d:?}");
        assert_eq!(d.header.stamp.nanos, 42);
        assert_eq!(d.scan_stamp, head.header.stamp);
        let f = fuse(&d, Some(&odometry(1_000_000_000)), 1, 2.0);
        assert_eq!(f.count, d.count);
        assert_eq!(f.targets[0].score, 2.0 * d.clusters[0].size as f64);
        assert_eq!(
            f,
            fuse(&d, Some(&odometry(1_000_000_000)), 1, 2.0),
            "deterministic"
        );
    }
}
