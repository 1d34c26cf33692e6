#!/usr/bin/env bash
# Soak: 30 minutes (or MINUTES) of mixed traffic through three agents while the bandwidth
# changes every 200 ms: long streams and short connections through a ring of forwards
# (n0->n1, n1->n2, n2->n0), every byte echoed and checked, plus BFS jobs launched over and
# over (rank tunnels, the launcher, leases). Samples each agent's RSS and open descriptors
# every 10 s; the reference is the first sample after a minute of warm-up, in the same run.
# Pass: no wrong byte, no failed connection or job, RSS and descriptors flat.
# Usage: bench/soak.sh [MINUTES]   (default 30)
source "$(dirname "$0")/common.sh"
MINUTES=${1:-30}
build
machine
"$CTL" local up --nodes 3 --capacity 1Gbit --dir "$WORK/state" >/dev/null 2>&1
PIDS_CSV=$(grep '^pid = ' "$THROTTLE_CLUSTER" | awk '{print $3}' | paste -sd, -)
CONTROLS=$(grep '^control = ' "$THROTTLE_CLUSTER" | awk '{print $3}' | tr -d '"' | paste -sd, -)
"$CTL" forward add --from n0 --listen 127.0.1.1:5400 --to n1:127.0.1.2:5401 >/dev/null
"$CTL" forward add --from n1 --listen 127.0.1.2:5410 --to n2:127.0.1.3:5411 >/dev/null
"$CTL" forward add --from n2 --listen 127.0.1.3:5420 --to n0:127.0.1.1:5421 >/dev/null
# Jobs in a loop next to the stream traffic.
(
  ok=0; failed=0; end=$(( $(date +%s) + MINUTES * 60 ))
  while [ "$(date +%s)" -lt "$end" ]; do
    if "$CTL" run --workload bfs --scale 10 --keys 4 --nodes 3 --bw unlimited --time-limit 120 >/dev/null 2>"$WORK/job.err"; then
      ok=$((ok + 1))
    else
      failed=$((failed + 1)); echo "soak: job failed: $(tail -1 "$WORK/job.err")" >&2
    fi
  done
  echo "$ok $failed" > "$WORK/jobs"
) & JOBS=$!
set +e
"$EX/soak" --minutes "$MINUTES" --token-file "$WORK/state/token" --control "$CONTROLS" --pids "$PIDS_CSV" \
  --echo 127.0.1.2:5401=127.0.1.1:5400 --echo 127.0.1.3:5411=127.0.1.2:5410 --echo 127.0.1.1:5421=127.0.1.3:5420
SOAK=$?
wait "$JOBS"
read -r JOK JFAIL < "$WORK/jobs"
echo "jobs: $JOK ok, $JFAIL failed"
[ "$SOAK" -eq 0 ] && [ "$JFAIL" -eq 0 ] && echo "soak: PASS" || { echo "soak: FAIL"; exit 1; }
