//! How far a projection in two parameters can be trusted: the backtest that holds out
//! the largest size, the largest problem, and both, and the interval a projection to
//! (P, N) is stated with.
//!
//! Everything is counted as in one parameter ([`crate::trust::model_error`]), in logit
//! units of the demand, where the traffic model's error is an error of ln R, the same at
//! every level of a cell. A projection's spread is the sum of independent parts:
//!
//! * the averaged forms' disagreement there ([`problem_traffic::selection_spread`]);
//! * the **lack of fit** `lambda`: the root mean square of the model's error at the cells
//!   it was fitted on (against each cell's measured demand, read between its steps), which
//!   holds the measurement's noise and reading as well;
//! * the model's **growth** `tau` per doubling of the distance projected: d =
//!   sqrt(d_p^2 + d_n^2), the doublings beyond the largest fitted size and problem, in
//!   quadrature. `tau` is the prior of one parameter ([`TRAFFIC_PRIOR`],
//!   learned across programs on the size alone) pooled with this series' own checks:
//!   each check's mean error beyond the lack of fit, against its doublings.
//!
//! The interval is Student's t for the pooled degrees of freedom. The checks' own
//! intervals use the prior alone, so that whether they cover their held-out measurement
//! is a test of the interval, not of a fit to it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::data::problem::ProblemAxis;
use crate::method::demand::{from_logit, logit};
use crate::method::problem_traffic::{self, Cell, Fit};
use crate::method::quantiles::{self, Z90};
use crate::trust::backtest::{misses_allowed, TOLERANCE_PP};
use crate::trust::model_error::{Prior, TRAFFIC_PRIOR};

/// The level of every interval stated.
pub const LEVEL: f64 = 0.90;

/// What a check holds out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldOut {
    /// The largest size, at every problem: projected along p.
    Size,
    /// The largest problem, at every size: projected along n.
    Problem,
    /// Both, fitted on the rest: projected to the corner, along both.
    Both,
}

impl HeldOut {
    pub fn words(self) -> &'static str {
        match self {
            HeldOut::Size => "the largest size",
            HeldOut::Problem => "the largest problem",
            HeldOut::Both => "both",
        }
    }
}

/// A measured demand and the standard error of its noise (percentage points, from its
/// bootstrap interval; 0 where it has none), keyed by (procs, the problem's size as
/// bits, level index): only those read between two steps and above their size's noise
/// floor.
pub type Measured = BTreeMap<(u32, u64, usize), (f64, f64)>;

/// One projection to a (p, n), with its interval and what was measured there.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Target {
    pub procs: u32,
    /// The problem's value (as the series stores it) and its size.
    pub problem: f64,
    pub size: f64,
    pub cti: f64,
    /// The projected demand, percent of the link, and its interval.
    pub bw_pct: f64,
    pub low: f64,
    pub high: f64,
    /// Doublings beyond the fitted data, in quadrature over both parameters.
    pub doublings: f64,
    /// The demand measured there (null where none was, or it was censored).
    pub measured: Option<f64>,
    /// projected - measured, percentage points; and in logit units.
    pub error_pp: Option<f64>,
    pub logit_error: Option<f64>,
    /// The measurement's own noise (standard error, pp).
    pub noise_pp: Option<f64>,
    /// The measurement lies within the interval.
    pub inside: Option<bool>,
    /// Off by more than [`TOLERANCE_PP`] beyond the measurement's noise (as a check of
    /// one parameter misses).
    pub miss: Option<bool>,
}

/// One check of the backtest.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SurfaceCheck {
    pub held_out: HeldOut,
    /// Cells it was fitted on.
    pub fitted_cells: usize,
    pub targets: Vec<Target>,
    /// Why it could not be made, when it could not.
    pub why_not: Option<String>,
}

impl SurfaceCheck {
    /// The mean logit error of its measured targets.
    pub fn mean_logit_error(&self) -> Option<f64> {
        let e: Vec<f64> = self.targets.iter().filter_map(|t| t.logit_error).collect();
        (!e.is_empty()).then(|| e.iter().sum::<f64>() / e.len() as f64)
    }

    /// The largest |error| of its measured targets, percentage points.
    pub fn worst_pp(&self) -> Option<f64> {
        self.targets
            .iter()
            .filter_map(|t| t.error_pp.map(f64::abs))
            .reduce(f64::max)
    }
}

/// How far a projection may be off (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SurfaceError {
    /// Root mean square logit error at the fitted cells.
    pub lack_of_fit: f64,
    /// Growth per doubling, pooled; this series' own estimate where it has checks.
    pub tau: f64,
    pub tau_own: Option<f64>,
    /// Checks with a measured target that projected beyond the data.
    pub checks: usize,
    pub prior: Prior,
    /// Degrees of freedom of the interval.
    pub df: f64,
}

impl SurfaceError {
    /// The prior alone, with the lack of fit `lambda`.
    fn prior_only(lambda: f64) -> SurfaceError {
        SurfaceError {
            lack_of_fit: lambda,
            tau: TRAFFIC_PRIOR.sd,
            tau_own: None,
            checks: 0,
            prior: TRAFFIC_PRIOR,
            df: TRAFFIC_PRIOR.df,
        }
    }

    /// Half the interval's width in logit units at `doublings`, with the forms'
    /// disagreement `selection`.
    pub fn half_width(&self, selection: f64, doublings: f64) -> f64 {
        let sd =
            (selection.powi(2) + self.lack_of_fit.powi(2) + (self.tau * doublings).powi(2)).sqrt();
        quantiles::t(LEVEL, self.df) * sd
    }
}

/// Doublings from the fitted data's largest (p, n) to a target, in quadrature.
pub fn doublings(fitted: (f64, f64), p: f64, n: f64) -> f64 {
    let dp = (p / fitted.0).log2().max(0.0);
    let dn = (n / fitted.1).log2().max(0.0);
    dp.hypot(dn)
}

/// The largest p and n of `cells`.
pub fn extent(cells: &[Cell]) -> (f64, f64) {
    cells.iter().fold((0.0, 0.0), |(p, n), c| {
        (p.max(c.procs as f64), n.max(c.size))
    })
}

/// What the checks and the interval are made from.
pub struct Checker<'a> {
    pub cells: &'a [Cell],
    pub measured: &'a Measured,
    pub capacity: f64,
    pub levels: &'a [f64],
    pub axis: &'a ProblemAxis,
}

impl Checker<'_> {
    /// The root mean square logit error of `fit` at `cells`, against the demands
    /// measured there; 0 where none was.
    pub fn lack_of_fit(&self, fit: &Fit, cells: &[Cell]) -> f64 {
        let mut errors = Vec::new();
        for c in cells {
            let Some(ls) = problem_traffic::log_share(fit, self.capacity, c.procs as f64, c.size)
            else {
                continue;
            };
            for (i, &level) in self.levels.iter().enumerate() {
                if let Some(&(m, _)) = self.measured.get(&(c.procs, c.size.to_bits(), i)) {
                    errors.push(logit(problem_traffic::demand(ls, level)) - logit(m));
                }
            }
        }
        crate::method::stats::rms(&errors)
    }

    /// The projections of `fit` (fitted on `fitted`) to (p, n) at every level, with
    /// intervals by `error` and what was measured there.
    pub fn targets(
        &self,
        fit: &Fit,
        fitted: &[Cell],
        error: &SurfaceError,
        at: &[(u32, f64)],
    ) -> Vec<Target> {
        let data = extent(fitted);
        let mut out = Vec::new();
        for &(procs, size) in at {
            let p = procs as f64;
            let (Some(ls), Some(sel)) = (
                problem_traffic::log_share(fit, self.capacity, p, size),
                problem_traffic::selection_spread(fit, p, size),
            ) else {
                continue;
            };
            let d = doublings(data, p, size);
            let half = error.half_width(sel, d);
            for (i, &level) in self.levels.iter().enumerate() {
                let x = logit(problem_traffic::demand(ls, level));
                let bw = from_logit(x);
                let found = self.measured.get(&(procs, size.to_bits(), i)).copied();
                let measured = found.map(|m| m.0);
                let noise = found.map(|m| m.1);
                let (low, high) = (from_logit(x - half), from_logit(x + half));
                out.push(Target {
                    procs,
                    problem: self.axis.value(size),
                    size,
                    cti: level,
                    bw_pct: bw,
                    low,
                    high,
                    doublings: d,
                    measured,
                    error_pp: measured.map(|m| bw - m),
                    logit_error: measured.map(|m| x - logit(m)),
                    noise_pp: noise,
                    inside: measured.map(|m| (low..=high).contains(&m)),
                    miss: found.map(|(m, se)| (bw - m).abs() - TOLERANCE_PP > Z90 * se),
                });
            }
        }
        out
    }

    /// The three checks, each fitted without what it holds out and projected to it,
    /// with intervals by the prior alone; `reach`: the farthest target asked, so that the
    /// forms kept are those the answer may keep.
    pub fn checks(&self, reach: (f64, f64)) -> Vec<SurfaceCheck> {
        let (p_max, n_max) = extent(self.cells);
        [HeldOut::Size, HeldOut::Problem, HeldOut::Both]
            .into_iter()
            .map(|held_out| {
                let out = |c: &Cell| match held_out {
                    HeldOut::Size => c.procs as f64 == p_max,
                    HeldOut::Problem => c.size == n_max,
                    HeldOut::Both => c.procs as f64 == p_max || c.size == n_max,
                };
                let fitted: Vec<Cell> = self.cells.iter().copied().filter(|c| !out(c)).collect();
                let at: Vec<(u32, f64)> = match held_out {
                    HeldOut::Both => vec![(p_max as u32, n_max)],
                    _ => self
                        .cells
                        .iter()
                        .filter(|c| out(c))
                        .map(|c| (c.procs, c.size))
                        .collect(),
                };
                let reach = (reach.0.max(p_max), reach.1.max(n_max));
                match problem_traffic::fit(&fitted, reach) {
                    Some(fit) => {
                        let error = SurfaceError::prior_only(self.lack_of_fit(&fit, &fitted));
                        SurfaceCheck {
                            held_out,
                            fitted_cells: fitted.len(),
                            targets: self.targets(&fit, &fitted, &error, &at),
                            why_not: None,
                        }
                    }
                    None => SurfaceCheck {
                        held_out,
                        fitted_cells: fitted.len(),
                        targets: Vec::new(),
                        why_not: Some(format!(
                            "{} cell(s) left to fit on: a model in two parameters needs at least 3 with traffic and a baseline (and more sizes and problems to tell forms apart)",
                            fitted.len()
                        )),
                    },
                }
            })
            .collect()
    }
}

/// The error of the answer's projections: the lack of fit `lambda` of the fit on every
/// cell, and the growth per doubling pooled from the prior and `checks`.
pub fn estimate(checks: &[SurfaceCheck], lambda: f64) -> SurfaceError {
    let mut num = 0.0;
    let mut den = 0.0;
    let mut n = 0usize;
    for c in checks {
        let (Some(e), Some(d)) = (
            c.mean_logit_error(),
            c.targets
                .iter()
                .filter(|t| t.logit_error.is_some())
                .map(|t| t.doublings)
                .reduce(f64::max),
        ) else {
            continue;
        };
        if d <= 0.0 {
            continue;
        }
        num += (e * e - lambda * lambda).max(0.0);
        den += d * d;
        n += 1;
    }
    let prior = TRAFFIC_PRIOR;
    let tau_own = (n > 0).then(|| (num / den).sqrt());
    let tau = match tau_own {
        Some(own) => {
            ((prior.df * prior.sd.powi(2) + n as f64 * own.powi(2)) / (prior.df + n as f64)).sqrt()
        }
        None => prior.sd,
    };
    SurfaceError {
        lack_of_fit: lambda,
        tau,
        tau_own,
        checks: n,
        prior,
        df: prior.df + n as f64,
    }
}

/// The backtest's verdict in one word and why, as one parameter's: FAILED when more of
/// the checks' targets miss (by more than [`TOLERANCE_PP`] points beyond the measurement's
/// noise) than chance explains ([`misses_allowed`]); TRUSTED when at least two checks had
/// a measured target and they did not; UNTESTED otherwise.
pub fn verdict(checks: &[SurfaceCheck]) -> (&'static str, String) {
    let made = checks.iter().filter(|c| c.worst_pp().is_some()).count();
    let targets: Vec<(&SurfaceCheck, &Target)> = checks
        .iter()
        .flat_map(|c| c.targets.iter().map(move |t| (c, t)))
        .filter(|(_, t)| t.miss.is_some())
        .collect();
    let misses: Vec<&(&SurfaceCheck, &Target)> = targets
        .iter()
        .filter(|(_, t)| t.miss == Some(true))
        .collect();
    let allowed = misses_allowed(targets.len());
    if misses.len() > allowed {
        let (c, t) = misses[0];
        return (
            "FAILED",
            format!(
                "{} of {} projections to held-out cells miss by more than {TOLERANCE_PP} points beyond the measurement's noise (chance explains {allowed}); the first: held out {}, {} procs at CTI {}%, {:+.1} points",
                misses.len(),
                targets.len(),
                c.held_out.words(),
                t.procs,
                t.cti,
                t.error_pp.unwrap_or(f64::NAN)
            ),
        );
    }
    if made < 2 {
        return (
            "UNTESTED",
            format!(
                "{made} of 3 checks had a measured demand to compare with (at least 2 are needed): measure more sizes or problems"
            ),
        );
    }
    (
        "TRUSTED",
        format!(
            "{made} checks, {} projections to held-out cells, {} missing by more than {TOLERANCE_PP} points beyond the measurement's noise (chance explains {allowed})",
            targets.len(),
            misses.len()
        ),
    )
}
