//! The traffic model ([`traffic`]) in two parameters: the size p and the problem's size
//! n. Each measured (p, n) gives the model's three parts as one size does in
//! [`traffic`]: T(100%), the bytes V on the busiest link and the transfer's weight k
//! (fitted over that cell's throttled steps). Each part is then modelled in both
//! parameters by [`surface::search`] (products and sums of single-parameter terms), and
//! the demand at any (P, N) follows from R = k V / (C T(100%)) as in one parameter:
//! w = 1 / (1 + c / R). Everything a projection's error is counted in is ln R, which is
//! the demand's logit plus ln c.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::data::cells::BwKey;
use crate::data::cells::FULL;
use crate::method::noise::Floor;
use crate::method::surface::{self, FoundSurface, Sample2};
use crate::method::traffic;

/// The model's parts measured at one (p, n).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Cell {
    pub procs: u32,
    /// The problem's size (a BFS's vertices, not its scale).
    pub size: f64,
    /// T(100%), its standard error.
    pub baseline: f64,
    pub baseline_se: f64,
    /// Bytes on the busiest link (or per node).
    pub bytes: f64,
    /// k and its standard error.
    pub exposed: f64,
    pub exposed_se: f64,
}

impl Cell {
    /// ln R measured at this cell: the transfer's share of the full-bandwidth time.
    pub fn log_share(&self, capacity: f64) -> f64 {
        (self.exposed * self.bytes / capacity / self.baseline).ln()
    }
}

/// The cells of one problem size `size`: every p with a baseline, bytes and a positive
/// k, from that problem's medians, volumes and noise floors.
pub fn cells(
    size: f64,
    medians: &BTreeMap<(u32, BwKey), f64>,
    volumes: &traffic::Volumes,
    floors: &BTreeMap<u32, Floor>,
) -> Vec<Cell> {
    let mut out = Vec::new();
    for (&p, &bytes) in &volumes.bytes_per_node {
        let Some(&t) = medians.get(&(p, FULL)) else {
            continue;
        };
        // NaN is no count either.
        if bytes.is_nan() || bytes <= 0.0 {
            continue;
        }
        let floor = floors.get(&p);
        let Some((k, k_se)) = traffic::exposed_at(medians, p, bytes / volumes.capacity, floor)
        else {
            continue;
        };
        if k.is_nan() || k <= 0.0 {
            continue;
        }
        out.push(Cell {
            procs: p,
            size,
            baseline: t,
            baseline_se: floor.map_or(0.0, |f| f.median_se(t, f.baseline_repeats)),
            bytes,
            exposed: k,
            exposed_se: k_se,
        });
    }
    out
}

/// The three parts fitted in (p, n).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fit {
    pub volume: FoundSurface,
    pub baseline: FoundSurface,
    pub exposed: FoundSurface,
}

/// Fit the parts on `cells`, keeping the forms positive up to `reach` (the farthest
/// (P, N) asked); `None` with fewer than three cells or a part no form fits.
pub fn fit(cells: &[Cell], reach: (f64, f64)) -> Option<Fit> {
    let part = |value: fn(&Cell) -> (f64, f64)| -> Vec<Sample2> {
        cells
            .iter()
            .map(|c| {
                let (value, se) = value(c);
                Sample2 {
                    p: c.procs as f64,
                    n: c.size,
                    value,
                    se,
                }
            })
            .collect()
    };
    Some(Fit {
        // The bytes a program moves vary far less than its times: weighed by the
        // relative floor alone, as in one parameter.
        volume: surface::search(&part(|c| (c.bytes, 0.0)), reach)?,
        baseline: surface::search(&part(|c| (c.baseline, c.baseline_se)), reach)?,
        // k is one number per cell fitted over its steps, and it moves from cell to cell
        // beyond its steps' noise (a master's sends interleave at some rates and sizes and
        // not at others: docs/method.md, "Why a CTI curve is not straight"): it is not
        // believed more closely than that scatter.
        exposed: surface::search_with(&part(|c| (c.exposed, c.exposed_se)), reach, true)?,
    })
}

/// ln R at (p, n) by the averaged models.
pub fn log_share(fit: &Fit, capacity: f64, p: f64, n: f64) -> Option<f64> {
    let r = fit.exposed.at(p, n)? * fit.volume.at(p, n)? / capacity / fit.baseline.at(p, n)?;
    (r.is_finite() && r > 0.0).then(|| r.ln())
}

/// The demand (percent of the link) that keeps the CTI within `level` percent, for a
/// program whose transfer takes the share e^`log_share` of its full-bandwidth time.
pub fn demand(log_share: f64, level: f64) -> f64 {
    100.0 / (1.0 + level / 100.0 / log_share.exp())
}

/// How far the averaged forms disagree at (p, n): the parts' spreads in ln, in
/// quadrature.
pub fn selection_spread(fit: &Fit, p: f64, n: f64) -> Option<f64> {
    let mut ss = 0.0;
    for part in [&fit.exposed, &fit.volume, &fit.baseline] {
        ss += part.log_spread(p, n)?.powi(2);
    }
    Some(ss.sqrt())
}

/// The smallest size from `from` at which the link saturates at `level` along the line
/// n = `line`(p) (a weak-scaling sweep's problem growing with the size), with `shift`
/// added to ln R; fractional, as [`traffic::saturation`].
pub fn saturation_along(
    fit: &Fit,
    capacity: f64,
    from: f64,
    level: f64,
    line: impl Fn(f64) -> f64,
    shift: impl Fn(f64) -> f64,
) -> Option<f64> {
    let c = level / 100.0;
    let threshold = (c / (1.0 + c)).ln();
    crate::method::demand::first_crossing(from, |p| {
        Some(log_share(fit, capacity, p, line(p))? + shift(p) - threshold)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::cells::pct;
    use crate::method::traffic::Volumes;

    /// A program exactly of the model: V = 1e3 n / sqrt(p) bytes, T100 = 1 + n / (1e4 p),
    /// k = 0.8, on a 125 MB/s link.
    fn program(p: u32, n: f64) -> (BTreeMap<(u32, BwKey), f64>, Volumes) {
        let cap = 125e6;
        let v = 1e3 * n / (p as f64).sqrt();
        let t100 = 1.0 + n / (1e4 * p as f64);
        let mut m = BTreeMap::new();
        m.insert((p, FULL), t100);
        for bw in [10.0, 20.0, 50.0] {
            m.insert((p, pct(bw)), t100 + 0.8 * v / cap * (100.0 / bw - 1.0));
        }
        let volumes = Volumes {
            bytes_per_node: [(p, v)].into_iter().collect(),
            capacity: cap,
            busiest: true,
        };
        (m, volumes)
    }

    #[test]
    fn a_program_of_the_model_is_projected_in_both_parameters() {
        let mut all = Vec::new();
        for p in [2, 4, 8] {
            for n in [1e4, 2e4, 4e4] {
                let (m, v) = program(p, n);
                all.extend(cells(n, &m, &v, &BTreeMap::new()));
            }
        }
        assert_eq!(all.len(), 9);
        assert!((all[0].exposed - 0.8).abs() < 1e-9, "{:?}", all[0]);
        let fit = fit(&all, (32.0, 16e4)).unwrap();
        let (p, n): (f64, f64) = (32.0, 16e4);
        let want = (0.8 * 1e3 * n / p.sqrt() / 125e6 / (1.0 + n / (1e4 * p))).ln();
        let got = log_share(&fit, 125e6, p, n).unwrap();
        assert!((got - want).abs() < 1e-3, "{got} {want}");
        let d = demand(got, 10.0);
        assert!((d - 100.0 / (1.0 + 0.1 / want.exp())).abs() < 0.05, "{d}");
        // Along n = 1e4 p the transfer's share grows as sqrt(p) / 2 x ...: it saturates
        // somewhere, and earlier at a lower level.
        let line = |p: f64| 1e4 * p;
        let at10 = saturation_along(&fit, 125e6, 2.0, 10.0, line, |_| 0.0);
        let at5 = saturation_along(&fit, 125e6, 2.0, 5.0, line, |_| 0.0);
        assert!(at5.unwrap() < at10.unwrap(), "{at5:?} {at10:?}");
    }
}
