#!/usr/bin/env bash
# Two-size answers: how far a projection fitted on two sizes only can be believed, where
# no backtest can run (a program that runs on powers of two measured on 2 and 4 nodes, or
# PMM's 4 and 9), and whether the interval it is given (the two-size prior,
# `model_error::two_sizes_prior`) means what it says.
#
# From each of the projection benchmark's stores (bench/data/projection/SET/) two variants
# are cut, keeping only two fitted sizes and the held-out ones: `top`, the case's two
# largest fitted sizes (4 and 6 nodes -> 8 and 10; mw-far 3 and 4; bfs-primes 5 and 7;
# PMM's own 4 and 9 -> 16), and `pow`, 2 and 4 (-> 8 and 10, or 16), the newcomer's
# powers of two (no variant for bfs-primes and PMM). Each variant's stores are then
# judged by bench/projection.sh (BENCH_STORES), whose table reports the answers (NOT
# CHECKED) against the held-out truths. The prior was learned on SET=tune and is judged
# on alone and busy.
#
# Usage: bench/two_sizes.sh [SET ...]   (default: tune alone busy; about 40 s per variant)
#   BENCH_OLD_BIN=DIR  also analyse each store with the build in DIR (bench/projection.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
command -v sqlite3 >/dev/null || { echo "bench: sqlite3 is required (apt-get install sqlite3)" >&2; exit 2; }
SETS=("$@")
[ ${#SETS[@]} -eq 0 ] && SETS=(tune alone busy)
CUT=$(mktemp -d /tmp/throttle-two-sizes.XXXXXX)
trap 'rm -rf "$CUT"' EXIT
for set in "${SETS[@]}"; do
  for variant in top pow; do
    mkdir -p "$CUT/$set-$variant"
    for f in "$ROOT/bench/data/projection/$set"/*.db.xz; do
      c=$(basename "$f" .db.xz)
      case $c in
        mw-heavy|mw-light|bfs-emu|mpi-*) top=4,6,8,10; pow=2,4,8,10 ;;
        mw-demo) top=4,6,8,16; pow=2,4,8,16 ;;
        mw-far) top=3,4,8,16; pow=2,4,8,16 ;;
        bfs-primes) top=5,7,11; pow= ;;
        pmm-*) top=4,9,16; pow= ;;
        *) echo "# $c: not a case of bench/projection.sh, skipped" >&2; continue ;;
      esac
      keep=$top; [ "$variant" = pow ] && keep=$pow
      [ -z "$keep" ] && continue
      xz -dc "$f" >"$CUT/$set-$variant/$c.db"
      sqlite3 "$CUT/$set-$variant/$c.db" "delete from runs where nodes not in ($keep); vacuum;"
    done
    echo "## $set, variant $variant: $(ls "$CUT/$set-$variant" | sed 's/\.db$//' | tr '\n' ' ')"
    BENCH_STORES="$CUT/$set-$variant" bash "$ROOT/bench/projection.sh" \
      | sed -n '/^reliability/,$p'
    echo
  done
done
