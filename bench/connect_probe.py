#!/usr/bin/env python3
"""A's connections between two nodes under churn (bench/churn.sh): run as node n0
(`throttle-ctl exec n0 -- python3 connect_probe.py ...`), N connects to a server of n1 at
HOST:PORT, RATE a second, each sending one byte and waiting for the server's echo; prints
`ok failed median_ms p99_ms max_ms`.

Usage: connect_probe.py HOST PORT N RATE      or   connect_probe.py --serve PORT"""
import socket
import sys
import threading
import time

if sys.argv[1] == "--serve":
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", int(sys.argv[2])))
    s.listen(512)
    # Ends by itself when nobody has connected for a minute (a benchmark that died leaves
    # no server behind).
    s.settimeout(60)

    def echo(c):
        with c:
            d = c.recv(1)
            if d:
                c.sendall(d)

    while True:
        try:
            c, _ = s.accept()
        except socket.timeout:
            sys.exit(0)
        c.settimeout(10)
        threading.Thread(target=echo, args=(c,), daemon=True).start()

host, port, n, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
times, failed, why = [], 0, {}
start = time.monotonic()
for i in range(n):
    time.sleep(max(0.0, start + i / rate - time.monotonic()))
    t = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=10) as c:
            c.sendall(b"x")
            if c.recv(1) != b"x":
                raise RuntimeError("no echo")
        times.append((time.monotonic() - t) * 1000)
    except Exception as e:
        failed += 1
        why[type(e).__name__] = why.get(type(e).__name__, 0) + 1
times.sort()
q = lambda p: times[min(len(times) - 1, int(p * len(times)))] if times else float("nan")
print(f"{len(times)} {failed} {q(0.5):.1f} {q(0.99):.1f} {(times[-1] if times else float('nan')):.1f}"
      + (f"  {why}" if why else ""))
