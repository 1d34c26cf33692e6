#!/usr/bin/env bash
# Benchmark: how kernel-paced namespace hosts share a node's link (`local up --netns
# --intercept preload --links kernel`: each socket paced at its max-min share of its
# node's egress and its peer's ingress, which the agents agree on, behind the node's
# egress queue) against the proxy on the same kind of hosts (`--links proxy`), side by
# side in one run, the two alternated in every case. Eight nodes at 1 Gbit/s, every link
# at PCT% (default 30):
#   * incast: K nodes (2, 4, 7) send one iperf3 stream each into n0 at once: each flow
#     against its max-min share (link / K), min-max over the flows and rounds, and their
#     sum against the link;
#   * fan-out: n0 sends one stream each to K nodes at once, the same figures;
#   * a stream beside a trickle: a stream into n0 (out of n0) while another node sends 1 KiB
#     to n0 every 20 ms (n0 to another node): the stream against the link, which a link
#     leaves it nearly all of (the shares are not work-conserving: a socket counts as
#     sending for 40 ms after its last data, so the trickle holds its share).
# Root only (namespace hosts). Usage: bench/kernel_sharing.sh [ROUNDS]   (default 2)
source "$(dirname "$0")/common.sh"
need iperf3 iperf3; need jq jq; need tc iproute2; need python3 python3
[ "$(id -u)" = 0 ] || { echo "bench: namespace hosts need root" >&2; exit 2; }
ROUNDS=${1:-2}
PCT=${PCT:-30}
SECS=${SECS:-6}
build
machine
vmstat 1 2 | tail -1 | awk '{print "# vmstat: us " $13 " sy " $14 " id " $15 " st " $17}'
sysctl -n net.ipv4.tcp_congestion_control | sed 's/^/# congestion control: /'
declare -A SUBNET=([kernel]=198.18.98 [proxy]=198.18.99)
MODES="kernel proxy"
trap 'stop_modes $MODES; cleanup' EXIT
cat > "$WORK/sink.py" <<'PY'
import socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], int(sys.argv[2]))); l.listen(8)
while True:
    c = l.accept()[0]
    while c.recv(65536):
        pass
PY
cat > "$WORK/trickle.py" <<'PY'
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    s.sendall(b"x" * 1024)
    time.sleep(0.02)
PY
for m in $MODES; do
  mkdir -p "$WORK/$m"
  links=kernel; [ "$m" = proxy ] && links=proxy
  ctl "$m" local up --netns --nodes 8 --capacity 1Gbit --subnet "${SUBNET[$m]}.0/24" \
    --intercept preload --links "$links" --dir "$WORK/$m/state" >/dev/null
  ctl "$m" set "$PCT" >/dev/null
  # n0 receives the incast (a server per sender) and the trickle; n1 and n2 receive n0's.
  for k in 1 2 3 4 5 6 7; do
    serve env THROTTLE_CLUSTER="$WORK/$m/throttle-cluster.toml" "$CTL" exec n0 -- iperf3 -s -p "530$k"
  done
  serve env THROTTLE_CLUSTER="$WORK/$m/throttle-cluster.toml" "$CTL" exec n1 -- iperf3 -s -p 5301
  for n in 1 2 3 4 5 6 7; do
    serve env THROTTLE_CLUSTER="$WORK/$m/throttle-cluster.toml" "$CTL" exec "n$n" -- iperf3 -s -p 5311
  done
  for n in 0 2; do
    serve env THROTTLE_CLUSTER="$WORK/$m/throttle-cluster.toml" "$CTL" exec "n$n" -- python3 "$WORK/sink.py" "${SUBNET[$m]}.$((n + 1))" 5331
  done
done
sleep 1
LINK=$((1000 * PCT / 100))
mbit() { jq '.end.sum_received.bits_per_second / 1e6'; }
# One stream of K started by `$1 MODE I` (I = 1..K, its iperf3 JSON on stdout).
incast_flow() { ctl "$1" exec "n$2" -- iperf3 -c "${SUBNET[$1]}.1" -p "530$2" -t "$SECS" -O 2 -J; }
fanout_flow() { ctl "$1" exec n0 -- iperf3 -c "${SUBNET[$1]}.$(($2 + 1))" -p 5311 -t "$SECS" -O 2 -J; }
# The table of K = 2, 4, 7 streams at once, each started by FLOW: each flow against its
# share (link / K) and their sum against the link, min-max over the flows and rounds.
shares_table() {
  local flow=$1 k r m i v sum line cell
  printf "%6s   %-28s %-28s\n" flows "kernel (flow, sum)" "proxy (flow, sum)"
  for k in 2 4 7; do
    declare -A F=() S=()
    for r in $(seq 1 "$ROUNDS"); do
      for m in $MODES; do
        local pids=()
        for i in $(seq 1 "$k"); do
          "$flow" "$m" "$i" > "$WORK/flow.$i" & pids+=($!)
        done
        wait "${pids[@]}"
        sum=0
        for i in $(seq 1 "$k"); do
          v=$(mbit < "$WORK/flow.$i")
          F[$m]="${F[$m]:-} $(awk -v v="$v" -v l="$LINK" -v k="$k" 'BEGIN{printf "%.3f", v / (l / k)}')"
          sum=$(awk -v a="$sum" -v b="$v" 'BEGIN{print a + b}')
        done
        S[$m]="${S[$m]:-} $(awk -v s="$sum" -v l="$LINK" 'BEGIN{printf "%.3f", s / l}')"
      done
    done
    line=$(printf "%6s" "$k")
    for m in $MODES; do
      cell=$(echo "${F[$m]} | ${S[$m]}" | awk -F'|' '{ n = split($1, a, " "); lo = 1e9; hi = 0; for (i = 1; i <= n; i++) { if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] }
        n = split($2, b, " "); slo = 1e9; shi = 0; for (i = 1; i <= n; i++) { if (b[i] < slo) slo = b[i]; if (b[i] > shi) shi = b[i] }
        printf "%.3f-%.3f, %.3f-%.3f", lo, hi, slo, shi }')
      line="$line   $(printf "%-28s" "$cell")"
    done
    echo "$line"
  done
}
echo
echo "Incast at $PCT% of 1 Gbit/s ($LINK Mbit/s), ${SECS} s per stream (first 2 s left out): each flow / its share, and the sum / the link, over $ROUNDS round(s)"
shares_table incast_flow
echo
echo "Fan-out at $PCT%: n0 sends one stream each to K nodes at once: each flow / its share, and the sum / the link"
shares_table fanout_flow
echo
echo "A stream beside a trickle (1 KiB every 20 ms) at $PCT%: the stream / the link, over $ROUNDS round(s)"
printf "%-10s   %-14s %-14s\n" stream kernel proxy
for dir in into "out of"; do
  declare -A R=()
  for r in $(seq 1 "$ROUNDS"); do
    for m in $MODES; do
      if [ "$dir" = into ]; then from=n1 to="${SUBNET[$m]}.1" port=5301 dfrom=n2 dto="${SUBNET[$m]}.1"
      else from=n0 to="${SUBNET[$m]}.2" port=5301 dfrom=n0 dto="${SUBNET[$m]}.3"; fi
      ctl "$m" exec "$dfrom" -- python3 "$WORK/trickle.py" "$dto" 5331 $((SECS + 1)) & drip=$!
      sleep 0.3
      v=$(ctl "$m" exec "$from" -- iperf3 -c "$to" -p "$port" -t "$SECS" -O 1 -J | mbit)
      wait "$drip"
      R[$m]="${R[$m]:-} $(awk -v v="$v" -v l="$LINK" 'BEGIN{printf "%.3f", v / l}')"
    done
  done
  line=$(printf "%-10s" "$dir n0")
  for m in $MODES; do
    line="$line   $(echo "${R[$m]}" | awk '{lo = 1e9; hi = 0; for (i = 1; i <= NF; i++) { if ($i < lo) lo = $i; if ($i > hi) hi = $i }; printf "%-14s", sprintf("%.3f-%.3f", lo, hi)}')"
  done
  echo "$line"
done
vmstat 1 2 | tail -1 | awk '{print "# vmstat: us " $13 " sy " $14 " id " $15 " st " $17}'
