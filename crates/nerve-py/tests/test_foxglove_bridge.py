"""`nerve bridge foxglove` seen from a WebSocket client speaking Foxglove's protocol
(subprotocol foxglove.sdk.v1), as the Foxglove app does: topics are advertised with ROS 2
schemas, nothing is subscribed on the Nerve side until the client subscribes, and the
messages that arrive decode (with mcap-ros2-support's dynamic CDR decoder) to the
point cloud and the Imu that were published; Nerve services are offered to Foxglove's
Service Call panel and answer calls in CDR."""

import json
import os
import pathlib
import struct
import subprocess
import time

import pytest

from conftest import target_bin

ws_client = pytest.importorskip("websockets.sync.client")
dynamic = pytest.importorskip("mcap_ros2._dynamic")

FIELD0 = {"name": "", "offset": 0, "datatype": 0, "reserved": [0, 0, 0], "count": 0}
CLOUD = {
    "header": {"stamp": {"nanos": 1_700_000_000_000_000_000}, "frame_id": "os_sensor"},
    "height": 1, "width": 2, "point_step": 12, "row_step": 24, "is_bigendian": 0, "is_dense": 1,
    "field_count": 3, "reserved": 0, "reserved2": 0,
    "fields": [{"name": n, "offset": 4 * i, "datatype": 7, "reserved": [0, 0, 0], "count": 1}
               for i, n in enumerate("xyz")] + [FIELD0] * 9,
    "elems": list(struct.pack("<6f", 1.0, 2.0, 3.0, 4.0, 5.0, 6.0)),
}
IMU = {
    "stamp": {"nanos": 5}, "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0},
    "orientation_covariance": [0.0] * 9, "angular_velocity": {"x": 0.0, "y": 0.0, "z": 0.5},
    "angular_velocity_covariance": [0.0] * 9,
    "linear_acceleration": {"x": 0.0, "y": 0.0, "z": 9.81},
    "linear_acceleration_covariance": [0.0] * 9,
}


def subscribers(nerve: str, topic: str) -> int:
    out = subprocess.run([nerve, "topic", "info", topic, "--format", "json"], check=True,
                         capture_output=True, text=True, timeout=30).stdout
    return json.loads(out)["subscribers"]


def test_a_foxglove_client_gets_decodable_clouds_and_imu_only_once_it_subscribes(domain):
    nerve = str(target_bin("nerve"))
    procs = []
    try:
        for topic, ty, msg in [("/points", "PointCloud", CLOUD), ("/imu", "Imu", IMU)]:
            procs.append(subprocess.Popen([nerve, "topic", "pub", topic, ty, json.dumps(msg),
                                           "--rate", "50", "--wait-subscribers", "0"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        bridge = subprocess.Popen([nerve, "bridge", "foxglove", "--port", "0", "--format", "json"],
                                  stdout=subprocess.PIPE, text=True)
        procs.append(bridge)
        line = bridge.stdout.readline()
        assert line.startswith("listening on ws://"), line
        uri = line.split()[-1]

        with ws_client.connect(uri, subprotocols=["foxglove.sdk.v1"], open_timeout=10,
                               max_size=None) as ws:
            assert ws.subprotocol == "foxglove.sdk.v1"
            channels = {}
            deadline = time.monotonic() + 20
            while not {"/points", "/imu"} <= {c["topic"] for c in channels.values()}:
                assert time.monotonic() < deadline, f"advertised: {channels}"
                msg = ws.recv(timeout=20)
                if isinstance(msg, str):
                    m = json.loads(msg)
                    if m["op"] == "advertise":
                        for c in m["channels"]:
                            channels[c["id"]] = c
            by_topic = {c["topic"]: c for c in channels.values()}
            assert by_topic["/points"]["schemaName"] == "sensor_msgs/msg/PointCloud2"
            assert by_topic["/imu"]["schemaName"] == "sensor_msgs/msg/Imu"
            assert all(c["encoding"] == "cdr" and c["schemaEncoding"] == "ros2msg"
                       for c in by_topic.values())
            # advertised, but nobody watches: the bridge is no subscriber of the topics
            assert subscribers(nerve, "/points") == 0 and subscribers(nerve, "/imu") == 0

            subs = {1: by_topic["/points"], 2: by_topic["/imu"]}
            ws.send(json.dumps({"op": "subscribe", "subscriptions": [
                {"id": sid, "channelId": c["id"]} for sid, c in subs.items()]}))
            decoded = {}
            deadline = time.monotonic() + 20
            while len(decoded) < 2:
                assert time.monotonic() < deadline, f"decoded only {list(decoded)}"
                msg = ws.recv(timeout=20)
                if isinstance(msg, str) or msg[0] != 0x01:
                    continue
                sid, _log_time = struct.unpack_from("<IQ", msg, 1)
                c = subs[sid]
                decoder = dynamic.generate_dynamic(c["schemaName"], c["schema"])[c["schemaName"]]
                decoded[c["topic"]] = decoder(msg[13:])
            assert subscribers(nerve, "/points") == 1

            cloud = decoded["/points"]
            assert cloud.header.frame_id == "os_sensor" and cloud.header.stamp.sec == 1_700_000_000
            assert [f.name for f in cloud.fields] == ["x", "y", "z"]
            assert struct.unpack("<6f", bytes(cloud.data)) == (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
            imu = decoded["/imu"]
            assert imu.angular_velocity.z == 0.5 and imu.linear_acceleration.z == 9.81

            ws.send(json.dumps({"op": "unsubscribe", "subscriptionIds": [1, 2]}))
            deadline = time.monotonic() + 10
            while subscribers(nerve, "/points") != 0:
                assert time.monotonic() < deadline, "the bridge left the topic"
                time.sleep(0.1)
        bridge.send_signal(subprocess.signal.SIGINT)
        out, _ = bridge.communicate(timeout=20)
        stats = {t["topic"]: t for t in json.loads(out.strip().splitlines()[-1])["topics"]}
        assert stats["/points"]["forwarded"] >= 1 and stats["/points"]["failed"] == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_foxglove_client_calls_a_nerve_service(domain):
    nerve = str(target_bin("nerve"))
    server = subprocess.Popen([target_bin("add_server"), "--name", "/fox_add"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    bridge = None
    try:
        subprocess.run([nerve, "service", "call", "/fox_add", "AddTwoInts", '{"a": 1, "b": 1}',
                        "--timeout", "20000"], check=True, capture_output=True, timeout=60)
        bridge = subprocess.Popen([nerve, "bridge", "foxglove", "--port", "0", "--format", "json"],
                                  stdout=subprocess.PIPE, text=True)
        line = bridge.stdout.readline()
        assert line.startswith("listening on ws://"), line
        uri = line.split()[-1]
        with ws_client.connect(uri, subprotocols=["foxglove.sdk.v1"], open_timeout=10,
                               max_size=None) as ws:
            service = None
            deadline = time.monotonic() + 20
            while service is None:
                assert time.monotonic() < deadline, "the service was advertised"
                msg = ws.recv(timeout=20)
                if isinstance(msg, str):
                    m = json.loads(msg)
                    if m["op"] == "serverInfo":
                        assert "services" in m["capabilities"], m
                        assert "cdr" in m.get("supportedEncodings", []), m
                    if m["op"] == "advertiseServices":
                        service = next((s for s in m["services"] if s["name"] == "/fox_add"), None)
            assert service["type"] == "nerve_msgs/AddTwoInts"
            request, response = service["request"], service["response"]
            assert request["encoding"] == "cdr" and request["schemaEncoding"] == "ros2msg"

            def call(call_id: int, payload: bytes):
                enc = b"cdr"
                ws.send(struct.pack("<BIII", 0x02, service["id"], call_id, len(enc)) + enc
                        + payload)
                deadline = time.monotonic() + 20
                while True:
                    assert time.monotonic() < deadline, f"an answer to call {call_id}"
                    msg = ws.recv(timeout=20)
                    if isinstance(msg, str):
                        m = json.loads(msg)
                        if m["op"] == "serviceCallFailure" and m["callId"] == call_id:
                            return m
                    elif msg[0] == 0x03:
                        sid, cid, elen = struct.unpack_from("<III", msg, 1)
                        if cid == call_id:
                            assert sid == service["id"]
                            return msg[13 + elen:]

            # TwoInts {a, b} as CDR: encapsulation header, then two int64
            answer = call(7, b"\x00\x01\x00\x00" + struct.pack("<qq", 40, 2))
            name = response["schemaName"]
            decoder = dynamic.generate_dynamic(name, response["schema"])[name]
            assert decoder(answer).value == 42
            # a malformed request is answered with an error naming the service
            failure = call(8, b"\x00\x01\x00\x00\x01")
            assert "/fox_add" in failure["message"], failure
        bridge.send_signal(subprocess.signal.SIGINT)
        out, _ = bridge.communicate(timeout=20)
        services = {s["service"]: s for s in json.loads(out.strip().splitlines()[-1])["services"]}
        assert services["/fox_add"]["calls"] == 2 and services["/fox_add"]["failed"] == 1
    finally:
        for p in (server, bridge):
            if p is not None and p.poll() is None:
                p.send_signal(subprocess.signal.SIGINT)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def start_bridge(nerve: str) -> tuple[subprocess.Popen, str]:
    bridge = subprocess.Popen([nerve, "bridge", "foxglove", "--port", "0", "--format", "json"],
                              stdout=subprocess.PIPE, text=True)
    line = bridge.stdout.readline()
    assert line.startswith("listening on ws://"), line
    return bridge, line.split()[-1]


def stop(procs: list) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(subprocess.signal.SIGINT)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def raw_upgrade(uri: str, protocols: str | None) -> tuple[int, str, str]:
    """A WebSocket upgrade request by hand: (status, the answer's protocol, body)."""
    import base64
    import os
    import socket
    host, port = uri.removeprefix("ws://").split(":")
    key = base64.b64encode(os.urandom(16)).decode()
    head = (f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n")
    if protocols is not None:
        head += f"Sec-WebSocket-Protocol: {protocols}\r\n"
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall((head + "\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            assert chunk, f"closed after {data!r}"
            data += chunk
        answer, _, body = data.partition(b"\r\n\r\n")
        lines = answer.decode().split("\r\n")
        status = int(lines[0].split()[1])
        proto = next((v.strip() for k, _, v in (h.partition(":") for h in lines[1:])
                      if k.lower() == "sec-websocket-protocol"), "")
        if status != 101:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                body += chunk
        return status, proto, body.decode(errors="replace")


def test_every_foxglove_subprotocol_name_is_answered_with_itself_and_others_by_name(domain):
    """`foxglove.websocket.v1` (ws-protocol, Lichtblick, Studio before the SDK) is served
    beside the SDK's names; an unknown or missing name is refused with 400 naming it."""
    bridge, uri = start_bridge(str(target_bin("nerve")))
    try:
        for name in ["foxglove.websocket.v1", "foxglove.sdk.v1", "foxglove.sdk.v1.1"]:
            status, proto, _ = raw_upgrade(uri, name)
            assert (status, proto) == (101, name)
            # and a real WebSocket client, which checks the answer, gets the server's info
            with ws_client.connect(uri, subprotocols=[name], open_timeout=10) as ws:
                assert ws.subprotocol == name
                assert json.loads(ws.recv(timeout=10))["op"] == "serverInfo"
        status, proto, body = raw_upgrade(uri, "mqtt, foxglove.sdk.v2")
        assert status == 400 and proto == ""
        assert "unsupported WebSocket subprotocol mqtt, foxglove.sdk.v2" in body, body
        assert "foxglove.websocket.v1" in body, body
        status, _, body = raw_upgrade(uri, None)
        assert status == 400 and "no Sec-WebSocket-Protocol header" in body, body
    finally:
        stop([bridge])


NPM_CLIENT = pathlib.Path(__file__).parent / "foxglove_npm"


def test_foxglove_npm_client_decodes_imu_through_the_bridge(domain):
    """Foxglove's own client, `@foxglove/ws-protocol`'s FoxgloveClient (as Lichtblick and
    Foxglove Studio use it), connects, subscribes and decodes the Imu with
    `@foxglove/rosmsg2-serialization`."""
    if not (NPM_CLIENT / "node_modules" / "@foxglove" / "ws-protocol").is_dir():
        why = (f"{NPM_CLIENT}/node_modules is missing: run `npm ci --prefix {NPM_CLIENT}` "
               "(scripts/test does where node and npm are installed)")
        if os.environ.get("NERVE_REQUIRE_NODE"):
            pytest.fail(why)
        pytest.skip(why)
    nerve = str(target_bin("nerve"))
    procs = [subprocess.Popen([nerve, "topic", "pub", "/imu", "Imu", json.dumps(IMU),
                               "--rate", "50", "--wait-subscribers", "0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        bridge, uri = start_bridge(nerve)
        procs.append(bridge)
        out = subprocess.run(["node", str(NPM_CLIENT / "client.mjs"), uri, "/imu", "3", "30000"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout.strip().splitlines()[-1])
        assert got["subprotocol"] == "foxglove.websocket.v1"
        assert got["server"] == "nerve"
        assert got["channel"] == {"topic": "/imu", "schemaName": "sensor_msgs/msg/Imu"}
        assert len(got["messages"]) == 3
        for imu in got["messages"]:
            assert imu["angular_velocity"] == {"x": 0, "y": 0, "z": 0.5}
            assert imu["linear_acceleration"]["z"] == 9.81
            assert imu["orientation"]["w"] == 1
            assert len(imu["orientation_covariance"]) == 9
    finally:
        stop(procs)
