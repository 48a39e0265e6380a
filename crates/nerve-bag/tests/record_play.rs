//! Recording and replay end to end, in one process (the recorder reads the topics type-
//! erased, exactly as `nerve bag record` does in a process of its own).

use nerve::message::schema::Schema;
use nerve::prelude::*;
use nerve::{Config, RawSubscriber};
use nerve_bag::encoding::Encoding;
use nerve_bag::play::{PlayOptions, Player};
use nerve_bag::read::{self, Mapped};
use nerve_bag::record::{Compression, RecordOptions, Recorder};
use nerve_msgs::{Imu, PointCloud, Time};
use std::path::Path;
use std::time::{Duration, Instant};

fn config(tag: &str) -> Config {
    let h = nerve::message::layout::hash_str(nerve::message::layout::FNV_OFFSET, tag);
    let domain = 550 + (h % 200) as u32;
    let dir = std::env::temp_dir().join("nerve-tests/");
    Config::default().domain(domain).unwrap().state_dir(dir)
}

const CLOUD_BYTES: usize = 10 << 20;

/// The cloud payload of message `i`: a fixed pseudo-random body, `i` in its first bytes.
fn cloud_data(body: &[u8], i: u64) -> Vec<u8> {
    let mut d = body.to_vec();
    d[..8].copy_from_slice(&i.to_le_bytes());
    d
}

fn imu(i: u64) -> Imu {
    Imu {
        stamp: Time { nanos: i as i64 },
        orientation_covariance: [i as f64; 9],
        ..Default::default()
    }
}

fn wait_recording(rec: &Recorder, topics: usize) {
    let end = Instant::now() + Duration::from_secs(10);
    while rec.stats().len() < topics {
        assert!(Instant::now() < end, "the recorder found the topics");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Records 10 MB clouds at 10 Hz and Imu at 1 kHz for `secs`; returns the body of the
/// clouds and the numbers published.
fn record(ctx: &Context, path: &Path, secs: u64, compression: Compression) -> (Vec<u8>, u64, u64) {
    let node = ctx.node("sensors").create().unwrap();
    let clouds = node.publisher::<PointCloud>("/cloud").create().unwrap();
    let imus = node.publisher::<Imu>("/imu").create().unwrap();
    let mut opts = RecordOptions::new(path);
    opts.compression = compression;
    let rec = Recorder::start(ctx, opts).unwrap();
    wait_recording(&rec, 2);
    assert!(clouds.wait_for_subscribers(1, Duration::from_secs(5)));
    assert!(imus.wait_for_subscribers(1, Duration::from_secs(5)));
    let mut body = vec![0u8; CLOUD_BYTES];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for b in body.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let start = Instant::now();
    let (mut n_cloud, mut n_imu) = (0u64, 0u64);
    for k in 0..secs * 1000 {
        let deadline = start + Duration::from_millis(k);
        if let Some(d) = deadline.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        imus.publish(&imu(n_imu)).unwrap();
        n_imu += 1;
        if k % 100 == 0 {
            let mut loan = clouds.loan_slice(CLOUD_BYTES).unwrap();
            loan.head_mut().width = n_cloud as u32;
            loan.elems_mut()
                .copy_from_slice(&cloud_data(&body, n_cloud));
            loan.send().unwrap();
            n_cloud += 1;
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let report = rec.stop().unwrap();
    for t in &report.topics {
        assert_eq!((t.dropped, t.lost, t.failed), (0, 0, 0), "{t:?}");
    }
    (body, n_cloud, n_imu)
}

#[test]
fn clouds_and_imu_are_recorded_without_a_drop_and_replayed_byte_for_byte_in_time() {
    let ctx = Context::new(config("bag-record-play")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.mcap");
    let secs = 10;
    let (body, n_cloud, n_imu) = record(&ctx, &path, secs, Compression::None);

    // every message is in the bag, in order, every byte as published
    let info = read::info(&path).unwrap();
    assert!(info.complete);
    let count = |t: &str| info.topics.iter().find(|x| x.topic == t).unwrap().count;
    assert_eq!((count("/cloud"), count("/imu")), (n_cloud, n_imu));
    assert!(info.topics.iter().all(|t| t.losses == Some(0)));
    let cloud_enc = Encoding::for_schema(&Schema::of::<PointCloud>()).unwrap();
    let imu_enc = Encoding::for_schema(&Schema::of::<Imu>()).unwrap();
    let (mut next_cloud, mut next_imu) = (0u64, 0u64);
    // the bag's order across both topics: (topic, index in the topic), in file order
    let mut bag_order: Vec<(&str, u64)> = Vec::new();
    let m = Mapped::open(&path).unwrap();
    let mut payload = Vec::new();
    read::scan(&path, &m, |msg| {
        match msg.channel.topic.as_str() {
            "/cloud" => {
                cloud_enc.decode(&msg.data, &mut payload).unwrap();
                let head: PointCloud = nerve::message::read_pod(&payload).unwrap();
                assert_eq!(head.width as u64, next_cloud);
                let off = nerve::TypeInfo::of::<PointCloud>().elems_offset();
                assert!(
                    payload[off..] == cloud_data(&body, next_cloud)[..],
                    "cloud {next_cloud}"
                );
                bag_order.push(("/cloud", next_cloud));
                next_cloud += 1;
            }
            "/imu" => {
                imu_enc.decode(&msg.data, &mut payload).unwrap();
                assert_eq!(payload, nerve::message::as_bytes(&imu(next_imu)));
                assert_eq!(
                    msg.sequence as u64,
                    next_imu + 1,
                    "publisher sequence numbers"
                );
                bag_order.push(("/imu", next_imu));
                next_imu += 1;
            }
            t => panic!("unexpected topic {t}"),
        }
        Ok(())
    })
    .unwrap();
    assert_eq!((next_cloud, next_imu), (n_cloud, n_imu));

    // replayed under other names: same bytes, each topic in order, and both topics
    // together in the bag's order (how fast is `nerve bench bag`'s to measure, not this
    // test's: a loaded machine replays late, never out of order)
    let node = ctx.node("replay_check").create().unwrap();
    let sub_imu = RawSubscriber::with_schema(
        &node,
        "/imu_replay",
        &Schema::of::<Imu>(),
        Qos::sensor().depth(4096),
    )
    .unwrap();
    let sub_cloud = node
        .subscriber::<PointCloud>("/cloud_replay")
        .qos(Qos::sensor().depth(16))
        .create()
        .unwrap();
    let opts = PlayOptions {
        remap: vec![
            ("/imu".into(), "/imu_replay".into()),
            ("/cloud".into(), "/cloud_replay".into()),
        ],
        ..PlayOptions::default()
    };
    let play = {
        let path = path.clone();
        std::thread::spawn(move || {
            let ctx = Context::new(config("bag-record-play")).unwrap();
            Player::new().play(&ctx, &path, &opts, |_| {})
        })
    };
    // both topics read here (subscribers stay on their thread), in order, byte for byte;
    // each sample with the player's publish stamp (one thread publishes them all)
    let mut replayed: Vec<(u64, &str, u64)> = Vec::new();
    let (mut clouds, mut imus) = (0u64, 0u64);
    // a watchdog, not a bound on the replay's speed: a replay that stopped publishing
    // fails instead of hanging
    let end = Instant::now() + Duration::from_secs(600);
    while clouds < n_cloud || imus < n_imu {
        assert!(
            Instant::now() < end,
            "the replay stopped: {clouds} of {n_cloud} clouds, {imus} of {n_imu} imus"
        );
        let mut idle = true;
        while let Some(s) = sub_imu.try_recv().unwrap() {
            assert_eq!(
                s.bytes(),
                nerve::message::as_bytes(&imu(imus)),
                "imu {imus} in order"
            );
            replayed.push((s.header().publish_mono_ns, "/imu", imus));
            imus += 1;
            idle = false;
        }
        if let Some(c) = sub_cloud.try_recv().unwrap() {
            assert_eq!(c.width as u64, clouds, "clouds in order");
            assert!(
                c.elems() == &cloud_data(&body, clouds)[..],
                "cloud {clouds} byte for byte"
            );
            replayed.push((c.header().publish_mono_ns, "/cloud", clouds));
            clouds += 1;
            idle = false;
        }
        if idle {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let report = play.join().unwrap().unwrap();
    assert_eq!(report.published["/imu_replay"], n_imu);
    assert_eq!(report.published["/cloud_replay"], n_cloud);
    // the player published the two topics interleaved exactly as the bag holds them
    replayed.sort_by_key(|(stamp, _, _)| *stamp);
    let order: Vec<(&str, u64)> = replayed.iter().map(|(_, t, i)| (*t, *i)).collect();
    assert_eq!(order.len(), bag_order.len());
    if let Some(k) = (0..order.len()).find(|&k| order[k] != bag_order[k]) {
        panic!(
            "replayed out of the bag's order at {k}: {:?}, the bag has {:?}",
            order[k], bag_order[k]
        );
    }
}

#[test]
fn damaged_bags_give_clear_errors_and_keep_what_is_whole() {
    let ctx = Context::new(config("bag-damage")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("whole.mcap");
    let node = ctx.node("sensors").create().unwrap();
    let imus = node.publisher::<Imu>("/imu").create().unwrap();
    let mut opts = RecordOptions::new(&path);
    opts.chunk_size = 16 << 10; // many chunks
    opts.compression = Compression::Zstd;
    let rec = Recorder::start(&ctx, opts).unwrap();
    wait_recording(&rec, 1);
    assert!(imus.wait_for_subscribers(1, Duration::from_secs(5)));
    for i in 0..2000 {
        imus.publish(&imu(i)).unwrap();
        if i % 100 == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    rec.stop().unwrap();
    let bytes = std::fs::read(&path).unwrap();

    // cut in half: incomplete, the whole chunks before the cut are read, and recover
    // writes them to a complete file
    let cut = dir.path().join("cut.mcap");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let info = read::info(&cut).unwrap();
    assert!(!info.complete);
    assert!(info.damage.is_some());
    assert!(
        info.messages > 100 && info.messages < 2000,
        "{}",
        info.messages
    );
    let fixed = dir.path().join("fixed.mcap");
    let saved = read::recover(&cut, &fixed).unwrap();
    assert_eq!(saved.messages, info.messages);
    let again = read::info(&fixed).unwrap();
    assert!(again.complete);
    assert_eq!(again.messages, info.messages);

    // a flipped byte inside a compressed chunk is found, not replayed as garbage
    let bad = dir.path().join("bad.mcap");
    let mut corrupt = bytes.clone();
    // in the middle of the third chunk (between chunks lie message indexes, which a scan
    // does not need: a flip there loses nothing)
    let summary = mcap::Summary::read(&bytes).unwrap().unwrap();
    let chunk = &summary.chunk_indexes[2];
    let mid = (chunk.chunk_start_offset + chunk.chunk_length / 2) as usize;
    corrupt[mid] ^= 0xff;
    corrupt[mid + 1] ^= 0xff;
    std::fs::write(&bad, &corrupt).unwrap();
    let m = Mapped::open(&bad).unwrap();
    let (scanned, _) = read::scan(&bad, &m, |_| Ok(())).unwrap();
    let damage = scanned.damage.expect("the damage is reported");
    assert!(damage.what.contains("unreadable after"), "{damage}");
    assert!(scanned.messages < 2000);

    // not an MCAP file at all, or an empty one
    let junk = dir.path().join("junk.mcap");
    std::fs::write(&junk, b"hello, not a bag").unwrap();
    let e = read::info(&junk).unwrap_err().to_string();
    assert!(e.contains("junk.mcap") && e.contains("MCAP"), "{e}");
    let empty = dir.path().join("empty.mcap");
    std::fs::write(&empty, b"").unwrap();
    assert!(read::info(&empty).is_err());
    let e = read::info(&dir.path().join("missing.mcap"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.mcap"), "{e}");
}

#[test]
fn selection_late_topics_splitting_clock_and_replay_errors() {
    let ctx = Context::new(config("bag-selection")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let node = ctx.node("sensors").create().unwrap();
    // topics that allow the recorder's deep queue (a topic allows 256 unless its
    // creator asks for more)
    let deep = Qos::sensor().depth(1024);
    let publisher = |t: &str| node.publisher::<Imu>(t).qos(deep.clone()).create().unwrap();
    let (kept, skipped, other) = (
        publisher("/sel/kept"),
        publisher("/sel/skip"),
        publisher("/other"),
    );
    let mut opts = RecordOptions::new(dir.path().join("split.mcap"));
    opts.selection.all = false;
    opts.selection.include = Some(regex::Regex::new("^/sel/").unwrap());
    opts.selection.exclude = Some(regex::Regex::new("skip").unwrap());
    opts.compression = Compression::Lz4;
    opts.chunk_size = 64 << 10;
    opts.split_size = Some(1 << 20);
    opts.depth = 1024;
    let rec = Recorder::start(&ctx, opts).unwrap();
    wait_recording(&rec, 1); // /sel/kept: topics left out are not listed
    assert!(kept.wait_for_subscribers(1, Duration::from_secs(5)));
    // a topic that appears after the recording started is picked up
    let late = publisher("/sel/late");
    assert!(late.wait_for_subscribers(1, Duration::from_secs(5)));
    // incompressible covariances (216 random bytes a message): over 2 MB after lz4
    let (mut x, n) = (0x2545_f491_4f6c_dd1du64, 10_000u64);
    for i in 0..n {
        let mut m = imu(i);
        for v in m
            .orientation_covariance
            .iter_mut()
            .chain(m.angular_velocity_covariance.iter_mut())
            .chain(m.linear_acceleration_covariance.iter_mut())
        {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *v = f64::from_bits(x >> 2);
        }
        kept.publish(&m).unwrap();
        late.publish(&imu(i)).unwrap();
        skipped.publish(&imu(i)).unwrap();
        other.publish(&imu(i)).unwrap();
        // 5 kHz in bursts of 10: a 1024-deep queue is 200 ms of it
        if i % 10 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let report = rec.stop().unwrap();
    assert_eq!(report.losses(), 0, "{:?}", report.topics);
    assert!(report.files.len() >= 2, "{:?}", report.files);
    let (mut counts, mut first_log, mut last_log) = (
        std::collections::BTreeMap::<String, u64>::new(),
        u64::MAX,
        0,
    );
    for f in &report.files {
        let info = read::info(f).unwrap();
        assert!(info.complete, "{}", f.display());
        assert_eq!(info.compression, vec!["lz4".to_string()], "{}", f.display());
        // split by the bytes on disk (compressed), within a chunk of the limit
        assert!(
            info.file_bytes < (1 << 20) + (256 << 10),
            "{}: {} bytes",
            f.display(),
            info.file_bytes
        );
        for t in &info.topics {
            *counts.entry(t.topic.clone()).or_default() += t.count;
        }
        first_log = first_log.min(info.start_ns);
        last_log = last_log.max(info.end_ns);
    }
    assert_eq!(counts.get("/sel/kept"), Some(&n), "{counts:?}");
    assert_eq!(counts.get("/sel/late"), Some(&n), "{counts:?}");
    assert!(!counts.contains_key("/sel/skip") && !counts.contains_key("/other"));

    // the first file replayed four times as fast with a simulated clock on /clock:
    // ticks go forward and stay within the bag's recorded time
    let first = report.files[0].clone();
    let info = read::info(&first).unwrap();
    let clock = node
        .subscriber::<nerve_msgs::Clock>("/clock")
        .qos(Qos::sensor().depth(4096))
        .create()
        .unwrap();
    let opts = PlayOptions {
        rate: 4.0,
        clock_hz: Some(500.0),
        remap: vec![("/sel/kept".into(), "/sel/kept_replay".into())],
        ..PlayOptions::default()
    };
    let play = {
        let (path, opts) = (first.clone(), opts.clone());
        std::thread::spawn(move || {
            let ctx = Context::new(config("bag-selection")).unwrap();
            Player::new().play(&ctx, &path, &opts, |_| {})
        })
    };
    // read while it plays (the player's samples go with its publisher)
    let mut ticks = Vec::new();
    loop {
        let done = play.is_finished();
        while let Some(c) = clock.try_recv().unwrap() {
            ticks.push(c.clock.nanos as u64);
        }
        if done {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let replay = play.join().unwrap().unwrap();
    assert!(replay.clock_ticks > 0);
    assert!(!ticks.is_empty());
    assert!(
        ticks.windows(2).all(|w| w[0] <= w[1]),
        "the clock goes forward"
    );
    assert!(
        ticks[0] >= info.start_ns && *ticks.last().unwrap() <= info.end_ns,
        "clock {}..{} within the bag's {}..{}",
        ticks[0],
        ticks.last().unwrap(),
        info.start_ns,
        info.end_ns
    );

    // replay errors name the topic: a remapping of a topic the bag does not have, and a
    // live topic of another type
    let replay_error = |from: &str, to: &str| {
        let opts = PlayOptions {
            remap: vec![(from.into(), to.into())],
            ..PlayOptions::default()
        };
        let e = Player::new().play(&ctx, &first, &opts, |_| {}).unwrap_err();
        e.to_string()
    };
    let e = replay_error("/nope", "/x");
    assert!(e.contains("/nope"), "{e}");
    let _clash = node
        .publisher::<nerve_msgs::CmdVel>("/sel/clash")
        .create()
        .unwrap();
    let e = replay_error("/sel/kept", "/sel/clash");
    assert!(e.contains("/sel/clash") && e.contains("CmdVel"), "{e}");
}

#[test]
fn foxglove_schemas_are_written_on_request_and_decode_with_foxglove_types() {
    use foxglove::Decode;
    let ctx = Context::new(config("bag-foxglove")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fox.mcap");
    let node = ctx.node("sensors").create().unwrap();
    let clouds = node
        .publisher::<PointCloud>("/fox/points")
        .create()
        .unwrap();
    let imus = node.publisher::<Imu>("/fox/imu").create().unwrap();
    let mut opts = RecordOptions::new(&path);
    opts.schemas = nerve_bag::encoding::Schemas::Foxglove;
    let rec = Recorder::start(&ctx, opts).unwrap();
    wait_recording(&rec, 2);
    assert!(clouds.wait_for_subscribers(1, Duration::from_secs(5)));
    assert!(imus.wait_for_subscribers(1, Duration::from_secs(5)));
    let data: Vec<u8> = (0..24u8).collect();
    let mut loan = clouds.loan_slice(data.len()).unwrap();
    {
        let h = loan.head_mut();
        h.header.stamp = Time {
            nanos: 1_700_000_000_250_000_000,
        };
        h.header.frame_id = nerve_msgs::FixedStr::new("lidar").unwrap();
        (h.width, h.height, h.point_step, h.row_step) = (2, 1, 12, 24);
        h.set_fields(&[
            PointCloud::field("x", 0, nerve_msgs::datatype::FLOAT32, 1),
            PointCloud::field("y", 4, nerve_msgs::datatype::FLOAT32, 1),
            PointCloud::field("z", 8, nerve_msgs::datatype::FLOAT32, 1),
        ])
        .unwrap();
    }
    loan.elems_mut().copy_from_slice(&data);
    loan.send().unwrap();
    imus.publish(&imu(1)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    rec.stop().unwrap();

    let m = Mapped::open(&path).unwrap();
    let mut seen = 0;
    read::scan(&path, &m, |msg| {
        let schema = msg.channel.schema.as_ref().unwrap();
        match msg.channel.topic.as_str() {
            "/fox/points" => {
                assert_eq!(schema.name, "foxglove.PointCloud");
                assert_eq!(
                    (
                        schema.encoding.as_str(),
                        msg.channel.message_encoding.as_str()
                    ),
                    ("protobuf", "protobuf")
                );
                let c = foxglove::messages::PointCloud::decode(&msg.data[..]).unwrap();
                assert_eq!(c.frame_id, "lidar");
                assert_eq!(c.point_stride, 12);
                let names: Vec<_> = c.fields.iter().map(|f| f.name.as_str()).collect();
                assert_eq!(names, ["x", "y", "z"]);
                assert_eq!(&c.data[..], &data[..]);
                let t = c.timestamp.unwrap();
                assert_eq!((t.sec(), t.nsec()), (1_700_000_000, 250_000_000));
            }
            // no Foxglove schema for Imu: its ROS 2 form
            "/fox/imu" => assert_eq!(schema.name, "sensor_msgs/msg/Imu"),
            t => panic!("unexpected topic {t}"),
        }
        seen += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(seen, 2);

    // replay takes the CDR channels and says why it leaves the others
    let report = Player::new()
        .play(&ctx, &path, &PlayOptions::default(), |_| {})
        .unwrap();
    assert_eq!(report.published.get("/fox/imu"), Some(&1));
    assert!(
        report.skipped["/fox/points"].contains("protobuf"),
        "{:?}",
        report.skipped
    );
}

#[test]
fn a_stop_during_a_long_gap_ends_the_replay_without_waiting_for_the_next_message() {
    // a bag of two Imu messages a day apart, written directly
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gap.mcap");
    let enc = Encoding::for_schema(&Schema::of::<Imu>()).unwrap();
    {
        let f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let mut w = mcap::WriteOptions::new().profile("ros2").create(f).unwrap();
        let schema = w
            .add_schema(&enc.schema_name, enc.schema_encoding, &enc.schema_data)
            .unwrap();
        let mut meta = std::collections::BTreeMap::new();
        meta.insert(
            nerve_bag::meta::SCHEMA.to_string(),
            Schema::of::<Imu>().encode(),
        );
        let ch = w
            .add_channel(schema, "/gap/imu", enc.message_encoding, &meta)
            .unwrap();
        let mut cdr = Vec::new();
        for (i, t) in [
            (0u64, 1_000_000_000u64),
            (1, 1_000_000_000 + 86_400_000_000_000),
        ] {
            enc.encode(nerve::message::as_bytes(&imu(i)), &mut cdr)
                .unwrap();
            let header = mcap::records::MessageHeader {
                channel_id: ch,
                sequence: i as u32,
                log_time: t,
                publish_time: t,
            };
            w.write_to_known_channel(&header, &cdr).unwrap();
        }
        w.finish().unwrap();
    }
    let ctx = Context::new(config("bag-gap")).unwrap();
    let player = Player::new();
    let stopper = player.clone();
    let (done_tx, done) = std::sync::mpsc::channel();
    let (first_tx, first) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let ctx = Context::new(config("bag-gap")).unwrap();
        let report = player.play(&ctx, &path, &PlayOptions::default(), |p| {
            if p.published == 1 {
                let _ = first_tx.send(());
            }
        });
        let _ = done_tx.send(report);
    });
    // stopped once the first message is out (the progress of the first publication)
    first
        .recv_timeout(Duration::from_secs(600))
        .expect("the first message was published");
    stopper.stop();
    // the first message went out, the stop came in the gap: the replay ends without the
    // second message (a replay that waited for it would sleep a day: the watchdog is only
    // there so that such a bug fails instead of hanging)
    let report = done
        .recv_timeout(Duration::from_secs(600))
        .expect("the stopped replay ended instead of sleeping until the next message")
        .unwrap();
    assert!(report.interrupted);
    assert_eq!(report.published.get("/gap/imu"), Some(&1));
    drop(ctx);
}

#[test]
fn a_recorder_on_simulation_time_stamps_with_it() {
    // a simulation time far from the wall clock: 1000 s after the epoch
    const SIM: u64 = 1_000_000_000_000;
    let mut sim = config("bag-sim-stamps");
    sim.sim_time = true;
    let rec_ctx = Context::new(sim).unwrap();
    let ctx = Context::new(config("bag-sim-stamps")).unwrap();
    let node = ctx.node("sim").create().unwrap();
    let clock = node
        .publisher::<nerve_msgs::Clock>("/clock")
        .qos(Qos::sensor())
        .create()
        .unwrap();
    let imus = node.publisher::<Imu>("/sim/imu").create().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sim.mcap");
    let mut opts = RecordOptions::new(&path);
    opts.selection.all = false;
    opts.selection.topics = vec!["/sim/imu".into()];
    let rec = Recorder::start(&rec_ctx, opts).unwrap();
    wait_recording(&rec, 1);
    assert!(imus.wait_for_subscribers(1, Duration::from_secs(5)));
    // the recorder's clock follows /clock (a watchdog bounds the wait, nothing is timed)
    let end = Instant::now() + Duration::from_secs(120);
    while rec_ctx.clock().now_ns() != SIM as i64 {
        assert!(Instant::now() < end, "the simulation clock started");
        clock
            .publish(&nerve_msgs::Clock {
                clock: Time { nanos: SIM as i64 },
            })
            .unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    for i in 0..10 {
        imus.publish(&imu(i)).unwrap();
    }
    while rec.stats().iter().map(|t| t.written).sum::<u64>() < 10 {
        assert!(Instant::now() < end, "the recorder wrote the samples");
        std::thread::sleep(Duration::from_millis(10));
    }
    rec.stop().unwrap();
    let m = Mapped::open(&path).unwrap();
    let mut times = Vec::new();
    read::scan(&path, &m, |msg| {
        times.push(msg.log_time);
        Ok(())
    })
    .unwrap();
    assert_eq!(times, vec![SIM; 10], "stamped with the simulation time");
}
