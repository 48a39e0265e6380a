//! `nerve bench fleet`: its options, its preset in `bench all`, its child roles.

use super::role::{self, FleetSystem, HostSpec};
use super::{FleetSuite, Mode};
use crate::harness::child::{say, stdin_closed};
use crate::harness::PeerError;
use crate::report::SuiteOutput;
use crate::suite::{self, Env, Role, Suite, SuiteError, Variant};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Options of `nerve bench fleet`.
#[derive(clap::Args)]
pub struct FleetOptions {
    /// 4, 8 and 16 hosts with 2 s windows instead of 4 to 32 with 5 s.
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Fleet sizes (hosts at the start), comma-separated.
    #[arg(long, value_delimiter = ',')]
    hosts: Option<Vec<usize>>,
    /// Topologies: peer, router (comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = ["peer", "router"])]
    modes: Option<Vec<String>>,
    /// Systems: nerve, zenoh (comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = ["nerve", "zenoh"])]
    systems: Option<Vec<String>>,
    /// Sensor topics per host.
    #[arg(long)]
    local_topics: Option<u32>,
    /// Seconds of the idle and load windows (overrides --quick).
    #[arg(long)]
    seconds: Option<f64>,
    /// Zenoh link lease, ms (Zenoh's default is 10000; keep-alives go every quarter).
    #[arg(long)]
    lease_ms: Option<u64>,
    /// Skip the join, partition and rejoin phases and the router failover.
    #[arg(long)]
    no_faults: bool,
    /// Sizes at which Nerve's peer fleet also runs over TLS and over TLS with a policy
    /// (comma-separated; empty: none).
    #[arg(long, value_delimiter = ',')]
    policy_hosts: Option<Vec<usize>>,
    /// Skip the one-host rows.
    #[arg(long)]
    no_one_host: bool,
    /// Topics of the one-host rows.
    #[arg(long, default_value_t = 1000)]
    topics: usize,
    /// Nodes of the one-host rows (at least 2: half publish, half subscribe).
    #[arg(long, default_value_t = 100)]
    nodes: usize,
}

impl suite::Options for FleetOptions {
    fn out(&self) -> &Path {
        &self.out
    }
}

/// The role a router process runs: Nerve's router (Zenoh's, see
/// [`nerve::net::Router`]) with the file given, until stdin closes.
fn run_router(args: &[String]) -> Result<(), PeerError> {
    let path = args.first().map(String::as_str).unwrap_or("");
    let router = nerve::net::Router::open(Some(Path::new(path)), &[])
        .map_err(|e| PeerError::setup("zenoh router", e))?;
    let stop = stdin_closed();
    say("ready");
    // SYNC: a plain flag; nothing else is published through it.
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(router);
    Ok(())
}

impl Suite for FleetSuite {
    type Options = FleetOptions;
    const NAME: &'static str = "fleet";
    const ABOUT: &'static str = "A fleet of simulated hosts on Zenoh (4 to 32, peers or robots \
                                 behind a base station's router): discovery, join, idle cost \
                                 per host and endpoint, capacity, partition and heal, a host \
                                 leaving and rejoining, router failover; Nerve beside raw \
                                 Zenoh; and one host with 1000 topics and 100 nodes";
    const SEED: Option<&'static str> = Some("001");
    const ROLES: &'static [Role] = &[
        Role {
            name: "fleet-host",
            run: |args| {
                let spec: HostSpec = suite::spec(args, "fleet host")?;
                Ok(role::run(&spec)?)
            },
        },
        Role {
            name: "fleet-router",
            run: |args| Ok(run_router(args)?),
        },
        super::one_host::ROLES[0],
    ];

    fn preset(variant: Variant, env: &Env) -> FleetSuite {
        let dir = env.out.join("fleet");
        match variant {
            Variant::Full => FleetSuite::full(env.role_command(), dir),
            Variant::Quick => FleetSuite::quick(env.role_command(), dir),
            Variant::Smoke => FleetSuite {
                sizes: vec![3],
                modes: vec![Mode::Peer],
                systems: vec![FleetSystem::Nerve],
                local_topics: 4,
                idle_seconds: 0.5,
                load_seconds: 0.5,
                failover: false,
                policy_sizes: Vec::new(),
                one_host: Some((50, 10)),
                ..FleetSuite::quick(env.role_command(), dir)
            },
        }
    }

    fn from_options(o: FleetOptions, env: &Env) -> Result<FleetSuite, SuiteError> {
        let dir = o.out.join("fleet");
        let mut s = if o.quick {
            FleetSuite::quick(env.role_command(), dir)
        } else {
            FleetSuite::full(env.role_command(), dir)
        };
        if let Some(h) = o.hosts {
            s.sizes = h;
        }
        if let Some(m) = o.modes {
            s.modes = m
                .iter()
                .map(|m| if m == "router" { Mode::Router } else { Mode::Peer })
                .collect();
        }
        if let Some(v) = o.systems {
            s.systems = v
                .iter()
                .map(|v| {
                    if v == "zenoh" {
                        FleetSystem::Zenoh
                    } else {
                        FleetSystem::Nerve
                    }
                })
                .collect();
        }
        if let Some(t) = o.local_topics {
            s.local_topics = t;
        }
        if let Some(v) = o.seconds {
            (s.idle_seconds, s.load_seconds) = (v, v);
        }
        if let Some(l) = o.lease_ms {
            s.lease_ms = l;
        }
        if let Some(p) = o.policy_hosts {
            s.policy_sizes = p;
        }
        if o.no_faults {
            (s.faults, s.failover) = (false, false);
        }
        if o.topics == 0 || o.nodes < 2 {
            return Err(SuiteError::Invalid(
                "--topics at least 1, --nodes at least 2".into(),
            ));
        }
        s.one_host = (!o.no_one_host).then_some((o.topics, o.nodes));
        s.validate().map_err(SuiteError::Invalid)?;
        Ok(s)
    }

    fn quick(&self) -> bool {
        self.quick
    }

    fn run(&self, env: &Env) -> Result<SuiteOutput, SuiteError> {
        self.execute(env).map_err(SuiteError::Failed)
    }
}
