#!/usr/bin/env python3
"""Why a kernel-paced socket on loopback cannot carry small messages at their rate.

One loopback connection, both ends paced with SO_MAX_PACING_RATE, ping-pong of SIZE bytes;
prints the median round trip as a fraction of its serialization time 2*SIZE/RATE (1.000:
as on a link of that rate) for the socket as the kernel leaves it and with the two knobs
an unprivileged program has over its segment bursts: a receive-window clamp
(TCP_WINDOW_CLAMP on both ends) and a small send buffer (SO_SNDBUF on both ends). Also
the unlimited stream each setting leaves. Usage: bench/kernel_first_burst.py
(experiments/2026-12-02-kernel-links.md has a run).
"""
import socket, statistics, threading, time

SO_MAX_PACING_RATE = 47
TCP_WINDOW_CLAMP = 10
SETTINGS = [("as left", None, 0), ("window clamp 16K", TCP_WINDOW_CLAMP, 16384),
            ("send buffer 16K", socket.SO_SNDBUF, 16384), ("send buffer 64K", socket.SO_SNDBUF, 65536)]
GBIT = 125_000_000


def recvall(c, k):
    b = bytearray()
    while len(b) < k:
        x = c.recv(k - len(b))
        if not x:
            return None
        b += x
    return b


def setup(s, rate, opt, val):
    if rate:
        s.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, rate)
    if opt == TCP_WINDOW_CLAMP:
        s.setsockopt(socket.IPPROTO_TCP, opt, val)
    elif opt is not None:
        s.setsockopt(socket.SOL_SOCKET, opt, val)


def pingpong(rate, size, opt, val, budget=3.0):
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
    setup(srv, 0, opt, val)

    def echo():
        c, _ = srv.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        setup(c, rate, opt, val)
        while (m := recvall(c, size)) is not None:
            c.sendall(m)

    threading.Thread(target=echo, daemon=True).start()
    s = socket.socket(); setup(s, rate, opt, val)
    s.connect(srv.getsockname()); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = b"y" * size; rts = []; start = time.perf_counter()
    while len(rts) < 40 and (len(rts) < 6 or time.perf_counter() - start < budget):
        t = time.perf_counter(); s.sendall(msg); recvall(s, size)
        rts.append(time.perf_counter() - t); time.sleep(0.01)
    s.close()
    return statistics.median(rts[2:]) / (2 * size / rate)


def stream(opt, val, total=2_000_000_000):
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
    setup(srv, 0, opt, val)
    got = [0, 1.0]

    def sink():
        c, _ = srv.accept(); t0 = None; n = 0
        while b := c.recv(1 << 20):
            t0 = t0 or time.perf_counter(); n += len(b)
        got[0], got[1] = n, time.perf_counter() - t0

    th = threading.Thread(target=sink); th.start()
    s = socket.socket(); setup(s, 0, opt, val); s.connect(srv.getsockname())
    buf = b"x" * (1 << 16); sent = 0
    while sent < total:
        s.sendall(buf); sent += len(buf)
    s.close(); th.join()
    return got[0] / got[1] * 8 / 1e6


if __name__ == "__main__":
    points = [(pct, size) for pct in (10, 100) for size in (16384, 65536, 262144)]
    head = "".join(f"{f'{s // 1024}K@{p}%':>10}" for p, s in points)
    print(f"round trip / serialization, one loopback connection\n{'setting':18}{head}{'unlimited Mbit/s':>18}")
    for name, opt, val in SETTINGS:
        row = "".join(f"{pingpong(GBIT * p // 100, s, opt, val):>10.3f}" for p, s in points)
        print(f"{name:18}{row}{stream(opt, val):>18.0f}", flush=True)
