"""Actions across `nerve bridge ros2`: a real rclpy ActionClient (ROS 2 Kilted over Fast DDS)
sends test_msgs/action/Fibonacci goals to a Nerve action server, and a Nerve action client
sends goals to an rclpy ActionServer: goals, feedback, results, cancels and statuses, with
nothing mocked (see ros2/harness.py and the action roles of ros2/peer.py)."""

import json
import signal
import time

import numpy as np
import pytest

import nerve
from ros2.harness import Proc, target_bin
from test_params_actions import Thread

ROS_STATUS = {"accepted": 1, "executing": 2, "canceling": 3, "succeeded": 4, "canceled": 5, "aborted": 6}


def nerve_fibonacci(name, step):
    """A Nerve Fibonacci server: one number per `step` seconds, feedback each time,
    cancels honored at once."""

    def body(ctx, t):
        server = ctx.node("nerve_fib_server").create_action_server(name, "Fibonacci")
        t.ready.set()
        progress, due = {}, {}
        while not t.stop:
            server.wait(0.01)
            server.handle_pending(lambda g: None if g.order <= 40 else f"order {g.order} is too large")
            for g in server.goals():
                seq = progress.setdefault(g.id, [0, 1])
                order = g.goal.order
                if g.is_canceling:
                    g.canceled(len=len(seq), data=np.array(seq, dtype=np.int64))
                elif time.monotonic() < due.get(g.id, 0.0):
                    continue
                elif len(seq) > order:
                    # a step after the last feedback: rclpy drops feedback that it takes
                    # after the result
                    done = seq[: order + 1]
                    g.succeed(len=len(done), data=np.array(done, dtype=np.int64))
                else:
                    seq.append(seq[-1] + seq[-2])
                    g.feedback(len=len(seq), data=np.array(seq, dtype=np.int64))
                    due[g.id] = time.monotonic() + step

    return body


def fib(n):
    seq = [0, 1]
    while len(seq) <= n:
        seq.append(seq[-1] + seq[-2])
    return seq[: n + 1]


@pytest.mark.every_ros2_distro
def test_an_rclpy_action_client_gets_feedback_results_and_cancels_from_a_nerve_server(ros2, domain):
    server = Thread(domain, nerve_fibonacci("/nerve_fib", 0.05))
    try:
        bridge = ros2.bridge()
        bridge.wait_line(lambda l: l.startswith(
            "/nerve_fib: action Nerve -> ROS 2 (test_msgs/action/Fibonacci as nerve_msgs/Fibonacci)"))
        c = ros2.peer("action_client", "/nerve_fib", 6)
        c.wait_line(lambda l: '"done"' in l or '"no_server"' in l, timeout=60)
        assert c.json_events("accepted"), (c.lines, bridge.err)
        feedback = [e["sequence"] for e in c.json_events("feedback")]
        assert feedback == [fib(n) for n in range(2, 7)], (c.lines, bridge.err)
        assert c.json_events("result") == [{"event": "result", "status": 4, "sequence": fib(6)}]
        statuses = c.json_events("statuses")[0]["statuses"]
        assert statuses[-1] == ROS_STATUS["succeeded"], statuses

        # a rejection is accepted = false
        c = ros2.peer("action_client", "/nerve_fib", 99)
        c.wait_line(lambda l: '"done"' in l, timeout=60)
        assert c.json_events("rejected"), c.lines

        # a cancel after three feedbacks
        c = ros2.peer("action_client", "/nerve_fib", 40, "--cancel-after", "3")
        c.wait_line(lambda l: '"done"' in l or '"no_server"' in l, timeout=60)
        assert c.json_events("cancel") == [{"event": "cancel", "return_code": 0, "canceling": 1}], c.lines
        (result,) = c.json_events("result")
        assert result["status"] == ROS_STATUS["canceled"], c.lines
        assert 3 <= len(result["sequence"]) < 41 and result["sequence"] == fib(len(result["sequence"]) - 1)
        statuses = c.json_events("statuses")[0]["statuses"]
        assert ROS_STATUS["canceling"] in statuses and statuses[-1] == ROS_STATUS["canceled"], statuses
    finally:
        server.join()


def test_a_nerve_action_client_gets_feedback_results_and_cancels_from_an_rclpy_server(ros2, domain):
    # the action's own topics (`_action/status`, `_action/feedback`) cross with the action,
    # never as plain topics that would take the Nerve action server's status topic
    bridge = ros2.bridge()
    server = ros2.peer("action_server", "/ros_fib", 120, "--step", "0.05", "--max-order", "40")
    server.wait_line(lambda l: '"ready"' in l)
    bridge.wait_line(lambda l: l.startswith(
        "/ros_fib: action ROS 2 -> Nerve (test_msgs/action/Fibonacci as nerve_msgs/Fibonacci)"), timeout=60)
    node = nerve.Context(domain).node("nerve_fib_client")
    client = node.create_action_client("/ros_fib", "Fibonacci")
    assert client.wait_for_server(20)

    goal = client.send_goal(order=5)
    state, result = goal.result(30)
    assert state == "succeeded", bridge.err
    assert list(result._elems) == fib(5)
    assert [list(f._elems) for f in goal.feedbacks()] == [fib(n) for n in range(2, 6)]

    # the ROS 2 server's rejection is the Nerve rejection
    with pytest.raises(nerve.ActionError, match="rejected"):
        client.send_goal(order=99)

    # a cancel once feedback flows
    goal = client.send_goal(order=40)
    deadline = time.monotonic() + 20
    got = []
    while len(got) < 2 and time.monotonic() < deadline:
        f = goal.feedback()
        if f is None:
            time.sleep(0.01)
        else:
            got.append(list(f._elems))
    assert len(got) == 2, bridge.err
    assert goal.cancel() in ("canceling", "canceled")
    state, result = goal.result(30)
    assert state == "canceled", bridge.err
    seq = list(result._elems)
    assert 3 <= len(seq) < 41 and seq == fib(len(seq) - 1)
    server.wait_line(lambda l: '"canceled"' in l)
    assert [e["order"] for e in server.json_events("goal")] == [5, 40]

    # the CLI: feedback and result, then Ctrl-C cancels
    send = ros2.nerve("action", "send_goal", "/ros_fib", "Fibonacci", '{"order": 4}', "--feedback",
                      "--format", "json")
    assert send.wait(60) == 0, send.err
    out = [json.loads(l) for l in send.lines if l.startswith("{")]
    assert [o["state"] for o in out] == ["executing"] * 3 + ["succeeded"], out
    # by its ROS 2 name: the Nerve form it crosses as
    send = ros2.nerve("action", "send_goal", "/ros_fib", "test_msgs/action/Fibonacci", '{"order": 3}',
                      "--format", "json")
    assert send.wait(60) == 0, send.err
    out = [json.loads(l) for l in send.lines if l.startswith("{")]
    assert out[-1]["state"] == "succeeded" and out[-1]["result"]["elems"] == fib(3), out
    send = ros2.nerve("action", "send_goal", "/ros_fib", "Fibonacci", '{"order": 40}', "--feedback",
                      "--format", "json")
    send.wait_line(lambda l: '"feedback"' in l, timeout=30)
    send.p.send_signal(signal.SIGINT)
    assert send.wait(60) != 0
    out = [json.loads(l) for l in send.lines if l.startswith("{")]
    assert out[-1]["state"] == "canceled", (out, send.err)


NESTED_GOAL = {
    "nested_field": {"int32_value": 7, "char_value": 104, "float64_value": 0.1, "uint8_value": 255,
                     "int64_value": -9},
    "nested_different_pkg": {"sec": 3, "nanosec": 4},
    "nested_field_no_pkg": {"time_value": {"sec": 9, "nanosec": 1}, "duration_value": {"sec": -1, "nanosec": 5}},
}


@pytest.mark.every_ros2_distro
def test_any_ros2_action_type_crosses_as_cdr_to_the_cli_and_python(ros2, domain, monkeypatch,
                                                                    tmp_path):
    # test_msgs/action/NestedMessage has no Nerve form: the bridge serves it in Nerve as
    # CDR with its definition, and `nerve action send_goal` speaks it by its ROS 2 name
    bridge = ros2.bridge()
    server = ros2.peer("nested_action_server", "/nested", 120, "--feedbacks", "3")
    long = ros2.peer("nested_action_server", "/nested_long", 120, "--feedbacks", "1000")
    for name in ("/nested", "/nested_long"):
        bridge.wait_line(lambda l: l.startswith(
            f"{name}: action ROS 2 -> Nerve (test_msgs/action/NestedMessage as nerve_msgs/Ros2Action)"),
            timeout=60)
    send = ros2.nerve("action", "send_goal", "/nested", "test_msgs/action/NestedMessage",
                      json.dumps(NESTED_GOAL), "--feedback", "--format", "json", ament=True)
    assert send.wait(60) == 0, (send.err, bridge.err)
    out = [json.loads(l) for l in send.lines if l.startswith("{")]
    feedback = [o["feedback"] for o in out if "feedback" in o]
    assert [f["nested_field"]["int32_value"] for f in feedback] == [7, 8, 9], (out, bridge.err)
    assert all(f["nested_field"]["char_value"] == 104 for f in feedback), feedback
    assert out[-1]["state"] == "succeeded", out
    result = out[-1]["result"]
    assert result["nested_field"]["float64_value"] == 0.1
    assert result["nested_field"]["uint8_value"] == 255
    assert result["nested_field"]["int64_value"] == -9
    assert result["nested_different_pkg"] == {"sec": 3, "nanosec": 4}
    assert result["nested_field_no_pkg"]["time_value"] == {"sec": 9, "nanosec": 1}
    assert result["nested_field_no_pkg"]["duration_value"] == {"sec": -1, "nanosec": 5}
    (goal,) = server.json_events("goal")
    assert goal["goal"]["nested_field"]["char_value"] == 104

    # Python names the type as ROS 2 does; goals, feedback and results are dicts
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(ros2.share.parent))
    client = nerve.Context(domain).node("py_nested").create_action_client(
        "/nested", "test_msgs/action/NestedMessage")
    assert client.wait_for_server(20)
    g = client.send_goal(NESTED_GOAL)
    state, result = g.result(30)
    assert state == "succeeded", bridge.err
    assert result["nested_field"]["int64_value"] == -9
    assert result["nested_different_pkg"] == {"sec": 3, "nanosec": 4}
    assert [f["nested_field"]["int32_value"] for f in g.feedbacks()] == [7, 8, 9]
    with pytest.raises(ValueError, match="nested_feld"):
        client.send_goal(nested_feld={})
    assert goal["goal"]["nested_field_no_pkg"]["duration_value"] == {"sec": -1, "nanosec": 5}

    # `nerve action list` names the type as ROS 2 does (its server, the bridge, says it)
    listed = ros2.nerve("action", "list", "--format", "json")
    assert listed.wait(30) == 0, listed.err
    rows = json.loads("".join(listed.lines))
    assert {"name": "/nested", "type": "test_msgs/action/NestedMessage"}.items() <= next(
        r for r in rows if r["name"] == "/nested").items(), rows
    info = ros2.nerve("action", "info", "/nested", "--format", "json")
    assert info.wait(30) == 0, info.err
    assert json.loads("".join(info.lines))["type"] == "test_msgs/action/NestedMessage", info.lines

    # another definition of the type here: refused naming both hashes, before a goal is sent
    other = tmp_path / "share" / "test_msgs" / "action"
    other.mkdir(parents=True)
    text = (ros2.share / "test_msgs" / "action" / "NestedMessage.action").read_text()
    (other / "NestedMessage.action").write_text("int8 extra\n" + text)
    env = {**ros2.environ, "AMENT_PREFIX_PATH": f"{tmp_path}:{ros2.share.parent}"}
    goals = len(server.json_events("goal"))
    bad = Proc([target_bin("nerve"), "action", "send_goal", "/nested", "test_msgs/action/NestedMessage",
                "{}"], env, "other")
    assert bad.wait(30) == 2
    assert any("another definition" in l for l in bad.err), bad.err
    assert len(server.json_events("goal")) == goals, server.lines

    # a goal with a field the type does not have is refused by name, before it is sent
    bad = ros2.nerve("action", "send_goal", "/nested", "test_msgs/action/NestedMessage",
                     '{"nested_feld": {}}', ament=True)
    assert bad.wait(30) == 2
    assert any("nested_feld" in l for l in bad.err), bad.err

    # Ctrl-C cancels: the ROS 2 server sees the cancel, the goal ends canceled
    send = ros2.nerve("action", "send_goal", "/nested_long", "test_msgs/action/NestedMessage",
                      json.dumps(NESTED_GOAL), "--feedback", "--format", "json", ament=True)
    send.wait_line(lambda l: '"feedback"' in l, timeout=30)
    send.p.send_signal(signal.SIGINT)
    assert send.wait(60) != 0
    out = [json.loads(l) for l in send.lines if l.startswith("{")]
    assert out[-1]["state"] == "canceled", (out, send.err, bridge.err)
    long.wait_line(lambda l: '"canceled"' in l)
    (canceled,) = long.json_events("canceled")
    # the result ROS 2's server ended the goal with (it counts the feedbacks it sent)
    got, sent = out[-1]["result"]["nested_field"], canceled["result"]["nested_field"]
    assert (got["int32_value"], got["char_value"]) == (sent["int32_value"], 104), (got, sent)
    assert 1 <= got["int32_value"] < 1000


def nerve_nested(name, feedbacks, step):
    """A Nerve server of the ROS 2 type test_msgs/action/NestedMessage (carried as CDR):
    `feedbacks` feedbacks counting nested_field.int32_value up from the goal's, then the
    goal back as the result; cancels honored at once."""

    def body(ctx, t):
        server = ctx.node("nerve_nested_server").create_action_server(
            name, "test_msgs/action/NestedMessage", policy="parallel")
        t.ready.set()
        sent, due = {}, {}
        while not t.stop:
            server.wait(0.01)
            server.handle_pending()
            for g in server.goals():
                goal = g.goal
                n = sent.setdefault(g.id, 0)
                echo = {k: goal[k] for k in ("nested_field_no_pkg", "nested_different_pkg")}
                nested = {k: (v.tolist() if hasattr(v, "tolist") else v)
                          for k, v in goal["nested_field"].items()}
                if g.is_canceling:
                    g.canceled(echo, nested_field=dict(nested, int32_value=n))
                elif time.monotonic() < due.get(g.id, 0.0):
                    continue
                elif n == feedbacks:
                    g.succeed(echo, nested_field=nested)
                else:
                    g.feedback(echo, nested_field=dict(nested, int32_value=nested["int32_value"] + n))
                    sent[g.id] = n + 1
                    due[g.id] = time.monotonic() + step

    return body


@pytest.mark.every_ros2_distro
def test_an_rclpy_action_client_reaches_a_nerve_server_of_any_ros2_action_type(ros2, domain,
                                                                              monkeypatch):
    # the Nerve server says its ROS 2 type; the bridge offers it to ROS 2 as that type
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(ros2.share.parent))
    server = Thread(domain, nerve_nested("/nerve_nested", 3, 0.05))
    long = Thread(domain, nerve_nested("/nerve_nested_long", 1000, 0.05))
    try:
        bridge = ros2.bridge()
        bridge.wait_line(lambda l: l.startswith(
            "/nerve_nested: action Nerve -> ROS 2 (test_msgs/action/NestedMessage as "
            "nerve_msgs/Ros2Action)"), timeout=60)
        c = ros2.peer("action_client", "/nerve_nested", 0, "--type", "test_msgs/action/NestedMessage",
                      "--goal", json.dumps(NESTED_GOAL))
        c.wait_line(lambda l: '"done"' in l or '"no_server"' in l, timeout=60)
        assert c.json_events("accepted"), (c.lines, bridge.err)
        feedback = [e["feedback"]["nested_field"]["int32_value"] for e in c.json_events("feedback")]
        # feedback is a volatile topic: what the bridge sends before its DDS writer has
        # matched the client's new feedback reader is not the client's (as between two
        # ROS 2 nodes; rclpy's wait_for_server waits for the services only), so the
        # first of them may be missing, never reordered, changed or the last one lost
        assert feedback and feedback == [7, 8, 9][-len(feedback):], (c.lines, bridge.err)
        (result,) = c.json_events("result")
        assert result["status"] == ROS_STATUS["succeeded"], result
        assert result["result"]["nested_field"]["int64_value"] == -9
        assert result["result"]["nested_field"]["float64_value"] == 0.1
        assert result["result"]["nested_different_pkg"] == {"sec": 3, "nanosec": 4}
        assert result["result"]["nested_field_no_pkg"]["duration_value"] == {"sec": -1, "nanosec": 5}

        # a cancel after two feedbacks: the Nerve server ends the goal canceled
        bridge.wait_line(lambda l: l.startswith("/nerve_nested_long: action Nerve -> ROS 2"), timeout=60)
        c = ros2.peer("action_client", "/nerve_nested_long", 0, "--cancel-after", "2",
                      "--type", "test_msgs/action/NestedMessage", "--goal", json.dumps(NESTED_GOAL))
        c.wait_line(lambda l: '"done"' in l or '"no_server"' in l, timeout=60)
        assert c.json_events("cancel") == [{"event": "cancel", "return_code": 0, "canceling": 1}], c.lines
        (result,) = c.json_events("result")
        assert result["status"] == ROS_STATUS["canceled"], (c.lines, bridge.err)
        assert 2 <= result["result"]["nested_field"]["int32_value"] < 1000, result
        statuses = c.json_events("statuses")[0]["statuses"]
        assert ROS_STATUS["canceling"] in statuses and statuses[-1] == ROS_STATUS["canceled"], statuses
    finally:
        server.join()
        long.join()
