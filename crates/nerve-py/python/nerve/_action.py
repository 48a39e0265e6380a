"""Actions from Python: send goals and follow their feedback and result, or serve goals.
Goals, feedback and results are messages of their action type's schemas. The built-in
action types are ``nerve_msgs/Fibonacci`` and ``nerve_msgs/EchoAction``; a ROS 2 action
type is named as ROS 2 names it (``pkg/action/Name``): the Fibonacci actions are
``nerve_msgs/Fibonacci``, any other is carried as CDR with its definition from
AMENT_PREFIX_PATH, its goals, feedback and results given and read as dicts of their
fields (a Nerve server of such a type is offered to ROS 2 by ``nerve bridge ros2``)."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator, List, Optional, Tuple, Union

from . import _nerve
from ._messages import Message, message_class
from ._service import _payload

_ACTIONS = {a[0]: a[1:] for a in _nerve.builtin_action_types()}


class _Ros2Part:
    """The goal, feedback or result of a ROS 2 action type carried as CDR: given as a dict
    or keyword fields, read as a dict of its fields."""

    __slots__ = ("action", "part")

    def __init__(self, action: str, part: str) -> None:
        self.action = action
        self.part = part

    def __repr__(self) -> str:
        return f"<{self.action} {self.part}>"


Part = Union[type, _Ros2Part]


def _encode(ty: Part, value: Any, fields: dict) -> bytes:
    if not isinstance(ty, _Ros2Part):
        return _payload(ty, value, fields)
    if value is not None and not isinstance(value, dict):
        raise TypeError(f"expected a dict or keyword fields for {ty!r}, got {type(value).__name__}")
    return _nerve.ros2_action_encode(ty.action, ty.part, json.dumps(dict(value or {}, **fields)))


def _decode(ty: Part, payload: bytes) -> Any:
    if isinstance(ty, _Ros2Part):
        return _nerve.ros2_action_decode(ty.action, ty.part, payload)
    return _message(ty, payload)


def _types(action_type: str) -> Tuple[str, Part, Part, Part]:
    full = next((n for n in _ACTIONS if n == action_type or n.rsplit("/", 1)[-1] == action_type), None)
    if full is None and "/action/" in action_type:
        # a ROS 2 name: Nerve's own type, or the ROS 2 type carried as CDR
        native = _nerve.ros2_action_type(action_type)
        if native not in _ACTIONS:
            parts = (_Ros2Part(action_type, p) for p in ("goal", "feedback", "result"))
            return (action_type, *parts)
        full = native
    if full is None:
        raise ValueError(f"unknown action type {action_type!r}; built in: {', '.join(_ACTIONS)}")
    from . import message_type
    goal, feedback, result = (message_class(message_type(n)) for n in _ACTIONS[full])
    return full, goal, feedback, result


def _message(cls: type, payload: bytes) -> Message:
    buf = _nerve.heap_buffer(len(payload))
    buf.write_bytes(0, payload)
    return cls._wrap(buf)


class Goal:
    """A goal the server accepted: ``feedback()``, ``result(timeout)``, ``cancel()``."""

    __slots__ = ("_raw", "_client")

    def __init__(self, raw: Any, client: "ActionClient") -> None:
        self._raw = raw
        self._client = client

    @property
    def id(self) -> str:
        return self._raw.id

    def feedback(self) -> Optional[Message]:
        """The next feedback that arrived, or None."""
        b = self._raw.try_feedback()
        return None if b is None else _decode(self._client.feedback_type, b)

    def feedbacks(self) -> Iterator[Message]:
        """Every feedback that arrived so far."""
        while (f := self.feedback()) is not None:
            yield f

    def result(self, timeout: float = 10.0) -> Tuple[str, Message]:
        """Waits (GIL released) for the result: (state, result message). The state is
        ``succeeded``, ``aborted`` or ``canceled``. ActionError if the server dies or no
        result comes within ``timeout`` seconds."""
        state, b = self._raw.result(timeout)
        return state, _decode(self._client.result_type, b)

    def cancel(self) -> str:
        """Asks the server to cancel; returns the goal's state after the request."""
        return self._raw.cancel()


class ActionClient:
    """Sends goals of ``action_type`` to the action ``name``. Its feedback and results
    reach this client only."""

    def __init__(self, node: Any, name: str, action_type: str) -> None:
        self.action_type, self.goal_type, self.feedback_type, self.result_type = _types(action_type)
        self._raw = _nerve.ActionClientRaw(node._node, name, self.action_type)

    def wait_for_server(self, timeout: float = 1.0) -> bool:
        return self._raw.wait_for_server(timeout)

    def send_goal(self, goal: Any = None, **fields: Any) -> Goal:
        """Sends a goal (a message, a dict or keyword fields) and waits for its
        acceptance; ActionError with the server's reason if it is rejected."""
        return Goal(self._raw.send_goal(_encode(self.goal_type, goal, fields)), self)


class ServerGoal:
    """A goal being worked on: read ``goal``, report ``feedback``, end it."""

    __slots__ = ("_raw", "_server")

    def __init__(self, raw: Any, server: "ActionServer") -> None:
        self._raw = raw
        self._server = server

    @property
    def id(self) -> str:
        return self._raw.id

    @property
    def goal(self) -> Message:
        return _decode(self._server.goal_type, self._raw.goal())

    @property
    def is_canceling(self) -> bool:
        """Whether its client asked to cancel it: end it with ``canceled`` soon."""
        return self._raw.is_canceling

    def feedback(self, feedback: Any = None, **fields: Any) -> None:
        self._raw.feedback(_encode(self._server.feedback_type, feedback, fields))

    def succeed(self, result: Any = None, **fields: Any) -> None:
        self._raw.end("succeeded", _encode(self._server.result_type, result, fields))

    def abort(self, result: Any = None, **fields: Any) -> None:
        self._raw.end("aborted", _encode(self._server.result_type, result, fields))

    def canceled(self, result: Any = None, **fields: Any) -> None:
        self._raw.end("canceled", _encode(self._server.result_type, result, fields))


class ActionServer:
    """Serves the action ``name`` of ``action_type``. ``policy``: reject (one goal at a
    time), queue (up to ``max`` waiting), preempt (a new goal cancels the running one) or
    parallel (up to ``max`` at once).

    With ``on_goal`` or ``on_accepted`` (see ``handle_pending``) an executor spinning
    its node serves it: it sleeps until a goal, cancel or result request arrives, then
    handles them. Work on long goals from other callbacks (e.g. a timer) through
    ``goals()``. Without callbacks, call ``wait`` and ``handle_pending`` yourself."""

    def __init__(self, node: Any, name: str, action_type: str, policy: str = "queue",
                 max: int = 8, on_goal: Optional[Callable[[Message], Optional[str]]] = None,
                 on_accepted: Optional[Callable[["ServerGoal"], None]] = None) -> None:
        self.action_type, self.goal_type, self.feedback_type, self.result_type = _types(action_type)
        self._raw = _nerve.ActionServerRaw(node._node, name, self.action_type, policy, max)
        self.on_goal = on_goal
        self.on_accepted = on_accepted

    def wait(self, timeout: float = 1.0) -> bool:
        """Waits (GIL released) for a goal, cancel or result request."""
        return self._raw.wait(timeout)

    def handle_pending(self, on_goal: Optional[Callable[[Message], Optional[str]]] = None,
                       on_accepted: Optional[Callable[["ServerGoal"], None]] = None) -> int:
        """Handles waiting requests. ``on_goal(goal)`` returns None to accept a goal or a
        reason (str) to reject it; without it every goal the policy admits is accepted.
        ``on_accepted(server_goal)`` gets each accepted goal (end quick goals there; a
        queued goal is worked on once it shows in ``goals()``)."""
        def cb(b: bytes) -> Optional[str]:
            try:
                goal = _decode(self.goal_type, b)
            except ValueError as e:
                return str(e)  # a goal of another ROS 2 action type is rejected, named
            return None if on_goal is None else on_goal(goal)
        if on_accepted is None:
            return self._raw.handle_pending(cb)
        return self._raw.handle_pending(cb, lambda g: on_accepted(ServerGoal(g, self)))

    def _handle_pending(self) -> int:
        """The executor's call: handle_pending with this server's callbacks."""
        return self.handle_pending(self.on_goal, self.on_accepted)

    def goals(self) -> List[ServerGoal]:
        """The goals being worked on (executing or canceling), oldest first."""
        return [ServerGoal(g, self) for g in self._raw.goals()]
