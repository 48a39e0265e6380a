//! The bridge's rmw_zenoh mode end to end, in one process: a [`ZenohSide`] plays a ROS 2
//! node of `rmw_zenoh_cpp` (no ROS 2 is installed here), the bridge sits between it and
//! a Nerve domain. Loopback only: explicit `tcp/127.0.0.1` endpoints, multicast scouting
//! off; each test has its own Nerve domain, state directory, ROS domain and ports.

use nerve::prelude::*;
use nerve::{Config, RawSubscriber};
use nerve_msgs::ros2::ros2_type;
use nerve_msgs::{Imu, Time};
use nerve_ros2::rmw_zenoh::{
    peer_config, Attachment, Durability, EntityKind, EntityToken, Gid, Graph, GraphEntity, Qos,
    Reliability, ZenohSide, BRIDGE_NODE_PREFIX,
};
use nerve_ros2::{Bridge, BridgeConfig, Event, Side};
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
    let domain = 900 + (std::process::id() % 8) * 12 + k;
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
fn setup(k: u32, ros_domain: u16) -> (Bridge, zenoh::Session, Receiver<Event>) {
    setup_with(k, ros_domain, vec![fixtures()])
}

/// [`setup`] with the bridge's type directories `types`.
fn setup_with(
    k: u32,
    ros_domain: u16,
    types: Vec<PathBuf>,
) -> (Bridge, zenoh::Session, Receiver<Event>) {
    let listen = format!("tcp/127.0.0.1:{}", free_port());
    let config = BridgeConfig {
        ros_domain,
        nerve: nerve_config(k),
        allow: Vec::new(),
        deny: Vec::new(),
        types,
        native: true,
        lossy: Vec::new(),
        refresh: Duration::from_millis(50),
        localhost_only: true,
    };
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let zenoh = Side::Zenoh(Box::new(peer_config(&[&listen], &[]).unwrap()));
    let bridge = Bridge::start(config, zenoh, move |e| {
        let _ = tx.lock().unwrap().send(e);
    })
    .unwrap();
    let ros = zenoh::open(peer_config(&["tcp/127.0.0.1:0"], &[&listen]).unwrap())
        .wait()
        .unwrap();
    (bridge, ros, rx)
}

/// The Zenoh session id of a bridge on rmw_zenoh.
fn zid(bridge: &Bridge) -> &str {
    bridge.id().trim_start_matches('z')
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
    bridge: &Bridge,
    kind: EntityKind,
    topic: &str,
) -> Option<GraphEntity> {
    graph
        .on_topic(kind, topic)
        .find(|e| e.token.zid == zid(bridge))
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
    // (the bridge seeing the talker says nothing of when the talker sees the bridge)
    let node = wait_until("the bridge's node token", || {
        talker
            .graph()
            .nodes()
            .find(|n| n.token.zid == zid(&bridge))
            .cloned()
    });
    let g = talker.graph();
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
        .any(|n| n.token.zid == zid(&bridge)));
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

/// `example_interfaces/srv/AddTwoInts`'s RIHS01 hash (rmw_zenoh's design document).
const ADD_TWO_INTS_HASH: &str =
    "RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a";

/// Little-endian CDR of int64 fields.
fn i64s_cdr(values: &[i64]) -> Vec<u8> {
    let mut v = vec![0, 1, 0, 0];
    for x in values {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// An rmw_zenoh server of `example_interfaces/srv/AddTwoInts` (its tokens and complete
/// queryable declared by hand, as rmw_zenoh_cpp declares them) → the bridge → a Nerve
/// client of `nerve_msgs/AddTwoInts`: each request reaches the queryable with the
/// attachment of the bridge's `SC` token (sequence 1, 2, its GID), the reply (with the
/// request's sequence number and GID) answers the Nerve call; when the server's token
/// goes, a call in flight fails at once.
#[test]
fn a_rmw_zenoh_server_answers_nerve_clients() {
    use nerve_msgs::srv::{AddTwoInts, TwoInts};
    let (bridge, ros, events) = setup(2, 43);
    let zid = ros.zid().to_string();
    let node_token = EntityToken::node(43, &zid, 0, "/", "add_two_ints_server").unwrap();
    let _node = ros
        .liveliness()
        .declare_token(node_token.key_expr())
        .wait()
        .unwrap();
    let ss = ros
        .liveliness()
        .declare_token(format!(
            "@ros2_lv/43/{zid}/0/10/SS/%/%/add_two_ints_server/%add_two_ints/\
             example_interfaces::srv::dds_::AddTwoInts_/{ADD_TWO_INTS_HASH}/::,10:,:,:,,"
        ))
        .wait()
        .unwrap();
    let (qtx, qrx) = channel();
    let qtx = Mutex::new(qtx);
    let queryable = ros
        .declare_queryable(format!(
            "43/add_two_ints/example_interfaces::srv::dds_::AddTwoInts_/{ADD_TWO_INTS_HASH}"
        ))
        .complete(true)
        .callback(move |q| {
            let _ = qtx.lock().unwrap().send(q);
        })
        .wait()
        .unwrap();
    let observer = ZenohSide::new(ros.clone(), 43, "/", "observer").unwrap();

    let ctx = Context::new(nerve_config(2)).unwrap();
    let node = ctx.node("caller").create().unwrap();
    let client = node.client::<AddTwoInts>("/add_two_ints").create().unwrap();
    assert!(
        client.wait_for_service(WAIT),
        "the bridge serves it in Nerve"
    );
    let sc = wait_until("the bridge's client token", || {
        bridge_entity(
            &observer.graph(),
            &bridge,
            EntityKind::ServiceClient,
            "/add_two_ints",
        )
    });
    let t = sc.token.topic.as_ref().unwrap();
    assert_eq!(t.ros_type, "example_interfaces/srv/AddTwoInts");
    assert_eq!(t.type_hash.to_string(), ADD_TWO_INTS_HASH);

    for (i, (a, b)) in [(2i64, 40i64), (-5, 3)].into_iter().enumerate() {
        let call = client.send(&TwoInts { a, b }).unwrap();
        let q = qrx.recv_timeout(WAIT).expect("the request in ROS 2");
        let att = Attachment::decode(&q.attachment().expect("an attachment").to_bytes()).unwrap();
        assert_eq!(att.sequence_number, i as i64 + 1);
        assert_eq!(att.gid, sc.gid);
        assert!(att.source_timestamp_ns > 0);
        assert_eq!(
            q.payload().unwrap().to_bytes().as_ref(),
            i64s_cdr(&[a, b]).as_slice()
        );
        let reply = Attachment {
            source_timestamp_ns: now_ns(),
            ..att
        };
        q.reply(q.key_expr().clone(), i64s_cdr(&[a + b]))
            .attachment(reply.encode().to_vec())
            .wait()
            .unwrap();
        drop(q);
        assert_eq!(call.wait(WAIT).expect("the sum").value, a + b);
    }
    let seen: Vec<Event> = events.try_iter().collect();
    assert!(
        seen.iter().any(
            |e| matches!(e, Event::Bridged { topic, to_ros: false, .. } if topic == "/add_two_ints")
        ),
        "{seen:?}"
    );

    // the server goes away mid-call: the Nerve call fails without waiting for its timeout
    let call = client.send(&TwoInts { a: 1, b: 1 }).unwrap();
    let q = qrx.recv_timeout(WAIT).expect("the third request");
    drop(ss);
    drop(queryable);
    let failed = call.wait(WAIT);
    assert!(failed.is_err(), "{:?}", failed.map(|r| r.value));
    drop(q);
}

/// A Nerve server of `nerve_msgs/AddTwoInts` → the bridge → rmw_zenoh clients: the
/// bridge's `SS` token announces `example_interfaces/srv/AddTwoInts` with the RIHS01 hash
/// ROS 2 computes (from the `.srv` on its type path), a query on that key with a client's
/// attachment is answered on that key with the request's sequence number and GID, and a
/// Humble client (`TypeHashNotSupported`) is answered too.
#[test]
fn nerve_servers_answer_rmw_zenoh_clients() {
    use nerve_msgs::srv::{AddTwoInts, Int};
    let types = std::env::temp_dir().join(format!(
        "nerve-tests/rmw-zenoh-{}-srv/example_interfaces/srv",
        std::process::id()
    ));
    std::fs::create_dir_all(&types).unwrap();
    std::fs::write(
        types.join("AddTwoInts.srv"),
        "int64 a\nint64 b\n---\nint64 sum\n",
    )
    .unwrap();
    let share = types.parent().unwrap().parent().unwrap().to_path_buf();
    let (bridge, ros, _events) = setup_with(3, 44, vec![fixtures(), share]);

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (ready_tx, ready) = channel();
    let serving = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let ctx = Context::new(nerve_config(3)).unwrap();
            let node = ctx.node("adder").create().unwrap();
            let server = node.service::<AddTwoInts>("/add").create().unwrap();
            ready_tx.send(()).unwrap();
            let mut served = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(Some(req)) = server.take_timeout(Duration::from_millis(50)) {
                    req.reply(&Int {
                        value: req.a + req.b,
                    })
                    .unwrap();
                    served += 1;
                }
            }
            served
        })
    };
    ready.recv().unwrap();
    let observer = ZenohSide::new(ros.clone(), 44, "/", "observer").unwrap();
    let ss = wait_until("the bridge's service token", || {
        bridge_entity(
            &observer.graph(),
            &bridge,
            EntityKind::ServiceServer,
            "/add",
        )
    });
    let t = ss.token.topic.as_ref().unwrap();
    assert_eq!(t.ros_type, "example_interfaces/srv/AddTwoInts");
    assert_eq!(t.type_hash.to_string(), ADD_TWO_INTS_HASH);
    let key = ss.token.data_key().unwrap().key_expr();
    assert_eq!(
        key,
        format!("44/add/example_interfaces::srv::dds_::AddTwoInts_/{ADD_TWO_INTS_HASH}")
    );

    let zid = ros.zid().to_string();
    let client_token = format!(
        "@ros2_lv/44/{zid}/0/11/SC/%/%/add_two_ints_client/%add/\
         example_interfaces::srv::dds_::AddTwoInts_/{ADD_TWO_INTS_HASH}/::,10:,:,:,,"
    );
    let _sc = ros
        .liveliness()
        .declare_token(client_token.clone())
        .wait()
        .unwrap();
    let gid = Gid::from_token_key(&client_token);
    let humble_key = "44/add/example_interfaces::srv::dds_::AddTwoInts_/TypeHashNotSupported";
    for (seq, key, a, b) in [(7i64, key.as_str(), 5i64, 7i64), (8, humble_key, 20, 22)] {
        let (rtx, rrx) = channel();
        let rtx = Mutex::new(rtx);
        let request = Attachment {
            sequence_number: seq,
            source_timestamp_ns: now_ns(),
            gid,
        };
        ros.get(key)
            .payload(i64s_cdr(&[a, b]))
            .attachment(request.encode().to_vec())
            .target(zenoh::query::QueryTarget::AllComplete)
            .timeout(WAIT)
            .callback(move |r| {
                let _ = rtx.lock().unwrap().send(r);
            })
            .wait()
            .unwrap();
        let r = rrx.recv_timeout(WAIT).expect("a reply");
        let sample = r.result().expect("a reply, not an error");
        assert_eq!(sample.key_expr().as_str(), key);
        assert_eq!(
            sample.payload().to_bytes().as_ref(),
            i64s_cdr(&[a + b]).as_slice()
        );
        let att = Attachment::decode(&sample.attachment().unwrap().to_bytes()).unwrap();
        assert_eq!((att.sequence_number, att.gid), (seq, gid));
        assert!(att.source_timestamp_ns >= request.source_timestamp_ns);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(serving.join().unwrap(), 2);
}

/// The profile of a reliable transient local endpoint keeping `depth` samples.
fn transient_local(depth: u64) -> Qos {
    Qos {
        reliability: Reliability::Reliable,
        durability: Durability::TransientLocal,
        ..Qos::keep_last(depth)
    }
}

/// An rmw_zenoh transient local publisher (an advanced publisher with a cache of its
/// depth, publisher detection and sporadic heartbeats, as rmw_zenoh_cpp declares it)
/// publishes before anyone listens; a Nerve subscriber that comes later gets those
/// samples through the bridge, whose subscription (announced transient local) fetches
/// the publisher's history.
#[test]
fn a_transient_local_rmw_zenoh_history_reaches_a_late_nerve_subscriber() {
    use zenoh_ext::{AdvancedPublisherBuilderExt, CacheConfig, MissDetectionConfig};
    let (bridge, ros, events) = setup(4, 45);
    let zid = ros.zid().to_string();
    let node_token = EntityToken::node(45, &zid, 0, "/", "map_server").unwrap();
    let mp = EntityToken::endpoint(
        &node_token,
        EntityKind::Publisher,
        1,
        "/map",
        "std_msgs/msg/String",
        STRING_HASH,
        transient_local(5),
    )
    .unwrap();
    let _node = ros
        .liveliness()
        .declare_token(node_token.key_expr())
        .wait()
        .unwrap();
    let _mp = ros
        .liveliness()
        .declare_token(mp.key_expr())
        .wait()
        .unwrap();
    let key = mp.data_key().unwrap().key_expr();
    assert_eq!(
        key,
        format!("45/map/std_msgs::msg::dds_::String_/{STRING_HASH}")
    );
    let publisher = ros
        .declare_publisher(key)
        .cache(CacheConfig::default().max_samples(5))
        .publisher_detection()
        .sample_miss_detection(
            MissDetectionConfig::default().sporadic_heartbeat(Duration::from_millis(500)),
        )
        .wait()
        .unwrap();
    let texts = ["first", "second", "third"];
    for (i, text) in texts.iter().enumerate() {
        let a = Attachment {
            sequence_number: i as i64 + 1,
            source_timestamp_ns: now_ns(),
            gid: mp.gid(),
        };
        publisher
            .put(string_cdr(text))
            .attachment(a.encode().to_vec())
            .wait()
            .unwrap();
    }
    wait_until("the bridged event", || {
        events
            .try_recv()
            .ok()
            .filter(|e| matches!(e, Event::Bridged { topic, to_ros: false, .. } if topic == "/map"))
    });

    let ctx = Context::new(nerve_config(4)).unwrap();
    let node = ctx.node("late").create().unwrap();
    let sub = RawSubscriber::create(&node, "/map", nerve::Qos::default()).unwrap();
    let head = std::mem::size_of::<nerve_msgs::ros2::Ros2Cdr>();
    for text in texts {
        let got = sub
            .recv_timeout(WAIT)
            .unwrap()
            .expect("the publisher's history in Nerve");
        assert_eq!(&got.bytes()[head..], string_cdr(text).as_slice());
    }
    let observer = ZenohSide::new(ros.clone(), 45, "/", "observer").unwrap();
    let s = wait_until("the bridge's subscription", || {
        bridge_entity(&observer.graph(), &bridge, EntityKind::Subscription, "/map")
    });
    let qos = s.token.topic.as_ref().unwrap().qos;
    assert_eq!(qos.durability, Durability::TransientLocal);
    assert_eq!(qos.depth, 5);
}

/// A Nerve publisher with history → the bridge's transient local publisher (announced
/// so in its token) → an rmw_zenoh transient local subscription gets the samples, and a
/// second one that joins afterwards gets them from the bridge's cache, with the
/// attachments they were published with.
#[test]
fn a_late_transient_local_rmw_zenoh_subscription_gets_the_bridges_cache() {
    use zenoh_ext::{AdvancedSubscriberBuilderExt, HistoryConfig, RecoveryConfig};
    let (bridge, ros, _events) = setup(5, 46);
    let ctx = Context::new(nerve_config(5)).unwrap();
    let node = ctx.node("imu_driver").create().unwrap();
    let imus = node
        .publisher::<Imu>("/imu_latched")
        .qos(nerve::Qos::latched().history(3).depth(3))
        .create()
        .unwrap();
    let observer = ZenohSide::new(ros.clone(), 46, "/", "observer").unwrap();
    let p = wait_until("the bridge's publisher", || {
        bridge_entity(
            &observer.graph(),
            &bridge,
            EntityKind::Publisher,
            "/imu_latched",
        )
    });
    let qos = p.token.topic.as_ref().unwrap().qos;
    assert_eq!(qos.durability, Durability::TransientLocal);
    let key = p.token.data_key().unwrap().key_expr();

    // an rmw_zenoh transient local subscription, as rmw_zenoh_cpp declares it
    let subscription = |tx: std::sync::mpsc::Sender<(Vec<u8>, Attachment)>| {
        let tx = Mutex::new(tx);
        ros.declare_subscriber(key.clone())
            .callback(move |s: zenoh::sample::Sample| {
                let a = Attachment::decode(&s.attachment().unwrap().to_bytes()).unwrap();
                let _ = tx
                    .lock()
                    .unwrap()
                    .send((s.payload().to_bytes().into_owned(), a));
            })
            .advanced()
            .subscriber_detection()
            .history(
                HistoryConfig::default()
                    .detect_late_publishers()
                    .max_samples(3),
            )
            .recovery(RecoveryConfig::default().heartbeat())
            .wait()
            .unwrap()
    };
    let ms = EntityToken::endpoint(
        &observer.node().clone(),
        EntityKind::Subscription,
        90,
        "/imu_latched",
        "sensor_msgs/msg/Imu",
        &fixture_hash("sensor_msgs/msg/Imu"),
        transient_local(3),
    )
    .unwrap();
    let (tx1, first) = channel();
    let _s1 = subscription(tx1);
    let _ms = ros
        .liveliness()
        .declare_token(ms.key_expr())
        .wait()
        .unwrap();
    assert!(
        imus.wait_for_subscribers(1, WAIT),
        "the bridge subscribes in Nerve"
    );
    for i in 1..=3i64 {
        imus.publish(&Imu {
            stamp: Time { nanos: i * 1000 },
            ..Default::default()
        })
        .unwrap();
    }
    let reg = registry("sensor_msgs/msg/Imu");
    let check = |rx: &Receiver<(Vec<u8>, Attachment)>| {
        for i in 1..=3u32 {
            let (cdr, a) = rx.recv_timeout(WAIT).expect("an Imu in ROS 2");
            assert_eq!((a.sequence_number, a.gid), (i64::from(i), p.gid));
            let v = nerve_ros2_types::decode(&reg, "sensor_msgs/msg/Imu", &cdr).unwrap();
            assert_eq!(
                field(&v, &["header", "stamp", "nanosec"]),
                &Value::UInt32(i * 1000)
            );
        }
    };
    check(&first);
    // a late subscription: the same three, from the bridge's cache
    let (tx2, second) = channel();
    let _s2 = subscription(tx2);
    check(&second);
}

/// The graphs cross both ways on rmw_zenoh: a ROS 2 node and its publisher are in the
/// ROS 2 graph the bridge publishes into Nerve, and a Nerve node is a node of ROS 2's
/// graph (a node token of the bridge's session), gone with it.
#[test]
fn the_graphs_cross_both_ways() {
    let (bridge, ros, _events) = setup(8, 49);
    let talker = ZenohSide::new(ros, 49, "/robot", "talker").unwrap();
    let _p = talker
        .publisher(
            "/chatter",
            "std_msgs/msg/String",
            STRING_HASH,
            Qos::keep_last(10),
        )
        .unwrap();
    let ctx = Context::new(nerve_config(8)).unwrap();
    let node = ctx.node("driver").create().unwrap();
    let graph = node
        .subscriber::<nerve_msgs::srv::Bytes>(nerve_ros2::graph::GRAPH_TOPIC)
        .qos(nerve::Qos::latched())
        .create()
        .unwrap();
    wait_until("the ROS 2 graph in Nerve", || {
        let s = graph.recv_timeout(Duration::from_millis(200)).ok()??;
        let g: nerve_ros2::graph::RosGraph = serde_json::from_slice(s.elems()).ok()?;
        let chatter = g.topics.get("/chatter")?;
        (g.nodes.contains("/robot/talker")
            && chatter.publishers == 1
            && chatter.types.contains("std_msgs/msg/String"))
        .then_some(())
    });
    let driver = |g: &Graph| {
        g.nodes()
            .any(|n| n.token.zid == zid(&bridge) && n.token.node_name == "driver")
    };
    wait_until("the Nerve node in ROS 2's graph", || {
        driver(&talker.graph()).then_some(())
    });
    let n = talker
        .graph()
        .nodes()
        .find(|n| n.token.node_name == "driver")
        .cloned()
        .unwrap();
    assert_eq!(n.token.namespace, "/");
    drop(graph);
    drop(node);
    wait_until("the Nerve node gone from ROS 2's graph", || {
        (!driver(&talker.graph())).then_some(())
    });
}

/// The RIHS01 hash ROS 2 computes for `test_msgs/action/Fibonacci<part>` (recorded in the
/// fixtures from a real ROS 2).
fn fibonacci_hash(part: &str) -> String {
    let path = fixtures().join("test_msgs/action/Fibonacci.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let name = format!("test_msgs/action/Fibonacci{part}");
    json["type_hashes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["type_name"] == name.as_str())
        .and_then(|h| h["hash_string"].as_str())
        .unwrap()
        .to_owned()
}

/// `action_msgs/srv/CancelGoal`'s RIHS01 hash (Jazzy's and Kilted's).
const CANCEL_GOAL_HASH: &str =
    "RIHS01_573d8b0a534451d7bc2ac8c5ffde8ac14b8593b7001175d0cd6516dcbeb8689a";
/// `action_msgs/msg/GoalStatusArray`'s RIHS01 hash (Jazzy's and Kilted's).
const GOAL_STATUS_ARRAY_HASH: &str =
    "RIHS01_6c1684b00f177d37438febe6e709fc4e2b0d4248dca4854946f9ed8b30cda83e";

/// CDR of a goal id followed by `int32` `order` (`Fibonacci_SendGoal_Request`) or, with
/// no order, the goal id alone (`Fibonacci_GetResult_Request`).
fn goal_id_cdr(id: &[u8; 16], order: Option<i32>) -> Vec<u8> {
    let mut v = Vec::new();
    let mut w = nerve_ros2_types::CdrWriter::new(&mut v);
    w.bytes(id);
    if let Some(order) = order {
        w.i32(order);
    }
    v
}

/// An `int32[]` after `head` (read with `read_head`) in CDR.
fn read_int32s<'a, T>(
    cdr: &'a [u8],
    read_head: impl FnOnce(&mut nerve_ros2_types::CdrReader<'a>) -> T,
) -> (T, Vec<i32>) {
    let mut r = nerve_ros2_types::CdrReader::new(cdr).unwrap();
    let head = read_head(&mut r);
    let n = r.len(4).unwrap();
    (head, (0..n).map(|_| r.i32().unwrap()).collect())
}

/// A `GoalStatusArray`: each goal's id and status.
fn read_status(cdr: &[u8]) -> Vec<([u8; 16], i8)> {
    let mut r = nerve_ros2_types::CdrReader::new(cdr).unwrap();
    let n = r.len(25).unwrap();
    (0..n)
        .map(|_| {
            let id: [u8; 16] = r.take(16).unwrap().try_into().unwrap();
            let _stamp = (r.i32().unwrap(), r.u32().unwrap());
            (id, r.u8().unwrap() as i8)
        })
        .collect()
}

/// The first `n` Fibonacci numbers as the action's result holds them.
fn fib(n: usize) -> Vec<i64> {
    let mut s = vec![0i64, 1];
    while s.len() < n {
        s.push(s[s.len() - 1] + s[s.len() - 2]);
    }
    s.truncate(n);
    s
}

/// A Nerve Fibonacci action server → the bridge → a rmw_zenoh action client: the bridge
/// announces `send_goal`, `cancel_goal` and `get_result` as `test_msgs/action/Fibonacci`'s
/// with the RIHS01 hashes ROS 2 computes, accepts the client's goal, and the feedback,
/// the goal status (transient local) and the result come on ROS 2's topics and services.
#[test]
fn a_nerve_action_server_serves_rmw_zenoh_action_clients() {
    use nerve::action::{ActionServer, GoalState};
    use nerve_msgs::action::Fibonacci;
    let (bridge, ros, events) = setup(6, 47);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (ready_tx, ready) = channel();
    let serving = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let ctx = Context::new(nerve_config(6)).unwrap();
            let node = ctx.node("fibonacci").create().unwrap();
            let server = ActionServer::<Fibonacci>::builder(&node, "/fib")
                .create()
                .unwrap();
            ready_tx.send(()).unwrap();
            let mut done = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                server.handle_pending(|_| Ok(())).unwrap();
                for g in server.goals() {
                    let seq = fib(g.goal().order as usize + 1);
                    // feedback a few times (the first may come before ROS 2 listens)
                    for k in 1..=3 {
                        g.feedback_with(k, |h, e| {
                            h.len = k as u64;
                            e.copy_from_slice(&seq[..k]);
                        })
                        .unwrap();
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    g.end_with(GoalState::Succeeded, seq.len(), |h, e| {
                        h.len = seq.len() as u64;
                        e.copy_from_slice(&seq);
                    })
                    .unwrap();
                    done += 1;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            done
        })
    };
    ready.recv().unwrap();
    let client = ZenohSide::new(ros, 47, "/", "fibonacci_client").unwrap();
    let graph_has = |service: &str, ros_type: &str, hash: &str| {
        let ss = wait_until(service, || {
            bridge_entity(&client.graph(), &bridge, EntityKind::ServiceServer, service)
        });
        let t = ss.token.topic.as_ref().unwrap();
        assert_eq!(t.ros_type, ros_type);
        assert_eq!(t.type_hash.to_string(), hash);
    };
    let send_goal_hash = fibonacci_hash("_SendGoal");
    let get_result_hash = fibonacci_hash("_GetResult");
    graph_has(
        "/fib/_action/send_goal",
        "test_msgs/action/Fibonacci_SendGoal",
        &send_goal_hash,
    );
    graph_has(
        "/fib/_action/cancel_goal",
        "action_msgs/srv/CancelGoal",
        CANCEL_GOAL_HASH,
    );
    graph_has(
        "/fib/_action/get_result",
        "test_msgs/action/Fibonacci_GetResult",
        &get_result_hash,
    );
    let feedback = client
        .subscriber(
            "/fib/_action/feedback",
            "test_msgs/action/Fibonacci_FeedbackMessage",
            &fibonacci_hash("_FeedbackMessage"),
            Qos::keep_last(10),
        )
        .unwrap();
    let status = client
        .subscriber(
            "/fib/_action/status",
            "action_msgs/msg/GoalStatusArray",
            GOAL_STATUS_ARRAY_HASH,
            transient_local(10),
        )
        .unwrap();
    let send_goal = client
        .client(
            "/fib/_action/send_goal",
            "test_msgs/action/Fibonacci_SendGoal",
            &send_goal_hash,
            Qos::default(),
        )
        .unwrap();
    let get_result = client
        .client(
            "/fib/_action/get_result",
            "test_msgs/action/Fibonacci_GetResult",
            &get_result_hash,
            Qos::default(),
        )
        .unwrap();
    // the bridge's writers match the subscriptions before the goal goes
    wait_until("the bridge's feedback publisher", || {
        bridge_entity(
            &client.graph(),
            &bridge,
            EntityKind::Publisher,
            "/fib/_action/feedback",
        )
    });
    std::thread::sleep(Duration::from_millis(300));

    let id: [u8; 16] = core::array::from_fn(|i| i as u8 + 1);
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    send_goal
        .call(&goal_id_cdr(&id, Some(9)), WAIT, move |r| {
            let _ = tx.lock().unwrap().send(r);
        })
        .unwrap();
    let accepted = rx.recv_timeout(WAIT).expect("the goal's answer").unwrap();
    assert_eq!(accepted.cdr[4], 1, "accepted");
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    get_result
        .call(&goal_id_cdr(&id, None), WAIT, move |r| {
            let _ = tx.lock().unwrap().send(r);
        })
        .unwrap();
    let result = rx.recv_timeout(WAIT).expect("the result").unwrap();
    let (status_code, seq) = read_int32s(&result.cdr, |r| r.u8().unwrap() as i8);
    assert_eq!(status_code, 4, "succeeded");
    let want: Vec<i32> = fib(10).into_iter().map(|x| x as i32).collect();
    assert_eq!(seq, want);

    let f = feedback.recv_timeout(WAIT).expect("feedback");
    let (goal, seq) = read_int32s(&f.cdr, |r| -> [u8; 16] {
        r.take(16).unwrap().try_into().unwrap()
    });
    assert_eq!(goal, id);
    assert!(!seq.is_empty() && want.starts_with(&seq), "{seq:?}");
    // the status shows the goal, and at last that it succeeded
    wait_until("the goal's final status", || {
        let s = status.try_recv()?;
        read_status(&s.cdr).contains(&(id, 4)).then_some(())
    });
    let seen: Vec<Event> = events.try_iter().collect();
    assert!(
        seen.iter().any(
            |e| matches!(e, Event::Bridged { topic, to_ros: true, ros_type, .. } if topic == "/fib" && ros_type == "test_msgs/action/Fibonacci")
        ),
        "{seen:?}"
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(serving.join().unwrap(), 1);
}

/// A rmw_zenoh Fibonacci action server (played with its services and publishers) → the
/// bridge → a Nerve action client: the bridge calls `send_goal` and `get_result` with the
/// server's hashes, its acceptance and the feedback and result reach the Nerve client.
#[test]
fn a_rmw_zenoh_action_server_serves_nerve_action_clients() {
    use nerve::action::{ActionClient, GoalState};
    use nerve_msgs::action::{Fibonacci, FibonacciGoal};
    let (bridge, ros, events) = setup(7, 48);
    let server = ZenohSide::new(ros, 48, "/", "fibonacci_server").unwrap();
    let (goal_tx, goals) = channel();
    let goal_tx = Mutex::new(goal_tx);
    let _send_goal = server
        .service(
            "/fib/_action/send_goal",
            "test_msgs/action/Fibonacci_SendGoal",
            &fibonacci_hash("_SendGoal"),
            Qos::default(),
            false,
            move |req| {
                let _ = goal_tx.lock().unwrap().send(req);
            },
        )
        .unwrap();
    let _cancel = server
        .service(
            "/fib/_action/cancel_goal",
            "action_msgs/srv/CancelGoal",
            CANCEL_GOAL_HASH,
            Qos::default(),
            false,
            |_| {},
        )
        .unwrap();
    let (result_tx, results) = channel();
    let result_tx = Mutex::new(result_tx);
    let _get_result = server
        .service(
            "/fib/_action/get_result",
            "test_msgs/action/Fibonacci_GetResult",
            &fibonacci_hash("_GetResult"),
            Qos::default(),
            false,
            move |req| {
                let _ = result_tx.lock().unwrap().send(req);
            },
        )
        .unwrap();
    let feedback = server
        .publisher(
            "/fib/_action/feedback",
            "test_msgs/action/Fibonacci_FeedbackMessage",
            &fibonacci_hash("_FeedbackMessage"),
            Qos::keep_last(10),
        )
        .unwrap();

    // the Nerve client, on its own thread (a goal waits for its acceptance)
    let (fb_tx, fb) = channel();
    let calling = std::thread::spawn(move || {
        let ctx = Context::new(nerve_config(7)).unwrap();
        let node = ctx.node("fibonacci_caller").create().unwrap();
        let client = ActionClient::<Fibonacci>::create(&node, "/fib").unwrap();
        assert!(
            client.wait_for_server(WAIT),
            "the bridge serves it in Nerve"
        );
        let goal = client.send_goal(&FibonacciGoal { order: 4 }).unwrap();
        let f = goal.next_feedback(WAIT).unwrap().expect("feedback");
        fb_tx.send(f.elems().to_vec()).unwrap();
        let r = goal.result(WAIT).unwrap();
        (r.state(), r.elems().to_vec())
    });

    let req = goals.recv_timeout(WAIT).expect("the goal in ROS 2");
    let (id, order) = {
        let mut r = nerve_ros2_types::CdrReader::new(&req.cdr).unwrap();
        let id: [u8; 16] = r.take(16).unwrap().try_into().unwrap();
        (id, r.i32().unwrap())
    };
    assert_eq!(order, 4);
    let mut accepted = Vec::new();
    let mut w = nerve_ros2_types::CdrWriter::new(&mut accepted);
    w.u8(1);
    w.i32(1_700_000_000);
    w.u32(0);
    req.reply(&accepted).unwrap();
    // the bridge asks for the result at once: answered once the goal is done
    let req = results.recv_timeout(WAIT).expect("get_result in ROS 2");
    assert_eq!(req.cdr, goal_id_cdr(&id, None));
    wait_until("the bridge's feedback subscription", || {
        feedback.has_subscribers().then_some(())
    });
    let mut msg = Vec::new();
    let mut w = nerve_ros2_types::CdrWriter::new(&mut msg);
    w.bytes(&id);
    w.len(3).unwrap();
    for x in [0, 1, 1] {
        w.i32(x);
    }
    feedback.publish(&msg).unwrap();
    assert_eq!(fb.recv_timeout(WAIT).expect("feedback in Nerve"), [0, 1, 1]);
    let mut result = Vec::new();
    let mut w = nerve_ros2_types::CdrWriter::new(&mut result);
    w.u8(4);
    w.len(5).unwrap();
    for x in [0, 1, 1, 2, 3] {
        w.i32(x);
    }
    req.reply(&result).unwrap();
    let (state, seq) = calling.join().unwrap();
    assert_eq!(state, GoalState::Succeeded);
    assert_eq!(seq, [0, 1, 1, 2, 3]);
    let seen: Vec<Event> = events.try_iter().collect();
    assert!(
        seen.iter()
            .any(|e| matches!(e, Event::Bridged { topic, to_ros: false, .. } if topic == "/fib")),
        "{seen:?}"
    );
    let _ = bridge;
}

/// `rcl_interfaces/srv/GetParameters`' RIHS01 hash (as Jazzy and Kilted install it).
const GET_PARAMETERS_HASH: &str =
    "RIHS01_bf9803d5c74cf989a5de3e0c2e99444599a627c7ff75f97b8c05b01003675cbc";

/// The definitions a `GetParameters` request and response are read with.
fn rcl_registry() -> Registry {
    let mut r = Registry::new();
    for (name, text) in [
        ("builtin_interfaces/msg/Time", "int32 sec\nuint32 nanosec\n"),
        (
            "service_msgs/msg/ServiceEventInfo",
            "uint8 event_type\nbuiltin_interfaces/Time stamp\nchar[16] client_gid\n\
             int64 sequence_number\n",
        ),
        (
            "rcl_interfaces/msg/ParameterValue",
            "uint8 type\nbool bool_value\nint64 integer_value\nfloat64 double_value\n\
             string string_value\nbyte[] byte_array_value\nbool[] bool_array_value\n\
             int64[] integer_array_value\nfloat64[] double_array_value\n\
             string[] string_array_value\n",
        ),
        (
            "rcl_interfaces/srv/GetParameters",
            "string[] names\n---\nParameterValue[] values\n",
        ),
    ] {
        r.add_interface_text(name, text).unwrap();
    }
    r
}

/// A `GetParameters` request (or any `string[]` message) of `names` in CDR.
fn names_cdr(names: &[&str]) -> Vec<u8> {
    let mut v = vec![0, 1, 0, 0];
    v.extend_from_slice(&(names.len() as u32).to_le_bytes());
    for n in names {
        while (v.len() - 4) % 4 != 0 {
            v.push(0);
        }
        v.extend_from_slice(&(n.len() as u32 + 1).to_le_bytes());
        v.extend_from_slice(n.as_bytes());
        v.push(0);
    }
    v
}

/// A `GetParameters` response of one integer value in CDR.
fn int_value_cdr(value: i64) -> Vec<u8> {
    let mut v = vec![0, 1, 0, 0];
    v.extend_from_slice(&1u32.to_le_bytes()); // one value
    v.extend_from_slice(&[2, 0, 0, 0]); // type INTEGER, bool_value, padding to 8
    v.extend_from_slice(&value.to_le_bytes());
    v.extend_from_slice(&0f64.to_le_bytes());
    v.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]); // string_value "" (and padding)
    for _ in 0..5 {
        v.extend_from_slice(&0u32.to_le_bytes()); // the five empty sequences
    }
    v
}

/// A Nerve node with a parameter → the bridge serves ROS 2's parameter services for it
/// (announced with `rcl_interfaces`' RIHS01 hashes) → an rmw_zenoh client's
/// `get_parameters` gets the parameter's value.
#[test]
fn rmw_zenoh_clients_read_a_nerve_nodes_parameters() {
    use nerve::param::{ParamDescriptor, Parameters};
    let (bridge, ros, events) = setup(9, 50);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (ready_tx, ready) = channel();
    let serving = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let ctx = Context::new(nerve_config(9)).unwrap();
            let node = ctx.node("tuner").create().unwrap();
            let params = Parameters::builder(&node).from_env(false).create().unwrap();
            params
                .declare("gain", 1.5, ParamDescriptor::new().description("volts"))
                .unwrap();
            ready_tx.send(()).unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                params.serve_for(Duration::from_millis(50)).unwrap();
            }
        })
    };
    ready.recv().unwrap();
    let caller = ZenohSide::new(ros, 50, "/", "caller").unwrap();
    let ss = wait_until("the bridge's get_parameters server", || {
        bridge_entity(
            &caller.graph(),
            &bridge,
            EntityKind::ServiceServer,
            "/tuner/get_parameters",
        )
    });
    let t = ss.token.topic.as_ref().unwrap();
    assert_eq!(t.ros_type, "rcl_interfaces/srv/GetParameters");
    assert_eq!(t.type_hash.to_string(), GET_PARAMETERS_HASH);
    for service in ["set_parameters", "list_parameters", "describe_parameters"] {
        // Each server's liveliness token arrives on its own: wait for each, not only the first.
        let name = format!("/tuner/{service}");
        wait_until(&name, || {
            bridge_entity(&caller.graph(), &bridge, EntityKind::ServiceServer, &name)
        });
    }

    let client = caller
        .client(
            "/tuner/get_parameters",
            "rcl_interfaces/srv/GetParameters",
            GET_PARAMETERS_HASH,
            Qos::default(),
        )
        .unwrap();
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    client
        .call(&names_cdr(&["gain", "nope"]), WAIT, move |r| {
            let _ = tx.lock().unwrap().send(r);
        })
        .unwrap();
    let reply = rx
        .recv_timeout(WAIT)
        .expect("a reply")
        .expect("not an error");
    let reg = rcl_registry();
    let v = nerve_ros2_types::decode(
        &reg,
        "rcl_interfaces/srv/GetParameters_Response",
        &reply.cdr,
    )
    .unwrap();
    let Value::Array(values) = field(&v, &["values"]) else {
        panic!("values: {v:?}")
    };
    let gain = values.get(0).expect("gain's value");
    assert_eq!(field(&gain, &["type"]), &Value::UInt8(3));
    assert_eq!(field(&gain, &["double_value"]), &Value::Float64(1.5));
    let nope = values.get(1).expect("a value for the undeclared name");
    assert_eq!(field(&nope, &["type"]), &Value::UInt8(0), "not set");
    assert!(events.try_iter().any(|e| matches!(
        e,
        Event::Bridged { topic, to_ros: true, .. } if topic == "/tuner/_params"
    )));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    serving.join().unwrap();
}

/// A ROS 2 node on rmw_zenoh (its `get_parameters` server played by a [`ZenohSide`]) →
/// the bridge offers it to Nerve as `/driver/_params` → a Nerve `ParamClient` reads its
/// parameter through it.
#[test]
fn nerve_reads_a_rmw_zenoh_nodes_parameters() {
    use nerve::param::{ParamClient, ParamValue};
    let (_bridge, ros, _events) = setup(10, 51);
    let driver = ZenohSide::new(ros, 51, "/", "driver").unwrap();
    let (asked_tx, asked) = channel();
    let asked_tx = Mutex::new(asked_tx);
    let _get = driver
        .service(
            "/driver/get_parameters",
            "rcl_interfaces/srv/GetParameters",
            GET_PARAMETERS_HASH,
            Qos::default(),
            false,
            move |req| {
                let _ = asked_tx.lock().unwrap().send(req.cdr.clone());
                let _ = req.reply(&int_value_cdr(7));
            },
        )
        .unwrap();
    // what the server answers is a GetParameters response
    let v = nerve_ros2_types::decode(
        &rcl_registry(),
        "rcl_interfaces/srv/GetParameters_Response",
        &int_value_cdr(7),
    )
    .unwrap();
    let Value::Array(values) = field(&v, &["values"]) else {
        panic!("values: {v:?}")
    };
    assert_eq!(
        field(&values.get(0).unwrap(), &["integer_value"]),
        &Value::Int64(7)
    );

    let ctx = Context::new(nerve_config(10)).unwrap();
    let node = ctx.node("tool").create().unwrap();
    let params = ParamClient::create(&node, "/driver").unwrap().timeout(WAIT);
    assert!(
        params.wait_for_node(WAIT),
        "the bridge serves /driver/_params"
    );
    assert_eq!(
        params.get(&["speed"]).unwrap(),
        vec![Some(ParamValue::Int(7))]
    );
    let request = asked.recv_timeout(WAIT).expect("the request in ROS 2");
    let v = nerve_ros2_types::decode(
        &rcl_registry(),
        "rcl_interfaces/srv/GetParameters_Request",
        &request,
    )
    .unwrap();
    assert_eq!(
        field(&v, &["names"]),
        &Value::Array(nerve_ros2_types::Array::String(vec!["speed".into()]))
    );
}

/// A Nerve managed node's `get_state` and `change_state` (ordinary services of
/// `lifecycle_msgs` types) → the bridge → an rmw_zenoh client gets the state and the
/// transition's outcome.
#[test]
fn rmw_zenoh_clients_drive_a_nerve_lifecycle_node() {
    use nerve_msgs::lifecycle::{
        ChangeState, ChangeStateResponse, GetState, GetStateResponse, Label, State,
    };
    let (bridge, ros, _events) = setup(11, 52);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (ready_tx, ready) = channel();
    let serving = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let ctx = Context::new(nerve_config(11)).unwrap();
            let node = ctx.node("camera").create().unwrap();
            let get = node
                .service::<GetState>("/camera/get_state")
                .create()
                .unwrap();
            let change = node
                .service::<ChangeState>("/camera/change_state")
                .create()
                .unwrap();
            ready_tx.send(()).unwrap();
            let mut transitions = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(Some(req)) = get.take_timeout(Duration::from_millis(20)) {
                    req.reply(&GetStateResponse {
                        current_state: State {
                            id: 2,
                            label: Label::new("inactive").unwrap(),
                        },
                    })
                    .unwrap();
                }
                if let Ok(Some(req)) = change.take_timeout(Duration::from_millis(20)) {
                    transitions.push(req.transition.id);
                    req.reply(&ChangeStateResponse { success: 1 }).unwrap();
                }
            }
            transitions
        })
    };
    ready.recv().unwrap();
    let caller = ZenohSide::new(ros, 52, "/", "manager").unwrap();
    for service in ["/camera/get_state", "/camera/change_state"] {
        wait_until(service, || {
            bridge_entity(&caller.graph(), &bridge, EntityKind::ServiceServer, service)
        });
    }
    let call = |service: &str, ros_type: &str, cdr: &[u8]| {
        let client = caller
            .client(service, ros_type, "TypeHashNotSupported", Qos::default())
            .unwrap();
        let (tx, rx) = channel();
        let tx = Mutex::new(tx);
        client
            .call(cdr, WAIT, move |r| {
                let _ = tx.lock().unwrap().send(r);
            })
            .unwrap();
        rx.recv_timeout(WAIT)
            .expect("a reply")
            .expect("not an error")
            .cdr
    };
    // GetState: an empty request (one byte), a State (id, label)
    let state = call(
        "/camera/get_state",
        "lifecycle_msgs/srv/GetState",
        &[0, 1, 0, 0, 0],
    );
    assert_eq!(state[4], 2, "{state:?}");
    assert_eq!(&state[8..12], &9u32.to_le_bytes());
    assert_eq!(&state[12..21], b"inactive\0");
    // ChangeState: transition 3 (activate) with an empty label; success
    let done = call(
        "/camera/change_state",
        "lifecycle_msgs/srv/ChangeState",
        &[0, 1, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0],
    );
    assert_eq!(done, [0, 1, 0, 0, 1]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(serving.join().unwrap(), [3]);
}
