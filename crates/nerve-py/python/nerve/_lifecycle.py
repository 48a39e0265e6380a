"""Managed (lifecycle) nodes: ROS 2's node lifecycle with callbacks in Python.

A ``ManagedNode`` starts unconfigured. Transitions (``configure``, ``activate``,
``deactivate``, ``cleanup``, ``shutdown``) run its callbacks, which get the label of the
state the transition started from and return None or True (success), False (failure:
back where it started) or raise (error: ``on_error`` runs, then the node is unconfigured
if it succeeds, finalized otherwise). ``nerve lifecycle set NODE configure`` and
``nerve launch`` (``ready = { lifecycle = "active" }``) drive it through its
``<node>/change_state`` service: an executor spinning its node answers that and the other
lifecycle services (``get_state``, ``get_available_states``,
``get_available_transitions``, ``get_transition_graph``), running the callbacks on the
executor's thread; without one, call ``serve()`` or ``handle_pending()``. Every step is
published on ``<node>/transition_event`` (``msgs.TransitionEvent``).

Example::

    node = ctx.node("camera")
    cam = nerve.ManagedNode(node)
    frames = cam.create_publisher(msgs.CmdVel, "/frames")

    @cam.on_configure
    def configure(previous):
        return True

    cam.trigger("configure"); cam.trigger("activate")
    frames.publish(linear=1.0)      # sent only while active

    ex = nerve.Executor(); ex.add_node(node)
    ex.spin()                       # answers `nerve lifecycle set /camera deactivate`
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from . import _nerve

Callback = Callable[[str], Any]


class LifecyclePublisher:
    """A publisher that sends only while its managed node is active; other samples are
    dropped and counted (``dropped``)."""

    __slots__ = ("publisher", "_gate", "dropped")

    def __init__(self, publisher: Any, gate: Any) -> None:
        self.publisher = publisher
        self._gate = gate
        self.dropped = 0

    @property
    def is_active(self) -> bool:
        """Whether samples go out now."""
        return self._gate.is_active()

    @property
    def topic(self) -> str:
        return self.publisher.topic

    def publish(self, msg: Any = None, **fields: Any) -> bool:
        """Publishes like ``Publisher.publish`` if the node is active: True when sent,
        False when dropped."""
        if not self._gate.is_active():
            self.dropped += 1
            return False
        self.publisher.publish(msg, **fields)
        return True


class ManagedNode:
    """A node with ROS 2's lifecycle (see the module documentation). An executor that
    spins ``node`` serves its lifecycle services."""

    def __init__(self, node: Any) -> None:
        self.node = node
        self._raw = _nerve.ManagedNodeRaw(node._node)
        # served by executors of the node, as an action server with callbacks
        node._served.append(self)

    @property
    def name(self) -> str:
        """The node's full name."""
        return self._raw.name

    @property
    def state(self) -> str:
        """The current state's label (``unconfigured``, ``active``, ...)."""
        return self._raw.state

    @property
    def state_id(self) -> int:
        """The current state's ROS 2 id."""
        return self._raw.state_id

    @property
    def is_active(self) -> bool:
        return self._raw.state == "active"

    @property
    def last_error(self) -> Optional[str]:
        """The last exception a callback raised, as text."""
        return self._raw.last_error

    def available_transitions(self) -> List[str]:
        """The labels of the transitions valid now."""
        return self._raw.available_transitions()

    def _hook(self, hook: str, callback: Callback) -> Callback:
        self._raw.set_callback(hook, callback)
        return callback

    def on_configure(self, callback: Callback) -> Callback:
        """Runs in ``configuring``; usable as a decorator."""
        return self._hook("configure", callback)

    def on_activate(self, callback: Callback) -> Callback:
        """Runs in ``activating``."""
        return self._hook("activate", callback)

    def on_deactivate(self, callback: Callback) -> Callback:
        """Runs in ``deactivating``."""
        return self._hook("deactivate", callback)

    def on_cleanup(self, callback: Callback) -> Callback:
        """Runs in ``cleaningup``."""
        return self._hook("cleanup", callback)

    def on_shutdown(self, callback: Callback) -> Callback:
        """Runs in ``shuttingdown``."""
        return self._hook("shutdown", callback)

    def on_error(self, callback: Callback) -> Callback:
        """Runs in ``errorprocessing`` after a callback raised (or returned "error")."""
        return self._hook("error", callback)

    def trigger(self, transition: str) -> str:
        """Runs a transition by label now; returns the state reached. Raises
        LifecycleError when refused (naming the state and the valid transitions) or when
        its callback fails or raises (naming where the node ended up)."""
        return self._raw.trigger(transition)

    def configure(self) -> str:
        return self.trigger("configure")

    def activate(self) -> str:
        return self.trigger("activate")

    def deactivate(self) -> str:
        return self.trigger("deactivate")

    def cleanup(self) -> str:
        return self.trigger("cleanup")

    def shutdown(self) -> str:
        return self.trigger("shutdown")

    def create_publisher(self, ty: Any, topic: str, qos: Any = None) -> LifecyclePublisher:
        """A publisher of ``ty`` on ``topic`` gated by this node's state."""
        return LifecyclePublisher(self.node.create_publisher(ty, topic, qos), self._raw.gate())

    def handle_pending(self) -> int:
        """Answers the lifecycle requests waiting now (from a timer, or a loop)."""
        return self._raw.handle_pending()

    def serve(self, timeout: float = 1.0) -> int:
        """Waits up to ``timeout`` seconds for lifecycle requests and answers them."""
        return self._raw.serve(timeout)

    def _handle_pending(self) -> int:
        """The executor's call: answers the waiting lifecycle requests."""
        return self._raw.handle_pending()

    def __repr__(self) -> str:
        return f"ManagedNode({self.name!r}, {self.state})"
