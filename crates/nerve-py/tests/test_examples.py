"""The examples run against their counterparts (Rust or Python), as a user would run them."""

import pathlib
import signal
import subprocess
import sys

from conftest import target_bin

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def run_pair(consumer: list, producer: list, timeout: float = 60) -> str:
    cons = subprocess.Popen(consumer, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    prod = subprocess.Popen(producer, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        out, err = cons.communicate(timeout=timeout)
        assert cons.returncode == 0, err
        return out
    finally:
        prod.send_signal(signal.SIGINT)  # both kinds of producer exit cleanly on Ctrl-C
        prod.wait(10)
        cons.kill()


def test_python_listener_of_the_rust_talker(domain):
    out = run_pair([sys.executable, str(EXAMPLES / "listener.py"), "--count", "3", "--topic", "/imu_ex"],
                   [str(target_bin("talker")), "--topic", "/imu_ex", "--rate", "100"])
    assert out.count("seq ") == 3 and "received 3" in out


def test_python_pointcloud_consumer_computes_on_the_shared_view(domain):
    out = run_pair([sys.executable, str(EXAMPLES / "pointcloud_consumer.py"), "--count", "2", "--topic", "/pts_ex"],
                   [str(target_bin("pointcloud_pub")), "--topic", "/pts_ex", "--bytes", "1000000",
                    "--rate", "20"])
    lines = [l for l in out.splitlines() if l.startswith("cloud ")]
    assert len(lines) == 2 and all("62500 points" in l and "zero-copy=True" in l for l in lines), out


def test_python_tensor_producer_and_consumer(domain):
    out = run_pair([sys.executable, str(EXAMPLES / "tensor_consumer.py"), "--count", "3", "--topic", "/t_ex",
                    "--pool", f"ex{domain}"],
                   [sys.executable, str(EXAMPLES / "tensor_producer.py"), "--topic", "/t_ex",
                    "--pool", f"ex{domain}", "--shape", "64", "64", "--rate", "50"])
    lines = [l for l in out.splitlines() if l.startswith("tensor ")]
    assert len(lines) == 3 and all("(64, 64) float32" in l for l in lines), out


def test_rust_consumer_opens_python_tensors(domain):
    out = run_pair([str(target_bin("tensor_consumer")), "--count", "3", "--topic", "/t_rs"],
                   [sys.executable, str(EXAMPLES / "tensor_producer.py"), "--topic", "/t_rs",
                    "--pool", f"rs{domain}", "--shape", "32", "8", "--rate", "50"])
    lines = [l for l in out.splitlines() if l.startswith("tensor ")]
    assert len(lines) == 3 and all("[32, 8] float32" in l for l in lines), out
