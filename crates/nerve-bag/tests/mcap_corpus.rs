//! Replays the bag reader fuzzer's corpus (`fuzz/corpus/mcap`, kept in the repository)
//! on stable Rust, in every test run: each file is described and scanned, or refused
//! with a reason. Nothing may panic; a damaged file keeps what is whole and says where
//! it broke. `cargo +nightly fuzz run mcap fuzz/corpus/mcap` grows the corpus.

use nerve_bag::read::{info, scan, Mapped};
use std::path::PathBuf;

#[test]
fn every_bag_is_described_or_refused_with_a_reason() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/mcap");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the corpus is in the repository")
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 8, "corpus holds {} files", files.len());
    let (mut whole, mut damaged, mut refused) = (0, 0, 0);
    for f in &files {
        match info(f) {
            Ok(i) if i.complete => whole += 1,
            Ok(i) => {
                assert!(
                    i.damage.is_some(),
                    "{}: incomplete without a reason",
                    f.display()
                );
                damaged += 1;
            }
            Err(e) => {
                assert!(!e.to_string().is_empty(), "{}", f.display());
                refused += 1;
            }
        }
        if let Ok(m) = Mapped::open(f) {
            if let Ok((i, n)) = scan(f, &m, |_| Ok(())) {
                assert_eq!(i.messages, n);
            }
        }
    }
    assert!(whole >= 1, "the corpus holds whole bags");
    assert!(
        damaged + refused >= 3,
        "damaged {damaged}, refused {refused}"
    );
}
