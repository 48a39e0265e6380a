"""Services from Python: callbacks, synchronous, pipelined and asyncio calls, errors,
and Rust <-> Python both ways."""

import asyncio
import subprocess
import threading
import time

import pytest

import nerve
from nerve import srv
from conftest import target_bin


class ServerThread:
    """A Python server on its own thread (its own context: nodes are single-threaded)."""

    def __init__(self, domain, name, callback, ty=srv.AddTwoInts):
        self.ready = threading.Event()
        self.stop = False
        self.error = None
        self.thread = threading.Thread(target=self.run, args=(domain, name, callback, ty), daemon=True)
        self.thread.start()
        assert self.ready.wait(30), self.error

    def run(self, domain, name, callback, ty):
        try:
            ctx = nerve.Context(domain)
            node = ctx.node("py_server")
            node.create_service(ty, name, callback)
            ex = nerve.Executor()
            ex.add_node(node)
            self.ready.set()
            while not self.stop:
                ex.spin_once(0.05)
        except Exception as e:  # surfaced by the test through `error`
            self.error = e
            self.ready.set()

    def close(self):
        self.stop = True
        self.thread.join(10)


@pytest.fixture
def adder(domain):
    s = ServerThread(domain, "/add", lambda req: {"value": req.a + req.b})
    yield s
    s.close()


def test_call_a_python_server(node, adder):
    client = node.create_client(srv.AddTwoInts, "/add")
    assert client.wait_for_service(10.0)
    assert client.call(a=2, b=40, timeout=5.0).value == 42
    assert client.call({"a": -1, "b": 1}, timeout=5.0).value == 0
    req = srv.AddTwoInts.request(a=3, b=4)
    assert client.call(req, timeout=5.0).value == 7


def test_pipelined_calls(node, adder):
    client = node.create_client(srv.AddTwoInts, "/add")
    assert client.wait_for_service(10.0)
    calls = [client.send(a=i, b=i) for i in range(6)]
    assert [c.wait(5.0).value for c in calls] == [2 * i for i in range(6)]


def test_asyncio_calls_keep_the_loop_running(node, adder):
    client = node.create_client(srv.AddTwoInts, "/add")
    assert client.wait_for_service(10.0)
    ticks = []

    async def ticker():
        for _ in range(1000):
            ticks.append(1)
            await asyncio.sleep(0)

    async def main():
        t = asyncio.ensure_future(ticker())
        replies = await asyncio.gather(*(client.call_async(a=i, b=1, timeout=5.0) for i in range(3)))
        t.cancel()
        return [r.value for r in replies]

    assert asyncio.run(main()) == [1, 2, 3]
    assert ticks, "the event loop ran other tasks while the calls were in flight"


def test_an_exception_in_the_callback_reaches_the_caller(node, domain):
    def bad(req):
        raise ValueError(f"cannot add {req.a}")

    s = ServerThread(domain, "/bad", bad)
    try:
        client = node.create_client(srv.AddTwoInts, "/bad")
        assert client.wait_for_service(10.0)
        with pytest.raises(nerve.CallError, match="ValueError: cannot add 5"):
            client.call(a=5, b=0, timeout=5.0)
        # a response of the wrong type is an error for the caller too, never a crash
    finally:
        s.close()


def test_no_server_and_bad_requests(node):
    client = node.create_client(srv.AddTwoInts, "/nobody")
    assert not client.wait_for_service(0.05)
    with pytest.raises(nerve.CallError):
        client.call(a=1, b=2, timeout=0.2)
    with pytest.raises(TypeError, match="expected a TwoInts"):
        client.send(nerve.msgs.CmdVel())
    with pytest.raises(AttributeError, match="no field"):
        client.send(c=3)


def test_python_calls_the_rust_server(node, domain):
    server = subprocess.Popen([target_bin("add_server"), "--name", "/rust_add"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        client = node.create_client(srv.AddTwoInts, "/rust_add")
        assert client.wait_for_service(30.0)
        assert client.call(a=20, b=22, timeout=5.0).value == 42
    finally:
        server.terminate()
        server.wait(10)


def test_the_cli_calls_a_python_server(adder):
    out = subprocess.run([str(target_bin("nerve")), "service", "call", "/add", "AddTwoInts",
                          '{"a": 2, "b": 3}', "--format", "json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert '"value": 5' in out.stdout.replace(":5", ": 5")
