#!/usr/bin/env python3
"""The projection benchmark's tables (bench/projection.sh runs it; it can be run alone on a
work directory that holds `cases` and each case's `CASE.json`, `CASE.db` and, to compare
builds, `CASE.old.json`).

For every held-out (size, CTI level) with a measured demand and both projections (traffic,
DC): the error, whether the truth lies inside the 90% interval the answer uses, and inside
the run-to-run interval alone; per case: median |error|, coverage, widths. Then the
reliability table: the observed coverage of the intervals at nominal 50, 80, 90 and 95%,
per case, per family of programs and overall, for the answers (each case's bottom-line
model) and per model; and the same stores as another build analysed them, side by side.
Censored truths (<, >) count as inside when the interval reaches the bound's side; their
errors are bounds and are left out of the medians.

Usage: projection_report.py WORKDIR
"""
import json
import os
import sqlite3
import statistics
import sys

LEVELS = [0.5, 0.8, 0.9, 0.95]
FAMILIES = {"mw": "master/worker", "bfs": "BFS", "pmm": "PMM", "mpi": "MPI"}


def family(case):
    return FAMILIES.get(case.split("-")[0], case)


def inside(m, cen, lo, hi):
    return {"none": lo <= m <= hi, "below": lo <= m, "above": hi >= m}[cen]


def points(work, case, held, suffix=""):
    """The held-out points of one analysis of CASE.db (suffix '' or '.old')."""
    path = f"{work}/{case}{suffix}.json"
    if not os.path.exists(path):
        return None, None
    a = json.load(open(path))
    db = sqlite3.connect(f"{work}/{case}.db")
    models = [("DC", a["projection"], a["verdict"])]
    if a.get("traffic"):
        models.append(("traffic", a["traffic"]["projection"], a["traffic"]["verdict"]))
    # A held-out size whose runs were mostly flagged (its agents starved: more nodes than
    # this machine can emulate) has no truth to judge by: listed, not counted.
    unmeasurable = {}
    for h in held:
        n, f = db.execute(
            "select count(*), coalesce(sum(flag is not null), 0) from runs where procs = ?", (h,)
        ).fetchone()
        if n and f / n > 1 / 3:
            unmeasurable[h] = (f, n)
    bl = a["bottom_line"]
    out = []
    for name, proj, verdict in models:
        # Fitted on two sizes, too few for a backtest (a CPU-bound downgrade keeps it).
        unchecked = (verdict.get("inner") or verdict)["verdict"] == "unchecked"
        for p in proj:
            if p["procs"] not in held or p["measured_bw_pct"] is None or p["measured_below_noise"]:
                continue
            if p["procs"] in unmeasurable:
                continue
            m, cen = p["measured_bw_pct"], p["measured_censored"]
            i, n = p["interval"], p["noise_interval"]
            at = {round(x["level"], 2): (x["low"], x["high"]) for x in p.get("at_levels") or []}
            if i is not None and 0.9 not in at:
                at[0.9] = (i["low"], i["high"])
            out.append(dict(
                case=case, model=name, procs=p["procs"], cti=p["cti"], proj=p["bw_pct"], meas=m,
                cen=cen, err=p["bw_pct"] - m,
                inside=None if i is None else inside(m, cen, i["low"], i["high"]),
                width=None if i is None else i["high"] - i["low"],
                at={q: inside(m, cen, lo, hi) for q, (lo, hi) in at.items()},
                trusted=bool(bl["trusted"]) and bl["model"] == name.lower(),
                answer=bl["model"] == name.lower(),
                unchecked=unchecked,
                noise_inside=None if n is None else inside(m, cen, n["low"], n["high"]),
                noise_width=None if n is None else n["high"] - n["low"]))
    skipped = [f"{case} {h} procs: {f} of its {n} runs flagged (its links did not hold their "
               f"setting), so no truth to judge by" for h, (f, n) in unmeasurable.items()]
    return (a, out), skipped


def frac(rs, key):
    have = [r for r in rs if r[key] is not None]
    return f"{sum(r[key] for r in have)}/{len(have)}" if have else "-"


def cov_at(rs, q):
    have = [r for r in rs if q in r["at"]]
    if not have:
        return "-"
    k = sum(r["at"][q] for r in have)
    return f"{100 * k / len(have):3.0f}% {k:>2}/{len(have):<2}"


def med(vals):
    return "-" if not vals else format(statistics.median(vals), ".1f")


def main(work):
    cases = []
    for line in open(f"{work}/cases"):
        case, held, secs = line.split()
        cases.append((case, [int(h) for h in held.split(",")], int(secs)))
    new, old, skipped, meta = [], [], set(), {}
    for case, held, secs in cases:
        got = points(work, case, held)
        if got[0] is None:
            print(f"{case}: no analysis to report", file=sys.stderr)
            continue
        (a, pts), sk = got
        new += pts
        skipped.update(sk)
        db = sqlite3.connect(f"{work}/{case}.db")
        runs = db.execute("select count(*) from runs where procs not in (%s)" % ",".join("?" * len(held)), held).fetchone()[0]
        flagged = db.execute("select count(*) from runs where flag is not null").fetchone()[0]
        meta[case] = (runs, flagged, secs, a["bottom_line"])
        o, _ = points(work, case, held, ".old")
        if o:
            old += o[1]
    have_old = bool(old)

    mark = {"none": "", "below": "<", "above": ">"}
    print("case          model    procs CTI%  projected  measured  error pp        width   in?  noise in?")
    for r in new:
        print(f"{r['case']:<13} {r['model']:<8} {r['procs']:>5} {r['cti']:>4.0f} {r['proj']:>10.1f} "
              f"{mark[r['cen']] + format(r['meas'], '.1f'):>9} {r['err']:>+9.1f}{'(bound)' if r['cen'] != 'none' else '':<7} "
              f"{'-' if r['width'] is None else format(r['width'], '.1f'):>8}  "
              f"{'-' if r['inside'] is None else ('yes' if r['inside'] else 'NO'):>4}  "
              f"{'-' if r['noise_inside'] is None else ('yes' if r['noise_inside'] else 'NO'):>4}")

    def summary(label, rs, runs=""):
        vals = [abs(r["err"]) for r in rs if r["cen"] == "none"]
        answered = [r for r in rs if r["inside"] is not None]
        noise = [r for r in rs if r["noise_inside"] is not None]
        return (f"{label:<22} {len(rs):>6} {med(vals):>12} {frac(rs, 'inside'):>10} "
                f"{med([r['width'] for r in answered]):>9} {frac(rs, 'noise_inside'):>10} "
                f"{med([r['noise_width'] for r in noise]):>9} {len(rs) - len(answered):>9} {runs:>6}")

    print()
    print(f"{'':<22} {'points':>6} {'median|err|':>12} {'coverage':>10} {'width':>9} {'noise cov':>10} {'n. width':>9} {'no number':>9} {'runs':>6}")
    for case, _, _ in cases:
        for model in ("traffic", "DC"):
            print(summary(f"{case} {model}", [r for r in new if r["case"] == case and r["model"] == model],
                          str(meta[case][0]) if model == "traffic" else ""))
    for model in ("traffic", "DC"):
        print(summary(f"ALL {model}", [r for r in new if r["model"] == model]))

    print()
    print("reliability: held-out truths inside the interval at each nominal level (the answers:")
    print("each case's bottom-line model, trusted or not; then each model over every case)")
    head = f"{'':<26}" + "".join(f"{f'{int(q * 100)}%':>12}" for q in LEVELS) + f"{'width 90%':>11}"
    print(head)

    def rel_row(label, rs):
        w = [r["width"] for r in rs if r["width"] is not None]
        return f"{label:<26}" + "".join(f"{cov_at(rs, q):>12}" for q in LEVELS) + f"{med(w):>11}"

    answers = [r for r in new if r["answer"]]
    for case, _, _ in cases:
        rs = [r for r in answers if r["case"] == case]
        if rs:
            print(rel_row(f"{case} ({rs[0]['model']})", rs))
    for fam in sorted({family(c) for c, _, _ in cases}):
        rs = [r for r in answers if family(r["case"]) == fam]
        if rs:
            print(rel_row(f"family {fam}", rs))
    print(rel_row("ALL answers", answers))
    two = [r for r in answers if r["unchecked"]]
    if two:
        print(rel_row("two-size answers", two))
        print(rel_row("checked answers", [r for r in answers if not r["unchecked"]]))
    for model in ("traffic", "DC"):
        print(rel_row(f"ALL {model}", [r for r in new if r["model"] == model]))

    if have_old:
        print()
        print("the same stores analysed by the other build (BENCH_OLD_BIN), 90% interval:")
        print(f"{'':<22} {'old cov':>9} {'old width':>10} {'old |err|':>10}   {'new cov':>9} {'new width':>10} {'new |err|':>10}")
        for case, _, _ in cases + [("ALL", None, None)]:
            for model in ("traffic", "DC"):
                def sel(rs):
                    return [r for r in rs if (case == "ALL" or r["case"] == case) and r["model"] == model]
                o, n = sel(old), sel(new)
                if not o and not n:
                    continue
                wo = [r["width"] for r in o if r["width"] is not None]
                wn = [r["width"] for r in n if r["width"] is not None]
                print(f"{case + ' ' + model:<22} {frac(o, 'inside'):>9} {med(wo):>10} "
                      f"{med([abs(r['err']) for r in o if r['cen'] == 'none']):>10}   {frac(n, 'inside'):>9} "
                      f"{med(wn):>10} {med([abs(r['err']) for r in n if r['cen'] == 'none']):>10}")
        ot = [r for r in old if r["trusted"] and r["inside"] is not None]
        print(f"old build: TRUSTED truths outside the interval: {sum(not r['inside'] for r in ot)} of {len(ot)}")

    print()
    for case, (runs, flagged, secs, bl) in meta.items():
        print(f"{case}: {runs} runs on the fitted sizes, {flagged} flagged, sweep {secs} s; bottom line "
              f"({'TRUSTED' if bl['trusted'] else 'not trusted'}, {bl['model'] or 'no model'}): "
              + " / ".join(line.strip() for line in (bl["lines"][:1] + bl["lines"][1:][-1:])))
    vals = [abs(r["err"]) for r in answers if r["cen"] == "none"]
    covered = [r for r in answers if r["inside"] is not None]
    print()
    print("the answers (each case's bottom-line model, trusted or not) against the targets:")
    if vals:
        print(f"  median |error| {statistics.median(vals):.1f} pp (target <= 2) over {len(vals)} uncensored points")
    if covered:
        k = sum(r["inside"] for r in covered)
        print(f"  coverage of the 90% interval {100 * k / len(covered):.0f}% ({k}/{len(covered)}; target 85-97%), "
              f"median width {statistics.median(r['width'] for r in covered):.1f} pp (target <= 10)")
    fams = {}
    for r in covered:
        fams.setdefault(family(r["case"]), []).append(r["inside"])
    for fam, v in sorted(fams.items()):
        print(f"  family {fam}: {sum(v)}/{len(v)} inside ({100 * sum(v) / len(v):.0f}%; target >= 75%)")
    for label, sel in (("two-size answers (NOT CHECKED: fitted on two sizes)", True),
                       ("checked answers (a backtest ran)", False)):
        rs = [r for r in covered if r["unchecked"] == sel]
        if rs and any(r["unchecked"] for r in covered):
            k = sum(r["inside"] for r in rs)
            e = [abs(r["err"]) for r in rs if r["cen"] == "none"]
            print(f"  {label}: {k}/{len(rs)} inside ({100 * k / len(rs):.0f}%), median |error| {med(e)} pp, "
                  f"median width {statistics.median(r['width'] for r in rs):.1f} pp")
    trusted = [r for r in covered if r["trusted"]]
    bad = [r for r in trusted if not r["inside"]]
    print(f"  TRUSTED: {len(bad)} of {len(trusted)} held-out truths outside the interval (target <= 10%)"
          + "".join(f"\n    {r['case']} {r['model']} {r['procs']} CTI {r['cti']:.0f}%: {r['err']:+.1f} pp" for r in bad))
    for line in sorted(skipped):
        print(f"  not counted: {line}")


if __name__ == "__main__":
    main(sys.argv[1])
