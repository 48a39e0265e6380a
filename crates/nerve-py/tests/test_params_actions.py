"""Parameters and actions from Python: declared and validated parameters served to
another node (and to the Rust CLI), and goals with feedback, results, cancels and
rejections, Python to Python and Python to a Rust server."""

import subprocess
import threading

import numpy as np
import pytest

import nerve
from conftest import target_bin


class Thread:
    """Runs ``body(ctx, ready)`` on its own thread with its own context (nodes are
    single-threaded); ``stop`` ends its loop, errors come back through ``join``."""

    def __init__(self, domain, body):
        self.ready = threading.Event()
        self.stop = False
        self.error = None

        def run():
            try:
                body(nerve.Context(domain), self)
            except Exception as e:  # surfaced by join()
                self.error = e
                self.ready.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert self.ready.wait(30), self.error
        if self.error:
            raise self.error

    def join(self):
        self.stop = True
        self.thread.join(30)
        if self.error:
            raise self.error


def test_parameters_validate_atomically_and_serve_remote_clients(domain, node, tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("/py_params:\n  speed: 2\n")

    def serve(ctx, t):
        n = ctx.node("py_params")
        p = n.create_parameters(files=[str(f)], from_env=False)
        # a YAML 1 sets a float parameter
        assert p.declare("speed", 1.0, description="m/s", range=(0.0, 3.0, 0.0)) == 2.0
        p.declare("mode", "idle")
        p.declare("gains", [1.0, 2.0])
        seen = []
        p.on_validate(lambda changes: "mode may not be 'fly'"
                      if any(new == "fly" for (_, _, new) in changes) else None)
        p.on_set(lambda changes: seen.extend(name for (name, _, _) in changes))
        t.seen = seen
        t.ready.set()
        while not t.stop:
            p.serve(0.05)
        t.final = p.values()

    server = Thread(domain, serve)
    c = node.create_param_client("/py_params")
    assert c.wait_for_node(10)
    assert c.get(["speed", "mode", "nope"]) == {"speed": 2.0, "mode": "idle", "nope": None}
    with pytest.raises(nerve.ParamError, match="mode may not be 'fly'"):
        c.set_atomically({"speed": 2.5, "mode": "fly"})
    with pytest.raises(nerve.ParamError, match="outside 0 to 3"):
        c.set_atomically({"speed": 9, "mode": "run"})
    assert c.get(["speed", "mode"]) == {"speed": 2.0, "mode": "idle"}, "nothing changed"
    assert dict(c.set_each({"speed": 3, "mode": 5})) == {
        "speed": None, "mode": 'parameter "mode" is of type string, not int'}
    c.set_atomically({"gains": [3, 4.5], "mode": "run"})
    assert c.list() == ["gains", "mode", "speed"]
    d = c.describe(["speed"])[0]
    assert (d["type"], d["range"], d["description"]) == ("float", (0.0, 3.0, 0.0), "m/s")
    server.join()
    assert server.final["gains"] == [3.0, 4.5]
    assert server.seen == ["speed", "gains", "mode"]
    with pytest.raises(TypeError, match="only bools, only numbers or only strs"):
        node.create_parameters(from_env=False).declare("bad", [1, "x"])


def test_the_cli_sets_a_python_node_parameter(domain, node):
    def serve(ctx, t):
        p = ctx.node("py_cli_params").create_parameters(from_env=False)
        p.declare("rate", 10)
        t.ready.set()
        while not t.stop:
            p.serve(0.05)
        t.final = p.get("rate")

    server = Thread(domain, serve)
    cli = str(target_bin("nerve"))
    out = subprocess.run([cli, "param", "set", "/py_cli_params", "rate", "20"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([cli, "param", "set", "/py_cli_params", "rate", "fast"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "is of type int" in out.stderr, out.stderr
    server.join()
    assert server.final == 20


def fibonacci_server(ctx, t, policy="queue"):
    server = ctx.node("py_fib").create_action_server("/py_fib", "Fibonacci", policy=policy)
    t.ready.set()
    progress = {}
    while not t.stop:
        server.wait(0.02)
        server.handle_pending(lambda g: None if g.order <= 20 else f"order {g.order} is too large")
        for g in server.goals():
            seq = progress.setdefault(g.id, [0, 1])
            order = g.goal.order
            if g.is_canceling:
                g.canceled(len=len(seq), data=np.array(seq, dtype=np.int64))
            elif len(seq) > order:
                done = seq[: order + 1]
                g.succeed(len=len(done), data=np.array(done, dtype=np.int64))
            else:
                seq.append(seq[-1] + seq[-2])
                g.feedback(len=len(seq), data=np.array(seq, dtype=np.int64))


def test_goals_feedback_results_cancel_and_rejection(domain, node):
    server = Thread(domain, fibonacci_server)
    client = node.create_action_client("/py_fib", "Fibonacci")
    assert client.wait_for_server(10)
    goal = client.send_goal(order=6)
    state, result = goal.result(10)
    assert state == "succeeded"
    assert list(result._elems) == [0, 1, 1, 2, 3, 5, 8]
    lengths = [f.len for f in goal.feedbacks()]
    assert lengths == [3, 4, 5, 6, 7]
    with pytest.raises(nerve.ActionError, match="order 99 is too large"):
        client.send_goal({"order": 99})
    # cancel one of two
    a, b = client.send_goal(order=20), client.send_goal(order=3)
    assert a.cancel() in ("canceling", "canceled")
    assert a.result(10)[0] == "canceled"
    assert b.result(10)[0] == "succeeded"
    server.join()


def test_a_python_client_of_the_rust_server(domain, node):
    proc = subprocess.Popen([str(target_bin("fibonacci"))], stdout=subprocess.PIPE, text=True)
    try:
        assert "serving" in proc.stdout.readline()
        client = node.create_action_client("/fibonacci", "nerve_msgs/Fibonacci")
        assert client.wait_for_server(10)
        state, result = client.send_goal(order=10).result(30)
        assert state == "succeeded" and result.len == 11 and result._elems[-1] == 55
        # the same node serves parameters
        c = node.create_param_client("/fibonacci")
        c.set_atomically({"step_ms": 2})
        assert c.get(["step_ms"]) == {"step_ms": 2}
        with pytest.raises(nerve.ParamError, match="step_ms 1 starves"):
            c.set_atomically({"step_ms": 1, "gain": 2.0})
        assert c.get(["step_ms", "gain"]) == {"step_ms": 2, "gain": 1.0}
    finally:
        proc.terminate()
        proc.wait(10)


NODE_SCRIPT = """
import nerve, signal, sys
ctx = nerve.Context()
node = ctx.node("py_launched")
p = node.create_parameters()
p.declare("gain", 1.0)
p.declare("label", "none")
print("ready", p.node_path, flush=True)
stop = []
signal.signal(signal.SIGINT, lambda *a: stop.append(1))
while not stop:
    p.serve(0.05)
print("bye", flush=True)
"""


def test_launch_starts_a_python_node_with_parameters(domain, node, tmp_path):
    import os
    import signal
    import sys
    script = tmp_path / "node.py"
    script.write_text(NODE_SCRIPT)
    f = tmp_path / "py.launch.toml"
    f.write_text(f"""
[[process]]
name = "py"
cmd = [{str(sys.executable)!r}, {str(script)!r}]
namespace = "r7"
params = {{ gain = 3, label = "left" }}
ready = {{ line = "^ready /r7/py_launched$" }}
""".replace("'", '"'))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    launcher = subprocess.Popen([str(target_bin("nerve")), "launch", str(f)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in launcher.stdout:
            lines.append(line)
            if "all processes ready" in line:
                break
        assert any("all processes ready" in l for l in lines), "".join(lines)
        c = node.create_param_client("/r7/py_launched")
        assert c.wait_for_node(10)
        # the launch file's integer 3 widens to the float parameter
        assert c.get(["gain", "label"]) == {"gain": 3.0, "label": "left"}
        launcher.send_signal(signal.SIGINT)
        rest, _ = launcher.communicate(timeout=30)
        assert launcher.returncode == 0, "".join(lines) + rest
        assert "[py] bye" in rest, rest
    finally:
        if launcher.poll() is None:
            launcher.kill()
