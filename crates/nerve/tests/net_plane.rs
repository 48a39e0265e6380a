//! The network plane with a second Zenoh session beside it (another host, as far as the
//! plane can tell): schemas are offered while published and checked when received, and
//! what the plane keeps (counters, remote tokens, schemas) is bounded and pruned. (A test
//! binary of its own: the network plane is one per process, so every test here shares one
//! setup.)
#![cfg(feature = "net")]

use nerve::message::schema::Schema;
use nerve::{Config, Context, Qos};
use std::time::Duration;
use zenoh::Wait;

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "net_schema_test/Joint")]
struct Joint {
    position: f64,
    velocity: f64,
    id: u32,
    flags: [u8; 4],
}

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "net_schema_test/Lie")]
struct Lie {
    x: u64,
}

const WINDOW: Duration = Duration::from_secs(2);

/// The port the other session listens on (free when first asked).
fn port() -> u16 {
    static PORT: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    *PORT.get_or_init(|| {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    })
}

/// The other session and the plane's configuration (shared by every test here).
fn setup() -> &'static (zenoh::Session, Config) {
    static SETUP: std::sync::OnceLock<(zenoh::Session, Config)> = std::sync::OnceLock::new();
    SETUP.get_or_init(|| {
        // a second Zenoh session (another host's tool, as far as the plane can tell) listens;
        // the plane connects to it, with no scouting
        let port = port();
        let mut zc = zenoh::Config::default();
        let listen = format!(r#"["tcp/127.0.0.1:{port}"]"#);
        zc.insert_json5("listen/endpoints", &listen).unwrap();
        zc.insert_json5("scouting/multicast/enabled", "false")
            .unwrap();
        let other = zenoh::open(zc).wait().unwrap();

        let dir = std::env::temp_dir().join(format!("nerve-net-schema-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("zenoh.json5");
        std::fs::write(
            &file,
            format!(
                "{{ mode: \"peer\", connect: {{ endpoints: [\"tcp/127.0.0.1:{port}\"] }}, \
                 scouting: {{ multicast: {{ enabled: false }} }} }}"
            ),
        )
        .unwrap();
        let mut cfg = Config::default()
            .domain(741)
            .unwrap()
            .state_dir(dir.join("state"))
            .network(true);
        cfg.network.zenoh_config = Some(file);
        (other, cfg)
    })
}

#[test]
fn schemas_are_offered_while_published_and_lies_are_refused() {
    let (other, cfg) = setup();
    let ctx = Context::new(cfg.clone()).unwrap();
    let node = ctx.node("offers").create().unwrap();

    let hash = Schema::of::<Joint>().layout_hash;
    assert_eq!(
        nerve::net::remote_schema(cfg, hash, WINDOW).unwrap(),
        None,
        "nobody publishes it yet"
    );
    let publisher = node
        .publisher::<Joint>("/joints")
        .qos(Qos::sensor())
        .create()
        .unwrap();
    let got = nerve::net::remote_schema(cfg, hash, WINDOW).unwrap();
    assert_eq!(got, Some(Schema::of::<Joint>()));
    drop(publisher);
    assert_eq!(
        nerve::net::remote_schema(cfg, hash, WINDOW).unwrap(),
        None,
        "withdrawn with its last publisher"
    );

    // answers that lie are refused by name: garbage, and another type's schema
    let lie = Schema::of::<Lie>().layout_hash;
    let joint_text = Schema::of::<Joint>().encode();
    let _q = other
        .declare_queryable(format!("nerve/741/schema/{lie:016x}/liar/1"))
        .callback(move |q| {
            let key = q.key_expr().clone();
            let _ = q.reply(key.clone(), "nerve-schema/1|type=x").wait();
            let _ = q.reply(key, joint_text.as_str()).wait();
        })
        .wait()
        .unwrap();
    // (the plane connects to the other session in the background: ask until it answers)
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let e = loop {
        match nerve::net::remote_schema(cfg, lie, WINDOW) {
            Err(e) => break e,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100))
            }
            other => panic!("a lie was not refused: {other:?}"),
        }
    };
    assert!(e.to_string().contains("refused"), "{e}");
}

#[test]
fn counters_are_kept_only_for_topics_subscribed_now() {
    let (_, cfg) = setup();
    let ctx = Context::new(cfg.clone()).unwrap();
    let node = ctx.node("counts").create().unwrap();
    let topics = |want: usize| {
        // the process answers its own counter query; count this test's topics
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let n: usize = nerve::net::net_counters(cfg, WINDOW)
                .unwrap()
                .iter()
                .filter(|c| c.pid == std::process::id())
                .flat_map(|c| &c.topics)
                .filter(|t| t.topic.starts_with("/counted/"))
                .count();
            if n == want || std::time::Instant::now() >= deadline {
                return n;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let subs: Vec<_> = (0..40)
        .map(|i| {
            node.subscriber::<Joint>(&format!("/counted/t{i}"))
                .create()
                .unwrap()
        })
        .collect();
    assert_eq!(topics(40), 40);
    drop(subs);
    // the map is pruned when the next topic is counted
    let _one = node.subscriber::<Joint>("/counted/last").create().unwrap();
    assert_eq!(topics(1), 1, "counters of gone subscribers are dropped");
}

#[test]
fn remote_tokens_are_forgotten_when_their_process_goes() {
    // (the cap on how many a watch keeps is tested where the watch is, in `net`)
    let (_, cfg) = setup();
    let _ctx = Context::new(cfg.clone()).unwrap();
    // a process of another host with many endpoints: a client of the other session
    let mut zc = zenoh::Config::default();
    zc.insert_json5("mode", r#""client""#).unwrap();
    let endpoint = format!(r#"["tcp/127.0.0.1:{}"]"#, port());
    zc.insert_json5("connect/endpoints", &endpoint).unwrap();
    zc.insert_json5("scouting/multicast/enabled", "false")
        .unwrap();
    let far = zenoh::open(zc).wait().unwrap();
    let key = |i: usize| {
        format!("nerve/741/live/sub/00000000000000aa/far/1-{i}/0000000000000001=t:T/flood/t{i}")
    };
    let count = || {
        nerve::net::remote_entities(cfg, WINDOW)
            .unwrap()
            .iter()
            .filter(|e| e.name.starts_with("/flood/"))
            .count()
    };
    let _tokens: Vec<_> = (0..200)
        .map(|i| far.liveliness().declare_token(key(i)).wait().unwrap())
        .collect();
    assert_eq!(count(), 200);
    // the process goes: every one of its endpoints is forgotten
    far.close().wait().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let n = count();
        if n == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{n} tokens of a gone process stay"
        );
    }
}

#[test]
fn discovery_answers_with_more_tokens_than_a_reply_channel_holds() {
    // Zenoh hands the tokens a session already knows to the query's handler inside `get`,
    // before it returns: with more than its default channel's 256 replies (1,000 topics on
    // one host), `remote_entities` blocked for ever (issue 46)
    let (other, cfg) = setup();
    let ctx = Context::new(cfg.clone()).unwrap();
    let node = ctx.node("many_tokens").create().unwrap();
    // endpoints of this host: never listed as remote
    let _subs: Vec<_> = (0..20)
        .map(|i| {
            node.subscriber::<Joint>(&format!("/many/here{i}"))
                .create()
                .unwrap()
        })
        .collect();
    // 300 endpoints of another host
    let key = |i: usize| {
        format!("nerve/741/live/sub/00000000000000bb/far/1-{i}/0000000000000001=t:T/many/far{i}")
    };
    let _tokens: Vec<_> = (0..300)
        .map(|i| other.liveliness().declare_token(key(i)).wait().unwrap())
        .collect();
    let cfg = cfg.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(nerve::net::remote_entities(&cfg, WINDOW));
    });
    // a bound on a hang, not a speed target: the call takes about two windows
    let Ok(found) = rx.recv_timeout(Duration::from_secs(60)) else {
        // the blocked call holds the session: dropping what uses it would block too
        std::mem::forget((_subs, node, ctx, _tokens));
        panic!("remote_entities never returned");
    };
    let found = found.unwrap();
    let names: Vec<&str> = found
        .iter()
        .filter(|e| e.name.starts_with("/many/"))
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(names.len(), 300, "{names:?}");
    assert!(
        names.iter().all(|n| n.starts_with("/many/far")),
        "{names:?}"
    );
}
