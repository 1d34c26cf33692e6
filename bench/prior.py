#!/usr/bin/env python3
"""The model-error prior learned across programs (throttle-analysis/src/trust/model_error.rs,
TRAFFIC_PRIOR and DC_PRIOR): from the backtests of the projection benchmark's cases, never
from their held-out truths, and only of models whose backtest did not fail (a refuted
model gives no answer, so its errors say nothing of the intervals that are given).

Reads the `analyze --json` of each case (as bench/projection.sh writes them: WORKDIR/CASE.json,
analysed with the held-out sizes held out, so every backtest check is on fitted sizes) and,
per model, pools every checked size of every case the way model_error.rs estimates one
program's growth: tau0^2 = sum over sizes (mean error^2 - what the measurement explains -
the projection's noise^2 - lack of fit^2) / sum(doublings^2), the measurement's noise from
each size's run spread and repeats (`noise[]`), its reading from the levels' scatter, the
lack of fit as the case's analysis estimated it. One difference from model_error.rs: a
size's measurement is taken from the scatter of its backtest checks' errors (model_error.rs
takes the scatter of the fitted sizes' residuals, which the JSON does not hold), and falls
back to the reading at the largest fitted size; the prior in model_error.rs (0.16, worth 7)
was learned this way. Prints each case's own growth per doubling beside the pooled one, and the spread of
the cases' values about it (what the prior's worth in degrees of freedom rests on).

Usage: prior.py WORKDIR [CASE ...]   (default: every CASE.json in WORKDIR)
"""
import glob
import json
import math
import os
import sys

Z90 = 1.6448536269514722


def logit(pct):
    w = min(max(pct, 0.05), 99.95) / 100
    return math.log(w / (1 - w))


MEDIAN_EFFICIENCY = 1.2533141


def noise_of(levels, floor):
    """As model_error.rs's Group::noise_of: (what the measurement's noise adds to the levels'
    scatter about their mean, the variance it gives their mean in common), logit units."""
    if not floor:
        return 0.0, 0.0
    se = lambda n: 100 * MEDIAN_EFFICIENCY * floor["run_cv"] / math.sqrt(max(n, 1))
    base, step = se(floor["baseline_repeats"]), se(floor["step_repeats"])
    inv = [1 / c for c in levels]
    m = sum(inv) / len(inv)
    uneven = sum((x - m) ** 2 for x in inv) / (len(inv) - 1) if len(inv) > 1 else 0.0
    specific = step * step * sum(x * x for x in inv) / len(inv) + base * base * uneven
    return specific, (base * m) ** 2


def main(work, cases):
    if not cases and os.path.exists(f"{work}/cases"):
        # The cases projection.sh analysed (a failed analysis leaves no line there).
        cases = [line.split()[0] for line in open(f"{work}/cases") if line.strip()]
    if not cases:
        cases = sorted(os.path.basename(f)[:-5] for f in glob.glob(f"{work}/*.json")
                       if not f.endswith(".old.json"))
    pooled = {"traffic": [0.0, 0.0, 0], "dc": [0.0, 0.0, 0]}
    own = {"traffic": [], "dc": []}
    print(f"{'case':<14} {'model':<8} {'sizes':>5} {'checks':>6} {'reading':>8} {'lack':>7} {'own tau':>8}   per size: doublings, mean error, beyond")
    for case in cases:
        a = json.load(open(f"{work}/{case}.json"))
        floors = {f["procs"]: f for f in a.get("noise", [])}
        for model in ("traffic", "dc"):
            err = a.get("dc_error") if model == "dc" else (a.get("traffic") or {}).get("error")
            verdict = a["verdict"] if model == "dc" else (a.get("traffic") or {}).get("verdict")
            if not err:
                continue
            if verdict and verdict["verdict"] == "failed":
                # A refuted model gives no answer: its errors say nothing of the
                # intervals that are given.
                print(f"{case:<14} {model:<8} left out: its backtest failed")
                continue
            reading2, lack2 = err["reading"] ** 2, err["lack_of_fit"] ** 2
            groups = {}
            for c in a["backtest"]:
                if (c["model"] != model or c["held_out"] or c["below_noise"]
                        or c["measured_censored"] != "none" or c["doublings"] <= 0
                        or c["error_logit"] is None):
                    continue
                g = groups.setdefault(c["procs"], {"e": [], "c": [], "noise": [], "d": c["doublings"]})
                g["e"].append(c["error_logit"])
                g["c"].append(c["cti"])
                i = c["interval"]
                g["noise"].append(0.0 if i is None else
                                  ((logit(i["high"]) - logit(i["low"])) / (2 * Z90)) ** 2)
            if not groups:
                continue
            beyond, reach, detail = 0.0, 0.0, []
            for p, g in sorted(groups.items()):
                n = len(g["e"])
                m = sum(g["e"]) / n
                specific, common = noise_of(g["c"], floors.get(p))
                # The levels' scatter where they have one (a checked size is a fitted one:
                # its levels scatter as its residuals do), else the reading's line.
                if n > 1:
                    within = sum((e - m) ** 2 for e in g["e"]) / (n - 1)
                    scattered = max(within - specific, 0.0) + specific
                else:
                    scattered = reading2 + specific
                b = m * m - scattered / n - common - sum(g["noise"]) / n - lack2
                beyond += b
                reach += g["d"] ** 2
                detail.append(f"{p}: {g['d']:.2f}, {m:+.3f}, {b:+.4f}")
            tau2 = max(beyond / reach, 0.0)
            own[model].append((case, tau2, len(groups)))
            pooled[model][0] += beyond
            pooled[model][1] += reach
            pooled[model][2] += len(groups)
            print(f"{case:<14} {model:<8} {len(groups):>5} {sum(len(g['e']) for g in groups.values()):>6} "
                  f"{math.sqrt(reading2):>8.3f} {math.sqrt(lack2):>7.3f} {math.sqrt(tau2):>8.3f}   " + "; ".join(detail))
    print()
    for model, (beyond, reach, n) in pooled.items():
        if reach <= 0:
            continue
        tau0 = math.sqrt(max(beyond / reach, 0.0))
        vals = [t for _, t, _ in own[model]]
        print(f"{model}: pooled growth per doubling tau0 = {tau0:.3f} logit over {n} checked sizes "
              f"of {len(vals)} cases; the cases' own: "
              + ", ".join(f"{c} {math.sqrt(t):.3f}" for c, t, _ in own[model]))
        if len(vals) >= 2 and tau0 > 0:
            mean = sum(vals) / len(vals)
            var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)
            cv2 = var / mean ** 2 if mean > 0 else float("nan")
            # How much the programs' own tau^2 differ beyond what estimating each from its
            # n checked sizes explains (a variance from n normal samples has CV^2 2/n): the
            # rest is how much programs differ. A scaled inverse chi-square prior with nu
            # degrees of freedom has CV^2 2/(nu - 4); a chi-square's, 2/nu.
            sizes = sum(n for _, _, n in own[model]) / len(own[model])
            rest = cv2 - 2 / sizes
            if rest > 0:
                print(f"  the cases' tau^2: mean {mean:.4f}, CV^2 {cv2:.2f}; {sizes:.1f} sizes each explain "
                      f"{2 / sizes:.2f} of it; the rest, {rest:.2f}, is a prior worth about {4 + 2 / rest:.1f} "
                      f"checked sizes (scaled inverse chi-square; {2 / rest:.1f} by the chi-square's moments)")
            else:
                print(f"  the cases' tau^2: mean {mean:.4f}, CV^2 {cv2:.2f}: no more than {sizes:.1f} sizes "
                      f"each explain; the programs do not differ measurably")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
