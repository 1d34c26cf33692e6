#!/usr/bin/env bash
# Benchmark 4: scale. 1,000 concurrent streams through one agent pair (forward n0 -> n1)
# for 60 s at 50% of 1 Gbit/s. Every byte is checked by the receiver. Targets: aggregate
# rate within 2% of 62.5 MB/s, no errors, each agent's peak resident memory < 200 MB.
# Usage: bench/scale.sh [STREAMS] [SECONDS]   (default 1000 60)
source "$(dirname "$0")/common.sh"
N=${1:-1000}; SECS=${2:-60}
build
machine
ulimit -n "$(ulimit -Hn)"
"$CTL" local up --nodes 2 --capacity 1Gbit --dir "$WORK/state" >/dev/null 2>&1
"$CTL" set 50 >/dev/null
"$CTL" forward add --from n0 --listen 127.0.1.1:5500 --to n1:127.0.1.2:5501 >/dev/null
out=$("$EX/streams" 127.0.1.2:5501 127.0.1.1:5500 "$N" "$SECS")
pids=$(grep -E '^pid' "$THROTTLE_CLUSTER" | awk '{print $3}')
echo "$out" | jq .
target=62500000
jq -r --argjson t "$target" '"aggregate \(.rate_bytes_per_sec/1e6*100|round/100) MB/s vs \($t/1e6) MB/s: error \((.rate_bytes_per_sec/$t-1)*10000|round/100)%  streams with data \(.streams_with_data)/\(.streams)  errors \(.errors)"' <<<"$out"
for p in $pids; do
  hwm=$(awk '/VmHWM/{print $2}' /proc/"$p"/status)
  echo "agent pid $p peak RSS $((hwm/1024)) MB (target < 200 MB): $([ "$hwm" -lt 204800 ] && echo ok || echo MISS)"
done
jq -r --argjson t "$target" 'if ((.rate_bytes_per_sec/$t-1)|fabs) <= 0.02 and .errors == 0 and .streams_with_data == .streams then "rate and integrity: ok" else "rate and integrity: MISS" end' <<<"$out"
