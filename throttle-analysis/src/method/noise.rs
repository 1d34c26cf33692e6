//! The noise floor: the smallest completion-time increment a size's repeats can tell
//! from run-to-run variation.
//!
//! A CTI is the difference of two medians (a throttled step against the 100% baseline).
//! Each size's spread is pooled over all its cells (each cell's relative standard
//! deviation, weighted by its degrees of freedom), because one cell of three runs says
//! little about its own spread. The floor is the half-width of a 90% interval of that
//! difference: z(0.95) x 1.2533 (a median's standard error over a mean's, for normal
//! noise) x s x sqrt(1/n_base + 1/n_step), in percent. A level below it is marked and
//! kept out of the demand constant and the projection (see `chain`).

use std::collections::BTreeMap;

use serde::Serialize;

use throttle_proto::Pct;

use crate::data::cells::{BwKey, FULL, LOWEST};
use crate::method::stats;

use crate::method::quantiles::Z90;

/// Standard error of the median over that of the mean, for normal data (sqrt(pi/2)).
pub const MEDIAN_EFFICIENCY: f64 = 1.253_314_1;

/// The relative half-width of the 90% interval of the median of `times` (normal
/// approximation: z(0.95) x 1.2533 x CV / sqrt(n)); infinite for fewer than 2. A sweep
/// with `repeats = "auto"` repeats a point until this is within its precision.
pub fn median_precision(times: &[f64]) -> f64 {
    if times.len() < 2 {
        return f64::INFINITY;
    }
    Z90 * MEDIAN_EFFICIENCY * stats::cv(times) / (times.len() as f64).sqrt()
}

/// One size's noise.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Floor {
    pub procs: u32,
    /// Pooled relative standard deviation of one run.
    pub run_cv: f64,
    /// Runs the pooled spread comes from, and in how many cells.
    pub runs: usize,
    pub cells: usize,
    /// Repeats of the 100% baseline, and the typical (median) repeats of a throttled step.
    pub baseline_repeats: usize,
    pub step_repeats: usize,
    /// The smallest resolvable CTI, percent.
    pub cti_pct: f64,
}

/// Floors of every size with at least one cell of two or more runs and a baseline.
pub fn floors(cells: &BTreeMap<(u32, BwKey), Vec<f64>>) -> Vec<Floor> {
    let mut sizes: Vec<u32> = cells.keys().map(|k| k.0).collect();
    sizes.dedup();
    let mut out = Vec::new();
    for p in sizes {
        let mine: Vec<&Vec<f64>> = cells
            .range((p, LOWEST)..=(p, Pct::UNLIMITED))
            .map(|(_, v)| v)
            .collect();
        let (mut ss, mut dof, mut runs, mut used) = (0.0, 0usize, 0usize, 0usize);
        for t in &mine {
            if t.len() >= 2 {
                ss += (t.len() - 1) as f64 * stats::cv(t).powi(2);
                dof += t.len() - 1;
                runs += t.len();
                used += 1;
            }
        }
        let Some(base) = cells.get(&(p, FULL)) else {
            continue;
        };
        if dof == 0 {
            continue;
        }
        let steps: Vec<f64> = cells
            .range((p, LOWEST)..(p, FULL))
            .map(|(_, v)| v.len() as f64)
            .collect();
        let step_repeats = if steps.is_empty() {
            base.len()
        } else {
            stats::median(&steps) as usize
        };
        let s = (ss / dof as f64).sqrt();
        let cti_pct = 100.0
            * Z90
            * MEDIAN_EFFICIENCY
            * s
            * (1.0 / base.len() as f64 + 1.0 / step_repeats.max(1) as f64).sqrt();
        out.push(Floor {
            procs: p,
            run_cv: s,
            runs,
            cells: used,
            baseline_repeats: base.len(),
            step_repeats,
            cti_pct,
        });
    }
    out
}

impl Floor {
    /// The standard error of the median of `n` runs of about `value`, from this size's
    /// pooled spread.
    pub fn median_se(&self, value: f64, n: usize) -> f64 {
        MEDIAN_EFFICIENCY * self.run_cv * value.abs() / (n.max(1) as f64).sqrt()
    }
}

#[cfg(test)]
impl Floor {
    /// A floor of `cti_pct` at `procs`, with no spread behind it (tests).
    pub fn of(procs: u32, cti_pct: f64) -> Floor {
        Floor {
            procs,
            run_cv: 0.0,
            runs: 0,
            cells: 0,
            baseline_repeats: 3,
            step_repeats: 3,
            cti_pct,
        }
    }
}

/// The floors by size, for the chain.
pub fn by_size(floors: &[Floor]) -> BTreeMap<u32, Floor> {
    floors.iter().map(|f| (f.procs, f.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_of_a_median_by_hand() {
        // n = 4: 1.645 x 1.2533 x CV / 2 (the constants to 8 digits).
        let t = [0.9, 1.0, 1.0, 1.1];
        let cv = stats::cv(&t);
        assert!((median_precision(&t) - 1.644_853_6 * 1.253_314_1 * cv / 2.0).abs() < 1e-8);
        assert!(median_precision(&[1.0]).is_infinite());
    }

    #[test]
    fn the_floor_by_hand() {
        // Cells of 3 runs with CV 0.1 each (mean 10, sd 1): pooled CV 0.1;
        // floor = 100 * 1.645 * 1.2533 * 0.1 * sqrt(1/3 + 1/3) = 16.83.
        let cells = BTreeMap::from([
            ((4, FULL), vec![9.0, 10.0, 11.0]),
            ((4, crate::data::cells::pct(50.0)), vec![19.0, 20.0, 21.0]),
        ]);
        let f = floors(&cells);
        assert_eq!(f.len(), 1);
        // The second cell's CV is 0.05: pooled sqrt((2 * 0.01 + 2 * 0.0025) / 4).
        let s = ((2.0 * 0.01 + 2.0 * 0.0025) / 4.0f64).sqrt();
        assert!((f[0].run_cv - s).abs() < 1e-12, "{f:?}");
        let want = 100.0 * Z90 * MEDIAN_EFFICIENCY * s * (2.0f64 / 3.0).sqrt();
        assert!((f[0].cti_pct - want).abs() < 1e-9, "{f:?}");
        assert_eq!((f[0].runs, f[0].cells), (6, 2));
    }

    #[test]
    fn more_repeats_lower_the_floor_and_single_runs_give_none() {
        let three = BTreeMap::from([((4, FULL), vec![9.0, 10.0, 11.0])]);
        let nine = BTreeMap::from([(
            (4, FULL),
            vec![9.0, 10.0, 11.0, 9.0, 10.0, 11.0, 9.0, 10.0, 11.0],
        )]);
        assert!(floors(&nine)[0].cti_pct < floors(&three)[0].cti_pct);
        let single = BTreeMap::from([
            ((4, FULL), vec![10.0]),
            ((4, crate::data::cells::pct(50.0)), vec![12.0]),
        ]);
        assert!(floors(&single).is_empty());
    }
}
