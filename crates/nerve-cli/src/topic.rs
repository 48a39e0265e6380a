//! `nerve topic …`: list, info, echo, hz, bw, pub.

use crate::failure::{usage, CmdResult, Failure};
use crate::json_arg::JsonArg;
use crate::output::{self, Format};
use crate::remote;
use crate::types::{self, PubOptions};
use clap::{Args, Subcommand, ValueEnum};
use nerve::introspect::{self, TopicInfo};
use nerve::message::schema::Schema;
use nerve::net::EntityKind;
use nerve::{Qos, RawSample, RawSubscriber, TopicError};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Topic commands.
#[derive(Subcommand)]
pub enum TopicCommand {
    /// List the topics of the domain.
    List(crate::output::FormatArg),
    /// Show a topic's type, QoS and endpoints.
    Info {
        /// Topic name, e.g. /imu.
        topic: String,
        #[arg(long, value_enum, default_value_t = Format::Human)]
        /// Output format.
        format: Format,
    },
    /// Print the messages of a topic.
    Echo {
        /// Topic name.
        topic: String,
        /// Stop after N messages.
        #[arg(long)]
        count: Option<u64>,
        /// Show at most N slice elements (default: all, as `topic pub` reads them back);
        /// a shortened message says so on stderr and `topic pub` refuses it.
        #[arg(long, value_name = "N")]
        max_elems: Option<usize>,
        #[command(flatten)]
        wait: WaitArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Measure a topic's publishing rate.
    Hz(MeasureArgs),
    /// Measure a topic's bandwidth.
    Bw(MeasureArgs),
    /// Publish a message given as JSON (fields not given keep their defaults; numbers as
    /// `topic echo` prints them, NaN and infinities as "NaN", "Infinity", "-Infinity").
    Pub {
        /// Topic name.
        topic: String,
        /// Message type, e.g. nerve_msgs/CmdVel or CmdVel (see `nerve types`).
        #[arg(value_name = "TYPE")]
        type_name: String,
        /// The message as JSON, e.g. '{"linear": 0.5}'; slice types take "elems": [...].
        /// `@FILE` reads it from a file, `-` from standard input (Linux refuses one
        /// argument over 128 KiB); read once, however many messages are published.
        #[arg(value_parser = JsonArg::parse, value_name = "JSON|@FILE|-")]
        json: JsonArg,
        /// Messages per second (0: as fast as possible).
        #[arg(long, default_value_t = 10.0)]
        rate: f64,
        /// Stop after this many messages (default: publish until interrupted).
        #[arg(long, conflicts_with = "once")]
        count: Option<u64>,
        /// Publish one message and exit (as `--count 1`).
        #[arg(long)]
        once: bool,
        /// Quality of service preset.
        #[arg(long, value_enum, default_value_t = QosPreset::Sensor)]
        qos: QosPreset,
        /// Seconds to wait for a first subscriber before publishing.
        #[arg(long, default_value_t = 1.0)]
        wait_subscribers: f64,
    },
}

/// Arguments of `hz` and `bw`.
#[derive(Args)]
pub struct MeasureArgs {
    /// Topic name.
    topic: String,
    /// Seconds to measure.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    #[command(flatten)]
    wait: WaitArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// Waiting for a topic and its messages.
#[derive(Args, Clone, Copy)]
pub struct WaitArgs {
    /// Give up after this many seconds (default: wait until interrupted).
    #[arg(long)]
    timeout: Option<f64>,
}

/// QoS presets on the command line.
#[derive(Clone, Copy, ValueEnum)]
pub enum QosPreset {
    /// Qos::sensor()
    Sensor,
    /// Qos::reliable()
    Reliable,
    /// Qos::latched()
    Latched,
}

impl QosPreset {
    fn qos(self) -> Qos {
        match self {
            QosPreset::Sensor => Qos::sensor(),
            QosPreset::Reliable => Qos::reliable(),
            QosPreset::Latched => Qos::latched(),
        }
    }
}

fn seconds(name: &str, v: f64) -> Result<Duration, Failure> {
    if !(0.0..1e9).contains(&v) {
        return Err(usage(format!(
            "--{name} must be a non-negative number of seconds, got {v}"
        )));
    }
    Ok(Duration::from_secs_f64(v))
}

pub(crate) fn cli_node(ctx: &nerve::Context) -> Result<nerve::Node, Failure> {
    Ok(ctx.node("nerve_cli").create()?)
}

fn topic_error(e: TopicError) -> Failure {
    match e {
        TopicError::Name(_) => usage(e.to_string()),
        e => Failure::Runtime(e.into()),
    }
}

/// The topic `name` names for `node`: relative and private names resolve under the
/// namespace and remap rules (`NERVE_NAMESPACE`, `NERVE_REMAP`) exactly as every other
/// door resolves them; a name that is not valid once resolved is a usage error.
pub(crate) fn resolve_topic(node: &nerve::Node, name: &str) -> Result<String, Failure> {
    let topic = node.resolve_name(name);
    nerve::name::validate_topic(&topic).map_err(|e| {
        if topic == name {
            usage(e.to_string())
        } else {
            usage(format!("{name} (resolved to {topic}): {e}"))
        }
    })?;
    Ok(topic)
}

/// Opens a raw subscriber on the topic `name` names (see [`resolve_topic`]), waiting for
/// the topic to appear until the deadline.
fn subscribe(
    node: &nerve::Node,
    name: &str,
    deadline: Option<Instant>,
) -> Result<RawSubscriber, Failure> {
    let resolved = resolve_topic(node, name)?;
    let topic = resolved.as_str();
    let mut told = false;
    let (mut next_look, mut uncarried) = (None, None);
    let qos = Qos::sensor().depth(64);
    loop {
        // the endpoints resolve `name` themselves (resolving twice would chain remaps);
        // the lookups below use the resolved name
        match RawSubscriber::create(node, name, qos.clone()) {
            Ok(s) => return Ok(s),
            Err(TopicError::Shm { .. }) if introspect::topic_info(node, topic).is_err() => {
                // published on another host only: subscribe with its type if this tool
                // knows it, or with the schema its publishers offer
                match remote_type(node.context(), topic)? {
                    Some(Remote::Known(ty)) => {
                        return RawSubscriber::with_type(node, name, &ty, qos).map_err(topic_error)
                    }
                    Some(Remote::Described(schema)) => {
                        return RawSubscriber::with_schema(node, name, &schema, qos)
                            .map_err(topic_error)
                    }
                    None => {}
                }
                // a ROS 2 topic the bridge does not carry: why, as the bridge says it
                if next_look.is_none_or(|t| Instant::now() >= t) {
                    next_look = Some(Instant::now() + Duration::from_secs(1));
                    uncarried =
                        crate::ros2::graph(node).and_then(|g| g.not_carried.get(topic).cloned());
                    if let Some(n) = uncarried.as_ref().filter(|n| !n.learning) {
                        return Err(Failure::Runtime(anyhow::anyhow!(
                            "topic {topic} is a ROS 2 topic the bridge carries nothing of \
                             into Nerve: {}",
                            n.why
                        )));
                    }
                }
                if deadline.is_some_and(|d| Instant::now() >= d) || nerve::shutdown::requested() {
                    return Err(Failure::Runtime(match &uncarried {
                        Some(n) => anyhow::anyhow!(
                            "topic {topic} is a ROS 2 topic the bridge carries nothing of \
                             into Nerve yet: {}",
                            n.why
                        ),
                        None => anyhow::anyhow!("topic {topic} does not exist"),
                    }));
                }
                if !told && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                    match &uncarried {
                        Some(n) => eprintln!("waiting for topic {topic}: {}", n.why),
                        None => eprintln!("waiting for topic {topic} to appear…"),
                    }
                    told = true;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(topic_error(e)),
        }
    }
}

/// The type of a topic published on other hosts only.
pub(crate) enum Remote {
    /// A type this tool is built with.
    Known(nerve::TypeInfo),
    /// Another type, described by the schema its publishers offer.
    Described(nerve::message::schema::Schema),
}

/// The type of a topic that has publishers on other hosts: one this tool knows, or the
/// schema their processes offer (checked against the layout hash they announce).
pub(crate) fn remote_type(ctx: &nerve::Context, topic: &str) -> Result<Option<Remote>, Failure> {
    let (_, remote) = remote::discover(ctx)?;
    let publishers: Vec<_> = remote
        .iter()
        .filter(|e| e.name == topic && e.kind == EntityKind::Publisher)
        .collect();
    let known = publishers.iter().find_map(|e| {
        let ty = (types::find(&e.type_name)?.type_info)();
        (ty.layout_hash == e.type_hash).then_some(ty)
    });
    if let Some(ty) = known {
        return Ok(Some(Remote::Known(ty)));
    }
    let Some(e) = publishers.first() else {
        return Ok(None);
    };
    let schema = nerve::net::remote_schema(ctx.config(), e.type_hash, remote::DISCOVERY_WINDOW)
        .map_err(|err| Failure::Runtime(err.into()))?;
    Ok(schema
        .filter(|s| s.name == e.type_name)
        .map(Remote::Described))
}

fn info_json(t: &TopicInfo) -> Value {
    let schema = match &t.schema {
        Some(Ok(s)) => json!(s.encode()),
        Some(Err(e)) => json!(format!("refused: {e}")),
        None => json!(null),
    };
    json!({
        "name": t.name,
        "type": t.type_info.name,
        "layout_hash": format!("{:016x}", t.type_info.layout_hash),
        "head_size": t.type_info.head_size,
        "elem_size": t.type_info.elem_size,
        "publishers": t.publishers,
        "subscribers": t.subscribers,
        "history": t.history,
        "max_depth": t.max_depth,
        "overflow": t.overflow,
        "max_publishers": t.max_publishers,
        "max_subscribers": t.max_subscribers,
        "schema": schema,
    })
}

/// `topic info` of a ROS 2 topic with no Nerve side, from the bridge's graph: its types,
/// endpoints and why the bridge carries nothing of it (`None` for a topic not in it).
fn ros2_info(g: &nerve_ros2_map::graph::RosGraph, topic: &str) -> Option<Value> {
    let t = g.topics.get(topic)?;
    let types: Vec<&str> = t.types.iter().map(String::as_str).collect();
    let mut v = json!({"name": topic, "type": types.join(","), "host": crate::ros2::ROS2,
        "ros2": true, "publishers": t.publishers, "subscribers": t.subscriptions});
    if let Some(n) = g.not_carried.get(topic) {
        v["not_carried"] = json!(n);
    }
    Some(v)
}

/// `topic info`'s human form: one field a line.
fn print_fields(v: &Value) {
    for (k, val) in v.as_object().into_iter().flatten() {
        println!(
            "{k:>16}: {}",
            val.as_str().map(str::to_string).unwrap_or(val.to_string())
        );
    }
}

/// The schema of a type that is not built in, read from the topic it is published on.
fn topic_schema(
    node: &nerve::Node,
    topic: &str,
    type_name: &str,
) -> Result<nerve::message::schema::Schema, Failure> {
    let unknown = |why: String| {
        usage(format!(
            "unknown message type {type_name:?}: not built in (see `nerve types`), and {why}"
        ))
    };
    let info = introspect::topic_info(node, topic)
        .map_err(|_| unknown(format!("topic {topic} does not exist to describe it")))?;
    let short = |n: &str| n.rsplit('/').next().map(str::to_string);
    if info.type_info.name != type_name && short(&info.type_info.name) != short(type_name) {
        return Err(usage(format!(
            "topic {topic} carries {}, not {type_name}",
            info.type_info.name
        )));
    }
    match info.schema {
        Some(Ok(s)) => Ok(s),
        Some(Err(e)) => Err(Failure::Runtime(anyhow::anyhow!(
            "topic {topic}: its schema cannot be used: {e}"
        ))),
        None => Err(unknown(format!("topic {topic} records no schema"))),
    }
}

/// Runs a topic command.
pub fn run(ctx: &nerve::Context, cmd: TopicCommand) -> CmdResult {
    match cmd {
        TopicCommand::List(f) => {
            let node = cli_node(ctx)?;
            let topics = introspect::list_topics(&node).map_err(anyhow::Error::msg)?;
            let (host, remote) = remote::discover(ctx)?;
            let remote = remote::group(&remote, EntityKind::Publisher, EntityKind::Subscriber);
            // ROS 2's topics, where a bridge runs
            let ros2 = crate::ros2::graph(&node).unwrap_or_default();
            let ros2_rows = ros2.topics.iter().map(|(name, t)| {
                let types: Vec<&str> = t.types.iter().map(String::as_str).collect();
                (name, types.join(","), t.publishers, t.subscriptions)
            });
            // what the bridge carries nothing of, and why (as `topic info/echo` say)
            let uncarried = ros2
                .not_carried
                .iter()
                .filter(|(name, _)| ros2.topics.contains_key(*name));
            match f.format {
                Format::Json => {
                    let mut list: Vec<Value> = topics
                        .iter()
                        .map(|t| {
                            let mut v = info_json(t);
                            v["host"] = json!(host);
                            v
                        })
                        .collect();
                    list.extend(remote::json_rows(&remote, ("publishers", "subscribers")));
                    list.extend(ros2_rows.map(|(name, ty, p, s)| {
                        let mut v = json!({"name": name, "type": ty, "host": crate::ros2::ROS2,
                            "ros2": true, "publishers": p, "subscribers": s});
                        if let Some(n) = ros2.not_carried.get(name) {
                            v["not_carried"] = json!(n);
                        }
                        v
                    }));
                    output::json(&Value::Array(list))?
                }
                Format::Human => {
                    let mut rows: Vec<Vec<String>> = topics
                        .iter()
                        .map(|t| {
                            vec![
                                t.name.clone(),
                                t.type_info.name.clone(),
                                host.clone(),
                                t.publishers.to_string(),
                                t.subscribers.to_string(),
                            ]
                        })
                        .collect();
                    rows.extend(remote::table_rows(&remote));
                    rows.extend(ros2_rows.map(|(name, ty, p, s)| {
                        vec![
                            name.clone(),
                            ty,
                            crate::ros2::ROS2.to_string(),
                            p.to_string(),
                            s.to_string(),
                        ]
                    }));
                    output::table(&["TOPIC", "TYPE", "HOST", "PUBS", "SUBS"], &rows)?;
                    for (name, n) in uncarried {
                        println!(
                            "{name} ({}): nothing carried into Nerve: {}",
                            n.ros_type, n.why
                        );
                    }
                }
            }
            Ok(())
        }
        TopicCommand::Info { topic, format } => {
            let node = cli_node(ctx)?;
            let topic = resolve_topic(&node, &topic)?;
            let local = match introspect::topic_info(&node, &topic) {
                Ok(t) => Some(t),
                Err(TopicError::Shm { .. }) => None,
                Err(e) => return Err(topic_error(e)),
            };
            let (host, remote) = remote::discover(ctx)?;
            let remote: Vec<_> = remote.into_iter().filter(|e| e.name == topic).collect();
            if local.is_none() && remote.is_empty() {
                // a ROS 2 topic with no Nerve side: as the bridge sees it, and why
                let Some(v) = crate::ros2::graph(&node).and_then(|g| ros2_info(&g, &topic)) else {
                    return Err(Failure::Runtime(anyhow::anyhow!(
                        "topic {topic} does not exist"
                    )));
                };
                match format {
                    Format::Json => output::json(&v)?,
                    Format::Human => print_fields(&v),
                }
                return Ok(());
            }
            let mut v = local
                .as_ref()
                .map_or_else(|| json!({"name": topic}), info_json);
            v["host"] = json!(host);
            // a ROS 2 subscription the bridge cannot serve, by name
            if let Some(why) =
                crate::ros2::graph(&node).and_then(|g| g.qos_mismatches.get(&topic).cloned())
            {
                v["ros2_qos_mismatch"] = json!(why);
            }
            if nerve::net::local_host(ctx.config())?.is_some() {
                v["remote"] = json!(remote
                    .iter()
                    .map(
                        |e| json!({"kind": e.kind, "host": e.host, "type": e.type_name,
                        "layout_hash": format!("{:016x}", e.type_hash)})
                    )
                    .collect::<Vec<_>>());
                // network counters of this topic's subscribers and publishers, per process
                let counters = nerve::net::net_counters(ctx.config(), Duration::from_millis(500))?;
                v["network"] = json!(counters
                    .iter()
                    .flat_map(|c| c.topics.iter().filter(|t| t.topic == topic).map(|t| {
                        json!({"host": c.host, "pid": c.pid, "arrived": t.arrived,
                            "refused": t.refused, "sent": t.sent})
                    }))
                    .collect::<Vec<_>>());
                // endpoints of this topic the access-control policy denies, per process
                let denied: Vec<_> = counters
                    .iter()
                    .flat_map(|c| {
                        c.denied.iter().filter(|d| d.name == topic).map(|d| {
                            json!({"host": c.host, "pid": c.pid, "kind": d.kind,
                            "denied_by_policy": format!("rule {:?} ({})", d.rule, d.at),
                            "withheld": d.withheld})
                        })
                    })
                    .collect();
                if !denied.is_empty() {
                    v["denied"] = json!(denied);
                }
            }
            match format {
                Format::Json => output::json(&v)?,
                Format::Human => {
                    print_fields(&v);
                    if let Some(Some(Ok(schema))) = local.as_ref().map(|t| &t.schema) {
                        println!("{:>16}:", "layout");
                        print!("{}", types::layout_tree(schema));
                    }
                }
            }
            Ok(())
        }
        TopicCommand::Echo {
            topic,
            count,
            max_elems,
            wait,
            format,
        } => {
            let limit = wait.timeout.map(|t| seconds("timeout", t)).transpose()?;
            let deadline = limit.map(|l| Instant::now() + l);
            let node = cli_node(ctx)?;
            let sub = subscribe(&node, &topic, deadline)?;
            let entry = types::find(&sub.type_info().name);
            let ros2 = crate::ros2::ros2_registry(sub.schema())?;
            let shown = Shown {
                // a built-in type decodes by its own schema, any other by the topic's
                schema: match (&entry, sub.schema()) {
                    (Some(e), _) => Some(Ok((e.schema)())),
                    (None, s) => s.map(|r| r.clone().map_err(|e| e.to_string())),
                },
                ros2: if entry.is_none() { ros2.as_ref() } else { None },
                max_elems,
                format,
            };
            let mut n = 0u64;
            while count.is_none_or(|c| n < c) && !nerve::shutdown::requested() {
                let slice = match deadline {
                    Some(d) => d.saturating_duration_since(Instant::now()),
                    None => Duration::from_millis(200),
                };
                if slice.is_zero() {
                    break;
                }
                let Some(s) = sub.recv_timeout(slice.min(Duration::from_millis(200)))? else {
                    continue;
                };
                n += 1;
                print_sample(sub.topic(), &sub, &shown, &s)?;
            }
            if let Some(c) = count {
                if n < c && !nerve::shutdown::requested() {
                    return Err(Failure::Runtime(anyhow::anyhow!(
                        "received {n} of {c} messages on {topic} before the timeout"
                    )));
                }
            }
            Ok(())
        }
        TopicCommand::Hz(a) => measure(ctx, a, Measure::Rate),
        TopicCommand::Bw(a) => measure(ctx, a, Measure::Bandwidth),
        TopicCommand::Pub {
            topic,
            type_name,
            json,
            rate,
            count,
            once,
            qos,
            wait_subscribers,
        } => {
            let value = json.value(&type_name)?;
            if !(rate.is_finite() && rate >= 0.0) {
                return Err(usage(format!(
                    "--rate must be a non-negative number, got {rate}"
                )));
            }
            let opt = PubOptions {
                rate,
                count: if once { Some(1) } else { count },
                qos: qos.qos(),
                wait: seconds("wait-subscribers", wait_subscribers)?,
            };
            let node = cli_node(ctx)?;
            // the publisher resolves `topic` itself (resolving twice would chain remaps);
            // the schema lookup and the report use the resolved name
            let resolved = resolve_topic(&node, &topic)?;
            // a ROS 2 name of a standard type Nerve holds exactly is that Nerve type, as
            // the bridge carries it (nerve_ros2_map; its JSON is the Nerve type's)
            let standard = nerve_ros2_map::of_ros(&type_name, &[]).map(|s| (s.schema)());
            let sent = match (types::find(&type_name), standard) {
                (Some(entry), _) => (entry.publish)(&node, &topic, &value, &opt)?,
                (None, Some(schema)) => match types::find(&schema.name) {
                    Some(entry) => (entry.publish)(&node, &topic, &value, &opt)?,
                    None => types::publish_with_schema(&node, &topic, &schema, &value, &opt)?,
                },
                (None, None) => match topic_schema(&node, &resolved, &type_name) {
                    // not built in: the topic's recorded schema describes it
                    Ok(schema) => match crate::ros2::Ros2Type::of(&schema) {
                        Some(ros2) => ros2?.publish(&node, &topic, &value, &opt)?,
                        None => types::publish_with_schema(&node, &topic, &schema, &value, &opt)?,
                    },
                    // or a ROS 2 type whose definition is on AMENT_PREFIX_PATH
                    Err(e) if type_name.matches('/').count() == 2 => {
                        crate::ros2::Ros2Type::from_search_path(&type_name)
                            .map_err(|_| e)?
                            .publish(&node, &topic, &value, &opt)?
                    }
                    Err(e) => return Err(e),
                },
            };
            eprintln!("published {sent} message(s) on {resolved}");
            Ok(())
        }
    }
}

/// How `topic echo` shows a topic's samples.
struct Shown<'a> {
    /// The schema the samples are decoded by: the built-in type's, or the one the topic
    /// records (`Err`: why it was refused).
    schema: Option<Result<Schema, String>>,
    /// The ROS 2 definition, for CDR carriers.
    ros2: Option<&'a crate::ros2::Ros2Type>,
    /// Most slice elements to show (`None`: all).
    max_elems: Option<usize>,
    /// Output format.
    format: Format,
}

fn print_sample(topic: &str, sub: &RawSubscriber, shown: &Shown<'_>, s: &RawSample) -> CmdResult {
    let ty = sub.type_info();
    let h = s.header();
    let max = shown.max_elems.unwrap_or(usize::MAX);
    let msg = match (shown.ros2, &shown.schema) {
        (Some(r), _) => r.to_json(s.bytes()),
        (None, Some(Ok(schema))) => {
            if s.elems() > max {
                eprintln!(
                    "note: {topic} seq {}: showing {max} of {} elements (--max-elems); \
                     `topic pub` refuses a shortened message",
                    h.seq,
                    s.elems()
                );
            }
            nerve::message::json::to_json(schema, s.bytes(), s.elems(), max)
        }
        (None, schema) => {
            let prefix: String = s
                .bytes()
                .iter()
                .take(32)
                .map(|b| format!("{b:02x}"))
                .collect();
            let why = match schema {
                Some(Err(e)) => format!("schema refused: {e}"),
                _ => "no schema recorded on the topic".to_string(),
            };
            json!({"size": s.bytes().len(), "hex_prefix": prefix, "undecoded": why})
        }
    };
    let header = json!({
        "seq": h.seq,
        "publish_mono_ns": h.publish_mono_ns,
        "publish_wall_ns": h.publish_wall_ns,
        "publisher_id": format!("{:016x}", h.publisher_id),
        "size": h.payload_len,
    });
    match shown.format {
        Format::Json => {
            output::json(&json!({"topic": topic, "type": ty.name, "header": header, "msg": msg}))?
        }
        Format::Human => {
            println!(
                "--- {topic} [{}] seq {} from {:016x}, {} bytes",
                ty.name, h.seq, h.publisher_id, h.payload_len
            );
            println!("{}", serde_json::to_string_pretty(&msg).unwrap_or_default());
        }
    }
    Ok(())
}

enum Measure {
    Rate,
    Bandwidth,
}

/// Running mean and variance (Welford), min and max.
#[derive(Default)]
struct Running {
    n: u64,
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
}

impl Running {
    fn add(&mut self, x: f64) {
        self.n += 1;
        if self.n == 1 {
            self.min = x;
            self.max = x;
        }
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }
    fn std(&self) -> f64 {
        if self.n > 1 {
            (self.m2 / (self.n - 1) as f64).sqrt()
        } else {
            0.0
        }
    }
}

fn measure(ctx: &nerve::Context, args: MeasureArgs, what: Measure) -> CmdResult {
    let MeasureArgs {
        topic,
        duration,
        wait,
        format,
    } = args;
    let topic = topic.as_str();
    let window = seconds("duration", duration)?;
    let limit = wait.timeout.map(|t| seconds("timeout", t)).transpose()?;
    let node = cli_node(ctx)?;
    let sub = subscribe(&node, topic, limit.map(|l| Instant::now() + l))?;
    let topic = sub.topic().to_string();
    let topic = topic.as_str();
    let start = Instant::now();
    let end = start + window;
    let mut periods = Running::default();
    let mut sizes = Running::default();
    let mut first: Option<Instant> = None;
    let mut last: Option<Instant> = None;
    let mut bytes = 0u64;
    while !nerve::shutdown::requested() {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        if let Some(s) = sub.recv_timeout(left.min(Duration::from_millis(200)))? {
            let now = Instant::now();
            if let Some(prev) = last {
                periods.add((now - prev).as_secs_f64());
            }
            first.get_or_insert(now);
            last = Some(now);
            sizes.add(s.bytes().len() as f64);
            bytes += s.bytes().len() as u64;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let span = match (first, last) {
        (Some(a), Some(b)) => (b - a).as_secs_f64(),
        _ => 0.0,
    };
    let rate = if span > 0.0 {
        (sizes.n.saturating_sub(1)) as f64 / span
    } else {
        0.0
    };
    let lost = sub.stats().lost;
    match what {
        Measure::Rate => {
            let v = json!({
                "topic": topic, "messages": sizes.n, "rate_hz": rate,
                "period_min_s": periods.min, "period_max_s": periods.max,
                "period_mean_s": periods.mean, "period_std_s": periods.std(),
                "lost": lost, "window_s": elapsed,
            });
            match format {
                Format::Json => output::json(&v)?,
                Format::Human => println!(
                    "{topic}: {rate:.3} Hz over {} messages; period min {:.3} ms, max {:.3} ms, std {:.3} ms; {lost} lost",
                    sizes.n,
                    periods.min * 1e3,
                    periods.max * 1e3,
                    periods.std() * 1e3
                ),
            }
        }
        Measure::Bandwidth => {
            let bps = if elapsed > 0.0 {
                bytes as f64 / elapsed
            } else {
                0.0
            };
            let v = json!({
                "topic": topic, "messages": sizes.n, "bytes_per_s": bps,
                "mean_bytes": sizes.mean, "min_bytes": sizes.min, "max_bytes": sizes.max,
                "window_s": elapsed,
            });
            match format {
                Format::Json => output::json(&v)?,
                Format::Human => println!(
                    "{topic}: {:.3} MB/s over {} messages; size mean {:.0} B, min {:.0} B, max {:.0} B",
                    bps / 1e6,
                    sizes.n,
                    sizes.mean,
                    sizes.min,
                    sizes.max
                ),
            }
        }
    }
    Ok(())
}
