"""The standard service types (``nerve_msgs``): ``srv.AddTwoInts``, ``srv.Trigger``..."""

from . import _nerve
from ._service import ServiceType

_all = {}
for _name, _req, _resp in _nerve.builtin_service_types():
    _all[_name.rsplit("/", 1)[-1]] = ServiceType(_name, _req, _resp)
globals().update(_all)
__all__ = sorted(_all)
