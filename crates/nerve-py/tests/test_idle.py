"""An idle executor sleeps: a node with a service server, an action server, a subscription
callback or a slow timer, spinning on its own thread, is woken (scheduled onto a CPU) only
a few times a second, not once per millisecond of polling. Counted from the spinning
thread's /proc/self/task/<tid>/schedstat (third field: times it was run on a CPU)."""

import threading
import time

import numpy as np
import pytest

import nerve
from nerve import msgs, srv

# An idle spin may wake now and then (the transport's 1 s re-check, signal checks on the
# main thread); a poller wakes hundreds of times a second.
MAX_IDLE_WAKEUPS_PER_S = 10


def runs_on_cpu(tid):
    """How many times the thread ``tid`` of this process was put on a CPU so far."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[2])
    except FileNotFoundError:  # a kernel without schedstat: count context switches
        with open(f"/proc/self/task/{tid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if "ctxt_switches" in line)
        return sum(int(v) for v in fields.values())


class Spinner:
    """Spins a node made by ``setup(node)`` with ``Executor.spin`` on its own thread (its
    own context: nodes are single-threaded)."""

    def __init__(self, domain, setup):
        self.ready = threading.Event()
        self.error = None
        self.ex = None
        self.tid = None

        def run():
            try:
                node = nerve.Context(domain).node("idle")
                self.keep = setup(node)
                self.ex = nerve.Executor()
                self.ex.add_node(node)
                self.tid = threading.get_native_id()
                self.ready.set()
                self.ex.spin()
            except BaseException as e:  # surfaced by stop()
                self.error = e
                self.ready.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert self.ready.wait(30), "the spinner did not start"
        assert self.error is None, self.error

    def wakeups_per_s(self, seconds=1.5):
        time.sleep(0.3)  # let it settle into its wait
        n0, t0 = runs_on_cpu(self.tid), time.monotonic()
        time.sleep(seconds)
        n1, t1 = runs_on_cpu(self.tid), time.monotonic()
        assert self.thread.is_alive(), self.error
        return (n1 - n0) / (t1 - t0)

    def stop(self):
        """Shuts the executor down from this thread; returns how long the spin took to
        return."""
        t0 = time.monotonic()
        self.ex.shutdown()
        self.thread.join(10)
        took = time.monotonic() - t0
        assert not self.thread.is_alive(), "spin() did not return after shutdown()"
        if self.error is not None:
            raise self.error
        return took


def serve_adder(node):
    return node.create_service(srv.AddTwoInts, "/idle_add", lambda r: {"value": r.a + r.b})


def serve_fibonacci(node):
    def accepted(goal):
        order = goal.goal.order
        seq = [0, 1][: order + 1]
        while len(seq) <= order:
            seq.append(seq[-1] + seq[-2])
        goal.succeed(len=len(seq), data=np.array(seq, dtype=np.int64))

    return node.create_action_server("/idle_fib", "Fibonacci", on_accepted=accepted)


def subscribe(node):
    seen = []
    node.create_subscription(msgs.CmdVel, "/idle_sub", callback=lambda m: seen.append(m.linear))
    return seen


@pytest.mark.parametrize("setup", [serve_adder, serve_fibonacci, subscribe],
                         ids=["service", "action", "subscription"])
def test_an_idle_spin_sleeps_and_still_serves(domain, node, setup):
    s = Spinner(domain, setup)
    try:
        rate = s.wakeups_per_s()
        assert rate < MAX_IDLE_WAKEUPS_PER_S, f"an idle {setup.__name__} spin woke {rate:.0f} times/s"
        # the sleeping executor still answers at once
        if setup is serve_adder:
            client = node.create_client(srv.AddTwoInts, "/idle_add")
            assert client.wait_for_service(10)
            assert client.call(a=40, b=2, timeout=5.0).value == 42
        elif setup is serve_fibonacci:
            client = node.create_action_client("/idle_fib", "Fibonacci")
            assert client.wait_for_server(10)
            state, result = client.send_goal(order=7).result(10)
            assert state == "succeeded" and list(result._elems) == [0, 1, 1, 2, 3, 5, 8, 13]
        else:
            pub = node.create_publisher(msgs.CmdVel, "/idle_sub")
            assert pub.wait_for_subscribers(1, timeout=10)
            pub.publish(linear=2.5)
            deadline = time.monotonic() + 10
            while not s.keep and time.monotonic() < deadline:
                time.sleep(0.01)
            assert s.keep == [2.5]
    finally:
        took = s.stop()
    assert took < 1.0, f"shutdown() took {took:.2f} s to end an idle spin"


def test_a_slow_timer_wakes_once_per_tick(domain):
    ticks = []
    s = Spinner(domain, lambda node: node.create_timer(0.1, lambda: ticks.append(nerve.mono_ns())))
    try:
        rate = s.wakeups_per_s(2.0)
    finally:
        s.stop()
    # ten ticks a second, each one wake-up (a poller would wake hundreds of times)
    assert len(ticks) >= 15
    assert rate < 15, f"a 10 Hz timer spin woke {rate:.0f} times/s"


def test_an_action_server_with_callbacks_runs_in_the_executor(domain, node):
    """on_goal rejects (its reason reaches the client), on_accepted gets the goal; work
    goes on from a timer through server.goals(); cancels are answered."""
    def setup(n):
        def on_goal(goal):
            return None if goal.order <= 20 else f"order {goal.order} is too large"

        server = n.create_action_server("/cb_fib", "Fibonacci", on_goal=on_goal,
                                        on_accepted=lambda g: None)
        progress = {}

        def work():
            for g in server.goals():
                seq = progress.setdefault(g.id, [0, 1])
                if g.is_canceling:
                    g.canceled(len=len(seq), data=np.array(seq, dtype=np.int64))
                elif len(seq) > g.goal.order:
                    done = seq[: g.goal.order + 1]
                    g.succeed(len=len(done), data=np.array(done, dtype=np.int64))
                else:
                    seq.append(seq[-1] + seq[-2])
                    g.feedback(len=len(seq), data=np.array(seq, dtype=np.int64))

        n.create_timer(0.005, work)
        return server

    s = Spinner(domain, setup)
    try:
        client = node.create_action_client("/cb_fib", "Fibonacci")
        assert client.wait_for_server(10)
        goal = client.send_goal(order=6)
        state, result = goal.result(10)
        assert state == "succeeded" and list(result._elems) == [0, 1, 1, 2, 3, 5, 8]
        assert [f.len for f in goal.feedbacks()] == [3, 4, 5, 6, 7]
        with pytest.raises(nerve.ActionError, match="order 99 is too large"):
            client.send_goal(order=99)
        slow = client.send_goal(order=20)
        assert slow.cancel() in ("canceling", "canceled")
        assert slow.result(10)[0] == "canceled"
    finally:
        s.stop()


def test_a_callback_error_ends_the_spin_with_it(domain, node):
    def setup(n):
        def boom(m):
            raise ValueError(f"bad linear {m.linear}")

        n.create_subscription(msgs.CmdVel, "/boom", callback=boom)

    s = Spinner(domain, setup)
    pub = node.create_publisher(msgs.CmdVel, "/boom")
    assert pub.wait_for_subscribers(1, timeout=10)
    pub.publish(linear=3.0)
    s.thread.join(10)
    assert not s.thread.is_alive()
    assert isinstance(s.error, ValueError) and "bad linear 3.0" in str(s.error)


def test_a_reset_from_another_thread_wakes_the_executor(domain):
    fired = []

    def setup(node):
        return node.create_timer(0.05, lambda: fired.append(nerve.mono_ns()), oneshot=True)

    s = Spinner(domain, setup)
    try:
        deadline = time.monotonic() + 10
        while not fired and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(fired) == 1
        # the executor now sleeps with no deadline at all; the reset wakes it
        s.keep.reset()
        t0 = time.monotonic()
        while len(fired) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(fired) == 2, "a one-shot timer reset from another thread never fired"
        assert time.monotonic() - t0 < 5
    finally:
        s.stop()
