//! `nerve bridge foxglove`: live topics in Foxglove (see nerve_bag::bridge);
//! `nerve bridge ros2`: a Nerve domain and a ROS 2 domain in one graph (see nerve_ros2).

use crate::failure::{usage, CmdResult, Failure};
use crate::output::{self, Format};
use clap::Subcommand;
use nerve_bag::bridge::{Bridge, BridgeOptions};
use nerve_bag::record::Selection;
use std::time::{Duration, Instant};

/// Bridges to other tools.
#[derive(Subcommand)]
pub enum BridgeCommand {
    /// Serve the domain's topics to Foxglove over WebSocket (Ctrl-C to stop).
    Foxglove {
        /// Port to listen on (0: any free port, printed at start).
        #[arg(long, default_value_t = 8765)]
        port: u16,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// Offer only these topics (default: every topic, including later ones).
        #[arg(long, num_args = 1..)]
        topics: Vec<String>,
        /// Messages queued per client before the oldest are dropped.
        #[arg(long, default_value_t = 256)]
        backlog: usize,
        /// Do not offer Nerve services to Foxglove's Service Call panel.
        #[arg(long)]
        no_services: bool,
        /// Longest a service call from Foxglove may take, in seconds.
        #[arg(long, default_value_t = 5.0)]
        call_timeout: f64,
        /// Do not let clients publish to Nerve topics (Foxglove's Teleop and Publish panels).
        #[arg(long)]
        no_client_publish: bool,
        /// Do not offer the nodes' parameters to Foxglove's Parameters panel.
        #[arg(long)]
        no_parameters: bool,
        /// Run on the simulation time of the /clock topic (a bag replayed with `nerve bag
        /// play --clock`, a simulation): the messages' times and the server's time both
        /// come from it (with NERVE_SIM_TIME=1 the bridge does so without the flag).
        #[arg(long)]
        clock: bool,
        /// Serve this bag (one MCAP file) instead of the domain's topics, with Foxglove's
        /// playback bar (play, pause, seek, speed); starts paused.
        #[arg(long)]
        bag: Option<std::path::PathBuf>,
        /// With --bag: serve a damaged bag as far as it can be read (the damage is
        /// reported on stderr) instead of refusing it.
        #[arg(long)]
        tolerate_damage: bool,
        /// Stop after this many seconds.
        #[arg(long)]
        duration: Option<f64>,
        /// Output format of the final counts.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Bridge the domain and a ROS 2 domain (DDS, or rmw_zenoh with `--rmw zenoh`) both
    /// ways: topics with a subscriber on the other side cross (Ctrl-C to stop).
    Ros2 {
        /// The ROS 2 domain (default: ROS_DOMAIN_ID, else 0); `--domain` is the Nerve
        /// domain, as for every command.
        #[arg(long)]
        ros_domain: Option<u16>,
        /// Only names matching one of these regular expressions cross.
        #[arg(long, num_args = 1..)]
        allow: Vec<String>,
        /// Names matching one of these regular expressions do not cross.
        #[arg(long, num_args = 1..)]
        deny: Vec<String>,
        /// Share directories with ROS 2 interface definitions (`<pkg>/msg/*.msg`),
        /// searched before those of AMENT_PREFIX_PATH.
        #[arg(long, num_args = 1..)]
        types: Vec<std::path::PathBuf>,
        /// Carry standard types as CDR too, instead of converting them to Nerve's own.
        #[arg(long)]
        cdr_only: bool,
        /// Convert ROS 2 messages to these Nerve types although the conversion loses
        /// fields (e.g. nerve_msgs/CmdVel for geometry_msgs/msg/TwistStamped keeps only
        /// linear.x and angular.z, as f32); without it such types cross as CDR.
        #[arg(long, num_args = 1.., value_name = "NERVE_TYPE")]
        lossy: Vec<String>,
        /// Stop after this many seconds.
        #[arg(long)]
        duration: Option<f64>,
        /// The ROS 2 middleware the nodes use: DDS (Fast DDS, Cyclone DDS) or rmw_zenoh
        /// (`rmw_zenoh_cpp`): topics, services, actions, parameters and the graph alike.
        #[arg(long, value_enum, default_value_t = Rmw::Dds)]
        rmw: Rmw,
        /// With `--rmw zenoh`: Zenoh endpoints to listen on, e.g. tcp/127.0.0.1:7448
        /// (default: tcp/127.0.0.1:0, as rmw_zenoh's nodes do).
        #[arg(long)]
        zenoh_listen: Vec<String>,
        /// With `--rmw zenoh`: Zenoh endpoints to connect to (default: rmw_zenoh's router,
        /// tcp/127.0.0.1:7447).
        #[arg(long)]
        zenoh_connect: Vec<String>,
    },
}

/// The ROS 2 middleware a bridge speaks.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Rmw {
    /// DDS (RTPS): Fast DDS and Cyclone DDS, the default RMWs.
    Dds,
    /// rmw_zenoh (`rmw_zenoh_cpp`): a Zenoh session, usually through its router.
    Zenoh,
}

/// Where the rmw_zenoh mode's session listens when no `--zenoh-listen` is given.
const ZENOH_LISTEN: &str = "tcp/127.0.0.1:0";
/// Where it connects when no `--zenoh-connect` is given: rmw_zenoh's router.
const ZENOH_CONNECT: &str = "tcp/127.0.0.1:7447";

/// Runs a bridge command.
pub fn run(ctx: impl FnOnce() -> Result<nerve::Context, Failure>, cmd: BridgeCommand) -> CmdResult {
    let (port, host, topics, backlog, no_services, call_timeout, extras, duration, format) =
        match cmd {
            BridgeCommand::Ros2 {
                ros_domain: domain,
                allow,
                deny,
                types,
                cdr_only,
                lossy,
                duration,
                rmw,
                zenoh_listen,
                zenoh_connect,
            } => {
                let zenoh = match rmw {
                    Rmw::Dds => {
                        if !zenoh_listen.is_empty() || !zenoh_connect.is_empty() {
                            return Err(usage(
                                "--zenoh-listen and --zenoh-connect need --rmw zenoh",
                            ));
                        }
                        None
                    }
                    Rmw::Zenoh => Some((zenoh_listen, zenoh_connect)),
                };
                return ros2(
                    ctx,
                    domain,
                    allow,
                    deny,
                    types,
                    (cdr_only, lossy),
                    duration,
                    zenoh,
                );
            }
            BridgeCommand::Foxglove {
                port,
                host,
                topics,
                backlog,
                no_services,
                call_timeout,
                no_client_publish,
                no_parameters,
                clock,
                bag,
                tolerate_damage,
                duration,
                format,
            } => {
                if let Some(bag) = bag {
                    if !topics.is_empty() || clock {
                        return Err(usage(
                            "--bag serves the bag's topics and time: no --topics or --clock",
                        ));
                    }
                    let on_damage = crate::bag::on_damage(tolerate_damage);
                    return serve_bag(&bag, port, host, backlog, on_damage, duration, format);
                }
                if tolerate_damage {
                    return Err(usage("--tolerate-damage is for a bag served with --bag"));
                }
                (
                    port,
                    host,
                    topics,
                    backlog,
                    no_services,
                    call_timeout,
                    Extras {
                        client_publish: !no_client_publish,
                        parameters: !no_parameters,
                        clock,
                    },
                    duration,
                    format,
                )
            }
        };
    foxglove(
        ctx,
        port,
        host,
        topics,
        backlog,
        no_services,
        call_timeout,
        extras,
        duration,
        format,
    )
}

/// The capabilities a live bridge may leave out.
struct Extras {
    client_publish: bool,
    parameters: bool,
    clock: bool,
}

/// `nerve bridge foxglove --bag`.
fn serve_bag(
    bag: &std::path::Path,
    port: u16,
    host: String,
    backlog: usize,
    on_damage: nerve_bag::read::OnDamage,
    duration: Option<f64>,
    format: Format,
) -> CmdResult {
    if backlog == 0 {
        return Err(usage("--backlog must be at least 1"));
    }
    let limit = duration_limit(duration)?;
    let server =
        nerve_bag::bridge::playback::BagServer::start(bag, &host, port, backlog, on_damage)?;
    let (start, end) = server.range();
    // the line scripts and tests wait for
    println!("listening on ws://{host}:{}", server.port());
    println!("serving {} ({start} to {end} ns), paused", bag.display());
    run_until_stopped(limit);
    let sent = server.sent();
    let client_drops = server.client_drops();
    let damage = server.damage();
    server.stop();
    match format {
        Format::Json => output::json(&serde_json::json!({
            "sent": sent,
            "client_drops": client_drops,
        }))?,
        Format::Human => {
            let rows: Vec<Vec<String>> = sent
                .iter()
                .map(|(t, n)| vec![t.clone(), n.to_string()])
                .collect();
            output::table(&["TOPIC", "SENT"], &rows)?;
        }
    }
    // damage met while playing is the bag's, as at the start: refused unless tolerated
    let served: u64 = sent.values().sum();
    match damage.first() {
        Some(d) if on_damage == nerve_bag::read::OnDamage::Refuse => {
            Err(nerve_bag::BagError::Damaged(d.clone()).into())
        }
        _ => {
            crate::bag::report_damage(&damage, &format!("served {served} messages"));
            Ok(())
        }
    }
}

/// A `--duration` in seconds.
fn duration_limit(duration: Option<f64>) -> Result<Option<Duration>, Failure> {
    match duration {
        Some(d) if !(d.is_finite() && d >= 0.0) => Err(usage(format!(
            "--duration must be a non-negative number, got {d}"
        ))),
        d => Ok(d.map(Duration::from_secs_f64)),
    }
}

/// What a ROS 2 event prints.
fn print_event(e: nerve_ros2::Event) {
    match e {
        nerve_ros2::Event::Bridged {
            kind,
            topic,
            ros_type,
            nerve_type,
            to_ros,
        } => {
            let arrow = if to_ros {
                "Nerve -> ROS 2"
            } else {
                "ROS 2 -> Nerve"
            };
            let what = match kind {
                nerve_ros2::Kind::Topic => "topic",
                nerve_ros2::Kind::Service => "service",
                nerve_ros2::Kind::Action => "action",
            };
            println!("{topic}: {what} {arrow} ({ros_type} as {nerve_type})");
        }
        nerve_ros2::Event::NotBridged { topic, reason } => {
            eprintln!("{topic}: not bridged: {reason}")
        }
        nerve_ros2::Event::Malformed { topic, reason } => eprintln!("{topic}: {reason}"),
        nerve_ros2::Event::Dropped { topic, reason } => {
            eprintln!("{topic}: not delivered: {reason}")
        }
    }
}

/// `nerve bridge ros2`; `zenoh`: the rmw_zenoh mode's listen and connect endpoints
/// (`None`: DDS).
#[allow(clippy::too_many_arguments)]
fn ros2(
    ctx: impl FnOnce() -> Result<nerve::Context, Failure>,
    domain: Option<u16>,
    allow: Vec<String>,
    deny: Vec<String>,
    types: Vec<std::path::PathBuf>,
    (cdr_only, lossy): (bool, Vec<String>),
    duration: Option<f64>,
    zenoh: Option<(Vec<String>, Vec<String>)>,
) -> CmdResult {
    let limit = duration_limit(duration)?;
    // the Zenoh settings are checked before anything starts
    let zenoh = match zenoh {
        None => None,
        Some((listen, connect)) => {
            let or = |v: Vec<String>, default: &str| {
                if v.is_empty() {
                    vec![default.to_owned()]
                } else {
                    v
                }
            };
            let (listen, connect) = (or(listen, ZENOH_LISTEN), or(connect, ZENOH_CONNECT));
            fn refs(v: &[String]) -> Vec<&str> {
                v.iter().map(String::as_str).collect()
            }
            let c = nerve_ros2::rmw_zenoh::peer_config(&refs(&listen), &refs(&connect))
                .map_err(|e| usage(format!("--zenoh-listen/--zenoh-connect: {e}")))?;
            Some((c, connect))
        }
    };
    let regexes = |list: Vec<String>, flag: &str| -> Result<Vec<regex::Regex>, Failure> {
        list.iter()
            .map(|r| {
                regex::Regex::new(r)
                    .map_err(|e| usage(format!("{flag} {r:?} is not a regular expression: {e}")))
            })
            .collect()
    };
    let mut config = nerve_ros2::BridgeConfig::from_env().map_err(|e| usage(e.to_string()))?;
    // the context settles the Nerve side exactly as every other command does
    config.nerve = ctx()?.config().clone();
    if let Some(d) = domain {
        if d > 232 {
            return Err(usage(format!(
                "--ros-domain {d} is not a ROS 2 domain (0 to 232)"
            )));
        }
        config.ros_domain = d;
    }
    config.allow = regexes(allow, "--allow")?;
    config.deny = regexes(deny, "--deny")?;
    for t in &types {
        if !t.is_dir() {
            return Err(usage(format!("--types {}: not a directory", t.display())));
        }
    }
    config.types = types.into_iter().chain(config.types).collect();
    config.native = !cdr_only;
    config.lossy = lossy;
    config.check().map_err(|e| usage(e.to_string()))?;
    let domain = config.ros_domain;
    let (side, connect) = match zenoh {
        None => (nerve_ros2::Side::Dds, None),
        Some((zenoh, connect)) => (nerve_ros2::Side::Zenoh(Box::new(zenoh)), Some(connect)),
    };
    let bridge = nerve_ros2::Bridge::start(config, side, print_event)?;
    if let Some(connect) = connect {
        println!(
            "rmw_zenoh: session {}, connecting to {}",
            bridge.id().trim_start_matches('z'),
            connect.join(", ")
        );
    }
    // the line scripts and tests wait for
    println!("bridging ROS 2 domain {domain}");
    run_until_stopped(limit);
    let s = bridge.stats();
    let n = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "forwarded {} to Nerve, {} to ROS 2; {} malformed, {} not delivered, {} loops cut",
        n(&s.to_nerve),
        n(&s.to_ros),
        n(&s.malformed),
        n(&s.dropped),
        n(&s.loops_cut)
    );
    bridge.stop();
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn foxglove(
    ctx: impl FnOnce() -> Result<nerve::Context, Failure>,
    port: u16,
    host: String,
    topics: Vec<String>,
    backlog: usize,
    no_services: bool,
    call_timeout: f64,
    extras: Extras,
    duration: Option<f64>,
    format: Format,
) -> CmdResult {
    if !(call_timeout.is_finite() && call_timeout > 0.0 && call_timeout < 1e6) {
        return Err(usage(format!(
            "--call-timeout must be a positive number of seconds, got {call_timeout}"
        )));
    }
    for t in &topics {
        nerve::name::validate_topic(t).map_err(|e| usage(e.to_string()))?;
    }
    if backlog == 0 {
        return Err(usage("--backlog must be at least 1"));
    }
    let limit = duration_limit(duration)?;
    let opts = BridgeOptions {
        host,
        port,
        selection: Selection {
            all: topics.is_empty(),
            topics,
            ..Selection::default()
        },
        backlog,
        services: !no_services,
        call_timeout: Duration::from_secs_f64(call_timeout),
        client_publish: extras.client_publish,
        parameters: extras.parameters,
        clock: extras.clock,
        ..BridgeOptions::default()
    };
    let host = opts.host.clone();
    let ctx = ctx()?;
    let bridge = Bridge::start(&ctx, opts)?;
    // the line scripts and tests wait for
    println!("listening on ws://{host}:{}", bridge.port());
    run_until_stopped(limit);
    let stats = bridge.stats();
    let services = bridge.service_stats();
    let published = bridge.inbound_stats();
    let client_drops = bridge.client_drops();
    bridge.stop();
    match format {
        Format::Json => output::json(&serde_json::json!({
            "topics": stats,
            "services": services,
            "published": published,
            "client_drops": client_drops,
        }))?,
        Format::Human => {
            let rows: Vec<Vec<String>> = stats
                .iter()
                .map(|t| {
                    vec![
                        t.topic.clone(),
                        t.schema_name.clone(),
                        t.forwarded.to_string(),
                        t.lost.to_string(),
                        t.failed.to_string(),
                    ]
                })
                .collect();
            output::table(&["TOPIC", "SCHEMA", "FORWARDED", "LOST", "FAILED"], &rows)?;
            if client_drops > 0 {
                println!("{client_drops} messages dropped for slow clients");
            }
            for t in stats.iter().filter(|t| t.error.is_some()) {
                println!("{}: {}", t.topic, t.error.as_deref().unwrap_or_default());
            }
            if !services.is_empty() {
                let rows: Vec<Vec<String>> = services
                    .iter()
                    .map(|s| {
                        vec![
                            s.service.clone(),
                            s.type_name.clone(),
                            s.calls.to_string(),
                            s.failed.to_string(),
                        ]
                    })
                    .collect();
                output::table(&["SERVICE", "TYPE", "CALLS", "FAILED"], &rows)?;
            }
            if !published.is_empty() {
                let rows: Vec<Vec<String>> = published
                    .iter()
                    .map(|p| {
                        vec![
                            p.topic.clone(),
                            p.type_name.clone(),
                            p.published.to_string(),
                            p.malformed.to_string(),
                            p.dropped.to_string(),
                            p.refused.to_string(),
                        ]
                    })
                    .collect();
                output::table(
                    &[
                        "CLIENT TOPIC",
                        "TYPE",
                        "PUBLISHED",
                        "MALFORMED",
                        "DROPPED",
                        "REFUSED",
                    ],
                    &rows,
                )?;
            }
        }
    }
    Ok(())
}

/// Sleeps until the first Ctrl-C or SIGTERM, or until `limit` has passed (woken by the
/// signal at once, no polling).
fn run_until_stopped(limit: Option<Duration>) {
    let started = Instant::now();
    let seen = nerve::shutdown::requests();
    while !nerve::shutdown::requested() {
        let left = limit.map_or(Duration::from_secs(3600), |l| {
            l.saturating_sub(started.elapsed())
        });
        if left.is_zero() {
            return;
        }
        nerve::shutdown::wait(seen, left);
    }
}
