//! `analyze` of a series with a problem axis: every problem value analysed as a series
//! of its own (the demand at each (p, n) as today's at each p), then the traffic model's
//! parts fitted in both parameters ([`crate::method::problem_traffic`]), its backtest and
//! intervals ([`crate::trust::surface_check`]), and the projections to the (P, N) asked.

use std::collections::BTreeSet;

use anyhow::{bail, Result};

use super::{choose_series, group_cells, volumes, Question, Selection};
use crate::answer::problem::{
    ByProblem, CellDemand, ProblemAnalysis, ProblemDc, WeakLine, WeakSaturation,
};
use crate::answer::TimeUnit;
use crate::data::observation::Observation;
use crate::data::problem::ProblemAxis;
use crate::method::demand::Censored;
use crate::method::problem_traffic::{self, Cell};
use crate::method::{noise, stats};
use crate::trust::backtest;
use crate::trust::surface_check::{self, Checker, Measured};

/// The most problem values one analysis takes.
pub const MAX_VALUES: usize = 64;
/// The most sizes, and (size, problem) cells, of a series with a problem axis: each
/// value's sizes are analysed in turn, so the cost is about the values times one
/// analysis of their sizes. At these bounds the analysis took 18-33 s on the 2-core
/// development machine (16 sizes x 16 values 29.0-33.1 s, 4 x 64 17.7-18.1 s; 32 x 8 was
/// 43.8 s, and 32 x 32 without a bound 899 s: issue 55;
/// experiments/2026-12-02-analysis-cost.md).
pub const MAX_SIZES: usize = 16;
pub const MAX_CELLS: usize = 256;

/// What to ask of a series with a problem axis, beside the [`Question`].
#[derive(Clone, Debug, Default)]
pub struct ProblemQuestion {
    pub axis: ProblemAxis,
    /// Problem values to project to (with the question's sizes); none: the largest
    /// measured.
    pub problems: Vec<f64>,
    /// The problem's value at one process of a weak-scaling line, n(p) = n(1) x p in the
    /// problem's size, along which to find where the link saturates.
    pub weak: Option<f64>,
}

/// The problem values of series `series` in `obs`, ascending (empty when its runs carry
/// none); an error when some runs carry one and others not.
pub fn values(obs: &[Observation], series: &str) -> Result<Vec<f64>> {
    let mine: Vec<&Observation> = obs.iter().filter(|o| o.series == series).collect();
    let with = mine.iter().filter(|o| o.problem.is_some()).count();
    if with > 0 && with < mine.len() {
        bail!(
            "series `{series}` mixes runs with a problem value ({with}) and without ({}): a problem axis is a value in every run of the series; give the sweeps different names",
            mine.len() - with
        );
    }
    let set: BTreeSet<u64> = mine
        .iter()
        .filter_map(|o| o.problem)
        .map(f64::to_bits)
        .collect();
    let mut values: Vec<f64> = set.into_iter().map(f64::from_bits).collect();
    values.sort_by(f64::total_cmp);
    Ok(values)
}

/// Whether the series `req` asks for (or the only one) has two or more problem values:
/// then [`analyze_problem`] answers it, else [`analyze`](super::analyze).
pub fn has_axis(obs: &[Observation], req: &Question) -> Result<bool> {
    let chosen = choose_series(obs, &req.series)?;
    Ok(values(obs, &chosen)?.len() >= 2)
}

/// Analyse a series with a problem axis.
pub fn analyze_problem(
    obs: &[Observation],
    req: &Question,
    q: &ProblemQuestion,
) -> Result<ProblemAnalysis> {
    let chosen = choose_series(obs, &req.series)?;
    let values = values(obs, &chosen)?;
    if values.len() < 2 {
        bail!("series `{chosen}` has no problem axis (fewer than two problem values): analyse it without --problem");
    }
    if values.len() > MAX_VALUES {
        bail!(
            "series `{chosen}` holds {} problem values; an analysis takes at most {MAX_VALUES}",
            values.len()
        );
    }
    let of_series = || obs.iter().filter(|o| o.series == chosen);
    let sizes: BTreeSet<u32> = of_series().map(|o| o.procs).collect();
    let cells: BTreeSet<(u32, u64)> = of_series()
        .filter_map(|o| o.problem.map(|n| (o.procs, n.to_bits())))
        .collect();
    if sizes.len() > MAX_SIZES || cells.len() > MAX_CELLS {
        bail!(
            "series `{chosen}` holds {} sizes and {} (size, problem) cells; an analysis with a problem axis takes at most {MAX_SIZES} sizes and {MAX_CELLS} cells (each problem value's sizes are analysed in turn, and more would keep it busy for minutes to hours): export a part of the store and analyse that (`analyze --csv`)",
            sizes.len(),
            cells.len()
        );
    }
    let axis = &q.axis;
    let mut warnings = Vec::new();
    let mut by_problem = Vec::new();
    let mut cells: Vec<Cell> = Vec::new();
    let mut measured = Measured::new();
    let mut demand = Vec::new();
    let mut dc = Vec::new();
    let sub = Question {
        predict: Vec::new(),
        series: Some(chosen.clone()),
        ..req.clone()
    };
    for &v in &values {
        let size = axis.size(v);
        let mine: Vec<Observation> = obs
            .iter()
            .filter(|o| o.series == chosen && o.problem == Some(v))
            // As a series of its own: no problem value (its latency points stay theirs).
            .map(|o| Observation {
                problem: None,
                ..o.clone()
            })
            .collect();
        // Each value's analysis gets its share of one analysis's bootstrap work.
        let work = crate::trust::bootstrap::WORK / values.len();
        let analysis = match super::analyze_within(&mine, &sub, work) {
            Ok(a) => a,
            Err(e) => {
                warnings.push(format!("{} {v}: {e}", axis.name));
                continue;
            }
        };
        for d in &analysis.demand {
            demand.push(CellDemand {
                procs: d.procs,
                problem: v,
                cti: d.cti,
                bw_pct: d.bw_pct,
                censored: d.censored,
                bound: d.bound,
                below_noise: d.below_noise,
            });
            let level = req.cti.iter().position(|&c| c == d.cti);
            if let (Some(i), Censored::None, false) = (level, d.censored, d.below_noise) {
                let noise = d.interval.as_ref().map_or(0.0, backtest::se_of);
                measured.insert((d.procs, size.to_bits(), i), (d.bw_pct, noise));
            }
        }
        dc.push(ProblemDc {
            problem: v,
            dc: analysis.dc,
        });
        if req.unit == TimeUnit::Seconds {
            let runs = Selection::of(&mine, &chosen, req.keep_flagged);
            let grouped = group_cells(&runs.good);
            let medians = grouped
                .iter()
                .map(|(&k, t)| (k, stats::median(t)))
                .collect();
            let floors = noise::by_size(&noise::floors(&grouped));
            if let (Some(vol), _) = volumes(&runs.good, req.capacity) {
                cells.extend(problem_traffic::cells(size, &medians, &vol, &floors));
            }
        }
        by_problem.push(ByProblem {
            problem: v,
            analysis,
        });
    }
    let dc_trend = trend(axis, &dc);
    if let Some(w) = tied(&cells) {
        warnings.push(w);
    }
    let mut out = ProblemAnalysis {
        series: chosen,
        axis: axis.clone(),
        time_unit: req.unit,
        levels: req.cti.clone(),
        capacity: req.capacity,
        values: values.clone(),
        cells: cells.clone(),
        held_out: Vec::new(),
        demand,
        dc,
        dc_trend,
        model: None,
        projection: Vec::new(),
        error: None,
        backtest: Vec::new(),
        verdict: "UNTESTED".into(),
        verdict_why: String::new(),
        weak: None,
        by_problem,
        warnings,
    };
    let capacity = match (req.unit, req.capacity) {
        (TimeUnit::InverseRate, _) => {
            out.verdict_why = "the times are the inverse of the program's rate: the traffic model (bytes over the link's capacity added to T(100%)) does not apply; each problem's demand is measured, none projected".into();
            return Ok(out);
        }
        (_, None) => {
            out.verdict_why = "no single link capacity is recorded (CSV data, or runs at several capacities): no traffic model, no projection".into();
            return Ok(out);
        }
        (_, Some(c)) => c,
    };
    // The (P, N) asked: the sizes asked (else the largest measured) at the problems asked
    // (else the largest measured).
    let (p_max, n_max) = surface_check::extent(&cells);
    let sizes: Vec<u32> = if req.predict.is_empty() {
        vec![p_max as u32]
    } else {
        req.predict.clone()
    };
    let problems: Vec<f64> = if q.problems.is_empty() {
        vec![axis.value(n_max)]
    } else {
        q.problems.clone()
    };
    let at: Vec<(u32, f64)> = sizes
        .iter()
        .flat_map(|&p| problems.iter().map(move |&n| (p, axis.size(n))))
        .collect();
    // Measured sizes and problems asked are held out of every fit, the backtest's
    // included, as a measured size asked is in one parameter: the projection is then
    // compared with what was measured there, and nothing judged knew it.
    // Asked: not the largest measured, which is the default target, not a question.
    let asked_sizes: Vec<f64> = q.problems.iter().map(|&n| axis.size(n)).collect();
    let cells: Vec<Cell> = cells
        .into_iter()
        .filter(|c| !(req.predict.contains(&c.procs) || asked_sizes.contains(&c.size)))
        .collect();
    out.held_out = out
        .cells
        .iter()
        .filter(|c| !cells.contains(c))
        .map(|c| (c.procs, axis.value(c.size)))
        .collect();
    if cells.len() < 3 {
        out.verdict_why = format!(
            "{} (size, problem) cell(s) with traffic, a baseline and a throttled step{}: a model in two parameters needs at least 3",
            cells.len(),
            if out.held_out.is_empty() { "" } else { " besides those held out" }
        );
        return Ok(out);
    }
    // Every form must stay a model of a positive quantity, and not turn, at least one
    // doubling of each parameter beyond the data (or to the farthest (P, N) asked): a
    // form that collapses just past the data is no model of it, however well it fits
    // (fitted on 2-4 nodes and 0.5-2 MB, the master/worker's k as 0.68 - c p^(-1/4)
    // log2(p)^2 n^(3/2), positive up to (5, 4 MB) and 0.02 there, projected a demand of 4%
    // where 46.5% was measured).
    let (p_max, n_max) = surface_check::extent(&cells);
    let reach = at
        .iter()
        .fold((2.0 * p_max, 2.0 * n_max), |(a, b), &(p, n)| {
            (a.max(p as f64), b.max(n))
        });
    let checker = Checker {
        cells: &cells,
        measured: &measured,
        capacity,
        levels: &req.cti,
        axis,
    };
    out.backtest = checker.checks(reach);
    let (word, why) = surface_check::verdict(&out.backtest);
    out.verdict = word.into();
    out.verdict_why = why;
    let Some(fit) = problem_traffic::fit(&cells, reach) else {
        out.verdict_why
            .push_str("; no form of the model's parts fits every cell: no projection");
        return Ok(out);
    };
    let error = surface_check::estimate(&out.backtest, checker.lack_of_fit(&fit, &cells));
    out.projection = checker.targets(&fit, &cells, &error, &at);
    if let Some(at_one) = q.weak {
        let base = axis.size(at_one);
        let line = move |p: f64| base * p;
        let from = cells.iter().map(|c| c.procs).min().unwrap_or(1) as f64;
        let half = |p: f64| {
            problem_traffic::selection_spread(&fit, p, line(p))
                .map(|sel| {
                    error.half_width(sel, surface_check::doublings((p_max, n_max), p, line(p)))
                })
                .unwrap_or(f64::INFINITY)
        };
        let saturation = req
            .cti
            .iter()
            .map(|&level| WeakSaturation {
                cti: level,
                procs: problem_traffic::saturation_along(&fit, capacity, from, level, line, |_| {
                    0.0
                }),
                low: problem_traffic::saturation_along(&fit, capacity, from, level, line, half),
                high: problem_traffic::saturation_along(&fit, capacity, from, level, line, |p| {
                    -half(p)
                }),
            })
            .collect();
        out.weak = Some(WeakLine {
            at_one,
            from,
            saturation,
        });
    }
    if !measured.keys().any(|k| k.0 == p_max as u32) {
        out.warnings.push(format!(
            "no demand was measured at the largest size ({p_max} procs) at any level: the backtest that holds it out has nothing to compare with"
        ));
    }
    out.model = Some(fit);
    out.error = Some(error);
    Ok(out)
}

/// Why the cells cannot tell the size from the problem, when every size was measured at
/// one problem value and every problem value at one size (a weak-scaling line alone):
/// then any split of the growth between p and n fits them equally.
fn tied(cells: &[Cell]) -> Option<String> {
    let sizes: BTreeSet<u32> = cells.iter().map(|c| c.procs).collect();
    let problems: BTreeSet<u64> = cells.iter().map(|c| c.size.to_bits()).collect();
    (cells.len() >= 2 && sizes.len() == cells.len() && problems.len() == cells.len()).then(|| {
        "every size was measured at one problem value and every problem value at one size (a weak-scaling line alone): the model cannot tell the size's part from the problem's, and its projection off that line is a guess; cross some of them (a second value at some sizes)".to_string()
    })
}

/// The exponent b of DC = a size^b through the problems' positive DCs (least squares in
/// log-log); `None` with fewer than two.
fn trend(axis: &ProblemAxis, dc: &[ProblemDc]) -> Option<f64> {
    let pts: Vec<(f64, f64)> = dc
        .iter()
        .filter_map(|d| {
            let v = d.dc.filter(|v| v.is_finite() && *v > 0.0)?;
            Some((axis.size(d.problem).ln(), v.ln()))
        })
        .collect();
    if pts.len() < 2 {
        return None;
    }
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::demand::Interp;
    use throttle_proto::Pct;

    const CAP: f64 = 125e6;

    /// A master/worker-like program exactly of the traffic model, with a little
    /// deterministic run-to-run noise: V = n (p-1)/p bytes on the master's link,
    /// T(100%) = 0.5 + n / 4e6 / (p - 1) s, k = 0.9.
    fn truth(p: f64, n: f64) -> (f64, f64, f64) {
        (n * (p - 1.0) / p, 0.5 + n / 4e6 / (p - 1.0), 0.9)
    }

    fn demand_of(p: f64, n: f64, level: f64) -> f64 {
        let (v, t, k) = truth(p, n);
        100.0 / (1.0 + level / 100.0 * t / (k * v / CAP))
    }

    fn observations(series: &str, sizes: &[u32], problems: &[f64]) -> Vec<Observation> {
        let mut out = Vec::new();
        for &p in sizes {
            for &n in problems {
                let (v, t, k) = truth(p as f64, n);
                for bw in [100.0, 50.0, 25.0, 10.0, 5.0] {
                    for r in 0..3u32 {
                        let noise = 1.0 + 0.002 * (r as f64 - 1.0);
                        let w: f64 = bw / 100.0;
                        out.push(Observation {
                            nodes: p,
                            bytes_sent: Some((v * p as f64) as u64),
                            busiest_bytes: Some(v as u64),
                            problem: Some(n),
                            ..Observation::for_test(
                                series,
                                p,
                                Pct::new(bw).unwrap(),
                                r,
                                (t + k * v / CAP * (1.0 / w - 1.0)) * noise,
                            )
                        });
                    }
                }
            }
        }
        out
    }

    fn question(predict: Vec<u32>) -> Question {
        Question {
            cti: vec![10.0, 20.0],
            predict,
            series: None,
            time_source: "test".into(),
            capacity: Some(CAP),
            keep_flagged: false,
            keep_without_traffic: false,
            interp: Interp::Inverse,
            unit: TimeUnit::Seconds,
        }
    }

    #[test]
    fn a_program_of_the_model_is_projected_to_a_larger_size_and_problem() {
        let mut obs = observations("mw", &[2, 3, 4, 6], &[1e6, 2e6, 4e6, 8e6]);
        // Latency points of one problem, on the full link and far slower: each problem's
        // answer keeps them apart from its baseline.
        for (l, r) in [(0u64, 0u32), (0, 1), (20_000, 0)] {
            obs.push(Observation {
                problem: Some(1e6),
                latency_step: Some(l),
                nodes: 2,
                ..Observation::for_test("mw", 2, Pct::FULL, r, 100.0 + l as f64 * 1e-3)
            });
        }
        let req = question(vec![12]);
        assert!(has_axis(&obs, &req).unwrap());
        let q = ProblemQuestion {
            axis: ProblemAxis::linear("volume"),
            problems: vec![16e6],
            weak: Some(1e6),
        };
        let a = analyze_problem(&obs, &req, &q).unwrap();
        assert_eq!(a.values, vec![1e6, 2e6, 4e6, 8e6]);
        assert_eq!(a.by_problem.len(), 4);
        assert!(a.by_problem[0].analysis.latency.is_some());
        assert_eq!(a.cells.len(), 16);
        let baseline = a
            .cells
            .iter()
            .find(|c| c.procs == 2 && c.size == 1e6)
            .unwrap();
        assert!(
            (baseline.baseline - truth(2.0, 1e6).1).abs() < 0.01,
            "{baseline:?}"
        );
        // The backtest: three checks, each near what was measured.
        assert_eq!(a.backtest.len(), 3, "{:?}", a.backtest);
        for c in &a.backtest {
            let worst = c.worst_pp().unwrap_or_else(|| panic!("{c:?}"));
            assert!(worst < 3.0, "{c:?}");
        }
        assert_eq!(a.verdict, "TRUSTED", "{}", a.verdict_why);
        // The projection to (12, 16 MB), two doublings of each beyond the data.
        for t in &a.projection {
            let want = demand_of(12.0, 16e6, t.cti);
            assert!((t.bw_pct - want).abs() < 3.0, "{t:?} vs {want}");
            assert!(t.low <= want && want <= t.high, "{t:?} vs {want}");
            assert!(t.doublings > 1.0, "{t:?}");
        }
        // Along the weak line n = 1 MB x p the transfer's share grows: the link
        // saturates somewhere at 10%, sooner at a lower level.
        let weak = a.weak.as_ref().unwrap();
        assert!(
            weak.saturation.iter().all(|s| s.procs.is_some()),
            "{weak:?}"
        );
        let text = crate::render::problem::render(&a, Some("1 Gbit/s"), false);
        assert!(text.contains("backtest TRUSTED"), "{text}");
        assert!(text.contains("the largest problem"), "{text}");
    }

    /// Asked for a measured size and problem, the answer holds both out of every fit and
    /// compares the projection with what was measured there.
    #[test]
    fn a_measured_size_and_problem_asked_are_held_out_and_compared() {
        let obs = observations("mw", &[2, 3, 4, 6], &[1e6, 2e6, 4e6, 8e6]);
        let q = ProblemQuestion {
            axis: ProblemAxis::linear("volume"),
            problems: vec![8e6],
            weak: None,
        };
        let a = analyze_problem(&obs, &question(vec![6]), &q).unwrap();
        assert_eq!(a.held_out.len(), 7, "{:?}", a.held_out);
        assert!(a.held_out.contains(&(6, 8e6)) && a.held_out.contains(&(2, 8e6)));
        // The backtest knew none of them: its largest size is 4, its largest problem 4 MB.
        for c in &a.backtest {
            assert!(
                c.targets.iter().all(|t| t.procs <= 4 && t.problem <= 4e6),
                "{c:?}"
            );
        }
        for t in &a.projection {
            let m = t.measured.unwrap_or_else(|| panic!("{t:?}"));
            assert!((m - demand_of(6.0, 8e6, t.cti)).abs() < 1.0, "{t:?}");
            assert!(t.error_pp.unwrap().abs() < 3.0, "{t:?}");
        }
    }

    /// A weak-scaling line alone (one problem per size) is answered, and said to be unable
    /// to tell the size from the problem.
    /// Issue 55, finding 2: a problem axis with more sizes or (size, problem) cells than
    /// an analysis takes is refused at once with the bound named (32 x 32 cells took 899 s
    /// without it).
    #[test]
    fn a_problem_axis_beyond_its_bounds_is_refused_at_once() {
        let q = ProblemQuestion {
            axis: ProblemAxis::linear("volume"),
            problems: vec![],
            weak: None,
        };
        let many_sizes: Vec<u32> = (2..2 + MAX_SIZES as u32 + 1).collect();
        let many_values: Vec<f64> = (1..=33).map(|i| i as f64 * 1e6).collect();
        for obs in [
            observations("mw", &many_sizes, &[1e6, 2e6]),
            observations("mw", &[2, 3, 4, 5, 6, 7, 8, 9], &many_values),
        ] {
            let start = std::time::Instant::now();
            let e = analyze_problem(&obs, &question(vec![]), &q)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("at most 16 sizes and 256 cells"), "{e}");
            assert!(start.elapsed() < std::time::Duration::from_secs(1));
        }
    }

    #[test]
    fn a_weak_scaling_line_alone_is_said_to_tie_size_and_problem() {
        let mut obs = Vec::new();
        for (p, n) in [(2u32, 1e6), (3, 2e6), (4, 3e6), (6, 5e6)] {
            obs.extend(observations("mw", &[p], &[n]));
        }
        let q = ProblemQuestion {
            axis: ProblemAxis::linear("volume"),
            ..ProblemQuestion::default()
        };
        let a = analyze_problem(&obs, &question(vec![]), &q).unwrap();
        assert!(
            a.warnings.iter().any(|w| w.contains("cannot tell")),
            "{:?}",
            a.warnings
        );
        let crossed = observations("mw", &[2, 3], &[1e6, 2e6]);
        let b = analyze_problem(&crossed, &question(vec![]), &q).unwrap();
        assert!(
            !b.warnings.iter().any(|w| w.contains("cannot tell")),
            "{:?}",
            b.warnings
        );
    }

    #[test]
    fn a_series_without_an_axis_is_answered_as_before_and_a_mixed_one_is_refused() {
        let mut obs = observations("mw", &[2, 3], &[1e6]);
        let req = question(vec![]);
        assert!(!has_axis(&obs, &req).unwrap());
        for o in &mut obs {
            o.problem = None;
        }
        assert!(!has_axis(&obs, &req).unwrap());
        obs.extend(observations("mw", &[2], &[2e6]));
        let e = has_axis(&obs, &req).unwrap_err().to_string();
        assert!(e.contains("mixes runs"), "{e}");
    }

    /// Issue 55, finding 2, measured (not a check): the worst stores within the bounds and
    /// beyond them, on the finding's grids (2 or 5 bandwidths x 2 repeats a cell):
    /// `cargo test --release -p throttle-analysis cost_of_a_grid -- --ignored --nocapture`
    /// (experiments/2026-12-02-analysis-cost.md).
    #[test]
    #[ignore]
    fn cost_of_a_grid() {
        let grid = |k: u32, values: usize, bws: usize| {
            let sizes: Vec<u32> = (0..k).map(|i| 2 + i).collect();
            let problems: Vec<f64> = (0..values).map(|i| 1e6 * (1.0 + i as f64)).collect();
            let keep = [100.0, 50.0, 25.0, 10.0, 5.0];
            let obs: Vec<Observation> = observations("mw", &sizes, &problems)
                .into_iter()
                .map(|o| {
                    if values == 1 {
                        Observation { problem: None, ..o }
                    } else {
                        o
                    }
                })
                .filter(|o| keep[..bws].contains(&o.bw_pct.percent().unwrap()) && o.repeat < 2)
                .collect();
            let t = std::time::Instant::now();
            let refused = if values == 1 {
                crate::analyze(&obs, &question(vec![])).is_err()
            } else {
                let q = ProblemQuestion {
                    axis: ProblemAxis::linear("volume"),
                    problems: vec![],
                    weak: None,
                };
                analyze_problem(&obs, &question(vec![]), &q).is_err()
            };
            eprintln!(
                "{k} sizes x {values} values x {bws} bandwidths: {} in {:.1} s",
                if refused { "refused" } else { "analysed" },
                t.elapsed().as_secs_f64()
            );
        };
        for (k, v, b) in [
            (64, 1, 2),
            (64, 1, 5),
            (65, 1, 2),
            (16, 16, 2),
            (4, 64, 2),
            (8, 32, 5),
            (32, 32, 2),
        ] {
            grid(k, v, b);
        }
    }
}
