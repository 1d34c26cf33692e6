//! `analyze`: from runs to demand figures and projections. This file only groups the
//! observations, keeps held-out sizes out of the fits, runs the chain three ways (on the
//! medians, on bootstrap resamples, on the smaller sizes for the backtest) and collects
//! the warnings; every formula lives in [`crate::method`] and docs/method.md.

use std::collections::BTreeMap;

use anyhow::{bail, Result};

use crate::answer::{
    self, compose, Analysis, Demand, MedianPoint, Projection, Saturation, TimeUnit, TrafficAnswer,
};
use crate::data::cells::{cell_bw, percent, BwKey, FULL};
use crate::data::observation::Observation;
use crate::method::demand::{self, Interp};
use crate::method::{chain, noise, regression, stats, traffic};
use crate::render::bottom_line;
use crate::trust::backtest::{self, Model};
use crate::trust::bootstrap::{self, Interval};
use crate::trust::{cpu, model_error, warnings};

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
    /// Keep the sizes through whose agents not one byte went in any run (left out by
    /// default: no traffic between nodes, or connections that bypassed the agents).
    pub keep_without_traffic: bool,
    /// How demand is read between measured steps.
    pub interp: Interp,
    /// What the observations' times are.
    pub unit: TimeUnit,
}

/// The series to analyse: the one asked for, or the only one.
pub fn choose_series(obs: &[Observation], asked: &Option<String>) -> Result<String> {
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
        (None, 0) => bail!(
            "no runs to analyze: the data holds no completed run (failed and flagged runs are left out); a sweep stores them (`throttle-ctl sweep SPEC.toml --db FILE`), `throttle-ctl export` lists what is stored"
        ),
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

/// The most sizes one analysis takes: a sweep measures a handful; a store with
/// thousands (a file anyone may hand over: 5,000 sizes did not finish in a minute) is
/// refused rather than worked on without end. At 64 sizes the analysis took 18.5-22.8 s
/// on the 2-core development machine (its bootstraps within [`bootstrap::WORK`]), at 128
/// 62.7 s (experiments/2026-12-02-analysis-cost.md).
pub const MAX_SIZES: usize = 64;

/// Run the analysis on `obs`.
pub fn analyze(obs: &[Observation], req: &Question) -> Result<Analysis> {
    analyze_within(obs, req, bootstrap::WORK)
}

/// [`analyze`] with its bootstraps within `work` size fits each ([`bootstrap::WORK`]):
/// an analysis of each problem value in turn gives each its share.
pub(crate) fn analyze_within(obs: &[Observation], req: &Question, work: usize) -> Result<Analysis> {
    let (m, mut warnings) = measure(obs, req)?;
    let (volumes, traffic_recorded) = traffic_volumes(&m.runs.good, req, &mut warnings);
    let f = fit_and_judge(&m, req, volumes.as_ref(), work, &mut warnings);
    let figures = compose::Figures {
        answer: &f.answer,
        spread: &f.spread,
        cti: &req.cti,
        held_out: &m.held_out,
        smallest_fitted: f.fit.first().copied().unwrap_or(1),
        volumes: volumes.as_ref(),
        error: f.error,
    };
    let stated = state(
        &figures,
        &f,
        (traffic_recorded, req.unit, &m.cpu_bound),
        &mut warnings,
    );
    let bottom_line = answer_first(req, &m, &f, &stated);
    let resamples = f.resamples;
    let latency = latency::answer(obs, &m.chosen, req);
    let latency_runs = obs
        .iter()
        .filter(|o| o.series == m.chosen && o.latency_step.is_some())
        .count();
    Ok(Analysis {
        bottom_line,
        time_source: req.time_source.clone(),
        interpolation: req.interp,
        time_unit: req.unit,
        series: m.chosen,
        runs: m.runs.good.len(),
        failed_runs: m.runs.failed,
        flagged_runs: m.runs.flagged.len(),
        flagged_kept: req.keep_flagged,
        unlimited_runs: m.runs.unlimited,
        without_traffic_runs: m.without_traffic_runs,
        latency_runs,
        min_repeats: m.min_repeats,
        regression: m.regression,
        points: m.points,
        noise: m.noise,
        demand: stated.demand,
        dc: f.answer.dc,
        dc_interval: f.spread.dc.and_then(|s| s.interval),
        dc_pairs: figures.dc_pairs(),
        dc_pairs_censored: f.answer.dc_pairs_left_out,
        p_star: f.answer.p_star,
        projection: stated.projection,
        saturation: stated.saturation,
        held_out: m.held_out,
        intervals: format!(
            "{:.0}% percentile bootstrap over runs ({resamples} resamples): run-to-run noise only",
            bootstrap::LEVEL * 100.0
        ),
        resamples,
        backtest: f.backtest,
        verdict: f.verdict,
        dc_error: f.error[0],
        cpu_bound: m.cpu_bound,
        traffic: stated.traffic,
        supported: stated.supported,
        latency,
        warnings,
    })
}

/// The chosen series' runs as the analysis measures them: grouped into (size, bandwidth)
/// cells with their medians, and the noise each size's repeats can resolve.
struct Measured<'a> {
    chosen: String,
    runs: Selection<'a>,
    /// Every size of the series, with why it has no demand at all when that is so.
    reasons: Vec<(u32, Option<String>)>,
    cells: BTreeMap<(u32, BwKey), Vec<f64>>,
    medians: BTreeMap<(u32, BwKey), f64>,
    /// The measured sizes, and those of them asked to be projected to (held out).
    sizes: Vec<u32>,
    held_out: Vec<u32>,
    min_repeats: usize,
    regression: Option<regression::Regression>,
    points: Vec<MedianPoint>,
    noise: Vec<noise::Floor>,
    floors: BTreeMap<u32, noise::Floor>,
    /// The sizes whose runs kept the machine's cores busy.
    cpu_bound: Vec<cpu::CpuBound>,
    /// Good runs of the sizes left out for carrying no traffic between nodes.
    without_traffic_runs: usize,
    /// The sizes with at least one successful run (flagged or not).
    ran: Vec<u32>,
}

/// Choose the series, sort its runs and group them into cells; what was measured, and
/// the warnings about it.
fn measure<'a>(obs: &'a [Observation], req: &Question) -> Result<(Measured<'a>, Vec<String>)> {
    let chosen = choose_series(obs, &req.series)?;
    let mut runs = Selection::of(obs, &chosen, req.keep_flagged);
    let mut warnings_first = Vec::new();
    // Sizes through whose agents not one byte went: on one node there is no traffic
    // between nodes, so no demand, whatever the times say; on more, a program whose
    // connections bypassed the agents, whose times the links' settings cannot have
    // changed. Both are left out, and said.
    let (mut silent, mut bypassed) = without_traffic(&runs.good);
    if req.keep_without_traffic {
        let kept = silent
            .union(&bypassed)
            .map(u32::to_string)
            .collect::<Vec<_>>();
        if !kept.is_empty() {
            warnings_first.push(format!(
                "{} procs: not a byte went through the agents in any run, KEPT (--keep-without-traffic): their demand is the times' word alone, not the link's",
                kept.join(", ")
            ));
        }
        silent.clear();
        bypassed.clear();
    }
    let reasons = reasons(obs, &chosen, &runs, &silent, &bypassed);
    // The sizes the program ran at (what the sizes it allows are read from).
    let mut ran: Vec<u32> = runs
        .good
        .iter()
        .chain(&runs.flagged)
        .map(|o| o.procs)
        .collect();
    ran.sort_unstable();
    ran.dedup();
    let before = runs.good.len();
    runs.good
        .retain(|o| !silent.contains(&o.procs) && !bypassed.contains(&o.procs));
    let without_traffic_runs = before - runs.good.len();
    let nothing_left = runs.good.is_empty();
    let sizes: std::collections::BTreeSet<u32> = runs.good.iter().map(|o| o.procs).collect();
    if sizes.len() > MAX_SIZES {
        bail!(
            "series `{chosen}` holds {} sizes (process counts); an analysis takes at most {MAX_SIZES}: export a part of the store and analyse that (`analyze --csv`)",
            sizes.len()
        );
    }
    let mut warnings = warnings::selection(&runs, req.keep_flagged);
    warnings.append(&mut warnings_first);
    let words = |s: &std::collections::BTreeSet<u32>| {
        s.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
    };
    let mut left_out = Vec::new();
    if !silent.is_empty() {
        left_out.push(format!(
            "{} procs: one node, and no byte went through its agent in any run: no traffic between nodes, so no demand there; left out of the analysis",
            words(&silent)
        ));
    }
    if !bypassed.is_empty() {
        left_out.push(format!(
            "{} procs: no byte went through the agents in any run, so the links' settings cannot have changed these times: do the program's connections go through them? (an mpirun needs `throttle-ctl exec` as its launch agent, MPI its TCP transport); left out of the analysis",
            words(&bypassed)
        ));
    }
    if nothing_left && !left_out.is_empty() {
        bail!(
            "{}; nothing is left to analyse (--keep-without-traffic analyses such sizes by their times alone)",
            left_out.join("; ")
        );
    }
    warnings.extend(left_out);
    let cells = group_cells(&runs.good);
    if cells.is_empty() {
        bail!("no successful runs with a bandwidth percentage in series `{chosen}`");
    }
    warnings.extend(warnings::layouts(&runs.good));
    let mut sizes: Vec<u32> = cells.keys().map(|k| k.0).collect();
    sizes.dedup();
    let held_out: Vec<u32> = req
        .predict
        .iter()
        .copied()
        .filter(|p| sizes.contains(p))
        .collect();
    let min_repeats = cells.values().map(Vec::len).min().unwrap_or(0);
    warnings.extend(warnings::repeats(min_repeats));
    let regression = strong_scaling(&runs.good, &held_out);
    warnings.extend(warnings::regression(regression.as_ref()));
    let medians: BTreeMap<(u32, BwKey), f64> =
        cells.iter().map(|(&k, t)| (k, stats::median(t))).collect();
    let points = median_points(&cells, &medians);
    // The noise each size's repeats can resolve.
    let noise = noise::floors(&cells);
    let floors = noise::by_size(&noise);
    warnings.extend(warnings::baselines(&sizes, &medians, &floors));
    let cpu_bound = cpu::sizes(&runs.good);
    warnings.extend(cpu::warning(&cpu_bound));
    let reasons = reasons
        .into_iter()
        .map(|(p, why)| {
            let why = why.or_else(|| {
                (!medians.contains_key(&(p, FULL))).then(|| {
                    "no baseline: no good run at 100% of the link, so no CTI there".to_string()
                })
            });
            (p, why)
        })
        .collect();
    let measured = Measured {
        chosen,
        runs,
        reasons,
        cells,
        medians,
        sizes,
        held_out,
        min_repeats,
        regression,
        points,
        noise,
        floors,
        cpu_bound,
        without_traffic_runs,
        ran,
    };
    Ok((measured, warnings))
}

/// The runs' traffic for the traffic model ([`volumes`]), none where the times are not
/// seconds; and whether any run recorded its bytes.
fn traffic_volumes(
    good: &[&Observation],
    req: &Question,
    warnings: &mut Vec<String>,
) -> (Option<traffic::Volumes>, bool) {
    match req.unit {
        TimeUnit::Seconds => volumes(good, req.capacity),
        // Bytes over a capacity are seconds: they do not add to the inverse of a rate.
        TimeUnit::InverseRate => {
            if good.iter().any(|o| o.bytes_sent.is_some()) {
                warnings.push("the times are the inverse of the program's rate, not seconds: no traffic-based projection (it adds bytes over the link's capacity to T(100%)); `analyze --time job` fits it on the job's wall time".into());
            }
            (None, false)
        }
    }
}

/// The chain fitted on the sizes not held out, its bootstrap intervals, and the backtest
/// that judges its models.
struct Fitted {
    fit: Vec<u32>,
    answer: chain::Chain,
    resamples: usize,
    spread: bootstrap::Intervals,
    backtest: Vec<backtest::Check>,
    /// How far the DC and the traffic projection's models may be off.
    error: [Option<model_error::ErrorModel>; 2],
    /// The DC projection's verdict.
    verdict: backtest::Verdict,
}

/// Run the chain on the measured medians (fitted on every size not held out), its
/// bootstrap, and the backtest over every measured size.
fn fit_and_judge(
    m: &Measured,
    req: &Question,
    volumes: Option<&traffic::Volumes>,
    work: usize,
    warnings: &mut Vec<String>,
) -> Fitted {
    let inputs = chain::Inputs {
        levels: &req.cti,
        interp: req.interp,
        noise: &m.floors,
        volumes,
    };
    // The chain on the measured medians: fitted on every size not held out.
    let fit: Vec<u32> = m
        .sizes
        .iter()
        .copied()
        .filter(|p| !m.held_out.contains(p))
        .collect();
    let answer = chain::run(&inputs, &m.medians, &fit, &req.predict);
    let full = bootstrap::resamples_for(m.runs.good.len());
    let resamples = bootstrap::within(full, fit.len(), work);
    let spread = bootstrap::intervals(&inputs, &m.cells, &fit, &req.predict, resamples);
    warnings.extend(warnings::chain(&answer, &req.cti, &m.medians, fit.len()));
    // The backtest over every measured size. Held-out sizes are shown but neither judged
    // nor fitted on: the verdict (and which model the data favour) must not know the
    // measurement the projection is then compared with.
    let demands_only = chain::Inputs {
        volumes: None,
        ..inputs
    };
    let all = chain::run(&demands_only, &m.medians, &m.sizes, &[]);
    let (backtest, checked_with) = backtest::run(
        &inputs,
        &m.cells,
        &m.medians,
        &all,
        &spread.demand,
        &m.held_out,
        (full, work),
    );
    if resamples < full || checked_with < full {
        warnings.push(format!(
            "{} sizes: the intervals come from {resamples} resamples and each backtest check's from {checked_with} (not {full}), so that the analysis's time stays bounded; fewer sizes (`analyze --csv` of a part of the store) get the full count",
            m.sizes.len()
        ));
    }
    // How wrong each model has been: at its own fitted sizes, and projected.
    let insample = chain::run(&inputs, &m.medians, &fit, &fit);
    let [dc_residuals, traffic_residuals] = compose::residuals(&insample, &answer, &fit, &req.cti);
    // The fitted sizes' noise: a held-out size's would tell the interval about the
    // measurement it is compared with.
    let fitted_floors: BTreeMap<u32, noise::Floor> = m
        .floors
        .iter()
        .filter(|(p, _)| fit.contains(p))
        .map(|(&p, f)| (p, f.clone()))
        .collect();
    let error = [
        (Model::Dc, &dc_residuals),
        (Model::Traffic, &traffic_residuals),
    ]
    .map(|(model, residuals)| {
        let fitted = model_error::Fitted {
            sizes: &fit,
            residuals,
            floors: &fitted_floors,
        };
        model_error::estimate(&backtest, model, &fitted, model_error::prior(model))
    });
    let verdict = cpu::with_cpu(
        model_error::judged(backtest::verdict(&backtest, Model::Dc), error[0].as_ref()),
        &m.cpu_bound,
        &fit,
    );
    Fitted {
        fit,
        answer,
        resamples,
        spread,
        backtest,
        error,
        verdict,
    }
}

/// The figures the analysis states, each with its interval and verdict.
struct Stated {
    projection: Vec<Projection>,
    traffic: Option<TrafficAnswer>,
    /// Which projection the backtest supports, in words.
    supported: String,
    saturation: Vec<Saturation>,
    demand: Vec<Demand>,
}

/// The DC and traffic projections, saturation and demand as stated, with which
/// projection the backtest supports; `traffic_recorded`: whether any run recorded its
/// bytes; `unit`: what the times are; `cpu_bound`: the sizes that downgrade a verdict
/// fitted on them.
fn state(
    figures: &compose::Figures,
    f: &Fitted,
    (traffic_recorded, unit, cpu_bound): (bool, TimeUnit, &[cpu::CpuBound]),
    warnings: &mut Vec<String>,
) -> Stated {
    let projection = figures.dc_projections();
    if !projection.is_empty() {
        warnings.extend(warnings::dc_verdict(&f.verdict));
    }
    let traffic = figures.volumes.map(|v| TrafficAnswer {
        bytes_per_node: v.bytes_per_node.iter().map(|(&p, &b)| (p, b)).collect(),
        busiest_link: v.busiest,
        fit: f.answer.traffic.clone(),
        projection: figures.traffic_projections(),
        verdict: cpu::with_cpu(
            backtest::with_fit(
                model_error::judged(
                    backtest::verdict(&f.backtest, Model::Traffic),
                    f.error[1].as_ref(),
                ),
                f.answer.traffic.as_ref(),
            ),
            cpu_bound,
            &f.fit,
        ),
        error: f.error[1],
        stability: stability(&f.spread),
    });
    if figures.volumes.is_none() && traffic_recorded {
        warnings.push("the runs' traffic is recorded but not one link capacity (CSV data, or runs at several capacities in the store): no traffic-based projection".into());
    }
    let no_traffic = match (&traffic, unit, traffic_recorded) {
        (Some(_), _, _) => None,
        (None, TimeUnit::InverseRate, _) => Some(
            "the times are the inverse of the program's rate, not seconds: the traffic model adds bytes over the link's capacity to a time",
        ),
        (None, _, true) => Some("the runs' traffic is recorded, but not one link capacity"),
        (None, _, false) => Some("no traffic recorded with the runs"),
    };
    let mut supported = backtest::support(&f.backtest, no_traffic);
    // Unmodelled, or so under a CPU-bound downgrade.
    let unmodelled = traffic.as_ref().map(|t| match &t.verdict {
        backtest::Verdict::CpuBound { inner, .. } => &**inner,
        v => v,
    });
    if let Some(backtest::Verdict::Unmodelled { part, .. }) = unmodelled {
        supported.push_str(&format!(
            " (but the traffic projection's model of {part} does not describe the measured sizes: see its verdict)"
        ));
    }
    let untested = backtest::Verdict::Untested { why: String::new() };
    let saturation = figures.saturations([
        &f.verdict,
        traffic.as_ref().map_or(&untested, |t| &t.verdict),
    ]);
    let demand = figures.demands();
    Stated {
        projection,
        traffic,
        supported,
        saturation,
        demand,
    }
}

/// The answer first ([`bottom_line::bottom_line`]): the best supported projection, or
/// what was measured, and what would narrow it.
fn answer_first(req: &Question, m: &Measured, f: &Fitted, s: &Stated) -> answer::BottomLine {
    let mut candidates = vec![(Model::Dc, &f.verdict, &s.projection[..])];
    if let Some(t) = &s.traffic {
        candidates.push((Model::Traffic, &t.verdict, &t.projection[..]));
    }
    let runs_per_size = m
        .cells
        .iter()
        .fold(BTreeMap::new(), |mut per, (&(p, _), t)| {
            *per.entry(p).or_insert(0usize) += t.len();
            per
        });
    bottom_line::bottom_line(
        &bottom_line::Basis {
            candidates: &candidates,
            demand: &s.demand,
            saturation: &s.saturation,
            levels: &req.cti,
            fitted: &f.fit,
            runs_per_size: &runs_per_size,
            min_repeats: m.min_repeats,
            capacity: req.capacity,
            sizes: &m.reasons,
            held_out: &m.held_out,
            cpu_bound: &m.cpu_bound,
            rule: crate::answer::sizes::SizeRule::of(&m.ran),
        },
        !req.predict.is_empty(),
    )
}

/// How often each form of the traffic model's parts won over the resamples.
fn stability(spread: &bootstrap::Intervals) -> Vec<answer::Stability> {
    spread
        .forms
        .iter()
        .map(|(part, counts)| {
            let mut forms: Vec<(String, usize)> =
                counts.iter().map(|(f, &n)| (f.clone(), n)).collect();
            forms.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            answer::Stability {
                part: part.to_string(),
                resamples: forms.iter().map(|f| f.1).sum(),
                forms,
            }
        })
        .collect()
}

/// The runs of the chosen series, sorted by what the analysis does with them.
pub struct Selection<'a> {
    /// Successful, throttled, and not flagged (or flagged and kept).
    pub good: Vec<&'a Observation>,
    /// Successful and throttled, but their links did not run at their setting.
    pub flagged: Vec<&'a Observation>,
    pub failed: usize,
    /// Successful runs at unlimited bandwidth (no baseline for them).
    pub unlimited: usize,
}

impl<'a> Selection<'a> {
    pub(crate) fn of(obs: &'a [Observation], series: &str, keep_flagged: bool) -> Selection<'a> {
        // A latency point is the latency demand's (`latency`), not a bandwidth step's.
        let mine: Vec<&Observation> = obs
            .iter()
            .filter(|o| o.series == series && o.latency_step.is_none())
            .collect();
        let throttled = |o: &&&Observation| o.ok && !o.bw_pct.is_unlimited();
        Selection {
            good: mine
                .iter()
                .filter(throttled)
                .filter(|o| keep_flagged || o.flag.is_none())
                .copied()
                .collect(),
            flagged: mine
                .iter()
                .filter(throttled)
                .filter(|o| o.flag.is_some())
                .copied()
                .collect(),
            failed: mine.iter().filter(|o| !o.ok).count(),
            unlimited: mine
                .iter()
                .filter(|o| o.ok && o.bw_pct.is_unlimited())
                .count(),
        }
    }
}

/// Every size of `series` in `obs`, with why it can have no demand when its runs say so
/// already: no traffic between nodes, or no good run (all failed or flagged).
fn reasons(
    obs: &[Observation],
    series: &str,
    runs: &Selection,
    silent: &std::collections::BTreeSet<u32>,
    bypassed: &std::collections::BTreeSet<u32>,
) -> Vec<(u32, Option<String>)> {
    let mine: Vec<&Observation> = obs
        .iter()
        .filter(|o| o.series == series && o.latency_step.is_none())
        .collect();
    let sizes: std::collections::BTreeSet<u32> = mine.iter().map(|o| o.procs).collect();
    sizes
        .into_iter()
        .map(|p| {
            let why = if silent.contains(&p) {
                Some("no traffic between nodes (one node, not a byte through its agent): no demand".to_string())
            } else if bypassed.contains(&p) {
                Some("no byte went through the agents in any run (an mpirun needs `throttle-ctl exec` as its launch agent): no demand".to_string())
            } else if !runs.good.iter().any(|o| o.procs == p) {
                let failed = mine.iter().filter(|o| o.procs == p && !o.ok).count();
                let flagged = runs.flagged.iter().filter(|o| o.procs == p).count();
                Some(format!(
                    "no good run: {failed} failed, {flagged} flagged (links not at their setting){}; the sweep's output and the warnings say why",
                    if failed + flagged > 0 { ", given up" } else { "" }
                ))
            } else {
                None
            };
            (p, why)
        })
        .collect()
}

/// The sizes whose every run recorded its traffic through the agents, and it was none:
/// those on one node, and those on more.
fn without_traffic(
    runs: &[&Observation],
) -> (
    std::collections::BTreeSet<u32>,
    std::collections::BTreeSet<u32>,
) {
    // Per size: (no traffic in any run, every run on one node).
    let mut by_size: BTreeMap<u32, (bool, bool)> = BTreeMap::new();
    for o in runs {
        let none = o.bytes_sent == Some(0) && o.busiest_bytes.unwrap_or(0) == 0;
        let e = by_size.entry(o.procs).or_insert((true, true));
        e.0 &= none;
        e.1 &= o.nodes == 1;
    }
    let pick = |one: bool| {
        by_size
            .iter()
            .filter(|(_, &(none, single))| none && single == one)
            .map(|(&p, _)| p)
            .collect()
    };
    (pick(true), pick(false))
}

/// The runs of `series` the analysis uses by default (flagged ones left out), and those it
/// leaves out: one home for the choice, which `export --format extrap` makes alike.
pub fn runs_of<'a>(obs: &'a [Observation], series: &str) -> Selection<'a> {
    Selection::of(obs, series, false)
}

/// The strong-scaling regression on every run at 100%, held-out sizes excluded.
fn strong_scaling(good: &[&Observation], held_out: &[u32]) -> Option<regression::Regression> {
    let points: Vec<(f64, f64)> = good
        .iter()
        .filter(|o| o.bw_pct == FULL && !held_out.contains(&o.procs))
        .map(|o| (o.procs as f64, o.seconds))
        .collect();
    regression::regress(&points)
}

/// The runs' times per (size, bandwidth) cell.
pub(crate) fn group_cells(good: &[&Observation]) -> BTreeMap<(u32, BwKey), Vec<f64>> {
    let mut cells: BTreeMap<(u32, BwKey), Vec<f64>> = BTreeMap::new();
    for o in good {
        cells
            .entry((o.procs, cell_bw(o.bw_pct)))
            .or_default()
            .push(o.seconds);
    }
    cells
}

/// Each cell summarised, with the CTI of its median against its size's 100% median.
fn median_points(
    cells: &BTreeMap<(u32, BwKey), Vec<f64>>,
    medians: &BTreeMap<(u32, BwKey), f64>,
) -> Vec<MedianPoint> {
    cells
        .iter()
        .map(|(&(p, bw), times)| {
            let base = medians.get(&(p, FULL)).copied();
            let (low, high, coverage) = stats::median_interval(times);
            MedianPoint {
                procs: p,
                bw_pct: percent(bw),
                n: times.len(),
                median: medians[&(p, bw)],
                interval: Interval::of_median(low, high),
                coverage,
                cv: stats::cv(times),
                min: times.iter().copied().fold(f64::INFINITY, f64::min),
                max: times.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                cti: base.map(|b| demand::cti(medians[&(p, bw)], b)),
            }
        })
        .collect()
}

/// The median bytes of each size for the traffic model (with one link capacity only):
/// those of the busiest link where every run with traffic recorded it, else the mean per
/// node; and whether any run recorded its bytes at all.
pub(crate) fn volumes(
    good: &[&Observation],
    capacity: Option<f64>,
) -> (Option<traffic::Volumes>, bool) {
    // Runs that moved no bytes (one node) say nothing about which count to use.
    let with: Vec<&&Observation> = good
        .iter()
        .filter(|o| o.bytes_sent.is_some_and(|b| b > 0))
        .collect();
    let busiest = !with.is_empty() && with.iter().all(|o| o.busiest_bytes.is_some());
    let mut per_node: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for o in &with {
        let b = match (busiest, o.busiest_bytes, o.bytes_sent) {
            (true, Some(b), _) => b as f64,
            (_, _, Some(b)) => b as f64 / o.nodes.max(1) as f64,
            _ => continue,
        };
        per_node.entry(o.procs).or_default().push(b);
    }
    let volumes = match (capacity, per_node.is_empty()) {
        (Some(capacity), false) => Some(traffic::Volumes {
            bytes_per_node: per_node
                .iter()
                .map(|(&p, v)| (p, stats::median(v)))
                .collect(),
            capacity,
            busiest,
        }),
        _ => None,
    };
    (volumes, !per_node.is_empty())
}

pub mod latency;
pub mod problem;

#[cfg(test)]
mod tests;
