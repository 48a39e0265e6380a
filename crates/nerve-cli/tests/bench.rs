//! `nerve bench service` end to end: every system runs (or is listed as skipped with its
//! reason), the report files hold the documented structure, bad arguments are refused;
//! SIGINT and SIGTERM stop a run, which leaves the report of what finished and nothing
//! in /dev/shm.
#![cfg(feature = "bench")]

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Held by every test that runs suites, so that runs never overlap (their Nerve domains
/// come from their pids and could meet; two runs would also skew each other's figures).
static SUITES: Mutex<()> = Mutex::new(());

fn suites_lock() -> MutexGuard<'static, ()> {
    SUITES.lock().unwrap_or_else(|e| e.into_inner())
}

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
    let _suites = suites_lock();
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
        ("zenoh", "peer-shm"),
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
                        // CPU of both sides while the calls ran
                        let cpu = &r["cpu_percent"];
                        assert!(
                            cpu["client"].is_number() && cpu["server"].is_number(),
                            "{system} {mode}: {r}"
                        );
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
        (vec!["bench", "topic", "--sizes", "8"], "16 B"),
        (
            vec!["bench", "topic", "--seconds", "0"],
            "seconds per point",
        ),
        (
            vec!["bench", "topic", "--systems", "dds"],
            "unknown topic system",
        ),
        (vec!["bench", "topic", "--rates", "0"], "rate 0 Hz"),
        (
            vec!["bench", "paths", "--messages", "Pose"],
            "unknown message",
        ),
        (
            vec!["bench", "paths", "--topologies", "2-2"],
            "must look like",
        ),
        (
            vec!["bench", "paths", "--routes", "wormhole"],
            "unknown route",
        ),
        (vec!["bench", "paths", "--iterations", "0"], "at least 1"),
        (vec!["bench", "lidar", "--modes", "4096"], "4096"),
        (vec!["bench", "lidar", "--frames", "1"], "at least 3 frames"),
        (vec!["bench", "timer", "--timeouts", "0"], "timeouts"),
        (vec!["bench", "timer", "--cycles", "1"], "cycles"),
        (
            vec!["bench", "timer", "--systems", "ros"],
            "unknown timer system",
        ),
        (vec!["bench", "scheduler", "--seconds", "0"], "seconds"),
        (vec!["bench", "scheduler", "--scales", "0"], "node counts"),
        (
            vec!["bench", "topic", "--cross-host", "--systems", "floor"],
            "runs on one host only",
        ),
        (
            vec!["bench", "scheduler", "--systems", "horus"],
            "unknown scheduler system",
        ),
        (vec!["bench", "role", "timer-cycle", "{"], "bad timer spec"),
        (
            vec!["bench", "role", "scheduler", "[]"],
            "bad scheduler spec",
        ),
        (vec!["bench", "role", "publisher", "{"], "bad stream spec"),
        (vec!["bench", "role", "juggler", "{}"], "unknown role"),
        (
            vec!["bench", "fleet", "--hosts", "1"],
            "hosts must be 2 to 200",
        ),
        (
            vec!["bench", "fleet", "--lease-ms", "5"],
            "lease must be 200",
        ),
        (vec!["bench", "fleet", "--nodes", "1"], "--nodes at least 2"),
        (
            vec!["bench", "role", "fleet-host", "{"],
            "bad fleet host spec",
        ),
        (
            vec!["bench", "python", "--systems", "ros2"],
            "unknown python system",
        ),
        (
            vec![
                "bench",
                "py-ponger",
                "--msg",
                "pose",
                "--ping-topic",
                "/a",
                "--pong-topic",
                "/b",
            ],
            "unknown message",
        ),
    ] {
        let out = nerve(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// Chromium as Debian installs it (`.ci/run` does), if present.
fn chromium() -> Option<&'static str> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
}

#[test]
fn all_suites_write_one_report_that_renders_in_a_browser() {
    let _suites = suites_lock();
    let out_dir = std::env::temp_dir().join(format!("nerve-bench-all-{}", std::process::id()));
    let out = nerve(&[
        "bench",
        "all",
        "--smoke",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("index.html"), "{stdout}");

    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(
        report["suites"],
        serde_json::json!([
            "service",
            "topic",
            "topic-cross-host",
            "paths",
            "lidar",
            "timer",
            "scheduler",
            "python",
            "bag",
            "control",
            "tf",
            "replay",
            "fleet"
        ])
    );
    let results = report["results"].as_array().unwrap();
    let row = |suite: &str, system: &str, mode: &str| {
        results
            .iter()
            .find(|r| r["suite"] == suite && r["system"] == system && r["mode"] == mode)
            .unwrap_or_else(|| panic!("no {suite} row for {system} {mode}: {report}"))
    };
    // across simulated hosts: the stream rows carry cross_host, Nerve loses nothing
    let across = |system: &str| {
        results
            .iter()
            .find(|r| r["suite"] == "topic" && r["cross_host"] == true && r["system"] == system)
            .unwrap_or_else(|| panic!("no cross-host {system} row: {report}"))
    };
    for system in ["nerve", "zenoh"] {
        let r = across(system);
        assert_eq!(r["payload_bytes"], 1024, "{r}");
        assert!(r["latency_us"]["p50"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert_eq!(across("nerve")["loss_rate"], 0.0);
    let idle: Vec<&Value> = results
        .iter()
        .filter(|r| r["kind"] == "idle-session")
        .collect();
    assert_eq!(idle.len(), 2, "{report}");
    assert!(idle.iter().all(|r| r["cpu_percent"].as_f64().is_some()));
    // a fleet of three simulated hosts discovered itself, took a fourth and a restarted
    // host back, and every status sample under load arrived; a partition's heal is
    // measured or its failure named (Zenoh peers do not always link up again after one:
    // docs/design.md, known limits)
    let fleet = results
        .iter()
        .find(|r| r["suite"] == "fleet" && r["kind"] == "fleet")
        .unwrap_or_else(|| panic!("no fleet row: {report}"));
    assert_eq!(fleet["hosts"], 3, "{fleet}");
    for phase in ["discovery_s", "join_s", "rejoin_s"] {
        assert!(fleet[phase].as_f64().unwrap() >= 0.0, "{phase}: {fleet}");
    }
    let notes = fleet["notes"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .all(|n| n.as_str().unwrap().contains("the heal")
                || n.as_str().unwrap().starts_with("partition: ")),
        "{fleet}"
    );
    assert!(
        fleet["partition_heal_s"].is_number() || !notes.is_empty(),
        "{fleet}"
    );
    // one host with 50 topics, the plane off and on: every subscription got a sample and
    // the lists answered
    for network in [false, true] {
        let one = results
            .iter()
            .find(|r| r["suite"] == "fleet" && r["kind"] == "one-host" && r["network"] == network)
            .unwrap_or_else(|| panic!("no one-host row (network {network}): {report}"));
        assert_eq!(one["topics"], 50, "{one}");
        assert_eq!(one["all_received"], true, "{one}");
        assert!(one["topic_list_s"].as_f64().unwrap() > 0.0, "{one}");
    }
    assert!(
        fleet["idle"]["tx_bytes_per_s_per_host"].as_f64().unwrap() > 0.0,
        "{fleet}"
    );
    assert_eq!(fleet["load_gaps"], 0, "{fleet}");
    assert!(
        fleet["load_received_per_s"].as_f64().unwrap() > 0.0,
        "{fleet}"
    );
    // every suite's Nerve rows, with the documented fields and sane figures
    let svc = row("service", "nerve", "adaptive");
    assert!(svc["rtt_us"]["p50"].as_f64().unwrap() > 0.0);
    for mode in ["adaptive", "predictive"] {
        let t = row("topic", "nerve", mode);
        assert_eq!(t["payload_bytes"], 16);
        assert_eq!(t["rate_hz"], 100);
        assert_eq!(t["loss_rate"], 0.0, "{t}");
        let lat = &t["latency_us"];
        assert!(lat["p50"].as_f64().unwrap() > 0.0 && lat["p50"].as_f64() <= lat["max"].as_f64());
        assert!(t["cpu_percent"]["subscriber"].is_number(), "{t}");
        assert!(t["rss_bytes"]["publisher"].as_u64().unwrap() > 0, "{t}");
    }
    let floor = row("topic", "floor", "futex");
    assert_eq!(floor["received"], floor["sent"]);
    // raw iceoryx2 both ways: woken by its event, and spinning before it waits
    for mode in ["event", "spin-then-block"] {
        let iox = row("topic", "iceoryx2", mode);
        assert_eq!(iox["received"], iox["sent"], "{iox}");
    }
    for route in ["same-thread", "cross-thread", "cross-process"] {
        let p = results
            .iter()
            .find(|r| r["suite"] == "paths" && r["route"] == route && r["topology"] == "2:1")
            .unwrap_or_else(|| panic!("no paths row for {route} 2:1"));
        assert_eq!(p["message"], "CmdVel");
        // one round of a single thread serves both pingers; threads each time their own
        let rounds = if route == "same-thread" { 50 } else { 100 };
        assert_eq!(p["iterations"], rounds, "{route}");
        assert!(p["one_way_us"]["p50"].as_f64().unwrap() > 0.0);
    }
    assert!(results
        .iter()
        .any(|r| r["suite"] == "paths" && r["system"] == "iceoryx2"));
    // the load runs: under back-pressure every consumer got every message, in order
    for route in ["cross-thread", "cross-process"] {
        for topology in ["1:1", "2:2"] {
            let t = results
                .iter()
                .find(|r| {
                    r["suite"] == "paths"
                        && r["measure"] == "throughput"
                        && r["route"] == route
                        && r["topology"] == topology
                })
                .unwrap_or_else(|| panic!("no throughput row {route} {topology}: {report}"));
            assert_eq!(t["received"], t["expected"], "{t}");
            assert_eq!(
                (t["lost"].as_u64(), t["out_of_order"].as_u64()),
                (Some(0), Some(0))
            );
            assert!(t["msgs_per_s"].as_f64().unwrap() > 0.0, "{t}");
        }
    }
    let mixed = results
        .iter()
        .find(|r| r["suite"] == "paths" && r["measure"] == "mixed")
        .unwrap_or_else(|| panic!("no mixed loop row: {report}"));
    // half the load count in iterations: CmdVel and Imu each, a BatteryState every 100th
    assert_eq!(mixed["sent"], 2 * 1_000 + 10, "{mixed}");
    assert!(mixed["send_us"]["p50"].as_f64().unwrap() > 0.0, "{mixed}");
    let l = row("lidar", "nerve", "adaptive");
    assert_eq!(
        (l["lidar_mode"].as_str(), l["beams"].as_u64()),
        (Some("512x10"), Some(16))
    );
    assert_eq!(l["received"], 5);
    assert_eq!(l["e2e_series_us"].as_array().unwrap().len(), 5);
    assert!(l["e2e_latency_us"]["mad"].is_number());
    let find = |f: &dyn Fn(&Value) -> bool, what: &str| {
        results
            .iter()
            .find(|r| f(r))
            .unwrap_or_else(|| panic!("no {what} row: {report}"))
            .clone()
    };
    for system in [
        "nerve",
        "nerve-rt",
        "std-sleep",
        "tokio-interval",
        "clock-nanosleep",
    ] {
        let t = find(&|r| r["suite"] == "timer" && r["system"] == system, system);
        assert_eq!(
            (t["timeout_ms"].as_u64(), t["cycles"].as_u64()),
            (Some(5), Some(5)),
            "{t}"
        );
        let d = &t["delta_us"];
        assert!(
            d["min"].as_f64() <= d["mean"].as_f64() && d["p99"].as_f64() <= d["max"].as_f64(),
            "{t}"
        );
        assert_eq!(t["lost"], 0, "{t}");
    }
    for system in ["nerve-rt", "nerve", "threads"] {
        let m = find(
            &|r| {
                r["suite"] == "scheduler"
                    && r["kind"] == "mix"
                    && r["system"] == system
                    && r["rate_hz"] == 1000.0
            },
            system,
        );
        assert!(m["ticks"].as_u64().unwrap() > 0, "{m}");
        assert!(
            m["jitter_us"]["p99"].is_number() && m["deadline_misses"].is_number(),
            "{m}"
        );
    }
    for n in [10, 50] {
        let s = find(&|r| r["kind"] == "scaling" && r["nodes"] == n, "scaling");
        assert!(s["overhead_ns_per_tick"].as_f64().unwrap() > 0.0, "{s}");
    }
    // the Python suite runs in --smoke only where a ready environment exists (no pip, no
    // release build); either way it is in the report, measured or skipped with a reason
    let py_skipped = report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["suite"] == "python" && !s["reason"].as_str().unwrap().is_empty());
    let py_rows = results.iter().filter(|r| r["suite"] == "python").count();
    assert!(
        py_rows > 0 || py_skipped,
        "python neither ran nor was skipped"
    );
    // the bag suite: recording rows, and clouds through the Foxglove bridge to a client
    let bag_rows = |kind: &str| {
        results
            .iter()
            .filter(|r| r["suite"] == "bag" && r["kind"] == kind)
            .count()
    };
    assert!(
        bag_rows("record") > 0 && bag_rows("conversion") > 0,
        "{report}"
    );
    let bridge = results
        .iter()
        .find(|r| r["suite"] == "bag" && r["kind"] == "bridge")
        .unwrap_or_else(|| panic!("no bridge row: {}", report["skipped"]));
    assert_eq!(bridge["unwatched_subscribers"], 0, "{bridge}");
    assert_eq!(bridge["received"], bridge["published"], "{bridge}");
    // the control suite: an action round trip and a parameter set beside a service call
    let control = |what: &str| {
        results
            .iter()
            .find(|r| r["suite"] == "control" && r["what"] == what)
            .unwrap_or_else(|| panic!("no control row {what}: {}", report["skipped"]))
    };
    for what in ["service call", "action round trip", "parameter set"] {
        assert!(control(what)["rtt_us"]["count"].as_u64().unwrap() > 0);
    }
    let launch = results
        .iter()
        .find(|r| r["suite"] == "control" && r["kind"] == "launch")
        .unwrap_or_else(|| panic!("no launch row: {}", report["skipped"]));
    assert_eq!(launch["left_behind"], 0, "{launch}");
    assert_eq!(launch["killed"], launch["processes"], "{launch}");
    // the tf suite: lookups through a 5-frame chain, none failed
    let tf = results
        .iter()
        .find(|r| r["suite"] == "tf" && r["system"] == "nerve" && r["depth"] == 5)
        .unwrap_or_else(|| panic!("no tf row: {}", report["skipped"]));
    assert!(tf["lookups"].as_u64().unwrap() > 0, "{tf}");
    assert_eq!(tf["failed"], 0, "{tf}");
    let idle = find(&|r| r["kind"] == "idle", "idle");
    assert!(idle["cpu_percent"].as_f64().unwrap() >= 0.0);
    assert!(!report["checks"].as_array().unwrap().is_empty());
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    for heading in [
        "## service",
        "## topic",
        "## topic across hosts",
        "## paths",
        "## lidar",
        "## timer",
        "## scheduler",
        "## python",
        "ros_transitions",
        "CyberRT",
        "ROS 2",
        "## Summary: Nerve, the best peer and the published figure per seed",
        "## Published figures (not measured here)",
    ] {
        assert!(md.contains(heading), "report.md lacks {heading}");
    }
    // the summary comes first and has a line for every seed, each measured in this run
    assert!(md.find("## Summary").unwrap() < md.find("## service").unwrap());
    let summary = report["summary"].as_array().unwrap();
    let seeds: Vec<&str> = summary
        .iter()
        .map(|r| r["seed"].as_str().unwrap())
        .collect();
    for seed in ["000", "001", "002", "003", "004"] {
        assert!(
            seeds.contains(&seed),
            "no summary line for seed {seed}: {summary:?}"
        );
    }
    assert!(
        summary.iter().all(|r| r["nerve"] != "not_run"),
        "{summary:?}"
    );

    // the page renders in a real browser: every plot present, no script error
    let html = out_dir.join("index.html");
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("NERVE_REQUIRE_BROWSER").is_none(),
            "NERVE_REQUIRE_BROWSER is set but chromium is not installed"
        );
        eprintln!("chromium not installed: browser check skipped (.ci/run installs it)");
        return;
    };
    let profile = out_dir.join("chromium-profile");
    let dom = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .stdin(Stdio::null())
        .output()
        .expect("run chromium");
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    let log = String::from_utf8_lossy(&dom.stderr);
    assert!(dom.status.success(), "chromium failed: {log}");
    let plots = html_svg_count(&std::fs::read_to_string(&html).unwrap());
    assert!(plots >= 6, "{plots} plots in the page");
    assert!(
        dom_text.contains(&format!("data-plots=\"{plots}\"")),
        "the browser did not render all {plots} plots: {}",
        &dom_text[..dom_text.len().min(400)]
    );
    assert!(
        dom_text.contains("data-errors=\"0\""),
        "script errors in the page"
    );
    for line in log.lines().filter(|l| l.contains("CONSOLE")) {
        assert!(
            !line.contains("ERROR") && !line.contains("Uncaught"),
            "console error: {line}"
        );
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}

fn html_svg_count(html: &str) -> usize {
    html.matches("<svg ").count()
}

/// The Rust ponger of `bench python` (`nerve bench py-ponger`) answers pybench's protocol:
/// every message comes back unchanged (HELLO -2 and WARMUP -3 too) until STOP (-1).
#[test]
fn the_python_ping_pong_ponger_echoes_until_stop() {
    use nerve_msgs::{CmdVel, Time};
    use std::time::{Duration, Instant};
    let dir = std::env::temp_dir().join(format!("nerve-py-ponger-{}", std::process::id()));
    let (ping, pong) = ("/bench/py_ping_test", "/bench/py_pong_test");
    let mut child = Command::new(env!("CARGO_BIN_EXE_nerve"))
        .args(["bench", "py-ponger", "--msg", "cmdvel"])
        .args(["--ping-topic", ping, "--pong-topic", pong])
        .env("NERVE_DOMAIN", "987")
        .env("NERVE_STATE_DIR", &dir)
        .env_remove("NERVE_CONFIG")
        .stdin(Stdio::null())
        .spawn()
        .expect("start the ponger");
    let cfg = nerve::Config::default()
        .domain(987)
        .unwrap()
        .state_dir(&dir);
    let ctx = nerve::Context::new(cfg).unwrap();
    let node = ctx.node("py_pinger_test").create().unwrap();
    let sub = node.subscriber::<CmdVel>(pong).create().unwrap();
    let publisher = node.publisher::<CmdVel>(ping).create().unwrap();
    let msg = |nanos: i64| CmdVel {
        stamp: Time { nanos },
        linear: 0.5,
        angular: -0.25,
    };
    // HELLO until it comes back: the ponger started and found both topics
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut hello = false;
    while !hello && Instant::now() < deadline {
        publisher.publish(&msg(-2)).unwrap();
        while let Some(s) = sub.recv_timeout(Duration::from_millis(100)).unwrap() {
            hello |= s.stamp.nanos == -2;
        }
    }
    assert!(hello, "the ponger never answered HELLO");
    for seq in [-3, 0, 1, 2, 1_000_000] {
        publisher.publish(&msg(seq)).unwrap();
        let s = sub
            .recv_timeout(Duration::from_secs(5))
            .unwrap()
            .unwrap_or_else(|| panic!("no answer to {seq}"));
        assert_eq!(*s, msg(seq));
    }
    publisher.publish(&msg(-1)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        status.is_some_and(|s| s.success()),
        "the ponger did not stop on STOP: {status:?}"
    );
    assert!(sub.try_recv().unwrap().is_none(), "STOP was answered");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `nerve bench …` run in the background, its output in files (a full pipe never
/// blocks it); killed on drop, so a failing test leaves nothing running.
struct Background {
    child: std::process::Child,
    dir: PathBuf,
}

impl Background {
    /// Starts `nerve bench <args> --out <dir>/report`.
    fn start(name: &str, args: &[&str]) -> Background {
        let dir = std::env::temp_dir().join(format!("nerve-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = |f: &str| std::fs::File::create(dir.join(f)).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_nerve"))
            .arg("bench")
            .args(args)
            .arg("--out")
            .arg(dir.join("report"))
            .env_remove("NERVE_CONFIG")
            .stdin(Stdio::null())
            .stdout(file("stdout"))
            .stderr(file("stderr"))
            .spawn()
            .expect("start nerve bench");
        Background { child, dir }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default()
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(self.dir.join("stdout")).unwrap_or_default()
    }

    /// Waits up to `timeout` for `ready()`, failing the test with the output if it never
    /// holds or the run ends first.
    fn wait_until(&mut self, what: &str, timeout: Duration, ready: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + timeout;
        while !ready(self) {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the run ended ({status}) before {what}: {}", self.stderr());
            }
            assert!(
                Instant::now() < deadline,
                "no {what} within {timeout:?}: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The pids of the processes below the run (children, theirs, …), from /proc.
    fn descendants(&self) -> Vec<u32> {
        let parent = |pid: u32| -> Option<u32> {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            stat[stat.rfind(')')? + 1..]
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        };
        let all: Vec<(u32, u32)> = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .filter_map(|pid| Some((pid, parent(pid)?)))
            .collect();
        let mut out = vec![self.pid()];
        let mut i = 0;
        while i < out.len() {
            let p = out[i];
            out.extend(all.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
            i += 1;
        }
        out.remove(0);
        out
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: signalling our own child process.
        assert_eq!(unsafe { libc::kill(self.pid() as i32, signal) }, 0);
    }

    /// Waits up to `timeout` for the run to end: its status and how long it took.
    fn wait_exit(&mut self, timeout: Duration) -> (Option<std::process::ExitStatus>, Duration) {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (Some(status), start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        (None, start.elapsed())
    }

    fn report(&self) -> Value {
        let text = std::fs::read_to_string(self.dir.join("report/report.json"))
            .unwrap_or_else(|e| panic!("no report.json ({e}): {}", self.stderr()));
        serde_json::from_str(&text).unwrap()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The files in /dev/shm.
fn shm_files() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The /dev/shm prefixes of a run with pid `pid`: its suites' Nerve domains (`nerve<d>_`)
/// and the bench's raw iceoryx2 files of them (`nervebench<d>_`), as the suites pick them.
fn run_prefixes(pid: u32) -> Vec<String> {
    let domains = [
        900 + pid % 90,  // service
        800 + pid % 90,  // topic
        700 + pid % 90,  // paths, timer, idle executors
        600 + pid % 90,  // lidar
        850 + pid % 100, // python
        790 + pid % 9,   // bag
        760 + pid % 9,   // control
    ];
    domains
        .iter()
        .flat_map(|d| [format!("nerve{d}_"), format!("nervebench{d}_")])
        .chain(["nervebenchsvc_".to_string()])
        .collect()
}

/// Files of the run with pid `pid` that were not in /dev/shm before it started.
fn left_in_shm(before: &BTreeSet<String>, pid: u32) -> Vec<String> {
    let prefixes = run_prefixes(pid);
    shm_files()
        .difference(before)
        .filter(|f| prefixes.iter().any(|p| f.starts_with(p.as_str())))
        .cloned()
        .collect()
}

/// Asserts an interrupted run: it ended within 15 s with status 130, its report (JSON,
/// Markdown, terminal) says it was interrupted and lists what finished, and it left
/// nothing in /dev/shm.
fn assert_stopped(run: &mut Background, before: &BTreeSet<String>, finished: &[&str]) {
    let (status, took) = run.wait_exit(Duration::from_secs(15));
    let Some(status) = status else {
        panic!("still running {took:?} after the signal: {}", run.stderr());
    };
    assert_eq!(status.code(), Some(130), "{status}: {}", run.stderr());
    let report = run.report();
    let interrupted = &report["interrupted"];
    assert_eq!(
        interrupted["finished"],
        serde_json::json!(finished),
        "{report}"
    );
    assert_eq!(report["suites"], serde_json::json!(finished));
    let md = std::fs::read_to_string(run.dir.join("report/report.md")).unwrap();
    assert!(md.contains("interrupted (SIGINT or SIGTERM)"), "{md}");
    assert!(run.stdout().contains("interrupted (SIGINT or SIGTERM)"));
    let left = left_in_shm(before, run.pid());
    assert!(left.is_empty(), "left in /dev/shm: {left:?}");
}

/// `nerve bench timer --quick` stops on the first SIGINT (Ctrl-C in a terminal).
#[test]
fn sigint_stops_a_suite_and_leaves_its_report() {
    let _suites = suites_lock();
    let before = shm_files();
    let mut run = Background::start("bench-sigint", &["timer", "--quick"]);
    // a point is running once its Nerve domain has files
    let domain = format!("nerve{}_", 700 + run.pid() % 90);
    run.wait_until(
        "files of the timer's domain",
        Duration::from_secs(60),
        |_| shm_files().iter().any(|f| f.starts_with(&domain)),
    );
    std::thread::sleep(Duration::from_secs(1));
    let children = run.descendants();
    run.signal(libc::SIGINT);
    assert_stopped(&mut run, &before, &[]);
    let report = run.report();
    assert_eq!(report["interrupted"]["running"], "timer", "{report}");
    assert_eq!(report["interrupted"]["not_run"], serde_json::json!([]));
    // the children of the running point are gone with it (or dead, not yet reaped)
    std::thread::sleep(Duration::from_millis(200));
    for pid in children {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = state
            .rfind(')')
            .and_then(|i| state[i + 1..].split_whitespace().next().map(str::to_string));
        assert!(
            state.is_none() || state.as_deref() == Some("Z"),
            "child {pid} of the run is still there ({state:?})"
        );
    }
}

/// `nerve bench all --smoke` stops on SIGTERM (`timeout`, systemd) during its third
/// suite: the report holds the two that finished, and the simulated hosts are gone.
#[test]
fn sigterm_stops_bench_all_and_keeps_what_finished() {
    let _suites = suites_lock();
    let before = shm_files();
    let mut run = Background::start("bench-sigterm", &["all", "--smoke"]);
    run.wait_until("the third suite", Duration::from_secs(300), |r| {
        r.stderr().contains("[3/13] topic-cross-host")
    });
    std::thread::sleep(Duration::from_secs(2));
    run.signal(libc::SIGTERM);
    assert_stopped(&mut run, &before, &["service", "topic"]);
    let report = run.report();
    assert_eq!(report["interrupted"]["running"], "topic-cross-host");
    assert_eq!(
        report["interrupted"]["not_run"],
        serde_json::json!([
            "paths",
            "lidar",
            "timer",
            "scheduler",
            "python",
            "bag",
            "control",
            "tf",
            "replay",
            "fleet"
        ])
    );
    let results = report["results"].as_array().unwrap();
    assert!(results.iter().any(|r| r["suite"] == "service"));
    assert!(results
        .iter()
        .all(|r| r["suite"] == "service" || r["suite"] == "topic"));
    // the simulated hosts of the cross-host suite are removed (network namespaces named
    // after the run's pid)
    if let Ok(out) = Command::new("ip").args(["netns", "list"]).output() {
        let tag = format!("nv{}x", run.pid() % 100_000);
        let list = String::from_utf8_lossy(&out.stdout);
        assert!(!list.contains(&tag), "namespaces left: {list}");
    }
}
