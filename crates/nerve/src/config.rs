//! Nerve configuration: domain id and state directory, from the environment or a TOML file.
//!
//! Environment: `NERVE_DOMAIN` (0..=`MAX_DOMAIN`), `NERVE_STATE_DIR`, `NERVE_NETWORK`
//! (`on`/`off`), `NERVE_ZENOH_CONFIG` (a Zenoh JSON5 file; naming one turns the network
//! plane on), `NERVE_HOST_NAME`, `NERVE_POLICY` (an access-control policy file), and
//! `NERVE_CONFIG` naming a TOML file with the keys `domain`, `state_dir`, `sim_time` and
//! a `[network]` table (`enabled`, `zenoh_config`, `host_name`, `policy`). `NERVE_SIM_TIME=1` follows a simulation clock (see [`crate::time`]),
//! `NERVE_LOCKSTEP=1` joins the domain's deterministic replay. The environment overrides
//! the file. `NERVE_NAMESPACE` (an absolute namespace such as
//! `/robot1`, default `/`) and `NERVE_REMAP` (rules `from:=to` separated by `;`) set how
//! relative names resolve and which names are replaced (see [`crate::name::resolve`]);
//! `nerve launch` sets both for the processes it starts.

use crate::error::ContextError;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Largest domain id.
pub const MAX_DOMAIN: u32 = 999;
/// Default state directory for iceoryx2's node and service records: in `/dev/shm`, a
/// memory file system everywhere, beside the domain's shared memory (a host is the set of
/// processes that share `/dev/shm`, and its records live there too). iceoryx2 `fsync`s
/// every record it writes (about three per subscription); under `/tmp` on a disk that
/// made 1,000 subscriptions take 8–12 s instead of 0.5–1 s (issue 46).
pub const DEFAULT_STATE_DIR: &str = "/dev/shm/nerve/";

/// Settings of a [`crate::Context`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Domain id: participants of different domains never see each other's topics.
    pub domain: u32,
    /// Directory holding the records of nodes and topics (shared memory lives in /dev/shm).
    pub state_dir: PathBuf,
    /// The network plane (Zenoh) across hosts.
    pub network: NetworkConfig,
    /// Namespace that relative topic and service names resolve under (`/`: the root).
    pub namespace: String,
    /// Remap rules `(from, to)` applied to resolved names; the first match wins.
    pub remap: Vec<(String, String)>,
    /// Follow a simulation clock on `/clock` instead of the system clock (see
    /// [`crate::time`]; `NERVE_SIM_TIME`, key `sim_time`).
    pub sim_time: bool,
    /// Take part in the deterministic replay running in the domain (`NERVE_LOCKSTEP`, set
    /// by `nerve replay` for the nodes it starts; implies simulation time).
    pub lockstep: bool,
}

/// Settings of the network plane: topics and services reach other hosts through Zenoh.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkConfig {
    /// Whether this process joins the network plane (off by default: one host only).
    #[serde(default)]
    pub enabled: bool,
    /// Zenoh configuration file (JSON5: endpoints, scouting, TLS, access control); Zenoh's
    /// defaults (peer mode, multicast scouting) without one.
    pub zenoh_config: Option<PathBuf>,
    /// Name of this host in discovery (the kernel's host name without one); with a
    /// policy, also the host's identity (its certificate's common name).
    pub host_name: Option<String>,
    /// Access-control policy file (TOML, see `nerve::net::policy`), the same on every
    /// host: it adds Zenoh's access control and mutual TLS.
    pub policy: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            domain: 0,
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            network: NetworkConfig::default(),
            namespace: "/".to_string(),
            remap: Vec::new(),
            sim_time: false,
            lockstep: false,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    domain: Option<toml::Spanned<u32>>,
    state_dir: Option<PathBuf>,
    network: Option<NetworkConfig>,
    sim_time: Option<bool>,
}

impl Config {
    /// Reads `NERVE_CONFIG` (if set), then applies `NERVE_DOMAIN` and `NERVE_STATE_DIR`.
    pub fn from_env() -> Result<Config, ContextError> {
        let mut cfg = match std::env::var_os("NERVE_CONFIG") {
            Some(p) => Config::from_file(Path::new(&p))?,
            None => Config::default(),
        };
        if let Ok(d) = std::env::var("NERVE_DOMAIN") {
            cfg.domain = parse_domain(&d)?;
        }
        if let Some(dir) = std::env::var_os("NERVE_STATE_DIR") {
            cfg.state_dir = PathBuf::from(dir);
        }
        if let Some(path) = std::env::var_os("NERVE_ZENOH_CONFIG") {
            cfg.network.zenoh_config = Some(PathBuf::from(path));
            cfg.network.enabled = true;
        }
        if let Ok(v) = std::env::var("NERVE_NETWORK") {
            cfg.network.enabled = match v.trim() {
                "1" | "on" | "true" | "yes" => true,
                "0" | "off" | "false" | "no" => false,
                _ => {
                    return Err(ContextError::InvalidSetting {
                        name: "NERVE_NETWORK",
                        value: v,
                        expected: "on or off",
                    })
                }
            };
        }
        if let Some(path) = std::env::var_os("NERVE_POLICY") {
            cfg.network.policy = Some(PathBuf::from(path));
        }
        if let Ok(name) = std::env::var("NERVE_HOST_NAME") {
            cfg.network.host_name = Some(name);
        }
        for (name, flag) in [
            ("NERVE_SIM_TIME", &mut cfg.sim_time),
            ("NERVE_LOCKSTEP", &mut cfg.lockstep),
        ] {
            if let Ok(v) = std::env::var(name) {
                *flag = parse_switch(name, &v)?;
            }
        }
        if let Ok(ns) = std::env::var("NERVE_NAMESPACE") {
            let ns = ns.trim();
            cfg = cfg.namespace(if ns.is_empty() { "/" } else { ns })?;
        }
        if let Ok(rules) = std::env::var("NERVE_REMAP") {
            cfg.remap = crate::name::parse_remap(&rules).map_err(|e| {
                ContextError::InvalidSetting {
                    name: "NERVE_REMAP",
                    value: e.name,
                    expected: "rules from:=to separated by ';', each side a name like chatter or /robot1/cmd",
                }
            })?;
        }
        Ok(cfg)
    }

    /// Reads a TOML file with optional keys `domain`, `state_dir` and `[network]`.
    pub fn from_file(path: &Path) -> Result<Config, ContextError> {
        let text = std::fs::read_to_string(path).map_err(|e| ContextError::ConfigFile {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Config::from_toml(&path.display().to_string(), &text)
    }

    /// Parses the TOML text of a configuration file; `path` names it in errors, which
    /// give the line of a syntax or type error.
    pub fn from_toml(path: &str, text: &str) -> Result<Config, ContextError> {
        let f: FileConfig = toml::from_str(text).map_err(|e| ContextError::ConfigFile {
            path: path.to_string(),
            reason: match e.span() {
                Some(s) => format!("line {}: {}", line_of(text, s.start), e.message().trim()),
                None => e.message().trim().to_string(),
            },
        })?;
        let mut cfg = Config::default();
        if let Some(d) = f.domain {
            let value = *d.get_ref();
            cfg.domain =
                check_domain(value, &value.to_string()).map_err(|e| ContextError::ConfigFile {
                    path: path.to_string(),
                    reason: format!("line {}: {e}", line_of(text, d.span().start)),
                })?;
        }
        if let Some(dir) = f.state_dir {
            cfg.state_dir = dir;
        }
        if let Some(net) = f.network {
            cfg.network = net;
        }
        cfg.sim_time = f.sim_time.unwrap_or(false);
        Ok(cfg)
    }

    /// Sets the domain id.
    pub fn domain(mut self, domain: u32) -> Result<Config, ContextError> {
        self.domain = check_domain(domain, &domain.to_string())?;
        Ok(self)
    }

    /// Sets the state directory.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Config {
        self.state_dir = dir.into();
        self
    }

    /// Turns the network plane on or off.
    pub fn network(mut self, enabled: bool) -> Config {
        self.network.enabled = enabled;
        self
    }

    /// Sets the namespace relative names resolve under (`/` or an absolute name).
    pub fn namespace(mut self, ns: &str) -> Result<Config, ContextError> {
        crate::name::validate_namespace(ns).map_err(|e| ContextError::InvalidSetting {
            name: "NERVE_NAMESPACE",
            value: e.name,
            expected: "/ or an absolute name like /robot1 (segments of letters, digits and '_')",
        })?;
        self.namespace = ns.to_string();
        Ok(self)
    }

    /// Adds a remap rule: the name `from` becomes `to` (both may be relative).
    pub fn remap(mut self, from: &str, to: &str) -> Result<Config, ContextError> {
        let rule = format!("{from}:={to}");
        let mut parsed =
            crate::name::parse_remap(&rule).map_err(|e| ContextError::InvalidSetting {
                name: "NERVE_REMAP",
                value: e.name,
                expected: "names like chatter or /robot1/cmd",
            })?;
        if self.remap.len() >= crate::name::MAX_REMAP_RULES {
            return Err(ContextError::InvalidSetting {
                name: "NERVE_REMAP",
                value: rule,
                expected: "at most 256 rules",
            });
        }
        self.remap.append(&mut parsed);
        Ok(self)
    }

    /// Resolves a topic or service name under this configuration's namespace and remap
    /// rules (see [`crate::name::resolve`]).
    pub fn resolve_name(&self, name: &str) -> String {
        crate::name::resolve(name, &self.namespace, &self.remap)
    }

    /// File-name prefix of every shared-memory and state file of this domain.
    pub fn file_prefix(&self) -> String {
        format!("nerve{}_", self.domain)
    }
}

/// A yes/no environment setting: `1`/`on`/`true` or `0`/`off`/`false`.
fn parse_switch(name: &'static str, value: &str) -> Result<bool, ContextError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Ok(true),
        "0" | "off" | "false" | "no" | "" => Ok(false),
        _ => Err(ContextError::InvalidSetting {
            name,
            value: value.to_string(),
            expected: "1, on, true, 0, off or false",
        }),
    }
}

/// The line (from 1) of byte `offset` in `text`, for errors that name a line.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].matches('\n').count() + 1
}

/// Parses a domain id from text.
pub fn parse_domain(s: &str) -> Result<u32, ContextError> {
    let d: u32 = s.trim().parse().map_err(|_| ContextError::InvalidDomain {
        value: s.to_string(),
        max: MAX_DOMAIN,
    })?;
    check_domain(d, s)
}

fn check_domain(d: u32, text: &str) -> Result<u32, ContextError> {
    if d > MAX_DOMAIN {
        return Err(ContextError::InvalidDomain {
            value: text.to_string(),
            max: MAX_DOMAIN,
        });
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_and_remap_settings() {
        let c = Config::default().namespace("/robot1").unwrap();
        assert_eq!(c.resolve_name("chatter"), "/robot1/chatter");
        let c = c.remap("chatter", "/talk").unwrap();
        assert_eq!(c.resolve_name("chatter"), "/talk");
        assert_eq!(c.resolve_name("/imu"), "/imu");
        let e = Config::default()
            .namespace("robot1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("NERVE_NAMESPACE"), "{e}");
        let e = Config::default().remap("a", "1b").unwrap_err().to_string();
        assert!(e.contains("NERVE_REMAP"), "{e}");
    }

    #[test]
    fn domain_parsing() {
        assert_eq!(parse_domain("7").unwrap(), 7);
        assert!(parse_domain("1000").is_err());
        assert!(parse_domain("-1").is_err());
        assert!(parse_domain("abc").is_err());
    }

    #[test]
    fn file_config() {
        let dir = std::env::temp_dir().join(format!("nerve-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("c.toml");
        std::fs::write(&p, "domain = 12\nstate_dir = \"/tmp/x/\"\n").unwrap();
        let c = Config::from_file(&p).unwrap();
        assert_eq!(c.domain, 12);
        assert_eq!(c.state_dir, PathBuf::from("/tmp/x/"));
        std::fs::write(&p, "\ndomain = 5000\n").unwrap();
        let e = Config::from_file(&p).unwrap_err().to_string();
        assert!(
            e.contains("c.toml") && e.contains("line 2") && e.contains("5000"),
            "{e}"
        );
        std::fs::write(
            &p,
            "[network]\nenabled = true\nzenoh_config = \"/etc/z.json5\"\n",
        )
        .unwrap();
        let c = Config::from_file(&p).unwrap();
        assert!(c.network.enabled);
        assert_eq!(c.network.zenoh_config, Some(PathBuf::from("/etc/z.json5")));
        std::fs::write(&p, "[network]\npolicy = \"/etc/nerve/policy.toml\"\n").unwrap();
        let c = Config::from_file(&p).unwrap();
        assert_eq!(
            c.network.policy,
            Some(PathBuf::from("/etc/nerve/policy.toml"))
        );
        std::fs::write(&p, "[network]\nenable = true\n").unwrap();
        let e = Config::from_file(&p).unwrap_err().to_string();
        assert!(e.contains("enable"), "{e}");
        std::fs::write(&p, "domian = 1\n").unwrap();
        let e = Config::from_file(&p).unwrap_err().to_string();
        assert!(e.contains("domian"), "{e}");
        // the file and the line of the mistake are named
        std::fs::write(&p, "domain = 3\n\nstate_dir = 7\n").unwrap();
        let e = Config::from_file(&p).unwrap_err().to_string();
        assert!(e.contains("c.toml") && e.contains("line 3"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
