#!/usr/bin/env bash
# Benchmark: the CPU time of a kernel-paced cluster's agents, two agent builds alternated
# in one run: two loopback clusters of 8 nodes at 1 Gbit/s (`local up --links kernel`),
# one per build (THROTTLE_AGENT_BIN), each round measuring both: 10 s idle, then one
# iperf3 stream n0 -> n1 at 100% for 10 s (agents' utime + stime from /proc, per GB
# received). Usage: bench/kernel_agents_cpu.sh OLD_AGENT NEW_AGENT [ROUNDS]
# (decision 0050, "Agents' CPU"; experiments/2026-12-03-kernel-links-cpu-and-beyond-the-link.md).
source "$(dirname "$0")/common.sh"
need iperf3 iperf3; need jq jq
[ $# -ge 2 ] || { echo "usage: $0 OLD_AGENT NEW_AGENT [ROUNDS]" >&2; exit 2; }
declare -A BIN=([old]=$1 [new]=$2) BASE=([old]=127.0.54 [new]=127.0.55)
ROUNDS=${3:-3}; SECS=${SECS:-10}
build
machine
cpu() { local t=0 k; k=$(getconf CLK_TCK)
  for pid in $(sed -n 's/^pid = //p' "$1"); do t=$(awk -v t="$t" -v k="$k" '{print t + ($14 + $15) / k}' "/proc/$pid/stat"); done; echo "$t"; }
GROUPS_=()
cleanup_ab() {
  for g in "${GROUPS_[@]:-}"; do [ -n "$g" ] && kill -- "-$g" 2>/dev/null || true; done
  for v in old new; do THROTTLE_CLUSTER="$WORK/$v/c.toml" "$CTL" local down --force >/dev/null 2>&1 || true; done
}
trap 'cleanup_ab; cleanup' EXIT
for v in old new; do
  mkdir -p "$WORK/$v"
  THROTTLE_AGENT_BIN=${BIN[$v]} THROTTLE_CLUSTER="$WORK/$v/c.toml" "$CTL" local up --nodes 8 --capacity 1Gbit \
    --base-addr "${BASE[$v]}.1" --links kernel --dir "$WORK/$v/state" >/dev/null
  setsid env THROTTLE_CLUSTER="$WORK/$v/c.toml" "$CTL" exec n1 -- iperf3 -s -p 5301 >/dev/null 2>&1 & GROUPS_+=($!)
done
sleep 2
printf "%-6s %-4s %12s %8s %10s %10s %10s\n" round build "idle cpu s" GB "cpu s" "cpu s/GB" Mbit/s
for round in $(seq "$ROUNDS"); do
  for v in old new; do
    f="$WORK/$v/c.toml"
    a=$(cpu "$f"); sleep "$SECS"; b=$(cpu "$f")
    THROTTLE_CLUSTER=$f "$CTL" exec n0 -- iperf3 -c "${BASE[$v]}.2" -p 5301 -t "$SECS" -J > "$WORK/$v/out.json"
    c=$(cpu "$f"); by=$(jq .end.sum_received.bytes < "$WORK/$v/out.json")
    awk -v r="$round" -v v="$v" -v a="$a" -v b="$b" -v c="$c" -v by="$by" -v s="$SECS" 'BEGIN {
      printf "%-6d %-4s %12.2f %8.3f %10.2f %10.3f %10.0f\n", r, v, b - a, by / 1e9, c - b, (c - b) / (by / 1e9), by * 8 / 1e6 / s }'
  done
done
vmstat 1 2 | tail -1 | awk '{print "# vmstat: us " $13 " sy " $14 " id " $15 " st " $17}'
