"""The C++ examples (examples/cpp, built on the C ABI and nerve.hpp) against Rust and
Python peers on the same topics and services.

The binaries come from the directory in NERVE_CPP_EXAMPLES (scripts/test builds
examples/cpp against the installed CMake package and sets it); without it these tests
are skipped with the reason, unless NERVE_REQUIRE_CPP=1 (set by .ci/run), which makes
that a failure.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

import nerve
from nerve import msgs, srv
from conftest import target_bin

PY_EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
REPO_EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples"


def cpp_bin(name: str) -> pathlib.Path:
    """A C++ example binary from NERVE_CPP_EXAMPLES."""
    root = os.environ.get("NERVE_CPP_EXAMPLES")
    if not root:
        reason = ("NERVE_CPP_EXAMPLES is not set: scripts/test builds examples/cpp (it needs cmake "
                  "and a C++17 compiler) and points it at the binaries")
        if os.environ.get("NERVE_REQUIRE_CPP") == "1":
            pytest.fail(reason + " (NERVE_REQUIRE_CPP=1)")
        pytest.skip(reason)
    path = pathlib.Path(root) / name
    if not path.exists():
        pytest.fail(f"{path} is missing: NERVE_CPP_EXAMPLES={root} holds no {name}")
    return path


def stop(proc: subprocess.Popen) -> None:
    """Ctrl-C (the examples exit cleanly on it), then kill."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def run_pair(consumer: list, producer: list, timeout: float = 60) -> str:
    """Starts the consumer, then the producer; the consumer's stdout once it exits (0)."""
    cons = subprocess.Popen(consumer, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    prod = subprocess.Popen(producer, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = cons.communicate(timeout=timeout)
        assert cons.returncode == 0, f"consumer: {err}\nproducer: {prod.stderr.read() if prod.poll() is not None else ''}"
        return out
    finally:
        stop(prod)
        cons.kill()


# --- topics: the C++ talker, heard by Rust and Python -----------------------------------

def test_the_rust_listener_hears_the_cpp_talker(domain):
    out = run_pair([str(target_bin("listener")), "--topic", "/imu_cpp_rs", "--count", "5"],
                   [str(cpp_bin("talker")), "--topic", "/imu_cpp_rs", "--rate", "100"])
    assert "listener: received 5 messages" in out, out


def test_python_listens_to_the_cpp_talker(node):
    sub = node.create_subscription(msgs.Imu, "/imu_cpp_py", qos=nerve.Qos(depth=16))
    talker = subprocess.Popen([str(cpp_bin("talker")), "--topic", "/imu_cpp_py", "--rate", "200"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            m = sub.recv(1.0)
            if m is not None:
                got.append(m)
        assert len(got) == 5, talker.stderr.read() if talker.poll() is not None else "no samples"
        seqs = [m._header.seq for m in got]
        assert seqs == sorted(seqs)
        # the C++ struct's fields land where the Rust type has them
        assert all(m.linear_acceleration.z == 9.81 and m.angular_velocity.z == 1.0 for m in got)
        assert all(abs(m.orientation.z ** 2 + m.orientation.w ** 2 - 1.0) < 1e-9 for m in got)
        assert all(m.stamp.nanos > 1_600_000_000 * 10**9 for m in got)
    finally:
        stop(talker)


def test_the_python_listener_example_hears_the_cpp_talker(domain):
    out = run_pair([sys.executable, str(PY_EXAMPLES / "listener.py"), "--count", "3", "--topic", "/imu_cpp_ex"],
                   [str(cpp_bin("talker")), "--topic", "/imu_cpp_ex", "--rate", "100"])
    assert out.count("seq ") == 3 and "accel (0.00, 0.00, 9.81)" in out and "received 3" in out, out


def test_the_cpp_listener_hears_the_rust_talker(domain):
    out = run_pair([str(cpp_bin("listener")), "--topic", "/imu_rs_cpp", "--count", "5", "--verbose"],
                   [str(target_bin("talker")), "--topic", "/imu_rs_cpp", "--rate", "100"])
    assert out.count("accel z 9.81") == 5 and "listener: received 5 messages" in out, out


def test_the_cpp_listener_hears_python(node):
    pub = node.create_publisher(msgs.Imu, "/imu_py_cpp")
    listener = subprocess.Popen([str(cpp_bin("listener")), "--topic", "/imu_py_cpp", "--count", "3",
                                 "--verbose"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert pub.wait_for_subscribers(1, 30.0)
        deadline = time.monotonic() + 30
        while listener.poll() is None and time.monotonic() < deadline:
            m = pub.loan()
            m.linear_acceleration.z = 4.25
            m.send()
            time.sleep(0.02)
        out, err = listener.communicate(timeout=10)
        assert listener.returncode == 0, err
        assert out.count("accel z 4.25") == 3, out
    finally:
        listener.kill()


def test_rust_verifies_the_cpp_point_clouds_written_in_place(domain):
    out = run_pair([str(target_bin("pointcloud_sub")), "--topic", "/pts_cpp", "--count", "3", "--json"],
                   [str(cpp_bin("point_cloud_publisher")), "--topic", "/pts_cpp", "--bytes", "10000000",
                    "--rate", "10"], timeout=90)
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["received"] == 3 and summary["bad_checksum"] == 0, summary
    assert summary["bytes"] == 10_000_000, summary


def test_python_reads_the_cpp_point_cloud_head(node):
    sub = node.create_subscription(msgs.PointCloud, "/pts_cpp_py")
    pub = subprocess.Popen([str(cpp_bin("point_cloud_publisher")), "--topic", "/pts_cpp_py", "--bytes",
                            "160000", "--rate", "20"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    try:
        m = None
        deadline = time.monotonic() + 30
        while m is None and time.monotonic() < deadline:
            m = sub.recv(1.0)
        assert m is not None, pub.stderr.read() if pub.poll() is not None else "no cloud"
        assert (m.width, m.height, m.point_step, m.field_count) == (10_000, 1, 16, 4)
    finally:
        stop(pub)


# --- services: C++ servers and clients with Python and Rust peers --------------------------------

def test_python_calls_the_cpp_add_two_ints_server(node):
    server = subprocess.Popen([str(cpp_bin("add_two_ints_server")), "--name", "/add_cpp"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        client = node.create_client(srv.AddTwoInts, "/add_cpp")
        assert client.wait_for_service(30.0), server.stderr.read() if server.poll() is not None else "no server"
        assert client.call(a=2, b=40, timeout=5.0).value == 42
        assert client.call(a=-7, b=3, timeout=5.0).value == -4
        assert client.call(a=2**63 - 1, b=1, timeout=5.0).value == -(2**63)  # wraps, as in Rust
    finally:
        stop(server)


def test_the_cpp_client_calls_a_python_server(node):
    node.create_service(srv.AddTwoInts, "/add_py", lambda req: {"value": req.a + req.b})
    ex = nerve.Executor()
    ex.add_node(node)
    client = subprocess.Popen([str(cpp_bin("add_two_ints_client")), "--name", "/add_py", "--a", "20",
                               "--b", "22", "--timeout", "20"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while client.poll() is None and time.monotonic() < deadline:
            ex.spin_once(0.05)  # the Python server answers on this thread
        out, err = client.communicate(timeout=10)
        assert client.returncode == 0, err
        assert "20 + 22 = 42" in out, out
    finally:
        client.kill()


def test_the_cpp_client_calls_the_rust_server(domain):
    server = subprocess.Popen([str(target_bin("add_server")), "--name", "/add_rs"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = subprocess.run([str(cpp_bin("add_two_ints_client")), "--name", "/add_rs", "--a", "-5",
                              "--b", "47", "--timeout", "20"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "-5 + 47 = 42" in out.stdout, out.stdout
    finally:
        stop(server)


# --- the executor's timers ---------------------------------------------------------------

def test_the_cpp_timer_node_publishes_on_its_grid(node):
    sub = node.create_subscription(msgs.CmdVel, "/cmd_cpp", qos=nerve.Qos(depth=64))
    proc = subprocess.Popen([str(cpp_bin("timer_node")), "--topic", "/cmd_cpp", "--rate", "50",
                             "--seconds", "1.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        got = []
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            m = sub.recv(0.1)
            if m is not None:
                got.append(m)
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    fired = int(out.strip().splitlines()[-1].split()[-2])  # "timer_node: control fired N times"
    assert 60 <= fired <= 80, out  # 1.5 s at 50 Hz, with slack for a loaded machine
    assert got and all(m.linear == 0.5 for m in got), len(got)


# --- actions: the C++ Fibonacci server and client ----------------------------------------

def test_python_calls_the_cpp_fibonacci_server(node):
    server = subprocess.Popen([str(cpp_bin("fibonacci_server")), "--name", "/fib_cpp", "--step-ms", "2"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        client = node.create_action_client("/fib_cpp", "nerve_msgs/Fibonacci")
        assert client.wait_for_server(30), server.stderr.read() if server.poll() is not None else "no server"
        goal = client.send_goal(order=10)
        state, result = goal.result(30)
        assert state == "succeeded"
        assert list(result._elems) == [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55] and result.len == 11
        assert [f.len for f in goal.feedbacks()] == list(range(3, 12))
        # the C++ decider's exception is the reason the client gets
        with pytest.raises(nerve.ActionError, match="order 99 is outside 0 to 90"):
            client.send_goal(order=99)
        # a long goal canceled while running
        slow = client.send_goal(order=90)
        time.sleep(0.05)
        assert slow.cancel() in ("canceling", "canceled")
        assert slow.result(30)[0] == "canceled"
    finally:
        stop(server)


def test_the_cpp_fibonacci_client_of_the_rust_server(domain):
    server = subprocess.Popen([str(target_bin("fibonacci"))], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        assert "serving" in server.stdout.readline()
        out = subprocess.run([str(cpp_bin("fibonacci_client")), "--order", "10", "--timeout", "30"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "result: succeeded [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55]" in out.stdout, out.stdout
        assert "feedback: [0, 1, 1]" in out.stdout, out.stdout
    finally:
        stop(server)


def test_the_cpp_fibonacci_pair_with_a_cancel(domain):
    server = subprocess.Popen([str(cpp_bin("fibonacci_server")), "--name", "/fib_pair", "--step-ms", "20"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = subprocess.run([str(cpp_bin("fibonacci_client")), "--name", "/fib_pair", "--order", "50",
                              "--cancel-after", "2", "--timeout", "30"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "cancel:" in out.stdout and "result: canceled [0, 1, 1, 2" in out.stdout, out.stdout
    finally:
        stop(server)


# --- tensors: produced in C++, opened zero-copy by Python and Rust ------------------------

def test_python_opens_the_cpp_tensors(domain):
    out = run_pair([sys.executable, str(REPO_EXAMPLES / "python" / "tensor_consumer.py"), "--count", "3",
                    "--topic", "/t_cpp", "--pool", f"cpp{domain}"],
                   [str(cpp_bin("tensor_producer")), "--topic", "/t_cpp", "--pool", f"cpp{domain}",
                    "--shape", "64,32,3", "--rate", "50"])
    lines = [l for l in out.splitlines() if l.startswith("tensor ")]
    assert len(lines) == 3 and all("(64, 32, 3) float32" in l and l.endswith("uniform") for l in lines), out
    assert "torn 0" in out, out


def test_rust_opens_the_cpp_tensors(domain):
    out = run_pair([str(target_bin("tensor_consumer")), "--count", "3", "--topic", "/t_cpp_rs"],
                   [str(cpp_bin("tensor_producer")), "--topic", "/t_cpp_rs", "--pool", f"cpprs{domain}",
                    "--shape", "32,8", "--rate", "50"])
    lines = [l for l in out.splitlines() if l.startswith("tensor ")]
    assert len(lines) == 3 and all("[32, 8] f32" in l or "[32, 8] float32" in l for l in lines), out
