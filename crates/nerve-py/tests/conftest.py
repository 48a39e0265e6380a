"""Shared fixtures: every test gets a domain and state directory of its own, so tests
never see each other's topics (they may run beside other Nerve processes)."""

import gc
import itertools
import os
import pathlib
import subprocess
import sys

import pytest

import nerve

_domains = itertools.count(600 + (os.getpid() * 7) % 300)

REPO = pathlib.Path(__file__).resolve().parents[3]


def new_domain() -> int:
    return next(_domains) % 1000


@pytest.fixture
def domain(tmp_path, monkeypatch):
    d = new_domain()
    state = tmp_path / "state"
    monkeypatch.setenv("NERVE_DOMAIN", str(d))
    monkeypatch.setenv("NERVE_STATE_DIR", str(state))
    yield d
    # what the test's killed children left goes now, not with the next user of the id
    gc.collect()
    cli = _target_path("nerve")
    if cli.exists():
        env = {**os.environ, "NERVE_DOMAIN": str(d), "NERVE_STATE_DIR": str(state)}
        subprocess.run([cli, "clean"], env=env, capture_output=True, timeout=60)


@pytest.fixture
def ctx(domain):
    return nerve.Context(domain)


@pytest.fixture
def node(ctx):
    return ctx.node("test_node")


def _target_path(name: str) -> pathlib.Path:
    return pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "debug" / name


def target_bin(name: str) -> pathlib.Path:
    """A binary of the workspace (examples, the CLI) built by scripts/test."""
    path = _target_path(name)
    if not path.exists():
        pytest.fail(f"{path} is missing: build it first (scripts/test builds the examples and the CLI)")
    return path


def run_python(code: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """Runs Python code in a child process with this interpreter."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, **kw)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "every_ros2_distro: the test's `ros2` fixture runs once per ROS 2 distribution of "
        "ros2/harness.py (ids like [jazzy]); unmarked tests run against the first only",
    )


def pytest_generate_tests(metafunc):
    if "ros2" in metafunc.fixturenames and metafunc.definition.get_closest_marker("every_ros2_distro"):
        from ros2.harness import DISTROS

        metafunc.parametrize("ros2", list(DISTROS), indirect=True)


@pytest.fixture
def ros2(request, domain):
    """Real ROS 2 (rclpy) peers and `nerve bridge ros2` in a ROS 2 domain of the test's own,
    on loopback only (see ros2/harness.py); the distribution is the test's parameter where
    it is marked `every_ros2_distro`, else the harness's first (Kilted)."""
    from ros2.harness import DEFAULT_DISTRO, ros2_fixture

    yield from ros2_fixture(domain, getattr(request, "param", DEFAULT_DISTRO))
