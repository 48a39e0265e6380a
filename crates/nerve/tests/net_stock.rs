//! Zenoh applications outside Nerve on the network plane's key space (README, "The network
//! plane's key space"): a plain Zenoh subscriber on `nerve/<d>/o/<topic>` gets a topic's
//! frames while it listens and costs nothing while nobody does; a plain Zenoh publisher on
//! `nerve/<d>/t/<topic>` reaches Nerve's subscribers, and what it sends wrong is counted
//! and dropped. (A test binary of its own: the network plane is one per process.)
#![cfg(feature = "net")]

use nerve::{Config, Context, Qos, TypeInfo};
use std::time::{Duration, Instant};
use zenoh::Wait;

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "net_stock_test/Probe")]
struct Probe {
    x: f64,
    y: f64,
    n: u64,
}

const DOMAIN: u32 = 742;
const WINDOW: Duration = Duration::from_millis(500);

/// A plain Zenoh session (loopback, no scouting) and the plane's configuration, which
/// connects to it.
fn setup() -> &'static (zenoh::Session, Config) {
    static SETUP: std::sync::OnceLock<(zenoh::Session, Config)> = std::sync::OnceLock::new();
    SETUP.get_or_init(|| {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut zc = zenoh::Config::default();
        let listen = format!(r#"["tcp/127.0.0.1:{port}"]"#);
        zc.insert_json5("listen/endpoints", &listen).unwrap();
        zc.insert_json5("scouting/multicast/enabled", "false")
            .unwrap();
        let stock = zenoh::open(zc).wait().unwrap();

        let dir = std::env::temp_dir().join(format!("nerve-net-stock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("zenoh.json5");
        std::fs::write(
            &file,
            format!(
                "{{ mode: \"peer\", connect: {{ endpoints: [\"tcp/127.0.0.1:{port}\"] }}, \
                 scouting: {{ multicast: {{ enabled: false }}, gossip: {{ enabled: false }} }} }}"
            ),
        )
        .unwrap();
        let mut cfg = Config::default()
            .domain(DOMAIN)
            .unwrap()
            .state_dir(dir.join("state"))
            .network(true);
        cfg.network.zenoh_config = Some(file);
        (stock, cfg)
    })
}

/// This process's network counters of `topic`: (frames sent, arrived, refused by reason).
fn counters(cfg: &Config, topic: &str) -> (u64, u64, Vec<(String, u64)>) {
    let mine = nerve::net::net_counters(cfg, WINDOW)
        .unwrap()
        .into_iter()
        .filter(|c| c.pid == std::process::id())
        .flat_map(|c| c.topics)
        .find(|t| t.topic == topic)
        .unwrap_or_default();
    (mine.sent, mine.arrived, mine.refused.into_iter().collect())
}

/// A sample frame as the README documents it: prefix, sample header, payload.
fn frame(seq: u64, payload_len: usize, payload: &[u8], type_hash: u64) -> Vec<u8> {
    let mut f = b"NRV\x02\x01\0\0\0".to_vec();
    f.extend_from_slice(&0u64.to_le_bytes()); // host id: 0 outside Nerve
    f.extend_from_slice(&[0; 8]); // checksum (sealed below) and padding
    for v in [seq, 0, 0, 99, payload_len as u64, type_hash, 0] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.extend_from_slice(payload);
    nerve::net::seal(&mut f);
    f
}

fn probe_bytes(p: &Probe) -> Vec<u8> {
    [p.x.to_le_bytes(), p.y.to_le_bytes(), p.n.to_le_bytes()].concat()
}

#[test]
fn an_outside_subscriber_gets_frames_while_it_listens_and_nothing_is_sent_otherwise() {
    let (stock, cfg) = setup();
    let topic = "/stock/out";
    let ctx = Context::new(cfg.clone()).unwrap();
    let node = ctx.node("stock_out").create().unwrap();
    let publisher = node
        .publisher::<Probe>(topic)
        .qos(Qos::sensor())
        .create()
        .unwrap();
    // a Nerve subscriber of this host: served through memory, it costs no frame
    let local = node.subscriber::<Probe>(topic).create().unwrap();
    let msg = |n: u64| Probe {
        x: 0.5,
        y: -0.25,
        n,
    };
    for n in 0..50 {
        publisher.publish(&msg(n)).unwrap();
    }
    assert!(local.recv_timeout(WINDOW).unwrap().is_some());
    std::thread::sleep(Duration::from_secs(1));
    for n in 50..100 {
        publisher.publish(&msg(n)).unwrap();
    }
    assert_eq!(counters(cfg, topic).0, 0, "no frame while nobody listens");

    // a plain Zenoh subscriber: frames come while it listens
    let sub = stock
        .declare_subscriber(format!("nerve/{DOMAIN}/o/stock/out"))
        .wait()
        .unwrap();
    let ty = TypeInfo::of::<Probe>();
    let deadline = Instant::now() + Duration::from_secs(20);
    let got = loop {
        publisher.publish(&msg(7)).unwrap();
        if let Ok(Some(s)) = sub.recv_timeout(Duration::from_millis(50)) {
            break s;
        }
        assert!(Instant::now() < deadline, "no frame reached the subscriber");
    };
    assert_eq!(got.key_expr().as_str(), "nerve/742/o/stock/out");
    let bytes = got.payload().to_bytes();
    let f = nerve::net::decode_sample(&bytes, &ty, 1 << 20).expect("a valid frame");
    assert_eq!(f.header.type_hash, ty.layout_hash);
    assert_eq!(f.header.payload_len, 24);
    assert_eq!(
        &bytes[80..],
        probe_bytes(&msg(7)).as_slice(),
        "the message's bytes"
    );
    assert!(counters(cfg, topic).0 > 0);

    // it goes: nothing is sent any more
    drop(sub);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let before = counters(cfg, topic).0;
        for n in 0..20 {
            publisher.publish(&msg(n)).unwrap();
        }
        if counters(cfg, topic).0 == before {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "frames are still sent to a subscriber that went"
        );
    }
}

#[test]
fn an_outside_publisher_reaches_nerve_subscribers_and_its_mistakes_are_counted() {
    let (stock, cfg) = setup();
    let topic = "/stock/in";
    let ctx = Context::new(cfg.clone()).unwrap();
    let node = ctx.node("stock_in").create().unwrap();
    let sub = node
        .subscriber::<Probe>(topic)
        .qos(Qos::sensor().depth(16))
        .create()
        .unwrap();
    let publisher = stock
        .declare_publisher(format!("nerve/{DOMAIN}/t/stock/in"))
        .wait()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !publisher.matching_status().wait().unwrap().matching() {
        assert!(Instant::now() < deadline, "the subscriber was never routed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let hash = TypeInfo::of::<Probe>().layout_hash;
    let good = Probe {
        x: 1.5,
        y: 2.5,
        n: 3,
    };
    // a payload of the wrong size (its length said right) and a frame of another type,
    // then a valid one
    publisher.put(frame(1, 16, &[7; 16], hash)).wait().unwrap();
    publisher
        .put(frame(2, 24, &probe_bytes(&good), hash ^ 1))
        .wait()
        .unwrap();
    publisher
        .put(frame(3, 24, &probe_bytes(&good), hash))
        .wait()
        .unwrap();
    let s = sub
        .recv_timeout(Duration::from_secs(20))
        .unwrap()
        .expect("the valid frame arrives");
    assert_eq!(*s, good);
    assert_eq!(s.header().seq, 3);
    assert!(
        sub.try_recv().unwrap().is_none(),
        "nothing refused reaches the subscriber"
    );
    let (_, arrived, refused) = counters(cfg, topic);
    assert_eq!(arrived, 1);
    assert_eq!(
        refused,
        vec![("wrong-type".to_string(), 2)],
        "counted by reason"
    );
    assert_eq!(sub.stats().network_refused, 2);
}
