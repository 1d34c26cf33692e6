#!/usr/bin/env bash
# Benchmark 1: shaping accuracy. iperf3 through a forward between two agents, payload
# goodput at the receiver against pct x capacity. Targets: |achieved/target - 1| <= 1% at
# 1 Gbit/s (2..100%), <= 2% at 5 Gbit/s (10..100%).
# Usage: bench/shaping_accuracy.sh [SECONDS_PER_STEP]   (default 10)
source "$(dirname "$0")/common.sh"
need iperf3 iperf3; need jq jq
SECS=${1:-10}
build
machine
"$CTL" local up --nodes 2 --capacity 1Gbit --catch-up-ms "${CATCH_UP_MS:-10}" --dir "$WORK/state" >/dev/null 2>&1
iperf3 -s -B 127.0.1.2 -p 5301 >/dev/null 2>&1 & PIDS+=($!)
wait_port 127.0.1.2 5301
"$CTL" forward add --from n0 --listen 127.0.1.1:5300 --to n1:127.0.1.2:5301 >/dev/null
run_steps() { # capacity_bits label steps...
  local cap_bits=$1; shift; local cap=$1; shift
  "$CTL" set 100 --capacity "$cap" >/dev/null
  printf "%-10s %6s %14s %14s %9s %s\n" capacity pct "target Mbit/s" "achieved" "error" verdict
  for pct in "$@"; do
    "$CTL" set "$pct" >/dev/null
    local bps
    bps=$(iperf3 -c 127.0.1.1 -p 5300 -t "$SECS" -J | jq '.end.sum_received.bits_per_second')
    awk -v b="$bps" -v p="$pct" -v c="$cap_bits" -v cap="$cap" -v tol="$TOL" 'BEGIN {
      t = c * p / 100; e = b / t - 1; v = (e < 0 ? -e : e) <= tol ? "ok" : "MISS";
      printf "%-10s %6s %14.1f %14.1f %+8.2f%% %s\n", cap, p, t/1e6, b/1e6, e*100, v }'
  done
}
[ -z "${ONLY5:-}" ] && TOL=0.01 run_steps 1e9 1Gbit 2 5 10 20 30 40 50 60 70 80 90 100
echo
TOL=0.02 run_steps 5e9 5Gbit 10 20 30 40 50 60 70 80 90 100
echo
echo "# reference: iperf3 direct on the same host, same duration (unshaped ceiling)"
iperf3 -c 127.0.1.2 -p 5301 -t "$SECS" -J | jq -r '"direct  \(.end.sum_received.bits_per_second/1e6 | floor) Mbit/s"'
