"""Opens the tensors the C++ `tensor_producer` (examples/cpp) publishes, zero-copy, as
numpy arrays, and checks each one: the producer fills tensor k with the value k.

    tensor_producer --shape 480,640,3            # C++, in one terminal
    python examples/python/tensor_consumer.py    # in another (same NERVE_DOMAIN)

    python tensor_consumer.py [--topic /tensors] [--pool frames] [--count N]
"""

import argparse
import sys

import numpy as np

import nerve


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topic", default="/tensors")
    ap.add_argument("--pool", default="frames")
    ap.add_argument("--count", type=int, default=0, help="stop after N tensors (0: until Ctrl-C)")
    args = ap.parse_args()
    ctx = nerve.Context()
    node = ctx.node("py_tensor_consumer")
    sub = node.create_subscription(nerve.TensorDescriptor, args.topic, qos=nerve.Qos(depth=8))
    print(f"tensor_consumer: waiting for tensors on {args.topic} (domain {ctx.domain})", flush=True)
    pool = None
    n = bad = 0
    try:
        while not args.count or n < args.count:
            desc = sub.recv(timeout=1.0)
            if desc is None:
                continue
            pool = pool or nerve.TensorPool.open(ctx, args.pool)  # the producer created it
            try:
                arr = pool.open(desc).numpy()  # the producer's shared memory, not a copy
            except nerve.TensorError as e:  # freed by the producer before we got to it
                print(f"skipped: {e}", flush=True)
                continue
            first = arr.flat[0]
            uniform = bool(np.all(arr == first))
            bad += not uniform
            print(f"tensor {n}: shape {arr.shape} {arr.dtype} value {float(first):g} "
                  f"{'uniform' if uniform else 'TORN'}", flush=True)
            n += 1
    except KeyboardInterrupt:
        pass
    print(f"tensor_consumer: received {n}, torn {bad}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
