//! Standard action types (like ROS 2's example_interfaces and action_tutorials).

use crate::srv::Bytes;
use nerve::action::Action;
use nerve::Message;
use serde::{Deserialize, Serialize};

/// How many Fibonacci numbers to compute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/FibonacciGoal")]
pub struct FibonacciGoal {
    /// The count (the sequence has `order + 1` numbers).
    pub order: i64,
}

/// A Fibonacci sequence so far (its numbers follow as the slice).
#[derive(Clone, Copy, Debug, Default, PartialEq, Message, Serialize, Deserialize)]
#[repr(C)]
#[message(name = "nerve_msgs/FibonacciSequence", elem = i64)]
pub struct FibonacciSequence {
    /// How many numbers follow.
    pub len: u64,
}

/// Compute a Fibonacci sequence, reporting it as it grows (like
/// action_tutorials_interfaces/Fibonacci).
pub struct Fibonacci;
impl Action for Fibonacci {
    const TYPE_NAME: &'static str = "nerve_msgs/Fibonacci";
    type Goal = FibonacciGoal;
    type Feedback = FibonacciSequence;
    type Result = FibonacciSequence;
}

/// Send bytes, get them back as the result (the action twin of [`crate::srv::Echo`],
/// for round-trip measurements).
pub struct EchoAction;
impl Action for EchoAction {
    const TYPE_NAME: &'static str = "nerve_msgs/EchoAction";
    type Goal = Bytes;
    type Feedback = Bytes;
    type Result = Bytes;
}

/// One standard action type: its name and the type names of its messages.
pub struct ActionInfo {
    /// Action type name.
    pub name: &'static str,
    /// Goal message type name.
    pub goal: &'static str,
    /// Feedback message type name.
    pub feedback: &'static str,
    /// Result message type name.
    pub result: &'static str,
}

fn info<A: Action>() -> ActionInfo {
    ActionInfo {
        name: A::TYPE_NAME,
        goal: <A::Goal as Message>::TYPE_NAME,
        feedback: <A::Feedback as Message>::TYPE_NAME,
        result: <A::Result as Message>::TYPE_NAME,
    }
}

/// Every standard action type.
pub fn actions() -> Vec<ActionInfo> {
    vec![info::<Fibonacci>(), info::<EchoAction>()]
}
