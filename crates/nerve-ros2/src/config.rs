//! What a bridge connects and what it lets cross.

use crate::BridgeError;
use regex::Regex;
use std::path::PathBuf;
use std::time::Duration;

/// A bridge's settings.
#[derive(Clone, Debug)]
pub struct BridgeConfig {
    /// The ROS 2 domain (`ROS_DOMAIN_ID`, 0 by default).
    pub ros_domain: u16,
    /// The Nerve domain's settings.
    pub nerve: nerve::Config,
    /// Names (ROS 2 topic names such as `/ns/topic`, which are the Nerve names too)
    /// that may cross; empty: all.
    pub allow: Vec<Regex>,
    /// Names that may not cross (checked after `allow`).
    pub deny: Vec<Regex>,
    /// Share directories searched for `.msg` definitions of types the bridge was not
    /// built with (`AMENT_PREFIX_PATH` entries with `/share`, and `--types`).
    pub types: Vec<PathBuf>,
    /// Convert standard types Nerve holds exactly to Nerve's own messages (else every
    /// type crosses as CDR).
    pub native: bool,
    /// Lossy ROS 2 → Nerve forms the user asked for, by Nerve type (e.g.
    /// `nerve_msgs/CmdVel` for `geometry_msgs/msg/TwistStamped`): without one, a ROS 2
    /// type whose only Nerve form loses fields crosses as CDR
    /// ([`nerve_ros2_map::standard::lossy`] lists them).
    pub lossy: Vec<String>,
    /// How often the graphs of both sides are compared.
    pub refresh: Duration,
    /// Talk DDS on this host only (loopback), as ROS 2 does with
    /// `ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST` (or the older `ROS_LOCALHOST_ONLY=1`).
    pub localhost_only: bool,
}

impl BridgeConfig {
    /// Settings from the environment: `ROS_DOMAIN_ID`, `AMENT_PREFIX_PATH`, and
    /// Nerve's own (`NERVE_*`).
    pub fn from_env() -> Result<BridgeConfig, BridgeError> {
        let ros_domain = match std::env::var("ROS_DOMAIN_ID") {
            Ok(v) if !v.trim().is_empty() => v
                .trim()
                .parse::<u16>()
                .ok()
                .filter(|d| *d <= 232)
                .ok_or_else(|| {
                    BridgeError::Config(format!(
                        "ROS_DOMAIN_ID={v:?} is not a ROS 2 domain (0 to 232)"
                    ))
                })?,
            _ => 0,
        };
        let types = std::env::var("AMENT_PREFIX_PATH")
            .map(|p| {
                p.split(':')
                    .filter(|s| !s.is_empty())
                    .map(|s| PathBuf::from(s).join("share"))
                    .collect()
            })
            .unwrap_or_default();
        Ok(BridgeConfig {
            ros_domain,
            nerve: nerve::Config::from_env().map_err(|e| BridgeError::Config(e.to_string()))?,
            allow: Vec::new(),
            deny: Vec::new(),
            types,
            native: true,
            lossy: Vec::new(),
            refresh: Duration::from_millis(200),
            localhost_only: std::env::var("ROS_AUTOMATIC_DISCOVERY_RANGE")
                .is_ok_and(|v| v.eq_ignore_ascii_case("LOCALHOST"))
                || std::env::var("ROS_LOCALHOST_ONLY").is_ok_and(|v| v == "1"),
        })
    }

    /// Checks the settings that can be wrong by themselves (a lossy form that is not
    /// one).
    pub fn check(&self) -> Result<(), BridgeError> {
        nerve_ros2_map::standard::check_lossy(&self.lossy)
            .map_err(|e| BridgeError::Config(format!("lossy form: {e}")))
    }

    /// Whether `name` may cross.
    pub fn admits(&self, name: &str) -> bool {
        (self.allow.is_empty() || self.allow.iter().any(|r| r.is_match(name)))
            && !self.deny.iter().any(|r| r.is_match(name))
    }
}
