//! Stopping a run on Ctrl-C (SIGINT) or SIGTERM.
//!
//! The `nerve` binary turns both signals into Nerve's shutdown request
//! ([`nerve::shutdown`]); a long run notices it through [`supervise`], which runs the work
//! on a thread of its own and waits for either its end or a request. On the first request
//! it [`stop`]s: every child process the harness started (and its process group where it
//! has one) and every other process below this one is killed, the clean-ups registered
//! with [`on_stop`] run (simulated hosts, scratch files), and from then on [`Child`]
//! refuses to start new processes. The caller then writes what finished and calls
//! [`Interrupted::finish`], which removes what the run left in `/dev/shm`: the files that
//! were not there when it started, that this user owns and whose names are the run's
//! (the Nerve domains taken with [`domain`] and the patterns given to [`remove_also`]).
//! A second request exits at once (status 130).
//!
//! [`Child`]: crate::child::Child

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Exit status of an interrupted run (128 + SIGINT, as shells report Ctrl-C).
pub const EXIT_STATUS: u8 = 130;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// What the harness ends and removes on interruption.
#[derive(Default)]
struct Registry {
    next: u64,
    /// Tracked processes: id -> (pid, whether it leads a process group of its own).
    processes: BTreeMap<u64, (u32, bool)>,
    /// Clean-ups: id -> the clean-up.
    hooks: BTreeMap<u64, Box<dyn FnOnce() + Send>>,
    /// Names in /dev/shm that belong to the run.
    patterns: BTreeSet<Pattern>,
}

impl Registry {
    fn id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

fn registry() -> MutexGuard<'static, Option<Registry>> {
    // a panic while holding the lock leaves plain data behind: keep using it
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

fn with<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    f(registry().get_or_insert_with(Registry::default))
}

/// Whether the run was interrupted (set by [`stop`]).
pub fn interrupted() -> bool {
    // SYNC: a plain flag; what stop does is published through the registry's lock.
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Whether the run is being interrupted: a shutdown request arrived (SIGINT, SIGTERM) or
/// [`stop`] ran. Work that ends after this must not count as finished: it may have ended
/// because its processes were killed.
pub fn stopping() -> bool {
    interrupted() || nerve::shutdown::requested()
}

/// The run was interrupted: no new process is started.
#[derive(Clone, Copy, Debug, thiserror::Error)]
#[error("the run was interrupted (SIGINT or SIGTERM): no new process is started")]
pub struct Refused;

/// A process the harness kills on interruption, for as long as this guard lives (drop it
/// once the process is reaped).
#[must_use = "the process is tracked only while the guard lives"]
pub struct Tracked {
    id: u64,
}

/// Tracks process `pid` (and its process group, where `own_group` says it leads one), so
/// that [`stop`] kills it; refused once the run is interrupted (then kill it yourself).
pub fn track(pid: u32, own_group: bool) -> Result<Tracked, Refused> {
    with(|r| {
        if interrupted() {
            return Err(Refused);
        }
        let id = r.id();
        r.processes.insert(id, (pid, own_group));
        Ok(Tracked { id })
    })
}

impl Drop for Tracked {
    fn drop(&mut self) {
        with(|r| r.processes.remove(&self.id));
    }
}

/// A clean-up that runs on interruption unless this guard is dropped first (then it never
/// runs: its owner cleaned up itself).
#[must_use = "the clean-up is registered only while the guard lives"]
pub struct OnStop {
    id: u64,
}

/// Registers `cleanup` to run when the run is interrupted, e.g. removing simulated hosts
/// or scratch files that a `Drop` would have removed had the run ended.
pub fn on_stop(cleanup: impl FnOnce() + Send + 'static) -> OnStop {
    with(|r| {
        let id = r.id();
        r.hooks.insert(id, Box::new(cleanup));
        OnStop { id }
    })
}

impl Drop for OnStop {
    fn drop(&mut self) {
        with(|r| r.hooks.remove(&self.id));
    }
}

/// How the name of a file in `/dev/shm` marks it as the run's.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pattern {
    /// The name starts with this.
    Prefix(String),
    /// The name ends with this.
    Suffix(String),
}

impl Pattern {
    fn matches(&self, name: &str) -> bool {
        match self {
            Pattern::Prefix(p) => name.starts_with(p.as_str()),
            Pattern::Suffix(s) => name.ends_with(s.as_str()),
        }
    }
}

/// Marks files in `/dev/shm` whose names match `pattern` as the run's: removed after an
/// interruption if they were not there when it started.
pub fn remove_also(pattern: Pattern) {
    with(|r| r.patterns.insert(pattern));
}

/// The Nerve domain `base + pid % spread` of this process (the same in its children,
/// which are told the domain), marked as the run's: its files (`nerve<domain>_…`, and the
/// bench's raw iceoryx2 files `nervebench<domain>_…`) are removed after an interruption.
pub fn domain(base: u32, spread: u32) -> u32 {
    let d = base + std::process::id() % spread.max(1);
    remove_also(Pattern::Prefix(format!("nerve{d}_")));
    remove_also(Pattern::Prefix(format!("nervebench{d}_")));
    d
}

/// The names in `/dev/shm` that this user owns.
fn own_shm_files() -> BTreeSet<String> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid && m.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The pids of every process below `root` (children, their children, …), from `/proc`.
fn descendants(root: u32) -> Vec<u32> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(ppid) = parent(pid) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).into_iter().flatten() {
            out.push(c);
            todo.push(c);
        }
    }
    out
}

/// The parent of `pid` (field 4 of `/proc/PID/stat`, after the name in parentheses).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `pid` is still a child of this process (alive or not yet reaped), so a pid
/// the kernel gave to someone else since is left alone.
fn is_our_child(pid: u32) -> bool {
    parent(pid) == Some(std::process::id())
}

fn kill(pid: i32, signal: libc::c_int) {
    // SAFETY: kill has no memory preconditions; a pid or group that is gone gives ESRCH.
    unsafe { libc::kill(pid, signal) };
}

/// Ends the run: marks it interrupted (no new child process starts), kills every tracked
/// process (its process group where it leads one) and every process below this one, then
/// runs the clean-ups registered with [`on_stop`]. Safe to call more than once.
pub fn stop() {
    let (processes, hooks) = with(|r| {
        // SYNC: set under the registry's lock, so no `track` after it succeeds.
        INTERRUPTED.store(true, Ordering::Relaxed);
        (
            r.processes.values().copied().collect::<Vec<_>>(),
            std::mem::take(&mut r.hooks),
        )
    });
    for (pid, own_group) in processes {
        if own_group {
            kill(-(pid as i32), libc::SIGKILL);
        }
        if is_our_child(pid) {
            kill(pid as i32, libc::SIGKILL);
        }
    }
    // what the tracked processes started, and processes started without the harness;
    // a process that forks while we look is caught by the next round
    for _ in 0..20 {
        let left = descendants(std::process::id());
        if left.is_empty() {
            break;
        }
        for pid in left {
            kill(pid as i32, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for hook in hooks.into_values() {
        hook();
    }
}

/// How [`supervise`]d work ended.
pub enum Outcome<T> {
    /// It returned this.
    Finished(T),
    /// A shutdown request came first; everything was [`stop`]ped.
    Interrupted(Interrupted),
}

/// An interrupted run, [`stop`]ped: write what finished, then [`Interrupted::finish`].
#[must_use = "finish removes what the run left in /dev/shm"]
pub struct Interrupted {
    before: BTreeSet<String>,
}

impl Interrupted {
    /// Removes the run's files in `/dev/shm` that were not there when it started (see
    /// the module's docs); returns their names.
    pub fn finish(self) -> Vec<String> {
        let patterns = with(|r| r.patterns.clone());
        let mut removed = Vec::new();
        for name in own_shm_files().difference(&self.before) {
            if patterns.iter().any(|p| p.matches(name))
                && std::fs::remove_file(format!("/dev/shm/{name}")).is_ok()
            {
                removed.push(name.clone());
            }
        }
        removed
    }
}

/// Runs `work` on a thread of its own and waits for it to return or for a shutdown
/// request (SIGINT, SIGTERM). On a request: [`stop`] and return
/// [`Outcome::Interrupted`], leaving the work's thread behind (it ends with the process);
/// a second request then exits the process at once with [`EXIT_STATUS`]. A panic of the
/// work is resumed here.
pub fn supervise<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Outcome<T> {
    let before = own_shm_files();
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .name("bench-run".into())
        .spawn(move || {
            let out = work();
            let _ = tx.send(());
            out
        })
        .expect("cannot start a thread");
    loop {
        // read before looking, so a request in between ends the wait below at once
        let seen = nerve::shutdown::requests();
        if nerve::shutdown::requested() {
            break;
        }
        match rx.recv_timeout(Duration::ZERO) {
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                return match worker.join() {
                    Ok(out) => Outcome::Finished(out),
                    Err(panic) => std::panic::resume_unwind(panic),
                };
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        // woken at once by a request; the end of the work is seen within 200 ms
        nerve::shutdown::wait(seen, Duration::from_millis(200));
    }
    let first = nerve::shutdown::requests();
    std::thread::spawn(move || loop {
        if nerve::shutdown::wait(first, Duration::from_secs(3600)) != first {
            // SAFETY: _exit ends the process without running anything else (no atexit
            // handler, no lock another thread may hold): "at once" is what was asked for.
            unsafe { libc::_exit(EXIT_STATUS.into()) };
        }
    });
    stop();
    Outcome::Interrupted(Interrupted { before })
}
