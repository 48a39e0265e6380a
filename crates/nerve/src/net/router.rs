//! A Zenoh router for fleets whose hosts reach each other through one (robots behind a
//! base station, hosts across subnets where gossip and multicast do not reach): Zenoh's
//! own router, opened in this process. `nerve router` runs one.

use crate::error::NetError;
use zenoh::Wait;

/// Port a router listens on unless told otherwise (Zenoh's default).
pub const DEFAULT_ROUTER_PORT: u16 = 7447;

/// A running Zenoh router; it stops when dropped.
pub struct Router {
    session: zenoh::Session,
}

impl Router {
    /// Opens a router with the Zenoh JSON5 file `config` (its `mode` is set to `router`;
    /// endpoints, TLS and access control come from the file), or with Zenoh's defaults
    /// listening on `listen` (e.g. `tcp/0.0.0.0:7447`) when no file is given. Nerve's own
    /// shared memory carries a host's traffic, so Zenoh's is turned off as in every
    /// Nerve session.
    pub fn open(config: Option<&std::path::Path>, listen: &[String]) -> Result<Router, NetError> {
        let mut zc = match config {
            Some(path) => zenoh::Config::from_file(path).map_err(|e| NetError::Config {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?,
            None => zenoh::Config::default(),
        };
        let set = |zc: &mut zenoh::Config, key: &str, value: &str| {
            zc.insert_json5(key, value).map_err(|e| NetError::Config {
                path: config.map_or("--listen".into(), |p| p.display().to_string()),
                reason: format!("{key}: {e}"),
            })
        };
        set(&mut zc, "mode", "\"router\"")?;
        set(&mut zc, "transport/shared_memory/enabled", "false")?;
        if !listen.is_empty() {
            let json = serde_json::to_string(listen).map_err(|e| NetError::Open(e.to_string()))?;
            set(&mut zc, "listen/endpoints", &json)?;
        }
        let session = zenoh::open(zc)
            .wait()
            .map_err(|e| NetError::Open(e.to_string()))?;
        Ok(Router { session })
    }

    /// The router's Zenoh id.
    pub fn id(&self) -> String {
        self.session.zid().to_string()
    }

    /// The endpoints it listens on.
    pub fn locators(&self) -> Vec<String> {
        self.session
            .info()
            .locators()
            .wait()
            .into_iter()
            .map(|l| l.to_string())
            .collect()
    }
}
