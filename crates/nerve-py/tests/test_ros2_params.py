"""Parameters across `nerve bridge ros2` (issue 30): `nerve param list/get/set/describe` on
a real rclpy node, and rclpy's AsyncParameterClient reading and setting a Nerve node's
parameters. The harness is tests/ros2/harness.py; nothing here mocks ROS 2."""

import json
import subprocess
import threading
import time

import pytest

import nerve

from conftest import target_bin


def cli_json(ros2, *args, timeout=60):
    p = ros2.nerve("param", *args, name=f"nerve param {args[0]}")
    rc = p.wait(timeout)
    return rc, p


def param_client(ros2, node, op, *args):
    """Runs rclpy's AsyncParameterClient once; returns its response event."""
    c = ros2.peer("param_client", node, op, *args, name=f"param_client {op}")
    c.wait(90)
    got = c.json_events("response")
    assert got, (c.lines, c.err)
    return got[0]


@pytest.mark.every_ros2_distro
def test_nerve_param_reads_and_sets_an_rclpy_node(ros2):
    bridge = ros2.bridge()
    node = ros2.peer("param_node", 120, "--name", "param_node")
    node.wait_line(lambda l: '"ready"' in l)
    bridge.wait_line(lambda l: l.startswith("/param_node/_params:"), timeout=60)

    rc, p = cli_json(ros2, "list", "/param_node", "--format", "json", "--timeout", "10000")
    assert rc == 0, (p.lines, p.err, bridge.err)
    names = json.loads("".join(p.lines))
    for n in ("enabled", "gains", "name", "speed"):
        assert n in names, names
    assert names == sorted(names)

    rc, p = cli_json(ros2, "get", "/param_node", "speed", "name", "enabled", "gains",
                     "--format", "json", "--timeout", "10000")
    assert rc == 0, (p.lines, p.err)
    assert json.loads("".join(p.lines)) == {
        "speed": 1.5, "name": "robot", "enabled": True, "gains": [1, 2, 3]}

    # an undeclared name: null and a failure naming it
    rc, p = cli_json(ros2, "get", "/param_node", "nope", "--format", "json", "--timeout", "10000")
    assert rc != 0 and "nope" in "".join(p.err), (p.lines, p.err)

    # an integer sets a double parameter (as on a Nerve node); arrays and strings cross
    rc, p = cli_json(ros2, "set", "/param_node", "speed", "2", "name", "rover",
                     "gains", "[4, 5]", "--timeout", "10000")
    assert rc == 0, (p.lines, p.err)
    # a wrong type is refused with ROS 2's reason
    rc, p = cli_json(ros2, "set", "/param_node", "enabled", "abc", "--timeout", "10000")
    assert rc != 0, (p.lines, p.err)
    assert "enabled" in "".join(p.err)
    rc, p = cli_json(ros2, "set", "/param_node", "speed", "0.5", "enabled", "false",
                     "--atomic", "--timeout", "10000")
    assert rc == 0, (p.lines, p.err)

    rc, p = cli_json(ros2, "describe", "/param_node", "speed", "--format", "json",
                     "--timeout", "10000")
    assert rc == 0, (p.lines, p.err)
    d = json.loads("".join(p.lines))[0]
    assert (d["name"], d["type"], d["value"]) == ("speed", "float", 0.5)

    # the sets are visible from rclpy
    got = param_client(ros2, "/param_node", "get", "speed", "name", "enabled", "gains")
    assert got["values"] == [0.5, "rover", False, [4, 5]], got
    node.stop()


def serve_nerve_params(domain, ready, stop, out):
    def run():
        try:
            n = nerve.Context(domain).node("py_params")
            p = n.create_parameters(from_env=False)
            p.declare("speed", 1.0, description="m/s", range=(0.0, 3.0, 0.0))
            p.declare("mode", "idle")
            p.declare("gains", [1.0, 2.0])
            p.declare("limits.max_turn", 4)
            ready.set()
            while not stop.is_set():
                p.serve(0.05)
            out["values"] = p.values()
        except Exception as e:  # surfaced by the test
            out["error"] = e
            ready.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_rclpy_parameter_client_reads_and_sets_a_nerve_node(ros2, domain):
    ready, stop, out = threading.Event(), threading.Event(), {}
    t = serve_nerve_params(domain, ready, stop, out)
    assert ready.wait(30) and "error" not in out, out
    try:
        bridge = ros2.bridge()
        bridge.wait_line(lambda l: l.startswith("/py_params/_params:"), timeout=60)

        got = param_client(ros2, "/py_params", "get", "speed", "mode", "gains", "nope")
        assert got["values"] == [1.0, "idle", [1.0, 2.0], None], got
        assert got["types"] == [3, 4, 8, 0], got

        got = param_client(ros2, "/py_params", "list")
        assert sorted(got["names"]) == ["gains", "limits.max_turn", "mode", "speed"], got
        assert got["prefixes"] == ["limits"], got

        got = param_client(ros2, "/py_params", "types", "speed", "limits.max_turn")
        assert got["types"] == [3, 2], got

        got = param_client(ros2, "/py_params", "describe", "speed")
        d = got["descriptors"][0]
        assert (d["name"], d["type"], d["description"]) == ("speed", 3, "m/s"), d
        assert d["floating_point_range"][0]["to_value"] == 3.0, d

        got = param_client(ros2, "/py_params", "set", "speed", "2.5", "mode", "5")
        assert got["results"][0] == {"successful": True, "reason": ""}, got
        assert not got["results"][1]["successful"], got
        assert "mode" in got["results"][1]["reason"], got

        # out of range: nothing changes in an atomic set
        got = param_client(ros2, "/py_params", "set", "speed", "9.0", "mode", '"run"', "--atomic")
        assert len(got["results"]) == 1 and not got["results"][0]["successful"], got

        got = param_client(ros2, "/py_params", "set", "mode", '"run"', "gains", "[3.0, 4.5]",
                           "--atomic")
        assert got["results"] == [{"successful": True, "reason": ""}], got

        # visible on the Nerve side
        c = nerve.Context(domain).node("checker").create_param_client("/py_params")
        assert c.wait_for_node(10)
        assert c.get(["speed", "mode", "gains"]) == {
            "speed": 2.5, "mode": "run", "gains": [3.0, 4.5]}
    finally:
        stop.set()
        t.join(10)


def test_a_ros2_node_that_goes_away_mid_call_ends_the_nerve_call(ros2):
    import signal
    import time

    bridge = ros2.bridge()
    node = ros2.peer("param_node", 120, "--name", "hang_node", "--hang")
    node.wait_line(lambda l: '"ready"' in l)
    bridge.wait_line(lambda l: l.startswith("/hang_node/_params:"), timeout=60)
    setter = ros2.nerve("param", "set", "/hang_node", "speed", "2.0", "--timeout", "30000")
    node.wait_line(lambda l: '"set_called"' in l)
    node.p.send_signal(signal.SIGINT)
    assert setter.wait(60) != 0
    # "went away", not the 30 s timeout's message: ended by the node's departure
    err = "".join(setter.err)
    assert "went away" in err, (setter.lines, setter.err)


def test_ros2_and_nerve_parameter_events_live_side_by_side_whatever_starts_first(ros2, domain):
    """ROS 2's /parameter_events (rcl_interfaces/msg/ParameterEvent) and Nerve's own
    (nerve/ParamEvent) are two topics in Nerve: ROS 2's crosses as /_ros2/parameter_events,
    so a Nerve node with parameters starts before or after the bridge and rclpy nodes."""
    before_ready, before_stop, before = threading.Event(), threading.Event(), {}
    t_before = serve_nerve_params(domain, before_ready, before_stop, before)
    assert before_ready.wait(30) and "error" not in before, before
    after_stop, after = threading.Event(), {}
    t_after = None
    try:
        bridge = ros2.bridge()
        node = ros2.peer("param_node", 120, "--name", "events_node")
        node.wait_line(lambda l: '"ready"' in l)
        bridge.wait_line(lambda l: "rcl_interfaces/msg/ParameterEvent" in l, timeout=60)
        assert not any("ParameterEvent" in l for l in bridge.err), bridge.err

        # a Nerve node with parameters made now, after the bridge crossed ROS 2's events
        def run_after():
            try:
                n = nerve.Context(domain).node("late_params")
                p = n.create_parameters(from_env=False)
                p.declare("gain", 2.0)
                after["ready"] = True
                while not after_stop.is_set():
                    p.serve(0.05)
            except Exception as e:  # surfaced by the test
                after["error"] = e

        t_after = threading.Thread(target=run_after, daemon=True)
        t_after.start()
        end = time.monotonic() + 30
        while not after and time.monotonic() < end:
            time.sleep(0.05)
        assert after.get("ready") and "error" not in after, after
        assert "error" not in before, before

        # ROS 2's events reach Nerve under /_ros2/parameter_events
        echo = ros2.nerve("topic", "echo", "/_ros2/parameter_events", "--count", "1", "--format", "json",
                          "--timeout", "30")
        end = time.monotonic() + 30
        got = None
        while time.monotonic() < end and echo.p.poll() is None:
            got = param_client(ros2, "/events_node", "set", "speed", "2.5")
            time.sleep(0.5)
        assert echo.wait(60) == 0, (echo.err, bridge.err)
        event = json.loads(echo.lines[-1])
        assert event["type"] == "rcl_interfaces/msg/ParameterEvent", event
        assert event["msg"]["node"] == "/events_node", event
        assert got and got["results"] == [{"successful": True, "reason": ""}], got

        # and Nerve's own events stay Nerve's: the topic keeps Nerve's type
        c = nerve.Context(domain).node("events_checker").create_param_client("/late_params")
        assert c.wait_for_node(10)
        assert c.get(["gain"]) == {"gain": 2.0}
        info = subprocess.run([target_bin("nerve"), "topic", "info", "/parameter_events", "--format", "json"],
                              env=ros2.environ, capture_output=True, text=True, timeout=60)
        assert info.returncode == 0, info.stderr
        assert json.loads(info.stdout)["type"] == "nerve/ParamEvent", info.stdout
    finally:
        before_stop.set()
        after_stop.set()
        t_before.join(10)
        if t_after:
            t_after.join(10)
