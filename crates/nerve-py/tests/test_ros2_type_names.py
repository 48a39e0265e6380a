"""ROS 2 type names at every door: a type the ROS 2 bridge carries is named as ROS 2 names
it (`pkg/srv/Name`, `pkg/msg/Name`, `pkg/action/Name`) by `nerve service call`, `nerve
topic pub/echo` and `nerve action send_goal`, with JSON in and out, against real rclpy
peers through `nerve bridge ros2` (see ros2/harness.py)."""

import json
import time

import pytest

BASIC = {
    "bool_value": True, "byte_value": 200, "char_value": 65, "float32_value": 1.5,
    "float64_value": 0.1, "int8_value": -128, "uint8_value": 255, "int16_value": -300,
    "uint16_value": 65535, "int32_value": -70000, "uint32_value": 4294967295,
    "int64_value": -9007199254740993, "uint64_value": 18446744073709551615,
    "string_value": "hé",
}

# test_msgs/msg/BasicTypes: the service's fields without the string
BASIC_MSG = {k: v for k, v in BASIC.items() if k != "string_value"}


@pytest.mark.every_ros2_distro
def test_the_cli_calls_a_bridged_ros2_service_of_any_type_by_its_ros2_name(ros2, domain):
    bridge = ros2.bridge()
    server = ros2.peer("server", "/basic", "test_msgs/srv/BasicTypes", 120)
    server.wait_line(lambda l: '"ready"' in l)
    bridge.wait_line(lambda l: l.startswith("/basic: service ROS 2 -> Nerve"), timeout=60)
    # as `nerve service list` names it
    listed = ros2.nerve("service", "list", "--format", "json")
    assert listed.wait(30) == 0, listed.err
    rows = json.loads("".join(listed.lines))
    assert {"name": "/basic", "type": "test_msgs/srv/BasicTypes"}.items() <= next(
        r for r in rows if r["name"] == "/basic").items(), rows

    call = ros2.nerve("service", "call", "/basic", "test_msgs/srv/BasicTypes", json.dumps(BASIC),
                      "--format", "json", ament=True)
    assert call.wait(60) == 0, (call.err, bridge.err)
    got = json.loads("".join(call.lines))
    # every value exact, both ways (64-bit integers beyond a double's 53 bits too)
    want = BASIC | {"string_value": "hé back", "uint64_value": 18446744073709551614}
    assert got == want, (got, want)
    (seen,) = server.json_events("call")
    assert seen["request"]["int64_value"] == -9007199254740993, seen

    # a field the type does not have is refused by name, before anything is sent
    bad = ros2.nerve("service", "call", "/basic", "test_msgs/srv/BasicTypes", '{"int65_value": 1}',
                     ament=True)
    assert bad.wait(30) == 2
    assert any("int65_value" in l for l in bad.err), bad.err
    unknown = ros2.nerve("service", "call", "/basic", "test_msgs/srv/NoSuchType", "{}", ament=True)
    assert unknown.wait(30) == 2
    assert any("NoSuchType" in l for l in unknown.err), unknown.err

    # a standard service named as ROS 2 names it is Nerve's own type (its JSON is Nerve's)
    switch = ros2.peer("server", "/switch", "std_srvs/srv/SetBool", 120)
    switch.wait_line(lambda l: '"ready"' in l)
    bridge.wait_line(lambda l: l.startswith("/switch: service ROS 2 -> Nerve"), timeout=60)
    call = ros2.nerve("service", "call", "/switch", "std_srvs/srv/SetBool", '{"data": 1}',
                      "--format", "json", ament=True)
    assert call.wait(60) == 0, (call.err, bridge.err)
    got = json.loads("".join(call.lines))
    assert got["success"] == 1 and "True" in got["message"], got


def test_python_calls_a_bridged_ros2_service_by_its_ros2_name(ros2, domain, monkeypatch):
    import nerve

    monkeypatch.setenv("AMENT_PREFIX_PATH", str(ros2.share.parent))
    bridge = ros2.bridge()
    server = ros2.peer("server", "/py_basic_srv", "test_msgs/srv/BasicTypes", 120)
    switch = ros2.peer("server", "/py_switch", "std_srvs/srv/SetBool", 120)
    for name in ("/py_basic_srv", "/py_switch"):
        bridge.wait_line(lambda l: l.startswith(f"{name}: service ROS 2 -> Nerve"), timeout=60)
    node = nerve.Context(domain).node("py_srv")

    st = nerve.ServiceType.ros2("test_msgs/srv/BasicTypes")
    assert st.name == "test_msgs/srv/BasicTypes"
    client = node.create_client(st, "/py_basic_srv")
    assert client.wait_for_service(20)
    reply = client.call(st.request._from_ros2(BASIC), timeout=20)
    assert reply._ros2() == BASIC | {"string_value": "hé back", "uint64_value": 18446744073709551614}

    # a standard service is Nerve's own type, called with Nerve's fields
    st = nerve.ServiceType.ros2("std_srvs/srv/SetBool")
    assert st.name == "nerve_msgs/SetBool"
    client = node.create_client(st, "/py_switch")
    assert client.wait_for_service(20)
    assert client.call(data=1, timeout=20).success == 1
    with pytest.raises(ValueError, match="NoSuchType"):
        nerve.ServiceType.ros2("test_msgs/srv/NoSuchType")


def test_python_makes_a_ros2_type_by_name_and_publishes_it_to_ros2(ros2, domain, monkeypatch):
    import nerve

    monkeypatch.setenv("AMENT_PREFIX_PATH", str(ros2.share.parent))
    # a standard type Nerve holds exactly is Nerve's own, as the bridge carries it
    assert nerve.message_type("geometry_msgs/msg/TwistStamped").name == "nerve_msgs/TwistStamped"
    mt = nerve.message_type("test_msgs/msg/BasicTypes")
    assert mt.name == "test_msgs/msg/BasicTypes"
    cls = nerve.message_class(mt)
    msg = cls._from_ros2(BASIC_MSG)
    assert msg._ros2() == BASIC_MSG
    with pytest.raises(ValueError, match="int65_value"):
        cls._from_ros2({"int65_value": 1})
    with pytest.raises(TypeError, match="test_msgs/msg/NoSuchType"):
        nerve.message_type("test_msgs/msg/NoSuchType")

    bridge = ros2.bridge()
    listener = ros2.peer("listener", "/py_basic", "test_msgs/msg/BasicTypes", 1, "--timeout", "40")
    listener.wait_line(lambda l: '"ready"' in l)
    node = nerve.Context(domain).node("py_basic")
    pub = node.create_publisher(mt, "/py_basic")
    deadline = time.monotonic() + 40
    while not listener.json_events("msg") and time.monotonic() < deadline:
        pub.publish(msg)
        time.sleep(0.1)
    (got,) = [e["msg"] for e in listener.json_events("msg")]
    # rclpy shows `byte` as bytes and `char` as a number
    assert got | {"byte_value": BASIC_MSG["byte_value"]} == BASIC_MSG, (got, bridge.err)
    assert got["byte_value"] == [BASIC_MSG["byte_value"]], got


def test_the_cli_publishes_a_standard_ros2_type_by_its_ros2_name_as_nerves_own(ros2, domain):
    # geometry_msgs/msg/TwistStamped is Nerve's TwistStamped, as the bridge carries it: a
    # Nerve subscriber of that type and ROS 2 both get what `nerve topic pub` sends
    import nerve

    bridge = ros2.bridge()
    listener = ros2.peer("listener", "/tw", "geometry_msgs/msg/TwistStamped", 1, "--timeout", "40")
    listener.wait_line(lambda l: '"ready"' in l)
    pub = ros2.nerve("topic", "pub", "/tw", "geometry_msgs/msg/TwistStamped",
                     '{"header": {"frame_id": "base"}, "twist": {"linear": {"x": 1.5}}}',
                     "--rate", "10", "--count", "300")
    listener.wait_line(lambda l: '"done"' in l, timeout=60)
    (got,) = [e["msg"] for e in listener.json_events("msg")]
    assert got["header"]["frame_id"] == "base" and got["twist"]["linear"]["x"] == 1.5, (got, bridge.err)
    # (the topic is the CLI's: a carrier of the ROS 2 type would refuse this subscription)
    node = nerve.Context(domain).node("tw_sub")
    sub = node.create_subscription("geometry_msgs/msg/TwistStamped", "/tw")
    m = sub.recv(20)
    assert m is not None and m.twist.linear.x == 1.5, pub.err
    pub.stop()


@pytest.mark.every_ros2_distro
def test_python_publishes_and_calls_ros2_types_with_plain_dicts(ros2, domain, monkeypatch):
    # a ROS 2 type carried as CDR takes a dict (or keyword fields) at publish and call, as
    # Nerve's own types do: converted through the type's definition
    import nerve

    monkeypatch.setenv("AMENT_PREFIX_PATH", str(ros2.share.parent))
    bridge = ros2.bridge()
    listener = ros2.peer("listener", "/py_dict", "test_msgs/msg/BasicTypes", 2, "--timeout", "40")
    server = ros2.peer("server", "/py_dict_srv", "test_msgs/srv/BasicTypes", 120)
    listener.wait_line(lambda l: '"ready"' in l)
    node = nerve.Context(domain).node("py_dict")
    pub = node.create_publisher("test_msgs/msg/BasicTypes", "/py_dict")
    deadline = time.monotonic() + 40
    while len(listener.json_events("msg")) < 2 and time.monotonic() < deadline:
        pub.publish(BASIC_MSG)
        pub.publish(**BASIC_MSG)
        time.sleep(0.1)
    got = [e["msg"] for e in listener.json_events("msg")]
    assert len(got) == 2, bridge.err
    for m in got:
        assert m | {"byte_value": BASIC_MSG["byte_value"]} == BASIC_MSG, m
    with pytest.raises(ValueError, match="int65_value"):
        pub.publish({"int65_value": 1})

    st = nerve.ServiceType.ros2("test_msgs/srv/BasicTypes")
    client = node.create_client(st, "/py_dict_srv")
    assert client.wait_for_service(30), bridge.err
    want = BASIC | {"string_value": "hé back", "uint64_value": 18446744073709551614}
    assert client.call(BASIC, timeout=20)._ros2() == want
    assert client.call(timeout=20, **BASIC)._ros2() == want
    # what _ros2() gives (numpy arrays, NaN) goes back in as it came out
    seq = nerve.message_class(nerve.message_type("test_msgs/msg/UnboundedSequences"))
    m = seq._from_ros2({"float64_values": [1.5, float("nan")], "int32_values": [-1, 7]})
    again = seq._from_ros2(m._ros2())
    assert again._bytes() == m._bytes()


def test_a_python_server_of_a_ros2_type_answers_the_cli_with_a_dict_and_a_bad_reply_fails(ros2, domain,
                                                                                           monkeypatch):
    # a Python server of a ROS 2 service type carried as CDR answers with a plain dict;
    # a reply that does not decode makes `nerve service call` fail naming the type, never
    # print it as if it were an answer
    import nerve

    monkeypatch.setenv("AMENT_PREFIX_PATH", str(ros2.share.parent))
    st = nerve.ServiceType.ros2("test_msgs/srv/BasicTypes")
    node = nerve.Context(domain).node("py_cdr_server")

    def good(req):
        return req._ros2() | {"string_value": "from a dict"}

    def bad(req):
        # a carrier head, then a string length far past the end
        buf = nerve._nerve.heap_buffer(16)
        buf.write_bytes(0, b"\0" * 8 + b"\x00\x01\x00\x00\xff\xff\xff\x7f")
        return st.response._wrap(buf)

    servers = [node.create_service(st, "/cdr_good", good), node.create_service(st, "/cdr_bad", bad)]

    def served(call):
        # the servers answer here (a node is single-threaded) until the CLI is done
        deadline = time.monotonic() + 60
        while call.p.poll() is None and time.monotonic() < deadline:
            for s in servers:
                s.spin_once(0.02)
        return call.wait(5)

    call = ros2.nerve("service", "call", "/cdr_good", "test_msgs/srv/BasicTypes", json.dumps(BASIC),
                      "--format", "json", ament=True)
    assert served(call) == 0, call.err
    assert json.loads("".join(call.lines)) == BASIC | {"string_value": "from a dict"}

    call = ros2.nerve("service", "call", "/cdr_bad", "test_msgs/srv/BasicTypes", "{}",
                      "--format", "json", ament=True)
    assert served(call) == 1, (call.lines, call.err)
    assert not "".join(call.lines).strip(), call.lines
    err = " ".join(call.err)
    assert "test_msgs/srv/BasicTypes_Response" in err and "decode" in err, err


@pytest.mark.every_ros2_distro
def test_a_ros2_topic_the_bridge_cannot_carry_is_listed_with_why_and_echo_and_info_say_so(ros2, tmp_path):
    # a ROS 2 type with no definition on the bridge's path, from a node that does not
    # describe its types: every door says the same as the bridge (listed, nothing carried,
    # naming the type), never "does not exist"
    from test_ros2_bridge import string_talker

    from conftest import target_bin
    from ros2.harness import Proc

    empty = tmp_path / "no_types"
    empty.mkdir()
    env = {k: v for k, v in ros2.environ.items() if k != "AMENT_PREFIX_PATH"}
    bridge = ros2.bridge("--types", empty, types=False, environ=env)
    talker = string_talker(ros2, "/uncarried", "test_msgs/msg/Strings", serve=False)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and not any(l.startswith("/uncarried") for l in bridge.err):
            time.sleep(0.1)
        assert any(l.startswith("/uncarried: not bridged") for l in bridge.err), bridge.err

        def nerve(*args):
            p = Proc([target_bin("nerve"), *args], env, "nerve")
            return p.wait(60), p

        deadline = time.monotonic() + 20
        while True:
            code, listed = nerve("topic", "list", "--format", "json")
            assert code == 0, listed.err
            row = next((r for r in json.loads("".join(listed.lines)) if r["name"] == "/uncarried"), {})
            # (the graph the bridge publishes follows its report within a period)
            if not row.get("not_carried", {"learning": True})["learning"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert row.get("ros2") and row["type"] == "test_msgs/msg/Strings", row
        why = row["not_carried"]
        assert why["ros_type"] == "test_msgs/msg/Strings" and not why["learning"], why
        assert "test_msgs/msg/Strings" in why["why"] and str(empty) in why["why"], why

        code, human = nerve("topic", "list")
        assert code == 0 and any(l.startswith("/uncarried (test_msgs/msg/Strings): nothing carried")
                                 for l in human.lines), human.lines

        code, info = nerve("topic", "info", "/uncarried", "--format", "json")
        assert code == 0, info.err
        got = json.loads("".join(info.lines))
        assert got["host"] == "ROS 2" and got["publishers"] == 1 and got["not_carried"] == why, got

        code, echo = nerve("topic", "echo", "/uncarried", "--count", "1", "--timeout", "30")
        assert code == 1, (echo.lines, echo.err)
        err = " ".join(echo.err)
        assert "test_msgs/msg/Strings" in err and "carries nothing" in err, err
        assert "does not exist" not in err, err
    finally:
        talker.stop()
