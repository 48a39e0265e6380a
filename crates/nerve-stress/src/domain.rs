//! A scenario's domain: its configuration, the files and descriptors it started with, and
//! the children it starts in it.

use crate::roles::RoleSpec;
use crate::{Options, StressError};
use nerve_bench_harness::child::Child;
use std::collections::BTreeSet;

/// A domain of one scenario and what was there before it began.
pub struct Domain {
    /// The domain's configuration (id and state directory of the options).
    pub config: nerve::Config,
    scenario: &'static str,
    files: BTreeSet<String>,
    fds: usize,
    role_command: (std::path::PathBuf, Vec<String>),
}

impl Domain {
    /// The domain of `opts`, its files and this process's descriptors counted now.
    pub fn new(scenario: &'static str, opts: &Options) -> Result<Domain, StressError> {
        let config = nerve::Config::default()
            .domain(opts.domain)
            .map_err(|e| setup(scenario, e))?
            .state_dir(opts.state_dir.clone());
        Ok(Domain {
            files: nerve::introspect::domain_files(&config),
            fds: open_fds(),
            config,
            scenario,
            role_command: opts.role_command.clone(),
        })
    }

    /// A context in the domain.
    pub fn context(&self) -> Result<nerve::Context, StressError> {
        nerve::Context::new(self.config.clone()).map_err(|e| setup(self.scenario, e))
    }

    /// Starts a child in `role` with `spec` (its domain filled in).
    pub fn spawn(&self, role: &str, spec: RoleSpec) -> Result<Child, StressError> {
        self.spawn_as(None, role, spec)
    }

    /// Starts a child in `role` with `spec` as user `uid` (its own group, no others;
    /// through util-linux's `setpriv`, which needs root), or as this user when `None`.
    pub fn spawn_as(
        &self,
        uid: Option<u32>,
        role: &str,
        mut spec: RoleSpec,
    ) -> Result<Child, StressError> {
        spec.domain = self.config.domain;
        spec.state_dir = self.config.state_dir.clone();
        let json = serde_json::to_string(&spec).map_err(|e| setup(self.scenario, e))?;
        let (program, mut args) = match uid {
            None => (self.role_command.0.clone(), Vec::new()),
            Some(uid) => (
                std::path::PathBuf::from("setpriv"),
                vec![
                    format!("--reuid={uid}"),
                    format!("--regid={uid}"),
                    "--clear-groups".to_string(),
                    "--".to_string(),
                    self.role_command.0.display().to_string(),
                ],
            ),
        };
        args.extend(self.role_command.1.iter().cloned());
        args.extend([role.to_string(), json]);
        Child::spawn(&program, &args, &[], "stress role").map_err(|e| setup(self.scenario, e))
    }

    /// Starts a child in `role` on simulated host `host` of `sim`, with the network
    /// plane (the host's own shared memory, state directory and Zenoh peer).
    pub fn spawn_on(
        &self,
        sim: &nerve_bench_harness::hosts::SimHosts,
        host: usize,
        role: &str,
        mut spec: RoleSpec,
    ) -> Result<Child, StressError> {
        spec.domain = self.config.domain;
        spec.network = true;
        let json = serde_json::to_string(&spec).map_err(|e| setup(self.scenario, e))?;
        let mut args = self.role_command.1.clone();
        args.extend([role.to_string(), json]);
        sim.spawn(host, &self.role_command.0, &args, &[], "stress role")
            .map_err(|e| setup(self.scenario, e))
    }

    /// What is there now that was not there at the start: files of the domain in
    /// /dev/shm and the state directory, and descriptors of this process beyond its
    /// starting count (a few may be open for a moment: they are looked at twice).
    pub fn leftovers(&self) -> Vec<String> {
        let mut out: Vec<String> = nerve::introspect::domain_files(&self.config)
            .difference(&self.files)
            .cloned()
            .collect();
        let fds = (0..20)
            .map(|_| {
                let n = open_fds();
                if n > self.fds {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                n
            })
            .min()
            .unwrap_or(0);
        if fds > self.fds {
            out.push(format!(
                "{} file descriptors of this process (it started with {})",
                fds, self.fds
            ));
        }
        out
    }

    /// Bytes the domain's files hold in /dev/shm now (pages in use).
    pub fn shm_bytes(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        nerve::introspect::domain_files(&self.config)
            .iter()
            .filter(|p| p.starts_with("/dev/shm/"))
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.blocks() * 512)
            .sum()
    }
}

impl Drop for Domain {
    /// Leaves the machine as it was, whatever the scenario left.
    fn drop(&mut self) {
        let _ = nerve::introspect::clean(&self.config);
    }
}

/// Open descriptors of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// Resident memory of process `pid` in bytes (`VmRSS`), if it can be read.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Open descriptors of process `pid`, if they can be counted.
pub fn fds_of(pid: u32) -> Option<usize> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()
        .map(|d| d.count())
}

pub(crate) fn setup(scenario: &'static str, e: impl std::fmt::Display) -> StressError {
    StressError::Setup {
        scenario,
        reason: e.to_string(),
    }
}
