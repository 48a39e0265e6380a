"""Topics from Python: every way to publish and receive, slices as numpy, callbacks."""

import threading

import numpy as np
import pytest

import nerve
from nerve import msgs


def test_loan_send_recv_reads_fields_in_place(node):
    sub = node.create_subscription(msgs.Imu, "/imu")
    pub = node.create_publisher(msgs.Imu, "/imu")
    m = pub.loan()
    m.linear_acceleration.z = 9.81
    m.orientation = {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}
    m.orientation_covariance = np.eye(3).reshape(-1)
    m.send()
    r = sub.recv(timeout=2.0)
    assert r.linear_acceleration.z == pytest.approx(9.81)
    assert r.orientation.w == 1.0
    assert r.orientation_covariance.tolist() == np.eye(3).reshape(-1).tolist()
    assert r._header.seq == 1
    assert r._header.stamp_ns <= nerve.mono_ns()


def test_publish_message_dict_and_fields(node):
    sub = node.create_subscription(msgs.CmdVel, "/cmd")
    pub = node.create_publisher(msgs.CmdVel, "/cmd")
    pub.publish(msgs.CmdVel(linear=1.0, angular=-1.0))
    pub.publish({"linear": 2.0})
    pub.publish(linear=3.0, stamp={"nanos": 7})
    got = [sub.recv(2.0) for _ in range(3)]
    assert [g.linear for g in got] == [1.0, 2.0, 3.0]
    assert got[0].angular == -1.0 and got[2].stamp.nanos == 7
    assert [g._header.seq for g in got] == [1, 2, 3]


def test_received_message_is_republished_as_a_copy(node):
    a = node.create_subscription(msgs.CmdVel, "/a")
    b = node.create_subscription(msgs.CmdVel, "/b")
    pa = node.create_publisher(msgs.CmdVel, "/a")
    pb = node.create_publisher(msgs.CmdVel, "/b")
    pa.publish(linear=4.5)
    pb.publish(a.recv(2.0))
    assert b.recv(2.0).linear == 4.5


def test_slices_are_numpy_views_written_in_place(node):
    sub = node.create_subscription(msgs.PointCloud, "/cloud")
    pub = node.create_publisher(msgs.PointCloud, "/cloud")
    n = 1 << 20
    m = pub.loan(n)
    assert m.data.shape == (n,) and m.data.dtype == np.uint8 and m.data.flags.writeable
    m.data[:] = np.arange(n, dtype=np.uint64).astype(np.uint8)
    m.width, m.height, m.header.frame_id = n // 16, 1, "lidar"
    m.send()
    r = sub.recv(2.0)
    assert r.header.frame_id == "lidar" and r.width == n // 16
    assert not r.data.flags.writeable
    assert int(r.data.astype(np.uint64).sum()) == int(np.arange(n, dtype=np.uint64).astype(np.uint8).astype(np.uint64).sum())
    assert np.frombuffer(r.data[:16].tobytes(), np.uint8).tolist() == list(range(16))


def test_laser_scan_ranges_and_image_data(node):
    ls = node.create_subscription(msgs.LaserScan, "/scan")
    lp = node.create_publisher(msgs.LaserScan, "/scan")
    lp.publish(msgs.LaserScan(ranges=np.linspace(0, 1, 360, dtype=np.float32), range_max=30.0))
    r = ls.recv(2.0)
    assert r.ranges.dtype == np.float32 and r.ranges.shape == (360,)
    assert r.ranges[-1] == 1.0 and r.range_max == 30.0
    ims = node.create_subscription(msgs.Image, "/img")
    imp = node.create_publisher(msgs.Image, "/img")
    img = imp.loan(4 * 3 * 3)
    img.data.reshape(4, 3, 3)[:] = 200
    img.encoding, img.height, img.width, img.step = "rgb8", 4, 3, 9
    img.send()
    r = ims.recv(2.0)
    assert r.encoding == "rgb8" and r.data.reshape(r.height, r.width, 3).mean() == 200


def test_topic_type_mismatch_names_both_types(node):
    held = node.create_publisher(msgs.CmdVel, "/typed")  # noqa: F841 (keeps the topic)
    with pytest.raises(nerve.TopicError, match="CmdVel") as e:
        node.create_subscription(msgs.Imu, "/typed")
    assert "Imu" in str(e.value)


def test_subscribe_with_the_topics_own_type(node):
    pub = node.create_publisher(msgs.BatteryState, "/battery")
    sub = node.create_subscription(None, "/battery")
    assert sub.message_class._type.name == "nerve_msgs/BatteryState"
    pub.publish(voltage=12.5)
    assert sub.recv(2.0).voltage == 12.5


def test_custom_type_from_schema_text(node):
    text = nerve.message_type(msgs.CmdVel).schema_text
    mt = nerve.MessageType.from_schema_text(text)
    assert mt == nerve.message_type(msgs.CmdVel)
    with pytest.raises(nerve.SchemaError):
        nerve.MessageType.from_schema_text(text.replace("linear", "lineal"))


def test_recv_timeout_try_recv_and_iteration(node):
    sub = node.create_subscription(msgs.CmdVel, "/it", qos=nerve.Qos(depth=16))
    pub = node.create_publisher(msgs.CmdVel, "/it")
    assert sub.try_recv() is None
    assert sub.recv(timeout=0.05) is None
    for i in range(5):
        pub.publish(linear=float(i))
    got = []
    for m in sub:
        got.append(m.linear)
        if len(got) == 5:
            break
    assert got == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_executor_runs_callbacks_and_timers(node):
    seen = []
    node.create_subscription(msgs.CmdVel, "/cb", callback=lambda m: seen.append(m.linear))
    pub = node.create_publisher(msgs.CmdVel, "/cb")
    ticks = []
    node.create_timer(0.01, lambda: ticks.append(nerve.mono_ns()))
    once = []
    node.create_timer(0.02, lambda: once.append(1), oneshot=True)
    ex = nerve.Executor()
    ex.add_node(node)
    pub.publish(linear=1.0)
    ex.spin_for(0.2)
    assert seen == [1.0]
    assert len(ticks) >= 5  # 20 periods passed; a loaded machine may skip some (counted)
    assert all(b > a for a, b in zip(ticks, ticks[1:]))
    assert once == [1]


def test_timers_keep_their_grid_and_count_skipped_ticks(node):
    for precise in (False, True):
        ticks = []
        t = node.create_timer(0.005, lambda: ticks.append(nerve.mono_ns()))
        start = t.next_ns - t.period_ns
        ex = nerve.Executor(precise_timers=precise)
        ex.add_node(node)
        ex.spin_for(0.2)
        node.destroy_timer(t)
        assert t.cancelled and t.next_ns is None
        # every deadline that passed fired or was skipped (counted), none early
        passed = (nerve.mono_ns() - start) // t.period_ns
        assert t.fired == len(ticks) and passed - 4 <= t.fired + t.skipped <= passed
        assert all(tick >= start + (i + 1) * t.period_ns for i, tick in enumerate(ticks))


def test_reliable_qos_delivers_everything(node):
    sub = node.create_subscription(msgs.CmdVel, "/rel", qos=nerve.Qos.reliable())
    pub = node.create_publisher(msgs.CmdVel, "/rel", qos=nerve.Qos.reliable())
    got = []

    for i in range(200):
        pub.publish(linear=float(i))
        m = sub.try_recv()
        if m is not None:
            got.append(m.linear)
    while (m := sub.try_recv()) is not None:
        got.append(m.linear)
    assert got == [float(i) for i in range(200)]
    assert sub.stats()["lost"] == 0


def test_fired_one_shot_timers_leave_their_node_and_reset_rearms(node):
    fired = []
    timers = [node.create_timer(0.001, lambda i=i: fired.append(i), oneshot=True) for i in range(50)]
    ex = nerve.Executor()
    ex.add_node(node)
    ex.spin_for(0.1)
    assert sorted(fired) == list(range(50))
    assert node._timers == []  # nothing piles up
    timers[0].reset()
    ex.spin_for(0.05)
    assert fired.count(0) == 2 and len(fired) == 51
    assert node._timers == []
