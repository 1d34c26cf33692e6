#!/usr/bin/env bash
# The suite beside load: the README's test command run ROUNDS times alone, beside one busy
# loop and beside two (a loop is a shell spinning at nice 0, as a user's other work
# would), each run's failures listed with their cause, and the machine's own steal
# (vmstat's `st`, the share of the CPU the hypervisor took) recorded beside each run.
#
# Usage: tests/beside-load.sh [--rounds N] [--loops "0 1 2"] [--log DIR] [-- CARGO-TEST-ARGS]
#   e.g. tests/beside-load.sh --rounds 1 --loops 2 -- -p throttle-tests --test sweep
# Run it as CI runs the suite (root, CI's packages; `.ci/packages` installs them): it sets
# THROTTLE_REQUIRE_NETNS and THROTTLE_REQUIRE_SLURM as `.ci/run` does where the machine
# allows. Exit 0 when every run passed; 1 otherwise. The table goes to stdout; each run's
# whole output to DIR (default target/beside-load/).
set -uo pipefail
cd "$(dirname "$0")/.."

rounds=3
loops="0 1 2"
log=target/beside-load
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --loops) loops=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "beside-load.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--workspace --no-fail-fast)
mkdir -p "$log"

# CI's environment (the same probes as .ci/run).
if [ "$(id -u)" = 0 ] && ip netns add throttle-load-probe 2>/dev/null; then
  ip netns del throttle-load-probe
  export THROTTLE_REQUIRE_NETNS=1
  command -v slurmd >/dev/null 2>&1 && export THROTTLE_REQUIRE_SLURM=1
fi
# Built once, before any load: the rounds time the tests, not the compiler.
cargo test "${args[@]}" --no-run -q >/dev/null 2>&1 || { echo "the tests do not build" >&2; exit 1; }

busy=()
stop_busy() { for p in "${busy[@]}"; do kill "$p" 2>/dev/null; done; busy=(); }
trap 'stop_busy; [ -n "${vm:-}" ] && kill "$vm" 2>/dev/null' EXIT

# The cause of one failed test, from its panic message in the log: the first line after
# "---- NAME stdout ----" that says what went wrong, cut to 200 characters.
cause() {
  awk -v t="---- $2 stdout ----" '
    $0 == t { on = 1; next }
    on && /^---- / { exit }
    on && /panicked at|assertion|flagged|given up|timed out|Error|error/ { n++; if (n <= 2) printf "%s ", substr($0, 1, 200) }
  ' "$1"
}

status=0
printf '%-5s %-5s %-6s %-6s %-6s %-7s %s\n' round loops passed failed min st_med st_max
for round in $(seq 1 "$rounds"); do
  for n in $loops; do
    stop_busy
    for _ in $(seq 1 "$n"); do sh -c 'while :; do :; done' & busy+=($!); done
    name="r${round}-l${n}"
    vmstat 5 >"$log/$name.vmstat" & vm=$!
    start=$(date +%s)
    cargo test "${args[@]}" >"$log/$name.log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    kill "$vm" 2>/dev/null; vm=
    stop_busy
    passed=$(grep '^test result:' "$log/$name.log" | grep -o '[0-9]* passed' | awk '{s += $1} END {print s + 0}')
    failed=$(grep '^test result:' "$log/$name.log" | grep -o '[0-9]* failed' | awk '{s += $1} END {print s + 0}')
    # vmstat's last column is st; its headers repeat, and its first line of numbers is the
    # average since boot.
    read -r st_med st_max < <(awk '$NF ~ /^[0-9]+$/ { if (seen++) print $NF }' "$log/$name.vmstat" | sort -n |
      awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)], v[NR]; else print "-", "-" }')
    printf '%-5s %-5s %-6s %-6s %-6s %-7s %s\n' "$round" "$n" "$passed" "$failed" \
      "$(awk -v s="$secs" 'BEGIN { printf "%.1f", s / 60 }')" "$st_med%" "$st_max%"
    if [ "$rc" != 0 ]; then
      status=1
      grep -E '^test .* \.\.\. FAILED$' "$log/$name.log" | awk '{print $2}' | while read -r t; do
        printf '      FAILED %s: %s\n' "$t" "$(cause "$log/$name.log" "$t")"
      done
      [ "$failed" = 0 ] && printf '      (rc %s: %s)\n' "$rc" "$(grep -m1 -E '^error' "$log/$name.log")"
    fi
  done
done
exit $status
