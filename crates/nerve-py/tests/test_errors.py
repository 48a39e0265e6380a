"""Bad input gives exceptions with clear messages, never a crash."""

import threading

import numpy as np
import pytest

import nerve
from nerve import msgs


def test_wrong_field_types_and_ranges_name_the_field():
    m = msgs.BatteryState()
    with pytest.raises(TypeError, match="BatteryState.voltage"):
        m.voltage = "high"
    with pytest.raises(OverflowError, match="f32"):
        m.voltage = 1e300
    with pytest.raises(OverflowError, match="f32"):
        m.voltage = 1e39
    m.voltage = 3.4028235e38  # f32::MAX as printed: rounds to it, no overflow
    assert m.voltage == 3.4028234663852886e38
    c = msgs.PointCloud()
    with pytest.raises(OverflowError, match="PointCloud.is_dense"):
        c.is_dense = 256
    with pytest.raises(OverflowError):
        c.width = -1
    with pytest.raises(AttributeError, match="no field 'colour'"):
        c.colour = 1
    with pytest.raises(ValueError, match="frame_id"):
        c.header.frame_id = "x" * 100
    with pytest.raises(TypeError, match="no slice"):
        msgs.CmdVel(_elems=3)


def test_wrong_message_types_are_refused(node):
    pub = node.create_publisher(msgs.CmdVel, "/wrong")
    with pytest.raises(TypeError, match="cannot publish a Imu"):
        pub.publish(msgs.Imu())
    with pytest.raises(TypeError):
        pub.publish(42)
    with pytest.raises(nerve.PublishError, match="does not fit"):
        pub.publish_bytes(b"\x00" * 3)
    with pytest.raises(TypeError, match="unknown message type"):
        node.create_publisher("nerve_msgs/Nope", "/x")


def test_oversized_slices_are_refused(node):
    pub = node.create_publisher(msgs.PointCloud, "/big", qos=nerve.Qos(max_payload=1 << 16))
    with pytest.raises(nerve.LoanError, match="exceeds"):
        pub.loan(1 << 20)
    with pytest.raises(ValueError, match="a slice of -1"):
        pub.loan(-1)


def test_bad_arguments(node):
    with pytest.raises(ValueError, match="wait mode"):
        node.create_subscription(msgs.CmdVel, "/w", wait="sometimes")
    sub = node.create_subscription(msgs.CmdVel, "/w")
    with pytest.raises(ValueError, match="timeout"):
        sub.recv(timeout=-1)
    with pytest.raises(ValueError, match="timeout"):
        sub.recv(timeout=float("nan"))
    with pytest.raises(nerve.TopicError):
        node.create_publisher(msgs.CmdVel, "no leading slash")
    with pytest.raises(ValueError, match="depth"):
        nerve.Qos(depth=0)
    with pytest.raises(ValueError, match="period"):
        node.create_timer(0, lambda: None)
    with pytest.raises(nerve.ContextError):
        nerve.Context(5000)


def test_objects_are_bound_to_their_thread(node):
    pub = node.create_publisher(msgs.CmdVel, "/thread")
    errors = []

    def other():
        try:
            pub.publish(linear=1.0)
        except RuntimeError as e:
            errors.append(str(e))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert errors and "belongs to the thread" in errors[0]


def test_subscribing_to_a_missing_topic_without_type(node):
    with pytest.raises(nerve.TopicError):
        node.create_subscription(None, "/does/not/exist")


def test_closed_buffers_and_views():
    m = msgs.PointCloud(data=np.zeros(4, np.uint8))
    assert m._release()
    with pytest.raises(nerve.ClosedError):
        m.width
    with pytest.raises(nerve.ClosedError):
        m._bytes()


def test_closed_endpoints_raise_closed_error(node):
    from nerve import srv
    pub = node.create_publisher(msgs.CmdVel, "/closing")
    with node.create_subscription(msgs.CmdVel, "/closing") as sub:
        pub.publish(linear=1.0)
        assert sub.recv(2.0).linear == 1.0
    with pytest.raises(nerve.ClosedError, match="Subscription was closed"):
        sub.recv(0.1)
    pub.close()
    with pytest.raises(nerve.ClosedError, match="Publisher was closed"):
        pub.publish(linear=1.0)
    client = node.create_client(srv.AddTwoInts, "/closing_srv")
    client.close()
    with pytest.raises(nerve.ClosedError):
        client.call(a=1, b=2)
    server = node.create_service(srv.AddTwoInts, "/closing_srv", lambda r: {"value": 0})
    server.close()
    with pytest.raises(nerve.ClosedError):
        server.spin_once(0.01)


def test_an_executor_drops_closed_endpoints(node):
    from nerve import srv
    seen = []
    sub = node.create_subscription(msgs.CmdVel, "/gone", callback=seen.append)
    server = node.create_service(srv.AddTwoInts, "/gone_srv", lambda r: {"value": 0})
    sub.close()
    server.close()
    ex = nerve.Executor()
    ex.add_node(node)
    assert ex.spin_once(0.01) == 0
    assert node._subscriptions == [] and node._servers == []
