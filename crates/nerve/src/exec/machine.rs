//! State machines: states, transitions with triggers, guards and actions, on-enter and
//! on-exit hooks, per-state timeouts and pass-through states.
//!
//! A [`MachineSpec`] is plain data, written in code or read from a TOML or YAML file; a
//! [`Machine`] adds the hooks (closures registered by name) and runs it. Run on an
//! [`crate::Executor`] ([`crate::Executor::machine`]), every transition is published on
//! `/<machine>/event` as a [`TransitionEvent`] and the spec (as TOML) on `/<machine>/spec`, so other
//! processes (and `nerve sm show`) can watch it.
//!
//! ```toml
//! name = "cycle"
//! initial = "active"
//! [[states]]
//! name = "active"
//! timeout_ms = 10          # fires the trigger "timeout" 10 ms after entry
//! [[states]]
//! name = "inactive"
//! pass_through = "resume"  # fired as soon as the state is entered
//! [[transitions]]
//! trigger = "timeout"
//! from = "active"          # a state, a list of states, or "*"
//! to = "inactive"
//! [[transitions]]
//! trigger = "resume"
//! from = "inactive"
//! to = "active"
//! guard = "armed"          # closures registered with Machine::guard / Machine::action
//! ```

use crate::context::Node;
use crate::error::{ExecError, MachineError};
use crate::exec::executor::{Budget, Control, EntityStats, Now, RingWatch, Work};
use crate::message::Serde;
use crate::sys::clock::{mono_ns, wall_ns};
use crate::topic::publisher::Publisher;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Longest machine, state or trigger name in bytes (names travel in fixed fields).
pub const NAME_MAX: usize = 31;
/// Longest chain of pass-through states entered by one trigger.
pub const MAX_PASS_THROUGH: usize = 32;
/// The trigger recorded for entering the initial state.
pub const START_TRIGGER: &str = "start";

/// A state of a [`MachineSpec`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSpec {
    /// Name (letters, digits, `_`; at most [`NAME_MAX`] bytes).
    pub name: String,
    /// Fire `timeout_trigger` this many milliseconds after entering the state.
    #[serde(default)]
    pub timeout_ms: Option<f64>,
    /// The trigger a timeout fires (default `timeout`).
    #[serde(default = "default_timeout_trigger")]
    pub timeout_trigger: String,
    /// A pass-through state fires this trigger as soon as it is entered.
    #[serde(default)]
    pub pass_through: Option<String>,
}

fn default_timeout_trigger() -> String {
    "timeout".into()
}

impl StateSpec {
    /// A plain state.
    pub fn new(name: &str) -> StateSpec {
        StateSpec {
            name: name.into(),
            timeout_ms: None,
            timeout_trigger: default_timeout_trigger(),
            pass_through: None,
        }
    }

    /// Fires `timeout` after `after` in the state.
    pub fn timeout(mut self, after: Duration) -> StateSpec {
        self.timeout_ms = Some(after.as_secs_f64() * 1e3);
        self
    }

    /// Makes it a pass-through state firing `trigger` on entry.
    pub fn pass_through(mut self, trigger: &str) -> StateSpec {
        self.pass_through = Some(trigger.into());
        self
    }
}

/// A transition of a [`MachineSpec`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransitionSpec {
    /// The trigger that takes it.
    pub trigger: String,
    /// Source states (`*` for any).
    #[serde(deserialize_with = "one_or_many")]
    pub from: Vec<String>,
    /// Destination state.
    pub to: String,
    /// Name of a guard registered with [`Machine::guard`]: the transition is taken only if
    /// it returns true.
    #[serde(default)]
    pub guard: Option<String>,
    /// Name of an action registered with [`Machine::action`], run between the source's
    /// on-exit and the destination's on-enter hooks.
    #[serde(default)]
    pub action: Option<String>,
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

impl TransitionSpec {
    /// `trigger` takes the machine from any of `from` (or `*`) to `to`.
    pub fn new(trigger: &str, from: &[&str], to: &str) -> TransitionSpec {
        TransitionSpec {
            trigger: trigger.into(),
            from: from.iter().map(|s| s.to_string()).collect(),
            to: to.into(),
            guard: None,
            action: None,
        }
    }

    /// Adds a guard by name.
    pub fn guard(mut self, name: &str) -> TransitionSpec {
        self.guard = Some(name.into());
        self
    }

    /// Adds an action by name.
    pub fn action(mut self, name: &str) -> TransitionSpec {
        self.action = Some(name.into());
        self
    }
}

/// A state machine's definition: plain data (see the module docs for the file format).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineSpec {
    /// Machine name: its topics are `/<name>/event` and `/<name>/spec`.
    pub name: String,
    /// The state entered at start.
    pub initial: String,
    /// Its states.
    pub states: Vec<StateSpec>,
    /// Its transitions, tried in order (the first whose guard passes is taken).
    #[serde(default)]
    pub transitions: Vec<TransitionSpec>,
}

/// A spec as published on `/<machine>/spec`: its TOML text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpecText {
    /// The spec in TOML (read it with [`MachineSpec::from_toml`]).
    pub toml: String,
}

impl crate::message::SerdeMessage for SpecText {
    const TYPE_NAME: &'static str = "nerve/MachineSpecText";
}

impl MachineSpec {
    /// An empty machine starting in `initial`.
    pub fn new(name: &str, initial: &str) -> MachineSpec {
        MachineSpec {
            name: name.into(),
            initial: initial.into(),
            states: Vec::new(),
            transitions: Vec::new(),
        }
    }

    /// Adds a state.
    pub fn state(mut self, s: StateSpec) -> MachineSpec {
        self.states.push(s);
        self
    }

    /// Adds a transition.
    pub fn transition(mut self, t: TransitionSpec) -> MachineSpec {
        self.transitions.push(t);
        self
    }

    /// Reads a spec from a `.toml`, `.yaml` or `.yml` file.
    pub fn from_file(path: &Path) -> Result<MachineSpec, MachineError> {
        let err = |reason: String| MachineError::File {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => MachineSpec::from_toml(&text),
            Some("yaml" | "yml") => MachineSpec::from_yaml(&text),
            _ => Err(err("the file name must end in .toml, .yaml or .yml".into())),
        }
        .map_err(|e| match e {
            MachineError::Parse { reason } => err(reason),
            e => e,
        })
    }

    /// Parses TOML.
    pub fn from_toml(text: &str) -> Result<MachineSpec, MachineError> {
        toml::from_str(text).map_err(|e| MachineError::Parse {
            reason: e.to_string(),
        })
    }

    /// Writes the spec as TOML.
    pub fn to_toml(&self) -> Result<String, MachineError> {
        toml::to_string(self).map_err(|e| MachineError::Parse {
            reason: e.to_string(),
        })
    }

    /// Parses YAML.
    pub fn from_yaml(text: &str) -> Result<MachineSpec, MachineError> {
        serde_yaml_ng::from_str(text).map_err(|e| MachineError::Parse {
            reason: e.to_string(),
        })
    }

    /// Checks names, references and timeouts.
    pub fn validate(&self) -> Result<(), MachineError> {
        let invalid = |reason: String| MachineError::Invalid {
            machine: self.name.clone(),
            reason,
        };
        check_name("machine", &self.name).map_err(invalid)?;
        let mut names = BTreeSet::new();
        for s in &self.states {
            check_name("state", &s.name).map_err(invalid)?;
            if !names.insert(s.name.as_str()) {
                return Err(invalid(format!("state {:?} is defined twice", s.name)));
            }
            check_name("trigger", &s.timeout_trigger).map_err(invalid)?;
            if let Some(ms) = s.timeout_ms {
                if !(ms.is_finite() && ms > 0.0 && ms < 1e9) {
                    return Err(invalid(format!(
                        "state {:?}: timeout_ms must be positive and finite, not {ms}",
                        s.name
                    )));
                }
            }
            if let Some(t) = &s.pass_through {
                check_name("trigger", t).map_err(invalid)?;
                if s.timeout_ms.is_some() {
                    return Err(invalid(format!(
                        "state {:?} cannot be both pass-through and timed",
                        s.name
                    )));
                }
            }
        }
        let known = |s: &str| names.contains(s);
        if !known(&self.initial) {
            return Err(invalid(format!(
                "initial state {:?} is not defined",
                self.initial
            )));
        }
        for t in &self.transitions {
            check_name("trigger", &t.trigger).map_err(invalid)?;
            if t.from.is_empty() {
                return Err(invalid(format!("transition {:?} has no source", t.trigger)));
            }
            for f in &t.from {
                if f != "*" && !known(f) {
                    return Err(invalid(format!(
                        "transition {:?}: source state {f:?} is not defined",
                        t.trigger
                    )));
                }
            }
            if !known(&t.to) {
                return Err(invalid(format!(
                    "transition {:?}: destination state {:?} is not defined",
                    t.trigger, t.to
                )));
            }
        }
        for s in &self.states {
            let pending = s
                .pass_through
                .as_ref()
                .or(s.timeout_ms.map(|_| &s.timeout_trigger));
            if let Some(trigger) = pending {
                let leaves = self.transitions.iter().any(|t| {
                    &t.trigger == trigger && t.from.iter().any(|f| f == "*" || f == &s.name)
                });
                if !leaves {
                    return Err(invalid(format!(
                        "state {:?} fires {trigger:?} but no transition takes it from there",
                        s.name
                    )));
                }
            }
        }
        Ok(())
    }
}

fn check_name(what: &str, name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = name.len() <= NAME_MAX
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} name {name:?} must start with a letter or '_', hold only letters, digits \
             and '_', and be at most {NAME_MAX} bytes"
        ))
    }
}

/// A transition as hooks see it.
#[derive(Clone, Copy, Debug)]
pub struct Transition<'a> {
    /// Source state ("" when entering the initial state).
    pub from: &'a str,
    /// Destination state.
    pub to: &'a str,
    /// The trigger.
    pub trigger: &'a str,
    /// When it was handled (monotonic ns, or simulation time): the clock's time, also
    /// for a timeout, which the machine handles at or after its due time (the next
    /// state's timeout counts from the due time, see [`Machine::deadline`]).
    pub stamp_ns: u64,
}

/// A transition as published on `/<machine>/event`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, nerve_derive::Message)]
#[repr(C)]
#[message(name = "nerve/TransitionEvent")]
pub struct TransitionEvent {
    /// Transitions of this machine so far, this one included (1 for entering the initial
    /// state).
    pub seq: u64,
    /// When it was handled (monotonic ns, or simulation time). For a timeout this is
    /// when the machine handled it, not its due time, so a watcher sees the real wake-up
    /// (the next timeout still counts from the due time, see [`Machine::deadline`]).
    pub stamp_ns: u64,
    /// The same instant on the wall clock (ns since the Unix epoch).
    pub wall_ns: i64,
    /// Source state, NUL-padded ("" for the initial entry).
    pub from: [u8; 32],
    /// Destination state, NUL-padded.
    pub to: [u8; 32],
    /// Trigger, NUL-padded.
    pub trigger: [u8; 32],
}

impl TransitionEvent {
    /// An event stamped now (names longer than [`NAME_MAX`] are cut).
    pub fn new(seq: u64, from: &str, to: &str, trigger: &str) -> TransitionEvent {
        TransitionEvent {
            seq,
            stamp_ns: mono_ns(),
            wall_ns: wall_ns(),
            from: fixed(from),
            to: fixed(to),
            trigger: fixed(trigger),
        }
    }

    fn field(b: &[u8; 32]) -> &str {
        let n = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        std::str::from_utf8(&b[..n]).unwrap_or("?")
    }
    /// Source state.
    pub fn from_state(&self) -> &str {
        Self::field(&self.from)
    }
    /// Destination state.
    pub fn to_state(&self) -> &str {
        Self::field(&self.to)
    }
    /// Trigger.
    pub fn trigger_name(&self) -> &str {
        Self::field(&self.trigger)
    }
}

fn fixed(s: &str) -> [u8; 32] {
    let mut b = [0u8; 32];
    let n = s.len().min(NAME_MAX);
    b[..n].copy_from_slice(&s.as_bytes()[..n]);
    b
}

type Hook = Box<dyn FnMut(&Transition<'_>)>;
type Guard = Box<dyn FnMut(&Transition<'_>) -> bool>;

/// A runnable state machine: a validated spec plus its hooks.
pub struct Machine {
    spec: MachineSpec,
    index: HashMap<String, usize>,
    triggers: BTreeSet<String>,
    timeouts: Vec<Option<u64>>,
    on_enter: Vec<Option<Hook>>,
    on_exit: Vec<Option<Hook>>,
    guards: HashMap<String, Guard>,
    actions: HashMap<String, Hook>,
    current: Option<usize>,
    /// When the current state was entered, as its timeout counts it: the due time of the
    /// timeout that led here, or the time of any other trigger (see [`Machine::deadline`]).
    entered_ns: u64,
    seq: u64,
    ignored: u64,
    /// The clock timeouts count on (its timer time: monotonic, or simulation time).
    clock: crate::time::Clock,
}

impl Machine {
    /// Makes timeouts count on `clock` (default: the process clock, see [`crate::time`];
    /// an executor sets its node's). Call before [`Machine::start`].
    pub fn use_clock(&mut self, clock: crate::time::Clock) -> &mut Self {
        self.clock = clock;
        self
    }

    /// Moves the current state's entry by a jump of the clock (from `from` to `to`), so
    /// its timeout keeps the time it had left.
    pub(crate) fn rebase(&mut self, from: u64, to: u64) {
        self.entered_ns = to.saturating_sub(from.saturating_sub(self.entered_ns));
    }

    /// A simulation clock started at `at`: a state entered while it read 0 counts its
    /// timeout from there.
    pub(crate) fn start_clock(&mut self, at: u64) {
        if self.current.is_some() && self.entered_ns == 0 {
            self.entered_ns = at;
        }
    }

    /// Validates `spec`; hooks are added next, then [`Machine::start`].
    pub fn new(spec: MachineSpec) -> Result<Machine, MachineError> {
        spec.validate()?;
        let index = spec
            .states
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.clone(), i))
            .collect();
        let mut triggers: BTreeSet<String> =
            spec.transitions.iter().map(|t| t.trigger.clone()).collect();
        triggers.insert(START_TRIGGER.into());
        let timeouts = spec
            .states
            .iter()
            .map(|s| s.timeout_ms.map(|ms| (ms * 1e6).round() as u64))
            .collect();
        let n = spec.states.len();
        Ok(Machine {
            spec,
            index,
            triggers,
            timeouts,
            on_enter: (0..n).map(|_| None).collect(),
            on_exit: (0..n).map(|_| None).collect(),
            guards: HashMap::new(),
            actions: HashMap::new(),
            current: None,
            entered_ns: 0,
            seq: 0,
            ignored: 0,
            clock: crate::time::clock(),
        })
    }

    fn state_index(&self, state: &str) -> Result<usize, MachineError> {
        self.index
            .get(state)
            .copied()
            .ok_or_else(|| MachineError::UnknownState {
                machine: self.spec.name.clone(),
                state: state.into(),
            })
    }

    /// Runs `hook` whenever `state` is entered.
    pub fn on_enter<F>(&mut self, state: &str, hook: F) -> Result<&mut Self, MachineError>
    where
        F: FnMut(&Transition<'_>) + 'static,
    {
        let i = self.state_index(state)?;
        self.on_enter[i] = Some(Box::new(hook));
        Ok(self)
    }

    /// Runs `hook` whenever `state` is left.
    pub fn on_exit<F>(&mut self, state: &str, hook: F) -> Result<&mut Self, MachineError>
    where
        F: FnMut(&Transition<'_>) + 'static,
    {
        let i = self.state_index(state)?;
        self.on_exit[i] = Some(Box::new(hook));
        Ok(self)
    }

    /// Registers the guard that transitions name `name`.
    pub fn guard<F>(&mut self, name: &str, guard: F) -> &mut Self
    where
        F: FnMut(&Transition<'_>) -> bool + 'static,
    {
        self.guards.insert(name.into(), Box::new(guard));
        self
    }

    /// Registers the action that transitions name `name`.
    pub fn action<F>(&mut self, name: &str, action: F) -> &mut Self
    where
        F: FnMut(&Transition<'_>) + 'static,
    {
        self.actions.insert(name.into(), Box::new(action));
        self
    }

    /// The spec.
    pub fn spec(&self) -> &MachineSpec {
        &self.spec
    }

    /// The machine's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The current state (`None` before [`Machine::start`]).
    pub fn current(&self) -> Option<&str> {
        self.current.map(|i| self.spec.states[i].name.as_str())
    }

    /// Triggers that took no transition (no transition from the current state, or every
    /// guard said no).
    pub fn ignored(&self) -> u64 {
        self.ignored
    }

    /// Whether `trigger` is named by some transition.
    pub fn knows_trigger(&self, trigger: &str) -> bool {
        self.triggers.contains(trigger)
    }

    /// When the current state's timeout fires (monotonic ns, or simulation time), if it
    /// has one: its `timeout_ms` after the state was entered.
    ///
    /// A state entered by a timeout (directly, or through pass-through states after it)
    /// counts from that timeout's *due time*, not from when the machine got round to
    /// handling it: a cycle of one-shot timeouts keeps its grid (`entry + k·timeout`)
    /// instead of adding each wake-up's lateness to the next cycle. Any other trigger
    /// (fired through [`Machine::fire`] or a [`MachineHandle`]) counts from the clock's
    /// time when it is handled. One guard: if counting from the due time would put the
    /// new state's deadline more than one whole timeout in the past (the machine was not
    /// run for a while, or the clock jumped forward), it counts from now instead, so a
    /// stall is never followed by a burst of back-to-back timeouts. Late by less than
    /// that, the next timeout fires at once and the grid is kept.
    pub fn deadline(&self) -> Option<u64> {
        let i = self.current?;
        self.timeouts[i].map(|t| self.entered_ns.saturating_add(t))
    }

    /// When the current state was entered, as its timeout counts it (see
    /// [`Machine::deadline`]); `None` before [`Machine::start`].
    pub fn entered_ns(&self) -> Option<u64> {
        self.current.map(|_| self.entered_ns)
    }

    /// Enters the initial state (checking first that every named guard and action is
    /// registered); returns the transitions made (the entry, then any pass-through).
    pub fn start(&mut self) -> Result<Vec<TransitionEvent>, MachineError> {
        for t in &self.spec.transitions {
            for (kind, name, known) in [
                (
                    "guard",
                    &t.guard,
                    t.guard.as_ref().map(|g| self.guards.contains_key(g)),
                ),
                (
                    "action",
                    &t.action,
                    t.action.as_ref().map(|a| self.actions.contains_key(a)),
                ),
            ] {
                if known == Some(false) {
                    return Err(MachineError::UnknownHook {
                        machine: self.spec.name.clone(),
                        kind,
                        name: name.clone().unwrap_or_default(),
                    });
                }
            }
        }
        if self.current.is_some() {
            return Ok(Vec::new());
        }
        let initial = self.state_index(&self.spec.initial.clone())?;
        let mut events = Vec::new();
        let now = self.clock.timer_ns();
        self.enter(None, initial, START_TRIGGER, now, None, &mut events);
        self.pass_through(None, &mut events)?;
        Ok(events)
    }

    /// Fires `trigger` at `now`: takes the first transition from the current state whose
    /// guard passes, then any pass-through states; returns the transitions made.
    pub fn fire(&mut self, trigger: &str) -> Result<Vec<TransitionEvent>, MachineError> {
        self.fire_at(trigger, None)
    }

    /// [`Machine::fire`]; `due` is the due time of a timeout (the states entered count
    /// their timeouts from there, see [`Machine::deadline`]), `None` for any other
    /// trigger (they count from now).
    fn fire_at(
        &mut self,
        trigger: &str,
        due: Option<u64>,
    ) -> Result<Vec<TransitionEvent>, MachineError> {
        if !self.knows_trigger(trigger) {
            return Err(MachineError::UnknownTrigger {
                machine: self.spec.name.clone(),
                trigger: trigger.into(),
            });
        }
        let mut events = Vec::new();
        if !self.step(trigger, due, &mut events) {
            self.ignored += 1;
            return Ok(events);
        }
        self.pass_through(due, &mut events)?;
        Ok(events)
    }

    /// Fires the current state's timeout trigger if its deadline passed at `now`. The
    /// states it enters count their own timeouts from this deadline (its due time), not
    /// from `now`, unless that is more than one whole timeout ago (see
    /// [`Machine::deadline`]); the transitions are stamped with the clock's time.
    pub fn check_timeout(&mut self, now: u64) -> Result<Vec<TransitionEvent>, MachineError> {
        match (self.deadline(), self.current) {
            (Some(d), Some(i)) if d <= now => {
                let trigger = self.spec.states[i].timeout_trigger.clone();
                self.fire_at(&trigger, Some(d))
            }
            _ => Ok(Vec::new()),
        }
    }

    /// Takes the pass-through states from the current one; `due` as in
    /// [`Machine::fire_at`] (a chain after a timeout keeps its due time).
    fn pass_through(
        &mut self,
        due: Option<u64>,
        events: &mut Vec<TransitionEvent>,
    ) -> Result<(), MachineError> {
        for _ in 0..MAX_PASS_THROUGH {
            let Some(i) = self.current else {
                return Ok(());
            };
            let Some(trigger) = self.spec.states[i].pass_through.clone() else {
                return Ok(());
            };
            if !self.step(&trigger, due, events) {
                // every guard said no: the machine rests in the pass-through state
                self.ignored += 1;
                return Ok(());
            }
        }
        Err(MachineError::PassThroughLoop {
            machine: self.spec.name.clone(),
            max: MAX_PASS_THROUGH,
        })
    }

    /// Takes one transition for `trigger` if one applies; `due` as in
    /// [`Machine::fire_at`].
    fn step(&mut self, trigger: &str, due: Option<u64>, events: &mut Vec<TransitionEvent>) -> bool {
        let Some(cur) = self.current else {
            return false;
        };
        let now = self.clock.timer_ns();
        let from = self.spec.states[cur].name.clone();
        let mut chosen = None;
        for (k, t) in self.spec.transitions.iter().enumerate() {
            if t.trigger != trigger || !t.from.iter().any(|f| f == "*" || *f == from) {
                continue;
            }
            let info = Transition {
                from: &from,
                to: &t.to,
                trigger,
                stamp_ns: now,
            };
            let pass = match &t.guard {
                Some(g) => self.guards.get_mut(g).is_some_and(|g| g(&info)),
                None => true,
            };
            if pass {
                chosen = Some(k);
                break;
            }
        }
        let Some(k) = chosen else {
            return false;
        };
        let to = self.index[&self.spec.transitions[k].to];
        let action = self.spec.transitions[k].action.clone();
        let info = Transition {
            from: &from,
            to: &self.spec.states[to].name.clone(),
            trigger,
            stamp_ns: now,
        };
        if let Some(h) = self.on_exit[cur].as_mut() {
            h(&info);
        }
        if let Some(a) = action.and_then(|a| self.actions.get_mut(&a)) {
            a(&info);
        }
        self.enter(Some(&from), to, trigger, now, due, events);
        true
    }

    /// Enters state `to` at `now` (the stamp of its transition). Its timeout counts from
    /// `due` when a timeout brought it here, unless that leaves its deadline more than one
    /// whole timeout in the past (a stall: then from `now`, see [`Machine::deadline`]).
    fn enter(
        &mut self,
        from: Option<&str>,
        to: usize,
        trigger: &str,
        now: u64,
        due: Option<u64>,
        events: &mut Vec<TransitionEvent>,
    ) {
        self.current = Some(to);
        self.entered_ns = match (due, self.timeouts[to]) {
            // no timeout here: the due time only carries on through pass-through states
            (Some(due), None) => due.min(now),
            (Some(due), Some(t)) if due.saturating_add(t).saturating_add(t) >= now => due.min(now),
            _ => now,
        };
        self.seq += 1;
        let to_name = self.spec.states[to].name.clone();
        let info = Transition {
            from: from.unwrap_or(""),
            to: &to_name,
            trigger,
            stamp_ns: now,
        };
        if let Some(h) = self.on_enter[to].as_mut() {
            h(&info);
        }
        events.push(TransitionEvent {
            stamp_ns: now,
            ..TransitionEvent::new(self.seq, from.unwrap_or(""), &to_name, trigger)
        });
    }
}

/// Quality of service of `/<machine>/event`: the last event kept for late joiners (the
/// current state), 64 queued per subscriber.
pub fn event_qos() -> crate::qos::Qos {
    crate::qos::Qos::default().history(1).depth(64)
}

/// The event topic of machine `name`.
pub fn event_topic(name: &str) -> String {
    format!("/{name}/event")
}

/// The spec topic of machine `name` (latched).
pub fn spec_topic(name: &str) -> String {
    format!("/{name}/spec")
}

/// Most triggers queued through a [`MachineHandle`] and not yet handled.
pub const INBOX: usize = 64;

struct Shared {
    name: String,
    triggers: BTreeSet<String>,
    inbox: Mutex<VecDeque<String>>,
    current: Mutex<String>,
    control: Arc<Control>,
}

/// Fires triggers into a machine running on an executor, from any thread.
#[derive(Clone)]
pub struct MachineHandle {
    shared: Arc<Shared>,
}

impl MachineHandle {
    /// Queues `trigger`; the executor fires it. Unknown triggers and a full inbox are
    /// errors (nothing is queued).
    pub fn trigger(&self, trigger: &str) -> Result<(), MachineError> {
        let s = &self.shared;
        if !s.triggers.contains(trigger) {
            return Err(MachineError::UnknownTrigger {
                machine: s.name.clone(),
                trigger: trigger.into(),
            });
        }
        {
            let mut inbox = s.inbox.lock().unwrap_or_else(|p| p.into_inner());
            if inbox.len() >= INBOX {
                return Err(MachineError::InboxFull {
                    machine: s.name.clone(),
                    max: INBOX,
                });
            }
            inbox.push_back(trigger.into());
        }
        s.control.wake();
        Ok(())
    }

    /// The state the machine was in after its last transition.
    pub fn current(&self) -> String {
        self.shared
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Runs a [`Machine`] on an executor: fires queued triggers and timeouts, publishes every
/// transition.
pub(crate) struct Runner {
    machine: Machine,
    events: Publisher<TransitionEvent>,
    spec: Publisher<Serde<SpecText>>,
    /// Rings when someone joins the spec topic (then both topics connect the newcomer).
    spec_watch: RingWatch,
    shared: Arc<Shared>,
}

impl Runner {
    /// Opens the machine's topics on `node`, publishes its spec and enters the initial
    /// state.
    pub(crate) fn start(
        node: &Node,
        machine: Machine,
        control: Arc<Control>,
    ) -> Result<(Runner, MachineHandle), ExecError> {
        let name = machine.name().to_string();
        let events = node
            .publisher::<TransitionEvent>(&event_topic(&name))
            .qos(event_qos())
            .create()?;
        let spec = node
            .publisher::<Serde<SpecText>>(&spec_topic(&name))
            .qos(crate::qos::Qos::latched())
            .create()?;
        spec.publish_value(&SpecText {
            toml: machine.spec().to_toml()?,
        })?;
        let shared = Arc::new(Shared {
            name,
            triggers: machine.triggers.clone(),
            inbox: Mutex::new(VecDeque::new()),
            current: Mutex::new(String::new()),
            control,
        });
        let mut machine = machine;
        machine.use_clock(node.inner.ctx.inner.clock.clone());
        let first = machine.start()?;
        let runner = Runner {
            machine,
            events,
            spec_watch: RingWatch::new(spec.wake_slot().clone()),
            spec,
            shared: shared.clone(),
        };
        runner.publish(&first)?;
        Ok((runner, MachineHandle { shared }))
    }

    fn publish(&self, events: &[TransitionEvent]) -> Result<(), ExecError> {
        for e in events {
            self.events.publish(e)?;
        }
        if let Some(last) = events.last() {
            *self
                .shared
                .current
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = last.to_state().to_string();
        }
        Ok(())
    }
}

impl Work for Runner {
    /// A new subscriber of the spec (e.g. `nerve sm show`) rings this: the runner then
    /// connects it, handing it the spec and the last event (the current state).
    fn slot(&self) -> Option<crate::transport::doorbell::SlotRef> {
        Some(self.spec_watch.slot().clone())
    }
    fn due(&self) -> Option<u64> {
        self.machine.deadline()
    }
    fn rebase(&mut self, from: u64, to: u64) {
        self.machine.rebase(from, to);
    }
    fn start(&mut self, at: u64) {
        self.machine.start_clock(at);
    }
    fn ready(&self, now: Now) -> bool {
        self.spec_watch.rang()
            || self.machine.deadline().is_some_and(|d| d <= now.robot)
            || !self
                .shared
                .inbox
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty()
    }
    fn run(&mut self, stats: &mut EntityStats, budget: &Budget<'_>) -> Result<usize, ExecError> {
        let mut n = 0;
        if self.spec_watch.take() {
            self.spec.update_connections();
            self.events.update_connections();
        }
        let events = self.machine.check_timeout(budget.robot_now())?;
        if !events.is_empty() {
            self.publish(&events)?;
            n += 1;
        }
        while budget.more(n) {
            let next = self
                .shared
                .inbox
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front();
            let Some(trigger) = next else {
                break;
            };
            let events = self.machine.fire(&trigger)?;
            if events.is_empty() {
                stats.rejected += 1;
            }
            self.publish(&events)?;
            n += 1;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    fn door() -> MachineSpec {
        MachineSpec::new("door", "closed")
            .state(StateSpec::new("closed"))
            .state(StateSpec::new("open").timeout(Duration::from_millis(50)))
            .state(StateSpec::new("closing").pass_through("done"))
            .transition(TransitionSpec::new("push", &["closed"], "open").guard("unlocked"))
            .transition(TransitionSpec::new("timeout", &["open"], "closing").action("beep"))
            .transition(TransitionSpec::new("done", &["closing"], "closed"))
            .transition(TransitionSpec::new("alarm", &["*"], "open"))
    }

    #[test]
    fn guards_actions_hooks_and_pass_through_run_in_order() {
        let log = Rc::new(RefCell::new(Vec::<String>::new()));
        let unlocked = Rc::new(RefCell::new(false));
        let mut m = Machine::new(door()).unwrap();
        let (l1, l2, l3, l4) = (log.clone(), log.clone(), log.clone(), log.clone());
        let u = unlocked.clone();
        m.guard("unlocked", move |_| *u.borrow())
            .action("beep", move |t| {
                l1.borrow_mut().push(format!("beep {}", t.trigger))
            });
        m.on_exit("open", move |t| {
            l2.borrow_mut().push(format!("exit open -> {}", t.to))
        })
        .unwrap()
        .on_enter("closing", move |_| {
            l3.borrow_mut().push("enter closing".into())
        })
        .unwrap()
        .on_enter("closed", move |t| {
            l4.borrow_mut()
                .push(format!("enter closed by {}", t.trigger))
        })
        .unwrap();
        let ev = m.start().unwrap();
        assert_eq!(
            (ev.len(), ev[0].to_state(), ev[0].from_state()),
            (1, "closed", "")
        );
        assert!(m.fire("push").unwrap().is_empty(), "guard said no");
        assert_eq!(m.ignored(), 1);
        *unlocked.borrow_mut() = true;
        let ev = m.fire("push").unwrap();
        assert_eq!(ev[0].to_state(), "open");
        assert!(m.deadline().is_some());
        assert!(
            m.check_timeout(mono_ns()).unwrap().is_empty(),
            "not yet due"
        );
        let ev = m.check_timeout(m.deadline().unwrap()).unwrap();
        let path: Vec<(&str, &str, &str)> = ev
            .iter()
            .map(|e| (e.from_state(), e.trigger_name(), e.to_state()))
            .collect();
        assert_eq!(
            path,
            vec![
                ("open", "timeout", "closing"),
                ("closing", "done", "closed")
            ],
            "the pass-through state moves on by itself"
        );
        assert_eq!(ev[1].seq, ev[0].seq + 1);
        assert_eq!(
            *log.borrow(),
            vec![
                "enter closed by start",
                "exit open -> closing",
                "beep timeout",
                "enter closing",
                "enter closed by done"
            ]
        );
        assert_eq!(
            m.fire("alarm").unwrap()[0].to_state(),
            "open",
            "wildcard source"
        );
        assert!(matches!(
            m.fire("pusj"),
            Err(MachineError::UnknownTrigger { .. })
        ));
    }

    const MS: u64 = 1_000_000;

    /// The cycle of seeds/002 on a manual clock at 1 s: active (10 ms) -> inactive
    /// (pass-through) -> active, plus `reset`, which enters active from anywhere.
    fn cycle_on_manual_clock() -> (Machine, crate::time::Clock) {
        let spec = MachineSpec::new("cycle", "active")
            .state(StateSpec::new("active").timeout(Duration::from_millis(10)))
            .state(StateSpec::new("inactive").pass_through("resume"))
            .transition(TransitionSpec::new("timeout", &["active"], "inactive"))
            .transition(TransitionSpec::new("resume", &["inactive"], "active"))
            .transition(TransitionSpec::new("reset", &["*"], "active"));
        let clock = crate::time::Clock::manual();
        assert!(clock.set(1_000 * MS as i64));
        let mut m = Machine::new(spec).unwrap();
        m.use_clock(clock.clone());
        m.start().unwrap();
        assert_eq!(m.deadline(), Some(1_010 * MS));
        (m, clock)
    }

    /// Moves the manual clock to `t` and checks the timeout there.
    fn late_check(m: &mut Machine, clock: &crate::time::Clock, t: u64) -> Vec<TransitionEvent> {
        clock.set(t as i64);
        m.check_timeout(t).unwrap()
    }

    #[test]
    fn a_late_timeout_counts_the_next_state_from_its_due_time() {
        let (mut m, clock) = cycle_on_manual_clock();
        // handled 3 ms late: the next deadline is the old one + 10 ms, not now + 10 ms
        let ev = late_check(&mut m, &clock, 1_013 * MS);
        assert_eq!(ev.len(), 2, "timeout, then the pass-through resume");
        assert_eq!(m.current(), Some("active"));
        assert_eq!(m.entered_ns(), Some(1_010 * MS), "entered at the due time");
        assert_eq!(m.deadline(), Some(1_020 * MS));
        assert!(
            ev.iter().all(|e| e.stamp_ns == 1_013 * MS),
            "the events carry the time they were handled"
        );
        // late again: still on the grid, lateness does not add up
        late_check(&mut m, &clock, 1_021 * MS);
        assert_eq!(m.deadline(), Some(1_030 * MS));
        // late by more than a timeout but less than two: the next one is due at once
        let ev = late_check(&mut m, &clock, 1_045 * MS);
        assert_eq!(ev.len(), 2);
        assert_eq!(m.deadline(), Some(1_040 * MS), "already due");
        assert_eq!(m.check_timeout(1_045 * MS).unwrap().len(), 2);
        assert_eq!(m.deadline(), Some(1_050 * MS), "back on the grid");
        assert!(m.check_timeout(1_045 * MS).unwrap().is_empty());
    }

    #[test]
    fn a_stall_of_more_than_a_timeout_counts_from_now() {
        let (mut m, clock) = cycle_on_manual_clock();
        // exactly one whole timeout behind: the grid is kept (due at once)
        late_check(&mut m, &clock, 1_030 * MS);
        assert_eq!(m.deadline(), Some(1_020 * MS));
        // 1 ns more than one timeout behind (deadline 1.030 s, handled at 1.050 s + 1 ns):
        // a stall, so no catching up; the state counts from now
        m.check_timeout(1_030 * MS).unwrap();
        assert_eq!(m.deadline(), Some(1_030 * MS));
        late_check(&mut m, &clock, 1_050 * MS + 1);
        assert_eq!(m.entered_ns(), Some(1_050 * MS + 1));
        assert_eq!(m.deadline(), Some(1_060 * MS + 1));
        // a long stop (10 s): one timeout, then 10 ms from now, not 1,000 back to back
        let ev = late_check(&mut m, &clock, 11_000 * MS);
        assert_eq!(ev.len(), 2);
        assert_eq!(m.deadline(), Some(11_010 * MS));
        assert!(m.check_timeout(11_000 * MS).unwrap().is_empty());
    }

    #[test]
    fn other_triggers_count_from_now() {
        let (mut m, clock) = cycle_on_manual_clock();
        clock.set(1_003_700_000);
        let ev = m.fire("reset").unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(m.entered_ns(), Some(1_003_700_000));
        assert_eq!(m.deadline(), Some(1_013_700_000));
        // the timeout trigger fired by hand is not a due timeout: from now as well
        clock.set(1_005 * MS as i64);
        assert_eq!(m.fire("timeout").unwrap().len(), 2);
        assert_eq!(m.deadline(), Some(1_015 * MS));
        // a jump of the clock back keeps the time left (7 ms)
        m.rebase(1_008 * MS, 500 * MS);
        assert_eq!(m.deadline(), Some(507 * MS));
    }

    #[test]
    fn bad_specs_are_refused_with_the_reason() {
        let cases: Vec<(MachineSpec, &str)> = vec![
            (door().state(StateSpec::new("open")), "defined twice"),
            (
                MachineSpec {
                    initial: "x".into(),
                    ..door()
                },
                "initial state \"x\"",
            ),
            (
                door().transition(TransitionSpec::new("t", &["nowhere"], "open")),
                "\"nowhere\"",
            ),
            (door().state(StateSpec::new("bad-name")), "bad-name"),
            (
                door().state(StateSpec::new("stuck").pass_through("nothing")),
                "no transition",
            ),
            (
                door().state(StateSpec {
                    timeout_ms: Some(-1.0),
                    ..StateSpec::new("neg")
                }),
                "positive",
            ),
        ];
        for (spec, why) in cases {
            let e = Machine::new(spec).err().expect("refused").to_string();
            assert!(e.contains(why), "{e} should mention {why}");
        }
        let mut m = Machine::new(door()).unwrap();
        let e = m.start().err().unwrap().to_string();
        assert!(e.contains("guard") && e.contains("unlocked"), "{e}");
    }

    #[test]
    fn pass_through_loops_are_bounded() {
        let spec = MachineSpec::new("loop", "a")
            .state(StateSpec::new("a").pass_through("go"))
            .state(StateSpec::new("b").pass_through("go"))
            .transition(TransitionSpec::new("go", &["a"], "b"))
            .transition(TransitionSpec::new("go", &["b"], "a"));
        let mut m = Machine::new(spec).unwrap();
        assert!(matches!(
            m.start(),
            Err(MachineError::PassThroughLoop { .. })
        ));
    }

    #[test]
    fn spec_files_name_what_is_wrong() {
        let dir = std::env::temp_dir().join(format!("nerve-machine-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = MachineSpec::from_file(&dir.join("none.toml"))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("none.toml"), "{missing}");
        let txt = dir.join("m.txt");
        std::fs::write(&txt, "name = \"m\"").unwrap();
        let e = MachineSpec::from_file(&txt).unwrap_err().to_string();
        assert!(
            e.contains("m.txt") && e.contains(".toml, .yaml or .yml"),
            "{e}"
        );
        let bad = dir.join("bad.yaml");
        std::fs::write(&bad, "name: [").unwrap();
        let e = MachineSpec::from_file(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.yaml"), "{e}");
        let good = dir.join("good.toml");
        std::fs::write(&good, door().to_toml().unwrap()).unwrap();
        assert_eq!(MachineSpec::from_file(&good).unwrap(), door());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn toml_and_yaml_give_the_same_machine() {
        let toml = r#"
            name = "cycle"
            initial = "active"
            [[states]]
            name = "active"
            timeout_ms = 10
            [[states]]
            name = "inactive"
            pass_through = "resume"
            [[transitions]]
            trigger = "timeout"
            from = "active"
            to = "inactive"
            [[transitions]]
            trigger = "resume"
            from = ["inactive"]
            to = "active"
        "#;
        let yaml = "name: cycle\ninitial: active\nstates:\n  - name: active\n    timeout_ms: 10\n  \
                    - name: inactive\n    pass_through: resume\ntransitions:\n  - trigger: timeout\n    \
                    from: active\n    to: inactive\n  - trigger: resume\n    from: [inactive]\n    to: active\n";
        let a = MachineSpec::from_toml(toml).unwrap();
        let b = MachineSpec::from_yaml(yaml).unwrap();
        assert_eq!(a, b);
        assert_eq!(
            MachineSpec::from_toml(&a.to_toml().unwrap()).unwrap(),
            a,
            "round trip"
        );
        Machine::new(a).unwrap();
        let e = MachineSpec::from_toml("name = 1").unwrap_err().to_string();
        assert!(e.contains("name"), "{e}");
        let e = MachineSpec::from_toml("name = \"m\"\ninitial = \"a\"\nstates = []\nextra = 1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("extra"), "{e}");
    }
}
