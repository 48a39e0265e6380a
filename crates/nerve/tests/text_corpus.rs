//! Replays the fuzzers' corpora of text inputs (kept in the repository under
//! `fuzz/corpus/`) on stable Rust, in every test run: schemas from other processes, the
//! JSON the tools build messages from, and configuration files. Nothing may panic; what
//! is accepted is self-consistent; what is refused says why (and, for files, names the
//! file and the line). `cargo +nightly fuzz run <schema|json|config> fuzz/corpus/<name>`
//! grows a corpus.

use nerve::message::json::{from_json, to_json};
use nerve::message::schema::Schema;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The slice type of the `json` fuzz target (the same definition).
#[derive(Clone, Copy, nerve::Message)]
#[repr(C)]
#[message(name = "fuzz/Cloud", elem = f32)]
struct Cloud {
    stamp: i64,
    frame: [u8; 16],
    width: u32,
    height: u32,
    seq: u64,
}

/// Every file of corpus `name`, with its name and contents.
fn corpus(name: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(name);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the corpus {} is in the repository: {e}", dir.display()))
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 8,
        "corpus {name} holds {} files",
        files.len()
    );
    files
}

/// The first words of an error: what kind of refusal it is.
fn kind(e: &str) -> String {
    e.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

#[test]
fn every_schema_decodes_to_a_stable_schema_or_is_refused_with_a_reason() {
    let (mut accepted, mut refused) = (0, BTreeSet::new());
    for (_, bytes) in corpus("schema") {
        let Ok(text) = std::str::from_utf8(&bytes) else {
            continue;
        };
        match Schema::decode(text) {
            Ok(s) => {
                accepted += 1;
                assert_eq!(Schema::decode(&s.encode()).as_ref(), Ok(&s));
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                refused.insert(kind(&e.to_string()));
            }
        }
    }
    assert!(accepted >= 1, "the corpus holds schemas that decode");
    assert!(refused.len() >= 3, "ways of being wrong: {refused:?}");
}

#[test]
fn every_json_message_builds_and_shows_or_is_refused_naming_the_type() {
    let (mut built, mut refused) = (0, BTreeSet::new());
    for (name, bytes) in corpus("json") {
        let Ok(text) = std::str::from_utf8(&bytes) else {
            continue;
        };
        let (first, rest) = text.split_once('\n').unwrap_or(("", text));
        let schema = Schema::decode(first).unwrap_or_else(|_| Schema::of::<Cloud>());
        let Ok(value) = serde_json::from_str::<serde_json::Value>(rest) else {
            continue;
        };
        match from_json(&schema, &value) {
            Ok((bytes, _missing)) => {
                built += 1;
                let ty = schema.type_info();
                assert!(bytes.len() >= ty.head_size, "{name}");
                let elems = match ty.elem_size {
                    0 => 0,
                    n => (bytes.len() - ty.elems_offset().min(bytes.len())) / n,
                };
                assert!(to_json(&schema, &bytes, elems, 64).is_object(), "{name}");
            }
            Err(e) => {
                assert_eq!(e.type_name, schema.name, "{name}");
                refused.insert(e.reason.split(':').next().unwrap_or("").to_string());
            }
        }
    }
    assert!(built >= 1, "the corpus holds messages that build");
    assert!(refused.len() >= 2, "ways of being wrong: {refused:?}");
}

#[test]
fn every_config_file_parses_or_is_refused_naming_the_file() {
    let (mut parsed, mut refused) = (0, 0);
    for (name, bytes) in corpus("config") {
        let Ok(text) = std::str::from_utf8(&bytes) else {
            continue;
        };
        match nerve::Config::from_toml(&name, text) {
            Ok(_) => parsed += 1,
            Err(e) => {
                refused += 1;
                let e = e.to_string();
                assert!(e.contains(&name), "{e}");
            }
        }
    }
    assert!(
        parsed >= 1 && refused >= 3,
        "parsed {parsed}, refused {refused}"
    );
}
