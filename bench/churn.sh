#!/usr/bin/env bash
# Connection churn from another user against a user's agents (issue 43, finding 3): two
# processes of uid 65534 open and close connections (bench/churn.c) to one port of the
# cluster's agents at each rate, while the cluster's owner measures what they meet:
#   control: 100 requests to n0's control API, each on a fresh connection, no retry
#            (bench/api_probe.py), then 40 `throttle-ctl status` (bench/ctl_probe.sh: the
#            controller, which sends a request turned away unread again);
#   data, preload: 60 connects from n0 to a server of n1, with an echo
#            (bench/connect_probe.py), churn at n1's data port or n0's preload port.
# Columns: ok, failed, median, p99, max (ms); then the rate the churners reached.
# Rate 0 is the reference in the same invocation (no churn); `max` is as fast as they can.
# Usage: bench/churn.sh [RATES]   (default "0 3400 6800 max"; needs root and setpriv; about
#        4 min here). BENCH_PRIORITY=normal|high|realtime: the agents' (default normal, what
#        an unprivileged user's agents get).
source "$(dirname "$0")/common.sh"
[ "$(id -u)" = 0 ] || { echo "bench/churn.sh: needs root (a second user plays the attacker)" >&2; exit 2; }
need setpriv util-linux; need gcc gcc; need python3 python3
RATES=${1:-"0 3400 6800 max"}
build
machine
gcc -O2 -o "$WORK/churn" "$ROOT/bench/churn.c"
# The server below runs under `throttle-ctl exec`, which does not take it down: kill it by
# name too (it also ends by itself after a minute without clients).
trap 'pkill -f "connect_probe.py --serve 5311" 2>/dev/null; cleanup' EXIT
chmod 755 "$WORK" "$WORK/churn"
# An older build (BENCH_BIN) may not have --agent-priority: its agents run at its default.
PRIO=(); "$CTL" local up --help | grep -q -- --agent-priority && PRIO=(--agent-priority "${BENCH_PRIORITY:-normal}")
"$CTL" local up --nodes 2 --capacity 1Gbit --base-addr 127.0.81.1 --dir "$WORK/state" "${PRIO[@]}" >/dev/null
port_of() { awk -v n="$1" -v k="$2" '$1=="name"{cur=$3} $1==k && cur=="\""n"\""{gsub(/"/,"",$3); split($3,a,":"); print a[2]}' "$THROTTLE_CLUSTER"; }
"$CTL" exec n1 -- python3 "$ROOT/bench/connect_probe.py" --serve 5311 >/dev/null 2>&1 &
PIDS+=($!)
sleep 1
# Warm up: the first connects ask the agents for their node list.
"$CTL" exec n0 -- python3 "$ROOT/bench/connect_probe.py" 127.0.81.2 5311 5 10 >/dev/null
python3 "$ROOT/bench/api_probe.py" "$THROTTLE_CLUSTER" n0 5 10 >/dev/null
churn() { # HOST PORT RATE: two churners as uid 65534 for 20 s, in the background
  local r=$3; [ "$r" = max ] && r=0 || r=$((r / 2))
  for i in 1 2; do
    setpriv --reuid=65534 --regid=65534 --clear-groups "$WORK/churn" "$1" "$2" "$r" 20 >"$WORK/c$i.out" &
    PIDS+=($!)
  done
  sleep 1
}
reached() { awk '{r+=$1; f+=$2} END{printf "%d/s (%d failed connects)", r, f}' "$WORK"/c1.out "$WORK"/c2.out; }
printf '%-8s %-6s %-32s %s\n' port rate "ok failed median p99 max" "churn reached"
for target in control data preload; do
  case $target in
    control) host=127.0.81.1; port=$(port_of n0 control) ;;
    data) host=127.0.81.2; port=$(port_of n1 data) ;;
    preload) host=127.0.81.1; port=$(port_of n0 preload) ;;
  esac
  for rate in $RATES; do
    if [ "$rate" = 0 ]; then rm -f "$WORK"/c?.out; echo "0 0" >"$WORK/c1.out"; echo "0 0" >"$WORK/c2.out"; else churn $host "$port" "$rate"; fi
    if [ $target = control ]; then
      a=$(python3 "$ROOT/bench/api_probe.py" "$THROTTLE_CLUSTER" n0 100 10)
      c=$("$ROOT/bench/ctl_probe.sh" "$CTL" "$THROTTLE_CLUSTER" 30 4)
      [ "$rate" = 0 ] || wait "${PIDS[@]: -2}"; r=-; [ "$rate" = 0 ] || r=$(reached)
      printf '%-8s %-6s %-32s %s\n' "api" "$rate" "$a" "$r"
      printf '%-8s %-6s %-32s\n' "ctl" "$rate" "$c"
    else
      a=$("$CTL" exec n0 -- python3 "$ROOT/bench/connect_probe.py" 127.0.81.2 5311 60 6)
      [ "$rate" = 0 ] || wait "${PIDS[@]: -2}"; r=-; [ "$rate" = 0 ] || r=$(reached)
      printf '%-8s %-6s %-32s %s\n' "$target" "$rate" "$a" "$r"
    fi
  done
done
