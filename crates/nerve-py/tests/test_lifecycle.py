"""Managed nodes from Python: callbacks, failures and exceptions, gated publishers, and
the node driven by `nerve lifecycle set` and by `nerve launch` (Rust)."""

import os
import signal
import subprocess
import sys
import threading

import pytest

import nerve
from nerve import msgs
from conftest import target_bin


def test_a_full_cycle_runs_callbacks_and_gates_the_publisher(node):
    m = nerve.ManagedNode(node)
    seen = []

    for hook in ["configure", "activate", "deactivate", "cleanup", "shutdown"]:
        getattr(m, f"on_{hook}")(lambda prev, hook=hook: seen.append((hook, prev)))
    pub = m.create_publisher(msgs.CmdVel, "/py_lc/out")
    sub = node.create_subscription(msgs.CmdVel, "/py_lc/out")
    assert (m.name, m.state, m.state_id) == ("/test_node", "unconfigured", 1)
    assert m.available_transitions() == ["configure", "shutdown"]
    assert pub.publish(linear=1.0) is False
    assert m.configure() == "inactive"
    assert m.activate() == "active"
    assert pub.publish(linear=2.5) is True
    assert m.deactivate() == "inactive"
    assert pub.publish(linear=3.0) is False
    assert pub.dropped == 2
    assert sub.recv(timeout=5.0).linear == 2.5
    assert sub.try_recv() is None
    assert m.cleanup() == "unconfigured"
    assert m.shutdown() == "finalized"
    assert seen == [("configure", "unconfigured"), ("activate", "inactive"),
                    ("deactivate", "active"), ("cleanup", "inactive"),
                    ("shutdown", "unconfigured")]


def test_failure_returns_and_an_exception_goes_through_error_processing(node):
    m = nerve.ManagedNode(node)
    answers = [False]
    m.on_configure(lambda prev: answers[0])
    errors = []
    m.on_error(lambda prev: errors.append(prev))
    with pytest.raises(nerve.LifecycleError, match="configure callback returned Failure: now unconfigured"):
        m.configure()
    assert errors == []

    def boom(prev):
        raise RuntimeError("lens cap on")
    m.on_configure(boom)
    with pytest.raises(nerve.LifecycleError, match=r"returned Error: now unconfigured \(.*lens cap on\)"):
        m.configure()
    assert errors == ["configuring"]
    assert m.state == "unconfigured"
    # on_error failing finalizes the node
    m.on_error(lambda prev: False)
    with pytest.raises(nerve.LifecycleError, match="now finalized"):
        m.configure()
    with pytest.raises(nerve.LifecycleError,
                       match="transition configure is not valid from state finalized"):
        m.configure()
    with pytest.raises(ValueError, match='no lifecycle callback "explode"'):
        m._raw.set_callback("explode", print)


def test_invalid_transitions_name_the_state(node):
    m = nerve.ManagedNode(node)
    with pytest.raises(nerve.LifecycleError, match=r"activate is not valid from state "
                       r"unconfigured \(valid: configure, shutdown\)"):
        m.activate()
    with pytest.raises(nerve.LifecycleError, match="explode is not valid"):
        m.trigger("explode")


def test_the_cli_drives_a_python_managed_node(domain, node):
    done = threading.Event()
    result = {}

    def serve():
        ctx = nerve.Context(domain)
        m = nerve.ManagedNode(ctx.node("py_managed"))
        m.on_activate(lambda prev: prev == "inactive")
        result["ready"] = True
        while not done.is_set():
            m.serve(0.05)
        result["state"] = m.state

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    cli = str(target_bin("nerve"))

    def run(*args):
        return subprocess.run([cli, "lifecycle", *args], capture_output=True, text=True, timeout=60)

    try:
        out = run("set", "/py_managed", "configure")
        assert out.returncode == 0, out.stderr
        assert out.stdout == "/py_managed: configure: unconfigured -> inactive\n"
        out = run("set", "/py_managed", "activate")
        assert out.returncode == 0, out.stderr
        out = run("list")
        assert any(l.split() == ["/py_managed", "active"] for l in out.stdout.splitlines()), out.stdout
        out = run("set", "/py_managed", "configure")
        assert out.returncode == 1
        assert "transition configure is not valid from state active" in out.stderr
    finally:
        done.set()
        t.join(30)
    assert result["state"] == "active"


NODE_SCRIPT = """
import nerve, signal
ctx = nerve.Context()
m = nerve.ManagedNode(ctx.node("py_cam"))
for hook in ["configure", "activate", "deactivate", "cleanup", "shutdown"]:
    getattr(m, "on_" + hook)(lambda prev, hook=hook: print("on_" + hook, flush=True))
stop = []
signal.signal(signal.SIGINT, lambda *a: stop.append(1))
while not stop:
    m.serve(0.05)
print("bye", m.state, flush=True)
"""


def test_launch_brings_a_python_managed_node_up_and_down(domain, node, tmp_path):
    script = tmp_path / "managed.py"
    script.write_text(NODE_SCRIPT)
    f = tmp_path / "py.launch.toml"
    f.write_text(f"""
[[process]]
name = "py"
cmd = [{str(sys.executable)!r}, {str(script)!r}]
ready = {{ lifecycle = "active", node = "py_cam" }}
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
        text = "".join(lines)
        assert "launch: py: /py_cam activate -> active" in text, text
        launcher.send_signal(signal.SIGINT)
        rest, _ = launcher.communicate(timeout=60)
        assert launcher.returncode == 0, text + rest
        down = [l for l in rest.splitlines() if l.startswith("launch: py: /py_cam")]
        assert down == ["launch: py: /py_cam deactivate -> inactive",
                        "launch: py: /py_cam cleanup -> unconfigured",
                        "launch: py: /py_cam shutdown -> finalized"], rest
        assert "[py] bye finalized" in rest, rest
    finally:
        if launcher.poll() is None:
            launcher.kill()
