//! Running a [`Plan`]: ordered start-up with readiness, output, respawn with backoff, and
//! shutdown by escalation (SIGINT, SIGTERM, SIGKILL to each process: its group and its
//! cgroup or tracked descendants, see [`crate::contain`]).
//!
//! One supervisor thread owns every child: it spawns them (so their parent-death signal is
//! tied to a thread that outlives them), reaps them per process group, polls readiness and
//! runs the shutdown. [`Running`] talks to it through a mutex and a condition variable.

use crate::contain::{Contain, Containment, ContainmentMode, Unit};
use crate::error::LaunchError;
use crate::guardian::{Guardian, GuardianLink};
use crate::lifecycle::{Drives, Managed, Progress};
use crate::plan::{OnExit, ParamValue, Plan, ProcessSpec, Ready};
use crate::sys;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Longest output line passed on; the rest of a longer line is cut (and marked).
pub const MAX_LINE: usize = 4096;
/// How often the supervisor looks at its children.
const TICK: Duration = Duration::from_millis(10);
/// How often topic and service readiness is polled: it bounds how late a ready process
/// is seen (a chain of `after` dependencies pays it once per link).
const POLL: Duration = Duration::from_millis(10);
/// How long a group gets after SIGKILL before it is reported as stuck.
const KILL_GRACE: Duration = Duration::from_secs(5);
/// How long what escaped every process (see [`Contain::sweep`]) gets after SIGTERM, and
/// again after SIGKILL, at the end of a launch.
const SWEEP_GRACE: Duration = Duration::from_secs(1);

/// Where children's output goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Each line to this process's stdout (or stderr, for the child's stderr) as
    /// `[name] line`.
    Prefixed,
    /// Dropped (readiness on output lines still works).
    Discard,
}

/// A callback for [`Event`]s.
pub type EventSink = Arc<dyn Fn(&Event) + Send + Sync>;

/// How to run a plan.
#[derive(Clone)]
pub struct StartOptions {
    /// The domain and state directory the children get (`NERVE_DOMAIN`, `NERVE_STATE_DIR`);
    /// the launcher's readiness checks and the guardian's cleanup use it too.
    pub config: nerve::Config,
    /// Where the children's output goes.
    pub output: Output,
    /// Called for every event (start, ready, exit, respawn, escalation).
    pub on_event: Option<EventSink>,
    /// The process that ends the children if the launcher is killed.
    pub guardian: Guardian,
    /// Whether SIGINT/SIGTERM of this process ([`nerve::shutdown::requested`]) stops the
    /// launch (install the handlers with [`nerve::shutdown::install`]).
    pub handle_signals: bool,
    /// In process-group mode, whether this process becomes the subreaper of its
    /// orphaned descendants (they come back to it, so it finds and reaps them).
    pub subreaper: bool,
    /// How the processes are kept together (see [`Running::containment`] for the mode in
    /// effect).
    pub containment: Containment,
}

impl StartOptions {
    /// Options for `config`: prefixed output, no guardian, no signal handling, a cgroup
    /// where writable (else process groups with the subreaper).
    pub fn new(config: nerve::Config) -> StartOptions {
        StartOptions {
            config,
            output: Output::Prefixed,
            on_event: None,
            guardian: Guardian::Off,
            handle_signals: false,
            subreaper: true,
            containment: Containment::Auto,
        }
    }
}

/// Something that happened to a launch.
#[derive(Clone, Debug)]
pub enum Event {
    /// A process started.
    Started {
        /// The process.
        name: String,
        /// Its pid (also its process group).
        pid: u32,
        /// Which start this is (1 for the first).
        start: u32,
    },
    /// A process became ready.
    Ready {
        /// The process.
        name: String,
    },
    /// Every process is ready.
    AllReady,
    /// A process exited on its own.
    Exited {
        /// The process.
        name: String,
        /// How (`exit code 1`, `killed by SIGSEGV`).
        status: String,
    },
    /// A process will be restarted.
    Respawning {
        /// The process.
        name: String,
        /// Which restart this is (1 for the first).
        respawn: u32,
        /// After this delay.
        delay: Duration,
    },
    /// The launch is stopping.
    ShuttingDown {
        /// Why.
        reason: String,
    },
    /// A process did not end in time and gets a harder signal.
    Escalated {
        /// The process.
        name: String,
        /// The signal sent now.
        signal: &'static str,
    },
    /// The launcher took a managed node through a transition.
    Lifecycle {
        /// The process.
        name: String,
        /// The node's full name.
        node: String,
        /// The transition (`configure`, ...).
        transition: String,
        /// The state reached.
        state: String,
    },
    /// Something went wrong that does not stop the launch.
    Warning(String),
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::Started { name, pid, start } if *start > 1 => {
                write!(f, "{name} started (pid {pid}, start {start})")
            }
            Event::Started { name, pid, .. } => write!(f, "{name} started (pid {pid})"),
            Event::Ready { name } => write!(f, "{name} ready"),
            Event::AllReady => write!(f, "all processes ready"),
            Event::Exited { name, status } => write!(f, "{name} exited: {status}"),
            Event::Respawning {
                name,
                respawn,
                delay,
            } => write!(f, "{name}: respawn {respawn} in {delay:?}"),
            Event::ShuttingDown { reason } => write!(f, "shutting down: {reason}"),
            Event::Escalated { name, signal } => write!(f, "{name} still running: {signal}"),
            Event::Lifecycle {
                name,
                node,
                transition,
                state,
            } => write!(f, "{name}: {node} {transition} -> {state}"),
            Event::Warning(w) => write!(f, "warning: {w}"),
        }
    }
}

/// Why a launch ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitReason {
    /// [`Running::stop`], [`Running::shutdown`] or a signal.
    Requested,
    /// Every process exited (all of them with `exit = "ignore"`).
    AllExited,
    /// A required process exited (no respawn configured).
    ProcessExited {
        /// The process.
        name: String,
        /// How it ended.
        status: String,
    },
    /// A process kept exiting and used up its respawns.
    RespawnExhausted {
        /// The process.
        name: String,
        /// How many times it was started.
        starts: u32,
        /// How its last run ended.
        status: String,
    },
    /// A process was not ready in time.
    ReadyTimeout {
        /// The process.
        name: String,
        /// Its timeout.
        timeout: Duration,
        /// What it waited for.
        condition: String,
    },
    /// A process could not be started.
    StartFailed {
        /// The process.
        name: String,
        /// Its executable.
        program: String,
        /// The system error.
        error: String,
    },
    /// A managed node did not answer a transition within its process's ready timeout.
    LifecycleStuck {
        /// The process.
        name: String,
        /// The node's full name.
        node: String,
        /// The transition it is stuck in.
        transition: String,
        /// The ready timeout.
        timeout: Duration,
    },
    /// A managed node refused or failed a transition on the way up.
    LifecycleFailed {
        /// The process.
        name: String,
        /// The node's full name.
        node: String,
        /// The transition.
        transition: String,
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for ExitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitReason::Requested => write!(f, "stop requested"),
            ExitReason::AllExited => write!(f, "every process exited"),
            ExitReason::ProcessExited { name, status } => {
                write!(f, "required process {name} exited ({status})")
            }
            ExitReason::RespawnExhausted {
                name,
                starts,
                status,
            } => write!(
                f,
                "{name} exited ({status}) after {starts} starts: no respawn left"
            ),
            ExitReason::ReadyTimeout {
                name,
                timeout,
                condition,
            } => write!(
                f,
                "{name} not ready within {timeout:?} (waiting for {condition})"
            ),
            ExitReason::StartFailed {
                name,
                program,
                error,
            } => write!(f, "cannot start {name} ({program}): {error}"),
            ExitReason::LifecycleStuck {
                name,
                node,
                transition,
                timeout,
            } => write!(
                f,
                "{name}: managed node {node} stuck in {transition} (not answered within \
                 {timeout:?})"
            ),
            ExitReason::LifecycleFailed {
                name,
                node,
                transition,
                reason,
            } => write!(
                f,
                "{name}: managed node {node} failed to {transition}: {reason}"
            ),
        }
    }
}

/// How one process ended during shutdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndedBy {
    /// It had exited before the shutdown (or was never started).
    AlreadyExited,
    /// SIGINT.
    Sigint,
    /// SIGTERM (it ignored or outlived SIGINT).
    Sigterm,
    /// SIGKILL.
    Sigkill,
}

/// One process in a [`ShutdownReport`].
#[derive(Clone, Debug)]
pub struct ProcessShutdown {
    /// The process.
    pub name: String,
    /// Its last pid (`None`: never started).
    pub pid: Option<u32>,
    /// The signal that ended it (the whole process group).
    pub ended_by: EndedBy,
    /// From the first signal until its group was empty.
    pub took: Duration,
    /// How its main process ended (`None`: not seen).
    pub status: Option<String>,
}

/// How the shutdown went, per process, in the order they were stopped.
#[derive(Clone, Debug, Default)]
pub struct ShutdownReport {
    /// Every process.
    pub processes: Vec<ProcessShutdown>,
}

impl ShutdownReport {
    /// The processes that needed SIGTERM or SIGKILL.
    pub fn escalated(&self) -> impl Iterator<Item = &ProcessShutdown> {
        self.processes
            .iter()
            .filter(|p| matches!(p.ended_by, EndedBy::Sigterm | EndedBy::Sigkill))
    }
}

/// How a launch ended.
#[derive(Clone, Debug)]
pub struct ExitReport {
    /// Why it ended.
    pub reason: ExitReason,
    /// Whether that counts as success (exit status 0 of `nerve launch`).
    pub success: bool,
    /// How each process was stopped.
    pub shutdown: ShutdownReport,
    /// Restarts per process.
    pub respawns: Vec<(String, u32)>,
}

#[derive(Default)]
struct Status {
    /// Every process is ready now.
    ready: bool,
    /// Every process has been ready at once (start-up is over).
    was_ready: bool,
    ended: Option<ExitReason>,
    finished: bool,
    stop: bool,
    pids: Vec<(String, Option<u32>)>,
    respawns: Vec<(String, u32)>,
}

struct Shared {
    status: Mutex<Status>,
    cv: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A launch in progress. Dropping it stops the launch and waits for it.
pub struct Running {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<ExitReport>>,
    containment: ContainmentMode,
}

impl Plan {
    /// Starts the launch: the guardian, then the supervisor thread, which starts the
    /// processes in order. Start-up failures come from [`Running::wait_ready`] and
    /// [`Running::wait`].
    pub fn start(&self, opts: StartOptions) -> Result<Running, LaunchError> {
        let contain = Contain::new(opts.containment, opts.subreaper)?;
        let run_dir = make_run_dir()?;
        let guardian =
            GuardianLink::start(&opts.guardian, &opts.config, &run_dir).and_then(|mut g| {
                if let Some(link) = &mut g {
                    link.tell(&contain.guardian_lines()).map_err(|source| {
                        LaunchError::Guardian {
                            program: format!("{:?}", opts.guardian),
                            source,
                        }
                    })?;
                }
                Ok(g)
            });
        let guardian = match guardian {
            Ok(g) => g,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&run_dir);
                return Err(e);
            }
        };
        let containment = contain.mode().clone();
        let shared = Arc::new(Shared {
            status: Mutex::new(Status {
                pids: self
                    .processes
                    .iter()
                    .map(|p| (p.name.clone(), None))
                    .collect(),
                respawns: self.processes.iter().map(|p| (p.name.clone(), 0)).collect(),
                ..Status::default()
            }),
            cv: Condvar::new(),
        });
        let sup = Supervisor {
            slots: self
                .processes
                .iter()
                .map(|p| Slot {
                    spec: p.clone(),
                    state: State::Waiting,
                    starts: 0,
                    respawns: 0,
                    ready_once: false,
                    last_pid: None,
                    last_status: None,
                    started_seq: None,
                })
                .collect(),
            opts,
            shared: shared.clone(),
            guardian,
            contain,
            run_dir,
            stale: Vec::new(),
            last_poll: None,
            seq: 0,
        };
        let thread = std::thread::Builder::new()
            .name("nerve-launch".into())
            .spawn(move || sup.run())
            .map_err(|source| LaunchError::Io {
                what: "spawning the supervisor thread".into(),
                source,
            })?;
        Ok(Running {
            shared,
            thread: Some(thread),
            containment,
        })
    }
}

impl Running {
    /// Waits until every process is ready. Fails if the launch ended first (a start-up
    /// failure, a ready timeout, an exit) or `timeout` passed.
    pub fn wait_ready(&self, timeout: Duration) -> Result<(), LaunchError> {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        loop {
            if let Some(reason) = &st.ended {
                return Err(match reason.clone() {
                    ExitReason::ReadyTimeout {
                        name,
                        timeout,
                        condition,
                    } => LaunchError::ReadyTimeout {
                        name,
                        timeout,
                        condition,
                    },
                    ExitReason::StartFailed {
                        name,
                        program,
                        error,
                    } => LaunchError::Spawn {
                        name,
                        program,
                        source: std::io::Error::other(error),
                    },
                    ExitReason::ProcessExited { name, status }
                    | ExitReason::RespawnExhausted { name, status, .. }
                        if !st.was_ready =>
                    {
                        LaunchError::ExitedEarly { name, status }
                    }
                    other => LaunchError::Ended(other.to_string()),
                });
            }
            if st.ready {
                return Ok(());
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return Err(LaunchError::NotReady(timeout));
            };
            st = self
                .shared
                .cv
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Whether every process is ready now: a process that respawns is not until it is
    /// ready again (and [`Running::wait_ready`] waits for that).
    pub fn is_ready(&self) -> bool {
        self.shared.lock().ready
    }

    /// The containment in effect: the launch's cgroup, or process groups and why.
    pub fn containment(&self) -> &ContainmentMode {
        &self.containment
    }

    /// Whether the launch has ended (every process stopped).
    pub fn is_finished(&self) -> bool {
        self.shared.lock().finished
    }

    /// The current pid of each process (`None`: not running).
    pub fn pids(&self) -> Vec<(String, Option<u32>)> {
        self.shared.lock().pids.clone()
    }

    /// The current pid of `name`.
    pub fn pid(&self, name: &str) -> Option<u32> {
        let st = self.shared.lock();
        st.pids.iter().find(|p| p.0 == name).and_then(|p| p.1)
    }

    /// How often `name` has been restarted.
    pub fn respawns(&self, name: &str) -> Option<u32> {
        let st = self.shared.lock();
        st.respawns.iter().find(|p| p.0 == name).map(|p| p.1)
    }

    /// Asks the launch to stop (returns at once; [`Running::wait`] waits).
    pub fn stop(&self) {
        self.shared.lock().stop = true;
        self.shared.cv.notify_all();
    }

    /// Waits until the launch ends on its own (or by [`Running::stop`] or a signal).
    pub fn wait(mut self) -> ExitReport {
        self.join()
    }

    /// Stops the launch and reports how each process ended.
    pub fn shutdown(mut self) -> ShutdownReport {
        self.stop();
        self.join().shutdown
    }

    fn join(&mut self) -> ExitReport {
        let t = self.thread.take().expect("joined once");
        t.join().unwrap_or_else(|_| ExitReport {
            reason: ExitReason::Requested,
            success: false,
            shutdown: ShutdownReport::default(),
            respawns: Vec::new(),
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop();
            let _ = self.join();
        }
    }
}

enum State {
    /// Not started yet (waiting for its `after` processes).
    Waiting,
    /// Running.
    Up {
        unit: Unit,
        started: Instant,
        ready: bool,
        line_ready: Arc<AtomicBool>,
    },
    /// Exited, restarting at `at`.
    Backoff { at: Instant },
    /// Exited for good.
    Done,
}

struct Slot {
    spec: ProcessSpec,
    state: State,
    starts: u32,
    respawns: u32,
    ready_once: bool,
    last_pid: Option<u32>,
    last_status: Option<String>,
    /// Position in the start order (for the reverse-order shutdown).
    started_seq: Option<u64>,
}

/// The launcher's own node for topic and service readiness (made on first need).
struct Probe {
    _ctx: nerve::Context,
    node: nerve::Node,
    /// Managed nodes being brought up (and down at the end).
    lifecycle: Drives,
}

struct Supervisor {
    slots: Vec<Slot>,
    opts: StartOptions,
    shared: Arc<Shared>,
    guardian: Option<GuardianLink>,
    contain: Contain,
    run_dir: PathBuf,
    /// Processes whose main process exited but whose group, cgroup or descendants may
    /// live on (killed, waiting to empty).
    stale: Vec<Unit>,
    last_poll: Option<Instant>,
    seq: u64,
}

impl Supervisor {
    fn event(&self, e: Event) {
        if let Some(f) = &self.opts.on_event {
            f(&e);
        }
    }

    fn run(mut self) -> ExitReport {
        // made on this thread when first needed (a node is not Send)
        let mut probe = None;
        let reason = self.supervise(&mut probe);
        let success = match &reason {
            ExitReason::Requested | ExitReason::AllExited => true,
            ExitReason::ProcessExited { status, .. } => status == "exit code 0",
            _ => false,
        };
        {
            let mut st = self.shared.lock();
            st.ended = Some(reason.clone());
        }
        self.shared.cv.notify_all();
        if reason != ExitReason::AllExited {
            self.event(Event::ShuttingDown {
                reason: reason.to_string(),
            });
        }
        let shutdown = self.shutdown_all(&mut probe);
        let respawns = self
            .slots
            .iter()
            .map(|s| (s.spec.name.clone(), s.respawns))
            .collect();
        // what escaped every process (nothing, normally)
        let swept = self.contain.sweep(SWEEP_GRACE);
        self.tell_guardian();
        if let Some(mut g) = self.guardian.take() {
            if swept {
                let _ = g.tell(&["swept".to_string()]);
            }
            g.finish();
        }
        if !swept {
            self.event(Event::Warning(format!(
                "processes of the launch are left after SIGKILL ({}): the guardian retries",
                self.contain.mode()
            )));
        }
        let _ = std::fs::remove_dir_all(&self.run_dir);
        {
            let mut st = self.shared.lock();
            st.finished = true;
            for p in &mut st.pids {
                p.1 = None;
            }
        }
        self.shared.cv.notify_all();
        ExitReport {
            reason,
            success,
            shutdown,
            respawns,
        }
    }

    /// Runs until the launch must end; returns why.
    fn supervise(&mut self, probe: &mut Option<Probe>) -> ExitReason {
        loop {
            if let Some(r) = self.reap_and_respawn() {
                return r;
            }
            if let Some(r) = self.start_ready_ones() {
                return r;
            }
            if let Some(r) = self.check_readiness(probe) {
                return r;
            }
            self.reap_stale();
            self.scan(false);
            if self.slots.iter().all(|s| matches!(s.state, State::Done)) {
                return ExitReason::AllExited;
            }
            if self.opts.handle_signals && nerve::shutdown::requested() {
                return ExitReason::Requested;
            }
            let st = self.shared.lock();
            if st.stop {
                return ExitReason::Requested;
            }
            let _ = self.shared.cv.wait_timeout(st, TICK);
        }
    }

    fn publish_pids(&self) {
        let mut st = self.shared.lock();
        for (i, s) in self.slots.iter().enumerate() {
            st.pids[i].1 = match &s.state {
                State::Up { unit, .. } => Some(unit.pgid as u32),
                _ => None,
            };
            st.respawns[i].1 = s.respawns;
        }
    }

    fn reap_and_respawn(&mut self) -> Option<ExitReason> {
        let now = Instant::now();
        for i in 0..self.slots.len() {
            let State::Up { ref unit, .. } = self.slots[i].state else {
                if let State::Backoff { at } = self.slots[i].state {
                    if now >= at {
                        if let Err(r) = self.spawn(i) {
                            return Some(r);
                        }
                    }
                }
                continue;
            };
            let pid = unit.pgid;
            let mut exited = None;
            while let Some((p, status)) = sys::reap_group(pid) {
                if p == pid {
                    exited = Some(status);
                }
            }
            let Some(status) = exited else { continue };
            let text = sys::describe_status(status);
            self.event(Event::Exited {
                name: self.slots[i].spec.name.clone(),
                status: text.clone(),
            });
            // whatever the process left (its group, its cgroup, its descendants) goes too
            if let State::Up { unit, .. } = std::mem::replace(&mut self.slots[i].state, State::Done)
            {
                if self.contain.signal(&unit, libc::SIGKILL) {
                    self.stale.push(unit);
                } else {
                    self.unit_gone(unit);
                }
            }
            let slot = &mut self.slots[i];
            slot.last_status = Some(text.clone());
            let name = slot.spec.name.clone();
            match &slot.spec.respawn {
                Some(rs) if slot.respawns < rs.max => {
                    let delay = backoff(rs.delay, rs.max_delay, slot.respawns);
                    slot.respawns += 1;
                    slot.state = State::Backoff { at: now + delay };
                    let respawn = slot.respawns;
                    self.publish_pids();
                    self.event(Event::Respawning {
                        name,
                        respawn,
                        delay,
                    });
                }
                Some(_) => {
                    slot.state = State::Done;
                    let starts = slot.starts;
                    self.publish_pids();
                    // never ready: its dependents could never start
                    if slot_required(&self.slots[i]) || !self.slots[i].ready_once {
                        return Some(ExitReason::RespawnExhausted {
                            name,
                            starts,
                            status: text,
                        });
                    }
                }
                None => {
                    slot.state = State::Done;
                    self.publish_pids();
                    let clean = text == "exit code 0";
                    if slot_required(&self.slots[i]) || (!self.slots[i].ready_once && !clean) {
                        return Some(ExitReason::ProcessExited { name, status: text });
                    }
                    // a one-shot step (exit = "ignore") that succeeded counts as ready:
                    // processes `after` it start now
                    if !self.slots[i].ready_once {
                        self.slots[i].ready_once = true;
                        self.event(Event::Ready { name });
                    }
                }
            }
        }
        None
    }

    fn start_ready_ones(&mut self) -> Option<ExitReason> {
        for i in 0..self.slots.len() {
            if !matches!(self.slots[i].state, State::Waiting) {
                continue;
            }
            // ready now: a dependency that respawns is waited for again
            let deps_ready = self.slots[i]
                .spec
                .after
                .iter()
                .all(|a| self.slots.iter().any(|s| &s.spec.name == a && ready_now(s)));
            if deps_ready {
                if let Err(r) = self.spawn(i) {
                    return Some(r);
                }
            }
        }
        None
    }

    fn check_readiness(&mut self, probe: &mut Option<Probe>) -> Option<ExitReason> {
        let now = Instant::now();
        let poll = self.last_poll.is_none_or(|t| now.duration_since(t) >= POLL);
        if poll {
            self.last_poll = Some(now);
        }
        let mut newly = Vec::new();
        for i in 0..self.slots.len() {
            let State::Up {
                started,
                ready,
                ref line_ready,
                ..
            } = self.slots[i].state
            else {
                continue;
            };
            if ready {
                continue;
            }
            let cond = self.slots[i].spec.ready.clone();
            let ok = match &cond {
                Ready::Started => true,
                Ready::Delay(d) => now.duration_since(started) >= *d,
                // SYNC: Acquire pairs with the reader thread's Release store; the flag
                // carries no other data, so this only makes the match visible promptly.
                Ready::Line(_) => line_ready.load(Ordering::Acquire),
                Ready::Topic(t) if poll => match make_probe(probe, &self.opts.config) {
                    Ok(p) => nerve::introspect::topic_info(&p.node, t)
                        .is_ok_and(|info| info.publishers > 0),
                    Err(e) => {
                        self.event(Event::Warning(e));
                        false
                    }
                },
                Ready::Service(s) if poll => match make_probe(probe, &self.opts.config) {
                    Ok(p) => nerve::introspect::service_info(&p.node, s)
                        .is_ok_and(|info| info.servers > 0),
                    Err(e) => {
                        self.event(Event::Warning(e));
                        false
                    }
                },
                Ready::Lifecycle { node, goal } if poll => {
                    match make_probe(probe, &self.opts.config) {
                        Ok(p) => {
                            let spec = &self.slots[i].spec;
                            let m = Managed {
                                slot: i,
                                name: &spec.name,
                                node,
                                timeout: spec.ready_timeout,
                            };
                            let mut done = Vec::new();
                            let progress = p.lifecycle.poll(
                                &p.node,
                                &m,
                                self.slots[i].starts,
                                *goal,
                                &mut done,
                            );
                            for e in done {
                                self.event(e);
                            }
                            match progress {
                                Progress::Ready => true,
                                Progress::Pending => false,
                                Progress::Failed(r) => return Some(r),
                            }
                        }
                        Err(e) => {
                            self.event(Event::Warning(e));
                            false
                        }
                    }
                }
                Ready::Topic(_) | Ready::Service(_) | Ready::Lifecycle { .. } => false,
            };
            let spec = &self.slots[i].spec;
            // a managed node's transition in flight has its own timeout; the wait for its
            // services and between transitions counts from the last step
            let (in_call, since) = match probe.as_ref().and_then(|p| p.lifecycle.activity(i)) {
                Some((moved, in_call)) if matches!(cond, Ready::Lifecycle { .. }) => {
                    (in_call, moved.max(started))
                }
                _ => (false, started),
            };
            if ok {
                newly.push(i);
            } else if !in_call && now.duration_since(since) > spec.ready_timeout {
                // every start is waited for, a respawn as the first
                return Some(ExitReason::ReadyTimeout {
                    name: spec.name.clone(),
                    timeout: spec.ready_timeout,
                    condition: spec.ready.to_string(),
                });
            }
        }
        for i in newly {
            if let State::Up { ref mut ready, .. } = self.slots[i].state {
                *ready = true;
            }
            self.slots[i].ready_once = true;
            self.event(Event::Ready {
                name: self.slots[i].spec.name.clone(),
            });
        }
        let all = self.slots.iter().all(ready_now);
        let mut st = self.shared.lock();
        if all != st.ready {
            st.ready = all;
            st.was_ready |= all;
            drop(st);
            self.shared.cv.notify_all();
            if all {
                self.event(Event::AllReady);
            }
        }
        None
    }

    fn spawn(&mut self, i: usize) -> Result<(), ExitReason> {
        let spec = self.slots[i].spec.clone();
        let fail = |error: String| ExitReason::StartFailed {
            name: spec.name.clone(),
            program: spec.program.display().to_string(),
            error,
        };
        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("NERVE_DOMAIN", self.opts.config.domain.to_string())
            .env("NERVE_STATE_DIR", &self.opts.config.state_dir)
            .env("NERVE_NAMESPACE", &spec.namespace)
            .env("NERVE_LAUNCH_NAME", &spec.name);
        if spec.remap.is_empty() {
            cmd.env_remove("NERVE_REMAP");
        } else {
            let rules: Vec<String> = spec
                .remap
                .iter()
                .map(|(f, t)| format!("{f}:={t}"))
                .collect();
            cmd.env("NERVE_REMAP", rules.join(";"));
        }
        let params = self.param_files(&spec).map_err(fail)?;
        if params.is_empty() {
            cmd.env_remove("NERVE_PARAM_FILES");
        } else {
            let list: Vec<String> = params.iter().map(|p| p.display().to_string()).collect();
            cmd.env("NERVE_PARAM_FILES", list.join(":"));
        }
        if spec.is_container() {
            cmd.env("NERVE_COMPONENTS", components_json(&spec));
        }
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        let start = self.slots[i].starts + 1;
        let prepared = self
            .contain
            .prepare(&mut cmd, &spec.name, start)
            .map_err(fail)?;
        sys::own_group_and_parent_death(&mut cmd);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                self.contain.abandon(prepared);
                return Err(fail(e.to_string()));
            }
        };
        let pid = child.id() as i32;
        let unit = self.contain.started(prepared, pid);
        if let Some(g) = &mut self.guardian {
            if let Err(e) = g.watch(pid) {
                self.event(Event::Warning(format!("guardian: {e}")));
            }
        }
        let line_ready = Arc::new(AtomicBool::new(false));
        let regex = match &spec.ready {
            // checked when the file was loaded (same size limit)
            Ready::Line(r) => regex::RegexBuilder::new(r).size_limit(1 << 20).build().ok(),
            _ => None,
        };
        let mut pumped = Ok(());
        if let Some(out) = child.stdout.take() {
            let r = pump(
                out,
                &spec.name,
                false,
                self.opts.output,
                regex.clone(),
                line_ready.clone(),
            );
            pumped = pumped.and(r);
        }
        if let Some(err) = child.stderr.take() {
            let r = pump(
                err,
                &spec.name,
                true,
                self.opts.output,
                regex,
                line_ready.clone(),
            );
            pumped = pumped.and(r);
        }
        if let Err(e) = pumped {
            // without a reader the pipe closes and the child gets EPIPE on output
            self.event(Event::Warning(format!(
                "{}: cannot start an output reader: {e}",
                spec.name
            )));
        }
        // the child is reaped by group (reap_group), never through `Child`
        drop(child);
        self.seq += 1;
        let slot = &mut self.slots[i];
        slot.starts += 1;
        slot.last_pid = Some(pid as u32);
        slot.started_seq = Some(self.seq);
        slot.state = State::Up {
            unit,
            started: Instant::now(),
            ready: false,
            line_ready,
        };
        let start = slot.starts;
        self.publish_pids();
        self.event(Event::Started {
            name: spec.name.clone(),
            pid: pid as u32,
            start,
        });
        Ok(())
    }

    /// The parameter files of a process: its own, then one generated from `params`.
    fn param_files(&self, spec: &ProcessSpec) -> Result<Vec<PathBuf>, String> {
        let mut files = spec.param_files.clone();
        let mut doc = serde_json::Map::new();
        if !spec.params.is_empty() {
            doc.insert("/**".into(), params_json(&spec.params));
        }
        for c in &spec.components {
            if !c.params.is_empty() {
                doc.insert(
                    nerve::name::join(&c.namespace, &c.name),
                    params_json(&c.params),
                );
            }
        }
        if !doc.is_empty() {
            let path = self.run_dir.join(format!("{}.params.yaml", spec.name));
            // JSON is YAML 1.2 with every string quoted: no reader takes "no" for false
            let text = serde_json::to_string_pretty(&serde_json::Value::Object(doc))
                .map_err(|e| format!("writing parameters: {e}"))?;
            std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
            files.push(path);
        }
        Ok(files)
    }

    /// Reaps what is left of exited processes, SIGKILLs what turned up since (tracked
    /// descendants found late), and forgets what is gone.
    fn reap_stale(&mut self) {
        let mut k = 0;
        while k < self.stale.len() {
            let u = &self.stale[k];
            while sys::reap_group(u.pgid).is_some() {}
            if self.contain.alive(u) {
                self.contain.signal(u, libc::SIGKILL);
                k += 1;
            } else {
                let u = self.stale.swap_remove(k);
                self.unit_gone(u);
            }
        }
    }

    /// Forgets a process that is gone (its group, cgroup and descendants).
    fn unit_gone(&mut self, u: Unit) {
        // a cgroup that cannot be removed yet goes with the launch's at the end
        let _ = self.contain.release(&u);
        if let Some(g) = &mut self.guardian {
            let _ = g.forget(u.pgid);
        }
        self.tell_guardian();
    }

    /// Looks for descendants of the running processes (now, or if it is time).
    fn scan(&mut self, now: bool) {
        let units: Vec<&Unit> = self
            .slots
            .iter()
            .filter_map(|s| match &s.state {
                State::Up { unit, .. } => Some(unit),
                _ => None,
            })
            .chain(self.stale.iter())
            .collect();
        if now {
            self.contain.scan_now(&units);
        } else {
            self.contain.tick(&units);
        }
        drop(units);
        self.tell_guardian();
    }

    /// Passes what the containment learned on to the guardian.
    fn tell_guardian(&mut self) {
        let news = self.contain.take_news();
        if news.is_empty() {
            return;
        }
        let failed = self.guardian.as_mut().and_then(|g| g.tell(&news).err());
        if let Some(e) = failed {
            self.event(Event::Warning(format!("guardian: {e}")));
        }
    }

    /// Stops every running process: SIGINT to each (its group and its cgroup or tracked
    /// descendants) in reverse start order, then SIGTERM and SIGKILL to the ones still
    /// there when their timeouts run out.
    fn shutdown_all(&mut self, probe: &mut Option<Probe>) -> ShutdownReport {
        struct Stopping {
            slot: usize,
            unit: Unit,
            signalled: Instant,
            stage: EndedBy,
            deadline: Instant,
            status: Option<String>,
            leader_done: bool,
        }
        let mut order: Vec<usize> = (0..self.slots.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.slots[i].started_seq.unwrap_or(0)));
        // managed nodes come down in reverse start order before any signal
        if let Some(p) = probe.as_mut() {
            for &i in &order {
                let spec = &self.slots[i].spec;
                if let (State::Up { .. }, Ready::Lifecycle { node, .. }) =
                    (&self.slots[i].state, &spec.ready)
                {
                    let m = Managed {
                        slot: i,
                        name: &spec.name,
                        node,
                        timeout: spec.ready_timeout,
                    };
                    p.lifecycle.bring_down(&m, &mut |e| self.event(e));
                }
            }
        }
        // every descendant found before the first signal
        self.scan(true);
        let mut report = ShutdownReport::default();
        let mut stopping = Vec::new();
        for &i in &order {
            let slot = &mut self.slots[i];
            match std::mem::replace(&mut slot.state, State::Done) {
                State::Up { unit, .. } => {
                    self.contain.signal(&unit, libc::SIGINT);
                    let now = Instant::now();
                    stopping.push(Stopping {
                        slot: i,
                        unit,
                        signalled: now,
                        stage: EndedBy::Sigint,
                        deadline: now + slot.spec.shutdown.sigint,
                        status: None,
                        leader_done: false,
                    });
                }
                _ => report.processes.push(ProcessShutdown {
                    name: slot.spec.name.clone(),
                    pid: slot.last_pid,
                    ended_by: EndedBy::AlreadyExited,
                    took: Duration::ZERO,
                    status: slot.last_status.clone(),
                }),
            }
        }
        for u in &self.stale {
            self.contain.signal(u, libc::SIGKILL);
        }
        let mut done: Vec<(usize, ProcessShutdown)> = Vec::new();
        while !stopping.is_empty() {
            {
                let units: Vec<&Unit> = stopping
                    .iter()
                    .map(|s| &s.unit)
                    .chain(self.stale.iter())
                    .collect();
                self.contain.tick(&units);
            }
            self.tell_guardian();
            let now = Instant::now();
            let mut k = 0;
            while k < stopping.len() {
                let s = &mut stopping[k];
                let pid = s.unit.pgid;
                while let Some((p, status)) = sys::reap_group(pid) {
                    if p == pid {
                        s.status = Some(sys::describe_status(status));
                        s.leader_done = true;
                    }
                }
                if s.stage == EndedBy::Sigkill {
                    // descendants found since the last signal
                    self.contain.signal(&s.unit, libc::SIGKILL);
                }
                if s.leader_done && !self.contain.alive(&s.unit) {
                    let s = stopping.swap_remove(k);
                    let slot = &self.slots[s.slot];
                    done.push((
                        s.slot,
                        ProcessShutdown {
                            name: slot.spec.name.clone(),
                            pid: Some(pid as u32),
                            ended_by: s.stage,
                            took: now.duration_since(s.signalled),
                            status: s.status,
                        },
                    ));
                    self.unit_gone(s.unit);
                    continue;
                }
                if now >= s.deadline {
                    let spec = &self.slots[s.slot].spec;
                    let next = match s.stage {
                        EndedBy::Sigint => {
                            Some((EndedBy::Sigterm, libc::SIGTERM, spec.shutdown.sigterm))
                        }
                        EndedBy::Sigterm => Some((EndedBy::Sigkill, libc::SIGKILL, KILL_GRACE)),
                        _ => None,
                    };
                    match next {
                        Some((stage, sig, wait)) => {
                            s.stage = stage;
                            s.deadline = now + wait;
                            self.contain.signal(&s.unit, sig);
                            let name = spec.name.clone();
                            self.event(Event::Escalated {
                                name,
                                signal: if sig == libc::SIGTERM {
                                    "SIGTERM"
                                } else {
                                    "SIGKILL"
                                },
                            });
                        }
                        None => {
                            // SIGKILL did not empty it in time (uninterruptible sleep):
                            // report it and leave it to the sweep and the guardian
                            let s = stopping.swap_remove(k);
                            let name = self.slots[s.slot].spec.name.clone();
                            self.event(Event::Warning(format!(
                                "{name} (group {pid}) still has processes after SIGKILL"
                            )));
                            done.push((
                                s.slot,
                                ProcessShutdown {
                                    name,
                                    pid: Some(pid as u32),
                                    ended_by: EndedBy::Sigkill,
                                    took: now.duration_since(s.signalled),
                                    status: s.status,
                                },
                            ));
                            continue;
                        }
                    }
                }
                k += 1;
            }
            self.reap_stale();
            if !stopping.is_empty() {
                std::thread::sleep(TICK);
            }
        }
        // stale processes got SIGKILL above: wait (bounded) for them to empty
        let until = Instant::now() + KILL_GRACE;
        while !self.stale.is_empty() && Instant::now() < until {
            self.scan(false);
            self.reap_stale();
            std::thread::sleep(TICK);
        }
        // report in stop order (reverse start order)
        done.sort_by_key(|(i, _)| std::cmp::Reverse(self.slots[*i].started_seq.unwrap_or(0)));
        let mut stopped: Vec<ProcessShutdown> = done.into_iter().map(|d| d.1).collect();
        stopped.append(&mut report.processes);
        report.processes = stopped;
        self.publish_pids();
        report
    }
}

/// The launcher's readiness node, made on first use.
fn make_probe<'a>(
    probe: &'a mut Option<Probe>,
    config: &nerve::Config,
) -> Result<&'a mut Probe, String> {
    if probe.is_none() {
        let ctx = nerve::Context::new(config.clone().network(false))
            .map_err(|e| format!("readiness checks: {e}"))?;
        let node = ctx
            .node("nerve_launch")
            .create()
            .map_err(|e| format!("readiness checks: {e}"))?;
        *probe = Some(Probe {
            _ctx: ctx,
            node,
            lifecycle: Drives::default(),
        });
    }
    Ok(probe.as_mut().expect("made above"))
}

/// Whether a process is ready now: running and ready, or exited for good after it was
/// (a one-shot step that succeeded). One that respawns is not until it is ready again.
fn ready_now(s: &Slot) -> bool {
    match &s.state {
        State::Up { ready, .. } => *ready,
        State::Done => s.ready_once,
        State::Waiting | State::Backoff { .. } => false,
    }
}

/// Whether a process's final exit ends the launch.
fn slot_required(s: &Slot) -> bool {
    s.spec.on_exit == OnExit::Shutdown
}

/// Delay before restart `n` (0-based): `delay * 2^n`, at most `max`.
fn backoff(delay: Duration, max: Duration, n: u32) -> Duration {
    delay
        .checked_mul(1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX))
        .unwrap_or(max)
        .min(max)
}

fn params_json(params: &[(String, ParamValue)]) -> serde_json::Value {
    serde_json::Value::Object(
        params
            .iter()
            .map(|(k, v)| (k.clone(), v.to_json()))
            .collect(),
    )
}

/// The node list of a container, for `NERVE_COMPONENTS`.
fn components_json(spec: &ProcessSpec) -> String {
    let nodes: Vec<serde_json::Value> = spec
        .components
        .iter()
        .map(|c| {
            serde_json::json!({
                "component": c.component,
                "name": c.name,
                "namespace": c.namespace,
                "remap": c.remap,
                "params": params_json(&c.params),
            })
        })
        .collect();
    serde_json::Value::Array(nodes).to_string()
}

fn make_run_dir() -> Result<PathBuf, LaunchError> {
    use std::os::unix::fs::DirBuilderExt;
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "nerve-launch-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|source| LaunchError::Io {
            what: format!("creating {}", dir.display()),
            source,
        })?;
    Ok(dir)
}

/// Reads a child's output line by line (lines cut at [`MAX_LINE`]), passes it on with the
/// process name in front and marks readiness when a line matches.
fn pump(
    src: impl Read + Send + 'static,
    name: &str,
    stderr: bool,
    output: Output,
    regex: Option<regex::Regex>,
    flag: Arc<AtomicBool>,
) -> std::io::Result<()> {
    let prefix = format!("[{name}] ");
    std::thread::Builder::new()
        .name(format!("out-{name}"))
        .spawn(move || {
            read_lines(BufReader::new(src), |line, cut| {
                let text = String::from_utf8_lossy(line);
                if output == Output::Prefixed {
                    let mark = if cut { " [line cut]" } else { "" };
                    // one write per line, so lines of different processes do not mix
                    let msg = format!("{prefix}{text}{mark}\n");
                    let _ = if stderr {
                        std::io::stderr().lock().write_all(msg.as_bytes())
                    } else {
                        std::io::stdout().lock().write_all(msg.as_bytes())
                    };
                }
                if let Some(r) = &regex {
                    if r.is_match(&text) {
                        // SYNC: Release, after the line is written out: a dependent started
                        // because of this flag prints after the matching line.
                        flag.store(true, Ordering::Release);
                    }
                }
            });
        })
        .map(drop)
}

/// Calls `f` with each line (without its newline) and whether it was cut.
fn read_lines(mut r: impl BufRead, mut f: impl FnMut(&[u8], bool)) {
    let mut line = Vec::with_capacity(256);
    let mut cut = false;
    loop {
        let buf = match r.fill_buf() {
            Ok([]) => break,
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let nl = buf.iter().position(|&b| b == b'\n');
        let chunk = &buf[..nl.unwrap_or(buf.len())];
        let room = MAX_LINE.saturating_sub(line.len());
        if chunk.len() > room {
            cut = true;
            line.extend_from_slice(&chunk[..room]);
        } else {
            line.extend_from_slice(chunk);
        }
        let used = nl.map_or(buf.len(), |i| i + 1);
        r.consume(used);
        if nl.is_some() {
            f(&line, cut);
            line.clear();
            cut = false;
        }
    }
    if !line.is_empty() {
        f(&line, cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let d = Duration::from_millis(100);
        let m = Duration::from_secs(1);
        assert_eq!(backoff(d, m, 0), d);
        assert_eq!(backoff(d, m, 1), Duration::from_millis(200));
        assert_eq!(backoff(d, m, 3), Duration::from_millis(800));
        assert_eq!(backoff(d, m, 4), m);
        assert_eq!(backoff(d, m, 1000), m);
    }

    #[test]
    fn long_lines_are_cut() {
        let text = format!("a\n{}\nb", "x".repeat(MAX_LINE + 10));
        let mut got = Vec::new();
        read_lines(text.as_bytes(), |l, cut| got.push((l.len(), cut)));
        assert_eq!(got, vec![(1, false), (MAX_LINE, true), (1, false)]);
    }
}
