//! Replays the launch fuzzer's corpus (`fuzz/corpus/launch`, kept in the repository) on
//! stable Rust, in every test run: each file loads into a plan or is refused with every
//! problem located in a file. Nothing may panic. `cargo +nightly fuzz run launch
//! fuzz/corpus/launch` grows the corpus.

use nerve_launch::{LaunchError, LaunchFile};
use std::path::PathBuf;

#[test]
fn every_launch_file_loads_or_is_refused_with_located_problems() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/launch");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the corpus is in the repository")
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 8, "corpus holds {} files", files.len());
    let (mut loaded, mut located, mut other) = (0, 0, 0);
    for f in &files {
        match LaunchFile::load(f, &[("robot", "r1")]) {
            Ok(_) => loaded += 1,
            Err(LaunchError::Invalid(problems)) => {
                assert!(!problems.is_empty(), "{}", f.display());
                for p in &problems {
                    assert!(!p.reason.is_empty(), "{}: {p}", f.display());
                    assert!(!p.file.as_os_str().is_empty(), "{p}");
                }
                located += 1;
            }
            Err(e) => {
                assert!(!e.to_string().is_empty(), "{}", f.display());
                other += 1;
            }
        }
    }
    assert!(loaded >= 1, "the corpus holds files that load");
    assert!(
        located >= 3,
        "refused with located problems: {located} (other {other})"
    );
}
