//! The chain from cell medians to every derived number: CTI curves, demand per size and
//! level, the demand constant, the projection and the saturation size.
//!
//! It exists as one pure function so that the same chain runs three ways: on the
//! measured medians (the answer), on resampled runs (the bootstrap's intervals) and on
//! the smaller sizes only (the backtest). Nothing here decides what is held out or warns:
//! the caller says which sizes to fit and which to project to.

use std::collections::BTreeMap;

use crate::data::cells::{percent, BwKey, FULL};
use crate::method::demand::{self, Censored, CtiCurve, Interp};
use crate::method::noise::Floor;
use crate::method::traffic::{self, Volumes};

/// What every run of the chain shares: the question and what the data say of their own
/// noise and traffic. Only the medians, the fitted sizes and the targets change between
/// the answer, a resample and a backtest check.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    /// CTI levels, percent.
    pub levels: &'a [f64],
    /// How demand is read between steps.
    pub interp: Interp,
    /// Each size's noise: its floor marks levels too small to resolve, its spread weighs
    /// the traffic model's values.
    pub noise: &'a BTreeMap<u32, Floor>,
    /// The runs' traffic, for the traffic model beside DC.
    pub volumes: Option<&'a Volumes>,
}

/// One demand figure of the chain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Need {
    pub bw_pct: f64,
    pub censored: Censored,
    /// The two measured steps the level lies between (100% with CTI 0 counts as one).
    pub between: Option<(f64, f64)>,
    /// The level lies below what this size's run-to-run noise can resolve.
    pub below_noise: bool,
}

impl Need {
    /// Whether this figure may enter the demand constant or be projected from.
    pub fn usable(&self) -> bool {
        self.censored == Censored::None && !self.below_noise
    }
}

/// What a censored demand is known to be beyond: below the lowest step (`<`: the step
/// itself), or above the highest throttled step (`>`: the interpolation up to 100% is
/// not a bound, only the step is).
pub fn bound(curve: &CtiCurve, censored: Censored) -> Option<f64> {
    let fold = |f: fn(f64, f64) -> f64, start| curve.bw.iter().copied().fold(start, f);
    match censored {
        Censored::None => None,
        Censored::Below => Some(fold(f64::min, f64::INFINITY)),
        Censored::Above => Some(fold(f64::max, f64::NEG_INFINITY)),
    }
}

/// What the chain derives.
#[derive(Clone, Debug, Default)]
pub struct Chain {
    /// Sizes whose CTI curve needed pooling (not monotone in bandwidth).
    pub pooled: Vec<u32>,
    /// (procs, level index) -> demand.
    pub demand: BTreeMap<(u32, usize), Need>,
    /// (level index, p1, p2, DC) over pairs of fitted sizes, p1 > p2.
    pub dc_pairs: Vec<(usize, u32, u32, f64)>,
    /// Pairs left out: a demand censored, below the noise, or missing.
    pub dc_pairs_left_out: usize,
    pub dc: Option<f64>,
    /// The largest fitted size with a curve: the projection's starting point.
    pub p_star: Option<u32>,
    /// (target procs, level index) -> projected demand, and whether the demand at p* it
    /// starts from is censored.
    pub projection: BTreeMap<(u32, usize), (f64, bool)>,
    /// level index -> (processes where the projected demand reaches 100%, from censored).
    pub saturation: BTreeMap<usize, (f64, bool)>,
    /// The traffic model fitted on the same sizes, when the runs' bytes are known.
    pub traffic: Option<traffic::Fit>,
    /// (target procs, level index) -> the traffic model's projected demand.
    pub traffic_projection: BTreeMap<(u32, usize), f64>,
    /// level index -> where the link saturates by the traffic model (processes,
    /// fractional; [`traffic::saturation`]).
    pub traffic_saturation: BTreeMap<usize, f64>,
    /// (procs, level index) -> the bound a censored demand is known to be beyond.
    pub bounds: BTreeMap<(u32, usize), f64>,
}

/// The CTI curve of each size that has a 100% baseline and at least one throttled step.
pub fn curves(medians: &BTreeMap<(u32, BwKey), f64>) -> BTreeMap<u32, CtiCurve> {
    let mut out: BTreeMap<u32, CtiCurve> = BTreeMap::new();
    for (&(p, bw), &t) in medians {
        if bw >= FULL {
            continue;
        }
        let Some(&base) = medians.get(&(p, FULL)) else {
            continue;
        };
        let c = out.entry(p).or_insert(CtiCurve {
            bw: Vec::new(),
            cti: Vec::new(),
        });
        c.bw.push(percent(bw));
        c.cti.push(demand::cti(t, base));
    }
    out
}

/// Run the chain on `medians`: `fit` are the sizes the models are fitted on (p* is the
/// largest of them with a curve); `targets` the sizes to project to.
pub fn run(
    inputs: &Inputs,
    medians: &BTreeMap<(u32, BwKey), f64>,
    fit: &[u32],
    targets: &[u32],
) -> Chain {
    let Inputs {
        levels,
        interp,
        noise,
        volumes,
    } = *inputs;
    let mut chain = Chain::default();
    let curves = curves(medians);
    for (&p, curve) in &curves {
        if curve.monotone().2 {
            chain.pooled.push(p);
        }
        let floor = noise.get(&p).map_or(0.0, |f| f.cti_pct);
        for (li, &level) in levels.iter().enumerate() {
            if let Some(r) = curve.demand(level, interp) {
                if let Some(b) = bound(curve, r.censored) {
                    chain.bounds.insert((p, li), b);
                }
                chain.demand.insert(
                    (p, li),
                    Need {
                        bw_pct: r.bw,
                        censored: r.censored,
                        between: r.between,
                        below_noise: level < floor,
                    },
                );
            }
        }
    }
    let fitted: Vec<u32> = curves.keys().copied().filter(|p| fit.contains(p)).collect();
    let mut sum = 0.0;
    for li in 0..levels.len() {
        for (i, &p1) in fitted.iter().enumerate() {
            for &p2 in &fitted[..i] {
                match (chain.demand.get(&(p1, li)), chain.demand.get(&(p2, li))) {
                    (Some(a), Some(b)) if a.usable() && b.usable() => {
                        let dc = demand::demand_constant(a.bw_pct, b.bw_pct, p1 as f64, p2 as f64);
                        sum += dc;
                        chain.dc_pairs.push((li, p1, p2, dc));
                    }
                    _ => chain.dc_pairs_left_out += 1,
                }
            }
        }
    }
    chain.dc = (!chain.dc_pairs.is_empty()).then(|| sum / chain.dc_pairs.len() as f64);
    chain.p_star = fitted.last().copied();
    if let (Some(ps), Some(dc)) = (chain.p_star, chain.dc) {
        for li in 0..levels.len() {
            let Some(star) = chain.demand.get(&(ps, li)).copied() else {
                continue;
            };
            // A level the noise hides at p* has no demand to project from.
            if star.below_noise {
                continue;
            }
            let censored = star.censored != Censored::None;
            for &t in targets {
                let bw = demand::project(star.bw_pct, dc, ps as f64, t as f64);
                chain.projection.insert((t, li), (bw, censored));
            }
            chain.saturation.insert(
                li,
                (demand::saturation(star.bw_pct, dc, ps as f64), censored),
            );
        }
    }
    if let Some(v) = volumes {
        let reach = targets.iter().copied().max().unwrap_or(0) as f64;
        chain.traffic = traffic::fit(medians, v, &fitted, reach, noise);
        if let (Some(f), Some(&smallest)) = (&chain.traffic, fitted.first()) {
            for (li, &level) in levels.iter().enumerate() {
                for &t in targets {
                    if let Some(d) = traffic::project(v, f, t, level) {
                        chain.traffic_projection.insert((t, li), d);
                    }
                }
                if let Some(s) = traffic::saturation(v, f, smallest as f64, level, |_| 0.0) {
                    chain.traffic_saturation.insert(li, s);
                }
            }
        }
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::cells::pct;

    /// Medians with CTI(bw, p) = k_p (40 - bw) below 40%.
    fn medians(sizes: &[(u32, f64)]) -> BTreeMap<(u32, BwKey), f64> {
        let mut m = BTreeMap::new();
        for &(p, k) in sizes {
            m.insert((p, FULL), 10.0);
            for bw in [20.0, 25.0, 30.0, 35.0, 40.0] {
                let cti: f64 = (k * (40.0 - bw)).max(0.0);
                m.insert((p, pct(bw)), 10.0 * (1.0 + cti / 100.0));
            }
        }
        m
    }

    #[test]
    fn fits_only_the_sizes_asked_and_projects_from_the_largest() {
        let m = medians(&[(4, 1.0), (16, 2.0), (64, 4.0)]);
        let none = BTreeMap::new();
        let inputs = Inputs {
            levels: &[10.0],
            interp: Interp::Linear,
            noise: &none,
            volumes: None,
        };
        let c = run(&inputs, &m, &[4, 16], &[64]);
        assert_eq!(c.p_star, Some(16));
        // BW(10, p) = 40 - 10/k: 30 at 4 procs, 35 at 16: DC = 35/30 * sqrt(4/16).
        assert_eq!(c.dc_pairs.len(), 1);
        let dc = 35.0 / 30.0 * 0.5;
        assert!((c.dc.unwrap() - dc).abs() < 1e-9, "{:?}", c.dc);
        let (bw, censored) = c.projection[&(64, 0)];
        assert!((bw - 35.0 * dc * 2.0).abs() < 1e-9 && !censored);
        // The 64-proc curve is measured, but not fitted.
        assert!(c.demand.contains_key(&(64, 0)));
    }

    #[test]
    fn a_level_below_the_noise_enters_neither_the_constant_nor_the_projection() {
        let m = medians(&[(4, 1.0), (16, 2.0)]);
        let floors = BTreeMap::from([(4, Floor::of(4, 12.0)), (16, Floor::of(16, 3.0))]);
        let inputs = |noise| Inputs {
            levels: &[10.0, 15.0],
            interp: Interp::Linear,
            noise,
            volumes: None,
        };
        let c = run(&inputs(&floors), &m, &[4, 16], &[64]);
        assert!(c.demand[&(4, 0)].below_noise && !c.demand[&(4, 1)].below_noise);
        // Level 10 is hidden at 4 procs: only level 15's pair is used.
        assert_eq!(c.dc_pairs.len(), 1);
        assert_eq!(c.dc_pairs[0].0, 1);
        assert_eq!(c.dc_pairs_left_out, 1);
        // At p* = 16 level 10 is resolvable: projected with the constant from level 15.
        assert!(c.projection.contains_key(&(64, 0)));
        let floors = BTreeMap::from([(16, Floor::of(16, 12.0))]);
        let c = run(&inputs(&floors), &m, &[4, 16], &[64]);
        assert!(!c.projection.contains_key(&(64, 0)));
        assert!(!c.saturation.contains_key(&0));
    }
}
