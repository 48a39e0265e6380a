"""Names from Python resolve as in Rust: relative names under NERVE_NAMESPACE, private
``~/x`` names under the node, NERVE_REMAP's rules (the type-erased endpoints behind the
bindings resolve through ``Node::resolve_name``; before, a relative name was refused)."""

import nerve
from nerve import msgs


def test_relative_private_and_remapped_names_resolve(domain, monkeypatch):
    monkeypatch.setenv("NERVE_NAMESPACE", "/robot1")
    monkeypatch.setenv("NERVE_REMAP", "cmd:=/base/cmd; ~/state:=status")
    node = nerve.Context(domain).node("talker")
    assert node.create_publisher(msgs.CmdVel, "chatter").topic == "/robot1/chatter"
    assert node.create_publisher(msgs.CmdVel, "cmd").topic == "/base/cmd"
    assert node.create_publisher(msgs.CmdVel, "~/state").topic == "/robot1/status"
    assert node.create_publisher(msgs.CmdVel, "~/odom").topic == "/robot1/talker/odom"
    assert node.create_publisher(msgs.CmdVel, "/imu_cmd").topic == "/imu_cmd"


def test_a_relative_publisher_reaches_the_absolute_subscription(domain, monkeypatch):
    monkeypatch.setenv("NERVE_NAMESPACE", "/robot1")
    talker = nerve.Context(domain).node("talker")
    pub = talker.create_publisher(msgs.CmdVel, "chatter")
    monkeypatch.delenv("NERVE_NAMESPACE")
    listener = nerve.Context(domain).node("listener")
    sub = listener.create_subscription(msgs.CmdVel, "/robot1/chatter")
    assert pub.wait_for_subscribers(1, 5.0)
    pub.publish(msgs.CmdVel(linear=1.5, angular=0.0))
    got = sub.recv(5.0)
    assert got is not None and got.linear == 1.5
