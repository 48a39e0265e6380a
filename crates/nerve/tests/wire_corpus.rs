//! Replays the fuzzer's corpus (`fuzz/corpus/decode`, kept in the repository) through the
//! network frame decoders on stable Rust: nothing panics, and what is accepted is
//! self-consistent. `cargo +nightly fuzz run decode fuzz/corpus/decode` grows the corpus.
#![cfg(feature = "net")]

use nerve::net::{decode_call, decode_sample, seal, Kind, WireError};
use nerve::TypeInfo;

#[derive(Clone, Copy, nerve::Message)]
#[repr(C)]
#[message(name = "fuzz/Cloud", elem = f32)]
struct Cloud {
    width: u32,
    height: u32,
}

#[test]
fn every_corpus_frame_decodes_or_is_refused_by_name() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/decode");
    let types = [
        TypeInfo::of::<nerve::TransitionEvent>(),
        TypeInfo::of::<Cloud>(),
    ];
    let mut files = 0;
    let mut refused = std::collections::BTreeMap::<&str, usize>::new();
    for entry in std::fs::read_dir(&dir).expect("the corpus is in the repository") {
        let raw = std::fs::read(entry.unwrap().path()).unwrap();
        files += 1;
        // as it is, and sealed (as the fuzzer tries it)
        let mut sealed = raw.clone();
        seal(&mut sealed);
        for (ty, bytes) in types.iter().flat_map(|t| [(t, &raw), (t, &sealed)]) {
            match decode_sample(bytes, ty, 1 << 16) {
                Ok(f) => {
                    let len = f.header.payload_len as usize;
                    assert!(len >= ty.head_size && f.words.len() * 8 >= len);
                    assert_eq!(f.header.type_hash, ty.layout_hash);
                }
                Err(e) => *refused.entry(label(&e)).or_default() += 1,
            }
            for kind in [Kind::Request, Kind::Response] {
                if let Ok(f) = decode_call(bytes, kind, ty, 1 << 16) {
                    assert!(f.words.len() * 8 >= f.header.payload_len as usize);
                }
            }
        }
    }
    assert!(files >= 4, "corpus holds {files} files");
    // the corpus exercises more than one way of being wrong
    assert!(refused.len() >= 3, "{refused:?}");
}

fn label(e: &WireError) -> &'static str {
    e.label()
}
