"""The installed wheel, used as a user would use it: run by scripts/wheel from outside the
checkout with a fresh virtual environment's python, so `import nerve` is the wheel's.

Checks a topic (publish, receive the same values), a service (a Python server on its own
thread, a call), and a tensor (allocated in a pool, published as a descriptor, opened
zero-copy through a second context). Exits non-zero, saying what failed, otherwise."""

import os
import sys
import threading

import numpy as np

import nerve
from nerve import msgs, srv


def check(cond, what):
    if not cond:
        raise SystemExit(f"wheel smoke: {what}")


def topic(ctx):
    node = ctx.node("smoke_talker")
    sub = node.create_subscription(msgs.CmdVel, "/smoke/cmd_vel")
    pub = node.create_publisher(msgs.CmdVel, "/smoke/cmd_vel")
    check(pub.wait_for_subscribers(1, 5.0), "the subscriber was never matched")
    m = pub.loan()
    m.linear = 0.5
    m.angular = -1.25
    m.send()
    got = sub.recv(timeout=5.0)
    check(got is not None, "no CmdVel arrived within 5 s")
    check((got.linear, got.angular) == (0.5, -1.25), f"CmdVel changed on the way: {got}")


def service(domain, ctx):
    ready, stop, errors = threading.Event(), threading.Event(), []

    def serve():  # a node belongs to the thread of its context: the server gets its own
        try:
            sctx = nerve.Context(domain)
            snode = sctx.node("smoke_server")
            snode.create_service(srv.AddTwoInts, "/smoke/add", lambda r: {"value": r.a + r.b})
            ex = nerve.Executor()
            ex.add_node(snode)
            ready.set()
            while not stop.is_set():
                ex.spin_once(0.05)
        except Exception as e:  # reported by the caller
            errors.append(e)
            ready.set()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        check(ready.wait(10) and not errors, f"the server did not start: {errors}")
        client = ctx.node("smoke_client").create_client(srv.AddTwoInts, "/smoke/add")
        check(client.wait_for_service(10.0), "the service never appeared")
        value = client.call(a=2, b=40, timeout=5.0).value
        check(value == 42, f"2 + 40 came back as {value}")
    finally:
        stop.set()
        t.join(10)


def tensor(domain, ctx):
    node = ctx.node("smoke_producer")
    pool = nerve.TensorPool(ctx, "smoke", slots=2, slot_bytes=1 << 20)
    other = nerve.Context(domain)  # stands in for another process
    sub = other.node("smoke_consumer").create_subscription(nerve.TensorDescriptor, "/smoke/t")
    pub = node.create_publisher(nerve.TensorDescriptor, "/smoke/t")
    t = pool.alloc((64, 64), "float32")
    t.numpy()[:] = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    frozen = t.freeze()
    check(pub.wait_for_subscribers(1, 5.0), "the tensor subscriber was never matched")
    pub.publish(frozen)
    desc = sub.recv(5.0)
    check(desc is not None, "no tensor descriptor arrived within 5 s")
    view = nerve.TensorPool.open(other, "smoke").open(desc).numpy()
    check(view.shape == (64, 64) and view.dtype == np.float32, f"tensor {view.shape} {view.dtype}")
    check(np.array_equal(view, frozen.numpy()), "the tensor's values differ")


def main():
    here = os.path.dirname(os.path.abspath(nerve.__file__))
    check("site-packages" in here, f"nerve imported from {here}, not from the installed wheel")
    domain = int(os.environ.get("NERVE_DOMAIN", "611"))
    ctx = nerve.Context(domain)
    topic(ctx)
    service(domain, ctx)
    tensor(domain, ctx)
    print(f"wheel smoke: topic, service and tensor ok (nerve from {here})")


if __name__ == "__main__":
    sys.exit(main())
