"""The ROS 2 test harness: real rclpy nodes (ROS 2 over Fast DDS, from PyPI wheels in a
virtual environment of their own per distribution: Kilted, and Jazzy for the tests marked
`every_ros2_distro`) run `tests/ros2/peer.py` with that environment's python, and
`nerve bridge ros2` between them and Nerve. Where a distribution's environment is missing
its tests are skipped with the reason, unless NERVE_REQUIRE_ROS2=1 (set by .ci/run), which
fails them instead. The `ros2` fixture is in conftest.py; scripts/test installs the
environments."""

import itertools
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

from conftest import REPO, target_bin

PEER = pathlib.Path(__file__).parent / "peer.py"
_ros_domains = itertools.count(20 + (os.getpid() * 11) % 150)


# The ROS 2 distributions the tests run against: name -> (the variable naming its virtual
# environment, the environment's default folder under $CARGO_TARGET_DIR). The first is the
# one every ROS 2 test uses; tests marked `every_ros2_distro` run against each.
DISTROS = {
    "kilted": ("NERVE_ROS2_VENV", "ros2-venv"),
    "jazzy": ("NERVE_ROS2_JAZZY_VENV", "ros2-jazzy-venv"),
}
DEFAULT_DISTRO = next(iter(DISTROS))


def ros2_venv(distro: str = DEFAULT_DISTRO) -> pathlib.Path:
    var, folder = DISTROS[distro]
    env = os.environ.get(var)
    if env:
        return pathlib.Path(env)
    return pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / folder


def _require_ros2(distro: str) -> pathlib.Path:
    venv = ros2_venv(distro)
    py = venv / "bin" / "python"
    why = None
    if not py.exists():
        why = (f"no ROS 2 {distro} environment at {venv} (scripts/test installs it with "
               f"python3.11; ${DISTROS[distro][0]} names another)")
    else:
        r = subprocess.run([py, "-c", "import rclpy"], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            why = f"rclpy does not import in the ROS 2 {distro} environment {venv}: {r.stderr.strip()[-300:]}"
    if why:
        if os.environ.get("NERVE_REQUIRE_ROS2") == "1":
            pytest.fail(why)
        print(f"skipped: {why}", file=sys.stderr)
        pytest.skip(why)
    return venv


class Proc:
    """A child whose stdout lines are collected as they come."""

    def __init__(self, args, env, name, stdin=None):
        """`stdin`: text written to the child's standard input, which then closes."""
        self.name = name
        self.p = subprocess.Popen(
            args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=None if stdin is None else subprocess.PIPE,
        )
        self.lines: list[str] = []
        self.err: list[str] = []
        self._t = threading.Thread(target=self._read, args=(self.p.stdout, self.lines), daemon=True)
        self._e = threading.Thread(target=self._read, args=(self.p.stderr, self.err), daemon=True)
        self._t.start()
        self._e.start()
        if stdin is not None:
            threading.Thread(target=self._write, args=(self.p.stdin, stdin), daemon=True).start()

    @staticmethod
    def _read(stream, into):
        for line in stream:
            into.append(line.rstrip("\n"))

    @staticmethod
    def _write(stream, text):
        try:
            stream.write(text)
            stream.close()
        except (BrokenPipeError, ValueError):
            pass  # the child ended without reading it: its exit says why

    def wait_line(self, pred, timeout=30.0):
        end = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < end:
            while seen < len(self.lines):
                line = self.lines[seen]
                seen += 1
                if pred(line):
                    return line
            if self.p.poll() is not None and seen >= len(self.lines):
                time.sleep(0.2)
                if seen >= len(self.lines):
                    break
            time.sleep(0.02)
        raise AssertionError(
            f"{self.name}: no expected line in {timeout}s; stdout={self.lines[-20:]} "
            f"stderr={self.err[-20:]} rc={self.p.poll()}"
        )

    def json_events(self, kind):
        out = []
        for line in self.lines:
            try:
                v = json.loads(line)
            except ValueError:
                continue
            if v.get("event") == kind:
                out.append(v)
        return out

    def wait(self, timeout=60.0):
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise AssertionError(f"{self.name} did not finish in {timeout}s; stderr={self.err[-20:]}")
        self._t.join(5)
        self._e.join(5)
        return self.p.returncode

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def ros2_fixture(domain, distro: str = DEFAULT_DISTRO):
    """The ROS 2 `distro`'s environment and a ROS 2 domain of this test's own, on loopback
    only."""
    venv = _require_ros2(distro)
    ros_domain = next(_ros_domains) % 200 + 1
    env = {
        **os.environ,
        "ROS_DOMAIN_ID": str(ros_domain),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp",
    }
    procs: list[Proc] = []

    class Ros2:
        name = distro
        share = venv / "share"
        environ = env

        def peer(self, *args, name="rclpy", environ=None):
            """An rclpy peer (tests/ros2/peer.py ARGS...); `environ`: extra variables."""
            p = Proc([venv / "bin" / "python", PEER, *map(str, args)], {**env, **(environ or {})}, name)
            procs.append(p)
            return p

        def bridge(self, *args, types=True, environ=None):
            types_args = ["--types", self.share] if types else []
            p = Proc(
                [target_bin("nerve"), "bridge", "ros2", *types_args, *map(str, args)],
                environ or env,
                "bridge",
            )
            procs.append(p)
            p.wait_line(lambda l: l.startswith("bridging ROS 2 domain"), timeout=30)
            return p

        def nerve(self, *args, name="nerve", stdin=None, ament=False):
            """`nerve ARGS...`; `ament`: with AMENT_PREFIX_PATH at this distribution's
            prefix, where the CLI finds ROS 2 type definitions (or at `ament`, a path)."""
            prefix = venv if ament is True else ament
            environ = {**env, "AMENT_PREFIX_PATH": str(prefix)} if ament else env
            p = Proc([target_bin("nerve"), *map(str, args)], environ, name, stdin=stdin)
            procs.append(p)
            return p

    yield Ros2()
    for p in reversed(procs):
        p.stop()


