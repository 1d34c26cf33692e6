//! How far a projected latency tolerance can be trusted: its interval, and the backtest
//! that holds out the largest size.
//!
//! Counted in ln of the tolerance, where the parts' relative errors add: the averaged
//! forms' disagreement, the **lack of fit** (the root mean square ln error of the model
//! at the fitted sizes against their measured tolerances, which holds the measurement's
//! noise and reading), and the growth per doubling beyond the data, the traffic model's
//! prior ([`TRAFFIC_PRIOR`]: learned on bandwidth demand, not on latency; no program's
//! latency checks have been pooled into it). The check projects with the prior alone, so
//! whether it covers the held-out measurement tests the interval. TRUSTED: the check had
//! a measured tolerance at some level, and every one lay within its interval and within
//! a factor [`TOLERANCE_FACTOR`] of the projection.

use serde::Serialize;

use crate::method::demand::Censored;
use crate::method::latency::{self, Fit, Parts, Tolerance};
use crate::method::quantiles;
use crate::trust::model_error::TRAFFIC_PRIOR;

/// The interval's level.
pub const LEVEL: f64 = 0.90;

/// A check within this factor of what was measured passes (either way).
pub const TOLERANCE_FACTOR: f64 = 1.5;

/// The tolerance projected to one size at one level.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatencyProjection {
    pub procs: u32,
    pub cti: f64,
    /// The largest added one-way latency within the level, us, and its interval.
    pub latency_us: f64,
    pub low: f64,
    pub high: f64,
    /// Doublings beyond the largest fitted size.
    pub doublings: f64,
    /// The tolerance measured there (uncensored), and projected / measured - 1.
    pub measured: Option<f64>,
    pub error_rel: Option<f64>,
    pub inside: Option<bool>,
}

/// The root mean square ln error of `fit` at the `fitted` sizes against their measured
/// tolerances (0 where none was).
pub fn lack_of_fit(fit: &Fit, fitted: &[Parts], measured: &[Tolerance]) -> f64 {
    let errors: Vec<f64> = measured
        .iter()
        .filter(|t| t.censored == Censored::None && fitted.iter().any(|s| s.procs == t.procs))
        .filter_map(|t| {
            Some(latency::log_tolerance(fit, t.procs as f64, t.cti)? - t.latency_us.ln())
        })
        .collect();
    crate::method::stats::rms(&errors)
}

/// The projections of `fit` (on `fitted`, with lack of fit `lambda`) to `sizes` at
/// `levels`, with what was measured there.
pub fn project(
    fit: &Fit,
    fitted: &[Parts],
    lambda: f64,
    sizes: &[u32],
    levels: &[f64],
    measured: &[Tolerance],
) -> Vec<LatencyProjection> {
    let largest = fitted.iter().map(|s| s.procs).max().unwrap_or(1) as f64;
    let mut out = Vec::new();
    for &p in sizes {
        let pf = p as f64;
        let Some(sel) = latency::selection_spread(fit, pf) else {
            continue;
        };
        let d = (pf / largest).log2().max(0.0);
        let half = quantiles::t(LEVEL, TRAFFIC_PRIOR.df)
            * (sel.powi(2) + lambda.powi(2) + (TRAFFIC_PRIOR.sd * d).powi(2)).sqrt();
        for &level in levels {
            let Some(x) = latency::log_tolerance(fit, pf, level) else {
                continue;
            };
            let m = measured
                .iter()
                .find(|t| t.procs == p && t.cti == level && t.censored == Censored::None)
                .map(|t| t.latency_us);
            let (low, high) = ((x - half).exp(), (x + half).exp());
            out.push(LatencyProjection {
                procs: p,
                cti: level,
                latency_us: x.exp(),
                low,
                high,
                doublings: d,
                measured: m,
                error_rel: m.map(|m| x.exp() / m - 1.0),
                inside: m.map(|m| (low..=high).contains(&m)),
            });
        }
    }
    out
}

/// The verdict of the backtest `checks` (the largest size projected from the others).
pub fn verdict(checks: &[LatencyProjection], why_not: Option<&str>) -> (&'static str, String) {
    let measured: Vec<&LatencyProjection> =
        checks.iter().filter(|c| c.measured.is_some()).collect();
    if measured.is_empty() {
        return (
            "UNTESTED",
            why_not
                .unwrap_or("no tolerance was measured at the largest size (every level censored): measure larger latency steps there")
                .to_string(),
        );
    }
    let bad = measured.iter().find(|c| {
        c.inside == Some(false)
            || c.error_rel
                .is_some_and(|e| (1.0 + e) > TOLERANCE_FACTOR || (1.0 + e) < 1.0 / TOLERANCE_FACTOR)
    });
    match bad {
        Some(c) => (
            "FAILED",
            format!(
                "{} procs projected from the smaller sizes: {:.0} us at CTI {}%, {:.0} measured{}",
                c.procs,
                c.latency_us,
                c.cti,
                c.measured.unwrap_or(f64::NAN),
                if c.inside == Some(false) {
                    ", outside its interval"
                } else {
                    ""
                }
            ),
        ),
        None => (
            "TRUSTED",
            format!(
                "{} procs projected from the smaller sizes: {} level(s) measured, each inside its interval and within a factor {TOLERANCE_FACTOR}",
                measured[0].procs,
                measured.len()
            ),
        ),
    }
}
