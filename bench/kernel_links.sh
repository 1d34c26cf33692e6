#!/usr/bin/env bash
# Benchmark: kernel-paced links against the agents' proxy, side by side in one run, on two
# loopback clusters of 8 nodes at 1 Gbit/s (`local up --links proxy` and `--links kernel`),
# programs run as nodes with `throttle-ctl exec` (the preload library), as an ordinary
# user would. Each cell alternates the modes. Measured:
#   * streams: one iperf3 stream n0 -> n1 at 20, 50 and 100%: received against the setting
#     (target: within 1%);
#   * shares: K = 2, 4, 7 iperf3 streams into n0 from K nodes (incast) and out of n0 to K
#     nodes at 30%: each against 1/K of the link (target: within 2%), and their sum;
#   * ping-pong (examples/pingpong) of 64 KiB to 4 MiB at 10, 30 and 100%: the median
#     round trip against serialization (2 x size / rate) plus the direct round trip of the
#     same size unshaped (target: within 3%);
#   * 64-byte round trip and connection set-up (connect + first round trip) at 100%,
#     against the same programs without the library (direct loopback); one unlimited
#     stream against direct;
#   * the agents' CPU time (utime + stime of all 8, /proc) per GB of a 100% stream;
#   * as root, the ping-pong again on two namespace hosts with kernel-paced links
#     (`local up --netns --intercept preload --links kernel`: their links' segment bursts
#     at 16 KiB) against the band from serialization + the direct 64-byte round trip to
#     serialization + the direct round trip of the same size (a real link overlaps the
#     hosts' copying with its wire time; small segments make the hosts' part large here).
# A stream's first second is left out (iperf3 -O 1): the shares settle within it.
# Usage: bench/kernel_links.sh [SECONDS_PER_STREAM]   (default 3)
source "$(dirname "$0")/common.sh"
need iperf3 iperf3; need jq jq
SECS=${1:-3}
PCTS_PP=${PCTS_PP:-10 30 100}
SIZES=${SIZES:-65536 262144 1048576 4194304}
build
machine
vmstat 1 2 | tail -1 | awk '{print "# vmstat: us " $13 " sy " $14 " id " $15 " st " $17}'
declare -A BASE=([proxy]=127.0.51 [kernel]=127.0.52)
for mode in proxy kernel; do
  mkdir -p "$WORK/$mode"
  THROTTLE_CLUSTER="$WORK/$mode/throttle-cluster.toml" "$CTL" local up --nodes 8 --capacity 1Gbit \
    --base-addr "${BASE[$mode]}.1" --links "$mode" --dir "$WORK/$mode/state" >/dev/null 2>&1
done
addr() { echo "${BASE[$1]}.$(($2 + 1))"; }
cleanup_modes() {
  stop_modes proxy kernel
  # The namespace hosts of the root section, if it got that far.
  [ -f "$WORK/netns/throttle-cluster.toml" ] &&
    THROTTLE_CLUSTER="$WORK/netns/throttle-cluster.toml" "$CTL" local down --force >/dev/null 2>&1 || true
}
trap 'cleanup_modes; cleanup' EXIT
# Servers, for both modes: iperf3 on n0 at ports 5301..5307 (one per sender of an
# incast), on n1..n7 at 5301; pingpong on n1.
for mode in proxy kernel; do
  for k in 1 2 3 4 5 6 7; do
    serve env THROTTLE_CLUSTER="$WORK/$mode/throttle-cluster.toml" "$CTL" exec n0 -- iperf3 -s -p $((5300 + k))
    serve env THROTTLE_CLUSTER="$WORK/$mode/throttle-cluster.toml" "$CTL" exec "n$k" -- iperf3 -s -p 5301
  done
  serve env THROTTLE_CLUSTER="$WORK/$mode/throttle-cluster.toml" "$CTL" exec n1 -- "$EX/pingpong" server "$(addr "$mode" 1):5401"
done
# The direct reference: the same servers without the library, on n1's addresses.
serve iperf3 -s -B "$(addr kernel 1)" -p 5390
serve "$EX/pingpong" server "$(addr kernel 1):5491"
sleep 2
stream() { # mode from to port secs -> bits/s received
  ctl "$1" exec "n$2" -- iperf3 -c "$(addr "$1" "$3")" -p "$4" -t "$5" -O 1 -J | jq '.end.sum_received.bits_per_second'
}
agents_cpu() { # mode -> seconds of CPU all its agents used so far
  local t=0 tick; tick=$(getconf CLK_TCK)
  for pid in $(sed -n 's/^pid = //p' "$WORK/$1/throttle-cluster.toml"); do
    t=$(awk -v t="$t" -v k="$tick" '{print t + ($14 + $15) / k}' "/proc/$pid/stat")
  done
  echo "$t"
}
echo
echo "Streams n0 -> n1 (Mbit/s received; target within 1%)"
printf "%5s %10s %10s %8s %10s %8s\n" pct target proxy err kernel err
for pct in 20 50 100; do
  for mode in proxy kernel; do ctl "$mode" set "$pct" >/dev/null; done
  line=$(printf "%4s%% %10.1f" "$pct" "$((pct * 10))")
  for mode in proxy kernel; do
    b=$(stream "$mode" 0 1 5301 "$SECS")
    line+=$(awk -v b="$b" -v t="$((pct * 10))e6" 'BEGIN{printf " %10.1f %+7.2f%%", b/1e6, (b/t-1)*100}')
  done
  echo "$line"
done
echo
echo "Shares at 30% (300 Mbit/s): K streams into n0 / out of n0, each against 300/K (target within 2%)"
printf "%-7s %2s %9s %24s %7s %24s %7s\n" pattern K share "proxy each (min..max)" sum "kernel each (min..max)" sum
for mode in proxy kernel; do ctl "$mode" set 30 >/dev/null; done
for pattern in incast outcast; do
  for K in 2 4 7; do
    line=$(printf "%-7s %2s %9.1f" "$pattern" "$K" "$(awk -v k="$K" 'BEGIN{print 300/k}')")
    for mode in proxy kernel; do
      rm -f "$WORK"/share.*
      senders=()
      for i in $(seq 1 "$K"); do
        if [ "$pattern" = incast ]; then stream "$mode" "$i" 0 $((5300 + i)) "$SECS" > "$WORK/share.$i" &
        else stream "$mode" 0 "$i" 5301 "$SECS" > "$WORK/share.$i" & fi
        senders+=($!)
      done
      for p in "${senders[@]}"; do wait "$p" || true; done
      line+=$(cat "$WORK"/share.* | awk -v k="$K" '{r=$1/1e6; s+=r; if (n==0||r<mn) mn=r; if (n==0||r>mx) mx=r; n++}
        END{t=300/k; e1=(mn/t-1)*100; e2=(mx/t-1)*100; printf " %7.1f..%-7.1f(%+5.1f..%+5.1f%%) %7.1f", mn, mx, e1, e2, s}')
    done
    echo "$line"
  done
done
echo
echo "Ping-pong, median round trip (us): against serialization + the direct round trip (target within 3%)"
declare -A DIRECT
for size in 64 $SIZES; do DIRECT[$size]=$("$EX/pingpong" client "$(addr kernel 1):5491" 5 "$size" 0 0.5 | jq .median_us); done
printf "%8s %4s %10s %10s %10s %8s %10s %8s\n" bytes pct serial direct proxy err kernel err
for pct in $PCTS_PP; do
  for mode in proxy kernel; do ctl "$mode" set "$pct" >/dev/null; done
  for size in $SIZES; do
    ser=$(awk -v s="$size" -v p="$pct" 'BEGIN{printf "%.1f", 2*s/(125e6*p/100)*1e6}')
    line=$(printf "%8s %3s%% %10s %10s" "$size" "$pct" "$ser" "${DIRECT[$size]}")
    for mode in proxy kernel; do
      m=$(ctl "$mode" exec n0 -- "$EX/pingpong" client "$(addr "$mode" 1):5401" 5 "$size" 0 0.5 | jq .median_us)
      line+=$(awk -v m="$m" -v s="$ser" -v d="${DIRECT[$size]}" 'BEGIN{printf " %10.0f %+7.1f%%", m, (m/(s+d)-1)*100}')
    done
    echo "$line"
  done
done
echo
echo "At 100% and unlimited, against direct (no library, no agents)"
for mode in proxy kernel; do ctl "$mode" set 100 >/dev/null; done
d64=$("$EX/pingpong" client "$(addr kernel 1):5491" 20000 64 | jq .median_us)
dcon=$("$EX/pingpong" connect "$(addr kernel 1):5491" 2000 64 | jq .median_us)
printf "%-28s %10s %10s %10s\n" "" direct proxy kernel
line64=$(printf "%-28s %10s" "64 B round trip, median us" "$d64")
linecon=$(printf "%-28s %10s" "connect + round trip, us" "$dcon")
for mode in proxy kernel; do
  m=$(ctl "$mode" exec n0 -- "$EX/pingpong" client "$(addr "$mode" 1):5401" 20000 64 | jq .median_us)
  c=$(ctl "$mode" exec n0 -- "$EX/pingpong" connect "$(addr "$mode" 1):5401" 2000 64 | jq .median_us)
  line64+=$(printf " %10s" "$m"); linecon+=$(printf " %10s" "$c")
done
echo "$line64"; echo "$linecon"
for mode in proxy kernel; do ctl "$mode" set unlimited >/dev/null; done
du=$(iperf3 -c "$(addr kernel 1)" -p 5390 -t "$SECS" -O 1 -J | jq '.end.sum_received.bits_per_second')
lineu=$(printf "%-28s %10.0f" "unlimited stream, Mbit/s" "$(awk -v b="$du" 'BEGIN{print b/1e6}')")
for mode in proxy kernel; do lineu+=$(printf " %10.0f" "$(awk -v b="$(stream "$mode" 0 1 5301 "$SECS")" 'BEGIN{print b/1e6}')"); done
echo "$lineu"
echo
CPU_SECS=${CPU_SECS:-10}
echo "Agents' CPU time per GB carried (a 100% stream of 1 Gbit/s, ${CPU_SECS} s)"
for mode in proxy kernel; do ctl "$mode" set 100 >/dev/null; done
printf "%-8s %10s %10s %12s\n" mode GB "cpu s" "cpu s / GB"
for mode in proxy kernel; do
  c0=$(agents_cpu "$mode")
  b=$(ctl "$mode" exec n0 -- iperf3 -c "$(addr "$mode" 1)" -p 5301 -t "$CPU_SECS" -J | jq '.end.sum_received.bytes')
  c1=$(agents_cpu "$mode")
  awk -v m="$mode" -v b="$b" -v a="$c0" -v z="$c1" 'BEGIN{g=b/1e9; printf "%-8s %10.2f %10.2f %12.3f\n", m, g, z-a, (z-a)/g}'
done
if [ "$(id -u)" = 0 ]; then
  echo
  echo "Namespace hosts, kernel-paced (links' GSO at 16 KiB): ping-pong; err: outside [serialization + direct 64 B, serialization + direct same size]"
  NSD="$WORK/netns"; mkdir -p "$NSD"
  THROTTLE_CLUSTER="$NSD/throttle-cluster.toml" "$CTL" local up --netns --nodes 2 --capacity 1Gbit \
    --subnet 198.18.94.0/24 --intercept preload --links kernel --dir "$NSD/state" >/dev/null 2>&1
  nsctl() { THROTTLE_CLUSTER="$NSD/throttle-cluster.toml" "$CTL" "$@"; }
  serve env THROTTLE_CLUSTER="$NSD/throttle-cluster.toml" "$CTL" exec n1 -- "$EX/pingpong" server 198.18.94.2:5401
  NS0=$(grep -m1 '^netns' "$NSD/throttle-cluster.toml" | cut -d'"' -f2)
  NS1=$(grep '^netns' "$NSD/throttle-cluster.toml" | sed -n 2p | cut -d'"' -f2)
  serve ip netns exec "$NS1" "$EX/pingpong" server 198.18.94.2:5491
  sleep 1
  printf "%8s %4s %10s %10s %10s %8s %8s\n" bytes pct serial direct kernel err "vs ser"
  declare -A NSDIRECT
  for size in 64 $SIZES; do NSDIRECT[$size]=$(ip netns exec "$NS0" "$EX/pingpong" client 198.18.94.2:5491 5 "$size" 0 0.5 | jq .median_us); done
  for pct in $PCTS_PP; do
    nsctl set "$pct" >/dev/null
    for size in $SIZES; do
      ser=$(awk -v s="$size" -v p="$pct" 'BEGIN{printf "%.1f", 2*s/(125e6*p/100)*1e6}')
      m=$(nsctl exec n0 -- "$EX/pingpong" client 198.18.94.2:5401 5 "$size" 0 0.5 | jq .median_us)
      awk -v z="$size" -v p="$pct" -v m="$m" -v s="$ser" -v d="${NSDIRECT[$size]}" -v f="${NSDIRECT[64]}" 'BEGIN{
        lo = s + f; hi = s + d; e = (m > hi) ? m / hi - 1 : ((m < lo) ? m / lo - 1 : 0);
        printf "%8s %3s%% %10s %10s %10.0f %+7.1f%% %+7.1f%%\n", z, p, s, d, m, e*100, (m/s-1)*100}'
    done
  done
  nsctl local down --force >/dev/null 2>&1 || true
fi
vmstat 1 2 | tail -1 | awk '{print "# vmstat: us " $13 " sy " $14 " id " $15 " st " $17}'
