//! The bridge's rmw_zenoh mode end to end, in one process: a [`ZenohSide`] plays a ROS 2
//! node of `rmw_zenoh_cpp` (no ROS 2 is installed here), the bridge sits between it and
//! a Nerve domain. Loopback only: explicit `tcp/127.0.0.1` endpoints, multicast scouting
//! off; each test has its own Nerve domain, state directory, ROS domain and ports.

use nerve::prelude::*;
use nerve::{Config, RawSubscriber};
use nerve_msgs::ros2::ros2_type;
use nerve_msgs::{Imu, Time};
use nerve_ros2::rmw_zenoh::{
    peer_config, EntityKind, Graph, GraphEntity, Qos, ZenohBridge, ZenohSide, BRIDGE_NODE_PREFIX,
};
use nerve_ros2::{BridgeConfig, Event};
use nerve_ros2_types::{Registry, SearchPath, Value};
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use zenoh::Wait;

const STRING_HASH: &str = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";
const WAIT: Duration = Duration::from_secs(20);

/// `std_msgs/msg/String` with `data` in CDR (little-endian encapsulation).
fn string_cdr(data: &str) -> Vec<u8> {
    let mut v = vec![0, 1, 0, 0];
    v.extend_from_slice(&(data.len() as u32 + 1).to_le_bytes());
    v.extend_from_slice(data.as_bytes());
    v.push(0);
    while v.len() % 4 != 0 {
        v.push(0);
    }
    v
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../nerve-ros2-types/tests/fixtures/share")
}

fn registry(ros_type: &str) -> Registry {
    let mut search = SearchPath::new();
    search.push_dir(fixtures());
    let mut r = Registry::new();
    r.load(ros_type, &search).unwrap();
    r
}

/// The RIHS01 hash of `ros_type` in the fixtures (recorded from a real ROS 2).
fn fixture_hash(ros_type: &str) -> String {
    let path = fixtures().join(format!("{ros_type}.json"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    json["type_hashes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["type_name"] == ros_type)
        .and_then(|h| h["hash_string"].as_str())
        .unwrap()
        .to_owned()
}

/// A Nerve configuration of its own for test `k` of this process.
fn nerve_config(k: u32) -> Config {
    let domain = 960 + (std::process::id() % 18) * 2 + k;
    let dir =
        std::env::temp_dir().join(format!("nerve-tests/rmw-zenoh-{}-{k}", std::process::id()));
    Config::default().domain(domain).unwrap().state_dir(dir)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

/// A bridge listening on its own loopback port and a session of a ROS 2 node connected
/// to it; the bridge's events come out of the receiver.
fn setup(k: u32, ros_domain: u16) -> (ZenohBridge, zenoh::Session, Receiver<Event>) {
    let listen = format!("tcp/127.0.0.1:{}", free_port());
    let config = BridgeConfig {
        ros_domain,
        nerve: nerve_config(k),
        allow: Vec::new(),
        deny: Vec::new(),
        types: vec![fixtures()],
        native: true,
        lossy: Vec::new(),
        refresh: Duration::from_millis(50),
        localhost_only: true,
    };
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let bridge = ZenohBridge::start(config, peer_config(&[&listen], &[]).unwrap(), move |e| {
        let _ = tx.lock().unwrap().send(e);
    })
    .unwrap();
    let ros = zenoh::open(peer_config(&["tcp/127.0.0.1:0"], &[&listen]).unwrap())
        .wait()
        .unwrap();
    (bridge, ros, rx)
}

fn wait_until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The bridge's entity of `kind` on `topic` in `ros`'s graph.
fn bridge_entity(
    graph: &Graph,
    bridge: &ZenohBridge,
    kind: EntityKind,
    topic: &str,
) -> Option<GraphEntity> {
    graph
        .on_topic(kind, topic)
        .find(|e| e.token.zid == bridge.zid())
        .cloned()
}

fn field<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(v, |v, name| match v {
        Value::Struct(s) => s.get(name).unwrap_or_else(|| panic!("no field {name}")),
        other => panic!("{name}: not a struct: {other:?}"),
    })
}

/// rmw_zenoh publishers of `std_msgs/msg/String` (a Jazzy one with the RIHS01 hash, a
/// Humble one with `TypeHashNotSupported`) → the bridge → a Nerve subscriber gets the CDR
/// in a `Ros2Cdr` carrier; the bridge's subscription token appears only once Nerve
/// listens, and a publisher of another bridge's node is not bridged.
#[test]
fn rmw_zenoh_strings_reach_nerve_as_cdr() {
    let (bridge, ros, events) = setup(0, 41);
    let talker = ZenohSide::new(ros, 41, "/", "talker").unwrap();
    let jazzy = talker
        .publisher(
            "/chatter",
            "std_msgs/msg/String",
            STRING_HASH,
            Qos::keep_last(10),
        )
        .unwrap();
    // a node named like a bridge: never bridged
    let other_bridge = ZenohSide::new(talker.session().clone(), 41, "/", "nerve_bridge_1").unwrap();
    let _looped = other_bridge
        .publisher(
            "/looped",
            "std_msgs/msg/String",
            STRING_HASH,
            Qos::keep_last(10),
        )
        .unwrap();

    let bridged = wait_until("the bridged event", || {
        events.try_recv().ok().filter(
            |e| matches!(e, Event::Bridged { topic, to_ros: false, .. } if topic == "/chatter"),
        )
    });
    let Event::Bridged {
        ros_type,
        nerve_type,
        ..
    } = &bridged
    else {
        unreachable!()
    };
    assert_eq!(ros_type, "std_msgs/msg/String");
    assert_eq!(nerve_type, "std_msgs/msg/String");
    // the bridge's node token, and no subscription while Nerve does not listen
    let g = talker.graph();
    let node = g
        .nodes()
        .find(|n| n.token.zid == bridge.zid())
        .expect("the bridge's node token");
    assert_eq!(
        node.token.node_name,
        format!("{BRIDGE_NODE_PREFIX}{}", std::process::id())
    );
    assert!(bridge_entity(&g, &bridge, EntityKind::Subscription, "/chatter").is_none());

    let ctx = Context::new(nerve_config(0)).unwrap();
    let node = ctx.node("listener").create().unwrap();
    let sub = RawSubscriber::create(&node, "/chatter", nerve::Qos::default()).unwrap();
    let (name, hash, _) = ros2_type(sub.schema().unwrap().as_ref().unwrap()).unwrap();
    assert_eq!((name, hash), ("std_msgs/msg/String", STRING_HASH));

    // Nerve listens: the bridge subscribes, with its token
    let s = wait_until("the bridge's subscription", || {
        bridge_entity(
            &talker.graph(),
            &bridge,
            EntityKind::Subscription,
            "/chatter",
        )
    });
    let t = s.token.topic.as_ref().unwrap();
    assert_eq!(t.type_hash.to_string(), STRING_HASH);
    wait_until("matching", || jazzy.has_subscribers().then_some(()));

    let reg = registry("std_msgs/msg/String");
    let head = std::mem::size_of::<nerve_msgs::ros2::Ros2Cdr>();
    let sent = jazzy.publish(&string_cdr("hello from jazzy")).unwrap();
    let got = sub
        .recv_timeout(WAIT)
        .unwrap()
        .expect("the string in Nerve");
    let stamp = i64::from_le_bytes(got.bytes()[..8].try_into().unwrap());
    assert_eq!(stamp, sent.source_timestamp_ns);
    let cdr = &got.bytes()[head..];
    assert_eq!(cdr, string_cdr("hello from jazzy"));
    let v = nerve_ros2_types::decode(&reg, "std_msgs/msg/String", cdr).unwrap();
    assert_eq!(
        field(&v, &["data"]),
        &Value::String("hello from jazzy".into())
    );

    // a Humble publisher (no type hash) is heard too
    let humble = talker
        .publisher(
            "/chatter",
            "std_msgs/msg/String",
            "TypeHashNotSupported",
            Qos::keep_last(10),
        )
        .unwrap();
    wait_until("matching", || humble.has_subscribers().then_some(()));
    humble.publish(&string_cdr("hello from humble")).unwrap();
    let got = sub.recv_timeout(WAIT).unwrap().expect("Humble's string");
    let v = nerve_ros2_types::decode(&reg, "std_msgs/msg/String", &got.bytes()[head..]).unwrap();
    assert_eq!(
        field(&v, &["data"]),
        &Value::String("hello from humble".into())
    );
    // (counted just after the sample is handed over)
    let to_nerve = || {
        bridge
            .stats()
            .to_nerve
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    wait_until("both counted", || (to_nerve() == 2).then_some(()));

    // the other bridge's topic never crossed
    let seen: Vec<Event> = events.try_iter().collect();
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, Event::Bridged { topic, .. } if topic == "/looped")),
        "{seen:?}"
    );
}

/// A Nerve `Imu` (native) → the bridge → an rmw_zenoh subscription of
/// `sensor_msgs/msg/Imu` gets CDR on the key with the type's RIHS01 hash (the one real
/// ROS 2 computes), each sample with the attachment rmw_zenoh writes (sequence 1, 2, 3,
/// the GID of the bridge's publisher token); the bridge's tokens are in the graph, and
/// what it publishes does not come back into Nerve.
#[test]
fn nerve_imu_reaches_rmw_zenoh_with_attachments() {
    let imu_hash = fixture_hash("sensor_msgs/msg/Imu");
    assert_eq!(
        imu_hash,
        "RIHS01_7d9a00ff131080897a5ec7e26e315954b8eae3353c3f995c55faf71574000b5b"
    );
    let (bridge, ros, events) = setup(1, 42);
    let ctx = Context::new(nerve_config(1)).unwrap();
    let node = ctx.node("imu_driver").create().unwrap();
    let imus = node.publisher::<Imu>("/imu").create().unwrap();
    let listener = ZenohSide::new(ros, 42, "/robot", "listener").unwrap();

    // the bridge announces the topic: its node and publisher tokens
    let p = wait_until("the bridge's publisher", || {
        bridge_entity(&listener.graph(), &bridge, EntityKind::Publisher, "/imu")
    });
    assert!(p.token.node_name.starts_with(BRIDGE_NODE_PREFIX));
    let t = p.token.topic.as_ref().unwrap();
    assert_eq!(t.ros_type, "sensor_msgs/msg/Imu");
    assert_eq!(t.type_hash.to_string(), imu_hash);
    let key = p.token.data_key().unwrap().key_expr();
    assert_eq!(
        key,
        format!("42/imu/sensor_msgs::msg::dds_::Imu_/{imu_hash}")
    );
    assert!(listener
        .graph()
        .nodes()
        .any(|n| n.token.zid == bridge.zid()));
    // no ROS 2 subscription yet: the bridge does not take Nerve's samples
    assert_eq!(imus.subscriber_count(), 0);

    let sub = listener
        .subscriber("/imu", "sensor_msgs/msg/Imu", &imu_hash, Qos::keep_last(10))
        .unwrap();
    assert_eq!(sub.key_expr(), key);
    assert!(
        imus.wait_for_subscribers(1, WAIT),
        "the bridge subscribes in Nerve"
    );

    let reg = registry("sensor_msgs/msg/Imu");
    for i in 1..=3u32 {
        imus.publish(&Imu {
            stamp: Time {
                nanos: i64::from(i) * 1000,
            },
            ..Default::default()
        })
        .unwrap();
    }
    for i in 1..=3u32 {
        let r = sub.recv_timeout(WAIT).expect("an Imu in ROS 2");
        let a = r.attachment.expect("a valid attachment");
        assert_eq!(a.sequence_number, i64::from(i));
        assert_eq!(a.gid, p.gid);
        assert!(a.source_timestamp_ns > 0);
        let v = nerve_ros2_types::decode(&reg, "sensor_msgs/msg/Imu", &r.cdr).unwrap();
        assert_eq!(
            field(&v, &["header", "stamp", "nanosec"]),
            &Value::UInt32(i * 1000)
        );
    }
    assert_eq!(sub.stats().malformed, 0);
    let n = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    wait_until("three counted", || {
        (n(&bridge.stats().to_ros) == 3).then_some(())
    });

    // the bridge's own publisher is not bridged back into Nerve
    std::thread::sleep(Duration::from_millis(300));
    let seen: Vec<Event> = events.try_iter().collect();
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, Event::Bridged { to_ros: false, .. })),
        "{seen:?}"
    );
    assert_eq!(n(&bridge.stats().to_nerve), 0);

    // the subscription gone, the bridge lets go of the Nerve topic
    drop(sub);
    wait_until("the bridge's Nerve subscriber gone", || {
        (imus.subscriber_count() == 0).then_some(())
    });
}
