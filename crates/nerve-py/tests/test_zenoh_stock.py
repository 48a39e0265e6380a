"""A plain Zenoh application on the network plane's key space (README, "The network
plane's key space"): a stock `eclipse-zenoh` subscriber gets a topic that `nerve topic
pub` publishes with NERVE_NETWORK=on, and a stock Zenoh publisher reaches a Nerve
subscriber, whose wrong-sized samples are counted and dropped. Zenoh runs in peer mode
on loopback only: the stock session listens on a free port, Nerve connects to it, and
multicast scouting and gossip are off."""

import json
import os
import socket
import struct
import subprocess
import sys
import time
import zlib

import pytest

from conftest import target_bin

zenoh = pytest.importorskip(
    "zenoh", reason="the eclipse-zenoh package is not installed (scripts/test installs it)")

HEADER = 80  # prefix (24 bytes) and sample header (56 bytes)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def plane(domain, tmp_path):
    """(stock Zenoh session, environment of Nerve processes that join it)."""
    port = _free_port()
    conf = zenoh.Config()
    conf.insert_json5("mode", '"peer"')
    conf.insert_json5("listen/endpoints", json.dumps([f"tcp/127.0.0.1:{port}"]))
    conf.insert_json5("scouting/multicast/enabled", "false")
    conf.insert_json5("scouting/gossip/enabled", "false")
    session = zenoh.open(conf)
    file = tmp_path / "zenoh.json5"
    file.write_text(json.dumps({
        "mode": "peer",
        "connect": {"endpoints": [f"tcp/127.0.0.1:{port}"]},
        "scouting": {"multicast": {"enabled": False}, "gossip": {"enabled": False}},
    }))
    env = {**os.environ, "NERVE_NETWORK": "on", "NERVE_ZENOH_CONFIG": str(file)}
    try:
        yield session, env
    finally:
        session.close()


def _token_hash(session, key: str, deadline: float) -> tuple:
    """(layout hash, type) of the first liveliness token under `key`."""
    while time.monotonic() < deadline:
        for reply in session.liveliness().get(key, timeout=1.0):
            if reply.ok is not None:
                # nerve/<d>/live/<kind>/<host id>/<host>/<uid>/<hash>=<type>/<topic>
                hash_, type_ = str(reply.ok.key_expr).split("/")[7].split("=")
                return int(hash_, 16), type_.replace(":", "/")
        time.sleep(0.1)
    pytest.fail(f"no liveliness token under {key}")


def _frame(seq: int, payload: bytes, type_hash: int) -> bytes:
    """A sample frame as the README documents it; host id 0: not a Nerve host."""
    head = struct.pack("<4sB3xQII7Q", b"NRV\x02", 1, 0, 0, 0, seq, time.monotonic_ns(),
                       time.time_ns(), 7, len(payload), type_hash, 0)
    frame = head + payload
    crc = zlib.crc32(frame[:16] + frame[24:])
    return frame[:16] + struct.pack("<I", crc) + frame[20:]


def test_a_stock_subscriber_gets_a_topic_nerve_publishes(domain, plane):
    session, env = plane
    got = []
    sub = session.declare_subscriber(
        "nerve/**", lambda s: got.append((str(s.key_expr), bytes(s.payload.to_bytes()))))
    talker = subprocess.Popen(
        [target_bin("nerve"), "topic", "pub", "/stock_out", "CmdVel",
         '{"stamp": {"nanos": 42}, "linear": 0.5, "angular": -0.25}', "--rate", "20",
         "--count", "600", "--wait-subscribers", "0"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        type_hash, type_name = _token_hash(session, f"nerve/{domain}/live/pub/**", deadline)
        while len(got) < 3 and time.monotonic() < deadline and talker.poll() is None:
            time.sleep(0.05)
        assert len(got) >= 3, talker.stderr.read() if talker.poll() is not None else "no samples"
    finally:
        talker.terminate()
        talker.wait(10)
        sub.undeclare()
    assert type_name == "nerve_msgs/CmdVel"
    seqs = []
    for key, frame in got[:3]:
        # every sample once, on the topic's key for Zenoh applications
        assert key == f"nerve/{domain}/o/stock_out"
        magic, kind, host, crc, pad = struct.unpack_from("<4sB3xQII", frame)
        assert (magic, kind, pad) == (b"NRV\x02", 1, 0) and host != 0
        assert crc == zlib.crc32(frame[:16] + frame[24:])
        seq, _mono, wall, _pub, length, hash_, _origin = struct.unpack_from("<QQqQQQQ", frame, 24)
        assert (length, hash_) == (16, type_hash) and len(frame) == HEADER + length
        assert abs(wall - time.time_ns()) < 60e9
        stamp, linear, angular = struct.unpack_from("<qff", frame, HEADER)
        assert (stamp, linear, angular) == (42, 0.5, -0.25)
        seqs.append(seq)
    assert seqs == sorted(seqs) and len(set(seqs)) == 3


LISTENER = """
import json, nerve
from nerve import msgs
sub = nerve.Context().node("stock_listener").create_subscription(
    msgs.CmdVel, "/stock_in", qos=nerve.Qos(depth=16))
print("ready", flush=True)
n = 0
while n < 3:
    m = sub.recv(1.0)
    if m is not None:
        n += 1
        print(json.dumps({"seq": m._header.seq, "stamp": m.stamp.nanos, "linear": m.linear,
                          "angular": m.angular}), flush=True)
print(json.dumps(sub.stats()), flush=True)
"""


def test_a_stock_publisher_reaches_a_nerve_subscriber(domain, plane):
    session, env = plane
    listener = subprocess.Popen([sys.executable, "-c", LISTENER], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert listener.stdout.readline().strip() == "ready", listener.stderr.read()
        deadline = time.monotonic() + 30
        type_hash, type_name = _token_hash(session, f"nerve/{domain}/live/sub/**", deadline)
        assert type_name == "nerve_msgs/CmdVel"
        pub = session.declare_publisher(f"nerve/{domain}/t/stock_in")
        while not pub.matching_status.matching:
            assert time.monotonic() < deadline, "the Nerve subscriber was never routed"
            time.sleep(0.05)
        # a payload of the wrong size is counted and dropped, never delivered
        pub.put(_frame(1, struct.pack("<qf", 42, 0.5), type_hash))
        seq = 1
        while listener.poll() is None and time.monotonic() < deadline:
            seq += 1
            pub.put(_frame(seq, struct.pack("<qff", 42, 0.5, -0.25), type_hash))
            time.sleep(0.05)
        out, err = listener.communicate(timeout=10)
    finally:
        listener.kill()
    assert listener.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    messages, stats = lines[:-1], lines[-1]
    assert len(messages) == 3, out
    for m in messages:
        assert (m["stamp"], m["linear"], m["angular"]) == (42, 0.5, -0.25) and m["seq"] > 1
    assert stats["network"] >= 3 and stats["network_refused"] == 1, stats
    assert "/stock_in" in err and "refused" in err, err
