#!/usr/bin/env python3
"""ROS 2 (rclpy over Fast DDS) ends of `nerve bench service` and `nerve bench topic`.

Run by the suites with the Python of the ROS 2 virtual environment they prepare (ROS 2's
PyPI wheels, CPython 3.11). One process per end, one JSON spec as the argument:

    rclpy_bench.py probe
    rclpy_bench.py server <spec>       # echo service server (seeds/000)
    rclpy_bench.py client <spec>       # synchronous client, timed per call (seeds/000)
    rclpy_bench.py publisher <spec>    # one-way stream publisher (seeds/001)
    rclpy_bench.py subscriber <spec>   # one-way stream subscriber (seeds/001)

A stream's spec may name its message ("message": "bytes", the default, a
std_msgs/UInt8MultiArray; "pointcloud", a sensor_msgs/PointCloud2 whose data is the
payload; "imu", a sensor_msgs/Imu, publisher only): the topic suite's bridge rows.

The stream ends speak the protocol of crates/nerve-bench/src/peers/stream.rs on stdout:
`ready`, then for a publisher `start` before the first message and `done <n>` after the
last; a subscriber prints one JSON line of arrivals ({"arrivals": [[seq, publish stamp,
receive stamp], ...], "malformed": n}) when it has the last message or its stdin closes.
The service ends: the server prints `ready` once it serves; the client prints `start`
after its warm-up, `done` after the measured calls and then one JSON line of results
({"samples_ns": [...], "seconds": s, "calls": n}). Every process ends when its stdin
closes or on SIGTERM; errors are one JSON line {"error": why} (and the same on stderr).

Configuration, as a user who knows ROS 2 sets it up: rmw_fastrtps_cpp (Fast DDS, ROS 2's
default RMW) with its default transports (shared memory between processes of one host)
and publication mode, discovery limited to this host (ROS_AUTOMATIC_DISCOVERY_RANGE=
LOCALHOST), reliable QoS, the executor the spec names (rclpy's SingleThreadedExecutor, the
default, or rclpy.experimental.EventsExecutor). Stamps: time.monotonic_ns(), the
CLOCK_MONOTONIC the Rust ends stamp with.
"""

import array
import json
import os
import struct
import sys
import threading
import time

# the fields a stream message's payload starts with: sequence number and publish stamp
HEADER = struct.Struct("<QQ")
# how long a publisher waits for its subscriber, a client for its server
CONNECT_S = 20.0
# the longest one service call may take before the client gives up
CALL_TIMEOUT_S = 10.0
# a client's warm-up lasts at least this long (as the Rust clients' WARMUP_MIN)
WARMUP_MIN_S = 0.1
SERVICE_TYPE = "test_msgs/srv/BasicTypes"
TOPIC_TYPE = "std_msgs/msg/UInt8MultiArray"


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def fail(why):
    sys.stderr.write(f"rclpy_bench: {why}\n")
    sys.stderr.flush()
    say(json.dumps({"error": why}))
    os._exit(1)


def ros_domain(domain):
    """ROS_DOMAIN_ID for a Nerve domain number (1..100: valid Fast DDS port ranges)."""
    return 1 + int(domain) % 100


def setup(spec):
    """Pins this process (and the threads it starts) and sets ROS 2's environment; must
    run before rclpy is imported."""
    cpu = spec.get("cpu")
    if cpu is not None:
        try:
            os.sched_setaffinity(0, {int(cpu)})
        except OSError:
            pass
    os.environ["ROS_DOMAIN_ID"] = str(ros_domain(spec.get("domain", 0)))
    os.environ["RMW_IMPLEMENTATION"] = "rmw_fastrtps_cpp"
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    # Fast DDS as it comes: no profile files or settings of the caller's
    for k in (
        "ROS_STATIC_PEERS",
        "ROS_LOCALHOST_ONLY",
        "FASTRTPS_DEFAULT_PROFILES_FILE",
        "FASTDDS_DEFAULT_PROFILES_FILE",
        "RMW_FASTRTPS_USE_QOS_FROM_XML",
        "RMW_FASTRTPS_PUBLICATION_MODE",
        "FASTDDS_BUILTIN_TRANSPORTS",
    ):
        os.environ.pop(k, None)
    # ... unless the spec names one (the bridge rows: a UDP receive buffer for large data)
    profile = spec.get("fastdds_profile")
    if profile:
        os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = profile
        # Fast DDS 2.x (Jazzy) reads the older name
        os.environ["FASTRTPS_DEFAULT_PROFILES_FILE"] = profile


def executor(kind):
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        return EventsExecutor()
    from rclpy.executors import SingleThreadedExecutor

    return SingleThreadedExecutor()


def watch_stdin(on_close):
    """Calls on_close() once stdin closes (the suites' "stop")."""

    def run():
        try:
            while sys.stdin.buffer.read(65536):
                pass
        except (OSError, ValueError):
            pass
        on_close()

    threading.Thread(target=run, daemon=True).start()


def reliable(depth):
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        reliability=ReliabilityPolicy.RELIABLE,
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        durability=DurabilityPolicy.VOLATILE,
    )


def version(dist):
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as v

    try:
        return v(dist)
    except PackageNotFoundError:
        return None


def probe():
    out = {"python": sys.version.split()[0]}
    if sys.version_info[:2] != (3, 11):
        out["error"] = (
            f"Python {out['python']}: ROS 2's PyPI wheels (Kilted) are built for CPython 3.11"
        )
        say(json.dumps(out))
        return
    for key, dist in (
        ("rclpy", "ros-rclpy"),
        ("rmw_fastrtps_cpp", "ros-rmw-fastrtps-cpp"),
        ("fastdds", "ros-fastdds"),
        ("test_msgs", "ros-test-msgs"),
        ("std_msgs", "ros-std-msgs"),
    ):
        out[key] = version(dist)
    try:
        setup({"domain": 0})
        import rclpy  # noqa: F401
        from std_msgs.msg import UInt8MultiArray  # noqa: F401
        from test_msgs.srv import BasicTypes  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure is the reason
        out["error"] = f"import failed: {type(e).__name__}: {e}"
        say(json.dumps(out))
        return
    try:
        from rclpy.experimental import EventsExecutor  # noqa: F401

        out["events_executor"] = True
    except ImportError:
        out["events_executor"] = False
    out["service_type"] = SERVICE_TYPE
    out["topic_type"] = TOPIC_TYPE
    say(json.dumps(out))


class Ros:
    """rclpy initialised, one node, one executor; shut down when stdin closes."""

    def __init__(self, spec, name):
        setup(spec)
        import rclpy
        from rclpy.node import Node

        self.rclpy = rclpy
        rclpy.init()
        self.executor = executor(spec.get("executor", "single-threaded"))
        self.node = Node(f"{name}_{os.getpid()}")
        self.executor.add_node(self.node)
        self.stopped = threading.Event()

        def stop():
            self.stopped.set()
            rclpy.try_shutdown()

        watch_stdin(stop)

    def spin_until(self, future, timeout=None):
        """Spins until `future` is done; False if rclpy was shut down (stdin closed)
        first or `timeout` passed."""
        from rclpy.executors import ExternalShutdownException

        # in steps of at most 1 s: see spin()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while not future.done() and self.rclpy.ok():
                step = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
                if step <= 0:
                    break
                self.executor.spin_until_future_complete(future, timeout_sec=step)
        except ExternalShutdownException:
            return False
        return future.done()

    def spin(self):
        """Serves until stdin closes or SIGTERM: the executor's spin_once in a loop, as
        rclpy.spin does, with a 1 s timeout (rclpy 9.1.2's EventsExecutor never runs a
        service's callback from spin() or from spin_once() without a timeout; with one it
        does, at once)."""
        from rclpy.executors import ExternalShutdownException

        try:
            while self.rclpy.ok():
                self.executor.spin_once(timeout_sec=1.0)
        except (ExternalShutdownException, KeyboardInterrupt):
            pass

    def wait_stop(self):
        self.stopped.wait()

    def finish(self):
        sys.stdout.flush()
        sys.stderr.flush()
        # Fast DDS's threads may take their time to wind down: the results are out
        os._exit(0)


def service_payload(n):
    """The request's body: printable ASCII (one byte per character on the wire)."""
    return "".join(chr(33 + (i * 7 + i // 90) % 90) for i in range(n))


def server(spec):
    ros = Ros(spec, "bench_server")
    from rclpy.qos import qos_profile_services_default
    from test_msgs.srv import BasicTypes

    def echo(request, response):
        response.string_value = request.string_value
        return response

    ros.node.create_service(
        BasicTypes, spec["service"], echo, qos_profile=qos_profile_services_default
    )
    say("ready")
    ros.spin()
    ros.finish()


def client(spec):
    ros = Ros(spec, "bench_client")
    from rclpy.qos import qos_profile_services_default
    from test_msgs.srv import BasicTypes

    n = int(spec["payload_bytes"])
    calls, warmup = int(spec["calls"]), int(spec["warmup"])
    cli = ros.node.create_client(
        BasicTypes, spec["service"], qos_profile=qos_profile_services_default
    )
    if not cli.wait_for_service(timeout_sec=CONNECT_S):
        fail(f"no server for {spec['service']} within {CONNECT_S:.0f} s")
    tail = service_payload(n)[8:] if n > 8 else ""
    req = BasicTypes.Request()
    seq = [0]

    def call():
        # the whole request is written each call (a fresh string: sequence number, body),
        # and the whole response checked against it
        seq[0] += 1
        req.string_value = f"{seq[0] & 0xFFFFFFFF:08x}"[-min(n, 8):] + tail
        fut = cli.call_async(req)
        if not ros.spin_until(fut, CALL_TIMEOUT_S):
            if ros.stopped.is_set():
                fail("stopped")
            fail(f"call {seq[0]} got no response within {CALL_TIMEOUT_S:.0f} s")
        resp = fut.result()
        if resp is None or resp.string_value != req.string_value:
            got = None if resp is None else len(resp.string_value)
            fail(f"call {seq[0]}: bad response (length {got} instead of {n})")

    t0 = time.monotonic()
    done = 0
    while done < warmup or time.monotonic() - t0 < WARMUP_MIN_S:
        call()
        done += 1
    samples = [0] * calls
    clock = time.perf_counter_ns
    say("start")
    start = clock()
    for i in range(calls):
        t = clock()
        call()
        samples[i] = clock() - t
    seconds = (clock() - start) / 1e9
    say("done")
    say(json.dumps({"samples_ns": samples, "seconds": seconds, "calls": calls,
                    "warmup": done}))
    ros.finish()


def stream_topic(spec):
    return spec["endpoint"]


def stream_body(n):
    """Bytes of a stream message's payload after its header."""
    pattern = bytes(range(256))
    reps = n // 256 + 1
    return array.array("B", (pattern * reps)[:n])


def message_kind(spec):
    """What a stream carries: "bytes" (UInt8MultiArray, the default), "pointcloud"
    (sensor_msgs/PointCloud2: the payload is its data, 16-byte points x, y, z, intensity)
    or "imu" (sensor_msgs/Imu, the bridge rows of the topic suite)."""
    return spec.get("message") or "bytes"


def make_message(kind, n):
    """(message, set(msg, seq, data)): a fresh message of `kind` and how one is filled."""
    if kind == "pointcloud":
        from sensor_msgs.msg import PointCloud2, PointField

        msg = PointCloud2()
        msg.header.frame_id = "bench"
        msg.height = 1
        msg.width = n // 16
        msg.point_step = 16
        msg.row_step = n
        msg.is_dense = True
        msg.fields = [
            PointField(name=f, offset=4 * i, datatype=PointField.FLOAT32, count=1)
            for i, f in enumerate(("x", "y", "z", "intensity"))
        ]

        def fill(m, seq, data):
            m.data = data
            # the ROS header stamp: the wall clock at publish (the bridge keeps it)
            now = time.time_ns()
            m.header.stamp.sec, m.header.stamp.nanosec = now // 10**9, now % 10**9

        return msg, fill
    if kind == "imu":
        from sensor_msgs.msg import Imu

        msg = Imu()
        msg.header.frame_id = "imu"
        msg.orientation.w = 1.0

        def fill_imu(m, seq, _data):
            m.linear_acceleration.z = 9.81
            m.angular_velocity.x = float(seq)
            now = time.time_ns()
            m.header.stamp.sec, m.header.stamp.nanosec = now // 10**9, now % 10**9

        return msg, fill_imu
    from std_msgs.msg import UInt8MultiArray

    def fill_bytes(m, _seq, data):
        m.data = data

    return UInt8MultiArray(), fill_bytes


def message_type(kind):
    if kind == "pointcloud":
        from sensor_msgs.msg import PointCloud2

        return PointCloud2
    if kind == "imu":
        from sensor_msgs.msg import Imu

        return Imu
    from std_msgs.msg import UInt8MultiArray

    return UInt8MultiArray


def publisher(spec):
    ros = Ros(spec, "bench_stream_pub")

    kind = message_kind(spec)
    n = int(spec["payload_bytes"])
    if n < HEADER.size and kind != "imu":
        fail(f"payload {n} B is below the {HEADER.size}-byte header")
    count = int(spec["count"])
    period = 1.0 / max(float(spec["rate_hz"]), 0.001)
    msg, fill = make_message(kind, n)
    pub = ros.node.create_publisher(type(msg), stream_topic(spec), reliable(10))
    deadline = time.monotonic() + CONNECT_S
    while pub.get_subscription_count() < 1:
        if time.monotonic() > deadline:
            fail("no subscriber appeared")
        time.sleep(0.01)
    # the subscriber's side of the match settles too (a user waits for it once)
    time.sleep(0.2)
    say("ready")
    body = stream_body(max(n, HEADER.size))
    seq = [0]
    from rclpy.task import Future

    finished = Future()

    def tick():
        if seq[0] >= count:
            return
        seq[0] += 1
        data = None
        if kind != "imu":
            data = array.array("B", body)  # the whole payload written
            stamp = time.monotonic_ns()
            data[0:HEADER.size] = array.array("B", HEADER.pack(seq[0], stamp))
        fill(msg, seq[0], data)
        pub.publish(msg)
        if seq[0] >= count:
            timer.cancel()
            finished.set_result(True)

    say("start")
    # a timer at the rate, as a ROS 2 node publishes periodically
    timer = ros.node.create_timer(period, tick)
    ros.spin_until(finished)
    say(f"done {count}")
    ros.wait_stop()
    ros.finish()


def subscriber(spec):
    ros = Ros(spec, "bench_stream_sub")
    from rclpy.task import Future

    n = int(spec["payload_bytes"])
    count = int(spec["count"])
    expected = stream_body(n).tobytes()[HEADER.size:]
    arrivals = []
    malformed = [0]
    finished = Future()

    def on_message(msg):
        recv = time.monotonic_ns()
        data = msg.data
        if len(data) != n:
            malformed[0] += 1
            return
        view = memoryview(data)
        seq, stamp = HEADER.unpack(view[:HEADER.size].tobytes())
        if view[HEADER.size:].tobytes() != expected:
            malformed[0] += 1
            return
        if len(arrivals) < (1 << 20):
            arrivals.append([seq, stamp, recv])
        if seq >= count and not finished.done():
            finished.set_result(True)

    ros.node.create_subscription(
        message_type(message_kind(spec)), stream_topic(spec), on_message, reliable(10)
    )
    say("ready")
    ros.spin_until(finished)
    say(json.dumps({"arrivals": arrivals, "malformed": malformed[0]}))
    ros.wait_stop()
    ros.finish()


def main(argv):
    if len(argv) < 2:
        fail("usage: rclpy_bench.py probe | server|client|publisher|subscriber <spec-json>")
    cmd = argv[1]
    if cmd == "probe":
        probe()
        return
    try:
        spec = json.loads(argv[2]) if len(argv) > 2 else {}
    except json.JSONDecodeError as e:
        fail(f"bad spec: {e}")
    system = spec.get("system")
    if system in ("rclpy-events",):
        spec["executor"] = "events"
    elif system in ("rclpy-single-threaded",):
        spec["executor"] = "single-threaded"
    roles = {
        "server": server,
        "client": client,
        "publisher": publisher,
        "subscriber": subscriber,
    }
    if cmd not in roles:
        fail(f"unknown command {cmd!r}")
    roles[cmd](spec)


if __name__ == "__main__":
    main(sys.argv)
