//! Simulated hosts on one machine, for tests and the cross-host benchmark.
//!
//! Every host is a network namespace with one interface, `eth0`, whose veth peer sits on
//! a bridge in a "switch" namespace, so hosts reach each other only over those links
//! (10.R.0.1, 10.R.0.2, …). Every process started on a host also gets its own mount
//! namespace in which `/dev/shm` is the host's private directory, and its Nerve state
//! directory is the host's own: nothing can pass through shared memory between hosts.
//!
//! Needs root (network namespaces, mounts) and `ip` and `unshare`; loss injection needs
//! `nft`. Everything is removed on drop, and when the run is interrupted
//! ([`crate::interrupt`]).

use crate::child::Child;
use crate::interrupt::{self, OnStop};
use crate::PeerError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a simulated host is called and how to reach it.
#[derive(Clone, Debug)]
pub struct SimHost {
    /// Host name (also its `NERVE_HOST_NAME`).
    pub name: String,
    /// Its network namespace.
    pub netns: String,
    /// Its address on the simulated network.
    pub ip: String,
    /// Its private directory: `shm/` becomes its `/dev/shm`, `state/` its Nerve state.
    pub dir: PathBuf,
    /// Its Zenoh configuration (peer mode, listening on its address, connecting to the
    /// hosts before it, no multicast scouting).
    pub zenoh_config: PathBuf,
}

/// JSON5 members added to a simulated host's Zenoh configuration.
#[derive(Clone, Debug, Default)]
pub struct ZenohExtra {
    /// Inside `transport.link` (e.g. `tls: {…}`).
    pub link: String,
    /// At the top level (e.g. `access_control: {…}`).
    pub top: String,
}

/// Packet faults on a simulated host's link (see [`SimHosts::set_faults`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// Percent of received packets dropped.
    pub loss_percent: u32,
    /// Percent of sent packets sent twice.
    pub duplicate_percent: u32,
    /// One sent packet in this many (a power of two, chosen by IP id) is held in a slow
    /// queue while later packets overtake it; 0: none.
    pub reorder_one_in: u32,
    /// Per mille of received TCP packets with a byte of their payload overwritten.
    pub corrupt_per_mille: u32,
}

/// A set of simulated hosts joined by a switch.
pub struct SimHosts {
    hosts: Vec<SimHost>,
    switch: String,
    dir: PathBuf,
    mounted: bool,
    /// Removes the hosts if the run is interrupted (no `Drop` runs then).
    _on_stop: OnStop,
}

/// Port every simulated host's Zenoh peer listens on.
pub const ZENOH_PORT: u16 = 7447;

fn run(cmd: &str, args: &[&str]) -> Result<(), PeerError> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| PeerError::setup("hosts", format!("cannot run {cmd}: {e}")))?;
    if !out.status.success() {
        return Err(PeerError::setup(
            "hosts",
            format!(
                "{cmd} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(())
}

/// Why simulated hosts cannot be made here, if they cannot (not root, no `ip`).
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("simulated hosts need root (network namespaces and mounts)".into());
    }
    for tool in ["ip", "unshare"] {
        let found = Command::new(tool).arg("-V").output().is_ok();
        if !found {
            return Some(format!("simulated hosts need `{tool}`"));
        }
    }
    None
}

impl SimHosts {
    /// Creates `n` hosts (2 or more) linked by plain TCP; `lease_ms` is the Zenoh link
    /// lease (how soon a vanished host is noticed).
    pub fn create(n: usize, lease_ms: u64) -> Result<SimHosts, PeerError> {
        SimHosts::create_with(n, lease_ms, "tcp", |_, _| ZenohExtra::default())
    }

    /// Like [`SimHosts::create`], over link protocol `proto` (`tcp` or `tls`);
    /// `extra(i, host)` adds to host `i`'s Zenoh configuration (TLS files, access control).
    pub fn create_with(
        n: usize,
        lease_ms: u64,
        proto: &str,
        extra: impl Fn(usize, &SimHost) -> ZenohExtra,
    ) -> Result<SimHosts, PeerError> {
        if let Some(why) = unavailable() {
            return Err(PeerError::setup("hosts", why));
        }
        // names unique per process and call, short enough for interface names
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tag = format!("nv{}x{k}", std::process::id() % 100_000);
        let subnet = 16 + (std::process::id() + k * 37) % 200;
        // a tmpfs of its own (hosts' shared memory lives there), outside /dev/shm (which
        // every host replaces with its own)
        let dir = std::env::temp_dir().join(format!("nerve-sim-{tag}"));
        std::fs::create_dir_all(&dir)
            .map_err(|e| PeerError::setup("hosts", format!("{}: {e}", dir.display())))?;
        run(
            "mount",
            &["-t", "tmpfs", "nerve-sim", &dir.display().to_string()],
        )?;
        let switch = format!("{tag}sw");
        let on_stop = {
            let mut netns: Vec<String> = (0..n).map(|i| format!("{tag}{i}")).collect();
            netns.push(switch.clone());
            let dir = dir.clone();
            interrupt::on_stop(move || teardown(&netns, &dir, true))
        };
        let mut sim = SimHosts {
            mounted: true,
            hosts: Vec::new(),
            switch: switch.clone(),
            dir: dir.clone(),
            _on_stop: on_stop,
        };
        run("ip", &["netns", "add", &switch])?;
        run(
            "ip",
            &["-n", &switch, "link", "add", "br0", "type", "bridge"],
        )?;
        run("ip", &["-n", &switch, "link", "set", "br0", "up"])?;
        for i in 0..n {
            // hosta … hostz, then host26, host27, …
            let name = match i {
                0..=25 => format!("host{}", (b'a' + i as u8) as char),
                _ => format!("host{i}"),
            };
            let netns = format!("{tag}{i}");
            let ip = format!("10.{subnet}.0.{}", i + 1);
            let hdir = dir.join(&name);
            for sub in ["shm", "state"] {
                std::fs::create_dir_all(hdir.join(sub))
                    .map_err(|e| PeerError::setup("hosts", format!("{}: {e}", hdir.display())))?;
            }
            run("ip", &["netns", "add", &netns])?;
            let peer = format!("p{i}");
            run(
                "ip",
                &[
                    "link", "add", "eth0", "netns", &netns, "type", "veth", "peer", "name", &peer,
                    "netns", &switch,
                ],
            )?;
            run(
                "ip",
                &["-n", &switch, "link", "set", &peer, "master", "br0"],
            )?;
            run("ip", &["-n", &switch, "link", "set", &peer, "up"])?;
            run(
                "ip",
                &[
                    "-n",
                    &netns,
                    "addr",
                    "add",
                    &format!("{ip}/24"),
                    "dev",
                    "eth0",
                ],
            )?;
            run("ip", &["-n", &netns, "link", "set", "eth0", "up"])?;
            run("ip", &["-n", &netns, "link", "set", "lo", "up"])?;
            let host = SimHost {
                name,
                netns,
                ip,
                zenoh_config: hdir.join("zenoh.json5"),
                dir: hdir,
            };
            sim.hosts.push(host);
        }
        for i in 0..n {
            let h = &sim.hosts[i];
            let connect: Vec<String> = sim.hosts[..i]
                .iter()
                .map(|o| format!("\"{proto}/{}:{ZENOH_PORT}\"", o.ip))
                .collect();
            let ZenohExtra { link, top } = extra(i, h);
            let text = format!(
                "{{\n  mode: \"peer\",\n  listen: {{ endpoints: [\"{proto}/{}:{ZENOH_PORT}\"] }},\n  \
                 connect: {{ endpoints: [{}], retry: {{ period_init_ms: 50, period_max_ms: 500 }} }},\n  \
                 scouting: {{ multicast: {{ enabled: false }}, gossip: {{ enabled: true }} }},\n  \
                 transport: {{ link: {{ tx: {{ lease: {lease_ms} }}, {link} }} }},\n  {top}\n}}\n",
                h.ip,
                connect.join(", "),
            );
            std::fs::write(&h.zenoh_config, text)
                .map_err(|e| PeerError::setup("hosts", format!("zenoh config: {e}")))?;
        }
        Ok(sim)
    }

    /// The hosts.
    pub fn hosts(&self) -> &[SimHost] {
        &self.hosts
    }

    /// The directory holding every host's directory (files shared by the hosts, such as
    /// a policy, go here).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The command line that runs `exe args…` on host `i` (its network namespace, a mount
    /// namespace with the host's `/dev/shm`), and the environment it needs.
    pub fn command(
        &self,
        i: usize,
        exe: &Path,
        args: &[String],
    ) -> (PathBuf, Vec<String>, Vec<(&'static str, String)>) {
        let (wrapper, mut full, env) = self.wrapper(i);
        full.push(exe.display().to_string());
        full.extend(args.iter().cloned());
        (wrapper, full, env)
    }

    /// The program and leading arguments that run a command line on host `i` (append the
    /// program and its arguments), and the environment it needs.
    pub fn wrapper(&self, i: usize) -> (PathBuf, Vec<String>, Vec<(&'static str, String)>) {
        let h = &self.hosts[i];
        let full: Vec<String> = [
            "netns",
            "exec",
            &h.netns,
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            "mount --bind \"$NERVE_SIM_SHM\" /dev/shm && exec \"$@\"",
            "sh",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let env = vec![
            ("NERVE_SIM_SHM", h.dir.join("shm").display().to_string()),
            (
                "NERVE_STATE_DIR",
                h.dir.join("state/").display().to_string(),
            ),
            ("NERVE_ZENOH_CONFIG", h.zenoh_config.display().to_string()),
            ("NERVE_HOST_NAME", h.name.clone()),
        ];
        (PathBuf::from("ip"), full, env)
    }

    /// Starts `exe args…` on host `i` as a [`Child`].
    pub fn spawn(
        &self,
        i: usize,
        exe: &Path,
        args: &[String],
        extra_env: &[(&str, String)],
        what: &'static str,
    ) -> Result<Child, PeerError> {
        let (ip, full, base) = self.command(i, exe, args);
        let mut env: Vec<(&str, String)> = base;
        env.extend(extra_env.iter().map(|(k, v)| (*k, v.clone())));
        Child::spawn(&ip, &full, &env, what)
    }

    /// Drops `percent` % of the packets host `i` receives; see [`SimHosts::set_faults`].
    pub fn set_loss(&self, i: usize, percent: u32) -> Result<(), PeerError> {
        self.set_faults(
            i,
            Faults {
                loss_percent: percent,
                ..Faults::default()
            },
        )
    }

    /// Injects `faults` on host `i`'s link, replacing what was injected before
    /// (`Faults::default()` removes them; IPv4, as the hosts' links). This kernel has no netem: loss, duplication
    /// and corruption are nftables rules (`numgen random`, `dup`, payload mangling),
    /// reordering is a slow HTB class that some sent packets take.
    pub fn set_faults(&self, i: usize, faults: Faults) -> Result<(), PeerError> {
        let ns = &self.hosts[i].netns;
        let nft = |rule: &str| {
            let mut full = vec!["netns", "exec", ns, "nft"];
            full.extend(rule.split(' '));
            run("ip", &full)
        };
        let _ = nft("delete table ip nerve_faults");
        let _ = run("ip", &["-n", ns, "link", "set", "eth0", "up"]);
        let _ = run("tc", &["-n", ns, "qdisc", "del", "dev", "eth0", "root"]);
        let Faults {
            loss_percent,
            duplicate_percent,
            reorder_one_in,
            corrupt_per_mille,
        } = faults;
        if loss_percent + duplicate_percent + corrupt_per_mille > 0 {
            nft("add table ip nerve_faults")?;
            nft("add chain ip nerve_faults input { type filter hook prerouting priority -300 ; policy accept ; }")?;
            nft("add chain ip nerve_faults output { type filter hook output priority 0 ; policy accept ; }")?;
        }
        if loss_percent > 0 {
            nft(&format!(
                "add rule ip nerve_faults input iifname eth0 numgen random mod 100 < {loss_percent} drop"
            ))?;
        }
        if corrupt_per_mille > 0 {
            // one byte overwritten near the start and one further in (TCP checksum
            // updated, so the receiver's stack hands the bytes on)
            for (at, longer) in [(60, 100), (900, 1000)] {
                nft(&format!(
                    "add rule ip nerve_faults input iifname eth0 meta l4proto tcp meta length > {longer} numgen random mod 1000 < {corrupt_per_mille} @th,{},8 set 0x5a",
                    at * 8
                ))?;
            }
        }
        if duplicate_percent > 0 {
            nft(&format!(
                "add rule ip nerve_faults output oifname eth0 numgen random mod 100 < {duplicate_percent} dup to ip daddr device eth0"
            ))?;
        }
        if reorder_one_in > 0 {
            if !reorder_one_in.is_power_of_two() {
                return Err(PeerError::setup(
                    "hosts",
                    format!("reorder_one_in must be a power of two, not {reorder_one_in}"),
                ));
            }
            // packets whose IP id has its low bits zero queue behind a 4 Mbit/s class
            // (3 ms for a full frame) while later ones pass
            let tc = |args: &str| {
                let mut full = vec!["-n", ns];
                full.extend(args.split(' '));
                run("tc", &full)
            };
            tc("qdisc add dev eth0 root handle 1: htb default 10 r2q 1000")?;
            tc("class add dev eth0 parent 1: classid 1:10 htb rate 10gbit")?;
            tc("class add dev eth0 parent 1: classid 1:20 htb rate 4mbit ceil 4mbit")?;
            tc(&format!(
                "filter add dev eth0 parent 1: protocol ip prio 1 u32 match u16 0 0x{:04x} at 4 flowid 1:20",
                reorder_one_in - 1
            ))?;
        }
        Ok(())
    }

    /// Splits the network in two: hosts in `a` and hosts in `b` drop every packet from and
    /// to the other group (nftables on each host, table `nerve_partition`), as a failed
    /// switch between two parts of a fleet would. [`SimHosts::heal`] removes it.
    pub fn partition(&self, a: &[usize], b: &[usize]) -> Result<(), PeerError> {
        for (group, other) in [(a, b), (b, a)] {
            let ips: Vec<&str> = other.iter().map(|&j| self.hosts[j].ip.as_str()).collect();
            let set = format!("{{ {} }}", ips.join(", "));
            for &i in group {
                let ns = &self.hosts[i].netns;
                let nft = |rule: String| {
                    let mut full = vec!["netns", "exec", ns, "nft"];
                    full.extend(rule.split(' '));
                    run("ip", &full)
                };
                let _ = nft("delete table ip nerve_partition".into());
                nft("add table ip nerve_partition".into())?;
                nft("add chain ip nerve_partition input { type filter hook input priority -200 ; policy accept ; }".into())?;
                nft("add chain ip nerve_partition output { type filter hook output priority -200 ; policy accept ; }".into())?;
                nft(format!(
                    "add rule ip nerve_partition input ip saddr {set} drop"
                ))?;
                nft(format!(
                    "add rule ip nerve_partition output ip daddr {set} drop"
                ))?;
            }
        }
        Ok(())
    }

    /// Removes every partition [`SimHosts::partition`] made.
    pub fn heal(&self) {
        for h in &self.hosts {
            let _ = run(
                "ip",
                &[
                    "netns",
                    "exec",
                    &h.netns,
                    "nft",
                    "delete",
                    "table",
                    "ip",
                    "nerve_partition",
                ],
            );
        }
    }

    /// Bytes host `i` has sent on its link so far (its `eth0` counter).
    pub fn tx_bytes(&self, i: usize) -> Option<u64> {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.hosts[i].netns,
                "cat",
                "/sys/class/net/eth0/statistics/tx_bytes",
            ])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    }

    /// Cuts (or restores) host `i`'s link, as if its cable were pulled.
    pub fn set_link(&self, i: usize, up: bool) -> Result<(), PeerError> {
        let ns = &self.hosts[i].netns;
        run(
            "ip",
            &[
                "-n",
                ns,
                "link",
                "set",
                "eth0",
                if up { "up" } else { "down" },
            ],
        )
    }
}

/// Deletes network namespaces `netns`, then the hosts' directory `dir` (a tmpfs where
/// `mounted`).
fn teardown(netns: &[String], dir: &Path, mounted: bool) {
    for ns in netns {
        let _ = run("ip", &["netns", "del", ns]);
    }
    if mounted {
        let _ = run("umount", &["-l", &dir.display().to_string()]);
    }
    let _ = std::fs::remove_dir_all(dir);
}

impl Drop for SimHosts {
    fn drop(&mut self) {
        let mut netns: Vec<String> = self.hosts.iter().map(|h| h.netns.clone()).collect();
        netns.push(self.switch.clone());
        teardown(&netns, &self.dir, self.mounted);
    }
}
