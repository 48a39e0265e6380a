"""The conformance matrix (issue 42): the same scenarios through every door — Python (the
nerve package), the CLI (`nerve topic pub/echo`) and Rust (examples/src/bin/conformance.rs)
— and every door must give the same outcome and error kind (and, for values, the same
JSON). The doors live in conformance_doors.py; a door added later joins by being listed in
DOORS. Where a door cannot express a scenario the test is skipped with the reason; where
doors truly disagree and nobody has fixed it yet the case is an xfail(strict) naming what
differs, so a fix turns it into a failure until the mark goes.
"""

import gc
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import nerve
from conformance_doors import (CliDoor, CppDoor, PythonDoor, RustDoor, f32_json, outcome_kind,
                               same_json)
from conftest import target_bin
from test_cpp_interop import cpp_bin

DOOR_NAMES = ["python", "cli", "rust", "cpp"]


def make_door(name, scenario=""):
    """The door `name`; skips the test, with the door's reason, where it cannot express
    `scenario`. The C++ door is skipped (or fails under NERVE_REQUIRE_CPP=1) without
    NERVE_CPP_EXAMPLES, as the C++ interop tests are."""
    if name == "python":
        door = PythonDoor()
    elif name == "cli":
        door = CliDoor(target_bin("nerve"))
    elif name == "rust":
        door = RustDoor(target_bin("conformance"))
    else:
        door = CppDoor(cpp_bin("conformance"))
    why = door.cannot(scenario)
    if why:
        pytest.skip(f"the {name} door: {why}")
    return door


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


@pytest.mark.parametrize("door", DOOR_NAMES)
@pytest.mark.parametrize("type_name", sorted(IDENTITY))
def test_echo_pub_echo_is_the_identity(env, door, type_name):
    """echo -> pub -> echo of hard values (NaN, +-inf, -0, subnormals, integer limits,
    long frame ids, full-length slices) gives back the same JSON through every door (each
    door's output is compared with the same input, so the doors agree with each other)."""
    values = [full(type_name, v) for v in IDENTITY[type_name]]
    topic = "/conformance_" + type_name.split("/")[1].lower()
    out = run_door(door, "identity", env, topic, type_name, values)
    assert out["topic"] == topic, out
    assert [outcome_kind(r) for r in out["results"]] == ["ok"] * len(values), out
    for sent, r in zip(values, out["results"]):
        assert same_json(r["ok"], sent), (r["ok"], sent)


def door_param(scenario, xfail=None):
    """One pytest param per door for a scenario: skipped where the door cannot express it
    (its reason), xfail(strict) where the door is known to differ (`xfail`: door -> what
    differs)."""
    params = []
    for name in DOOR_NAMES:
        marks = []
        if xfail and name in xfail:
            marks.append(pytest.mark.xfail(strict=True, reason=f"issue 42: {xfail[name]}"))
        params.append(pytest.param(name, marks=marks, id=name))
    return params


def run_door(name, scenario, *args, **kw):
    return make_door(name, scenario).roundtrip(*args, **kw)


# (given name, resolved name) under NERVE_NAMESPACE=/robot1, NERVE_REMAP=chatter:=/remapped/chatter
NAMES = {
    "relative": ("status", "/robot1/status"),
    "nested_relative": ("lidar/points", "/robot1/lidar/points"),
    "remapped": ("chatter", "/remapped/chatter"),
    "absolute": ("/plain", "/plain"),
}


@pytest.mark.parametrize("door,case", [
    pytest.param(door, case, id=f"{door}-{case}") for door in DOOR_NAMES for case in sorted(NAMES)])
def test_names_resolve_under_namespace_and_remap(env, door, case):
    """A relative name resolves under the namespace, a remap rule replaces it, an absolute
    name stays: every door reports the same resolved name and publishes there."""
    given, resolved = NAMES[case]
    # the test's own view (root namespace, no remaps), receiving on a thread of its own
    # while the door runs: a subscriber attaches to a publisher while it receives
    ready, done, got = threading.Event(), threading.Event(), []

    def observe():
        sub = nerve.Context().node("observer").create_subscription(
            "nerve_msgs/CmdVel", resolved, qos=nerve.Qos(depth=8))
        ready.set()
        # receives until a message comes, or a while after the door has finished
        while (m := sub.recv(timeout=0.1)) is None and not done.wait(0):
            pass
        if m is None:
            m = sub.recv(timeout=2.0)
        got.append(None if m is None else (m.linear, m.stamp.nanos))

    observer = threading.Thread(target=observe)
    observer.start()
    assert ready.wait(30.0)
    door_env = dict(env, NERVE_NAMESPACE="/robot1", NERVE_REMAP="chatter:=/remapped/chatter")
    value = full("nerve_msgs/CmdVel", {"linear": 0.25, "stamp": {"nanos": 7}})
    try:
        out = run_door(door, "names", door_env, given, "nerve_msgs/CmdVel", [value])
    finally:
        done.set()
        observer.join()
    assert [outcome_kind(r) for r in out["results"]] == ["ok"], out
    assert out["topic"] == resolved, out
    assert got == [(0.25, 7)], "the observer on the resolved name got nothing"


@pytest.mark.parametrize("door", door_param("bad_name"))
def test_a_bad_name_is_refused_as_bad_name(env, door):
    out = run_door(door, "bad_name", env, "9bad", "nerve_msgs/CmdVel",
                   [full("nerve_msgs/CmdVel", {})])
    assert [outcome_kind(r) for r in out["results"]] == ["bad_name"], out
    assert "9bad" in out["results"][0]["message"], out


@pytest.mark.parametrize("door", door_param("type_mismatch"))
def test_a_second_type_on_an_existing_topic_is_a_type_mismatch(env, door):
    ctx = nerve.Context()
    holder = ctx.node("holder").create_publisher("nerve_msgs/CmdVel", "/shared")
    out = run_door(door, "type_mismatch", env, "/shared", "nerve_msgs/Imu",
                   [full("nerve_msgs/Imu", {})])
    assert [outcome_kind(r) for r in out["results"]] == ["type_mismatch"], out
    message = out["results"][0]["message"]
    assert "nerve_msgs/CmdVel" in message and "nerve_msgs/Imu" in message, message
    del holder


@pytest.mark.parametrize("door", door_param("too_large"))
def test_an_oversized_payload_is_too_large(env, door):
    value = full("nerve_msgs/LaserScan", {"elems": [1.0] * 100})
    small = full("nerve_msgs/LaserScan", {"elems": [1.0]})
    out = run_door(door, "too_large", env, "/scan", "nerve_msgs/LaserScan", [value, small],
                   max_payload=256)
    assert [outcome_kind(r) for r in out["results"]] == ["too_large", "ok"], out
    assert "256" in out["results"][0]["message"], out


# values a field cannot take, with the error kind every door must give
BAD_VALUES = {
    "f32_overflow": ("nerve_msgs/CmdVel", {"linear": 1e39}, "out_of_range", None),
    "i64_overflow": ("nerve_msgs/CmdVel", {"stamp": {"nanos": 2**63}}, "out_of_range", None),
    "u8_overflow": ("nerve_msgs/BatteryState", {"power_supply_status": 256}, "out_of_range", None),
    "u8_negative": ("nerve_msgs/BatteryState", {"power_supply_status": -1}, "out_of_range", None),
    "f32_array_overflow": ("nerve_msgs/BatteryState", {"cell_voltage": [1e39] + [0.0] * 14},
                           "out_of_range", None),
    "f32_slice_overflow": ("nerve_msgs/LaserScan", {"elems": [1.0, -1e39]}, "out_of_range",
                           None),
    "fraction_for_integer": ("nerve_msgs/BatteryState", {"power_supply_status": 1.5}, "bad_value",
                             None),
    "text_for_number": ("nerve_msgs/CmdVel", {"linear": "fast"}, "bad_value", None),
    "bool_for_number": ("nerve_msgs/CmdVel", {"linear": True}, "bad_value", None),
    "unknown_field": ("nerve_msgs/CmdVel", {"speed": 1.0}, "bad_value", None),
    "short_array": ("nerve_msgs/BatteryState", {"cell_voltage": [0.0] * 3}, "bad_value", None),
}


@pytest.mark.parametrize("door,case", [
    pytest.param(door, case, id=f"{door}-{case}", marks=[pytest.mark.xfail(
        strict=True, reason=f"issue 42: {BAD_VALUES[case][3][door]}")]
        if BAD_VALUES[case][3] and door in BAD_VALUES[case][3] else [])
    for case in sorted(BAD_VALUES) for door in DOOR_NAMES])
def test_a_value_a_field_cannot_take_is_refused_with_the_same_kind(env, door, case):
    """A numeric overflow from JSON or Python, a wrong kind of value, an unknown field: the
    same error kind through every door, and the message names the field; nothing is sent
    (the good message after it comes back alone)."""
    type_name, bad, kind, _ = BAD_VALUES[case]
    good = full(type_name, {})
    out = run_door(door, f"bad_value:{case}", env, "/values", type_name, [bad, good])
    assert [outcome_kind(r) for r in out["results"]] == [kind, "ok"], out
    field = next(iter(bad))
    names = {field}
    if field == "elems" and door == "python":
        # Python names a slice by its attribute (LaserScan.ranges), the JSON doors "elems"
        names.add(getattr(nerve.msgs, type_name.split("/")[1])._slice_name)
    assert any(n in out["results"][0]["message"] for n in names), out
    assert same_json(out["results"][1]["ok"], good), out


# a server in a process of its own: `mode` says how it answers AddTwoInts
SERVER = r"""
import os, sys, time, nerve
from nerve import srv
mode = sys.argv[1]
node = nerve.Context().node("conformance_server")

def handle(req):
    if mode == "fails":
        raise ValueError("no adding today")
    if mode == "dies":
        os._exit(3)  # gone with the request taken and no response
    if mode == "silent":
        time.sleep(3600)  # takes the request and never answers (killed by the test)
    return {"value": req.a + req.b}

server = node.create_service(srv.AddTwoInts, "/add", handle)
print("ready", flush=True)
while True:
    server.spin_once(0.1)
"""

# scenario -> (the server's mode or None for no server, the outcome every door must give)
CALLS = {
    "answered": ("adds", "ok"),
    "no_server": (None, "no_server"),
    "handler_fails": ("fails", "handler_failed"),
    "server_dies": ("dies", "server_gone"),
    "never_answers": ("silent", "timeout"),
}


@pytest.mark.parametrize("door,case", [
    pytest.param(door, case, id=f"{door}-{case}") for case in sorted(CALLS) for door in DOOR_NAMES])
def test_a_call_gives_the_same_outcome_through_every_door(env, door, case):
    """A call answered, with no server, to a handler that fails, to a server that dies
    with the request, to a server that never answers: the same outcome kind through every
    door (the C++ door's kind from the exception class, conformance_doors.cpp_kind)."""
    mode, kind = CALLS[case]
    server = None
    if mode is not None:
        server = subprocess.Popen([sys.executable, "-c", SERVER, mode], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "ready", server.stderr.read()
    try:
        out = make_door(door, f"call:{case}").call(env, "/add", "nerve_msgs/AddTwoInts", {"a": 2, "b": 40},
                                   timeout=1.0 if mode in (None, "silent") else 10.0)
    finally:
        if server is not None:
            server.kill()
            server.wait()
    assert outcome_kind(out) == kind, out
    if kind == "ok":
        assert out["ok"] == {"value": 42}, out
    if kind == "handler_failed":
        assert "no adding today" in out["message"], out


@pytest.mark.parametrize("door", DOOR_NAMES)
def test_a_loan_never_sent_is_never_delivered_and_goes_back(env, door):
    """Loans dropped unsent (more of them than a publisher may hold at once) deliver
    nothing and go back to the pool: the messages published after them come back alone."""
    values = [full("nerve_msgs/CmdVel", {"linear": 1.5}), full("nerve_msgs/CmdVel", {"angular": -2.0})]
    out = run_door(door, "unsent_loans", env, "/loans", "nerve_msgs/CmdVel", values,
                   unsent_loans=5)
    assert [outcome_kind(r) for r in out["results"]] == ["ok", "ok"], out
    for sent, r in zip(values, out["results"]):
        assert same_json(r["ok"], sent), (r["ok"], sent)


@pytest.mark.parametrize("door", DOOR_NAMES)
def test_ctrl_c_ends_a_spinning_node_and_leaves_nothing(env, domain, door):
    """Ctrl-C (SIGINT) of a node spinning with a subscription: it stops by itself, exits
    as a clean stop (0, or 130 where an interrupted command says so) and, as the domain's
    last process, leaves nothing of the domain in /dev/shm."""
    d = make_door(door, "ctrl_c")
    feeder = None
    if d.spinner_needs_topic:
        feeder = nerve.Context().node("feeder").create_publisher("nerve_msgs/CmdVel", "/spin")
    child = subprocess.Popen(d.spinner(env, "/spin"), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        if feeder is not None:
            # joined once it subscribes; then this process leaves the domain
            assert feeder.wait_for_subscribers(1, timeout=20.0), child.stderr
            feeder.close()
            feeder = None
            gc.collect()
        else:
            assert child.stdout.readline().strip() == "spinning", child.stderr.read()
        time.sleep(0.3)  # into its wait
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode in (0, 130), (child.returncode, err)
    if not d.spinner_needs_topic:
        assert json.loads(out.strip().splitlines()[-1]) == {"ok": "interrupted"}, out
    left = [f for f in os.listdir("/dev/shm") if f.startswith(f"nerve{domain}_")]
    assert left == [], (left, err)


SIM_NOW = 1_700_000_000_123_456_789


@pytest.mark.parametrize("door", DOOR_NAMES)
def test_stamps_follow_simulation_time(env, door):
    """Under NERVE_SIM_TIME=1 a sample's publish stamp is the simulation time /clock
    gives, not the wall clock, through every door."""
    d = make_door(door, "sim_time")
    ready, stop = threading.Event(), threading.Event()

    def clock():  # a simulator: /clock stands at SIM_NOW
        pub = nerve.Context(sim_time=False).node("simulator").create_publisher(
            "nerve_msgs/Clock", "/clock")
        ready.set()
        while not stop.wait(0.02):
            pub.publish(clock={"nanos": SIM_NOW})

    simulator = threading.Thread(target=clock)
    simulator.start()
    try:
        assert ready.wait(30.0)
        values = [full("nerve_msgs/CmdVel", {"linear": 0.5}), full("nerve_msgs/CmdVel", {})]
        out = d.roundtrip(dict(env, NERVE_SIM_TIME="1"), "/sim_stamped", "nerve_msgs/CmdVel",
                          values, wait_clock=True)
    finally:
        stop.set()
        simulator.join()
    assert [outcome_kind(r) for r in out["results"]] == ["ok", "ok"], out
    assert [r["wall_ns"] for r in out["results"]] == [SIM_NOW, SIM_NOW], out
