//! Whether either graph changed: one cheap look per refresh period, shared by all of a
//! bridge's threads, so that each compares the graphs (the costly part: listing and
//! opening Nerve's topics and services, walking DDS discovery) only when something
//! changed, and at least once a [`SAFETY`] period (what a look cannot see: a Nerve
//! process killed with its ports still counted, a retry after [`crate::RETRY`], a type
//! whose definition was being asked for).
//!
//! The look hashes the ROS 2 graph ([`RosSide::fingerprint`]: on DDS the endpoints
//! discovered, GUID, topic, type and QoS; on rmw_zenoh the liveliness tokens), the bridges
//! alive ([`crate::peers`]), and the names in the Nerve domain's state directory: every
//! service and node is a file there and every port a file in its node's folder, so the
//! names change whenever a Nerve endpoint comes or goes. The bridges alive are scanned
//! again (the Nerve node list: costly) only when those names changed, a bridge's process
//! ended, or a [`SAFETY`] period passed; every thread reads the last scan.

use super::side::RosSide;
use super::Shared;
use crate::peers::Peers;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest a thread goes without comparing the graphs, changed or not (a retry after
/// [`crate::RETRY`] comes within it; each comparison lists the Nerve domain, the cost of an
/// idle bridge).
pub(crate) const SAFETY: Duration = Duration::from_secs(2);

/// The generation of both graphs: a number that grows whenever a look finds them changed.
pub(crate) struct Changes {
    period: Duration,
    state: Mutex<Look>,
}

#[derive(Default)]
struct Look {
    at: Option<Instant>,
    fingerprint: u64,
    generation: u64,
    /// The names in the Nerve state directory, hashed.
    nerve: u64,
    /// When the bridges were last scanned.
    peers_at: Option<Instant>,
}

impl Changes {
    /// Looks at most once per `refresh` period (a look walks the Nerve state directory:
    /// the cost of an idle bridge): each thread compares the graphs once a refresh period,
    /// so a change is seen by all within two periods.
    pub(crate) fn new(refresh: Duration) -> Changes {
        Changes {
            period: refresh,
            state: Mutex::new(Look::default()),
        }
    }

    /// The generation now (looked at again if the last look is older than a period).
    pub(crate) fn generation<S: RosSide>(&self, shared: &Shared<S>) -> u64 {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.at.is_some_and(|t| t.elapsed() < self.period) {
            return s.generation;
        }
        let mut h = DefaultHasher::new();
        folder(&shared.nerve_state_dir, 3, &mut h);
        let nerve = h.finish();
        let mut peers = shared.peers();
        // the bridges' node list is costly to read: only when a Nerve node (or port) came
        // or went, a bridge's process ended, or a safety period passed
        let stale = match s.peers_at {
            None => true,
            Some(t) => t.elapsed() >= SAFETY || nerve != s.nerve || !peers.all_running(),
        };
        if stale {
            peers = Arc::new(Peers::scan(&shared.nerve));
            *shared.peers.lock().unwrap_or_else(|p| p.into_inner()) = peers.clone();
            s.peers_at = Some(Instant::now());
        }
        s.nerve = nerve;
        let f = fingerprint(shared, nerve, &peers);
        if s.at.is_none() || f != s.fingerprint {
            s.fingerprint = f;
            s.generation += 1;
        }
        s.at = Some(Instant::now());
        s.generation
    }
}

/// One thread's view of [`Changes`]: whether its refresh is due.
#[derive(Default)]
pub(crate) struct Gate {
    seen: Option<(u64, Instant)>,
}

impl Gate {
    /// Whether the thread should compare the graphs now: they changed since it last did,
    /// or that was [`SAFETY`] ago.
    pub(crate) fn due<S: RosSide>(&mut self, shared: &Shared<S>) -> bool {
        let g = shared.changes.generation(shared);
        match self.seen {
            Some((seen, at)) if seen == g && at.elapsed() < SAFETY => false,
            _ => {
                self.seen = Some((g, Instant::now()));
                true
            }
        }
    }
}

/// The ROS 2 graph, the bridges and the Nerve state directory's names.
fn fingerprint<S: RosSide>(shared: &Shared<S>, nerve: u64, peers: &Peers) -> u64 {
    let mut h = DefaultHasher::new();
    nerve.hash(&mut h);
    shared.side.fingerprint(&mut h);
    let mut bridges: Vec<&String> = peers.participants.iter().collect();
    bridges.sort();
    bridges.hash(&mut h);
    h.finish()
}

/// Hashes the names in `dir`, `depth` folders down (a name, not a modification time: those
/// are as coarse as the kernel's tick).
fn folder(dir: &Path, depth: usize, h: &mut DefaultHasher) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut names: Vec<_> = entries.flatten().collect();
    names.sort_by_key(|e| e.file_name());
    for e in names {
        e.file_name().hash(h);
        if depth > 1 && e.file_type().is_ok_and(|t| t.is_dir()) {
            folder(&e.path(), depth - 1, h);
        }
        // the end of a folder's names
        0xffu8.hash(h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_hashes_differently_when_an_entry_comes_or_goes() {
        let dir = std::env::temp_dir().join(format!("nerve-ros2-changes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("nodes/1")).unwrap();
        let hash = || {
            let mut h = DefaultHasher::new();
            folder(&dir, 3, &mut h);
            h.finish()
        };
        let empty = hash();
        assert_eq!(hash(), empty, "nothing changed");
        std::fs::write(dir.join("nodes/1/port.port_tag"), b"").unwrap();
        let with_port = hash();
        assert_ne!(with_port, empty, "a port of a node");
        std::fs::remove_file(dir.join("nodes/1/port.port_tag")).unwrap();
        assert_eq!(hash(), empty, "the port went");
        std::fs::create_dir_all(dir.join("nodes/2")).unwrap();
        assert_ne!(hash(), empty, "a node");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
