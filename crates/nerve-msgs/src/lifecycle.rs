//! Managed-node lifecycle messages and services, laid out as ROS 2's `lifecycle_msgs`
//! (`State`, `Transition`, `TransitionDescription`, `TransitionEvent`; the services
//! `ChangeState`, `GetState`, `GetAvailableStates`, `GetAvailableTransitions`) with the
//! same ids, so a ROS 2 bridge and ROS 2 tools can drive Nerve's managed nodes. Labels
//! are fixed 31-byte strings (ROS 2's longest label, `errorprocessing`, has 15 bytes).
//! The state machine itself lives in `nerve-lifecycle`.

use crate::srv::Empty;
use crate::FixedStr;
use nerve::{Message, Pod, Service};
use serde::{Deserialize, Serialize};

/// A state label (at most 31 bytes).
pub type Label = FixedStr<31>;

/// `lifecycle_msgs/State` ids: primary states.
pub mod state_id {
    /// PRIMARY_STATE_UNKNOWN
    pub const UNKNOWN: u8 = 0;
    /// PRIMARY_STATE_UNCONFIGURED
    pub const UNCONFIGURED: u8 = 1;
    /// PRIMARY_STATE_INACTIVE
    pub const INACTIVE: u8 = 2;
    /// PRIMARY_STATE_ACTIVE
    pub const ACTIVE: u8 = 3;
    /// PRIMARY_STATE_FINALIZED
    pub const FINALIZED: u8 = 4;
    /// TRANSITION_STATE_CONFIGURING
    pub const CONFIGURING: u8 = 10;
    /// TRANSITION_STATE_CLEANINGUP
    pub const CLEANINGUP: u8 = 11;
    /// TRANSITION_STATE_SHUTTINGDOWN
    pub const SHUTTINGDOWN: u8 = 12;
    /// TRANSITION_STATE_ACTIVATING
    pub const ACTIVATING: u8 = 13;
    /// TRANSITION_STATE_DEACTIVATING
    pub const DEACTIVATING: u8 = 14;
    /// TRANSITION_STATE_ERRORPROCESSING
    pub const ERRORPROCESSING: u8 = 15;
}

/// `lifecycle_msgs/Transition` ids.
pub mod transition_id {
    /// TRANSITION_CREATE
    pub const CREATE: u8 = 0;
    /// TRANSITION_CONFIGURE
    pub const CONFIGURE: u8 = 1;
    /// TRANSITION_CLEANUP
    pub const CLEANUP: u8 = 2;
    /// TRANSITION_ACTIVATE
    pub const ACTIVATE: u8 = 3;
    /// TRANSITION_DEACTIVATE
    pub const DEACTIVATE: u8 = 4;
    /// TRANSITION_UNCONFIGURED_SHUTDOWN
    pub const UNCONFIGURED_SHUTDOWN: u8 = 5;
    /// TRANSITION_INACTIVE_SHUTDOWN
    pub const INACTIVE_SHUTDOWN: u8 = 6;
    /// TRANSITION_ACTIVE_SHUTDOWN
    pub const ACTIVE_SHUTDOWN: u8 = 7;
    /// TRANSITION_DESTROY
    pub const DESTROY: u8 = 8;
    /// TRANSITION_ON_CONFIGURE_SUCCESS
    pub const ON_CONFIGURE_SUCCESS: u8 = 10;
    /// TRANSITION_ON_CONFIGURE_FAILURE
    pub const ON_CONFIGURE_FAILURE: u8 = 11;
    /// TRANSITION_ON_CONFIGURE_ERROR
    pub const ON_CONFIGURE_ERROR: u8 = 12;
    /// TRANSITION_ON_CLEANUP_SUCCESS
    pub const ON_CLEANUP_SUCCESS: u8 = 20;
    /// TRANSITION_ON_CLEANUP_FAILURE
    pub const ON_CLEANUP_FAILURE: u8 = 21;
    /// TRANSITION_ON_CLEANUP_ERROR
    pub const ON_CLEANUP_ERROR: u8 = 22;
    /// TRANSITION_ON_ACTIVATE_SUCCESS
    pub const ON_ACTIVATE_SUCCESS: u8 = 30;
    /// TRANSITION_ON_ACTIVATE_FAILURE
    pub const ON_ACTIVATE_FAILURE: u8 = 31;
    /// TRANSITION_ON_ACTIVATE_ERROR
    pub const ON_ACTIVATE_ERROR: u8 = 32;
    /// TRANSITION_ON_DEACTIVATE_SUCCESS
    pub const ON_DEACTIVATE_SUCCESS: u8 = 40;
    /// TRANSITION_ON_DEACTIVATE_FAILURE
    pub const ON_DEACTIVATE_FAILURE: u8 = 41;
    /// TRANSITION_ON_DEACTIVATE_ERROR
    pub const ON_DEACTIVATE_ERROR: u8 = 42;
    /// TRANSITION_ON_SHUTDOWN_SUCCESS
    pub const ON_SHUTDOWN_SUCCESS: u8 = 50;
    /// TRANSITION_ON_SHUTDOWN_FAILURE
    pub const ON_SHUTDOWN_FAILURE: u8 = 51;
    /// TRANSITION_ON_SHUTDOWN_ERROR
    pub const ON_SHUTDOWN_ERROR: u8 = 52;
    /// TRANSITION_ON_ERROR_SUCCESS
    pub const ON_ERROR_SUCCESS: u8 = 60;
    /// TRANSITION_ON_ERROR_FAILURE
    pub const ON_ERROR_FAILURE: u8 = 61;
    /// TRANSITION_ON_ERROR_ERROR
    pub const ON_ERROR_ERROR: u8 = 62;
    /// TRANSITION_CALLBACK_SUCCESS
    pub const CALLBACK_SUCCESS: u8 = 97;
    /// TRANSITION_CALLBACK_FAILURE
    pub const CALLBACK_FAILURE: u8 = 98;
    /// TRANSITION_CALLBACK_ERROR
    pub const CALLBACK_ERROR: u8 = 99;
}

/// A lifecycle state (like `lifecycle_msgs/State`): an id of [`state_id`] and its label.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Serialize, Deserialize)]
#[repr(C)]
pub struct State {
    /// The state's id ([`state_id`]).
    pub id: u8,
    /// Its label (`unconfigured`, `active`, ...).
    pub label: Label,
}

/// A transition (like `lifecycle_msgs/Transition`): an id of [`transition_id`] and its
/// label. In a change request the label, when given, wins over the id (as rclcpp does:
/// `ros2 service call` leaves the id 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Serialize, Deserialize)]
#[repr(C)]
pub struct Transition {
    /// The transition's id ([`transition_id`]).
    pub id: u8,
    /// Its label (`configure`, `activate`, `shutdown`, ...).
    pub label: Label,
}

/// A transition with where it starts and where it goes (like
/// `lifecycle_msgs/TransitionDescription`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Serialize, Deserialize)]
#[repr(C)]
pub struct TransitionDescription {
    /// The transition.
    pub transition: Transition,
    /// The state it leaves.
    pub start_state: State,
    /// The state it enters.
    pub goal_state: State,
}

/// One step of a managed node's state machine, published on `<node>/transition_event`
/// (like `lifecycle_msgs/TransitionEvent`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/LifecycleTransitionEvent")]
pub struct TransitionEvent {
    /// Wall-clock time of the step, ns since the Unix epoch.
    pub timestamp: u64,
    /// The transition taken.
    pub transition: Transition,
    /// The state left.
    pub start_state: State,
    /// The state entered.
    pub goal_state: State,
}

/// The request of [`ChangeState`] (like `lifecycle_msgs/srv/ChangeState_Request`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/ChangeStateRequest")]
pub struct ChangeStateRequest {
    /// The transition asked for (by label, or by id when the label is empty).
    pub transition: Transition,
}

/// The response of [`ChangeState`] (like `lifecycle_msgs/srv/ChangeState_Response`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/ChangeStateResponse")]
pub struct ChangeStateResponse {
    /// 1 if the transition reached its goal state, 0 if a callback failed or erred (the
    /// node is then where the failure left it: ask `get_state`).
    pub success: u8,
}

/// The response of [`GetState`] (like `lifecycle_msgs/srv/GetState_Response`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/GetStateResponse")]
pub struct GetStateResponse {
    /// The node's state now.
    pub current_state: State,
}

/// The response of [`GetAvailableStates`]: the states follow as the slice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/GetAvailableStatesResponse", elem = State)]
pub struct GetAvailableStatesResponse {}

/// The response of [`GetAvailableTransitions`]: the transitions follow as the slice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(
    name = "nerve_msgs/GetAvailableTransitionsResponse",
    elem = TransitionDescription
)]
pub struct GetAvailableTransitionsResponse {}

/// `<node>/change_state`: trigger a transition (like `lifecycle_msgs/srv/ChangeState`).
pub struct ChangeState;
impl Service for ChangeState {
    const TYPE_NAME: &'static str = "nerve_msgs/ChangeState";
    type Request = ChangeStateRequest;
    type Response = ChangeStateResponse;
}

/// `<node>/get_state`: the current state (like `lifecycle_msgs/srv/GetState`).
pub struct GetState;
impl Service for GetState {
    const TYPE_NAME: &'static str = "nerve_msgs/GetState";
    type Request = Empty;
    type Response = GetStateResponse;
}

/// `<node>/get_available_states`: every state of the machine (like
/// `lifecycle_msgs/srv/GetAvailableStates`).
pub struct GetAvailableStates;
impl Service for GetAvailableStates {
    const TYPE_NAME: &'static str = "nerve_msgs/GetAvailableStates";
    type Request = Empty;
    type Response = GetAvailableStatesResponse;
}

/// `<node>/get_available_transitions`: the transitions valid from the current state
/// (like `lifecycle_msgs/srv/GetAvailableTransitions`).
pub struct GetAvailableTransitions;
impl Service for GetAvailableTransitions {
    const TYPE_NAME: &'static str = "nerve_msgs/GetAvailableTransitions";
    type Request = Empty;
    type Response = GetAvailableTransitionsResponse;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_have_no_padding() {
        assert_eq!(std::mem::size_of::<State>(), 32);
        assert_eq!(std::mem::size_of::<TransitionDescription>(), 96);
        assert_eq!(std::mem::size_of::<TransitionEvent>(), 104);
        assert_eq!(std::mem::size_of::<ChangeStateResponse>(), 1);
    }
}
