//! ROS 2 bags in, ROS 2 bags out: bags written by rosbag2 itself (`tests/fixtures/rosbag2`,
//! see its NOTICE.md) are described and replayed whole, their ROS 2 types carried as CDR
//! (`nerve_msgs::ros2::Ros2Cdr`); a recording of such a topic holds the ROS 2 type itself
//! and the CDR as published, and replays exactly.

use nerve::message::schema::Schema;
use nerve::prelude::*;
use nerve::{Config, RawPublisher, RawSubscriber};
use nerve_bag::encoding::ros2cdr;
use nerve_bag::play::{PlayOptions, PlayReport, Player};
use nerve_bag::read;
use nerve_bag::record::{RecordOptions, Recorder};
use nerve_ros2_types::Registry;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn config(tag: &str) -> Config {
    let h = nerve::message::layout::hash_str(nerve::message::layout::FNV_OFFSET, tag);
    let domain = 400 + (h % 150) as u32;
    let dir = std::env::temp_dir().join("nerve-tests/");
    Config::default().domain(domain).unwrap().state_dir(dir)
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/rosbag2")
        .join(name)
}

/// The bags: (directory, messages, topics).
const BAGS: [(&str, u64, usize); 4] = [
    ("talker", 20, 3),
    ("wbag", 6074, 8),
    ("cdr_test", 7, 2),
    ("topics_and_services", 13, 5),
];

/// A recorded message: log time, publish time, CDR.
type Recorded = (u64, u64, Vec<u8>);

/// Every message of `topic` in the file, and the channel's schema (name, encoding, text).
fn recorded(file: &Path, topic: &str) -> (Vec<Recorded>, (String, String, String)) {
    let bytes = std::fs::read(file).unwrap();
    let mut out = Vec::new();
    let mut schema = None;
    for m in mcap::MessageStream::new(&bytes).unwrap() {
        let m = m.unwrap();
        if m.channel.topic == topic {
            let s = m.channel.schema.as_ref().unwrap();
            schema = Some((
                s.name.clone(),
                s.encoding.clone(),
                String::from_utf8(s.data.to_vec()).unwrap(),
            ));
            assert_eq!(m.channel.message_encoding, "cdr");
            out.push((m.log_time, m.publish_time, m.data.to_vec()));
        }
    }
    (out, schema.expect("the topic has messages"))
}

fn play(tag: &str, bag: &Path, opts: PlayOptions) -> Playing {
    let (tag, bag) = (tag.to_string(), bag.to_path_buf());
    std::thread::spawn(move || {
        let ctx = Context::new(config(&tag)).unwrap();
        Player::new()
            .play(&ctx, &bag, &opts, |_| {})
            .map_err(|e| e.to_string())
    })
}

type Playing = std::thread::JoinHandle<Result<PlayReport, String>>;

/// Takes `n` samples from `sub` while `player` replays (20 s at most); returns them
/// and what the replay did.
fn take(sub: &mut RawSubscriber, n: usize, player: Playing) -> (Vec<Vec<u8>>, PlayReport) {
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(20);
    while got.len() < n && Instant::now() < end {
        // once the replay is over, what it sent is here already
        let wait = if player.is_finished() { 0 } else { 50 };
        match sub.recv_timeout(Duration::from_millis(wait)).unwrap() {
            Some(s) => got.push(s.bytes().to_vec()),
            None if player.is_finished() => break,
            None => {}
        }
    }
    let report = player.join().unwrap();
    assert_eq!(
        got.len(),
        n,
        "samples arrived ({:?}); the replay: {report:?}",
        sub.stats()
    );
    (got, report.unwrap())
}

#[test]
fn every_rosbag2_bag_is_described_and_replayed_whole() {
    let ctx = Context::new(config("rosbag2-every")).unwrap();
    for (name, messages, topics) in BAGS {
        let dir = fixture(name);
        let info = read::info(&dir).unwrap();
        assert!(info.complete, "{name}: {:?}", info.damage);
        assert_eq!(info.messages, messages, "{name}");
        assert_eq!(info.topics.len(), topics, "{name}: {:?}", info.topics);
        assert!(info.topics.iter().all(|t| t.schema_name.contains('/')));
        assert_eq!(
            info.topics.iter().map(|t| t.count).sum::<u64>(),
            messages,
            "{name}"
        );
        let opts = PlayOptions {
            rate: 50.0,
            ..PlayOptions::default()
        };
        let report = Player::new().play(&ctx, &dir, &opts, |_| {}).unwrap();
        assert!(report.skipped.is_empty(), "{name}: {:?}", report.skipped);
        assert!(
            report.undecodable.is_empty(),
            "{name}: {:?}",
            report.undecodable
        );
        assert_eq!(
            report.published.len(),
            topics,
            "{name}: {:?}",
            report.published
        );
        assert_eq!(
            report.published.values().sum::<u64>(),
            messages,
            "{name}: {:?}",
            report.published
        );
    }
    // split into five files: each named in metadata.yaml, one bag
    let wbag = read::info(&fixture("wbag")).unwrap();
    assert_eq!(wbag.files.len(), 5);
    assert_eq!(wbag.compression, ["zstd"]);
    // a single file of a bag is a bag too
    let one = read::info(&fixture("wbag/wbag_0.mcap")).unwrap();
    assert!(one.messages > 0 && one.messages < wbag.messages);
    // relative ROS 2 names are published in the root namespace; service events and
    // /rosout as their ROS 2 types
    let report = Player::new()
        .play(
            &ctx,
            &fixture("topics_and_services"),
            &PlayOptions {
                rate: 50.0,
                ..PlayOptions::default()
            },
            |_| {},
        )
        .unwrap();
    assert_eq!(report.published["/add_two_ints/_service_event"], 6);
    let wbag = Player::new()
        .play(&ctx, &fixture("wbag"), &PlayOptions::default(), |_| {})
        .unwrap();
    assert_eq!(wbag.published["/AAA"], 804);
}

#[test]
fn played_strings_arrive_as_their_recorded_cdr() {
    let tag = "rosbag2-talker";
    let ctx = Context::new(config(tag)).unwrap();
    let node = ctx.node("listener").create().unwrap();
    let (msgs, (name, encoding, text)) = recorded(&fixture("talker/talker.mcap"), "/topic");
    assert_eq!(
        (name.as_str(), encoding.as_str()),
        ("std_msgs/msg/String", "ros2msg")
    );
    assert_eq!(msgs.len(), 10);
    let schema = ros2cdr::schema_of(&name, &text).unwrap();
    // the type's identity is ROS 2's: a topic the ROS 2 bridge or `topic pub` made of
    // std_msgs/msg/String is the same topic
    assert_eq!(
        nerve_msgs::ros2::ros2_type(&schema).unwrap().1,
        "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
    );
    let mut sub =
        RawSubscriber::with_schema(&node, "/topic", &schema, Qos::sensor().depth(64)).unwrap();
    let opts = PlayOptions {
        rate: 10.0,
        topics: Some(vec!["/topic".into()]),
        ..PlayOptions::default()
    };
    let player = play(tag, &fixture("talker"), opts);
    let (got, report) = take(&mut sub, msgs.len(), player);
    assert_eq!(report.published["/topic"], 10);
    let registry = Registry::from_ros2msg(&name, &text).unwrap();
    for (i, (payload, (log_time, publish_time, cdr))) in got.iter().zip(&msgs).enumerate() {
        let stamp = if *publish_time > 0 {
            *publish_time
        } else {
            *log_time
        };
        assert_eq!(payload[..8], (stamp as i64).to_le_bytes(), "message {i}");
        assert_eq!(&payload[8..], &cdr[..], "message {i}: the CDR as recorded");
        let v = nerve_ros2_types::decode(&registry, &name, &payload[8..]).unwrap();
        assert_eq!(
            nerve_ros2_types::to_json(&v),
            serde_json::json!({ "data": format!("Hello, world! {i}") })
        );
    }
}

#[test]
fn a_ros2_topic_is_recorded_as_its_ros2_type_and_replays_exactly() {
    let tag = "rosbag2-record";
    let ctx = Context::new(config(tag)).unwrap();
    let node = ctx.node("talker").create().unwrap();
    let mut registry = Registry::new();
    registry
        .add_interface_text("std_msgs/msg/String", "# a comment\nstring data\n")
        .unwrap();
    let text = registry.ros2msg_text("std_msgs/msg/String").unwrap();
    let schema = ros2cdr::schema_of("std_msgs/msg/String", &text).unwrap();
    let publisher = RawPublisher::create(&node, "/chatter", &schema, Qos::sensor()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chatter.mcap");
    let rec = Recorder::start(&ctx, RecordOptions::new(&path)).unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while rec.stats().is_empty() {
        assert!(Instant::now() < end, "the recorder found /chatter");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(publisher.wait_for_subscribers(1, Duration::from_secs(5)));
    let mut sent = Vec::new();
    for i in 0..5u8 {
        let mut v = nerve_ros2_types::Value::default_for(&registry, "std_msgs/msg/String").unwrap();
        v.as_struct_mut()
            .unwrap()
            .set("data", nerve_ros2_types::Value::String(format!("x{i}")));
        let mut cdr = Vec::new();
        nerve_ros2_types::encode(&registry, "std_msgs/msg/String", &v, &mut cdr).unwrap();
        let stamp = 1_700_000_000_000_000_000i64 + i64::from(i);
        let mut payload = stamp.to_le_bytes().to_vec();
        payload.extend_from_slice(&cdr);
        publisher.publish_bytes(&payload).unwrap();
        sent.push((stamp as u64, cdr, payload));
    }
    // a sample that is no std_msgs/String is counted, not written
    publisher
        .publish_bytes(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 200])
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let report = rec.stop().unwrap();
    let t = &report.topics[0];
    assert_eq!(
        (t.schema_name.as_str(), t.written, t.failed),
        ("std_msgs/msg/String", 5, 1)
    );

    // read back with the mcap crate: the ROS 2 type, its definition, the CDR unchanged
    let bytes = std::fs::read(&path).unwrap();
    let mut n = 0;
    for m in mcap::MessageStream::new(&bytes).unwrap() {
        let m = m.unwrap();
        let s = m.channel.schema.as_ref().unwrap();
        assert_eq!(s.name, "std_msgs/msg/String");
        assert_eq!(s.encoding, "ros2msg");
        assert_eq!(std::str::from_utf8(&s.data).unwrap(), text);
        assert_eq!(m.channel.message_encoding, "cdr");
        let (stamp, cdr, _) = &sent[n];
        assert_eq!(&m.data[..], &cdr[..], "message {n}");
        assert_eq!(
            m.publish_time, *stamp,
            "the source's stamp is the publish time"
        );
        let kept = Schema::decode(&m.channel.metadata[nerve_bag::meta::SCHEMA]).unwrap();
        assert_eq!(kept, schema);
        n += 1;
    }
    assert_eq!(n, 5);

    // replayed under another name: the same type, every byte as published (the five
    // messages were sent within microseconds: the replay is over at once, and what it
    // sent still arrives)
    let mut sub =
        RawSubscriber::with_schema(&node, "/chatter_again", &schema, Qos::sensor().depth(64))
            .unwrap();
    let opts = PlayOptions {
        remap: vec![("/chatter".into(), "/chatter_again".into())],
        ..PlayOptions::default()
    };
    let player = play(tag, &path, opts);
    let (got, _) = take(&mut sub, 5, player);
    for (g, (_, _, payload)) in got.iter().zip(&sent) {
        assert_eq!(g, payload);
    }
}

/// Writes a one-topic bag of ROS 2 type `ty` with schema `text` and the given messages.
fn write_bag(path: &Path, topic: &str, ty: &str, text: &str, messages: &[&[u8]]) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = mcap::WriteOptions::new()
        .profile("ros2")
        .create(std::io::BufWriter::new(f))
        .unwrap();
    let schema = w.add_schema(ty, "ros2msg", text.as_bytes()).unwrap();
    let channel = w
        .add_channel(schema, topic, "cdr", &Default::default())
        .unwrap();
    for (i, m) in messages.iter().enumerate() {
        let header = mcap::records::MessageHeader {
            channel_id: channel,
            sequence: i as u32,
            log_time: 1_000_000 + i as u64 * 1000,
            publish_time: 1_000_000 + i as u64 * 1000,
        };
        w.write_to_known_channel(&header, m).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn bad_definitions_and_bad_messages_are_reported_with_topic_type_and_file() {
    let ctx = Context::new(config("rosbag2-bad")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // a schema that does not parse: the topic is skipped, saying why
    let bad_schema = dir.path().join("bad_schema.mcap");
    write_bag(
        &bad_schema,
        "/odd",
        "my_msgs/msg/Odd",
        "strnig data\n",
        &[&[0, 1, 0, 0, 1, 0, 0, 0, 0]],
    );
    let report = Player::new()
        .play(&ctx, &bad_schema, &PlayOptions::default(), |_| {})
        .unwrap();
    let why = &report.skipped["/odd"];
    assert!(
        why.contains("my_msgs/msg/Odd") && why.contains("bad_schema.mcap"),
        "{why}"
    );
    // messages that do not decode are counted and left out; the others are replayed
    let bad_msgs = dir.path().join("bad_messages.mcap");
    let good: &[u8] = &[0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0];
    write_bag(
        &bad_msgs,
        "/text",
        "std_msgs/msg/String",
        "string data\n",
        &[good, &[0, 1, 0, 0, 200, 0, 0, 0, 0], &[1, 2], good],
    );
    let report = Player::new()
        .play(&ctx, &bad_msgs, &PlayOptions::default(), |_| {})
        .unwrap();
    assert_eq!(report.published["/text"], 2);
    let u = &report.undecodable["/text"];
    assert_eq!(u.count, 2);
    assert!(
        u.first.contains("std_msgs/msg/String") && u.first.contains("bad_messages.mcap"),
        "{}",
        u.first
    );
    // every cut and every flipped byte of real messages: an error or a message, never a
    // panic
    for topic in ["/array_topic", "/test_topic"] {
        let (msgs, (name, _, text)) = recorded(&fixture("cdr_test/cdr_test_0.mcap"), topic);
        let pass = ros2cdr::Ros2Pass::new(&name, &text).unwrap();
        let mut out = Vec::new();
        for (_, _, cdr) in &msgs {
            pass.decode(cdr, 0, &mut out).unwrap();
            for cut in 0..cdr.len() {
                let _ = pass.decode(&cdr[..cut], 0, &mut out);
            }
            for at in 0..cdr.len() {
                let mut bad = cdr.clone();
                bad[at] ^= 0xff;
                let _ = pass.decode(&bad, 0, &mut out);
            }
        }
    }
    // a directory without bags, a metadata.yaml naming a missing file
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let e = read::info(&empty).unwrap_err().to_string();
    assert!(e.contains("no metadata.yaml"), "{e}");
    std::fs::write(
        empty.join("metadata.yaml"),
        "rosbag2_bagfile_information:\n  storage_identifier: mcap\n  relative_file_paths:\n  - gone_0.mcap\n",
    )
    .unwrap();
    let e = read::info(&empty).unwrap_err().to_string();
    assert!(e.contains("gone_0.mcap"), "{e}");
    std::fs::write(empty.join("metadata.yaml"), "{{ not yaml").unwrap();
    let e = Player::new()
        .play(&ctx, &empty, &PlayOptions::default(), |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("metadata.yaml"), "{e}");
}
