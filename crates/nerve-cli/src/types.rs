//! The message types the tool knows: decoding samples to JSON and publishing from JSON.

use crate::failure::{client_failure, no_server, usage, CmdResult, Failure};
use crate::output::{self, Format};
use nerve::message::json::from_json_over;
use nerve::message::schema::{Schema, Shape};
use nerve::message::{as_bytes, elems_offset, read_pod};
use nerve::{Message, Qos};
use nerve_msgs::srv;
use nerve_msgs::*;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// `nerve types`: lists the types, or runs a subcommand.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TypesArgs {
    /// What to do instead of listing.
    #[command(subcommand)]
    pub command: Option<TypesCommand>,
    /// Options of the listing.
    #[command(flatten)]
    pub format: output::FormatArg,
}

/// Subcommands of `nerve types`.
#[derive(clap::Subcommand)]
pub enum TypesCommand {
    /// Generate C++ headers (structs with static_asserted layouts and nerve::message_traits)
    /// of the built-in types, or of the types in schema files or on topics.
    GenCpp(crate::gen_headers::GenArgs),
    /// Generate C headers (structs with _Static_asserted layouts, and macros of the type
    /// name, layout hash and schema text) of the built-in types, or of the types in schema
    /// files or on topics.
    GenC(crate::gen_headers::GenArgs),
}

/// Options of `topic pub`.
pub struct PubOptions {
    /// Messages per second.
    pub rate: f64,
    /// Messages to send (`None`: until interrupted).
    pub count: Option<u64>,
    /// Quality of service.
    pub qos: Qos,
    /// How long to wait for a first subscriber.
    pub wait: Duration,
}

/// One known type.
pub struct TypeEntry {
    /// Type name, e.g. `nerve_msgs/Imu`.
    pub name: &'static str,
    /// The type's schema: its JSON goes through it both ways, as any other type's does.
    pub schema: fn() -> Schema,
    /// Publishes a JSON value on a topic.
    pub publish: fn(&nerve::Node, &str, &Value, &PubOptions) -> Result<u64, Failure>,
    /// The type's identity.
    pub type_info: fn() -> nerve::TypeInfo,
}

macro_rules! registry {
    ($($t:ty),*) => {
        /// All known types.
        pub fn registry() -> Vec<TypeEntry> {
            vec![$(TypeEntry {
                name: <$t as Message>::TYPE_NAME,
                schema: Schema::of::<$t>,
                publish: publish::<$t>,
                type_info: nerve::TypeInfo::of::<$t>,
            }),*]
        }
    };
}
registry!(
    CmdVel,
    Twist,
    BatteryState,
    Imu,
    Odometry,
    LaserScan,
    PointCloud,
    Image
);

/// Finds a type by its full name or its short name (`Imu`).
pub fn find(name: &str) -> Option<TypeEntry> {
    registry()
        .into_iter()
        .find(|e| e.name == name || e.name.rsplit('/').next() == Some(name))
}

/// A message head and its elements as JSON, through the type's schema (as `topic echo`
/// prints them, every element shown).
pub fn message_json<M: Message>(head: &M, elems: &[M::Elem]) -> Value {
    let mut bytes = as_bytes(head).to_vec();
    if std::mem::size_of::<M::Elem>() > 0 {
        bytes.resize(elems_offset::<M>(), 0);
        for e in elems {
            bytes.extend_from_slice(as_bytes(e));
        }
    }
    nerve::message::json::to_json(&Schema::of::<M>(), &bytes, elems.len(), usize::MAX)
}

/// A message built from JSON.
pub struct Built<M: Message> {
    /// The head.
    pub head: M,
    /// The slice elements.
    pub elems: Vec<M::Elem>,
    /// Element fields the JSON did not give (zero, not a default), by path.
    pub zero: Vec<String>,
}

/// Builds a message from JSON through its schema (the one conversion every JSON path
/// uses, see `nerve::message::json`): fields not given keep their defaults; slice types
/// take their elements from an `elems` array.
pub fn from_json<M: Message + Default>(v: &Value) -> Result<Built<M>, String> {
    let schema = Schema::of::<M>();
    let (bytes, missing) =
        from_json_over(&schema, as_bytes(&M::default()), v).map_err(|e| e.to_string())?;
    let head = read_pod::<M>(&bytes).ok_or_else(|| format!("{}: no head", M::TYPE_NAME))?;
    let size = std::mem::size_of::<M::Elem>();
    let elems = match bytes.get(elems_offset::<M>()..) {
        Some(rest) if size > 0 => rest.chunks_exact(size).filter_map(read_pod).collect(),
        _ => Vec::new(),
    };
    let zero = missing
        .into_iter()
        .filter(|f| f.starts_with("elems["))
        .collect();
    Ok(Built { head, elems, zero })
}

/// Names the element fields `pub` was not given (zero, not a default) on stderr.
fn note_zero(type_name: &str, fields: &[String]) {
    if !fields.is_empty() {
        eprintln!(
            "note: {type_name} fields not given are zero: {}",
            fields.join(", ")
        );
    }
}

fn publish<M: Message + Default>(
    node: &nerve::Node,
    topic: &str,
    v: &Value,
    opt: &PubOptions,
) -> Result<u64, Failure> {
    let Built { head, elems, zero } = from_json::<M>(v).map_err(usage)?;
    note_zero(M::TYPE_NAME, &zero);
    let publisher = node
        .publisher::<M>(topic)
        .qos(opt.qos.clone())
        .create()
        .map_err(|e| match e {
            nerve::TopicError::Name(_) | nerve::TopicError::InvalidQos { .. } => {
                usage(e.to_string())
            }
            e => Failure::Runtime(e.into()),
        })?;
    publisher.wait_for_subscribers(1, opt.wait);
    let sent = repeat(
        opt,
        || publisher.publish_slice(&head, &elems),
        || publisher.update_connections(),
    )?;
    // give late subscribers of a latched topic a moment to connect, and every subscriber
    // the time to attach before this publisher goes with what it sent
    publisher.update_connections();
    publisher.settle(SETTLE);
    Ok(sent)
}

/// Publishes a type that is not built in, built from JSON through its schema. Fields the
/// JSON leaves out are zero and named on stderr.
pub fn publish_with_schema(
    node: &nerve::Node,
    topic: &str,
    schema: &Schema,
    v: &Value,
    opt: &PubOptions,
) -> Result<u64, Failure> {
    let (bytes, missing) =
        nerve::message::json::from_json(schema, v).map_err(|e| usage(e.to_string()))?;
    if !missing.is_empty() {
        eprintln!(
            "note: {} fields not given are zero: {}",
            schema.name,
            missing.join(", ")
        );
    }
    let publisher = nerve::RawPublisher::create(node, topic, schema, opt.qos.clone())
        .map_err(|e| Failure::Runtime(e.into()))?;
    publisher.wait_for_subscribers(1, opt.wait);
    let sent = repeat(
        opt,
        || publisher.publish_bytes(&bytes),
        || publisher.update_connections(),
    )?;
    publisher.settle(SETTLE);
    Ok(sent)
}

/// Longest `topic pub` waits at the end for subscribers to attach (see
/// [`nerve::Publisher::settle`]).
pub(crate) const SETTLE: Duration = Duration::from_secs(1);

/// Calls `publish` at the options' rate until their count or Ctrl-C; returns how many.
/// Between sends, `idle` hands history to subscribers that joined meanwhile (a latched
/// topic's late joiners get it at once, not at the next send).
pub(crate) fn repeat(
    opt: &PubOptions,
    mut publish: impl FnMut() -> Result<(), nerve::PublishError>,
    idle: impl Fn(),
) -> Result<u64, Failure> {
    let period = if opt.rate > 0.0 {
        Duration::from_secs_f64(1.0 / opt.rate)
    } else {
        Duration::ZERO
    };
    let start = Instant::now();
    let count = opt.count.unwrap_or(u64::MAX);
    let mut sent = 0;
    while sent < count && !nerve::shutdown::requested() {
        publish().map_err(|e| Failure::Runtime(e.into()))?;
        sent += 1;
        if sent < count {
            // absolute deadlines (no drift); short sleeps so Ctrl-C is honoured at once
            let next = start + period.mul_f64(sent as f64);
            while let Some(d) = next.checked_duration_since(Instant::now()) {
                if nerve::shutdown::requested() {
                    break;
                }
                idle();
                std::thread::sleep(d.min(Duration::from_millis(20)));
            }
        }
    }
    Ok(sent)
}

/// A schema's layout as an indented tree: one line per field with its type and offset.
pub fn layout_tree(schema: &Schema) -> String {
    fn shape_name(s: &Shape) -> String {
        match s {
            Shape::Prim(p) => p.name().to_string(),
            Shape::Array { elem, len } => format!("[{}; {len}]", shape_name(elem)),
            Shape::Struct(st) => st.name.clone(),
            Shape::Opaque { size, .. } => format!("opaque ({size} bytes)"),
        }
    }
    fn walk(s: &Shape, depth: usize, base: usize, out: &mut String) {
        let Shape::Struct(st) = s else {
            return;
        };
        for f in &st.fields {
            let _ = writeln!(
                out,
                "{:indent$}{}: {} @{}",
                "",
                f.name,
                shape_name(&f.shape),
                base + f.offset,
                indent = 18 + 2 * depth
            );
            walk(&f.shape, depth + 1, base + f.offset, out);
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:18}{} ({} bytes)",
        "",
        schema.name,
        schema.head.size()
    );
    walk(&schema.head, 0, 0, &mut out);
    if let Some(e) = &schema.elem {
        let _ = writeln!(
            out,
            "{:18}elems: [{}] ({} bytes each)",
            "",
            shape_name(e),
            e.size()
        );
        walk(e, 1, 0, &mut out);
    }
    out
}

/// One known service type.
pub struct ServiceEntry {
    /// Type name, e.g. `nerve_msgs/AddTwoInts`.
    pub name: &'static str,
    /// Calls a service with a JSON request; returns the response as JSON.
    pub call: fn(&nerve::Node, &str, &Value, Duration) -> Result<Value, Failure>,
}

macro_rules! service_registry {
    ($($t:ty),*) => {
        /// All known service types.
        pub fn service_registry() -> Vec<ServiceEntry> {
            vec![$(ServiceEntry {
                name: <$t as nerve::Service>::TYPE_NAME,
                call: call::<$t>,
            }),*]
        }
    };
}
service_registry!(srv::Trigger, srv::SetBool, srv::AddTwoInts, srv::Echo);

/// Finds a service type by its full or short name.
pub fn find_service(name: &str) -> Option<ServiceEntry> {
    service_registry()
        .into_iter()
        .find(|e| e.name == name || e.name.rsplit('/').next() == Some(name))
}

fn call<S>(node: &nerve::Node, name: &str, v: &Value, timeout: Duration) -> Result<Value, Failure>
where
    S: nerve::Service,
    S::Request: Default,
{
    let Built { head, elems, zero } = from_json::<S::Request>(v).map_err(usage)?;
    note_zero(<S::Request as Message>::TYPE_NAME, &zero);
    let client = node.client::<S>(name).create().map_err(client_failure)?;
    if !client.wait_for_service(timeout) {
        return Err(no_server(name, timeout));
    }
    let reply = client.call_slice(&head, &elems, timeout)?;
    Ok(nerve::message::json::to_json(
        &Schema::of::<S::Response>(),
        reply.payload_bytes(),
        reply.elems().len(),
        usize::MAX,
    ))
}

/// JSON for people: indented.
pub fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// `nerve types`.
/// Lists the built-in message and service types and the message types seen on the
/// domain's topics (described by their recorded schemas).
pub fn list(ctx: &nerve::Context, format: Format) -> CmdResult {
    let messages: Vec<&str> = registry().iter().map(|e| e.name).collect();
    let services: Vec<&str> = service_registry().iter().map(|e| e.name).collect();
    let node = crate::topic::cli_node(ctx)?;
    // type name -> (layout hash, whether a schema describes it, topics)
    let mut seen: std::collections::BTreeMap<String, (u64, bool, Vec<String>)> = Default::default();
    for t in nerve::introspect::list_topics(&node).map_err(anyhow::Error::msg)? {
        let e = seen.entry(t.type_info.name.clone()).or_insert((
            t.type_info.layout_hash,
            false,
            Vec::new(),
        ));
        e.1 |= matches!(t.schema, Some(Ok(_)));
        e.2.push(t.name);
    }
    match format {
        Format::Json => {
            let domain: Vec<Value> = seen
                .iter()
                .map(|(name, (hash, schema, topics))| {
                    json!({"name": name, "layout_hash": format!("{hash:016x}"),
                        "schema": schema, "built_in": messages.contains(&name.as_str()),
                        "topics": topics})
                })
                .collect();
            output::json(&json!({"messages": messages, "services": services, "domain": domain}))?
        }
        Format::Human => {
            for m in &messages {
                println!("{m}");
            }
            for s in &services {
                println!("{s} (service)");
            }
            for (name, (_, schema, topics)) in &seen {
                if !messages.contains(&name.as_str()) {
                    let how = if *schema { "schema" } else { "no schema" };
                    println!("{name} (on {}; {how})", topics.join(", "));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_json_keeps_defaults_and_rejects_unknown_fields() {
        let m = from_json::<CmdVel>(&json!({"linear": 0.5})).unwrap().head;
        assert_eq!(m.linear, 0.5);
        assert_eq!(m.angular, 0.0);
        let e = from_json::<CmdVel>(&json!({"linaer": 0.5})).err().unwrap();
        assert!(e.contains("linaer"), "{e}");
        let e = from_json::<CmdVel>(&json!({"linear": "fast"}))
            .err()
            .unwrap();
        assert!(e.contains("CmdVel"), "{e}");
        let b = from_json::<LaserScan>(&json!({"range_max": 10.0, "elems": [1.0, 2.0]})).unwrap();
        assert_eq!((b.head.range_max, b.elems), (10.0, vec![1.0, 2.0]));
        assert!(from_json::<Imu>(&json!([1, 2])).is_err());
        // a default that is not zero stays (the identity quaternion's w)
        let imu = from_json::<Imu>(&json!({"orientation": {"x": 0.5}}))
            .unwrap()
            .head;
        assert_eq!((imu.orientation.x, imu.orientation.w), (0.5, 1.0));
    }

    #[test]
    fn built_in_numbers_follow_the_json_rules() {
        // f32 overflow is an error naming the field, not +inf
        let e = from_json::<CmdVel>(&json!({"linear": 1e39})).err().unwrap();
        assert!(
            e.contains("linear") && e.contains("out of range for f32"),
            "{e}"
        );
        let e = from_json::<srv::Bool>(&json!({"data": 256})).err().unwrap();
        assert!(
            e.contains("data") && e.contains("out of range for u8"),
            "{e}"
        );
        // what echo prints reads back to the same bits
        let imu = Imu {
            linear_acceleration: Vector3 {
                x: 0.9364630260594403,
                y: f64::NEG_INFINITY,
                z: -0.0,
            },
            angular_velocity: Vector3 {
                x: f64::NAN,
                y: 5e-324,
                z: f64::MAX,
            },
            ..Default::default()
        };
        let text = message_json(&imu, &[]).to_string();
        let back = from_json::<Imu>(&serde_json::from_str(&text).unwrap())
            .unwrap()
            .head;
        assert_eq!(as_bytes(&back), as_bytes(&imu), "{text}");
        let scan: Vec<f32> = (0..100)
            .map(|i| i as f32 / 3.0)
            .chain([f32::INFINITY])
            .collect();
        let v = message_json(&LaserScan::default(), &scan);
        assert_eq!(
            v["elems"].as_array().unwrap().len(),
            101,
            "every element shown"
        );
        assert_eq!(from_json::<LaserScan>(&v).unwrap().elems, scan);
    }

    #[test]
    fn frame_ids_are_text_both_ways() {
        let m = TwistStamped {
            header: Header {
                frame_id: FixedStr::new("base_link").unwrap(),
                ..Default::default()
            },
            ..Default::default()
        };
        let v = message_json(&m, &[]);
        assert_eq!(v["header"]["frame_id"], json!("base_link"));
        assert_eq!(from_json::<TwistStamped>(&v).unwrap().head, m);
        // an empty frame id is "", text beyond ASCII stays text
        let v = message_json(&TwistStamped::default(), &[]);
        assert_eq!(v["header"]["frame_id"], json!(""));
        let m = TwistStamped {
            header: Header {
                frame_id: FixedStr::new("käfig/ü").unwrap(),
                ..Default::default()
            },
            ..Default::default()
        };
        let v = message_json(&m, &[]);
        assert_eq!(v["header"]["frame_id"], json!("käfig/ü"));
        assert_eq!(from_json::<TwistStamped>(&v).unwrap().head, m);
        let e = from_json::<TwistStamped>(&json!({"header": {"frame_id": "x".repeat(65)}}))
            .err()
            .unwrap();
        assert!(e.contains("header.frame_id"), "{e}");
    }

    #[test]
    fn decode_round_trip() {
        let imu = Imu {
            linear_acceleration: Vector3 {
                x: 0.0,
                y: 0.0,
                z: 9.81,
            },
            ..Default::default()
        };
        let v = message_json(&imu, &[]);
        assert_eq!(v["linear_acceleration"]["z"], json!(9.81));
        assert!(
            find("Imu").is_some() && find("nerve_msgs/Imu").is_some() && find("Nope").is_none()
        );
    }
}
