//! `nerve topic echo` prints what `nerve topic pub` reads back: a message published from
//! JSON, echoed, published again from the echo and echoed again is the same, bit for bit
//! (every slice element, -0.0, subnormals, infinities, NaN, the f64 the default serde_json
//! parser reads one unit off).

use serde_json::{json, Value};
use std::io::Write;
use std::process::{Child, Command, Output, Stdio};

const DOMAIN: &str = "993";

fn nerve(args: &[&str]) -> Command {
    let dir = std::env::temp_dir().join("nerve-cli-test-echo-pub/");
    let mut c = Command::new(env!("CARGO_BIN_EXE_nerve"));
    c.args(args)
        .env("NERVE_DOMAIN", DOMAIN)
        .env("NERVE_STATE_DIR", &dir)
        .env_remove("NERVE_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn interrupt(child: &Child) {
    // SAFETY: kill with the pid of our own live child and a valid signal number.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
}

/// Publishes `msg` as `ty` on `topic` until one echo per entry of `echo_args` has printed a
/// message; returns each echo's `msg` and stderr.
fn publish_and_echo(
    topic: &str,
    ty: &str,
    msg: &str,
    echo_args: &[&[&str]],
) -> Vec<(Value, String)> {
    let echoes: Vec<Child> = echo_args
        .iter()
        .map(|extra| {
            let mut args = vec!["topic", "echo", topic, "--count", "1", "--format", "json"];
            args.extend_from_slice(&["--timeout", "60"]);
            args.extend_from_slice(extra);
            nerve(&args).spawn().expect("run nerve topic echo")
        })
        .collect();
    // until interrupted: every echo gets a message however late it subscribes
    let publisher = nerve(&[
        "topic",
        "pub",
        topic,
        ty,
        msg,
        "--rate",
        "20",
        "--wait-subscribers",
        "60",
    ])
    .spawn()
    .expect("run nerve topic pub");
    let outs: Vec<Output> = echoes
        .into_iter()
        .map(|e| e.wait_with_output().unwrap())
        .collect();
    interrupt(&publisher);
    let p = publisher.wait_with_output().unwrap();
    assert!(
        p.status.success(),
        "pub: {}",
        String::from_utf8_lossy(&p.stderr)
    );
    outs.into_iter()
        .map(|o| {
            let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
            assert!(o.status.success(), "echo: {stderr}");
            let line = String::from_utf8_lossy(&o.stdout);
            let v: Value =
                serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("{e}: {line}"));
            (v["msg"].clone(), stderr)
        })
        .collect()
}

/// The value at a JSON pointer, as text (so NaN, -0.0 and the digits compare exactly).
fn at(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .unwrap_or_else(|| panic!("no {pointer} in {v}"))
        .to_string()
}

#[test]
fn echo_prints_what_pub_reads_back() {
    // a slice longer than echo used to show, with every kind of f32 in it
    let mut ranges: Vec<Value> = (0..100).map(|i| json!(f64::from(i) * 0.25)).collect();
    ranges[..8].clone_from_slice(&[
        json!("Infinity"),
        json!("-Infinity"),
        json!("NaN"),
        json!(-0.0),
        json!(1e-45),
        json!(0.1),
        json!(0.33333334),
        json!(3.4028235e38),
    ]);
    let scan = json!({
        "header": {"frame_id": "laser"},
        "angle_min": -0.0,
        "range_max": 3.4028235e38,
        "time_increment": 1e-45,
        "elems": ranges,
    });
    let got = publish_and_echo(
        "/cli/echo_pub/scan",
        "LaserScan",
        &scan.to_string(),
        &[&[], &["--max-elems", "3"]],
    );
    let (full, _) = &got[0];
    for p in [
        "/header/frame_id",
        "/angle_min",
        "/range_max",
        "/time_increment",
        "/elems",
    ] {
        assert_eq!(at(full, p), at(&scan, p), "{p}");
    }
    assert_eq!(full["elems_len"], json!(100));
    // shortened on request only, and visibly so; pub refuses the shortened form
    let (short, note) = &got[1];
    assert_eq!(short["elems"].as_array().unwrap().len(), 3, "{short}");
    assert_eq!(short["elems_len"], json!(100));
    assert!(note.contains("showing 3 of 100 elements"), "{note}");
    let out = nerve(&[
        "topic",
        "pub",
        "/cli/echo_pub/scan",
        "LaserScan",
        &short.to_string(),
        "--once",
    ])
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("elems_len is 100 but elems holds 3"), "{err}");
    // what echo printed publishes again, and echoes the same
    let again = publish_and_echo("/cli/echo_pub/scan", "LaserScan", &full.to_string(), &[&[]]);
    assert_eq!(again[0].0, *full);

    let subnormal = vec![f64::MIN_POSITIVE / 2.0; 36];
    let odom = json!({
        "pose": {"position": {"x": 0.9364630260594403, "y": 5e-324, "z": -0.0}},
        "twist": {"linear": {"x": "-Infinity", "y": "NaN", "z": 1.7976931348623157e308}},
        "pose_covariance": subnormal,
    });
    let got = publish_and_echo("/cli/echo_pub/odom", "Odometry", &odom.to_string(), &[&[]]);
    let (echoed, _) = &got[0];
    for p in ["/pose/position", "/twist/linear", "/pose_covariance"] {
        assert_eq!(at(echoed, p), at(&odom, p), "{p}");
    }
    let again = publish_and_echo(
        "/cli/echo_pub/odom",
        "Odometry",
        &echoed.to_string(),
        &[&[]],
    );
    assert_eq!(again[0].0, *echoed);
}

#[test]
fn numbers_pub_cannot_store_are_refused_naming_the_field() {
    for (ty, msg, needle) in [
        (
            "CmdVel",
            r#"{"linear": 1e39}"#,
            "linear: 1e+39 is out of range for f32",
        ),
        ("CmdVel", r#"{"angular": 1.5e300}"#, "angular"),
        (
            "BatteryState",
            r#"{"present": 256}"#,
            "present: 256 is out of range for u8",
        ),
        (
            "BatteryState",
            r#"{"present": true}"#,
            "present: expected an integer (u8)",
        ),
    ] {
        let out = nerve(&["topic", "pub", "/cli/echo_pub/bad", ty, msg, "--once"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{msg}: {err}");
        assert!(err.contains(needle), "{msg}: {err}");
    }
}

#[test]
fn pub_reads_a_message_too_long_for_an_argument_from_stdin() {
    // Linux refuses one argument over 128 KiB (MAX_ARG_STRLEN): `-` reads the JSON from
    // standard input instead (ROS 2's own test fixtures go up to 354 KB)
    let ranges: Vec<Value> = (0..40_000)
        .map(|i| json!(f64::from(i % 1000) * 0.125))
        .collect();
    let scan = json!({"header": {"frame_id": "long"}, "elems": ranges}).to_string();
    assert!(scan.len() > 128 * 1024, "{} bytes", scan.len());
    let topic = "/cli/echo_pub/long";
    let echo = nerve(&[
        "topic",
        "echo",
        topic,
        "--count",
        "1",
        "--format",
        "json",
        "--timeout",
        "60",
    ])
    .spawn()
    .expect("run nerve topic echo");
    let mut publisher = nerve(&[
        "topic",
        "pub",
        topic,
        "LaserScan",
        "-",
        "--rate",
        "20",
        "--wait-subscribers",
        "60",
    ])
    .stdin(Stdio::piped())
    .spawn()
    .expect("run nerve topic pub");
    let mut stdin = publisher.stdin.take().unwrap();
    stdin.write_all(scan.as_bytes()).unwrap();
    drop(stdin);
    let out = echo.wait_with_output().unwrap();
    interrupt(&publisher);
    let p = publisher.wait_with_output().unwrap();
    assert!(
        p.status.success(),
        "pub: {}",
        String::from_utf8_lossy(&p.stderr)
    );
    assert!(
        out.status.success(),
        "echo: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["msg"]["header"]["frame_id"], json!("long"));
    assert_eq!(v["msg"]["elems"], json!(ranges));
}
