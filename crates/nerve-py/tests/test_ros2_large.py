"""Large messages between Nerve and ROS 2 through `nerve bridge ros2` (issue 43),
delivered = sent, where the rclpy node runs with the Fast DDS profile for large data the
bridge ships (crates/nerve-ros2/fastdds_large_data.xml):

- Nerve -> ROS 2: every cloud a Nerve publisher sends reaches an rclpy subscriber (the
  profile's 4 MiB UDP receive buffer; with Fast DDS's default of the kernel's 208 KiB most
  clouds of 1 MiB were lost);
- ROS 2 -> Nerve: every cloud an rclpy publisher on the profile sends reaches Nerve. Its
  user-defined UDPv4 transport sends every RTPS submessage twice (one socket per
  interface); RustDDS made a new fragment buffer of each duplicate last fragment and, at
  128 of them, dropped every new sample (third_party/rustdds/NERVE_PATCHES.md)."""

import json
import subprocess

import pytest

from conftest import REPO, target_bin
from ros2.harness import Proc

PROFILE = REPO / "crates" / "nerve-ros2" / "fastdds_large_data.xml"


def profile_environ():
    return {
        "FASTDDS_DEFAULT_PROFILES_FILE": str(PROFILE),
        # Fast DDS 2.x (Jazzy) reads the older name
        "FASTRTPS_DEFAULT_PROFILES_FILE": str(PROFILE),
    }


@pytest.mark.every_ros2_distro
@pytest.mark.parametrize("size,count,rate", [(1 << 20, 30, 10), (4 << 20, 10, 5), (10 << 20, 6, 2)], ids=["1MiB", "4MiB", "10MiB"])
def test_every_large_cloud_from_nerve_reaches_an_rclpy_subscriber(ros2, size, count, rate):
    bridge = ros2.bridge()
    listener = ros2.peer("cloud_listener", "/big", count, size, "--timeout", "90",
                         environ=profile_environ())
    listener.wait_line(lambda l: '"ready"' in l)
    pub = Proc(
        [str(target_bin("pointcloud_pub")), "--topic", "/big", "--bytes", str(size),
         "--rate", str(rate), "--count", str(count), "--wait-subscribers", "1"],
        ros2.environ, "pointcloud_pub",
    )
    try:
        bridge.wait_line(lambda l: l.startswith("/big: topic Nerve -> ROS 2 (sensor_msgs/msg/PointCloud2"))
        done = listener.wait_line(lambda l: '"done"' in l, timeout=120)
        assert done is not None, (listener.err, bridge.err)
        got = json.loads(done)
        assert pub.p.wait(timeout=60) == 0, pub.err
        assert got["wrong_size"] == 0, got
        # delivered = sent: the publisher waited for the bridge's subscriber, and the
        # bridge opens its DDS writer before it subscribes
        assert got["received"] == count, (got, bridge.lines[-5:], bridge.err[-5:])
    finally:
        pub.p.terminate()


@pytest.mark.every_ros2_distro
@pytest.mark.parametrize("size,count,rate", [(64 << 10, 300, 100), (10 << 20, 6, 2)],
                         ids=["64KiB", "10MiB"])
def test_every_cloud_from_an_rclpy_publisher_on_the_profile_reaches_nerve(ros2, size, count, rate):
    """300 clouds of 64 KiB at 100 Hz (two DATA_FRAGs each, every one sent twice by the
    profile's transport where the host has an interface besides loopback: before the fix
    128 arrived, every time, on Kilted and Jazzy), and clouds of 10 MiB, the largest size
    the bridge promises."""
    bridge = ros2.bridge()
    talker = ros2.peer("cloud", "/points", count, size, "--rate", rate, environ=profile_environ())
    talker.wait_line(lambda l: '"ready"' in l)
    bridge.wait_line(lambda l: l.startswith("/points: topic ROS 2 -> Nerve (sensor_msgs/msg/PointCloud2"))
    # the talker publishes once the bridge's DDS reader, made for this subscriber, matches
    echo = ros2.nerve("topic", "echo", "/points", "--count", count, "--max-elems", "0",
                      "--format", "json", name="echo")
    talker.wait_line(lambda l: '"done"' in l, timeout=60)
    try:
        echo.p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass  # fewer than `count` arrived: the assertion says how many
    # the talker stamps cloud i with i seconds
    stamps = sorted(json.loads(l)["msg"]["header"]["stamp"]["nanos"] // 10**9
                    for l in echo.lines if l.startswith("{"))
    bridge.stop()
    forwarded = [l for l in bridge.lines if l.startswith("forwarded ")]
    assert stamps == list(range(count)), (len(stamps), forwarded, echo.err[-3:])
