//! `nerve tf …`: the frame tree, one transform, per-frame rates and delays, as a
//! [`TransformListener`] hears them on `/tf` and `/tf_static`.

use crate::failure::{usage, CmdResult, Failure};
use crate::output::{self, Format};
use clap::Subcommand;
use nerve_tf::{FrameInfo, TfBuffer, TransformListener, TreeLimits, LATEST};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Transform commands.
#[derive(Subcommand)]
pub enum TfCommand {
    /// Print the frame tree: parents, rates, newest stamps, static or not.
    Tree {
        /// Seconds to listen before printing (rates need a few transforms).
        #[arg(long, default_value_t = 2.0)]
        wait: f64,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Print the transform of SOURCE in TARGET (and its age) until interrupted.
    Echo {
        /// Target frame (the transform maps SOURCE's points into it).
        target: String,
        /// Source frame.
        source: String,
        /// Prints per second.
        #[arg(long, default_value_t = 1.0)]
        rate: f64,
        /// Print once and exit.
        #[arg(long)]
        once: bool,
        /// Seconds to wait for the transform before giving up.
        #[arg(long, default_value_t = 5.0)]
        timeout: f64,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Print every frame's rate and delay (now − newest stamp), each second.
    Monitor {
        /// Stop after this many seconds (default: until interrupted).
        #[arg(long)]
        duration: Option<f64>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
}

fn seconds(what: &str, s: f64) -> Result<Duration, Failure> {
    if !s.is_finite() || !(0.0..=1e6).contains(&s) {
        return Err(usage(format!(
            "--{what} must be 0 to 1000000 seconds, not {s}"
        )));
    }
    Ok(Duration::from_secs_f64(s))
}

fn listen(ctx: &nerve::Context) -> Result<TransformListener, Failure> {
    let buffer = Arc::new(TfBuffer::new(TreeLimits::default()));
    let name = format!("nerve_cli_tf_{}", std::process::id());
    Ok(TransformListener::spawn(ctx, &name, buffer)?)
}

/// Sleeps up to `d`, in short steps, unless Ctrl-C / SIGTERM came: false if it did.
fn pause(d: Duration) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if nerve::shutdown::requested() {
            return false;
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(50)));
    }
    !nerve::shutdown::requested()
}

fn secs(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e9)
}

/// Runs a `nerve tf` command.
pub fn run(ctx: &nerve::Context, cmd: TfCommand) -> CmdResult {
    match cmd {
        TfCommand::Tree { wait, format } => {
            let wait = seconds("wait", wait)?;
            let listener = listen(ctx)?;
            if !pause(wait) {
                return Err(Failure::Interrupted);
            }
            let frames = listener.buffer().frames();
            print_tree(&frames, format)
        }
        TfCommand::Echo {
            target,
            source,
            rate,
            once,
            timeout,
            format,
        } => {
            if !rate.is_finite() || rate <= 0.0 || rate > 1000.0 {
                return Err(usage(format!(
                    "--rate must be above 0 and at most 1000 Hz, not {rate}"
                )));
            }
            for f in [&target, &source] {
                if f.is_empty() || f.chars().any(char::is_whitespace) {
                    return Err(usage(format!("invalid frame name {f:?}")));
                }
            }
            let timeout = seconds("timeout", timeout)?;
            let listener = listen(ctx)?;
            let buffer = listener.buffer().clone();
            let deadline = Instant::now() + timeout;
            // wait for the chain, in steps so Ctrl-C is heard
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match buffer.wait_for_transform(
                    target.as_str(),
                    source.as_str(),
                    LATEST,
                    left.min(Duration::from_millis(100)),
                ) {
                    Ok(_) => break,
                    Err(e) if left.is_zero() => {
                        return Err(Failure::Runtime(anyhow::anyhow!(
                            "no transform of {source} in {target} after {:.1} s: {e}",
                            timeout.as_secs_f64()
                        )))
                    }
                    Err(_) if nerve::shutdown::requested() => return Err(Failure::Interrupted),
                    Err(_) => {}
                }
            }
            let period = Duration::from_secs_f64(1.0 / rate);
            loop {
                let t = buffer.lookup_transform(target.as_str(), source.as_str(), LATEST)?;
                let stamp = buffer.latest_stamp(target.as_str(), source.as_str())?;
                let age_ns = stamp.map(|s| nerve::wall_ns() - s);
                let (v, q) = (t.translation, t.rotation);
                let (roll, pitch, yaw) = rpy(q.x, q.y, q.z, q.w);
                let mut out = std::io::stdout().lock();
                match format {
                    Format::Json => writeln!(
                        out,
                        "{}",
                        json!({
                            "target": target, "source": source,
                            "stamp_ns": stamp, "age_ns": age_ns,
                            "translation": [v.x, v.y, v.z],
                            "rotation": [q.x, q.y, q.z, q.w],
                            "rpy": [roll, pitch, yaw],
                        })
                    )?,
                    Format::Human => {
                        let when = match (stamp, age_ns) {
                            (Some(s), Some(a)) => format!("at {} s, age {} s", secs(s), secs(a)),
                            _ => "static".to_string(),
                        };
                        writeln!(out, "{source} in {target} ({when})")?;
                        writeln!(out, "  translation: [{:.6}, {:.6}, {:.6}]", v.x, v.y, v.z)?;
                        writeln!(
                            out,
                            "  rotation:    [{:.6}, {:.6}, {:.6}, {:.6}] (x y z w)",
                            q.x, q.y, q.z, q.w
                        )?;
                        writeln!(
                            out,
                            "  rpy (deg):   [{:.3}, {:.3}, {:.3}]",
                            roll.to_degrees(),
                            pitch.to_degrees(),
                            yaw.to_degrees()
                        )?;
                    }
                }
                out.flush()?;
                drop(out);
                if once {
                    return Ok(());
                }
                if !pause(period) {
                    return Ok(());
                }
            }
        }
        TfCommand::Monitor { duration, format } => {
            let limit = duration.map(|d| seconds("duration", d)).transpose()?;
            let start = Instant::now();
            let listener = listen(ctx)?;
            let buffer = listener.buffer().clone();
            // per frame: stored count at the previous report
            let mut before: BTreeMap<String, u64> = BTreeMap::new();
            let mut last = Instant::now();
            loop {
                let step = match limit {
                    Some(l) => l
                        .saturating_sub(start.elapsed())
                        .min(Duration::from_secs(1)),
                    None => Duration::from_secs(1),
                };
                let interrupted = !pause(step);
                let dt = last.elapsed().as_secs_f64().max(1e-9);
                last = Instant::now();
                let now = nerve::wall_ns();
                let mut rows = Vec::new();
                let mut items = Vec::new();
                for f in buffer.frames().iter().filter(|f| f.parent.is_some()) {
                    let stored = buffer.stored(f.name.as_str()).unwrap_or(0);
                    let prev = before.insert(f.name.clone(), stored).unwrap_or(0);
                    let rate = (stored - prev) as f64 / dt;
                    let delay = (!f.is_static)
                        .then_some(f.newest_ns)
                        .flatten()
                        .map(|s| now - s);
                    items.push(json!({
                        "frame": f.name, "parent": f.parent, "static": f.is_static,
                        "rate_hz": rate, "delay_ns": delay,
                    }));
                    rows.push(vec![
                        f.name.clone(),
                        f.parent.clone().unwrap_or_default(),
                        if f.is_static {
                            "static".into()
                        } else {
                            format!("{rate:.1}")
                        },
                        delay.map_or("–".into(), |d| format!("{:.3}", d as f64 / 1e6)),
                    ]);
                }
                match format {
                    Format::Json => println!("{}", json!({ "frames": items })),
                    Format::Human => {
                        output::table(&["frame", "parent", "rate Hz", "delay ms"], &rows)?;
                        println!();
                    }
                }
                let done = limit.is_some_and(|l| start.elapsed() >= l);
                if interrupted || done {
                    return Ok(());
                }
            }
        }
    }
}

/// Roll, pitch, yaw (rad) of a unit quaternion (x y z w), ZYX as ROS writes them.
fn rpy(x: f64, y: f64, z: f64, w: f64) -> (f64, f64, f64) {
    let roll = (2.0 * (w * x + y * z)).atan2(1.0 - 2.0 * (x * x + y * y));
    let pitch = (2.0 * (w * y - z * x)).clamp(-1.0, 1.0).asin();
    let yaw = (2.0 * (w * z + x * y)).atan2(1.0 - 2.0 * (y * y + z * z));
    (roll, pitch, yaw)
}

/// The tree as indented text (children under parents, roots first) or JSON.
fn print_tree(frames: &[FrameInfo], format: Format) -> CmdResult {
    let mut out = std::io::stdout().lock();
    if format == Format::Json {
        let items: Vec<_> = frames
            .iter()
            .map(|f| {
                json!({
                    "frame": f.name, "parent": f.parent, "static": f.is_static,
                    "rate_hz": f.rate_hz, "newest_ns": f.newest_ns, "held": f.held,
                })
            })
            .collect();
        writeln!(out, "{}", json!({ "frames": items }))?;
        return Ok(());
    }
    if frames.is_empty() {
        writeln!(out, "no frames (nothing on /tf or /tf_static)")?;
        return Ok(());
    }
    let now = nerve::wall_ns();
    let mut children: BTreeMap<&str, Vec<&FrameInfo>> = BTreeMap::new();
    for f in frames {
        if let Some(p) = &f.parent {
            children.entry(p.as_str()).or_default().push(f);
        }
    }
    fn walk(
        out: &mut impl Write,
        children: &BTreeMap<&str, Vec<&FrameInfo>>,
        name: &str,
        prefix: &str,
        now: i64,
        depth: usize,
    ) -> std::io::Result<()> {
        let Some(kids) = children.get(name) else {
            return Ok(());
        };
        for (i, f) in kids.iter().enumerate() {
            let last = i + 1 == kids.len();
            let what = if f.is_static {
                "static".to_string()
            } else {
                let rate = f.rate_hz.map_or("–".into(), |r| format!("{r:.1} Hz"));
                let newest = f.newest_ns.map_or("–".into(), |s| {
                    format!(
                        "newest {:.3} s, {:.3} s ago",
                        s as f64 / 1e9,
                        (now - s) as f64 / 1e9
                    )
                });
                format!("dynamic, {rate}, {newest}")
            };
            writeln!(
                out,
                "{prefix}{}{} ({what})",
                if last { "└── " } else { "├── " },
                f.name
            )?;
            if depth < 64 {
                let next = format!("{prefix}{}", if last { "    " } else { "│   " });
                walk(out, children, &f.name, &next, now, depth + 1)?;
            }
        }
        Ok(())
    }
    for root in frames.iter().filter(|f| f.parent.is_none()) {
        writeln!(out, "{}", root.name)?;
        walk(&mut out, &children, &root.name, "", now, 0)?;
    }
    Ok(())
}
