"""Opens the tensors `tensor_producer.py` publishes, zero-copy, as numpy arrays.

    python tensor_consumer.py [--count N]
"""

import argparse

import numpy as np

import nerve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--topic", default="/tensors")
    ap.add_argument("--pool", default="frames")
    ap.add_argument("--count", type=int, default=0)
    args = ap.parse_args()
    ctx = nerve.Context()
    node = ctx.node("py_tensor_consumer")
    sub = node.create_subscription(nerve.TensorDescriptor, args.topic, qos=nerve.Qos(depth=8))
    pool = None
    n = 0
    try:
        while not args.count or n < args.count:
            desc = sub.recv(timeout=1.0)
            if desc is None:
                continue
            pool = pool or nerve.TensorPool.open(ctx, args.pool)
            try:
                arr = pool.open(desc).numpy()
            except nerve.TensorError as e:  # the producer already freed it: skip, say so
                print(f"skipped: {e}", flush=True)
                continue
            print(f"tensor {desc._header.seq}: shape {arr.shape} {arr.dtype} value {float(arr.flat[0])} "
                  f"mean {float(np.mean(arr)):.1f}", flush=True)
            n += 1
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
