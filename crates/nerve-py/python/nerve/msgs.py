"""The standard message types (``nerve_msgs``) as classes: ``msgs.Imu``, ``msgs.PointCloud``...

Each class reads and writes the message's memory in place; see ``nerve.Message``.
Managed nodes' messages are here too, under ROS 2's names: ``TransitionEvent`` (published
on ``<node>/transition_event``), the structs ``State``, ``Transition`` and
``TransitionDescription`` inside it and the lifecycle services' payloads, and the
services in ``nerve.srv`` (``ChangeState``, ``GetState``, ``GetAvailableStates``,
``GetAvailableTransitions``).
"""

from . import _nerve
from ._messages import message_class, struct_class

_all = {}
for _mt in _nerve.builtin_message_types():
    _cls = message_class(_mt)
    _all[_mt.name.rsplit("/", 1)[-1]] = _cls

# the lifecycle messages under ROS 2's names (lifecycle_msgs): the event, and the structs
# inside the lifecycle messages (views: read them from a message, set them with a dict)
_all["TransitionEvent"] = _all.pop("LifecycleTransitionEvent")
_event_fields = {f[0]: f[2] for f in _all["TransitionEvent"]._type.describe()[0][3]}
_all["State"] = struct_class(_event_fields["start_state"])
_all["Transition"] = struct_class(_event_fields["transition"])
_all["TransitionDescription"] = struct_class(
    _all["GetAvailableTransitionsResponse"]._type.describe()[1])
globals().update(_all)
__all__ = sorted(_all)
