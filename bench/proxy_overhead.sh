#!/usr/bin/env bash
# Benchmark 2: proxy overhead, unlimited, one run: iperf3 direct, through one agent
# (same-node forward), through two agents (n0 -> n1), and through HAProxy on the same path.
# Targets: one agent >= HAProxy; two agents >= 0.5 x direct.
# Usage: bench/proxy_overhead.sh [SECONDS] [REPEATS]   (default 10 s, 3 repeats; median shown)
source "$(dirname "$0")/common.sh"
need iperf3 iperf3; need jq jq; need haproxy haproxy
SECS=${1:-10}; REPS=${2:-3}
build
machine
"$CTL" local up --nodes 2 --capacity 100Gbit --dir "$WORK/state" >/dev/null 2>&1
"$CTL" set unlimited >/dev/null
iperf3 -s -B 127.0.1.2 -p 5301 >/dev/null 2>&1 & PIDS+=($!)
wait_port 127.0.1.2 5301
"$CTL" forward add --from n1 --listen 127.0.1.2:5310 --to n1:127.0.1.2:5301 >/dev/null   # one agent
"$CTL" forward add --from n0 --listen 127.0.1.1:5320 --to n1:127.0.1.2:5301 >/dev/null   # two agents
cat > "$WORK/haproxy.cfg" <<CFG
global
  maxconn 1000
defaults
  mode tcp
  timeout connect 5s
  timeout client 60s
  timeout server 60s
listen fwd
  bind 127.0.1.1:5330
  server s1 127.0.1.2:5301
CFG
haproxy -f "$WORK/haproxy.cfg" >/dev/null 2>&1 & PIDS+=($!)
wait_port 127.0.1.1 5330
declare -A R
for rep in $(seq 1 "$REPS"); do
  for path in direct:127.0.1.2:5301 one_agent:127.0.1.2:5310 two_agents:127.0.1.1:5320 haproxy:127.0.1.1:5330; do
    IFS=: read -r name host port <<<"$path"
    bps=$(iperf3 -c "$host" -p "$port" -t "$SECS" -J | jq '.end.sum_received.bits_per_second')
    R[$name]="${R[$name]:-} $bps"
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
direct=$(echo "${R[direct]}" | median)
haproxy=$(echo "${R[haproxy]}" | median)
printf "%-12s %12s %10s   %s\n" path "Gbit/s" "x direct" "runs (Gbit/s)"
for name in direct one_agent two_agents haproxy; do
  m=$(echo "${R[$name]}" | median)
  runs=$(for v in ${R[$name]}; do awk -v v="$v" 'BEGIN{printf "%.2f ", v/1e9}'; done)
  awk -v m="$m" -v d="$direct" -v n="$name" -v r="$runs" 'BEGIN{printf "%-12s %12.2f %10.2f   %s\n", n, m/1e9, m/d, r}'
done
one=$(echo "${R[one_agent]}" | median); two=$(echo "${R[two_agents]}" | median)
awk -v o="$one" -v h="$haproxy" -v t="$two" -v d="$direct" 'BEGIN{
  printf "target one agent >= haproxy: %s (%.2f x haproxy)\n", (o >= h ? "ok" : "MISS"), o/h;
  printf "target two agents >= 0.5 x direct: %s (%.2f x direct)\n", (t >= 0.5*d ? "ok" : "MISS"), t/d }'
