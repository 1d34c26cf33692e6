#!/usr/bin/env bash
# PMM local kernel vs OpenBLAS dgemm, one core each, measured side by side (alternating):
# the default pure-Rust kernel (matrixmultiply) and the `openblas` feature build.
# Target: the kernel in use >= 70% of OpenBLAS.
# Usage: bench/dgemm.sh [N] [REPEATS]   (default 2048 3). Needs libopenblas-dev.
source "$(dirname "$0")/common.sh"
[ -n "$(ls /usr/include/cblas.h /usr/include/*/cblas.h 2>/dev/null)" ] || { echo "bench: libopenblas-dev is required" >&2; exit 2; }
N=${1:-2048}; REPS=${2:-3}
build
(cd "$ROOT" && cargo build --release -q -p workloads --example dgemm --features openblas --target-dir "$ROOT/target/openblas")
machine
gcc -O2 -o "$WORK/dgemm-openblas" "$ROOT/bench/dgemm.c" -lopenblas
export OPENBLAS_NUM_THREADS=1
printf "%-28s %6s %10s\n" kernel N "GFLOP/s"
declare -A R
for round in 1 2 3; do
  for k in "openblas (C reference):$WORK/dgemm-openblas" "matrixmultiply (default):$EX/dgemm" "openblas feature (Rust):$ROOT/target/openblas/release/examples/dgemm"; do
    name=${k%%:*}; bin=${k#*:}
    g=$(taskset -c 0 "$bin" "$N" "$REPS" | awk '{print $3}')
    R[$name]="${R[$name]:-} $g"
    printf "%-28s %6s %10s\n" "$name" "$N" "$g"
  done
done
best() { tr ' ' '\n' | grep -v '^$' | sort -g | tail -1; }
ref=$(echo "${R[openblas (C reference)]}" | best)
for name in "matrixmultiply (default)" "openblas feature (Rust)"; do
  b=$(echo "${R[$name]}" | best)
  awk -v b="$b" -v r="$ref" -v n="$name" 'BEGIN{printf "best %s: %.2f vs %.2f GFLOP/s = %.0f%% of OpenBLAS (target >= 70%%): %s\n", n, b, r, 100*b/r, (b >= 0.7*r ? "ok" : "MISS")}'
done
