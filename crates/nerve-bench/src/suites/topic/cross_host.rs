//! `nerve bench topic --cross-host`: the topic suite between two simulated hosts (network
//! namespaces joined by a veth link through a bridge, private /dev/shm each; see
//! [`crate::harness::hosts`]). Beside the streams it measures what the network plane costs a
//! process that does not use it: a local stream with the plane on and off, and an idle
//! executor's CPU and memory with and without a Zenoh session.
//!
//! veth is not a physical link: there is no wire, no NIC and no switch, so these
//! latencies are lower bounds of what the same software does between real machines.

use crate::report::Skipped;
use crate::report::{json_rows, num, why_missing, Measured, Section, SuiteOutput, Verdict};
use crate::harness::child::Child;
use crate::harness::PeerError;
use crate::harness::hosts::SimHosts;
use crate::harness::machine::{cpu_ns, memory, mono_ns, Machine};
use crate::report::plot::{line_chart, Axis, Series};
use crate::report::published::CYBERRT_CROSS;
use crate::report::human_bytes;
use crate::peers::stream::{Payload, StreamSpec, StreamSystem};
use super::{found, measure_stream, Placement, TopicRow, TopicSystem};
use super::{TopicSuite, CROSS_HOST_SYSTEMS};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// The skipped entry's name when no simulated hosts could be made.
const EVERY_SYSTEM: &str = "every system";

/// Sizes at which the network plane's cost to local topics is measured (100 Hz).
pub const OVERHEAD_SIZES: [usize; 2] = [1024, 1 << 20];

/// An idle process's footprint with the network plane on or off.
#[derive(Clone, Debug, Serialize)]
pub struct IdleRow {
    /// Always "topic".
    pub suite: &'static str,
    /// Always "idle-session".
    pub kind: &'static str,
    /// Whether the process held a Zenoh session.
    pub network: bool,
    /// Always false: one host.
    pub cross_host: bool,
    /// CPU % of one core over the window.
    pub cpu_percent: Option<f64>,
    /// Resident set size at the end, bytes.
    pub rss_bytes: Option<u64>,
    /// Window in s.
    pub seconds: f64,
}

/// The local stream with the plane on and off, at [`OVERHEAD_SIZES`]; rows carry the
/// mode `local, network on|off`.
pub fn local_overhead(
    role_command: &(PathBuf, Vec<String>),
    sim: &SimHosts,
    domain: u32,
    seconds: f64,
) -> (Vec<TopicRow>, Vec<Skipped>) {
    let (mut rows, mut skipped) = (Vec::new(), Vec::new());
    for size in OVERHEAD_SIZES {
        // off first, then on, alternating sizes keeps drift out of one side
        for on in [false, true] {
            let count = ((seconds * 100.0).round() as u64).max(2);
            let spec = StreamSpec {
                system: StreamSystem::NerveAdaptive,
                endpoint: format!("/bench/overhead_{}_{size}_{on}", std::process::id()),
                payload_bytes: size,
                rate_hz: 100.0,
                count,
                payload: Payload::Bytes,
                domain,
                cpu: None,
                reliable: false,
                listen_ip: None,
            };
            let mode = format!("local, network {}", if on { "on" } else { "off" });
            let env = vec![("NERVE_NETWORK", if on { "on" } else { "off" }.to_string())];
            match measure_stream(
                role_command,
                &spec,
                count,
                None,
                Placement::OnHost(sim, env),
            ) {
                Ok(m) => rows.push(TopicRow {
                    suite: "topic",
                    system: "nerve".into(),
                    mode,
                    payload_bytes: size,
                    rate_hz: 100,
                    sweeps: vec!["network overhead".into()],
                    cross_host: false,
                    sent: count,
                    received: m.received,
                    loss_rate: Some(1.0 - m.received as f64 / count as f64),
                    malformed: m.arrivals.malformed,
                    latency_us: m.latency.dist(),
                    cpu_percent: m.cpu_percent,
                    rss_bytes: crate::suites::topic::PerProcess {
                        publisher: m.memory.publisher.map(|x| x.rss_bytes),
                        subscriber: m.memory.subscriber.map(|x| x.rss_bytes),
                    },
                    pss_bytes: crate::suites::topic::PerProcess {
                        publisher: m.memory.publisher.map(|x| x.pss_bytes),
                        subscriber: m.memory.subscriber.map(|x| x.pss_bytes),
                    },
                    shm_bytes: None,
                    shm_largest_bytes: None,
                    seconds: m.seconds,
                    note: None,
                }),
                Err(e) => skipped.push(Skipped {
                    system: format!("nerve {mode}"),
                    payload_bytes: Some(size),
                    reason: e.to_string(),
                }),
            }
        }
    }
    (rows, skipped)
}

/// An idle executor (a subscription and a service, no traffic) on one simulated host
/// with the network plane off and on: CPU over `seconds`, RSS at the end.
pub fn idle_sessions(
    role_command: &(PathBuf, Vec<String>),
    sim: &SimHosts,
    domain: u32,
    seconds: f64,
) -> Result<Vec<IdleRow>, PeerError> {
    let mut out = Vec::new();
    for network in [false, true] {
        let mut args = role_command.1.clone();
        args.extend(["idle-executor".to_string(), domain.to_string()]);
        let env = [(
            "NERVE_NETWORK",
            if network { "on" } else { "off" }.to_string(),
        )];
        let mut child: Child = sim.spawn(0, &role_command.0, &args, &env, "idle executor")?;
        child.expect("ready", Duration::from_secs(20))?;
        // let the session settle (connection, declarations)
        std::thread::sleep(Duration::from_millis(500));
        let (c0, t0) = (cpu_ns(child.pid()), mono_ns());
        std::thread::sleep(Duration::from_secs_f64(seconds));
        let (c1, t1) = (cpu_ns(child.pid()), mono_ns());
        let rss = memory(child.pid()).map(|m| m.rss_bytes);
        child.stop();
        let wall = (t1 - t0) as f64;
        out.push(IdleRow {
            suite: "topic",
            kind: "idle-session",
            network,
            cross_host: false,
            cpu_percent: match (c0, c1) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / wall * 100.0),
                _ => None,
            },
            rss_bytes: rss,
            seconds: wall / 1e9,
        });
    }
    Ok(out)
}

fn find<'a>(rows: &'a [TopicRow], system: &str, size: usize, rate: u32) -> Option<&'a TopicRow> {
    rows.iter().find(|r| {
        r.cross_host && r.system == system && r.payload_bytes == size && r.rate_hz == rate
    })
}

fn overhead(rows: &[TopicRow], size: usize, on: bool) -> Option<&TopicRow> {
    let mode = format!("local, network {}", if on { "on" } else { "off" });
    rows.iter()
        .find(|r| r.mode == mode && r.payload_bytes == size)
}

/// The targets of issue 6 for every Nerve mode and point `suite` plans: a point Nerve or
/// the peer it is compared with did not run is judged not met, with the reason.
pub fn checks(
    rows: &[TopicRow],
    idle: &[IdleRow],
    skipped: &[Skipped],
    suite: &TopicSuite,
) -> Vec<Verdict> {
    let v = |target: &str, scope: &str, value: Measured, ok: fn(f64) -> bool| {
        Verdict::judged("topic", target, scope, value, ok)
    };
    let mut out = Vec::new();
    let points = suite.points();
    let nerve_modes: Vec<&str> = suite
        .systems
        .iter()
        .filter_map(|s| match s {
            TopicSystem::Stream(s) if s.system() == "nerve" => Some(s.mode()),
            _ => None,
        })
        .collect();
    for mode in &nerve_modes {
        for p in &points {
            let (size, rate) = (p.payload_bytes, p.rate_hz);
            let at = &format!(
                "nerve {mode} across hosts {} @ {rate} Hz",
                human_bytes(size)
            );
            let n = found(rows, skipped, ("nerve", mode), size, rate);
            let z = found(rows, skipped, ("zenoh", "peer-tcp"), size, rate);
            out.push(v(
                "nerve avg / raw zenoh avg <= 1.2",
                at,
                n.clone()
                    .and_then(|n| Ok(Some(n.latency_us.avg / z?.latency_us.avg))),
                |r| r <= 1.2,
            ));
            out.push(v(
                "loss = 0 (reliable)",
                at,
                n.clone().map(|n| n.loss_rate),
                |l| l == 0.0,
            ));
            for (name, _, _, published) in
                CYBERRT_CROSS.iter().filter(|c| c.1 == size && c.2 == rate)
            {
                let published = *published;
                out.push(Verdict::judged(
                    "topic",
                    format!("avg / CyberRT cross-machine {published} µs <= 0.5"),
                    format!(
                        "nerve {mode}: {name} ({} @ {rate} Hz, veth)",
                        human_bytes(size)
                    ),
                    n.clone().map(|n| Some(n.latency_us.avg / published)),
                    |r| r <= 0.5,
                ));
            }
        }
    }
    for size in OVERHEAD_SIZES {
        let side = |on: bool| {
            let mode = format!("local, network {}", if on { "on" } else { "off" });
            overhead(rows, size, on).ok_or_else(|| {
                let name = format!("nerve {mode}");
                why_missing(skipped, &format!("{name} at {}", human_bytes(size)), |k| {
                    k.covers(&name, Some(size)) || k.system == EVERY_SYSTEM
                })
            })
        };
        let ratio = |q: fn(&TopicRow) -> f64| -> Measured {
            let (off, on) = (side(false)?, side(true)?);
            Ok(Some(q(on) / q(off)))
        };
        let at = &format!("local {} @ 100 Hz", human_bytes(size));
        out.push(v(
            "P50 with network plane / without <= 1.1",
            at,
            ratio(|r| r.latency_us.p50),
            |r| r <= 1.1,
        ));
        out.push(v(
            "avg with network plane / without <= 1.1",
            at,
            ratio(|r| r.latency_us.avg),
            |r| r <= 1.1,
        ));
    }
    let session = idle.iter().find(|i| i.network).ok_or_else(|| {
        why_missing(skipped, "idle executor", |k| {
            k.system == "idle executor" || k.system == EVERY_SYSTEM
        })
    });
    out.push(v(
        "idle CPU with a zenoh session <= 0.5 % (no busy loop)",
        "idle executor",
        session.map(|i| i.cpu_percent),
        |c| c <= 0.5,
    ));
    out
}

fn mb(b: Option<u64>) -> String {
    b.map_or("–".into(), |b| format!("{:.1}", b as f64 / 1e6))
}

fn pct(p: Option<f64>) -> String {
    p.map_or("–".into(), |p| format!("{p:.3}"))
}

/// The topic suite across two simulated hosts: the size sweep and CyberRT's scenarios for
/// Nerve (reliable QoS, over its network plane), raw Zenoh and Cyclone DDS, then what the
/// network plane costs local topics and an idle process.
pub struct CrossHostSuite(pub TopicSuite);

impl CrossHostSuite {
    /// The quick or full variant.
    pub fn new(quick: bool, role_command: (std::path::PathBuf, Vec<String>)) -> CrossHostSuite {
        let base = if quick {
            TopicSuite::quick(role_command)
        } else {
            TopicSuite::full(role_command)
        };
        CrossHostSuite(TopicSuite {
            rates: Vec::new(),
            systems: CROSS_HOST_SYSTEMS.to_vec(),
            cross_host: true,
            ..base
        })
    }

    /// Runs it; without simulated hosts (no root, no iproute2) every row is skipped with
    /// the reason.
    pub fn execute(&self, machine: &Machine) -> Result<SuiteOutput, String> {
        let suite = &self.0;
        suite.validate()?;
        let sim = match SimHosts::create(2, 10_000) {
            Ok(h) => h,
            Err(e) => {
                let skipped = vec![Skipped {
                    system: EVERY_SYSTEM.into(),
                    payload_bytes: None,
                    reason: format!("no simulated hosts: {e}"),
                }];
                return Ok(output(Vec::new(), Vec::new(), skipped, machine, suite));
            }
        };
        let (mut rows, mut skipped) = suite.measure(Some(&sim));
        eprintln!("topic across hosts: the network plane's cost to local topics, idle sessions");
        let (local, mut more) =
            local_overhead(&suite.role_command, &sim, suite.domain, suite.seconds);
        rows.extend(local);
        skipped.append(&mut more);
        let idle = idle_sessions(&suite.role_command, &sim, suite.domain, suite.seconds)
            .unwrap_or_else(|e| {
                skipped.push(Skipped {
                    system: "idle executor".into(),
                    payload_bytes: None,
                    reason: e.to_string(),
                });
                Vec::new()
            });
        Ok(output(rows, idle, skipped, machine, suite))
    }
}

/// The suite's output across hosts (`suite`: what was planned).
pub fn output(
    rows: Vec<TopicRow>,
    idle: Vec<IdleRow>,
    skipped: Vec<Skipped>,
    machine: &Machine,
    suite: &TopicSuite,
) -> SuiteOutput {
    let quick = suite.quick;
    let head = [
        "system",
        "size",
        "rate Hz",
        "avg µs",
        "P50 µs",
        "P99 µs",
        "P99.9 µs",
        "max µs",
        "vs raw zenoh avg",
        "CPU pub %",
        "CPU sub %",
        "RSS pub MB",
        "RSS sub MB",
        "loss %",
    ];
    let line = |r: &TopicRow| {
        let z = find(&rows, "zenoh", r.payload_bytes, r.rate_hz)
            .filter(|_| r.cross_host && r.system != "zenoh");
        vec![
            format!("{} {}", r.system, r.mode),
            human_bytes(r.payload_bytes),
            r.rate_hz.to_string(),
            num(r.latency_us.avg),
            num(r.latency_us.p50),
            num(r.latency_us.p99),
            num(r.latency_us.p999),
            num(r.latency_us.max),
            z.map_or("–".into(), |z| {
                format!("{:.2}x", r.latency_us.avg / z.latency_us.avg)
            }),
            pct(r.cpu_percent.publisher),
            pct(r.cpu_percent.subscriber),
            mb(r.rss_bytes.publisher),
            mb(r.rss_bytes.subscriber),
            r.loss_rate
                .map_or("–".into(), |l| format!("{:.2}", l * 100.0)),
        ]
    };
    let cross: Vec<Vec<String>> = rows.iter().filter(|r| r.cross_host).map(line).collect();
    let local: Vec<Vec<String>> = rows.iter().filter(|r| !r.cross_host).map(line).collect();
    let scen_head = [
        "scenario",
        "size / rate",
        "CyberRT avg µs (published, real network)",
        "system",
        "avg µs (veth)",
        "ratio",
    ];
    let mut scen = Vec::new();
    for (name, size, rate, published) in CYBERRT_CROSS {
        for r in rows
            .iter()
            .filter(|r| r.cross_host && r.payload_bytes == size && r.rate_hz == rate)
        {
            scen.push(vec![
                name.to_string(),
                format!("{} / {rate} Hz", human_bytes(size)),
                num(published),
                format!("{} {}", r.system, r.mode),
                num(r.latency_us.avg),
                format!("{:.2}", r.latency_us.avg / published),
            ]);
        }
    }
    let idle_head = ["network plane", "CPU % of one core", "RSS MB", "window s"];
    let idle_rows: Vec<Vec<String>> = idle
        .iter()
        .map(|i| {
            vec![
                if i.network {
                    "on (zenoh session)"
                } else {
                    "off"
                }
                .to_string(),
                pct(i.cpu_percent),
                mb(i.rss_bytes),
                format!("{:.1}", i.seconds),
            ]
        })
        .collect();
    let intro = "Publisher and subscriber on two simulated hosts: network namespaces joined by \
                 a veth pair through a bridge, each process in its own mount namespace with its \
                 host's private /dev/shm, so nothing passes through shared memory. Nerve runs \
                 reliable over its network plane (Zenoh, TCP); raw Zenoh runs its own \
                 publisher/subscriber over the same link; Cyclone DDS is ddsperf ping/pong \
                 (one-way = round trip / 2). veth is not a physical link: no wire, NIC or switch.";
    let mut labels: Vec<(String, String)> = Vec::new();
    for r in rows.iter().filter(|r| r.cross_host) {
        let k = (r.system.clone(), r.mode.clone());
        if !labels.contains(&k) {
            labels.push(k);
        }
    }
    let series: Vec<Series> = labels
        .iter()
        .map(|(sys, mode)| Series {
            label: format!("{sys} {mode}"),
            points: rows
                .iter()
                .filter(|r| {
                    r.cross_host
                        && &r.system == sys
                        && &r.mode == mode
                        && r.sweeps.iter().any(|s| s == "size")
                })
                .map(|r| (r.payload_bytes as f64, r.latency_us.avg))
                .collect(),
        })
        .collect();
    let mut section = Section::new(
        "topic across hosts (seeds/001 cross-machine)",
        &format!(
            "{intro} {} per point; machine: {}.",
            if quick { "2 s" } else { "10 s" },
            machine.cpu
        ),
    );
    section.figure(
        &line_chart(
            "Across hosts: average latency vs size at 100 Hz",
            &Axis::log("message size (bytes)"),
            &Axis::log("latency avg (µs)"),
            &series,
        ),
        "One-way latency between two simulated hosts (log-log).",
    );
    section.table(Some("CyberRT cross-machine scenarios"), &scen_head, &scen);
    section.table(Some("Every point across hosts"), &head, &cross);
    section.table(
        Some("What the network plane costs a local topic"),
        &head,
        &local,
    );
    section.table(
        Some("Idle executor with and without a Zenoh session"),
        &idle_head,
        &idle_rows,
    );

    let mut summary = String::from("topic across hosts: avg / P99 µs, vs raw zenoh\n");
    for r in rows.iter().filter(|r| r.cross_host) {
        summary.push_str(&format!("  {}\n", line(r)[..9].join("  ")));
    }
    let checks = checks(&rows, &idle, &skipped, suite);
    let mut json: Vec<serde_json::Value> = json_rows(&rows);
    json.extend(json_rows(&idle));
    section.finish("topic-cross-host", json, skipped, checks, summary)
}
