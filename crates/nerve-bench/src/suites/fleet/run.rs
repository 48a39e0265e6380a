//! One fleet on simulated hosts: its Zenoh topology, its processes, and the phases run
//! on it (discovery, idle, capacity, join, partition, leave and rejoin, router failover).

use super::role::{FleetSystem, HostSpec, Part, Report};
use crate::harness::child::Child;
use crate::harness::hosts::SimHosts;
use crate::harness::machine::{cpu_ns, memory, mono_ns};
use crate::harness::PeerError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

/// How the hosts' Zenoh sessions find each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Every process a Zenoh peer: each connects to the base station and learns the
    /// others by gossip (multicast scouting off), then links to each directly.
    Peer,
    /// Robots behind a base station: every process a Zenoh client of one router on the
    /// base station host; nothing passes from robot to robot except through it.
    Router,
}

impl Mode {
    /// Its id in reports.
    pub fn id(self) -> &'static str {
        match self {
            Mode::Peer => "peer",
            Mode::Router => "router",
        }
    }
}

/// How the fleet's links are secured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Security {
    /// Plain TCP.
    Tcp,
    /// Mutual TLS, every host certified by one CA.
    Tls,
    /// Mutual TLS from a policy file (Nerve only), whose access-control rules every host
    /// checks on every message.
    Policy,
}

impl Security {
    /// How a row names it after the mode.
    pub fn label(self) -> &'static str {
        match self {
            Security::Tcp => "",
            Security::Tls => ", tls",
            Security::Policy => ", tls + policy",
        }
    }
}

/// The policy a fleet runs with ([`Security::Policy`]): robots may not command the
/// fleet nor serve the base station's names, the base station may not publish robots'
/// status; everything else allowed. Every message is checked against it; no rule denies
/// what the fleet sends.
pub const FLEET_POLICY: &str = "default = \"allow\"\n\n[subjects]\nbase = [\"hosta\"]\n\
robots = [{robots}]\n\n[[rules]]\nid = \"robots_do_not_command\"\npermission = \"deny\"\n\
subjects = [\"robots\"]\nactions = [\"publish\"]\nnames = [\"/fleet/cmd\", \"/base/**\"]\n\n\
[[rules]]\nid = \"base_reads_status\"\npermission = \"deny\"\nsubjects = [\"base\"]\n\
actions = [\"publish\"]\nnames = [\"/fleet/status\"]\n\n";

/// Zenoh port of a host's driver (peer mode), planner, and router.
const DRIVER_PORT: u16 = 7447;
const PLANNER_PORT: u16 = 7448;
const ROUTER_PORT: u16 = 7450;

/// What one fleet run is.
#[derive(Clone, Debug)]
pub struct FleetPlan {
    /// Middleware.
    pub system: FleetSystem,
    /// Topology.
    pub mode: Mode,
    /// Hosts at the start (the base station is host 0).
    pub hosts: usize,
    /// Routers (router mode): hosts 0, 1, … run one each.
    pub routers: usize,
    /// Sensor topics per host.
    pub local_topics: u32,
    /// Rate of every topic, Hz.
    pub rate_hz: f64,
    /// Zenoh link lease, ms.
    pub lease_ms: u64,
    /// Nerve domain.
    pub domain: u32,
    /// Extra simulated hosts created for joining later.
    pub spare: usize,
    /// How links are secured.
    pub security: Security,
}

impl FleetPlan {
    fn spec(&self, host: usize, part: Part) -> HostSpec {
        HostSpec {
            system: self.system,
            part,
            domain: self.domain,
            host: host as u32,
            base: 0,
            local_topics: self.local_topics,
            rate_hz: self.rate_hz,
            payload: 64,
            silence_ms: SILENCE_MS,
        }
    }

    /// Endpoints (publishers and subscribers) of host `i`.
    pub fn endpoints(&self, i: usize) -> usize {
        let local = self.local_topics as usize;
        // driver: sensors, pose, status or cmd; planner: sensors, pose, cmd, (status)
        (local + 2) + (local + 2 + usize::from(i == 0))
    }
}

/// Silence after which a publisher's samples count as resumed (`seen` again), ms: five
/// periods at 10 Hz.
pub const SILENCE_MS: u64 = 500;

/// A running fleet: the hosts, their processes, the routers.
pub struct Fleet<'a> {
    sim: &'a SimHosts,
    plan: FleetPlan,
    role: (PathBuf, Vec<String>),
    dir: PathBuf,
    /// (driver, planner) of every host started; `None` while stopped.
    pub procs: Vec<Option<(Child, Child)>>,
    /// Router processes (router mode).
    pub routers: Vec<Option<Child>>,
    /// Extra environment of each host's processes (the policy).
    env: Vec<Vec<(&'static str, String)>>,
}

fn setup(e: impl std::fmt::Display) -> PeerError {
    PeerError::setup("fleet", e)
}

impl<'a> Fleet<'a> {
    /// Writes the Zenoh files of every host and starts the routers (router mode).
    pub fn new(
        sim: &'a SimHosts,
        plan: FleetPlan,
        role: (PathBuf, Vec<String>),
        dir: PathBuf,
    ) -> Result<Fleet<'a>, PeerError> {
        std::fs::create_dir_all(&dir).map_err(setup)?;
        let env = match plan.security {
            Security::Tcp => vec![Vec::new(); sim.hosts().len()],
            Security::Tls => crate::harness::pki::certify_fleet(sim, None)?.env,
            Security::Policy => {
                let robots: Vec<String> = sim.hosts()[1..]
                    .iter()
                    .map(|h| format!("\"{}\"", h.name))
                    .collect();
                let text = FLEET_POLICY.replace("{robots}", &robots.join(", "))
                    + crate::harness::pki::POLICY_TLS;
                crate::harness::pki::certify_fleet(sim, Some(&text))?.env
            }
        };
        let mut fleet = Fleet {
            sim,
            procs: Vec::new(),
            routers: Vec::new(),
            plan,
            role,
            dir,
            env,
        };
        if fleet.plan.mode == Mode::Router {
            for r in 0..fleet.plan.routers {
                fleet.routers.push(Some(fleet.start_router(r)?));
            }
        }
        Ok(fleet)
    }

    fn ip(&self, i: usize) -> &str {
        &self.sim.hosts()[i].ip
    }

    /// Scouting and transport settings of a process on host `i` (with TLS's link
    /// settings when the fleet runs TLS without a policy; a policy adds its own).
    fn common(&self, i: usize) -> String {
        let tls = match self.plan.security {
            Security::Tls => format!(", {}", crate::harness::pki::tls_link(&self.sim.hosts()[i])),
            Security::Tcp | Security::Policy => String::new(),
        };
        format!(
            "scouting: {{ multicast: {{ enabled: false }}, gossip: {{ enabled: true }} }},\n  \
             transport: {{ link: {{ tx: {{ lease: {} }}{tls} }} }},",
            self.plan.lease_ms
        )
    }

    /// The link protocol.
    fn proto(&self) -> &'static str {
        match self.plan.security {
            Security::Tcp => "tcp",
            Security::Tls | Security::Policy => "tls",
        }
    }

    fn routers_json(&self) -> String {
        (0..self.plan.routers)
            .map(|r| format!("\"{}/{}:{ROUTER_PORT}\"", self.proto(), self.ip(r)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The Zenoh file of host `i`'s `part`.
    fn config(&self, i: usize, part: Part) -> Result<PathBuf, PeerError> {
        let port = match part {
            Part::Driver => DRIVER_PORT,
            Part::Planner => PLANNER_PORT,
        };
        let text = match self.plan.mode {
            Mode::Peer => {
                let seed = if i == 0 && part == Part::Driver {
                    String::new()
                } else {
                    format!("\"{}/{}:{DRIVER_PORT}\"", self.proto(), self.ip(0))
                };
                format!(
                    "{{\n  mode: \"peer\",\n  listen: {{ endpoints: [\"{}/{}:{port}\"] }},\n  \
                     connect: {{ endpoints: [{seed}], retry: {{ period_init_ms: 50, period_max_ms: 500 }} }},\n  {}\n}}\n",
                    self.proto(),
                    self.ip(i),
                    self.common(i)
                )
            }
            Mode::Router => format!(
                "{{\n  mode: \"client\",\n  connect: {{ endpoints: [{}], timeout_ms: -1, \
                 retry: {{ period_init_ms: 50, period_max_ms: 500 }} }},\n  {}\n}}\n",
                self.routers_json(),
                self.common(i)
            ),
        };
        let path = self.dir.join(format!("zenoh-{i}-{part:?}.json5"));
        std::fs::write(&path, text).map_err(setup)?;
        Ok(path)
    }

    fn start_router(&self, r: usize) -> Result<Child, PeerError> {
        let others: Vec<String> = (0..r)
            .map(|o| format!("\"{}/{}:{ROUTER_PORT}\"", self.proto(), self.ip(o)))
            .collect();
        let text = format!(
            "{{\n  mode: \"router\",\n  listen: {{ endpoints: [\"{}/{}:{ROUTER_PORT}\"] }},\n  \
             connect: {{ endpoints: [{}], retry: {{ period_init_ms: 50, period_max_ms: 500 }} }},\n  {}\n}}\n",
            self.proto(),
            self.ip(r),
            others.join(", "),
            self.common(r)
        );
        let path = self.dir.join(format!("router-{r}.json5"));
        std::fs::write(&path, text).map_err(setup)?;
        let mut args = self.role.1.clone();
        args.extend(["fleet-router".to_string(), path.display().to_string()]);
        let mut c = self.sim.spawn(r, &self.role.0, &args, &[], "zenoh router")?;
        c.expect("ready", Duration::from_secs(20))?;
        Ok(c)
    }

    /// Starts host `i`'s driver and planner (not waiting for them).
    pub fn start_host(&mut self, i: usize) -> Result<(), PeerError> {
        let mut pair = Vec::new();
        for part in [Part::Driver, Part::Planner] {
            let spec = serde_json::to_string(&self.plan.spec(i, part)).map_err(setup)?;
            let mut args = self.role.1.clone();
            args.extend(["fleet-host".to_string(), spec]);
            let mut env = vec![
                ("NERVE_NETWORK", "on".to_string()),
                (
                    "NERVE_ZENOH_CONFIG",
                    self.config(i, part)?.display().to_string(),
                ),
            ];
            env.extend(self.env[i].iter().cloned());
            pair.push(self.sim.spawn(i, &self.role.0, &args, &env, "fleet host")?);
        }
        let planner = pair.pop().ok_or_else(|| setup("no planner"))?;
        let driver = pair.pop().ok_or_else(|| setup("no driver"))?;
        if self.procs.len() <= i {
            self.procs.resize_with(i + 1, || None);
        }
        self.procs[i] = Some((driver, planner));
        Ok(())
    }

    /// Kills host `i`'s processes at once, as a power loss would.
    pub fn kill_host(&mut self, i: usize) {
        if let Some(Some((mut d, mut p))) = self.procs.get_mut(i).map(Option::take) {
            d.kill();
            p.kill();
        }
    }

    /// Hosts running.
    pub fn running(&self) -> Vec<usize> {
        (0..self.procs.len())
            .filter(|&i| self.procs[i].is_some())
            .collect()
    }

    /// Every (topic, publishing host) planner `j` must hear from, among `hosts`.
    fn expected_by(&self, j: usize, hosts: &[usize]) -> BTreeSet<(String, u32)> {
        let mut e = BTreeSet::new();
        if hosts.contains(&j) {
            for k in 0..self.plan.local_topics {
                e.insert((format!("s{k}"), j as u32));
            }
        }
        for &i in hosts {
            e.insert(("pose".to_string(), i as u32));
            if i == 0 {
                e.insert(("cmd".to_string(), 0));
            } else if j == 0 {
                e.insert(("status".to_string(), i as u32));
            }
        }
        e
    }

    /// Waits until every planner in `listeners` heard, after `since`, from every
    /// publisher of `publishers` it subscribes to; returns seconds from `since` to the
    /// last of those arrivals, or why not within `timeout`.
    pub fn heard(
        &mut self,
        listeners: &[usize],
        publishers: &[usize],
        since: u64,
        timeout: Duration,
    ) -> Result<f64, String> {
        self.heard_all(&[(listeners, publishers)], since, timeout)
    }

    /// [`Fleet::heard`] for several (listeners, publishers) groups at once (a planner's
    /// lines are read once: a later call would not see what an earlier one read).
    pub fn heard_all(
        &mut self,
        groups: &[(&[usize], &[usize])],
        since: u64,
        timeout: Duration,
    ) -> Result<f64, String> {
        let deadline = mono_ns() + timeout.as_nanos() as u64;
        let mut last = since;
        let mut listeners: Vec<usize> = groups.iter().flat_map(|g| g.0.iter().copied()).collect();
        listeners.sort_unstable();
        listeners.dedup();
        for j in listeners {
            let mut want = BTreeSet::new();
            for (l, p) in groups {
                if l.contains(&j) {
                    want.extend(self.expected_by(j, p));
                }
            }
            let Some(Some((driver, planner))) = self.procs.get_mut(j) else {
                return Err(format!("host {j} is not running"));
            };
            while !want.is_empty() {
                let left = Duration::from_nanos(deadline.saturating_sub(mono_ns()));
                let Some(line) = planner.try_expect("seen ", left) else {
                    // a process that exited says why on stderr
                    for (what, c) in [("driver", &mut *driver), ("planner", &mut *planner)] {
                        if c.wait_exit(Duration::ZERO) {
                            return Err(format!(
                                "host {j}'s {what} exited: {}",
                                c.stop_and_tail()
                            ));
                        }
                    }
                    let sample: Vec<String> = want
                        .iter()
                        .take(4)
                        .map(|(t, h)| format!("{t} from host {h}"))
                        .collect();
                    return Err(format!(
                        "host {j} still missed {} publishers after {:.1} s (e.g. {})",
                        want.len(),
                        timeout.as_secs_f64(),
                        sample.join(", ")
                    ));
                };
                let w: Vec<&str> = line.split_whitespace().collect();
                let (Some(topic), Some(host), Some(t)) = (
                    w.get(1),
                    w.get(2).and_then(|h| h.parse::<u32>().ok()),
                    w.get(3).and_then(|t| t.parse::<u64>().ok()),
                ) else {
                    continue;
                };
                if t >= since && want.remove(&(topic.to_string(), host)) {
                    last = last.max(t);
                }
            }
        }
        Ok((last - since) as f64 / 1e9)
    }

    /// Drops every line the processes printed so far.
    pub fn discard_lines(&mut self) {
        for (d, p) in self.procs.iter_mut().flatten() {
            d.discard_lines();
            p.discard_lines();
        }
    }

    /// Sends `line` to every driver of `hosts`.
    pub fn tell_drivers(&mut self, hosts: &[usize], line: &str) {
        for &i in hosts {
            if let Some(Some((d, _))) = self.procs.get_mut(i) {
                d.send(line);
            }
        }
    }

    /// Process ids of every process (routers included).
    pub fn pids(&self) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .procs
            .iter()
            .flatten()
            .flat_map(|(d, p)| [d.pid(), p.pid()])
            .collect();
        out.extend(self.routers.iter().flatten().map(Child::pid));
        out
    }

    /// The base station planner's report since its last one.
    pub fn base_report(&mut self) -> Result<Report, String> {
        let Some(Some((_, planner))) = self.procs.get_mut(0) else {
            return Err("the base station is not running".into());
        };
        planner.discard_lines();
        planner.send("report");
        let line = planner
            .try_expect("report ", Duration::from_secs(10))
            .ok_or("the base station gave no report")?;
        serde_json::from_str(line.trim_start_matches("report "))
            .map_err(|e| format!("bad report: {e}"))
    }

    /// Idle footprint over `seconds`: every process's CPU and memory, every host's
    /// sent bytes.
    pub fn idle(&self, seconds: f64) -> Idle {
        let pids = self.pids();
        let hosts = self.running();
        let tx = |hs: &[usize]| -> Option<u64> {
            hs.iter().map(|&i| self.sim.tx_bytes(i)).sum::<Option<u64>>()
        };
        let cpu = |pids: &[u32]| -> Option<u64> { pids.iter().map(|&p| cpu_ns(p)).sum() };
        let (c0, b0, t0) = (cpu(&pids), tx(&hosts), mono_ns());
        std::thread::sleep(Duration::from_secs_f64(seconds));
        let (c1, b1, t1) = (cpu(&pids), tx(&hosts), mono_ns());
        let wall = (t1 - t0) as f64;
        let rss: Option<u64> = pids.iter().map(|&p| memory(p).map(|m| m.rss_bytes)).sum();
        let router_rss: Option<u64> = self
            .routers
            .iter()
            .flatten()
            .map(|c| memory(c.pid()).map(|m| m.rss_bytes))
            .sum();
        let n = hosts.len().max(1) as f64;
        Idle {
            cpu_percent_per_host: c0
                .zip(c1)
                .map(|(a, b)| b.saturating_sub(a) as f64 / wall * 100.0 / n),
            rss_bytes_per_host: rss.map(|r| r as f64 / n),
            router_rss_bytes: (!self.routers.is_empty()).then_some(router_rss).flatten(),
            tx_bytes_per_s_per_host: b0
                .zip(b1)
                .map(|(a, b)| b.saturating_sub(a) as f64 / (wall / 1e9) / n),
            seconds: wall / 1e9,
        }
    }

    /// Kills router `r` (SIGKILL).
    pub fn kill_router(&mut self, r: usize) {
        if let Some(Some(mut c)) = self.routers.get_mut(r).map(Option::take) {
            c.kill();
        }
    }
}

impl Fleet<'_> {
    /// The subscribers each running host's `/fleet/pose` publisher counts (Nerve's
    /// count, from the drivers' `report`), as `h0 9, h1 8, …`: what a note shows when a
    /// phase fails (raw Zenoh counts nothing: `None`).
    pub fn pose_subscriber_counts(&mut self) -> Option<String> {
        let mut out = Vec::new();
        for (i, p) in self.procs.iter_mut().enumerate() {
            let Some((d, _)) = p else { continue };
            d.discard_lines();
            d.send("report");
            let line = d.try_expect("sent ", Duration::from_secs(5))?;
            let v: serde_json::Value =
                serde_json::from_str(line.trim_start_matches("sent ")).ok()?;
            out.push(format!("h{i} {}", v["subscribers"]["pose"].as_u64()?));
        }
        Some(out.join(", "))
    }
}

impl Drop for Fleet<'_> {
    fn drop(&mut self) {
        for (d, p) in self.procs.iter_mut().flatten() {
            d.close_stdin();
            p.close_stdin();
        }
    }
}

/// An idle fleet's footprint.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Idle {
    /// CPU % of one core per host (all its processes; routers counted in the fleet).
    pub cpu_percent_per_host: Option<f64>,
    /// Resident memory per host, bytes.
    pub rss_bytes_per_host: Option<f64>,
    /// Resident memory of the routers, bytes.
    pub router_rss_bytes: Option<u64>,
    /// Bytes each host sends per second (liveliness, discovery, keep-alives).
    pub tx_bytes_per_s_per_host: Option<f64>,
    /// Window, s.
    pub seconds: f64,
}
