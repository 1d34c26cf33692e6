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
# Machine line for the record.
machine() { echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r) $(nproc) cores $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"; }
# Wait until something listens on HOST PORT.
wait_port() { for _ in $(seq 1 200); do (exec 3<>/dev/tcp/$1/$2) 2>/dev/null && return 0; sleep 0.05; done; echo "nothing listens on $1:$2" >&2; return 1; }
