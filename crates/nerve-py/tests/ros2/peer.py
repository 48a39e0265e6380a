"""A real ROS 2 node (rclpy over Fast DDS) for the bridge tests, run with the ROS 2
virtual environment's python. One role per run; every line it prints is JSON.

  talker TOPIC TYPE COUNT [--rate HZ] [--latched] [--json VALUES]
  listener TOPIC TYPE COUNT [--timeout S] [--latched]
  graph SECONDS
  cloud TOPIC COUNT BYTES [--rate HZ]   (sensor_msgs/PointCloud2, data[i] = i % 251)
  server SERVICE TYPE SECONDS       (std_srvs SetBool/Trigger: answers success=data, message)
  client SERVICE TYPE JSON COUNT [--timeout S]
"""

import argparse
import importlib
import json
import sys
import time

import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy


def msg_type(name: str):
    pkg, kind, cls = name.split("/")
    return getattr(importlib.import_module(f"{pkg}.{kind}"), cls)


def to_json(m):
    """A message as plain JSON (arrays as lists, bytes as lists of ints)."""
    if hasattr(m, "get_fields_and_field_types"):
        return {f: to_json(getattr(m, f)) for f in m.get_fields_and_field_types()}
    if isinstance(m, (bytes, bytearray)):
        return list(m)
    if hasattr(m, "tolist"):
        return m.tolist()
    if isinstance(m, (list, tuple)):
        return [to_json(x) for x in m]
    return m


def elem_class(type_str: str):
    """The message class of a sequence or array field's elements (`sequence<pkg/Name>`)."""
    inner = type_str.split("<", 1)[1].split(",")[0].rstrip(">") if "<" in type_str else type_str.split("[")[0]
    pkg, cls = inner.split("/")
    return getattr(importlib.import_module(f"{pkg}.msg"), cls)


def from_json(cls, values):
    m = cls()
    types = m.get_fields_and_field_types()
    for k, v in values.items():
        cur = getattr(m, k)
        if hasattr(cur, "get_fields_and_field_types"):
            setattr(m, k, from_json(type(cur), v))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            setattr(m, k, [from_json(elem_class(types[k]), x) for x in v])
        elif isinstance(cur, (bytes, bytearray)) or (hasattr(cur, "dtype") and isinstance(v, list)):
            setattr(m, k, type(cur)(v) if isinstance(cur, (bytes, bytearray)) else v)
        else:
            setattr(m, k, v)
    return m


def qos(latched: bool) -> QoSProfile:
    q = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    if latched:
        q.durability = DurabilityPolicy.TRANSIENT_LOCAL
    return q


def out(**kw):
    print(json.dumps(kw), flush=True)


def talker(a):
    cls = msg_type(a.type)
    node = rclpy.create_node("ros2_talker")
    pub = node.create_publisher(cls, a.topic, qos(a.latched))
    values = json.loads(a.json) if a.json else {}
    out(event="ready")
    # wait for a matched subscription (the bridge's reader appears once Nerve listens)
    deadline = time.monotonic() + a.wait
    while not a.latched and pub.get_subscription_count() < a.subs and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    out(event="matched", subscriptions=pub.get_subscription_count())
    for i in range(a.count):
        v = dict(values)
        if "data" in v and isinstance(v["data"], str):
            v["data"] = f"{v['data']} {i}"
        pub.publish(from_json(cls, v))
        rclpy.spin_once(node, timeout_sec=1.0 / a.rate)
    if a.latched:
        # stay up for late joiners
        end = time.monotonic() + a.linger
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.1)
    out(event="done", sent=a.count)


def listener(a):
    cls = msg_type(a.type)
    node = rclpy.create_node("ros2_listener")
    got = []
    node.create_subscription(cls, a.topic, lambda m: got.append(m), qos(a.latched))
    out(event="ready")
    deadline = time.monotonic() + a.timeout
    while len(got) < a.count and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
        while got:
            out(event="msg", msg=to_json(got.pop(0)))
            a.count -= 1
    out(event="done")


def cloud(a):
    from sensor_msgs.msg import PointCloud2, PointField

    node = rclpy.create_node("ros2_cloud")
    pub = node.create_publisher(PointCloud2, a.topic, qos(False))
    m = PointCloud2()
    m.header.frame_id = "lidar"
    m.height, m.width = 1, a.bytes // 16
    m.fields = [PointField(name=n, offset=4 * i, datatype=7, count=1) for i, n in enumerate("xyzi")]
    m.point_step, m.row_step = 16, a.bytes
    m.data = bytes(i % 251 for i in range(a.bytes))
    out(event="ready")
    deadline = time.monotonic() + 20
    while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    for i in range(a.count):
        m.header.stamp.sec = i
        pub.publish(m)
        rclpy.spin_once(node, timeout_sec=1.0 / a.rate)
    out(event="done", sent=a.count)


def srv_type(name: str):
    pkg, _, cls = name.split("/")
    return getattr(importlib.import_module(f"{pkg}.srv"), cls)


def server(a):
    cls = srv_type(a.type)
    node = rclpy.create_node("ros2_server")
    calls = []

    def handle(req, resp):
        calls.append(to_json(req))
        if hasattr(resp, "success"):
            resp.success = bool(getattr(req, "data", True))
            resp.message = f"rclpy got {to_json(req)}"
        if hasattr(resp, "sum"):
            resp.sum = req.a + req.b
        out(event="call", request=to_json(req))
        return resp

    node.create_service(cls, a.service, handle)
    out(event="ready")
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    out(event="done", calls=len(calls))


def client(a):
    cls = srv_type(a.type)
    node = rclpy.create_node("ros2_client")
    cli = node.create_client(cls, a.service)
    out(event="ready")
    if not cli.wait_for_service(timeout_sec=a.timeout):
        out(event="no_service")
        return
    for _ in range(a.count):
        fut = cli.call_async(from_json(cls.Request, json.loads(a.json)))
        rclpy.spin_until_future_complete(node, fut, timeout_sec=a.timeout)
        if fut.done():
            out(event="response", response=to_json(fut.result()))
        else:
            out(event="timeout")
    out(event="done")


def graph(a):
    node = rclpy.create_node("ros2_graph")
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.1)
    out(
        event="graph",
        nodes=node.get_node_names(),
        topics={n: t for n, t in node.get_topic_names_and_types()},
    )


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="role", required=True)
    t = sub.add_parser("talker")
    t.add_argument("topic")
    t.add_argument("type")
    t.add_argument("count", type=int)
    t.add_argument("--rate", type=float, default=20.0)
    t.add_argument("--latched", action="store_true")
    t.add_argument("--json", default="")
    t.add_argument("--wait", type=float, default=20.0)
    t.add_argument("--subs", type=int, default=1, help="subscriptions to wait for")
    t.add_argument("--linger", type=float, default=20.0)
    t.set_defaults(run=talker)
    li = sub.add_parser("listener")
    li.add_argument("topic")
    li.add_argument("type")
    li.add_argument("count", type=int)
    li.add_argument("--timeout", type=float, default=30.0)
    li.add_argument("--latched", action="store_true")
    li.set_defaults(run=listener)
    c = sub.add_parser("cloud")
    c.add_argument("topic")
    c.add_argument("count", type=int)
    c.add_argument("bytes", type=int)
    c.add_argument("--rate", type=float, default=10.0)
    c.set_defaults(run=cloud)
    sv = sub.add_parser("server")
    sv.add_argument("service")
    sv.add_argument("type")
    sv.add_argument("seconds", type=float)
    sv.set_defaults(run=server)
    cl = sub.add_parser("client")
    cl.add_argument("service")
    cl.add_argument("type")
    cl.add_argument("json")
    cl.add_argument("count", type=int)
    cl.add_argument("--timeout", type=float, default=20.0)
    cl.set_defaults(run=client)
    g = sub.add_parser("graph")
    g.add_argument("seconds", type=float)
    g.set_defaults(run=graph)
    a = p.parse_args()
    rclpy.init()
    try:
        a.run(a)
    finally:
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
