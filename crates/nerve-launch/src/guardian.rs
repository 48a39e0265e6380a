//! The guardian: a small process that outlives a killed launcher and ends what it started.
//!
//! `PR_SET_PDEATHSIG` kills the launcher's direct children when it dies, but not their own
//! children. So the launcher starts a guardian (its own executable again, with the hidden
//! first argument [`GUARDIAN_ARG`]) and writes it, over a pipe, one line per fact:
//!
//! - `dir PATH`: the launch's scratch directory;
//! - `cgroup PATH`: the launch's cgroup (cgroup mode);
//! - `id ID`: the launch's `NERVE_LAUNCH_ID` (process-group mode);
//! - `+PGID` / `-PGID`: a process group started / gone;
//! - `t PID START` / `u PID`: a descendant tracked / gone (process-group mode);
//! - `swept`: the launcher ended everything itself.
//!
//! When the pipe reaches end of file (the launcher exited, however it died), the guardian
//! sends SIGTERM to everything still listed — every group, every member of the cgroup,
//! every tracked descendant and every process whose environment carries the launch id —
//! then SIGKILL (`cgroup.kill`) to what is left after [`GRACE`], removes the cgroup and
//! the scratch directory and reclaims the shared memory of the dead processes with
//! [`nerve::introspect::clean`] for the domain.
//!
//! A binary that starts launches with [`Guardian::CurrentExe`] must call
//! [`run_guardian_if_requested`] first thing in `main` (the `nerve` CLI does).

use crate::cgroup;
use crate::contain::{marker_unit, LAUNCH_ID_VAR};
use crate::error::LaunchError;
use crate::sys;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// The first argument that makes a binary run as the guardian.
pub const GUARDIAN_ARG: &str = "__nerve-launch-guardian";
/// Most groups one guardian tracks.
const MAX_GROUPS: usize = 4096;
/// Most single processes one guardian tracks.
const MAX_PIDS: usize = 65_536;
/// How long the guardian waits after SIGTERM, and again after SIGKILL.
const GRACE: Duration = Duration::from_secs(2);

/// Which guardian a launch gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Guardian {
    /// None: if the launcher is killed with SIGKILL, its direct children die (parent-death
    /// signal) but their own children and the shared memory may stay.
    Off,
    /// This executable with [`GUARDIAN_ARG`] (it must call [`run_guardian_if_requested`]).
    CurrentExe,
    /// Another executable that calls [`run_guardian_if_requested`] (e.g. the `nerve` CLI),
    /// run with [`GUARDIAN_ARG`].
    Program(PathBuf),
}

/// Runs the guardian and exits if this process was started as one; returns otherwise.
pub fn run_guardian_if_requested() {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == GUARDIAN_ARG)
    {
        guardian_main(std::io::stdin().lock());
        std::process::exit(0);
    }
}

/// What the guardian ends when its pipe closes.
#[derive(Debug, Default, PartialEq)]
struct Watch {
    groups: BTreeSet<i32>,
    /// Tracked descendants: pid and start time.
    pids: BTreeMap<i32, u64>,
    dir: Option<PathBuf>,
    cgroup: Option<PathBuf>,
    id: Option<String>,
    swept: bool,
}

impl Watch {
    /// Takes one line of the launcher (unknown or malformed lines are ignored).
    fn take(&mut self, line: &str) {
        let num = |s: &str| s.trim().parse::<i32>().ok().filter(|&p| p > 1);
        if let Some(d) = line.strip_prefix("dir ") {
            self.dir = Some(PathBuf::from(d));
        } else if let Some(c) = line.strip_prefix("cgroup ") {
            self.cgroup = Some(PathBuf::from(c));
        } else if let Some(id) = line.strip_prefix("id ") {
            self.id = Some(id.to_string());
        } else if line == "swept" {
            self.swept = true;
        } else if let Some(rest) = line.strip_prefix("t ") {
            let mut f = rest.split_whitespace();
            let pid = f.next().and_then(num);
            let start = f.next().and_then(|s| s.parse::<u64>().ok());
            if let (Some(pid), Some(start)) = (pid, start) {
                if self.pids.len() < MAX_PIDS {
                    self.pids.insert(pid, start);
                }
            }
        } else if let Some(pid) = line.strip_prefix("u ").and_then(num) {
            self.pids.remove(&pid);
        } else if let Some(g) = line.strip_prefix('+').and_then(num) {
            if self.groups.len() < MAX_GROUPS {
                self.groups.insert(g);
            }
        } else if let Some(g) = line.strip_prefix('-').and_then(num) {
            self.groups.remove(&g);
        }
    }

    /// The single processes to signal: tracked descendants still running, and every
    /// process started with the launch id in its environment.
    fn processes(&self) -> Vec<i32> {
        let mut out: BTreeSet<i32> = self
            .pids
            .iter()
            .filter(|(&p, &start)| sys::pid_live(p, start))
            .map(|(&p, _)| p)
            .collect();
        if let Some(id) = &self.id {
            let me = std::process::id() as i32;
            for p in sys::all_pids() {
                if p != me
                    && sys::environ_var(p, LAUNCH_ID_VAR)
                        .is_some_and(|v| marker_unit(&v, id).is_some())
                    && sys::proc_stat(p).is_some_and(|s| !s.zombie)
                {
                    out.insert(p);
                }
            }
        }
        out.into_iter().collect()
    }
}

/// The guardian's work: track the launch from `input` until end of file, then end it.
fn guardian_main(input: impl BufRead) {
    // the terminal's Ctrl-C and hang-up are the launcher's business
    sys::ignore_signal(libc::SIGINT);
    sys::ignore_signal(libc::SIGHUP);
    let mut w = Watch::default();
    for line in input.lines() {
        let Ok(line) = line else { break };
        w.take(&line);
    }
    let ended = end_all(&w);
    if let Some(d) = &w.dir {
        let _ = std::fs::remove_dir_all(d);
    }
    if let Ok(cfg) = nerve::Config::from_env() {
        match nerve::introspect::clean(&cfg) {
            Ok(r) if !ended.is_empty() => eprintln!(
                "nerve launch guardian: ended {ended}, reclaimed {} node(s) and {} file(s)",
                r.dead_nodes.len(),
                r.removed_files.len()
            ),
            Ok(_) => {}
            Err(e) => eprintln!("nerve launch guardian: cleanup: {e}"),
        }
    }
}

/// SIGTERM to every group, cgroup member and process of the launch, SIGKILL to what is
/// left after [`GRACE`], then waits (bounded) until they are gone and removes the cgroup.
/// What it found running, in words (empty: nothing).
fn end_all(w: &Watch) -> String {
    // after `swept` only groups can be left (none, normally)
    let cg = w.cgroup.as_deref().filter(|_| !w.swept);
    let procs = |w: &Watch| if w.swept { Vec::new() } else { w.processes() };
    let mut groups: Vec<i32> = w
        .groups
        .iter()
        .copied()
        .filter(|&g| sys::kill_group(g, libc::SIGTERM))
        .collect();
    let mut pids = procs(w);
    let members = cg.map_or(0, |c| cgroup::procs(c).len());
    let mut found = Vec::new();
    if !groups.is_empty() {
        found.push(format!("{} process group(s)", groups.len()));
    }
    if members > 0 {
        found.push(format!("{members} process(es) of the launch's cgroup"));
    }
    if !pids.is_empty() {
        found.push(format!("{} tracked process(es)", pids.len()));
    }
    for &p in &pids {
        sys::kill_pid(p, libc::SIGTERM);
    }
    if let Some(c) = cg {
        cgroup::signal(c, libc::SIGTERM);
    }
    for sig in [Some(libc::SIGKILL), None] {
        let until = Instant::now() + GRACE;
        loop {
            groups.retain(|&g| sys::group_alive(g));
            pids.retain(|&p| sys::proc_stat(p).is_some_and(|s| !s.zombie));
            let populated = cg.is_some_and(cgroup::populated);
            if (groups.is_empty() && pids.is_empty() && !populated) || Instant::now() >= until {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(sig) = sig {
            groups.retain(|&g| sys::kill_group(g, sig));
            // processes forked meanwhile carry the id too
            pids = procs(w);
            for &p in &pids {
                sys::kill_pid(p, sig);
            }
            if let Some(c) = cg {
                cgroup::signal(c, sig);
            }
        }
    }
    if let Some(c) = &w.cgroup {
        let _ = cgroup::remove(c);
    }
    found.join(", ")
}

/// The launcher's end of the pipe to its guardian.
pub(crate) struct GuardianLink {
    child: Child,
    pipe: Option<ChildStdin>,
}

impl GuardianLink {
    /// Starts the guardian (none for [`Guardian::Off`]).
    pub(crate) fn start(
        g: &Guardian,
        config: &nerve::Config,
        run_dir: &Path,
    ) -> Result<Option<GuardianLink>, LaunchError> {
        let program = match g {
            Guardian::Off => return Ok(None),
            // the running image itself: still valid if the file was replaced meanwhile
            // (a rebuild or an upgrade), where `current_exe` would name a deleted path
            Guardian::CurrentExe => PathBuf::from("/proc/self/exe"),
            Guardian::Program(p) => p.clone(),
        };
        let mut cmd = Command::new(&program);
        cmd.arg(GUARDIAN_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .env("NERVE_DOMAIN", config.domain.to_string())
            .env("NERVE_STATE_DIR", &config.state_dir);
        // its own group: the terminal's Ctrl-C goes to the launcher only
        sys::own_group(&mut cmd);
        let mut child = cmd.spawn().map_err(|source| LaunchError::Guardian {
            program: program.display().to_string(),
            source,
        })?;
        let pipe = child.stdin.take();
        let mut link = GuardianLink { child, pipe };
        link.send(&format!("dir {}", run_dir.display()))
            .map_err(|source| LaunchError::Guardian {
                program: program.display().to_string(),
                source,
            })?;
        Ok(Some(link))
    }

    fn send(&mut self, line: &str) -> std::io::Result<()> {
        match &mut self.pipe {
            Some(p) => p.write_all(format!("{line}\n").as_bytes()),
            None => Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe)),
        }
    }

    /// Tells the guardian about a new process group.
    pub(crate) fn watch(&mut self, pgid: i32) -> std::io::Result<()> {
        self.send(&format!("+{pgid}"))
    }

    /// Passes lines of the containment on (see the module documentation).
    pub(crate) fn tell(&mut self, lines: &[String]) -> std::io::Result<()> {
        lines.iter().try_for_each(|l| self.send(l))
    }

    /// Tells the guardian a group is gone.
    pub(crate) fn forget(&mut self, pgid: i32) -> std::io::Result<()> {
        self.send(&format!("-{pgid}"))
    }

    /// Closes the pipe (the guardian cleans up and exits) and waits for it, bounded.
    pub(crate) fn finish(mut self) {
        self.pipe = None;
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_build_the_watch_and_bad_ones_are_ignored() {
        let mut w = Watch::default();
        for l in [
            "dir /tmp/x",
            "cgroup /sys/fs/cgroup/a b",
            "id 1-2-3",
            "+100",
            "+101",
            "-100",
            "+1",
            "+-5",
            "t 200 77",
            "t 201 78",
            "u 201",
            "t 1 5",
            "t 300",
            "t x 5",
            "",
            "garbage",
            "+99999999999999999999",
        ] {
            w.take(l);
        }
        assert_eq!(w.groups, BTreeSet::from([101]));
        assert_eq!(w.pids, BTreeMap::from([(200, 77)]));
        assert_eq!(w.dir, Some(PathBuf::from("/tmp/x")));
        assert_eq!(w.cgroup, Some(PathBuf::from("/sys/fs/cgroup/a b")));
        assert_eq!(w.id.as_deref(), Some("1-2-3"));
        assert!(!w.swept);
        w.take("swept");
        assert!(w.swept);
    }
}
