#!/usr/bin/env python3
"""A's side of the churn benchmark (bench/churn.sh): N requests to an agent's control API
(`GET /status` with the token), each on a fresh connection as the controller makes them,
RATE a second; prints `ok failed median_ms p99_ms max_ms`.

Usage: api_probe.py CLUSTER_FILE NODE N RATE"""
import http.client
import socket
import sys
import time
import tomllib

cluster_file, node, n, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
cluster = tomllib.load(open(cluster_file, "rb"))
token = open(cluster["token_file"]).read().strip()
addr = next(x["control"] for x in cluster["node"] if x["name"] == node)
host, port = addr.rsplit(":", 1)
times, failed, why = [], 0, {}
start = time.monotonic()
for i in range(n):
    due = start + i / rate
    time.sleep(max(0.0, due - time.monotonic()))
    t = time.monotonic()
    try:
        c = http.client.HTTPConnection(host, int(port), timeout=10)
        c.request("GET", "/status", headers={"Authorization": f"Bearer {token}"})
        r = c.getresponse()
        r.read()
        c.close()
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}")
        times.append((time.monotonic() - t) * 1000)
    except Exception as e:  # a reset, a timeout, a 503: a failed request
        failed += 1
        k = type(e).__name__ + (f" {e}" if isinstance(e, RuntimeError) else "")
        why[k] = why.get(k, 0) + 1
times.sort()
q = lambda p: times[min(len(times) - 1, int(p * len(times)))] if times else float("nan")
print(f"{len(times)} {failed} {q(0.5):.1f} {q(0.99):.1f} {(times[-1] if times else float('nan')):.1f}"
      + (f"  {why}" if why else ""))
