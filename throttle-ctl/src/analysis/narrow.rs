//! What would narrow the answer most, and what it costs.
//!
//! A projection's interval has two parts, added in quadrature in logit units: run-to-run
//! noise (which more repeats shrink, about as one over the square root of the runs) and
//! the model's error, which grows with the doublings between the largest fitted size and
//! the target (which a larger measured size shrinks: fewer doublings to project, and one
//! more size for the backtest). Each step is priced in runs (a new size: as many as the
//! largest fitted size took; repeats: as many again as the fitted sizes took), and the
//! width it would leave is estimated with the model error's current estimate. The sweep's
//! precision mode takes the step with the most narrowing per run.

use std::collections::BTreeMap;

use serde::Serialize;

use super::answer::Projection;
use super::demand::{from_logit, logit};

/// One way to narrow the answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// Measure a size between the largest fitted one and the target.
    Size { procs: u32 },
    /// Double the repeats of every fitted size's points.
    Repeats,
}

/// A step, what it costs and what it would leave.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Option_ {
    #[serde(flatten)]
    pub step: Step,
    /// About how many runs it takes.
    pub runs: usize,
    /// The widest interval at the target it would leave (estimated), points of bandwidth.
    pub width_after: f64,
}

/// Where the answer's width comes from, and the ways to narrow it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Advice {
    /// The size asked (the largest projected to) and the level whose interval is widest.
    pub procs: u32,
    pub cti: f64,
    /// That interval's width, and its two parts' half-widths (points of bandwidth, the
    /// larger side).
    pub width: f64,
    pub noise_half: f64,
    pub model_half: f64,
    /// The ways to narrow it, the most narrowing per run first.
    pub options: Vec<Option_>,
}

impl Advice {
    /// The advice in words.
    pub fn text(&self) -> String {
        let mut s = format!(
            "the answer at {} procs is {:.1} pp wide at CTI {}% (run-to-run noise up to {:.1} pp, the model's error up to {:.1} pp)",
            self.procs, self.width, self.cti, self.noise_half, self.model_half
        );
        let say = |o: &Option_| match &o.step {
            Step::Size { procs } => format!(
                "measuring {procs} procs (about {} runs) would leave about {:.0} pp",
                o.runs, o.width_after
            ),
            Step::Repeats => format!(
                "twice the repeats (about {} runs) would leave about {:.0} pp",
                o.runs, o.width_after
            ),
        };
        match self.options.split_first() {
            Some((first, rest)) => {
                s.push_str(&format!("; what narrows it most: {}", say(first)));
                for o in rest {
                    s.push_str(&format!("; {}", say(o)));
                }
            }
            None => s.push_str("; nothing measurable here would narrow it"),
        }
        s
    }
}

/// The width of an interval around `bw` with these half-widths in logit units.
fn width(bw: f64, noise: (f64, f64), model: f64) -> f64 {
    let c = logit(bw);
    from_logit(c + noise.1.hypot(model)) - from_logit(c - noise.0.hypot(model))
}

/// Advice for the widest interval of `projections` (one model's) at their largest size;
/// `fitted`: the fitted sizes, `runs_per_size`: the good runs each took. `None` without
/// an interval with its model error there.
pub fn advice(
    projections: &[Projection],
    fitted: &[u32],
    runs_per_size: &BTreeMap<u32, usize>,
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
    let all_runs: usize = fitted.iter().filter_map(|s| runs_per_size.get(s)).sum();
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
        options.push(Option_ {
            step: Step::Size { procs: between },
            runs: largest_runs,
            width_after: width(p.bw_pct, noise_logit, m),
        });
    }
    let sqrt2 = std::f64::consts::SQRT_2;
    options.push(Option_ {
        step: Step::Repeats,
        runs: all_runs,
        width_after: width(
            p.bw_pct,
            (noise_logit.0 / sqrt2, noise_logit.1 / sqrt2),
            model,
        ),
    });
    let now = interval.high - interval.low;
    options.sort_by(|a, b| {
        let gain = |o: &Option_| (now - o.width_after).max(0.0) / o.runs.max(1) as f64;
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
