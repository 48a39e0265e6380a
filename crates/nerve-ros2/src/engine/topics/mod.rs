//! ROS 2 → Nerve and Nerve → ROS 2 topics, demand-driven on both sides:
//! - [`inbound`]: every ROS 2 topic with publishers (other than bridges) gets a Nerve
//!   publisher of the mapped type; its ROS 2 reader exists only while the Nerve topic has
//!   subscribers.
//! - [`outbound`]: every Nerve topic with publishers (other than bridges) whose type has
//!   a ROS 2 form gets a ROS 2 writer; the Nerve subscriber that feeds it exists only
//!   while ROS 2 subscriptions it serves are in the graph.
//!
//! Whichever side starts first: the Nerve publisher takes the overflow policy a Nerve
//! subscriber already fixed ([`route_qos`]), a ROS 2 reader is made again when a
//! publisher that offers less joins ([`hears`]), and a ROS 2 topic whose name Nerve uses
//! for its own type crosses under `/_ros2` ([`nerve_topic`]).

pub(crate) mod inbound;
pub(crate) mod outbound;

use crate::dds::RosQos;
use crate::types::TypeRoute;
use nerve::{Node, Overflow, RawPublisher};
use std::borrow::Cow;
use std::time::Duration;

/// How long a route outlives its last ROS 2 publisher (a restarting node keeps its
/// subscribers).
const GRACE: Duration = Duration::from_secs(2);

/// Where ROS 2 topics whose name Nerve uses for a topic of its own type cross to.
pub(crate) const RENAMED_PREFIX: &str = "/_ros2";

/// ROS 2 topics whose name Nerve uses for its own type: `/parameter_events` carries
/// `rcl_interfaces/msg/ParameterEvent` in ROS 2 and [`nerve::param::ParamEvent`] in
/// Nerve, which no conversion maps exactly (ROS 2's event has no old values).
const NERVE_OWNED: &[&str] = &[nerve::param::EVENTS_TOPIC];

/// The Nerve topic a ROS 2 topic crosses to: its own name, or under [`RENAMED_PREFIX`]
/// where Nerve uses the name for a type of its own (both then live side by side,
/// whichever side starts first).
pub(crate) fn nerve_topic(ros_topic: &str) -> Cow<'_, str> {
    if NERVE_OWNED.contains(&ros_topic) {
        Cow::Owned(format!("{RENAMED_PREFIX}{ros_topic}"))
    } else {
        Cow::Borrowed(ros_topic)
    }
}

/// The Nerve QoS of the publisher that carries ROS 2 publishers with `ros` into Nerve
/// topic `topic`: theirs ([`RosQos::nerve`]), within what the Nerve topic was created
/// with if it exists (a Nerve subscriber made first fixed its overflow policy, its
/// largest depth and its history: an endpoint that asks otherwise is refused).
pub(crate) fn route_qos(node: &Node, topic: &str, ros: RosQos) -> nerve::Qos {
    let mut qos = ros.nerve();
    let Ok(info) = nerve::introspect::topic_info(node, topic) else {
        return qos;
    };
    let back_pressure = info.overflow == "back-pressure";
    if back_pressure != matches!(qos.overflow, Overflow::BackPressure { .. }) {
        qos.overflow = if back_pressure {
            nerve::Qos::reliable().overflow
        } else {
            Overflow::DropOldest
        };
    }
    qos.depth = qos.depth.clamp(1, info.max_depth.max(1));
    qos.history = qos.history.min(info.history);
    if back_pressure {
        // under back-pressure the history fits in the queue
        qos.history = qos.history.min(qos.depth);
    }
    qos
}

/// Opens the Nerve publisher of a ROS 2 → Nerve route of ROS 2 topic `ros_topic` (on
/// [`nerve_topic`], with [`route_qos`]).
pub(crate) fn open_publisher(
    node: &Node,
    ros_topic: &str,
    route: &TypeRoute,
    ros: RosQos,
) -> Result<RawPublisher, nerve::TopicError> {
    let topic = nerve_topic(ros_topic);
    RawPublisher::create(node, &topic, &route.schema, route_qos(node, &topic, ros))
}

/// Whether a ROS 2 reader asking `reader` hears a publisher
/// offering `writer`: it asks no more than the publisher offers.
pub(crate) fn hears(reader: RosQos, writer: RosQos) -> bool {
    (!reader.reliable || writer.reliable) && (!reader.transient_local || writer.transient_local)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_nerve_uses_for_its_own_types_are_renamed() {
        assert_eq!(nerve_topic("/parameter_events"), "/_ros2/parameter_events");
        assert_eq!(nerve_topic("/chatter"), "/chatter");
        assert_eq!(nerve_topic("/ns/parameter_events"), "/ns/parameter_events");
        // the rename never lands on a name ROS 2 could also publish and Nerve forward
        assert!(nerve_topic(nerve::param::EVENTS_TOPIC).starts_with("/_ros2/"));
    }

    #[test]
    fn a_reader_hears_publishers_that_offer_at_least_what_it_asks() {
        let q = |reliable, transient_local| RosQos {
            reliable,
            transient_local,
            depth: 10,
        };
        assert!(hears(q(true, true), q(true, true)));
        assert!(hears(q(false, false), q(true, true)));
        assert!(
            !hears(q(true, false), q(false, false)),
            "reliable asks too much"
        );
        assert!(
            !hears(q(false, true), q(false, false)),
            "transient local asks too much"
        );
    }
}
