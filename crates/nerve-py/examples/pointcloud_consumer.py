"""Computes on the Rust `pointcloud_pub`'s clouds in place: the numpy arrays are read-only
views of shared memory, so a 10 MB cloud is never copied.

    cargo run --release -p nerve-examples --bin pointcloud_pub &
    python pointcloud_consumer.py [--count N]
"""

import argparse
import time

import numpy as np

import nerve
from nerve import msgs


def points_of(cloud) -> np.ndarray:
    """The cloud as an (N, 4) float32 array (x, y, z, intensity) viewing shared memory."""
    step = cloud.point_step
    n = cloud.width * cloud.height
    return cloud.data[: n * step].view(np.float32).reshape(n, step // 4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--topic", default="/points")
    ap.add_argument("--count", type=int, default=0)
    args = ap.parse_args()
    ctx = nerve.Context()
    node = ctx.node("py_cloud_consumer")
    sub = node.create_subscription(msgs.PointCloud, args.topic, qos=nerve.Qos(max_payload=1 << 26))
    print(f"pointcloud_consumer: waiting on {args.topic}", flush=True)
    n = 0
    try:
        while not args.count or n < args.count:
            cloud = sub.recv(timeout=1.0)
            if cloud is None:
                continue
            t0 = time.perf_counter()
            pts = points_of(cloud)
            centroid = pts[:, :3].mean(axis=0)
            far = int((np.linalg.norm(pts[:, :3], axis=1) > 10.0).sum())
            ms = (time.perf_counter() - t0) * 1e3
            shared = not pts.flags.owndata and not pts.flags.writeable
            print(f"cloud {cloud._header.seq}: {len(pts)} points, centroid {np.round(centroid, 3)}, "
                  f"{far} beyond 10 m, {ms:.1f} ms, zero-copy={shared}", flush=True)
            n += 1
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
