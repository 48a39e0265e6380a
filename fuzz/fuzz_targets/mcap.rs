//! Feeds arbitrary bytes to the bag reader (through a file, as `nerve bag info` and
//! `nerve bag play` read one): describing and scanning must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nerve_bag::read::{info, scan, Mapped};

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("nerve-fuzz-{}.mcap", std::process::id()));
    std::fs::write(&path, data).expect("write the input");
    let _ = info(&path);
    if let Ok(m) = Mapped::open(&path) {
        let _ = scan(&path, &m, |_| Ok(()));
    }
});
