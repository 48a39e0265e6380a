"""Services from Python: servers with callbacks, synchronous and pipelined calls, and
asyncio-friendly calls. Requests and responses are messages of their types' schemas."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Optional, Union

from . import _nerve
from ._messages import Message, message_class, message_of


class ServiceType:
    """A service type: a name plus request and response message classes."""

    def __init__(self, name: str, request: Any, response: Any) -> None:
        from . import message_type
        self.name = name
        self.request = message_class(message_type(request))
        self.response = message_class(message_type(response))

    @classmethod
    def ros2(cls, name: str) -> "ServiceType":
        """The service type ROS 2 service type ``name`` (``pkg/srv/Name``) crosses as, as
        the ROS 2 bridge serves it: a standard one is Nerve's own (``std_srvs/srv/SetBool``
        is ``nerve_msgs/SetBool``), any other is carried as CDR with its definition from
        AMENT_PREFIX_PATH (build requests with ``request._from_ros2(fields)``, read
        responses with ``_ros2()``). ValueError if it is found nowhere."""
        return cls(*_nerve.ros2_service_type(name))

    def __repr__(self) -> str:
        return f"ServiceType({self.name}: {self.request._name} -> {self.response._name})"


def _payload(cls: type, value: Any, fields: dict) -> bytes:
    """The payload bytes of a message of ``cls`` given as a message, a dict or fields."""
    if isinstance(value, Message):
        if value._type != cls._type:
            raise TypeError(f"expected a {cls._name}, got a {value._name}")
        return value._bytes()
    if value is not None and not isinstance(value, dict):
        raise TypeError(f"expected a {cls._name}, a dict or keyword fields, got {type(value).__name__}")
    return message_of(cls, value, fields)._bytes()


class PendingCall:
    """A call in flight: ``wait(timeout)``, ``done()``, ``result()`` or ``await``."""

    __slots__ = ("_pending", "_cls")

    def __init__(self, pending: Any, cls: type) -> None:
        self._pending = pending
        self._cls = cls

    @property
    def seq(self) -> int:
        return self._pending.seq

    def done(self) -> bool:
        return self._pending.done()

    def try_take(self) -> Optional[Message]:
        b = self._pending.try_take()
        return None if b is None else self._cls._wrap(b)

    def wait(self, timeout: float = 1.0) -> Message:
        """The response, waiting up to ``timeout`` seconds (GIL released); CallError if
        the call fails (no server, server gone, handler error, timeout)."""
        return self._cls._wrap(self._pending.wait(timeout))

    async def wait_async(self, timeout: float = 1.0, poll: float = 0.0005) -> Message:
        """Awaits the response without blocking the event loop (polls, backing off to
        ``poll`` x 16 between looks)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        delay = 0.0
        while True:
            r = self.try_take()
            if r is not None:
                return r
            if loop.time() >= deadline:
                raise _nerve.CallError(f"no reply within {timeout:.3f} s")
            await asyncio.sleep(delay)
            delay = min(max(delay * 2, poll), poll * 16)

    def __await__(self) -> Any:
        return self.wait_async().__await__()


class Client:
    """Calls one service: ``call(request, timeout)``, ``send(request)`` (pipelined) and
    ``await call_async(request)``."""

    def __init__(self, raw: Any, ty: ServiceType) -> None:
        self._client = raw
        self.type = ty

    def close(self) -> None:
        """Releases the client now; using it afterwards raises ClosedError."""
        from . import _Closed
        self._client = _Closed("Client")

    def wait_for_service(self, timeout: float = 1.0) -> bool:
        return self._client.wait_for_service(timeout)

    def server_count(self) -> int:
        return self._client.server_count()

    def send(self, request: Any = None, **fields: Any) -> PendingCall:
        """Sends a request (a message, dict or fields) and returns at once."""
        return PendingCall(self._client.send(_payload(self.type.request, request, fields)),
                           self.type.response)

    def call(self, request: Any = None, timeout: float = 1.0, **fields: Any) -> Message:
        """Sends a request and waits for the response (CallError on failure)."""
        return self.send(request, **fields).wait(timeout)

    async def call_async(self, request: Any = None, timeout: float = 1.0, **fields: Any) -> Message:
        """Awaitable call: the event loop keeps running while the server works."""
        return await self.send(request, **fields).wait_async(timeout)


class Server:
    """Serves one service with ``callback(request) -> response`` (a message, a dict, or
    None for an empty response). An exception in the callback reaches the caller as
    CallError with its type and message. Runs in an executor, or with ``spin_once``."""

    def __init__(self, raw: Any, ty: ServiceType, callback: Callable[[Any], Any]) -> None:
        self._server = raw
        self.type = ty
        self.callback = callback

    def close(self) -> None:
        """Stops serving now; using it afterwards raises ClosedError."""
        from . import _Closed
        self._server = _Closed("Server")

    @property
    def closed(self) -> bool:
        from . import _Closed
        return isinstance(self._server, _Closed)

    def _answer(self, buf: Any) -> None:
        req = self.type.request._wrap(buf)
        try:
            resp = self.callback(req)
            data = _payload(self.type.response, resp, {})
        except Exception as e:  # the caller gets it, the server goes on
            self._server.fail(buf, f"{type(e).__name__}: {e}")
            return
        self._server.reply(buf, data)

    def _handle_pending(self) -> int:
        n = 0
        while n < 64:
            b = self._server.try_take()
            if b is None:
                break
            self._answer(b)
            n += 1
        return n

    def spin_once(self, timeout: float = 0.1) -> int:
        """Answers what is queued, or waits up to ``timeout`` for one request."""
        n = self._handle_pending()
        if n:
            return n
        b = self._server.take(timeout)
        if b is None:
            return 0
        self._answer(b)
        return 1 + self._handle_pending()

    def client_count(self) -> int:
        return self._server.client_count()
