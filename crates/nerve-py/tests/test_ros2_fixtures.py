"""ROS 2's own fixtures through `nerve bridge ros2`, both ways, on every ROS 2 distribution
of the harness: the test_msgs package's `message_fixtures.get_test_msg` and
`service_fixtures.get_test_srv`, the messages and calls of ROS 2's communication tests.

- rclpy -> Nerve: every message fixture i of type T is published on `/fx_T_i` by rclpy and
  read in Nerve with the Python API, field by field equal to the fixture (float32 values
  as float32, NaN equal to NaN);
- Nerve -> rclpy: `nerve topic pub` publishes each fixture (its JSON from standard input:
  the largest is 354 KB, past what Linux allows one argument) and rclpy compares what
  arrives with the fixture by `==`, naming the index and fields that differ;
- services: `nerve service call` calls an rclpy server with each fixture request (the
  server matches it by `==` and answers with the fixture response), and an rclpy client
  calls a Python Nerve server, which answers each fixture request with its response.

The fixtures come from the distribution's own test_msgs (peer.py `fixtures`), so a type
added to test_msgs is tested without a change here. What cannot cross yet is an xfail
naming the limitation."""

import json
import time

import numpy as np
import pytest

import nerve
from ros2.fixture_json import differences, plain


def load_fixtures(ros2):
    """The distribution's fixtures: (messages {T: [json]}, services {T: [[req, resp]]})."""
    p = ros2.peer("fixtures", name="fixtures")
    assert p.wait(120) == 0, p.err
    (ev,) = p.json_events("fixtures")
    return ev["messages"], ev["services"]


def py_value(v):
    """A value of `Message._ros2()` as plain Python (numpy arrays as lists)."""
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, dict):
        return {k: py_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [py_value(x) for x in v]
    return v


NO_RESPONSE = "(no response)"  # peer.py fixture_client's word for a call that got none


def panicked(proc):
    return any("panicked at" in l for l in proc.err)


def fixture_topics(messages):
    return {f"/fx_{t}_{i}": (t, i) for t, ms in messages.items() for i in range(len(ms))}


def keyed(ros2, t):
    """Whether test_msgs type `t` has `@key` members (Kilted's KeyedLong, KeyedString,
    ComplexNestedKey): a keyed DDS topic."""
    idl = ros2.share / "test_msgs" / "msg" / f"{t}.idl"
    return "@key" in idl.read_text()


def idl_only(ros2, t):
    """Whether test_msgs type `t` is defined in IDL only (no .msg): Kilted's keyed types and
    NonKeyedWithNestedKey, which holds one."""
    return not (ros2.share / "test_msgs" / "msg" / f"{t}.msg").exists()


def with_msg(ros2, messages):
    """The message types with a .msg definition, which `nerve topic pub` takes."""
    return sorted(t for t in messages if not idl_only(ros2, t))


def not_keyed(ros2, messages):
    """The message types of the main rclpy -> Nerve test: all but the keyed ones (keyed DDS
    topics, tested on their own)."""
    return sorted(t for t in messages if not keyed(ros2, t))


def rclpy_to_nerve(ros2, domain, messages, types, guard=120):
    """rclpy publishes the fixtures of `types`; Nerve reads each topic's first message.
    Returns ({topic: differences ([] where equal)}, the topics that got nothing within
    `guard` seconds (a hang guard), the bridge)."""
    messages = {t: messages[t] for t in types}
    bridge = ros2.bridge()
    talker = ros2.peer("fixture_talker", "/fx", 300, "--rate", "2", "--only", *types)
    node = nerve.Context(domain).node("fixture_reader")
    topics = fixture_topics(messages)
    subs, result = {}, {}
    deadline = time.monotonic() + guard
    while len(result) < len(topics) and time.monotonic() < deadline:
        for topic in topics:
            if topic in subs:
                continue
            try:
                # the topic's own type: the bridge's carrier of the ROS 2 type
                subs[topic] = node.create_subscription(None, topic)
            except nerve.NerveError:
                pass  # not bridged yet
        for topic, sub in subs.items():
            if topic in result:
                # the first message is the one compared, later ones are read on: a full
                # queue holds the bridge's reliable publisher (back-pressure, a second a
                # sample), and with it the bridge's other ROS 2 -> Nerve topics
                while sub.recv(timeout=0) is not None:
                    pass
                continue
            m = sub.recv(timeout=0.01)
            if m is not None:
                t, i = topics[topic]
                result[topic] = differences(py_value(m._ros2()), messages[t][i])
        time.sleep(0.05)
    talker.stop()
    return result, sorted(set(topics) - set(result)), bridge


def nerve_to_rclpy(ros2, messages, types, guard=150, ament=True):
    """`nerve topic pub` publishes the fixtures of `types` (JSON on stdin; the definitions
    from `ament`, see Ros2.nerve); rclpy compares what arrives with them. Returns (fixture
    events, the topics that got nothing within `guard` seconds (a hang guard), the
    publishers, the bridge)."""
    messages = {t: messages[t] for t in types}
    bridge = ros2.bridge()
    listener = ros2.peer("fixture_listener", "/fx", "--timeout", guard, "--only", *types)
    listener.wait_line(lambda l: '"ready"' in l, timeout=60)
    pubs = [
        ros2.nerve("topic", "pub", topic, f"test_msgs/msg/{t}", "-", "--rate", "2",
                   "--qos", "reliable", name=f"pub {topic}", ament=ament,
                   stdin=json.dumps(plain(messages[t][i])))
        for topic, (t, i) in fixture_topics(messages).items()
    ]
    # until the listener is done, or every publisher has given up (refused its message)
    deadline = time.monotonic() + guard + 60
    while (not listener.json_events("done") and time.monotonic() < deadline
           and any(p.p.poll() is None for p in pubs)):
        time.sleep(0.1)
    for p in pubs:
        p.stop()
    listener.stop()
    events = listener.json_events("fixture")
    seen = {f"/fx_{e['type']}_{e['index']}" for e in events}
    return events, sorted(set(fixture_topics(messages)) - seen), pubs, bridge


@pytest.mark.every_ros2_distro
def test_every_test_msgs_message_fixture_reaches_nerve_field_by_field(ros2, domain):
    messages, _ = load_fixtures(ros2)
    types = not_keyed(ros2, messages)
    result, missing, bridge = rclpy_to_nerve(ros2, domain, messages, types)
    assert not missing, (missing, bridge.err[-10:])
    bad = {topic: d[:5] for topic, d in result.items() if d}
    assert not bad, bad
    # every fixture of every type was compared
    assert len(result) == sum(len(messages[t]) for t in types)


@pytest.mark.every_ros2_distro
def test_every_test_msgs_message_fixture_reaches_rclpy_equal(ros2):
    messages, _ = load_fixtures(ros2)
    types = with_msg(ros2, messages)
    events, missing, pubs, bridge = nerve_to_rclpy(ros2, messages, types)
    refused = {p.name: p.err[-3:] for p in pubs if p.p.returncode not in (None, 0, -15)}
    assert not missing, (missing, refused, bridge.err[-10:])
    unequal = [(e["type"], e["index"], e["fields"]) for e in events if not e["equal"]]
    assert not unequal, unequal
    assert len(events) == sum(len(messages[t]) for t in types)


@pytest.mark.every_ros2_distro
def test_an_rclpy_server_answers_every_test_msgs_service_fixture_that_nerve_calls(ros2):
    _, services = load_fixtures(ros2)
    bridge = ros2.bridge()
    server = ros2.peer("fixture_server", "/fxs", 300)
    server.wait_line(lambda l: '"ready"' in l, timeout=60)
    for t in services:
        bridge.wait_line(lambda l: l.startswith(f"/fxs_{t}: service ROS 2 -> Nerve"), timeout=60)
    wrong = []
    for t, pairs in services.items():
        for i, (req, resp) in enumerate(pairs):
            # requests up to 40 KB: an argument takes them
            call = ros2.nerve("service", "call", f"/fxs_{t}", f"test_msgs/srv/{t}",
                              json.dumps(plain(req)), "--timeout", "30000", "--format", "json",
                              name=f"call {t} {i}", ament=True)
            assert call.wait(90) == 0, (t, i, call.err, bridge.err[-5:])
            wrong += differences(json.loads("".join(call.lines)), resp, f"{t}[{i}].response")[:5]
    calls = server.json_events("call")
    # the server matched each request to its fixture (by ==), in order
    assert [(c["type"], c["index"]) for c in calls] == [
        (t, i) for t, pairs in services.items() for i in range(len(pairs))], calls
    assert not wrong, wrong


@pytest.mark.every_ros2_distro
def test_an_rclpy_client_gets_every_test_msgs_service_fixture_from_a_nerve_server(
        ros2, domain, monkeypatch):
    _, services = load_fixtures(ros2)
    # where Python finds the ROS 2 definitions
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(ros2.share.parent))
    node = nerve.Context(domain).node("fixture_server")
    unmatched = []

    def answer(t, pairs, ty):
        def handle(req):
            got = py_value(req._ros2())
            for q, r in pairs:
                if not differences(got, q):
                    return ty.response._from_ros2(plain(r))
            unmatched.append((t, [differences(got, q)[:3] for q, _ in pairs]))
            raise ValueError(f"a {t} request that is no fixture's")
        return handle

    servers = []
    for t, pairs in services.items():
        ty = nerve.ServiceType(f"test_msgs/srv/{t}", f"test_msgs/srv/{t}_Request",
                               f"test_msgs/srv/{t}_Response")
        servers.append(node.create_service(ty, f"/fxs_{t}", answer(t, pairs, ty)))
    bridge = ros2.bridge()
    for t in services:
        bridge.wait_line(lambda l: l.startswith(f"/fxs_{t}: service Nerve -> ROS 2"), timeout=60)
    client = ros2.peer("fixture_client", "/fxs", "--timeout", "30")
    # the servers answer on this thread (a Nerve node's own) until the client is done
    deadline = time.monotonic() + 200
    while client.p.poll() is None and time.monotonic() < deadline and not panicked(bridge):
        for s in servers:
            s.spin_once(0.01)
    client.stop()
    events = client.json_events("fixture")
    assert not unmatched, unmatched
    answered = [(e["type"], e["index"], e["fields"]) for e in events if e["fields"] != [NO_RESPONSE]]
    assert all(not fields for _, _, fields in answered), answered
    assert not panicked(bridge), bridge.err
    assert [(e["type"], e["index"]) for e in events] == [
        (t, i) for t, pairs in services.items() for i in range(len(pairs))], client.lines
    unequal = [(e["type"], e["index"], e["fields"]) for e in events if not e["equal"]]
    assert not unequal, unequal


def test_the_keyed_test_msgs_fixtures_reach_nerve(ros2, domain):
    """ROS 2 -> Nerve on keyed DDS topics (Kilted's KeyedLong, KeyedString, ComplexNestedKey,
    their definitions learned from the wire): the bridge's reader is keyed where the ROS 2
    publishers write a keyed topic (old code: a no-key reader, which no keyed writer matches:
    nothing arrived, nothing said)."""
    messages, _ = load_fixtures(ros2)
    types = sorted(t for t in messages if keyed(ros2, t))
    if not types:
        pytest.skip(f"{ros2.name}'s test_msgs has no keyed type")
    # a hang guard: it takes seconds
    result, missing, bridge = rclpy_to_nerve(ros2, domain, messages, types, guard=90)
    assert not missing, (missing, bridge.lines, bridge.err[-10:])
    assert not {topic: d for topic, d in result.items() if d}


def keyed_msg_prefix(ros2, messages, tmp_path):
    """The flat keyed test_msgs types (KeyedLong, KeyedString) and an install prefix in
    `tmp_path` where `nerve topic pub`, which reads .msg only, finds them as .msg files with
    their IDL's members (@key is no part of a ROS 2 definition or type description)."""
    types = sorted(t for t in ("KeyedLong", "KeyedString") if t in messages and keyed(ros2, t))
    msg = tmp_path / "share" / "test_msgs" / "msg"
    msg.mkdir(parents=True)
    (msg / "KeyedLong.msg").write_text("int32 key\nint32 value\n")
    (msg / "KeyedString.msg").write_text("string key\nstring value\n")
    return types, tmp_path


def test_a_keyed_ros2_subscription_of_a_nerve_topic_is_told_why_it_gets_nothing(ros2, tmp_path):
    """Nerve -> ROS 2 on a keyed DDS topic is refused by name: the bridge's no-key writer
    matches no keyed ROS 2 subscription, and a keyed writer's samples would need a key hash
    the bridge cannot compute (old code: nothing arrived, nothing said)."""
    messages, _ = load_fixtures(ros2)
    types, prefix = keyed_msg_prefix(ros2, messages, tmp_path)
    if not types:
        pytest.skip(f"{ros2.name}'s test_msgs has no keyed type")
    bridge = ros2.bridge()
    listener = ros2.peer("fixture_listener", "/fx", "--timeout", 60, "--only", *types)
    listener.wait_line(lambda l: '"ready"' in l, timeout=60)
    topics = fixture_topics({t: messages[t] for t in types})
    pubs = [ros2.nerve("topic", "pub", topic, f"test_msgs/msg/{t}", "-", "--rate", "2",
                       name=f"pub {topic}", ament=prefix,
                       stdin=json.dumps(plain(messages[t][i])))
            for topic, (t, i) in topics.items()]
    want = {topic: (f"{topic}: not bridged: a ROS 2 subscription reads {topic} as a keyed DDS "
                    f"topic (test_msgs/msg/{t} has @key members)")
            for topic, (t, _) in topics.items()}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(
            any(l.startswith(w) for l in bridge.err) for w in want.values()):
        time.sleep(0.2)
    for p in pubs:
        p.stop()
    listener.stop()
    said = [w for w in want.values() if any(l.startswith(w) for l in bridge.err)]
    assert said == list(want.values()), (bridge.err[-10:], {p.name: p.err[-1:] for p in pubs})
    # once per topic, not once per refresh
    assert sum("as a keyed DDS topic" in l for l in bridge.err) == len(want), bridge.err


@pytest.mark.xfail(strict=True, reason=(
    "Nerve -> ROS 2 on a keyed topic: a Fast DDS reader of a keyed topic takes a sample only "
    "with its key hash (rmw_fastrtps computes none from a received payload), which needs the "
    "type's @key members: they are in no ROS 2 type description (only in the .idl), and "
    "RustDDS 0.15.1 sends no key hash with a sample; the bridge refuses by name instead"))
def test_the_keyed_test_msgs_fixtures_reach_rclpy_from_nerve(ros2, tmp_path):
    messages, _ = load_fixtures(ros2)
    types, prefix = keyed_msg_prefix(ros2, messages, tmp_path)
    if not types:
        pytest.skip(f"{ros2.name}'s test_msgs has no keyed type")
    events, missing, pubs, bridge = nerve_to_rclpy(ros2, messages, types, guard=20,
                                                   ament=prefix)
    assert not missing, (missing, {p.name: p.err[-1:] for p in pubs if p.err}, bridge.err[-5:])
    assert all(e["equal"] for e in events), events


@pytest.mark.xfail(strict=True, reason=(
    "`nerve topic pub` (like Python's message_type) reads ROS 2 definitions from .msg files "
    "only: a type defined in IDL only (test_msgs KeyedLong, KeyedString, NonKeyedWithNestedKey, "
    "ComplexNestedKey) is an unknown message type"))
def test_the_idl_only_test_msgs_fixtures_reach_rclpy_from_nerve(ros2):
    messages, _ = load_fixtures(ros2)
    types = sorted(t for t in messages if idl_only(ros2, t))
    if not types:
        pytest.skip(f"{ros2.name}'s test_msgs has no type defined in IDL only")
    events, missing, pubs, bridge = nerve_to_rclpy(ros2, messages, types, guard=30)
    refused = {p.name: p.err[-1:] for p in pubs if p.err}
    assert not missing, (missing, refused)
    assert all(e["equal"] for e in events), events
