//! `throttle-ctl analyze`: from stored runs to demand figures and projections, each with
//! an interval, a noise floor and a backtest that say how far it can be trusted.
//!
//! * [`stats`]: medians and their intervals, CV, pool-adjacent-violators, a seeded RNG.
//! * [`regression`]: T(p) = C0 + C1/p + C2/sqrt(p), with leave-one-out and
//!   leave-one-size-out errors.
//! * [`demand`]: the paper's formulas: CTI, demand with censoring, DC, projection,
//!   saturation.
//! * [`chain`]: those formulas chained from cell medians to every derived number.
//! * [`noise`]: the smallest CTI each size's repeats can resolve.
//! * [`bootstrap`]: intervals of every derived number, resampling runs.
//! * [`traffic`]: a projection from the bytes the agents counted, beside DC's.
//! * [`backtest`]: each measured size projected from the smaller ones by both, and the
//!   verdicts.
//! * [`render`]: the tables a person reads.
//! * [`csv`]: data measured with any tool.
//!
//! Every formula is DESIGN.md section 5; this module only groups the observations, keeps
//! held-out sizes out of the fits, runs the chain three ways and collects warnings.

pub mod backtest;
pub mod bootstrap;
pub mod chain;
pub mod csv;
pub mod demand;
pub mod noise;
pub mod regression;
pub mod render;
pub mod stats;
pub mod traffic;

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use serde::Serialize;

use backtest::{Check, Model, Verdict};
use bootstrap::Interval;
use chain::{bw_key, bw_of, BwKey, FULL};
use demand::Censored;
use noise::Floor;
use regression::Regression;

pub use render::render;

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
    /// Nodes the processes ran on.
    pub nodes: u32,
    /// Share of the machine's CPUs busy just before the run (see `load`), if recorded.
    pub busy: Option<f64>,
    /// Bytes the run's nodes sent through their agents, if recorded.
    pub bytes_sent: Option<u64>,
    /// Why the run's links did not run at their setting (`fidelity`), when they did not.
    pub flag: Option<String>,
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
    /// The link's capacity in bytes per second, for the traffic model (from the store).
    pub capacity: Option<f64>,
    /// Keep runs whose links did not run at their setting (flagged) instead of leaving
    /// them out.
    pub keep_flagged: bool,
}

/// The runs of one (size, bandwidth) summarised: their median and its interval, the
/// spread, and the CTI of the median.
#[derive(Clone, Debug, Serialize)]
pub struct MedianPoint {
    pub procs: u32,
    pub bw_pct: f64,
    pub n: usize,
    pub median: f64,
    /// Order-statistic interval of the median; its exact coverage is `ci_coverage`
    /// (with 3 runs it is their range, which covers 75%, not 95%).
    pub ci_low: f64,
    pub ci_high: f64,
    pub ci_coverage: f64,
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
    /// The level is below this size's noise floor: not used for DC or projection.
    pub below_noise: bool,
    /// 90% bootstrap interval (null when the figure existed in under 90% of resamples).
    pub interval: Option<Interval>,
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
    /// 90% bootstrap interval over runs.
    pub bw_pct_ci: Option<(f64, f64)>,
    /// The demand measured at a held-out size, and how it is censored: with `<` it is the
    /// lowest step (the truth is at most that), with `>` the highest throttled step (the
    /// truth is above it); `error_pp` is then a bound too.
    pub measured_bw_pct: Option<f64>,
    pub measured_censored: Option<Censored>,
    /// The measured level is below the held-out size's noise floor.
    pub measured_below_noise: bool,
    /// predicted - measured, percentage points.
    pub error_pp: Option<f64>,
    pub error_is_bound: bool,
    /// The demand at p* this projects from is censored.
    pub from_censored: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Saturation {
    pub cti: f64,
    pub procs: f64,
    /// 90% bootstrap interval over runs.
    pub interval: Option<Interval>,
    /// Computed from a censored demand at p*: a bound at best.
    pub from_censored: bool,
}

/// The traffic-based projection and what supports it.
#[derive(Clone, Debug, Serialize)]
pub struct TrafficAnswer {
    /// (procs, median bytes sent per node and run).
    pub bytes_per_node: Vec<(u32, f64)>,
    /// The model fitted on the fitted sizes (null with fewer than 2 sizes with traffic).
    pub fit: Option<traffic::Fit>,
    pub projection: Vec<Projection>,
    pub verdict: Verdict,
}

/// The whole answer; `analyze --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    pub series: String,
    /// Which time was analysed (the job's wall time or the workload's kernel time).
    pub time_source: String,
    pub runs: usize,
    pub failed_runs: usize,
    /// Runs whose links did not run at their setting; left out unless `flagged_kept`.
    pub flagged_runs: usize,
    pub flagged_kept: bool,
    pub min_repeats: usize,
    pub regression: Option<Regression>,
    pub points: Vec<MedianPoint>,
    /// Per size: the smallest CTI its repeats resolve.
    pub noise: Vec<Floor>,
    pub demand: Vec<Demand>,
    pub dc: Option<f64>,
    /// 90% bootstrap interval of DC over runs.
    pub dc_ci: Option<(f64, f64)>,
    pub dc_pairs: Vec<DcPair>,
    pub dc_pairs_censored: usize,
    pub p_star: Option<u32>,
    pub projection: Vec<Projection>,
    pub saturation: Vec<Saturation>,
    pub held_out: Vec<u32>,
    /// What every derived interval is.
    pub intervals: String,
    pub resamples: usize,
    /// Each measured size from the third on, projected from the smaller ones.
    pub backtest: Vec<Check>,
    /// Whether the backtest supports the DC projection.
    pub verdict: Verdict,
    /// The traffic model's answer, where the runs' bytes were recorded.
    pub traffic: Option<TrafficAnswer>,
    /// Which projection the backtest supports, in words.
    pub supported: String,
    pub warnings: Vec<String>,
}

/// The series to analyse: the one asked for, or the only one.
fn choose_series(obs: &[Observation], asked: &Option<String>) -> Result<String> {
    let mut series: BTreeMap<&str, usize> = BTreeMap::new();
    for o in obs {
        *series.entry(o.series.as_str()).or_default() += 1;
    }
    Ok(match (asked, series.len()) {
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
    })
}

/// Run the analysis on `obs`.
pub fn analyze(obs: &[Observation], req: &Question) -> Result<Analysis> {
    let chosen = choose_series(obs, &req.series)?;
    let mine: Vec<&Observation> = obs.iter().filter(|o| o.series == chosen).collect();
    let failed_runs = mine.iter().filter(|o| !o.ok).count();
    let flagged: Vec<&Observation> = mine
        .iter()
        .copied()
        .filter(|o| o.ok && o.bw_pct.is_some() && o.flag.is_some())
        .collect();
    let good: Vec<&Observation> = mine
        .iter()
        .copied()
        .filter(|o| o.ok && o.bw_pct.is_some() && (req.keep_flagged || o.flag.is_none()))
        .collect();
    let mut warnings = Vec::new();
    if failed_runs > 0 {
        warnings.push(format!(
            "{failed_runs} failed runs are in the data and were left out"
        ));
    }
    if let Some(first) = flagged.first() {
        let first = first.flag.as_deref().unwrap_or_default();
        let n = flagged.len();
        warnings.push(if req.keep_flagged {
            format!("{n} run(s) whose links did not run at their setting were KEPT (--keep-flagged): their times measure something else as well; the first: {first}")
        } else {
            format!("{n} run(s) were left out because their links did not run at their setting (`export` shows each flag; --keep-flagged keeps them); the first: {first}")
        });
    }
    let unlimited = mine.iter().filter(|o| o.ok && o.bw_pct.is_none()).count();
    if unlimited > 0 {
        warnings.push(format!(
            "{unlimited} runs at unlimited bandwidth were left out (the baseline is 100%)"
        ));
    }
    let busy = good
        .iter()
        .filter(|o| o.busy.is_some_and(|b| b > crate::load::BUSY))
        .count();
    if busy > 0 {
        warnings.push(format!(
            "{busy} run(s) started while the machine was more than {:.0}% busy with something else: their times are suspect (see cpu_busy_before in `export`)",
            crate::load::BUSY * 100.0
        ));
    }
    let mut cells: BTreeMap<(u32, BwKey), Vec<f64>> = BTreeMap::new();
    for o in &good {
        cells
            .entry((o.procs, bw_key(o.bw_pct.unwrap_or(100.0))))
            .or_default()
            .push(o.seconds);
    }
    if cells.is_empty() {
        bail!("no successful runs with a bandwidth percentage in series `{chosen}`");
    }
    let mut layouts: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for o in &good {
        let l = layouts.entry(o.procs).or_default();
        if !l.contains(&o.nodes) {
            l.push(o.nodes);
        }
    }
    for (p, nodes) in layouts.iter().filter(|(_, n)| n.len() > 1) {
        let list: Vec<String> = nodes.iter().map(u32::to_string).collect();
        warnings.push(format!(
            "{p} procs were run on {} node counts ({}): their runs are pooled into one point, though the traffic between nodes differs; analyse them as separate series (a label column) to compare",
            nodes.len(),
            list.join(", ")
        ));
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
    match &regression {
        None => warnings.push("the strong-scaling regression needs runs at 100% on at least 3 sizes (held-out sizes excluded)".into()),
        Some(r) if r.crossover_procs.is_none() => warnings.push(format!(
            "no crossover: C1 = {:.4}, C2 = {:.4} are not both positive",
            r.c1, r.c2
        )),
        Some(_) => {}
    }
    let medians: BTreeMap<(u32, BwKey), f64> =
        cells.iter().map(|(&k, t)| (k, stats::median(t))).collect();
    // Points.
    let mut points = Vec::new();
    for (&(p, bw), times) in &cells {
        let base = medians.get(&(p, FULL)).copied();
        let (ci_low, ci_high, ci_coverage) = stats::median_interval(times);
        points.push(MedianPoint {
            procs: p,
            bw_pct: bw_of(bw),
            n: times.len(),
            median: medians[&(p, bw)],
            ci_low,
            ci_high,
            ci_coverage,
            cv: stats::cv(times),
            cti: base.map(|b| demand::cti(medians[&(p, bw)], b)),
        });
    }
    for &p in &sizes {
        if !medians.contains_key(&(p, FULL)) {
            warnings.push(format!("{p} procs: no run at 100%, so no CTI"));
        }
    }
    // The noise each size's repeats can resolve.
    let noise = noise::floors(&cells);
    let floors = noise::by_size(&noise);
    for &p in &sizes {
        if medians.contains_key(&(p, FULL)) && !floors.contains_key(&p) {
            warnings.push(format!(
                "{p} procs: no point has 2 or more runs, so its noise is unknown: its CTI levels are used without a noise check"
            ));
        }
    }
    // The bytes per node and run, where recorded, for the traffic model.
    let mut per_node: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for o in &good {
        if let Some(b) = o.bytes_sent {
            per_node
                .entry(o.procs)
                .or_default()
                .push(b as f64 / o.nodes.max(1) as f64);
        }
    }
    let volumes = match (req.capacity, per_node.is_empty()) {
        (Some(capacity), false) => Some(traffic::Volumes {
            bytes_per_node: per_node
                .iter()
                .map(|(&p, v)| (p, stats::median(v)))
                .collect(),
            capacity,
        }),
        _ => None,
    };
    // The chain on the measured medians: fitted on every size not held out.
    let fit: Vec<u32> = sizes
        .iter()
        .copied()
        .filter(|p| !held_out.contains(p))
        .collect();
    let answer = chain::run(
        &medians,
        &req.cti,
        &floors,
        &fit,
        &req.predict,
        volumes.as_ref(),
    );
    for p in &answer.pooled {
        warnings.push(format!(
            "{p} procs: CTI is not monotone in bandwidth; pooled (PAV) before interpolating"
        ));
    }
    let runs = good.len();
    let resamples = bootstrap::resamples_for(runs);
    let spread = bootstrap::intervals(
        &cells,
        &req.cti,
        &floors,
        &fit,
        &req.predict,
        volumes.as_ref(),
        resamples,
    );
    let demand: Vec<Demand> = answer
        .demand
        .iter()
        .map(|(&(p, li), n)| Demand {
            procs: p,
            cti: req.cti[li],
            bw_pct: n.bw_pct,
            censored: n.censored,
            below_noise: n.below_noise,
            // A censored demand is a bound: no noise interval around it.
            interval: spread
                .demand
                .get(&(p, li))
                .and_then(|s| s.interval)
                .filter(|_| n.censored == Censored::None),
            held_out: held_out.contains(&p),
        })
        .collect();
    for (li, &c) in req.cti.iter().enumerate() {
        let at: Vec<_> = answer
            .demand
            .iter()
            .filter(|((_, l), _)| *l == li)
            .collect();
        if !at.is_empty() && at.iter().all(|(_, n)| n.censored == Censored::Below) {
            warnings.push(format!(
                "CTI {c}% is never reached: even the lowest bandwidth slows the program by less"
            ));
        }
        let hidden: Vec<String> = at
            .iter()
            .filter(|(_, n)| n.below_noise)
            .map(|((p, _), _)| p.to_string())
            .collect();
        if !hidden.is_empty() {
            warnings.push(format!(
                "CTI {c}% is below the noise floor at {} procs: those demands are not measurements and are left out of DC and projection",
                hidden.join(", ")
            ));
        }
    }
    // Communication-bound even at 100%: the next step down already costs far more than
    // every level asked.
    let top = req.cti.iter().copied().fold(0.0, f64::max);
    for (&p, curve) in &chain::curves(&medians) {
        if let (Some(&bw), Some(&c)) = (curve.bw.last(), curve.cti.last()) {
            if c > 2.0 * top && c > 20.0 {
                warnings.push(format!(
                    "{p} procs: communication-bound even at full bandwidth (CTI {c:.0}% already at {bw}%, more than twice the largest level asked): measure a larger capacity or a larger problem to see its demand"
                ));
            }
        }
    }
    if answer.dc_pairs_left_out > 0 {
        warnings.push(format!("{} (CTI, size pair) combinations left out of DC: a demand was censored, below the noise, or missing", answer.dc_pairs_left_out));
    }
    if answer.dc.is_none() && fit.len() >= 2 {
        warnings.push(
            "no demand constant: no pair of sizes has uncensored demands above the noise at the same CTI level"
                .into(),
        );
    } else if fit.len() < 2 {
        warnings.push(
            "a demand constant needs throttled runs on at least 2 sizes (held-out sizes excluded)"
                .into(),
        );
    }
    // A held-out size's measured demand: the value, or the bound a censored one is known
    // to be beyond; its censoring; whether the level is below its noise floor.
    let measured_at = |p: u32, li: usize| {
        let n = answer
            .demand
            .get(&(p, li))
            .filter(|_| held_out.contains(&p))?;
        let value = answer.bounds.get(&(p, li)).copied().unwrap_or(n.bw_pct);
        Some((value, n.censored, n.below_noise))
    };
    // One projected figure, with its interval and, at a held-out size, the measurement.
    let projected =
        |p: u32, li: usize, bw: f64, interval: Option<Interval>, from_censored: bool| {
            let measured = measured_at(p, li);
            Projection {
                procs: p,
                cti: req.cti[li],
                bw_pct: bw,
                // A projection from a censored demand is a bound, not a value with noise.
                bw_pct_ci: interval.filter(|_| !from_censored).map(|i| (i.low, i.high)),
                measured_bw_pct: measured.map(|m| m.0),
                measured_censored: measured.map(|m| m.1),
                measured_below_noise: measured.is_some_and(|m| m.2),
                error_pp: measured.map(|m| bw - m.0),
                error_is_bound: measured.is_some_and(|m| m.1 != Censored::None),
                from_censored,
            }
        };
    let projection: Vec<Projection> = answer
        .projection
        .iter()
        .map(|(&(p, li), &(bw, from_censored))| {
            let interval = spread.projection.get(&(p, li)).and_then(|s| s.interval);
            projected(p, li, bw, interval, from_censored)
        })
        .collect();
    let saturation: Vec<Saturation> = answer
        .saturation
        .iter()
        .map(|(&li, &(procs, from_censored))| Saturation {
            cti: req.cti[li],
            procs,
            interval: spread
                .saturation
                .get(&li)
                .and_then(|s| s.interval)
                .filter(|_| !from_censored),
            from_censored,
        })
        .collect();
    // The backtest over every measured size. Held-out sizes are shown but neither judged
    // nor fitted on: the verdict (and which model the data favour) must not know the
    // measurement the projection is then compared with.
    let all = chain::run(&medians, &req.cti, &floors, &sizes, &[], None);
    let backtest = backtest::run(
        &cells,
        &medians,
        &req.cti,
        &floors,
        &all,
        volumes.as_ref(),
        &held_out,
        resamples,
    );
    let verdict = backtest::verdict(&backtest, Model::Dc);
    if !projection.is_empty() {
        match &verdict {
            Verdict::Failed { why, .. } => warnings.push(format!(
                "do not trust the DC projection: the backtest missed by more than {} pp ({why})",
                backtest::TOLERANCE_PP
            )),
            Verdict::Untested { why } => warnings.push(format!(
                "the DC projection is untested ({why}): its interval covers run-to-run noise only, not the model's error"
            )),
            Verdict::Thin { procs, .. } => warnings.push(format!(
                "do not trust the DC projection yet: its backtest passed, but on one size only ({procs} procs), which cannot show how its error grows further out"
            )),
            Verdict::Passed { .. } => {}
        }
    }
    let traffic = volumes.as_ref().map(|v| {
        let projection = answer
            .traffic_projection
            .iter()
            .map(|(&(p, li), &bw)| {
                let interval = spread
                    .traffic_projection
                    .get(&(p, li))
                    .and_then(|s| s.interval);
                projected(p, li, bw, interval, false)
            })
            .collect();
        TrafficAnswer {
            bytes_per_node: v.bytes_per_node.iter().map(|(&p, &b)| (p, b)).collect(),
            fit: answer.traffic.clone(),
            projection,
            verdict: backtest::verdict(&backtest, Model::Traffic),
        }
    });
    if volumes.is_none() && !per_node.is_empty() {
        warnings.push("the runs' traffic is recorded but not one link capacity (CSV data, or runs at several capacities in the store): no traffic-based projection".into());
    }
    let supported = support(&backtest, traffic.is_some());
    Ok(Analysis {
        time_source: req.time_source.clone(),
        series: chosen,
        runs,
        failed_runs,
        flagged_runs: flagged.len(),
        flagged_kept: req.keep_flagged,
        min_repeats,
        regression,
        points,
        noise,
        demand,
        dc: answer.dc,
        dc_ci: spread.dc.and_then(|s| s.interval).map(|i| (i.low, i.high)),
        dc_pairs: answer
            .dc_pairs
            .iter()
            .map(|&(li, p1, p2, dc)| DcPair {
                cti: req.cti[li],
                p1,
                p2,
                dc,
            })
            .collect(),
        dc_pairs_censored: answer.dc_pairs_left_out,
        p_star: answer.p_star,
        projection,
        saturation,
        held_out,
        intervals: format!(
            "{:.0}% percentile bootstrap over runs ({resamples} resamples): run-to-run noise only",
            bootstrap::LEVEL * 100.0
        ),
        resamples,
        backtest,
        verdict,
        traffic,
        supported,
        warnings,
    })
}

/// Which projection the backtest supports: mean absolute error over the checks both
/// models made where the measurement is a value above the noise.
fn support(checks: &[Check], have_traffic: bool) -> String {
    if !have_traffic {
        return "only the DC projection is available (no traffic recorded with the runs)".into();
    }
    let evidence =
        |c: &&Check| c.measured_censored == Censored::None && !c.below_noise && !c.held_out;
    let mut pairs = Vec::new();
    for d in checks
        .iter()
        .filter(|c| c.model == Model::Dc)
        .filter(evidence)
    {
        if let Some(t) = checks
            .iter()
            .find(|t| t.model == Model::Traffic && t.procs == d.procs && t.cti == d.cti)
        {
            pairs.push((d.error_pp.abs(), t.error_pp.abs()));
        }
    }
    if pairs.is_empty() {
        return "the backtest cannot tell the two projections apart: no size was measured that both could be checked on with a value above the noise".into();
    }
    let n = pairs.len() as f64;
    let dc = pairs.iter().map(|p| p.0).sum::<f64>() / n;
    let tr = pairs.iter().map(|p| p.1).sum::<f64>() / n;
    let better = if tr < dc { "traffic" } else { "DC" };
    format!(
        "over {} backtest check(s) both could make, mean |error| DC {dc:.1} pp, traffic {tr:.1} pp: the data favour the {better} projection{}",
        pairs.len(),
        if dc.min(tr) > backtest::TOLERANCE_PP {
            format!(", but neither is within {} pp", backtest::TOLERANCE_PP)
        } else {
            String::new()
        }
    )
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
                        nodes: 1,
                        busy: None,
                        bytes_sent: None,
                        flag: None,
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
                nodes: 1,
                busy: None,
                bytes_sent: None,
                flag: None,
            });
        }
        obs
    }

    #[test]
    fn flagged_runs_are_left_out_unless_kept_and_said_so() {
        let mut req = Question {
            cti: vec![5.0, 10.0],
            predict: vec![],
            series: None,
            time_source: "test".into(),
            capacity: None,
            keep_flagged: false,
        };
        let clean = analyze(&study(false), &req).unwrap();
        // One run of 4 procs at 20% is ten times slower: its agent was starved.
        let mut obs = study(false);
        let slow = obs
            .iter_mut()
            .find(|o| o.procs == 4 && o.bw_pct == Some(20.0))
            .unwrap();
        slow.seconds *= 10.0;
        slow.flag = Some("n1 egress carried 40.0% of its setting while backlogged".into());
        let a = analyze(&obs, &req).unwrap();
        assert_eq!((a.flagged_runs, a.flagged_kept), (1, false));
        assert_eq!(a.runs, clean.runs - 1);
        assert!(
            a.warnings
                .iter()
                .any(|w| w.contains("1 run(s) were left out") && w.contains("40.0%")),
            "{:?}",
            a.warnings
        );
        let median = |a: &Analysis| {
            a.points
                .iter()
                .find(|p| p.procs == 4 && p.bw_pct == 20.0)
                .unwrap()
                .median
        };
        assert!((median(&a) / median(&clean) - 1.0).abs() < 0.05);
        req.keep_flagged = true;
        let kept = analyze(&obs, &req).unwrap();
        assert_eq!(kept.runs, clean.runs);
        assert!(kept.warnings.iter().any(|w| w.contains("KEPT")));
    }

    #[test]
    fn failed_runs_are_ignored_and_counted() {
        let req = Question {
            cti: vec![5.0, 10.0],
            predict: vec![],
            series: None,
            time_source: "test".into(),
            capacity: None,
            keep_flagged: false,
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
            capacity: None,
            keep_flagged: false,
        };
        let a = analyze(&study(false), &req).unwrap();
        assert_eq!(a.held_out, vec![25]);
        assert_eq!(a.p_star, Some(16));
        // The held-out size is in the backtest table, marked, and only there.
        assert!(a.backtest.iter().any(|c| c.procs == 25));
        assert!(a.backtest.iter().all(|c| c.held_out == (c.procs == 25)));
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

    /// Runs of a program that follows the traffic model exactly (see `traffic`): V = 1e6
    /// p^0.5 bytes per node, T100 = 1 + 8/p, exposed share 0.6, on a 125 MB/s link.
    fn traffic_study(sizes: &[u32]) -> Vec<Observation> {
        let mut obs = Vec::new();
        for &p in sizes {
            let v = 1e6 * (p as f64).sqrt();
            let t100 = 1.0 + 8.0 / p as f64;
            for bw in [2.0, 3.0, 5.0, 7.0, 10.0, 14.0, 20.0, 40.0, 100.0] {
                let w: f64 = bw / 100.0;
                for r in 0..3 {
                    obs.push(Observation {
                        series: "x".into(),
                        procs: p,
                        bw_pct: Some(bw),
                        repeat: r,
                        seconds: (t100 + 0.6 * v / 125e6 * (1.0 / w - 1.0))
                            * (1.0 + (r as f64 - 1.0) * 1e-4),
                        ok: true,
                        nodes: p,
                        busy: None,
                        bytes_sent: Some((v * p as f64) as u64),
                        flag: None,
                    });
                }
            }
        }
        obs
    }

    #[test]
    fn the_traffic_model_is_fitted_projected_and_backtested_beside_dc() {
        let req = Question {
            cti: vec![5.0, 10.0],
            predict: vec![16, 64],
            series: None,
            time_source: "test".into(),
            capacity: Some(125e6),
            keep_flagged: false,
        };
        let a = analyze(&traffic_study(&[2, 4, 6, 8, 16]), &req).unwrap();
        let t = a.traffic.as_ref().unwrap();
        let f = t.fit.as_ref().unwrap();
        assert!(
            (f.exposed - 0.6).abs() < 0.01 && (f.volume_b - 0.5).abs() < 0.01,
            "{f:?}"
        );
        // The held-out 16 is projected from 2, 4, 6, 8 and compared.
        let p16 = t
            .projection
            .iter()
            .find(|p| p.procs == 16 && p.cti == 10.0)
            .unwrap();
        let want = 100.0 / (1.0 + 0.1 * 1.5 / (0.6 * 4e6 / 125e6));
        assert!((p16.bw_pct - want).abs() < 0.5, "{p16:?} vs {want}");
        assert!(p16.error_pp.unwrap().abs() < 1.0, "{p16:?}");
        assert!(
            matches!(t.verdict, Verdict::Passed { .. }),
            "{:?}",
            t.verdict
        );
        assert!(a.backtest.iter().any(|c| c.model == Model::Traffic));
        assert!(a.supported.contains("traffic"), "{}", a.supported);
        let text = render(&a, &[5.0, 10.0], None);
        assert!(
            text.contains("projection from traffic") && text.contains("backtest (traffic): passed"),
            "{text}"
        );
        // The same program without the 6: the backtest checks 8 only, which passes but is
        // not enough to trust either projection.
        let a = analyze(&traffic_study(&[2, 4, 8, 16]), &req).unwrap();
        let t = a.traffic.as_ref().unwrap();
        assert!(
            matches!(t.verdict, Verdict::Thin { procs: 8, .. }),
            "{:?}",
            t.verdict
        );
        assert!(
            matches!(a.verdict, Verdict::Thin { procs: 8, .. }),
            "{:?}",
            a.verdict
        );
        assert!(a.warnings.iter().any(|w| w.contains("one size only")));
        let text = render(&a, &[5.0, 10.0], None);
        assert!(
            text.contains("backtest (traffic): NOT ENOUGH TO TRUST")
                && text.contains("NOT TRUSTED, its backtest passed on one size only"),
            "{text}"
        );
        // Without the capacity (CSV data) there is no traffic model, and it says why.
        let a = analyze(
            &traffic_study(&[2, 4, 6, 8, 16]),
            &Question {
                capacity: None,
                ..req
            },
        )
        .unwrap();
        assert!(a.traffic.is_none());
        assert!(a
            .warnings
            .iter()
            .any(|w| w.contains("not one link capacity")));
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
            nodes: 1,
            busy: None,
            bytes_sent: None,
            flag: None,
        });
        let req = Question {
            cti: vec![5.0],
            predict: vec![],
            series: None,
            time_source: "test".into(),
            capacity: None,
            keep_flagged: false,
        };
        let e = analyze(&obs, &req).unwrap_err().to_string();
        assert!(e.contains("--series") && e.contains("`pmm`"), "{e}");
        let req = Question {
            cti: vec![5.0],
            predict: vec![],
            series: Some("bfs".into()),
            time_source: "test".into(),
            capacity: None,
            keep_flagged: false,
        };
        assert!(analyze(&obs, &req).is_ok());
    }
}
