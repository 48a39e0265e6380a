"""Produces float32 tensors in a shared-memory pool and publishes their descriptors;
`tensor_consumer.py` (or the Rust `tensor_consumer`) opens them without copying.

    python tensor_producer.py [--shape 480 640 3] [--count N] [--rate HZ]
"""

import argparse
import time

import numpy as np

import nerve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--topic", default="/tensors")
    ap.add_argument("--pool", default="frames")
    ap.add_argument("--shape", type=int, nargs="+", default=[480, 640, 3])
    ap.add_argument("--count", type=int, default=0)
    ap.add_argument("--rate", type=float, default=30.0)
    args = ap.parse_args()
    ctx = nerve.Context()
    node = ctx.node("py_tensor_producer")
    nbytes = int(np.prod(args.shape)) * 4
    pool = nerve.TensorPool(ctx, args.pool, slots=8, slot_bytes=nbytes)
    pub = node.create_publisher(nerve.TensorDescriptor, args.topic)
    pub.wait_for_subscribers(1, timeout=10.0)
    recent = []  # the last few tensors stay alive while consumers open them
    k = 0
    try:
        while not args.count or k < args.count:
            t = pool.alloc(args.shape, "float32")
            t.numpy()[...] = k  # written in place in shared memory
            frozen = t.freeze()
            pub.publish(frozen)
            recent = (recent + [frozen])[-4:]
            k += 1
            time.sleep(1.0 / args.rate)
    except KeyboardInterrupt:
        pass
    time.sleep(0.5)  # let consumers open the last ones
    print(f"tensor_producer: published {k} tensors of shape {tuple(args.shape)}", flush=True)


if __name__ == "__main__":
    main()
