//! Feeds arbitrary bytes to the launch file loader (through a file, as `nerve launch`
//! reads one): it must never panic, and a refusal must say what is wrong.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("nerve-fuzz-{}.launch.toml", std::process::id()));
    std::fs::write(&path, data).expect("write the input");
    if let Err(e) = nerve_launch::LaunchFile::load(&path, &[("robot", "r1")]) {
        assert!(!e.to_string().is_empty());
    }
});
