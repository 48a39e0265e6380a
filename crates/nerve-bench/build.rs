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
    cpp_peers();
}

/// Compiles the C++ bench peers (`cpp/peer.cpp`, over `nerve.hpp`) into this crate and
/// sets `cfg(nerve_bench_cpp)`; without a C++ compiler the C++ rows are skipped, with
/// the reason, instead of failing the build.
fn cpp_peers() {
    println!("cargo::rustc-check-cfg=cfg(nerve_bench_cpp)");
    println!("cargo:rerun-if-changed=cpp/peer.cpp");
    println!("cargo:rerun-if-changed=../nerve-c/include");
    let built = cc::Build::new()
        .cpp(true)
        .std("c++17")
        .include("../nerve-c/include")
        .file("cpp/peer.cpp")
        .warnings(true)
        .extra_warnings(true)
        .cargo_warnings(false)
        .try_compile("nerve_bench_cpp");
    match built {
        Ok(()) => println!("cargo:rustc-cfg=nerve_bench_cpp"),
        Err(e) => {
            println!("cargo:warning=C++ bench peers not built (the C++ rows will be skipped): {e}")
        }
    }
}
