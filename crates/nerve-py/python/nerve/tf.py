"""Transforms: where one coordinate frame is relative to another, at a given time (tf2's
model, over ``/tf`` and ``/tf_static``).

A :class:`Buffer` is shared by any number of threads: lookups never lock and never make
the listener wait. A :class:`Listener` feeds one from a thread of its own. Times are
nanoseconds; ``None`` means "the latest time the whole chain has".

Example::

    import nerve
    from nerve import tf

    ctx = nerve.Context()
    listener = tf.Listener(ctx)
    t = listener.buffer.wait_for_transform("map", "lidar", timeout=1.0)
    print(t.apply([(1.0, 0.0, 0.0)]))          # a lidar point in the map frame
"""

from __future__ import annotations

import itertools
import math
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from . import _nerve
from ._nerve import TfError

__all__ = ["Buffer", "Listener", "Broadcaster", "StaticBroadcaster", "Transform", "TfError"]

Vec3 = Tuple[float, float, float]
QuatT = Tuple[float, float, float, float]


class Transform:
    """A rigid transform: ``p_target = rotation * p_source + translation``; rotation is a
    unit quaternion (x, y, z, w)."""

    __slots__ = ("translation", "rotation")

    def __init__(self, translation: Sequence[float] = (0.0, 0.0, 0.0),
                 rotation: Sequence[float] = (0.0, 0.0, 0.0, 1.0)) -> None:
        self.translation: Vec3 = tuple(float(v) for v in translation)  # type: ignore[assignment]
        self.rotation: QuatT = tuple(float(v) for v in rotation)  # type: ignore[assignment]
        if len(self.translation) != 3 or len(self.rotation) != 4:
            raise ValueError("a transform is a 3-vector translation and an x, y, z, w rotation")

    def matrix(self) -> List[List[float]]:
        """The 3x3 rotation matrix (row-major)."""
        x, y, z, w = self.rotation
        return [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]

    def apply(self, points: Any) -> Any:
        """Points of the source frame in the target frame: a numpy array of shape (N, 3)
        (or (3,)) gives a new array; any other sequence of (x, y, z) a list of tuples."""
        r = self.matrix()
        t = self.translation
        try:
            import numpy as np
        except ImportError:  # pragma: no cover - numpy is a dependency of the package
            np = None
        if np is not None and isinstance(points, np.ndarray):
            if points.shape[-1] != 3:
                raise ValueError(f"points must have shape (N, 3), not {points.shape}")
            return points @ np.asarray(r, dtype=np.float64).T + np.asarray(t)
        out = []
        for p in points:
            px, py, pz = (float(v) for v in p)
            out.append(tuple(r[i][0] * px + r[i][1] * py + r[i][2] * pz + t[i] for i in range(3)))
        return out

    def apply_pose(self, position: Sequence[float], orientation: Sequence[float]) -> Tuple[Vec3, QuatT]:
        """A pose (position, orientation x y z w) of the source frame in the target frame."""
        (p,) = self.apply([position])
        ax, ay, az, aw = self.rotation
        bx, by, bz, bw = (float(v) for v in orientation)
        q = (aw * bx + ax * bw + ay * bz - az * by,
             aw * by - ax * bz + ay * bw + az * bx,
             aw * bz + ax * by - ay * bx + az * bw,
             aw * bw - ax * bx - ay * by - az * bz)
        return p, q

    def __repr__(self) -> str:
        return f"Transform(translation={self.translation}, rotation={self.rotation})"


class Buffer:
    """Frames and their recent history (``window`` seconds, 10 by default), shared by
    threads. ``time`` arguments are nanoseconds; None means latest."""

    def __init__(self, window: float = 10.0, max_frames: int = 10_000,
                 max_history: int = 10_000) -> None:
        self._raw = _nerve.TfBufferRaw(window, max_frames, max_history)

    def set_transform(self, parent: str, child: str, stamp_ns: int, transform: Transform,
                      static: bool = False) -> bool:
        """Stores ``child`` in ``parent``; True when stored. As in tf2, a dynamic stamp
        more than ``window`` seconds before the newest that edge holds (or before
        everything a full history holds) is dropped with a ``TF_OLD_DATA`` warning on
        stderr and False is returned; nothing else changes (other edges keep their data;
        only a jump back of a listener's clock clears the buffer). A non-unit or NaN
        rotation, a second parent or a loop raise TfError naming the frames."""
        return self._raw.set_transform(parent, child, stamp_ns, transform.translation,
                                       transform.rotation, static)

    def lookup_transform(self, target: str, source: str, time: Optional[int] = None) -> Transform:
        """``source`` in ``target`` (maps source points into target); TfError when
        unknown, not connected or outside the window (frames and times named)."""
        return Transform(*self._raw.lookup_transform(target, source, time))

    def can_transform(self, target: str, source: str, time: Optional[int] = None) -> bool:
        """Whether the lookup would succeed now."""
        return self._raw.can_transform(target, source, time)

    def wait_for_transform(self, target: str, source: str, time: Optional[int] = None,
                           timeout: float = 1.0) -> Transform:
        """The lookup, waiting up to ``timeout`` seconds (the GIL released)."""
        return Transform(*self._raw.wait_for_transform(target, source, time, timeout))

    def transform_points(self, target: str, source: str, points: Any,
                         time: Optional[int] = None) -> Any:
        """``points`` of ``source`` in ``target`` (see :meth:`Transform.apply`)."""
        return self.lookup_transform(target, source, time).apply(points)

    def latest_stamp(self, target: str, source: str) -> Optional[int]:
        """The time None means for these frames (None when the chain is all static)."""
        return self._raw.latest_stamp(target, source)

    def frames(self) -> List[Dict[str, Any]]:
        """Every frame: name, parent, static, newest_ns, held, rate_hz."""
        return self._raw.frames()

    @property
    def time_jumps(self) -> int:
        """How often the clock the buffer follows (its listener's context clock, in
        simulation time) jumped back and the buffer cleared its dynamic transforms."""
        return self._raw.time_jumps

    def __len__(self) -> int:
        return len(self._raw)


_names = itertools.count()


class Listener:
    """Feeds a :class:`Buffer` from ``/tf`` and ``/tf_static`` on a thread of its own
    (with a node of its own); ``stop()`` or leaving a ``with`` block ends it."""

    def __init__(self, context: Any, buffer: Optional[Buffer] = None,
                 name: Optional[str] = None) -> None:
        self.buffer = buffer if buffer is not None else Buffer()
        name = name or f"tf_listener_{os.getpid()}_{next(_names)}"
        self._raw = _nerve.TfListenerRaw(context._ctx, name, self.buffer._raw)

    @property
    def stored(self) -> int:
        """Transforms stored so far."""
        return self._raw.counts()[0]

    @property
    def refused(self) -> int:
        """Transforms refused so far (bad rotation, second parent) or dropped as too old."""
        return self._raw.counts()[1]

    def stop(self) -> None:
        """Stops and joins the thread."""
        self._raw.stop()

    def __enter__(self) -> "Listener":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _items(transforms: Iterable[Tuple[str, str, int, Transform]]) -> List[Any]:
    return [(p, c, int(s), t.translation, t.rotation) for (p, c, s, t) in transforms]


class Broadcaster:
    """Publishes dynamic transforms on ``/tf``: ``send([(parent, child, stamp_ns,
    Transform), ...])``."""

    def __init__(self, node: Any) -> None:
        self._raw = _nerve.TfBroadcasterRaw(node._node)

    def send(self, transforms: Iterable[Tuple[str, str, int, Transform]]) -> None:
        """Sends the transforms in one message."""
        self._raw.send(_items(transforms))


class StaticBroadcaster:
    """Publishes static transforms on ``/tf_static``, latched: every send carries all of
    them, so late joiners get them."""

    def __init__(self, node: Any) -> None:
        self._raw = _nerve.TfStaticBroadcasterRaw(node._node)

    def send(self, transforms: Iterable[Tuple[str, str, int, Transform]]) -> None:
        """Adds (or replaces, by child) and sends them all."""
        self._raw.send(_items(transforms))

    def update_connections(self) -> None:
        """Hands the static transforms to subscribers that joined since the last send."""
        self._raw.update_connections()


def quaternion_from_yaw(yaw: float) -> QuatT:
    """The rotation by ``yaw`` radians about z (x, y, z, w)."""
    return (0.0, 0.0, math.sin(yaw / 2.0), math.cos(yaw / 2.0))
