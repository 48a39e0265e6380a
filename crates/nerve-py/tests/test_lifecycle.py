"""Managed nodes from Python: callbacks, failures and exceptions, gated publishers, the
node driven by `nerve lifecycle set` and by `nerve launch` (Rust), served by an Executor,
and its typed transition events and lifecycle services."""

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


def test_an_executor_serves_a_managed_node_to_the_cli_and_to_service_calls(domain, node):
    """A managed node on an Executor spinning in a thread: `nerve lifecycle set` and
    calls of its lifecycle services drive it, its callbacks run on the executor's thread,
    an exception in one sends it through error processing, and a subscriber of its
    transition events gets them typed."""
    events = node.create_subscription(msgs.TransitionEvent, "/py_exec_lc/transition_event",
                                      qos=nerve.Qos(depth=64, history=1))
    up = threading.Event()
    holder = {}

    def spin():
        ctx = nerve.Context(domain)
        n = ctx.node("py_exec_lc")
        m = nerve.ManagedNode(n)
        threads = holder["threads"] = []
        for hook in ["configure", "activate", "deactivate"]:
            getattr(m, f"on_{hook}")(lambda prev: threads.append(threading.get_ident()))

        def cleanup(prev):
            threads.append(threading.get_ident())
            raise RuntimeError("the lens is stuck")
        m.on_cleanup(cleanup)
        ex = holder["ex"] = nerve.Executor()
        ex.add_node(n)
        holder["ident"] = threading.get_ident()
        up.set()
        ex.spin()
        holder["state"] = m.state
        holder["last_error"] = m.last_error

    t = threading.Thread(target=spin, daemon=True)
    t.start()
    assert up.wait(60)
    cli = str(target_bin("nerve"))

    def run(*args):
        return subprocess.run([cli, "lifecycle", *args], capture_output=True, text=True, timeout=60)

    get_state = node.create_client(nerve.srv.GetState, "/py_exec_lc/get_state")
    change = node.create_client(nerve.srv.ChangeState, "/py_exec_lc/change_state")
    available = node.create_client(nerve.srv.GetAvailableTransitions,
                                   "/py_exec_lc/get_available_transitions")
    graph = node.create_client(nerve.srv.GetAvailableTransitions,
                               "/py_exec_lc/get_transition_graph")
    states = node.create_client(nerve.srv.GetAvailableStates, "/py_exec_lc/get_available_states")
    try:
        assert get_state.wait_for_service(60)
        out = run("set", "/py_exec_lc", "configure")
        assert out.returncode == 0, out.stderr
        assert out.stdout == "/py_exec_lc: configure: unconfigured -> inactive\n"
        out = run("set", "/py_exec_lc", "activate")
        assert out.returncode == 0, out.stderr
        s = get_state.call(timeout=30).current_state
        assert isinstance(s, msgs.State)
        assert (s.id, s.label) == (3, "active")
        assert change.call(timeout=30, transition={"label": "deactivate"}).success == 1
        got = available.call(timeout=30).available_transitions
        assert [(d["transition"]["label"].decode(), int(d["goal_state"]["id"])) for d in got] == [
            ("cleanup", 1), ("activate", 3), ("shutdown", 4)]
        assert len(graph.call(timeout=30).available_transitions) == 25
        assert len(states.call(timeout=30).available_states) == 10
        # the cleanup callback raises: error processing, then unconfigured (no on_error)
        assert change.call(timeout=30, transition={"label": "cleanup"}).success == 0
        assert get_state.call(timeout=30).current_state.label == "unconfigured"
        out = run("set", "/py_exec_lc", "activate")
        assert out.returncode == 1
        assert "transition activate is not valid from state unconfigured" in out.stderr
    finally:
        holder["ex"].shutdown()
        t.join(60)
    assert not t.is_alive()
    assert holder["state"] == "unconfigured"
    assert "the lens is stuck" in holder["last_error"]
    assert holder["threads"] == [holder["ident"]] * 4
    seen = []
    while (e := events.try_recv()) is not None:
        assert isinstance(e, msgs.TransitionEvent)
        assert isinstance(e.transition, msgs.Transition)
        seen.append((e.transition.label, e.start_state.label, e.goal_state.label))
    assert seen == [
        ("configure", "unconfigured", "configuring"),
        ("transition_success", "configuring", "inactive"),
        ("activate", "inactive", "activating"),
        ("transition_success", "activating", "active"),
        ("deactivate", "active", "deactivating"),
        ("transition_success", "deactivating", "inactive"),
        ("cleanup", "inactive", "cleaningup"),
        ("transition_error", "cleaningup", "errorprocessing"),
        ("transition_success", "errorprocessing", "unconfigured"),
    ]


def test_the_lifecycle_types_are_built_in():
    from nerve import srv
    for name in ["TransitionEvent", "State", "Transition", "TransitionDescription",
                 "ChangeStateRequest", "ChangeStateResponse", "GetStateResponse",
                 "GetAvailableStatesResponse", "GetAvailableTransitionsResponse"]:
        assert name in msgs.__all__, name
    for name in ["ChangeState", "GetState", "GetAvailableStates", "GetAvailableTransitions"]:
        assert name in srv.__all__, name
    assert srv.ChangeState.request is msgs.ChangeStateRequest
    e = msgs.TransitionEvent(timestamp=7, transition={"id": 1, "label": "configure"},
                             goal_state={"id": 10, "label": "configuring"})
    assert (e.transition.label, e.goal_state.id, e.start_state.label) == ("configure", 10, "")
    with pytest.raises(TypeError, match="view inside a message"):
        msgs.State(id=1)
