#!/usr/bin/env bash
# Benchmark: what keeps busy-polling MPI ranks from starving the agents on a shared node,
# and what each protection costs. Two namespace hosts, two Open MPI ranks on each (four
# ranks and two agents on this machine's cores), a 2-second bandwidth loop (rank 0 on n0
# -> rank 3 on n1, bench/mpi_bandwidth.c) at 30% and 100% of 1 Gbit/s, through
# `throttle-ctl run --cmd`, so every run carries its proof. Per variant: the loop's payload
# rate against the setting, whether the run was flagged, and the most any agent waited
# for a CPU. Variants:
#   busy-poll, agents normal    Open MPI's default polling, agents at nice 0 (the old way)
#   busy-poll, agents high      the same, agents at nice -10 (--priority high, the default)
#   busy-poll, agents realtime  agents under SCHED_RR (--priority realtime)
#   busy-poll, ranks nice 10    the command under nice 10, agents normal
#   yield (default)             agents high, and exec's OMPI_MCA_mpi_yield_when_idle=1
# Needs root, Open MPI, jq. Usage: bench/starvation.sh
source "$(dirname "$0")/common.sh"
need mpicc libopenmpi-dev; need mpirun openmpi-bin; need jq jq
[ "$(id -u)" = 0 ] || { echo "bench/starvation.sh needs root (namespace hosts)" >&2; exit 2; }
build
machine
mpicc -O2 -o "$WORK/mpibw" "$ROOT/bench/mpi_bandwidth.c"
SUB=198.18.94
up() { "$CTL" local down --force >/dev/null 2>&1 || true; "$CTL" local up --netns --nodes 2 --capacity 1Gbit --subnet "$SUB.0/24" --agent-priority "$1" --dir "$WORK/state-$1" >/dev/null 2>&1; }
run() { # bw yield_flag wrapper... -> one line
  local bw=$1 y=$2; shift 2
  local bytes=$((bw * 1250000 * 2))
  (cd "$WORK" && "$@" "$CTL" run --nodes 2 --ranks-per-node 2 --bw "$bw" --json --cmd \
    "mpirun --allow-run-as-root --mca plm_rsh_agent '$CTL exec' --mca btl tcp,self $y --mca rtc ^hwloc --mca oob_tcp_if_include $SUB.0/24 --hostfile {hostfile} -np 4 ./mpibw $bytes" \
    --time-regex 'seconds=([0-9.]+)' 2>/dev/null) |
    jq -r --arg b "$bytes" --arg bw "$bw" '"\(($b|tonumber) / .result.seconds / (($bw|tonumber)*1250000) * 100 | . * 10 | round / 10)% \((.fidelity.flags | length) > 0 | if . then "FLAGGED" else "-" end) \(.fidelity.nodes | map(.cpu_wait_seconds) | max * 1000 | round) ms"'
}
printf "%-28s %-30s %-30s\n" variant "30%: rate/setting flag wait" "100%: rate/setting flag wait"
variant() { # name priority yield_flag wrapper...
  local name=$1 prio=$2 y=$3; shift 3
  up "$prio"
  printf "%-28s %-30s %-30s\n" "$name" "$(run 30 "$y" "$@")" "$(run 100 "$y" "$@")"
}
for round in 1 2; do
  variant "busy-poll, agents normal" normal "--mca mpi_yield_when_idle 0"
  variant "busy-poll, agents high" high "--mca mpi_yield_when_idle 0"
  variant "busy-poll, agents realtime" realtime "--mca mpi_yield_when_idle 0"
  variant "busy-poll, ranks nice 10" normal "--mca mpi_yield_when_idle 0" nice -n 10
  variant "yield (default)" high ""
done
