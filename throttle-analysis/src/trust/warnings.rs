//! What the analysis says about its own data: every warning `analyze` prints, each
//! from the step that finds it (which runs were left out, pooled layouts, thin repeats,
//! no baseline, unknown noise, levels never reached or below the noise, a DC that could
//! not be formed, a projection its backtest does not support).

use std::collections::BTreeMap;

use crate::data::cells::{BwKey, FULL};
use crate::method::chain::{self, Chain};
use crate::method::demand::Censored;
use crate::method::regression::Regression;
use crate::method::stats::median;
use crate::trust::backtest::{self, Verdict};
use crate::{Observation, Selection};

/// Runs left out (failed, flagged, unlimited) or kept though suspect (flagged, busy).
pub(crate) fn selection(runs: &Selection, keep_flagged: bool) -> Vec<String> {
    let mut w = Vec::new();
    if runs.failed > 0 {
        w.push(format!(
            "{} failed runs are in the data and were left out",
            runs.failed
        ));
    }
    if let Some(first) = runs.flagged.first() {
        let first = first.flag.as_deref().unwrap_or_default();
        let n = runs.flagged.len();
        w.push(if keep_flagged {
            format!("{n} run(s) whose links did not run at their setting were KEPT (--keep-flagged): their times measure something else as well; the first: {first}")
        } else {
            format!("{n} run(s) were left out because their links did not run at their setting (`export` shows each flag; --keep-flagged keeps them); the first: {first}")
        });
    }
    if runs.unlimited > 0 {
        w.push(format!(
            "{} runs at unlimited bandwidth were left out (the baseline is 100%)",
            runs.unlimited
        ));
    }
    w.extend(busy_changed(&runs.good));
    w
}

/// A run started when the CPUs were busier than this (the share of the machine busy just
/// before it, [`Observation::busy`]) is suspect.
pub const BUSY: f64 = 0.25;

/// The runs that started on a busy machine and whose time that changed: busier than
/// [`BUSY`] before they started, and their time outside what their point's
/// other runs show (farther from those runs' median than three of their median absolute
/// deviations, and than 1% of it): a threshold each point measures, where one share of
/// busy CPU flagged 132 of 154 runs of a demo whose times it had not moved. Named, the
/// first few; none when no busy run stands out.
pub(crate) fn busy_changed(good: &[&Observation]) -> Option<String> {
    let mut points: BTreeMap<(&str, u32, BwKey), Vec<&Observation>> = BTreeMap::new();
    for o in good {
        points
            .entry((o.series.as_str(), o.procs, o.bw_pct))
            .or_default()
            .push(o);
    }
    let mut changed = Vec::new();
    for runs in points.values() {
        for o in runs {
            let Some(busy) = o.busy.filter(|b| *b > BUSY) else {
                continue;
            };
            let others: Vec<f64> = runs
                .iter()
                .filter(|r| !std::ptr::eq(**r, *o))
                .map(|r| r.seconds)
                .collect();
            if others.len() < 2 {
                continue;
            }
            let m = median(&others);
            let deviations: Vec<f64> = others.iter().map(|t| (t - m).abs()).collect();
            let mad = median(&deviations);
            if (o.seconds - m).abs() > (3.0 * mad).max(0.01 * m.abs()) {
                changed.push(format!(
                    "{} procs at {} repeat {} ({:.0}% busy; {:+.1}% against its other runs' median)",
                    o.procs,
                    o.bw_pct,
                    o.repeat,
                    busy * 100.0,
                    (o.seconds / m - 1.0) * 100.0
                ));
            }
        }
    }
    (!changed.is_empty()).then(|| {
        let n = changed.len();
        let shown: Vec<String> = changed.into_iter().take(5).collect();
        format!(
            "{n} run(s) started while the machine was busy with something else and took a time their point's other runs do not show: {}{} (kept; `export` has each run's cpu_busy_before)",
            shown.join("; "),
            if n > 5 { "; ..." } else { "" }
        )
    })
}

/// Sizes run on more than one node count, pooled into one point.
pub(crate) fn layouts(good: &[&Observation]) -> Vec<String> {
    let mut layouts: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for o in good {
        let l = layouts.entry(o.procs).or_default();
        if !l.contains(&o.nodes) {
            l.push(o.nodes);
        }
    }
    layouts
        .iter()
        .filter(|(_, n)| n.len() > 1)
        .map(|(p, nodes)| {
            let list: Vec<String> = nodes.iter().map(u32::to_string).collect();
            format!(
                "{p} procs were run on {} node counts ({}): their runs are pooled into one point, though the traffic between nodes differs; analyse them as separate series (a label column) to compare",
                nodes.len(),
                list.join(", ")
            )
        })
        .collect()
}

pub(crate) fn repeats(min_repeats: usize) -> Vec<String> {
    if min_repeats < 3 {
        vec![format!(
            "only {min_repeats} repeat(s) at some points: medians and their intervals are weak (use >= 3)"
        )]
    } else {
        Vec::new()
    }
}

pub(crate) fn regression(r: Option<&Regression>) -> Vec<String> {
    match r {
        None => vec!["the strong-scaling regression needs runs at 100% on at least 3 sizes (held-out sizes excluded)".into()],
        Some(r) if r.crossover_procs.is_none() => vec![format!(
            "no crossover: C1 = {}, C2 = {} are not both positive",
            crate::table::number(r.c1),
            crate::table::number(r.c2)
        )],
        Some(_) => Vec::new(),
    }
}

/// Sizes without a 100% baseline (no CTI) or without repeats (noise unknown).
pub(crate) fn baselines(
    sizes: &[u32],
    medians: &BTreeMap<(u32, BwKey), f64>,
    floors: &BTreeMap<u32, crate::method::noise::Floor>,
) -> Vec<String> {
    let mut w = Vec::new();
    for &p in sizes {
        if !medians.contains_key(&(p, FULL)) {
            w.push(format!("{p} procs: no run at 100%, so no CTI"));
        }
    }
    for &p in sizes {
        if medians.contains_key(&(p, FULL)) && !floors.contains_key(&p) {
            w.push(format!(
                "{p} procs: no point has 2 or more runs, so its noise is unknown: its CTI levels are used without a noise check"
            ));
        }
    }
    w
}

/// What the chain on the measured medians could not do: pooled curves, levels never
/// reached or below the noise, sizes bound by communication at full bandwidth, and the
/// demand constant.
pub(crate) fn chain(
    answer: &Chain,
    levels: &[f64],
    medians: &BTreeMap<(u32, BwKey), f64>,
    fitted_sizes: usize,
) -> Vec<String> {
    let mut w = Vec::new();
    for p in &answer.pooled {
        w.push(format!(
            "{p} procs: CTI is not monotone in bandwidth; pooled (PAV) before interpolating"
        ));
    }
    for (li, &c) in levels.iter().enumerate() {
        let at: Vec<_> = answer
            .demand
            .iter()
            .filter(|((_, l), _)| *l == li)
            .collect();
        if !at.is_empty() && at.iter().all(|(_, n)| n.censored == Censored::Below) {
            w.push(format!(
                "CTI {c}% is never reached: even the lowest bandwidth slows the program by less"
            ));
        }
        let hidden: Vec<String> = at
            .iter()
            .filter(|(_, n)| n.below_noise)
            .map(|((p, _), _)| p.to_string())
            .collect();
        if !hidden.is_empty() {
            w.push(format!(
                "CTI {c}% is below the noise floor at {} procs: those demands are not measurements and are left out of DC and projection",
                hidden.join(", ")
            ));
        }
    }
    // Communication-bound even at 100%: the next step down already costs far more than
    // every level asked.
    let top = levels.iter().copied().fold(0.0, f64::max);
    for (&p, curve) in &chain::curves(medians) {
        if let (Some(&bw), Some(&c)) = (curve.bw.last(), curve.cti.last()) {
            if c > 2.0 * top && c > 20.0 {
                w.push(format!(
                    "{p} procs: communication-bound even at full bandwidth (CTI {c:.0}% already at {bw}%, more than twice the largest level asked): measure a larger capacity or a larger problem to see its demand"
                ));
            }
        }
    }
    if answer.dc_pairs_left_out > 0 {
        w.push(format!("{} (CTI, size pair) combinations left out of DC: a demand was censored, below the noise, or missing", answer.dc_pairs_left_out));
    }
    if answer.dc.is_none() && fitted_sizes >= 2 {
        w.push(
            "no demand constant: no pair of sizes has uncensored demands above the noise at the same CTI level"
                .into(),
        );
    } else if fitted_sizes < 2 {
        w.push(
            "a demand constant needs throttled runs on at least 2 sizes (held-out sizes excluded)"
                .into(),
        );
    }
    w
}

/// Why the DC projection is not to be trusted, when its backtest says so.
pub(crate) fn dc_verdict(verdict: &Verdict) -> Vec<String> {
    match verdict {
        Verdict::Failed { why, .. } => vec![format!(
            "do not trust the DC projection: the backtest missed by more than {} pp ({why})",
            backtest::TOLERANCE_PP
        )],
        Verdict::Untested { why } => vec![format!(
            "the DC projection is untested ({why}): its interval covers run-to-run noise only, not the model's error"
        )],
        Verdict::Thin { procs, .. } => vec![format!(
            "do not trust the DC projection yet: its backtest passed, but on one size only ({procs} procs), which cannot show how its error grows further out"
        )],
        Verdict::Unchecked { fitted } => vec![format!(
            "the DC projection is not checked on this program: it is fitted on two sizes ({} procs), too few for a backtest, and its interval carries the error projections from two sizes showed on other programs",
            fitted.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
        )],
        // The CPU-bound warning says the rest: what the verdict would have been still is.
        Verdict::CpuBound { inner, .. } => dc_verdict(inner),
        Verdict::Passed { .. } | Verdict::Unmodelled { .. } => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use throttle_proto::Pct;

    fn run(repeat: u32, seconds: f64, busy: f64) -> Observation {
        Observation {
            nodes: 4,
            busy: Some(busy),
            cpu_own: None,
            ..Observation::for_test("s", 4, Pct::new(50.0).unwrap(), repeat, seconds)
        }
    }

    #[test]
    fn a_busy_run_is_named_only_where_its_time_stands_out() {
        // Every run busy, their times alike: nothing to say (a fixed share of busy CPU
        // named them all).
        let alike: Vec<Observation> = (0..5).map(|r| run(r, 1.0 + r as f64 * 1e-3, 0.9)).collect();
        let refs: Vec<&Observation> = alike.iter().collect();
        assert_eq!(busy_changed(&refs), None);
        // One busy run 10% slower than the others: named, with its share and its change.
        let mut one = alike.clone();
        one[2].seconds = 1.1;
        let refs: Vec<&Observation> = one.iter().collect();
        let w = busy_changed(&refs).unwrap();
        assert!(
            w.starts_with("1 run(s)") && w.contains("4 procs at 50% repeat 2 (90% busy; +9.8%"),
            "{w}"
        );
        // The same slow run on an idle machine: not this warning's.
        one[2].busy = Some(0.0);
        let refs: Vec<&Observation> = one.iter().collect();
        assert_eq!(busy_changed(&refs), None);
    }
}
