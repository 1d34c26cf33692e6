//! Each figure of the answer with the intervals it is stated with: the chain's numbers,
//! their bootstrap intervals (run-to-run noise), and, for projections, what a
//! measurement at that size would show ([`crate::trust::model_error`]: its noise and reading,
//! the model's error); for saturation sizes, the model's error.
//!
//! The parts are taken as independent: they add as variances, in logit units of the
//! demand (docs/method.md), so that no interval leaves 0-100% of the link. A projection
//! at or past 100% of the link (the DC model's can be) has no interval: the link
//! saturates before that size, and the saturation size says where.

use crate::answer::{self, DcPair, Demand, Projection, Saturation};
use crate::method::chain;
use crate::method::demand::{self, from_logit, logit, Censored};
use crate::method::quantiles;
use crate::method::traffic;
use crate::trust::backtest::{Model, Verdict};
use crate::trust::bootstrap::{self, Interval};
use crate::trust::model_error::ErrorModel;

/// The levels a projection's interval is also stated at (`at_levels`): what a
/// reliability table checks.
pub const REPORTED_LEVELS: [f64; 4] = [0.5, 0.8, 0.9, 0.95];

/// The chain's figures with their bootstrap intervals, as the answer states them.
pub(crate) struct Figures<'a> {
    pub answer: &'a chain::Chain,
    pub spread: &'a bootstrap::Intervals,
    pub cti: &'a [f64],
    pub held_out: &'a [u32],
    /// The smallest size the projections are fitted on.
    pub smallest_fitted: u32,
    /// The runs' traffic, for the traffic model's figures.
    pub volumes: Option<&'a traffic::Volumes>,
    /// How far the DC and the traffic projection's models may be off.
    pub error: [Option<ErrorModel>; 2],
}

impl Figures<'_> {
    pub fn dc_pairs(&self) -> Vec<DcPair> {
        self.answer
            .dc_pairs
            .iter()
            .map(|&(li, p1, p2, dc)| DcPair {
                cti: self.cti[li],
                p1,
                p2,
                dc,
            })
            .collect()
    }

    pub fn demands(&self) -> Vec<Demand> {
        self.answer
            .demand
            .iter()
            .map(|(&(p, li), n)| Demand {
                procs: p,
                cti: self.cti[li],
                bw_pct: n.bw_pct,
                censored: n.censored,
                bound: self.answer.bounds.get(&(p, li)).copied(),
                between: n.between.map(|(a, b)| [a, b]),
                below_noise: n.below_noise,
                // A censored demand is a bound: no noise interval around it.
                interval: self
                    .spread
                    .demand
                    .get(&(p, li))
                    .and_then(|s| s.interval)
                    .filter(|_| n.censored == Censored::None),
                held_out: self.held_out.contains(&p),
            })
            .collect()
    }

    /// A held-out size's measured demand: the value, or the bound a censored one is
    /// known to be beyond; its censoring; whether the level is below its noise floor.
    fn measured_at(&self, p: u32, li: usize) -> Option<(f64, Censored, bool)> {
        let n = self
            .answer
            .demand
            .get(&(p, li))
            .filter(|_| self.held_out.contains(&p))?;
        let value = self
            .answer
            .bounds
            .get(&(p, li))
            .copied()
            .unwrap_or(n.bw_pct);
        Some((value, n.censored, n.below_noise))
    }

    /// The parts of a projection to `p` beyond its noise, `None` without a backtest
    /// check to estimate the model's error from (then no number is given: nothing says
    /// how wrong the model has been).
    fn model_error(
        &self,
        (p, li): (u32, usize),
        bw: f64,
        selection: Option<f64>,
        estimate: Option<ErrorModel>,
    ) -> Option<answer::ModelError> {
        let estimate = estimate?;
        let level = self.cti[li];
        let beyond = estimate.parts(p as f64, level, 0.0, selection.unwrap_or(0.0));
        let half = beyond.half_width(bootstrap::LEVEL);
        let centre = logit(bw);
        let mut error = answer::ModelError {
            down: (bw - from_logit(centre - half)).max(0.0),
            up: (from_logit(centre + half) - bw).max(0.0),
            half_width_logit: half,
            estimate,
            doublings: estimate.doublings(p as f64),
            measurement: estimate.measurement_sd(p as f64, level),
            reading: estimate.reading_at(p as f64),
            run_cv: estimate.run_cv_at(p as f64),
            model: estimate.model_sd(p as f64),
            selection,
            in_words: String::new(),
        };
        error.in_words = error.describe();
        Some(error)
    }

    /// One projected figure, with its intervals and, at a held-out size, the measurement.
    fn projected(
        &self,
        (p, li): (u32, usize),
        bw: f64,
        noise: Option<Interval>,
        from_censored: bool,
        model_error: Option<answer::ModelError>,
    ) -> Projection {
        let measured = self.measured_at(p, li);
        // A projection from a censored demand is a bound, not a value with noise; one at
        // or past the link has no interval (the link saturates first). A noise interval
        // stops at the link.
        let saturates = bw >= 100.0;
        let noise = noise
            .filter(|_| !from_censored && !saturates)
            .map(|n| Interval::noise(n.low.max(0.0), n.high.min(100.0)));
        // The predictive interval at each level: the projection's noise on each side (its
        // 90% bootstrap half-width as a standard deviation) with the measurement's noise
        // and reading and the model's error, in logit units.
        let at = |level: f64| -> Option<(f64, f64)> {
            let (n, m) = (noise?, model_error.as_ref()?);
            let c = logit(bw);
            // The bootstrap interval's half-width as a standard deviation.
            let z = quantiles::z(bootstrap::LEVEL);
            let side = |half: f64| {
                m.estimate
                    .parts(
                        p as f64,
                        self.cti[li],
                        half.max(0.0) / z,
                        m.selection.unwrap_or(0.0),
                    )
                    .half_width(level)
            };
            Some((
                from_logit(c - side(c - logit(n.low))),
                from_logit(c + side(logit(n.high) - c)),
            ))
        };
        let both = at(bootstrap::LEVEL).map(|(low, high)| Interval::with_model_error(low, high));
        let at_levels = if both.is_some() {
            REPORTED_LEVELS
                .iter()
                .filter_map(|&level| {
                    let (low, high) = at(level)?;
                    Some(answer::AtLevel { level, low, high })
                })
                .collect()
        } else {
            Vec::new()
        };
        Projection {
            procs: p,
            cti: self.cti[li],
            bw_pct: bw,
            saturates,
            noise_interval: noise,
            interval: both,
            at_levels,
            model_error,
            measured_bw_pct: measured.map(|m| m.0),
            measured_censored: measured.map(|m| m.1),
            measured_below_noise: measured.is_some_and(|m| m.2),
            error_pp: measured.map(|m| bw - m.0),
            error_is_bound: measured.is_some_and(|m| m.1 != Censored::None),
            from_censored,
        }
    }

    pub fn dc_projections(&self) -> Vec<Projection> {
        self.answer
            .projection
            .iter()
            .map(|(&key, &(bw, from_censored))| {
                let interval = self.spread.projection.get(&key).and_then(|s| s.interval);
                let error = self.model_error(key, bw.min(99.95), None, self.error[0]);
                self.projected(key, bw, interval, from_censored, error)
            })
            .collect()
    }

    pub fn traffic_projections(&self) -> Vec<Projection> {
        self.answer
            .traffic_projection
            .iter()
            .map(|(&key, &bw)| {
                let interval = self
                    .spread
                    .traffic_projection
                    .get(&key)
                    .and_then(|s| s.interval);
                let selection = self
                    .answer
                    .traffic
                    .as_ref()
                    .and_then(|f| traffic::selection_spread(f, key.0));
                let error = self.model_error(key, bw, selection, self.error[1]);
                self.projected(key, bw, interval, false, error)
            })
            .collect()
    }

    /// The saturation sizes of both models, each with its verdict: the crossing on the
    /// answer's figures, its bootstrap interval, and that interval widened by the
    /// crossings of the curve shifted by its model error either way (in log p, each side
    /// in quadrature).
    pub fn saturations(&self, verdicts: [&Verdict; 2]) -> Vec<Saturation> {
        let mut out = Vec::new();
        // DC: the projection bw* x DC x sqrt(p / p*) reaches 100%.
        if let (Some(ps), Some(dc)) = (self.answer.p_star, self.answer.dc) {
            for (&li, &(crossing, from_censored)) in &self.answer.saturation {
                let Some(star) = self.answer.demand.get(&(ps, li)) else {
                    continue;
                };
                let envelope = |sign: f64| {
                    let e = self.error[0]?;
                    demand::first_crossing(1.0, |p| {
                        let bw = demand::project(star.bw_pct, dc, ps as f64, p);
                        let half = e.curve_half_width(p, 0.0, bootstrap::LEVEL);
                        Some(bw.ln() + sign * half - 100f64.ln())
                    })
                };
                out.push(self.saturation(
                    (Model::Dc, verdicts[0]),
                    li,
                    Some(crossing),
                    self.spread.saturation.get(&li).and_then(|s| s.interval),
                    from_censored,
                    [envelope(1.0), envelope(-1.0)],
                ));
            }
        }
        // Traffic: even the full link makes the program `cti` percent slower than an
        // unlimited network.
        if let (Some(f), Some(v)) = (&self.answer.traffic, self.volumes) {
            for (li, &level) in self.cti.iter().enumerate() {
                let crossing = self.answer.traffic_saturation.get(&li).copied();
                let envelope = |sign: f64| {
                    let e = self.error[1]?;
                    traffic::saturation(v, f, self.smallest_fitted as f64, level, |p| {
                        let selection =
                            traffic::selection_spread(f, p.round() as u32).unwrap_or(0.0);
                        sign * e.curve_half_width(p, selection, bootstrap::LEVEL)
                    })
                };
                out.push(
                    self.saturation(
                        (Model::Traffic, verdicts[1]),
                        li,
                        crossing,
                        self.spread
                            .traffic_saturation
                            .get(&li)
                            .and_then(|s| s.interval),
                        false,
                        [envelope(1.0), envelope(-1.0)],
                    ),
                );
            }
        }
        out
    }

    /// One saturation figure. `envelope`: where the curve shifted up and down by the
    /// model's error crosses (earliest, latest).
    fn saturation(
        &self,
        (model, verdict): (Model, &Verdict),
        li: usize,
        crossing: Option<f64>,
        noise: Option<Interval>,
        from_censored: bool,
        [early, late]: [Option<f64>; 2],
    ) -> Saturation {
        let noise = noise.filter(|_| !from_censored);
        let interval = match (crossing, noise, early) {
            (Some(c), Some(n), Some(early)) => {
                let lc = c.ln();
                let down = (lc - n.low.ln()).max(0.0).hypot((lc - early.ln()).max(0.0));
                // The curve shifted down may not cross within reach: no upper end.
                let high = late.map_or(f64::INFINITY, |late| {
                    let up = (n.high.ln() - lc).max(0.0).hypot((late.ln() - lc).max(0.0));
                    (lc + up).exp()
                });
                Some(Interval::with_model_error((lc - down).exp(), high))
            }
            _ => None,
        };
        Saturation {
            model,
            trusted: verdict.trusted(),
            cti: self.cti[li],
            procs: crossing
                .filter(|c| c.is_finite() && c.ceil() <= u32::MAX as f64)
                .map(|c| c.ceil().max(1.0) as u32),
            crossing,
            noise_interval: noise,
            interval,
            from_censored,
        }
    }
}

/// The model-error residuals of a chain fitted on `fit` and projected to the same sizes:
/// per model, (size, CTI level, error) in logit units at each fitted size and level whose
/// measured demand is usable.
pub fn residuals(
    insample: &chain::Chain,
    measured: &chain::Chain,
    fit: &[u32],
    levels: &[f64],
) -> [Vec<(u32, f64, f64)>; 2] {
    let mut out = [Vec::new(), Vec::new()];
    for (&(p, li), need) in &measured.demand {
        if !fit.contains(&p) || !need.usable() {
            continue;
        }
        let at = logit(need.bw_pct);
        if let Some(&(bw, false)) = insample.projection.get(&(p, li)) {
            out[0].push((p, levels[li], logit(bw) - at));
        }
        if let Some(&bw) = insample.traffic_projection.get(&(p, li)) {
            out[1].push((p, levels[li], logit(bw) - at));
        }
    }
    out
}
