# Shared helpers for the bench scripts: build, a local cluster in a scratch dir, cleanup.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
need() { command -v "$1" >/dev/null 2>&1 || { echo "bench: $1 is required (apt-get install $2)" >&2; exit 2; }; }
build() { (cd "$ROOT" && cargo build --release --workspace --lib --bins --examples -q); }
# BENCH_BIN=DIR measures the throttle-ctl/throttle-agent found in DIR (another build, e.g.
# an earlier commit) with this tree's load generators.
CTL="${BENCH_BIN:-$ROOT/target/release}/throttle-ctl"
EX="$ROOT/target/release/examples"
WORK=$(mktemp -d /tmp/throttle-bench.XXXXXX)
export THROTTLE_CLUSTER="$WORK/throttle-cluster.toml"
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  "$CTL" local down --force >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# Benches that run one cluster per mode side by side, each in $WORK/MODE: `ctl MODE ARGS`
# runs throttle-ctl on that mode's cluster; `serve CMD...` starts a server in a process
# group of its own (`exec` leaves its command running when it is killed, so the groups are
# what is killed); `stop_modes MODE...` kills them and takes those clusters down.
GROUPS_=()
ctl() { THROTTLE_CLUSTER="$WORK/$1/throttle-cluster.toml" "$CTL" "${@:2}"; }
serve() { setsid "$@" >/dev/null 2>&1 & GROUPS_+=($!); }
stop_modes() {
  for g in "${GROUPS_[@]:-}"; do [ -n "$g" ] && kill -- "-$g" 2>/dev/null || true; done
  for m in "$@"; do [ -f "$WORK/$m/throttle-cluster.toml" ] && ctl "$m" local down --force >/dev/null 2>&1 || true; done
}
# Machine line for the record.
machine() { echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r) $(nproc) cores $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"; }
# Wait until something listens on HOST PORT.
wait_port() { for _ in $(seq 1 200); do (exec 3<>/dev/tcp/$1/$2) 2>/dev/null && return 0; sleep 0.05; done; echo "nothing listens on $1:$2" >&2; return 1; }
# Namespace hosts for an MPI program of bench/: `netns_mpi_up SUBNET NODES PROG...` builds
# each PROG.c into $WORK and starts NODES hosts whose cluster file is $NETNS_CLUSTER; on
# failure it prints why (not root, no Open MPI, a failed build or start) and returns 1.
netns_mpi_up() {
  local subnet=$1 nodes=$2; shift 2
  if [ "$(id -u)" != 0 ]; then echo "needs root (namespace hosts)"; return 1; fi
  command -v mpicc >/dev/null && command -v mpirun >/dev/null || { echo "needs Open MPI (apt-get install openmpi-bin libopenmpi-dev)"; return 1; }
  mkdir -p "$WORK/netns"
  for prog in "$@"; do
    mpicc -O2 -o "$WORK/$prog" "$ROOT/bench/$prog.c" || { echo "mpicc $prog.c failed"; return 1; }
  done
  (cd "$WORK/netns" && THROTTLE_CLUSTER=$NETNS_CLUSTER "$CTL" local up --netns --nodes "$nodes" --capacity 100Mbit \
      --subnet "$subnet" --dir "$WORK/netns/state" >/dev/null 2>&1) || { echo "local up --netns failed"; return 1; }
}
