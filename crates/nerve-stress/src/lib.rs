//! Reliability scenarios for Nerve: what it survives, as figures.
//!
//! Each scenario drives real processes (this binary started again in a hidden role) in a
//! domain of its own, injects faults (SIGKILL, SIGSTOP, churn, overload), checks that
//! nothing was lost or torn and that nothing was left behind (shared memory, the state
//! directory, file descriptors), and returns an [`Outcome`]: what was held, how many
//! faults and inputs, what was lost, what was left over, the scenario's own figures, and
//! whether it passed. `nerve-stress <scenario>` prints it as a table or JSON; the tests
//! run every scenario at a small scale, and `docs/reliability.md` records full-scale runs.
//!
//! Scenarios (the numbers are issue 18's):
//! - `publisher-kill` (T1): a publisher SIGKILLed mid-loan and mid-write, restarted
//!   under the same name, round after round.
//! - `subscriber-kill` (T2): subscribers SIGKILLed while they hold samples of a
//!   drop-oldest and a back-pressure topic.
//! - `restart-all` (T3): publisher, subscriber, server and client all SIGKILLed and
//!   started again, round after round.
//! - `users` (T4): a publisher killed as one Unix user and restarted as another; no
//!   file writable by others; samples mapped read-only by subscribers.
//! - `stopped` (T5): a subscriber, a server and a client stopped (SIGSTOP) while others
//!   go on.
//! - `discovery` (T12): many nodes in many processes started at once and restarted
//!   after SIGKILL, round after round; discovery must converge within a bound.
//! - `mixed-qos` (T11): a saturated back-pressure topic beside a drop-oldest ping-pong in
//!   the same processes.
//! - `soak` (T14): a mixed system under churn for a time; RSS, descriptors, shared memory
//!   and P99 latency sampled, their slopes reported.

pub mod domain;
mod roles;
pub mod scenarios;

use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

pub use roles::run_role;

/// Why a scenario could not run (its verdict is in [`Outcome`], not here).
#[derive(Debug, thiserror::Error)]
pub enum StressError {
    /// A process or the domain could not be set up.
    #[error("{scenario}: setup failed: {reason}")]
    Setup {
        /// Scenario name.
        scenario: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// Bad options.
    #[error("{0}")]
    Options(String),
}

/// The scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// T1: SIGKILL a publisher mid-loan, restart it under the same name.
    PublisherKill,
    /// T2: SIGKILL subscribers holding samples.
    SubscriberKill,
    /// T3: SIGKILL every process of a small system and restart it.
    RestartAll,
    /// T4: two Unix users on one domain.
    Users,
    /// T5: stop (SIGSTOP) a subscriber, a server and a client.
    Stopped,
    /// T11: a saturated back-pressure topic beside a drop-oldest one.
    MixedQos,
    /// T12: many nodes in many processes started at once and restarted.
    Discovery,
    /// T14: a mixed system under churn for a time.
    Soak,
}

impl Scenario {
    /// Every scenario.
    pub const ALL: [Scenario; 8] = [
        Scenario::PublisherKill,
        Scenario::SubscriberKill,
        Scenario::RestartAll,
        Scenario::Users,
        Scenario::Stopped,
        Scenario::MixedQos,
        Scenario::Discovery,
        Scenario::Soak,
    ];

    /// Name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::PublisherKill => "publisher-kill",
            Scenario::SubscriberKill => "subscriber-kill",
            Scenario::RestartAll => "restart-all",
            Scenario::Users => "users",
            Scenario::Stopped => "stopped",
            Scenario::MixedQos => "mixed-qos",
            Scenario::Discovery => "discovery",
            Scenario::Soak => "soak",
        }
    }

    /// Parses [`Scenario::name`].
    pub fn parse(s: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|x| x.name() == s)
    }
}

/// How big a run is.
#[derive(Clone, Debug)]
pub struct Options {
    /// Rounds of the scenarios that go in rounds (kills, restarts).
    pub rounds: u64,
    /// Seconds of the scenarios that run for a time (soak, mixed-qos).
    pub seconds: f64,
    /// Processes of the scenarios that start many (discovery: four nodes each).
    pub processes: usize,
    /// Domain id the scenario uses (its own: nothing else should run in it).
    pub domain: u32,
    /// State directory of the domain.
    pub state_dir: PathBuf,
    /// Program and arguments that start a role: `<program> <args…> <role> <json>` must
    /// call [`run_role`].
    pub role_command: (PathBuf, Vec<String>),
    /// Show progress bars.
    pub progress: bool,
}

impl Options {
    /// Checks the options.
    pub fn validate(&self) -> Result<(), StressError> {
        if self.rounds == 0 {
            return Err(StressError::Options("--rounds must be at least 1".into()));
        }
        if !(self.seconds.is_finite() && self.seconds > 0.0) {
            return Err(StressError::Options(
                "--seconds must be a positive number".into(),
            ));
        }
        if self.processes < 2 {
            return Err(StressError::Options(
                "--processes must be at least 2".into(),
            ));
        }
        Ok(())
    }
}

/// What a scenario found.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// Scenario name.
    pub scenario: &'static str,
    /// What it held true, in a sentence.
    pub held: String,
    /// Faults injected (kills, stops, restarts).
    pub faults: u64,
    /// Inputs checked (samples, calls).
    pub inputs: u64,
    /// Inputs lost or broken where nothing may be (must be 0).
    pub lost: u64,
    /// What was left behind at the end: files of the domain, descriptors (must be empty).
    pub leftovers: Vec<String>,
    /// The scenario's figures, by name (units in the names).
    pub figures: BTreeMap<String, f64>,
    /// Everything that did not hold, one line each (empty when it passed).
    pub failures: Vec<String>,
    /// Whether everything held.
    pub passed: bool,
}

impl Outcome {
    fn new(scenario: Scenario, held: &str) -> Outcome {
        Outcome {
            scenario: scenario.name(),
            held: held.into(),
            faults: 0,
            inputs: 0,
            lost: 0,
            leftovers: Vec::new(),
            figures: BTreeMap::new(),
            failures: Vec::new(),
            passed: false,
        }
    }

    /// Records a failure unless `ok`.
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(what());
        }
    }

    fn figure(&mut self, name: &str, value: f64) {
        self.figures.insert(name.into(), value);
    }

    /// Settles the verdict: passed when nothing was lost, left over or failed.
    fn finish(mut self) -> Outcome {
        if self.lost > 0 {
            self.failures
                .push(format!("{} inputs lost or broken", self.lost));
        }
        if !self.leftovers.is_empty() {
            self.failures
                .push(format!("left behind: {}", self.leftovers.join(", ")));
        }
        self.passed = self.failures.is_empty();
        self
    }

    /// A plain-text rendering: one line per field, then the figures.
    pub fn text(&self) -> String {
        let mut s = format!(
            "{}: {}\n  held: {}\n  faults {}, inputs {}, lost {}\n",
            self.scenario,
            if self.passed { "passed" } else { "FAILED" },
            self.held,
            self.faults,
            self.inputs,
            self.lost
        );
        for (k, v) in &self.figures {
            s.push_str(&format!("  {k}: {v:.3}\n"));
        }
        for l in &self.leftovers {
            s.push_str(&format!("  left behind: {l}\n"));
        }
        for f in &self.failures {
            s.push_str(&format!("  failed: {f}\n"));
        }
        s
    }
}

/// Runs one scenario.
pub fn run(scenario: Scenario, opts: &Options) -> Result<Outcome, StressError> {
    opts.validate()?;
    match scenario {
        Scenario::PublisherKill => scenarios::publisher_kill::run(opts),
        Scenario::SubscriberKill => scenarios::subscriber_kill::run(opts),
        Scenario::RestartAll => scenarios::restart_all::run(opts),
        Scenario::Users => scenarios::users::run(opts),
        Scenario::Stopped => scenarios::stopped::run(opts),
        Scenario::MixedQos => scenarios::mixed_qos::run(opts),
        Scenario::Discovery => scenarios::discovery::run(opts),
        Scenario::Soak => scenarios::soak::run(opts),
    }
}
