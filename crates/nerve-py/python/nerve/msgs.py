"""The standard message types (``nerve_msgs``) as classes: ``msgs.Imu``, ``msgs.PointCloud``...

Each class reads and writes the message's memory in place; see ``nerve.Message``.
"""

from . import _nerve
from ._messages import message_class

_all = {}
for _mt in _nerve.builtin_message_types():
    _cls = message_class(_mt)
    _all[_mt.name.rsplit("/", 1)[-1]] = _cls
globals().update(_all)
__all__ = sorted(_all)
