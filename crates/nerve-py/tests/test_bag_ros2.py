"""A Nerve bag is a ROS 2 bag: Python's `mcap` with `mcap-ros2-support` (the readers
Foxglove's and ROS 2's Python tooling use) decodes every standard message field by field.
The bag is recorded by `nerve bag record` in a process of its own from topics published
by `nerve topic pub`; nothing here uses Nerve's own decoder. ROS 2 types Nerve has no
native form of are recorded as themselves, bags rosbag2 wrote replay into Nerve topics
that `nerve topic echo` prints, and such topics reach a Foxglove client as their ROS 2
type."""

import json
import os
import subprocess
import time

import pytest

from conftest import REPO, target_bin

mcap_reader = pytest.importorskip("mcap.reader")
ros2_decoder = pytest.importorskip("mcap_ros2.decoder")

STAMP = {"nanos": 1_700_000_001_250_000_000}
HEADER = {"stamp": STAMP, "frame_id": "lidar_top"}
FIELD0 = {"name": "", "offset": 0, "datatype": 0, "reserved": [0, 0, 0], "count": 0}


def point_field(name: str, offset: int) -> dict:
    return {"name": name, "offset": offset, "datatype": 7, "reserved": [0, 0, 0], "count": 1}


CLOUD_DATA = [0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64, 0, 0, 192, 64]
MESSAGES = {
    "/imu": ("Imu", {
        "stamp": STAMP,
        "orientation": {"x": 0.0, "y": 0.0, "z": 0.6, "w": 0.8},
        "orientation_covariance": [float(i) for i in range(9)],
        "angular_velocity": {"x": 0.1, "y": 0.2, "z": 0.3},
        "angular_velocity_covariance": [0.0] * 9,
        "linear_acceleration": {"x": 0.0, "y": 0.0, "z": 9.81},
        "linear_acceleration_covariance": [1.0] * 9,
    }),
    "/points": ("PointCloud", {
        "header": HEADER, "height": 1, "width": 2, "point_step": 12, "row_step": 24,
        "is_bigendian": 0, "is_dense": 1, "field_count": 3, "reserved": 0, "reserved2": 0,
        "fields": [point_field("x", 0), point_field("y", 4), point_field("z", 8)] + [FIELD0] * 9,
        "elems": CLOUD_DATA,
    }),
    "/scan": ("LaserScan", {
        "header": HEADER, "angle_min": -1.0, "angle_max": 1.0, "angle_increment": 1.0,
        "time_increment": 0.0, "scan_time": 0.1, "range_min": 0.1, "range_max": 30.0,
        "intensity_count": 3, "elems": [1.5, 2.5, 3.5, 10.0, 20.0, 30.0],
    }),
    "/camera": ("Image", {
        "header": HEADER, "height": 2, "width": 3, "encoding": "mono8", "is_bigendian": 0,
        "reserved": [0, 0, 0], "step": 3, "elems": [1, 2, 3, 4, 5, 6],
    }),
    "/odom": ("Odometry", {
        "header": {"stamp": STAMP, "frame_id": "odom"}, "child_frame_id": "base_link",
        "pose": {"position": {"x": 1.0, "y": 2.0, "z": 0.0},
                 "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}},
        "pose_covariance": [0.5] * 36,
        "twist": {"linear": {"x": 0.3, "y": 0.0, "z": 0.0}, "angular": {"x": 0.0, "y": 0.0, "z": 0.1}},
        "twist_covariance": [0.25] * 36,
    }),
    "/battery": ("BatteryState", {
        "stamp": STAMP, "voltage": 24.5, "temperature": 30.0, "current": -1.5, "charge": 10.0,
        "capacity": 20.0, "design_capacity": 22.0, "percentage": 0.5,
        "power_supply_status": 2, "power_supply_health": 1, "power_supply_technology": 3,
        "present": 1, "cell_count": 2, "reserved": [0, 0, 0],
        "cell_voltage": [4.0, 4.25] + [0.0] * 13,
    }),
    "/cmd_vel": ("CmdVel", {"stamp": STAMP, "linear": 0.5, "angular": -0.25}),
    "/twist": ("Twist", {"linear": {"x": 1.0, "y": 2.0, "z": 3.0},
                         "angular": {"x": 4.0, "y": 5.0, "z": 6.0}}),
}


def check(topic: str, schema: str, m) -> None:
    sec, nanosec = 1_700_000_001, 250_000_000
    if topic == "/imu":
        assert schema == "sensor_msgs/msg/Imu"
        assert (m.header.stamp.sec, m.header.stamp.nanosec) == (sec, nanosec)
        assert (m.orientation.z, m.orientation.w) == (0.6, 0.8)
        assert list(m.orientation_covariance) == [float(i) for i in range(9)]
        assert m.angular_velocity.y == 0.2 and m.linear_acceleration.z == 9.81
    elif topic == "/points":
        assert schema == "sensor_msgs/msg/PointCloud2"
        assert m.header.frame_id == "lidar_top" and m.header.stamp.sec == sec
        assert (m.height, m.width, m.point_step, m.row_step) == (1, 2, 12, 24)
        assert [(f.name, f.offset, f.datatype, f.count) for f in m.fields] == [
            ("x", 0, 7, 1), ("y", 4, 7, 1), ("z", 8, 7, 1)]
        assert bytes(m.data) == bytes(CLOUD_DATA) and m.is_dense
    elif topic == "/scan":
        assert schema == "sensor_msgs/msg/LaserScan"
        assert list(m.ranges) == [1.5, 2.5, 3.5] and list(m.intensities) == [10.0, 20.0, 30.0]
        assert (m.angle_min, m.range_max) == (-1.0, 30.0)
    elif topic == "/camera":
        assert schema == "sensor_msgs/msg/Image"
        assert (m.height, m.width, m.step, m.encoding) == (2, 3, 3, "mono8")
        assert bytes(m.data) == bytes([1, 2, 3, 4, 5, 6])
    elif topic == "/odom":
        assert schema == "nav_msgs/msg/Odometry"
        assert (m.header.frame_id, m.child_frame_id) == ("odom", "base_link")
        assert m.pose.pose.position.y == 2.0 and list(m.pose.covariance) == [0.5] * 36
        assert m.twist.twist.angular.z == 0.1 and list(m.twist.covariance) == [0.25] * 36
    elif topic == "/battery":
        assert schema == "sensor_msgs/msg/BatteryState"
        assert (m.voltage, m.percentage, m.power_supply_technology) == (24.5, 0.5, 3)
        assert m.present and list(m.cell_voltage) == [4.0, 4.25]
    elif topic == "/cmd_vel":
        assert schema == "geometry_msgs/msg/TwistStamped"
        assert (m.twist.linear.x, m.twist.angular.z) == (0.5, -0.25)
    elif topic == "/twist":
        assert schema == "geometry_msgs/msg/Twist"
        assert (m.linear.x, m.angular.z) == (1.0, 6.0)
    else:
        pytest.fail(f"unexpected topic {topic}")


def test_python_ros2_tooling_decodes_a_nerve_bag_field_by_field(domain, tmp_path):
    bag = tmp_path / "robot.mcap"
    nerve = str(target_bin("nerve"))
    recorder = subprocess.Popen([nerve, "bag", "record", "-o", str(bag), "--format", "json",
                                 "--duration", "30"], stdout=subprocess.PIPE, text=True)
    try:
        for topic, (ty, msg) in MESSAGES.items():
            # --wait-subscribers: the recorder subscribes to the new topic before the
            # first message goes out
            subprocess.run([nerve, "topic", "pub", topic, ty, json.dumps(msg), "--count", "3",
                            "--rate", "50", "--wait-subscribers", "5"],
                           check=True, capture_output=True, timeout=30)
        time.sleep(0.3)
    finally:
        recorder.send_signal(subprocess.signal.SIGINT)
        out, _ = recorder.communicate(timeout=30)
    assert recorder.returncode == 0
    report = json.loads(out)
    for t in report["topics"]:
        assert (t["dropped"], t["lost"], t["failed"]) == (0, 0, 0), t
        assert t["written"] == 3, t

    seen = {}
    with open(bag, "rb") as f:
        reader = mcap_reader.make_reader(f, decoder_factories=[ros2_decoder.DecoderFactory()])
        summary = reader.get_summary()
        assert summary is not None and summary.statistics.message_count == 3 * len(MESSAGES)
        for schema, channel, _message, decoded in reader.iter_decoded_messages():
            assert channel.message_encoding == "cdr" and schema.encoding == "ros2msg"
            check(channel.topic, schema.name, decoded)
            seen[channel.topic] = seen.get(channel.topic, 0) + 1
    assert seen == {t: 3 for t in MESSAGES}


# ROS 2 types Nerve has no native form of (carried as CDR, `nerve_msgs/Ros2Cdr`): recorded
# as the ROS 2 type itself, and bags rosbag2 wrote replayed into Nerve topics.

FIXTURES = REPO / "crates" / "nerve-bag" / "tests" / "fixtures" / "rosbag2"
# a prefix whose share/ holds std_msgs (its .msg files, as ROS 2 installs them)
ROS2_PREFIX = REPO / "crates" / "nerve-ros2-types" / "tests" / "fixtures"


def ros2_env() -> dict:
    assert (ROS2_PREFIX / "share" / "std_msgs" / "msg" / "String.msg").is_file()
    return {**os.environ, "AMENT_PREFIX_PATH": str(ROS2_PREFIX)}


def test_a_recorded_ros2_topic_decodes_with_mcap_ros2(domain, tmp_path):
    bag = tmp_path / "chatter.mcap"
    nerve = str(target_bin("nerve"))
    recorder = subprocess.Popen([nerve, "bag", "record", "-o", str(bag), "--format", "json",
                                 "--duration", "30"], stdout=subprocess.PIPE, text=True)
    try:
        subprocess.run([nerve, "topic", "pub", "/chatter", "std_msgs/msg/String",
                        json.dumps({"data": "x"}), "--count", "3", "--rate", "50",
                        "--wait-subscribers", "5"],
                       check=True, capture_output=True, timeout=30, env=ros2_env())
        time.sleep(0.3)
    finally:
        recorder.send_signal(subprocess.signal.SIGINT)
        out, _ = recorder.communicate(timeout=30)
    assert recorder.returncode == 0
    (topic,) = json.loads(out)["topics"]
    assert (topic["topic"], topic["schema_name"], topic["written"], topic["failed"]) == (
        "/chatter", "std_msgs/msg/String", 3, 0)

    texts = []
    with open(bag, "rb") as f:
        reader = mcap_reader.make_reader(f, decoder_factories=[ros2_decoder.DecoderFactory()])
        for schema, channel, message, decoded in reader.iter_decoded_messages():
            assert (schema.name, schema.encoding) == ("std_msgs/msg/String", "ros2msg")
            assert b"string data" in schema.data
            assert channel.message_encoding == "cdr"
            # the CDR as `topic pub` encoded it: header, length, "x", NUL, padding
            assert message.data[:10] == bytes([0, 1, 0, 0, 2, 0, 0, 0, ord("x"), 0])
            texts.append(decoded.data)
    assert texts == ["x"] * 3


def test_a_rosbag2_bag_played_reaches_topic_echo(domain):
    nerve = str(target_bin("nerve"))
    echo = subprocess.Popen([nerve, "topic", "echo", "/topic", "--count", "10", "--format",
                             "json", "--timeout", "60"], stdout=subprocess.PIPE, text=True)
    try:
        played = subprocess.run([nerve, "bag", "play", str(FIXTURES / "talker"), "--topics",
                                 "/topic", "--wait-subscribers", "20", "--rate", "5", "--format",
                                 "json"], check=True, capture_output=True, text=True, timeout=60)
        out, _ = echo.communicate(timeout=60)
    finally:
        if echo.poll() is None:
            echo.kill()
            echo.wait()
    report = json.loads(played.stdout)
    assert report["published"] == {"/topic": 10} and report["skipped"] == {}
    msgs = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert [m["type"] for m in msgs] == ["std_msgs/msg/String"] * 10
    assert [m["msg"]["data"] for m in msgs] == [f"Hello, world! {i}" for i in range(10)]


def test_every_rosbag2_fixture_is_described_and_played_whole(domain):
    nerve = str(target_bin("nerve"))
    for name, messages in [("talker", 20), ("wbag", 6074), ("cdr_test", 7),
                           ("topics_and_services", 13)]:
        info = json.loads(subprocess.run([nerve, "bag", "info", str(FIXTURES / name), "--format",
                                          "json"], check=True, capture_output=True, text=True,
                                         timeout=60).stdout)
        assert info["complete"] and info["messages"] == messages, info
        report = json.loads(subprocess.run([nerve, "bag", "play", str(FIXTURES / name),
                                            "--rate", "50", "--format", "json"], check=True,
                                           capture_output=True, text=True, timeout=60).stdout)
        assert report["skipped"] == {} and report["undecodable"] == {}, report
        assert sum(report["published"].values()) == messages, report


def test_a_foxglove_client_decodes_a_ros2_topic(domain):
    ws_client = pytest.importorskip("websockets.sync.client")
    dynamic = pytest.importorskip("mcap_ros2._dynamic")
    nerve = str(target_bin("nerve"))
    procs = [subprocess.Popen([nerve, "topic", "pub", "/chatter", "std_msgs/msg/String",
                               json.dumps({"data": "over the bridge"}), "--rate", "20",
                               "--wait-subscribers", "0"], env=ros2_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        bridge = subprocess.Popen([nerve, "bridge", "foxglove", "--port", "0", "--format",
                                   "json"], stdout=subprocess.PIPE, text=True)
        procs.append(bridge)
        line = bridge.stdout.readline()
        assert line.startswith("listening on ws://"), line
        with ws_client.connect(line.split()[-1], subprotocols=["foxglove.sdk.v1"],
                               open_timeout=10, max_size=None) as ws:
            channel = None
            deadline = time.monotonic() + 20
            while channel is None:
                assert time.monotonic() < deadline, "/chatter was not advertised"
                msg = ws.recv(timeout=20)
                if isinstance(msg, str) and json.loads(msg)["op"] == "advertise":
                    channel = next((c for c in json.loads(msg)["channels"]
                                    if c["topic"] == "/chatter"), None)
            assert (channel["schemaName"], channel["schemaEncoding"], channel["encoding"]) == (
                "std_msgs/msg/String", "ros2msg", "cdr")
            ws.send(json.dumps({"op": "subscribe",
                                "subscriptions": [{"id": 1, "channelId": channel["id"]}]}))
            decoder = dynamic.generate_dynamic(channel["schemaName"],
                                               channel["schema"])[channel["schemaName"]]
            deadline = time.monotonic() + 20
            while True:
                assert time.monotonic() < deadline, "no message arrived"
                msg = ws.recv(timeout=20)
                if isinstance(msg, bytes) and msg[0] == 0x01:
                    break
            assert decoder(msg[13:]).data == "over the bridge"
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(subprocess.signal.SIGINT)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def test_rosbags_reads_a_nerve_recording_of_a_replayed_rosbag2_bag(domain, tmp_path):
    """rosbag2 bag -> `nerve bag play` -> `nerve bag record` -> `rosbags` (a reader that
    shares no code with Nerve or mcap-ros2-support) decodes the ROS 2 types."""
    highlevel = pytest.importorskip("rosbags.highlevel")
    typesys = pytest.importorskip("rosbags.typesys")
    bag = tmp_path / "again.mcap"
    nerve = str(target_bin("nerve"))
    recorder = subprocess.Popen([nerve, "bag", "record", "-o", str(bag), "--format", "json",
                                 "--duration", "60"], stdout=subprocess.PIPE, text=True)
    try:
        subprocess.run([nerve, "bag", "play", str(FIXTURES / "talker"), "--topics", "/topic",
                        "/rosout", "--wait-subscribers", "10", "--rate", "5"],
                       check=True, capture_output=True, timeout=60)
        time.sleep(0.3)
    finally:
        recorder.send_signal(subprocess.signal.SIGINT)
        recorder.communicate(timeout=30)
    assert recorder.returncode == 0
    texts, logs = [], 0
    store = typesys.get_typestore(typesys.Stores.EMPTY)
    with highlevel.AnyReader([bag], default_typestore=store) as reader:
        for conn, _t, raw in reader.messages():
            msg = reader.deserialize(raw, conn.msgtype)
            if conn.topic == "/topic":
                assert conn.msgtype == "std_msgs/msg/String"
                texts.append(msg.data)
            else:
                assert conn.msgtype == "rcl_interfaces/msg/Log"
                logs += 1
    assert texts == [f"Hello, world! {i}" for i in range(10)] and logs == 10
