#!/usr/bin/env bash
# Benchmark: an unmodified MPI program (Open MPI, TCP BTL) between two namespace hosts with
# the preload library (no kernel rules), side by side with the kernel redirect and with
# trickle (the user-space shaper people use today), all in one invocation.
# Targets: the MPI bandwidth loop's payload rate within 2% of pct x 1 Gbit/s at 10/30/100%
# with the preload; unlimited, the cost against the same program without interception.
# Needs root (namespace hosts), Open MPI, iperf3, jq, trickle.
# Usage: bench/preload.sh [SECONDS_PER_STEP]   (default 5)
source "$(dirname "$0")/common.sh"
need mpicc libopenmpi-dev; need mpirun openmpi-bin; need iperf3 iperf3; need jq jq; need trickle trickle
[ "$(id -u)" = 0 ] || { echo "bench/preload.sh needs root (namespace hosts)" >&2; exit 2; }
SECS=${1:-5}
build
machine
mpicc -O2 -o "$WORK/mpibw" "$ROOT/bench/mpi_bandwidth.c"
printf '198.18.92.1 slots=1\n198.18.92.2 slots=1\n' > "$WORK/hosts"
up() { "$CTL" local up --netns --nodes 2 --capacity 1Gbit --subnet 198.18.92.0/24 --intercept "$1" --dir "$WORK/state" >/dev/null 2>&1; }
# mpi MODE BYTES [WRAPPER...] -> result line. MODE: what `throttle-ctl exec` loads
# (preload: the library; kernel: nothing, so on a preload cluster the path is direct).
mpi() {
  local mode=$1 bytes=$2; shift 2
  THROTTLE_INTERCEPT=$mode timeout 120 mpirun --allow-run-as-root --mca plm_rsh_agent "$CTL exec" --mca btl tcp,self \
    --mca mpi_yield_when_idle 1 --mca rtc ^hwloc --mca oob_tcp_if_include 198.18.92.0/24 \
    --hostfile "$WORK/hosts" -np 2 "$@" "$WORK/mpibw" "$bytes" 2>/dev/null | grep '^ranks=' || echo "ranks=failed"
}
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
# iperf MODE [WRAPPER...] -> received bits/s, n0 -> n1
iperf() {
  local mode=$1; shift
  THROTTLE_INTERCEPT=$mode "$CTL" exec n1 -- "$@" iperf3 -s -1 -B 198.18.92.2 -p 5401 >/dev/null 2>&1 & local srv=$!
  sleep 0.5
  THROTTLE_INTERCEPT=$mode timeout 60 "$CTL" exec n0 -- "$@" iperf3 -c 198.18.92.2 -p 5401 -t "$SECS" -J 2>/dev/null | jq '.end.sum_received.bits_per_second' || echo 0
  wait $srv || true
}
row() { # path target_Bps measured_Bps -> table row with error and verdict (2%)
  awk -v p="$1" -v t="$2" -v b="$3" 'BEGIN{ if (b=="" || b==0) { printf "%-26s %12.2f %12s %9s %s\n", p, t/1e6, "-", "-", "FAILED"; exit }
    e=b/t-1; v=(e<0?-e:e)<=0.02?"ok":"MISS"; printf "%-26s %12.2f %12.2f %+8.2f%% %s\n", p, t/1e6, b/1e6, e*100, v}'
}
steps() { # MODE LABEL: the loop at 10/30/100%
  for pct in 10 30 100; do
    "$CTL" set "$pct" >/dev/null
    local target; target=$(awk -v p="$pct" 'BEGIN{print 125e6*p/100}')
    local r; r=$(mpi "$1" "$(awk -v t="$target" -v s="$SECS" 'BEGIN{printf "%.0f", t*s}')")
    row "$2 $pct%" "$target" "$(field rate_Bps "$r")"
  done
  "$CTL" set unlimited >/dev/null
}
BIG=$((1500 * 1000 * 1000))
echo "MPI bandwidth loop (rank 0 on n0 -> rank 1 on n1), ${SECS} s per step, payload rate"
printf "%-26s %12s %12s %9s %s\n" path "target MB/s" "MB/s" error verdict
up preload
steps preload "preload"
rp=$(mpi preload $BIG); rd=$(mpi kernel $BIG)
ip=$(iperf preload); id=$(iperf kernel)
"$CTL" set 30 >/dev/null; ip30=$(iperf preload); "$CTL" set unlimited >/dev/null
# trickle on the direct path (no interception), its rates in KiB/s.
for pct in 10 30; do
  target=$(awk -v p="$pct" 'BEGIN{print 125e6*p/100}'); kib=$(awk -v t="$target" 'BEGIN{printf "%.0f", t/1024}')
  r=$(mpi kernel "$(awk -v t="$target" -v s="$SECS" 'BEGIN{printf "%.0f", t*s}')" trickle -s -u "$kib" -d "$kib")
  row "trickle $pct%" "$target" "$(field rate_Bps "$r")"
done
kib30=$(awk 'BEGIN{printf "%.0f", 37.5e6/1024}')
it30=$(iperf kernel trickle -s -u "$kib30" -d "$kib30")
"$CTL" local down --force >/dev/null 2>&1
up kernel
steps kernel "kernel redirect"
rk=$(mpi kernel $BIG); ik=$(iperf kernel)
"$CTL" set 30 >/dev/null; ik30=$(iperf kernel); "$CTL" set unlimited >/dev/null
echo
echo "Unlimited: MPI loop ${BIG} bytes, payload MB/s; ping-pong RTT (8 bytes, mean of 100)"
printf "%-26s %12s %10s %14s\n" path "MB/s" "RTT us" "x direct"
for p in "preload:$rp" "kernel redirect:$rk" "direct (no interception):$rd"; do
  name=${p%%:*}; line=${p#*:}
  awk -v n="$name" -v a="$(field rate_Bps "$line")" -v d="$(field rate_Bps "$rd")" -v rtt="$(field rtt_us "$line")" \
    'BEGIN{ printf "%-26s %12.2f %10s %13.2fx\n", n, a/1e6, rtt, (d>0?a/d:0) }'
done
echo
echo "iperf3 n0 -> n1, ${SECS} s, received Mbit/s"
printf "%-26s %12s %12s %9s\n" path "target" "Mbit/s" error
irow() { awk -v n="$1" -v b="$2" 'BEGIN{ if (b=="" || b+0==0) { printf "%-26s %12s %12s %9s\n", n, "300.0", "failed", "-"; exit }
  e=b/300e6-1; printf "%-26s %12s %12.1f %+8.2f%%\n", n, "300.0", b/1e6, e*100}'; }
irow "preload 30%" "$ip30"; irow "kernel redirect 30%" "$ik30"; irow "trickle 30%" "$it30"
awk -v a="$ip" -v k="$ik" -v d="$id" 'BEGIN{printf "unlimited: preload %.0f, kernel redirect %.0f, direct %.0f Mbit/s (%.2fx, %.2fx direct)\n", a/1e6, k/1e6, d/1e6, a/d, k/d}'
