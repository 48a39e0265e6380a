//! The state machine: ROS 2's primary and transition states, the transitions between
//! them and where each callback outcome leads. Pure data, no I/O.

use nerve_msgs::lifecycle::{state_id, transition_id, Label, TransitionDescription};

/// A lifecycle state, with ROS 2's ids (`lifecycle_msgs/State`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum State {
    /// Not known (a node that never answered).
    Unknown = state_id::UNKNOWN,
    /// Created, not configured: the start state.
    Unconfigured = state_id::UNCONFIGURED,
    /// Configured, not running: publishers drop.
    Inactive = state_id::INACTIVE,
    /// Running: publishers send.
    Active = state_id::ACTIVE,
    /// Shut down for good.
    Finalized = state_id::FINALIZED,
    /// Running `on_configure`.
    Configuring = state_id::CONFIGURING,
    /// Running `on_cleanup`.
    CleaningUp = state_id::CLEANINGUP,
    /// Running `on_shutdown`.
    ShuttingDown = state_id::SHUTTINGDOWN,
    /// Running `on_activate`.
    Activating = state_id::ACTIVATING,
    /// Running `on_deactivate`.
    Deactivating = state_id::DEACTIVATING,
    /// Running `on_error` after a callback erred.
    ErrorProcessing = state_id::ERRORPROCESSING,
}

/// Every state, primary ones first (what `get_available_states` answers).
pub const ALL_STATES: [State; 10] = [
    State::Unconfigured,
    State::Inactive,
    State::Active,
    State::Finalized,
    State::Configuring,
    State::CleaningUp,
    State::ShuttingDown,
    State::Activating,
    State::Deactivating,
    State::ErrorProcessing,
];

impl State {
    /// The ROS 2 id.
    pub fn id(self) -> u8 {
        self as u8
    }

    /// The state of a ROS 2 id (`None` for an id no state has).
    pub fn from_id(id: u8) -> Option<State> {
        ALL_STATES
            .iter()
            .copied()
            .chain([State::Unknown])
            .find(|s| s.id() == id)
    }

    /// The ROS 2 label (`unconfigured`, `errorprocessing`, ...).
    pub fn label(self) -> &'static str {
        match self {
            State::Unknown => "unknown",
            State::Unconfigured => "unconfigured",
            State::Inactive => "inactive",
            State::Active => "active",
            State::Finalized => "finalized",
            State::Configuring => "configuring",
            State::CleaningUp => "cleaningup",
            State::ShuttingDown => "shuttingdown",
            State::Activating => "activating",
            State::Deactivating => "deactivating",
            State::ErrorProcessing => "errorprocessing",
        }
    }

    /// Whether it is a primary state (a node rests only in these).
    pub fn is_primary(self) -> bool {
        self.id() <= state_id::FINALIZED
    }

    /// The transitions valid from this state, in ROS 2's order (none from a transition
    /// state or from finalized).
    pub fn transitions(self) -> &'static [Transition] {
        match self {
            State::Unconfigured => &[Transition::Configure, Transition::UnconfiguredShutdown],
            State::Inactive => &[
                Transition::Cleanup,
                Transition::Activate,
                Transition::InactiveShutdown,
            ],
            State::Active => &[Transition::Deactivate, Transition::ActiveShutdown],
            _ => &[],
        }
    }

    /// As a message field.
    pub fn to_msg(self) -> nerve_msgs::lifecycle::State {
        nerve_msgs::lifecycle::State {
            id: self.id(),
            label: label(self.label()),
        }
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// A transition a client may ask for, with ROS 2's ids (`lifecycle_msgs/Transition`).
/// The three shutdowns share the label `shutdown`: which one applies depends on the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Transition {
    /// unconfigured -> configuring -> inactive.
    Configure = transition_id::CONFIGURE,
    /// inactive -> cleaningup -> unconfigured.
    Cleanup = transition_id::CLEANUP,
    /// inactive -> activating -> active.
    Activate = transition_id::ACTIVATE,
    /// active -> deactivating -> inactive.
    Deactivate = transition_id::DEACTIVATE,
    /// unconfigured -> shuttingdown -> finalized.
    UnconfiguredShutdown = transition_id::UNCONFIGURED_SHUTDOWN,
    /// inactive -> shuttingdown -> finalized.
    InactiveShutdown = transition_id::INACTIVE_SHUTDOWN,
    /// active -> shuttingdown -> finalized.
    ActiveShutdown = transition_id::ACTIVE_SHUTDOWN,
}

/// The labels a client may ask for, in the order of the lifecycle.
pub const LABELS: [&str; 5] = ["configure", "activate", "deactivate", "cleanup", "shutdown"];

/// What a transition callback says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallbackReturn {
    /// Done: the transition reaches its goal state.
    Success,
    /// Refused: the node goes back to the state it started from (a shutdown still ends
    /// in finalized, as in ROS 2).
    Failure,
    /// Broken: the node goes to error processing (`on_error`), then to unconfigured (its
    /// success) or finalized. A panicking callback counts as this.
    Error,
}

impl CallbackReturn {
    /// ROS 2's label of the internal transition it takes.
    pub fn label(self) -> &'static str {
        match self {
            CallbackReturn::Success => "transition_success",
            CallbackReturn::Failure => "transition_failure",
            CallbackReturn::Error => "transition_error",
        }
    }
}

/// Which user callback runs in a transition state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hook {
    /// `on_configure`.
    Configure = 0,
    /// `on_cleanup`.
    Cleanup = 1,
    /// `on_activate`.
    Activate = 2,
    /// `on_deactivate`.
    Deactivate = 3,
    /// `on_shutdown`.
    Shutdown = 4,
    /// `on_error`.
    Error = 5,
}

impl Transition {
    /// Every transition.
    pub const ALL: [Transition; 7] = [
        Transition::Configure,
        Transition::Cleanup,
        Transition::Activate,
        Transition::Deactivate,
        Transition::UnconfiguredShutdown,
        Transition::InactiveShutdown,
        Transition::ActiveShutdown,
    ];

    /// The ROS 2 id.
    pub fn id(self) -> u8 {
        self as u8
    }

    /// The transition of a ROS 2 id (`None` for internal or unknown ids).
    pub fn from_id(id: u8) -> Option<Transition> {
        Transition::ALL.iter().copied().find(|t| t.id() == id)
    }

    /// The transition `label` names from `state` (`shutdown` is the one of that state);
    /// `None` when the label is not one of [`LABELS`] or no such transition leaves
    /// `state`.
    pub fn from_label(label: &str, state: State) -> Option<Transition> {
        state
            .transitions()
            .iter()
            .copied()
            .find(|t| t.label() == label)
    }

    /// The ROS 2 label.
    pub fn label(self) -> &'static str {
        match self {
            Transition::Configure => "configure",
            Transition::Cleanup => "cleanup",
            Transition::Activate => "activate",
            Transition::Deactivate => "deactivate",
            _ => "shutdown",
        }
    }

    /// The primary state it leaves.
    pub fn start(self) -> State {
        match self {
            Transition::Configure | Transition::UnconfiguredShutdown => State::Unconfigured,
            Transition::Cleanup | Transition::Activate | Transition::InactiveShutdown => {
                State::Inactive
            }
            Transition::Deactivate | Transition::ActiveShutdown => State::Active,
        }
    }

    /// The transition state its callback runs in.
    pub fn via(self) -> State {
        match self {
            Transition::Configure => State::Configuring,
            Transition::Cleanup => State::CleaningUp,
            Transition::Activate => State::Activating,
            Transition::Deactivate => State::Deactivating,
            _ => State::ShuttingDown,
        }
    }

    /// Its callback.
    pub fn hook(self) -> Hook {
        match self {
            Transition::Configure => Hook::Configure,
            Transition::Cleanup => Hook::Cleanup,
            Transition::Activate => Hook::Activate,
            Transition::Deactivate => Hook::Deactivate,
            _ => Hook::Shutdown,
        }
    }

    /// The state it reaches when its callback succeeds.
    pub fn goal(self) -> State {
        match self {
            Transition::Configure | Transition::Deactivate => State::Inactive,
            Transition::Cleanup => State::Unconfigured,
            Transition::Activate => State::Active,
            _ => State::Finalized,
        }
    }

    /// Where the callback's outcome leads, and the id of the internal transition taken
    /// (`ON_CONFIGURE_SUCCESS`, ...).
    pub fn outcome(self, result: CallbackReturn) -> (State, u8) {
        use transition_id as t;
        let (base, failed) = match self {
            Transition::Configure => (t::ON_CONFIGURE_SUCCESS, State::Unconfigured),
            Transition::Cleanup => (t::ON_CLEANUP_SUCCESS, State::Inactive),
            Transition::Activate => (t::ON_ACTIVATE_SUCCESS, State::Inactive),
            Transition::Deactivate => (t::ON_DEACTIVATE_SUCCESS, State::Active),
            _ => (t::ON_SHUTDOWN_SUCCESS, State::Finalized),
        };
        match result {
            CallbackReturn::Success => (self.goal(), base),
            CallbackReturn::Failure => (failed, base + 1),
            CallbackReturn::Error => (State::ErrorProcessing, base + 2),
        }
    }

    /// As a message field.
    pub fn to_msg(self) -> nerve_msgs::lifecycle::Transition {
        nerve_msgs::lifecycle::Transition {
            id: self.id(),
            label: label(self.label()),
        }
    }
}

impl std::fmt::Display for Transition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Where error processing leads: unconfigured when `on_error` succeeds, else finalized;
/// and the internal transition's id.
pub fn error_outcome(result: CallbackReturn) -> (State, u8) {
    match result {
        CallbackReturn::Success => (State::Unconfigured, transition_id::ON_ERROR_SUCCESS),
        CallbackReturn::Failure => (State::Finalized, transition_id::ON_ERROR_FAILURE),
        CallbackReturn::Error => (State::Finalized, transition_id::ON_ERROR_ERROR),
    }
}

/// Every transition of the state machine, as ROS 2's `get_transition_graph` answers:
/// the seven a client may ask for, then the internal ones each transition state takes on
/// its callback's success, failure and error (`transition_success`, ...), error
/// processing's last. 25 in all.
pub fn transition_graph() -> Vec<TransitionDescription> {
    let describe = |id: u8, label: &str, start: State, goal: State| TransitionDescription {
        transition: nerve_msgs::lifecycle::Transition {
            id,
            label: self::label(label),
        },
        start_state: start.to_msg(),
        goal_state: goal.to_msg(),
    };
    let mut out: Vec<TransitionDescription> = Transition::ALL
        .iter()
        .map(|t| describe(t.id(), t.label(), t.start(), t.goal()))
        .collect();
    let results = [
        CallbackReturn::Success,
        CallbackReturn::Failure,
        CallbackReturn::Error,
    ];
    // one of the three shutdowns stands for shuttingdown's outcomes
    for t in [
        Transition::Configure,
        Transition::Cleanup,
        Transition::Activate,
        Transition::Deactivate,
        Transition::ActiveShutdown,
    ] {
        for r in results {
            let (goal, id) = t.outcome(r);
            out.push(describe(id, r.label(), t.via(), goal));
        }
    }
    for r in results {
        let (goal, id) = error_outcome(r);
        out.push(describe(id, r.label(), State::ErrorProcessing, goal));
    }
    out
}

/// A label as a message field (labels here are all short; a longer one is cut).
pub(crate) fn label(s: &str) -> Label {
    let mut b = [0u8; 31];
    let n = s.len().min(31);
    b[..n].copy_from_slice(&s.as_bytes()[..n]);
    nerve_msgs::FixedStr(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_labels_are_ros2s() {
        assert_eq!(State::Unconfigured.id(), 1);
        assert_eq!(State::ErrorProcessing.id(), 15);
        assert_eq!(Transition::ActiveShutdown.id(), 7);
        for s in ALL_STATES {
            assert_eq!(State::from_id(s.id()), Some(s));
        }
        assert_eq!(State::from_id(9), None);
        assert_eq!(Transition::from_id(10), None);
        assert_eq!(
            Transition::from_label("shutdown", State::Active),
            Some(Transition::ActiveShutdown)
        );
        assert_eq!(
            Transition::from_label("activate", State::Unconfigured),
            None
        );
    }

    #[test]
    fn outcomes_follow_the_ros2_graph() {
        use CallbackReturn::*;
        assert_eq!(
            Transition::Configure.outcome(Success),
            (State::Inactive, 10)
        );
        assert_eq!(
            Transition::Configure.outcome(Failure),
            (State::Unconfigured, 11)
        );
        assert_eq!(
            Transition::Activate.outcome(Error),
            (State::ErrorProcessing, 32)
        );
        assert_eq!(Transition::Deactivate.outcome(Failure), (State::Active, 41));
        assert_eq!(
            Transition::InactiveShutdown.outcome(Failure),
            (State::Finalized, 51)
        );
        assert_eq!(error_outcome(Success), (State::Unconfigured, 60));
        assert_eq!(error_outcome(Error), (State::Finalized, 62));
        for t in Transition::ALL {
            assert!(t.start().transitions().contains(&t), "{t:?}");
        }
    }

    #[test]
    fn the_graph_has_every_transition_once() {
        let g = transition_graph();
        assert_eq!(g.len(), 25);
        let mut ids: Vec<u8> = g.iter().map(|d| d.transition.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 25, "{ids:?}");
        let on_shutdown_failure = g.iter().find(|d| d.transition.id == 51).unwrap();
        assert_eq!(on_shutdown_failure.start_state.id, state_id::SHUTTINGDOWN);
        assert_eq!(on_shutdown_failure.goal_state.id, state_id::FINALIZED);
        assert_eq!(
            on_shutdown_failure.transition.label.as_str(),
            "transition_failure"
        );
    }
}
