//! The Rust door of the conformance matrix (crates/nerve-py/tests/test_conformance.py):
//! performs one command through Nerve's type-erased Rust API and prints its outcome as one
//! JSON line, in the vocabulary every door shares (`{"ok": ...}` or
//! `{"error": KIND, "message": ...}`).
//!
//! `conformance roundtrip TOPIC TYPE [--max-payload BYTES] < values.json` reads a JSON
//! array of messages, subscribes to TOPIC (resolved under `NERVE_NAMESPACE` and
//! `NERVE_REMAP`, as every door resolves names), publishes each message with the schema of
//! the built-in type TYPE (`nerve_msgs/Imu` or `Imu`) and prints
//! `{"topic": RESOLVED, "results": [OUTCOME, ...]}`: for each message what came back, as
//! JSON, or why it was refused (`--unsent-loans N` first loans N samples and drops each
//! unsent; `--wait-clock` first waits for the clock to leave 0, as under simulation time
//! until the first /clock message); each message that came back carries its header's
//! `wall_ns`. An error before any message (a bad name, a topic of
//! another type) prints one outcome for the whole command.
//!
//! `conformance spin TOPIC TYPE` spins a node with a subscription on TOPIC in an
//! executor, prints `spinning` once it does, and after Ctrl-C (or SIGTERM) prints the
//! outcome `{"ok": "interrupted"}`.
//!
//! `conformance call SERVICE TYPE [--timeout-ms MS] < request.json` calls a service of the
//! standard type TYPE (`nerve_msgs/AddTwoInts` or `AddTwoInts`) once, waiting as
//! `nerve service call` does (first for a server, then for the response), and prints the
//! outcome: the response as JSON, or `no_server`, `timeout`, `server_gone`,
//! `handler_failed`.

use clap::{Parser, Subcommand};
use nerve::message::json::{from_json, to_json};
use nerve::message::schema::Schema;
use nerve::{
    CallError, LoanError, PublishError, Qos, RawClient, RawPublisher, RawSubscriber, ServiceError,
    ServiceQos, ServiceType, TopicError, WaitMode,
};
use serde_json::{json, Value};
use std::io::Read;
use std::time::Duration;

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Publish each message of a JSON array read from stdin and print what came back.
    Roundtrip {
        /// Topic name (absolute, relative or private).
        topic: String,
        /// Built-in message type, full or short name.
        type_name: String,
        /// The topic's largest payload in bytes (QoS `max_payload`).
        #[arg(long)]
        max_payload: Option<usize>,
        /// Loans this many samples first and drops each unsent.
        #[arg(long, default_value_t = 0)]
        unsent_loans: usize,
        /// Waits for the context's clock to leave 0 first (simulation time: the first
        /// message on /clock).
        #[arg(long)]
        wait_clock: bool,
    },
    /// Spin a node with a subscription on TOPIC until Ctrl-C (SIGINT) or SIGTERM.
    Spin {
        /// Topic name.
        topic: String,
        /// Built-in message type, full or short name.
        type_name: String,
    },
    /// Call a service once with the JSON request read from stdin.
    Call {
        /// Service name.
        service: String,
        /// Standard service type, full or short name.
        type_name: String,
        /// How long to wait for a server, then for the response.
        #[arg(long, default_value_t = 5000)]
        timeout_ms: u64,
    },
}

/// How long one message may take to come back.
const RECV_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest wait at the end for other subscribers to attach (see
/// [`nerve::Publisher::settle`]), as `nerve topic pub` waits.
const SETTLE: Duration = Duration::from_secs(1);

/// An outcome of the shared vocabulary.
fn error(kind: &str, message: impl ToString) -> Value {
    json!({"error": kind, "message": message.to_string()})
}

/// The kind of a topic error.
fn topic_kind(e: &TopicError) -> &'static str {
    match e {
        TopicError::Name(_) => "bad_name",
        TopicError::TypeMismatch { .. } => "type_mismatch",
        _ => "failed",
    }
}

/// The kind of a publish error.
fn publish_kind(e: &PublishError) -> &'static str {
    match e {
        PublishError::Loan(LoanError::PayloadTooLarge { .. }) => "too_large",
        _ => "failed",
    }
}

/// The kind of a JSON conversion error (its reason says which rule refused the value).
fn json_kind(reason: &str) -> &'static str {
    if reason.contains("out of range") {
        "out_of_range"
    } else {
        "bad_value"
    }
}

fn roundtrip(
    topic: &str,
    type_name: &str,
    max_payload: Option<usize>,
    unsent_loans: usize,
    wait_clock: bool,
) -> Value {
    let Some(schema) = nerve_msgs::schemas()
        .into_iter()
        .find(|s| s.name == type_name || s.name.rsplit('/').next() == Some(type_name))
    else {
        return error(
            "unknown_type",
            format!("unknown message type {type_name:?}"),
        );
    };
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        return error("bad_value", format!("stdin: {e}"));
    }
    let values: Vec<Value> = match serde_json::from_str(&input) {
        Ok(Value::Array(v)) => v,
        Ok(_) => return error("bad_value", "stdin: expected a JSON array of messages"),
        Err(e) => return error("bad_value", format!("stdin is not JSON: {e}")),
    };
    let ctx = match nerve::Context::from_env() {
        Ok(c) => c,
        Err(e) => return error("failed", e),
    };
    let node = match ctx.node("conformance_rust").create() {
        Ok(n) => n,
        Err(e) => return error("failed", e),
    };
    if wait_clock {
        let deadline = std::time::Instant::now() + RECV_TIMEOUT;
        while ctx.clock().now_ns() == 0 {
            if std::time::Instant::now() >= deadline {
                return error(
                    "timeout",
                    format!("the clock stayed at 0 for {RECV_TIMEOUT:?}"),
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let mut qos = Qos::sensor().depth(64);
    if let Some(max) = max_payload {
        let initial = max.min(qos.initial_payload);
        qos = qos.payload(initial, max);
    }
    match run(&node, topic, &schema, qos, &values, unsent_loans) {
        Ok(v) => v,
        Err(outcome) => outcome,
    }
}

fn run(
    node: &nerve::Node,
    topic: &str,
    schema: &Schema,
    qos: Qos,
    values: &[Value],
    unsent_loans: usize,
) -> Result<Value, Value> {
    let publisher = RawPublisher::create(node, topic, schema, qos.clone())
        .map_err(|e| error(topic_kind(&e), &e))?;
    let subscriber =
        RawSubscriber::create(node, topic, qos).map_err(|e| error(topic_kind(&e), &e))?;
    for _ in 0..unsent_loans {
        // a loan dropped unsent goes back to the pool and is never delivered
        drop(
            publisher
                .loan(schema.type_info().head_size)
                .map_err(|e| error("failed", &e))?,
        );
    }
    let mut results = Vec::new();
    for v in values {
        let bytes = match from_json(schema, v) {
            Ok((bytes, _)) => bytes,
            Err(e) => {
                results.push(error(json_kind(&e.reason), &e));
                continue;
            }
        };
        if let Err(e) = publisher.publish_bytes(&bytes) {
            results.push(error(publish_kind(&e), &e));
            continue;
        }
        results.push(match subscriber.recv_timeout(RECV_TIMEOUT) {
            Ok(Some(s)) => json!({
                "ok": to_json(schema, s.bytes(), s.elems(), usize::MAX),
                "wall_ns": s.header().publish_wall_ns,
            }),
            Ok(None) => error(
                "timeout",
                format!("nothing came back within {RECV_TIMEOUT:?}"),
            ),
            Err(e) => error("failed", e),
        });
    }
    // what was sent survives this process for subscribers that have not attached yet
    publisher.settle(SETTLE);
    Ok(json!({"topic": subscriber.topic(), "results": results}))
}

/// The kind of a call error.
fn call_kind(e: &CallError) -> &'static str {
    match e {
        CallError::NoServer { .. } => "no_server",
        CallError::Timeout { .. } => "timeout",
        CallError::ServerGone { .. } => "server_gone",
        CallError::Handler { .. } => "handler_failed",
        CallError::PayloadTooLarge { .. } => "too_large",
        _ => "failed",
    }
}

/// The kind of a service error.
fn service_kind(e: &ServiceError) -> &'static str {
    match e {
        ServiceError::Name(_) => "bad_name",
        ServiceError::TypeMismatch { .. } => "type_mismatch",
        _ => "failed",
    }
}

fn call(service: &str, type_name: &str, timeout: Duration) -> Value {
    let Some(info) = nerve_msgs::srv::services()
        .into_iter()
        .find(|s| s.name == type_name || s.name.rsplit('/').next() == Some(type_name))
    else {
        return error(
            "unknown_type",
            format!("unknown service type {type_name:?}"),
        );
    };
    let schema = |name: &str| nerve_msgs::schemas().into_iter().find(|s| s.name == name);
    let (Some(request), Some(response)) = (schema(info.request), schema(info.response)) else {
        return error(
            "unknown_type",
            format!("{}: no schema of its payloads", info.name),
        );
    };
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        return error("bad_value", format!("stdin: {e}"));
    }
    let value: Value = match serde_json::from_str(&input) {
        Ok(v) => v,
        Err(e) => return error("bad_value", format!("stdin is not JSON: {e}")),
    };
    let bytes = match from_json(&request, &value) {
        Ok((bytes, _)) => bytes,
        Err(e) => return error(json_kind(&e.reason), &e),
    };
    let ctx = match nerve::Context::from_env() {
        Ok(c) => c,
        Err(e) => return error("failed", e),
    };
    let node = match ctx.node("conformance_rust").create() {
        Ok(n) => n,
        Err(e) => return error("failed", e),
    };
    let ty = ServiceType::new(info.name, request.type_info(), response.type_info());
    let client =
        match RawClient::create(&node, service, &ty, ServiceQos::default(), WaitMode::Block) {
            Ok(c) => c,
            Err(e) => return error(service_kind(&e), &e),
        };
    if !client.wait_for_service(timeout) {
        return error(
            "no_server",
            format!("service {}: no server within {timeout:?}", client.name()),
        );
    }
    match client
        .send_bytes(&bytes)
        .and_then(|call| call.wait(timeout))
    {
        Ok(reply) => json!({"ok": to_json(&response, reply.bytes(), reply.elems(), usize::MAX)}),
        Err(e) => error(call_kind(&e), &e),
    }
}

fn spin(topic: &str, type_name: &str) -> Value {
    let Some(schema) = nerve_msgs::schemas()
        .into_iter()
        .find(|s| s.name == type_name || s.name.rsplit('/').next() == Some(type_name))
    else {
        return error(
            "unknown_type",
            format!("unknown message type {type_name:?}"),
        );
    };
    let run = || -> Result<(), Value> {
        let ctx = nerve::Context::from_env().map_err(|e| error("failed", e))?;
        let node = ctx
            .node("conformance_rust")
            .create()
            .map_err(|e| error("failed", e))?;
        let sub = RawSubscriber::with_schema(&node, topic, &schema, Qos::sensor())
            .map_err(|e| error(topic_kind(&e), &e))?;
        let mut exec = nerve::Executor::new();
        exec.subscribe_raw(sub, |_| Ok(()))
            .map_err(|e| error("failed", e))?;
        println!("spinning");
        // SIGINT and SIGTERM end the spin (the executor handles them)
        exec.spin().map_err(|e| error("failed", e))
    };
    match run() {
        Ok(()) => json!({"ok": "interrupted"}),
        Err(e) => e,
    }
}

fn main() {
    let args = Args::parse();
    let outcome = match args.command {
        Command::Roundtrip {
            topic,
            type_name,
            max_payload,
            unsent_loans,
            wait_clock,
        } => roundtrip(&topic, &type_name, max_payload, unsent_loans, wait_clock),
        Command::Spin { topic, type_name } => spin(&topic, &type_name),
        Command::Call {
            service,
            type_name,
            timeout_ms,
        } => call(&service, &type_name, Duration::from_millis(timeout_ms)),
    };
    println!("{outcome}");
}
