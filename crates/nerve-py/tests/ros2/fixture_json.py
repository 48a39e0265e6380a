"""Messages as JSON for the fixture tests, shared by the test (Nerve's side) and peer.py
(rclpy's side): Nerve's JSON mapping of ROS 2 types (`nerve_ros2_types::json`) with each
float32 value tagged as {"__float32__": its exact value}, so that it compares as float32
whichever door printed it (a door prints a float32 as its shortest decimal)."""

import math
import struct

FLOAT32 = "__float32__"
_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _untag(v):
    return v[FLOAT32] if isinstance(v, dict) and set(v) == {FLOAT32} else v


def plain(v):
    """Tagged JSON as a door takes it: tags dropped, NaN and the infinities as the strings
    Nerve's JSON uses."""
    v = _untag(v)
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


def differences(got, want, path="msg"):
    """Where `got` (what arrived) differs from `want` (tagged): [] when equal. float32
    values compare as float32, NaN equals NaN, and types must match (no bool for an int)."""
    if isinstance(want, dict) and set(want) == {FLOAT32}:
        w, g = want[FLOAT32], _untag(got)
        if isinstance(g, str):
            g = _WORDS.get(g, g)
        if isinstance(g, float) and ((math.isnan(g) and math.isnan(w))
                                     or struct.pack("<f", g) == struct.pack("<f", w)):
            return []
        return [f"{path}: {g!r}, want float32 {w!r}"]
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{path}: {got!r}, want a message"]
        out = [f"{path}.{k}: missing" for k in want if k not in got]
        out += [f"{path}.{k}: not in the fixture" for k in got if k not in want]
        for k in want:
            if k in got:
                out += differences(got[k], want[k], f"{path}.{k}")
        return out
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            n = len(got) if isinstance(got, list) else repr(got)
            return [f"{path}: {n} elements, want {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in differences(g, w, f"{path}[{i}]")]
    if isinstance(want, float) and isinstance(got, str):
        got = _WORDS.get(got, got)
    if isinstance(want, float) and isinstance(got, float) and math.isnan(want) and math.isnan(got):
        return []
    if type(got) is not type(want) or got != want:
        return [f"{path}: {got!r}, want {want!r}"]
    return []
