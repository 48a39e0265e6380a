"""ROS 2 in the loop: real rclpy nodes (ROS 2 Kilted over Fast DDS) and Nerve nodes through
`nerve bridge ros2`; the harness is tests/ros2/harness.py, nothing here mocks ROS 2."""

import json
import os
import subprocess
import threading
import time

import pytest

from conftest import target_bin
from ros2.harness import Proc

def test_rclpy_talker_reaches_nerve_echo_as_its_own_ros2_type(ros2):
    bridge = ros2.bridge()
    talker = ros2.peer("talker", "/chatter", "std_msgs/msg/String", 40, "--json", '{"data": "hello"}')
    bridge.wait_line(lambda l: l.startswith("/chatter: topic ROS 2 -> Nerve (std_msgs/msg/String"))
    echo = ros2.nerve("topic", "echo", "/chatter", "--count", "5", "--format", "json", "--timeout", "30")
    assert echo.wait(60) == 0, echo.err
    msgs = [json.loads(l) for l in echo.lines if l.startswith("{")]
    assert len(msgs) == 5
    for m in msgs:
        assert m["type"] == "std_msgs/msg/String"
        assert m["msg"]["data"].startswith("hello ")
    talker.stop()


def test_nerve_imu_reaches_rclpy_listener_field_by_field(ros2):
    bridge = ros2.bridge()
    listener = ros2.peer("listener", "/imu", "sensor_msgs/msg/Imu", 3, "--timeout", "40")
    listener.wait_line(lambda l: '"ready"' in l)
    imu = {
        "stamp": {"nanos": 1_700_000_001_250_000_000},
        "orientation": {"x": 0.0, "y": 0.0, "z": 0.6, "w": 0.8},
        "orientation_covariance": [float(i) for i in range(9)],
        "angular_velocity": {"x": 0.1, "y": 0.2, "z": 0.3},
        "angular_velocity_covariance": [0.5] * 9,
        "linear_acceleration": {"x": 0.0, "y": 0.0, "z": 9.81},
        "linear_acceleration_covariance": [1.0] * 9,
    }
    pub = ros2.nerve("topic", "pub", "/imu", "Imu", json.dumps(imu), "--rate", "20", "--count", "200")
    bridge.wait_line(lambda l: l.startswith("/imu: topic Nerve -> ROS 2 (sensor_msgs/msg/Imu"))
    listener.wait_line(lambda l: '"done"' in l, timeout=60)
    got = [e["msg"] for e in listener.json_events("msg")]
    assert len(got) == 3, listener.err
    for m in got:
        assert m["header"]["stamp"] == {"sec": 1_700_000_001, "nanosec": 250_000_000}
        assert m["orientation"] == {"x": 0.0, "y": 0.0, "z": 0.6, "w": 0.8}
        assert m["orientation_covariance"] == [float(i) for i in range(9)]
        assert m["angular_velocity_covariance"] == [0.5] * 9
        assert m["linear_acceleration"]["z"] == 9.81
    pub.stop()


@pytest.mark.every_ros2_distro
def test_rclpy_client_calls_a_nerve_server_and_nerve_calls_an_rclpy_server(ros2, domain):
    import nerve
    from nerve import srv

    from test_services import ServerThread

    s = ServerThread(domain, "/nerve_switch", lambda req: {"success": req.data, "message": f"nerve set {req.data}"}, ty=srv.SetBool)
    try:
        bridge = ros2.bridge()
        bridge.wait_line(lambda l: l.startswith("/nerve_switch: service Nerve -> ROS 2 (std_srvs/srv/SetBool"))
        client = ros2.peer("client", "/nerve_switch", "std_srvs/srv/SetBool", '{"data": true}', 3)
        client.wait_line(lambda l: '"done"' in l or '"no_service"' in l, timeout=60)
        responses = [e["response"] for e in client.json_events("response")]
        assert responses == [{"success": True, "message": "nerve set 1"}] * 3, (client.lines, bridge.err)
    finally:
        s.stop = True
        s.thread.join(5)

    server = ros2.peer("server", "/ros_switch", "std_srvs/srv/SetBool", 60)
    server.wait_line(lambda l: '"ready"' in l)
    bridge.wait_line(lambda l: l.startswith("/ros_switch: service ROS 2 -> Nerve (std_srvs/srv/SetBool"))
    node = nerve.Context(domain).node("nerve_caller")
    client = node.create_client(srv.SetBool, "/ros_switch")
    for value in (1, 0, 1):
        r = client.call(data=value, timeout=20.0)
        assert r.success == value
        assert r.message.startswith("rclpy got {'data': ")
    assert len(server.json_events("call")) == 3


SEQUENCES = {
    "string_values": ["a", "bé", ""],
    "float64_values": [1.5, -2.25],
    "int8_values": [-1, 2, -128],
    "uint64_values": [18446744073709551615, 0],
    "bool_values": [True, False, True],
    "basic_types_values": [{"int32_value": -7, "bool_value": True, "float32_value": 0.5}],
}


def check_sequences(m):
    for k, v in SEQUENCES.items():
        if k == "basic_types_values":
            assert len(m[k]) == 1
            for f, x in v[0].items():
                assert m[k][0][f] == x, (k, f, m[k][0][f])
        else:
            assert m[k] == v, (k, m[k])


@pytest.mark.every_ros2_distro
def test_a_test_msgs_type_with_strings_and_sequences_crosses_both_ways(ros2):
    bridge = ros2.bridge()
    ty = "test_msgs/msg/UnboundedSequences"
    talker = ros2.peer("talker", "/seq_from_ros", ty, 30, "--json", json.dumps(SEQUENCES))
    bridge.wait_line(lambda l: l.startswith("/seq_from_ros: topic ROS 2 -> Nerve"))
    echo = ros2.nerve("topic", "echo", "/seq_from_ros", "--count", "2", "--format", "json", "--timeout", "30")
    assert echo.wait(60) == 0, echo.err
    for line in [l for l in echo.lines if l.startswith("{")]:
        m = json.loads(line)
        assert m["type"] == ty
        check_sequences(m["msg"])
    talker.stop()

    listener = ros2.peer("listener", "/seq_from_nerve", ty, 2, "--timeout", "40")
    listener.wait_line(lambda l: '"ready"' in l)
    env = {**ros2.environ, "AMENT_PREFIX_PATH": str(ros2.share.parent)}
    pub = Proc([target_bin("nerve"), "topic", "pub", "/seq_from_nerve", ty, json.dumps(SEQUENCES),
                "--rate", "10", "--count", "300"], env, "pub")
    try:
        listener.wait_line(lambda l: '"done"' in l, timeout=60)
        got = [e["msg"] for e in listener.json_events("msg")]
        assert len(got) == 2, (listener.err, bridge.err)
        for m in got:
            check_sequences(m)
    finally:
        pub.stop()


def test_a_one_megabyte_point_cloud_reaches_a_nerve_subscriber_intact(ros2, domain):
    import nerve
    from nerve import msgs

    bridge = ros2.bridge()
    size = 1 << 20
    cloud = ros2.peer("cloud", "/cloud", 5, size, "--rate", "5")
    bridge.wait_line(lambda l: l.startswith("/cloud: topic ROS 2 -> Nerve (sensor_msgs/msg/PointCloud2 as nerve_msgs/PointCloud"))
    node = nerve.Context(domain).node("cloud_check")
    sub = node.create_subscription(msgs.PointCloud, "/cloud")
    expected = bytes(i % 251 for i in range(size))
    got = 0
    end = time.monotonic() + 40
    while got < 3 and time.monotonic() < end:
        m = sub.recv(timeout=1.0)
        if m is None:
            continue
        assert (m.width, m.point_step, m.row_step) == (size // 16, 16, size)
        assert bytes(m.data) == expected
        got += 1
    assert got == 3, (cloud.lines, bridge.err)


def test_twist_stamped_and_an_image_with_a_26_byte_frame_id_reach_nerve_exactly(ros2, domain):
    """Issue 42: a TwistStamped becomes nerve_msgs/TwistStamped with every field at full
    precision (never the planar, f32 CmdVel unless asked for), and messages whose frame id
    is a RealSense camera's (26 bytes) are delivered, not dropped."""
    import nerve
    from nerve import msgs

    frame = "camera_color_optical_frame"
    assert len(frame) == 26
    linear = {"x": 0.1, "y": -2.5e-9, "z": 3.0e300}
    angular = {"x": 1.0 / 3.0, "y": 5.0, "z": -6.0}
    twist = {"header": {"stamp": {"sec": 5, "nanosec": 6}, "frame_id": frame},
             "twist": {"linear": linear, "angular": angular}}
    image = {"header": {"stamp": {"sec": 7, "nanosec": 8}, "frame_id": frame},
             "height": 2, "width": 3, "encoding": "mono8", "is_bigendian": 0, "step": 3,
             "data": [1, 2, 3, 4, 5, 6]}
    bridge = ros2.bridge()
    ros2.peer("talker", "/exact_twist", "geometry_msgs/msg/TwistStamped", 400, "--rate", "10",
              "--json", json.dumps(twist))
    ros2.peer("talker", "/exact_image", "sensor_msgs/msg/Image", 400, "--rate", "10",
              "--json", json.dumps(image))
    bridge.wait_line(lambda l: l.startswith(
        "/exact_twist: topic ROS 2 -> Nerve (geometry_msgs/msg/TwistStamped as nerve_msgs/TwistStamped"))
    bridge.wait_line(lambda l: l.startswith(
        "/exact_image: topic ROS 2 -> Nerve (sensor_msgs/msg/Image as nerve_msgs/Image"))
    node = nerve.Context(domain).node("exact_check")
    twists = node.create_subscription(msgs.TwistStamped, "/exact_twist")
    images = node.create_subscription(msgs.Image, "/exact_image")
    t = twists.recv(timeout=30.0)
    assert t is not None, bridge.err
    assert t.header.frame_id == frame
    assert t.header.stamp.nanos == 5_000_000_006
    assert (t.twist.linear.x, t.twist.linear.y, t.twist.linear.z) == (0.1, -2.5e-9, 3.0e300)
    assert (t.twist.angular.x, t.twist.angular.y, t.twist.angular.z) == (1.0 / 3.0, 5.0, -6.0)
    i = images.recv(timeout=30.0)
    assert i is not None, bridge.err
    assert i.header.frame_id == frame
    assert (i.height, i.width, i.step, i.encoding) == (2, 3, 3, "mono8")
    assert bytes(i.data) == bytes([1, 2, 3, 4, 5, 6])
    assert not any("not delivered" in l for l in bridge.err), bridge.err


def test_transient_local_late_joiners_get_the_last_sample_both_ways(ros2):
    bridge = ros2.bridge()
    # ROS 2 latched publisher, Nerve subscriber joining after it published
    talker = ros2.peer("talker", "/map_ros", "std_msgs/msg/String", 1, "--latched", "--json", '{"data": "map"}')
    talker.wait_line(lambda l: '"matched"' in l)
    bridge.wait_line(lambda l: l.startswith("/map_ros: topic ROS 2 -> Nerve"))
    time.sleep(1.0)
    echo = ros2.nerve("topic", "echo", "/map_ros", "--count", "1", "--format", "json", "--timeout", "30")
    assert echo.wait(60) == 0, (echo.err, bridge.err)
    assert json.loads(echo.lines[-1])["msg"]["data"] == "map 0"
    # Nerve publisher with history, rclpy transient-local subscription joining later
    env = {**ros2.environ, "AMENT_PREFIX_PATH": str(ros2.share.parent)}
    pub = Proc([target_bin("nerve"), "topic", "pub", "/map_nerve", "std_msgs/msg/String", '{"data": "nerve map"}',
                "--rate", "0.05", "--count", "2", "--qos", "latched"], env, "pub")
    bridge.wait_line(lambda l: l.startswith("/map_nerve: topic Nerve -> ROS 2"))
    time.sleep(1.0)
    # the next sample comes 20 s later: what arrives within 15 s is the history
    listener = ros2.peer("listener", "/map_nerve", "std_msgs/msg/String", 1, "--latched", "--timeout", "15")
    listener.wait_line(lambda l: '"done"' in l, timeout=40)
    assert [e["msg"]["data"] for e in listener.json_events("msg")] == ["nerve map"], (listener.err, bridge.err)
    pub.stop()


def test_two_bridges_deliver_each_message_once_and_nothing_comes_back(ros2, domain):
    first = ros2.bridge()
    second = ros2.bridge()
    # ROS 2 -> Nerve: each message once on the Nerve side, none echoed back to ROS 2
    listener = ros2.peer("listener", "/loop", "std_msgs/msg/String", 100, "--timeout", "12", name="ros_listener")
    listener.wait_line(lambda l: '"ready"' in l)
    echo = ros2.nerve("topic", "echo", "/loop", "--count", "20", "--format", "json", "--timeout", "40")
    # the talker starts once both the rclpy listener and the bridge (for the echo) listen
    talker = ros2.peer("talker", "/loop", "std_msgs/msg/String", 20, "--subs", 2, "--json", '{"data": "once"}')
    assert echo.wait(60) == 0, (echo.err, first.err, second.err)
    datas = [json.loads(l)["msg"]["data"] for l in echo.lines if l.startswith("{")]
    assert datas == [f"once {i}" for i in range(20)]
    talker.wait(60)
    listener.wait_line(lambda l: '"done"' in l, timeout=30)
    # the rclpy listener hears the talker only: 20 messages, not 40 or 60
    heard = [e["msg"]["data"] for e in listener.json_events("msg")]
    assert sorted(heard) == sorted(f"once {i}" for i in range(20)), heard
    # and no more Nerve messages than the talker sent
    extra = ros2.nerve("topic", "echo", "/loop", "--count", "1", "--timeout", "2")
    assert extra.wait(30) != 0


def _domain_files(domain):
    return sorted(
        f for f in os.listdir("/dev/shm") if f.startswith(f"nerve{domain}_") and "doorbell" not in f
    )


def test_a_bridge_killed_with_sigkill_is_replaced_and_leaves_nothing(ros2, domain):
    import signal

    bridge = ros2.bridge()
    talker = ros2.peer("talker", "/alive", "std_msgs/msg/String", 400, "--rate", "20", "--json", '{"data": "alive"}')
    echo = ros2.nerve("topic", "echo", "/alive", "--count", "3", "--timeout", "30")
    assert echo.wait(60) == 0, (echo.err, bridge.err)
    bridge.p.send_signal(signal.SIGKILL)
    bridge.p.wait(10)
    # a new bridge takes over: both sides recover without restarting either
    again = ros2.bridge()
    echo = ros2.nerve("topic", "echo", "/alive", "--count", "3", "--timeout", "30")
    assert echo.wait(60) == 0, (echo.err, again.err)
    listener = ros2.peer("listener", "/back", "std_msgs/msg/Bool", 2, "--timeout", "30")
    listener.wait_line(lambda l: '"ready"' in l)
    env = {**ros2.environ, "AMENT_PREFIX_PATH": str(ros2.share.parent)}
    pub = Proc([target_bin("nerve"), "topic", "pub", "/back", "std_msgs/msg/Bool", '{"data": true}',
                "--rate", "10", "--count", "100"], env, "pub")
    listener.wait_line(lambda l: '"done"' in l, timeout=60)
    assert [e["msg"]["data"] for e in listener.json_events("msg")] == [True, True], again.err
    for p in (pub, talker, again):
        p.stop()
    # what the killed bridge held is reclaimed: nothing of the domain is left
    clean = subprocess.run([target_bin("nerve"), "clean"], env=ros2.environ, capture_output=True, text=True, timeout=60)
    assert clean.returncode == 0, clean.stderr
    assert _domain_files(domain) == []


def test_a_ros2_server_that_dies_mid_call_ends_the_nerve_call_with_server_gone(ros2, domain):
    import signal

    import nerve
    from nerve import srv

    bridge = ros2.bridge()
    server = ros2.peer("server", "/dying", "std_srvs/srv/SetBool", 60, "--hang")
    server.wait_line(lambda l: '"ready"' in l)
    bridge.wait_line(lambda l: l.startswith("/dying: service ROS 2 -> Nerve"))
    node = nerve.Context(domain).node("caller")
    client = node.create_client(srv.SetBool, "/dying")
    killer = threading.Timer(2.0, lambda: server.p.send_signal(signal.SIGINT))
    killer.start()
    with pytest.raises(nerve.CallError) as e:
        client.call(data=1, timeout=25.0)
    # ended by the server's departure (ServerGone), not by the call's timeout
    assert "went away before responding" in str(e.value), str(e.value)


@pytest.mark.every_ros2_distro
def test_each_graph_shows_the_other_sides_nodes_topics_and_services(ros2, domain):
    import nerve
    from nerve import msgs

    bridge = ros2.bridge()
    talker = ros2.peer("talker", "/ros_topic", "std_msgs/msg/String", 1000, "--rate", "5", "--wait", "0",
                       "--json", '{"data": "g"}')
    server = ros2.peer("server", "/ros_service", "std_srvs/srv/SetBool", 60)
    server.wait_line(lambda l: '"ready"' in l)
    node = nerve.Context(domain).node("nerve_side_node")
    pub = node.create_publisher(msgs.Imu, "/nerve_imu")
    bridge.wait_line(lambda l: l.startswith("/nerve_imu: topic Nerve -> ROS 2"))

    def cli_json(*args):
        r = subprocess.run([target_bin("nerve"), *args, "--format", "json"], env=ros2.environ,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    deadline = time.monotonic() + 20
    while True:
        topics = {t["name"]: t for t in cli_json("topic", "list") if t.get("ros2")}
        nodes = {n["name"] for n in cli_json("node", "list")["nodes"] if n.get("ros2")}
        services = {s["name"]: s for s in cli_json("service", "list") if s.get("ros2")}
        # every name asserted below (the server's node may show after its service)
        if ("/ros_topic" in topics and {"/ros2_talker", "/ros2_server"} <= nodes
                and "/ros_service" in services) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert topics["/ros_topic"]["type"] == "std_msgs/msg/String" and topics["/ros_topic"]["publishers"] == 1
    assert {"/ros2_talker", "/ros2_server"} <= nodes, nodes
    assert services["/ros_service"]["type"] == "std_srvs/srv/SetBool"
    # and ROS 2 sees Nerve's node and topic
    graph = ros2.peer("graph", 3)
    g = json.loads(graph.wait_line(lambda l: '"graph"' in l, timeout=40))
    assert "nerve_side_node" in g["nodes"], g["nodes"]
    assert g["topics"].get("/nerve_imu") == ["sensor_msgs/msg/Imu"], g["topics"]
    del pub


def test_a_type_without_a_definition_is_reported_once_naming_where_it_looked(ros2, tmp_path):
    empty = tmp_path / "no_types"
    empty.mkdir()
    env = {k: v for k, v in ros2.environ.items() if k != "AMENT_PREFIX_PATH"}
    bridge = ros2.bridge("--types", empty, types=False, environ=env)
    # a node that does not serve its types' descriptions either (REP-2016)
    talker = string_talker(ros2, "/strings", "test_msgs/msg/Strings", serve=False)
    end = time.monotonic() + 20
    while time.monotonic() < end and not any("/strings" in l for l in bridge.err):
        time.sleep(0.1)
    time.sleep(3)  # several refreshes and retries later: still one report
    reports = [l for l in bridge.err if l.startswith("/strings")]
    assert len(reports) == 1, bridge.err
    assert "test_msgs/msg/Strings" in reports[0] and str(empty) in reports[0], reports[0]
    assert "get_type_description" in reports[0], reports[0]
    talker.stop()


def test_the_same_type_name_with_another_definition_is_refused_naming_both_hashes(ros2, tmp_path):
    prefix = tmp_path / "other"
    (prefix / "share" / "std_msgs" / "msg").mkdir(parents=True)
    (prefix / "share" / "std_msgs" / "msg" / "String.msg").write_text("string data\nint32 extra\n")
    env = {**ros2.environ, "AMENT_PREFIX_PATH": str(prefix)}
    other = Proc([target_bin("nerve"), "topic", "pub", "/versioned", "std_msgs/msg/String",
                  '{"data": "v2", "extra": 1}', "--rate", "1", "--count", "100"], env, "pub")
    try:
        time.sleep(1.0)
        bridge = ros2.bridge()
        ros2.peer("talker", "/versioned", "std_msgs/msg/String", 100, "--rate", "10", "--wait", "0")
        end = time.monotonic() + 20
        while time.monotonic() < end and not any(l.startswith("/versioned") for l in bridge.err):
            time.sleep(0.1)
        report = next(l for l in bridge.err if l.startswith("/versioned"))
        hashes = [w.strip(",.") for w in report.split() if w.startswith("RIHS01_")]
        assert len(set(hashes)) == 2, report
        assert "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18" in hashes, report
    finally:
        other.stop()


def test_a_malformed_nerve_message_is_dropped_and_named_not_sent(ros2, domain):
    import nerve

    bridge = ros2.bridge()
    env = {**ros2.environ, "AMENT_PREFIX_PATH": str(ros2.share.parent)}
    good = Proc([target_bin("nerve"), "topic", "pub", "/garbled", "std_msgs/msg/String", '{"data": "ok"}',
                 "--rate", "2", "--count", "100"], env, "pub")
    listener = ros2.peer("listener", "/garbled", "std_msgs/msg/String", 3, "--timeout", "30")
    try:
        bridge.wait_line(lambda l: l.startswith("/garbled: topic Nerve -> ROS 2"))
        node = nerve.Context(domain).node("garbler")
        sub = node.create_subscription(None, "/garbled")
        pub = node.create_publisher(sub.message_class._type, "/garbled")
        # until the bridge, once its Nerve subscriber is there, reports one (its subscriber
        # comes when it discovers the rclpy listener, which may be after the route)
        give_up = time.monotonic() + 30
        while time.monotonic() < give_up and not any("/garbled" in l and "dropped" in l for l in bridge.err):
            # a valid carrier head, then a string length far past the end
            pub.publish_bytes(b"\0" * 8 + b"\x00\x01\x00\x00\xff\xff\xff\x7f")
            time.sleep(0.1)
        listener.wait_line(lambda l: '"done"' in l, timeout=40)
        got = [e["msg"]["data"] for e in listener.json_events("msg")]
        assert got == ["ok", "ok", "ok"], got
        bad = [l for l in bridge.err if "/garbled" in l and "dropped" in l]
        assert bad and "std_msgs/msg/String" in bad[0], bridge.err
        assert bridge.p.poll() is None, "the bridge survives"
    finally:
        good.stop()


def test_python_reads_a_bridged_ros2_type_by_field_name_with_numpy_arrays(ros2, domain):
    import numpy as np

    import nerve

    ros2.bridge()
    ty = "test_msgs/msg/UnboundedSequences"
    ros2.peer("talker", "/seq_py", ty, 100, "--rate", "10", "--json", json.dumps(SEQUENCES))
    node = nerve.Context(domain).node("py_reader")
    end = time.monotonic() + 30
    sub = None
    while sub is None and time.monotonic() < end:
        try:
            sub = node.create_subscription(None, "/seq_py")
        except nerve.NerveError:
            time.sleep(0.2)
    assert sub is not None
    m = sub.recv(timeout=30.0)
    assert m is not None
    fields = m._ros2()
    check_sequences({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in fields.items()})
    assert isinstance(fields["float64_values"], np.ndarray) and fields["float64_values"].dtype == np.float64
    assert fields["basic_types_values"][0]["int32_value"] == -7
    # a type that is not a ROS 2 carrier is refused by name
    with pytest.raises(ValueError, match="not a ROS 2 type"):
        nerve.msgs.Imu()._ros2()


def test_a_qos_mismatch_that_starves_a_ros2_subscription_is_named_in_topic_info(ros2):
    bridge = ros2.bridge()
    env = {**ros2.environ, "AMENT_PREFIX_PATH": str(ros2.share.parent)}
    pub = Proc([target_bin("nerve"), "topic", "pub", "/nolatch", "std_msgs/msg/String", '{"data": "x"}',
                "--rate", "5", "--count", "200"], env, "pub")
    try:
        bridge.wait_line(lambda l: l.startswith("/nolatch: topic Nerve -> ROS 2"))
        ros2.peer("listener", "/nolatch", "std_msgs/msg/String", 1, "--latched", "--timeout", "30")
        end = time.monotonic() + 20
        info = {}
        while time.monotonic() < end and "ros2_qos_mismatch" not in info:
            r = subprocess.run([target_bin("nerve"), "topic", "info", "/nolatch", "--format", "json"],
                               env=ros2.environ, capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            info = json.loads(r.stdout)
            time.sleep(0.3)
        assert "transient local" in info.get("ros2_qos_mismatch", ""), info
        assert any("/nolatch" in l and "transient local" in l for l in bridge.err), bridge.err
    finally:
        pub.stop()


def test_a_rosbag2_bag_played_into_nerve_reaches_an_rclpy_subscriber(ros2):
    from conftest import REPO

    bag = REPO / "crates" / "nerve-bag" / "tests" / "fixtures" / "rosbag2" / "talker"
    bridge = ros2.bridge()
    listener = ros2.peer("listener", "/topic", "std_msgs/msg/String", 3, "--timeout", "40")
    listener.wait_line(lambda l: '"ready"' in l)
    # the bag's /topic appears in Nerve as std_msgs/msg/String; the bridge offers it to
    # ROS 2 while it plays (looped, so the listener's match comes in time)
    play = ros2.nerve("bag", "play", bag, "--loop", name="play")
    bridge.wait_line(lambda l: l.startswith("/topic: topic Nerve -> ROS 2 (std_msgs/msg/String"), timeout=60)
    listener.wait_line(lambda l: '"done"' in l, timeout=60)
    got = [e["msg"]["data"] for e in listener.json_events("msg")]
    assert len(got) == 3 and all(g.startswith("Hello, world! ") for g in got), got
    play.stop()


def test_sigterm_stops_the_bridge_cleanly(ros2):
    import signal

    bridge = ros2.bridge()
    bridge.p.send_signal(signal.SIGTERM)
    assert bridge.wait(30) == 0, bridge.err
    assert any(l.startswith("forwarded ") for l in bridge.lines), bridge.lines


@pytest.mark.parametrize("args, named", [
    (["--ros-domain", "300"], "--ros-domain 300"),
    (["--allow", "("], "--allow"),
    (["--deny", "[x"], "--deny"),
    (["--types", "/nonexistent/share"], "/nonexistent/share"),
    (["--zenoh-connect", "tcp/127.0.0.1:7447"], "--zenoh"),
    # an exact form is not a lossy one to ask for
    (["--lossy", "nerve_msgs/Odometry"], "nerve_msgs/Odometry is not a lossy ROS 2 form"),
])
def test_bad_bridge_arguments_are_usage_errors_naming_them(args, named, domain):
    r = subprocess.run([target_bin("nerve"), "bridge", "ros2", *args, "--duration", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert named in r.stderr, r.stderr


# An rclpy publisher of geometry_msgs/Twist (linear.x = argv[3]) with the reliability
# argv[2] names ("reliable" or "best_effort"), on topic argv[1], for 60 s.
TWIST_TALKER = """
import sys, time, rclpy
from geometry_msgs.msg import Twist
from rclpy.qos import QoSProfile, ReliabilityPolicy
rclpy.init()
node = rclpy.create_node("ros2_twist_" + sys.argv[2])
rel = ReliabilityPolicy.RELIABLE if sys.argv[2] == "reliable" else ReliabilityPolicy.BEST_EFFORT
pub = node.create_publisher(Twist, sys.argv[1], QoSProfile(depth=10, reliability=rel))
m = Twist()
m.linear.x = float(sys.argv[3])
print("ready", flush=True)
end = time.monotonic() + 60
while time.monotonic() < end:
    pub.publish(m)
    rclpy.spin_once(node, timeout_sec=0.05)
"""


def twist_talker(ros2, topic, reliability, x):
    p = Proc([ros2.share.parent / "bin" / "python", "-c", TWIST_TALKER, topic, reliability, str(x)],
             ros2.environ, f"twist talker {reliability}")
    p.wait_line(lambda l: l == "ready")
    return p


def recv_x(sub, want, timeout=30.0):
    """Receives until a Twist with linear.x == want arrives; the values seen."""
    seen = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        m = sub.recv(timeout=max(0.1, end - time.monotonic()))
        if m is None:
            continue
        seen.append(m.linear.x)
        if m.linear.x == want:
            break
    return seen


@pytest.mark.parametrize("nerve_qos, ros_reliability", [
    ("sensor", "reliable"),
    ("reliable", "best_effort"),
])
def test_a_nerve_subscriber_made_before_the_ros2_publisher_is_served(ros2, domain, nerve_qos, ros_reliability):
    import nerve
    from nerve import msgs

    bridge = ros2.bridge()
    node = nerve.Context(domain).node("early_listener")
    # the Nerve subscriber exists (and fixed the topic's overflow) before ROS 2 publishes
    sub = node.create_subscription(msgs.Twist, "/early", qos=getattr(nerve.Qos, nerve_qos)())
    talker = twist_talker(ros2, "/early", ros_reliability, 1.5)
    try:
        seen = recv_x(sub, 1.5)
        assert seen and seen[-1] == 1.5, (seen, bridge.err)
        assert not any("/early" in l and "not bridged" in l for l in bridge.err), bridge.err
    finally:
        talker.stop()


def test_a_best_effort_ros2_publisher_joining_a_reliable_one_is_heard_too(ros2, domain):
    import nerve
    from nerve import msgs

    bridge = ros2.bridge()
    reliable = twist_talker(ros2, "/mixed", "reliable", 1.0)
    bridge.wait_line(lambda l: l.startswith("/mixed: topic ROS 2 -> Nerve"))
    node = nerve.Context(domain).node("mixed_listener")
    sub = node.create_subscription(msgs.Twist, "/mixed", qos=nerve.Qos.sensor())
    best_effort = None
    try:
        assert recv_x(sub, 1.0)[-1:] == [1.0], bridge.err
        # a second publisher that offers less than the first: the route must hear it too
        best_effort = twist_talker(ros2, "/mixed", "best_effort", 2.0)
        seen = recv_x(sub, 2.0)
        assert seen[-1:] == [2.0], (sorted(set(seen)), bridge.err)
    finally:
        reliable.stop()
        if best_effort:
            best_effort.stop()


# An rclpy publisher of type argv[2] on topic argv[1], 10 a second for 60 s (a `data`
# string field holds "<argv[3]> <i>"); argv[4] "serve" or "quiet": whether the node
# serves its types' descriptions (REP-2016's `get_type_description`, on by default).
STRING_TALKER = """
import importlib, sys, rclpy
from rclpy.parameter import Parameter
rclpy.init()
pkg, kind, name = sys.argv[2].split("/")
cls = getattr(importlib.import_module(pkg + "." + kind), name)
serve = Parameter("start_type_description_service", value=sys.argv[4] == "serve")
node = rclpy.create_node("ros2_described_talker", parameter_overrides=[serve])
pub = node.create_publisher(cls, sys.argv[1], 10)
print("ready", flush=True)
for i in range(600):
    m = cls()
    if isinstance(getattr(m, "data", None), str):
        m.data = f"{sys.argv[3]} {i}"
    pub.publish(m)
    rclpy.spin_once(node, timeout_sec=0.1)
"""


def string_talker(ros2, topic, ros_type, serve=True, data="hello"):
    p = Proc([ros2.share.parent / "bin" / "python", "-c", STRING_TALKER, topic, ros_type, data,
              "serve" if serve else "quiet"], ros2.environ, f"talker {ros_type}")
    p.wait_line(lambda l: l == "ready")
    return p


@pytest.mark.every_ros2_distro
def test_a_type_with_no_definition_here_is_learned_from_the_publishing_node(ros2, tmp_path):
    empty = tmp_path / "no_types"
    empty.mkdir()
    # neither the bridge nor the echo has a definition of std_msgs/String on its path
    env = {k: v for k, v in ros2.environ.items() if k != "AMENT_PREFIX_PATH"}
    bridge = ros2.bridge("--types", empty, types=False, environ=env)
    talker = string_talker(ros2, "/learned", "std_msgs/msg/String", data="learned")
    try:
        bridge.wait_line(lambda l: l.startswith("/learned: topic ROS 2 -> Nerve (std_msgs/msg/String"))
        echo = Proc([target_bin("nerve"), "topic", "echo", "/learned", "--count", "3", "--format", "json",
                     "--timeout", "30"], env, "echo")
        assert echo.wait(60) == 0, (echo.err, bridge.err)
        msgs = [json.loads(l) for l in echo.lines if l.startswith("{")]
        assert len(msgs) == 3, echo.lines
        for m in msgs:
            assert m["type"] == "std_msgs/msg/String"
            assert m["msg"]["data"].startswith("learned "), m
        # asked, answered and checked against the announced hash: never reported as a failure
        assert not any(l.startswith("/learned") for l in bridge.err), bridge.err
    finally:
        talker.stop()


# An rclpy client of `get_type_description` service argv[1]: asks for type argv[2] with
# each hash argv[3:], and prints each answer as JSON.
DESCRIBE_CLIENT = """
import json, sys, rclpy
from type_description_interfaces.srv import GetTypeDescription
rclpy.init()
node = rclpy.create_node("ros2_describe_client")
cli = node.create_client(GetTypeDescription, sys.argv[1])
if not cli.wait_for_service(timeout_sec=30):
    print(json.dumps({"error": "no service"}), flush=True)
    sys.exit(1)
for h in sys.argv[3:]:
    req = GetTypeDescription.Request(type_name=sys.argv[2], type_hash=h, include_type_sources=True)
    fut = cli.call_async(req)
    rclpy.spin_until_future_complete(node, fut, timeout_sec=30)
    r = fut.result()
    if r is None:
        print(json.dumps({"error": "no answer"}), flush=True)
        continue
    d = r.type_description.type_description
    print(json.dumps({"successful": r.successful, "reason": r.failure_reason, "type_name": d.type_name,
                      "fields": [[f.name, f.type.type_id] for f in d.fields],
                      "sources": [s.raw_file_contents for s in r.type_sources]}), flush=True)
"""


@pytest.mark.every_ros2_distro
def test_the_bridge_node_answers_get_type_description_for_the_types_it_knows(ros2):
    bridge = ros2.bridge()
    string_hash = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
    client = Proc([ros2.share.parent / "bin" / "python", "-c", DESCRIBE_CLIENT,
                   f"/nerve_bridge_{bridge.p.pid}/get_type_description", "std_msgs/msg/String",
                   string_hash, "RIHS01_" + "0" * 64], ros2.environ, "describe client")
    assert client.wait(90) == 0, (client.lines, client.err, bridge.err)
    answers = [json.loads(l) for l in client.lines]
    assert len(answers) == 2, answers
    ok, other = answers
    assert ok["successful"] and ok["type_name"] == "std_msgs/msg/String", ok
    assert ok["fields"] == [["data", 17]], ok
    assert any("string data" in s for s in ok["sources"]), ok
    # another hash of the same name: refused, naming the bridge's
    assert not other["successful"] and string_hash in other["reason"], other


def test_a_nested_type_is_learned_with_the_types_it_references(ros2, tmp_path):
    empty = tmp_path / "no_types"
    empty.mkdir()
    env = {k: v for k, v in ros2.environ.items() if k != "AMENT_PREFIX_PATH"}
    bridge = ros2.bridge("--types", empty, types=False, environ=env)
    # Header (and its builtin_interfaces/Time), Polygon and its Point32s come with it
    ty = "geometry_msgs/msg/PolygonStamped"
    talker = string_talker(ros2, "/polygon", ty)
    try:
        bridge.wait_line(lambda l: l.startswith(f"/polygon: topic ROS 2 -> Nerve ({ty}"))
        echo = Proc([target_bin("nerve"), "topic", "echo", "/polygon", "--count", "1", "--format", "json",
                     "--timeout", "30"], env, "echo")
        assert echo.wait(60) == 0, (echo.err, bridge.err)
        m = json.loads(next(l for l in echo.lines if l.startswith("{")))
        assert m["type"] == ty
        assert m["msg"]["header"] == {"stamp": {"sec": 0, "nanosec": 0}, "frame_id": ""}, m
        assert m["msg"]["polygon"] == {"points": []}, m
    finally:
        talker.stop()


def test_a_bridge_is_one_entry_in_the_nerve_node_list(ros2):
    bridge = ros2.bridge()
    r = subprocess.run([target_bin("nerve"), "node", "list", "--format", "json"], env=ros2.environ,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    bridges = [n for n in json.loads(r.stdout)["nodes"] if n["name"].startswith("_ros2_bridge_")]
    assert len(bridges) == 1, bridges
    assert bridges[0]["pid"] == bridge.p.pid and bridges[0]["state"] == "alive", bridges
    r = subprocess.run([target_bin("nerve"), "node", "list"], env=ros2.environ,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert sum(l.startswith("_ros2_bridge_") for l in r.stdout.splitlines()) == 1, r.stdout


S = 1_000_000_000


@pytest.mark.every_ros2_distro
def test_a_nerve_clock_drives_an_rclpy_nodes_simulation_time(ros2, domain):
    """/clock published in Nerve (nerve_msgs::Clock, what `nerve bag play --clock` sends)
    is an rclpy node's time under use_sim_time: it reads 1000 s and on, which only the
    Nerve clock gives (its wall clock reads ~1.7e9 s)."""
    import nerve
    from nerve import msgs

    bridge = ros2.bridge()
    clock = ros2.peer("sim_clock", 1005 * S, "--timeout", "90")
    clock.wait_line(lambda l: '"ready"' in l)
    pub = nerve.Context(domain).node("nerve_sim_clock").create_publisher(msgs.Clock, "/clock")
    t = 1000 * S
    give_up = time.monotonic() + 90
    while clock.p.poll() is None and time.monotonic() < give_up:
        pub.publish(clock={"nanos": t})
        t += 50_000_000
        time.sleep(0.02)
    clock.wait_line(lambda l: '"done"' in l, timeout=10)
    bridge.wait_line(lambda l: l.startswith("/clock: topic Nerve -> ROS 2 (rosgraph_msgs/msg/Clock"))
    readings = [e["ns"] for e in clock.json_events("now") if e["ns"] != 0]
    assert readings, (clock.lines, clock.err, bridge.err)
    assert readings[-1] >= 1005 * S, readings
    assert all(1000 * S <= ns < t for ns in readings), readings
    assert readings == sorted(readings), readings



def test_transforms_cross_the_dds_wire_exactly_from_one_nerve_domain_to_another(ros2, domain):
    """Nerve's tf broadcasters (/tf, and /tf_static latched) through one bridge onto DDS as
    tf2_msgs/msg/TFMessage and through a second bridge, of another Nerve domain, into its
    tf listener: frame ids, stamps and transforms exact. (rclpy cannot be the DDS peer: no
    tf2_msgs wheel exists for the ROS 2 distributions the harness installs; the CDR form is
    checked against ROS 2's own decoder in test_tf.py's bag test.)"""
    import math

    import nerve
    from conftest import new_domain
    from nerve import tf

    other = new_domain()
    ros2.bridge()
    ros2.bridge(environ={**ros2.environ, "NERVE_DOMAIN": str(other)})
    node = nerve.Context(domain).node("nerve_tf_robot")
    yaw = tf.quaternion_from_yaw(math.pi / 2)
    statics = tf.StaticBroadcaster(node)
    statics.send([("base_link", "lidar_with_a_long_frame_id", 1_700_000_000 * S + 5,
                   tf.Transform((0.2, 0.0, 0.5), yaw))])
    broadcaster = tf.Broadcaster(node)
    stamp = 1_700_000_001 * S + 250_000_000
    with tf.Listener(nerve.Context(other)) as listener:
        give_up = time.monotonic() + 60
        while time.monotonic() < give_up and not (listener.buffer.can_transform("map", "base_link", stamp)
                                                  and listener.buffer.can_transform("base_link", "lidar_with_a_long_frame_id")):
            # as a spinning node's executor does: late subscribers (the bridge's) get the history
            statics.update_connections()
            broadcaster.send([
                ("map", "odom", stamp, tf.Transform((1.0, 2.0, 0.0))),
                ("odom", "base_link", stamp, tf.Transform((0.5, -1.25, 0.125), yaw)),
            ])
            time.sleep(0.05)
        t = listener.buffer.lookup_transform("map", "odom", stamp)
        assert (t.translation, t.rotation) == ((1.0, 2.0, 0.0), (0.0, 0.0, 0.0, 1.0))
        t = listener.buffer.lookup_transform("odom", "base_link", stamp)
        assert (t.translation, t.rotation) == ((0.5, -1.25, 0.125), yaw)
        assert listener.buffer.latest_stamp("map", "odom") == stamp
        t = listener.buffer.lookup_transform("base_link", "lidar_with_a_long_frame_id")
        assert (t.translation, t.rotation) == ((0.2, 0.0, 0.5), yaw)
