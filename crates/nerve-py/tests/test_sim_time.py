"""Simulation time from Python: a context that follows /clock, and its robot time."""

import time

import nerve
from nerve import msgs

S = 1_000_000_000


def test_a_sim_time_context_follows_the_clock_topic(domain):
    plain = nerve.Context(domain)
    sim = nerve.Context(domain, sim_time=True)
    assert sim.sim_time and not plain.sim_time
    assert sim.now_ns() == 0, "simulation time reads 0 before the first clock message"
    assert abs(plain.now_ns() - time.time_ns()) < 5 * S, "the system clock is wall time"
    pub = plain.node("driver").create_publisher(msgs.Clock, "/clock")
    t = 1_700_000_000 * S
    give_up = time.monotonic() + 20
    # the clock thread subscribes in the background: publish until it follows
    while sim.now_ns() != t and time.monotonic() < give_up:
        pub.publish(clock={"nanos": t})
        time.sleep(0.02)
    assert sim.now_ns() == t


def test_bad_sim_time_setting_is_refused(monkeypatch, domain):
    monkeypatch.setenv("NERVE_SIM_TIME", "maybe")
    try:
        nerve.Context(domain)
    except nerve.ContextError as e:
        assert "NERVE_SIM_TIME" in str(e)
    else:
        raise AssertionError("NERVE_SIM_TIME=maybe was accepted")
