#!/usr/bin/env bash
# Projection benchmark: how far the projections to sizes nobody measured can be believed.
#
# Each case sweeps a program (with the demand search) on its smaller sizes AND on two
# larger ones, then `analyze --predict L1,L2` holds the larger ones out of every fit and
# projects to them. For every held-out (size, CTI level) with a measured demand, and for
# both projections (traffic, DC), it prints the error, whether the truth lies inside the
# interval the answer uses (run-to-run noise + model error) and, as the reference in the
# same invocation, inside the run-to-run interval alone (what the tool printed before),
# and the intervals' widths; then per case and overall: median |error| (pp), coverage of
# both intervals, median width, runs spent on the fitted sizes, and how many points got
# no number (the tool said it could not estimate the error).
#
# Usage: bench/projection.sh [CASE ...]   (default: every case below; ~4 min each here)
#   BENCH_KEEP=DIR     copy each case's store to DIR/CASE.db
#   BENCH_STORES=DIR   analyse DIR/CASE.db instead of sweeping (the same runs, another
#                      analysis: BENCH_BIN=... for another build's)
# Cases: mw-heavy mw-light bfs-emu (fitted on 2, 3, 4, 6 nodes, held out 8 and 10),
# mw-demo (the demo's program fitted on 2, 3, 4, 6 and held out 8 and 16: 1.3x and 2.7x
# beyond the largest fitted size), mw-far (mw-heavy fitted on 2, 3, 4 and held out 8 and
# 16: 2x and 4x; one size is backtested, so it is never trusted),
# pmm-binomial pmm-flat (4 and 9, held out 16: a 2-core machine cannot run 25 nodes, and
# from two sizes nothing is backtested: expect "no number"), mpi-halo (an ordinary MPI
# program, bench/mpi_halo.c, launched by mpirun over namespace hosts and intercepted by
# the agents' kernel redirect; 2, 3, 4, 6 nodes, held out 8 and 10; needs root and Open
# MPI, skipped with a line saying so otherwise).
source "$(dirname "$0")/common.sh"
need python3 python3
CASES=("$@")
[ ${#CASES[@]} -eq 0 ] && CASES=(mw-heavy mw-light bfs-emu mw-demo mw-far pmm-binomial pmm-flat mpi-halo)
build
machine
MPI_SUBNET=198.18.91.0/24
NETNS_CLUSTER="$WORK/netns/throttle-cluster.toml"
trap 'THROTTLE_CLUSTER=$NETNS_CLUSTER "$CTL" local down --force >/dev/null 2>&1 || true; cleanup' EXIT
LOOPBACK_UP=
loopback_up() { # the 16 loopback agents the workload cases share, once
  [ -n "$LOOPBACK_UP" ] && return 0
  "$CTL" local up --nodes 16 --capacity 100Mbit --dir "$WORK/state" >/dev/null 2>&1
  LOOPBACK_UP=1
}
mpi_up() { # 10 namespace hosts and the program, or why not
  if [ "$(id -u)" != 0 ]; then echo "needs root (namespace hosts)"; return 1; fi
  command -v mpicc >/dev/null && command -v mpirun >/dev/null || { echo "needs Open MPI (apt-get install openmpi-bin libopenmpi-dev)"; return 1; }
  mkdir -p "$WORK/netns"
  mpicc -O2 -o "$WORK/mpi_halo" "$ROOT/bench/mpi_halo.c" || { echo "mpicc failed"; return 1; }
  (cd "$WORK/netns" && THROTTLE_CLUSTER=$NETNS_CLUSTER "$CTL" local up --netns --nodes 10 --capacity 100Mbit \
      --subnet "$MPI_SUBNET" --dir "$WORK/netns/state" >/dev/null 2>&1) || { echo "local up --netns failed"; return 1; }
}

SEARCH='[search]
levels = [10, 15, 20, 25]
width = 5
max_steps = 8'
COMMON='bandwidths = [100, 50, 25]
repeats = 3
settle = 0.2
time_limit = 120
retries = 1
seed = 1'

# case -> "held-out sizes|spec"
spec() {
  case "$1" in
    mw-heavy) echo "8,10|workload = \"mw\"
nodes = [2, 3, 4, 6, 8, 10]
$COMMON
[mw]
volume = 300000
alpha = 0.5
compute_seconds = 1.0
iterations = 2
$SEARCH" ;;
    mw-light) echo "8,10|workload = \"mw\"
nodes = [2, 3, 4, 6, 8, 10]
$COMMON
[mw]
volume = 100000
alpha = 0.8
compute_seconds = 0.6
iterations = 3
$SEARCH" ;;
    mw-demo) echo "8,16|workload = \"mw\"
nodes = [2, 3, 4, 6, 8, 16]
$COMMON
[mw]
volume = 100000
alpha = 0.8
compute_seconds = 0.6
iterations = 1
$SEARCH" ;;
    mw-far) echo "8,16|workload = \"mw\"
nodes = [2, 3, 4, 8, 16]
$COMMON
[mw]
volume = 300000
alpha = 0.5
compute_seconds = 1.0
iterations = 2
$SEARCH" ;;
    bfs-emu) echo "8,10|workload = \"bfs\"
nodes = [2, 3, 4, 6, 8, 10]
$COMMON
[bfs]
scale = 14
keys = 8
validate = false
emulate_meps = 4
$SEARCH" ;;
    pmm-binomial|pmm-flat) echo "16|workload = \"pmm\"
nodes = [4, 9, 16]
$COMMON
[pmm]
size = 240
bcast = \"${1#pmm-}\"
emulate_gflops = 0.0117
$SEARCH" ;;
    mpi-halo) echo "8,10|workload = \"command\"
nodes = [2, 3, 4, 6, 8, 10]
$COMMON
[command]
run = '''mpirun --allow-run-as-root --mca plm_rsh_agent \"$CTL exec\" --mca btl tcp,self --mca mpi_yield_when_idle 1 --mca rtc ^hwloc --mca oob_tcp_if_include $MPI_SUBNET --hostfile {hostfile} -np {procs} $WORK/mpi_halo 80000 0.6 3'''
time_regex = 'elapsed: ([0-9.]+)'
$SEARCH" ;;
    *) echo "unknown case $1" >&2; exit 2 ;;
  esac
}

for c in "${CASES[@]}"; do
  s=$(spec "$c")
  held=${s%%|*}
  printf '%s\n' "${s#*|}" >"$WORK/$c.toml"
  start=$(date +%s)
  if [ -n "${BENCH_STORES:-}" ]; then
    [ -f "$BENCH_STORES/$c.db" ] || { echo "# $c: skipped: no $BENCH_STORES/$c.db" >&2; continue; }
    cp "$BENCH_STORES/$c.db" "$WORK/$c.db"
  elif [ "$c" = mpi-halo ]; then
    if ! why=$(mpi_up); then echo "# $c: skipped: $why" >&2; continue; fi
    THROTTLE_CLUSTER=$NETNS_CLUSTER "$CTL" sweep "$WORK/$c.toml" --db "$WORK/$c.db" --plain >"$WORK/$c.log" 2>&1 || true
    THROTTLE_CLUSTER=$NETNS_CLUSTER "$CTL" local down --force >/dev/null 2>&1 || true
  else
    loopback_up
    "$CTL" sweep "$WORK/$c.toml" --db "$WORK/$c.db" --plain >"$WORK/$c.log" 2>&1 || true
  fi
  end=$(date +%s)
  if [ -n "${BENCH_KEEP:-}" ]; then mkdir -p "$BENCH_KEEP" && cp "$WORK/$c.db" "$BENCH_KEEP/"; fi
  "$CTL" analyze --db "$WORK/$c.db" --cti 10,15,20,25 --predict "$held" --json >"$WORK/$c.json" 2>"$WORK/$c.err" || {
    echo "$c: analyze failed: $(tail -1 "$WORK/$c.err")" >&2; continue; }
  echo "$c $held $((end - start))" >>"$WORK/cases"
  echo "# $c: sweep $((end - start)) s, held out $held; $(grep -c . "$WORK/$c.log") lines of progress" >&2
done
[ -f "$WORK/cases" ] || { echo "no case ran" >&2; exit 1; }
python3 - "$WORK" <<'EOF'
import json, sqlite3, statistics, sys
work = sys.argv[1]
rows, per_case, skipped = [], {}, set()
for line in open(f"{work}/cases"):
    case, held, secs = line.split()
    held = [int(h) for h in held.split(",")]
    a = json.load(open(f"{work}/{case}.json"))
    db = sqlite3.connect(f"{work}/{case}.db")
    fitted_runs = db.execute(
        "select count(*) from runs where nodes not in (%s)" % ",".join("?" * len(held)), held
    ).fetchone()[0]
    flagged = db.execute("select count(*) from runs where flag is not null").fetchone()[0]
    models = [("DC", a["projection"])]
    if a.get("traffic"):
        models.append(("traffic", a["traffic"]["projection"]))
    # A held-out size whose runs were mostly flagged (its agents starved: more nodes than
    # this machine can emulate) has no truth to judge by: listed, not counted.
    unmeasurable = {}
    for h in held:
        n, f = db.execute("select count(*), coalesce(sum(flag is not null), 0) from runs where procs = ?", (h,)).fetchone()
        if n and f / n > 1 / 3:
            unmeasurable[h] = (f, n)
    pts = []
    for name, proj in models:
        for p in proj:
            if p["procs"] not in held or p["measured_bw_pct"] is None or p["measured_below_noise"]:
                continue
            if p["procs"] in unmeasurable:
                f, n = unmeasurable[p["procs"]]
                skipped.add(f"{case} {p['procs']} procs: {f} of its {n} runs flagged (its links did not hold their setting), so no truth to judge by")
                continue
            m, cen = p["measured_bw_pct"], p["measured_censored"]
            def inside(lo, hi):
                return {"none": lo <= m <= hi, "below": lo <= m, "above": hi >= m}[cen]
            i = p["interval"]
            n = p["noise_interval"]
            pts.append(dict(case=case, model=name, procs=p["procs"], cti=p["cti"],
                            proj=p["bw_pct"], meas=m, cen=cen, err=p["bw_pct"] - m,
                            inside=None if i is None else inside(i["low"], i["high"]),
                            width=None if i is None else i["high"] - i["low"],
                            trusted=bool(a["bottom_line"]["trusted"])
                                and a["bottom_line"]["model"] == name.lower(),
                            answer=a["bottom_line"]["model"] == name.lower(),
                            noise_inside=None if n is None else inside(n["low"], n["high"]),
                            noise_width=None if n is None else n["high"] - n["low"]))
    rows += pts
    stab = []
    for part in (a.get("traffic") or {}).get("stability", []):
        if part["resamples"] and part["forms"]:
            stab.append(f"{part['part']} {part['forms'][0][0]} {100 * part['forms'][0][1] / part['resamples']:.0f}%")
    per_case[case] = (fitted_runs, flagged, int(secs), a["bottom_line"], stab)

mark = {"none": "", "below": "<", "above": ">"}
print("case          model    procs CTI%  projected  measured  error pp        width   in?  noise in?")
for r in rows:
    print(f"{r['case']:<13} {r['model']:<8} {r['procs']:>5} {r['cti']:>4.0f} {r['proj']:>10.1f} "
          f"{mark[r['cen']] + format(r['meas'], '.1f'):>9} {r['err']:>+9.1f}{'(bound)' if r['cen'] != 'none' else '':<7} "
          f"{'-' if r['width'] is None else format(r['width'], '.1f'):>8}  "
          f"{'-' if r['inside'] is None else ('yes' if r['inside'] else 'NO'):>4}  "
          f"{'-' if r['noise_inside'] is None else ('yes' if r['noise_inside'] else 'NO'):>4}")

def summary(label, rs, runs=None):
    vals = [abs(r["err"]) for r in rs if r["cen"] == "none"]
    answered = [r for r in rs if r["inside"] is not None]
    noise = [r for r in rs if r["noise_inside"] is not None]
    cov = f"{sum(r['inside'] for r in answered)}/{len(answered)}" if answered else "-"
    ncov = f"{sum(r['noise_inside'] for r in noise)}/{len(noise)}" if noise else "-"
    w = statistics.median([r["width"] for r in answered]) if answered else None
    nw = statistics.median([r["noise_width"] for r in noise]) if noise else None
    print(f"{label:<22} {len(rs):>6} {'-' if not vals else format(statistics.median(vals), '.1f'):>12} "
          f"{cov:>10} {'-' if w is None else format(w, '.1f'):>9} {ncov:>10} {'-' if nw is None else format(nw, '.1f'):>9} "
          f"{len(rs) - len(answered):>9} {'' if runs is None else runs:>6}")

print()
print(f"{'':<22} {'points':>6} {'median|err|':>12} {'coverage':>10} {'width':>9} {'noise cov':>10} {'n. width':>9} {'no number':>9} {'runs':>6}")
for case, (runs, flagged, secs, bl, stab) in per_case.items():
    for model in ("traffic", "DC"):
        summary(f"{case} {model}", [r for r in rows if r["case"] == case and r["model"] == model],
                f"{runs}" if model == "traffic" else None)
for model in ("traffic", "DC"):
    summary(f"ALL {model}", [r for r in rows if r["model"] == model])
print()
for case, (runs, flagged, secs, bl, stab) in per_case.items():
    print(f"{case}: the forms chosen most often over resampled runs: {'; '.join(stab) or '-'}")
    print(f"{case}: {runs} runs on the fitted sizes, {flagged} flagged, sweep {secs} s; bottom line "
          f"({'TRUSTED' if bl['trusted'] else 'not trusted'}, {bl['model'] or 'no model'}): "
          + " / ".join(l.strip() for l in (bl["lines"][:1] + bl["lines"][1:][-1:])))
answer = [r for r in rows if r["answer"]]
vals = [abs(r["err"]) for r in answer if r["cen"] == "none"]
covered = [r for r in answer if r["inside"] is not None]
print()
print("the answers (each case's bottom-line model, trusted or not) against the targets:")
if vals:
    print(f"  median |error| {statistics.median(vals):.1f} pp (target <= 2) over {len(vals)} uncensored points")
if covered:
    n_in = sum(r["inside"] for r in covered)
    spread = [r["noise_width"] for r in covered if r["noise_width"] is not None]
    print(f"  coverage {100 * n_in / len(covered):.0f}% ({n_in}/{len(covered)}; target >= 90%), median width {statistics.median(r['width'] for r in covered):.1f} pp (target <= 12), median spread over resampled runs {statistics.median(spread) if spread else float('nan'):.1f} pp")
trusted = [r for r in covered if r["trusted"]]
print(f"  TRUSTED: {sum(not r['inside'] for r in trusted)} of {len(trusted)} held-out truths outside the interval (target <= 10%)")
for line in sorted(skipped):
    print(f"  not counted: {line}")
bad = [r for r in rows if r["trusted"] and r["inside"] is False]
print(f"held-out truths outside the interval of a projection the tool TRUSTED: {len(bad)}"
      + "".join(f"\n  {r['case']} {r['model']} {r['procs']} CTI {r['cti']:.0f}%: {r['err']:+.1f} pp" for r in bad))
print("coverage: held-out truths inside the 90% interval the answer uses (noise + model error);"
      " noise cov: inside the run-to-run interval alone (the reference: what was printed before)."
      " Censored truths (<, >) count as inside when the interval reaches the bound's side;"
      " their errors are bounds and are left out of the median.")
EOF
