//! Cross-process Imu (304 B) ping-pong: Nerve in each wait mode beside raw iceoryx2 doing
//! the same work (each side writes the whole message every hop), in one run, pinned to
//! separate cores. Also measures the CPU an idle subscriber uses.
//!
//! `imu_pingpong` prints a table and ratios; `--json` prints one JSON object.
//! Raw iceoryx2 is used here only as the reference floor; Nerve's API never exposes it.

use clap::{Parser, ValueEnum};
use hdrhistogram::Histogram;
use iceoryx2::prelude::*;
use nerve::prelude::*;
use nerve_msgs::Imu;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    /// Internal: run one side of one system.
    #[arg(long, value_enum)]
    role: Option<Role>,
    #[arg(long, value_enum, default_value_t = System::NerveSpin)]
    system: System,
    /// Measured round trips.
    #[arg(long, default_value_t = 10_000)]
    iterations: u64,
    /// Warm-up round trips.
    #[arg(long, default_value_t = 1_000)]
    warmup: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Rounds the iterations are split into (systems interleaved round by round).
    #[arg(long, default_value_t = 5)]
    rounds: u64,
    /// Domain id used for the run.
    #[arg(long, default_value_t = 977)]
    domain: u32,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
enum Role {
    Ping,
    Pong,
    Idle,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
enum System {
    NerveSpin,
    NerveAdaptive,
    NerveBlock,
    Iceoryx2,
}

#[derive(Debug, Clone, Copy, ZeroCopySend)]
#[repr(C)]
struct RawImu {
    data: [f64; 38],
}

fn pin(cpu: usize) {
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if n < 2 {
        return;
    }
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes within it; pid 0 = this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu % n, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn report(h: &Histogram<u64>) -> serde_json::Value {
    let us = |ns: u64| ns as f64 / 1e3;
    serde_json::json!({
        "n": h.len(),
        "avg_us": h.mean() / 1e3,
        "p50_us": us(h.value_at_quantile(0.5)),
        "p90_us": us(h.value_at_quantile(0.9)),
        "p99_us": us(h.value_at_quantile(0.99)),
        "p999_us": us(h.value_at_quantile(0.999)),
        "max_us": us(h.max()),
    })
}

fn nerve_side(args: &Args, role: Role) -> anyhow::Result<()> {
    let ctx = Context::new(nerve::Config::default().domain(args.domain)?)?;
    let node = ctx
        .node(if role == Role::Ping { "ping" } else { "pong" })
        .create()?;
    let mode = match args.system {
        System::NerveSpin => WaitMode::Spin,
        System::NerveAdaptive => WaitMode::Adaptive,
        _ => WaitMode::Block,
    };
    let qos = Qos::sensor().depth(1);
    let (out_topic, in_topic) = if role == Role::Ping {
        ("/ping", "/pong")
    } else {
        ("/pong", "/ping")
    };
    let publisher = node.publisher::<Imu>(out_topic).qos(qos.clone()).create()?;
    let sub = node
        .subscriber::<Imu>(in_topic)
        .qos(qos)
        .wait_mode(mode)
        .create()?;
    println!("ready");
    if !publisher.wait_for_subscribers(1, Duration::from_secs(20)) {
        anyhow::bail!("peer did not join");
    }
    let total = args.warmup + args.iterations;
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    let mut msg = Imu::default();
    for i in 0..total {
        if role == Role::Ping {
            msg.linear_acceleration.z = i as f64;
            let t = Instant::now();
            publisher.publish(&msg)?;
            let back = sub
                .recv_timeout(Duration::from_secs(5))?
                .ok_or_else(|| anyhow::anyhow!("lost at {i}"))?;
            let rtt = t.elapsed().as_nanos() as u64;
            anyhow::ensure!(back.linear_acceleration.z == i as f64, "wrong echo");
            if i >= args.warmup {
                h.record(rtt.max(1))?;
            }
        } else {
            let m = sub
                .recv_timeout(Duration::from_secs(5))?
                .ok_or_else(|| anyhow::anyhow!("lost at {i}"))?;
            publisher.publish(&m)?;
        }
    }
    if role == Role::Ping {
        print_samples(&h);
    }
    Ok(())
}

/// Prints every recorded round trip (value and count) so the parent can pool rounds.
fn print_samples(h: &Histogram<u64>) {
    let mut line = String::from("rtts");
    for v in h.iter_recorded() {
        line.push_str(&format!(
            " {}:{}",
            v.value_iterated_to(),
            v.count_at_value()
        ));
    }
    println!("{line}");
}

fn iox_config(domain: u32) -> anyhow::Result<iceoryx2::config::Config> {
    let mut cfg = iceoryx2::config::Config::default();
    cfg.global.prefix = FileName::new(format!("nervebench{domain}_").as_bytes())
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    Ok(cfg)
}

fn iceoryx2_side(args: &Args, role: Role) -> anyhow::Result<()> {
    let cfg = iox_config(args.domain)?;
    let node = NodeBuilder::new()
        .config(&cfg)
        .create::<ipc::Service>()
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let open = |name: &str| {
        node.service_builder(&name.try_into().unwrap())
            .publish_subscribe::<RawImu>()
            .subscriber_max_buffer_size(1)
            .history_size(0)
            .enable_safe_overflow(true)
            .open_or_create()
            .map_err(|e| anyhow::anyhow!("{e:?}"))
    };
    let (out_name, in_name) = if role == Role::Ping {
        ("raw_ping", "raw_pong")
    } else {
        ("raw_pong", "raw_ping")
    };
    let out = open(out_name)?;
    let inp = open(in_name)?;
    let publisher = out
        .publisher_builder()
        .create()
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let sub = inp
        .subscriber_builder()
        .buffer_size(1)
        .create()
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    println!("ready");
    let deadline = Instant::now() + Duration::from_secs(20);
    while out.dynamic_config().number_of_subscribers() < 1 {
        anyhow::ensure!(Instant::now() < deadline, "peer did not join");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(50));
    let total = args.warmup + args.iterations;
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    let mut msg = RawImu { data: [0.0; 38] };
    let recv = || -> anyhow::Result<RawImu> {
        let start = Instant::now();
        loop {
            if let Some(s) = sub.receive().map_err(|e| anyhow::anyhow!("{e:?}"))? {
                return Ok(*s.payload());
            }
            anyhow::ensure!(start.elapsed() < Duration::from_secs(5), "lost");
            core::hint::spin_loop();
        }
    };
    // each hop writes the whole message into a fresh loan, as Nerve's publish does
    let send = |m: RawImu| -> anyhow::Result<()> {
        let s = publisher
            .loan_uninit()
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        s.write_payload(m)
            .send()
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        Ok(())
    };
    for i in 0..total {
        if role == Role::Ping {
            msg.data[0] = i as f64;
            let t = Instant::now();
            send(msg)?;
            let back = recv()?;
            let rtt = t.elapsed().as_nanos() as u64;
            anyhow::ensure!(back.data[0] == i as f64, "wrong echo");
            if i >= args.warmup {
                h.record(rtt.max(1))?;
            }
        } else {
            let m = recv()?;
            send(m)?;
        }
    }
    if role == Role::Ping {
        print_samples(&h);
    }
    Ok(())
}

/// CPU seconds (user + system) of a process from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz
}

fn run_pair(
    exe: &str,
    args: &Args,
    system: System,
    into: &mut Histogram<u64>,
) -> anyhow::Result<()> {
    let spawn = |role: &str| {
        Command::new(exe)
            .args([
                "--role",
                role,
                "--system",
                &format!("{system:?}")
                    .to_lowercase()
                    .replace("nerve", "nerve-"),
            ])
            .args([
                "--iterations",
                &(args.iterations / args.rounds).max(1).to_string(),
                "--warmup",
                &args.warmup.to_string(),
            ])
            .args(["--domain", &args.domain.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
    };
    let pong = spawn("pong")?;
    let ping = spawn("ping")?;
    let out = ping.wait_with_output()?;
    let pong_out = pong.wait_with_output()?;
    anyhow::ensure!(
        out.status.success() && pong_out.status.success(),
        "{system:?} run failed"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("rtts"))
        .ok_or_else(|| anyhow::anyhow!("no result"))?;
    for pair in line.split_whitespace().skip(1) {
        let (v, c) = pair
            .split_once(':')
            .ok_or_else(|| anyhow::anyhow!("bad sample {pair}"))?;
        into.record_n(v.parse()?, c.parse()?)?;
    }
    Ok(())
}

fn idle_subscriber_cpu(exe: &str, args: &Args) -> anyhow::Result<f64> {
    let mut child = Command::new(exe)
        .args(["--role", "idle", "--domain", &args.domain.to_string()])
        .stdout(Stdio::null())
        .spawn()?;
    std::thread::sleep(Duration::from_millis(500));
    let c0 = cpu_seconds(child.id());
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let used = cpu_seconds(child.id()) - c0;
    let wall = t0.elapsed().as_secs_f64();
    child.kill()?;
    child.wait()?;
    Ok(100.0 * used / wall)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    match args.role {
        Some(Role::Idle) => {
            let ctx = Context::new(nerve::Config::default().domain(args.domain)?)?;
            let node = ctx.node("idle").create()?;
            let sub = node.subscriber::<Imu>("/idle").create()?;
            loop {
                sub.recv_timeout(Duration::from_secs(3600))?;
            }
        }
        Some(role) => {
            pin(if role == Role::Ping { 0 } else { 1 });
            return match args.system {
                System::Iceoryx2 => iceoryx2_side(&args, role),
                _ => nerve_side(&args, role),
            };
        }
        None => {}
    }
    let exe = std::env::current_exe()?.display().to_string();
    let systems = [
        System::Iceoryx2,
        System::NerveSpin,
        System::NerveAdaptive,
        System::NerveBlock,
    ];
    let mut hists: Vec<Histogram<u64>> = systems
        .iter()
        .map(|_| Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3))
        .collect::<Result<_, _>>()?;
    // interleave the systems round by round (rotating the order) so that slow phases of
    // a noisy machine hit every system alike; pool each system's rounds
    for round in 0..args.rounds as usize {
        for k in 0..systems.len() {
            let i = (k + round) % systems.len();
            run_pair(&exe, &args, systems[i], &mut hists[i])?;
        }
    }
    let mut results = serde_json::Map::new();
    for (s, h) in systems.iter().zip(&hists) {
        results.insert(format!("{s:?}"), report(h));
    }
    let idle = idle_subscriber_cpu(&exe, &args)?;
    // leave nothing behind: the reference runs' persistent iceoryx2 segment, the idle
    // subscriber's records (it was killed)
    // SAFETY: every child of this run has exited, so no process uses this prefix.
    let _ = unsafe {
        iceoryx2::testing::remove_global_mgmt_segment::<ipc::Service>(&iox_config(args.domain)?)
    };
    let _ = nerve::introspect::clean(&nerve::Config::default().domain(args.domain)?);
    let p50 = |k: &str| results[k]["p50_us"].as_f64().unwrap_or(f64::NAN);
    let summary = serde_json::json!({
        "message": "nerve_msgs/Imu (304 B)",
        "iterations": args.iterations,
        "rounds": args.rounds,
        "rtt": results,
        "ratio_p50_nerve_spin_vs_iceoryx2": p50("NerveSpin") / p50("Iceoryx2"),
        "ratio_p50_nerve_adaptive_vs_iceoryx2": p50("NerveAdaptive") / p50("Iceoryx2"),
        "idle_subscriber_cpu_percent": idle,
    });
    if args.json {
        println!("{summary}");
    } else {
        println!(
            "{:<16} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
            "system", "avg µs", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs"
        );
        for (k, v) in &results {
            println!(
                "{:<16} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>10.2} {:>10.2}",
                k,
                v["avg_us"].as_f64().unwrap_or(0.0),
                v["p50_us"].as_f64().unwrap_or(0.0),
                v["p90_us"].as_f64().unwrap_or(0.0),
                v["p99_us"].as_f64().unwrap_or(0.0),
                v["p999_us"].as_f64().unwrap_or(0.0),
                v["max_us"].as_f64().unwrap_or(0.0)
            );
        }
        println!(
            "median RTT ratio, Nerve spin / raw iceoryx2: {:.2}",
            summary["ratio_p50_nerve_spin_vs_iceoryx2"]
                .as_f64()
                .unwrap_or(0.0)
        );
        println!(
            "median RTT ratio, Nerve adaptive / raw iceoryx2: {:.2}",
            summary["ratio_p50_nerve_adaptive_vs_iceoryx2"]
                .as_f64()
                .unwrap_or(0.0)
        );
        println!("idle subscriber CPU: {idle:.3} %");
    }
    Ok(())
}
