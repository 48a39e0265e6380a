//! The Foxglove bridge seen from a WebSocket client (a minimal one, written here on
//! `std::net`, speaking `foxglove.sdk.v1`): one clock for message stamps and the
//! server's time, and Nerve's own serde-encoded topics advertised with their fields.

use nerve::action::{GoalState, GoalStatus, StatusList};
use nerve::param::{ParamChange, ParamEvent, ParamValue};
use nerve::prelude::*;
use nerve::{Config, Serde};
use nerve_bag::bridge::{Bridge, BridgeOptions};
use nerve_msgs::Imu;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn config(tag: &str) -> Config {
    let h = nerve::message::layout::hash_str(nerve::message::layout::FNV_OFFSET, tag);
    let domain = 850 + (h % 100) as u32;
    let dir = std::env::temp_dir().join("nerve-tests/");
    Config::default().domain(domain).unwrap().state_dir(dir)
}

/// Longest any step waits (a watchdog: a bridge that never answers fails the test
/// instead of hanging it; nothing is timed).
const WATCHDOG: Duration = Duration::from_secs(120);

/// A frame from the server.
enum Frame {
    Text(Value),
    Binary(Vec<u8>),
}

/// A WebSocket client of the bridge: a thread reads the frames as they come.
struct Client {
    stream: TcpStream,
    frames: std::sync::mpsc::Receiver<Frame>,
    /// The channels advertised so far, by topic.
    advertised: std::collections::HashMap<String, Value>,
    /// Subscriptions made: their ids and channels.
    subscriptions: Vec<(u32, Value)>,
}

impl Client {
    fn connect(port: u16) -> Client {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            stream,
            "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: foxglove.sdk.v1\r\n\r\n"
        )
        .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8];
        while !head.ends_with(b"\r\n\r\n") {
            stream.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).unwrap();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        let (tx, frames) = std::sync::mpsc::channel();
        let mut reader = stream.try_clone().unwrap();
        std::thread::spawn(move || {
            while let Some(f) = read_frame(&mut reader) {
                if tx.send(f).is_err() {
                    break;
                }
            }
        });
        Client {
            stream,
            frames,
            advertised: Default::default(),
            subscriptions: Vec::new(),
        }
    }

    /// The next data frame.
    fn next(&mut self) -> Frame {
        self.frames
            .recv_timeout(WATCHDOG)
            .expect("the server sends on")
    }

    /// The next data frame, if one comes within `wait`.
    fn next_within(&mut self, wait: Duration) -> Option<Frame> {
        self.frames.recv_timeout(wait).ok()
    }

    /// Sends a JSON text frame (masked, as a client must).
    fn send(&mut self, v: &Value) {
        let payload = v.to_string().into_bytes();
        let mut frame = vec![0x81];
        match payload.len() {
            n @ 0..=125 => frame.push(0x80 | n as u8),
            n => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
        }
        let mask = [0x12, 0x34, 0x56, 0x78];
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.stream.write_all(&frame).unwrap();
    }

    /// Waits for the advertisement of `topic`; its channel.
    fn channel(&mut self, topic: &str) -> Value {
        let end = Instant::now() + WATCHDOG;
        loop {
            assert!(Instant::now() < end, "{topic} was advertised");
            if let Some(c) = self.advertised.get(topic) {
                return c.clone();
            }
            if let Frame::Text(v) = self.next() {
                if v["op"] == "advertise" {
                    for c in v["channels"].as_array().unwrap() {
                        let topic = c["topic"].as_str().unwrap().to_string();
                        self.advertised.insert(topic, c.clone());
                    }
                }
            }
        }
    }

    fn subscribe(&mut self, subscription: u32, channel: &Value) {
        self.send(&json!({
            "op": "subscribe",
            "subscriptions": [{ "id": subscription, "channelId": channel["id"] }],
        }));
        self.subscriptions.push((subscription, channel.clone()));
    }

    /// The foxglove SDK (0.30) sends a channel's advertisement before its server can take
    /// subscriptions to it: a client as quick as this one may be told "Unknown channel
    /// ID" (a client that subscribes on a user's click never is). It subscribes again.
    fn resubscribe_if_early(&mut self, status: &Value) {
        let Some(text) = status["message"].as_str() else {
            return;
        };
        let again: Vec<(u32, Value)> = self
            .subscriptions
            .iter()
            .filter(|(_, c)| text == format!("Unknown channel ID: {}", c["id"]))
            .cloned()
            .collect();
        for (id, channel) in again {
            std::thread::sleep(Duration::from_millis(20));
            self.subscriptions.retain(|(s, _)| *s != id);
            self.subscribe(id, &channel);
        }
    }
}

/// The next data frame of a server's stream (fragments joined; pings and pongs
/// skipped); `None` once the connection ends.
fn read_frame(stream: &mut TcpStream) -> Option<Frame> {
    let mut data = Vec::new();
    let mut kind = 0;
    loop {
        let mut h = [0u8; 2];
        stream.read_exact(&mut h).ok()?;
        let (fin, opcode) = (h[0] & 0x80 != 0, h[0] & 0x0f);
        assert_eq!(h[1] & 0x80, 0, "server frames are not masked");
        let len = match h[1] & 0x7f {
            126 => {
                let mut b = [0u8; 2];
                stream.read_exact(&mut b).ok()?;
                u16::from_be_bytes(b) as usize
            }
            127 => {
                let mut b = [0u8; 8];
                stream.read_exact(&mut b).ok()?;
                u64::from_be_bytes(b) as usize
            }
            n => n as usize,
        };
        let mut payload = vec![0u8; len];
        stream.read_exact(&mut payload).ok()?;
        match opcode {
            8 => return None,
            9 | 10 => continue,
            0 => {}
            k => kind = k,
        }
        data.extend_from_slice(&payload);
        if fin {
            return Some(match kind {
                1 => Frame::Text(serde_json::from_slice(&data).unwrap()),
                _ => Frame::Binary(data),
            });
        }
    }
}

/// A binary frame's message data: (subscription, log time, payload).
fn message_data(b: &[u8]) -> Option<(u32, u64, &[u8])> {
    (b.first() == Some(&1)).then(|| {
        let sub = u32::from_le_bytes(b[1..5].try_into().unwrap());
        let t = u64::from_le_bytes(b[5..13].try_into().unwrap());
        (sub, t, &b[13..])
    })
}

/// A binary frame's time: the server's time, ns.
fn server_time(b: &[u8]) -> Option<u64> {
    (b.first() == Some(&2)).then(|| u64::from_le_bytes(b[1..9].try_into().unwrap()))
}

#[test]
fn under_simulation_time_message_stamps_and_server_time_are_one_clock() {
    // a simulation time far from the wall clock: 1000 s after the epoch
    const SIM: i64 = 1_000_000_000_000;
    let ctx = Context::new(config("bridge-sim-clock")).unwrap();
    assert!(
        !ctx.clock().is_sim(),
        "the test's context is on the system clock"
    );
    let bridge = Bridge::start(
        &ctx,
        BridgeOptions {
            port: 0,
            clock: true,
            services: false,
            client_publish: false,
            parameters: false,
            discovery_period: Duration::from_millis(50),
            ..BridgeOptions::default()
        },
    )
    .unwrap();
    // a player on the system clock publishing /clock and a topic (what `nerve bag play
    // --clock` does): the topic's samples carry the wall-clock publish time
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let player = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let ctx = Context::new(config("bridge-sim-clock")).unwrap();
            let node = ctx.node("player").create().unwrap();
            let clock = node
                .publisher::<nerve_msgs::Clock>("/clock")
                .qos(Qos::sensor())
                .create()
                .unwrap();
            let imu = node.publisher::<Imu>("/sim/imu").create().unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = nerve_msgs::Time { nanos: SIM };
                clock.publish(&nerve_msgs::Clock { clock: t }).unwrap();
                imu.publish(&Imu::default()).unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let mut client = Client::connect(bridge.port());
    let Frame::Text(info) = client.next() else {
        panic!("serverInfo first")
    };
    assert_eq!(info["op"], "serverInfo");
    assert!(
        info["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!("time")),
        "{info}"
    );
    let channel = client.channel("/sim/imu");
    client.subscribe(1, &channel);
    // the server's time, and the stamps of the messages that follow it
    let (mut time, mut stamps) = (None, Vec::new());
    let end = Instant::now() + WATCHDOG;
    while stamps.len() < 5 {
        assert!(
            Instant::now() < end,
            "time {time:?}, stamps {stamps:?}, {:?}",
            bridge.stats()
        );
        let f = client.next();
        if let Frame::Text(v) = &f {
            client.resubscribe_if_early(v);
        }
        if let Frame::Binary(b) = f {
            if let Some(t) = server_time(&b) {
                time = Some(t);
            } else if let (Some((1, t, _)), Some(_)) = (message_data(&b), time) {
                stamps.push(t);
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    player.join().unwrap();
    assert_eq!(
        time,
        Some(SIM as u64),
        "the server's time is the simulation time"
    );
    assert!(
        stamps.iter().all(|&t| t == SIM as u64),
        "message stamps {stamps:?} are the server's time {SIM}, not the publisher's wall clock"
    );
    bridge.stop();
}

#[test]
fn parameter_events_and_action_status_are_advertised_with_their_fields() {
    let ctx = Context::new(config("bridge-internals")).unwrap();
    let bridge = Bridge::start(
        &ctx,
        BridgeOptions {
            port: 0,
            services: false,
            client_publish: false,
            parameters: false,
            discovery_period: Duration::from_millis(50),
            ..BridgeOptions::default()
        },
    )
    .unwrap();
    let node = ctx.node("internals").create().unwrap();
    let events = node
        .publisher::<Serde<ParamEvent>>(nerve::param::EVENTS_TOPIC)
        .qos(nerve::param::events_qos())
        .create()
        .unwrap();
    let status = node
        .publisher::<Serde<StatusList>>(&nerve::action::names::status("/arm/move"))
        .qos(nerve::action::status_qos())
        .create()
        .unwrap();
    let event = ParamEvent {
        node: "/robot/driver".into(),
        stamp_ns: 1_700_000_000_250_000_000,
        changes: vec![
            ParamChange {
                name: "max_speed".into(),
                old: Some(ParamValue::Float(1.5)),
                new: ParamValue::Float(0.9364630260594403),
            },
            ParamChange {
                name: "ticks".into(),
                old: None,
                new: ParamValue::Int(i64::MAX),
            },
        ],
    };
    let list = StatusList {
        action_type: "demo/Move".into(),
        goals: vec![GoalStatus {
            goal: (0x00ab_cdef_0123_4567, 3),
            state: GoalState::Executing,
        }],
    };

    let mut client = Client::connect(bridge.port());
    let ev = client.channel("/parameter_events");
    let st = client.channel("/arm/move/_action/status");
    for (c, name) in [(&ev, "nerve/ParamEvent"), (&st, "nerve/action/StatusList")] {
        assert_eq!(
            (&c["encoding"], &c["schemaEncoding"], &c["schemaName"]),
            (&json!("json"), &json!("jsonschema"), &json!(name)),
            "{c}"
        );
    }
    // the schemas name the real fields (not a length and opaque bytes)
    let ev_schema: Value = serde_json::from_str(ev["schema"].as_str().unwrap()).unwrap();
    let change = &ev_schema["properties"]["changes"]["items"]["properties"];
    assert!(ev_schema["properties"]["node"].is_object(), "{ev_schema}");
    for field in ["name", "value", "old"] {
        assert!(change[field].is_object(), "{field} in {ev_schema}");
    }
    let st_schema: Value = serde_json::from_str(st["schema"].as_str().unwrap()).unwrap();
    let goal = &st_schema["properties"]["goals"]["items"]["properties"];
    for field in ["goal_id", "state"] {
        assert!(goal[field].is_object(), "{field} in {st_schema}");
    }

    // a sample of each decodes to its values
    client.subscribe(1, &ev);
    client.subscribe(2, &st);
    let (mut got_event, mut got_status) = (None, None);
    let end = Instant::now() + WATCHDOG;
    while got_event.is_none() || got_status.is_none() {
        assert!(
            Instant::now() < end,
            "a sample of each topic: {got_event:?} {got_status:?}, {:?}",
            bridge.stats()
        );
        events.publish_value(&event).unwrap();
        status.publish_value(&list).unwrap();
        while let Some(frame) = client.next_within(Duration::from_millis(200)) {
            if let Frame::Text(v) = &frame {
                client.resubscribe_if_early(v);
            }
            if let Frame::Binary(b) = frame {
                match message_data(&b) {
                    Some((1, _, p)) => {
                        got_event = Some(serde_json::from_slice::<Value>(p).unwrap())
                    }
                    Some((2, _, p)) => {
                        got_status = Some(serde_json::from_slice::<Value>(p).unwrap())
                    }
                    _ => {}
                }
            }
            if got_event.is_some() && got_status.is_some() {
                break;
            }
        }
    }
    let e = got_event.unwrap();
    assert_eq!(e["node"], "/robot/driver");
    assert_eq!(
        e["stamp"],
        json!({"sec": 1_700_000_000, "nsec": 250_000_000})
    );
    assert_eq!(e["changes"][0]["name"], "max_speed");
    assert_eq!(
        e["changes"][0]["value"],
        json!({"type": "float", "value": 0.9364630260594403})
    );
    assert_eq!(
        e["changes"][0]["old"],
        json!({"type": "float", "value": 1.5})
    );
    assert_eq!(
        e["changes"][1]["value"],
        json!({"type": "int", "value": i64::MAX})
    );
    assert_eq!(e["changes"][1]["old"], Value::Null);
    let s = got_status.unwrap();
    assert_eq!(s["action_type"], "demo/Move");
    assert_eq!(
        s["goals"][0],
        json!({"goal_id": "00abcdef01234567-3", "state": "Executing", "terminal": false})
    );
    bridge.stop();
}
