//! Damaged bags: every reader the CLI's commands call (play, info, digest, diff, the
//! Foxglove bridge's `--bag`, `nerve replay`'s player) refuses them with an error naming
//! the file and the damage, unless told to tolerate it; then it reads what is readable
//! and says how much, of how many the file promised when that is known.

use nerve::message::schema::Schema;
use nerve::Config;
use nerve_bag::bridge::playback::BagServer;
use nerve_bag::compare::{self, CompareOptions};
use nerve_bag::encoding::Encoding;
use nerve_bag::play::{PlayOptions, Player};
use nerve_bag::read::{self, Damage, OnDamage};
use nerve_bag::BagError;
use nerve_msgs::{Imu, Time};
use std::path::{Path, PathBuf};

/// Messages in the whole bag.
const MESSAGES: u64 = 594;

fn config(tag: &str) -> Config {
    let h = nerve::message::layout::hash_str(nerve::message::layout::FNV_OFFSET, tag);
    let domain = 750 + (h % 100) as u32;
    let dir = std::env::temp_dir().join("nerve-tests/");
    Config::default().domain(domain).unwrap().state_dir(dir)
}

/// A complete bag of [`MESSAGES`] Imu messages 10 µs apart on `/damage/imu`, in chunks
/// of about 4 KiB (so that a cut leaves whole chunks before it).
fn whole_bag(path: &Path) -> Vec<u8> {
    let enc = Encoding::for_schema(&Schema::of::<Imu>()).unwrap();
    let f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = mcap::WriteOptions::new()
        .profile("ros2")
        .chunk_size(Some(4096))
        .create(f)
        .unwrap();
    let schema = w
        .add_schema(&enc.schema_name, enc.schema_encoding, &enc.schema_data)
        .unwrap();
    let mut meta = std::collections::BTreeMap::new();
    meta.insert(
        nerve_bag::meta::SCHEMA.to_string(),
        Schema::of::<Imu>().encode(),
    );
    let ch = w
        .add_channel(schema, "/damage/imu", enc.message_encoding, &meta)
        .unwrap();
    let mut cdr = Vec::new();
    for i in 0..MESSAGES {
        let imu = Imu {
            stamp: Time { nanos: i as i64 },
            orientation_covariance: [i as f64; 9],
            ..Default::default()
        };
        enc.encode(nerve::message::as_bytes(&imu), &mut cdr)
            .unwrap();
        let t = 1_000_000_000 + i * 10_000;
        let header = mcap::records::MessageHeader {
            channel_id: ch,
            sequence: i as u32 + 1,
            log_time: t,
            publish_time: t,
        };
        w.write_to_known_channel(&header, &cdr).unwrap();
    }
    w.finish().unwrap();
    drop(w);
    std::fs::read(path).unwrap()
}

/// The damaged copies of a whole bag's `bytes`, in `dir`: (file, what its damage says,
/// messages readable, messages promised as far as the damaged file still tells).
fn damaged_copies(dir: &Path, bytes: &[u8]) -> Vec<(PathBuf, &'static str, Option<u64>)> {
    let write = |name: &str, b: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, b).unwrap();
        p
    };
    let mut junk = mcap::MAGIC.to_vec();
    junk.extend((0..200u32).map(|i| (i * 7 + 3) as u8));
    vec![
        // cut in half: the whole chunks before the cut are readable
        (
            write("half.mcap", &bytes[..bytes.len() / 2]),
            "unreadable after",
            None,
        ),
        // a stub: the magic and a few bytes
        (write("stub.mcap", &bytes[..30]), "unreadable after 0", None),
        // junk after the magic
        (write("junk.mcap", &junk), "unreadable after 0", None),
        // the last 40 bytes missing: the footer and the end magic; every message is
        // there, and the summary's statistics still say how many
        (
            write("short.mcap", &bytes[..bytes.len() - 40]),
            "no summary or footer",
            Some(MESSAGES),
        ),
    ]
}

/// The damage a refusal carries, checked to name the file and what is wrong.
fn refused(r: Result<impl std::fmt::Debug, BagError>, file: &Path, what: &str) -> Damage {
    let e = r.expect_err("a damaged bag is refused");
    let text = e.to_string();
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(text.contains(name), "names the file: {text}");
    assert!(text.contains(what), "says what is wrong ({what}): {text}");
    assert!(
        text.contains("--tolerate-damage"),
        "says how to go on: {text}"
    );
    match e {
        BagError::Damaged(d) => d,
        e => panic!("not a damage error: {e:?}"),
    }
}

#[test]
fn damaged_bags_are_refused_by_every_reader_unless_tolerated() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole.mcap");
    let bytes = whole_bag(&whole);
    let ctx = nerve::Context::new(config("bag-damage-refused")).unwrap();
    for (file, what, promised) in damaged_copies(dir.path(), &bytes) {
        let label = file.display().to_string();
        // refused: each entry point of `nerve bag play|info|digest|diff`, `nerve replay`
        // and `nerve bridge foxglove --bag`
        let d = refused(
            read::open_bag(&file, OnDamage::Refuse).map(|_| ()),
            &file,
            what,
        );
        let readable = d.read;
        assert!(readable < MESSAGES || promised.is_some(), "{label}: {d}");
        assert_eq!(d.promised, promised, "{label}: {d}");
        if let Some(n) = promised {
            assert_eq!(readable, n, "{label}: every message is there: {d}");
            assert!(
                d.to_string()
                    .contains(&format!("{n} of {n} messages readable")),
                "{d}"
            );
        }
        let play = Player::new().play(&ctx, &file, &PlayOptions::default(), |_| {});
        assert_eq!(refused(play, &file, what), d, "{label}");
        refused(read::info_checked(&file, OnDamage::Refuse), &file, what);
        refused(compare::digest(&file), &file, what);
        let cmp = compare::compare(&whole, &file, &CompareOptions::default());
        refused(cmp, &file, what);
        let served = BagServer::start(&file, "127.0.0.1", 0, 16, OnDamage::Refuse).map(|_| ());
        refused(served, &file, what);

        // tolerated: what is readable is read, and the damage reported with the counts
        let opts = PlayOptions {
            on_damage: OnDamage::Tolerate,
            ..PlayOptions::default()
        };
        let report = Player::new().play(&ctx, &file, &opts, |_| {}).unwrap();
        let played: u64 = report.published.values().sum();
        assert_eq!(played, readable, "{label}: played what is readable");
        assert_eq!(report.damage, vec![d.clone()], "{label}");
        let info = read::info_checked(&file, OnDamage::Tolerate).unwrap();
        assert_eq!(info.messages, readable, "{label}");
        assert_eq!(info.damage.as_ref().map(|d| d.read), Some(readable));
        let (topics, damage) = compare::digest_checked(&file, OnDamage::Tolerate).unwrap();
        assert_eq!(topics.iter().map(|t| t.messages).sum::<u64>(), readable);
        assert_eq!(damage, vec![d.clone()], "{label}");
        let opts = CompareOptions {
            on_damage: OnDamage::Tolerate,
            ..CompareOptions::default()
        };
        let cmp = compare::compare(&file, &file, &opts).unwrap();
        assert!(cmp.identical(), "{label}");
        assert_eq!(cmp.damage, vec![d.clone(), d.clone()], "{label}");
        let server = BagServer::start(&file, "127.0.0.1", 0, 16, OnDamage::Tolerate).unwrap();
        assert_eq!(server.damage(), vec![d.clone()], "{label}");
        server.stop();
    }
    // the whole bag is read whole
    assert!(read::open_bag(&whole, OnDamage::Refuse).unwrap()[0]
        .damage
        .is_none());
    let (topics, damage) = compare::digest_checked(&whole, OnDamage::Refuse).unwrap();
    assert_eq!((topics[0].messages, damage.len()), (MESSAGES, 0));
}

#[test]
fn a_record_found_unreadable_while_reading_ends_a_refusing_reader() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole.mcap");
    let mut bytes = whole_bag(&whole);
    // a flipped byte in the middle of the fifth chunk: its CRC no longer matches, which
    // only reading the messages finds (the summary is whole)
    let summary = mcap::Summary::read(&bytes).unwrap().unwrap();
    let chunk = &summary.chunk_indexes[4];
    let mid = (chunk.chunk_start_offset + chunk.chunk_length / 2) as usize;
    bytes[mid] ^= 0xff;
    let bad = dir.path().join("flipped.mcap");
    std::fs::write(&bad, &bytes).unwrap();
    let ctx = nerve::Context::new(config("bag-damage-flipped")).unwrap();

    let play = Player::new().play(&ctx, &bad, &PlayOptions::default(), |_| {});
    let d = refused(play, &bad, "unreadable after");
    // the messages of the four whole chunks before it were read, of all the summary
    // promised
    assert_eq!(d.promised, Some(MESSAGES), "{d}");
    assert!(d.read > 0 && d.read < MESSAGES, "{d}");
    assert!(
        d.to_string()
            .contains(&format!("{} of {MESSAGES} messages readable", d.read)),
        "{d}"
    );
    assert_eq!(refused(compare::digest(&bad), &bad, "unreadable after"), d);

    let opts = PlayOptions {
        on_damage: OnDamage::Tolerate,
        ..PlayOptions::default()
    };
    let report = Player::new().play(&ctx, &bad, &opts, |_| {}).unwrap();
    assert_eq!(report.published.values().sum::<u64>(), d.read);
    assert_eq!(report.damage, vec![d.clone()]);
    let (topics, damage) = compare::digest_checked(&bad, OnDamage::Tolerate).unwrap();
    assert_eq!((topics[0].messages, damage), (d.read, vec![d.clone()]));
}
