//! `nerve log echo` prints what nodes log: the records written before it started (each
//! publisher's last ones) and after, filtered by level and node, every field in JSON.

use nerve::log::{Level, Logger};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn log_echo_shows_records_filtered_by_level_and_node() {
    let domain = 961;
    let dir = std::env::temp_dir().join(format!("nerve-cli-log-{}", std::process::id()));
    let ctx = nerve::Context::new(
        nerve::Config::default()
            .domain(domain)
            .unwrap()
            .state_dir(&dir),
    )
    .unwrap();
    let gripper = ctx.node("gripper").namespace("/arm").create().unwrap();
    let other = ctx.node("other").create().unwrap();
    let log = Logger::with(&gripper, Level::Debug, false).unwrap();
    let other_log = Logger::with(&other, Level::Debug, false).unwrap();
    // before the reader starts: kept by the publisher for late readers
    log.info("below --level").unwrap();
    log.warn("first: 12.5 N").unwrap();
    other_log.error("another node").unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_nerve"))
        .args(["log", "echo", "--level", "warn", "--node", "/arm/gripper"])
        .args(["--count", "2", "--format", "json"])
        .env("NERVE_DOMAIN", domain.to_string())
        .env("NERVE_STATE_DIR", &dir)
        .env_remove("NERVE_CONFIG")
        .env_remove("NERVE_NETWORK")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // every line the reader prints, as it comes (the test never blocks on it)
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap());
        }
    });
    let json = |line: String| -> serde_json::Value { serde_json::from_str(&line).unwrap() };
    // the records written before it started reach it once the logger hands out its
    // history (on its next record, or here explicitly)
    let end = Instant::now() + Duration::from_secs(20);
    let first = loop {
        log.update_connections();
        if let Ok(line) = lines.recv_timeout(Duration::from_millis(100)) {
            break json(line);
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("no record within 20 s");
        }
    };
    assert_eq!(first["level"], "WARN");
    assert_eq!(first["message"], "first: 12.5 N");
    assert_eq!(first["node"], "/arm/gripper");
    assert!(first["file"].as_str().unwrap().ends_with("log.rs"));
    assert!(first["line"].as_u64().unwrap() > 0);
    // after it started
    log.debug("below --level too").unwrap();
    log.fatal("second").unwrap();
    let second = json(
        lines
            .recv_timeout(Duration::from_secs(10))
            .expect("the second record"),
    );
    assert_eq!(
        (second["level"].as_str(), second["message"].as_str()),
        (Some("FATAL"), Some("second"))
    );
    let end = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("--count 2 did not end it");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_level_is_a_usage_error_naming_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_nerve"))
        .args(["log", "echo", "--level", "loud"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown log level \"loud\""), "{err}");
}
