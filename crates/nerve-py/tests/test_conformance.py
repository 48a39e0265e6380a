"""The conformance matrix (issue 42): the same scenarios through every door — Python (the
nerve package), the CLI (`nerve topic pub/echo`) and Rust (examples/src/bin/conformance.rs)
— and every door must give the same outcome and error kind (and, for values, the same
JSON). The doors live in conformance_doors.py; a door added later joins by being listed in
DOORS. Where a door cannot express a scenario the test is skipped with the reason; where
doors truly disagree and nobody has fixed it yet the case is an xfail(strict) naming what
differs, so a fix turns it into a failure until the mark goes.
"""

import math

import pytest

import nerve
from conformance_doors import CliDoor, PythonDoor, RustDoor, f32_json, outcome_kind, same_json
from conftest import target_bin

DOOR_NAMES = ["python", "cli", "rust"]


def make_door(name):
    if name == "python":
        return PythonDoor()
    if name == "cli":
        return CliDoor(target_bin("nerve"))
    return RustDoor(target_bin("conformance"))


@pytest.fixture
def env(domain):
    """The environment every door runs in: this test's domain and state directory."""
    import os
    return dict(os.environ)


def full(type_name, given):
    """A complete message as `nerve topic echo` prints it: the fields given, every other
    field zero (so that what comes back is compared field by field with what went in)."""
    head, elem = nerve.message_type(type_name).describe()

    def zero(shape):
        kind = shape[0]
        if kind == "prim":
            return 0.0 if shape[2] in ("f32", "f64") else ("0" if shape[2] in ("u128", "i128") else 0)
        if kind == "array":
            return [zero(shape[1]) for _ in range(shape[2])]
        if kind == "struct":
            return {f[0]: zero(f[2]) for f in shape[3]}
        if kind == "str":
            return ""
        return [0] * shape[1]

    def merge(base, over):
        if isinstance(base, dict) and isinstance(over, dict):
            return {k: merge(base[k], over[k]) if k in over else base[k] for k in base} | \
                {k: v for k, v in over.items() if k not in base}
        return over

    value = merge(zero(head), given)
    if elem is not None:
        elems = given.get("elems", [])
        value["elems_len"] = len(elems)
        value["elems"] = elems
    return value


I64_MAX, I64_MIN = 2**63 - 1, -2**63
# f32 values as Nerve prints them: the shortest decimal that reads back to the same f32
F32_MAX = f32_json(3.4028234663852886e38)
F32_MIN_SUB = f32_json(1e-45)
F32_HARD = ["NaN", "Infinity", "-Infinity", -0.0] + [
    f32_json(x) for x in (F32_MIN_SUB, 1.1754942e-38, F32_MAX, -F32_MAX, 0.1, 16777216.0)]
F64_HARD = ["NaN", "Infinity", "-Infinity", -0.0, 5e-324, 2.225073858507201e-308,
            1.7976931348623157e308, 0.1, 9007199254740993.0, -1e-300]
LONG_FRAME = "f" * 63 + "x"  # a frame id's whole 64 bytes
FULL_SLICE = [f32_json(i / 7.0) for i in range(2000)]  # every element shown and read back

# what goes through echo -> pub -> echo unchanged, per type
IDENTITY = {
    "nerve_msgs/CmdVel": [
        {"stamp": {"nanos": I64_MAX}, "linear": F32_MAX, "angular": F32_MIN_SUB},
        {"stamp": {"nanos": I64_MIN}, "linear": "NaN", "angular": "-Infinity"},
        {"linear": -0.0, "angular": 0.1},
    ],
    "nerve_msgs/Imu": [
        {"stamp": {"nanos": -1},
         "orientation": {"x": "NaN", "y": -0.0, "z": 5e-324, "w": 1.7976931348623157e308},
         "orientation_covariance": F64_HARD[:9],
         "angular_velocity": {"x": "Infinity", "y": "-Infinity", "z": 9007199254740993.0},
         "angular_velocity_covariance": F64_HARD[1:],
         "linear_acceleration": {"x": 0.9364630260594403, "y": -2.2250738585072014e-308, "z": 1e-310},
         "linear_acceleration_covariance": [float(i) for i in range(9)]},
    ],
    "nerve_msgs/BatteryState": [
        {"voltage": F32_MAX, "percentage": "NaN", "power_supply_status": 255, "present": 1,
         "cell_count": 15, "cell_voltage": F32_HARD + [1.0, 2.0, 3.0, 4.0, 3.7]},
    ],
    "nerve_msgs/Odometry": [
        {"header": {"stamp": {"nanos": I64_MAX}, "frame_id": LONG_FRAME},
         "child_frame_id": "base_link_" + "b" * 54,
         "pose_covariance": (F64_HARD * 4)[:36]},
    ],
    "nerve_msgs/LaserScan": [
        {"header": {"stamp": {"nanos": 1}, "frame_id": LONG_FRAME}, "angle_min": f32_json(-math.pi),
         "range_max": "Infinity", "intensity_count": 2**32 - 1,
         "elems": F32_HARD + FULL_SLICE},
        {"header": {"frame_id": "laser"}, "elems": []},
    ],
}


def run_all(doors, env, topic, type_name, values, **kw):
    """Each door's outcome of one roundtrip, by door name."""
    return {d.name: d.roundtrip(env, topic, type_name, values, **kw) for d in doors}


@pytest.mark.parametrize("type_name", sorted(IDENTITY))
def test_echo_pub_echo_is_the_identity(env, type_name):
    """echo -> pub -> echo of hard values (NaN, +-inf, -0, subnormals, integer limits,
    long frame ids, full-length slices) gives back the same JSON through every door."""
    values = [full(type_name, v) for v in IDENTITY[type_name]]
    doors = [make_door(n) for n in DOOR_NAMES]
    topic = "/conformance_" + type_name.split("/")[1].lower()
    outs = run_all(doors, env, topic, type_name, values)
    for name, out in outs.items():
        assert out["topic"] == topic, (name, out)
        assert [outcome_kind(r) for r in out["results"]] == ["ok"] * len(values), (name, out)
        for sent, r in zip(values, out["results"]):
            assert same_json(r["ok"], sent), (name, r["ok"], sent)
