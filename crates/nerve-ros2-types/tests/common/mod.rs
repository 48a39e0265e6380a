#![allow(dead_code)]

use std::path::{Path, PathBuf};

use nerve_ros2_types::{Registry, SearchPath};

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

pub fn fixture_search_path() -> SearchPath {
    let mut sp = SearchPath::new();
    sp.push_share_dir(fixtures().join("share"));
    sp
}

/// A registry with `names` loaded from the fixture share directory.
pub fn registry(names: &[&str]) -> Registry {
    let sp = fixture_search_path();
    let mut reg = Registry::new();
    for n in names {
        reg.load(n, &sp)
            .unwrap_or_else(|e| panic!("loading {n}: {e}"));
    }
    reg
}

pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Asserts `ours` equals `theirs[..ours.len()]` except at padding positions (where encoding
/// with two different padding bytes differs).
pub fn assert_eq_modulo_padding(ours_zero: &[u8], ours_ff: &[u8], theirs: &[u8], what: &str) {
    assert_eq!(ours_zero.len(), ours_ff.len());
    assert!(
        theirs.len() >= ours_zero.len(),
        "{what}: reference has {} bytes, we encoded {}",
        theirs.len(),
        ours_zero.len()
    );
    for i in 0..ours_zero.len() {
        let padding = ours_zero[i] != ours_ff[i];
        if !padding && ours_zero[i] != theirs[i] {
            panic!(
                "{what}: byte {i} differs: ours {:02x}, reference {:02x}\n ours: {}\n theirs: {}",
                ours_zero[i],
                theirs[i],
                hex(&ours_zero[..ours_zero.len().min(i + 16)]),
                hex(&theirs[..theirs.len().min(i + 16)])
            );
        }
    }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
