//! Managed lifecycles for Nerve: ROS 2's node lifecycle (`rclcpp_lifecycle`) on Nerve's
//! services and topics.
//!
//! A [`ManagedNode`] starts unconfigured. Transitions (`configure`, `activate`,
//! `deactivate`, `cleanup`, `shutdown`) run the user's callbacks; a callback's
//! [`CallbackReturn`] picks the next state exactly as in ROS 2 (success: the goal;
//! failure: back where it started; error or panic: error processing, then unconfigured
//! or finalized). [`LifecyclePublisher`]s send only while the node is active and count
//! what they drop. Every step goes out on `<node>/transition_event`, and the node serves
//! `<node>/change_state`, `get_state`, `get_available_states`,
//! `get_available_transitions` and `get_transition_graph` with types laid out as
//! `lifecycle_msgs`
//! ([`nerve_msgs::lifecycle`]), so `nerve lifecycle`, `nerve launch` and a ROS 2 bridge
//! drive it.
//!
//! ```
//! use nerve_lifecycle::{CallbackReturn, ManagedNode, State, Transition};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = nerve::Context::from_env()?;
//! let node = ctx.node("camera").create()?;
//! let managed = ManagedNode::create(&node)?;
//! let frames = managed.publisher::<nerve_msgs::CmdVel>("/frames", nerve::Qos::default())?;
//! managed.on_configure(|_| CallbackReturn::Success);
//! assert!(!frames.publish(&Default::default())?); // unconfigured: dropped
//! managed.trigger(Transition::Configure)?;
//! assert_eq!(managed.trigger(Transition::Activate)?, State::Active);
//! assert!(frames.publish(&Default::default())?); // active: sent
//! assert_eq!(frames.dropped(), 1);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod client;
mod error;
mod node;
mod publisher;
mod state;

pub use client::{check_label, list_managed, ChangeCall, LifecycleClient};
pub use error::{ClientError, LifecycleError, TransitionError};
pub use node::{
    events_qos, LifecycleWaitables, ManagedNode, StateWatch, CHANGE_STATE, GET_AVAILABLE_STATES,
    GET_AVAILABLE_TRANSITIONS, GET_STATE, GET_TRANSITION_GRAPH, TRANSITION_EVENT,
};
pub use publisher::LifecyclePublisher;
pub use state::{
    error_outcome, transition_graph, CallbackReturn, Hook, State, Transition, ALL_STATES, LABELS,
};
