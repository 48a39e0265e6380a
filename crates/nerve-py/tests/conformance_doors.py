"""The doors of the conformance matrix (test_conformance.py): one thin driver per way into
Nerve, each with the same small command set and the same outcome vocabulary.

A command returns, for each message given, an outcome: ``{"ok": value}`` (the message as
JSON, as ``nerve topic echo`` prints it) or ``{"error": kind, "message": text}`` with
``kind`` one of ``KINDS``. A door that cannot express a command says why in
``Door.cannot`` (the test skips it with that reason, never silently). A door added later
implements ``roundtrip`` and joins every scenario.
"""

from __future__ import annotations

import json
import math
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional

import numpy as np

import nerve

# the shared vocabulary of error kinds
KINDS = ("bad_name", "type_mismatch", "too_large", "out_of_range", "bad_value",
         "unknown_type", "no_server", "server_gone", "handler_failed", "timeout",
         "too_many_in_flight", "rejected", "malformed", "failed")

# the kinds that are typed in the C ABI and C++ (a status code and an exception class
# each, issue 45): the C++ door must report them from the class, never leave them to be
# read from the text
TYPED_KINDS = ("too_large", "no_server", "server_gone", "handler_failed", "timeout",
               "too_many_in_flight", "rejected", "malformed")

# how long one message may take to come back through a door
TIMEOUT = 20.0


def kind_of(message: str) -> str:
    """The kind of an error from its text: the one place messages map to kinds, for the
    doors that report errors as text (the CLI's one-line error, Python's exceptions).
    The texts are those of Nerve's error enums (nerve::error, message::json::number)."""
    if message.startswith("invalid name") or ": invalid name " in message:
        return "bad_name"
    if " has type " in message and " was requested" in message:
        return "type_mismatch"
    if "exceeds the maximum of" in message:
        return "too_large"
    if "out of range for" in message or "out of bounds for" in message:
        return "out_of_range"
    if "unknown message type" in message or "unknown service type" in message:
        return "unknown_type"
    if ": no server " in message:
        return "no_server"
    if "went away before responding" in message:
        return "server_gone"
    if ": handler failed: " in message:
        return "handler_failed"
    if ": no response within " in message or message.startswith("no reply within "):
        # the second: Python's own wait (PendingCall.wait) says it so
        return "timeout"
    if " calls in flight" in message:
        return "too_many_in_flight"
    if ": request rejected: " in message or ": goal rejected: " in message:
        return "rejected"
    if ": malformed response: " in message:
        return "malformed"
    if "expected " in message or " has no field " in message:
        return "bad_value"
    return "failed"


def error(kind: str, message: str) -> Dict[str, Any]:
    return {"error": kind, "message": message}


def outcome_kind(outcome: Dict[str, Any]) -> str:
    return "ok" if "ok" in outcome else outcome["error"]


def same_json(a: Any, b: Any) -> bool:
    """Equality of JSON values as Python reads them, exact for floats: -0.0 is not 0.0,
    NaN (the string "NaN" in Nerve's JSON) equals NaN."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        # 2 and 2.0 print differently: a door that prints one for the other differs
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


class Door:
    """A way into Nerve. ``roundtrip`` subscribes to ``topic`` (resolved as the door
    resolves names under ``env``'s NERVE_NAMESPACE and NERVE_REMAP), publishes each
    message of ``values`` as ``type_name`` and returns ``{"topic": resolved or None,
    "results": [outcome per message]}``."""

    name = "?"
    # whether ``spinner``'s process needs its topic made first (and prints no line)
    spinner_needs_topic = False

    def cannot(self, scenario: str) -> Optional[str]:
        """Why this door cannot run a scenario, or None."""
        return None

    def roundtrip(self, env: Dict[str, str], topic: str, type_name: str, values: List[Any],
                  max_payload: Optional[int] = None, unsent_loans: int = 0,
                  wait_clock: bool = False) -> Dict[str, Any]:
        """``unsent_loans``: first loan that many samples and drop each unsent;
        ``wait_clock``: first wait for the clock to leave 0 (simulation time). A message
        that came back carries its header's publish time as ``wall_ns``."""
        raise NotImplementedError

    def spinner(self, env: Dict[str, str], topic: str) -> List[str]:
        """The command of a process that spins a node with a CmdVel subscription on
        ``topic`` until Ctrl-C or SIGTERM; it prints a line once it spins."""
        raise NotImplementedError

    def call(self, env: Dict[str, str], service: str, type_name: str, request: Any,
             timeout: float) -> Dict[str, Any]:
        """Calls ``service`` of the standard service type ``type_name`` once, waiting up
        to ``timeout`` seconds for a server and then for the response: the response as
        JSON, or why there is none."""
        raise NotImplementedError


def _expand(outcome: Dict[str, Any], n: int) -> Dict[str, Any]:
    """An error of the whole command as that error for each message."""
    return {"topic": None, "results": [outcome] * n}


# ---------------------------------------------------------------------------------------
# Python: the nerve package in this process

_FLOAT_TEXT = {"NaN": math.nan, "nan": math.nan, "Infinity": math.inf, "inf": math.inf,
               "-Infinity": -math.inf, "-inf": -math.inf}


def _py_value(shape: tuple, v: Any, path: str) -> Any:
    """A JSON value as the Python value a field of ``shape`` (at ``path``) takes; the
    values themselves are the nerve package's to check."""
    kind = shape[0]
    if kind == "prim":
        name = shape[2]
        if name in ("f32", "f64") and isinstance(v, str):
            if v not in _FLOAT_TEXT:
                raise ValueError(f"{path}: expected a number, found {v!r}")
            return _FLOAT_TEXT[v]
        if name in ("u128", "i128") and isinstance(v, str):
            return int(v)
        return v
    if kind == "array":
        if not isinstance(v, list):
            raise TypeError(f"{path}: expected an array, found {v!r}")
        return [_py_value(shape[1], x, f"{path}[{i}]") for i, x in enumerate(v)]
    if kind == "struct":
        fields = {f[0]: f[2] for f in shape[3]}
        if not isinstance(v, dict):
            raise TypeError(f"{path}: expected an object, found {v!r}")
        return {k: _py_value(fields[k], x, f"{path}.{k}".lstrip(".")) if k in fields else x
                for k, x in v.items()}
    if kind == "opaque":
        return bytes(v)
    return v  # "str"


def f32_json(x: float) -> Any:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    # the shortest decimal that reads back to the same f32, as Nerve prints it
    return float(np.format_float_positional(np.float32(x), unique=True, trim="0")) \
        if x != 0 else x


def _f64_json(x: float) -> Any:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def _json_value(shape: tuple, v: Any) -> Any:
    """A field's Python value as Nerve's JSON."""
    kind = shape[0]
    if kind == "prim":
        name = shape[2]
        if name == "f32":
            return f32_json(float(v))
        if name == "f64":
            return _f64_json(float(v))
        if name in ("u128", "i128"):
            return str(int(v))
        return int(v)
    if kind == "array":
        return [_json_value(shape[1], x) for x in np.asarray(v).tolist()]
    if kind == "struct":
        return {f[0]: _json_value(f[2], getattr(v, f[0])) for f in shape[3]}
    if kind == "opaque":
        return list(v)
    return v


def _message_json(msg: Any, head: tuple, elem: Optional[tuple]) -> Dict[str, Any]:
    """A message as Nerve's JSON (as `nerve topic echo` prints it)."""
    out = {f[0]: _json_value(f[2], getattr(msg, f[0])) for f in head[3]}
    if elem is not None:
        items = msg._elems.tolist()
        out["elems_len"] = len(items)
        out["elems"] = [_json_value(elem, x) for x in items]
    return out


class PythonDoor(Door):
    """The ``nerve`` package, in this process. Its endpoints live as long as the door (as
    a node's do), so other subscribers may attach after a roundtrip."""

    name = "python"

    def __init__(self) -> None:
        self._alive: List[Any] = []

    def roundtrip(self, env, topic, type_name, values, max_payload=None, unsent_loans=0,
                  wait_clock=False):
        with _environ(env):
            ctx = nerve.Context()
        deadline = time.monotonic() + TIMEOUT
        while wait_clock and ctx.now_ns() == 0:
            if time.monotonic() > deadline:
                return _expand(error("timeout", f"the clock stayed at 0 for {TIMEOUT} s"),
                               len(values))
            time.sleep(0.005)
        mt = nerve.message_type(type_name)
        head, elem = mt.describe()
        qos = nerve.Qos(depth=64, max_payload=max_payload)
        node = ctx.node("conformance_py")
        self._alive.append(ctx)
        try:
            pub = node.create_publisher(mt, topic, qos)
            self._alive.append(pub)
            sub = node.create_subscription(mt, topic, qos=qos)
        except nerve.NerveError as e:
            return _expand(error(kind_of(str(e)), str(e)), len(values))
        try:
            for _ in range(unsent_loans):
                unsent = pub.loan()
                del unsent  # dropped unsent: back to the pool, never delivered
        except nerve.NerveError as e:
            return _expand(error(kind_of(str(e)), str(e)), len(values))
        results = []
        for v in values:
            try:
                msg = self._build(pub.message_class, head, elem, v)
                pub.publish(msg)
            except nerve.NerveError as e:
                results.append(error(kind_of(str(e)), str(e)))
                continue
            except (TypeError, ValueError, OverflowError, AttributeError) as e:
                # a value the field cannot take: out of range where Nerve says so
                kind = kind_of(str(e))
                results.append(error("bad_value" if kind == "failed" else kind, str(e)))
                continue
            got = sub.recv(timeout=TIMEOUT)
            if got is None:
                results.append(error("timeout", f"nothing came back within {TIMEOUT} s"))
                continue
            results.append({"ok": _message_json(got, head, elem), "wall_ns": got._header.wall_ns})
        return {"topic": pub.topic, "results": results}

    def spinner(self, env, topic):
        code = f"""
import nerve
node = nerve.Context().node("conformance_py")
node.create_subscription("nerve_msgs/CmdVel", {topic!r}, lambda m: None)
ex = nerve.Executor()
ex.add_node(node)
print("spinning", flush=True)
try:
    ex.spin()
except KeyboardInterrupt:  # how Ctrl-C reaches Python
    pass
print('{{"ok": "interrupted"}}')
"""
        return [sys.executable, "-c", code]

    def call(self, env, service, type_name, request, timeout):
        from nerve import srv
        with _environ(env):
            ctx = nerve.Context()
        self._alive.append(ctx)
        st = getattr(srv, type_name.rsplit("/", 1)[-1], None)
        if not isinstance(st, nerve.ServiceType):
            return error("unknown_type", f"unknown service type {type_name!r}")
        try:
            client = ctx.node("conformance_py").create_client(st, service)
        except nerve.NerveError as e:
            return error(kind_of(str(e)), str(e))
        if not client.wait_for_service(timeout):
            return error("no_server", f"service {service}: no server within {timeout} s")
        head = st.request._type.describe()[0]
        try:
            resp = client.call(_py_value(head, request, ""), timeout=timeout)
        except nerve.NerveError as e:
            return error(kind_of(str(e)), str(e))
        rhead = st.response._type.describe()[0]
        return {"ok": {f[0]: _json_value(f[2], getattr(resp, f[0])) for f in rhead[3]}}

    @staticmethod
    def _build(cls: type, head: tuple, elem: Optional[tuple], v: Any) -> Any:
        if not isinstance(v, dict):
            raise TypeError(f"expected a JSON object, found {v!r}")
        v = dict(v)
        elems = v.pop("elems", None)
        v.pop("elems_len", None)
        msg = cls(_elems=len(elems) if elems else 0)
        for k, x in _py_value(head, v, "").items():
            setattr(msg, k, x)
        if elems:
            # through the message's own slice attribute, as a user writes it
            setattr(msg, cls._slice_name,
                    [_py_value(elem, x, f"elems[{i}]") for i, x in enumerate(elems)])
        return msg


@contextmanager
def _environ(env: Dict[str, str]) -> Iterator[None]:
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(old)


# ---------------------------------------------------------------------------------------
# the CLI: `nerve topic echo` and `nerve topic pub`

def _cli_error(stderr: str) -> str:
    """The one-line error of a failed `nerve` command."""
    lines = [l for l in stderr.splitlines() if l.startswith("error: ")]
    return lines[-1][len("error: "):] if lines else stderr.strip()


class CliDoor(Door):
    """The `nerve` binary: `topic echo --format json` running while `topic pub --once`
    publishes each message."""

    name = "cli"
    spinner_needs_topic = True

    def __init__(self, binary) -> None:
        self.binary = str(binary)

    def cannot(self, scenario: str) -> Optional[str]:
        if scenario == "too_large":
            return "the CLI has no option for a topic's max_payload"
        if scenario == "unsent_loans":
            return "the CLI publishes whole messages: it has no loans"
        if scenario == "sim_time":
            return ("`nerve topic pub` cannot wait for the simulation clock's first time: its "
                    "one message may carry 0 (the clock before /clock speaks)")
        return None

    def _subscribers(self, env, topic) -> Optional[int]:
        """The topic's subscriber count (`nerve topic info`), None where it has none."""
        p = subprocess.run([self.binary, "topic", "info", topic, "--format", "json"], env=env,
                           capture_output=True, text=True, timeout=60)
        return json.loads(p.stdout)["subscribers"] if p.returncode == 0 else None

    def roundtrip(self, env, topic, type_name, values, max_payload=None, unsent_loans=0,
                  wait_clock=False):
        # on a topic that exists, `topic pub` may find another subscriber before echo's:
        # echo is waited for (a new topic's first pub waits for echo, its only subscriber)
        before = self._subscribers(env, topic)
        echo = subprocess.Popen(
            [self.binary, "topic", "echo", topic, "--format", "json", "--timeout", "60"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: "queue.Queue[Optional[str]]" = queue.Queue()

        def read() -> None:
            for line in echo.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        if before is not None:
            deadline = time.monotonic() + TIMEOUT
            while echo.poll() is None and time.monotonic() < deadline:
                if (self._subscribers(env, topic) or 0) > before:
                    break
                time.sleep(0.05)
        resolved = None
        results = []
        try:
            for v in values:
                p = subprocess.run(
                    [self.binary, "topic", "pub", topic, type_name, json.dumps(v), "--once",
                     "--wait-subscribers", "10"],
                    env=env, capture_output=True, text=True, timeout=60)
                if p.returncode != 0:
                    msg = _cli_error(p.stderr)
                    results.append(error(kind_of(msg), msg))
                    continue
                try:
                    line = lines.get(timeout=TIMEOUT)
                except queue.Empty:
                    line = None
                if line is None:
                    msg = _cli_error(echo.stderr.read()) if echo.poll() is not None else \
                        f"nothing came back within {TIMEOUT} s"
                    results.append(error(kind_of(msg) if echo.poll() is not None else "timeout",
                                         msg))
                    continue
                got = json.loads(line)
                resolved = got["topic"]
                results.append({"ok": got["msg"], "wall_ns": got["header"]["publish_wall_ns"]})
        finally:
            if echo.poll() is None:
                echo.send_signal(signal.SIGINT)
            try:
                echo.wait(timeout=30)
            except subprocess.TimeoutExpired:
                echo.kill()
                echo.wait()
        return {"topic": resolved, "results": results}


    def spinner(self, env, topic):
        # echo spins its node once the topic exists (the test makes it first)
        return [self.binary, "topic", "echo", topic, "--format", "json"]

    def call(self, env, service, type_name, request, timeout):
        p = subprocess.run(
            [self.binary, "service", "call", service, type_name, json.dumps(request),
             "--timeout", str(int(timeout * 1000)), "--format", "json"],
            env=env, capture_output=True, text=True, timeout=timeout * 2 + 60)
        if p.returncode != 0:
            msg = _cli_error(p.stderr)
            return error(kind_of(msg), msg)
        return {"ok": json.loads(p.stdout)}


# ---------------------------------------------------------------------------------------
# Rust: examples/src/bin/conformance.rs (nerve::RawPublisher, nerve::message::json)

class RustDoor(Door):
    """The Rust door binary: one process per command, the messages on stdin."""

    name = "rust"

    def __init__(self, binary) -> None:
        self.binary = str(binary)

    def roundtrip(self, env, topic, type_name, values, max_payload=None, unsent_loans=0,
                  wait_clock=False):
        cmd = [self.binary, "roundtrip", topic, type_name, "--unsent-loans", str(unsent_loans)]
        if wait_clock:
            cmd.append("--wait-clock")
        if max_payload is not None:
            cmd += ["--max-payload", str(max_payload)]
        p = subprocess.run(cmd, env=env, input=json.dumps(values), capture_output=True,
                           text=True, timeout=120)
        if p.returncode != 0:
            raise AssertionError(f"the Rust door failed (exit {p.returncode}): {p.stderr}")
        out = json.loads(p.stdout)
        if "results" not in out:
            return _expand(out, len(values))
        return out

    def spinner(self, env, topic):
        return [self.binary, "spin", topic, "nerve_msgs/CmdVel"]

    def call(self, env, service, type_name, request, timeout):
        p = subprocess.run(
            [self.binary, "call", service, type_name, "--timeout-ms", str(int(timeout * 1000))],
            env=env, input=json.dumps(request), capture_output=True, text=True,
            timeout=timeout * 2 + 60)
        if p.returncode != 0:
            raise AssertionError(f"the Rust door failed (exit {p.returncode}): {p.stderr}")
        return json.loads(p.stdout)


# ---------------------------------------------------------------------------------------
# C++: examples/cpp/conformance.cpp (nerve.hpp, typed messages written through a loan)

def cpp_kind(outcome: Dict[str, Any]) -> str:
    """The kind of a C++ door's error: the door's own word when it gives one (from the
    exception's class); a status without a kind of its own (NERVE_ERR_TOPIC, ...) is read
    from the message, and must not be a typed kind (that would be C++ failing to type it)."""
    if outcome["error"] in KINDS:
        return outcome["error"]
    kind = kind_of(outcome["message"])
    assert kind not in TYPED_KINDS, (
        f"the C++ door reported {outcome['error']} for a {kind} error: C++ must type it "
        f"({outcome['message']})")
    return kind


class CppDoor(Door):
    """The C++ door binary. C++ has no JSON: each message goes in as its payload bytes
    (built from the JSON by the nerve package, whose conversions the Python door checks)
    and comes back as bytes, shown as JSON the same way."""

    name = "cpp"

    def __init__(self, binary) -> None:
        self.binary = str(binary)

    def cannot(self, scenario: str) -> Optional[str]:
        if scenario.startswith("bad_value"):
            return ("C++ writes typed fields: a JSON or Python value the field cannot take "
                    "never reaches it (the compiler refuses it)")
        return None

    def roundtrip(self, env, topic, type_name, values, max_payload=None, unsent_loans=0,
                  wait_clock=False):
        mt = nerve.message_type(type_name)
        head, elem = mt.describe()
        cls = nerve.message_class(mt)
        lines = []
        for v in values:
            msg = PythonDoor._build(cls, head, elem, v)
            n = len(msg._elems) if elem is not None else 0
            lines.append(f"{n} {msg._bytes().hex()}")
        cmd = [self.binary, "--topic", topic, "--type", type_name,
               "--unsent-loans", str(unsent_loans)]
        if max_payload is not None:
            cmd += ["--max-payload", str(max_payload)]
        if wait_clock:
            cmd.append("--wait-clock")
        p = subprocess.run(cmd, env=env, input="\n".join(lines) + "\n", capture_output=True,
                           text=True, timeout=120)
        if p.returncode != 0:
            raise AssertionError(f"the C++ door failed (exit {p.returncode}): {p.stderr}")
        out = json.loads(p.stdout)
        if "results" not in out:
            return _expand(error(cpp_kind(out), out["message"]), len(values))
        results = []
        for r in out["results"]:
            if "ok_hex" not in r:
                results.append(error(cpp_kind(r), r["message"]))
                continue
            data = bytes.fromhex(r["ok_hex"])
            buf = nerve._nerve.heap_buffer(len(data))
            buf.write_bytes(0, data)
            results.append({"ok": _message_json(cls._wrap(buf), head, elem),
                            "wall_ns": r["wall_ns"]})
        return {"topic": out["topic"], "results": results}


    def spinner(self, env, topic):
        return [self.binary, "--spin", topic, "--type", "nerve_msgs/CmdVel"]

    def call(self, env, service, type_name, request, timeout):
        from nerve import srv
        st = getattr(srv, type_name.rsplit("/", 1)[-1])
        head = st.request._type.describe()[0]
        req = PythonDoor._build(st.request, head, None, request)
        p = subprocess.run(
            [self.binary, "--call", service, "--type", type_name,
             "--timeout-ms", str(int(timeout * 1000))],
            env=env, input=f"0 {req._bytes().hex()}\n", capture_output=True, text=True,
            timeout=timeout * 2 + 60)
        if p.returncode != 0:
            raise AssertionError(f"the C++ door failed (exit {p.returncode}): {p.stderr}")
        out = json.loads(p.stdout)
        if "ok_hex" not in out:
            return error(cpp_kind(out), out["message"])
        data = bytes.fromhex(out["ok_hex"])
        buf = nerve._nerve.heap_buffer(len(data))
        buf.write_bytes(0, data)
        rhead = st.response._type.describe()[0]
        return {"ok": _message_json(st.response._wrap(buf), rhead, None)}
