//! What would narrow the answer most, and what it costs.
//!
//! A projection's interval holds its run-to-run noise (which more repeats at the fitted
//! sizes shrink, about as one over the square root of the runs), what a measurement at
//! the target would show (its noise and reading: nothing measured elsewhere changes
//! them), and the model's error, which grows with the doublings between the largest
//! fitted size and the target (which a larger measured size shrinks: fewer doublings to
//! project, and one more size for the backtest). Each step is priced in runs (a new size:
//! as many as the largest fitted size took; repeats: one more of each fitted size's
//! baseline and of the steps around each demand, which shrinks the noise as sqrt(r / (r +
//! 1)) for r repeats), and the width it would leave is worked out the way the interval is
//! ([`crate::trust::model_error::Parts`]), with the model error's current estimate. The sweep's
//! precision mode (`[until]`) takes the step with the most narrowing per run.

use std::collections::BTreeMap;

use crate::answer::sizes::SizeRule;
use crate::answer::{Advice, Demand, Narrowing, Projection, Step};
use crate::method::demand::{from_logit, logit};
use crate::method::quantiles::Z90;
use crate::trust::bootstrap::LEVEL;
use crate::trust::model_error::Parts;

/// The width of the interval around `bw` whose projection noise has these 90%
/// half-widths in logit units (below, above), with the other `parts` of the spread.
fn width(bw: f64, noise: (f64, f64), parts: Parts) -> f64 {
    let c = logit(bw);
    let side = |half: f64| {
        Parts {
            noise: (half / Z90).hypot(parts.noise),
            ..parts
        }
        .half_width(LEVEL)
    };
    from_logit(c + side(noise.1)) - from_logit(c - side(noise.0))
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
/// measured demands, `repeats` the fewest runs of a point; `sizes`: which sizes the
/// program allows and those measured already (none of them is suggested). `None` without
/// an interval with its model error there.
pub fn advice(
    projections: &[Projection],
    fitted: &[u32],
    runs_per_size: &BTreeMap<u32, usize>,
    demand: &[Demand],
    repeats: usize,
    (rule, measured): (SizeRule, &[u32]),
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
    let e = &error.estimate;
    let at = target as f64;
    let selection = error.selection.unwrap_or(0.0);
    // What the interval holds beyond the projection's noise, as it stands.
    let beyond = e.parts(at, p.cti, 0.0, selection);
    let largest = *fitted.iter().max()?;
    let largest_runs = runs_per_size.get(&largest).copied().unwrap_or(0);
    let mut options = Vec::new();
    // A size halfway (in log) to the target, if there is room for one the program
    // allows and it was not measured: one more size checked (a degree of freedom more),
    // projected from it; the target's measurement and reading stay what they are.
    if let Some(between) = rule.between(largest, target, measured) {
        let closer = crate::trust::model_error::ErrorModel {
            largest: between,
            df: e.df + 1.0,
            ..*e
        };
        options.push(Narrowing {
            step: Step::Size { procs: between },
            runs: largest_runs,
            width_after: width(
                p.bw_pct,
                noise_logit,
                Parts {
                    model: (closer.model_sd(at), closer.df),
                    ..beyond
                },
            ),
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
                beyond,
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
