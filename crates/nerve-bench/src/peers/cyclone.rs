//! Cyclone DDS (ROS 2's default DDS) measured with its own ping/pong tool, `ddsperf`
//! (Debian package `cyclonedds-tools`, 0.10.2), run as two processes.
//!
//! `ddsperf pong` answers every ping sample with the same sample; `ddsperf ping size S` sends
//! a new ping as soon as the previous pong arrived (reliable, keep-last-1, topic `KS`: a
//! sequence number, a key and a sequence of octets, `S` bytes in all) and prints one
//! statistics line per second:
//!
//! ```text
//! [4140] 3.000  vm:4125 size 1024 mean 19.449us min 11.375us 50% 18.028us 90% 28.202us 99% 50.153us max 2073.179us cnt 25597
//! ```
//!
//! i.e. `[pid] <seconds since start> <host:pid of the pong> size <S> mean <t> min <t> 50% <t>
//! 90% <t> 99% <t> max <t> cnt <roundtrips>`. **Every time on that line is half a round trip**:
//! ddsperf 0.10 records `(t_pong_received - t_ping_sent) / 2` per roundtrip (it reports
//! one-way latency). `cnt * mean * 2` therefore fills the interval (e.g. 25597 x 2 x 19.449 us
//! = 0.996 s above). The statistics are reset every interval; the percentiles of an interval
//! are taken over its first 20,000 roundtrips only (ddsperf's `PINGPONG_RAWSIZE`), while
//! mean, min, max and cnt cover all of them. ddsperf 0.10.2 prints no 99.9th percentile,
//! also not with `-X` (which only adds `discarded/rexmit/...` lines).
//!
//! Both processes run with [`CYCLONEDDS_URI`] (loopback interface only, no multicast, unicast
//! discovery to 127.0.0.1) in a private domain (`-i ID`). What ddsperf does NOT do compared to
//! the other systems here: it neither writes nor checks the payload per call (the ping re-sends
//! the sample it received, the pong echoes the sample it took), so it does slightly less work;
//! serialisation and deserialisation still copy every byte on both sides.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::harness::PeerError;

/// System name used in errors.
const SYSTEM: &str = "cyclonedds";

/// Cyclone DDS configuration used for both processes (passed as `CYCLONEDDS_URI`, replacing
/// any inherited value): only the `lo` interface, multicast disallowed, SPDP discovery by
/// unicast to the well-known ports of 127.0.0.1 with automatic participant indices. Verified
/// with Cyclone's config trace on a machine that also has an `eth0`: "selected interfaces:
/// lo", "ownip: udp/127.0.0.1", peers `udp/127.0.0.1:<7400 + 250 * domain + 10 + 2 * i>`.
pub const CYCLONEDDS_URI: &str = concat!(
    r#"<CycloneDDS><Domain Id="any"><General>"#,
    r#"<Interfaces><NetworkInterface name="lo"/></Interfaces>"#,
    r#"<AllowMulticast>false</AllowMulticast></General>"#,
    r#"<Discovery><Peers><Peer address="127.0.0.1"/></Peers>"#,
    r#"<ParticipantIndex>auto</ParticipantIndex></Discovery>"#,
    r#"</Domain></CycloneDDS>"#
);

/// Highest domain id whose RTPS port numbers (7400 + 250 * id + ...) fit in 16 bits.
const MAX_DOMAIN: u32 = 232;
/// Smallest `size` ddsperf accepts for the `KS` topic (its fixed part).
const MIN_SIZE: usize = 12;
/// How long the ping waits for the pong to be discovered (`-Qinitwait`), in seconds.
const INITWAIT_S: u64 = 10;
/// Seconds of ping run time before the measured intervals: about 1 s until the first ping,
/// then the first (warm-up) interval, which is skipped.
const WARMUP_S: u64 = 2;
/// Extra time the ping process gets beyond its own `-D` before it is killed.
const PING_GRACE: Duration = Duration::from_secs(15);
/// Extra run time of the pong (its own `-D`), so it ends by itself even if we die.
const PONG_EXTRA_S: u64 = 30;
/// How long a terminated pong gets to exit before it is killed.
const PONG_TERM_WAIT: Duration = Duration::from_secs(2);
/// Tail of the output quoted in errors.
const TAIL_CHARS: usize = 1500;

fn setup(reason: String) -> PeerError {
    PeerError::setup(SYSTEM, reason)
}

fn call_err(reason: String) -> PeerError {
    PeerError::call(SYSTEM, reason)
}

/// Finds `ddsperf` on `PATH`.
///
/// Errors with "ddsperf not found: install Debian package cyclonedds-tools" if it is not there.
pub fn locate() -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join("ddsperf");
        if is_executable(&candidate) {
            return Ok(candidate);
        }
    }
    Err("ddsperf not found on PATH: install Debian package cyclonedds-tools".into())
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// One ddsperf ping/pong measurement.
#[derive(Debug, Clone)]
pub struct DdsperfRun {
    /// Sample size passed as `ping size S`: the whole `KS` sample (4-byte sequence number,
    /// 4-byte key, 4-byte octet-sequence length, `S - 12` octets), so the bytes ddsperf carries
    /// per message equal this. At least 12.
    pub payload_bytes: usize,
    /// Measured time: ping runs `ceil(duration) + 2` s (`-D`); the first statistics interval
    /// (start-up and discovery) is skipped, so about `duration` of intervals remain.
    pub duration: Duration,
    /// Private DDS domain id (`-i`), at most 232.
    pub domain: u32,
    /// CPU to pin the ping (client) process to, with `sched_setaffinity` before `exec`.
    pub client_cpu: Option<usize>,
    /// CPU to pin the pong (server) process to.
    pub server_cpu: Option<usize>,
    /// Pings per second (`ping R Hz`); `None` pings as soon as the pong came back.
    pub rate_hz: Option<u32>,
    /// Where ping and pong run: on this host over loopback (`None`), or each through its
    /// own launcher (simulated hosts).
    pub hosts: Option<[Launch; 2]>,
}

/// How a ddsperf process is started on another (simulated) host.
#[derive(Clone, Debug, Default)]
pub struct Launch {
    /// Program and leading arguments; ddsperf and its arguments follow.
    pub wrapper: (PathBuf, Vec<String>),
    /// Environment added.
    pub env: Vec<(String, String)>,
    /// The Cyclone configuration for that host (replaces [`CYCLONEDDS_URI`]).
    pub uri: String,
}

/// A Cyclone configuration for a host whose only network interface is `iface`, with
/// unicast discovery of `peers`.
pub fn host_uri(iface: &str, peers: &[&str]) -> String {
    let peers: String = peers
        .iter()
        .map(|p| format!(r#"<Peer address="{p}"/>"#))
        .collect();
    format!(
        r#"<CycloneDDS><Domain Id="any"><General><Interfaces><NetworkInterface name="{iface}"/></Interfaces><AllowMulticast>false</AllowMulticast></General><Discovery><Peers>{peers}</Peers><ParticipantIndex>auto</ParticipantIndex></Discovery></Domain></CycloneDDS>"#
    )
}

/// Round-trip figures of one ddsperf run, combined from its per-interval statistics lines.
///
/// ddsperf prints half round trips; every time below has been multiplied by 2, so all times
/// are **round-trip times** in microseconds. The first statistics interval (start-up,
/// discovery) is skipped; `intervals` counts the remaining ones.
#[derive(Debug, Clone)]
pub struct DdsperfResult {
    /// Sum of the `cnt` fields: exact number of roundtrips in the kept intervals.
    pub roundtrips: u64,
    /// Timestamp of the last kept interval minus timestamp of the skipped first one (the
    /// timestamps mark interval ends, in seconds since the ping started).
    pub seconds: f64,
    /// Count-weighted mean of the interval means, x2: the exact mean round trip (each interval
    /// mean is its sum divided by its count).
    pub avg_us: f64,
    /// Count-weighted mean of the intervals' 50th percentiles, x2. An approximation of the
    /// run's median: percentiles do not combine exactly, and each interval's percentiles cover
    /// only its first 20,000 roundtrips.
    pub p50_us: f64,
    /// Count-weighted mean of the intervals' 90th percentiles, x2 (approximation, as `p50_us`).
    pub p90_us: f64,
    /// Count-weighted mean of the intervals' 99th percentiles, x2 (approximation, as `p50_us`).
    pub p99_us: f64,
    /// Same for a `99.9%` field if the ddsperf version prints one; `None` with 0.10.2, which
    /// does not.
    pub p999_us: Option<f64>,
    /// Largest interval maximum, x2: the exact slowest round trip of the kept intervals.
    pub max_us: f64,
    /// Number of statistics intervals combined (the warm-up interval excluded).
    pub intervals: usize,
    /// Complete stdout + stderr of the ping process.
    pub raw: String,
}

/// A child process with its merged stdout/stderr being collected by a thread.
struct Proc {
    child: Child,
    reader: Option<JoinHandle<String>>,
}

impl Proc {
    fn spawn(
        exe: &Path,
        args: &[String],
        cpu: Option<usize>,
        what: &str,
        launch: Option<&Launch>,
    ) -> Result<Proc, PeerError> {
        let mut cmd = match launch {
            None => {
                let mut c = Command::new(exe);
                c.env("CYCLONEDDS_URI", CYCLONEDDS_URI);
                c
            }
            Some(l) => {
                let mut c = Command::new(&l.wrapper.0);
                c.args(&l.wrapper.1)
                    .arg(exe)
                    .envs(l.env.iter().map(|(k, v)| (k, v)))
                    .env("CYCLONEDDS_URI", &l.uri);
                c
            }
        };
        cmd.args(args).stdin(Stdio::null());
        let (mut out, writer) =
            std::io::pipe().map_err(|e| setup(format!("cannot create a pipe for {what}: {e}")))?;
        let writer2 = writer
            .try_clone()
            .map_err(|e| setup(format!("cannot duplicate a pipe for {what}: {e}")))?;
        cmd.stdout(writer).stderr(writer2);
        if let Some(cpu) = cpu {
            let set = cpu_set(cpu)?;
            // SAFETY: the closure runs in the forked child before exec; it only calls
            // sched_setaffinity (an async-signal-safe system call) on a cpu_set_t that was
            // fully built before the fork, and allocates nothing.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().map_err(|e| {
            let pinned = cpu
                .map(|c| format!(" pinned to CPU {c}"))
                .unwrap_or_default();
            setup(format!(
                "cannot start {what}{pinned} ({}): {e}",
                exe.display()
            ))
        })?;
        // `cmd` still holds the write ends; drop them so the reader sees EOF at child exit.
        drop(cmd);
        let reader = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = out.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        });
        Ok(Proc {
            child,
            reader: Some(reader),
        })
    }

    /// Waits for exit, at most until `deadline`; kills the process past it.
    fn wait_until(&mut self, deadline: Instant) -> Result<(ExitStatus, bool), PeerError> {
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok((status, false)),
                Ok(None) if Instant::now() >= deadline => {
                    let _ = self.child.kill();
                    let status = self
                        .child
                        .wait()
                        .map_err(|e| call_err(format!("waiting for a killed ddsperf: {e}")))?;
                    return Ok((status, true));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(call_err(format!("waiting for ddsperf: {e}"))),
            }
        }
    }

    /// Output collected so far; only complete once the process has exited.
    fn output(&mut self) -> String {
        self.reader
            .take()
            .and_then(|r| r.join().ok())
            .unwrap_or_default()
    }

    /// SIGTERM, up to 2 s grace, then SIGKILL; always reaps the process.
    fn terminate(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: plain kill(2) on the pid of our own child, which has not been reaped
            // yet (try_wait above returned no status), so the pid cannot have been reused.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let _ = self.wait_until(Instant::now() + PONG_TERM_WAIT);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.terminate();
        // The pipe reaches EOF once the process is gone, so this join cannot block for long.
        let _ = self.output();
    }
}

fn cpu_set(cpu: usize) -> Result<libc::cpu_set_t, PeerError> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(setup(format!("CPU {cpu} is out of range")));
    }
    // SAFETY: cpu_set_t is a plain bit array, for which all-zero bytes is a valid (empty)
    // value; CPU_ZERO/CPU_SET only write inside it and `cpu` was checked against CPU_SETSIZE.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        set
    };
    Ok(set)
}

/// Runs `ddsperf pong` and `ddsperf ping size S` as two processes and combines the ping's
/// statistics (see [`DdsperfResult`] for how each figure is derived).
///
/// Command lines (both with [`CYCLONEDDS_URI`]):
/// - `ddsperf -i <domain> -D <ping D + 30> pong`, pinned to `server_cpu`; it ends by itself,
///   and is in any case terminated (SIGTERM, then SIGKILL after 2 s) and reaped when this
///   returns, also on errors;
/// - `ddsperf -i <domain> -Qminmatch:1 -Qinitwait:10 -D <ceil(duration) + 2> ping size <S>`,
///   pinned to `client_cpu`, killed if it runs 15 s past its `-D`. It fails (exit 1) if the
///   pong is not discovered within 10 s.
///
/// Triggering mode is ddsperf's default (listener: the ping/pong handlers run on Cyclone's
/// receive thread); `waitset` adds a thread hand-over and measured slower here.
pub fn run(exe: &Path, cfg: &DdsperfRun) -> Result<DdsperfResult, PeerError> {
    if cfg.domain > MAX_DOMAIN {
        return Err(setup(format!(
            "domain id {} is above {MAX_DOMAIN} (RTPS ports would overflow)",
            cfg.domain
        )));
    }
    if cfg.payload_bytes < MIN_SIZE || u32::try_from(cfg.payload_bytes).is_err() {
        return Err(setup(format!(
            "ddsperf sample size {} is out of range ({MIN_SIZE} .. 4 GiB)",
            cfg.payload_bytes
        )));
    }
    let measured_s = cfg.duration.as_secs() + u64::from(cfg.duration.subsec_nanos() > 0);
    let ping_s = measured_s.max(1) + WARMUP_S;
    let domain = cfg.domain.to_string();

    let pong_args = [
        "-i".to_string(),
        domain.clone(),
        "-D".into(),
        (ping_s + INITWAIT_S + PONG_EXTRA_S).to_string(),
        "pong".into(),
    ];
    let launch = |i: usize| cfg.hosts.as_ref().map(|h| &h[i]);
    let mut pong = Proc::spawn(exe, &pong_args, cfg.server_cpu, "ddsperf pong", launch(0))?;

    let ping_args = [
        "-i".to_string(),
        domain,
        "-Qminmatch:1".into(),
        format!("-Qinitwait:{INITWAIT_S}"),
        "-D".into(),
        ping_s.to_string(),
        "ping".into(),
    ]
    .into_iter()
    .chain(cfg.rate_hz.map(|r| format!("{r}Hz")))
    .chain(["size".into(), cfg.payload_bytes.to_string()])
    .collect::<Vec<String>>();
    let mut ping = Proc::spawn(exe, &ping_args, cfg.client_cpu, "ddsperf ping", launch(1))?;
    let deadline = Instant::now() + Duration::from_secs(ping_s + INITWAIT_S) + PING_GRACE;
    let (status, killed) = ping.wait_until(deadline)?;
    let raw = ping.output();
    pong.terminate();
    let pong_out = pong.output();

    if killed {
        return Err(call_err(format!(
            "ddsperf ping did not finish in time and was killed; output tail:\n{}",
            tail(&raw)
        )));
    }
    if !status.success() {
        return Err(call_err(format!(
            "ddsperf ping exited with {status}; output tail:\n{}\npong output tail:\n{}",
            tail(&raw),
            tail(&pong_out)
        )));
    }
    parse(&raw).map_err(call_err)
}

/// The last [`TAIL_CHARS`] characters of `s`.
fn tail(s: &str) -> &str {
    let mut start = s.len().saturating_sub(TAIL_CHARS);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// One parsed statistics line (half round trips, microseconds).
#[derive(Debug, Clone, PartialEq)]
struct Interval {
    t: f64,
    peer: String,
    mean: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    p999: Option<f64>,
    max: f64,
    cnt: u64,
}

/// Parses a time such as `19.449us`, `1.2ms`, `800ns` or `0.5s` into microseconds.
fn parse_time(tok: &str) -> Option<f64> {
    let (num, scale) = if let Some(n) = tok.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = tok.strip_suffix("µs") {
        (n, 1.0)
    } else if let Some(n) = tok.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = tok.strip_suffix("ns") {
        (n, 1e-3)
    } else if let Some(n) = tok.strip_suffix('s') {
        (n, 1e6)
    } else {
        return None;
    };
    let v: f64 = num.parse().ok()?;
    v.is_finite().then_some(v * scale)
}

/// Parses one output line; `None` if it is not a ping statistics line.
fn parse_line(line: &str) -> Option<Interval> {
    let mut toks = line.split_whitespace().peekable();
    if toks.peek().is_some_and(|t| t.starts_with('[')) {
        toks.next();
    }
    let t: f64 = toks.next()?.parse().ok()?;
    let rest: Vec<&str> = toks.collect();
    let first = *rest.first()?;
    let (peer, kv) = if first == "size" {
        ("", &rest[..])
    } else {
        (first, &rest[1..])
    };
    let mut iv = Interval {
        t,
        peer: peer.to_string(),
        mean: f64::NAN,
        p50: f64::NAN,
        p90: f64::NAN,
        p99: f64::NAN,
        p999: None,
        max: f64::NAN,
        cnt: 0,
    };
    let mut have_cnt = false;
    let mut pairs = kv.iter();
    while let Some(key) = pairs.next() {
        let key = *key;
        let value = match key {
            "mean" | "min" | "50%" | "90%" | "99%" | "99.9%" | "max" | "cnt" | "size" => {
                *pairs.next()?
            }
            _ => continue,
        };
        match key {
            "mean" => iv.mean = parse_time(value)?,
            "50%" => iv.p50 = parse_time(value)?,
            "90%" => iv.p90 = parse_time(value)?,
            "99%" => iv.p99 = parse_time(value)?,
            "99.9%" => iv.p999 = Some(parse_time(value)?),
            "max" => iv.max = parse_time(value)?,
            "cnt" => {
                iv.cnt = value.parse().ok()?;
                have_cnt = true;
            }
            _ => {}
        }
    }
    let complete = have_cnt
        && [iv.mean, iv.p50, iv.p90, iv.p99, iv.max]
            .iter()
            .all(|v| v.is_finite());
    complete.then_some(iv)
}

/// Combines the statistics lines of a ddsperf ping output into round-trip figures (see
/// [`DdsperfResult`]); `raw` of the result is `output`. The first statistics line is skipped as
/// warm-up. Errors (with the output's tail) if no statistics line was found, if only the
/// warm-up line was, or if the lines come from more than one pong.
pub fn parse(output: &str) -> Result<DdsperfResult, String> {
    let lines: Vec<Interval> = output.lines().filter_map(parse_line).collect();
    let Some(warmup) = lines.first() else {
        return Err(format!(
            "no ddsperf statistics line found; output tail:\n{}",
            tail(output)
        ));
    };
    if let Some(other) = lines.iter().find(|l| l.peer != warmup.peer) {
        return Err(format!(
            "statistics from more than one pong ({} and {}): the domain is not private",
            warmup.peer, other.peer
        ));
    }
    let kept = &lines[1..];
    let total: u64 = kept.iter().map(|l| l.cnt).sum();
    if total == 0 {
        return Err(format!(
            "only the warm-up statistics interval was found; output tail:\n{}",
            tail(output)
        ));
    }
    let weighted = |f: &dyn Fn(&Interval) -> f64| -> f64 {
        2.0 * kept.iter().map(|l| f(l) * l.cnt as f64).sum::<f64>() / total as f64
    };
    let p999_us = if kept.iter().all(|l| l.p999.is_some()) {
        Some(weighted(&|l| l.p999.unwrap_or(f64::NAN)))
    } else {
        None
    };
    let last_t = kept.last().map_or(warmup.t, |l| l.t);
    Ok(DdsperfResult {
        roundtrips: total,
        seconds: last_t - warmup.t,
        avg_us: weighted(&|l| l.mean),
        p50_us: weighted(&|l| l.p50),
        p90_us: weighted(&|l| l.p90),
        p99_us: weighted(&|l| l.p99),
        p999_us,
        max_us: 2.0 * kept.iter().map(|l| l.max).fold(f64::MIN, f64::max),
        intervals: kept.len(),
        raw: output.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from `ddsperf -i 77 -D 4 ping size 1024` (ddsperf 0.10.2, loopback config).
    const SAMPLE: &str = "\
[4140] participant vm:4140: new (self)
[4140] participant vm:4125: new
[4140] 2.000  vm:4125 size 1024 mean 23.324us min 11.491us 50% 22.006us 90% 30.206us 99% 68.838us max 1855.231us cnt 21324
[4140] 2.000  rss:7.6MB vcsw:12139 ivcsw:9311 recvUC:19%+30%
[4140] 3.000  vm:4125 size 1024 mean 19.449us min 11.375us 50% 18.028us 90% 28.202us 99% 50.153us max 2073.179us cnt 25597
[4140] 3.000  rss:7.8MB vcsw:13421 ivcsw:12194 recvUC:20%+29%
[4140] 4.000  vm:4125 size 1024 mean 21.000us min 11.000us 50% 20.000us 90% 30.000us 99% 60.000us max 1.5ms cnt 24403
[4140] 4.000  discarded 0 rexmit 0 Trexmit 0 Tthrottle 0 Nthrottle 0
";

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn parses_and_combines_intervals() {
        let r = parse(SAMPLE).unwrap();
        assert_eq!(r.intervals, 2);
        assert_eq!(r.roundtrips, 25597 + 24403);
        assert!(close(r.seconds, 2.0));
        let n = 50000.0;
        assert!(close(
            r.avg_us,
            2.0 * (19.449 * 25597.0 + 21.0 * 24403.0) / n
        ));
        assert!(close(
            r.p50_us,
            2.0 * (18.028 * 25597.0 + 20.0 * 24403.0) / n
        ));
        assert!(close(
            r.p90_us,
            2.0 * (28.202 * 25597.0 + 30.0 * 24403.0) / n
        ));
        assert!(close(
            r.p99_us,
            2.0 * (50.153 * 25597.0 + 60.0 * 24403.0) / n
        ));
        assert!(close(r.max_us, 2.0 * 2073.179));
        assert_eq!(r.p999_us, None);
        assert_eq!(r.raw, SAMPLE);
    }

    #[test]
    fn units_and_errors() {
        assert_eq!(parse_time("1.5ms"), Some(1500.0));
        assert_eq!(parse_time("250ns"), Some(0.25));
        assert_eq!(parse_time("2s"), Some(2e6));
        assert_eq!(parse_time("7us"), Some(7.0));
        assert_eq!(parse_time("7"), None);
        let e = parse("[1] participant x: new (self)\n").unwrap_err();
        assert!(e.contains("no ddsperf statistics line"), "{e}");
        let only_warmup = SAMPLE.lines().take(4).collect::<Vec<_>>().join("\n");
        assert!(parse(&only_warmup).unwrap_err().contains("warm-up"));
        let two = format!("{SAMPLE}[4140] 5.000  vm:1 size 1024 mean 1us min 1us 50% 1us 90% 1us 99% 1us max 1us cnt 1\n");
        assert!(parse(&two).unwrap_err().contains("more than one pong"));
    }
}
