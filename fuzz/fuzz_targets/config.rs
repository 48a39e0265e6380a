//! Feeds arbitrary text to the configuration file parser: it must never panic, and a
//! refusal must name the file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = nerve::Config::from_toml("fuzz.toml", text) {
        assert!(e.to_string().contains("fuzz.toml"), "{e}");
    }
});
