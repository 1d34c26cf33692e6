#!/usr/bin/env bash
# BFS benchmarks through real agents:
#  1. one rank, scale 18, unlimited: harmonic-mean TEPS (reference: the Graph500 reference
#     MPI code reached about 68 MTEPS with one process on this machine in an earlier session);
#  2. four ranks on four local agents, unlimited: TEPS and the communication share;
#  3. throttling matters: scale 16 on four nodes at 100%, 50%, 20% of 1 Gbit/s.
# Usage: bench/bfs.sh [SCALE1] [SCALE3]   (default 18 16)
source "$(dirname "$0")/common.sh"
need jq jq
S1=${1:-18}; S3=${2:-16}
build
machine
"$CTL" local up --nodes 4 --capacity 1Gbit --dir "$WORK/state" >/dev/null 2>&1
row() { # label json
  jq -r --arg l "$1" '"\($l)\t\(.procs)\t\(.bw_pct // "unlimited")\t\(.result.metrics.harmonic_mean_teps/1e6*100|round/100)\t\(.result.seconds*1000|round/1000)\t\(.seconds*1000|round/1000)\t\(.result.metrics.comm_share*1000|round/10)%\t\(.result.check)"' <<<"$2"
}
echo -e "run\tprocs\tbw\tMTEPS(hm)\tsearch_s\tjob_s\tcomm_share\tvalidation"
r=$("$CTL" run --workload bfs --scale "$S1" --nodes 1 --bw unlimited --json); row "scale$S1-1rank" "$r"
hm1=$(jq .result.metrics.harmonic_mean_teps <<<"$r")
r=$("$CTL" run --workload bfs --scale "$S1" --nodes 4 --bw unlimited --json); row "scale$S1-4ranks" "$r"
for bw in 100 50 20; do
  r=$("$CTL" run --workload bfs --scale "$S3" --nodes 4 --bw "$bw" --no-validate --json); row "scale$S3-4nodes" "$r"
done
awk -v h="$hm1" 'BEGIN{printf "one rank: %.1f MTEPS vs reference 68 MTEPS (the reference code in an earlier session, not re-measured here): %s\n", h/1e6, (h >= 68e6 ? "ok" : "MISS")}'
