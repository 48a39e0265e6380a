//! Every scenario at a small scale, through the binary (its children are the binary
//! again): each must pass, with its faults injected and its inputs checked.

use serde_json::Value;
use std::process::Command;
use std::sync::Mutex;

/// One scenario at a time: they load both cores, and their own bounds (a publish within
/// its timeout) are about Nerve, not about sharing the machine with each other.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn stress(args: &[&str]) -> (i32, Value, String) {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // a domain of its own per scenario (the processes tests use 100-899)
    let domain = 940 + args.first().map_or(0, |s| s.len() as u32 % 40);
    let out = Command::new(env!("CARGO_BIN_EXE_nerve-stress"))
        .args(args)
        .args(["--format", "json", "--domain", &domain.to_string()])
        .output()
        .expect("run nerve-stress");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), json, stderr)
}

fn passes(scenario: &str, args: &[&str]) -> Value {
    let mut all = vec![scenario];
    all.extend_from_slice(args);
    let (code, json, stderr) = stress(&all);
    let o = &json[0];
    assert_eq!(o["scenario"], scenario, "{json} {stderr}");
    assert_eq!(o["passed"], true, "{o:#}\n{stderr}");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(o["lost"], 0);
    assert!(o["leftovers"].as_array().unwrap().is_empty(), "{o}");
    o.clone()
}

#[test]
fn publisher_kill() {
    let o = passes("publisher-kill", &["--rounds", "8"]);
    assert_eq!(o["faults"], 8);
    assert!(o["inputs"].as_u64().unwrap() >= 8);
}

#[test]
fn subscriber_kill() {
    let o = passes("subscriber-kill", &["--rounds", "4"]);
    assert_eq!(o["faults"], 4);
}

#[test]
fn restart_all() {
    let o = passes("restart-all", &["--rounds", "4"]);
    assert_eq!(o["faults"], 16, "four processes killed per round");
}

#[test]
fn users() {
    let o = passes("users", &[]);
    assert_eq!(o["faults"], 2, "one crash each way round");
    assert_eq!(
        o["figures"]["large samples mapped read-only by the subscriber"],
        1.0
    );
}

#[test]
fn stopped() {
    let o = passes("stopped", &["--rounds", "1"]);
    assert!(
        o["figures"]["stopped subscriber: lost (counted)"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[test]
fn mixed_qos() {
    let o = passes("mixed-qos", &["--seconds", "1"]);
    assert!(
        o["figures"]["saturated topic: messages delivered"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[test]
fn discovery() {
    let o = passes("discovery", &["--rounds", "2", "--processes", "8"]);
    assert_eq!(o["faults"], 16, "eight processes killed per round");
    assert_eq!(o["figures"]["nodes"], 32.0);
    assert!(
        o["inputs"].as_u64().unwrap() >= 32,
        "every node heard its peer: {o}"
    );
}

#[test]
fn soak() {
    let o = passes("soak", &["--seconds", "12"]);
    assert!(o["faults"].as_u64().unwrap() >= 1, "churn happened: {o}");
    assert!(o["figures"]["seconds sampled"].as_f64().unwrap() >= 10.0);
}

#[test]
fn bad_arguments_are_usage_errors() {
    let (code, _, stderr) = stress(&["wormhole"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("unknown scenario \"wormhole\""), "{stderr}");
    let (code, _, stderr) = stress(&["soak", "--seconds", "0"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--seconds"), "{stderr}");
    let (code, _, stderr) = stress(&["discovery", "--processes", "1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--processes"), "{stderr}");
}
