"""Transforms from Python: a buffer shared by threads, the listener thread, broadcasters,
points moved between frames, bad input refused with the frames named."""

import math
import threading

import numpy as np
import pytest

import nerve
from nerve import tf

S = 1_000_000_000


def robot_buffer():
    b = tf.Buffer()
    b.set_transform("base_link", "lidar", 0, tf.Transform((0.2, 0.0, 0.5)), static=True)
    for k in range(11):
        stamp = k * S // 10
        b.set_transform("odom", "base_link", stamp, tf.Transform((k * 0.1, 0.0, 0.0)))
        b.set_transform("map", "odom", stamp, tf.Transform((1.0, 2.0, 0.0)))
    return b


def test_lookups_interpolate_through_the_chain():
    b = robot_buffer()
    t = b.lookup_transform("map", "lidar", S // 2)
    assert t.translation == pytest.approx((1.7, 2.0, 0.5))
    latest = b.lookup_transform("map", "base_link")
    assert latest.translation == pytest.approx((2.0, 2.0, 0.0))
    assert b.latest_stamp("map", "lidar") == S
    assert b.latest_stamp("base_link", "lidar") is None
    assert b.can_transform("lidar", "map", S // 4)
    assert not b.can_transform("map", "lidar", 2 * S)
    frames = {f["name"]: f for f in b.frames()}
    assert frames["lidar"]["static"] and frames["lidar"]["parent"] == "base_link"
    assert frames["base_link"]["rate_hz"] == pytest.approx(10.0)
    assert len(b) == 4


def test_points_numpy_and_poses_move_into_the_target_frame():
    b = tf.Buffer()
    yaw = tf.quaternion_from_yaw(math.pi / 2)
    b.set_transform("base_link", "lidar", 0, tf.Transform((1.0, 0.0, 0.0), yaw), static=True)
    pts = b.transform_points("base_link", "lidar", [(1.0, 0.0, 0.0), (0.0, 0.0, 2.0)])
    assert pts[0] == pytest.approx((1.0, 1.0, 0.0))
    assert pts[1] == pytest.approx((1.0, 0.0, 2.0))
    cloud = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 3.0]])
    moved = b.transform_points("base_link", "lidar", cloud)
    assert moved.shape == (2, 3)
    np.testing.assert_allclose(moved, [[1.0, 1.0, 0.0], [0.0, 0.0, 3.0]], atol=1e-12)
    back = b.transform_points("lidar", "base_link", moved)
    np.testing.assert_allclose(back, cloud, atol=1e-12)
    p, q = b.lookup_transform("base_link", "lidar").apply_pose((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))
    assert p == pytest.approx((1.0, 0.0, 0.0)) and q == pytest.approx(yaw)


def test_bad_input_is_refused_with_the_frames_named():
    b = robot_buffer()
    with pytest.raises(tf.TfError, match="base_link -> imu.*not a unit quaternion"):
        b.set_transform("base_link", "imu", 0, tf.Transform((0, 0, 0), (math.nan, 0, 0, 1)))
    with pytest.raises(tf.TfError, match="already has parent odom"):
        b.set_transform("map", "base_link", 0, tf.Transform())
    with pytest.raises(tf.TfError, match='unknown frame "nowhere"'):
        b.lookup_transform("map", "nowhere")
    with pytest.raises(tf.TfError, match="future.*0 to 1000000000 ns"):
        b.lookup_transform("map", "base_link", 2 * S)
    assert issubclass(tf.TfError, nerve.NerveError)
    with pytest.raises(ValueError):
        tf.Buffer(window=-1.0)


def test_an_old_stamp_is_dropped_for_its_edge_only(capfd):
    """The docstring's promise, tf2's rule: a stamp more than the window before its edge's
    newest gives False and a TF_OLD_DATA warning; no edge loses data, nothing clears."""
    b = robot_buffer()
    for k in range(2, 13):
        b.set_transform("odom", "base_link", k * S, tf.Transform((float(k), 0.0, 0.0)))
        b.set_transform("map", "odom", k * S, tf.Transform((1.0, 2.0, float(k))))
    before = {f["name"]: f for f in b.frames()}
    capfd.readouterr()
    # 11 s before the newest (12 s), the window being 10 s
    assert b.set_transform("odom", "base_link", S, tf.Transform((-1.0, 0.0, 0.0))) is False
    assert "TF_OLD_DATA" in capfd.readouterr().err
    assert {f["name"]: f for f in b.frames()} == before
    assert b.time_jumps == 0
    assert b.lookup_transform("map", "base_link", 5 * S + S // 2).translation == pytest.approx(
        (6.5, 2.0, 5.5))
    # 1.5 s back, inside the window: stored in order, the other edge untouched
    assert b.set_transform("odom", "base_link", 10 * S + S // 2, tf.Transform((-3.0, 0.0, 0.0)))
    assert {f["name"]: f for f in b.frames()}["odom"] == before["odom"]
    assert b.lookup_transform("map", "lidar", 10 * S + S // 2).translation == pytest.approx(
        (-1.8, 2.0, 11.0))
    assert b.time_jumps == 0


def test_threads_look_up_while_another_inserts():
    b = tf.Buffer()
    b.set_transform("root", "a", 0, tf.Transform())
    stop = threading.Event()
    seen = []

    def reader():
        n = 0
        while not stop.is_set():
            t = b.lookup_transform("root", "a")
            x, y, z = t.translation
            assert (y, z) == (2 * x, 3 * x)
            n += 1
        seen.append(n)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for k in range(1, 3000):
        b.set_transform("root", "a", k * 1000, tf.Transform((k, 2 * k, 3 * k)))
    stop.set()
    for t in threads:
        t.join()
    assert len(seen) == 3 and all(n > 0 for n in seen)


def test_broadcasters_reach_a_listener_thread(ctx):
    node = ctx.node("tf_py_robot")
    statics = tf.StaticBroadcaster(node)
    statics.send([("base_link", "lidar", 0, tf.Transform((0.2, 0.0, 0.5)))])
    dynamic = tf.Broadcaster(node)
    with tf.Listener(ctx) as listener:
        statics.update_connections()
        result = {}

        def waiter():
            # another thread waits (the GIL released while it does)
            result["t"] = listener.buffer.wait_for_transform("odom", "lidar", S, timeout=20.0)

        w = threading.Thread(target=waiter)
        w.start()
        for k in range(11):
            dynamic.send([("odom", "base_link", k * S // 10, tf.Transform((k, 0.0, 0.0)))])
        w.join()
        assert result["t"].translation == pytest.approx((10.2, 0.0, 0.5))
        assert listener.stored >= 2
        with pytest.raises(tf.TfError, match="longer than 64 bytes"):
            dynamic.send([("base_link", "x" * 70, 0, tf.Transform())])
    with pytest.raises(tf.TfError, match="no transform|unknown frame"):
        tf.Buffer().wait_for_transform("a", "b", timeout=0.05)


def test_a_recorded_tf_topic_is_tf2_msgs_tfmessage(ctx, tmp_path):
    """`nerve bag record` of /tf: Python's mcap-ros2-support (what Foxglove's and ROS 2's
    Python tooling use) decodes it as tf2_msgs/msg/TFMessage, field by field."""
    import json
    import subprocess
    import time

    from conftest import target_bin

    mcap_reader = pytest.importorskip("mcap.reader")
    ros2_decoder = pytest.importorskip("mcap_ros2.decoder")
    bag = tmp_path / "tf.mcap"
    recorder = subprocess.Popen([str(target_bin("nerve")), "bag", "record", "-o", str(bag),
                                 "--format", "json", "--duration", "30", "/tf"],
                                stdout=subprocess.PIPE, text=True)
    try:
        node = ctx.node("tf_bag_robot")
        b = tf.Broadcaster(node)
        yaw = tf.quaternion_from_yaw(math.pi / 2)
        for k in range(40):
            b.send([("map", "odom", 1_700_000_000 * S + k, tf.Transform((1.0, 2.0, 0.0))),
                    ("odom", "base_link", 1_700_000_000 * S + k, tf.Transform((0.5, 0.0, 0.0), yaw))])
            time.sleep(0.05)
    finally:
        recorder.send_signal(subprocess.signal.SIGINT)
        out, _ = recorder.communicate(timeout=30)
    assert recorder.returncode == 0, out
    (topic,) = json.loads(out)["topics"]
    assert topic["schema_name"] == "tf2_msgs/msg/TFMessage" and topic["written"] > 0, topic
    n = 0
    with open(bag, "rb") as f:
        reader = mcap_reader.make_reader(f, decoder_factories=[ros2_decoder.DecoderFactory()])
        for schema, channel, _message, m in reader.iter_decoded_messages():
            assert (schema.name, schema.encoding, channel.message_encoding) == (
                "tf2_msgs/msg/TFMessage", "ros2msg", "cdr")
            a, c = m.transforms
            assert (a.header.frame_id, a.child_frame_id) == ("map", "odom")
            assert a.header.stamp.sec == 1_700_000_000
            assert (a.transform.translation.x, a.transform.translation.y) == (1.0, 2.0)
            assert (c.header.frame_id, c.child_frame_id) == ("odom", "base_link")
            assert c.transform.rotation.z == pytest.approx(yaw[2])
            assert c.transform.rotation.w == pytest.approx(yaw[3])
            n += 1
    assert n == topic["written"]
