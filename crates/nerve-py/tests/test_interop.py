"""Python and Rust on the same topics, both ways, and the nerve CLI against Python nodes."""

import json
import os
import subprocess
import sys
import time

import pytest

import nerve
from nerve import msgs
from conftest import target_bin


def test_python_listens_to_the_rust_talker(node):
    sub = node.create_subscription(msgs.Imu, "/imu_interop", qos=nerve.Qos(depth=16))
    talker = subprocess.Popen([target_bin("talker"), "--topic", "/imu_interop", "--rate", "200"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            m = sub.recv(1.0)
            if m is not None:
                got.append((m._header.seq, m.orientation.w))
        assert len(got) == 5, talker.stderr.read1().decode() if talker.poll() is not None else "no samples"
        seqs = [s for s, _ in got]
        assert seqs == sorted(seqs)
    finally:
        talker.terminate()
        talker.wait(10)


def test_the_rust_listener_hears_python(node):
    pub = node.create_publisher(msgs.Imu, "/imu_to_rust")
    listener = subprocess.Popen([target_bin("listener"), "--topic", "/imu_to_rust", "--count", "3"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert pub.wait_for_subscribers(1, 30.0)
        deadline = time.monotonic() + 30
        while listener.poll() is None and time.monotonic() < deadline:
            m = pub.loan()
            m.linear_acceleration.z = 9.81
            m.send()
            time.sleep(0.02)
        out, err = listener.communicate(timeout=10)
        assert listener.returncode == 0, err
        assert out.count("9.81") >= 3 or "3" in out, out
    finally:
        listener.kill()


def cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([str(target_bin("nerve")), *args], capture_output=True, text=True,
                          timeout=timeout)


def test_cli_lists_and_echoes_a_python_publisher(node):
    pub = node.create_publisher(msgs.CmdVel, "/py_cmd")
    listed = cli("topic", "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert "/py_cmd" in listed.stdout
    nodes = cli("node", "list", "--format", "json")
    assert "test_node" in nodes.stdout, nodes.stdout + nodes.stderr
    echo = subprocess.Popen([str(target_bin("nerve")), "topic", "echo", "/py_cmd", "--count", "1",
                             "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while echo.poll() is None and time.monotonic() < deadline:
            pub.publish(linear=0.25, angular=-0.5)
            time.sleep(0.05)
        out, err = echo.communicate(timeout=10)
    finally:
        echo.kill()
    assert echo.returncode == 0, err
    assert "0.25" in out and "-0.5" in out


def test_cli_publishes_to_a_python_subscription(node):
    sub = node.create_subscription(msgs.CmdVel, "/py_sub", qos=nerve.Qos(depth=8))
    # the subscription attaches to the new publisher while it receives
    tool = subprocess.Popen([str(target_bin("nerve")), "topic", "pub", "/py_sub", "CmdVel",
                             '{"linear": 1.5}', "--once", "--wait-subscribers", "5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        m = sub.recv(20.0)
        out, err = tool.communicate(timeout=20)
    finally:
        tool.kill()
    assert tool.returncode == 0, err
    assert m is not None and m.linear == 1.5
