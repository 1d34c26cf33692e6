#!/usr/bin/env bash
# Benchmark: added delay. Two agents (forward n0 -> n1, 1 Gbit/s capacity) with an added
# one-way latency L at each egress. For each L: the median 64-byte round trip (a round
# trip crosses two egresses, so it should grow by 2 L over L = 0 in the same run) and
# iperf3's goodput at 50% (it should stay at 500 Mbit/s whatever L: the agents hold two
# delays' worth of bytes on the emulated wire, the application's own TCP ends at the
# agent). References in the same run: L = 0 and the direct path, no agent.
# Targets: added round trip within 2 L +- max(10%, 100 us); goodput within 2% of 500 Mbit/s.
# Usage: bench/delay.sh [SECONDS_PER_STEP] [COUNT]   (defaults 5 s, 2000 round trips)
source "$(dirname "$0")/common.sh"
need iperf3 iperf3; need jq jq
SECS=${1:-5}
COUNT=${2:-2000}
build
machine
"$CTL" local up --nodes 2 --capacity 1Gbit --dir "$WORK/state" >/dev/null 2>&1
"$EX/pingpong" server 127.0.1.2:5401 & PIDS+=($!)
iperf3 -s -B 127.0.1.2 -p 5301 >/dev/null 2>&1 & PIDS+=($!)
wait_port 127.0.1.2 5401
wait_port 127.0.1.2 5301
"$CTL" forward add --from n0 --listen 127.0.1.1:5400 --to n1:127.0.1.2:5401 >/dev/null
"$CTL" forward add --from n0 --listen 127.0.1.1:5300 --to n1:127.0.1.2:5301 >/dev/null
direct=$("$EX/pingpong" client 127.0.1.2:5401 "$COUNT" 64 | jq .median_us)
echo "# direct (no agent): median round trip $direct us"
printf "%9s %12s %12s %12s %8s %14s %8s\n" "L us" "median us" "added us" "expected us" verdict "50% Mbit/s" verdict
base=""
for lat in 0 200 1000 5000 20000; do
  "$CTL" set unlimited --latency-us "$lat" >/dev/null
  m=$("$EX/pingpong" client 127.0.1.1:5400 "$COUNT" 64 | jq .median_us)
  [ -z "$base" ] && base=$m
  "$CTL" set 50 --latency-us "$lat" >/dev/null
  bps=$(iperf3 -c 127.0.1.1 -p 5300 -t "$SECS" -J | jq '.end.sum_received.bits_per_second')
  awk -v m="$m" -v b="$base" -v l="$lat" -v bps="$bps" 'BEGIN {
    add = m - b; want = 2 * l; tol = (want * 0.1 > 100 ? want * 0.1 : 100);
    d = add - want; rv = (d <= tol && -d <= tol) ? "ok" : "MISS";
    e = bps / 500e6 - 1; gv = (e <= 0.02 && -e <= 0.02) ? "ok" : "MISS";
    printf "%9d %12.1f %12.1f %12d %8s %14.1f %8s\n", l, m, add, want, rv, bps / 1e6, gv }'
done
