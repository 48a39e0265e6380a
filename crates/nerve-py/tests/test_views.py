"""Memory safety of views: arrays keep their sample alive, subscriber views are read-only,
nothing can write a sample after it is sent, release waits for the last view."""

import gc
import threading

import numpy as np
import pytest

import nerve
from nerve import msgs


def test_a_view_outlives_sample_subscriber_node_and_context(domain):
    ctx = nerve.Context(domain)
    node = ctx.node("views")
    sub = node.create_subscription(msgs.PointCloud, "/pc", qos=nerve.Qos(depth=2))
    other = nerve.Context(domain)  # a second context stands in for another process
    pnode = other.node("pub")
    pub = pnode.create_publisher(msgs.PointCloud, "/pc")
    pub.wait_for_subscribers(1, 2.0)
    m = pub.loan(4096)
    m.data[:] = 42
    m.send()
    view = sub.recv(2.0).data
    del sub, node, ctx
    gc.collect()
    # the publisher goes on: the held sample's memory must not be reused
    for i in range(50):
        m = pub.loan(4096)
        m.data[:] = i
        m.send()
    assert view.min() == 42 and view.max() == 42
    assert not view.flags.writeable
    with pytest.raises(ValueError):
        view.flags.writeable = True
    with pytest.raises(ValueError):
        view[0] = 1


def test_views_read_and_dropped_on_other_threads(node):
    sub = node.create_subscription(msgs.PointCloud, "/pc_threads", qos=nerve.Qos(depth=8))
    pub = node.create_publisher(msgs.PointCloud, "/pc_threads")
    views = []
    for i in range(4):
        m = pub.loan(1024)
        m.data[:] = i + 1
        m.send()
        views.append(sub.recv(2.0).data)
    sums = [None] * 4

    def work(k):
        sums[k] = int(views[k].astype(np.int64).sum())
        views[k] = None  # the last reference goes on this thread

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sums == [1024 * (k + 1) for k in range(4)]
    # samples dropped on other threads are given back on this one: receiving goes on
    for i in range(20):
        pub.publish_bytes(bytes(nerve.message_type(msgs.PointCloud).elems_offset))
        assert sub.recv(2.0) is not None


def test_many_messages_received_here_and_dropped_on_another_thread(node):
    sub = node.create_subscription(msgs.CmdVel, "/handoff", qos=nerve.Qos(depth=64, max_borrowed=64))
    pub = node.create_publisher(msgs.CmdVel, "/handoff")
    import queue
    q: "queue.Queue" = queue.Queue()
    total = []

    def consumer():
        s = 0.0
        while (m := q.get()) is not None:
            s += m.linear
        total.append(s)

    t = threading.Thread(target=consumer)
    t.start()
    for i in range(2000):
        pub.publish(linear=1.0)
        q.put(sub.recv(2.0))
    q.put(None)
    t.join()
    assert total == [2000.0]
    assert sub.recv(0.01) is None


def test_a_loan_with_live_views_is_not_sent(node):
    sub = node.create_subscription(msgs.PointCloud, "/loan_views")
    pub = node.create_publisher(msgs.PointCloud, "/loan_views")
    m = pub.loan(64)
    held = m.data
    with pytest.raises(ValueError, match="viewed by 1 numpy"):
        m.send()
    del held
    m.send()
    assert sub.recv(2.0) is not None


def test_writing_after_send_raises(node):
    pub = node.create_publisher(msgs.CmdVel, "/after_send")
    m = pub.loan()
    stamp = m.stamp  # a nested view, not memory: it reads through the closed buffer
    m.send()
    with pytest.raises(nerve.ClosedError):
        m.linear = 1.0
    with pytest.raises(nerve.ClosedError):
        stamp.nanos = 1
    with pytest.raises(nerve.ClosedError):
        m.send()


def test_another_publishers_loan_is_refused(node):
    a = node.create_publisher(msgs.CmdVel, "/loan_a")
    b = node.create_publisher(msgs.CmdVel, "/loan_b")
    m = a.loan()
    with pytest.raises(nerve.PublishError, match="another publisher"):
        b.send(m)


def test_release_waits_for_the_last_view(node):
    sub = node.create_subscription(msgs.PointCloud, "/release", qos=nerve.Qos(depth=4))
    pub = node.create_publisher(msgs.PointCloud, "/release")
    pub.publish(msgs.PointCloud(data=np.full(256, 5, np.uint8)))
    r = sub.recv(2.0)
    view = r.data
    assert r._release() is False  # deferred: a view lives
    assert view.sum() == 5 * 256
    del view
    with pytest.raises(nerve.ClosedError):
        r.data
    r2 = msgs.PointCloud(data=np.zeros(8, np.uint8))
    assert r2._release() is True
