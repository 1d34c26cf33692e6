#!/usr/bin/env bash
# Benchmark 3: latency. 64-byte ping-pong round trips, direct vs through two agents
# (forward n0 -> n1, unlimited). Target: added median <= 50 microseconds.
# Reference in the same run: the same path through two HAProxy hops (the best a
# conventional user-space proxy does here).
# Usage: bench/latency.sh [COUNT]   (default 20000 round trips)
source "$(dirname "$0")/common.sh"
COUNT=${1:-20000}
build
machine
"$CTL" local up --nodes 2 --capacity 100Gbit --dir "$WORK/state" >/dev/null 2>&1
"$CTL" set unlimited >/dev/null
"$EX/pingpong" server 127.0.1.2:5401 & PIDS+=($!)
wait_port 127.0.1.2 5401
"$CTL" forward add --from n0 --listen 127.0.1.1:5400 --to n1:127.0.1.2:5401 >/dev/null
if command -v haproxy >/dev/null 2>&1; then
  for hop in a:127.0.1.1:5431:127.0.1.2:5432 b:127.0.1.2:5432:127.0.1.2:5401; do
    IFS=: read -r n lh lp th tp <<<"$hop"
    printf 'global\n  nbthread 1\ndefaults\n  mode tcp\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\nlisten %s\n  bind %s:%s\n  server s %s:%s\n' "$n" "$lh" "$lp" "$th" "$tp" > "$WORK/hap-$n.cfg"
    haproxy -f "$WORK/hap-$n.cfg" >/dev/null 2>&1 & PIDS+=($!)
    wait_port "$lh" "$lp"
  done
  PATHS="direct:127.0.1.2:5401 two_agents:127.0.1.1:5400 two_haproxy:127.0.1.1:5431"
else
  echo "# haproxy not installed: no reference hop measured"
  PATHS="direct:127.0.1.2:5401 two_agents:127.0.1.1:5400"
fi
printf "%-12s %10s %10s %10s\n" path "median us" "p90 us" "p99 us"
declare -A MED
for round in 1 2; do  # alternate to spread machine noise over both paths
  for path in $PATHS; do
    IFS=: read -r name host port <<<"$path"
    out=$("$EX/pingpong" client "$host:$port" "$COUNT" 64)
    m=$(jq .median_us <<<"$out"); MED[$name]="${MED[$name]:-} $m"
    printf "%-12s %10s %10s %10s\n" "$name" "$m" "$(jq .p90_us <<<"$out")" "$(jq .p99_us <<<"$out")"
  done
done
awk -v d="${MED[direct]}" -v t="${MED[two_agents]}" -v h="${MED[two_haproxy]:-}" 'BEGIN{
  split(d, a, " "); split(t, b, " "); dm=(a[1]+a[2])/2; tm=(b[1]+b[2])/2; add=tm-dm;
  printf "added median round trip, two agents: %.1f us (target <= 50): %s\n", add, (add <= 50 ? "ok" : "MISS");
  if (h != "") { split(h, c, " "); printf "added median round trip, two haproxy hops (reference): %.1f us\n", (c[1]+c[2])/2-dm } }'
echo
echo "# a new connection per message: set-up (agents: dial + authenticated handshake) + first round trip"
printf "%-12s %10s %10s %10s\n" path "median us" "p90 us" "p99 us"
declare -A CMED
for round in 1 2; do
  for path in $PATHS; do
    IFS=: read -r name host port <<<"$path"
    out=$("$EX/pingpong" connect "$host:$port" "${CONNECTS:-2000}" 64)
    m=$(jq .median_us <<<"$out"); CMED[$name]="${CMED[$name]:-} $m"
    printf "%-12s %10s %10s %10s\n" "$name" "$m" "$(jq .p90_us <<<"$out")" "$(jq .p99_us <<<"$out")"
  done
done
awk -v d="${CMED[direct]}" -v t="${CMED[two_agents]}" -v h="${CMED[two_haproxy]:-}" 'BEGIN{
  split(d, a, " "); split(t, b, " "); dm=(a[1]+a[2])/2; tm=(b[1]+b[2])/2;
  printf "added median connection set-up + round trip, two agents: %.1f us\n", tm-dm;
  if (h != "") { split(h, c, " "); printf "added median connection set-up + round trip, two haproxy hops (reference): %.1f us\n", (c[1]+c[2])/2-dm } }'
