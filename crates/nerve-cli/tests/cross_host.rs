//! `nerve topic list|info|echo` and `nerve node list` across simulated hosts (network
//! namespaces with private /dev/shm, see `nerve_bench_harness::hosts`): remote entities show up
//! with their host, and drop out once their process dies. Needs root and `ip`.

use nerve_bench_harness::hosts::SimHosts;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const DOMAIN: &str = "731";

fn nerve(sim: &SimHosts, host: usize, args: &[&str]) -> (i32, String, String) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let (ip, full, env) = sim.command(host, Path::new(env!("CARGO_BIN_EXE_nerve")), &args);
    let out = std::process::Command::new(ip)
        .args(full)
        .envs(env)
        .env("NERVE_DOMAIN", DOMAIN)
        .env_remove("NERVE_CONFIG")
        .output()
        .expect("run nerve");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(sim: &SimHosts, host: usize, args: &[&str]) -> Value {
    let (code, out, err) = nerve(sim, host, args);
    assert_eq!(code, 0, "nerve {args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn remote_topic(list: &Value, name: &str) -> Option<Value> {
    list.as_array()?
        .iter()
        .find(|t| t["name"] == name && t["remote"] == true)
        .cloned()
}

#[test]
fn remote_topics_and_nodes_are_listed_with_their_host_and_drop_out_when_it_dies() {
    let sim = SimHosts::create(3, 2000).expect("simulated hosts (needs root, ip, unshare)");
    let exe = Path::new(env!("CARGO_BIN_EXE_nerve"));
    let args: Vec<String> = [
        "topic", "pub", "/cli/imu", "Imu", "{}", "--rate", "50", "--count", "100000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut publisher = sim
        .spawn(0, exe, &args, &[("NERVE_DOMAIN", DOMAIN.into())], "nerve")
        .expect("start the publisher");

    // the publisher's host name and type appear on the other host
    let deadline = Instant::now() + Duration::from_secs(20);
    let topic = loop {
        let list = json(&sim, 1, &["topic", "list", "--format", "json"]);
        if let Some(t) = remote_topic(&list, "/cli/imu") {
            break t;
        }
        assert!(Instant::now() < deadline, "never listed: {list}");
    };
    assert_eq!(topic["host"], "hosta", "{topic}");
    assert_eq!(topic["type"], "nerve_msgs/Imu", "{topic}");
    assert_eq!(topic["publishers"], 1, "{topic}");

    let nodes = json(&sim, 1, &["node", "list", "--format", "json"]);
    let remote_nodes: Vec<&Value> = nodes["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["host"] == "hosta")
        .collect();
    assert!(!remote_nodes.is_empty(), "{nodes}");

    // samples of a topic that exists only on the other host can be echoed here
    let (code, out, err) = nerve(
        &sim,
        1,
        &[
            "topic",
            "echo",
            "/cli/imu",
            "--count",
            "2",
            "--timeout",
            "20",
            "--format",
            "json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 2, "{out}");

    let info = json(&sim, 1, &["topic", "info", "/cli/imu", "--format", "json"]);
    assert_eq!(info["remote"][0]["host"], "hosta", "{info}");

    // a second host's link is cut (no goodbye): its node drops out within the lease
    let args: Vec<String> = [
        "topic", "pub", "/cli/cut", "Imu", "{}", "--rate", "5", "--count", "100000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let _cut = sim
        .spawn(2, exe, &args, &[("NERVE_DOMAIN", DOMAIN.into())], "nerve")
        .expect("start the second publisher");
    let listed = |name: &str| {
        let list = json(&sim, 1, &["topic", "list", "--format", "json"]);
        remote_topic(&list, name).is_some()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !listed("/cli/cut") {
        assert!(Instant::now() < deadline, "/cli/cut never listed");
    }
    sim.set_link(2, false).expect("cut the link");
    let deadline = Instant::now() + Duration::from_secs(15);
    while listed("/cli/cut") {
        assert!(Instant::now() < deadline, "a cut host stays listed");
    }

    // the host's process dies: it drops out of discovery at once
    publisher.kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let list = json(&sim, 1, &["topic", "list", "--format", "json"]);
        if remote_topic(&list, "/cli/imu").is_none() {
            break;
        }
        assert!(Instant::now() < deadline, "still listed: {list}");
    }
}

/// A message type only this test binary knows.
#[derive(Clone, Copy, nerve::Message)]
#[repr(C)]
#[message(name = "cross_host_test/Wheel")]
struct Wheel {
    speed: f32,
    torque: f32,
    id: u32,
}

/// Not a test of its own: the publisher of a type the `nerve` tool was not built with,
/// started on a simulated host by the test below (it does nothing unless asked to).
#[test]
#[ignore]
fn custom_type_publisher_child() {
    if std::env::var("NERVE_TEST_CHILD").is_err() {
        return;
    }
    let ctx = nerve::Context::new(nerve::Config::from_env().unwrap()).unwrap();
    let node = ctx.node("wheels").create().unwrap();
    let p = node.publisher::<Wheel>("/cli/wheel").create().unwrap();
    for id in 0..3000 {
        p.publish(&Wheel {
            speed: 1.5,
            torque: -2.0,
            id,
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts [`custom_type_publisher_child`] on simulated host 0.
fn start_wheel_publisher(sim: &SimHosts) -> nerve_bench_harness::child::Child {
    let me = std::env::current_exe().unwrap();
    let args: Vec<String> = ["--exact", "custom_type_publisher_child", "--ignored"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    sim.spawn(
        0,
        &me,
        &args,
        &[
            ("NERVE_DOMAIN", DOMAIN.into()),
            ("NERVE_TEST_CHILD", "1".into()),
        ],
        "custom publisher",
    )
    .expect("start the publisher")
}

#[test]
fn a_custom_type_published_only_on_another_host_is_decoded_by_its_schema() {
    let sim = SimHosts::create(2, 2100).expect("simulated hosts (needs root, ip, unshare)");
    let _publisher = start_wheel_publisher(&sim);
    // the tool on the other host knows neither the type nor the topic: it asks the
    // publisher's process for the schema and decodes the samples with it
    let (code, out, err) = nerve(
        &sim,
        1,
        &[
            "topic",
            "echo",
            "/cli/wheel",
            "--count",
            "2",
            "--timeout",
            "30",
            "--format",
            "json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 2, "{out}");
    let first = &lines[0];
    let msg = first.get("msg").unwrap_or(first);
    assert_eq!(msg["speed"], 1.5, "{first}");
    assert_eq!(msg["torque"], -2.0, "{first}");
}

#[test]
fn a_topic_published_only_on_another_host_is_recorded_with_its_schema() {
    let sim = SimHosts::create(2, 2200).expect("simulated hosts (needs root, ip, unshare)");
    let _publisher = start_wheel_publisher(&sim);
    let dir = std::env::temp_dir().join(format!("nerve-remote-bag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bag = dir.join("remote.mcap");
    let bag_arg = bag.to_str().unwrap();
    // the recorder on the other host knows neither the topic nor its type
    let report = json(
        &sim,
        1,
        &[
            "bag",
            "record",
            "/cli/wheel",
            "-o",
            bag_arg,
            "--duration",
            "8",
            "--format",
            "json",
        ],
    );
    let topic = &report["topics"][0];
    assert_eq!(topic["topic"], "/cli/wheel", "{report}");
    assert!(topic["written"].as_u64().unwrap() >= 10, "{report}");
    let info = json(&sim, 1, &["bag", "info", bag_arg, "--format", "json"]);
    let t = &info["topics"][0];
    assert_eq!(t["topic"], "/cli/wheel", "{info}");
    assert_eq!(t["count"], topic["written"], "{info}");
    // the schema the publisher's process offered, as a ros2msg a generic tool decodes
    let mcap = std::fs::read(&bag).unwrap();
    let text = String::from_utf8_lossy(&mcap);
    assert!(
        text.contains("float32 speed") && text.contains("uint32 id"),
        "the generated ros2msg schema is in the bag"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
