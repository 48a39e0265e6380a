"""Managed lifecycles across `nerve bridge ros2`, with real rclpy nodes (ROS 2 Kilted over
Fast DDS; the harness is tests/ros2/harness.py, nothing here mocks ROS 2):

- ROS 2 tools drive a Nerve managed node: an rclpy client calls lifecycle_msgs
  ChangeState, GetState, GetAvailableTransitions and GetAvailableStates on a Python
  `nerve.ManagedNode` and an rclpy subscriber reads its lifecycle_msgs TransitionEvents;
- Nerve drives a ROS 2 lifecycle node: `nerve lifecycle list | get | set` on an
  `rclpy.lifecycle.LifecycleNode`, whose own callbacks say they ran."""

import json
import subprocess
import threading
import time

import pytest

import nerve
from conftest import target_bin


def nerve_cli(ros2, *args, timeout=60):
    return subprocess.run([str(target_bin("nerve")), *map(str, args)], env=ros2.environ,
                          capture_output=True, text=True, timeout=timeout)


def wait_for_nerve_subscriber(ros2, topic):
    """Waits (a hang guard, no timing bound) until `topic` has a Nerve subscriber: the
    bridge's, which exists once a ROS 2 subscription asks for the topic."""
    info = None
    for _ in range(300):
        r = nerve_cli(ros2, "topic", "info", topic, "--format", "json")
        if r.returncode == 0:
            info = json.loads(r.stdout)
            if info["subscribers"] >= 1:
                return info
        time.sleep(0.1)
    raise AssertionError(f"no Nerve subscriber on {topic}: {info}")


def text(label):
    """A label as rclpy gives it (a string) or as `nerve topic echo` shows a Nerve
    `FixedStr` (its bytes)."""
    return label if isinstance(label, str) else bytes(label).rstrip(b"\0").decode()


LONG_LABEL = "deactivate_with_a_label_of_40_bytes_long"


def pairs(events):
    return [(text(e["start_state"]["label"]), text(e["goal_state"]["label"])) for e in events]


def test_rclpy_drives_a_nerve_managed_node_and_sees_its_transition_events(ros2, domain, tmp_path):
    up, done = threading.Event(), threading.Event()
    seen, result = [], {}

    def serve():
        ctx = nerve.Context(domain)
        m = nerve.ManagedNode(ctx.node("py_lc"))
        m.on_configure(lambda prev: seen.append(("configure", prev)))
        m.on_activate(lambda prev: seen.append(("activate", prev)))
        up.set()
        while not done.is_set():
            m.serve(0.05)
        result["state"] = m.state

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        assert up.wait(30)
        bridge = ros2.bridge()
        for svc, ty in [("change_state", "ChangeState"), ("get_state", "GetState"),
                        ("get_available_states", "GetAvailableStates"),
                        ("get_available_transitions", "GetAvailableTransitions")]:
            bridge.wait_line(lambda l: l.startswith(
                f"/py_lc/{svc}: service Nerve -> ROS 2 (lifecycle_msgs/srv/{ty}"))
        bridge.wait_line(lambda l: l.startswith(
            "/py_lc/transition_event: topic Nerve -> ROS 2 (lifecycle_msgs/msg/TransitionEvent"))
        go = tmp_path / "go"
        client = ros2.peer(
            "lifecycle_client", "/py_lc", go,
            "get", "transitions", "states",
            "configure", "activate", "get", "transitions",
            # refused by the Nerve node (not valid from active, an unknown id): success False
            "force:configure:1", "force::99",
            # a label Nerve cannot hold: dropped at the bridge, naming the field
            f"send:{LONG_LABEL}:4", "get",
            "--events", 4, "--timeout", 60)
        client.wait_line(lambda l: '"ready"' in l or '"no_service"' in l, timeout=90)
        assert client.json_events("ready"), client.lines
        # the rclpy subscription is matched with the bridge's writer; the bridge's Nerve
        # subscriber comes with it: once it is there, no event can be missed
        wait_for_nerve_subscriber(ros2, "/py_lc/transition_event")
        go.touch()
        client.wait_line(lambda l: '"done"' in l, timeout=120)
        for _ in range(600):
            dropped = [l for l in bridge.err if "transition.label" in l]
            if dropped:
                break
            time.sleep(0.1)
        assert dropped == [
            "/py_lc/change_state: lifecycle_msgs/srv/ChangeState request dropped: "
            "transition.label: 40 bytes do not fit Nerve's 31"], bridge.err
    finally:
        done.set()
        t.join(30)

    states = [(e["id"], e["label"]) for e in client.json_events("state")]
    assert len(LONG_LABEL) == 40
    assert states == [(1, "unconfigured"), (3, "active"), (3, "active")], client.lines
    trans = client.json_events("transitions")
    assert [(d["transition"]["label"], d["transition"]["id"], d["start_state"]["label"])
            for d in trans[0]["transitions"]] == [("configure", 1, "unconfigured"),
                                                  ("shutdown", 5, "unconfigured")], trans
    assert [d["transition"]["label"] for d in trans[1]["transitions"]] == ["deactivate", "shutdown"]
    all_states = {(s["id"], s["label"]) for s in client.json_events("states")[0]["states"]}
    assert {(1, "unconfigured"), (2, "inactive"), (3, "active"), (4, "finalized"),
            (15, "errorprocessing")} <= all_states, all_states
    changed = [(c["label"], c["id"], c["success"]) for c in client.json_events("changed")]
    assert changed == [("configure", 1, True), ("activate", 3, True),
                       ("configure", 1, False), ("", 99, False)], (changed, bridge.err[-10:])

    events = [e["msg"] for e in client.json_events("transition_event")]
    assert pairs(events) == [("unconfigured", "configuring"), ("configuring", "inactive"),
                             ("inactive", "activating"), ("activating", "active")], events
    assert [e["transition"]["label"] for e in events] == [
        "configure", "transition_success", "activate", "transition_success"]
    assert [e["transition"]["id"] for e in events][::2] == [1, 3]
    stamps = [e["timestamp"] for e in events]
    assert stamps == sorted(stamps) and stamps[0] > 1_600_000_000 * 10**9, stamps
    print("rclpy client saw:", *client.lines, sep="\n  ")
    # the Nerve node's own callbacks ran, once each, and the refusals changed nothing
    assert seen == [("configure", "unconfigured"), ("activate", "inactive")]
    assert result["state"] == "active"


@pytest.mark.every_ros2_distro
def test_the_nerve_lifecycle_cli_drives_an_rclpy_lifecycle_node(ros2, domain):
    node = ros2.peer("lifecycle_node", "ros2_lc", 180)
    node.wait_line(lambda l: '"ready"' in l)
    bridge = ros2.bridge()
    for svc, ty in [("change_state", "ChangeState"), ("get_state", "GetState"),
                    ("get_available_states", "GetAvailableStates"),
                    ("get_available_transitions", "GetAvailableTransitions")]:
        bridge.wait_line(lambda l: l.startswith(
            f"/ros2_lc/{svc}: service ROS 2 -> Nerve (lifecycle_msgs/srv/{ty}"), timeout=60)
    bridge.wait_line(lambda l: l.startswith(
        "/ros2_lc/transition_event: topic ROS 2 -> Nerve (lifecycle_msgs/msg/TransitionEvent"),
        timeout=60)

    # `nerve lifecycle list` finds the ROS 2 node by the bridge's change_state server
    out = nerve_cli(ros2, "lifecycle", "list", "--format", "json")
    assert out.returncode == 0, out.stderr
    assert {"node": "/ros2_lc", "state": "unconfigured"} in json.loads(out.stdout), out.stdout

    # ROS 2's transition events reach Nerve as Nerve's own type
    echo = ros2.nerve("topic", "echo", "/ros2_lc/transition_event", "--count", "4",
                      "--format", "json", "--timeout", "120", name="echo")
    node.wait_line(lambda l: '"event_subscribers"' in l, timeout=60)

    out = nerve_cli(ros2, "lifecycle", "set", "/ros2_lc", "configure", "--timeout", "20000")
    assert (out.returncode, out.stdout) == (0, "/ros2_lc: configure: unconfigured -> inactive\n"), out.stderr
    out = nerve_cli(ros2, "lifecycle", "set", "/ros2_lc", "activate", "--timeout", "20000")
    assert (out.returncode, out.stdout) == (0, "/ros2_lc: activate: inactive -> active\n"), out.stderr
    callbacks = [(c["hook"], c["state"]) for c in node.json_events("callback")]
    assert callbacks == [("configure", "unconfigured"), ("activate", "inactive")], node.lines

    out = nerve_cli(ros2, "lifecycle", "get", "/ros2_lc", "--timeout", "20000")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "/ros2_lc: active [3]",
        "transitions: deactivate [4] -> deactivating, shutdown [7] -> shuttingdown",
    ], out.stdout
    out = nerve_cli(ros2, "lifecycle", "get", "/ros2_lc", "--format", "json")
    got = json.loads(out.stdout)
    assert (got["state"], got["id"]) == ("active", 3)
    assert [t["label"] for t in got["transitions"]] == ["deactivate", "shutdown"]

    # a transition rclpy refuses (success False) fails the command, naming the node
    out = nerve_cli(ros2, "lifecycle", "set", "/ros2_lc", "configure", "--timeout", "20000")
    print("nerve lifecycle set /ros2_lc configure (from active):", out.returncode, out.stderr)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "/ros2_lc" in out.stderr and "configure" in out.stderr, out.stderr
    assert len(node.json_events("callback")) == 2

    assert echo.wait(120) == 0, echo.err
    print("rclpy lifecycle node said:", *node.lines, sep="\n  ")
    events = [json.loads(l) for l in echo.lines if l.startswith("{")]
    assert {e["type"] for e in events} == {"nerve_msgs/LifecycleTransitionEvent"}, events
    assert pairs([e["msg"] for e in events]) == [
        ("unconfigured", "configuring"), ("configuring", "inactive"),
        ("inactive", "activating"), ("activating", "active")], events
    # rcl fills in only the states: its events carry timestamp 0 and an empty transition
    # (seen in rclpy itself), and they cross as they are
    assert [(e["msg"]["timestamp"], e["msg"]["transition"]["id"],
             text(e["msg"]["transition"]["label"])) for e in events] == [(0, 0, "")] * 4
