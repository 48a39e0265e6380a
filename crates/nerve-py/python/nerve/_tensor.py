"""Tensors in a shared-memory pool: written in place, frozen, sent as a descriptor on a
topic, opened zero-copy by other processes (Python or Rust). numpy arrays and DLPack
capsules of a tensor keep its slot alive; a descriptor of a freed slot is refused."""

from __future__ import annotations

import math
import operator
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from . import _nerve
from ._messages import Message, _array_view


_DTYPES: Dict[Any, np.dtype] = {}


def _dtype(dtype: Any) -> np.dtype:
    """numpy's dtype of ``dtype`` (cached: building one costs more than the hand-off)."""
    try:
        return _DTYPES[dtype]
    except (KeyError, TypeError):
        dt = np.dtype(dtype)
        try:
            _DTYPES[dtype] = dt
        except TypeError:
            pass
        return dt


class _TensorBase:
    __slots__ = ("_buf", "shape", "dtype")

    def __init__(self, buf: Any, shape: Tuple[int, ...], dtype: np.dtype) -> None:
        self._buf = buf
        self.shape = shape
        self.dtype = dtype

    @property
    def nbytes(self) -> int:
        return self._buf.nbytes

    def numpy(self) -> np.ndarray:
        """A zero-copy numpy view (read-only once frozen)."""
        # one step, in the tensor's own type and shape, through numpy's C API where it is
        # usable (the hand-off runs with cold caches after a large fill: a short path
        # counts; see docs/design.md), else through the array interface
        arr = _nerve.tensor_array(self._buf)
        if arr is not None:
            return arr
        view = _nerve.tensor_view(self._buf)
        if view is not None:
            return np.asarray(view)
        count = math.prod(self.shape)
        if count * self.dtype.itemsize == self._buf.nbytes:  # the whole slot: no slicing
            return np.asarray(self._buf.view()).view(self.dtype).reshape(self.shape)
        return _array_view(self._buf, 0, self.dtype, count).reshape(self.shape)

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        a = self.numpy()
        if copy:
            return a.astype(dtype or a.dtype, copy=True)
        return a if dtype is None else a.astype(dtype, copy=False)

    def __dlpack__(self, **kwargs: Any) -> Any:
        """DLPack export through numpy (``torch.from_dlpack``, ``numpy.from_dlpack``):
        zero-copy; the capsule keeps the slot alive."""
        return self.numpy().__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (1, 0)  # CPU

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={self.shape}, dtype={self.dtype})"


class TensorMut(_TensorBase):
    """A tensor being written: fill ``numpy()``, then ``freeze()``."""

    __slots__ = ()

    def freeze(self) -> "Tensor":
        """Makes it read-only and shareable (refused while numpy views of it live)."""
        return Tensor(_nerve.tensor_freeze(self._buf), self.shape, self.dtype)


class Tensor(_TensorBase):
    """A read-only tensor in a pool; ``descriptor()`` names it for other processes."""

    __slots__ = ()

    def descriptor(self, user: int = 0) -> Message:
        """The descriptor message to publish (``publisher.publish(tensor, user=...)`` sends
        it directly); ``user`` is the application's: a frame number or a stamp."""
        from . import TensorDescriptor
        d = TensorDescriptor()
        d._buf.write_bytes(0, self._nerve_descriptor(user))
        return d

    def _nerve_descriptor(self, user: int = 0) -> bytes:
        return _nerve.tensor_descriptor(self._buf, user)

    def _release(self) -> bool:
        return self._buf.release()


class TensorPool:
    """A bounded pool of tensors in shared memory (``slots`` slots of ``slot_bytes``),
    created by the first user of ``name`` in the domain and opened by the others."""

    def __init__(self, ctx: Any, name: str, slots: int = 8, slot_bytes: int = 16 << 20) -> None:
        self._pool = _nerve.TensorPool(ctx._ctx, name, slots, slot_bytes)

    @classmethod
    def open_existing(cls, ctx: Any, name: str) -> "TensorPool":
        """Opens an existing pool (TensorError if there is none)."""
        obj = cls.__new__(cls)
        obj._pool = _nerve.TensorPool.open_existing(ctx._ctx, name)
        return obj

    @property
    def name(self) -> str:
        return self._pool.name

    @property
    def slots(self) -> int:
        return self._pool.slots

    @property
    def slot_bytes(self) -> int:
        return self._pool.slot_bytes

    def in_use(self) -> int:
        return self._pool.in_use()

    def reclaim(self) -> int:
        return self._pool.reclaim()

    def alloc(self, shape: Union[int, Sequence[int]], dtype: Any = "float32") -> TensorMut:
        """A writable tensor (a full pool raises TensorError at once)."""
        try:
            shape = (operator.index(shape),) if not isinstance(shape, (tuple, list)) \
                else tuple(map(operator.index, shape))
        except TypeError:
            raise ValueError(f"a shape is a sequence of ints >= 0, got {shape!r}") from None
        if shape and min(shape) < 0:
            raise ValueError(f"a shape is a sequence of ints >= 0, got {shape!r}")
        dt = _dtype(dtype)
        return TensorMut(self._pool._alloc(shape, dt.name), shape, dt)

    def open_tensor(self, descriptor: Any) -> Tensor:
        """The tensor a descriptor message names, zero-copy."""
        if isinstance(descriptor, Message):
            raw = descriptor._buf                   # read in place by _open
        elif isinstance(descriptor, (bytes, bytearray)):
            raw = bytes(descriptor)
        else:
            raise TypeError(f"expected a TensorDescriptor message, got {type(descriptor).__name__}")
        buf, shape, dtype = self._pool._open(raw)
        return Tensor(buf, shape, _dtype(dtype))

    def __repr__(self) -> str:
        return repr(self._pool)


class _ClassOrInstance:
    """``TensorPool.open(ctx, name)`` opens a pool; ``pool.open(descriptor)`` a tensor."""

    def __get__(self, obj: Any, cls: type) -> Any:
        if obj is None:
            return cls.open_existing
        return obj.open_tensor


TensorPool.open = _ClassOrInstance()  # type: ignore[assignment]
