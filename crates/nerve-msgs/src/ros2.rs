//! ROS 2 messages of any type, carried as CDR: what the ROS 2 bridge, bag playback and
//! tools use for ROS 2 types Nerve has no native equivalent of.
//!
//! A topic of such a type is a [`Ros2Cdr`] topic whose schema names the ROS 2 type, its
//! RIHS01 hash and its `ros2msg` definition ([`nerve::message::schema::Foreign`]); the
//! type hash is part of the topic's identity, so a publisher of another ROS 2 type (or
//! another version of the same one) is refused naming both.

use nerve::message::schema::{Foreign, ForeignKind, Schema};
use nerve::Message;

/// One ROS 2 message: the CDR bytes (with their 4-byte encapsulation header) follow as
/// the slice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Message)]
#[repr(C)]
#[message(name = "nerve_msgs/Ros2Cdr", elem = u8)]
pub struct Ros2Cdr {
    /// The ROS 2 source time stamp (ns since the Unix epoch; 0 when unknown).
    pub source_stamp_ns: i64,
}

/// The schema of ROS 2 type `name` (`pkg/msg/Name`) carried as [`Ros2Cdr`].
pub fn ros2_schema(name: &str, rihs01: &str, ros2msg: &str) -> Schema {
    Schema::foreign::<Ros2Cdr>(
        name,
        Foreign {
            kind: ForeignKind::Ros2Cdr,
            type_hash: rihs01.to_string(),
            definition: ros2msg.to_string(),
        },
    )
}

/// The ROS 2 type a schema describes, if it is a [`Ros2Cdr`] carrier: (name, RIHS01
/// hash, `ros2msg` definition).
pub fn ros2_type(schema: &Schema) -> Option<(&str, &str, &str)> {
    match &schema.foreign {
        Some(f) if f.kind == ForeignKind::Ros2Cdr => {
            Some((&schema.name, &f.type_hash, &f.definition))
        }
        _ => None,
    }
}

/// A goal, feedback or result of a ROS 2 action carried as CDR ([`Ros2Action`]): the
/// action type's RIHS01 hash, then the CDR of the message (`pkg/action/Name_Goal`,
/// `_Feedback` or `_Result`, with its 4-byte encapsulation header) as the slice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Message)]
#[repr(C)]
#[message(name = "nerve_msgs/Ros2ActionCdr", elem = u8)]
pub struct Ros2ActionCdr {
    /// The RIHS01 hash of the ROS 2 action type (`pkg/action/Name`): every Nerve action of
    /// a ROS 2 type is a [`Ros2Action`], so a server refuses a goal of another action type
    /// (or another version of it) by this hash, and a client a result.
    pub action_hash: [u8; 32],
}

/// Any ROS 2 action type, carried as CDR: what the ROS 2 bridge serves a ROS 2 action
/// server of a type with no Nerve form as, and what tools send goals of such a type with.
/// The type itself travels in every message ([`Ros2ActionCdr::action_hash`]).
pub struct Ros2Action;
impl nerve::action::Action for Ros2Action {
    const TYPE_NAME: &'static str = "nerve_msgs/Ros2Action";
    type Goal = Ros2ActionCdr;
    type Feedback = Ros2ActionCdr;
    type Result = Ros2ActionCdr;
    // a server says which ROS 2 action type it serves (nerve_ros2_map::action)
    const CARRIER: bool = true;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ros2_type_is_its_own_topic_type() {
        let a = ros2_schema("std_msgs/msg/String", "RIHS01_df66", "string data\n");
        let b = ros2_schema("std_msgs/msg/String", "RIHS01_0000", "string data\n");
        assert_ne!(a.type_info().layout_hash, b.type_info().layout_hash);
        assert_eq!(a.type_info().elem_size, 1);
        let back = Schema::decode(&a.encode()).unwrap();
        assert_eq!(
            ros2_type(&back),
            Some(("std_msgs/msg/String", "RIHS01_df66", "string data\n"))
        );
        assert_eq!(ros2_type(&Schema::of::<Ros2Cdr>()), None);
    }
}
