//! Topics and services across simulated hosts: every host is a network namespace joined
//! to the others by veth links, and every process on it runs in its own mount namespace
//! whose `/dev/shm` and Nerve state directory are the host's private ones, so samples can
//! only cross through the network plane (Zenoh). Needs root, `ip`, `unshare` and (for the
//! loss test) `nft`, as here and in CI.

mod common;

use common::{result, start, SECOND};
use nerve_bench_harness::hosts::{Faults, SimHosts};
use serde_json::Value;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

/// A domain per test, so tests running at once never meet.
fn domain() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    (500 + (std::process::id() % 40) * 10 + NEXT.fetch_add(1, Ordering::Relaxed)).to_string()
}

fn hosts(n: usize) -> SimHosts {
    SimHosts::create(n, 2000).expect("simulated hosts (needs root, ip, unshare)")
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

#[test]
fn hosts_share_no_memory() {
    let sim = hosts(2);
    let (a, b) = (&sim.hosts()[0], &sim.hosts()[1]);
    let touch = sim.command(
        0,
        "sh".as_ref(),
        &["-c".into(), "touch /dev/shm/probe".into()],
    );
    let out = std::process::Command::new(touch.0)
        .args(touch.1)
        .envs(touch.2)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(a.dir.join("shm/probe").exists());
    assert!(!b.dir.join("shm/probe").exists());
    assert!(
        !std::path::Path::new("/dev/shm/probe").exists(),
        "the host's /dev/shm is private"
    );
}

#[test]
fn a_topic_crosses_hosts_in_order_and_never_twice() {
    let sim = hosts(2);
    let d = domain();
    let n = "300";
    let common = ["--topic", "/probe/stream", "--count", n, "--reliable"];
    // one subscriber on the publisher's host (shared memory), one on the other (network)
    let mut remote = start(&sim, 1, &d, &[&["sub"][..], &common].concat());
    let mut local = start(&sim, 0, &d, &[&["sub"][..], &common].concat());
    let mut publisher = start(
        &sim,
        0,
        &d,
        &[&["pub", "--hz", "300", "--subscribers", "2"][..], &common].concat(),
    );
    let sent = result(&mut publisher, 30 * SECOND);
    assert_eq!(u(&sent, "failed"), 0, "{sent}");
    for (sub, net) in [(&mut remote, 300), (&mut local, 0)] {
        let r = result(sub, 30 * SECOND);
        assert_eq!(u(&r, "received"), 300, "{r}");
        assert_eq!(u(&r, "first"), 1, "{r}");
        assert!(r["in_order"].as_bool().unwrap(), "{r}");
        assert_eq!(
            u(&r, "corrupt") + u(&r, "lost") + u(&r, "refused"),
            0,
            "{r}"
        );
        // the remote one got everything over the network, the local one nothing
        assert_eq!(u(&r, "network"), net, "{r}");
    }
}

#[test]
fn services_cross_hosts_and_a_server_on_the_same_host_is_preferred() {
    let sim = hosts(2);
    let d = domain();
    let _server_a = start(&sim, 0, &d, &["serve", "--service", "/probe/echo"]);
    let mut client = start(
        &sim,
        1,
        &d,
        &["call", "--service", "/probe/echo", "--count", "50"],
    );
    let r = result(&mut client, 30 * SECOND);
    assert_eq!(u(&r, "ok"), 50, "{r}");
    assert_eq!(u(&r["hosts"], "hosta"), 50, "{r}");

    // with a server on its own host, the client uses it
    let _server_b = start(&sim, 1, &d, &["serve", "--service", "/probe/echo"]);
    let mut client = start(
        &sim,
        1,
        &d,
        &["call", "--service", "/probe/echo", "--count", "20"],
    );
    let r = result(&mut client, 30 * SECOND);
    assert_eq!(u(&r, "ok"), 20, "{r}");
    assert_eq!(u(&r["hosts"], "hostb"), 20, "{r}");
}

#[test]
fn a_call_to_a_host_that_dies_fails_with_a_named_error() {
    let sim = hosts(2);
    let d = domain();
    let mut server = start(&sim, 0, &d, &["serve", "--service", "/probe/gone"]);
    let mut client = start(
        &sim,
        1,
        &d,
        &[
            "call",
            "--service",
            "/probe/gone",
            "--count",
            "40",
            "--pause-ms",
            "50",
            "--timeout-ms",
            "3000",
        ],
    );
    std::thread::sleep(SECOND);
    server.kill();
    let r = result(&mut client, 60 * SECOND);
    let ok = u(&r, "ok");
    assert!((1..40).contains(&ok), "{r}");
    let errors = r["errors"].to_string();
    assert!(
        errors.contains("went away") || errors.contains("no server"),
        "calls after the kill fail by name: {r}"
    );
}

#[test]
fn late_joiners_get_the_rest_and_a_killed_host_leaves_the_others_working() {
    let sim = hosts(3);
    let d = domain();
    let common = ["--topic", "/probe/late", "--count", "600", "--reliable"];
    let mut steady = start(&sim, 1, &d, &[&["sub"][..], &common].concat());
    let mut doomed = start(&sim, 2, &d, &[&["sub"][..], &common].concat());
    let mut publisher = start(
        &sim,
        0,
        &d,
        &[&["pub", "--hz", "100", "--subscribers", "2"][..], &common].concat(),
    );
    std::thread::sleep(2 * SECOND);
    // a late joiner on host c, then host c's first subscriber dies mid-stream
    let mut late = start(&sim, 2, &d, &[&["sub"][..], &common].concat());
    std::thread::sleep(SECOND);
    doomed.kill();
    let sent = result(&mut publisher, 30 * SECOND);
    assert_eq!(
        u(&sent, "failed"),
        0,
        "the publisher is not stalled: {sent}"
    );
    let r = result(&mut steady, 30 * SECOND);
    assert_eq!(u(&r, "received"), 600, "{r}");
    assert!(r["in_order"].as_bool().unwrap(), "{r}");
    let r = result(&mut late, 30 * SECOND);
    let first = u(&r, "first");
    assert!(first > 100, "joined late: {r}");
    assert_eq!(
        u(&r, "received"),
        600 - first + 1,
        "everything from then on: {r}"
    );
    assert!(r["in_order"].as_bool().unwrap(), "{r}");
}

/// T5, a remote host stopped (SIGSTOP) for 4 s while a reliable stream of 4 MB/s flows
/// to it and to another host, with Zenoh's default 10 s lease: its queue fills at once,
/// and the publisher is held back at most the plane's 1 s bound on a blocking push
/// (Zenoh's own default held it 4 s, as long as the host was stopped); the other
/// subscriber gets everything in order, and the stopped one, once continued, goes on to
/// the end with every sample it missed counted as lost.
#[test]
fn a_stopped_host_stalls_no_one_and_counts_what_it_missed() {
    let sim = SimHosts::create(3, 10_000).expect("simulated hosts (needs root, ip, unshare)");
    let d = domain();
    let common = [
        "--topic",
        "/probe/stopped",
        "--count",
        "10000",
        "--reliable",
    ];
    let sub = [&["sub", "--seconds", "60"][..], &common].concat();
    let mut steady = start(&sim, 1, &d, &sub);
    let mut stopped = start(&sim, 2, &d, &sub);
    let mut publisher = start(
        &sim,
        0,
        &d,
        &[
            &[
                "pub",
                "--hz",
                "1000",
                "--size",
                "4096",
                "--subscribers",
                "2",
            ][..],
            &common,
        ]
        .concat(),
    );
    std::thread::sleep(2 * SECOND);
    stopped.signal(libc::SIGSTOP);
    std::thread::sleep(4 * SECOND);
    stopped.signal(libc::SIGCONT);
    let sent = result(&mut publisher, 60 * SECOND);
    assert_eq!(u(&sent, "failed"), 0, "{sent}");
    let slowest = sent["slowest_send_ms"].as_f64().unwrap();
    assert!(
        slowest < 2000.0,
        "held back at most about the plane's 1 s bound on a blocking push: {sent}"
    );
    let r = result(&mut steady, 60 * SECOND);
    assert_eq!((u(&r, "received"), u(&r, "lost")), (10_000, 0), "{r}");
    assert!(r["in_order"].as_bool().unwrap(), "{r}");
    let s = result(&mut stopped, 60 * SECOND);
    complete_or_gaps_reported(&s, "/probe/stopped, the stopped host");
    assert_eq!(
        u(&s, "last"),
        10_000,
        "went on to the end once continued: {s}"
    );
    eprintln!("a host stopped for 4 s: publisher {sent}, the other host {r}, the stopped one {s}");
}

/// T5 for services across hosts: a client's host stopped while calling flat out, then a
/// server's host stopped for 3 s. While the client is stopped, another host's client is
/// answered every time; calls to the stopped server fail by name within their timeout and
/// are answered again once it is continued; the stopped client, continued, calls on to
/// the end.
#[test]
fn a_stopped_server_or_client_host_fails_calls_by_name_and_recovers() {
    let sim = hosts(3);
    let d = domain();
    let service = "/probe/stopped_srv";
    let server = start(&sim, 0, &d, &["serve", "--service", service]);
    let call = |count: &'static str, pause: &'static str| {
        [
            "call",
            "--service",
            service,
            "--count",
            count,
            "--pause-ms",
            pause,
            "--timeout-ms",
            "1000",
        ]
    };
    let mut greedy = start(&sim, 2, &d, &call("300", "10"));
    std::thread::sleep(SECOND);
    greedy.signal(libc::SIGSTOP);
    // the greedy client is stopped (a call of it in flight, maybe) for all of these
    let mut beside = start(&sim, 1, &d, &call("20", "100"));
    let r = result(&mut beside, 60 * SECOND);
    greedy.signal(libc::SIGCONT);
    assert_eq!(
        (u(&r, "ok"), r["errors"].as_array().map_or(0, Vec::len)),
        (20, 0),
        "a stopped client keeps the server from no one: {r}"
    );
    let g = result(&mut greedy, 120 * SECOND);
    assert_eq!(u(&g, "last_ok"), 300, "calls again once continued: {g}");
    let mut steady = start(&sim, 1, &d, &call("60", "100"));
    std::thread::sleep(SECOND);
    server.signal(libc::SIGSTOP);
    std::thread::sleep(3 * SECOND);
    server.signal(libc::SIGCONT);
    let r = result(&mut steady, 120 * SECOND);
    let errors = r["errors"].to_string();
    assert!(
        errors.contains("no response within") || errors.contains("no server"),
        "calls to the stopped server fail by name: {r}"
    );
    assert_eq!(u(&r, "last_ok"), 60, "answered again once continued: {r}");
    eprintln!("a stopped client's host: {g}; a stopped server's host: {r}");
}

#[test]
fn history_reaches_a_late_joiner_on_another_host() {
    let sim = hosts(2);
    let d = domain();
    let common = [
        "--topic",
        "/probe/latched",
        "--count",
        "5",
        "--history",
        "3",
    ];
    let mut publisher = start(
        &sim,
        0,
        &d,
        &[&["pub", "--hz", "100", "--subscribers", "0"][..], &common].concat(),
    );
    let sent = result(&mut publisher, 20 * SECOND);
    assert_eq!(u(&sent, "failed"), 0, "{sent}");
    // the publisher is idle now; a subscriber on another host joins and asks
    let mut late = start(
        &sim,
        1,
        &d,
        &[&["sub", "--seconds", "10"][..], &common].concat(),
    );
    let r = result(&mut late, 20 * SECOND);
    assert_eq!(
        (u(&r, "first"), u(&r, "last"), u(&r, "received")),
        (3, 5, 3),
        "the last 3 samples, in order: {r}"
    );
    assert_eq!(u(&r, "network"), 3, "{r}");
}

/// Streams 1,000 samples of 4 KiB at 200 Hz from host 0 to host 1 on `topic`; the
/// subscriber's result.
fn stream_1000(sim: &SimHosts, d: &str, topic: &str, reliable: bool) -> Value {
    let mut common = vec!["--topic", topic, "--count", "1000"];
    if reliable {
        common.push("--reliable");
    }
    let mut sub = start(
        sim,
        1,
        d,
        &[&["sub", "--seconds", "40"][..], &common].concat(),
    );
    let mut publisher = start(
        sim,
        0,
        d,
        &[&["pub", "--hz", "200", "--size", "4096"][..], &common].concat(),
    );
    let t0 = Instant::now();
    let sent = result(&mut publisher, 40 * SECOND);
    assert_eq!(u(&sent, "failed"), 0, "{sent}");
    result(&mut sub, 45 * SECOND - t0.elapsed().min(40 * SECOND))
}

#[test]
fn under_one_percent_loss_reliable_is_complete_and_best_effort_counts_its_gaps() {
    let sim = hosts(2);
    sim.set_loss(1, 1).expect("nft loss rule (needs nftables)");
    let d = domain();
    for (topic, reliable) in [("/probe/lossy_rel", true), ("/probe/lossy_be", false)] {
        let r = stream_1000(&sim, &d, topic, reliable);
        assert!(r["in_order"].as_bool().unwrap(), "{topic}: {r}");
        assert_eq!(u(&r, "corrupt"), 0, "{r}");
        let (got, lost) = (u(&r, "received"), u(&r, "lost"));
        if reliable {
            assert_eq!((got, lost), (1000, 0), "{topic}: {r}");
        } else {
            // every sample is delivered or its gap reported
            assert_eq!(
                got + lost,
                u(&r, "last") - u(&r, "first") + 1,
                "{topic}: {r}"
            );
        }
        eprintln!("{topic} under 1% loss: {r}");
    }
}

/// Every sample the subscriber saw in order and intact, and every gap counted as lost.
fn complete_or_gaps_reported(r: &Value, what: &str) {
    assert!(r["in_order"].as_bool().unwrap(), "{what}: {r}");
    assert_eq!(u(r, "corrupt"), 0, "{what}: nothing corrupt delivered: {r}");
    assert_eq!(
        u(r, "received") + u(r, "lost"),
        u(r, "last") - u(r, "first") + 1,
        "{what}: every gap reported: {r}"
    );
}

#[test]
fn under_duplication_reordering_and_corruption_nothing_corrupt_is_delivered_and_gaps_are_reported()
{
    let sim = hosts(2);
    // the publisher's host sends 5 % of its packets twice and holds one in 8 back behind
    // later ones; the subscriber's host overwrites a byte in 5 per mille of the TCP
    // packets it receives (checksum fixed up: only Nerve's own check can tell)
    sim.set_faults(
        0,
        Faults {
            duplicate_percent: 5,
            reorder_one_in: 8,
            ..Faults::default()
        },
    )
    .expect("faults (needs nftables and tc)");
    sim.set_faults(
        1,
        Faults {
            corrupt_per_mille: 5,
            ..Faults::default()
        },
    )
    .expect("faults (needs nftables)");
    let d = domain();
    for (topic, reliable) in [("/probe/faulty_rel", true), ("/probe/faulty_be", false)] {
        let r = stream_1000(&sim, &d, topic, reliable);
        complete_or_gaps_reported(&r, topic);
        assert!(u(&r, "received") > 0, "{topic}: {r}");
        eprintln!("{topic} under duplication, reordering and corruption: {r}");
    }
}

#[test]
fn a_link_cut_mid_stream_resumes_and_reports_its_gap() {
    let sim = hosts(2);
    let d = domain();
    let common = ["--topic", "/probe/cut", "--count", "2000", "--reliable"];
    let mut sub = start(
        &sim,
        1,
        &d,
        &[&["sub", "--seconds", "60"][..], &common].concat(),
    );
    let mut publisher = start(
        &sim,
        0,
        &d,
        &[&["pub", "--hz", "100", "--size", "1024"][..], &common].concat(),
    );
    // the subscriber's host drops off the network for 4 s (longer than the 2 s lease:
    // the Zenoh session ends, as when a router between them restarts) and comes back
    std::thread::sleep(6 * SECOND);
    sim.set_link(1, false).expect("link down");
    std::thread::sleep(4 * SECOND);
    sim.set_link(1, true).expect("link up");
    let sent = result(&mut publisher, 40 * SECOND);
    assert_eq!(u(&sent, "failed"), 0, "{sent}");
    let r = result(&mut sub, 45 * SECOND);
    complete_or_gaps_reported(&r, "/probe/cut");
    assert_eq!(u(&r, "last"), 2000, "resumed to the end: {r}");
    assert!(
        u(&r, "lost") > 0,
        "a 4 s cut loses samples, and says so: {r}"
    );
    eprintln!("/probe/cut across a 4 s link cut: {r}");
}

#[test]
fn malformed_frames_from_the_network_are_counted_and_never_delivered() {
    let sim = hosts(2);
    let d = domain();
    let mut sub = start(
        &sim,
        1,
        &d,
        &[
            "sub",
            "--topic",
            "/probe/junk",
            "--count",
            "1",
            "--seconds",
            "30",
        ],
    );
    let mut garbage = start(&sim, 0, &d, &["garbage", "--topic", "/probe/junk"]);
    let g = result(&mut garbage, 30 * SECOND);
    let r = result(&mut sub, 30 * SECOND);
    assert_eq!(u(&r, "received"), 1, "only the valid frame: {r}");
    assert_eq!(u(&r, "corrupt"), 0, "{r}");
    assert_eq!(u(&r, "refused"), u(&g, "malformed_sent"), "{r} vs {g}");
    assert_eq!(
        u(&r, "info_refused"),
        u(&g, "malformed_sent"),
        "the counters `nerve topic info` reads: {r}"
    );
}

/// Parameters and actions of a node on one host, used from another: the CLI reads and
/// sets (an atomic set refused as a whole), sends a goal and gets its feedback and result
/// (pushed across the network plane to the goal's own client).
#[test]
fn parameters_and_actions_cross_hosts() {
    let sim = hosts(2);
    let d = domain();
    let fib = std::path::PathBuf::from(env!("CARGO_BIN_EXE_fibonacci"));
    let cli = fib.parent().unwrap().join("nerve");
    let env = [("NERVE_DOMAIN", d.clone())];
    let mut node = sim
        .spawn(0, &fib, &[], &env, "fibonacci")
        .expect("spawn fibonacci");
    node.expect("fibonacci: serving", 20 * SECOND)
        .expect("fibonacci ready");
    // the JSON line a command prints, if it expects one, and whether it exited in time
    let run = |args: &[&str], json: bool| -> (bool, String) {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let mut c = sim
            .spawn(1, &cli, &args, &env, "nerve")
            .expect("spawn nerve");
        let line = match json {
            true => c.expect("{", 30 * SECOND).unwrap_or_default(),
            false => String::new(),
        };
        (c.wait_exit(30 * SECOND), line)
    };
    let (done, _) = run(
        &[
            "param",
            "set",
            "/fibonacci",
            "gain",
            "4",
            "max_order",
            "95",
            "--atomic",
            "--timeout",
            "10000",
        ],
        false,
    );
    assert!(done);
    let (done, got) = run(
        &[
            "param",
            "get",
            "/fibonacci",
            "gain",
            "max_order",
            "--format",
            "json",
            "--timeout",
            "10000",
        ],
        true,
    );
    assert!(done);
    let v: Value = serde_json::from_str(&got).expect("param JSON");
    assert_eq!(
        v,
        serde_json::json!({"gain": 1.0, "max_order": 90}),
        "nothing changed"
    );
    let (done, result) = run(
        &[
            "action",
            "send_goal",
            "/fibonacci",
            "Fibonacci",
            r#"{"order": 5}"#,
            "--format",
            "json",
            "--timeout",
            "20000",
        ],
        true,
    );
    assert!(done);
    let r: Value = serde_json::from_str(&result).expect("result JSON");
    assert_eq!(r["state"], "succeeded", "{r}");
    assert_eq!(
        r["result"]["elems"],
        serde_json::json!([0, 1, 1, 2, 3, 5]),
        "{r}"
    );
}
