"""Large messages from Nerve to ROS 2 (issue 43): every cloud a Nerve publisher sends
reaches an rclpy subscriber through `nerve bridge ros2`, delivered = sent, where the
subscriber runs with the Fast DDS profile for large data the bridge ships
(crates/nerve-ros2/fastdds_large_data.xml: a 4 MiB UDP receive buffer; with Fast DDS's
default of the kernel's 208 KiB most clouds of 1 MiB were lost)."""

import json

import pytest

from conftest import REPO, target_bin
from ros2.harness import Proc

PROFILE = REPO / "crates" / "nerve-ros2" / "fastdds_large_data.xml"


@pytest.mark.every_ros2_distro
@pytest.mark.parametrize("size,count,rate", [(1 << 20, 30, 10), (4 << 20, 10, 5)], ids=["1MiB", "4MiB"])
def test_every_large_cloud_from_nerve_reaches_an_rclpy_subscriber(ros2, size, count, rate):
    bridge = ros2.bridge()
    profile = {
        "FASTDDS_DEFAULT_PROFILES_FILE": str(PROFILE),
        # Fast DDS 2.x (Jazzy) reads the older name
        "FASTRTPS_DEFAULT_PROFILES_FILE": str(PROFILE),
    }
    listener = ros2.peer("cloud_listener", "/big", count, size, "--timeout", "90", environ=profile)
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
