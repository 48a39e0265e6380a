"""Ctrl-C reaches Python while Nerve waits with the GIL released: spin, recv and
blocking waits end with KeyboardInterrupt (a hang would hit the 20 s guard)."""

import signal
import subprocess
import sys

import pytest

WAITS = {
    "spin": "ex = nerve.Executor(); ex.add_node(node); node.create_timer(1.0, lambda: None); ex.spin()",
    # nothing due ever: only the wait's signal checks end it
    "spin_idle_server": "node.create_service(nerve.srv.AddTwoInts, '/sig_add', lambda r: None); "
                        "ex = nerve.Executor(); ex.add_node(node); ex.spin_once()",
    "recv": "sub.recv()",
    "wait_for_subscribers": "pub.wait_for_subscribers(5, timeout=3600)",
}


@pytest.mark.parametrize("wait", sorted(WAITS))
def test_ctrl_c_interrupts_a_blocking_wait(domain, wait):
    code = f"""
import nerve, sys
from nerve import msgs
ctx = nerve.Context({domain})
node = ctx.node("sig")
sub = node.create_subscription(msgs.CmdVel, "/never", wait="block")
pub = node.create_publisher(msgs.CmdVel, "/other")
print("waiting", flush=True)
try:
    {WAITS[wait]}
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(3)
"""
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "waiting"
        import time
        time.sleep(0.3)  # let it enter the wait
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=20)
    finally:
        child.kill()
    assert child.returncode == 3, err
    assert "interrupted" in out
