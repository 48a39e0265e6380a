//! `nerve bag diff` and `nerve bag digest`: bags written here with the mcap writer
//! (ROS 2 schemas encoded with `nerve_ros2_types`, and Nerve's own encodings) are
//! compared message by message; the first difference names its topic, message, field
//! and both values; ignored fields, missing topics, other counts and damaged files.

use nerve_bag::compare::{compare, digest, CompareOptions, Difference};
use nerve_bag::BagError;
use nerve_ros2_types::{encode, from_json, Registry};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const SEP: &str =
    "================================================================================\n";

/// `demo/msg/Detections`: a header and an array of boxes.
fn detections_schema() -> String {
    format!(
        "std_msgs/Header header\ndemo/Box[] boxes\n\
         {SEP}MSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n\
         {SEP}MSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n\
         {SEP}MSG: demo/Box\nfloat32 score\nfloat32[4] xywh\nstring label\n"
    )
}

/// One topic of a bag to write.
struct Topic {
    name: &'static str,
    schema_name: &'static str,
    schema_encoding: &'static str,
    schema: Vec<u8>,
    message_encoding: &'static str,
    payloads: Vec<Vec<u8>>,
}

/// CDR of a message given as JSON.
fn cdr(type_name: &str, schema: &str, value: serde_json::Value) -> Vec<u8> {
    let reg = Registry::from_ros2msg(type_name, schema).unwrap();
    let v = from_json(&reg, type_name, &value).unwrap();
    let mut out = Vec::new();
    encode(&reg, type_name, &v, &mut out).unwrap();
    out
}

/// Detections message `i`: stamp `sec`, three boxes; `score` for box 2.
fn detection(i: u32, sec: i32, score: f32) -> Vec<u8> {
    let b = |s: f32, label: &str| json!({"score": s, "xywh": [i as f32, 1.0, 2.0, 3.0], "label": label});
    cdr(
        "demo/msg/Detections",
        &detections_schema(),
        json!({
            "header": {"stamp": {"sec": sec, "nanosec": i * 1000}, "frame_id": "camera"},
            "boxes": [b(0.5, "cup"), b(0.25, "cat"), b(score, "car")],
        }),
    )
}

fn status(i: u32) -> Vec<u8> {
    cdr(
        "std_msgs/msg/String",
        "string data\n",
        json!({ "data": format!("ok {i}") }),
    )
}

fn detections_topic(payloads: Vec<Vec<u8>>) -> Topic {
    Topic {
        name: "/detections",
        schema_name: "demo/msg/Detections",
        schema_encoding: "ros2msg",
        schema: detections_schema().into_bytes(),
        message_encoding: "cdr",
        payloads,
    }
}

fn status_topic(payloads: Vec<Vec<u8>>) -> Topic {
    Topic {
        name: "/status",
        schema_name: "std_msgs/msg/String",
        schema_encoding: "ros2msg",
        schema: b"string data\n".to_vec(),
        message_encoding: "cdr",
        payloads,
    }
}

/// The standard bag: 5 detections (box 2 scored 0.8125, stamps from 100 s), 3 statuses.
fn standard(change: impl Fn(u32, &mut (i32, f32))) -> Vec<Topic> {
    let dets = (0..5)
        .map(|i| {
            let mut v = (100 + i as i32, 0.8125);
            change(i, &mut v);
            detection(i, v.0, v.1)
        })
        .collect();
    vec![
        detections_topic(dets),
        status_topic((0..3).map(status).collect()),
    ]
}

/// Writes the topics to a new bag, their messages interleaved (message 0 of each topic,
/// then message 1, …) and chunks compressed (zstd), or one topic after the other and
/// chunks not compressed.
fn write_bag(path: &Path, topics: &[Topic], interleave: bool) {
    let f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let compression = interleave.then_some(mcap::Compression::Zstd);
    let mut w = mcap::WriteOptions::new()
        .profile("ros2")
        .compression(compression)
        .chunk_size(Some(256))
        .create(f)
        .unwrap();
    let ids: Vec<u16> = topics
        .iter()
        .map(|t| {
            let s = w
                .add_schema(t.schema_name, t.schema_encoding, &t.schema)
                .unwrap();
            w.add_channel(s, t.name, t.message_encoding, &BTreeMap::new())
                .unwrap()
        })
        .collect();
    let mut order: Vec<(usize, usize)> = Vec::new();
    if interleave {
        let most = topics.iter().map(|t| t.payloads.len()).max().unwrap_or(0);
        for i in 0..most {
            for (t, topic) in topics.iter().enumerate() {
                if i < topic.payloads.len() {
                    order.push((t, i));
                }
            }
        }
    } else {
        for (t, topic) in topics.iter().enumerate() {
            order.extend((0..topic.payloads.len()).map(|i| (t, i)));
        }
    }
    for (n, (t, i)) in order.into_iter().enumerate() {
        let time = 1_000_000_000 + n as u64 * 1_000_000;
        let header = mcap::records::MessageHeader {
            channel_id: ids[t],
            sequence: i as u32,
            log_time: time,
            publish_time: time,
        };
        w.write_to_known_channel(&header, &topics[t].payloads[i])
            .unwrap();
    }
    w.finish().unwrap();
}

fn bag(dir: &Path, name: &str, topics: &[Topic], interleave: bool) -> PathBuf {
    let p = dir.join(name);
    write_bag(&p, topics, interleave);
    p
}

fn ignoring(paths: &[&str]) -> CompareOptions {
    CompareOptions {
        ignore: paths.iter().map(|s| s.to_string()).collect(),
        ..CompareOptions::default()
    }
}

fn first_difference(a: &Path, b: &Path, opts: &CompareOptions) -> Option<Difference> {
    compare(a, b, opts).unwrap().first_difference
}

#[test]
fn identical_bags_compare_equal_whatever_the_interleaving() {
    let dir = tempfile::tempdir().unwrap();
    let a = bag(dir.path(), "a.mcap", &standard(|_, _| {}), true);
    let b = bag(dir.path(), "b.mcap", &standard(|_, _| {}), false);
    let r = compare(&a, &b, &CompareOptions::default()).unwrap();
    assert!(r.identical(), "{:?}", r.first_difference);
    assert_eq!(r.messages_compared, 8);
    let topics: Vec<(&str, u64)> = r
        .topics
        .iter()
        .map(|t| (t.topic.as_str(), t.messages))
        .collect();
    assert_eq!(topics, [("/detections", 5), ("/status", 3)]);
    // a bag is identical to itself, and its digests are the report's
    assert!(compare(&a, &a, &CompareOptions::default())
        .unwrap()
        .identical());
    assert_eq!(digest(&a).unwrap(), r.topics);
}

#[test]
fn a_changed_field_is_named_with_its_topic_message_and_both_values() {
    let dir = tempfile::tempdir().unwrap();
    let expected = bag(dir.path(), "expected.mcap", &standard(|_, _| {}), true);
    let changed = |i: u32, v: &mut (i32, f32)| {
        if i >= 3 {
            v.1 = 0.75;
        }
    };
    let actual = bag(dir.path(), "actual.mcap", &standard(changed), true);
    let r = compare(&actual, &expected, &CompareOptions::default()).unwrap();
    let d = r.first_difference.expect("they differ");
    assert_eq!(
        d,
        Difference {
            topic: "/detections".into(),
            index: 3,
            field: "boxes[2].score".into(),
            actual: "0.75".into(),
            expected: "0.8125".into(),
        }
    );
    assert_eq!(
        d.to_string(),
        "/detections message 3: field boxes[2].score: got 0.75, expected 0.8125"
    );
    // up to the difference on /detections, all of /status
    assert_eq!(r.messages_compared, 4 + 3);

    // ignored: everywhere, on this topic, in every element or in this one
    for ignore in [
        "boxes.score",
        "boxes[].score",
        "boxes[*].score",
        "boxes[2].score",
        "boxes[2]",
        "boxes",
        "/detections:boxes.score",
    ] {
        let r = compare(&actual, &expected, &ignoring(&[ignore])).unwrap();
        assert!(r.identical(), "{ignore}: {:?}", r.first_difference);
        assert_eq!(r.messages_compared, 8, "{ignore}");
    }
    // not ignored: another topic's field, another element, another field
    for ignore in [
        "/status:boxes.score",
        "boxes[1].score",
        "boxes.xywh",
        "header",
    ] {
        let d = first_difference(&actual, &expected, &ignoring(&[ignore])).unwrap();
        assert_eq!(
            (d.index, d.field.as_str()),
            (3, "boxes[2].score"),
            "{ignore}"
        );
    }
    let e = compare(&actual, &expected, &ignoring(&["boxes[x].score"])).unwrap_err();
    assert!(matches!(e, BagError::Options(_)), "{e}");
    assert!(e.to_string().contains("boxes[x].score"), "{e}");
}

#[test]
fn new_stamps_differ_in_the_header_unless_it_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let expected = bag(dir.path(), "expected.mcap", &standard(|_, _| {}), true);
    let later = bag(
        dir.path(),
        "later.mcap",
        &standard(|_, v| v.0 += 1000),
        false,
    );
    let d = first_difference(&later, &expected, &CompareOptions::default()).unwrap();
    assert_eq!(
        d.to_string(),
        "/detections message 0: field header.stamp.sec: got 1100, expected 100"
    );
    for ignore in [
        "header.stamp",
        "header.stamp.sec",
        "header",
        "/detections:header",
    ] {
        assert!(
            first_difference(&later, &expected, &ignoring(&[ignore])).is_none(),
            "{ignore}"
        );
    }
    // a stamp change and a score change: ignoring the stamps shows the score
    let both = bag(
        dir.path(),
        "both.mcap",
        &standard(|i, v| {
            v.0 += 1000;
            if i == 4 {
                v.1 = -0.0;
            }
        }),
        true,
    );
    let d = first_difference(&both, &expected, &ignoring(&["header.stamp"])).unwrap();
    assert_eq!(
        (d.index, d.field.as_str(), d.actual.as_str()),
        (4, "boxes[2].score", "-0.0")
    );
}

#[test]
fn missing_topics_other_counts_and_types_are_differences() {
    let dir = tempfile::tempdir().unwrap();
    let expected = bag(dir.path(), "expected.mcap", &standard(|_, _| {}), true);
    let mut topics = standard(|_, _| {});
    topics.pop();
    let no_status = bag(dir.path(), "no_status.mcap", &topics, true);
    let d = first_difference(&no_status, &expected, &CompareOptions::default()).unwrap();
    assert_eq!(
        (d.topic.as_str(), d.field.as_str(), d.actual.as_str()),
        ("/status", "<topic>", "missing")
    );
    assert_eq!(d.expected, "3 messages");
    assert_eq!(
        d.to_string(),
        "/status: topic: got missing, expected 3 messages"
    );
    // the other way round
    let d = first_difference(&expected, &no_status, &CompareOptions::default()).unwrap();
    assert_eq!(
        (d.actual.as_str(), d.expected.as_str()),
        ("3 messages", "missing")
    );

    let mut topics = standard(|_, _| {});
    topics[0].payloads.pop();
    let short = bag(dir.path(), "short.mcap", &topics, true);
    let d = first_difference(&short, &expected, &CompareOptions::default()).unwrap();
    assert_eq!(
        d,
        Difference {
            topic: "/detections".into(),
            index: 4,
            field: "<count>".into(),
            actual: "4".into(),
            expected: "5".into(),
        }
    );
    assert_eq!(
        d.to_string(),
        "/detections: message count: got 4, expected 5"
    );

    // topics in name order: a difference on /detections comes before one on /status
    let mut topics = standard(|i, v| {
        if i == 4 {
            v.1 = 0.0;
        }
    });
    topics[1].payloads[0] = status(7);
    let two = bag(dir.path(), "two.mcap", &topics, false);
    let d = first_difference(&two, &expected, &CompareOptions::default()).unwrap();
    assert_eq!((d.topic.as_str(), d.index), ("/detections", 4));
    let d = first_difference(&two, &expected, &ignoring(&["boxes"])).unwrap();
    assert_eq!(
        d.to_string(),
        "/status message 0: field data: got \"ok 7\", expected \"ok 0\""
    );

    // another type on a topic
    let mut topics = standard(|_, _| {});
    topics[1] = Topic {
        schema_name: "demo/msg/Status",
        ..status_topic((0..3).map(status).collect())
    };
    let other = bag(dir.path(), "other.mcap", &topics, true);
    let d = first_difference(&other, &expected, &CompareOptions::default()).unwrap();
    assert_eq!(
        d.to_string(),
        "/status: type: got demo/msg/Status, expected std_msgs/msg/String"
    );
}

#[test]
fn payloads_that_do_not_decode_are_compared_byte_by_byte() {
    let dir = tempfile::tempdir().unwrap();
    let raw = |payloads: Vec<Vec<u8>>| Topic {
        name: "/raw",
        schema_name: "blob",
        schema_encoding: "",
        schema: Vec::new(),
        message_encoding: "application/octet-stream",
        payloads,
    };
    let a = bag(
        dir.path(),
        "a.mcap",
        &[raw(vec![vec![1, 2, 3], vec![4, 5, 6, 7]])],
        true,
    );
    let b = bag(
        dir.path(),
        "b.mcap",
        &[raw(vec![vec![1, 2, 3], vec![4, 5, 9, 7]])],
        true,
    );
    let d = first_difference(&a, &b, &CompareOptions::default()).unwrap();
    assert_eq!(
        d.to_string(),
        "/raw message 1: field <bytes>[2]: got 0x06, expected 0x09"
    );
    let c = bag(
        dir.path(),
        "c.mcap",
        &[raw(vec![vec![1, 2, 3], vec![4, 5, 6]])],
        true,
    );
    let d = first_difference(&a, &c, &CompareOptions::default()).unwrap();
    assert_eq!(
        (d.field.as_str(), d.actual.as_str(), d.expected.as_str()),
        ("<bytes>[3]", "0x07", "end of payload (3 bytes)")
    );

    // CDR that does not match its schema (cut short): bytes too
    let mut topics = standard(|_, _| {});
    let good = topics[1].payloads[2].clone();
    topics[1].payloads[2].truncate(6);
    let cut = bag(dir.path(), "cut.mcap", &topics, true);
    let expected = bag(dir.path(), "expected.mcap", &standard(|_, _| {}), true);
    let d = first_difference(&cut, &expected, &CompareOptions::default()).unwrap();
    assert_eq!((d.topic.as_str(), d.index), ("/status", 2));
    assert_eq!(d.field, "<bytes>[6]");
    assert_eq!(d.expected, format!("0x{:02x}", good[6]));

    // the same values from other bytes (a trailing byte) are a difference too
    let mut topics = standard(|_, _| {});
    topics[1].payloads[1].push(0);
    let longer = bag(dir.path(), "longer.mcap", &topics, true);
    let d = first_difference(&longer, &expected, &ignoring(&["data"])).unwrap();
    assert_eq!((d.topic.as_str(), d.index), ("/status", 1));
    assert!(d.field.starts_with("<bytes>["), "{d}");
}

#[test]
fn damaged_or_missing_bags_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = bag(dir.path(), "good.mcap", &standard(|_, _| {}), false);
    let bytes = std::fs::read(&good).unwrap();
    let opts = CompareOptions::default();
    let check = |path: &Path, e: BagError| {
        let text = e.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        text
    };
    // cut short: at every tenth byte, and just before the end
    let cut = dir.path().join("cut.mcap");
    for at in (0..bytes.len()).step_by(10).chain([bytes.len() - 1]) {
        std::fs::write(&cut, &bytes[..at]).unwrap();
        let e = compare(&cut, &good, &opts).unwrap_err();
        check(&cut, e);
        let e = compare(&good, &cut, &opts).unwrap_err();
        check(&cut, e);
        let e = digest(&cut).unwrap_err();
        check(&cut, e);
    }
    // a damaged record inside a complete file: a payload's bytes changed (its chunk's
    // CRC says so)
    let at = bytes
        .windows(4)
        .position(|w| w == b"ok 1")
        .expect("the payload is in the file");
    let mut bad = bytes.clone();
    bad[at + 3] = b'9';
    let damaged = dir.path().join("damaged.mcap");
    std::fs::write(&damaged, &bad).unwrap();
    let t = check(&damaged, compare(&damaged, &good, &opts).unwrap_err());
    assert!(t.contains("damaged"), "{t}");
    let text = dir.path().join("text.mcap");
    std::fs::write(&text, "not a bag").unwrap();
    let t = check(&text, compare(&text, &good, &opts).unwrap_err());
    assert!(t.contains("MCAP"), "{t}");
    let missing = dir.path().join("missing.mcap");
    check(&missing, compare(&good, &missing, &opts).unwrap_err());
    check(&missing, digest(&missing).unwrap_err());
}

#[test]
fn digests_agree_on_the_same_messages_and_differ_after_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let a = bag(dir.path(), "a.mcap", &standard(|_, _| {}), true);
    let b = bag(dir.path(), "b.mcap", &standard(|_, _| {}), false);
    let (da, db) = (digest(&a).unwrap(), digest(&b).unwrap());
    assert_eq!(da, db);
    assert_eq!(da.len(), 2);
    assert_eq!((da[0].topic.as_str(), da[0].messages), ("/detections", 5));
    assert_eq!((da[1].topic.as_str(), da[1].messages), ("/status", 3));
    assert!(da
        .iter()
        .all(|t| t.sha256.len() == 64 && t.sha256.bytes().all(|c| c.is_ascii_hexdigit())));
    let c = bag(
        dir.path(),
        "c.mcap",
        &standard(|i, v| {
            if i == 2 {
                v.1 = 0.5;
            }
        }),
        true,
    );
    let dc = digest(&c).unwrap();
    assert_ne!(dc[0].sha256, da[0].sha256);
    assert_eq!(dc[1], da[1]);
    // a byte moved from one message to the next changes the digest
    let mut topics = standard(|_, _| {});
    topics[1].payloads = vec![vec![1, 2], vec![3]];
    let d1 = digest(&bag(dir.path(), "d1.mcap", &topics, true)).unwrap();
    topics[1].payloads = vec![vec![1], vec![2, 3]];
    let d2 = digest(&bag(dir.path(), "d2.mcap", &topics, true)).unwrap();
    assert_ne!(d1[1].sha256, d2[1].sha256);
}

// NERVE-TYPES: bags of Nerve types, written with the crate's own encodings
mod nerve_types {
    use super::*;
    use nerve::message::schema::Schema;
    use nerve_bag::encoding::Encoding;
    use nerve_msgs::{Imu, Time};

    #[derive(Clone, Copy, nerve::Pod)]
    #[repr(C)]
    struct Point {
        x: f32,
        y: f32,
    }

    #[derive(Clone, Copy, nerve::Message)]
    #[repr(C)]
    #[message(name = "demo/Track", elem = Point)]
    struct Track {
        id: u32,
        kind: u32,
    }

    /// A topic of Nerve payloads, encoded as the recorder does.
    fn nerve_topic(name: &'static str, schema: &Schema, payloads: &[Vec<u8>]) -> Topic {
        let enc = Encoding::for_schema(schema).unwrap();
        let payloads = payloads
            .iter()
            .map(|p| {
                let mut out = Vec::new();
                enc.encode(p, &mut out).unwrap();
                out
            })
            .collect();
        Topic {
            name,
            schema_name: Box::leak(enc.schema_name.clone().into_boxed_str()),
            schema_encoding: enc.schema_encoding,
            schema: enc.schema_data.clone(),
            message_encoding: enc.message_encoding,
            payloads,
        }
    }

    fn imu(i: u64, stamp_s: i64) -> Vec<u8> {
        let m = Imu {
            stamp: Time {
                nanos: stamp_s * 1_000_000_000 + i as i64,
            },
            orientation_covariance: [i as f64; 9],
            ..Default::default()
        };
        nerve::message::as_bytes(&m).to_vec()
    }

    fn track(i: u32, y2: f32) -> Vec<u8> {
        let t = Track { id: i, kind: 1 };
        let mut p = nerve::message::as_bytes(&t).to_vec();
        p.resize(nerve::TypeInfo::of::<Track>().elems_offset(), 0);
        for (x, y) in [(0.0f32, 0.5f32), (1.0, 1.5), (2.0, y2)] {
            p.extend_from_slice(&x.to_le_bytes());
            p.extend_from_slice(&y.to_le_bytes());
        }
        p
    }

    fn topics(stamp_s: i64, y2: f32) -> Vec<Topic> {
        let imus: Vec<Vec<u8>> = (0..4).map(|i| imu(i, stamp_s)).collect();
        let tracks: Vec<Vec<u8>> = (0..3).map(|i| track(i, y2)).collect();
        vec![
            nerve_topic("/imu", &Schema::of::<Imu>(), &imus),
            nerve_topic("/tracks", &Schema::of::<Track>(), &tracks),
        ]
    }

    #[test]
    fn standard_and_plain_encodings_are_compared_field_by_field() {
        let dir = tempfile::tempdir().unwrap();
        let expected = bag(dir.path(), "expected.mcap", &topics(100, 2.5), true);
        let same = bag(dir.path(), "same.mcap", &topics(100, 2.5), false);
        assert!(first_difference(&same, &expected, &CompareOptions::default()).is_none());
        let later = bag(dir.path(), "later.mcap", &topics(160, 2.5), true);
        let d = first_difference(&later, &expected, &CompareOptions::default()).unwrap();
        assert_eq!(
            d.to_string(),
            "/imu message 0: field header.stamp.sec: got 160, expected 100"
        );
        assert!(first_difference(&later, &expected, &ignoring(&["/imu:header.stamp"])).is_none());
        let moved = bag(dir.path(), "moved.mcap", &topics(100, 2.75), true);
        let d = first_difference(&moved, &expected, &CompareOptions::default()).unwrap();
        assert_eq!(
            d.to_string(),
            "/tracks message 0: field elems[2].y: got 2.75, expected 2.5"
        );
        assert!(first_difference(&moved, &expected, &ignoring(&["elems.y"])).is_none());
        assert!(first_difference(&moved, &expected, &ignoring(&["elems[1].y"])).is_some());
    }
}
