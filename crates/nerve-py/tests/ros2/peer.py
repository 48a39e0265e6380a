"""A real ROS 2 node (rclpy over Fast DDS) for the bridge tests, run with the ROS 2
virtual environment's python. One role per run; every line it prints is JSON.

  talker TOPIC TYPE COUNT [--rate HZ] [--latched] [--json VALUES]
  listener TOPIC TYPE COUNT [--timeout S] [--latched]
  graph SECONDS
  sim_clock UNTIL_NS [--timeout S]   (a node with use_sim_time: its clock's readings until UNTIL_NS)
  cloud TOPIC COUNT BYTES [--rate HZ]   (sensor_msgs/PointCloud2, data[i] = i % 251)
  server SERVICE TYPE SECONDS       (std_srvs SetBool/Trigger: answers success=data, message)
  client SERVICE TYPE JSON COUNT [--timeout S]
  action_server NAME SECONDS [--step S] [--max-order N]   (test_msgs/action/Fibonacci)
  action_client NAME ORDER [--cancel-after N] [--timeout S] [--type T --goal JSON]
  nested_action_server NAME SECONDS [--feedbacks N] [--step S]   (test_msgs/action/NestedMessage)
  lifecycle_client NODE GO_FILE STEP... [--events N]   (lifecycle_msgs services, as `ros2 lifecycle` calls them)
  lifecycle_node NAME SECONDS         (an rclpy.lifecycle.LifecycleNode; says when its callbacks run)
  fixtures                            (test_msgs' own message and service fixtures, in Nerve's JSON)
  fixture_talker PREFIX SECONDS       (every message fixture i of type T on PREFIX_T_i, repeatedly)
  fixture_listener PREFIX [--timeout S]  (compares what arrives on PREFIX_T_i with fixture i by ==)
  fixture_server PREFIX SECONDS       (serves PREFIX_T for each service fixture type T)
  fixture_client PREFIX [--timeout S] (calls PREFIX_T with each fixture's request, compares by ==)
"""

import argparse
import importlib
import json
import struct
import sys
import time

import rclpy
from fixture_json import FLOAT32, differences
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


def cloud_listener(a):
    """Counts sensor_msgs/PointCloud2 messages of `bytes` data bytes (reliable, keep last
    10) until `count` distinct header stamps arrived or the timeout."""
    from sensor_msgs.msg import PointCloud2

    node = rclpy.create_node("ros2_cloud_listener")
    stamps = set()
    wrong = [0]

    def on_cloud(m):
        if len(m.data) != a.bytes:
            wrong[0] += 1
            return
        stamps.add((m.header.stamp.sec, m.header.stamp.nanosec))

    node.create_subscription(PointCloud2, a.topic, on_cloud, qos(False))
    out(event="ready")
    deadline = time.monotonic() + a.timeout
    while len(stamps) < a.count and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    out(event="done", received=len(stamps), wrong_size=wrong[0])


def srv_type(name: str):
    pkg, _, cls = name.split("/")
    return getattr(importlib.import_module(f"{pkg}.srv"), cls)


def server(a):
    cls = srv_type(a.type)
    node = rclpy.create_node("ros2_server")
    calls = []

    def handle(req, resp):
        calls.append(to_json(req))
        out(event="call", request=to_json(req))
        if a.hang:
            # never answers: the test ends this node mid-call
            while True:
                time.sleep(1)
        if hasattr(resp, "success"):
            resp.success = bool(getattr(req, "data", True))
            resp.message = f"rclpy got {to_json(req)}"
        if hasattr(resp, "sum"):
            resp.sum = req.a + req.b
        # a response with the request's fields (test_msgs/srv/BasicTypes) echoes them,
        # the strings and the 64-bit integers told apart by a change
        same = set(resp.get_fields_and_field_types()) & set(req.get_fields_and_field_types())
        for f in same:
            setattr(resp, f, getattr(req, f))
        if "string_value" in same:
            resp.string_value = req.string_value + " back"
        if "uint64_value" in same:
            resp.uint64_value = req.uint64_value - 1
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


def sim_clock(a):
    from rclpy.parameter import Parameter

    node = rclpy.create_node("ros2_sim_clock", parameter_overrides=[Parameter("use_sim_time", value=True)])
    out(event="ready")
    last = None
    deadline = time.monotonic() + a.timeout
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
        ns = node.get_clock().now().nanoseconds
        if ns != last:
            out(event="now", ns=ns)
            last = ns
        if ns >= a.until_ns:
            break
    out(event="done", ns=last)


def plain(v):
    """A parameter value as JSON (arrays as lists)."""
    if isinstance(v, (str, bytes)):
        return list(v) if isinstance(v, bytes) else v
    return [plain(x) for x in v] if hasattr(v, "__iter__") else v


def param_node(a):
    """A node with parameters: speed=1.5, name='robot', enabled=True, gains=[1, 2, 3]."""
    node = rclpy.create_node(a.name)
    node.declare_parameter("speed", 1.5)
    node.declare_parameter("name", "robot")
    node.declare_parameter("enabled", True)
    node.declare_parameter("gains", [1, 2, 3])
    if a.hang:
        def hang(params):
            # never answers a set: the test ends this node mid-call
            out(event="set_called")
            while True:
                time.sleep(1)

        node.add_on_set_parameters_callback(hang)
    out(event="ready", node=node.get_fully_qualified_name())
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    out(event="done", values={n: plain(node.get_parameter(n).value) for n in ("speed", "name", "enabled", "gains")})


def param_client(a):
    """get NAME..., set NAME JSON [NAME JSON...] [--atomic], list, describe NAME...,
    types NAME... on NODE's parameters with rclpy's AsyncParameterClient."""
    from rclpy.parameter import Parameter, parameter_value_to_python
    from rclpy.parameter_client import AsyncParameterClient

    node = rclpy.create_node("param_client")
    cli = AsyncParameterClient(node, a.node)
    if not cli.wait_for_services(timeout_sec=a.timeout):
        out(event="no_service")
        return
    args = a.args
    if a.op == "get":
        fut = cli.get_parameters(args)
    elif a.op == "set":
        params = [Parameter(args[i], value=json.loads(args[i + 1])) for i in range(0, len(args), 2)]
        fut = cli.set_parameters_atomically(params) if a.atomic else cli.set_parameters(params)
    elif a.op == "list":
        fut = cli.list_parameters(args)
    elif a.op == "describe":
        fut = cli.describe_parameters(args)
    else:
        fut = cli.get_parameter_types(args)
    rclpy.spin_until_future_complete(node, fut, timeout_sec=a.timeout)
    if not fut.done():
        out(event="timeout")
        return
    r = fut.result()
    if a.op == "get":
        out(event="response", values=[plain(parameter_value_to_python(v)) for v in r.values],
            types=[v.type for v in r.values])
    elif a.op == "set":
        results = [r.result] if a.atomic else r.results
        out(event="response", results=[{"successful": x.successful, "reason": x.reason} for x in results])
    elif a.op == "list":
        out(event="response", names=list(r.result.names), prefixes=list(r.result.prefixes))
    elif a.op == "describe":
        out(event="response", descriptors=[to_json(d) for d in r.descriptors])
    else:
        out(event="response", types=list(r.types))



def action_server(a):
    """Serves test_msgs/action/Fibonacci on NAME: feedback each step, cancels accepted."""
    from rclpy.action import ActionServer, CancelResponse, GoalResponse
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.executors import MultiThreadedExecutor
    from test_msgs.action import Fibonacci

    node = rclpy.create_node("ros2_action_server")

    def result(seq):
        r = Fibonacci.Result()
        r.sequence = seq
        return r

    def execute(gh):
        order = gh.request.order
        out(event="goal", order=order)
        seq = [0, 1]
        fb = Fibonacci.Feedback()
        while len(seq) <= order:
            if gh.is_cancel_requested:
                gh.canceled()
                out(event="canceled", sequence=seq)
                return result(seq)
            seq.append(seq[-1] + seq[-2])
            fb.sequence = seq
            gh.publish_feedback(fb)
            time.sleep(a.step)
        gh.succeed()
        out(event="succeeded", sequence=seq[: order + 1])
        return result(seq[: order + 1])

    def on_goal(req):
        ok = req.order <= a.max_order
        out(event="goal_request", order=req.order, accepted=ok)
        return GoalResponse.ACCEPT if ok else GoalResponse.REJECT

    def on_cancel(_gh):
        out(event="cancel_request")
        return CancelResponse.ACCEPT

    ActionServer(node, Fibonacci, a.name, execute, callback_group=ReentrantCallbackGroup(),
                 goal_callback=on_goal, cancel_callback=on_cancel)
    ex = MultiThreadedExecutor()
    ex.add_node(node)
    out(event="ready")
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        ex.spin_once(timeout_sec=0.05)
    out(event="done")


def action_client(a):
    """Sends one test_msgs/action/Fibonacci goal to NAME; prints accepted, feedback,
    cancel (after N feedbacks with --cancel-after), result and the goal's statuses. With
    --type (another action type) and --goal (its goal as JSON), feedback and result are
    printed whole."""
    from action_msgs.msg import GoalStatusArray
    from rclpy.action import ActionClient
    from test_msgs.action import Fibonacci

    cls = Fibonacci if a.type is None else msg_type(a.type)
    node = rclpy.create_node("ros2_action_client")
    cli = ActionClient(node, cls, a.name)
    seen = []
    node.create_subscription(
        GoalStatusArray, a.name + "/_action/status",
        lambda m: seen.extend((bytes(s.goal_info.goal_id.uuid), s.status) for s in m.status_list),
        QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                   durability=DurabilityPolicy.TRANSIENT_LOCAL))
    out(event="ready")
    if not cli.wait_for_server(timeout_sec=a.timeout):
        out(event="no_server")
        return
    feedback = []

    def on_feedback(m):
        if a.type is None:
            feedback.append(list(m.feedback.sequence))
            out(event="feedback", sequence=feedback[-1])
        else:
            feedback.append(to_json(m.feedback))
            out(event="feedback", feedback=feedback[-1])

    goal = Fibonacci.Goal(order=a.order) if a.type is None else from_json(cls.Goal, json.loads(a.goal))
    fut = cli.send_goal_async(goal, feedback_callback=on_feedback)
    rclpy.spin_until_future_complete(node, fut, timeout_sec=a.timeout)
    gh = fut.result() if fut.done() else None
    if gh is None:
        out(event="timeout", what="send_goal")
        return
    out(event="accepted" if gh.accepted else "rejected")
    if not gh.accepted:
        out(event="done")
        return
    res = gh.get_result_async()
    canceled = False
    deadline = time.monotonic() + a.timeout
    while not res.done() and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
        if a.cancel_after is not None and not canceled and len(feedback) >= a.cancel_after:
            canceled = True
            cf = gh.cancel_goal_async()
            rclpy.spin_until_future_complete(node, cf, timeout_sec=a.timeout)
            r = cf.result() if cf.done() else None
            out(event="cancel", return_code=None if r is None else r.return_code,
                canceling=0 if r is None else len(r.goals_canceling))
    if res.done():
        r = res.result()
        if a.type is None:
            out(event="result", status=r.status, sequence=list(r.result.sequence))
        else:
            out(event="result", status=r.status, result=to_json(r.result))
    else:
        out(event="timeout", what="result")
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    mine = bytes(gh.goal_id.uuid)
    statuses = []
    for uuid, st in seen:
        if uuid == mine and (not statuses or statuses[-1] != st):
            statuses.append(st)
    out(event="statuses", statuses=statuses)
    out(event="done")


def nested_action_server(a):
    """Serves test_msgs/action/NestedMessage on NAME, as ROS 2's own action test server
    (system_tests test_communication) does: N feedbacks, each the goal's fields with
    nested_field.int32_value counting up from the goal's, then the goal's fields as the
    result; cancels accepted (the result then counts the feedbacks sent)."""
    import copy

    from rclpy.action import ActionServer, CancelResponse, GoalResponse
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.executors import MultiThreadedExecutor
    from test_msgs.action import NestedMessage

    node = rclpy.create_node("ros2_nested_action_server")

    def echo(cls, g):
        m = cls()
        m.nested_field_no_pkg = copy.deepcopy(g.nested_field_no_pkg)
        m.nested_field = copy.deepcopy(g.nested_field)
        m.nested_different_pkg = copy.deepcopy(g.nested_different_pkg)
        return m

    def execute(gh):
        g = gh.request
        out(event="goal", goal=to_json(g))
        for i in range(a.feedbacks):
            if gh.is_cancel_requested:
                gh.canceled()
                r = echo(NestedMessage.Result, g)
                r.nested_field.int32_value = i
                out(event="canceled", result=to_json(r))
                return r
            fb = echo(NestedMessage.Feedback, g)
            fb.nested_field.int32_value = g.nested_field.int32_value + i
            gh.publish_feedback(fb)
            time.sleep(a.step)
        gh.succeed()
        r = echo(NestedMessage.Result, g)
        out(event="succeeded", result=to_json(r))
        return r

    def on_goal(_req):
        return GoalResponse.ACCEPT

    def on_cancel(_gh):
        out(event="cancel_request")
        return CancelResponse.ACCEPT

    ActionServer(node, NestedMessage, a.name, execute, callback_group=ReentrantCallbackGroup(),
                 goal_callback=on_goal, cancel_callback=on_cancel)
    ex = MultiThreadedExecutor()
    ex.add_node(node)
    out(event="ready")
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        ex.spin_once(timeout_sec=0.05)
    out(event="done")


def lifecycle_client(a):
    """Drives NODE's lifecycle with lifecycle_msgs services and watches
    NODE/transition_event. Once its services answer and the events' publisher is matched
    it prints `ready` and waits for GO_FILE (the test's barrier), then runs each STEP:
    `get` (GetState), `transitions` (GetAvailableTransitions), `states`
    (GetAvailableStates), `LABEL` (as `ros2 lifecycle set`: the transition found by label
    among the available ones, sent with its id and label), `force:LABEL:ID` (sent as is,
    valid or not) or `send:LABEL:ID` (sent without waiting for an answer). Then it waits
    for N transition events (a hang guard only)."""
    import os

    from lifecycle_msgs.msg import Transition, TransitionEvent
    from lifecycle_msgs.srv import ChangeState, GetAvailableStates, GetAvailableTransitions, GetState

    node = rclpy.create_node("ros2_lifecycle_client")
    events = []
    sub = node.create_subscription(TransitionEvent, a.node + "/transition_event", events.append,
                                   QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE))
    clients = {
        "change": node.create_client(ChangeState, a.node + "/change_state"),
        "get": node.create_client(GetState, a.node + "/get_state"),
        "transitions": node.create_client(GetAvailableTransitions, a.node + "/get_available_transitions"),
        "states": node.create_client(GetAvailableStates, a.node + "/get_available_states"),
    }
    for name, cli in clients.items():
        if not cli.wait_for_service(timeout_sec=a.timeout):
            out(event="no_service", service=name)
            return
    deadline = time.monotonic() + a.timeout
    while sub.get_publisher_count() == 0 and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    out(event="ready", publishers=sub.get_publisher_count())
    while not os.path.exists(a.go_file) and time.monotonic() < deadline + a.timeout:
        rclpy.spin_once(node, timeout_sec=0.05)

    def call(cli, req):
        fut = cli.call_async(req)
        rclpy.spin_until_future_complete(node, fut, timeout_sec=a.timeout)
        if not fut.done():
            out(event="timeout")
            raise SystemExit(1)
        return fut.result()

    for step in a.steps:
        if step == "get":
            r = call(clients["get"], GetState.Request())
            out(event="state", id=r.current_state.id, label=r.current_state.label)
        elif step == "transitions":
            r = call(clients["transitions"], GetAvailableTransitions.Request())
            out(event="transitions", transitions=to_json(r.available_transitions))
        elif step == "states":
            r = call(clients["states"], GetAvailableStates.Request())
            out(event="states", states=to_json(r.available_states))
        elif step.startswith("send:"):
            _, label, tid = step.split(":")
            clients["change"].call_async(ChangeState.Request(transition=Transition(id=int(tid), label=label)))
            out(event="sent", label=label, id=int(tid))
        else:
            if step.startswith("force:"):
                _, label, tid = step.split(":")
                t = Transition(id=int(tid), label=label)
            else:
                avail = call(clients["transitions"], GetAvailableTransitions.Request())
                found = [d.transition for d in avail.available_transitions if d.transition.label == step]
                if not found:
                    out(event="unknown_transition", label=step)
                    continue
                t = found[0]
            r = call(clients["change"], ChangeState.Request(transition=t))
            out(event="changed", label=t.label, id=t.id, success=r.success)
    deadline = time.monotonic() + a.timeout
    seen = 0
    while seen < a.events and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
        while events:
            out(event="transition_event", msg=to_json(events.pop(0)))
            seen += 1
    out(event="done", events=seen)


def lifecycle_node(a):
    """An rclpy LifecycleNode named NAME whose callbacks print what ran (and succeed)."""
    from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn

    class Managed(LifecycleNode):
        def _hook(self, hook, state):
            out(event="callback", hook=hook, state=state.label)
            return TransitionCallbackReturn.SUCCESS

        def on_configure(self, state):
            return self._hook("configure", state)

        def on_activate(self, state):
            return self._hook("activate", state)

        def on_deactivate(self, state):
            return self._hook("deactivate", state)

        def on_cleanup(self, state):
            return self._hook("cleanup", state)

        def on_shutdown(self, state):
            return self._hook("shutdown", state)

    node = Managed(a.name)
    out(event="ready", node=node.get_fully_qualified_name())
    events_topic = node.get_fully_qualified_name() + "/transition_event"
    told = False
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
        if not told and node.count_subscribers(events_topic) > 0:
            told = True
            out(event="event_subscribers", count=node.count_subscribers(events_topic))
    out(event="done", state=node._state_machine.current_state[1])


def _base_type(type_str: str) -> str:
    """A field's element type: `sequence<float, 3>`, `float[3]` and `float` are `float`."""
    if type_str.startswith("sequence<"):
        type_str = type_str[len("sequence<"):-1].split(",")[0].strip()
    return type_str.split("[")[0]


def _scalar_json(v, base: str):
    if hasattr(v, "get_fields_and_field_types"):
        return nerve_json(v)
    if base == "octet":
        return v[0]  # rclpy holds a byte as a bytes object of length 1
    if base == "float":
        # the float32 it is on the wire, tagged: equal to what arrives when equal as float32
        return {FLOAT32: struct.unpack("<f", struct.pack("<f", v))[0]}
    return v.item() if hasattr(v, "item") else v


def nerve_json(m):
    """A message in the JSON mapping of Nerve's ROS 2 types (`nerve_ros2_types::json`):
    structs as objects, bytes and chars as numbers; each float32 value is an object
    {"__float32__": its exact value} (a test compares it as float32 and sends the value);
    NaN and the infinities stay Python floats (json writes them as NaN, Infinity)."""
    out = {}
    for f, t in m.get_fields_and_field_types().items():
        v, base = getattr(m, f), _base_type(t)
        container = t.startswith("sequence<") or t.endswith("]")
        out[f] = [_scalar_json(x, base) for x in v] if container else _scalar_json(v, base)
    return out


def differing_fields(got, want) -> list:
    """The top-level fields in which two messages of one type differ."""
    g, w = nerve_json(got), nerve_json(want)
    return [f for f in w if differences(g.get(f), w[f])]


def message_fixtures(only=None) -> dict:
    """test_msgs' message fixtures (`get_test_msg`), by type name, for every message type
    of the installed test_msgs that has some (or the `only` ones)."""
    from test_msgs import message_fixtures as fixtures
    from test_msgs import msg

    out = {}
    for name in sorted(n for n in dir(msg) if n[:1].isupper()):
        if only and name not in only:
            continue
        try:
            out[name] = fixtures.get_test_msg(name)
        except NotImplementedError:
            continue
    return out


def service_fixtures(only=None) -> dict:
    """test_msgs' service fixtures (`get_test_srv`: (request, response) pairs) by type name."""
    from test_msgs import service_fixtures as fixtures
    from test_msgs import srv

    out = {}
    for name in sorted(n for n in dir(srv) if n[:1].isupper()):
        if only and name not in only:
            continue
        try:
            out[name] = fixtures.get_test_srv(name)
        except NotImplementedError:
            continue
    return out


def fixtures(a):
    """Prints the fixtures in Nerve's JSON: messages as {type: [message...]}, services as
    {type: [[request, response]...]}."""
    out(event="fixtures",
        messages={t: [nerve_json(m) for m in ms] for t, ms in message_fixtures(a.only).items()},
        services={t: [[nerve_json(q), nerve_json(r)] for q, r in ps]
                  for t, ps in service_fixtures(a.only).items()})


def fixture_talker(a):
    """Publishes message fixture i of type T on PREFIX_T_i, all of them every 1/RATE s."""
    node = rclpy.create_node("ros2_fixture_talker")
    pubs = []
    for t, msgs in message_fixtures(a.only).items():
        cls = msg_type(f"test_msgs/msg/{t}")
        for i, m in enumerate(msgs):
            pubs.append((node.create_publisher(cls, f"{a.prefix}_{t}_{i}", qos(False)), m))
    out(event="ready", topics=len(pubs))
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        for pub, m in pubs:
            pub.publish(m)
        rclpy.spin_once(node, timeout_sec=1.0 / a.rate)
    out(event="done")


def fixture_listener(a):
    """Takes the first message on each PREFIX_T_i and compares it with fixture i of T by
    `==`: one `fixture` event each (the fields that differ where it is not equal), then
    `done` naming the topics that got nothing."""
    node = rclpy.create_node("ros2_fixture_listener")
    want = {}
    got = {}
    for t, msgs in message_fixtures(a.only).items():
        cls = msg_type(f"test_msgs/msg/{t}")
        for i, m in enumerate(msgs):
            want[(t, i)] = m
            node.create_subscription(cls, f"{a.prefix}_{t}_{i}",
                                     lambda r, k=(t, i): got.setdefault(k, r), qos(False))
    out(event="ready", topics=len(want))
    reported = set()
    deadline = time.monotonic() + a.timeout
    while len(reported) < len(want) and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
        for k in [k for k in got if k not in reported]:
            reported.add(k)
            equal = got[k] == want[k]
            out(event="fixture", type=k[0], index=k[1], equal=equal,
                fields=[] if equal else differing_fields(got[k], want[k]))
    out(event="done", missing=[f"{t}_{i}" for t, i in want if (t, i) not in reported])


def fixture_server(a):
    """Serves PREFIX_T for each service fixture type T: a request equal (`==`) to fixture
    i's is answered with fixture i's response; each call is a `call` event with the index
    it matched (None: matched none, with the fields that differ from each request)."""
    node = rclpy.create_node("ros2_fixture_server")
    for t, pairs in service_fixtures(a.only).items():
        cls = srv_type(f"test_msgs/srv/{t}")

        def handle(req, resp, t=t, pairs=pairs):
            for i, (q, r) in enumerate(pairs):
                if req == q:
                    out(event="call", type=t, index=i)
                    return r
            out(event="call", type=t, index=None,
                fields=[differing_fields(req, q) for q, _ in pairs])
            return resp

        node.create_service(cls, f"{a.prefix}_{t}", handle)
    out(event="ready")
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    out(event="done")


def fixture_client(a):
    """Calls PREFIX_T with each fixture request of each service type T and compares the
    response with the fixture's by `==`: one `fixture` event each."""
    node = rclpy.create_node("ros2_fixture_client")
    out(event="ready")
    for t, pairs in service_fixtures(a.only).items():
        cli = node.create_client(srv_type(f"test_msgs/srv/{t}"), f"{a.prefix}_{t}")
        if not cli.wait_for_service(timeout_sec=a.timeout):
            out(event="no_service", type=t)
            continue
        for i, (q, r) in enumerate(pairs):
            fut = cli.call_async(q)
            rclpy.spin_until_future_complete(node, fut, timeout_sec=a.timeout)
            if not fut.done():
                out(event="fixture", type=t, index=i, equal=False, fields=["(no response)"])
                continue
            equal = fut.result() == r
            out(event="fixture", type=t, index=i, equal=equal,
                fields=[] if equal else differing_fields(fut.result(), r))
    out(event="done")


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
    cli = sub.add_parser("cloud_listener")
    cli.add_argument("topic")
    cli.add_argument("count", type=int)
    cli.add_argument("bytes", type=int)
    cli.add_argument("--timeout", type=float, default=60.0)
    cli.set_defaults(run=cloud_listener)
    sv = sub.add_parser("server")
    sv.add_argument("service")
    sv.add_argument("type")
    sv.add_argument("seconds", type=float)
    sv.add_argument("--hang", action="store_true", help="never answer")
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
    sc = sub.add_parser("sim_clock")
    sc.add_argument("until_ns", type=int)
    sc.add_argument("--timeout", type=float, default=30.0)
    sc.set_defaults(run=sim_clock)
    pn = sub.add_parser("param_node")
    pn.add_argument("seconds", type=float)
    pn.add_argument("--name", default="param_node")
    pn.add_argument("--hang", action="store_true", help="never answer a set")
    pn.set_defaults(run=param_node)
    pc = sub.add_parser("param_client")
    pc.add_argument("node")
    pc.add_argument("op", choices=["get", "set", "list", "describe", "types"])
    pc.add_argument("args", nargs="*")
    pc.add_argument("--atomic", action="store_true")
    pc.add_argument("--timeout", type=float, default=20.0)
    pc.set_defaults(run=param_client)
    asv = sub.add_parser("action_server")
    asv.add_argument("name")
    asv.add_argument("seconds", type=float)
    asv.add_argument("--step", type=float, default=0.05, help="seconds per feedback")
    asv.add_argument("--max-order", type=int, default=40, help="larger orders are rejected")
    asv.set_defaults(run=action_server)
    acl = sub.add_parser("action_client")
    acl.add_argument("name")
    acl.add_argument("order", type=int)
    acl.add_argument("--cancel-after", type=int, default=None, help="feedbacks before a cancel")
    acl.add_argument("--timeout", type=float, default=30.0)
    acl.add_argument("--type", default=None, help="another action type (pkg/action/Name)")
    acl.add_argument("--goal", default="{}", help="its goal as JSON (with --type)")
    acl.set_defaults(run=action_client)
    nas = sub.add_parser("nested_action_server")
    nas.add_argument("name")
    nas.add_argument("seconds", type=float)
    nas.add_argument("--feedbacks", type=int, default=3)
    nas.add_argument("--step", type=float, default=0.05, help="seconds per feedback")
    nas.set_defaults(run=nested_action_server)
    lc = sub.add_parser("lifecycle_client")
    lc.add_argument("node")
    lc.add_argument("go_file")
    lc.add_argument("steps", nargs="*")
    lc.add_argument("--events", type=int, default=0, help="transition events to wait for")
    lc.add_argument("--timeout", type=float, default=30.0)
    lc.set_defaults(run=lifecycle_client)
    ln = sub.add_parser("lifecycle_node")
    ln.add_argument("name")
    ln.add_argument("seconds", type=float)
    ln.set_defaults(run=lifecycle_node)
    fx = sub.add_parser("fixtures")
    fx.set_defaults(run=fixtures)
    ft = sub.add_parser("fixture_talker")
    ft.add_argument("prefix")
    ft.add_argument("seconds", type=float)
    ft.add_argument("--rate", type=float, default=5.0)
    ft.set_defaults(run=fixture_talker)
    fl = sub.add_parser("fixture_listener")
    fl.add_argument("prefix")
    fl.add_argument("--timeout", type=float, default=60.0)
    fl.set_defaults(run=fixture_listener)
    fs = sub.add_parser("fixture_server")
    fs.add_argument("prefix")
    fs.add_argument("seconds", type=float)
    fs.set_defaults(run=fixture_server)
    fc = sub.add_parser("fixture_client")
    fc.add_argument("prefix")
    fc.add_argument("--timeout", type=float, default=20.0)
    fc.set_defaults(run=fixture_client)
    for f in (fx, ft, fl, fs, fc):
        f.add_argument("--only", nargs="*", default=None, help="these test_msgs types only")
    a = p.parse_args()
    rclpy.init()
    try:
        a.run(a)
    finally:
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
