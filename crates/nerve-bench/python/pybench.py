#!/usr/bin/env python3
"""pybench: Python middleware peer benchmarks for Nerve.

    python pybench.py pingpong --system S --msg cmdvel|imu --count N --warmup W
                               [--pong-system S2 --pong-cmd "CMD ..."]
    python pybench.py stream   --system S --bytes B --rate HZ --seconds T
    python pybench.py tensor   --system S --mb M --count N
    python pybench.py cpu      --system S --what idle_sub|idle_srv|timer_100hz --seconds T
    python pybench.py probe    (which systems import here)

Systems: nerve, zenoh, cyclonedds, iceoryx2, shm_pipe, pickle_uds (+ sleep_loop for
`cpu --what timer_100hz`; `cpu --what idle_srv`, an idle service server, is nerve's).  Each measurement starts its counterpart process itself
(`sys.executable pybench.py _role ...`), bounds everything by time and prints exactly ONE
JSON object on stdout; progress goes to stderr.  A system that cannot run here is reported
as {"skipped": "<reason>"} and never crashes the run.  Latencies are nanoseconds from
CLOCK_MONOTONIC (time.monotonic_ns / time.perf_counter_ns), raw and unfiltered.

Standard library + numpy; peer packages are imported lazily by the backend that needs them.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import pickle
import queue
import secrets
import select
import shlex
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

# Everything a library prints (Python or C level) goes to stderr; only the final JSON
# object (and a child's READY line) goes to the real stdout.
_OUT = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr

# Sequence numbers >= 0 are measured messages; these negative ones are control markers.
STOP, HELLO, WARMUP = -1, -2, -3
MAX_SAMPLES = 20_000
STARTUP_S = 30.0          # how long a peer may take to start and discover the other side

# The message layouts, shared by every backend (little-endian, natural alignment).
MSG_DTYPES = {
    "cmdvel": np.dtype([("stamp", "<i8"), ("linear", "<f4"), ("angular", "<f4")]),
    "imu": np.dtype([
        ("stamp", "<i8"),
        ("orientation", "<f8", (4,)),
        ("orientation_covariance", "<f8", (9,)),
        ("angular_velocity", "<f8", (3,)),
        ("angular_velocity_covariance", "<f8", (9,)),
        ("linear_acceleration", "<f8", (3,)),
        ("linear_acceleration_covariance", "<f8", (9,)),
    ]),
}
MSG_TYPE_NAMES = {"cmdvel": "CmdVel", "imu": "Imu"}
assert MSG_DTYPES["cmdvel"].itemsize == 16 and MSG_DTYPES["imu"].itemsize == 304


def log(*a):
    print("[pybench %d]" % os.getpid(), *a, file=sys.stderr, flush=True)


def emit(obj):
    _OUT.write(json.dumps(obj) + "\n")
    _OUT.flush()


class Skip(Exception):
    """The system (or this measurement on it) cannot run here; the message says why."""


def template(msg):
    """One message record with plausible values; `stamp` carries the sequence number."""
    rec = np.zeros((), MSG_DTYPES[msg])
    if msg == "cmdvel":
        rec["linear"], rec["angular"] = 0.5, -0.25
    else:
        rec["orientation"] = (0.0, 0.0, 0.0, 1.0)
        rec["angular_velocity"] = (0.01, -0.02, 0.03)
        rec["linear_acceleration"] = (0.0, 0.0, 9.81)
        for f in ("orientation_covariance", "angular_velocity_covariance",
                  "linear_acceleration_covariance"):
            rec[f] = np.eye(3).ravel() * 1e-3
    return rec


def record_fields(rec):
    """{field: python value} of a template record (lists for array fields)."""
    return {n: rec[n].tolist() for n in rec.dtype.names}


def stats(samples):
    """Full raw statistics (nearest-rank percentiles over the sorted samples)."""
    s = sorted(samples)
    n = len(s)
    if n == 0:
        return {"count": 0}

    def pct(q):
        return int(s[min(n - 1, max(0, math.ceil(q / 100.0 * n) - 1))])

    return {"count": n, "mean": float(sum(s)) / n, "p50": pct(50), "p90": pct(90),
            "p99": pct(99), "p99_9": pct(99.9), "max": int(s[-1]), "min": int(s[0])}


def limited(samples):
    """At most MAX_SAMPLES raw samples (evenly strided, in time order) and the stride."""
    stride = max(1, math.ceil(len(samples) / MAX_SAMPLES))
    return [int(x) for x in samples[::stride]], stride


def free_tcp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pkg_version(dist):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return None


def proc_cpu_ticks(pid):
    """utime + stime (all threads) of a process, in clock ticks, from /proc/<pid>/stat."""
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


def proc_cpu_ns(pid):
    """On-CPU time of all live threads in ns (/proc/<pid>/task/*/schedstat, field 1)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def proc_runs(pid):
    """Times the live threads were put on a CPU (/proc/<pid>/task/*/schedstat, field 3):
    wake-ups, for threads that sleep between them."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[2])
        except (OSError, ValueError, IndexError):
            pass
    return total


def sleep_until(t):
    dt = t - time.monotonic()
    if dt > 0:
        time.sleep(dt)


def _val(x):
    return x() if callable(x) else x


# --------------------------------------------------------------------------------------
# Backends: one small class per system, all with the same methods.
#
# The parent process (the measuring side) constructs a backend with rv=None, opens its
# side, then passes `rendezvous()` (JSON) and `pass_fds()` to the child, which constructs
# the same backend with that rv and opens the other side.
#
#   ping-pong (busy-poll):  pp_open(role, msg)  role: "ping" | "pong"
#                           pp_send(seq)        pinger: one message, stamp field = seq
#                           pp_poll()           pinger: seq of a reply or None
#                           pp_echo()           ponger: echo one message if any -> seq|None
#   stream (blocking sub):  st_open(role, nbytes)     role: "pub" | "sub"
#                           st_buffer() -> writable uint8 array of the next message
#                           st_send()
#                           st_recv(timeout) -> (uint8 array, t_recv_ns) | None
#                           st_release()      drop the held sample
#   tensor hand-off:        tn_open(role, nbytes)     role: "producer" | "consumer"
#                           tn_buffer(n) -> writable float32 array (system buffer or own)
#                           tn_send(seq, stamp_ns)
#                           tn_recv(timeout) -> (float32 array, stamp_ns, t_recv_ns) | None
#                           tn_release(); tn_ack(seq); tn_wait_ack(timeout) -> seq|None
#   any:                    wait_matched(timeout) -> bool (publisher sees its subscriber)
#   cpu:                    idle_open(); idle_wait(seconds); timer_100hz(seconds) -> ticks;
#                           idle_srv(seconds) (nerve: an executor with an idle service)
# --------------------------------------------------------------------------------------

class _Fmt(dict):
    def __missing__(self, key):
        return "?"


class Backend:
    name = "?"
    dist = None                     # PyPI distribution name, for the version field
    config = {}                     # measurement -> one line describing the peer setup

    def __init__(self, ident, rv=None):
        self.ident = ident
        self.rv = rv
        self.parent = rv is None
        self.info = {}              # values for the {placeholders} of the config lines

    def key(self, what):
        return "pybench/%s/%s" % (self.ident, what)

    def rendezvous(self):
        return {}

    def pass_fds(self):
        return ()

    def wait_matched(self, timeout):
        return True

    def close(self):
        pass

    def describe(self, measurement):
        return self.config.get(measurement, "").format_map(
            _Fmt(ver=self.version(), **self.info))

    def version(self):
        return pkg_version(self.dist) if self.dist else None

    # defaults for what a system does not offer
    def tn_open(self, role, nbytes):
        raise Skip("no tensor hand-off API")

    def timer_100hz(self, seconds):
        raise Skip("no timer/executor in the %s Python API; use --system sleep_loop" % self.name)

    def st_release(self):
        pass

    def tn_release(self):
        pass


# ---------------------------------------------------------------------- nerve --------
class NerveBackend(Backend):
    """All nerve-specific code lives here."""
    name, dist = "nerve", "nerve"
    tensor_wait = "block"
    config = {
        "pingpong": "nerve Python: loaned msgs.{msg} (pub.loan(); m.send()), subscription "
                    "wait='spin' busy-polled with try_recv(); ponger republishes with "
                    "pub.publish(s)",
        "stream": "nerve Python: msgs.Image with pub.loan(B) (m.data = shared-memory numpy "
                  "view filled in place), subscription wait='block' + sub.recv(timeout); "
                  "receiver holds s.data (zero-copy read-only numpy view)",
        "tensor": "nerve TensorPool(slots=4): producer fills pool.alloc((n,),'float32').numpy() "
                  "in place, publishes t.freeze() (TensorDescriptor); consumer blocks (wait='block'); "
                  "TensorPool.open(...).open(d).numpy() zero-copy; the harness stamp (after "
                  "the fill) travels in the descriptor's user field; ack on a "
                  "CmdVel topic",
        "cpu_idle_sub": "nerve subscription wait='block', blocked in sub.recv(timeout=1.0)",
        "cpu_timer_100hz": "nerve node.create_timer(0.01, cb) + Executor.spin_for",
        "cpu_idle_srv": "nerve node.create_service(srv.AddTwoInts, cb) + Executor.spin_for "
                        "(main thread), no client calls",
    }

    def __init__(self, ident, rv=None):
        super().__init__(ident, rv)
        try:
            import nerve
            from nerve import msgs
        except Exception as e:
            raise Skip("import nerve failed: %s: %s" % (type(e).__name__, e))
        self.nerve, self.msgs = nerve, msgs
        self.ctx = nerve.Context()
        self.node = self.ctx.node("pybench_%s_%s" % ("p" if self.parent else "c", ident))
        self.pubs = []

    def topic(self, what):
        return "/bench/%s_%s" % (what, self.ident)

    def version(self):
        return getattr(self.nerve, "__version__", None) or pkg_version("nerve")

    def _pub(self, typ, topic):
        p = self.node.create_publisher(typ, topic)
        self.pubs.append(p)
        return p

    def wait_matched(self, timeout):
        return all(p.wait_for_subscribers(1, timeout=timeout) for p in self.pubs)

    # ping-pong: topics may be overridden (external ponger gets them as arguments)
    def pp_open(self, role, msg, ping_topic=None, pong_topic=None):
        typ = getattr(self.msgs, MSG_TYPE_NAMES[msg])
        self.info["msg"] = MSG_TYPE_NAMES[msg]
        ping, pong = ping_topic or self.topic("ping"), pong_topic or self.topic("pong")
        mine, other = (ping, pong) if role == "ping" else (pong, ping)
        self.pub = self._pub(typ, mine)
        self.sub = self.node.create_subscription(typ, other, wait="spin")

    def pp_send(self, seq):
        m = self.pub.loan()
        m.stamp.nanos = seq
        m.send()

    def pp_poll(self):
        s = self.sub.try_recv()
        return None if s is None else int(s.stamp.nanos)

    def pp_echo(self):
        s = self.sub.try_recv()
        if s is None:
            return None
        self.pub.publish(s)
        return int(s.stamp.nanos)

    def st_open(self, role, nbytes):
        self.nbytes, self.held = nbytes, None
        if role == "pub":
            self.pub = self._pub(self.msgs.Image, self.topic("stream"))
        else:
            self.sub = self.node.create_subscription(self.msgs.Image, self.topic("stream"),
                                                     wait="block")

    def st_buffer(self):
        self.m = self.pub.loan(self.nbytes)
        return self.m.data

    def st_send(self):
        self.m.send()
        self.m = None

    def st_recv(self, timeout):
        s = self.sub.recv(timeout=timeout)
        if s is None:
            return None
        arr = s.data
        t = time.monotonic_ns()
        self.held = s
        return arr, t

    def st_release(self):
        self.held = None

    def tn_open(self, role, nbytes):
        nerve = self.nerve
        self.held = self.t = None
        if role == "producer":
            self.pool = nerve.TensorPool(self.ctx, "pybench_%s" % self.ident, slots=4,
                                         slot_bytes=nbytes)
            self.pub = self._pub(nerve.TensorDescriptor, self.topic("tensor"))
            self.ack_sub = self.node.create_subscription(self.msgs.CmdVel, self.topic("ack"),
                                                         wait="block")
        else:
            self.pool = None
            self.sub = self.node.create_subscription(nerve.TensorDescriptor,
                                                     self.topic("tensor"), wait=self.tensor_wait)
            self.ack_pub = self._pub(self.msgs.CmdVel, self.topic("ack"))

    def tn_buffer(self, n):
        self.t = self.pool.alloc((n,), "float32")
        return self.t.numpy()

    def tn_send(self, seq, stamp_ns):
        # the harness's stamp (taken after the fill, as for every system) travels in the
        # descriptor's user field. The frozen tensor is held until the consumer
        # acknowledges (tn_wait_ack): dropping the last reference frees the slot, and a
        # descriptor of a freed slot is refused.
        self.sent = self.t.freeze()
        self.t = None
        self.pub.publish(self.sent, user=stamp_ns)

    def tn_recv(self, timeout):
        d = self.sub.recv(timeout=timeout)
        if d is None:
            return None
        if self.pool is None:
            self.pool = self.nerve.TensorPool.open(self.ctx, "pybench_%s" % self.ident)
        t_obj = self.pool.open(d)
        arr = t_obj.numpy()
        t = time.monotonic_ns()
        self.held = (d, t_obj)
        return arr, int(d.user), t

    def tn_release(self):
        self.held = None

    def tn_ack(self, seq):
        m = self.ack_pub.loan()
        m.stamp.nanos = seq
        m.send()

    def tn_wait_ack(self, timeout):
        s = self.ack_sub.recv(timeout=timeout)
        self.sent = None
        return None if s is None else int(s.stamp.nanos)

    def idle_open(self):
        self.sub = self.node.create_subscription(self.msgs.CmdVel, self.topic("idle"),
                                                 wait="block")

    def idle_wait(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.sub.recv(timeout=min(1.0, max(0.0, end - time.monotonic())))

    def idle_srv(self, seconds):
        from nerve import srv
        self.node.create_service(srv.AddTwoInts, self.topic("idle_srv"),
                                 lambda r: {"value": r.a + r.b})
        ex = self.nerve.Executor()
        ex.add(self.node)
        emit_ready()
        ex.spin_for(seconds)

    def timer_100hz(self, seconds):
        ticks = [0]

        def cb(*_):
            ticks[0] += 1

        ex = self.nerve.Executor()
        ex.add(self.node)
        self._timer = self.node.create_timer(0.01, cb)
        ex.spin_for(seconds)
        return ticks[0]


# ---------------------------------------------------------------------- zenoh --------
class ZenohBackend(Backend):
    name, dist = "zenoh", "eclipse-zenoh"
    config = {
        "pingpong": "zenoh {ver} peer mode, TCP loopback (parent listens tcp/127.0.0.1:{port}, "
                    "child connects), multicast scouting off; publisher express=True "
                    "congestion_control=BLOCK; subscriber FifoChannel(16) busy-polled with "
                    "try_recv(); payload = raw {bytes} B record (put from a bytearray)",
        "stream": "zenoh {ver} peer mode, TCP loopback, multicast scouting off; publisher "
                  "congestion_control=BLOCK puts a bytearray (numpy view filled in place); "
                  "subscriber callback: payload.to_bytes() (copy; ZBytes has no buffer "
                  "protocol) + np.frombuffer",
        "cpu_idle_sub": "zenoh peer (TCP loopback listen, multicast scouting off), callback "
                        "subscriber, main thread blocked in threading.Event.wait",
    }

    def __init__(self, ident, rv=None):
        super().__init__(ident, rv)
        try:
            import zenoh
        except Exception as e:
            raise Skip("import zenoh failed: %s: %s" % (type(e).__name__, e))
        self.z = zenoh
        self.port = free_tcp_port() if self.parent else rv["port"]
        ep = ["tcp/127.0.0.1:%d" % self.port]
        conf = zenoh.Config()
        conf.insert_json5("mode", json.dumps("peer"))
        conf.insert_json5("scouting/multicast/enabled", "false")
        conf.insert_json5("listen/endpoints", json.dumps(ep if self.parent else []))
        conf.insert_json5("connect/endpoints", json.dumps([] if self.parent else ep))
        self.session = zenoh.open(conf)
        self.pubs = []


    def rendezvous(self):
        return {"port": self.port}

    def _pub(self, key, **kw):
        p = self.session.declare_publisher(key, congestion_control=self.z.CongestionControl.BLOCK,
                                           **kw)
        self.pubs.append(p)
        return p

    def wait_matched(self, timeout):
        end = time.monotonic() + timeout
        while not all(p.matching_status for p in self.pubs):
            if time.monotonic() > end:
                return False
            time.sleep(0.01)
        return True

    def pp_open(self, role, msg):
        rec = template(msg)
        self.info.update(port=self.port, bytes=rec.dtype.itemsize)
        self.buf = bytearray(rec.tobytes())
        mine, other = ("ping", "pong") if role == "ping" else ("pong", "ping")
        self.pub = self._pub(self.key(mine), express=True)
        self.sub = self.session.declare_subscriber(self.key(other), self.z.handlers.FifoChannel(16))

    def pp_send(self, seq):
        struct.pack_into("<q", self.buf, 0, seq)
        self.pub.put(self.buf)

    def pp_poll(self):
        s = self.sub.try_recv()
        if s is None:
            return None
        return int.from_bytes(s.payload.to_bytes()[:8], "little", signed=True)

    def pp_echo(self):
        s = self.sub.try_recv()
        if s is None:
            return None
        self.pub.put(s.payload)
        return int.from_bytes(s.payload.to_bytes()[:8], "little", signed=True)

    def st_open(self, role, nbytes):
        if role == "pub":
            self.pub = self._pub(self.key("stream"))
            self.buf = bytearray(nbytes)
            self.view = np.frombuffer(self.buf, np.uint8)
        else:
            self.q = queue.Queue()

            def on_sample(sample, q=self.q):
                arr = np.frombuffer(sample.payload.to_bytes(), np.uint8)
                q.put((arr, time.monotonic_ns()))

            self.sub = self.session.declare_subscriber(self.key("stream"), on_sample)

    def st_buffer(self):
        return self.view

    def st_send(self):
        self.pub.put(self.buf)

    def st_recv(self, timeout):
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            return None

    def idle_open(self):
        self.sub = self.session.declare_subscriber(self.key("idle"), lambda s: None)

    def idle_wait(self, seconds):
        threading.Event().wait(seconds)

    def close(self):
        try:
            self.session.close()
        except Exception:
            pass


# ---------------------------------------------------------------------- cyclonedds ---
CYCLONE_XML = (
    "<CycloneDDS><Domain id=\"any\"><General><Interfaces>"
    "<NetworkInterface address=\"127.0.0.1\"/></Interfaces>"
    "<AllowMulticast>false</AllowMulticast></General>"
    "<Discovery><ParticipantIndex>auto</ParticipantIndex>"
    "<MaxAutoParticipantIndex>64</MaxAutoParticipantIndex>"
    "<Peers><Peer address=\"127.0.0.1\"/></Peers></Discovery></Domain></CycloneDDS>")


class CycloneBackend(Backend):
    name, dist = "cyclonedds", "cyclonedds"
    config = {
        "pingpong": "cyclonedds {ver} (Python), loopback-only unicast discovery (no "
                    "multicast), domain {domain}; QoS reliable + keep-last 10; typed IdlStruct "
                    "{typ} ({bytes} B); DataReader.take() busy-polled, ponger writes back "
                    "the taken sample",
        "stream": "cyclonedds {ver}, loopback-only unicast, reliable keep-last 10; IdlStruct "
                  "{{data: octet[B]}} (fixed array: sequence<octet> would deserialize to a "
                  "Python list of ints) written from a bytearray; reader blocks in WaitSet + "
                  "ReadCondition, take(); np.frombuffer over the deserialized bytes (copy)",
        "cpu_idle_sub": "cyclonedds reader blocked in WaitSet.wait on a ReadCondition "
                        "(loopback-only unicast discovery)",
    }

    def __init__(self, ident, rv=None):
        super().__init__(ident, rv)
        os.environ.setdefault("CYCLONEDDS_URI", CYCLONE_XML)
        try:
            from cyclonedds import core, domain, pub, sub, topic, util
            from cyclonedds.idl import IdlStruct
            import cyclonedds.idl.types as idl_types
        except Exception as e:
            raise Skip("import cyclonedds failed: %s: %s" % (type(e).__name__, e))
        self.core, self.pubm, self.subm, self.topicm = core, pub, sub, topic
        self.IdlStruct, self.t, self.duration = IdlStruct, idl_types, util.duration
        self.domain = int(os.environ.get("PYBENCH_DDS_DOMAIN", "0"))
        self.dp = domain.DomainParticipant(self.domain)
        self.qos = core.Qos(core.Policy.Reliability.Reliable(util.duration(seconds=1)),
                            core.Policy.History.KeepLast(10))
        self.writers = []


    def _struct(self, name, fields):
        import dataclasses
        import types as pytypes
        cls = pytypes.new_class(name, (self.IdlStruct,), {"typename": "pybench::" + name},
                                lambda ns: ns.update({"__annotations__": dict(fields)}))
        return dataclasses.dataclass(cls)

    def _msg_type(self, msg):
        t, dt = self.t, MSG_DTYPES[msg]
        scalar = {"<i8": t.int64, "<f4": t.float32, "<f8": t.float64}
        fields = []
        for n in dt.names:
            sub = dt.fields[n][0]
            base = scalar[sub.base.str]
            fields.append((n, t.array[base, int(np.prod(sub.shape))] if sub.shape else base))
        return self._struct(MSG_TYPE_NAMES[msg], fields)

    def _endpoints(self, typ, mine, other):
        w = r = None
        if mine:
            w = self.pubm.DataWriter(self.dp, self.topicm.Topic(self.dp, mine, typ, qos=self.qos),
                                     qos=self.qos)
            self.writers.append(w)
        if other:
            r = self.subm.DataReader(self.dp, self.topicm.Topic(self.dp, other, typ, qos=self.qos),
                                     qos=self.qos)
        return w, r

    def _name(self, what):
        return "pybench_%s_%s" % (self.ident, what)

    def wait_matched(self, timeout):
        end = time.monotonic() + timeout
        while not all(w.get_publication_matched_status().current_count > 0 for w in self.writers):
            if time.monotonic() > end:
                return False
            time.sleep(0.01)
        return True

    def pp_open(self, role, msg):
        typ = self._msg_type(msg)
        self.info.update(domain=self.domain, typ=typ.__name__, bytes=MSG_DTYPES[msg].itemsize)
        self.msg = typ(**record_fields(template(msg)))
        mine, other = ("ping", "pong") if role == "ping" else ("pong", "ping")
        self.w, self.r = self._endpoints(typ, self._name(mine), self._name(other))

    def pp_send(self, seq):
        self.msg.stamp = seq
        self.w.write(self.msg)

    def _take_valid(self):
        s = self.r.take()
        if s and s[0].sample_info.valid_data:
            return s[0]
        return None

    def pp_poll(self):
        s = self._take_valid()
        return None if s is None else s.stamp

    def pp_echo(self):
        s = self._take_valid()
        if s is None:
            return None
        self.w.write(s)
        return s.stamp

    def _blocking_reader(self, r):
        c = self.core
        self.rc = c.ReadCondition(r, c.ViewState.Any | c.InstanceState.Any | c.SampleState.NotRead)
        self.ws = c.WaitSet(self.dp)
        self.ws.attach(self.rc)

    def st_open(self, role, nbytes):
        typ = self._struct("Blob%d" % nbytes, [("data", self.t.array[self.t.uint8, nbytes])])
        if role == "pub":
            self.typ = typ
            self.buf = bytearray(nbytes)
            self.view = np.frombuffer(self.buf, np.uint8)
            self.w, _ = self._endpoints(typ, self._name("stream"), None)
        else:
            _, self.r = self._endpoints(typ, None, self._name("stream"))
            self._blocking_reader(self.r)

    def st_buffer(self):
        return self.view

    def st_send(self):
        self.w.write(self.typ(data=self.buf))

    def st_recv(self, timeout):
        end = time.monotonic() + timeout
        while True:
            for s in self.r.take(N=1, condition=self.rc):
                if s.sample_info.valid_data:
                    arr = np.frombuffer(s.data, np.uint8)
                    return arr, time.monotonic_ns()
            left = end - time.monotonic()
            if left <= 0:
                return None
            self.ws.wait(int(left * 1e9))

    def idle_open(self):
        typ = self._struct("Idle", [("stamp", self.t.int64)])
        _, self.r = self._endpoints(typ, None, self._name("idle"))
        self._blocking_reader(self.r)

    def idle_wait(self, seconds):
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            if self.ws.wait(int(min(left, 1.0) * 1e9)):
                self.r.take(N=16, condition=self.rc)


# ---------------------------------------------------------------------- iceoryx2 -----
class Iceoryx2Backend(Backend):
    name, dist = "iceoryx2", "iceoryx2"
    config = {
        "pingpong": "iceoryx2 {ver} (Python), ServiceType.Ipc publish-subscribe of a ctypes "
                    "Structure {typ} ({bytes} B); loan_uninit() + write_payload() + send(); "
                    "Subscriber.receive() busy-polled; ponger copies the received payload "
                    "into a new loan",
        "stream": "iceoryx2 {ver}, Ipc publish-subscribe Slice[c_uint8] (loan_slice_uninit(B), "
                  "numpy view of the loan filled in place), subscriber buffer 4; no blocking "
                  "receive on Subscriber, so the subscriber blocks in an Event-service "
                  "Listener.timed_wait that the publisher notifies after send; receiver "
                  "np.frombuffer over Slice.as_memory_view (zero-copy)",
        "cpu_idle_sub": "iceoryx2 subscriber + Event Listener blocked in timed_wait(1 s)",
        "cpu_timer_100hz": "iceoryx2 WaitSet.attach_interval(10 ms) + wait_and_process loop "
                           "(iceoryx2's own event loop)",
    }

    def __init__(self, ident, rv=None):
        super().__init__(ident, rv)
        try:
            import iceoryx2 as iox2
        except Exception as e:
            raise Skip("import iceoryx2 failed: %s: %s" % (type(e).__name__, e))
        self.x = iox2
        iox2.set_log_level(iox2.LogLevel.Error)
        self.node = (iox2.NodeBuilder.new()
                     .signal_handling_mode(iox2.SignalHandlingMode.Disabled)
                     .create(iox2.ServiceType.Ipc))
        self.keep, self.services = [], []     # services to keep alive / to wait_matched on
        self.held = self.sample = None


    def _service(self, what, payload, buffer=None):
        b = self.node.service_builder(self.x.ServiceName.new(self.key(what))).publish_subscribe(payload)
        if buffer:
            b = b.subscriber_max_buffer_size(buffer)
        svc = b.open_or_create()
        self.keep.append(svc)
        return svc

    def _event(self, what):
        ev = self.node.service_builder(self.x.ServiceName.new(self.key(what))).event().open_or_create()
        self.keep.append(ev)
        return ev

    def wait_matched(self, timeout):
        end = time.monotonic() + timeout
        while not all(_val(_val(s.dynamic_config).number_of_subscribers) > 0
                      for s in self.services):
            if time.monotonic() > end:
                return False
            time.sleep(0.01)
        return True

    @staticmethod
    def _ctypes_struct(msg):
        dt = MSG_DTYPES[msg]
        scalar = {"<i8": ctypes.c_int64, "<f4": ctypes.c_float, "<f8": ctypes.c_double}
        fields = []
        for n in dt.names:
            sub = dt.fields[n][0]
            base = scalar[sub.base.str]
            fields.append((n, base * int(np.prod(sub.shape)) if sub.shape else base))
        cls = type(MSG_TYPE_NAMES[msg], (ctypes.Structure,), {"_fields_": fields})
        assert ctypes.sizeof(cls) == dt.itemsize
        return cls

    def pp_open(self, role, msg):
        typ = self._ctypes_struct(msg)
        self.info.update(typ=typ.__name__, bytes=ctypes.sizeof(typ))
        self.msg = typ.from_buffer_copy(template(msg).tobytes())
        mine, other = ("ping", "pong") if role == "ping" else ("pong", "ping")
        svc_mine, svc_other = self._service(mine, typ), self._service(other, typ)
        self.pub = svc_mine.publisher_builder().create()
        self.sub = svc_other.subscriber_builder().create()

    def pp_send(self, seq):
        self.msg.stamp = seq
        self.pub.loan_uninit().write_payload(self.msg).send()

    def pp_poll(self):
        s = self.sub.receive()
        return None if s is None else s.payload().contents.stamp

    def pp_echo(self):
        s = self.sub.receive()
        if s is None:
            return None
        p = s.payload().contents
        self.pub.loan_uninit().write_payload(p).send()
        return p.stamp

    def st_open(self, role, nbytes):
        self.nbytes = nbytes
        svc = self._service("stream", self.x.Slice[ctypes.c_uint8], buffer=4)
        ev = self._event("stream_ev")
        if role == "pub":
            self.pub = svc.publisher_builder().initial_max_slice_len(nbytes).create()
            self.notifier = ev.notifier_builder().create()
            self.services = [svc]
        else:
            self.sub = svc.subscriber_builder().buffer_size(4).create()
            self.listener = ev.listener_builder().create()

    def st_buffer(self):
        self.sample = self.pub.loan_slice_uninit(self.nbytes)
        return np.frombuffer(self.sample.payload().as_memory_view(), np.uint8)

    def st_send(self):
        self.sample.assume_init().send()
        self.sample = None
        self.notifier.notify()

    def st_recv(self, timeout):
        end = time.monotonic() + timeout
        while True:
            s = self.sub.receive()
            if s is not None:
                arr = np.frombuffer(s.payload().as_memory_view(), np.uint8)
                arr.flags.writeable = False
                t = time.monotonic_ns()
                self.held = s
                return arr, t
            left = end - time.monotonic()
            if left <= 0:
                return None
            self.listener.timed_wait(self.x.Duration.from_secs_f64(left))

    def st_release(self):
        if self.held is not None:
            self.held.delete()
            self.held = None

    def idle_open(self):
        svc = self._service("idle", ctypes.c_int64)
        self.sub = svc.subscriber_builder().create()
        self.listener = self._event("idle_ev").listener_builder().create()

    def idle_wait(self, seconds):
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            self.listener.timed_wait(self.x.Duration.from_secs_f64(min(left, 1.0)))
            while self.sub.receive() is not None:
                pass

    def timer_100hz(self, seconds):
        x = self.x
        ws = (x.WaitSetBuilder.new().signal_handling_mode(x.SignalHandlingMode.Disabled)
              .create(x.ServiceType.Ipc))
        guard = ws.attach_interval(x.Duration.from_millis(10))
        end, ticks = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            notes, _ = ws.wait_and_process()
            for a in notes:
                if a.has_event_from(guard):
                    ticks += 1
        del guard
        return ticks

    def close(self):
        if self.held is not None:
            self.held.delete()
        self.held = self.sample = None
        self.keep = []


# ---------------------------------------------------------------------- shm_pipe -----
class ShmPipeBackend(Backend):
    """multiprocessing.shared_memory blocks + os.pipe notifications."""
    name = "shm_pipe"
    config = {
        "pingpong": "multiprocessing.shared_memory block with a ping slot and a pong slot "
                    "([i64 counter][{bytes} B record]); both sides BUSY-POLL the counter in "
                    "shared memory (the os.pipe is not used for ping-pong); ponger copies the "
                    "record into the pong slot then bumps its counter (x86 store order assumed)",
        "stream": "4 shared_memory blocks used round-robin, publisher fills the block in "
                  "place with numpy; os.pipe carries the block index; subscriber blocks in "
                  "select()+os.read on the pipe, then takes a zero-copy numpy view of the block",
        "tensor": "shared_memory + copy: producer fills its own numpy array, then np.copyto "
                  "into one of 2 shared_memory blocks; os.pipe carries (index, seq, stamp); "
                  "consumer blocks in select()+os.read, zero-copy numpy view of the block; "
                  "ack on a second pipe",
        "cpu_idle_sub": "blocked in select() on an os.pipe nobody writes",
    }
    SLOT = 512          # ping-pong slot stride (>= 8 + 304, cache-line multiple)

    def __init__(self, ident, rv=None):
        super().__init__(ident, rv)
        from multiprocessing import shared_memory
        self.shm_mod = shared_memory
        self.shms, self.views, self.fds, self.child_fds = [], [], [], []

    def _blocks(self, what, count, size):
        """Parent creates the blocks, child attaches (untracked, so it does not unlink)."""
        names = ["pyb_%s_%s%d" % (self.ident, what, i) for i in range(count)]
        for n in names:
            if self.parent:
                shm = self.shm_mod.SharedMemory(name=n, create=True, size=size)
            elif sys.version_info >= (3, 13):
                shm = self.shm_mod.SharedMemory(name=n, track=False)
            else:
                shm = self.shm_mod.SharedMemory(name=n)
                try:
                    from multiprocessing import resource_tracker
                    resource_tracker.unregister(shm._name, "shared_memory")
                except Exception:
                    pass
            self.shms.append(shm)
        return self.shms[-count:]

    def _pipe(self, writer_is_parent):
        """A pipe between parent and child; returns this side's fd."""
        if self.parent:
            r, w = os.pipe()
            mine, theirs = (w, r) if writer_is_parent else (r, w)
            self.fds.append(mine)
            self.child_fds.append(theirs)
            return mine
        fd = self.rv["fds"][len(self.fds)]         # same order as the parent created them
        self.fds.append(fd)
        return fd

    def rendezvous(self):
        return {"fds": self.child_fds}

    def pass_fds(self):
        return tuple(self.child_fds)

    def _view(self, shm, dtype, offset, count):
        v = np.ndarray((count,), dtype, buffer=shm.buf, offset=offset)
        self.views.append(v)
        return v

    def pp_open(self, role, msg):
        rec = template(msg)
        n = rec.dtype.itemsize
        self.info.update(bytes=n)
        (shm,) = self._blocks("pp", 1, 2 * self.SLOT)
        self.rec = np.frombuffer(bytearray(rec.tobytes()), np.uint8)
        self.rec_stamp = self.rec[:8].view(np.int64)
        slots = [(self._view(shm, np.int64, i * self.SLOT, 1),
                  self._view(shm, np.uint8, i * self.SLOT + 8, n)) for i in (0, 1)]
        (self.my_ctr, self.my_buf), (self.other_ctr, self.other_buf) = \
            slots if role == "ping" else slots[::-1]
        self.other_stamp = self.other_buf[:8].view(np.int64)
        self.count = 0

    def pp_send(self, seq):
        self.rec_stamp[0] = seq
        self.my_buf[:] = self.rec
        self.count += 1
        self.my_ctr[0] = self.count

    def pp_poll(self):
        if self.other_ctr[0] != self.count:
            return None
        return int(self.other_stamp[0])

    def pp_echo(self):
        c = self.other_ctr[0]
        if c == self.count:
            return None
        self.my_buf[:] = self.other_buf
        self.count = c
        self.my_ctr[0] = c
        return int(self.other_stamp[0])

    def _read(self, fd, n, timeout):
        if not select.select([fd], [], [], max(0.0, timeout))[0]:
            return None
        data = os.read(fd, n)
        if not data:
            raise EOFError("peer closed the pipe")
        return data

    def st_open(self, role, nbytes):
        self.blocks = [self._view(s, np.uint8, 0, nbytes) for s in self._blocks("st", 4, nbytes)]
        self.fd = self._pipe(writer_is_parent=False)
        self.next = 0

    def st_buffer(self):
        return self.blocks[self.next % len(self.blocks)]

    def st_send(self):
        os.write(self.fd, struct.pack("<Q", self.next % len(self.blocks)))
        self.next += 1

    def st_recv(self, timeout):
        data = self._read(self.fd, 8, timeout)
        if data is None:
            return None
        arr = self.blocks[struct.unpack("<Q", data)[0]]
        return arr, time.monotonic_ns()

    TN = struct.Struct("<Qqq")      # block index, seq, stamp

    def tn_open(self, role, nbytes):
        n = nbytes // 4
        self.blocks = [self._view(s, np.float32, 0, n) for s in self._blocks("tn", 2, nbytes)]
        self.fd = self._pipe(writer_is_parent=False)        # producer (child) -> consumer
        self.ack_fd = self._pipe(writer_is_parent=True)     # consumer (parent) -> producer
        self.own = None
        self.next = 0

    def tn_buffer(self, n):
        if self.own is None or self.own.shape[0] != n:
            self.own = np.empty(n, np.float32)          # the producer's own array
        return self.own

    def tn_send(self, seq, stamp_ns):
        idx = self.next % len(self.blocks)
        np.copyto(self.blocks[idx], self.own)
        os.write(self.fd, self.TN.pack(idx, seq, stamp_ns))
        self.next += 1

    def tn_recv(self, timeout):
        data = self._read(self.fd, self.TN.size, timeout)
        if data is None:
            return None
        idx, _seq, stamp = self.TN.unpack(data)
        arr = self.blocks[idx]
        return arr, stamp, time.monotonic_ns()

    def tn_ack(self, seq):
        os.write(self.ack_fd, struct.pack("<q", seq))

    def tn_wait_ack(self, timeout):
        data = self._read(self.ack_fd, 8, timeout)
        return None if data is None else struct.unpack("<q", data)[0]

    def idle_open(self):
        self.idle_r, self.idle_w = os.pipe()

    def idle_wait(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._read(self.idle_r, 8, min(1.0, end - time.monotonic()))

    def close(self):
        self.blocks = self.my_buf = self.other_buf = self.my_ctr = self.other_ctr = None
        self.other_stamp = None
        self.views.clear()
        for shm in self.shms:
            try:
                shm.close()
            except Exception:
                pass
            if self.parent:
                try:
                    shm.unlink()
                except Exception:
                    pass
        for fd in self.fds + self.child_fds:
            try:
                os.close(fd)
            except OSError:
                pass


# ---------------------------------------------------------------------- pickle_uds ---
class PickleUdsBackend(Backend):
    """pickle over a Unix stream socket, length-prefixed frames, blocking recv."""
    name = "pickle_uds"
    config = {
        "pingpong": "pickle (protocol {proto}) of a tuple of the {msg} fields ({bytes} B "
                    "record, {wire} B pickled + 8 B length prefix) over an AF_UNIX stream "
                    "socket; blocking recv on both sides; ponger unpickles and re-pickles",
        "stream": "numpy array pickled (protocol {proto}, in-band) + 8 B length prefix over "
                  "an AF_UNIX stream socket; subscriber blocking recv_into a bytearray, then "
                  "pickle.loads (copy)",
        "tensor": "(seq, stamp, float32 array) pickled (protocol {proto}, in-band) over an "
                  "AF_UNIX stream socket; consumer blocking recv_into + pickle.loads; ack "
                  "frame back on the same socket",
        "cpu_idle_sub": "blocking recv (1 s socket timeout, looped) on an AF_UNIX socket "
                        "nobody writes",
    }
    HDR = struct.Struct("<Q")
    PROTO = pickle.HIGHEST_PROTOCOL

    def __init__(self, ident, rv=None):
        super().__init__(ident, rv)
        self.info["proto"] = self.PROTO
        self.sock = self.listener = None
        if self.parent:
            self.path = os.path.join(tempfile.gettempdir(), "pyb_%s.sock" % ident)
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.listener.bind(self.path)
            self.listener.listen(1)
        else:
            self.path = rv.get("path")


    def rendezvous(self):
        return {"path": self.path}

    def _conn(self):
        if self.sock is None:
            if self.parent:
                self.listener.settimeout(STARTUP_S)
                try:
                    self.sock, _ = self.listener.accept()
                except socket.timeout:
                    raise Skip("pickle_uds peer did not connect within %.0f s" % STARTUP_S)
            else:
                end = time.monotonic() + STARTUP_S
                while True:
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    try:
                        s.connect(self.path)
                        break
                    except OSError:
                        s.close()
                        if time.monotonic() > end:
                            raise
                        time.sleep(0.05)
                self.sock = s
            self.sock.settimeout(5.0)
        return self.sock

    def _send(self, data):
        s = self._conn()
        if len(data) < 65536:
            s.sendall(self.HDR.pack(len(data)) + data)
        else:
            s.sendall(self.HDR.pack(len(data)))
            s.sendall(data)

    def _recv_exact(self, n):
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if k == 0:
                raise EOFError("peer closed the socket")
            got += k
        return buf

    def _recv(self, timeout):
        """One whole frame (bytearray) or None if nothing starts within timeout."""
        s = self._conn()
        s.settimeout(timeout)
        try:
            hdr = self._recv_exact(self.HDR.size)
        except socket.timeout:
            return None
        s.settimeout(max(5.0, timeout))
        return self._recv_exact(self.HDR.unpack(hdr)[0])

    def pp_open(self, role, msg):
        rec = template(msg)
        self.fields = [v if not isinstance(v, list) else tuple(v)
                       for v in record_fields(rec).values()]
        self.info.update(msg=msg, bytes=rec.dtype.itemsize,
                         wire=len(pickle.dumps(tuple(self.fields), protocol=self.PROTO)))

    def pp_send(self, seq):
        self.fields[0] = seq
        self._send(pickle.dumps(tuple(self.fields), protocol=self.PROTO))

    def pp_poll(self):
        frame = self._recv(2.0)
        return None if frame is None else pickle.loads(frame)[0]

    def pp_echo(self):
        frame = self._recv(1.0)
        if frame is None:
            return None
        obj = pickle.loads(frame)
        self._send(pickle.dumps(obj, protocol=self.PROTO))
        return obj[0]

    def st_open(self, role, nbytes):
        self.arr = np.zeros(nbytes, np.uint8) if role == "pub" else None

    def st_buffer(self):
        return self.arr

    def st_send(self):
        self._send(pickle.dumps(self.arr, protocol=self.PROTO))

    def st_recv(self, timeout):
        frame = self._recv(timeout)
        if frame is None:
            return None
        arr = pickle.loads(frame)
        return arr, time.monotonic_ns()

    def tn_open(self, role, nbytes):
        self.own = None

    def tn_buffer(self, n):
        if self.own is None or self.own.shape[0] != n:
            self.own = np.empty(n, np.float32)
        return self.own

    def tn_send(self, seq, stamp_ns):
        self._send(pickle.dumps((seq, stamp_ns, self.own), protocol=self.PROTO))

    def tn_recv(self, timeout):
        frame = self._recv(timeout)
        if frame is None:
            return None
        _seq, stamp, arr = pickle.loads(frame)
        return arr, stamp, time.monotonic_ns()

    def tn_ack(self, seq):
        self._send(struct.pack("<q", seq))

    def tn_wait_ack(self, timeout):
        frame = self._recv(timeout)
        return None if frame is None else struct.unpack("<q", frame)[0]

    def idle_open(self):
        self.sock, self._peer = socket.socketpair()

    def idle_wait(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.sock.settimeout(max(0.001, min(1.0, end - time.monotonic())))
            try:
                self.sock.recv(8)
            except socket.timeout:
                pass

    def close(self):
        for s in (self.sock, self.listener):
            if s is not None:
                s.close()
        if self.parent:
            try:
                os.unlink(self.path)
            except OSError:
                pass


# ---------------------------------------------------------------------- sleep_loop ---
class SleepLoopBackend(Backend):
    """Plain-Python reference timer for `cpu --what timer_100hz`."""
    name = "sleep_loop"
    config = {"cpu_timer_100hz": "time.sleep to absolute deadlines (t0 + k*10 ms), trivial "
                                 "callback"}

    def timer_100hz(self, seconds):
        t0, ticks, acc = time.monotonic(), 0, 0
        end = t0 + seconds
        while True:
            nxt = t0 + (ticks + 1) * 0.01
            if nxt > end:
                return ticks
            sleep_until(nxt)
            ticks += 1
            acc += ticks            # the trivial work

    def idle_open(self):
        raise Skip("sleep_loop is only a timer reference (cpu --what timer_100hz)")


class NerveSpinBackend(NerveBackend):
    """nerve whose tensor consumer busy-waits (the regime of the ping-pong rows): the
    hand-off without a sleeping thread's wake-up."""
    name = "nerve_spin"
    tensor_wait = "spin"
    config = dict(NerveBackend.config, tensor=NerveBackend.config["tensor"].replace(
        "blocks (wait='block')", "busy-waits (wait='spin')", 1))


class ShmFloorBackend(ShmPipeBackend):
    """The tensor hand-off's floor: shm_pipe without its copy, so nothing but what any
    blocking hand-off needs: the producer writes the array in place in shared memory
    (the pool's kind: a /dev/shm file, 4 KiB pages), one os.pipe write wakes the blocked
    consumer, which takes a premade view. What a middleware adds shows against it."""
    name = "shm_floor"
    config = {"tensor": "floor: producer fills one of 2 shared_memory blocks in place (no "
                        "copy); os.pipe carries (index, seq, stamp); consumer blocks in "
                        "select()+os.read, premade zero-copy numpy view of the block; ack on "
                        "a second pipe"}

    def tn_buffer(self, n):
        return self.blocks[self.next % len(self.blocks)]

    def tn_send(self, seq, stamp_ns):
        os.write(self.fd, self.TN.pack(self.next % len(self.blocks), seq, stamp_ns))
        self.next += 1


SYSTEMS = {
    "nerve": NerveBackend,
    "nerve_spin": NerveSpinBackend,
    "shm_floor": ShmFloorBackend,
    "zenoh": ZenohBackend,
    "cyclonedds": CycloneBackend,
    "iceoryx2": Iceoryx2Backend,
    "shm_pipe": ShmPipeBackend,
    "pickle_uds": PickleUdsBackend,
    "sleep_loop": SleepLoopBackend,
}


def make_backend(system, ident, rv=None):
    if system not in SYSTEMS:
        raise Skip("unknown system %r" % system)
    try:
        return SYSTEMS[system](ident, rv)
    except Skip:
        raise
    except Exception as e:
        raise Skip("%s setup failed: %s: %s" % (system, type(e).__name__, e))


# --------------------------------------------------------------------------------------
# Child processes
# --------------------------------------------------------------------------------------

class Child:
    """A counterpart process, bounded by time; its stdout carries READY and a JSON result."""

    def __init__(self, argv, pass_fds=(), capture=True):
        log("spawn:", " ".join(shlex.quote(a) for a in argv))
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE if capture else 2,
                                  pass_fds=pass_fds)
        self.out = b""

    def _pump(self, timeout):
        if self.p.stdout is None:           # not captured (external ponger)
            time.sleep(timeout)
            return False
        fd = self.p.stdout.fileno()
        if select.select([fd], [], [], max(0.0, timeout))[0]:
            data = os.read(fd, 65536)
            self.out += data
            return bool(data)
        return False

    def wait_line(self, word, timeout):
        tok, end = word.encode() + b"\n", time.monotonic() + timeout
        while tok not in self.out:
            if time.monotonic() > end:
                return False
            if not self._pump(0.05) and self.p.poll() is not None:
                return tok in self.out
        return True

    def alive(self):
        return self.p.poll() is None

    def finish(self, timeout):
        """Wait for exit (kill past timeout); the last JSON line it printed, or None."""
        end = time.monotonic() + timeout
        while self.p.poll() is None and time.monotonic() < end:
            self._pump(0.05)
        if self.p.poll() is None:
            log("peer still running after %.1f s: terminating" % timeout)
            self.p.terminate()
            try:
                self.p.wait(3)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        while self._pump(0):
            pass
        for line in reversed(self.out.decode(errors="replace").splitlines()):
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    pass
        return None


def spawn_role(role, system, ident, backend, extra):
    argv = [sys.executable, os.path.abspath(__file__), "_role", role, "--system", system,
            "--ident", ident, "--rv", json.dumps(backend.rendezvous() if backend else {})]
    return Child(argv + [str(a) for a in extra], pass_fds=backend.pass_fds() if backend else ())


def child_failure(child, res, what):
    if isinstance(res, dict) and ("skipped" in res or "error" in res):
        return "%s: %s" % (what, res.get("skipped") or res.get("error"))
    return "%s exited (rc=%s) without a result" % (what, child.p.returncode)


# --------------------------------------------------------------------------------------
# Measurements (shared loops; backends only swap the send/recv parts)
# --------------------------------------------------------------------------------------

def wait_reply(b, expect, timeout):
    """Poll (busy for busy-poll systems) until the reply with seq == expect; stale count."""
    poll, clock = b.pp_poll, time.perf_counter
    end, stale = clock() + timeout, 0
    while True:
        s = poll()
        if s is not None:
            if s == expect:
                return stale
            stale += 1
        elif clock() > end:
            raise Skip("no reply with seq %d within %.1f s (peer hung or lost the message)"
                       % (expect, timeout))


def pp_handshake(b, child):
    """Send HELLO until it comes back: peer started and discovered (not busy: sleeps)."""
    end = time.monotonic() + STARTUP_S
    while time.monotonic() < end:
        if child is not None and not child.alive():
            raise Skip(child_failure(child, child.finish(1), "ponger"))
        b.pp_send(HELLO)
        for _ in range(20):
            if b.pp_poll() == HELLO:
                return
            time.sleep(0.005)
    raise Skip("ponger did not answer within %.0f s" % STARTUP_S)


def measure_pingpong(a, ident):
    if a.pong_cmd and a.system != "nerve":
        raise Skip("--pong-cmd is only supported with --system nerve (topic names)")
    if a.pong_system not in (None, a.system) and not a.pong_cmd:
        raise Skip("a ponger of another system (%s) needs --pong-cmd" % a.pong_system)
    b = make_backend(a.system, ident)
    child, connected = None, False
    try:
        if a.pong_cmd:
            # External ponger (e.g. a Rust nerve ponger): it gets the topic names appended.
            ping_t, pong_t = b.topic("ping"), b.topic("pong")
            b.pp_open("ping", a.msg, ping_topic=ping_t, pong_topic=pong_t)
            child = Child(shlex.split(a.pong_cmd) + ["--ping-topic", ping_t,
                                                     "--pong-topic", pong_t], capture=False)
        else:
            b.pp_open("ping", a.msg)
            child = spawn_role("pong", a.pong_system or a.system, ident, b,
                               ["--msg", a.msg, "--seconds", a.timeout + STARTUP_S + 10])
        pp_handshake(b, child)
        connected = True
        log("ponger up; %d warm-up + %d measured round trips" % (a.warmup, a.count))
        t_end = time.monotonic() + a.timeout
        rtt, stale = [], 0
        send, clock = b.pp_send, time.perf_counter_ns
        for i in range(a.warmup + a.count):
            t0 = clock()
            send(i)
            stale += wait_reply(b, i, 2.0)
            t1 = clock()
            if i >= a.warmup:
                rtt.append(t1 - t0)
            if (i & 1023) == 0 and time.monotonic() > t_end:
                raise Skip("ping-pong exceeded --timeout %.0f s after %d round trips"
                           % (a.timeout, i))
        one_way = [r // 2 for r in rtt]
        samples, stride = limited(one_way)
        return {"system": a.system, "pong_system": a.pong_system or a.system,
                "msg": a.msg, "bytes": MSG_DTYPES[a.msg].itemsize, "count": a.count,
                "warmup": a.warmup, "config": b.describe("pingpong")
                + ("; external ponger: " + a.pong_cmd if a.pong_cmd else ""),
                "version": b.version(), "one_way_ns": stats(one_way),
                "rtt_ns": stats(rtt), "stale_replies": stale,
                "samples_ns": samples, "samples_stride": stride}
    finally:
        if connected:
            try:
                b.pp_send(STOP)
            except Exception:
                pass
        if child is not None:
            child.finish(5.0)
        b.close()


def measure_stream(a, ident):
    b = make_backend(a.system, ident)
    child = None
    try:
        b.st_open("sub", a.bytes)
        child = spawn_role("stream_pub", a.system, ident, b,
                           ["--bytes", a.bytes, "--rate", a.rate, "--seconds", a.seconds])
        lat, received, corrupt, stopped = [], 0, 0, False
        end = time.monotonic() + STARTUP_S + a.seconds + 10
        while time.monotonic() < end:
            # after STOP keep draining (the publisher repeats it) until the stream is quiet
            try:
                got = b.st_recv(0.2 if stopped else min(1.0, max(0.0, end - time.monotonic())))
            except EOFError:                # the publisher closed its end
                break
            if got is None:
                if stopped or not child.alive():
                    break
                continue
            arr, t = got
            stamp, seq = (int(x) for x in arr[:16].view(np.int64))
            ok = arr.shape == (a.bytes,) and arr[-1] == (seq & 0xFF)
            del arr
            b.st_release()
            if seq < 0:
                stopped = stopped or seq == STOP
                continue
            lat.append(t - stamp)
            received += 1
            corrupt += not ok
        res = child.finish(10.0)
        if not isinstance(res, dict) or "sent" not in res:
            raise Skip(child_failure(child, res, "publisher"))
        samples, stride = limited(lat)
        return {"system": a.system, "bytes": a.bytes, "rate": a.rate, "seconds": a.seconds,
                "config": b.describe("stream"), "version": b.version(),
                "latency_ns": stats(lat), "received": received, "sent": res["sent"],
                "lost": res["sent"] - received, "corrupt": corrupt,
                "late_sends": res.get("late", 0), "samples_ns": samples,
                "samples_stride": stride}
    finally:
        if child is not None and child.alive():
            child.finish(5.0)
        b.close()


def role_stream_pub(a, b):
    b.st_open("pub", a.bytes)
    if not b.wait_matched(STARTUP_S):
        raise Skip("publisher saw no subscriber within %.0f s" % STARTUP_S)
    period = 1.0 / a.rate
    n_warm, n_meas = max(5, int(0.5 * a.rate)), int(round(a.rate * a.seconds))
    seqs = [WARMUP] * n_warm + list(range(n_meas)) + [STOP] * 3
    t0, sent, late = time.monotonic() + period, 0, 0
    for k, seq in enumerate(seqs):
        deadline = t0 + k * period
        if time.monotonic() > deadline + period:
            late += 1
        sleep_until(deadline)
        buf = b.st_buffer()
        buf.fill(seq & 0xFF)                       # write the whole payload
        hdr = buf[:16].view(np.int64)
        hdr[1] = seq
        hdr[0] = time.monotonic_ns()               # send-time stamp, first 8 bytes
        del buf, hdr                               # nerve refuses to send a viewed loan
        b.st_send()
        sent += seq >= 0
    return {"sent": sent, "late": late}


def measure_tensor(a, ident):
    b = make_backend(a.system, ident)
    nbytes = int(a.mb * (1 << 20))
    child = None
    try:
        b.tn_open("consumer", nbytes)
        child = spawn_role("tensor_producer", a.system, ident, b,
                           ["--bytes", nbytes, "--count", a.count, "--warmup", a.warmup])
        if not b.wait_matched(STARTUP_S):
            raise Skip("consumer saw no producer within %.0f s" % STARTUP_S)
        n, lat, bad = nbytes // 4, [], 0
        for i, seq in enumerate(range(-a.warmup, a.count)):
            got = b.tn_recv(STARTUP_S if i == 0 else 30.0)
            if got is None:
                raise Skip(child_failure(child, child.finish(1), "producer")
                           if not child.alive() else "no tensor %d within timeout" % seq)
            arr, stamp, t = got
            ok = arr.shape == (n,) and arr[0] == seq and arr[-1] == seq
            bad += not ok
            del arr
            b.tn_release()
            b.tn_ack(seq)
            if seq >= 0:
                lat.append(t - stamp)
        res = child.finish(10.0)
        samples, stride = limited(lat)
        out = {"system": a.system, "mb": a.mb, "bytes": nbytes, "count": a.count,
               "config": b.describe("tensor") + "; t_recv taken once the consumer holds the "
               "numpy array, then shape/first/last checked", "version": b.version(),
               "latency_ns": stats(lat), "bad_values": bad, "samples_ns": samples,
               "samples_stride": stride}
        if isinstance(res, dict) and "error" in res:
            out["producer_error"] = res["error"]
        return out
    finally:
        if child is not None and child.alive():
            child.finish(5.0)
        b.close()


def role_tensor_producer(a, b):
    b.tn_open("producer", a.bytes)
    if not b.wait_matched(STARTUP_S):
        raise Skip("producer saw no consumer within %.0f s" % STARTUP_S)
    n = a.bytes // 4
    for seq in range(-a.warmup, a.count):
        arr = b.tn_buffer(n)
        arr.fill(seq)                   # the data (in the system's buffer where it has one)
        del arr
        b.tn_send(seq, time.monotonic_ns())     # stamp after the data is written
        ack = b.tn_wait_ack(30.0)
        if ack != seq:
            raise Skip("producer: ack %r for tensor %d" % (ack, seq))
    return {"sent": a.count}


def measure_cpu(a, ident):
    b = make_backend(a.system, ident)           # import check + config line in this process
    key = "cpu_" + a.what
    if key not in b.config:
        b.close()
        if a.what == "timer_100hz":
            raise Skip("no timer/executor in the %s Python API; use --system sleep_loop"
                       % a.system)
        if a.what == "idle_srv":
            raise Skip("no idle service server point for %s (nerve only)" % a.system)
        raise Skip("%s has no idle subscriber" % a.system)
    config = b.describe(key)
    b.close()
    run_for = 1.0 + a.seconds + 1.0
    child = spawn_role("cpu", a.system, ident, None,
                       ["--what", a.what, "--seconds", run_for])
    try:
        if not child.wait_line("READY", STARTUP_S):
            raise Skip(child_failure(child, child.finish(1), "cpu peer"))
        time.sleep(1.0)                                         # warm-up
        pid = child.p.pid
        w0, c0, n0, r0 = time.monotonic(), proc_cpu_ticks(pid), proc_cpu_ns(pid), proc_runs(pid)
        time.sleep(a.seconds)
        w1, c1, n1, r1 = time.monotonic(), proc_cpu_ticks(pid), proc_cpu_ns(pid), proc_runs(pid)
        res = child.finish(run_for + 10.0)
        hz = os.sysconf("SC_CLK_TCK")
        cpu_s, wall = (c1 - c0) / hz, w1 - w0
        out = {"system": a.system, "what": a.what, "seconds": a.seconds, "config": config,
               "version": b.version(), "cpu_percent": 100.0 * cpu_s / wall,
               "cpu_seconds": cpu_s, "wall_seconds": wall, "clock_ticks_per_s": hz,
               "resolution_percent": 100.0 / (hz * wall),
               "cpu_percent_schedstat": 100.0 * (n1 - n0) / 1e9 / wall,
               "wakeups_per_s": (r1 - r0) / wall,
               "method": "cpu_percent: utime+stime of the peer process (all threads) from "
                         "/proc/<pid>/stat, clock-tick resolution; cpu_percent_schedstat: sum "
                         "of /proc/<pid>/task/*/schedstat on-CPU ns (threads alive at both "
                         "reads); wakeups_per_s: sum of their schedstat run counts (field 3)"}
        if isinstance(res, dict):
            out["peer"] = res
        return out
    finally:
        if child.alive():
            child.finish(5.0)


def role_cpu(a, b):
    if a.what == "idle_sub":
        b.idle_open()
        emit_ready()
        t0 = time.monotonic()
        b.idle_wait(a.seconds)
        return {"idle_s": time.monotonic() - t0}
    if a.what == "idle_srv":
        t0 = time.monotonic()
        b.idle_srv(a.seconds)           # emits READY once it serves
        return {"idle_s": time.monotonic() - t0}
    emit_ready()
    t0 = time.monotonic()
    ticks = b.timer_100hz(a.seconds)
    el = time.monotonic() - t0
    return {"ticks": ticks, "elapsed_s": el, "rate_hz": ticks / el if el else None}


def role_pong(a, b):
    if a.ping_topic or a.pong_topic:        # used as an external ponger (--pong-cmd)
        b.pp_open("pong", a.msg, ping_topic=a.ping_topic, pong_topic=a.pong_topic)
    else:
        b.pp_open("pong", a.msg)
    end = time.monotonic() + a.seconds
    echo, n = b.pp_echo, 0
    while True:
        s = echo()
        if s is None:
            if time.monotonic() > end:
                break
            continue
        if s == STOP:
            break
        n += 1
    return {"echoed": n}


def emit_ready():
    _OUT.write("READY\n")
    _OUT.flush()


def measure_probe(a, ident):
    out = {}
    for name in SYSTEMS:
        try:
            b = make_backend(name, ident)
            out[name] = {"ok": True, "version": b.version()}
            b.close()
        except Skip as e:
            out[name] = {"ok": False, "skipped": str(e)}
    return {"systems": out, "python": sys.version.split()[0], "numpy": np.__version__}


MEASUREMENTS = {"pingpong": measure_pingpong, "stream": measure_stream,
                "tensor": measure_tensor, "cpu": measure_cpu, "probe": measure_probe}
ROLES = {"pong": role_pong, "stream_pub": role_stream_pub,
         "tensor_producer": role_tensor_producer, "cpu": role_cpu}


class _Parser(argparse.ArgumentParser):
    def error(self, message):               # still exactly one JSON object on stdout
        self.print_usage(sys.stderr)
        emit({"error": "usage: %s" % message})
        sys.exit(2)


def parse_args(argv):
    p = _Parser(description=__doc__.split("\n\n")[0])
    sp = p.add_subparsers(dest="measurement", required=True)

    def sub(name, help_):
        q = sp.add_parser(name, help=help_)
        q.add_argument("--system", required=name != "probe", choices=sorted(SYSTEMS))
        return q

    q = sub("pingpong", "busy-waiting ping-pong, one-way = RTT/2")
    q.add_argument("--msg", choices=sorted(MSG_DTYPES), default="cmdvel")
    q.add_argument("--count", type=int, default=10000)
    q.add_argument("--warmup", type=int, default=1000)
    q.add_argument("--pong-system", default=None,
                   help="ponger system if different (with --pong-cmd: just a label)")
    q.add_argument("--pong-cmd", default=None,
                   help="external ponger command; gets --ping-topic T --pong-topic T appended")
    q.add_argument("--timeout", type=float, default=300.0)
    q = sub("stream", "one-way rate-driven stream, blocking subscriber")
    q.add_argument("--bytes", type=int, default=1024)
    q.add_argument("--rate", type=float, default=100.0)
    q.add_argument("--seconds", type=float, default=10.0)
    q = sub("tensor", "float32 array hand-off between processes")
    q.add_argument("--mb", type=float, default=1.0)
    q.add_argument("--count", type=int, default=100)
    q.add_argument("--warmup", type=int, default=2)
    q = sub("cpu", "CPU %% and wake-ups of an idle subscriber, an idle service server or a "
                   "100 Hz timer")
    q.add_argument("--what", choices=["idle_sub", "idle_srv", "timer_100hz"], default="idle_sub")
    q.add_argument("--seconds", type=float, default=10.0)
    sub("probe", "which systems are usable here")

    r = sp.add_parser("_role")             # internal: the counterpart processes
    r.add_argument("role", choices=sorted(ROLES))
    r.add_argument("--system", required=True)
    r.add_argument("--ident", required=True)
    r.add_argument("--rv", default="{}")
    r.add_argument("--msg", default="cmdvel")
    r.add_argument("--bytes", type=int, default=0)
    r.add_argument("--rate", type=float, default=100.0)
    r.add_argument("--seconds", type=float, default=60.0)
    r.add_argument("--count", type=int, default=0)
    r.add_argument("--warmup", type=int, default=0)
    r.add_argument("--what", default="idle_sub")
    r.add_argument("--ping-topic", default=None)
    r.add_argument("--pong-topic", default=None)
    return p.parse_args(argv)


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if a.measurement == "_role":
        b = None
        try:
            rv = None if a.role == "cpu" else json.loads(a.rv)   # cpu peer stands alone
            b = make_backend(a.system, a.ident, rv)
            res = ROLES[a.role](a, b)
        except Skip as e:
            res = {"skipped": str(e)}
        except (EOFError, BrokenPipeError, ConnectionError) as e:
            res = {"error": "peer went away: %s" % e}
        except Exception as e:
            res = {"error": "%s: %s" % (type(e).__name__, e)}
        finally:
            if b is not None:
                try:
                    b.close()
                except Exception:
                    pass
        emit(res)
        return 0 if "error" not in res and "skipped" not in res else 3

    ident = "%dx%s" % (os.getpid(), secrets.token_hex(3))
    head = {"measurement": a.measurement}
    for k in ("system", "msg", "bytes", "mb", "what"):
        if getattr(a, k, None) is not None:
            head[k] = getattr(a, k)
    try:
        res = MEASUREMENTS[a.measurement](a, ident)
    except Skip as e:
        res = {"skipped": str(e)}
    except Exception as e:
        import traceback
        traceback.print_exc()
        res = {"skipped": "error: %s: %s" % (type(e).__name__, e)}
    out = dict(head)
    out.update(res)
    emit(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
