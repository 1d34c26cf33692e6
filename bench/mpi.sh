#!/usr/bin/env bash
# Benchmark: an unmodified MPI program (Open MPI, TCP BTL) between two namespace hosts,
# through transparent interception. Targets: the bandwidth loop's payload rate within 2%
# of pct x 1 Gbit/s at 10/30/100%; iperf3 at 30% within 1%. Reference, same invocation:
# the same program and iperf3 with the agents' redirect rules removed (direct path).
# Needs root, Open MPI (openmpi-bin, libopenmpi-dev), iperf3, jq.
# Usage: bench/mpi.sh [SECONDS_PER_STEP]   (default 5)
source "$(dirname "$0")/common.sh"
need mpicc libopenmpi-dev; need mpirun openmpi-bin; need iperf3 iperf3; need jq jq
[ "$(id -u)" = 0 ] || { echo "bench/mpi.sh needs root (namespace hosts)" >&2; exit 2; }
SECS=${1:-5}
build
machine
"$CTL" local up --netns --nodes 2 --capacity 1Gbit --subnet 198.18.90.0/24 --dir "$WORK/state" >/dev/null 2>&1
mpicc -O2 -o "$WORK/mpibw" "$ROOT/bench/mpi_bandwidth.c"
printf '198.18.90.1 slots=1\n198.18.90.2 slots=1\n' > "$WORK/hosts"
NSNAMES=($(grep '^netns' "$THROTTLE_CLUSTER" | cut -d'"' -f2))
mpi() { # bytes -> result line
  mpirun --allow-run-as-root --mca plm_rsh_agent "$CTL exec" --mca btl tcp,self \
    --mca mpi_yield_when_idle 1 --mca rtc ^hwloc --mca oob_tcp_if_include 198.18.90.0/24 \
    --hostfile "$WORK/hosts" -np 2 "$WORK/mpibw" "$1" 2>/dev/null | grep '^ranks='
}
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
iperf30() { # -> received bits/s
  "$CTL" exec n1 -- iperf3 -s -1 -B 198.18.90.2 -p 5401 >/dev/null 2>&1 & local srv=$!
  sleep 0.5
  "$CTL" exec n0 -- iperf3 -c 198.18.90.2 -p 5401 -t "$SECS" -J | jq '.end.sum_received.bits_per_second'
  wait $srv || true
}
direct() { # on|off: the agents' redirect rules
  for ns in "${NSNAMES[@]}"; do
    if [ "$1" = off ]; then ip netns exec "$ns" nft list table ip throttle > "$WORK/$ns.rules"; ip netns exec "$ns" nft delete table ip throttle
    else ip netns exec "$ns" nft -f "$WORK/$ns.rules"; fi
  done
}
echo "MPI bandwidth loop (rank 0 on n0 -> rank 1 on n1), ${SECS} s per step, payload rate"
printf "%-22s %12s %12s %9s %s\n" path "target MB/s" "MB/s" error verdict
for pct in 10 30 100; do
  "$CTL" set "$pct" >/dev/null
  target=$(awk -v p="$pct" 'BEGIN{print 125e6*p/100}')
  r=$(mpi "$(awk -v t="$target" -v s="$SECS" 'BEGIN{printf "%.0f", t*s}')")
  awk -v b="$(field rate_Bps "$r")" -v t="$target" -v p="$pct" 'BEGIN{e=b/t-1; v=(e<0?-e:e)<=0.02?"ok":"MISS";
    printf "%-22s %12.2f %12.2f %+8.2f%% %s\n", "agents " p "%", t/1e6, b/1e6, e*100, v}'
done
"$CTL" set unlimited >/dev/null
BIG=$((1500 * 1000 * 1000))
ra=$(mpi $BIG); ia=$(iperf30)
direct off
rd=$(mpi $BIG); id=$(iperf30)
direct on
awk -v a="$(field rate_Bps "$ra")" -v d="$(field rate_Bps "$rd")" 'BEGIN{
  printf "%-22s %12s %12.2f\n%-22s %12s %12.2f\n", "agents unlimited", "-", a/1e6, "direct (no rules)", "-", d/1e6;
  printf "unlimited MPI loop through the agents: %.2f x direct\n", a/d }'
echo
echo "MPI ping-pong (8 bytes), mean of 100 round trips"
printf "%-22s %10s\n" path "RTT us"
printf "%-22s %10s\n" "agents unlimited" "$(field rtt_us "$ra")" "direct (no rules)" "$(field rtt_us "$rd")"
echo
"$CTL" set 30 >/dev/null
i30=$(iperf30)
awk -v b="$i30" -v ia="$ia" -v id="$id" 'BEGIN{t=300e6; e=b/t-1; v=(e<0?-e:e)<=0.01?"ok":"MISS";
  printf "iperf3 n0 -> n1 through interception at 30%%: %.1f Mbit/s vs %.1f: %+.2f%% %s\n", b/1e6, t/1e6, e*100, v;
  printf "iperf3 unlimited: agents %.0f Mbit/s, direct %.0f Mbit/s (%.2f x)\n", ia/1e6, id/1e6, ia/id }'
