//! How far a projection's model may be off at a size nobody measured, from how far it was
//! off where it could be checked.
//!
//! Errors are counted in logit units of the demand as a share of the link, ln(w/(1-w)):
//! for the traffic model that is ln R minus a constant (R = k V / (C T(100%))), so a
//! relative error of any part is an additive error there, and an interval built there
//! never leaves 0-100% of the link. Two components, each estimated beyond the noise that
//! the projection's own bootstrap interval already carries:
//!
//! * **lack of fit**, `lambda(p)`: the model against the measured demands of the very
//!   sizes it was fitted on (a CTI curve not quite the model's shape: measured at 4-8
//!   nodes of the demo, the curve's slope in 1/w wanders by up to 25% from one bandwidth
//!   step to the next, the same in every run, while the model has one slope per size).
//!   It is estimated per fitted size (the root mean square over the levels, beyond the
//!   measured demands' noise) and, since it may grow with the size (it did in the demo:
//!   0 at 2 nodes, 0.05 at 6, 0.1 at the held-out 8), as a straight line in log2 p
//!   through those sizes, never falling, never below what the largest fitted size shows;
//! * **growth**, `tau` per doubling of the size: every backtest check's error beyond its
//!   noise and the lack of fit at its target, per doubling projected (error^2 - noise^2 -
//!   lambda(target)^2, over doublings^2, averaged over the checks).
//!
//! The model error at a target p, d doublings from the largest fitted size, is then
//! t x sqrt(lambda(p)^2 + tau^2 d^2), with Student's t(0.95) for as many degrees of
//! freedom as there are checks: the 90% half-width of a zero-mean error whose spread was
//! estimated from those checks.

use serde::Serialize;

use super::backtest::{Check, Model};
use super::demand::Censored;

/// What the backtest and the fit say of one model's error.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ErrorModel {
    /// The error at the fitted sizes themselves beyond their noise (logit units, one
    /// standard deviation): at the largest fitted size (`lack_of_fit`), and how much more
    /// per doubling of the size (`lack_of_fit_growth`).
    pub lack_of_fit: f64,
    pub lack_of_fit_growth: f64,
    /// The largest fitted size.
    pub largest: u32,
    /// How much more it errs per doubling of the size projected (logit units, one
    /// standard deviation).
    pub per_doubling: f64,
    /// The Student's t quantile the half-width uses, and its degrees of freedom.
    pub t: f64,
    pub df: usize,
    /// The checks it was estimated from (uncensored, above the noise, not held out), the
    /// sizes they project to, and the fitted sizes' residuals behind `lack_of_fit`.
    pub checks: usize,
    pub sizes: usize,
    pub residuals: usize,
}

impl ErrorModel {
    /// The lack of fit at `p` (one standard deviation, logit units).
    pub fn lack_of_fit_at(&self, p: f64) -> f64 {
        let up = (p / self.largest.max(1) as f64).log2().max(0.0);
        self.lack_of_fit + self.lack_of_fit_growth * up
    }

    /// The model error's 90% half-width, logit units, at `p`.
    pub fn half_width(&self, p: f64) -> f64 {
        let doublings = (p / self.largest.max(1) as f64).log2().abs();
        self.t * self.lack_of_fit_at(p).hypot(self.per_doubling * doublings)
    }
}

/// The lack of fit per fitted size from `residuals` (size, error, noise), and its line in
/// log2 p: (at the largest size, growth per doubling), neither below 0 and the first
/// never below what the largest size shows.
fn lack_of_fit(residuals: &[(u32, f64, f64)]) -> (f64, f64, u32) {
    let mut per_size: std::collections::BTreeMap<u32, (f64, usize)> = Default::default();
    for &(p, e, n) in residuals {
        let r = per_size.entry(p).or_default();
        r.0 += e * e - n * n;
        r.1 += 1;
    }
    let pts: Vec<(f64, f64)> = per_size
        .iter()
        .map(|(&p, &(ss, n))| ((p as f64).log2(), (ss / n as f64).max(0.0).sqrt()))
        .collect();
    let Some(&(x_last, y_last)) = pts.last() else {
        return (0.0, 0.0, 1);
    };
    let largest = *per_size.keys().last().unwrap_or(&1);
    if pts.len() < 2 {
        return (y_last, 0.0, largest);
    }
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
    let at_last = (my + slope * (x_last - mx)).max(y_last);
    (at_last, slope, largest)
}

/// Student's t quantile at 0.95 for `df` degrees of freedom (the table to 10, then
/// 1.645 + 1.524/df + 1.42/df^2, within 0.001 of it).
pub fn t95(df: usize) -> f64 {
    const T: [f64; 10] = [
        6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
    ];
    match df {
        0 => f64::INFINITY,
        1..=10 => T[df - 1],
        _ => 1.645 + 1.524 / df as f64 + 1.42 / (df * df) as f64,
    }
}

/// `model`'s error from its backtest `checks` and `residuals`, the (size, error, noise)
/// in logit units of its fit at each fitted size and level whose demand was measured;
/// `None` without a backtest check to estimate the growth from (held-out sizes never
/// count: the interval must not know the truth it is compared with).
pub fn estimate(
    checks: &[Check],
    model: Model,
    residuals: &[(u32, f64, f64)],
) -> Option<ErrorModel> {
    let evidence: Vec<&Check> = checks
        .iter()
        .filter(|c| {
            c.model == model
                && !c.held_out
                && !c.below_noise
                && c.measured_censored == Censored::None
                && c.doublings > 0.0
                && c.error_logit.is_finite()
        })
        .collect();
    if evidence.is_empty() {
        return None;
    }
    let (lambda, growth, largest) = lack_of_fit(residuals);
    // The lack of fit at a check's target, on the line through the fitted sizes' own.
    let lambda_at = |p: u32| lambda + growth * (p as f64 / largest.max(1) as f64).log2();
    let tau2 = (evidence
        .iter()
        .map(|c| {
            (c.error_logit.powi(2) - c.noise_logit.powi(2) - lambda_at(c.procs).max(0.0).powi(2))
                / c.doublings.powi(2)
        })
        .sum::<f64>()
        / evidence.len() as f64)
        .max(0.0);
    let mut sizes: Vec<u32> = evidence.iter().map(|c| c.procs).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let df = evidence.len();
    Some(ErrorModel {
        lack_of_fit: lambda,
        lack_of_fit_growth: growth,
        largest,
        per_doubling: tau2.sqrt(),
        t: t95(df),
        df,
        checks: evidence.len(),
        sizes: sizes.len(),
        residuals: residuals.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::demand;

    fn check(procs: u32, from: Vec<u32>, error_logit: f64, noise_logit: f64) -> Check {
        let largest = *from.last().unwrap();
        Check {
            model: Model::Traffic,
            procs,
            cti: 10.0,
            doublings: (procs as f64 / largest as f64).log2(),
            from,
            projected: demand::from_logit(error_logit),
            interval: None,
            measured: 50.0,
            measured_censored: Censored::None,
            measured_interval: None,
            below_noise: false,
            error_pp: demand::from_logit(error_logit) - 50.0,
            error_rel: 0.0,
            error_is_bound: false,
            noise_pp: 0.0,
            error_logit,
            noise_logit,
            within_noise: false,
            miss: false,
            held_out: false,
        }
    }

    #[test]
    fn the_growth_is_what_the_checks_err_beyond_noise_and_lack_of_fit() {
        // One doubling each (4 from 2, 8 from 4): errors 0.3 and 0.4 with noise 0.1,
        // residuals at the fitted sizes 2, 4 and 8 of 0.05 with no noise.
        let checks = [
            check(4, vec![1, 2], 0.3, 0.1),
            check(8, vec![2, 4], -0.4, 0.1),
        ];
        let flat = [(2, 0.05, 0.0), (4, -0.05, 0.0), (8, 0.05, 0.0)];
        let e = estimate(&checks, Model::Traffic, &flat).unwrap();
        assert!((e.lack_of_fit - 0.05).abs() < 1e-12, "{e:?}");
        assert!(e.lack_of_fit_growth.abs() < 1e-12, "{e:?}");
        let tau2 = (0.09 - 0.01 - 0.0025 + 0.16 - 0.01 - 0.0025) / 2.0;
        assert!((e.per_doubling - f64::sqrt(tau2)).abs() < 1e-12, "{e:?}");
        assert_eq!((e.df, e.sizes, e.checks), (2, 2, 2));
        // t(0.95, 2) x sqrt(lambda^2 + tau^2 d^2) at two doublings beyond 8.
        let want = 2.920 * (0.0025 + tau2 * 4.0).sqrt();
        assert!((e.half_width(32.0) - want).abs() < 1e-9);
        // A lack of fit that grows with the size (0, 0.05, 0.1 at 2, 4, 8) grows on:
        // 0.15 at 16.
        let growing = [(2, 0.0, 0.0), (4, 0.05, 0.0), (8, -0.1, 0.0)];
        let e = estimate(&checks, Model::Traffic, &growing).unwrap();
        assert!((e.lack_of_fit - 0.1).abs() < 1e-12, "{e:?}");
        assert!((e.lack_of_fit_at(16.0) - 0.15).abs() < 1e-12, "{e:?}");
        // Noise explains it all: no growth, and no model error beyond the fit's.
        let quiet = [check(4, vec![1, 2], 0.1, 0.2)];
        let e = estimate(&quiet, Model::Traffic, &[]).unwrap();
        assert_eq!((e.per_doubling, e.lack_of_fit), (0.0, 0.0));
        // Held-out sizes and other models' checks are no evidence.
        let held = Check {
            held_out: true,
            ..check(4, vec![1, 2], 0.3, 0.1)
        };
        let dc = Check {
            model: Model::Dc,
            ..check(4, vec![1, 2], 0.3, 0.1)
        };
        assert!(estimate(&[held, dc], Model::Traffic, &[]).is_none());
    }
}
