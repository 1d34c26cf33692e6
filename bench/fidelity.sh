#!/usr/bin/env bash
# Benchmark: is the emulated link a link of its rate for request-response traffic?
#
# Four namespace hosts (local up --netns --intercept, 1 Gbit/s). Each pattern runs through
# the agents (kernel redirect) and, in the same invocation, through Linux's tbf on the same
# veth links with the agents' rules removed (the reference a network engineer would reach
# for), at 10, 30 and 100% of 1 Gbit/s:
#   * ping-pong of every power of two from 4 KiB to 4 MiB (pingpong: the server answers
#     each whole message), back to back and with a 2 ms pause between exchanges;
#   * incast (3 nodes send BYTES to one at once) and all-to-all (every node to every other,
#     12 flows), 64 KiB and 1 MiB per flow (blast);
#   * an MPI ping-pong (Open MPI, TCP BTL; bench/mpi_pingpong.c) from 4 KiB to 4 MiB.
#
# The time a real link gives lies between two references, measured here with shaping off:
#   floor = serialization + the direct (veth, no agents) round trip of a 64-byte message:
#           a real link overlaps the hosts' copying of a large message with its wire
#           time, and adds no agents;
#   ideal = serialization + the unshaped time of the same exchange on the same path (no
#           overlap at all; with pauses, measured with the same pauses);
# serialization is 2 x size / rate for a ping-pong, and for incast and all-to-all the
# busiest node's bytes / rate (3 x BYTES either way). `err` is the distance from that band
# (0 inside it), relative to the nearer end; `floor` and `ideal` are against each alone.
# Targets: ping-pong from 64 KiB up within 3%, 4-32 KiB within 10%.
# tbf counts Ethernet frames, so its rate is the payload rate x 1514/1448 (MTU 1500, TCP
# timestamps) and its burst 2 frames (TBF_BURST bytes to change it).
#
# Needs root, Open MPI (openmpi-bin, libopenmpi-dev), iproute2 (tc), jq.
# Usage: bench/fidelity.sh [SECONDS_PER_CELL]   (default 0.3; PCTS="10 30 100" to change)
source "$(dirname "$0")/common.sh"
need jq jq; need tc iproute2; need mpicc libopenmpi-dev; need mpirun openmpi-bin
[ "$(id -u)" = 0 ] || { echo "bench/fidelity.sh needs root (namespace hosts, tbf)" >&2; exit 2; }
SECS=${1:-0.3}
PCTS=${PCTS:-10 30 100}
SIZES=${SIZES:-4096 8192 16384 32768 65536 131072 262144 524288 1048576 2097152 4194304}
PAUSE_US=2000
SUB=198.18.91
build
machine
"$CTL" local up --netns --nodes 4 --capacity 1Gbit --subnet "$SUB.0/24" --dir "$WORK/state" >/dev/null
NS=($(grep '^netns' "$THROTTLE_CLUSTER" | cut -d'"' -f2))
TAG=${NS[0]#throttle-}; TAG=${TAG%-n0}
addr() { echo "$SUB.$(($1 + 1))"; }
# --- the two paths -------------------------------------------------------------------
rules() { # on|off: the agents' redirect rules in every node
  for ns in "${NS[@]}"; do
    if [ "$1" = off ]; then ip netns exec "$ns" nft list table ip throttle > "$WORK/$ns.rules"; ip netns exec "$ns" nft delete table ip throttle
    else ip netns exec "$ns" nft -f "$WORK/$ns.rules"; fi
  done
}
tbf() { # PCT|off: both directions of every node's link
  for i in "${!NS[@]}"; do
    for dev in "ip netns exec ${NS[$i]} tc qdisc %s dev eth0" "tc qdisc %s dev thr${TAG}n$i"; do
      if [ "$1" = off ]; then $(printf "$dev" del) root 2>/dev/null || true
      else
        local bits; bits=$(awk -v p="$1" 'BEGIN{printf "%.0f", 1e9*p/100*1514/1448}')
        $(printf "$dev" replace) root tbf rate "${bits}bit" burst "${TBF_BURST:-3028}" latency 200ms
      fi
    done
  done
}
PATH_NOW=agents
use() { # agents|tbf PCT|unshaped
  local path=$1 pct=$2
  if [ "$path" != "$PATH_NOW" ]; then
    if [ "$path" = tbf ]; then rules off; else tbf off; rules on; fi
    PATH_NOW=$path
  fi
  if [ "$path" = agents ]; then "$CTL" set "${pct/unshaped/unlimited}" >/dev/null
  elif [ "$pct" = unshaped ]; then tbf off
  else tbf "$pct"; fi
}
declare -A R  # path:pct:pattern:size -> median us
# --- ping-pong -----------------------------------------------------------------------
"$CTL" exec n1 -- "$EX/pingpong" server "$(addr 1):5401" >/dev/null 2>&1 & PIDS+=($!)
for i in 0 1 2 3; do "$CTL" exec n$i -- "$EX/blast" sink "$(addr $i):5501" >/dev/null 2>&1 & PIDS+=($!); done
sleep 1
pingpong() { # size pause_us -> median us
  "$CTL" exec n0 -- "$EX/pingpong" client "$(addr 1):5401" 5 "$1" "$2" "$SECS" | jq .median_us
}
blast() { # pattern bytes -> median us
  local flows=()
  if [ "$1" = incast ]; then for i in 1 2 3; do flows+=("${NS[$i]}/$(addr 0):5501"); done
  else for i in 0 1 2 3; do for j in 0 1 2 3; do [ $i != $j ] && flows+=("${NS[$i]}/$(addr $j):5501"); done; done; fi
  "$EX/blast" send 7 "$2" 20 "${flows[@]}" | jq .median_us
}
echo "# measuring: ping-pong, incast, all-to-all on both paths (takes several minutes)" >&2
for path in agents tbf; do
  for pct in unshaped $PCTS; do
    use "$path" "$pct"
    sizes=$SIZES; [ "$pct" = unshaped ] && sizes="64 $SIZES"
    for size in $sizes; do
      R[$path:$pct:b2b:$size]=$(pingpong "$size" 0)
      R[$path:$pct:pause:$size]=$(pingpong "$size" "$PAUSE_US")
    done
    for pattern in incast alltoall; do
      for bytes in 65536 1048576; do R[$path:$pct:$pattern:$bytes]=$(blast $pattern $bytes); done
    done
  done
done
# --- MPI -----------------------------------------------------------------------------
mpicc -O2 -o "$WORK/mpipp" "$ROOT/bench/mpi_pingpong.c"
printf '%s slots=1\n%s slots=1\n' "$(addr 0)" "$(addr 1)" > "$WORK/hosts"
mpi() { # -> "size median" lines
  PP_SECONDS=$SECS mpirun --allow-run-as-root --mca plm_rsh_agent "$CTL exec" --mca btl tcp,self \
    --mca mpi_yield_when_idle 1 --mca rtc ^hwloc --mca oob_tcp_if_include "$SUB.0/24" \
    -x PP_SECONDS --hostfile "$WORK/hosts" -np 2 "$WORK/mpipp" 64 $SIZES 2>/dev/null \
    | sed -n 's/^size=\([0-9]*\) .*median_us=\([0-9.]*\).*/\1 \2/p'
}
for path in agents tbf; do
  for pct in unshaped $PCTS; do
    use "$path" "$pct"
    while read -r size med; do R[$path:$pct:mpi:$size]=$med; done < <(mpi)
  done
done
use agents unlimited
# --- the table -----------------------------------------------------------------------
verdict() { # size
  if [ "$1" -ge 65536 ]; then echo 3; else echo 10; fi
}
row() { # pattern size pct serialization_us floor_key
  local pattern=$1 size=$2 pct=$3 ser=$4 small=$5 line
  line=$(printf "%-9s %8s %4s%%" "$pattern" "$size" "$pct")
  for path in agents tbf; do
    local base=${R[$path:unshaped:$pattern:$size]:-}
    local floor_base=${R[tbf:unshaped:$small]:-$base}
    local m=${R[$path:$pct:$pattern:$size]:-}
    line+=$(awk -v m="$m" -v s="$ser" -v b="$base" -v f="$floor_base" -v tol="$(verdict "$size")" 'BEGIN{
      if (m == "" || b == "") { printf " %9s %7s %7s %7s %s", "-", "-", "-", "-", "  "; exit }
      lo = s + f; hi = s + b; if (lo > hi) { t = lo; lo = hi; hi = t }
      e = (m > hi) ? m / hi - 1 : ((m < lo) ? m / lo - 1 : 0);
      v = (e < 0 ? -e : e) * 100 <= tol ? "ok" : "MISS";
      printf " %9.0f %+6.1f%% %+6.1f%% %+6.1f%% %-4s", m, e * 100, (m / lo - 1) * 100, (m / hi - 1) * 100, v }')
  done
  echo "$line"
}
rate() { awk -v p="$1" 'BEGIN{print 125e6*p/100}'; }
echo
echo "Ping-pong (median round trip, us) and MPI ping-pong; err: outside [floor, ideal]"
printf "%-9s %8s %5s %9s %7s %7s %7s %-4s %9s %7s %7s %7s %-4s\n" pattern bytes bw "agents" err floor ideal "" "tbf" err floor ideal ""
for pattern in b2b pause mpi; do
  for pct in $PCTS; do
    for size in $SIZES; do
      ser=$(awk -v s="$size" -v r="$(rate "$pct")" 'BEGIN{print 2*s/r*1e6}')
      small=$pattern:64
      row "$pattern" "$size" "$pct" "$ser" "$small"
    done
  done
done
echo
echo "Incast (3 -> 1) and all-to-all (4 x 3 flows), median round of 7 (us); serialization 3 x bytes / rate"
printf "%-9s %8s %5s %9s %7s %7s %7s %-4s %9s %7s %7s %7s %-4s\n" pattern bytes bw "agents" err floor ideal "" "tbf" err floor ideal ""
for pattern in incast alltoall; do
  for pct in $PCTS; do
    for bytes in 65536 1048576; do
      ser=$(awk -v s="$bytes" -v r="$(rate "$pct")" 'BEGIN{print 3*s/r*1e6}')
      row "$pattern" "$bytes" "$pct" "$ser" "b2b:64"
    done
  done
done
echo
echo "Unshaped round trips (us): agents (unlimited) / veth without tbf"
for size in 64 $SIZES; do
  printf "%8s  ping-pong %8s / %-8s  with pauses %8s / %-8s  mpi %8s / %-8s\n" "$size" \
    "${R[agents:unshaped:b2b:$size]:-}" "${R[tbf:unshaped:b2b:$size]:-}" "${R[agents:unshaped:pause:$size]:-}" \
    "${R[tbf:unshaped:pause:$size]:-}" "${R[agents:unshaped:mpi:$size]:-}" "${R[tbf:unshaped:mpi:$size]:-}"
done
echo
echo "The agents' own account over the whole benchmark (status: pacing, cpu):"
"$CTL" status --json | jq -r '.[] | "\(.node): " + ([.egress, .ingress] | map(.pacing | "busy \(.busy_seconds*1000|floor) ms (backlogged \(.backlog_seconds*1000|floor)) lost \(.lost_seconds*1000|floor) ms, \(.late_bursts) bursts late by \(.late_burst_seconds*1000|floor) ms beyond 1 ms") | join(" / ")) + "; waited for a CPU \(.cpu.run_delay_seconds*1000|floor) ms"'
