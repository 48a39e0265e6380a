//! The guardian: a small process that outlives a killed launcher and ends what it started.
//!
//! `PR_SET_PDEATHSIG` kills the launcher's direct children when it dies, but not their own
//! children. So the launcher starts a guardian (its own executable again, with the hidden
//! first argument [`GUARDIAN_ARG`]) and writes it, over a pipe, each process group it
//! starts (`+pgid`) and each that is gone (`-pgid`). When the pipe reaches end of file (the
//! launcher exited, however it died), the guardian sends SIGTERM and then SIGKILL to every
//! group still listed, removes the launch's scratch directory and reclaims the shared
//! memory of the dead processes with [`nerve::introspect::clean`] for the domain.
//!
//! A binary that starts launches with [`Guardian::CurrentExe`] must call
//! [`run_guardian_if_requested`] first thing in `main` (the `nerve` CLI does).

use crate::error::LaunchError;
use crate::sys;
use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// The first argument that makes a binary run as the guardian.
pub const GUARDIAN_ARG: &str = "__nerve-launch-guardian";
/// Most groups one guardian tracks.
const MAX_GROUPS: usize = 4096;
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

/// The guardian's work: track groups from `input` until end of file, then end them.
fn guardian_main(input: impl BufRead) {
    // the terminal's Ctrl-C and hang-up are the launcher's business
    sys::ignore_signal(libc::SIGINT);
    sys::ignore_signal(libc::SIGHUP);
    let mut groups = BTreeSet::new();
    let mut dir = None;
    for line in input.lines() {
        let Ok(line) = line else { break };
        if let Some(g) = line.strip_prefix('+').and_then(|g| g.parse::<i32>().ok()) {
            if groups.len() < MAX_GROUPS {
                groups.insert(g);
            }
        } else if let Some(g) = line.strip_prefix('-').and_then(|g| g.parse::<i32>().ok()) {
            groups.remove(&g);
        } else if let Some(d) = line.strip_prefix("dir ") {
            dir = Some(PathBuf::from(d));
        }
    }
    end_groups(&groups);
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
    if let Ok(cfg) = nerve::Config::from_env() {
        match nerve::introspect::clean(&cfg) {
            Ok(r) if !groups.is_empty() => eprintln!(
                "nerve launch guardian: ended {} process group(s), reclaimed {} node(s) and {} file(s)",
                groups.len(),
                r.dead_nodes.len(),
                r.removed_files.len()
            ),
            Ok(_) => {}
            Err(e) => eprintln!("nerve launch guardian: cleanup: {e}"),
        }
    }
}

/// SIGTERM to every group, SIGKILL to what is left after [`GRACE`], then waits (bounded)
/// until they are gone.
fn end_groups(groups: &BTreeSet<i32>) {
    let mut alive: Vec<i32> = groups
        .iter()
        .copied()
        .filter(|&g| sys::kill_group(g, libc::SIGTERM))
        .collect();
    for sig in [Some(libc::SIGKILL), None] {
        let until = Instant::now() + GRACE;
        while !alive.is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
            alive.retain(|&g| sys::group_alive(g));
        }
        if let Some(sig) = sig {
            alive.retain(|&g| sys::kill_group(g, sig));
        }
    }
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
