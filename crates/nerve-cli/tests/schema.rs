//! Types the tool was never compiled against, described by the schema their topic
//! records: `topic echo` decodes them, `topic pub` writes them, `topic info` and `types`
//! describe them.

use nerve::prelude::*;
use serde_json::Value;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const DOMAIN: u32 = 995;

#[derive(Clone, Copy, Debug, PartialEq, nerve::Pod)]
#[repr(C)]
struct Corner {
    u: i32,
    v: i32,
}

/// A fixed-size type that exists only in this test binary.
#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "test_cli/Marker")]
struct Marker {
    x: f64,
    y: f64,
    label: [u8; 16],
    corners: [Corner; 2],
    id: u32,
    flags: u32,
}

/// A header + slice type that exists only in this test binary.
#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "test_cli/Trace", elem = f32)]
struct Trace {
    id: u64,
}

fn state_dir() -> std::path::PathBuf {
    std::env::temp_dir().join("nerve-cli-schema-test/")
}

fn context() -> Context {
    Context::new(
        nerve::Config::default()
            .domain(DOMAIN)
            .unwrap()
            .state_dir(state_dir()),
    )
    .unwrap()
}

fn nerve(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nerve"));
    c.args(args)
        .env("NERVE_DOMAIN", DOMAIN.to_string())
        .env("NERVE_STATE_DIR", state_dir())
        .env_remove("NERVE_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn json_out(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stdout));
    })
}

#[test]
fn custom_types_are_echoed_published_and_described() {
    let ctx = context();
    let node = ctx.node("schema_test").create().unwrap();
    let publisher = node.publisher::<Marker>("/cli/marker").create().unwrap();
    let sub = node
        .subscriber::<Marker>("/cli/marker")
        .qos(Qos::default().depth(16))
        .create()
        .unwrap();

    // echo: decoded by the schema the topic records
    let echo = nerve(&[
        "topic",
        "echo",
        "/cli/marker",
        "--count",
        "1",
        "--format",
        "json",
    ])
    .args(["--timeout", "10"])
    .spawn()
    .unwrap();
    let mut label = [0u8; 16];
    label[..4].copy_from_slice(b"base");
    let marker = Marker {
        x: 1.5,
        y: -2.0,
        label,
        corners: [Corner { u: 1, v: 2 }, Corner { u: -3, v: 4 }],
        id: 7,
        flags: 0xff,
    };
    assert!(publisher.wait_for_subscribers(2, Duration::from_secs(10)));
    publisher.publish(&marker).unwrap();
    let got = json_out(&echo.wait_with_output().unwrap());
    assert_eq!(got["type"], "test_cli/Marker");
    let msg = &got["msg"];
    assert_eq!(
        (msg["x"].as_f64(), msg["y"].as_f64()),
        (Some(1.5), Some(-2.0))
    );
    assert_eq!(msg["label"], "base");
    assert_eq!(msg["corners"][1]["u"], -3);
    assert_eq!(
        (msg["id"].as_u64(), msg["flags"].as_u64()),
        (Some(7), Some(255))
    );
    while sub.try_recv().unwrap().is_some() {}

    // pub: built from JSON through the schema; fields left out are zero and named
    // (received while the tool runs: a publisher that leaves before a subscriber attached
    // takes its unread drop-oldest samples with it)
    let cli = nerve(&["topic", "pub", "/cli/marker", "test_cli/Marker"])
        .arg(r#"{"x": 2.5, "label": "arm", "corners": [{"u": 5, "v": 6}, {"u": 7, "v": 8}]}"#)
        .args(["--once", "--wait-subscribers", "5"])
        .spawn()
        .unwrap();
    let m = sub
        .recv_timeout(Duration::from_secs(10))
        .unwrap()
        .expect("the CLI's sample");
    let out = cli.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("y, id, flags"), "{stderr}");
    assert_eq!((m.x, m.y, m.id, m.flags), (2.5, 0.0, 0, 0));
    assert_eq!(&m.label[..4], b"arm\0");
    assert_eq!(m.corners[1], Corner { u: 7, v: 8 });

    // pub: an unknown field or a value out of range is a usage error naming it
    for (json, needle) in [
        (r#"{"z": 1}"#, "has no field \"z\""),
        (r#"{"id": -1}"#, "id: -1 is out of range for u32"),
        (r#"{"label": "a label longer than sixteen"}"#, "label"),
    ] {
        let out = nerve(&["topic", "pub", "/cli/marker", "Marker", json, "--once"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{json}: {stderr}");
        assert!(stderr.contains(needle), "{json}: {stderr}");
    }

    // info: the schema and the layout
    let info = json_out(
        &nerve(&["topic", "info", "/cli/marker", "--format", "json"])
            .output()
            .unwrap(),
    );
    let schema = info["schema"].as_str().unwrap();
    assert!(
        schema.starts_with("nerve-schema/1|type=test_cli/Marker|"),
        "{schema}"
    );
    assert!(
        schema.contains("struct Corner 8 4 u:0:i32 v:4:i32"),
        "{schema}"
    );
    let human = nerve(&["topic", "info", "/cli/marker"]).output().unwrap();
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(human.contains("corners: [Corner; 2] @32"), "{human}");

    // types: the domain's types beside the built-in ones
    let types = json_out(&nerve(&["types", "--format", "json"]).output().unwrap());
    let marker_type = types["domain"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "test_cli/Marker")
        .expect("test_cli/Marker among the domain's types");
    assert_eq!(marker_type["schema"], true);
    assert_eq!(marker_type["built_in"], false);
}

#[test]
fn custom_slice_types_are_published_and_echoed() {
    let ctx = context();
    let node = ctx.node("schema_slices").create().unwrap();
    let sub = node
        .subscriber::<Trace>("/cli/trace")
        .qos(Qos::default().depth(16))
        .create()
        .unwrap();
    let cli = nerve(&["topic", "pub", "/cli/trace", "test_cli/Trace"])
        .arg(r#"{"id": 9, "elems": [0.5, 1.5, -2.0]}"#)
        .args(["--once", "--wait-subscribers", "5"])
        .spawn()
        .unwrap();
    let t = sub.recv_timeout(Duration::from_secs(10)).unwrap();
    let out = cli.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = t.expect("the CLI's trace");
    assert_eq!((t.id, t.elems()), (9, &[0.5f32, 1.5, -2.0][..]));

    let publisher = node.publisher::<Trace>("/cli/trace").create().unwrap();
    let echo = nerve(&[
        "topic",
        "echo",
        "/cli/trace",
        "--count",
        "1",
        "--format",
        "json",
    ])
    .args(["--timeout", "10"])
    .spawn()
    .unwrap();
    assert!(publisher.wait_for_subscribers(2, Duration::from_secs(10)));
    publisher
        .publish_slice(&Trace { id: 4 }, &[3.0, 4.0])
        .unwrap();
    let got = json_out(&echo.wait_with_output().unwrap());
    assert_eq!(got["msg"]["id"], 4);
    assert_eq!(got["msg"]["elems_len"], 2);
    assert_eq!(got["msg"]["elems"], serde_json::json!([3.0, 4.0]));
}
