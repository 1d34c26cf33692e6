#!/usr/bin/env bash
# Benchmark: the egress queue of kernel-paced namespace hosts (the agents' --egress-device,
# which `local up --netns --intercept preload --links kernel` gives each node's eth0)
# against the same kernel-paced hosts with the queue taken off (what kernel mode did
# before it: each socket paced by Linux alone, whose first segment burst of each message
# leaves at once) and against the proxy on the same kind of hosts (`--links proxy`), side
# by side in one run, the three alternated in every cell. Two nodes at 1 Gbit/s;
# examples/pingpong, one message at a time with a 10 ms pause between round trips (a
# message after a pause is where the burst leaves unpaced): the median round trip against
# its serialization (2 x size / rate); at 100% also against serialization plus the direct
# round trip of the same size unshaped (the hosts' own copying, which a real link
# overlaps). Then one unlimited stream (iperf3, no setting) through each, against direct.
# Root only (namespace hosts). Usage: bench/kernel_queue.sh [ROUNDS]   (default 2)
source "$(dirname "$0")/common.sh"
need iperf3 iperf3; need jq jq; need tc iproute2
[ "$(id -u)" = 0 ] || { echo "bench: namespace hosts need root" >&2; exit 2; }
ROUNDS=${1:-2}
PCTS=${PCTS:-10 30 100}
SIZES=${SIZES:-4096 16384 65536 262144 1048576}
build
machine
vmstat 1 2 | tail -1 | awk '{print "# vmstat: us " $13 " sy " $14 " id " $15 " st " $17}'
declare -A SUBNET=([queue]=198.18.95 [bare]=198.18.96 [proxy]=198.18.97)
MODES="queue bare proxy"
ns_of() { grep '^netns' "$WORK/$1/throttle-cluster.toml" | sed -n "$(($2 + 1))p" | cut -d'"' -f2; }
trap 'stop_modes $MODES; cleanup' EXIT
for m in $MODES; do
  mkdir -p "$WORK/$m"
  links=kernel; [ "$m" = proxy ] && links=proxy
  ctl "$m" local up --netns --nodes 2 --capacity 1Gbit --subnet "${SUBNET[$m]}.0/24" \
    --intercept preload --links "$links" --dir "$WORK/$m/state" >/dev/null
  serve env THROTTLE_CLUSTER="$WORK/$m/throttle-cluster.toml" "$CTL" exec n1 -- "$EX/pingpong" server "${SUBNET[$m]}.2:5401"
  serve env THROTTLE_CLUSTER="$WORK/$m/throttle-cluster.toml" "$CTL" exec n1 -- iperf3 -s -p 5301
done
# The bare cluster: the queue taken off both links (the agents' later settings of it then
# fail, logged; their sockets stay paced by Linux alone).
for i in 0 1; do ip netns exec "$(ns_of bare $i)" tc qdisc del dev eth0 root; done
# Direct: the same programs between the queue cluster's namespaces, outside the library.
serve ip netns exec "$(ns_of queue 1)" "$EX/pingpong" server "${SUBNET[queue]}.2:5491"
serve ip netns exec "$(ns_of queue 1)" iperf3 -s -p 5391
sleep 1
declare -A DIRECT
for size in $SIZES; do
  DIRECT[$size]=$(ip netns exec "$(ns_of queue 0)" "$EX/pingpong" client "${SUBNET[queue]}.2:5491" 20 "$size" 10000 0.5 | jq .median_us)
done
echo
echo "Ping-pong, 10 ms between round trips: median round trip / serialization (1.000: a link); at 100% err is against serialization + direct of the same size"
printf "%8s %4s %10s %10s   %-22s %-22s %-22s\n" bytes pct serial_us direct_us "queue (rt/ser, err)" "bare" "proxy"
for pct in $PCTS; do
  for m in $MODES; do ctl "$m" set "$pct" >/dev/null; done
  sleep 0.5
  for size in $SIZES; do
    ser=$(awk -v s="$size" -v p="$pct" 'BEGIN{printf "%.1f", 2*s/(125e6*p/100)*1e6}')
    declare -A R=()
    for r in $(seq 1 "$ROUNDS"); do
      for m in $MODES; do
        v=$(ctl "$m" exec n0 -- "$EX/pingpong" client "${SUBNET[$m]}.2:5401" 20 "$size" 10000 0.5 | jq .median_us)
        R[$m]="${R[$m]:-} $v"
      done
    done
    line=$(printf "%8s %3s%% %10s %10s" "$size" "$pct" "$ser" "${DIRECT[$size]}")
    for m in $MODES; do
      cell=$(echo "${R[$m]}" | awk -v s="$ser" -v d="${DIRECT[$size]}" -v p="$pct" '{
        lo = 1e18; hi = 0; for (i = 1; i <= NF; i++) { x = $i / s; if (x < lo) lo = x; if (x > hi) hi = x; e = $i / (s + d) - 1; if (i == 1 || (e*e) > (E*E)) E = e }
        if (p == 100) printf "%.3f-%.3f %+5.1f%%", lo, hi, E * 100; else printf "%.3f-%.3f", lo, hi }')
      line="$line   $(printf "%-22s" "$cell")"
    done
    echo "$line"
  done
done
echo
echo "One unlimited stream (no setting), 3 s: Gbit/s"
for m in $MODES; do ctl "$m" set unlimited >/dev/null; done
d=$(ip netns exec "$(ns_of queue 0)" iperf3 -c "${SUBNET[queue]}.2" -p 5391 -t 3 -J | jq '.end.sum_received.bits_per_second/1e9')
line="direct $(printf %.2f "$d")"
for m in $MODES; do
  g=$(ctl "$m" exec n0 -- iperf3 -c "${SUBNET[$m]}.2" -p 5301 -t 3 -J | jq '.end.sum_received.bits_per_second/1e9')
  line="$line  $m $(printf %.2f "$g")"
done
echo "$line"
vmstat 1 2 | tail -1 | awk '{print "# vmstat: us " $13 " sy " $14 " id " $15 " st " $17}'
