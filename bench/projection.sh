#!/usr/bin/env bash
# Projection benchmark: how far the projections to sizes nobody measured can be believed,
# and whether their intervals mean what they say.
#
# Each case sweeps a program (with the demand search) on its smaller sizes AND on larger
# ones, then `analyze --predict L1,L2` holds the larger ones out of every fit and
# projects to them. For every held-out (size, CTI level) with a measured demand, and for
# both projections (traffic, DC), bench/projection_report.py prints the error, whether
# the truth lies inside the 90% interval the answer uses and, as the reference in the same
# invocation, inside the run-to-run interval alone; per case and overall: median |error|
# (pp), coverage, median width, runs spent on the fitted sizes, points with no number;
# then the reliability table (observed coverage of the intervals at nominal 50, 80, 90
# and 95%, per case, per family of programs and overall) and the TRUSTED misses.
#
# Usage: bench/projection.sh [CASE ...]   (default: every case below; 4-10 min each here)
#   BENCH_KEEP=DIR     copy each case's store to DIR/CASE.db
#   BENCH_STORES=DIR   analyse DIR/CASE.db (or CASE.db.xz) instead of sweeping (the same
#                      runs, another analysis: BENCH_BIN=DIR for another build's); the
#                      stores this benchmark was judged on are kept in bench/data/projection/
#   BENCH_OLD_BIN=DIR  also analyse every store with the build in DIR and print both
#                      side by side (the same runs, old analysis against new)
# Cases (held-out sizes 1.3x-4x beyond the largest fitted one):
# mw-heavy mw-light bfs-emu (fitted on 2, 3, 4, 6 nodes, held out 8 and 10), bfs-primes
# (the same BFS on 2, 3, 5, 7 nodes, held out 11: a prime p is a 1 x p process grid, so
# every size has the same communication pattern, which 2, 3, 4, 6 do not),
# mw-demo (the demo's program fitted on 2, 3, 4, 6 and held out 8 and 16: 1.3x and 2.7x),
# mw-far (mw-heavy fitted on 2, 3, 4 and held out 8 and 16: 2x and 4x), pmm-binomial
# pmm-flat (4 and 9, held out 16: a 2-core machine cannot run 25 nodes), and three
# ordinary MPI programs launched by mpirun over namespace hosts and intercepted by the
# agents' kernel redirect (2, 3, 4, 6 nodes, held out 8 and 10; they need root and Open
# MPI, and are skipped with a line saying so otherwise): mpi-halo (bench/mpi_halo.c, a
# stencil's halo exchange, strong scaling), mpi-exchange (bench/mpi_exchange.c, the Intel
# MPI Benchmarks' Exchange pattern with weak-scaling work: a nearly flat demand) and
# mpi-alltoall (bench/mpi_alltoall.c, a transpose: the traffic per node falls like the
# work). On two cores 16 agents and 16 ranks starve: a held-out size with more than a
# third of its runs flagged is listed, not counted.
source "$(dirname "$0")/common.sh"
need python3 python3
CASES=("$@")
[ ${#CASES[@]} -eq 0 ] && CASES=(mw-heavy mw-light bfs-emu bfs-primes mw-demo mw-far pmm-binomial pmm-flat mpi-halo mpi-exchange mpi-alltoall)
build
machine
MPI_SUBNET=198.18.91.0/24
NETNS_CLUSTER="$WORK/netns/throttle-cluster.toml"
trap 'THROTTLE_CLUSTER=$NETNS_CLUSTER "$CTL" local down --force >/dev/null 2>&1 || true; cleanup' EXIT
LOOPBACK_UP=
loopback_up() { # the 16 loopback agents the workload cases share, once
  [ -n "$LOOPBACK_UP" ] && return 0
  "$CTL" local up --nodes 16 --capacity 100Mbit --dir "$WORK/state" >/dev/null 2>&1
  LOOPBACK_UP=1
}
mpi_up() { netns_mpi_up "$MPI_SUBNET" 10 mpi_halo mpi_exchange mpi_alltoall; }

# The emulated BFS both BFS cases run (their sizes differ).
BFS='[bfs]
scale = 14
keys = 8
validate = false
emulate_meps = 4'
SEARCH='[search]
levels = [10, 15, 20, 25]
width = 5
max_steps = 8'
COMMON='bandwidths = [100, 50, 25]
repeats = 3
settle = 0.2
time_limit = 120
retries = 1
seed = 1'

# An MPI program of bench/ launched by mpirun over the namespace hosts: held-out sizes,
# nodes, the program and its arguments.
mpi_case() {
  echo "$1|workload = \"command\"
nodes = [$2]
$COMMON
[command]
run = '''mpirun --allow-run-as-root --mca plm_rsh_agent \"$CTL exec\" --mca btl tcp,self --mca mpi_yield_when_idle 1 --mca rtc ^hwloc --mca oob_tcp_if_include $MPI_SUBNET --hostfile {hostfile} -np {procs} $WORK/$3'''
time_regex = 'elapsed: ([0-9.]+)'
$SEARCH"
}

# case -> "held-out sizes|spec"
spec() {
  case "$1" in
    mw-heavy) echo "8,10|workload = \"mw\"
nodes = [2, 3, 4, 6, 8, 10]
$COMMON
[mw]
volume = 300000
alpha = 0.5
compute_seconds = 1.0
iterations = 2
$SEARCH" ;;
    mw-light) echo "8,10|workload = \"mw\"
nodes = [2, 3, 4, 6, 8, 10]
$COMMON
[mw]
volume = 100000
alpha = 0.8
compute_seconds = 0.6
iterations = 3
$SEARCH" ;;
    mw-demo) echo "8,16|workload = \"mw\"
nodes = [2, 3, 4, 6, 8, 16]
$COMMON
[mw]
volume = 100000
alpha = 0.8
compute_seconds = 0.6
iterations = 1
$SEARCH" ;;
    mw-far) echo "8,16|workload = \"mw\"
nodes = [2, 3, 4, 8, 16]
$COMMON
[mw]
volume = 300000
alpha = 0.5
compute_seconds = 1.0
iterations = 2
$SEARCH" ;;
    bfs-emu) echo "8,10|workload = \"bfs\"
nodes = [2, 3, 4, 6, 8, 10]
$COMMON
$BFS
$SEARCH" ;;
    bfs-primes) echo "11|workload = \"bfs\"
nodes = [2, 3, 5, 7, 11]
$COMMON
$BFS
$SEARCH" ;;
    pmm-binomial|pmm-flat) echo "16|workload = \"pmm\"
nodes = [4, 9, 16]
$COMMON
[pmm]
size = 240
bcast = \"${1#pmm-}\"
emulate_gflops = 0.0117
$SEARCH" ;;
    mpi-halo) mpi_case "8,10" "2, 3, 4, 6, 8, 10" "mpi_halo 80000 0.6 3" ;;
    mpi-exchange) mpi_case "8,10" "2, 3, 4, 6, 8, 10" "mpi_exchange 60000 0.1 4" ;;
    mpi-alltoall) mpi_case "8,10" "2, 3, 4, 6, 8, 10" "mpi_alltoall 1200000 0.8 3" ;;
    *) echo "unknown case $1" >&2; exit 2 ;;
  esac
}

for c in "${CASES[@]}"; do
  s=$(spec "$c")
  held=${s%%|*}
  printf '%s\n' "${s#*|}" >"$WORK/$c.toml"
  start=$(date +%s)
  if [ -n "${BENCH_STORES:-}" ]; then
    if [ -f "$BENCH_STORES/$c.db" ]; then cp "$BENCH_STORES/$c.db" "$WORK/$c.db"
    elif [ -f "$BENCH_STORES/$c.db.xz" ]; then xz -dc "$BENCH_STORES/$c.db.xz" >"$WORK/$c.db"
    else echo "# $c: skipped: no $BENCH_STORES/$c.db or $c.db.xz" >&2; continue; fi
  elif [[ "$c" == mpi-* ]]; then
    if ! why=$(mpi_up); then echo "# $c: skipped: $why" >&2; continue; fi
    THROTTLE_CLUSTER=$NETNS_CLUSTER "$CTL" sweep "$WORK/$c.toml" --db "$WORK/$c.db" --plain >"$WORK/$c.log" 2>&1 || true
    THROTTLE_CLUSTER=$NETNS_CLUSTER "$CTL" local down --force >/dev/null 2>&1 || true
  else
    loopback_up
    "$CTL" sweep "$WORK/$c.toml" --db "$WORK/$c.db" --plain >"$WORK/$c.log" 2>&1 || true
  fi
  end=$(date +%s)
  if [ -n "${BENCH_KEEP:-}" ]; then mkdir -p "$BENCH_KEEP" && cp "$WORK/$c.db" "$BENCH_KEEP/"; fi
  "$CTL" analyze --db "$WORK/$c.db" --cti 10,15,20,25 --predict "$held" --json >"$WORK/$c.json" 2>"$WORK/$c.err" || {
    echo "$c: analyze failed: $(tail -1 "$WORK/$c.err")" >&2; rm -f "$WORK/$c.json"; continue; }
  if [ -n "${BENCH_OLD_BIN:-}" ]; then
    "$BENCH_OLD_BIN/throttle-ctl" analyze --db "$WORK/$c.db" --cti 10,15,20,25 --predict "$held" --json \
      >"$WORK/$c.old.json" 2>"$WORK/$c.old.err" || {
      echo "$c: the other build's analyze failed: $(tail -1 "$WORK/$c.old.err")" >&2; rm -f "$WORK/$c.old.json"; }
  fi
  echo "$c $held $((end - start))" >>"$WORK/cases"
  if [ -f "$WORK/$c.log" ]; then echo "# $c: sweep $((end - start)) s, held out $held; $(grep -c . "$WORK/$c.log") lines of progress" >&2; fi
done
[ -f "$WORK/cases" ] || { echo "no case ran" >&2; exit 1; }
python3 "$ROOT/bench/projection_report.py" "$WORK"
