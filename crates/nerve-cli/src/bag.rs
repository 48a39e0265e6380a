//! `nerve bag …`: record, play, info, recover, diff, digest (MCAP, see the nerve-bag
//! crate).

use crate::failure::{usage, CmdResult, Failure};
use crate::output::{self, Format};
use clap::{Subcommand, ValueEnum};
use nerve_bag::play::{PlayOptions, Player};
use nerve_bag::record::{Compression, RecordOptions, RecordReport, Recorder, Selection};
use regex::Regex;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Bag commands.
#[derive(Subcommand)]
pub enum BagCommand {
    /// Record topics to an MCAP file (Ctrl-C to stop).
    Record {
        /// Topics to record (default: all).
        topics: Vec<String>,
        /// Record every topic, including those that appear later.
        #[arg(short = 'a', long)]
        all: bool,
        /// Record topics whose names match this regular expression.
        #[arg(short = 'e', long = "regex", value_name = "REGEX")]
        regex: Option<String>,
        /// Leave out topics whose names match this regular expression.
        #[arg(short = 'x', long = "exclude", value_name = "REGEX")]
        exclude: Option<String>,
        /// Output file (default: nerve_<UTC time>.mcap); an existing one is an error.
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
        /// Replace the output file(s) if they exist.
        #[arg(long)]
        overwrite: bool,
        /// Start a new file after this many bytes (e.g. 500M, 2G); files are
        /// <stem>_<n>.mcap.
        #[arg(long, value_name = "SIZE")]
        split_size: Option<String>,
        /// Start a new file after this many seconds.
        #[arg(long, value_name = "SECONDS")]
        split_duration: Option<f64>,
        /// Chunk compression.
        #[arg(long, value_enum, default_value_t = CompressionArg::None)]
        compression: CompressionArg,
        /// Schemas: ROS 2 types everywhere (replayable, read by ROS 2's tools and
        /// Foxglove), or Foxglove's own for point clouds, images and laser scans.
        #[arg(long, value_enum, default_value_t = SchemasArg::Ros2)]
        schemas: SchemasArg,
        /// Stop after this many seconds.
        #[arg(long)]
        duration: Option<f64>,
        /// Most MiB waiting for the writer before samples are dropped (and counted).
        #[arg(long, default_value_t = 512)]
        queue_mb: usize,
        /// Wait for the writer instead of dropping when the queue is full.
        #[arg(long)]
        backpressure: bool,
        /// Output format of the final report.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Replay a bag on the recorded timing.
    Play {
        /// The bag: an MCAP file, or a directory of them (a rosbag2 bag, split or not,
        /// with or without metadata.yaml).
        path: PathBuf,
        /// Speed factor.
        #[arg(long, default_value_t = 1.0)]
        rate: f64,
        /// Start over at the end, until interrupted.
        #[arg(long = "loop")]
        looped: bool,
        /// Skip this many seconds of the bag's start.
        #[arg(long, default_value_t = 0.0)]
        start_offset: f64,
        /// Replay only these topics.
        #[arg(long, num_args = 1..)]
        topics: Vec<String>,
        /// Publish a topic under another name: FROM:=TO (repeatable).
        #[arg(long, value_name = "FROM:=TO")]
        remap: Vec<String>,
        /// Seconds to wait for a subscriber on each topic before starting.
        #[arg(long, default_value_t = 0.0)]
        wait_subscribers: f64,
        /// Publish the bag's recorded time on /clock (nerve_msgs/Clock, in a bag
        /// rosgraph_msgs/Clock) at HZ per second of wall time (default 40, as ROS 2).
        #[arg(long, value_name = "HZ", num_args = 0..=1, default_missing_value = "40")]
        clock: Option<f64>,
        /// Read a damaged bag as far as it can be read (the damage is reported on stderr)
        /// instead of refusing it.
        #[arg(long)]
        tolerate_damage: bool,
        /// Output format of the final report.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Describe a bag: duration, topics, types, counts, rates, sizes.
    Info {
        /// The bag: an MCAP file, or a directory of them (a rosbag2 bag, split or not,
        /// with or without metadata.yaml).
        path: PathBuf,
        /// Read a damaged bag as far as it can be read (the damage is reported on stderr)
        /// instead of refusing it.
        #[arg(long)]
        tolerate_damage: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Save what a damaged bag (a recorder killed mid-run) still holds into a new file.
    Recover {
        /// The damaged bag.
        path: PathBuf,
        /// The new file.
        #[arg(short = 'o', long)]
        output: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Compare two bags message by message, per topic (deterministic replay checks):
    /// prints "identical: N messages on M topics" and exits 0, or prints the first
    /// difference (topics in name order) and exits 1.
    Diff {
        /// The bag to check: an MCAP file, or a directory of them.
        actual: PathBuf,
        /// The bag it should equal.
        expected: PathBuf,
        /// Leave out this field (repeatable): field.path for every topic or
        /// /topic:field.path for one; everything under it too (header.stamp covers
        /// header.stamp.sec). Indices are optional and match any element (points.x =
        /// points[].x); points[3].x matches element 3 only.
        #[arg(long, value_name = "PATH")]
        ignore: Vec<String>,
        /// Read a damaged bag as far as it can be read (the damage is reported on stderr)
        /// instead of refusing it.
        #[arg(long)]
        tolerate_damage: bool,
    },
    /// Per topic: the SHA-256 of its payloads in order, and its message count; one line
    /// per topic: "SHA256  MESSAGES  TOPIC".
    Digest {
        /// The bag: an MCAP file, or a directory of them.
        path: PathBuf,
        /// Read a damaged bag as far as it can be read (the damage is reported on stderr)
        /// instead of refusing it.
        #[arg(long)]
        tolerate_damage: bool,
    },
}

/// Schemas on the command line.
#[derive(Clone, Copy, ValueEnum)]
pub enum SchemasArg {
    /// ROS 2 message types (CDR).
    Ros2,
    /// Foxglove schemas (protobuf) where a message has one.
    Foxglove,
}

/// Chunk compression on the command line.
#[derive(Clone, Copy, ValueEnum)]
pub enum CompressionArg {
    /// No compression.
    None,
    /// Zstandard.
    Zstd,
    /// LZ4.
    Lz4,
}

fn regex(flag: &str, r: Option<String>) -> Result<Option<Regex>, Failure> {
    r.map(|r| {
        Regex::new(&r).map_err(|e| {
            usage(format!(
                "{flag} {r:?} is not a valid regular expression: {e}"
            ))
        })
    })
    .transpose()
}

fn seconds(flag: &str, v: f64) -> Result<Duration, Failure> {
    if !(v.is_finite() && (0.0..1e9).contains(&v)) {
        return Err(usage(format!(
            "{flag} must be a non-negative number of seconds, got {v}"
        )));
    }
    Ok(Duration::from_secs_f64(v))
}

/// Parses a size such as `1048576`, `500M`, `2G` or `64KiB`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => return Err(format!("unknown unit in size {s:?} (use K, M or G)")),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 500M, 2G)"))?;
    if !(n.is_finite() && n > 0.0) {
        return Err(format!("size {s:?} must be positive"));
    }
    Ok((n * mult as f64) as u64)
}

fn default_output() -> PathBuf {
    let secs = nerve::wall_ns() / 1_000_000_000;
    let (d, s) = (secs / 86_400, secs % 86_400);
    // civil date from days since the epoch (Howard Hinnant's algorithm)
    let z = d + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    PathBuf::from(format!(
        "nerve_{year:04}-{month:02}-{day:02}_{:02}-{:02}-{:02}.mcap",
        s / 3600,
        s / 60 % 60,
        s % 60
    ))
}

/// The reader's damage policy of `--tolerate-damage`.
pub fn on_damage(tolerate_damage: bool) -> nerve_bag::read::OnDamage {
    if tolerate_damage {
        nerve_bag::read::OnDamage::Tolerate
    } else {
        nerve_bag::read::OnDamage::Refuse
    }
}

/// Reports tolerated damage on stderr, with how much was `done` ("replayed 302
/// messages").
pub fn report_damage(damage: &[nerve_bag::read::Damage], done: &str) {
    for d in damage {
        eprintln!("warning: the bag is damaged: {d}");
    }
    if !damage.is_empty() {
        eprintln!("warning: {done}, what could be read (--tolerate-damage)");
    }
}

fn spinner() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar
}

/// Runs a bag command.
pub fn run(ctx: impl FnOnce() -> Result<nerve::Context, Failure>, cmd: BagCommand) -> CmdResult {
    match cmd {
        BagCommand::Record {
            topics,
            all,
            regex: include,
            exclude,
            output,
            overwrite,
            split_size,
            split_duration,
            compression,
            schemas,
            duration,
            queue_mb,
            backpressure,
            format,
        } => {
            for t in &topics {
                nerve::name::validate_topic(t).map_err(|e| usage(e.to_string()))?;
            }
            let mut opts = RecordOptions::new(output.unwrap_or_else(default_output));
            opts.selection = Selection {
                all,
                topics,
                include: regex("--regex", include)?,
                exclude: regex("--exclude", exclude)?,
            };
            opts.overwrite = overwrite;
            opts.schemas = match schemas {
                SchemasArg::Ros2 => nerve_bag::encoding::Schemas::Ros2,
                SchemasArg::Foxglove => nerve_bag::encoding::Schemas::Foxglove,
            };
            opts.compression = match compression {
                CompressionArg::None => Compression::None,
                CompressionArg::Zstd => Compression::Zstd,
                CompressionArg::Lz4 => Compression::Lz4,
            };
            opts.split_size = split_size
                .map(|s| parse_size(&s).map_err(|e| usage(format!("--split-size: {e}"))))
                .transpose()?;
            opts.split_duration = split_duration
                .map(|s| seconds("--split-duration", s))
                .transpose()?;
            if queue_mb == 0 {
                return Err(usage("--queue-mb must be at least 1"));
            }
            opts.queue_bytes = queue_mb << 20;
            opts.backpressure = backpressure;
            let limit = duration.map(|d| seconds("--duration", d)).transpose()?;
            let ctx = ctx()?;
            let recorder = Recorder::start(&ctx, opts)?;
            let bar = spinner();
            let started = Instant::now();
            let mut shown = Instant::now();
            while !nerve::shutdown::requested()
                && limit.is_none_or(|l| started.elapsed() < l)
                && !recorder.failed()
            {
                // Ctrl-C is noticed within 10 ms; the display changes every 100 ms
                std::thread::sleep(Duration::from_millis(10));
                if shown.elapsed() < Duration::from_millis(100) {
                    continue;
                }
                shown = Instant::now();
                for w in recorder.take_warnings() {
                    bar.println(format!("warning: {w}"));
                }
                let stats = recorder.stats();
                let msgs: u64 = stats.iter().map(|t| t.written).sum();
                let lost: u64 = stats.iter().map(|t| t.dropped + t.lost + t.failed).sum();
                bar.set_message(format!(
                    "{} topics, {msgs} messages, {:.1} MB written, {lost} lost",
                    stats.iter().filter(|t| t.skipped.is_none()).count(),
                    recorder.bytes_written() as f64 / 1e6
                ));
                bar.tick();
            }
            bar.finish_and_clear();
            let report = recorder.stop()?;
            print_record_report(&report, format)?;
            if report.losses() > 0 {
                eprintln!(
                    "warning: {} samples were not recorded (see the dropped, lost and failed columns)",
                    report.losses()
                );
            }
            Ok(())
        }
        BagCommand::Play {
            path,
            rate,
            looped,
            start_offset,
            topics,
            remap,
            wait_subscribers,
            clock,
            tolerate_damage,
            format,
        } => {
            let mut opts = PlayOptions {
                rate,
                looped,
                start_offset: seconds("--start-offset", start_offset)?,
                topics: (!topics.is_empty()).then_some(topics),
                wait_subscribers: seconds("--wait-subscribers", wait_subscribers)?,
                clock_hz: clock,
                on_damage: on_damage(tolerate_damage),
                ..PlayOptions::default()
            };
            if !(rate.is_finite() && rate > 0.0) {
                return Err(usage(format!(
                    "--rate must be a positive number, got {rate}"
                )));
            }
            if let Some(hz) = clock {
                if !(hz.is_finite() && hz > 0.0 && hz <= 10_000.0) {
                    return Err(usage(format!(
                        "--clock must be a rate between 0 and 10000 Hz, got {hz}"
                    )));
                }
            }
            for r in &remap {
                let Some((from, to)) = r.split_once(":=") else {
                    return Err(usage(format!("--remap {r:?}: expected FROM:=TO")));
                };
                // FROM is a name as recorded (the player checks the bag has it; a ROS 2
                // bag may hold names Nerve does not accept, which is why one remaps)
                if from.is_empty() {
                    return Err(usage(format!("--remap {r:?}: FROM is empty")));
                }
                nerve::name::validate_topic(to)
                    .map_err(|e| usage(format!("--remap {r:?}: {e}")))?;
                opts.remap.push((from.to_string(), to.to_string()));
            }
            let ctx = ctx()?;
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "[{elapsed_precise}] {bar:30} {pos}/{len} messages {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            let report = Player::new().play(&ctx, &path, &opts, |p| {
                if let Some(t) = p.total {
                    bar.set_length(t);
                }
                bar.set_position(p.published);
                bar.set_message(format!("bag time {:.1} s", p.bag_seconds));
            })?;
            bar.finish_and_clear();
            let published: u64 = report.published.values().sum();
            report_damage(&report.damage, &format!("replayed {published} messages"));
            match format {
                Format::Json => output::json(&serde_json::to_value(&report)?)?,
                Format::Human => {
                    let rows: Vec<Vec<String>> = report
                        .published
                        .iter()
                        .map(|(t, n)| vec![t.clone(), n.to_string()])
                        .collect();
                    output::table(&["TOPIC", "PUBLISHED"], &rows)?;
                    for (t, why) in &report.skipped {
                        println!("skipped {t}: {why}");
                    }
                    for (t, u) in &report.undecodable {
                        println!(
                            "{t}: {} messages do not decode, left out (the first: {})",
                            u.count, u.first
                        );
                    }
                    if report.clock_ticks > 0 {
                        println!("/clock: {} ticks", report.clock_ticks);
                    }
                    println!(
                        "timing error: median {:.1} us, p99 {:.1} us, max {:.1} us{}",
                        report.error_p50_ns as f64 / 1e3,
                        report.error_p99_ns as f64 / 1e3,
                        report.error_max_ns as f64 / 1e3,
                        if report.interrupted {
                            " (interrupted)"
                        } else {
                            ""
                        }
                    );
                }
            }
            Ok(())
        }
        BagCommand::Info {
            path,
            tolerate_damage,
            format,
        } => {
            let info = nerve_bag::read::info_checked(&path, on_damage(tolerate_damage))?;
            let damage: Vec<_> = info.damage.iter().cloned().collect();
            report_damage(&damage, &format!("described {} messages", info.messages));
            print_info(&info, format)
        }
        BagCommand::Recover {
            path,
            output,
            format,
        } => {
            let info = nerve_bag::read::recover(&path, &output)?;
            print_info(&info, format)
        }
        BagCommand::Diff {
            actual,
            expected,
            ignore,
            tolerate_damage,
        } => {
            let opts = nerve_bag::compare::CompareOptions {
                ignore,
                on_damage: on_damage(tolerate_damage),
            };
            let report = match nerve_bag::compare::compare(&actual, &expected, &opts) {
                Err(nerve_bag::BagError::Options(why)) => return Err(usage(why)),
                r => r?,
            };
            report_damage(
                &report.damage,
                &format!("compared {} messages", report.messages_compared),
            );
            match &report.first_difference {
                None => {
                    println!(
                        "identical: {} messages on {} topics",
                        report.messages_compared,
                        report.topics.len()
                    );
                    Ok(())
                }
                Some(d) => {
                    println!("{d}");
                    Err(Failure::Runtime(anyhow::anyhow!(
                        "{} differs from {}",
                        actual.display(),
                        expected.display()
                    )))
                }
            }
        }
        BagCommand::Digest {
            path,
            tolerate_damage,
        } => {
            let (topics, damage) =
                nerve_bag::compare::digest_checked(&path, on_damage(tolerate_damage))?;
            let messages: u64 = topics.iter().map(|t| t.messages).sum();
            report_damage(&damage, &format!("digested {messages} messages"));
            for t in topics {
                println!("{}  {}  {}", t.sha256, t.messages, t.topic);
            }
            Ok(())
        }
    }
}

fn print_record_report(r: &RecordReport, format: Format) -> CmdResult {
    match format {
        Format::Json => output::json(&serde_json::to_value(r)?)?,
        Format::Human => {
            let rows: Vec<Vec<String>> = r
                .topics
                .iter()
                .map(|t| {
                    vec![
                        t.topic.clone(),
                        if t.schema_name.is_empty() {
                            t.type_name.clone()
                        } else {
                            t.schema_name.clone()
                        },
                        t.written.to_string(),
                        t.dropped.to_string(),
                        t.lost.to_string(),
                        t.failed.to_string(),
                        t.skipped.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            output::table(
                &[
                    "TOPIC", "SCHEMA", "WRITTEN", "DROPPED", "LOST", "FAILED", "SKIPPED",
                ],
                &rows,
            )?;
            let files: Vec<String> = r.files.iter().map(|f| f.display().to_string()).collect();
            println!(
                "{:.1} MB in {:.1} s to {}",
                r.bytes as f64 / 1e6,
                r.seconds,
                files.join(", ")
            );
        }
    }
    Ok(())
}

fn print_info(info: &nerve_bag::read::BagInfo, format: Format) -> CmdResult {
    match format {
        Format::Json => output::json(&serde_json::to_value(info)?)?,
        Format::Human => {
            let t = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
            println!("{:>12}: {}", "path", info.path);
            if info.files.len() > 1 {
                println!("{:>12}: {}", "files", info.files.len());
            }
            println!("{:>12}: {:.1} MB", "size", info.file_bytes as f64 / 1e6);
            println!("{:>12}: {:.3} s", "duration", info.duration_s);
            println!("{:>12}: {}", "start", t(info.start_ns));
            println!("{:>12}: {}", "end", t(info.end_ns));
            println!("{:>12}: {}", "messages", info.messages);
            if !info.compression.is_empty() {
                let c: Vec<&str> = info
                    .compression
                    .iter()
                    .map(|c| if c.is_empty() { "none" } else { c })
                    .collect();
                println!("{:>12}: {}", "compression", c.join(", "));
            }
            if let Some(d) = &info.damage {
                println!("{:>12}: {d}", "damaged");
            }
            let rows: Vec<Vec<String>> = info
                .topics
                .iter()
                .map(|t| {
                    vec![
                        t.topic.clone(),
                        t.schema_name.clone(),
                        t.nerve_type.clone().unwrap_or_else(|| "-".into()),
                        t.count.to_string(),
                        format!("{:.2}", t.frequency),
                        t.bytes
                            .map_or("-".into(), |b| format!("{:.1}", b as f64 / 1e6)),
                        t.losses.map_or("-".into(), |l| l.to_string()),
                    ]
                })
                .collect();
            output::table(
                &["TOPIC", "SCHEMA", "NERVE TYPE", "COUNT", "HZ", "MB", "LOST"],
                &rows,
            )?;
        }
    }
    Ok(())
}
