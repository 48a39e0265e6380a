"""Nerve from Python: nodes, topics, services, timers and a shared-memory tensor pool.

Messages are objects over the sample's memory: a received message reads shared memory in
place, a loan (``publisher.loan()``) is written in place, arrays and slices are numpy
views (read-only on the receiving side). Every view keeps its memory alive. Blocking
waits release the GIL and are interrupted by Ctrl-C.

Objects made from a Context belong to the thread that made it (Nerve's ports are
single-threaded): create one Context per thread. Messages, arrays and tensors may be
read and dropped on any thread.

Example::

    import nerve
    from nerve import msgs

    ctx = nerve.Context()
    node = ctx.node("talker")
    pub = node.create_publisher(msgs.CmdVel, "/cmd_vel")
    sub = node.create_subscription(msgs.CmdVel, "/cmd_vel")
    m = pub.loan()
    m.linear = 0.5
    m.send()
    print(sub.recv(timeout=1.0).linear)
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterator, List, Optional, Union

from . import _nerve
from ._messages import Message, Struct, message_class, message_of
from ._nerve import __version__
from ._nerve import (
    CallError, ClosedError, ContextError, Header, LoanError, MessageType, NerveError,
    NodeError, PublishError, Qos, RecvError, SchemaError, ServeError, ServiceError,
    TensorError, TopicError, WaitError, mono_ns, now_ns, ParamError, ActionError, Parameters,
    ParamClient,
)
from ._nerve import LifecycleError
from ._lifecycle import LifecyclePublisher, ManagedNode

__all__ = [
    "__version__", "Context", "Node", "Publisher", "Subscription", "Timer", "Executor", "Qos", "Header",
    "Message", "MessageType", "message_type", "spin", "spin_once", "mono_ns", "now_ns",
    "NerveError", "ContextError", "NodeError", "TopicError", "LoanError", "PublishError",
    "RecvError", "ServiceError", "CallError", "ServeError", "SchemaError", "TensorError",
    "WaitError", "ClosedError", "msgs", "srv", "ServiceType", "Client", "Server", "PendingCall",
    "ParamError", "ActionError", "Parameters", "ParamClient", "ActionClient", "ActionServer",
    "Goal", "ServerGoal", "ManagedNode", "LifecyclePublisher", "LifecycleError",
]

_BUILTIN = {mt.name: mt for mt in _nerve.builtin_message_types()}

MessageLike = Union[type, MessageType, str]


class _Closed:
    """Stands in for a closed endpoint: any use raises ClosedError naming it."""

    __slots__ = ("_what",)

    def __init__(self, what: str) -> None:
        self._what = what

    def __getattr__(self, name: str) -> Any:
        raise ClosedError(f"this {self._what} was closed")


class _Closable:
    """close() releases the endpoint's ports now; using it afterwards raises ClosedError.
    Also a context manager."""

    __slots__ = ()
    _raw_attr = ""

    def close(self) -> None:
        setattr(self, self._raw_attr, _Closed(type(self).__name__))

    @property
    def closed(self) -> bool:
        return isinstance(getattr(self, self._raw_attr), _Closed)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def message_type(ty: MessageLike) -> MessageType:
    """The MessageType of a message class, a MessageType, a built-in type's name, or a
    ROS 2 type's name (``pkg/msg/Name``): as the ROS 2 bridge carries it, a standard type
    Nerve holds exactly is Nerve's own, any other is CDR with its definition from
    AMENT_PREFIX_PATH (build one with ``Type._from_ros2(fields)``, read it with
    ``msg._ros2()``)."""
    if isinstance(ty, MessageType):
        return ty
    if isinstance(ty, type) and issubclass(ty, Message) and ty._type is not None:
        return ty._type
    if isinstance(ty, str):
        try:
            return _BUILTIN[ty]
        except KeyError:
            pass
        if ty.count("/") == 2:
            try:
                return _nerve.ros2_message_type(ty)
            except ValueError as e:
                raise TypeError(f"unknown message type {ty!r}: not built in, and {e}") from None
        raise TypeError(f"unknown message type {ty!r}; known: {', '.join(sorted(_BUILTIN))}, "
                        "or a ROS 2 type (pkg/msg/Name)")
    raise TypeError(f"expected a message class, a MessageType or a type name, got {ty!r}")


class Context:
    """A Nerve domain seen from this process (``domain`` defaults to NERVE_DOMAIN or 0)."""

    def __init__(self, domain: Optional[int] = None, *, config: Optional[str] = None,
                 state_dir: Optional[str] = None, network: Optional[bool] = None,
                 sim_time: Optional[bool] = None) -> None:
        self._ctx = _nerve.Context(domain, config=config, state_dir=state_dir, network=network,
                                   sim_time=sim_time)

    @property
    def domain(self) -> int:
        return self._ctx.domain

    @property
    def sim_time(self) -> bool:
        """Whether this context follows a simulation clock on ``/clock``."""
        return self._ctx.sim_time

    def now_ns(self) -> int:
        """Robot time now on this context's clock, ns since the Unix epoch (simulation
        time reads 0 until the first clock message)."""
        return self._ctx.now_ns()

    def node(self, name: str) -> "Node":
        """Creates a node."""
        return Node(self, self._ctx.node(name))

    def __repr__(self) -> str:
        return repr(self._ctx)


class Node:
    """Owns publishers, subscriptions, timers, clients and servers."""

    def __init__(self, context: Context, raw: Any) -> None:
        self.context = context
        self._node = raw
        self._subscriptions: List[Subscription] = []
        self._timers: List[Timer] = []
        self._servers: List[Any] = []
        # action servers with callbacks and managed nodes: served by executors
        self._served: List[Any] = []

    @property
    def name(self) -> str:
        return self._node.name

    def create_publisher(self, ty: MessageLike, topic: str, qos: Optional[Qos] = None) -> "Publisher":
        """A publisher of ``ty`` on ``topic``."""
        mt = message_type(ty)
        return Publisher(self._node._publisher(mt, topic, qos), message_class(mt))

    def create_subscription(self, ty: Optional[MessageLike], topic: str,
                            callback: Optional[Callable[[Any], None]] = None,
                            qos: Optional[Qos] = None, wait: str = "adaptive") -> "Subscription":
        """A subscription to ``topic``. With ``ty`` None the topic's own type is used (it
        must exist and carry a schema). ``callback`` runs in an executor that spins this
        node; ``wait`` is how ``recv`` waits: adaptive, spin, block or predictive."""
        mt = None if ty is None else message_type(ty)
        raw = self._node._subscription(mt, topic, qos, wait)
        sub = Subscription(raw, message_class(raw.message_type), callback)
        if callback is not None:
            self._subscriptions.append(sub)
        return sub

    def create_timer(self, period: float, callback: Callable[[], None], oneshot: bool = False) -> "Timer":
        """A timer firing every ``period`` seconds on absolute deadlines (once if
        ``oneshot``); it runs in an executor that spins this node."""
        t = Timer(period, callback, oneshot, self._timers)
        self._timers.append(t)
        return t

    def create_client(self, srv_type: "ServiceType", name: str,
                      max_payload: Optional[int] = None) -> "Client":
        """A client of the service ``name`` (``srv_type``: e.g. ``nerve.srv.AddTwoInts``)."""
        raw = self._node._client(name, srv_type.name, srv_type.request._type,
                                 srv_type.response._type, max_payload)
        return Client(raw, srv_type)

    def create_service(self, srv_type: "ServiceType", name: str, callback: Callable[[Any], Any],
                       max_payload: Optional[int] = None) -> "Server":
        """A server of ``name`` answering with ``callback(request) -> response``; it runs
        in an executor that spins this node (or call ``server.spin_once()``)."""
        raw = self._node._server(name, srv_type.name, srv_type.request._type,
                                 srv_type.response._type, max_payload)
        server = Server(raw, srv_type, callback)
        self._servers.append(server)
        return server

    def create_parameters(self, allow_undeclared: bool = False, files: Optional[List[str]] = None,
                          from_env: bool = True) -> "Parameters":
        """This node's parameters (read from the files NERVE_PARAM_FILES names, then
        ``files``), served to ``nerve param`` and other nodes by ``params.serve()``."""
        return Parameters(self._node, allow_undeclared, list(files or []), from_env)

    def create_param_client(self, target: str, timeout: float = 2.0) -> "ParamClient":
        """A client of the parameters of the node ``target`` (e.g. ``/robot1/driver``)."""
        return ParamClient(self._node, target, timeout)

    def create_action_client(self, name: str, action_type: str) -> "ActionClient":
        """A client of the action ``name`` (``action_type``: e.g. ``Fibonacci``)."""
        return ActionClient(self, name, action_type)

    def create_action_server(self, name: str, action_type: str, policy: str = "queue",
                             max: int = 8,
                             on_goal: Optional[Callable[[Any], Optional[str]]] = None,
                             on_accepted: Optional[Callable[["ServerGoal"], None]] = None,
                             ) -> "ActionServer":
        """A server of the action ``name`` (see ``ActionServer``). Given ``on_goal`` or
        ``on_accepted`` it runs in an executor that spins this node; without, call its
        ``wait`` and ``handle_pending``."""
        server = ActionServer(self, name, action_type, policy, max, on_goal=on_goal,
                              on_accepted=on_accepted)
        if on_goal is not None or on_accepted is not None:
            self._served.append(server)
        return server

    def destroy_service(self, server: "Server") -> None:
        if server in self._servers:
            self._servers.remove(server)

    def destroy_action_server(self, server: "ActionServer") -> None:
        """Takes an action server out of the executors that spin this node."""
        if server in self._served:
            self._served.remove(server)

    def destroy_subscription(self, sub: "Subscription") -> None:
        if sub in self._subscriptions:
            self._subscriptions.remove(sub)

    def destroy_timer(self, timer: "Timer") -> None:
        timer.cancel()
        if timer in self._timers:
            self._timers.remove(timer)

    def __repr__(self) -> str:
        return repr(self._node)


class Publisher(_Closable):
    """Publishes one message type on one topic."""

    __slots__ = ("_pub", "_cls")
    _raw_attr = "_pub"

    def __init__(self, raw: Any, cls: type) -> None:
        self._pub = raw
        self._cls = cls

    @property
    def topic(self) -> str:
        return self._pub.topic

    @property
    def message_class(self) -> type:
        return self._cls

    def loan(self, elems: int = 0) -> Any:
        """A writable message in shared memory (``elems`` slice elements for header +
        slice types); fill it in place, then ``send()`` it."""
        return self._cls._wrap(self._pub.loan(self._cls._nbytes(elems)), self._pub)

    def send(self, msg: Message) -> None:
        """Sends a loan of this publisher (refused while views of it exist)."""
        if not isinstance(msg, Message) or getattr(msg, "_pub", None) is None:
            raise TypeError("send() takes a loan of this publisher; publish() copies other messages")
        buf = msg._buf
        self._pub.send(buf)

    def publish(self, msg: Any = None, **fields: Any) -> None:
        """Publishes a message of this type (copied), a dict of fields, or fields as
        keyword arguments (unknown fields and out-of-range values raise). A frozen
        Tensor publishes its descriptor (``user=`` sets the descriptor's user field)."""
        if isinstance(msg, Message):
            if msg._type is not self._cls._type and msg._type != self._cls._type:
                raise TypeError(f"publisher of {self._cls._name} cannot publish a {msg._name}")
            self._pub.publish_buffer(msg._buf)
            return
        if hasattr(msg, "_nerve_descriptor"):  # a frozen tensor: its descriptor
            user = fields.pop("user", 0)
            if fields:
                raise TypeError(f"a tensor is published with user=... only, not {sorted(fields)}")
            _nerve.tensor_publish(self._pub, msg._buf, user)
            return
        if msg is not None and not isinstance(msg, dict):
            raise TypeError(f"expected a {self._cls._name}, a dict or keyword fields, got {type(msg).__name__}")
        m = message_of(self._cls, msg, fields)
        self._pub.publish_buffer(m._buf)

    def publish_bytes(self, data: bytes) -> None:
        """Publishes raw payload bytes (checked against the layout)."""
        self._pub.publish_bytes(data)

    def wait_for_subscribers(self, n: int = 1, timeout: float = 1.0) -> bool:
        """Waits until ``n`` subscribers are connected."""
        return self._pub.wait_for_subscribers(n, timeout)

    def __repr__(self) -> str:
        return repr(self._pub)


class Subscription(_Closable):
    """Receives one topic: ``recv``, ``try_recv``, iteration, or a callback."""

    __slots__ = ("_sub", "_cls", "callback", "__weakref__")
    _raw_attr = "_sub"

    def __init__(self, raw: Any, cls: type, callback: Optional[Callable[[Any], None]]) -> None:
        self._sub = raw
        self._cls = cls
        self.callback = callback

    @property
    def message_class(self) -> type:
        return self._cls

    def recv(self, timeout: Optional[float] = None) -> Any:
        """The next message, waiting up to ``timeout`` seconds (None: forever); None on
        timeout."""
        b = self._sub.recv(timeout)
        return None if b is None else self._cls._wrap(b)

    def try_recv(self) -> Any:
        """The next message if one is queued, else None."""
        b = self._sub.try_recv()
        return None if b is None else self._cls._wrap(b)

    def __iter__(self) -> Iterator[Any]:
        while True:
            yield self.recv()

    def stats(self) -> dict:
        return self._sub.stats()

    def publisher_count(self) -> int:
        return self._sub.publisher_count()

    def __repr__(self) -> str:
        return repr(self._sub)


class Timer:
    """A periodic (or one-shot) timer on absolute deadlines, run by an executor; ticks
    missed while a callback overran are skipped and counted in ``skipped``. Its schedule
    lives in Rust: the executor sleeps to its deadline there."""

    def __init__(self, period: float, callback: Callable[[], None], oneshot: bool,
                 owner: Optional[list] = None) -> None:
        if not period > 0:
            raise ValueError(f"timer period must be > 0 seconds, got {period}")
        # the node's timer list: a fired one-shot timer leaves it (so one-shot timers
        # made in a loop do not pile up) and reset() puts it back
        self._owner = owner
        self._raw = _nerve.TimerRaw(period, oneshot)
        self.callback = callback
        self.oneshot = oneshot

    @property
    def period_ns(self) -> int:
        return self._raw.period_ns

    @property
    def next_ns(self) -> Optional[int]:
        """The next deadline (monotonic ns); None while cancelled or once a one-shot
        timer fired."""
        return self._raw.next_ns

    @property
    def fired(self) -> int:
        return self._raw.fired

    @property
    def skipped(self) -> int:
        return self._raw.skipped

    @property
    def cancelled(self) -> bool:
        return self._raw.next_ns is None

    def cancel(self) -> None:
        self._raw.cancel()

    def reset(self) -> None:
        """Re-arms the timer one period from now (also a fired one-shot timer)."""
        self._raw.reset()
        if self._owner is not None and self not in self._owner:
            self._owner.append(self)

    def _fired(self) -> None:
        """Runs the callback of a tick the executor fired."""
        if self.oneshot and self._owner is not None and self in self._owner:
            self._owner.remove(self)
        self.callback()


class Executor:
    """Runs the callbacks of its nodes (subscriptions, timers, service servers, action
    servers with callbacks, the lifecycle services of managed nodes) on this thread. Between callbacks it sleeps in Rust with the
    GIL released, on all of them at once (their doorbells, futex_waitv) up to the next
    timer deadline. Nothing is polled: an idle executor wakes only for the transport's
    once-a-second re-check and, on the main thread, 5 times a second to run signal
    handlers (Ctrl-C: KeyboardInterrupt ends ``spin``). ``shutdown()`` wakes it from any
    thread.

    Timers sleep in the kernel until their deadline (a wake-up is typically 50-100 us
    late on a VM, and costs no CPU while waiting); ``precise_timers=True`` spins the last
    stretch before each deadline instead (tens of us of CPU per tick, microsecond
    accuracy)."""

    def __init__(self, precise_timers: bool = False) -> None:
        self._nodes: List[Node] = []
        self._waiter = _nerve.Waiter(precise_timers)
        self._stop = False

    def add_node(self, node: Node) -> None:
        if node not in self._nodes:
            self._nodes.append(node)

    add = add_node

    def remove_node(self, node: Node) -> None:
        self._nodes.remove(node)

    def shutdown(self) -> None:
        """Makes ``spin`` return after the current callback (from any thread)."""
        self._stop = True
        self._waiter.wake()

    def _dispatch(self, subs: List[Subscription], servers: List[Any], served: List[Any]) -> int:
        """Runs the callbacks of the ready entities the native loop hands over; returns
        how many ran."""
        ran = 0
        try:
            for s in subs:
                # at most a queue's worth per round: one busy topic cannot starve others
                for _ in range(64):
                    m = s.try_recv()
                    if m is None:
                        break
                    s.callback(m)
                    ran += 1
            for v in servers:
                ran += v._handle_pending()
            for a in served:
                ran += a._handle_pending()
        except ClosedError:
            # an endpoint was closed: forget it (and the others closed with it)
            for node in self._nodes:
                node._subscriptions = [s for s in node._subscriptions if not s.closed]
                node._servers = [v for v in node._servers if not v.closed]
        return ran

    def spin_once(self, timeout: Optional[float] = None) -> int:
        """Runs what is ready, or waits up to ``timeout`` seconds (None: forever) for
        something to become ready and runs it. Returns the number of callbacks run."""
        limit = None if timeout is None else mono_ns() + max(0, int(timeout * 1e9))
        return self._waiter.run(self, limit, _on_main_thread(), True)

    def spin(self) -> None:
        """Runs callbacks until ``shutdown()`` or Ctrl-C (KeyboardInterrupt)."""
        self._stop = False
        self._waiter.run(self, None, _on_main_thread())

    def spin_for(self, seconds: float) -> None:
        """Runs callbacks for ``seconds``."""
        self._stop = False
        self._waiter.run(self, mono_ns() + max(0, int(seconds * 1e9)), _on_main_thread())


def _on_main_thread() -> bool:
    """Whether this is Python's main thread, the one that runs signal handlers."""
    return threading.current_thread() is threading.main_thread()


def spin_once(node: Node, timeout: Optional[float] = None) -> int:
    """Runs one round of ``node``'s callbacks (see ``Executor.spin_once``)."""
    ex = Executor()
    ex.add_node(node)
    return ex.spin_once(timeout)


def spin(node: Node) -> None:
    """Runs ``node``'s callbacks until Ctrl-C."""
    ex = Executor()
    ex.add_node(node)
    ex.spin()


from ._service import Client, PendingCall, Server, ServiceType  # noqa: E402
from ._action import ActionClient, ActionServer, Goal, ServerGoal  # noqa: E402
from . import msgs, srv  # noqa: E402  (needs the classes above)
from ._tensor import Tensor, TensorMut, TensorPool  # noqa: E402

TensorDescriptor = message_class(_BUILTIN["nerve/TensorDescriptor"])
__all__ += ["TensorPool", "Tensor", "TensorMut", "TensorDescriptor"]
