#!/usr/bin/env bash
# Latency demand benchmark (issue 46): how far the latency tolerance projected from
# smaller sizes is from the one measured at a held-out size, and whether its interval
# holds it.
#
# Each case sweeps a program's latency points (`latencies`: the full link with 0, 250,
# 1000, 4000 and 16000 us added one way) on 2, 3, 4, 6 and 8 nodes, then
# `analyze --predict 8` holds 8 out of the fit and projects to it. For every level with a
# tolerance measured at 8 (read between two measured latency steps), one row: the
# projection, its 90% interval, the measurement, the error and whether the interval holds
# it; the verdict of the backtest that holds 6 out of the rest.
#
# Usage: bench/latency_demand.sh [CASE ...]   (default: mw mpi-halo; 5-10 min each here)
#   BENCH_KEEP=DIR     copy each case's store to DIR/CASE.db
#   BENCH_STORES=DIR   analyse DIR/CASE.db instead of sweeping
# Cases: mw (the master/worker workload on loopback agents), mpi-halo (bench/mpi_halo.c,
# a stencil's halo exchange launched by mpirun over namespace hosts: root and Open MPI,
# skipped with a line saying so otherwise).
source "$(dirname "$0")/common.sh"
need python3 python3
CASES=("$@")
[ ${#CASES[@]} -eq 0 ] && CASES=(mw mpi-halo)
build
machine
MPI_SUBNET=198.18.92.0/24
NETNS_CLUSTER="$WORK/netns/throttle-cluster.toml"
trap 'THROTTLE_CLUSTER=$NETNS_CLUSTER "$CTL" local down --force >/dev/null 2>&1 || true; cleanup' EXIT
COMMON='nodes = [2, 3, 4, 6, 8]
bandwidths = [100]
latencies = [0, 250, 1000, 4000, 16000]
repeats = 3
settle = 0.2
time_limit = 120
retries = 1
seed = 1'
spec() {
  case "$1" in
    mw) echo "workload = \"mw\"
$COMMON
[mw]
volume = 100000
alpha = 0.8
compute_seconds = 0.6
iterations = 3" ;;
    mpi-halo) echo "workload = \"command\"
$COMMON
[command]
run = '''mpirun --allow-run-as-root --mca plm_rsh_agent \"$CTL exec\" --mca btl tcp,self --mca mpi_yield_when_idle 1 --mca rtc ^hwloc --mca oob_tcp_if_include $MPI_SUBNET --hostfile {hostfile} -np {procs} $WORK/mpi_halo 80000 0.6 3'''
time_regex = 'elapsed: ([0-9.]+)'" ;;
    *) echo "unknown case $1" >&2; exit 2 ;;
  esac
}
printf '%-9s %5s %5s %26s %9s %8s %6s  %s\n' case procs cti "projected us [90% interval]" measured error inside backtest
for c in "${CASES[@]}"; do
  spec "$c" >"$WORK/$c.toml"
  start=$(date +%s)
  if [ -n "${BENCH_STORES:-}" ]; then
    cp "$BENCH_STORES/$c.db" "$WORK/$c.db" || { echo "# $c: skipped: no $BENCH_STORES/$c.db" >&2; continue; }
  elif [ "$c" = mpi-halo ]; then
    if ! why=$(netns_mpi_up "$MPI_SUBNET" 8 mpi_halo); then echo "# $c: skipped: $why" >&2; continue; fi
    THROTTLE_CLUSTER=$NETNS_CLUSTER "$CTL" sweep "$WORK/$c.toml" --db "$WORK/$c.db" --plain >"$WORK/$c.log" 2>&1 || true
    THROTTLE_CLUSTER=$NETNS_CLUSTER "$CTL" local down --force >/dev/null 2>&1 || true
  else
    "$CTL" local up --nodes 8 --capacity 100Mbit --dir "$WORK/state" >/dev/null 2>&1
    "$CTL" sweep "$WORK/$c.toml" --db "$WORK/$c.db" --plain >"$WORK/$c.log" 2>&1 || true
    "$CTL" local down --force >/dev/null 2>&1 || true
  fi
  end=$(date +%s)
  if [ -n "${BENCH_KEEP:-}" ]; then mkdir -p "$BENCH_KEEP" && cp "$WORK/$c.db" "$BENCH_KEEP/"; fi
  [ -f "$WORK/$c.log" ] && echo "# $c: sweep $((end - start)) s, $(grep -c FLAGGED "$WORK/$c.log" || true) flagged attempts" >&2
  "$CTL" analyze --db "$WORK/$c.db" --cti 5,10,20,40 --predict 8 --json >"$WORK/$c.json" 2>"$WORK/$c.err" || {
    echo "# $c: analyze failed: $(tail -1 "$WORK/$c.err")" >&2; continue; }
  python3 - "$c" "$WORK/$c.json" <<'PY'
import json, sys
case, path = sys.argv[1], sys.argv[2]
l = json.load(open(path)).get("latency")
if not l:
    print(f"{case}: no latency answer"); sys.exit()
verdict = l["verdict"]
rows = [p for p in l["projection"] if p["measured"] is not None]
if not rows:
    print(f"{case:<9} no level measured at 8 procs ({', '.join(str(t['latency_us']) + ' ' + t['censored'] for t in l['tolerance'] if t['procs'] == 8)}); backtest {verdict}")
for p in rows:
    print(f"{case:<9} {p['procs']:>5} {p['cti']:>5g} {p['latency_us']:>8.0f} [{p['low']:>7.0f}-{p['high']:>7.0f}] {p['measured']:>9.0f} {p['error_rel']*100:>+7.0f}% {'yes' if p['inside'] else 'NO':>6}  {verdict}")
PY
done
