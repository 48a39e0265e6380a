//! Containment: keeping every process a launch starts, and everything those start, where
//! the launch can signal and end it — including a grandchild that leaves its process
//! group and session (`setsid`, a daemon).
//!
//! - **cgroup mode** (where cgroup v2 is writable): the launch gets a cgroup of its own
//!   below the launcher's, and each start of each process a cgroup below that
//!   (`NAME.START`), which the child joins before it runs anything. A process is its
//!   cgroup: signals go to every member, it is gone when the cgroup is empty, SIGKILL
//!   goes through `cgroup.kill`. Nothing can leave a cgroup without write access to
//!   another.
//! - **process-group mode** (the fallback): every child leads a process group, the
//!   launcher is the child subreaper (orphans come back to it), and every descendant is
//!   tracked: a scan of `/proc` attributes each process whose parent chain leads to a
//!   child (or that carries the launch's `NERVE_LAUNCH_ID` in its environment) to that
//!   child; signals go to the group and to every tracked descendant.
//!
//! Both modes tell the guardian what to end if the launcher is killed.

use crate::cgroup;
use crate::error::LaunchError;
use crate::sys;
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The environment variable that marks every process of a launch: `LAUNCH.START`, the
/// launch's id and the number of the start of the process it descends from.
pub(crate) const LAUNCH_ID_VAR: &str = "NERVE_LAUNCH_ID";

/// The start number in a `NERVE_LAUNCH_ID` value if it is of launch `id`.
pub(crate) fn marker_unit(value: &str, id: &str) -> Option<u64> {
    value.strip_prefix(id)?.strip_prefix('.')?.parse().ok()
}
/// How often descendants are looked for in process-group mode (a read of every
/// process's `/proc/PID/stat`; an orphan that comes back to the subreaper is found by its
/// environment however late).
const SCAN_PROC: Duration = Duration::from_millis(250);
/// How often the cgroups' members are read in cgroup mode (to reap the ones that come
/// back to this process, should it be a subreaper for other reasons).
const SCAN_CGROUP: Duration = Duration::from_millis(100);
/// Most descendants tracked at once.
const MAX_TRACKED: usize = 65_536;

/// How a launch should contain its processes ([`crate::StartOptions::containment`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Containment {
    /// A cgroup where cgroup v2 is writable, process groups otherwise.
    #[default]
    Auto,
    /// A cgroup, or [`Plan::start`](crate::Plan::start) fails.
    Cgroup,
    /// Process groups with every descendant tracked, even where cgroups are writable.
    ProcessGroups,
}

/// The containment in effect for a launch ([`crate::Running::containment`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContainmentMode {
    /// The launch's cgroup: each start of each process has its own cgroup below it.
    Cgroup {
        /// The launch's cgroup directory.
        path: PathBuf,
    },
    /// Process groups, every descendant tracked through `/proc`.
    ProcessGroups {
        /// Whether the launcher is the child subreaper (orphans come back to it).
        subreaper: bool,
        /// Why not a cgroup.
        reason: String,
    },
}

impl std::fmt::Display for ContainmentMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ContainmentMode::Cgroup { path } => write!(f, "cgroup {}", path.display()),
            ContainmentMode::ProcessGroups { subreaper, reason } => {
                let sr = if *subreaper { " + subreaper" } else { "" };
                write!(f, "process groups{sr} ({reason})")
            }
        }
    }
}

/// One start of one process: its process group, and in cgroup mode its cgroup.
#[derive(Debug)]
pub(crate) struct Unit {
    /// Its number in the launch (from 1).
    id: u64,
    /// Its main process, which leads the group.
    pub(crate) pgid: i32,
    /// The main process's start time (`/proc`), 0 if it was not read.
    leader_start: u64,
    /// Its cgroup (cgroup mode).
    leaf: Option<PathBuf>,
}

/// What [`Contain::prepare`] set up for a spawn.
pub(crate) struct Prepared {
    id: u64,
    leaf: Option<PathBuf>,
    /// Open until the spawn returned: the child writes itself into it.
    procs: Option<std::fs::File>,
}

/// A descendant seen (not a unit's main process).
#[derive(Clone, Copy, Debug)]
struct Known {
    start: u64,
    unit: u64,
}

/// The launch's containment: its mode, its cgroup, the descendants it tracks.
pub(crate) struct Contain {
    mode: ContainmentMode,
    /// `NERVE_LAUNCH_ID` of the launch's processes.
    id: String,
    /// The launch's cgroup (cgroup mode).
    root: Option<PathBuf>,
    known: HashMap<i32, Known>,
    /// The launcher's children found not to be the launch's (pid, start time).
    foreign: HashMap<i32, u64>,
    /// Tracked descendants not yet told to the guardian (`t PID START`, `u PID`).
    news: Vec<String>,
    last_scan: Option<Instant>,
    next_unit: u64,
    me: i32,
}

impl Contain {
    /// Chooses the mode for `want`, makes the launch's cgroup in cgroup mode and makes
    /// this process the subreaper in process-group mode (if `subreaper`).
    pub(crate) fn new(want: Containment, subreaper: bool) -> Result<Contain, LaunchError> {
        let me = std::process::id() as i32;
        let n = LAUNCHES.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let id = format!("{me}-{n}-{nanos}");
        let (mode, root) = match want {
            Containment::ProcessGroups => (None, None),
            Containment::Auto | Containment::Cgroup => match make_launch_cgroup(me, n) {
                Ok(dir) => (
                    Some(ContainmentMode::Cgroup { path: dir.clone() }),
                    Some(dir),
                ),
                Err(why) if want == Containment::Cgroup => {
                    return Err(LaunchError::CgroupUnavailable(why))
                }
                Err(why) => (Some(why_mode(subreaper, why)), None),
            },
        };
        let mode = mode.unwrap_or_else(|| why_mode(subreaper, "asked for".into()));
        if let ContainmentMode::ProcessGroups {
            subreaper: true, ..
        } = mode
        {
            sys::set_child_subreaper().map_err(|source| LaunchError::Io {
                what: "prctl(PR_SET_CHILD_SUBREAPER)".into(),
                source,
            })?;
        }
        Ok(Contain {
            mode,
            id,
            root,
            known: HashMap::new(),
            foreign: HashMap::new(),
            news: Vec::new(),
            last_scan: None,
            next_unit: 1,
            me,
        })
    }

    /// The mode in effect.
    pub(crate) fn mode(&self) -> &ContainmentMode {
        &self.mode
    }

    /// What the guardian must know from the start: the launch's cgroup, or its id.
    pub(crate) fn guardian_lines(&self) -> Vec<String> {
        match &self.root {
            Some(dir) => vec![format!("cgroup {}", dir.display())],
            None => vec![format!("id {}", self.id)],
        }
    }

    /// Guardian lines about tracked descendants since the last call.
    pub(crate) fn take_news(&mut self) -> Vec<String> {
        std::mem::take(&mut self.news)
    }

    /// Sets up `cmd` (start `start` of process `name`): the launch id in its environment
    /// and, in cgroup mode, a cgroup it joins before exec.
    pub(crate) fn prepare(
        &mut self,
        cmd: &mut Command,
        name: &str,
        start: u32,
    ) -> Result<Prepared, String> {
        let id = self.next_unit;
        self.next_unit += 1;
        cmd.env(LAUNCH_ID_VAR, format!("{}.{id}", self.id));
        let Some(root) = &self.root else {
            return Ok(Prepared {
                id,
                leaf: None,
                procs: None,
            });
        };
        // names from a launch file are [A-Za-z0-9_-]; one made through the API may not be
        let safe: String = name
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => c,
                _ => '_',
            })
            .collect();
        let leaf_name = format!("{safe}.{start}");
        // a leftover of this name (its processes would not die): one of its own
        let leaf = cgroup::create(root, &leaf_name)
            .or_else(|_| cgroup::create(root, &format!("{leaf_name}-{id}")))
            .map_err(|e| format!("creating a cgroup in {}: {e}", root.display()))?;
        let procs = match cgroup::open_procs(&leaf) {
            Ok(f) => f,
            Err(e) => {
                let _ = cgroup::remove(&leaf);
                return Err(format!("{}/cgroup.procs: {e}", leaf.display()));
            }
        };
        sys::join_cgroup(cmd, procs.as_raw_fd());
        Ok(Prepared {
            id,
            leaf: Some(leaf),
            procs: Some(procs),
        })
    }

    /// Undoes [`Contain::prepare`] after a failed spawn.
    pub(crate) fn abandon(&mut self, p: Prepared) {
        drop(p.procs);
        if let Some(leaf) = p.leaf {
            let _ = cgroup::remove(&leaf);
        }
    }

    /// The unit of a spawned child `pid`.
    pub(crate) fn started(&mut self, p: Prepared, pid: i32) -> Unit {
        drop(p.procs);
        Unit {
            id: p.id,
            pgid: pid,
            leader_start: sys::proc_stat(pid).map_or(0, |s| s.start),
            leaf: p.leaf,
        }
    }

    /// Sends `sig` to everything of `u`: its group, and its cgroup or the descendants
    /// tracked so far. Whether anything of it may still be there.
    pub(crate) fn signal(&self, u: &Unit, sig: i32) -> bool {
        let group = sys::kill_group(u.pgid, sig);
        match &u.leaf {
            Some(leaf) => {
                cgroup::signal(leaf, sig);
                cgroup::populated(leaf)
            }
            None => {
                let mut any = group;
                for (&pid, k) in &self.known {
                    if k.unit == u.id && sys::pid_live(pid, k.start) {
                        any |= sys::kill_pid(pid, sig);
                    }
                }
                any
            }
        }
    }

    /// Whether anything of `u` is still running. cgroup mode: a member of its cgroup
    /// (every process of its group is one; exited ones that nobody reaped are not).
    /// Process-group mode: its group (a zombie counts until reaped: orphans come back to
    /// the subreaper) or a descendant tracked so far.
    pub(crate) fn alive(&self, u: &Unit) -> bool {
        match &u.leaf {
            Some(leaf) => cgroup::populated(leaf),
            None if sys::group_alive(u.pgid) => true,
            None => self
                .known
                .iter()
                .any(|(&pid, k)| k.unit == u.id && sys::pid_live(pid, k.start)),
        }
    }

    /// Forgets `u` (nothing of it runs): removes its cgroup, stops tracking its
    /// descendants. Whether its cgroup could be removed.
    pub(crate) fn release(&mut self, u: &Unit) -> bool {
        // the exited ones that came back here are reaped before they are forgotten
        self.reap();
        let news = &mut self.news;
        let fallback = self.root.is_none();
        self.known.retain(|&pid, k| {
            let keep = k.unit != u.id;
            if !keep && fallback {
                news.push(format!("u {pid}"));
            }
            keep
        });
        match &u.leaf {
            Some(leaf) => cgroup::remove(leaf).is_ok(),
            None => true,
        }
    }

    /// Looks for descendants and reaps the exited ones, at most every [`SCAN_PROC`]
    /// ([`SCAN_CGROUP`] in cgroup mode).
    pub(crate) fn tick(&mut self, units: &[&Unit]) {
        let every = if self.root.is_some() {
            SCAN_CGROUP
        } else {
            SCAN_PROC
        };
        if self.last_scan.is_none_or(|t| t.elapsed() >= every) {
            self.scan_now(units);
        }
    }

    /// Looks for descendants of `units` now, and reaps the exited ones that came back to
    /// this process.
    pub(crate) fn scan_now(&mut self, units: &[&Unit]) {
        self.last_scan = Some(Instant::now());
        match self.root.is_some() {
            true => self.scan_cgroups(units),
            false => self.scan_proc(units),
        }
        self.reap();
    }

    /// cgroup mode: the members of each unit's cgroup (to reap the ones that come back).
    fn scan_cgroups(&mut self, units: &[&Unit]) {
        for u in units {
            let Some(leaf) = &u.leaf else { continue };
            for pid in cgroup::procs(leaf) {
                if pid == u.pgid || self.known.contains_key(&pid) {
                    continue;
                }
                if let Some(s) = sys::proc_stat(pid) {
                    self.track(pid, s.start, u.id);
                }
            }
        }
    }

    /// Process-group mode: every process of the system, attributed to a unit through
    /// its parent chain (or the launch id in its environment, for an orphan that came
    /// back to this process).
    fn scan_proc(&mut self, units: &[&Unit]) {
        let mut table: HashMap<i32, sys::ProcStat> = HashMap::new();
        for pid in sys::all_pids() {
            if let Some(s) = sys::proc_stat(pid) {
                table.insert(pid, s);
            }
        }
        // what is gone (or a reused pid) is no longer tracked
        let news = &mut self.news;
        self.known.retain(|pid, k| {
            let keep = table.get(pid).is_some_and(|s| s.start == k.start);
            if !keep {
                news.push(format!("u {pid}"));
            }
            keep
        });
        self.foreign
            .retain(|pid, start| table.get(pid).is_some_and(|s| s.start == *start));
        let mut owner: HashMap<i32, Option<u64>> = HashMap::new();
        for u in units {
            if table
                .get(&u.pgid)
                .is_some_and(|s| s.start == u.leader_start)
            {
                owner.insert(u.pgid, Some(u.id));
            }
        }
        for (&pid, k) in &self.known {
            owner.insert(pid, Some(k.unit));
        }
        let pids: Vec<i32> = table.keys().copied().collect();
        for pid in pids {
            if let Some(unit) = self.owner_of(pid, &table, &mut owner, units) {
                if !units.iter().any(|u| u.pgid == pid) && !self.known.contains_key(&pid) {
                    if let Some(s) = table.get(&pid) {
                        self.track(pid, s.start, unit);
                    }
                }
            }
        }
        // left by a run that ended (found after it was forgotten): it goes now
        for (&pid, k) in &self.known {
            if k.unit == 0 && sys::pid_live(pid, k.start) {
                sys::kill_pid(pid, libc::SIGKILL);
            }
        }
    }

    /// The unit `pid` belongs to, following parents (memoized in `owner`).
    fn owner_of(
        &mut self,
        pid: i32,
        table: &HashMap<i32, sys::ProcStat>,
        owner: &mut HashMap<i32, Option<u64>>,
        units: &[&Unit],
    ) -> Option<u64> {
        let mut chain = Vec::new();
        let mut p = pid;
        let found = loop {
            if let Some(o) = owner.get(&p) {
                break *o;
            }
            let Some(s) = table.get(&p) else { break None };
            if p <= 1 || chain.len() > 4096 {
                break None;
            }
            if s.ppid == self.me {
                // not a unit's main process: an orphan that came back, or not ours
                break self.orphan_owner(p, s.start, units);
            }
            chain.push(p);
            p = s.ppid;
        };
        owner.insert(p, found);
        for c in chain {
            owner.insert(c, found);
        }
        found
    }

    /// The unit of a child of this process that is no unit's main process: the one in
    /// the launch id of its environment; 0 for a unit that is gone (its run ended: what
    /// it left is killed on sight).
    fn orphan_owner(&mut self, pid: i32, start: u64, units: &[&Unit]) -> Option<u64> {
        if self.foreign.get(&pid) == Some(&start) {
            return None;
        }
        let unit = sys::environ_var(pid, LAUNCH_ID_VAR).and_then(|v| marker_unit(&v, &self.id));
        let Some(unit) = unit else {
            self.foreign.insert(pid, start);
            return None;
        };
        Some(if units.iter().any(|u| u.id == unit) {
            unit
        } else {
            0
        })
    }

    fn track(&mut self, pid: i32, start: u64, unit: u64) {
        if self.known.len() >= MAX_TRACKED {
            return;
        }
        self.known.insert(pid, Known { start, unit });
        if self.root.is_none() {
            self.news.push(format!("t {pid} {start}"));
        }
    }

    /// Reaps tracked descendants that exited as children of this process.
    fn reap(&mut self) {
        let me = self.me;
        let news = &mut self.news;
        let fallback = self.root.is_none();
        self.known.retain(|&pid, k| match sys::proc_stat(pid) {
            Some(s) if s.start == k.start && s.zombie && s.ppid == me => {
                let reaped = sys::reap_pid(pid).is_some();
                if reaped && fallback {
                    news.push(format!("u {pid}"));
                }
                !reaped
            }
            Some(s) if s.start == k.start => true,
            _ => {
                if fallback {
                    news.push(format!("u {pid}"));
                }
                false
            }
        });
    }

    /// Ends whatever of the launch is left once every unit is done (what escaped every
    /// unit: in process-group mode, an orphan that did not come back to this process):
    /// SIGTERM, SIGKILL after `grace`, each waited for (bounded by `grace`); then removes
    /// the launch's cgroup. Whether nothing is left.
    pub(crate) fn sweep(&mut self, grace: Duration) -> bool {
        self.scan_now(&[]);
        let mut left = Vec::new();
        for sig in [libc::SIGTERM, libc::SIGKILL] {
            left = self.leftovers();
            if left.is_empty() {
                break;
            }
            match &self.root {
                Some(root) => cgroup::signal(root, sig),
                None => {
                    for &p in &left {
                        sys::kill_pid(p, sig);
                    }
                }
            }
            let until = Instant::now() + grace;
            loop {
                self.reap();
                left = match &self.root {
                    Some(root) => cgroup::procs(root),
                    None => self.live_known(),
                };
                if left.is_empty() || Instant::now() >= until {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        self.reap();
        let removed = match &self.root {
            Some(root) => cgroup::remove(root).is_ok(),
            None => true,
        };
        left.is_empty() && removed
    }

    /// What is left of the launch: the cgroup's members, or the live tracked descendants
    /// and every process started with the launch id (found by reading every process's
    /// environment: done only at the end).
    fn leftovers(&mut self) -> Vec<i32> {
        if let Some(root) = &self.root {
            return cgroup::procs(root);
        }
        for pid in sys::all_pids() {
            if pid != self.me
                && !self.known.contains_key(&pid)
                && sys::environ_var(pid, LAUNCH_ID_VAR)
                    .is_some_and(|v| marker_unit(&v, &self.id).is_some())
            {
                if let Some(s) = sys::proc_stat(pid) {
                    self.track(pid, s.start, 0);
                }
            }
        }
        self.live_known()
    }

    fn live_known(&self) -> Vec<i32> {
        self.known
            .iter()
            .filter(|(&p, k)| sys::pid_live(p, k.start))
            .map(|(&p, _)| p)
            .collect()
    }
}

impl Drop for Contain {
    /// Removes the launch's cgroup if it is empty (a launch that failed to start, or one
    /// whose sweep left nothing).
    fn drop(&mut self) {
        if let Some(root) = &self.root {
            if !cgroup::populated(root) {
                let _ = cgroup::remove(root);
            }
        }
    }
}

fn why_mode(subreaper: bool, reason: String) -> ContainmentMode {
    ContainmentMode::ProcessGroups { subreaper, reason }
}

/// Launch cgroups made by this process (a number each).
static LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// The containment a launch from this process would get with [`Containment::Auto`],
/// found the way a launch finds it: by making a launch cgroup below this process's own
/// (then removed again). A cgroup's path names the one made; process groups say why
/// not (subreaper: false, as nothing is started).
pub fn probe_containment() -> ContainmentMode {
    let me = std::process::id() as i32;
    match make_launch_cgroup(me, LAUNCHES.fetch_add(1, Ordering::Relaxed)) {
        Ok(path) => {
            let _ = cgroup::remove(&path);
            ContainmentMode::Cgroup { path }
        }
        Err(why) => why_mode(false, why),
    }
}

/// Makes `nerve-launch-PID-N` below this process's cgroup, if processes can be moved
/// into it; why not otherwise.
fn make_launch_cgroup(me: i32, n: u64) -> Result<PathBuf, String> {
    let own = cgroup::own_dir()?;
    let name = format!("nerve-launch-{me}-{n}");
    // a leftover of a launcher that had this pid: a name of its own
    let dir = cgroup::create(&own, &name)
        .or_else(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos());
                cgroup::create(&own, &format!("{name}-{nanos}"))
            }
            _ => Err(e),
        })
        .map_err(|e| format!("cannot make a cgroup in {}: {e}", own.display()))?;
    if let Err(e) = cgroup::check_movable(&own, &dir) {
        let _ = cgroup::remove(&dir);
        return Err(e);
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_name_their_launch_and_start() {
        assert_eq!(marker_unit("12-0-99.3", "12-0-99"), Some(3));
        assert_eq!(marker_unit("12-0-99", "12-0-99"), None);
        assert_eq!(marker_unit("12-0-991.3", "12-0-99"), None);
        assert_eq!(marker_unit("12-0-99.x", "12-0-99"), None);
        assert_eq!(marker_unit("", "12-0-99"), None);
    }

    #[test]
    fn process_groups_when_asked() {
        let c = Contain::new(Containment::ProcessGroups, false).unwrap();
        assert_eq!(
            c.mode().to_string(),
            "process groups (asked for)",
            "{:?}",
            c.mode()
        );
        assert!(c.guardian_lines()[0].starts_with("id "));
    }
}
