"""Message classes built from a type's schema: attribute access over the message's
memory (a received sample, a loan or heap bytes), numpy views for arrays and slices.

A message object holds its ``Buffer`` (the owner of the memory); nested structs and numpy
arrays refer to the same Buffer, so the memory lives as long as any of them.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import _nerve

_PRIM_DTYPES = {
    "u8": "<u1", "u16": "<u2", "u32": "<u4", "u64": "<u8",
    "i8": "<i1", "i16": "<i2", "i32": "<i4", "i64": "<i8",
    "f32": "<f4", "f64": "<f8", "u128": "V16", "i128": "V16",
}

# the slice of a header + slice message, by type: its name as an attribute
_SLICE_NAMES = {
    "nerve_msgs/LaserScan": "ranges",
    # lifecycle_msgs' field names
    "nerve_msgs/GetAvailableStatesResponse": "available_states",
    "nerve_msgs/GetAvailableTransitionsResponse": "available_transitions",
}


def _dtype(shape: tuple) -> np.dtype:
    """The numpy dtype of a schema shape (structs keep their offsets and size)."""
    kind = shape[0]
    if kind == "prim":
        return np.dtype(_PRIM_DTYPES[shape[2]])
    if kind == "array":
        return np.dtype((_dtype(shape[1]), (shape[2],)))
    if kind == "str":
        return np.dtype(f"S{shape[1]}")
    if kind == "opaque":
        return np.dtype(f"V{shape[1]}")
    _, _name, size, fields = shape
    return np.dtype({
        "names": [f[0] for f in fields],
        "formats": [_dtype(f[2]) for f in fields],
        "offsets": [f[1] for f in fields],
        "itemsize": size,
    })


def _array_view(buf: Any, offset: int, dtype: np.dtype, count: int) -> np.ndarray:
    """A numpy view of ``count`` items of ``dtype`` at ``offset``: the bounds are checked
    against the memory before the view is made; the array's base keeps the memory."""
    nbytes = dtype.itemsize * count
    if offset < 0 or offset + nbytes > buf.nbytes:
        raise ValueError(
            f"a view of {count} x {dtype.itemsize} bytes at offset {offset} does not fit "
            f"the {buf.nbytes} bytes of this message")
    raw = np.asarray(buf.view())
    return raw[offset:offset + nbytes].view(dtype)


_set = object.__setattr__


def _field_error(cls_name: str, field: str, e: Exception) -> Exception:
    return type(e)(f"{cls_name}.{field}: {e}")


def _assign(view: np.ndarray, value: Any) -> None:
    """Writes ``value`` into ``view`` (an array field or a slice) by the rules of every
    other path into fields: no booleans into numbers, and a finite number too large for
    float32 is refused (numpy would store inf with only a warning)."""
    if view.dtype.kind in "iuf":
        arr = np.asarray(value)
        if arr.dtype == np.bool_:
            raise TypeError(f"expected numbers for {view.dtype}, got bool")
        if view.dtype == np.float32 and arr.dtype.kind in "iuf":
            wide = arr.astype(np.float64)
            with np.errstate(over="ignore"):
                narrow = wide.astype(np.float32)
            bad = np.isinf(narrow) & np.isfinite(wide)
            if bad.any():
                first = wide[bad].flat[0]
                raise OverflowError(f"{first!r} is out of range for f32")
    view[...] = value


class _Fields:
    """Fields as attributes over a Buffer at offset ``_off`` (shared by structs and
    messages)."""

    __slots__ = ()
    _name = "?"
    _size = 0
    _fields: Tuple[str, ...] = ()
    _np_dtype: Optional[np.dtype] = None

    def _asdict(self) -> Dict[str, Any]:
        """The fields as plain Python values (nested structs as dicts, arrays as lists)."""
        out = {}
        for f in self._fields:
            v = getattr(self, f)
            if isinstance(v, _Fields):
                v = v._asdict()
            elif isinstance(v, np.ndarray):
                v = v.tolist()
            out[f] = v
        return out

    def _assign(self, value: Any) -> None:
        if isinstance(value, _Fields):
            if type(value) is not type(self):
                raise TypeError(f"cannot assign a {value._name} to a {self._name}")
            self._buf.write_bytes(self._off, value._buf.tobytes()[value._off:value._off + self._size])
            return
        if not isinstance(value, dict):
            raise TypeError(f"expected a dict or a {self._name}, got {type(value).__name__}")
        for k, v in value.items():
            if k not in self._fields:
                raise AttributeError(f"{self._name} has no field {k!r} (fields: {', '.join(self._fields)})")
            setattr(self, k, v)

    def __repr__(self) -> str:
        return f"{self._name}({', '.join(f'{k}={v!r}' for k, v in self._asdict().items())})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Fields) and self._asdict() == other._asdict()

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._fields:
            object.__setattr__(self, name, value)
        else:
            raise AttributeError(f"{self._name} has no field {name!r} (fields: {', '.join(self._fields)})")


class Struct(_Fields):
    """A view of a struct inside a message's memory; fields are attributes."""

    __slots__ = ("_buf", "_off")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"{self._name} is a view inside a message; build the message instead")

    @classmethod
    def _at(cls, buf: Any, off: int) -> "Struct":
        obj = object.__new__(cls)
        _set(obj, "_buf", buf)
        _set(obj, "_off", off)
        return obj


def _prim_property(cls_name: str, name: str, offset: int, kind: int, top: bool) -> property:
    # a message's own fields sit at fixed offsets: no `_off` to add on the hot path
    if top:
        def get(self: Struct) -> Any:
            return self._buf.get(offset, kind)

        def set_(self: Struct, value: Any) -> None:
            try:
                self._buf.set(offset, kind, value)
            except (TypeError, ValueError, OverflowError) as e:
                raise _field_error(cls_name, name, e) from None
        return property(get, set_)

    def get_nested(self: Struct) -> Any:
        return self._buf.get(self._off + offset, kind)

    def set_nested(self: Struct, value: Any) -> None:
        try:
            self._buf.set(self._off + offset, kind, value)
        except (TypeError, ValueError, OverflowError) as e:
            raise _field_error(cls_name, name, e) from None
    return property(get_nested, set_nested)


def _str_property(cls_name: str, name: str, offset: int, size: int) -> property:
    def get(self: Struct) -> str:
        return self._buf.get_str(self._off + offset, size)

    def set_(self: Struct, value: Any) -> None:
        try:
            self._buf.set_str(self._off + offset, size, value)
        except (TypeError, ValueError) as e:
            raise _field_error(cls_name, name, e) from None
    return property(get, set_)


def _struct_property(cls_name: str, name: str, offset: int, sub: type) -> property:
    def get(self: Struct) -> Struct:
        return sub._at(self._buf, self._off + offset)

    def set_(self: Struct, value: Any) -> None:
        try:
            sub._at(self._buf, self._off + offset)._assign(value)
        except (TypeError, ValueError, OverflowError, AttributeError) as e:
            raise _field_error(cls_name, name, e) from None
    return property(get, set_)


def _array_property(cls_name: str, name: str, offset: int, shape: tuple) -> property:
    dims = []
    s = shape
    while s[0] == "array":
        dims.append(s[2])
        s = s[1]
    dtype = _dtype(s)
    count = int(np.prod(dims))

    def get(self: Struct) -> np.ndarray:
        return _array_view(self._buf, self._off + offset, dtype, count).reshape(dims)

    def set_(self: Struct, value: Any) -> None:
        view = get(self)
        if not view.flags.writeable:
            raise ValueError(f"{cls_name}.{name}: this message is read-only")
        try:
            _assign(view, value)
        except (TypeError, ValueError, OverflowError) as e:
            raise _field_error(cls_name, name, e) from None
    return property(get, set_)


def _opaque_property(cls_name: str, name: str, offset: int, size: int) -> property:
    def get(self: Struct) -> bytes:
        return bytes(_array_view(self._buf, self._off + offset, np.dtype("u1"), size))

    def set_(self: Struct, value: Any) -> None:
        if not isinstance(value, (bytes, bytearray)) or len(value) != size:
            raise TypeError(f"{cls_name}.{name}: expected {size} bytes")
        self._buf.write_bytes(self._off + offset, bytes(value))
    return property(get, set_)


_STRUCTS: Dict[tuple, type] = {}


def struct_class(shape: tuple, base: type = Struct, extra: Optional[dict] = None) -> type:
    # `extra` is given for message classes: their fields are at offsets from 0
    """The class of a struct shape (cached per shape)."""
    _, name, size, fields = shape
    key = (base, name, size, repr(fields))
    if key in _STRUCTS and extra is None:
        return _STRUCTS[key]
    short = name.rsplit("/", 1)[-1]
    ns: Dict[str, Any] = {"__slots__": (), "_name": short, "_size": size,
                          "_fields": tuple(f[0] for f in fields)}
    for fname, off, fshape in fields:
        kind = fshape[0]
        if kind == "prim":
            ns[fname] = _prim_property(short, fname, off, fshape[1], extra is not None)
        elif kind == "str":
            ns[fname] = _str_property(short, fname, off, fshape[1])
        elif kind == "struct":
            ns[fname] = _struct_property(short, fname, off, struct_class(fshape))
        elif kind == "array":
            ns[fname] = _array_property(short, fname, off, fshape)
        else:
            ns[fname] = _opaque_property(short, fname, off, fshape[1])
    ns.update(extra or {})
    cls = type(short, (base,), ns)
    if extra is None:
        _STRUCTS[key] = cls
    return cls


class Message(_Fields):
    """A message: the fixed head's fields as attributes and, for header + slice types, the
    slice as a numpy array (``data``; ``ranges`` for LaserScan; always ``_elems``).

    ``Type(**fields)`` builds one on the heap (pass the slice as ``data=array``, or its
    length as ``Type(_elems=n)``); ``publisher.loan()`` gives one in shared memory and
    subscriptions hand out received ones, read-only. Methods start with ``_`` so that no
    field is ever shadowed.
    """

    __slots__ = ("_buf", "_pub")
    _off = 0  # a message's fields are at offsets from its start
    _type: Any = None
    _elem_dtype: Optional[np.dtype] = None
    _elems_offset = 0
    _slice_name: Optional[str] = None

    def __init__(self, _elems: int = 0, **fields: Any) -> None:
        data = None
        if self._slice_name is not None and self._slice_name in fields:
            data = np.ascontiguousarray(fields.pop(self._slice_name))
            _elems = data.size
        if _elems and self._elem_dtype is None:
            raise TypeError(f"{self._name} has no slice")
        nbytes = self._nbytes(_elems)
        _set(self, "_buf", _nerve.heap_buffer(nbytes))
        for k, v in fields.items():
            setattr(self, k, v)
        if data is not None:
            try:
                _assign(self._elems, data.reshape(-1))
            except (TypeError, ValueError, OverflowError) as e:
                raise type(e)(f"{self._name}.{self._slice_name}: {e}") from None

    @classmethod
    def _nbytes(cls, elems: int) -> int:
        if cls._elem_dtype is None:
            return cls._size
        if elems < 0:
            raise ValueError(f"{cls._name}: a slice of {elems} elements")
        return cls._elems_offset + elems * cls._elem_dtype.itemsize

    @classmethod
    def _wrap(cls, buf: Any, pub: Any = None) -> "Message":
        obj = object.__new__(cls)
        _set(obj, "_buf", buf)
        if pub is not None:
            _set(obj, "_pub", pub)
        return obj

    @property
    def _elems(self) -> np.ndarray:
        """The slice elements as a numpy view (read-only for received messages)."""
        if self._elem_dtype is None:
            raise AttributeError(f"{self._name} has no slice")
        n = (self._buf.nbytes - self._elems_offset) // self._elem_dtype.itemsize
        return _array_view(self._buf, self._elems_offset, self._elem_dtype, n)

    @property
    def _header(self) -> Any:
        """The sample header (seq, stamp_ns, wall_ns, publisher_id), None unless received."""
        return self._buf.header()

    @property
    def _writable(self) -> bool:
        return self._buf.writable

    def _bytes(self) -> bytes:
        """A copy of the payload bytes."""
        return self._buf.tobytes()

    def _ros2(self) -> Any:
        """A ROS 2 message carried as CDR (a topic bridged from ROS 2, a played rosbag2
        bag): its fields by name, numeric arrays as numpy arrays. ValueError for other
        types and for bytes that do not decode."""
        return _nerve.ros2_decode(type(self)._type.schema_text, self._buf.tobytes())

    @classmethod
    def _from_ros2(cls, fields: Dict[str, Any]) -> "Message":
        """A ROS 2 message carried as CDR (a type from ``nerve.message_type("pkg/msg/Name")``)
        built from its fields by name (plain values: numbers, strings, lists, dicts;
        fields left out take their defaults). ValueError naming a field the type does not
        have or a value that does not fit it."""
        payload = _nerve.ros2_encode(cls._type.schema_text, _ros2_json(fields))
        buf = _nerve.heap_buffer(len(payload))
        buf.write_bytes(0, payload)
        return cls._wrap(buf)

    def _copy(self) -> "Message":
        """A writable heap copy."""
        buf = _nerve.heap_buffer(self._buf.nbytes)
        buf.write_bytes(0, self._buf.tobytes())
        return type(self)._wrap(buf)

    def _release(self) -> bool:
        """Gives the sample back now if no view of it exists; otherwise when the last view
        goes. Returns whether it was released now."""
        return self._buf.release()

    def _send(self) -> None:
        """Sends a loaned message (see ``Publisher.send``)."""
        try:
            pub = self._pub
        except AttributeError:
            raise TypeError(f"this {self._name} is not a loan; use publisher.publish(msg)") from None
        pub.send(self._buf)

    send = _send

    def _asdict(self) -> Dict[str, Any]:
        d = super()._asdict()
        if self._slice_name is not None:
            d[self._slice_name] = self._elems.tolist()
        return d

    def __setattr__(self, name: str, value: Any) -> None:
        if name == self._slice_name:
            view = self._elems
            if not view.flags.writeable:
                raise ValueError(f"{self._name}.{name}: this message is read-only")
            try:
                _assign(view, value)
            except (TypeError, ValueError, OverflowError) as e:
                raise _field_error(self._name, name, e) from None
            return
        super().__setattr__(name, value)

    def __repr__(self) -> str:
        head = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields)
        if self._slice_name is not None:
            head += f", {self._slice_name}=<{self._elems.size} x {self._elem_dtype}>"
        return f"{self._name}({head})"


_CLASSES: Dict[Tuple[str, int], type] = {}


def message_class(mt: Any) -> type:
    """The message class of a ``MessageType`` (cached by name and layout hash)."""
    key = (mt.name, mt.layout_hash)
    cls = _CLASSES.get(key)
    if cls is not None:
        return cls
    head, elem = mt.describe()
    extra: Dict[str, Any] = {"_type": mt, "__slots__": ()}
    if elem is not None:
        name = _SLICE_NAMES.get(mt.name, "data")
        extra.update(_elem_dtype=_dtype(elem), _elems_offset=mt.elems_offset, _slice_name=name)
        extra[name] = property(lambda self: self._elems, doc="The slice as a numpy view.")
    if head[0] != "struct":
        head = ("struct", mt.name, mt.head_size, [])
    cls = struct_class(head, base=Message, extra=extra)
    cls.__qualname__ = cls.__name__
    cls.__doc__ = f"The message type {mt.name} (layout hash {mt.layout_hash:016x})."
    _CLASSES[key] = cls
    return cls


def _ros2_plain(v: Any) -> Any:
    """``v`` as JSON takes it for a ROS 2 field: numpy arrays (as ``_ros2()`` gives them)
    as lists, numpy scalars as numbers, NaN and the infinities as the strings the ROS 2
    JSON form reads back exactly."""
    if isinstance(v, dict):
        return {k: _ros2_plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_ros2_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return _ros2_plain(v.tolist())
    if isinstance(v, np.generic):
        return _ros2_plain(v.item())
    if isinstance(v, float) and not np.isfinite(v):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    return v


def _ros2_json(fields: Any) -> str:
    """The JSON text of a ROS 2 message's fields (see ``_ros2_plain``); a value JSON cannot
    hold is a TypeError naming it."""
    if not isinstance(fields, dict):
        raise TypeError(f"a ROS 2 message's fields are a dict, got {type(fields).__name__}")
    return json.dumps(_ros2_plain(fields), allow_nan=False)


def message_of(cls: type, value: Any, fields: Dict[str, Any]) -> "Message":
    """A message of ``cls`` from a dict of fields and keyword fields, as every door takes
    one: a ROS 2 type carried as CDR (``cls._type.ros2``) is built through its definition
    (``_from_ros2``), any other type field by field."""
    values = dict(value or {}, **fields)
    if getattr(cls._type, "ros2", None) is not None:
        return cls._from_ros2(values)
    return cls(**values)
