"""`nerve bridge foxglove` seen from a WebSocket client speaking Foxglove's protocol
(subprotocol foxglove.sdk.v1), as the Foxglove app does: topics are advertised with ROS 2
schemas, nothing is subscribed on the Nerve side until the client subscribes, and the
messages that arrive decode (with mcap-ros2-support's dynamic CDR decoder) to the
point cloud and the Imu that were published; Nerve services are offered to Foxglove's
Service Call panel and answer calls in CDR. The cockpit tests (issue 32) drive every
other capability with Foxglove's own npm client (foxglove_npm/cockpit.mjs): Teleop
publishing, parameters, services of the test's own types, the connection graph,
unadvertising, `/clock` time, a bag with the playback bar, and a slow client's drops.
`pytest -s` prints each client's transcript."""

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


# --- Foxglove as a cockpit: every capability driven by Foxglove's own npm client -------
# (cockpit.mjs, one mode per panel; `pytest -s` prints each transcript)

def need_npm() -> None:
    if not (NPM_CLIENT / "node_modules" / "@foxglove" / "ws-protocol").is_dir():
        why = (f"{NPM_CLIENT}/node_modules is missing: run `npm ci --prefix {NPM_CLIENT}` "
               "(scripts/test does where node and npm are installed)")
        if os.environ.get("NERVE_REQUIRE_NODE"):
            pytest.fail(why)
        pytest.skip(why)


def cockpit(mode: str, uri: str, *args: str, timeout_ms: int = 60000, **popen) -> subprocess.Popen:
    return subprocess.Popen(["node", str(NPM_CLIENT / "cockpit.mjs"), mode, uri, str(timeout_ms),
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **popen)


def finish(client: subprocess.Popen, mode: str, stdin: str | None = None) -> dict:
    out, err = client.communicate(stdin, timeout=90)
    assert client.returncode == 0, f"{mode}: {err}"
    got = json.loads(out.strip().splitlines()[-1])
    print(f"\n--- npm client transcript: {mode} ---")
    for line in got["transcript"]:
        print(json.dumps(line))
    return got


def stop_bridge(bridge: subprocess.Popen) -> dict:
    bridge.send_signal(subprocess.signal.SIGINT)
    out, _ = bridge.communicate(timeout=20)
    return json.loads(out.strip().splitlines()[-1])


def test_teleop_twist_reaches_a_nerve_subscriber_and_bad_bytes_are_counted_and_told(domain, node):
    """The Teleop panel's geometry_msgs/msg/Twist on /cmd_vel reaches a Python subscriber of
    nerve_msgs/Twist; bytes that do not decode are dropped, counted and answered with a
    status; a Twist channel on a topic of another type is refused naming both types."""
    need_npm()
    import nerve
    from nerve import msgs
    sub = node.create_subscription(msgs.Twist, "/cmd_vel")
    sub_json = node.create_subscription(msgs.Twist, "/cmd_vel_json")
    other = node.create_publisher(msgs.CmdVel, "/fox_cmdvel")
    bridge, uri = start_bridge(str(target_bin("nerve")))
    client = None
    try:
        client = cockpit("teleop", uri, "/cmd_vel", "/fox_cmdvel", "/cmd_vel_json",
                         stdin=subprocess.PIPE)

        def first(s):
            deadline = time.monotonic() + 60
            while True:
                assert client.poll() is None, client.stderr.read()
                assert time.monotonic() < deadline, "no Twist arrived"
                m = s.recv(timeout=0.2)
                if m is not None:
                    return m

        got = first(sub)
        assert (got.linear.x, got.linear.y, got.angular.z) == (0.5, 0.0, -0.25)
        client.stdin.write("got\n")
        client.stdin.flush()
        got = first(sub_json)
        assert (got.linear.x, got.linear.y, got.angular.z) == (0.5, 0.0, -0.25)
        result = finish(client, "teleop", "got-json\n")
        assert "/cmd_vel: dropped a message that does not decode as nerve_msgs/Twist" \
            in result["malformed"], result
        assert "geometry_msgs/msg/Twist (nerve_msgs/Twist)" in result["refused"], result
        assert "topic /fox_cmdvel has type nerve_msgs/CmdVel" in result["refused"], result
        stats = {p["topic"]: p for p in stop_bridge(bridge)["published"]}
        assert stats["/cmd_vel"]["type_name"] == "nerve_msgs/Twist"
        # all of them: the status about the bad bytes came after they were handled
        assert stats["/cmd_vel"]["published"] == result["sent"]
        assert stats["/cmd_vel"]["malformed"] == 1
        assert stats["/fox_cmdvel"]["refused"] == 1
        # (the last JSON messages may still be on their way when the bridge stops)
        assert 1 <= stats["/cmd_vel_json"]["published"] <= result["sentJson"]
        assert stats["/cmd_vel_json"]["malformed"] == 0
        del other
    finally:
        stop([p for p in (client, bridge) if p is not None])


class Served:
    """Runs ``body(ctx, self)`` on its own thread with its own context (nodes are
    single-threaded) until ``join``."""

    def __init__(self, domain, body):
        import threading
        import nerve
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


def test_parameters_panel_gets_sets_is_refused_unchanged_and_is_pushed_updates(domain):
    """Names are `<node>.<parameter>` (ROS 2 foxglove_bridge's convention); a set goes
    through the node's validation; a refused set changes nothing and its reason comes back
    as a status; subscribers get each change pushed."""
    need_npm()

    def serve(ctx, t):
        p = ctx.node("fox_params").create_parameters(from_env=False)
        p.declare("speed", 1.0, description="m/s", range=(0.0, 3.0, 0.0))
        p.declare("mode", "idle")
        p.on_validate(lambda changes: "mode may not be 'fly'"
                      if any(new == "fly" for (_, _, new) in changes) else None)
        t.ready.set()
        while not t.stop:
            p.serve(0.05)
        t.final = p.values()

    server = Served(domain, serve)
    bridge, uri = start_bridge(str(target_bin("nerve")))
    try:
        r = finish(cockpit("params", uri, "/fox_params"), "params")
        assert r["all"]["/fox_params.speed"] == 1.0 and r["all"]["/fox_params.mode"] == "idle"
        assert r["set"] == {"/fox_params.speed": 2.5}
        assert r["pushed"]["/fox_params.speed"] == 2.5
        assert "mode may not be 'fly'" in r["refusal"], r["refusal"]
        # refused all or nothing: speed is not 1.5
        assert r["refused"] == {"/fox_params.speed": 2.5, "/fox_params.mode": "idle"}
        assert r["after"] == {"/fox_params.speed": 2.5, "/fox_params.mode": "idle"}
    finally:
        stop([bridge])
        server.join()
    assert server.final["speed"] == 2.5 and server.final["mode"] == "idle"


def custom_type(name: str, fields: str, size: int):
    """A message type of the test's own (no nerve_msgs type), from its schema text."""
    import re
    import nerve
    short = name.split("/")[-1]
    text = (f"nerve-schema/1|type={name}|hash=0000000000000000|head={short}|elem=-|"
            f"struct {short} {size} 8 {fields}")
    try:
        return nerve.MessageType.from_schema_text(text)
    except nerve.SchemaError as e:
        real = re.search(r"describes ([0-9a-f]{16})", str(e)).group(1)
        return nerve.MessageType.from_schema_text(text.replace("0" * 16, real))


def test_a_service_of_the_tests_own_types_is_called_from_the_service_call_panel(domain):
    """Services are offered for every type whose schema the bridge knows, not only
    nerve_msgs: a service's endpoints record their request and response schemas in the
    domain (no topic carries these types here)."""
    need_npm()
    import nerve

    def serve(ctx, t):
        req = custom_type("fox_test/ScaleRequest", "value:0:f64 factor:8:f64", 16)
        rep = custom_type("fox_test/ScaleReply", "value:0:f64", 8)
        n = ctx.node("fox_scaler")
        srv = n.create_service(nerve.ServiceType("fox_test/Scale", req, rep), "/fox_scale",
                               lambda r: {"value": r.value * r.factor})
        t.ready.set()
        while not t.stop:
            srv.spin_once(0.05)

    server = Served(domain, serve)
    bridge, uri = start_bridge(str(target_bin("nerve")))
    try:
        r = finish(cockpit("service", uri, "/fox_scale", '{"value": 3.5, "factor": 2}'), "service")
        assert r["type"] == "fox_test/Scale"
        assert r["response"] == {"value": 7.0}
        services = {s["service"]: s for s in stop_bridge(bridge)["services"]}
        assert services["/fox_scale"]["calls"] == 1 and services["/fox_scale"]["failed"] == 0
    finally:
        stop([bridge])
        server.join()


def test_topic_graph_panel_gets_publishers_subscribers_and_services_by_node(domain, node):
    need_npm()
    from nerve import msgs
    nerve_cli = str(target_bin("nerve"))
    procs = [subprocess.Popen([nerve_cli, "topic", "pub", "/fox_chatter", "CmdVel", "{}",
                               "--rate", "20", "--wait-subscribers", "0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
             subprocess.Popen([target_bin("add_server"), "--name", "/fox_graph_add"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    sub = node.create_subscription(msgs.CmdVel, "/fox_chatter")
    try:
        bridge, uri = start_bridge(nerve_cli)
        procs.append(bridge)
        r = finish(cockpit("graph", uri, "/fox_chatter", "/fox_graph_add"), "graph")
        pubs = r["publishedTopics"]["/fox_chatter"]
        assert len(pubs) == 1 and not pubs[0].isdigit(), pubs
        assert any("test_node" in s for s in r["subscribedTopics"]["/fox_chatter"]), r
        assert len(r["advertisedServices"]["/fox_graph_add"]) == 1, r
        # the bridge's own endpoints are left out
        assert not any("nerve_bridge" in n for ns in r["publishedTopics"].values() for n in ns)
        del sub
    finally:
        stop(procs)


def test_a_topic_whose_last_publisher_exits_is_unadvertised(domain):
    need_npm()
    nerve_cli = str(target_bin("nerve"))
    pub = subprocess.Popen([nerve_cli, "topic", "pub", "/fox_vanish", "CmdVel", "{}",
                            "--rate", "20", "--wait-subscribers", "0"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    bridge, uri = start_bridge(nerve_cli)
    client = None
    try:
        client = cockpit("vanish", uri, "/fox_vanish")
        assert client.stdout.readline().strip() == "advertised"
        stop([pub])
        r = finish(client, "vanish")
        assert r["vanished"] == ["/fox_vanish"]
    finally:
        stop([p for p in (pub, client, bridge) if p is not None])


def test_a_bag_is_served_with_the_playback_bar(domain, tmp_path):
    """`--bag`: the bag's own schema, play / pause / seek / speed as the playback bar sends
    them (raw WebSocket: ws-protocol 0.8.0 has no playback calls), time messages, the end."""
    need_npm()
    from mcap.writer import CompressionType
    from mcap_ros2.writer import Writer
    bag = tmp_path / "run.mcap"
    t0 = 1_700_000_000_000_000_000
    with open(bag, "wb") as f:
        w = Writer(f, compression=CompressionType.NONE)
        schema = w.register_msgdef("std_msgs/msg/Int32", "int32 data")
        for i in range(20):
            w.write_message("/counter", schema, {"data": i}, log_time=t0 + i * 100_000_000,
                            publish_time=t0 + i * 100_000_000)
        w.finish()
    bridge = subprocess.Popen([str(target_bin("nerve")), "bridge", "foxglove", "--port", "0",
                               "--bag", str(bag), "--format", "json"],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = bridge.stdout.readline()
        assert line.startswith("listening on ws://"), line
        r = finish(cockpit("bag", line.split()[-1], "/counter"), "bag")
        assert r["play"]["status"] == "playing" and r["play"]["playbackSpeed"] == 1
        assert r["pause"]["status"] == "paused"
        first = int(r["beforeSeek"][0]["logTime"])
        assert (first - t0) % 100_000_000 == 0
        assert [m["message"]["data"] for m in r["beforeSeek"]] == \
            [(int(m["logTime"]) - t0) // 100_000_000 for m in r["beforeSeek"]]
        target = first + 1_000_000_000
        assert r["seek"]["didSeek"] and int(r["seek"]["currentTime"]) == target
        assert r["fast"]["status"] == "playing" and r["fast"]["playbackSpeed"] == 4
        assert r["ended"]["status"] == "ended" and int(r["ended"]["currentTime"]) == t0 + 1_900_000_000
        after = [m["message"]["data"] for m in r["afterSeek"]]
        # after the seek: from the message at the target time to the last, in order
        start = (target - t0) // 100_000_000
        assert after == list(range(start, 20)), after
        assert all(int(t) >= t0 for t in r["timesWhilePlaying"])
        sent = stop_bridge(bridge)["sent"]
        assert sent["/counter"] >= len(r["beforeSeek"]) + len(after)
    finally:
        stop([bridge])


def test_the_clock_topic_is_the_servers_time_with_clock(domain, node):
    """`--clock`: each /clock sample (nerve_msgs/Clock, as `nerve bag play --clock` and
    simulations publish it) is broadcast as the server's time."""
    need_npm()
    from nerve import msgs
    pub = node.create_publisher(msgs.Clock, "/clock")
    stamp = 1_700_000_123_000_000_000
    bridge = subprocess.Popen([str(target_bin("nerve")), "bridge", "foxglove", "--port", "0",
                               "--clock", "--format", "json"], stdout=subprocess.PIPE, text=True)
    client = None
    try:
        line = bridge.stdout.readline()
        assert line.startswith("listening on ws://"), line
        client = cockpit("clock", line.split()[-1], str(stamp))
        while client.poll() is None:
            c = msgs.Clock()
            c.clock.nanos = stamp
            pub.publish(c)
            time.sleep(0.05)
        assert finish(client, "clock")["time"] == str(stamp)
    finally:
        stop([p for p in (client, bridge) if p is not None])


def test_a_slow_client_is_told_how_many_messages_it_was_dropped(domain):
    """foxglove 0.30 does not count a slow client's drops: the bridge's front door queues
    each client's frames itself (`--backlog`), drops the oldest message data when full and
    tells that client with a status message; the final counts hold the total."""
    import numpy as np
    from nerve import msgs

    def publish(ctx, t):
        pub = ctx.node("fox_big").create_publisher(msgs.Image, "/fox_big")
        img = msgs.Image(width=1024, height=512, step=1024, data=np.zeros(1 << 19, np.uint8))
        t.ready.set()
        while not t.stop:
            pub.publish(img)
            time.sleep(0.002)

    server = Served(domain, publish)
    bridge = subprocess.Popen([str(target_bin("nerve")), "bridge", "foxglove", "--port", "0",
                               "--backlog", "4", "--format", "json"],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = bridge.stdout.readline()
        assert line.startswith("listening on ws://"), line
        # max_queue=1: the client library stops reading the socket while the test does not
        with ws_client.connect(line.split()[-1], subprotocols=["foxglove.sdk.v1"],
                               open_timeout=10, max_size=None, max_queue=1) as ws:
            channel = None
            while channel is None:
                m = json.loads(ws.recv(timeout=30))
                if m["op"] == "advertise":
                    channel = next((c for c in m["channels"] if c["topic"] == "/fox_big"), None)
            ws.send(json.dumps({"op": "subscribe",
                                "subscriptions": [{"id": 1, "channelId": channel["id"]}]}))
            status = None
            deadline = time.monotonic() + 60
            while status is None:
                assert time.monotonic() < deadline, "no drop was reported"
                time.sleep(0.5)  # a slow client: reads a few messages now and then
                for _ in range(8):
                    try:
                        m = ws.recv(timeout=0.01)
                    except TimeoutError:
                        break
                    if isinstance(m, str) and json.loads(m)["op"] == "status":
                        status = json.loads(m)
                        break
        print(f"\n--- slow client: {status}")
        assert status["level"] == 1 and "messages dropped for this client" in status["message"]
        assert stop_bridge(bridge)["client_drops"] >= 1
    finally:
        stop([bridge])
        server.join()
