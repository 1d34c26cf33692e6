#!/usr/bin/env bash
# Benchmark 3: latency. 64-byte ping-pong round trips, direct vs through two agents
# (forward n0 -> n1, unlimited). Target: added median <= 20 microseconds.
# References in the same run: the same path through two HAProxy hops (the best a
# conventional user-space proxy does here) and through two minimal relays (bench/relay.c:
# a thread per direction, blocking read and write, nothing else: what any user-space hop
# costs here). RELAY_SPIN=1 adds the relays busy-polling instead of sleeping.
# As root, also on namespace hosts: direct (no rules), the kernel redirect, the preload
# library.
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
if command -v cc >/dev/null 2>&1; then
  cc -O2 -pthread -o "$WORK/relay" "$ROOT/bench/relay.c"
  "$WORK/relay" 127.0.1.1 5441 127.0.1.2 5442 & PIDS+=($!)
  "$WORK/relay" 127.0.1.2 5442 127.0.1.2 5401 & PIDS+=($!)
  wait_port 127.0.1.1 5441
  PATHS="$PATHS two_relays:127.0.1.1:5441"
  if [ -n "${RELAY_SPIN:-}" ]; then
    "$WORK/relay" 127.0.1.1 5451 127.0.1.2 5452 spin & PIDS+=($!)
    "$WORK/relay" 127.0.1.2 5452 127.0.1.2 5401 spin & PIDS+=($!)
    wait_port 127.0.1.1 5451
    PATHS="$PATHS two_spinning:127.0.1.1:5451"
  fi
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
awk -v d="${MED[direct]}" -v t="${MED[two_agents]}" -v h="${MED[two_haproxy]:-}" -v r="${MED[two_relays]:-}" -v sp="${MED[two_spinning]:-}" 'BEGIN{
  split(d, a, " "); split(t, b, " "); dm=(a[1]+a[2])/2; tm=(b[1]+b[2])/2; add=tm-dm;
  printf "added median round trip, two agents: %.1f us (target <= 20): %s\n", add, (add <= 20 ? "ok" : "MISS");
  if (h != "") { split(h, c, " "); printf "added median round trip, two haproxy hops (reference): %.1f us\n", (c[1]+c[2])/2-dm }
  if (r != "") { split(r, c, " "); printf "added median round trip, two minimal relays (reference): %.1f us\n", (c[1]+c[2])/2-dm }
  if (sp != "") { split(sp, c, " "); printf "added median round trip, two busy-polling relays (reference): %.1f us\n", (c[1]+c[2])/2-dm } }'
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

[ "$(id -u)" = 0 ] || exit 0
echo
echo "# namespace hosts (n0 -> n1, unlimited): direct, kernel redirect, preload library"
"$CTL" local down --force >/dev/null 2>&1 || true
printf "%-16s %10s %10s %10s\n" path "median us" "p90 us" "p99 us"
declare -A NMED
for mode in kernel preload; do
  "$CTL" local up --netns --nodes 2 --capacity 100Gbit --subnet 198.18.93.0/24 --intercept "$mode" --dir "$WORK/ns-$mode" >/dev/null 2>&1
  "$CTL" set unlimited >/dev/null
  THROTTLE_INTERCEPT=kernel "$CTL" exec n1 -- "$EX/pingpong" server 198.18.93.2:5401 >/dev/null 2>&1 & srv=$!
  sleep 0.5
  NS=($(grep '^netns' "$THROTTLE_CLUSTER" | cut -d'"' -f2))
  paths="$mode"
  [ "$mode" = kernel ] && paths="direct kernel"
  for round in 1 2; do
    for path in $paths; do
      if [ "$path" = direct ]; then for ns in "${NS[@]}"; do ip netns exec "$ns" nft list table ip throttle > "$WORK/$ns.rules"; ip netns exec "$ns" nft delete table ip throttle; done; fi
      mode_of=$path; [ "$path" = direct ] && mode_of=kernel
      out=$(THROTTLE_INTERCEPT=$mode_of "$CTL" exec n0 -- "$EX/pingpong" client 198.18.93.2:5401 "$COUNT" 64 2>/dev/null)
      if [ "$path" = direct ]; then for ns in "${NS[@]}"; do ip netns exec "$ns" nft -f "$WORK/$ns.rules"; done; fi
      m=$(jq .median_us <<<"$out"); NMED[$path]="${NMED[$path]:-} $m"
      printf "%-16s %10s %10s %10s\n" "$path" "$m" "$(jq .p90_us <<<"$out")" "$(jq .p99_us <<<"$out")"
    done
  done
  kill "$srv" 2>/dev/null || true
  "$CTL" local down --force >/dev/null 2>&1 || true
done
awk -v d="${NMED[direct]}" -v k="${NMED[kernel]}" -v p="${NMED[preload]}" 'BEGIN{
  split(d, a, " "); dm=(a[1]+a[2])/2;
  split(k, b, " "); km=(b[1]+b[2])/2-dm; split(p, c, " "); pm=(c[1]+c[2])/2-dm;
  printf "added median round trip through two agents: kernel redirect %.1f us, preload %.1f us (target <= 20): %s\n", km, pm, (km <= 20 && pm <= 20 ? "ok" : "MISS") }'
