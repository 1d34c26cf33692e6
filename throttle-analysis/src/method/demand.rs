//! From completion times to bandwidth demand (the ICPE 2016 paper; docs/method.md).
//!
//! CTI per bandwidth from medians; the bandwidth a CTI level needs, with censoring and
//! the two measured steps around it, read between them along a straight line in 1/w
//! ([`Interp::Inverse`], how transfer time grows) or in w ([`Interp::Linear`], as the
//! paper draws it); the demand constant over pairs of sizes; projection to larger sizes;
//! saturation size.

use serde::Serialize;

use crate::method::stats::pav_non_increasing;

/// How a demand figure is bounded by the measurements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Censored {
    /// Interpolated between two measured steps.
    None,
    /// Even the lowest step kept CTI within the level: the demand is at most that step.
    Below,
    /// Every step under 100% exceeded the level: interpolated up to 100% (uncertain).
    Above,
}

impl Censored {
    /// The figure's mark: `<`, `>` or nothing.
    pub fn mark(self) -> &'static str {
        match self {
            Censored::None => "",
            Censored::Below => "<",
            Censored::Above => ">",
        }
    }
}

/// How the demand is read between the two measured steps around a CTI level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Interp {
    /// A straight line in 1/w: the time a transfer takes grows as 1/w, and so does the
    /// CTI of a program whose exposed transfers do not change with w. The default: on
    /// the dense grids in experiments/2026-11-25-demand-search.md it was closer to the
    /// dense demand than the straight line in w.
    #[default]
    Inverse,
    /// A straight line in w between the two steps (the paper's reading).
    Linear,
}

impl Interp {
    /// The bandwidth a fraction `f` (0..1) of the way from step `b0` to step `b1`.
    pub fn between(self, b0: f64, b1: f64, f: f64) -> f64 {
        match self {
            Interp::Linear => b0 + f * (b1 - b0),
            Interp::Inverse => 1.0 / (1.0 / b0 + f * (1.0 / b1 - 1.0 / b0)),
        }
    }

    /// The word `--interpolation` takes and the output prints.
    pub fn name(self) -> &'static str {
        match self {
            Interp::Inverse => "inverse",
            Interp::Linear => "linear",
        }
    }

    /// What the reading is, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Interp::Inverse => "straight lines in 1/w between measured steps",
            Interp::Linear => "straight lines in w between measured steps (the paper's)",
        }
    }
}

impl std::str::FromStr for Interp {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "inverse" => Ok(Interp::Inverse),
            "linear" => Ok(Interp::Linear),
            other => Err(format!(
                "`{other}` is not an interpolation: inverse (a straight line in 1/w) or linear (in w)"
            )),
        }
    }
}

/// Where a CTI level is reached on a curve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reading {
    /// The bandwidth, percent (for `Below`: the lowest step; the truth is at most that).
    pub bw: f64,
    pub censored: Censored,
    /// The two measured steps the level lies between (100% counts as a step, with CTI 0);
    /// `None` below the lowest step.
    pub between: Option<(f64, f64)>,
}

/// CTI in percent: (T(bw) - T(100)) / T(100) * 100.
pub fn cti(t_bw: f64, t_100: f64) -> f64 {
    (t_bw - t_100) / t_100 * 100.0
}

/// The curve of one size: measured bandwidths (ascending, below 100) with their CTI.
#[derive(Clone, Debug)]
pub struct CtiCurve {
    pub bw: Vec<f64>,
    pub cti: Vec<f64>,
}

impl CtiCurve {
    /// The curve made non-increasing in bandwidth (CTI = 0 at 100 appended), and whether
    /// that changed anything (non-monotone data).
    pub fn monotone(&self) -> (Vec<f64>, Vec<f64>, bool) {
        let mut bw = self.bw.clone();
        let mut y = self.cti.clone();
        bw.push(100.0);
        y.push(0.0);
        let fixed = pav_non_increasing(&y);
        let changed = fixed.iter().zip(&y).any(|(a, b)| (a - b).abs() > 1e-12);
        (bw, fixed, changed)
    }

    /// Lowest bandwidth (percent) at which CTI <= `level` (percent), read between the
    /// steps around it as `interp` says.
    pub fn demand(&self, level: f64, interp: Interp) -> Option<Reading> {
        let (bw, y, _) = self.monotone();
        if bw.len() < 2 {
            return None;
        }
        if y[0] <= level {
            return Some(Reading {
                bw: bw[0],
                censored: Censored::Below,
                between: None,
            });
        }
        // y is non-increasing and ends at 0 <= level: find the last step above the level.
        let i = (0..bw.len() - 1).rev().find(|&i| y[i] > level)?;
        let (b0, b1, y0, y1) = (bw[i], bw[i + 1], y[i], y[i + 1]);
        let at = interp.between(b0, b1, (y0 - level) / (y0 - y1));
        let censored = if i + 1 == bw.len() - 1 {
            Censored::Above
        } else {
            Censored::None
        };
        Some(Reading {
            bw: at,
            censored,
            between: Some((b0, b1)),
        })
    }
}

/// The logit of a demand `pct` (percent of the link): ln(w / (1 - w)), with w clamped to
/// 0.05-99.95% (a projection at or past the link counts as 99.95%: its error is then a
/// bound). Errors and intervals of projections are added up on this scale, where a
/// relative error of the transfer's share R is an additive error and no interval leaves
/// 0-100%.
pub fn logit(pct: f64) -> f64 {
    let w = pct.clamp(0.05, 99.95) / 100.0;
    (w / (1.0 - w)).ln()
}

/// The demand (percent) whose logit is `x`.
pub fn from_logit(x: f64) -> f64 {
    100.0 / (1.0 + (-x).exp())
}

/// DC(c, p1, p2) = (BW(c,p1) / BW(c,p2)) * sqrt(p2 / p1), for p1 > p2.
pub fn demand_constant(bw_p1: f64, bw_p2: f64, p1: f64, p2: f64) -> f64 {
    bw_p1 / bw_p2 * (p2 / p1).sqrt()
}

/// BW(c, p') = BW(c, p*) * DC * sqrt(p' / p*).
pub fn project(bw_star: f64, dc: f64, p_star: f64, p_new: f64) -> f64 {
    bw_star * dc * (p_new / p_star).sqrt()
}

/// p_sat = p* * (100 / (DC * BW(c, p*)))^2: where the projected demand reaches 100%.
pub fn saturation(bw_star: f64, dc: f64, p_star: f64) -> f64 {
    p_star * (100.0 / (dc * bw_star)).powi(2)
}

/// The first size from `from` up to 2^20 processes where `gap` (of the size) reaches 0,
/// fractional: between the two sizes of a grid of 64 per doubling where it changes sign,
/// straight in log p. `None` when it does not, or when `gap` has no value first.
pub fn first_crossing(from: f64, gap: impl Fn(f64) -> Option<f64>) -> Option<f64> {
    let mut last = (from, gap(from)?);
    if last.1 >= 0.0 {
        return Some(from);
    }
    let steps = ((1u64 << 20) as f64 / from).log2().max(0.0) * 64.0;
    for i in 1..=steps.ceil() as usize {
        let p = from * 2f64.powf(i as f64 / 64.0);
        let g = gap(p)?;
        if g >= 0.0 {
            let f = -last.1 / (g - last.1);
            return Some((last.0.ln() + f * (p.ln() - last.0.ln())).exp());
        }
        last = (p, g);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(pts: &[(f64, f64)]) -> CtiCurve {
        CtiCurve {
            bw: pts.iter().map(|p| p.0).collect(),
            cti: pts.iter().map(|p| p.1).collect(),
        }
    }

    #[test]
    fn cti_by_hand() {
        assert!((cti(11.5, 10.0) - 15.0).abs() < 1e-12);
        assert_eq!(cti(10.0, 10.0), 0.0);
    }

    #[test]
    fn demand_interpolates_linearly_between_bracketing_steps() {
        // CTI 30% at 20, 12% at 30, 4% at 40: level 10% lies between 30 and 40:
        // 30 + (12 - 10) / (12 - 4) * 10 = 32.5.
        let c = curve(&[(20.0, 30.0), (30.0, 12.0), (40.0, 4.0)]);
        assert_eq!(
            c.demand(10.0, Interp::Linear),
            Some(Reading {
                bw: 32.5,
                censored: Censored::None,
                between: Some((30.0, 40.0))
            })
        );
        // Level 20%: between 20 and 30: 20 + (30 - 20) / (30 - 12) * 10 = 25.555...
        let r = c.demand(20.0, Interp::Linear).unwrap();
        assert!((r.bw - (20.0 + 10.0 / 18.0 * 10.0)).abs() < 1e-12);
        assert_eq!(
            (r.censored, r.between),
            (Censored::None, Some((20.0, 30.0)))
        );
    }

    #[test]
    fn demand_interpolates_in_inverse_bandwidth_by_default() {
        // The case: CTI 29% at 50%, level 15%: 14/29 of the way to 100%.
        // In w: 50 + 14/29 * 50 = 74.14; in 1/w: 1 / (1/50 - 14/29 * (1/50 - 1/100)) = 65.91.
        let c = curve(&[(50.0, 29.0)]);
        let linear = c.demand(15.0, Interp::Linear).unwrap().bw;
        let inverse = c.demand(15.0, Interp::default()).unwrap().bw;
        assert!((linear - 74.1379).abs() < 1e-3, "{linear}");
        assert!((inverse - 65.9091).abs() < 1e-3, "{inverse}");
        // A curve that is exactly CTI = a (1/w - 1) is read exactly in 1/w, not in w.
        let a = 8.0;
        let exact = |w: f64| a * (100.0 / w - 1.0);
        let c = curve(&[(20.0, exact(20.0)), (50.0, exact(50.0))]);
        let truth = 100.0 / (1.0 + 10.0 / a);
        let r = c.demand(10.0, Interp::Inverse).unwrap();
        assert!((r.bw - truth).abs() < 1e-9, "{} vs {truth}", r.bw);
        assert!(c.demand(10.0, Interp::Linear).unwrap().bw - truth > 1.0);
        assert_eq!("inverse".parse::<Interp>(), Ok(Interp::Inverse));
        assert!("cubic".parse::<Interp>().is_err());
    }

    #[test]
    fn demand_is_censored_below_when_the_lowest_step_is_good_enough() {
        let c = curve(&[(20.0, 3.0), (40.0, 1.0)]);
        let r = c.demand(5.0, Interp::Linear).unwrap();
        assert_eq!((r.bw, r.censored, r.between), (20.0, Censored::Below, None));
    }

    #[test]
    fn demand_is_censored_above_when_every_step_is_too_slow() {
        // 40% already costs 25%: level 5% lies between 40 (25) and 100 (0): 40 + 20/25*60 = 88.
        let c = curve(&[(20.0, 60.0), (40.0, 25.0)]);
        let r = c.demand(5.0, Interp::Linear).unwrap();
        assert_eq!((r.bw, r.censored), (88.0, Censored::Above));
        assert_eq!(r.between, Some((40.0, 100.0)));
    }

    #[test]
    fn non_monotone_curves_are_fixed_before_interpolating() {
        // 30% slower than 20%? Pool them: (20 + 10) / 2 = 15 at both.
        let c = curve(&[(20.0, 10.0), (30.0, 20.0), (40.0, 2.0)]);
        let (_, y, changed) = c.monotone();
        assert!(changed);
        assert_eq!(y, vec![15.0, 15.0, 2.0, 0.0]);
        // Level 5: between 30 (15) and 40 (2): 30 + 10/13*10.
        let bw = c.demand(5.0, Interp::Linear).unwrap().bw;
        assert!((bw - (30.0 + 100.0 / 13.0)).abs() < 1e-12);
    }

    #[test]
    fn demand_constant_projection_and_saturation_by_hand() {
        // BW(16 procs) = 40, BW(4 procs) = 25: DC = 1.6 * sqrt(4/16) = 0.8.
        let dc = demand_constant(40.0, 25.0, 16.0, 4.0);
        assert!((dc - 0.8).abs() < 1e-12);
        // From p* = 16 to 25: 40 * 0.8 * sqrt(25/16) = 40.
        assert!((project(40.0, 0.8, 16.0, 25.0) - 40.0).abs() < 1e-12);
        // Saturation: 16 * (100 / (0.8 * 40))^2 = 16 * 9.765625 = 156.25.
        assert!((saturation(40.0, 0.8, 16.0) - 156.25).abs() < 1e-9);
        // Consistency: projecting to the saturation size gives 100%.
        assert!((project(40.0, 0.8, 16.0, 156.25) - 100.0).abs() < 1e-9);
    }
}
