#!/usr/bin/env bash
# A's controller under churn (bench/churn.sh): N `throttle-ctl status --json` at RATE a
# second against the cluster file CLUSTER; prints `ok failed median_ms p99_ms max_ms`.
# Usage: ctl_probe.sh CTL CLUSTER N RATE
CTL=$1; CLUSTER=$2; N=$3; RATE=$4
python3 - "$CTL" "$CLUSTER" "$N" "$RATE" <<'PY'
import subprocess, sys, time
ctl, cluster, n, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
times, failed, why = [], 0, []
start = time.monotonic()
for i in range(n):
    time.sleep(max(0.0, start + i / rate - time.monotonic()))
    t = time.monotonic()
    r = subprocess.run([ctl, "status", "--json"], env={"THROTTLE_CLUSTER": cluster, "PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True)
    if r.returncode == 0:
        times.append((time.monotonic() - t) * 1000)
    else:
        failed += 1
        why.append(r.stderr.strip().splitlines()[-1][:160] if r.stderr.strip() else f"exit {r.returncode}")
times.sort()
q = lambda p: times[min(len(times) - 1, int(p * len(times)))] if times else float("nan")
print(f"{len(times)} {failed} {q(0.5):.1f} {q(0.99):.1f} {(times[-1] if times else float('nan')):.1f}" + (f"  {why[:2]}" if why else ""))
PY
