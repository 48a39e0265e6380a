//! `nerve bench service` end to end: every system runs (or is listed as skipped with its
//! reason), the report files hold the documented structure, bad arguments are refused.

use serde_json::Value;
use std::process::{Command, Stdio};

fn nerve(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nerve"))
        .args(args)
        .env_remove("NERVE_CONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("run nerve")
}

#[test]
fn service_suite_runs_every_system_and_writes_the_report() {
    let out_dir = std::env::temp_dir().join(format!("nerve-bench-test-{}", std::process::id()));
    let out = nerve(&[
        "bench",
        "service",
        "--calls",
        "50",
        "--warmup",
        "5",
        "--payloads",
        "64,65536",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("targets:"), "{stdout}");

    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report["suite"], "service");
    assert!(report["machine"]["cores"].as_u64().unwrap() >= 1);
    assert_eq!(report["versions"]["iceoryx2"], "0.10.0");
    let results = report["results"].as_array().unwrap();
    let skipped = report["skipped"].as_array().unwrap();
    for (system, mode) in [
        ("nerve", "adaptive"),
        ("nerve", "spin"),
        ("nerve", "block"),
        ("iceoryx2", "busy-poll"),
        ("zenoh", "peer-tcp"),
        ("cyclonedds", "ddsperf"),
        ("uds", "blocking"),
    ] {
        for payload in [64, 65536] {
            let r = results.iter().find(|r| {
                r["system"] == system && r["mode"] == mode && r["payload_bytes"] == payload
            });
            match r {
                Some(r) => {
                    let rtt = &r["rtt_us"];
                    let (p50, p99, max) = (
                        rtt["p50"].as_f64().unwrap(),
                        rtt["p99"].as_f64().unwrap(),
                        rtt["max"].as_f64().unwrap(),
                    );
                    assert!(
                        0.0 < p50 && p50 <= p99 && p99 <= max,
                        "{system} {mode}: {rtt}"
                    );
                    assert!(r["tps"].as_f64().unwrap() > 0.0);
                    if system != "cyclonedds" {
                        assert_eq!(r["calls"], 50, "{system} {mode}");
                    }
                }
                None => {
                    // only an external peer may be missing, and then with its reason
                    assert!(
                        !["nerve", "iceoryx2", "uds", "zenoh"].contains(&system),
                        "{system} {mode} at {payload} did not run: {skipped:?}"
                    );
                    assert!(
                        skipped
                            .iter()
                            .any(|s| s["system"].as_str().unwrap().starts_with(system)
                                && !s["reason"].as_str().unwrap().is_empty()),
                        "{system} neither ran nor was listed as skipped"
                    );
                }
            }
        }
    }
    let idle = results
        .iter()
        .find(|r| r["mode"] == "adaptive" && r["payload_bytes"] == 64)
        .unwrap();
    assert!(idle["idle_cpu_percent"]["server"].is_number());
    assert!(report["checks"].as_array().unwrap().len() >= 10);

    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(
        md.contains("## Throughput (calls/s)") && md.contains("Segar*"),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn bad_bench_arguments_are_usage_errors() {
    for (args, needle) in [
        (
            vec!["bench", "service", "--payloads", "63"],
            "multiple of 8",
        ),
        (
            vec!["bench", "service", "--systems", "ros"],
            "unknown system",
        ),
        (vec!["bench", "service", "--calls", "0"], "at least 1"),
        (vec!["bench", "service", "--calls", "x"], "invalid value"),
    ] {
        let out = nerve(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
