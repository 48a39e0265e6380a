//! Records the versions of the peers compiled in (from the workspace's Cargo.lock) and of
//! the compiler, for the reports.

fn main() {
    let lock = std::fs::read_to_string("../../Cargo.lock").unwrap_or_default();
    for (krate, var) in [
        ("iceoryx2", "NERVE_BENCH_ICEORYX2"),
        ("zenoh", "NERVE_BENCH_ZENOH"),
    ] {
        let version = lock
            .split("[[package]]")
            .find(|p| p.contains(&format!("name = \"{krate}\"\n")))
            .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = ")))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_else(|| "unknown".into());
        println!("cargo:rustc-env={var}={version}");
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("-V")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=NERVE_BENCH_RUSTC={version}");
    println!("cargo:rerun-if-changed=../../Cargo.lock");
}
