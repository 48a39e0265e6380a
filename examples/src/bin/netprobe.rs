//! Probe of the network plane, one role per process: `pub`, `sub`, `serve`, `call`, and
//! `garbage` (sends malformed frames straight to a topic's Zenoh key). The cross-host
//! tests start it on simulated hosts; every role prints `ready` once set up and one JSON
//! line of results at the end. Settings come from the environment (`NERVE_ZENOH_CONFIG`,
//! `NERVE_DOMAIN`, …).

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};
use nerve::mono_ns;
use nerve::prelude::*;
use nerve_msgs::srv::{Bytes, Echo};
use serde_json::json;
use std::io::Write;
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    role: RoleArg,
}

#[derive(Subcommand)]
enum RoleArg {
    /// Publish `count` samples of `size` bytes at `hz`.
    Pub {
        #[arg(long)]
        topic: String,
        #[arg(long)]
        count: u64,
        #[arg(long, default_value_t = 100.0)]
        hz: f64,
        #[arg(long, default_value_t = 64)]
        size: usize,
        /// Back-pressure QoS (every sample delivered) instead of sensor QoS.
        #[arg(long)]
        reliable: bool,
        /// Wait for this many subscribers before the first sample.
        #[arg(long, default_value_t = 1)]
        subscribers: usize,
        /// Samples the topic keeps for late joiners.
        #[arg(long, default_value_t = 0)]
        history: usize,
    },
    /// Receive until sample `count` arrived or `seconds` passed.
    Sub {
        #[arg(long)]
        topic: String,
        #[arg(long)]
        count: u64,
        #[arg(long, default_value_t = 30.0)]
        seconds: f64,
        #[arg(long)]
        reliable: bool,
        /// Ask for the topic's history on joining.
        #[arg(long, default_value_t = 0)]
        history: usize,
    },
    /// Serve the echo service, appending this host's name to every response.
    Serve {
        #[arg(long)]
        service: String,
    },
    /// Call the echo service `count` times.
    Call {
        #[arg(long)]
        service: String,
        #[arg(long)]
        count: u64,
        #[arg(long, default_value_t = 2000)]
        timeout_ms: u64,
        /// Pause between calls.
        #[arg(long, default_value_t = 0)]
        pause_ms: u64,
        /// How long to wait for a server before failing.
        #[arg(long, default_value_t = 20.0)]
        wait_s: f64,
    },
    /// Send malformed frames of every kind to a topic's key over Zenoh, then one valid
    /// frame last.
    Garbage {
        #[arg(long)]
        topic: String,
    },
}

fn say(line: &str) {
    println!("{line}");
    let _ = std::io::stdout().flush();
}

fn host_name() -> String {
    std::env::var("NERVE_HOST_NAME").unwrap_or_else(|_| "?".into())
}

fn qos(reliable: bool, history: usize) -> Qos {
    let q = if reliable {
        Qos::reliable().depth(256)
    } else {
        Qos::sensor()
    };
    let depth = q.depth.max(history);
    q.history(history).depth(depth)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let ctx = Context::from_env()?;
    match args.role {
        RoleArg::Pub {
            topic,
            count,
            hz,
            size,
            reliable,
            subscribers,
            history,
        } => {
            let node = ctx.node("probe_pub").create()?;
            let p = node
                .publisher::<Bytes>(&topic)
                .qos(qos(reliable, history))
                .create()?;
            say("ready");
            if subscribers > 0 && !p.wait_for_subscribers(subscribers, Duration::from_secs(20)) {
                bail!("no subscriber appeared on {topic}");
            }
            let period = Duration::from_secs_f64(1.0 / hz);
            let t0 = Instant::now();
            let (mut failed, mut slowest, mut slowest_seq) = (0u64, Duration::ZERO, 0);
            for seq in 1..=count {
                let due = t0 + period * (seq - 1) as u32;
                if let Some(d) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(d);
                }
                let mut loan = p.loan_slice(size)?;
                loan.tag = seq;
                for (i, b) in loan.elem_bytes_mut().iter_mut().enumerate() {
                    *b = (seq as usize + i) as u8;
                }
                let t = Instant::now();
                if let Err(e) = loan.send() {
                    failed += 1;
                    eprintln!("send {seq}: {e}");
                }
                let took = t.elapsed();
                if took > slowest {
                    (slowest, slowest_seq) = (took, seq);
                }
            }
            say(&json!({
                "sent": count, "failed": failed,
                "slowest_send_ms": slowest.as_secs_f64() * 1e3, "slowest_seq": slowest_seq,
            })
            .to_string());
            // stay until killed: a reliable publisher's last samples may still travel
            loop {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        RoleArg::Sub {
            topic,
            count,
            seconds,
            reliable,
            history,
        } => {
            let node = ctx.node("probe_sub").create()?;
            let s = node
                .subscriber::<Bytes>(&topic)
                .qos(qos(reliable, history))
                .create()?;
            say("ready");
            let deadline = Instant::now() + Duration::from_secs_f64(seconds);
            let (mut got, mut in_order, mut last, mut first, mut corrupt) = (0u64, true, 0, 0, 0);
            let mut lat = Vec::new();
            while Instant::now() < deadline {
                let Some(m) = s.recv_timeout(Duration::from_millis(50))? else {
                    continue;
                };
                let seq = m.tag;
                let ok = m.header().seq == seq
                    && m.elems()
                        .iter()
                        .enumerate()
                        .all(|(i, b)| *b == (seq as usize + i) as u8);
                corrupt += u64::from(!ok);
                lat.push(mono_ns().saturating_sub(m.header().publish_mono_ns));
                if first == 0 {
                    first = seq;
                }
                in_order &= seq > last;
                last = seq;
                got += 1;
                if seq >= count {
                    break;
                }
            }
            lat.sort_unstable();
            let pct = |q: f64| {
                lat.get(((lat.len() as f64 - 1.0) * q).round() as usize)
                    .map_or(0.0, |v| *v as f64 / 1e3)
            };
            let st = s.stats();
            // what `nerve topic info` shows: every process's counters, asked over Zenoh
            let info_refused: u64 =
                nerve::net::net_counters(ctx.config(), Duration::from_millis(500))?
                    .iter()
                    .flat_map(|c| c.topics.iter().filter(|t| t.topic == topic))
                    .map(|t| t.refused.values().sum::<u64>())
                    .sum();
            say(&json!({
                "info_refused": info_refused,
                "received": got, "first": first, "last": last, "in_order": in_order,
                "corrupt": corrupt, "lost": st.lost, "network": st.network,
                "refused": st.network_refused, "p50_us": pct(0.5), "p99_us": pct(0.99),
                "max_us": pct(1.0),
            })
            .to_string());
            Ok(())
        }
        RoleArg::Serve { service } => {
            let node = ctx.node("probe_server").create()?;
            let server = node.service::<Echo>(&service).create()?;
            say("ready");
            let host = host_name();
            server.serve(|req| {
                let mut loan = req.loan_reply_slice(req.elems().len() + host.len())?;
                loan.tag = req.tag;
                let n = req.elems().len();
                loan.elems_mut()[..n].copy_from_slice(req.elems());
                loan.elems_mut()[n..].copy_from_slice(host.as_bytes());
                loan.send()?;
                Ok(())
            })?;
            Ok(())
        }
        RoleArg::Call {
            service,
            count,
            timeout_ms,
            pause_ms,
            wait_s,
        } => {
            let node = ctx.node("probe_client").create()?;
            let client = node.client::<Echo>(&service).create()?;
            say("ready");
            if !client.wait_for_service(Duration::from_secs_f64(wait_s)) {
                bail!("no server for {service}");
            }
            let (mut ok, mut last_ok, mut errors) = (0u64, 0u64, Vec::new());
            let mut hosts = std::collections::BTreeMap::<String, u64>::new();
            for i in 1..=count {
                let body = i.to_le_bytes();
                match client.call_slice(&Bytes { tag: i }, &body, Duration::from_millis(timeout_ms))
                {
                    Ok(r) if r.tag == i && r.elems().starts_with(&body) => {
                        ok += 1;
                        last_ok = i;
                        let h = String::from_utf8_lossy(&r.elems()[body.len()..]).into_owned();
                        *hosts.entry(h).or_default() += 1;
                    }
                    Ok(_) => errors.push(format!("call {i}: wrong response")),
                    Err(e) => errors.push(format!("call {i}: {e}")),
                }
                std::thread::sleep(Duration::from_millis(pause_ms));
            }
            errors.truncate(5);
            say(
                &json!({"ok": ok, "last_ok": last_ok, "errors": errors, "hosts": hosts})
                    .to_string(),
            );
            Ok(())
        }
        RoleArg::Garbage { topic } => garbage(&ctx, &topic),
    }
}

/// Malformed frames of every kind, then one valid frame, on `topic`'s Zenoh key.
fn garbage(ctx: &Context, topic: &str) -> anyhow::Result<()> {
    use zenoh::Wait;
    let path = std::env::var("NERVE_ZENOH_CONFIG").context("NERVE_ZENOH_CONFIG")?;
    let cfg = zenoh::Config::from_file(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let session = zenoh::open(cfg)
        .wait()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let key = format!("nerve/{}/t/{}", ctx.domain(), topic.trim_start_matches('/'));
    let publisher = session
        .declare_publisher(key)
        .wait()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    say("ready");
    // wait for the subscriber to be routed to us
    let deadline = Instant::now() + Duration::from_secs(20);
    while !publisher
        .matching_status()
        .wait()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .matching()
    {
        if Instant::now() > deadline {
            bail!("no subscriber");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    let ty = nerve::TypeInfo::of::<Bytes>();
    let valid = |seq: u64, body: &[u8], hash: u64, len_delta: i64| -> Vec<u8> {
        let mut payload = vec![0u8; ty.elems_offset()];
        payload[..8].copy_from_slice(&seq.to_le_bytes());
        payload.extend_from_slice(body);
        let mut out = b"NRV\x02\x01\0\0\0".to_vec();
        out.extend_from_slice(&0xdead_beef_u64.to_le_bytes()); // another host
        out.extend_from_slice(&[0; 8]); // checksum and padding
        let len = (payload.len() as i64 + len_delta) as u64;
        for v in [seq, mono_ns(), 0, 77, len, hash, 1] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&payload);
        nerve::net::seal(&mut out);
        out
    };
    let body: Vec<u8> = (0..16u8).map(|i| (1 + i as usize) as u8).collect();
    let mut frames: Vec<Vec<u8>> = vec![
        Vec::new(),                                             // empty
        b"hello".to_vec(),                                      // truncated
        vec![0xff; 200],                                        // bad magic
        valid(1, &body, 0x1234, 0),                             // wrong type
        valid(1, &body, ty.layout_hash, 5),                     // length mismatch
        valid(1, &body[..3], ty.layout_hash, 0)[..60].to_vec(), // truncated header
    ];
    let mut kind = valid(1, &body, ty.layout_hash, 0);
    kind[4] = 3; // a response where a sample belongs
    frames.push(kind);
    let mut corrupted = valid(1, &body, ty.layout_hash, 0);
    let last = corrupted.len() - 1;
    corrupted[last] ^= 0x5a; // a byte changed on the way: the checksum disagrees
    frames.push(corrupted);
    // oversized: beyond the subscriber's 256 MiB default is too big to send; a sample
    // whose length is not a whole number of elements breaks the layout instead
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..20 {
        let mut f = valid(1, &body, ty.layout_hash, 0);
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let cut = (rng as usize) % f.len();
        f.truncate(cut);
        frames.push(f);
    }
    let sent = frames.len();
    for f in frames {
        publisher
            .put(f)
            .wait()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    // the valid one, carrying the subscriber's expected pattern for seq 1
    let good: Vec<u8> = (0..16usize).map(|i| (1 + i) as u8).collect();
    publisher
        .put(valid(1, &good, ty.layout_hash, 0))
        .wait()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    say(&json!({"malformed_sent": sent}).to_string());
    loop {
        std::thread::sleep(Duration::from_millis(100));
    }
}
