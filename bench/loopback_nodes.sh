#!/usr/bin/env bash
# Benchmark: unmodified programs as nodes of a loopback cluster (no root): 4 agents on
# 127.0.1.1-4 at 1 Gbit/s, programs started with `throttle-ctl exec NODE`. For each
# setting: iperf3 from n0 to n1 (the receiver's rate) and Open MPI with one rank per node
# (bench/mpi_bandwidth.c: rank 0 streams 64 MiB to rank 3), against the setting, and in
# the same run the reference of the same iperf3 straight over loopback (no agent).
# Target (issue 37): iperf3 at 30% of 1 Gbit/s within 5% of 300 Mbit/s.
# Usage: bench/loopback_nodes.sh [REPEATS] [SECONDS]   (defaults 3, 3 s)
# Run it as the user it is about: as root the agents also raise their priority. As
# another user, build first and give BENCH_BIN a copy that user can read.
source "$(dirname "$0")/common.sh"
need iperf3 iperf3; need jq jq; need mpicc libopenmpi-dev; need mpirun openmpi-bin; need ss iproute2
REPS=${1:-3}
SECS=${2:-3}
if [ -w "$ROOT/target" ]; then build; fi
machine
echo "# as $(id -un) (uid $(id -u))"
"$CTL" local up --nodes 4 --capacity 1Gbit --dir "$WORK/state" >/dev/null 2>&1
mpicc -O2 -o "$WORK/bw" "$ROOT/bench/mpi_bandwidth.c"
for i in 1 2 3 4; do echo "127.0.1.$i slots=1"; done > "$WORK/hosts"
ROOTFLAG=(); [ "$(id -u)" = 0 ] && ROOTFLAG=(--allow-run-as-root)
# Wait until something listens at HOST:PORT without connecting (a one-client server would
# take the probe for its client).
wait_listen() { for _ in $(seq 1 200); do ss -Hltn "src $1:$2" | grep -q . && return 0; sleep 0.05; done; echo "nothing listens on $1:$2" >&2; return 1; }
iperf_via() { # NODE_FROM NODE_TO_ADDR -> Mbit/s received
  "$CTL" exec n1 -- iperf3 -s -1 -p 5311 >/dev/null 2>&1 & PIDS+=($!)
  wait_listen "$2" 5311
  "$CTL" exec "$1" -- iperf3 -c "$2" -p 5311 -t "$SECS" -J | jq '.end.sum_received.bits_per_second / 1e6'
}
mpi_bw() {
  (cd "$WORK" && mpirun "${ROOTFLAG[@]}" --mca plm_rsh_agent "$CTL exec" --mca btl tcp,self \
     --mca rtc ^hwloc --hostfile hosts -np 4 ./bw 67108864) |
    awk '/^ranks=/ { for (i = 1; i <= NF; i++) if ($i ~ /^rate_Bps=/) { split($i, a, "="); printf "%.1f\n", a[2] * 8 / 1e6 } }'
}
iperf3 -s -B 127.0.1.2 -p 5312 >/dev/null 2>&1 & PIDS+=($!)
wait_port 127.0.1.2 5312
direct=$(iperf3 -c 127.0.1.2 -p 5312 -t "$SECS" -J | jq '.end.sum_received.bits_per_second / 1e6')
echo "# reference: iperf3 straight over loopback, no agent: $direct Mbit/s"
printf "%5s %9s %6s %12s %9s %8s\n" pct setting rep program "Mbit/s" "of set"
for pct in 30 60 100; do
  "$CTL" set "$pct" >/dev/null
  for rep in $(seq 1 "$REPS"); do
    for prog in iperf3 mpi; do
      if [ "$prog" = iperf3 ]; then r=$(iperf_via n0 127.0.1.2); else r=$(mpi_bw); fi
      awk -v p="$pct" -v rep="$rep" -v prog="$prog" -v r="$r" 'BEGIN {
        set = p * 10; printf "%5d %9d %6d %12s %9.1f %7.1f%%\n", p, set, rep, prog, r, 100 * r / set }'
    done
  done
done
