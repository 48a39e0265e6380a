//! Loop prevention: which DDS participants and which Nerve processes are bridges.
//!
//! Every bridge names its Nerve node `_ros2_bridge_<DDS participant GUID prefix>`. A
//! bridge reads the Nerve node list to learn every bridge's DDS participant (their
//! samples are not forwarded into Nerve) and process (their Nerve samples are not
//! forwarded into ROS 2), so that nothing comes back to the side that sent it, also
//! with several bridges between the same two domains.

use std::collections::HashSet;

/// The prefix of every bridge's Nerve node name.
pub const NODE_PREFIX: &str = "_ros2_bridge_";

/// The Nerve node name of the bridge whose DDS participant has `prefix`.
pub fn node_name(prefix: &[u8]) -> String {
    format!("{NODE_PREFIX}{}", hex(prefix))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether process `pid` runs (it exists and is no zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // `pid (comm) S ...`: the state follows the last parenthesis
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

/// [`hex`] written into `buf`, when it fits.
fn hex_in<'a>(bytes: &[u8], buf: &'a mut [u8]) -> Option<&'a str> {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let out = buf.get_mut(..bytes.len() * 2)?;
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 15)];
    }
    std::str::from_utf8(out).ok()
}

/// The bridges now alive.
#[derive(Default, Clone, Debug)]
pub struct Peers {
    /// DDS participant GUID prefixes (hex) of bridges.
    pub participants: HashSet<String>,
    /// Process ids of bridges.
    pub pids: HashSet<u32>,
}

impl Peers {
    /// The bridges among the Nerve domain's nodes.
    pub fn scan(ctx: &nerve::Context) -> Peers {
        let mut peers = Peers::default();
        for n in nerve::introspect::list_nodes(ctx).unwrap_or_default() {
            if let Some(hex) = n.name.strip_prefix(NODE_PREFIX) {
                if n.state == "alive" {
                    peers.participants.insert(hex.to_string());
                    peers.pids.insert(n.pid as u32);
                }
            }
        }
        peers
    }

    /// Whether every bridge's process still runs (else the bridges are scanned again: a
    /// killed bridge's Nerve node stays listed, dead, until it is cleaned).
    pub fn all_running(&self) -> bool {
        self.pids.iter().all(|pid| running(*pid))
    }

    /// Whether a DDS endpoint of the participant with `prefix` belongs to a bridge (asked
    /// for every sample: no allocation for a GUID prefix).
    pub fn is_bridge_participant(&self, prefix: &[u8]) -> bool {
        if self.participants.is_empty() {
            return false;
        }
        let mut buf = [0u8; 32];
        match hex_in(prefix, &mut buf) {
            Some(h) => self.participants.contains(h),
            None => self.participants.contains(&hex(prefix)),
        }
    }

    /// Whether the bridge whose DDS participant has `prefix` is the one that forwards:
    /// of several bridges between the same two domains the one with the lowest
    /// participant prefix does, the others stand by (no duplicates on either side) and
    /// the next one takes over within a second of its going away.
    pub fn is_primary(&self, prefix: &[u8]) -> bool {
        let me = hex(prefix);
        self.participants.iter().all(|p| *p >= me)
    }

    /// Whether a Nerve sample with header `origin` was published by a bridge.
    pub fn is_bridge_origin(&self, origin: u64) -> bool {
        self.pids.contains(&((origin >> 32) as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_bridge_forwards() {
        let mut p = Peers::default();
        assert!(p.is_primary(&[5]), "alone (not yet listed)");
        p.participants.insert(hex(&[5]));
        p.participants.insert(hex(&[7]));
        assert!(p.is_primary(&[5]));
        assert!(!p.is_primary(&[7]));
        assert!(p.is_bridge_participant(&[7]));
        assert_eq!(node_name(&[0xab, 1]), "_ros2_bridge_ab01");
        p.pids.insert(42);
        assert!(p.is_bridge_origin((42 << 32) | 3));
        assert!(!p.is_bridge_origin(43 << 32));
        // a GUID prefix (12 bytes) is looked up without allocating, as it is written
        let prefix = [0xde, 0xad, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0xff];
        assert!(!p.is_bridge_participant(&prefix));
        p.participants.insert(hex(&prefix));
        assert!(p.is_bridge_participant(&prefix));
        assert_eq!(hex_in(&prefix, &mut [0; 32]), Some(hex(&prefix).as_str()));
        assert_eq!(
            hex_in(&[1; 17], &mut [0; 32]),
            None,
            "too long for the buffer"
        );
        assert!(!p.is_bridge_participant(&[1; 17]));
    }

    #[test]
    fn a_bridge_whose_process_ended_is_noticed() {
        let mut p = Peers::default();
        p.pids.insert(std::process::id());
        assert!(p.all_running(), "this process runs");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        p.pids.insert(pid);
        assert!(
            !p.all_running(),
            "a process that ended (and was waited for)"
        );
    }
}
