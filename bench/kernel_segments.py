#!/usr/bin/env python3
"""What an unprivileged program can do about a kernel-paced socket's segment bursts on
loopback: a smaller MSS (TCP_MAXSEG before connect) under BBR and CUBIC, and GSO off for
the socket (a TCP_MD5SIG key on both ends makes the kernel send MSS-sized segments).

One loopback connection, both ends paced with SO_MAX_PACING_RATE, ping-pong of SIZE bytes
with a 5 ms pause between round trips; prints the median round trip over serialization
(2*SIZE/RATE; 1.000: as on a link of that rate); for the MD5 rows also one unlimited
stream and the process's CPU time (user + system, which holds the kernel's work for it)
per GB. BBR must be allowed (net.ipv4.tcp_allowed_congestion_control). Usage:
bench/kernel_segments.py (decision 0050, "Also tried").
"""
import resource, socket, statistics, struct, threading, time

from kernel_first_burst import recvall  # this directory's probe: the one reader

SO_MAX_PACING_RATE, TCP_MAXSEG, TCP_CONGESTION, TCP_MD5SIG = 47, 2, 13, 14
GBIT = 125_000_000


def md5(s):
    addr = struct.pack("=H2s4s", socket.AF_INET, b"\0\0", socket.inet_aton("127.0.0.1")).ljust(128, b"\0")
    key = b"kernel-segments-probe"
    s.setsockopt(socket.IPPROTO_TCP, TCP_MD5SIG, addr + struct.pack("=BBHi", 0, 0, len(key), 0) + key.ljust(80, b"\0"))


def pair(rate, mss, cc, sig):
    srv = socket.socket(); srv.bind(("127.0.0.1", 0))
    s = socket.socket()
    for x in (srv, s):
        x.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cc.encode())
        if sig:
            md5(x)
    srv.listen(1)
    if mss:
        s.setsockopt(socket.IPPROTO_TCP, TCP_MAXSEG, mss)
    s.connect(srv.getsockname()); c, _ = srv.accept()
    for x in (s, c):
        x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if rate:
            x.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, rate)
    return s, c


def pingpong(rate, size, mss, cc, sig):
    s, c = pair(rate, mss, cc, sig)

    def echo():
        while (m := recvall(c, size)) is not None:
            c.sendall(m)

    threading.Thread(target=echo, daemon=True).start()
    msg = b"y" * size; rts = []; start = time.perf_counter()
    while len(rts) < 30 and (len(rts) < 6 or time.perf_counter() - start < 2):
        t = time.perf_counter(); s.sendall(msg); recvall(s, size)
        rts.append(time.perf_counter() - t); time.sleep(0.005)
    s.close()
    return statistics.median(rts[2:]) / (2 * size / rate)


def stream(mss, cc, sig, total=500_000_000):
    s, c = pair(0, mss, cc, sig); got = [0, 1.0]

    def sink():
        t0 = None; n = 0
        while b := c.recv(1 << 20):
            t0 = t0 or time.perf_counter(); n += len(b)
        got[0], got[1] = n, time.perf_counter() - t0

    r0 = resource.getrusage(resource.RUSAGE_SELF)
    th = threading.Thread(target=sink); th.start(); buf = b"x" * (1 << 16); sent = 0
    while sent < total:
        s.sendall(buf); sent += len(buf)
    s.close(); th.join(); r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return got[0] / got[1] * 8 / 1e6, cpu / (total / 1e9)


if __name__ == "__main__":
    points = [(p, s) for p in (10, 100) for s in (16384, 65536, 262144, 1048576)]
    print(f"{'cc':6}{'mss':>6}{'md5':>5}" + "".join(f"{f'{s // 1024}K@{p}%':>10}" for p, s in points) + "   unlimited Mbit/s, cpu s/GB")
    rows = [(cc, mss, False) for cc in ("bbr", "cubic") for mss in (0, 16384, 8192, 4096)]
    rows += [("bbr", 8192, True), ("bbr", 1448, True)]
    for cc, mss, sig in rows:
        line = f"{cc:6}{mss:>6}{'yes' if sig else '':>5}" + "".join(f"{pingpong(GBIT * p // 100, s, mss, cc, sig):>10.3f}" for p, s in points)
        if sig:
            mbit, cpu = stream(mss, cc, sig)
            line += f"   {mbit:.0f}, {cpu:.2f}"
        print(line, flush=True)
