//! Nerve configuration: domain id and state directory, from the environment or a TOML file.
//!
//! Environment: `NERVE_DOMAIN` (0..=`MAX_DOMAIN`), `NERVE_STATE_DIR`, and `NERVE_CONFIG`
//! naming a TOML file with the keys `domain` and `state_dir`. The environment overrides
//! the file.

use crate::error::ContextError;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Largest domain id.
pub const MAX_DOMAIN: u32 = 999;
/// Default state directory for iceoryx2's node and service records.
pub const DEFAULT_STATE_DIR: &str = "/tmp/nerve/";

/// Settings of a [`crate::Context`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Domain id: participants of different domains never see each other's topics.
    pub domain: u32,
    /// Directory holding the records of nodes and topics (shared memory lives in /dev/shm).
    pub state_dir: PathBuf,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            domain: 0,
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    domain: Option<u32>,
    state_dir: Option<PathBuf>,
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
        Ok(cfg)
    }

    /// Reads a TOML file with optional keys `domain` and `state_dir`.
    pub fn from_file(path: &Path) -> Result<Config, ContextError> {
        let err = |reason: String| ContextError::ConfigFile {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let f: FileConfig = toml::from_str(&text).map_err(|e| err(e.message().to_string()))?;
        let mut cfg = Config::default();
        if let Some(d) = f.domain {
            cfg.domain = check_domain(d, &d.to_string())?;
        }
        if let Some(dir) = f.state_dir {
            cfg.state_dir = dir;
        }
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

    /// File-name prefix of every shared-memory and state file of this domain.
    pub fn file_prefix(&self) -> String {
        format!("nerve{}_", self.domain)
    }
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
        std::fs::write(&p, "domain = 5000\n").unwrap();
        assert!(matches!(
            Config::from_file(&p),
            Err(ContextError::InvalidDomain { .. })
        ));
        std::fs::write(&p, "domian = 1\n").unwrap();
        let e = Config::from_file(&p).unwrap_err().to_string();
        assert!(e.contains("domian"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
