"""Listens to the Rust talker's Imu messages (run `cargo run -p nerve-examples --bin talker`).

    python listener.py [--topic /imu] [--count N]
"""

import argparse

import nerve
from nerve import msgs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--topic", default="/imu")
    ap.add_argument("--count", type=int, default=0, help="stop after N messages (0: until Ctrl-C)")
    args = ap.parse_args()
    ctx = nerve.Context()
    node = ctx.node("py_listener")
    sub = node.create_subscription(msgs.Imu, args.topic)
    print(f"py_listener: waiting for Imu on {args.topic} (domain {ctx.domain})", flush=True)
    n = 0
    try:
        for m in sub:  # blocks with the GIL released; Ctrl-C ends it
            a = m.linear_acceleration
            print(f"seq {m._header.seq}: accel ({a.x:.2f}, {a.y:.2f}, {a.z:.2f})", flush=True)
            n += 1
            if args.count and n >= args.count:
                break
    except KeyboardInterrupt:
        pass
    print(f"py_listener: received {n}", flush=True)


if __name__ == "__main__":
    main()
