//! `include/nerve.h` is what cbindgen makes of the crate now: a stale header fails here.
//! `NERVE_BLESS=1 cargo test -p nerve-c --test header` rewrites it.

use std::path::Path;

#[test]
fn header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut out);
    let now = String::from_utf8(out).expect("UTF-8 header");
    let path = dir.join("include/nerve.h");
    if std::env::var_os("NERVE_BLESS").is_some() {
        std::fs::write(&path, &now).expect("write include/nerve.h");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == now,
        "include/nerve.h is stale: run `NERVE_BLESS=1 cargo test -p nerve-c --test header` \
         and commit the result"
    );
}
