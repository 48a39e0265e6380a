"""The tensor pool from Python: zero copy within and across processes, generations,
a full pool, slots of a SIGKILLed process reclaimed."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import nerve
from conftest import run_python


def test_alloc_freeze_publish_open_is_zero_copy(domain):
    ctx = nerve.Context(domain)
    node = ctx.node("producer")
    pool = nerve.TensorPool(ctx, "t", slots=4, slot_bytes=1 << 20)
    sub_ctx = nerve.Context(domain)  # stands in for another process
    sub_node = sub_ctx.node("consumer")
    sub = sub_node.create_subscription(nerve.TensorDescriptor, "/tensors")
    pub = node.create_publisher(nerve.TensorDescriptor, "/tensors")
    t = pool.alloc((256, 256), "float32")
    a = t.numpy()
    a[:] = np.arange(256 * 256, dtype=np.float32).reshape(256, 256)
    del a
    frozen = t.freeze()
    pub.publish(frozen)
    desc = sub.recv(2.0)
    assert desc.ndim == 2 and list(desc.shape[:2]) == [256, 256]
    other = nerve.TensorPool.open(sub_ctx, "t")
    got = other.open(desc)
    view = got.numpy()
    assert view.shape == (256, 256) and view.dtype == np.float32
    assert view[255, 255] == 256 * 256 - 1
    assert not view.flags.writeable
    # the same physical memory: the producer's mapping and the consumer's agree byte for byte
    assert np.shares_memory(view, np.from_dlpack(got)) 
    assert np.array_equal(view, frozen.numpy())


def test_dlpack_and_numpy_protocols(ctx):
    pool = nerve.TensorPool(ctx, "dl", slots=2, slot_bytes=1 << 16)
    t = pool.alloc(100, "int32")
    t.numpy()[:] = 7
    d = np.from_dlpack(t)  # writable export of a tensor being written
    assert np.shares_memory(d, t.numpy()) and d.sum() == 700
    with pytest.raises(ValueError, match="viewed by"):
        t.freeze()  # the DLPack array still views it
    del d
    f = t.freeze()
    ro = np.from_dlpack(f)
    assert ro.sum() == 700 and not ro.flags.writeable
    assert np.asarray(f).sum() == 700


def test_stale_descriptor_is_refused_after_the_slot_is_reused(ctx):
    pool = nerve.TensorPool(ctx, "stale", slots=1, slot_bytes=4096)
    t = pool.alloc(16, "uint8").freeze()
    desc = t.descriptor()
    assert pool.open(desc).numpy().shape == (16,)
    del t
    import gc
    gc.collect()
    reused = pool.alloc(16, "uint8")  # the only slot, now of a new generation
    with pytest.raises(nerve.TensorError, match="stale|generation|written"):
        pool.open(desc)
    del reused


def test_full_pool_and_bad_requests_raise_at_once(ctx):
    pool = nerve.TensorPool(ctx, "full", slots=2, slot_bytes=1024)
    held = [pool.alloc(8, "float64"), pool.alloc(8, "float64")]
    with pytest.raises(nerve.TensorError, match="full|slots"):
        pool.alloc(8, "float64")
    with pytest.raises(nerve.TensorError):
        nerve.TensorPool(ctx, "big", slots=1, slot_bytes=1024).alloc((1024, 1024), "float32")
    with pytest.raises(ValueError, match="dtype"):
        pool.alloc(8, "complex128")
    with pytest.raises(ValueError, match="shape"):
        pool.alloc((-1, 2), "float32")
    with pytest.raises(TypeError):
        pool.open(42)
    with pytest.raises(ValueError, match="descriptor"):
        pool.open(b"\x00" * 5)
    with pytest.raises(nerve.TensorError):
        pool.open(bytes(nerve.message_type(nerve.TensorDescriptor).head_size))
    with pytest.raises(nerve.TensorError):
        nerve.TensorPool.open(ctx, "no_such_pool")
    del held


def test_slots_of_a_killed_process_are_reclaimed(domain, tmp_path):
    ctx = nerve.Context(domain)
    pool = nerve.TensorPool(ctx, "kill", slots=2, slot_bytes=4096)
    code = f"""
import nerve, sys, time
ctx = nerve.Context({domain})
pool = nerve.TensorPool.open(ctx, "kill")
held = [pool.alloc(16, "uint8").freeze(), pool.alloc(16, "uint8")]
print("holding", flush=True)
time.sleep(60)
"""
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "holding"
        with pytest.raises(nerve.TensorError, match="full|slots"):
            pool.alloc(16, "uint8")
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        t = pool.alloc(16, "uint8")  # reclaims the dead process's slots first
        assert pool.in_use() == 1
        del t
    finally:
        child.kill()
        child.wait()


def test_torch_from_dlpack_is_zero_copy(ctx):
    torch = pytest.importorskip("torch", reason="torch is not installed here (its wheels are gigabytes)")
    pool = nerve.TensorPool(ctx, "torch", slots=2, slot_bytes=1 << 16)
    t = pool.alloc((4, 4), "float32")
    t.numpy()[:] = 3.0
    f = t.freeze()
    tt = torch.from_dlpack(f)
    assert tt.shape == (4, 4) and float(tt.sum()) == 48.0
    assert tt.data_ptr() == f.numpy().__array_interface__["data"][0]


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64",
                                   "int64", "float16", "float32", "float64", "bool"])
def test_numpy_views_have_the_tensors_type_shape_and_mode(ctx, dtype):
    # numpy() is made through numpy's C API (the short path of the hand-off); the
    # array-interface view must agree with it in every respect
    from nerve import _nerve
    pool = nerve.TensorPool(ctx, "np_" + dtype, slots=2, slot_bytes=4096)
    for shape in [(3, 4), (5,), (), (0, 7), (2, 1, 3)]:
        t = pool.alloc(shape, dtype)
        a = t.numpy()
        assert a.shape == shape and a.dtype == np.dtype(dtype) and a.dtype.char == np.dtype(dtype).char
        assert a.flags.writeable and a.flags.c_contiguous and a.flags.aligned and not a.flags.owndata
        a[...] = 1
        via_interface = np.asarray(_nerve.tensor_view(t._buf))
        assert via_interface.shape == shape and via_interface.dtype == a.dtype
        assert a.size == 0 or np.shares_memory(a, via_interface)
        del a, via_interface
        f = t.freeze()
        r = f.numpy()
        assert r.shape == shape and not r.flags.writeable and r.sum() == r.size
        with pytest.raises(ValueError):
            r.flags.writeable = True  # a frozen tensor stays read-only
        del r, f


def test_a_numpy_array_keeps_its_tensor_and_counts_as_a_view(ctx):
    import gc
    pool = nerve.TensorPool(ctx, "np_keep", slots=1, slot_bytes=4096)
    t = pool.alloc((8,), "float32")
    a = t.numpy()
    with pytest.raises(ValueError, match="viewed by"):
        t.freeze()  # the array views it
    a[:] = 5
    del a
    f = t.freeze()
    d = f.descriptor()
    opened = pool.open(d)           # from the message's buffer, read in place
    assert pool.open(d._bytes()).numpy().sum() == 40  # and from its bytes
    arr = opened.numpy()
    del f, opened
    gc.collect()
    assert pool.in_use() == 1 and arr.sum() == 40  # the array alone holds the slot
    del arr
    gc.collect()
    assert pool.in_use() == 0
