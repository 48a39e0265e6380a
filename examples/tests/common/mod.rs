//! Shared by the cross-host tests: start `netprobe` roles on simulated hosts and read
//! their one-line JSON results.

use nerve_bench_harness::child::Child;
use nerve_bench_harness::hosts::SimHosts;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// One second.
pub const SECOND: Duration = Duration::from_secs(1);

/// Starts `netprobe args…` on `host` in `domain` and waits for its `ready`.
#[allow(dead_code)] // not every test binary uses every helper
pub fn start(sim: &SimHosts, host: usize, domain: &str, args: &[&str]) -> Child {
    start_env(sim, host, domain, args, &[])
}

/// [`start`] with more environment (`NERVE_POLICY`, say).
pub fn start_env(
    sim: &SimHosts,
    host: usize,
    domain: &str,
    args: &[&str],
    env: &[(&str, String)],
) -> Child {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_netprobe"));
    let mut full = vec![("NERVE_DOMAIN", domain.to_string())];
    full.extend(env.iter().cloned());
    let mut c = sim
        .spawn(host, &exe, &args, &full, "netprobe")
        .expect("spawn netprobe");
    c.expect("ready", 20 * SECOND).expect("netprobe ready");
    c
}

/// The role's JSON result line.
pub fn result(c: &mut Child, within: Duration) -> Value {
    let line = c.expect("{", within).expect("result line");
    serde_json::from_str(&line).expect("result json")
}
