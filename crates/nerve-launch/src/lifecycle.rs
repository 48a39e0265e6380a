//! Managed nodes in a launch (`ready = { lifecycle = "active" }`): the launcher drives
//! each through `configure` (and `activate`) by its `change_state` service, without
//! blocking the supervisor (calls in flight are polled every tick), and on shutdown
//! brings them down in reverse start order (deactivate, cleanup, shutdown) before any
//! signal. A transition not answered within the process's `ready_timeout` is reported
//! with the node and the transition.

use crate::plan::LifecycleGoal;
use crate::supervisor::{Event, ExitReason};
use nerve_lifecycle::{ChangeCall, ClientError, LifecycleClient, State};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// How a managed node's bring-up stands.
pub(crate) enum Progress {
    /// Still going (see [`Drives::activity`]).
    Pending,
    /// The goal state is reached.
    Ready,
    /// It failed or is stuck: the launch ends.
    Failed(ExitReason),
}

/// One start of one managed process being brought up.
struct Drive {
    start: u32,
    /// When a transition was last sent or answered.
    moved: Instant,
    /// Transitions done.
    step: usize,
    call: Option<(ChangeCall, Instant)>,
}

/// The launcher's clients of managed nodes and their bring-ups (on the supervisor
/// thread: clients are not `Send`).
#[derive(Default)]
pub(crate) struct Drives {
    clients: HashMap<String, LifecycleClient>,
    drives: HashMap<usize, Drive>,
    /// Processes whose node stuck in a transition: not asked again at shutdown.
    stuck: HashSet<usize>,
}

/// What a process is, for the messages.
pub(crate) struct Managed<'a> {
    /// The process's index.
    pub slot: usize,
    /// The process's name.
    pub name: &'a str,
    /// The node's full name.
    pub node: &'a str,
    /// How long a transition may take.
    pub timeout: Duration,
}

fn state_after(label: &str) -> State {
    match label {
        "configure" | "deactivate" => State::Inactive,
        "activate" => State::Active,
        "cleanup" => State::Unconfigured,
        _ => State::Finalized,
    }
}

impl Drives {
    fn client(
        &mut self,
        node: &nerve::Node,
        m: &Managed<'_>,
    ) -> Result<&LifecycleClient, ClientError> {
        if !self.clients.contains_key(m.node) {
            let c = LifecycleClient::create(node, m.node)?.timeout(m.timeout);
            self.clients.insert(m.node.to_string(), c);
        }
        Ok(&self.clients[m.node])
    }

    /// Advances the bring-up of start `start` of `m` as far as it goes now; transitions
    /// done are pushed to `events`.
    pub(crate) fn poll(
        &mut self,
        node: &nerve::Node,
        m: &Managed<'_>,
        start: u32,
        goal: LifecycleGoal,
        events: &mut Vec<Event>,
    ) -> Progress {
        let failed = |transition: &str, reason: String| {
            Progress::Failed(ExitReason::LifecycleFailed {
                name: m.name.to_string(),
                node: m.node.to_string(),
                transition: transition.to_string(),
                reason,
            })
        };
        let client = match self.client(node, m) {
            Ok(_) => &self.clients[m.node],
            Err(e) => return failed(goal.transitions()[0], e.to_string()),
        };
        let fresh = || Drive {
            start,
            moved: Instant::now(),
            step: 0,
            call: None,
        };
        let d = self.drives.entry(m.slot).or_insert_with(fresh);
        if d.start != start {
            // a respawned process starts unconfigured again
            *d = fresh();
        }
        let labels = goal.transitions();
        loop {
            let Some((call, since)) = &d.call else {
                let Some(&label) = labels.get(d.step) else {
                    return Progress::Ready;
                };
                if !client.is_served() {
                    return Progress::Pending;
                }
                match client.start_change(label) {
                    Ok(c) => {
                        d.moved = Instant::now();
                        d.call = Some((c, d.moved));
                    }
                    Err(e) => return failed(label, e.to_string()),
                }
                continue;
            };
            let label = call.label().to_string();
            match call.poll() {
                Ok(None) if since.elapsed() > m.timeout => {
                    self.stuck.insert(m.slot);
                    return Progress::Failed(ExitReason::LifecycleStuck {
                        name: m.name.to_string(),
                        node: m.node.to_string(),
                        transition: label,
                        timeout: m.timeout,
                    });
                }
                Ok(None) => return Progress::Pending,
                Ok(Some(true)) => {
                    events.push(Event::Lifecycle {
                        name: m.name.to_string(),
                        node: m.node.to_string(),
                        transition: label.clone(),
                        state: state_after(&label).label().to_string(),
                    });
                    d.step += 1;
                    d.call = None;
                    d.moved = Instant::now();
                }
                Ok(Some(false)) => {
                    return failed(&label, "its callback failed".into());
                }
                Err(e) => return failed(&label, e.to_string()),
            }
        }
    }

    /// When the bring-up of process `slot` last moved (a transition sent or answered),
    /// and whether a transition is in flight.
    pub(crate) fn activity(&self, slot: usize) -> Option<(Instant, bool)> {
        self.drives.get(&slot).map(|d| (d.moved, d.call.is_some()))
    }

    /// Brings `m` down from whatever state it is in (deactivate, cleanup, shutdown),
    /// waiting for each answer up to its timeout; what happens goes to `emit`.
    pub(crate) fn bring_down(&mut self, m: &Managed<'_>, emit: &mut dyn FnMut(Event)) {
        if self.stuck.contains(&m.slot) {
            return;
        }
        let Some(client) = self.clients.get(m.node) else {
            return;
        };
        if !client.is_served() {
            return;
        }
        let warn = |what: String| Event::Warning(format!("{}: {what}", m.name));
        let state = match client.get_state() {
            Ok(s) => s,
            Err(e) => {
                emit(warn(format!("not brought down: {e}")));
                return;
            }
        };
        let steps: &[&str] = match state {
            State::Active => &["deactivate", "cleanup", "shutdown"],
            State::Inactive => &["cleanup", "shutdown"],
            State::Unconfigured => &["shutdown"],
            _ => &[],
        };
        for &label in steps {
            match client.change_state(label) {
                Ok(state) => emit(Event::Lifecycle {
                    name: m.name.to_string(),
                    node: m.node.to_string(),
                    transition: label.to_string(),
                    state: state.label().to_string(),
                }),
                Err(ClientError::Timeout { timeout, .. }) => {
                    emit(warn(format!(
                        "managed node {} stuck in {label} (not answered within {timeout:?})",
                        m.node
                    )));
                    return;
                }
                Err(e) => {
                    emit(warn(format!("not brought down: {e}")));
                    return;
                }
            }
        }
    }
}
