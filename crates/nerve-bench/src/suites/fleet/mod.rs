//! `nerve bench fleet`: a fleet of simulated hosts on Zenoh. Each host (a network
//! namespace with a private `/dev/shm`, see [`crate::harness::hosts`]) runs a driver and
//! a planner process with `local_topics` sensor topics between them plus the fleet's
//! shared topics (see [`role`]); host 0 is the base station. A fleet runs as Zenoh peers
//! (gossip) or as clients of a router on the base station (robots behind it), with Nerve
//! or with raw Zenoh over the same Zenoh files, and is measured in phases:
//!
//! - discovery: from the last host's start until every planner has a sample from every
//!   publisher it subscribes to (publishers at `rate_hz`: the resolution is one period);
//! - idle: publishers quiet, every process's CPU and memory, every host's sent bytes;
//! - capacity: every robot sends `/fleet/status` at `load_hz` with `load_bytes` to the
//!   base station; samples/s received there and their latency;
//! - join: a new host started into the running fleet, until it and everyone it talks to
//!   have heard from each other;
//! - partition: the hosts split in two by nftables for longer than the link lease, then
//!   healed: until every planner hears again from the other half;
//! - leave and rejoin: a robot killed, restarted;
//! - router failover: two routers, one killed mid-stream under a reliable 100 Hz load;
//!   every sample missing from a publisher's sequence counted, beside what Nerve counted.
//!
//! And the one-host rows: 1000 topics and 100 nodes on one host ([`one_host`]).

mod run;
pub mod one_host;
mod options;
mod role;

pub use run::{Idle, Mode, Security};
pub use options::FleetOptions;
pub use role::FleetSystem;

use crate::harness::hosts::SimHosts;
use crate::harness::machine::{mono_ns, Machine};
use crate::harness::progress;
use crate::harness::stats::Dist;
use crate::report::plot::{line_chart, Axis, Series};
use crate::report::{json_rows, num, Section, Skipped, SuiteOutput, Verdict};
use crate::suite::Env;
use run::{Fleet, FleetPlan};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// One fleet: a system and mode at a number of hosts, every phase's figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FleetRow {
    /// Always "fleet".
    pub suite: &'static str,
    /// Always "fleet".
    pub kind: &'static str,
    /// `nerve` or `zenoh`.
    pub system: String,
    /// `peer` or `router`.
    pub mode: String,
    /// Hosts at the start.
    pub hosts: usize,
    /// Processes (routers included).
    pub processes: usize,
    /// Publishers and subscribers per host (average).
    pub endpoints_per_host: f64,
    /// Discovery, s.
    pub discovery_s: Option<f64>,
    /// A new host joining, s.
    pub join_s: Option<f64>,
    /// Idle footprint.
    pub idle: Idle,
    /// Idle CPU % of one core per endpoint.
    pub idle_cpu_percent_per_endpoint: Option<f64>,
    /// Idle resident memory per endpoint, bytes.
    pub idle_rss_bytes_per_endpoint: Option<f64>,
    /// Idle bytes sent per second per endpoint.
    pub idle_tx_bytes_per_s_per_endpoint: Option<f64>,
    /// Status samples the robots sent per second (offered load).
    pub load_offered_per_s: Option<f64>,
    /// Status samples the base station received per second.
    pub load_received_per_s: Option<f64>,
    /// Status bytes.
    pub load_bytes: usize,
    /// Status latency at the base station, µs.
    pub load_latency_us: Option<Dist>,
    /// Status samples missing from the robots' sequences in the load window.
    pub load_gaps: Option<u64>,
    /// Partition healed: until every planner heard again from the other half, s.
    pub partition_heal_s: Option<f64>,
    /// Partition length, s.
    pub partition_s: Option<f64>,
    /// A robot killed and restarted: until it and everyone heard from each other, s.
    pub rejoin_s: Option<f64>,
    /// What failed in a phase (the row keeps the phases that ran).
    pub notes: Vec<String>,
}

/// Two routers, one killed under load.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FailoverRow {
    /// Always "fleet".
    pub suite: &'static str,
    /// Always "router-failover".
    pub kind: &'static str,
    /// `nerve` or `zenoh`.
    pub system: String,
    /// Hosts.
    pub hosts: usize,
    /// Status samples per second, all robots.
    pub load_per_s: f64,
    /// Status samples received by the base station in the window around the failure.
    pub received: u64,
    /// Missing from the robots' sequences (counted by the base station's process).
    pub gaps: u64,
    /// What Nerve's subscribers counted as lost (raw Zenoh counts nothing).
    pub nerve_lost: Option<u64>,
    /// Window, s.
    pub seconds: f64,
    /// What failed.
    pub notes: Vec<String>,
}

/// The suite's settings.
#[derive(Clone, Debug)]
pub struct FleetSuite {
    /// Fleet sizes (hosts at the start).
    pub sizes: Vec<usize>,
    /// Topologies.
    pub modes: Vec<Mode>,
    /// Systems.
    pub systems: Vec<FleetSystem>,
    /// Sensor topics per host.
    pub local_topics: u32,
    /// Rate of every topic, Hz.
    pub rate_hz: f64,
    /// Idle window, s.
    pub idle_seconds: f64,
    /// Load window, s.
    pub load_seconds: f64,
    /// Status rate per robot under load, Hz.
    pub load_hz: f64,
    /// Status bytes under load.
    pub load_bytes: usize,
    /// Zenoh link lease, ms.
    pub lease_ms: u64,
    /// Partition and rejoin phases.
    pub faults: bool,
    /// Router failover (two routers, four hosts).
    pub failover: bool,
    /// Sizes at which Nerve's peer fleet also runs over mutual TLS, and over TLS with an
    /// access-control policy (the cost of the checks).
    pub policy_sizes: Vec<usize>,
    /// One-host rows: topics and nodes (`None`: not run).
    pub one_host: Option<(usize, usize)>,
    /// Quick settings.
    pub quick: bool,
    /// `<nerve> bench role`.
    pub role_command: (PathBuf, Vec<String>),
    /// Directory for the fleet's Zenoh files.
    pub dir: PathBuf,
}

/// Longest a fleet may take to discover itself before the row records the failure.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(90);
/// Longest a join, a heal or a rejoin may take.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(15);

impl FleetSuite {
    /// Sizes 4, 8, 16, 32; peer and router; Nerve and raw Zenoh; every phase.
    pub fn full(role_command: (PathBuf, Vec<String>), dir: PathBuf) -> FleetSuite {
        FleetSuite {
            sizes: vec![4, 8, 16, 32],
            modes: vec![Mode::Peer, Mode::Router],
            systems: vec![FleetSystem::Nerve, FleetSystem::Zenoh],
            local_topics: 10,
            rate_hz: 10.0,
            idle_seconds: 5.0,
            load_seconds: 5.0,
            load_hz: 100.0,
            load_bytes: 1024,
            lease_ms: 2000,
            faults: true,
            failover: true,
            policy_sizes: vec![8, 16],
            one_host: Some((1000, 100)),
            quick: false,
            role_command,
            dir,
        }
    }

    /// Sizes 4, 8, 16 with 2 s windows.
    pub fn quick(role_command: (PathBuf, Vec<String>), dir: PathBuf) -> FleetSuite {
        FleetSuite {
            sizes: vec![4, 8, 16],
            policy_sizes: vec![8],
            idle_seconds: 2.0,
            load_seconds: 2.0,
            quick: true,
            ..FleetSuite::full(role_command, dir)
        }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), String> {
        if self.sizes.is_empty() || self.sizes.iter().any(|&n| !(2..=200).contains(&n)) {
            return Err("hosts must be 2 to 200 (and at least one size)".into());
        }
        if self.modes.is_empty() || self.systems.is_empty() {
            return Err("at least one mode and one system".into());
        }
        if !(0.1..=600.0).contains(&self.idle_seconds) || !(0.1..=600.0).contains(&self.load_seconds)
        {
            return Err("idle and load windows must be 0.1 to 600 s".into());
        }
        if !(1.0..=1000.0).contains(&self.rate_hz) || !(1.0..=10_000.0).contains(&self.load_hz) {
            return Err("rate must be 1 to 1000 Hz, load 1 to 10000 Hz".into());
        }
        if !(200..=60_000).contains(&self.lease_ms) {
            return Err("the lease must be 200 to 60000 ms".into());
        }
        if self.local_topics > 100 {
            return Err("at most 100 local topics per host".into());
        }
        Ok(())
    }

    fn plan(&self, system: FleetSystem, mode: Mode, hosts: usize, domain: u32) -> FleetPlan {
        FleetPlan {
            system,
            mode,
            hosts,
            routers: 1,
            local_topics: self.local_topics,
            rate_hz: self.rate_hz,
            lease_ms: self.lease_ms,
            domain,
            spare: 1,
            security: Security::Tcp,
        }
    }

    /// Runs one fleet on fresh hosts.
    fn run_fleet(&self, plan: FleetPlan, bar: &indicatif::ProgressBar) -> Result<FleetRow, String> {
        let n = plan.hosts;
        let sim = SimHosts::create(n + plan.spare, self.lease_ms).map_err(|e| e.to_string())?;
        let dir = self.dir.join(format!(
            "{}-{}-{:?}-{n}",
            plan.system.id(),
            plan.mode.id(),
            plan.security
        ));
        let mut row = FleetRow {
            suite: "fleet",
            kind: "fleet",
            system: plan.system.id().into(),
            mode: format!("{}{}", plan.mode.id(), plan.security.label()),
            hosts: n,
            endpoints_per_host: (0..n).map(|i| plan.endpoints(i)).sum::<usize>() as f64 / n as f64,
            load_bytes: self.load_bytes,
            ..FleetRow::default()
        };
        let mut fleet =
            Fleet::new(&sim, plan.clone(), self.role_command.clone(), dir).map_err(|e| e.to_string())?;
        let all: Vec<usize> = (0..n).collect();
        bar.set_message(format!("{} {} {n} hosts: discovery", plan.system.id(), plan.mode.id()));
        for &i in &all {
            fleet.start_host(i).map_err(|e| e.to_string())?;
        }
        let start = mono_ns();
        row.processes = fleet.pids().len();
        row.discovery_s = Some(fleet.heard(&all, &all, start, DISCOVERY_TIMEOUT)?);

        bar.set_message(format!("{} {} {n} hosts: idle", plan.system.id(), plan.mode.id()));
        fleet.tell_drivers(&all, "quiet");
        std::thread::sleep(Duration::from_secs(1));
        row.idle = fleet.idle(self.idle_seconds);
        let ep = row.endpoints_per_host;
        row.idle_cpu_percent_per_endpoint = row.idle.cpu_percent_per_host.map(|c| c / ep);
        row.idle_rss_bytes_per_endpoint = row.idle.rss_bytes_per_host.map(|r| r / ep);
        row.idle_tx_bytes_per_s_per_endpoint = row.idle.tx_bytes_per_s_per_host.map(|b| b / ep);
        fleet.tell_drivers(&all, "talk");

        bar.set_message(format!("{} {} {n} hosts: capacity", plan.system.id(), plan.mode.id()));
        let robots: Vec<usize> = (1..n).collect();
        fleet.tell_drivers(&robots, &format!("load {} {}", self.load_hz, self.load_bytes));
        std::thread::sleep(Duration::from_secs(1));
        let load = fleet.base_report().and_then(|_| {
            std::thread::sleep(Duration::from_secs_f64(self.load_seconds));
            fleet.base_report()
        });
        fleet.tell_drivers(&robots, &format!("load {} 64", self.rate_hz));
        match load {
            Ok(r) => {
                let got = r.received.get("status").copied().unwrap_or(0);
                row.load_offered_per_s = Some(robots.len() as f64 * self.load_hz);
                row.load_received_per_s = Some(got as f64 / r.seconds.max(1e-9));
                row.load_latency_us = Some(r.status_latency);
                row.load_gaps = Some(r.gaps);
            }
            Err(e) => row.notes.push(format!("capacity: {e}")),
        }

        bar.set_message(format!("{} {} {n} hosts: join", plan.system.id(), plan.mode.id()));
        std::thread::sleep(Duration::from_millis(500));
        fleet.discard_lines();
        let t = mono_ns();
        match fleet.start_host(n) {
            Ok(()) => {
                let mut with_new = all.clone();
                with_new.push(n);
                let groups: [(&[usize], &[usize]); 2] = [(&with_new, &[n]), (&[n], &with_new)];
                match fleet.heard_all(&groups, t, RECOVERY_TIMEOUT) {
                    Ok(s) => row.join_s = Some(s),
                    Err(e) => row.notes.push(format!("join: {e}")),
                }
            }
            Err(e) => row.notes.push(format!("join: {e}")),
        }
        if !self.faults {
            return Ok(row);
        }

        bar.set_message(format!("{} {} {n} hosts: partition", plan.system.id(), plan.mode.id()));
        let running = fleet.running();
        let (a, b) = running.split_at(running.len() / 2);
        let hold = Duration::from_millis((self.lease_ms * 3 / 2).max(3000));
        fleet.discard_lines();
        match sim.partition(a, b) {
            Ok(()) => {
                std::thread::sleep(hold);
                sim.heal();
                let t = mono_ns();
                row.partition_s = Some(hold.as_secs_f64());
                match fleet.heard_all(&[(a, b), (b, a)], t, RECOVERY_TIMEOUT) {
                    Ok(s) => row.partition_heal_s = Some(s),
                    Err(e) => {
                        row.notes.push(format!("partition: {e}"));
                        if let Some(counts) = fleet.pose_subscriber_counts() {
                            row.notes.push(format!(
                                "after the heal, remote and local subscribers each host's \
                                 /fleet/pose publisher counted (all {} planners expected): {counts}",
                                running.len()
                            ));
                        }
                    }
                }
            }
            Err(e) => row.notes.push(format!("partition: {e}")),
        }

        bar.set_message(format!("{} {} {n} hosts: rejoin", plan.system.id(), plan.mode.id()));
        let k = 1;
        fleet.kill_host(k);
        std::thread::sleep(Duration::from_millis(2 * run::SILENCE_MS + 500));
        fleet.discard_lines();
        let t = mono_ns();
        match fleet.start_host(k) {
            Ok(()) => {
                let others: Vec<usize> = fleet.running();
                let groups: [(&[usize], &[usize]); 2] = [(&others, &[k]), (&[k], &others)];
                match fleet.heard_all(&groups, t, RECOVERY_TIMEOUT) {
                    Ok(s) => row.rejoin_s = Some(s),
                    Err(e) => row.notes.push(format!("rejoin: {e}")),
                }
            }
            Err(e) => row.notes.push(format!("rejoin: {e}")),
        }
        Ok(row)
    }

    /// Two routers (hosts 0 and 1), four hosts, robots sending status at 100 Hz; router 0
    /// killed mid-stream.
    fn run_failover(&self, system: FleetSystem, domain: u32) -> Result<FailoverRow, String> {
        let n = 4;
        let mut plan = self.plan(system, Mode::Router, n, domain);
        plan.routers = 2;
        let sim = SimHosts::create(n + plan.spare, self.lease_ms).map_err(|e| e.to_string())?;
        let dir = self.dir.join(format!("{}-failover", system.id()));
        let mut fleet =
            Fleet::new(&sim, plan, self.role_command.clone(), dir).map_err(|e| e.to_string())?;
        let all: Vec<usize> = (0..n).collect();
        for &i in &all {
            fleet.start_host(i).map_err(|e| e.to_string())?;
        }
        fleet.heard(&all, &all, mono_ns(), DISCOVERY_TIMEOUT)?;
        let robots: Vec<usize> = (1..n).collect();
        let hz = 100.0;
        fleet.tell_drivers(&robots, &format!("load {hz} 64"));
        std::thread::sleep(Duration::from_secs(1));
        fleet.base_report()?;
        let t0 = mono_ns();
        std::thread::sleep(Duration::from_millis(500));
        fleet.kill_router(0);
        std::thread::sleep(Duration::from_millis(self.lease_ms * 2 + 2000));
        fleet.tell_drivers(&robots, "quiet");
        std::thread::sleep(Duration::from_millis(1500));
        let r = fleet.base_report()?;
        let mut notes = Vec::new();
        if r.received.get("status").copied().unwrap_or(0) == 0 {
            notes.push("the base station received nothing after the failure".into());
        }
        Ok(FailoverRow {
            suite: "fleet",
            kind: "router-failover",
            system: system.id().into(),
            hosts: n,
            load_per_s: robots.len() as f64 * hz,
            received: r.received.get("status").copied().unwrap_or(0),
            gaps: r.gaps,
            nerve_lost: r.nerve_lost,
            seconds: (mono_ns() - t0) as f64 / 1e9,
            notes,
        })
    }

    /// Runs the one-host rows, every fleet and the failover.
    pub fn execute(&self, env: &Env) -> Result<SuiteOutput, String> {
        self.validate()?;
        let machine = &env.machine;
        let mut rows = Vec::new();
        let mut failover = Vec::new();
        let (one, mut skipped) = match self.one_host {
            Some((topics, nodes)) => one_host::measure(env, topics, nodes),
            None => (Vec::new(), Vec::new()),
        };
        if let Some(why) = crate::harness::hosts::unavailable() {
            skipped.push(Skipped {
                system: "every system".into(),
                payload_bytes: None,
                reason: format!("no simulated hosts: {why}"),
            });
            return Ok(output(rows, failover, one, skipped, self, machine));
        }
        let domain = crate::harness::interrupt::domain(760, 30);
        let mut plans = Vec::new();
        for &n in &self.sizes {
            for &mode in &self.modes {
                for &system in &self.systems {
                    plans.push(self.plan(system, mode, n, domain));
                }
            }
            if self.policy_sizes.contains(&n) && self.systems.contains(&FleetSystem::Nerve) {
                for security in [Security::Tls, Security::Policy] {
                    plans.push(FleetPlan {
                        security,
                        ..self.plan(FleetSystem::Nerve, Mode::Peer, n, domain)
                    });
                }
            }
        }
        let fleets = plans.len();
        let bar = progress(
            (fleets + if self.failover { self.systems.len() } else { 0 }) as u64,
            "fleets",
        );
        for plan in plans {
            let name = format!(
                "{} {}{} {} hosts",
                plan.system.id(),
                plan.mode.id(),
                plan.security.label(),
                plan.hosts
            );
            match self.run_fleet(plan, &bar) {
                Ok(r) => rows.push(r),
                Err(e) => skipped.push(Skipped {
                    system: name,
                    payload_bytes: None,
                    reason: e,
                }),
            }
            bar.inc(1);
        }
        if self.failover {
            for &system in &self.systems {
                bar.set_message(format!("{} router failover", system.id()));
                match self.run_failover(system, domain) {
                    Ok(r) => failover.push(r),
                    Err(e) => skipped.push(Skipped {
                        system: format!("{} router failover", system.id()),
                        payload_bytes: None,
                        reason: e,
                    }),
                }
                bar.inc(1);
            }
        }
        bar.finish_and_clear();
        Ok(output(rows, failover, one, skipped, self, machine))
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("–".into(), f)
}

/// Least-squares line through `(x, y)`: (slope, intercept); `None` under two points.
fn fit(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    if sxx == 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    Some((slope, my - slope * mx))
}

/// The suite's part of the report.
pub fn output(
    rows: Vec<FleetRow>,
    failover: Vec<FailoverRow>,
    one: Vec<one_host::OneHostRow>,
    skipped: Vec<Skipped>,
    suite: &FleetSuite,
    machine: &Machine,
) -> SuiteOutput {
    let head = [
        "system",
        "mode",
        "hosts",
        "endpoints/host",
        "discovery s",
        "join s",
        "idle CPU %/host",
        "RSS MB/host",
        "sent B/s/host",
        "CPU %/endpoint",
        "RSS KB/endpoint",
        "status rx/s (offered)",
        "P50 µs",
        "P99 µs",
        "P99.9 µs",
        "max µs",
        "gaps",
        "heal s",
        "rejoin s",
    ];
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let l = r.load_latency_us;
            vec![
                r.system.clone(),
                r.mode.clone(),
                r.hosts.to_string(),
                format!("{:.0}", r.endpoints_per_host),
                opt(r.discovery_s, |v| format!("{v:.2}")),
                opt(r.join_s, |v| format!("{v:.2}")),
                opt(r.idle.cpu_percent_per_host, |v| format!("{v:.3}")),
                opt(r.idle.rss_bytes_per_host, |v| format!("{:.1}", v / 1e6)),
                opt(r.idle.tx_bytes_per_s_per_host, |v| format!("{v:.0}")),
                opt(r.idle_cpu_percent_per_endpoint, |v| format!("{v:.4}")),
                opt(r.idle_rss_bytes_per_endpoint, |v| format!("{:.0}", v / 1e3)),
                match (r.load_received_per_s, r.load_offered_per_s) {
                    (Some(a), Some(b)) => format!("{a:.0} ({b:.0})"),
                    _ => "–".into(),
                },
                opt(l.map(|d| d.p50), num),
                opt(l.map(|d| d.p99), num),
                opt(l.map(|d| d.p999), num),
                opt(l.map(|d| d.max), num),
                r.load_gaps.map_or("–".into(), |g| g.to_string()),
                opt(r.partition_heal_s, |v| format!("{v:.2}")),
                opt(r.rejoin_s, |v| format!("{v:.2}")),
            ]
        })
        .collect();
    let mut labels: Vec<(String, String)> = Vec::new();
    for r in &rows {
        let k = (r.system.clone(), r.mode.clone());
        if !labels.contains(&k) {
            labels.push(k);
        }
    }
    let series = |y: &dyn Fn(&FleetRow) -> Option<f64>| -> Vec<Series> {
        labels
            .iter()
            .map(|(s, m)| Series {
                label: format!("{s} {m}"),
                points: rows
                    .iter()
                    .filter(|r| &r.system == s && &r.mode == m)
                    .filter_map(|r| y(r).map(|v| (r.hosts as f64, v)))
                    .collect(),
            })
            .collect()
    };
    let mut section = Section::new(
        "fleet: simulated hosts on Zenoh",
        &format!(
            "Hosts are network namespaces on one bridge, each with a private /dev/shm, a \
             driver and a planner process, {} sensor topics between them, and the fleet's \
             topics (/fleet/pose all to all, /fleet/status robots to the base station, \
             /fleet/cmd base station to robots; reliable). peer: every process a Zenoh peer \
             that connects to the base station and meets the others by gossip (multicast \
             scouting off); router: robots behind a base station, every process a Zenoh \
             client of a router there. raw zenoh runs the same processes on Zenoh \
             publishers and subscribers with the same Zenoh files. Discovery and recovery \
             times are measured by data (publishers at {} Hz: the resolution is {} ms). \
             Load: every robot sends status at {} Hz, {} bytes. Link lease {} ms. {} s idle \
             and load windows; machine: {} ({} cores): every host shares them, so the \
             larger fleets measure this machine's CPU as much as the middleware.",
            suite.local_topics,
            suite.rate_hz,
            (1000.0 / suite.rate_hz) as u64,
            suite.load_hz,
            suite.load_bytes,
            suite.lease_ms,
            suite.idle_seconds,
            machine.cpu,
            machine.cores,
        ),
    );
    section.figure(
        &line_chart(
            "Discovery time vs hosts",
            &Axis::linear("hosts"),
            &Axis::linear("discovery (s)"),
            &series(&|r| r.discovery_s),
        ),
        "From the last host's start until every planner had a sample from every publisher.",
    );
    section.figure(
        &line_chart(
            "Idle CPU per host vs hosts",
            &Axis::linear("hosts"),
            &Axis::linear("CPU % of one core per host"),
            &series(&|r| r.idle.cpu_percent_per_host),
        ),
        "Publishers quiet: every process of the fleet (routers included) divided by hosts.",
    );
    section.figure(
        &line_chart(
            "Idle network traffic per host vs hosts",
            &Axis::linear("hosts"),
            &Axis::linear("bytes sent per second per host"),
            &series(&|r| r.idle.tx_bytes_per_s_per_host),
        ),
        "Liveliness, discovery and keep-alive traffic with publishers quiet.",
    );
    section.table(Some("Every fleet"), &head, &table);
    let notes: Vec<String> = rows
        .iter()
        .flat_map(|r| {
            r.notes
                .iter()
                .map(move |n| format!("{} {} {} hosts: {n}", r.system, r.mode, r.hosts))
        })
        .collect();
    if !notes.is_empty() {
        section.list(&notes);
    }
    let fo_head = ["system", "hosts", "load /s", "received", "gaps", "Nerve counted lost", "window s", "notes"];
    let fo: Vec<Vec<String>> = failover
        .iter()
        .map(|f| {
            vec![
                f.system.clone(),
                f.hosts.to_string(),
                format!("{:.0}", f.load_per_s),
                f.received.to_string(),
                f.gaps.to_string(),
                f.nerve_lost.map_or("–".into(), |l| l.to_string()),
                format!("{:.1}", f.seconds),
                f.notes.join("; "),
            ]
        })
        .collect();
    section.table(
        Some("Router failover: two routers, router 0 killed under load (reliable status)"),
        &fo_head,
        &fo,
    );
    // paper projection from the measured per-host costs
    let mut proj = Vec::new();
    for (s, m) in &labels {
        let pts = |y: &dyn Fn(&FleetRow) -> Option<f64>| -> Vec<(f64, f64)> {
            rows.iter()
                .filter(|r| &r.system == s && &r.mode == m)
                .filter_map(|r| y(r).map(|v| (r.hosts as f64, v)))
                .collect()
        };
        // a falling fit (noise around a flat cost) is taken as flat: its mean
        let at = |p: &[(f64, f64)], x: f64| {
            fit(p).map(|(a, b)| {
                if a < 0.0 {
                    p.iter().map(|q| q.1).sum::<f64>() / p.len() as f64
                } else {
                    a * x + b
                }
            })
        };
        let cpu = pts(&|r| r.idle.cpu_percent_per_host);
        let tx = pts(&|r| r.idle.tx_bytes_per_s_per_host);
        let disc = pts(&|r| r.discovery_s);
        for x in [100.0, 1000.0] {
            proj.push(vec![
                format!("{s} {m}"),
                format!("{x:.0}"),
                opt(at(&cpu, x), |v| format!("{v:.2}")),
                opt(at(&tx, x), |v| format!("{:.1}", v / 1e3)),
                opt(at(&tx, x), |v| format!("{:.2}", v * x / 1e6)),
                opt(at(&disc, x), |v| format!("{v:.1}")),
            ]);
        }
    }
    section.table(
        Some(
            "Paper projection: per-host costs fitted linearly in hosts (a falling fit taken as \
             flat), extrapolated; fleet traffic = per host × hosts",
        ),
        &[
            "system",
            "hosts",
            "idle CPU %/host",
            "sent KB/s/host",
            "fleet traffic MB/s",
            "discovery s",
        ],
        &proj,
    );
    if suite.one_host.is_some() {
        one_host::add_table(&mut section, &one);
    }
    let mut summary = one_host::summary(&one);
    summary.push_str("fleet: hosts, discovery s, idle CPU %/host, sent B/s/host\n");
    for t in &table {
        summary.push_str(&format!("  {} {} {:>3}  {}  {}  {}\n", t[0], t[1], t[2], t[4], t[6], t[8]));
    }
    let mut checks = if suite.one_host.is_some() {
        one_host::checks(&one, &skipped)
    } else {
        Vec::new()
    };
    checks.extend(self::checks(&rows, &failover, &skipped, suite));
    let mut json = json_rows(&one);
    json.extend(json_rows(&rows));
    json.extend(json_rows(&failover));
    section.finish("fleet", json, skipped, checks, summary)
}

/// Why `row`'s `phase` has no figure: its note, or "not measured".
fn phase_note(row: &FleetRow, phase: &str) -> String {
    row.notes
        .iter()
        .find(|n| n.starts_with(phase))
        .cloned()
        .unwrap_or_else(|| format!("{phase} not measured"))
}

/// The targets of issue 46.
fn checks(
    rows: &[FleetRow],
    failover: &[FailoverRow],
    skipped: &[Skipped],
    suite: &FleetSuite,
) -> Vec<Verdict> {
    let mut out = Vec::new();
    let nerve: Vec<&FleetRow> = rows.iter().filter(|r| r.system == "nerve").collect();
    let why = |what: &str| {
        crate::report::why_missing(skipped, what, |k| {
            k.system.starts_with("nerve") || k.system == "every system"
        })
    };
    for mode in &suite.modes {
        let at32 = nerve.iter().find(|r| r.hosts == 32 && r.mode == mode.id());
        out.push(Verdict::judged(
            "fleet",
            "discovery at 32 hosts <= 3 s",
            format!("nerve {}", mode.id()),
            match at32 {
                Some(r) => r.discovery_s.ok_or_else(|| phase_note(r, "discovery")).map(Some),
                None if suite.sizes.contains(&32) => Err(why("32 hosts")),
                None => Err("32 hosts not in this run's sizes".into()),
            },
            |v| v <= 3.0,
        ));
    }
    for r in &nerve {
        let scope = format!("nerve {} {} hosts", r.mode, r.hosts);
        out.push(Verdict::new(
            "fleet",
            "idle host <= 0.5 % of a core",
            &scope,
            r.idle.cpu_percent_per_host,
            |v| v <= 0.5,
        ));
        if suite.faults {
            out.push(Verdict::judged(
                "fleet",
                "partition healed in <= 5 s",
                &scope,
                r.partition_heal_s
                    .ok_or_else(|| phase_note(r, "partition"))
                    .map(Some),
                |v| v <= 5.0,
            ));
        }
    }
    if suite.failover {
        let f = failover.iter().find(|f| f.system == "nerve");
        out.push(Verdict::judged(
            "fleet",
            "no reliable sample lost across a router failover",
            "nerve, two routers, 4 hosts",
            f.map(|f| Some(f.gaps as f64))
                .ok_or_else(|| why("nerve router failover")),
            |v| v == 0.0,
        ));
    }
    out
}
