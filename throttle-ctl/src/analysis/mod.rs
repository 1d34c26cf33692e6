//! `throttle-ctl analyze`: from stored runs to demand figures and projections.
//!
//! * [`stats`]: medians and their intervals, CV, pool-adjacent-violators, bootstrap.
//! * [`regression`]: T(p) = C0 + C1/p + C2/sqrt(p).
//! * [`demand`]: CTI, bandwidth demand with censoring, demand constant, projection,
//!   saturation.
//! * [`csv`]: data measured with any tool.
//!
//! Every formula is DESIGN.md section 5; this module only groups the observations, keeps
//! held-out sizes out of the fits, and collects warnings.

pub mod csv;
pub mod demand;
pub mod regression;
pub mod stats;

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use serde::Serialize;

use demand::{Censored, CtiCurve};
use regression::Regression;

/// One run, from the store or a CSV file.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// Workload and its options: runs are only compared within one series.
    pub series: String,
    pub procs: u32,
    /// `None`: unlimited (not used by the analysis).
    pub bw_pct: Option<f64>,
    pub repeat: u32,
    pub seconds: f64,
    pub ok: bool,
}

/// What to compute from the observations.
#[derive(Clone, Debug)]
pub struct Question {
    /// CTI levels in percent.
    pub cti: Vec<f64>,
    /// Sizes (procs) to project to; measured ones are held out.
    pub predict: Vec<u32>,
    /// Which series, when the data holds several.
    pub series: Option<String>,
    /// Said in the output: what `seconds` of the observations is.
    pub time_source: String,
}

/// The runs of one (size, bandwidth) summarised: their median and its interval, the
/// spread, and the CTI of the median.
#[derive(Clone, Debug, Serialize)]
pub struct MedianPoint {
    pub procs: u32,
    pub bw_pct: f64,
    pub n: usize,
    pub median: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub cv: f64,
    /// CTI of the median, percent (null without a 100% baseline).
    pub cti: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Demand {
    pub procs: u32,
    pub cti: f64,
    pub bw_pct: f64,
    pub censored: Censored,
    pub held_out: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct DcPair {
    pub cti: f64,
    pub p1: u32,
    pub p2: u32,
    pub dc: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Projection {
    pub procs: u32,
    pub cti: f64,
    pub bw_pct: f64,
    /// The projection at the ends of the DC bootstrap interval.
    pub bw_pct_ci: Option<(f64, f64)>,
    pub measured_bw_pct: Option<f64>,
    /// predicted - measured, percentage points.
    pub error_pp: Option<f64>,
    /// The demand at p* this projects from is censored.
    pub from_censored: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Saturation {
    pub cti: f64,
    pub procs: f64,
}

/// The whole answer; `analyze --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    pub series: String,
    /// Which time was analysed (the job's wall time or the workload's kernel time).
    pub time_source: String,
    pub runs: usize,
    pub failed_runs: usize,
    pub min_repeats: usize,
    pub regression: Option<Regression>,
    pub points: Vec<MedianPoint>,
    pub demand: Vec<Demand>,
    pub dc: Option<f64>,
    pub dc_ci: Option<(f64, f64)>,
    pub dc_pairs: Vec<DcPair>,
    pub dc_pairs_censored: usize,
    pub p_star: Option<u32>,
    pub projection: Vec<Projection>,
    pub saturation: Vec<Saturation>,
    pub held_out: Vec<u32>,
    pub warnings: Vec<String>,
}

/// Run the analysis on `obs`.
pub fn analyze(obs: &[Observation], req: &Question) -> Result<Analysis> {
    let mut series: BTreeMap<&str, usize> = BTreeMap::new();
    for o in obs {
        *series.entry(o.series.as_str()).or_default() += 1;
    }
    let chosen = match (&req.series, series.len()) {
        (Some(s), _) => {
            if !series.contains_key(s.as_str()) {
                bail!(
                    "no series `{s}` in the data; it holds: {}",
                    series.keys().cloned().collect::<Vec<_>>().join("; ")
                );
            }
            s.clone()
        }
        (None, 0) => bail!("no runs to analyze"),
        (None, 1) => series
            .keys()
            .next()
            .map(|s| s.to_string())
            .unwrap_or_default(),
        (None, _) => bail!(
            "the data holds {} series; pick one with --series: {}",
            series.len(),
            series
                .keys()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mine: Vec<&Observation> = obs.iter().filter(|o| o.series == chosen).collect();
    let failed_runs = mine.iter().filter(|o| !o.ok).count();
    let good: Vec<&Observation> = mine
        .iter()
        .copied()
        .filter(|o| o.ok && o.bw_pct.is_some())
        .collect();
    let mut warnings = Vec::new();
    if failed_runs > 0 {
        warnings.push(format!(
            "{failed_runs} failed runs are in the data and were left out"
        ));
    }
    let unlimited = mine.iter().filter(|o| o.ok && o.bw_pct.is_none()).count();
    if unlimited > 0 {
        warnings.push(format!(
            "{unlimited} runs at unlimited bandwidth were left out (the baseline is 100%)"
        ));
    }
    // (procs, bw) -> times
    let mut cells: BTreeMap<(u32, u64), Vec<f64>> = BTreeMap::new();
    for o in &good {
        let bw = o.bw_pct.unwrap_or(100.0);
        cells
            .entry((o.procs, (bw * 1000.0).round() as u64))
            .or_default()
            .push(o.seconds);
    }
    if cells.is_empty() {
        bail!("no successful runs with a bandwidth percentage in series `{chosen}`");
    }
    let sizes: Vec<u32> = {
        let mut s: Vec<u32> = cells.keys().map(|k| k.0).collect();
        s.dedup();
        s
    };
    let held_out: Vec<u32> = req
        .predict
        .iter()
        .copied()
        .filter(|p| sizes.contains(p))
        .collect();
    let min_repeats = cells.values().map(Vec::len).min().unwrap_or(0);
    if min_repeats < 3 {
        warnings.push(format!(
            "only {min_repeats} repeat(s) at some points: medians and their intervals are weak (use >= 3)"
        ));
    }
    // Strong-scaling regression on every run at 100%, held-out sizes excluded.
    let reg_points: Vec<(f64, f64)> = good
        .iter()
        .filter(|o| o.bw_pct == Some(100.0) && !held_out.contains(&o.procs))
        .map(|o| (o.procs as f64, o.seconds))
        .collect();
    let regression = regression::regress(&reg_points);
    if regression.is_none() {
        warnings.push("the strong-scaling regression needs runs at 100% on at least 3 sizes (held-out sizes excluded)".into());
    } else if let Some(r) = &regression {
        if r.crossover_procs.is_none() {
            warnings.push(format!(
                "no crossover: C1 = {:.4}, C2 = {:.4} are not both positive",
                r.c1, r.c2
            ));
        }
    }
    // Points, CTI curves.
    let mut points = Vec::new();
    let mut curves: BTreeMap<u32, CtiCurve> = BTreeMap::new();
    for &p in &sizes {
        let base = cells.get(&(p, 100_000)).map(|t| stats::median(t));
        if base.is_none() {
            warnings.push(format!("{p} procs: no run at 100%, so no CTI"));
        }
        let mut curve = CtiCurve {
            bw: Vec::new(),
            cti: Vec::new(),
        };
        for (&(pp, bwk), times) in cells.range((p, 0)..=(p, u64::MAX)) {
            debug_assert_eq!(pp, p);
            let bw = bwk as f64 / 1000.0;
            let median = stats::median(times);
            let (lo, hi, _) = stats::median_ci(times);
            let cti = base.map(|b| demand::cti(median, b));
            if let (Some(c), true) = (cti, bw < 100.0) {
                curve.bw.push(bw);
                curve.cti.push(c);
            }
            points.push(MedianPoint {
                procs: p,
                bw_pct: bw,
                n: times.len(),
                median,
                ci_low: lo,
                ci_high: hi,
                cv: stats::cv(times),
                cti,
            });
        }
        if base.is_some() && !curve.bw.is_empty() {
            if curve.monotone().2 {
                warnings.push(format!("{p} procs: CTI is not monotone in bandwidth; pooled (PAV) before interpolating"));
            }
            curves.insert(p, curve);
        }
    }
    // Demand per size and level.
    let mut demand = Vec::new();
    for (&p, curve) in &curves {
        for &c in &req.cti {
            if let Some((bw, censored)) = curve.demand(c) {
                demand.push(Demand {
                    procs: p,
                    cti: c,
                    bw_pct: bw,
                    censored,
                    held_out: held_out.contains(&p),
                });
            }
        }
    }
    for &c in &req.cti {
        let all_below = demand
            .iter()
            .filter(|d| d.cti == c)
            .all(|d| d.censored == Censored::Below);
        if all_below && demand.iter().any(|d| d.cti == c) {
            warnings.push(format!(
                "CTI {c}% is never reached: even the lowest bandwidth slows the program by less"
            ));
        }
    }
    // Demand constant over pairs of fitted sizes.
    let fitted: Vec<u32> = curves
        .keys()
        .copied()
        .filter(|p| !held_out.contains(p))
        .collect();
    let find = |p: u32, c: f64| demand.iter().find(|d| d.procs == p && d.cti == c);
    let mut dc_pairs = Vec::new();
    let mut censored_pairs = 0;
    for &c in &req.cti {
        for (i, &p1) in fitted.iter().enumerate() {
            for &p2 in &fitted[..i] {
                match (find(p1, c), find(p2, c)) {
                    (Some(a), Some(b))
                        if a.censored == Censored::None && b.censored == Censored::None =>
                    {
                        dc_pairs.push(DcPair {
                            cti: c,
                            p1,
                            p2,
                            dc: demand::demand_constant(a.bw_pct, b.bw_pct, p1 as f64, p2 as f64),
                        });
                    }
                    _ => censored_pairs += 1,
                }
            }
        }
    }
    if censored_pairs > 0 {
        warnings.push(format!("{censored_pairs} (CTI, size pair) combinations left out of DC: a demand was censored or missing"));
    }
    let dc_values: Vec<f64> = dc_pairs.iter().map(|d| d.dc).collect();
    let dc =
        (!dc_values.is_empty()).then(|| dc_values.iter().sum::<f64>() / dc_values.len() as f64);
    let dc_ci = stats::bootstrap_mean_ci(&dc_values);
    if dc.is_none() && fitted.len() >= 2 {
        warnings.push(
            "no demand constant: no pair of sizes has uncensored demands at the same CTI level"
                .into(),
        );
    } else if fitted.len() < 2 {
        warnings.push(
            "a demand constant needs throttled runs on at least 2 sizes (held-out sizes excluded)"
                .into(),
        );
    }
    // Projection from the largest fitted size.
    let p_star = fitted.last().copied();
    let mut projection = Vec::new();
    let mut saturation = Vec::new();
    if let (Some(ps), Some(dc)) = (p_star, dc) {
        for &c in &req.cti {
            let Some(star) = find(ps, c) else { continue };
            for &p in &req.predict {
                let bw = demand::project(star.bw_pct, dc, ps as f64, p as f64);
                let measured = find(p, c)
                    .filter(|_| held_out.contains(&p))
                    .map(|d| d.bw_pct);
                projection.push(Projection {
                    procs: p,
                    cti: c,
                    bw_pct: bw,
                    bw_pct_ci: dc_ci.map(|(lo, hi)| {
                        (
                            demand::project(star.bw_pct, lo, ps as f64, p as f64),
                            demand::project(star.bw_pct, hi, ps as f64, p as f64),
                        )
                    }),
                    measured_bw_pct: measured,
                    error_pp: measured.map(|m| bw - m),
                    from_censored: star.censored != Censored::None,
                });
            }
            saturation.push(Saturation {
                cti: c,
                procs: demand::saturation(star.bw_pct, dc, ps as f64),
            });
        }
    }
    Ok(Analysis {
        time_source: req.time_source.clone(),
        series: chosen,
        runs: good.len(),
        failed_runs,
        min_repeats,
        regression,
        points,
        demand,
        dc,
        dc_ci,
        dc_pairs,
        dc_pairs_censored: censored_pairs,
        p_star,
        projection,
        saturation,
        held_out,
        warnings,
    })
}

fn flag(c: Censored) -> &'static str {
    match c {
        Censored::None => "",
        Censored::Below => "<",
        Censored::Above => ">",
    }
}

/// The tables a person reads.
pub fn render(a: &Analysis, levels: &[f64], capacity: Option<&str>) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{}: {} runs, at least {} repeat(s) per point, {} failed runs left out\ntimes: {}\n\n",
        a.series, a.runs, a.min_repeats, a.failed_runs, a.time_source
    ));
    match &a.regression {
        Some(r) => {
            out.push_str(&format!(
                "strong scaling at 100%   T(p) = {:.4} + {:.4}/p + {:.4}/sqrt(p)   R^2 {:.3}  adj R^2 {}  MSE {:.3e}  LOO RMSE {}\n",
                r.c0, r.c1, r.c2, r.r2,
                r.adj_r2.map(|v| format!("{v:.3}")).unwrap_or_else(|| "-".into()),
                r.mse,
                r.loo_rmse.map(|v| format!("{v:.3e} s")).unwrap_or_else(|| "-".into())
            ));
            match r.crossover_procs {
                Some(px) => out.push_str(&format!(
                    "  communication overtakes processing at p ~ {px:.0} processes\n\n"
                )),
                None => out.push_str("  no crossover (C1 and C2 are not both positive)\n\n"),
            }
        }
        None => out.push_str("strong scaling: not enough sizes at 100% for the regression\n\n"),
    }
    out.push_str("completion time (median s, [95% CI], CV) and CTI per point\n");
    let mut t = crate::table::Table::new(&["procs", "bw %", "n", "median s", "CI", "CV", "CTI %"]);
    for p in &a.points {
        t.row(vec![
            p.procs.to_string(),
            format!("{}", p.bw_pct),
            p.n.to_string(),
            format!("{:.4}", p.median),
            format!("[{:.4}, {:.4}]", p.ci_low, p.ci_high),
            format!("{:.3}", p.cv),
            p.cti
                .map(|c| format!("{c:.1}"))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    out.push_str(&t.render());
    out.push_str(&format!(
        "\nbandwidth demand (% of {}) to stay within a completion-time increment\n  (< censored below: the lowest step sufficed; > censored above: interpolated up to 100%)\n",
        capacity.unwrap_or("the link")
    ));
    let mut header = vec!["procs".to_string()];
    header.extend(levels.iter().map(|c| format!("{c}%")));
    let hdr: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = crate::table::Table::new(&hdr);
    let mut sizes: Vec<u32> = a.demand.iter().map(|d| d.procs).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for p in sizes {
        let mut row = vec![format!(
            "{p}{}",
            if a.held_out.contains(&p) {
                " (held out)"
            } else {
                ""
            }
        )];
        for &c in levels {
            row.push(
                a.demand
                    .iter()
                    .find(|d| d.procs == p && d.cti == c)
                    .map(|d| format!("{}{:.1}", flag(d.censored), d.bw_pct))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        t.row(row);
    }
    out.push_str(&t.render());
    match a.dc {
        Some(dc) => out.push_str(&format!(
            "demand constant DC = {dc:.3}  ({} pairs{}{})\n",
            a.dc_pairs.len(),
            a.dc_ci
                .map(|(l, h)| format!(", 95% CI {l:.3}-{h:.3}"))
                .unwrap_or_default(),
            if a.dc_pairs_censored > 0 {
                format!(", {} censored left out", a.dc_pairs_censored)
            } else {
                String::new()
            }
        )),
        None => out.push_str("demand constant: not available\n"),
    }
    let mut targets: Vec<u32> = a.projection.iter().map(|p| p.procs).collect();
    targets.sort_unstable();
    targets.dedup();
    if !targets.is_empty() {
        out.push_str(&format!(
            "projection from p* = {} procs\n",
            a.p_star.unwrap_or(0)
        ));
        let mut t = crate::table::Table::new(&hdr);
        for p in targets {
            let mut row = vec![format!("{p}")];
            let mut measured = vec![format!("  measured")];
            let mut any_measured = false;
            for &c in levels {
                let pr = a.projection.iter().find(|x| x.procs == p && x.cti == c);
                row.push(
                    pr.map(|x| format!("{:.1}", x.bw_pct))
                        .unwrap_or_else(|| "-".into()),
                );
                measured.push(
                    pr.and_then(|x| {
                        x.measured_bw_pct.map(|m| {
                            any_measured = true;
                            format!("{m:.1} ({:+.1} pp)", x.bw_pct - m)
                        })
                    })
                    .unwrap_or_else(|| "-".into()),
                );
            }
            t.row(row);
            if any_measured {
                t.row(measured);
            }
        }
        out.push_str(&t.render());
    }
    for s in &a.saturation {
        out.push_str(&format!(
            "link saturates (demand = 100%) at about {:.0} processes for CTI {}%\n",
            s.procs, s.cti
        ));
    }
    if !a.warnings.is_empty() {
        out.push('\n');
        for w in &a.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic study with three repeats: T(p, 100) from the paper's coefficients and
    /// CTI(bw, p) = 2 sqrt(p/4) (40 - bw) percent below 40%, so every demand is known.
    fn study(failed: bool) -> Vec<Observation> {
        let mut obs = Vec::new();
        for &p in &[4u32, 9, 16, 25] {
            let t100 = 0.3 + 57.67 / p as f64 + 3.8 / (p as f64).sqrt();
            for &bw in &[100.0, 40.0, 36.0, 32.0, 28.0, 24.0, 20.0] {
                for r in 0..3 {
                    let cti = ((40.0 - bw) * 2.0 * (p as f64 / 4.0).sqrt()).max(0.0);
                    let jitter = 1.0 + (r as f64 - 1.0) * 1e-4;
                    obs.push(Observation {
                        series: "bfs".into(),
                        procs: p,
                        bw_pct: Some(bw),
                        repeat: r,
                        seconds: if bw == 100.0 {
                            t100 * jitter
                        } else {
                            t100 * (1.0 + cti / 100.0) * jitter
                        },
                        ok: true,
                    });
                }
            }
        }
        if failed {
            obs.push(Observation {
                series: "bfs".into(),
                procs: 4,
                bw_pct: Some(20.0),
                repeat: 9,
                seconds: 999.0,
                ok: false,
            });
        }
        obs
    }

    #[test]
    fn failed_runs_are_ignored_and_counted() {
        let req = Question {
            cti: vec![5.0, 10.0],
            predict: vec![],
            series: None,
            time_source: "test".into(),
        };
        let with = analyze(&study(true), &req).unwrap();
        let without = analyze(&study(false), &req).unwrap();
        assert_eq!(with.failed_runs, 1);
        assert!(with.warnings.iter().any(|w| w.contains("1 failed runs")));
        assert_eq!(with.runs, without.runs);
        assert_eq!(
            format!("{:?}", with.demand),
            format!("{:?}", without.demand)
        );
    }

    #[test]
    fn held_out_size_is_predicted_and_compared() {
        let req = Question {
            cti: vec![10.0, 20.0],
            predict: vec![25, 100],
            series: None,
            time_source: "test".into(),
        };
        let a = analyze(&study(false), &req).unwrap();
        assert_eq!(a.held_out, vec![25]);
        assert_eq!(a.p_star, Some(16));
        assert_eq!(
            a.regression.as_ref().unwrap().n,
            3 * 3,
            "held-out runs stay out of the fit"
        );
        // Demand: CTI(bw) = 2 sqrt(p/4) (40 - bw) => BW(c, p) = 40 - c / (2 sqrt(p/4)).
        let bw = |c: f64, p: f64| 40.0 - c / (2.0 * (p / 4.0).sqrt());
        let d16 = a
            .demand
            .iter()
            .find(|d| d.procs == 16 && d.cti == 10.0)
            .unwrap();
        assert!((d16.bw_pct - bw(10.0, 16.0)).abs() < 0.05, "{d16:?}");
        // DC pairs: 3 pairs x 2 levels, each (BW1/BW2) * sqrt(p2/p1).
        assert_eq!(a.dc_pairs.len(), 6);
        let pair = a
            .dc_pairs
            .iter()
            .find(|d| d.cti == 10.0 && d.p1 == 16 && d.p2 == 4)
            .unwrap();
        let want = bw(10.0, 16.0) / bw(10.0, 4.0) * 0.5;
        assert!((pair.dc - want).abs() < 0.005, "{pair:?} vs {want}");
        let pr = a
            .projection
            .iter()
            .find(|p| p.procs == 25 && p.cti == 10.0)
            .unwrap();
        let want = bw(10.0, 16.0) * a.dc.unwrap() * (25.0f64 / 16.0).sqrt();
        assert!((pr.bw_pct - want).abs() < 1e-9);
        let measured = pr.measured_bw_pct.unwrap();
        assert!((measured - bw(10.0, 25.0)).abs() < 0.05);
        assert!((pr.error_pp.unwrap() - (pr.bw_pct - measured)).abs() < 1e-12);
        assert!(a
            .projection
            .iter()
            .any(|p| p.procs == 100 && p.measured_bw_pct.is_none()));
        let text = render(&a, &[10.0, 20.0], Some("1 Gbit/s"));
        assert!(
            text.contains("held out") && text.contains("demand constant DC"),
            "{text}"
        );
    }

    #[test]
    fn several_series_need_a_choice() {
        let mut obs = study(false);
        obs.push(Observation {
            series: "pmm".into(),
            procs: 4,
            bw_pct: Some(100.0),
            repeat: 0,
            seconds: 1.0,
            ok: true,
        });
        let req = Question {
            cti: vec![5.0],
            predict: vec![],
            series: None,
            time_source: "test".into(),
        };
        let e = analyze(&obs, &req).unwrap_err().to_string();
        assert!(e.contains("--series") && e.contains("`pmm`"), "{e}");
        let req = Question {
            cti: vec![5.0],
            predict: vec![],
            series: Some("bfs".into()),
            time_source: "test".into(),
        };
        assert!(analyze(&obs, &req).is_ok());
    }
}
