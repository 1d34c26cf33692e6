//! What would narrow the answer most, and what it costs.
//!
//! A projection's interval has two parts, added in quadrature in logit units: run-to-run
//! noise (which more repeats shrink, about as one over the square root of the runs) and
//! the model's error, which grows with the doublings between the largest fitted size and
//! the target (which a larger measured size shrinks: fewer doublings to project, and one
//! more size for the backtest). Each step is priced in runs (a new size: as many as the
//! largest fitted size took; repeats: one more of each fitted size's baseline and of the
//! steps around each demand, which shrinks the noise as sqrt(r / (r + 1)) for r repeats),
//! and the width it would leave is estimated with the model error's current estimate.
//! The sweep's precision mode (`[until]`) takes the step with the most narrowing per run.

use std::collections::BTreeMap;

use super::answer::{Advice, Demand, Narrowing, Projection, Step};
use super::demand::{from_logit, logit};

/// The width of an interval around `bw` with these half-widths in logit units.
fn width(bw: f64, noise: (f64, f64), model: f64) -> f64 {
    let c = logit(bw);
    from_logit(c + noise.1.hypot(model)) - from_logit(c - noise.0.hypot(model))
}

/// The points more repeats narrow the noise at: each fitted size's baseline and the two
/// measured steps around each of its demands (procs, bandwidth percent).
pub fn repeat_points(demand: &[Demand]) -> Vec<(u32, f64)> {
    let mut out: Vec<(u32, f64)> = Vec::new();
    let mut add = |procs: u32, bw: f64| {
        if !out
            .iter()
            .any(|&(p, b)| p == procs && (b - bw).abs() < 1e-9)
        {
            out.push((procs, bw));
        }
    };
    for d in demand.iter().filter(|d| !d.held_out) {
        add(d.procs, 100.0);
        if let Some([lo, hi]) = d.between {
            add(d.procs, lo);
            add(d.procs, hi);
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    out
}

/// Advice for the widest interval of `projections` (one model's) at their largest size;
/// `fitted`: the fitted sizes, `runs_per_size`: the good runs each took, `demand` the
/// measured demands, `repeats` the fewest runs of a point. `None` without an interval
/// with its model error there.
pub fn advice(
    projections: &[Projection],
    fitted: &[u32],
    runs_per_size: &BTreeMap<u32, usize>,
    demand: &[Demand],
    repeats: usize,
) -> Option<Advice> {
    let target = projections.iter().map(|p| p.procs).max()?;
    let widest = projections
        .iter()
        .filter(|p| p.procs == target)
        .filter_map(|p| Some((p, p.interval?, p.noise_interval?, p.model_error.as_ref()?)))
        .max_by(|a, b| (a.1.high - a.1.low).total_cmp(&(b.1.high - b.1.low)))?;
    let (p, interval, noise, error) = widest;
    let c = logit(p.bw_pct);
    let noise_logit = (
        (c - logit(noise.low)).max(0.0),
        (logit(noise.high) - c).max(0.0),
    );
    let model = error.half_width_logit;
    let pp = |half: f64| (from_logit(c + half) - p.bw_pct).max(p.bw_pct - from_logit(c - half));
    let largest = *fitted.iter().max()?;
    let largest_runs = runs_per_size.get(&largest).copied().unwrap_or(0);
    let mut options = Vec::new();
    // A size halfway (in log) to the target, if there is room for one.
    let between = ((largest as f64) * (target as f64)).sqrt().round() as u32;
    if between > largest && between < target {
        let d = (target as f64 / between as f64).log2();
        // With as many more checks as there are levels, and d doublings.
        let e = &error.estimate;
        let more = super::model_error::t95(e.df + e.checks.div_ceil(e.sizes.max(1)));
        let selection = 1.644_853_6 * error.selection.unwrap_or(0.0);
        let m = (more * e.lack_of_fit_at(target as f64).hypot(e.per_doubling * d)).hypot(selection);
        options.push(Narrowing {
            step: Step::Size { procs: between },
            runs: largest_runs,
            width_after: width(p.bw_pct, noise_logit, m),
        });
    }
    let points = repeat_points(demand);
    if !points.is_empty() {
        let r = repeats.max(1) as f64;
        let shrink = (r / (r + 1.0)).sqrt();
        options.push(Narrowing {
            runs: points.len(),
            step: Step::Repeats { points },
            width_after: width(
                p.bw_pct,
                (noise_logit.0 * shrink, noise_logit.1 * shrink),
                model,
            ),
        });
    }
    let now = interval.high - interval.low;
    options.sort_by(|a, b| {
        let gain = |o: &Narrowing| (now - o.width_after).max(0.0) / o.runs.max(1) as f64;
        gain(b).total_cmp(&gain(a))
    });
    Some(Advice {
        procs: target,
        cti: p.cti,
        width: now,
        noise_half: pp(noise_logit.0.max(noise_logit.1)),
        model_half: pp(model),
        options,
    })
}
