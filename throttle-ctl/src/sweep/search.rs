//! Demand search: after a sweep's own steps (the 100% baseline and a coarse pass), more
//! bandwidth steps for each node count, placed where each requested CTI level is crossed,
//! until every level lies between two measured throttled steps at most `width` points of
//! bandwidth apart, or the size's step budget is spent. A level between the highest
//! throttled step and 100% is not bracketed (the analysis reads it as a bound, `>step`):
//! the search places a step above it, up to `top`.
//!
//! The crossing is estimated along a straight line in 1/w between the steps around it
//! (transfer time grows as 1/w), and two steps are placed `0.7 width` apart around the
//! estimate, inside the bracket: if the estimate is right, the next bracket is narrow
//! enough. A level under the lowest step gets a step below it, estimated from
//! CTI = a (1/w - 1) through that step. Everything is recomputed from the store each round,
//! so a sweep that is stopped and run again resumes where it was; a step is never placed
//! twice in one invocation, and every size has at most `max_steps` of them, so the search
//! ends.

use std::collections::{BTreeMap, HashSet};

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use throttle_analysis::data::cells::percent;
use throttle_analysis::method::demand::{self, Censored, CtiCurve, Interp};
use throttle_analysis::method::stats;
use throttle_proto::Pct;

use crate::run_status::RunStatus;
use crate::store::RunRow;

/// The `[search]` table of a sweep spec.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Search {
    /// CTI levels (percent) whose demand is searched for.
    #[serde(default = "default_levels")]
    pub levels: Vec<f64>,
    /// Done when each level lies between two measured steps at most this many points of
    /// bandwidth apart.
    #[serde(default = "default_width")]
    pub width: f64,
    /// The most steps beyond the spec's grid per node count, counting the ones stored
    /// already (by a killed run of the same search, or an earlier sweep of the series).
    #[serde(default = "default_max_steps")]
    pub max_steps: usize,
    /// The highest step it may place (percent, under 100).
    #[serde(default = "default_top")]
    pub top: f64,
}

fn default_levels() -> Vec<f64> {
    vec![10.0, 15.0, 20.0, 25.0]
}
fn default_width() -> f64 {
    3.0
}
fn default_max_steps() -> usize {
    10
}
fn default_top() -> f64 {
    99.0
}

/// Steps are placed on this grid (percent), so their keys stay short and a resumed
/// search finds them again.
const GRID: f64 = 0.5;
/// The lowest step the search places.
const FLOOR: f64 = 1.0;

impl Default for Search {
    fn default() -> Self {
        Search {
            levels: default_levels(),
            width: default_width(),
            max_steps: default_max_steps(),
            top: default_top(),
        }
    }
}

impl Search {
    /// Refuse what cannot be searched, naming the key.
    pub fn check(&self) -> Result<()> {
        if self.levels.is_empty() || self.levels.len() > 20 {
            bail!("[search] `levels` must list 1 to 20 CTI levels (percent)");
        }
        if let Some(l) = self
            .levels
            .iter()
            .find(|l| !(l.is_finite() && **l > 0.0 && **l <= 1000.0))
        {
            bail!("[search] `levels`: {l} is not a CTI level (percent, above 0, at most 1000)");
        }
        if !(self.width.is_finite() && (1.0..=50.0).contains(&self.width)) {
            bail!("[search] `width` must be from 1 to 50 points of bandwidth");
        }
        if !(1..=50).contains(&self.max_steps) {
            bail!("[search] `max_steps` must be from 1 to 50");
        }
        if !(self.top.is_finite() && (2.0..100.0).contains(&self.top)) {
            bail!("[search] `top` must be a percentage from 2 to under 100");
        }
        Ok(())
    }
}

/// What the store holds of one node count of a sweep: the median time of each step with
/// good runs, and every step with any run (good, failed or flagged).
struct Measured {
    medians: BTreeMap<Pct, f64>,
    steps: Vec<Pct>,
}

fn measured(rows: &[RunRow], prefix: &str) -> Measured {
    let mut times: BTreeMap<Pct, Vec<f64>> = BTreeMap::new();
    let mut steps: Vec<Pct> = Vec::new();
    for r in rows.iter().filter(|r| r.point_key.starts_with(prefix)) {
        let bw = r.bw_pct;
        if bw.is_unlimited() {
            continue;
        }
        if !steps.contains(&bw) {
            steps.push(bw);
        }
        if r.status != RunStatus::Ok || r.flag.is_some() {
            continue;
        }
        if let Some(t) = r.kernel_seconds.or(r.seconds) {
            times.entry(bw).or_default().push(t);
        }
    }
    Measured {
        medians: times
            .into_iter()
            .map(|(bw, t)| (bw, stats::median(&t)))
            .collect(),
        steps,
    }
}

impl Measured {
    /// The stored steps that are not steps of the spec's `grid`: the ones a search placed
    /// (or an earlier sweep of the same series measured); they count against `max_steps`.
    fn beyond(&self, grid: &[Pct]) -> Vec<Pct> {
        self.steps
            .iter()
            .copied()
            .filter(|s| !grid.contains(s))
            .collect()
    }

    /// The CTI curve of the stored medians against the 100% baseline; `None` without a
    /// baseline or a throttled step.
    fn curve(&self) -> Option<CtiCurve> {
        let &base = self.medians.get(&Pct::FULL)?;
        let (bw, cti): (Vec<f64>, Vec<f64>) = self
            .medians
            .range(..Pct::FULL)
            .map(|(bw, &t)| (percent(*bw), demand::cti(t, base)))
            .unzip();
        (!bw.is_empty()).then_some(CtiCurve { bw, cti })
    }
}

/// The steps of one node count stored beyond the spec's `grid` (see [`next_steps`] for
/// `prefix`): a resumed sweep repeats them like its own.
pub fn stored_beyond(rows: &[RunRow], prefix: &str, grid: &[Pct]) -> Vec<Pct> {
    measured(rows, prefix).beyond(grid)
}

/// The steps (percent) the search places next at one node count, given what is stored of
/// it (`prefix`: the key prefix of its points, up to the bandwidth), the steps of the
/// spec's own grid, and the steps already placed in this invocation.
pub fn next_steps(
    search: &Search,
    rows: &[RunRow],
    prefix: &str,
    grid: &[Pct],
    tried: &HashSet<Pct>,
) -> Vec<Pct> {
    let m = measured(rows, prefix);
    let Some(curve) = m.curve() else {
        return Vec::new();
    };
    let added = m.beyond(grid).len();
    if added >= search.max_steps {
        return Vec::new();
    }
    let mut wanted: Vec<f64> = Vec::new();
    for &level in &search.levels {
        wanted.extend(place(search, &curve, level));
    }
    let mut out: Vec<Pct> = Vec::new();
    for s in wanted {
        let Ok(step) = Pct::new(snap(s).clamp(FLOOR, search.top)) else {
            continue;
        };
        let at = percent(step);
        let near = |x: &Pct| (percent(*x) - at).abs() < GRID / 2.0;
        if m.steps.iter().any(near) || out.iter().any(near) || tried.contains(&step) {
            continue;
        }
        out.push(step);
    }
    out.truncate(search.max_steps - added);
    out
}

/// The steps that would narrow the bracket of `level` on `curve` to `width`.
fn place(search: &Search, curve: &CtiCurve, level: f64) -> Vec<f64> {
    let Some(r) = curve.demand(level, Interp::Inverse) else {
        return Vec::new();
    };
    let w = search.width;
    match (r.censored, r.between) {
        (Censored::Below, _) => {
            // Under the lowest step: estimate from CTI = a (1/w - 1) through it.
            let (lo, y) = (curve.bw[0], curve.cti[0].max(0.0));
            if lo <= FLOOR {
                return Vec::new();
            }
            let a = y / (100.0 / lo - 1.0);
            let estimate = if a > 0.0 {
                100.0 / (1.0 + level / a)
            } else {
                lo / 2.0
            };
            vec![estimate.min(lo - w / 2.0).max(FLOOR)]
        }
        // Between the highest step and 100% the analysis reads a bound (`>lo`), however
        // narrow: a step is wanted above it, up to `top`.
        (c, Some((lo, hi))) if hi - lo > w || c == Censored::Above => {
            let hi = hi.min(search.top + GRID);
            let half = 0.35 * w;
            // The pair around the estimate, shifted to lie inside the bracket.
            let (mut a, mut b) = (r.bw - half, r.bw + half);
            if a < lo {
                (a, b) = (lo + GRID, lo + GRID + 2.0 * half);
            }
            if b > hi {
                (a, b) = (hi - GRID - 2.0 * half, hi - GRID);
            }
            [a, b]
                .into_iter()
                .filter(|s| *s > lo + GRID / 2.0 && *s < hi - GRID / 2.0)
                .collect()
        }
        _ => Vec::new(),
    }
}

fn snap(x: f64) -> f64 {
    (x / GRID).round() * GRID
}

/// Where the search left one level at one node count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bracket {
    /// Between two measured throttled steps this many points of bandwidth apart.
    Width(f64),
    /// Above the highest throttled step (this one): the analysis reads `>step`.
    Above(f64),
    /// Under the lowest step (this one): the analysis reads `<step`.
    Below(f64),
    /// No baseline or no throttled step with a good run.
    Unknown,
}

/// For each level of `search` at one node count, where the measured steps leave it, and
/// how many steps beyond the spec's `grid` are stored (the budget spent). For the sweep's
/// summary.
pub fn brackets(
    search: &Search,
    rows: &[RunRow],
    prefix: &str,
    grid: &[Pct],
) -> (Vec<Bracket>, usize) {
    let m = measured(rows, prefix);
    let spent = m.beyond(grid).len();
    let Some(curve) = m.curve() else {
        return (vec![Bracket::Unknown; search.levels.len()], spent);
    };
    let each = search
        .levels
        .iter()
        .map(|&l| match curve.demand(l, Interp::Inverse) {
            Some(r) => match (r.censored, r.between) {
                (Censored::None, Some((lo, hi))) => Bracket::Width(hi - lo),
                (Censored::Above, Some((lo, _))) => Bracket::Above(lo),
                (Censored::Below, _) => Bracket::Below(r.bw),
                _ => Bracket::Unknown,
            },
            None => Bracket::Unknown,
        })
        .collect();
    (each, spent)
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
    fn a_wide_bracket_gets_a_pair_of_steps_around_the_estimate() {
        // CTI = 12 (100/w - 1): 12% at 50. Level 10% lies between 50 and 100; in 1/w the
        // estimate is exact: 100 / (1 + 10/12) = 54.5; steps 0.7 x 3 apart around it.
        let a = 12.0;
        let c = curve(&[(20.0, a * 4.0), (50.0, a)]);
        let s = Search::default();
        let got = place(&s, &c, 10.0);
        assert_eq!(got.len(), 2, "{got:?}");
        let truth = 100.0 / (1.0 + 10.0 / a);
        assert!(got[0] < truth && truth < got[1], "{got:?} around {truth}");
        assert!(got[1] - got[0] <= s.width);
    }

    #[test]
    fn a_narrow_bracket_needs_nothing_and_a_level_under_the_lowest_step_gets_a_lower_one() {
        let s = Search::default();
        assert!(place(&s, &curve(&[(60.0, 12.0), (62.0, 9.0)]), 10.0).is_empty());
        // CTI 5% at the lowest step 40: a = 5 / 1.5 = 3.33; level 10% needs
        // 100 / (1 + 3) = 25.
        let got = place(&s, &curve(&[(40.0, 5.0)]), 10.0);
        assert_eq!(got.len(), 1);
        assert!((got[0] - 25.0).abs() < 1e-9, "{got:?}");
    }

    /// A level between the highest throttled step and 100% is a bound for the analysis
    /// (`>98`), however narrow the gap: the search wants a step above it, never above
    /// `top`.
    #[test]
    fn a_level_above_the_highest_step_gets_a_step_above_it() {
        let s = Search::default();
        // CTI 12% at 98: level 10% lies between 98 and 100 (2 points: narrower than 3).
        let c = curve(&[(50.0, 60.0), (98.0, 12.0)]);
        assert_eq!(
            c.demand(10.0, Interp::Inverse).map(|r| r.censored),
            Some(Censored::Above)
        );
        let got = place(&s, &c, 10.0);
        assert!(
            !got.is_empty() && got.iter().all(|x| *x > 98.0 && *x <= s.top),
            "{got:?}"
        );
        // At `top` already: nothing more to place.
        let c = curve(&[(50.0, 60.0), (99.0, 12.0)]);
        assert!(place(&s, &c, 10.0).is_empty());
    }

    #[test]
    fn bad_search_tables_are_explained() {
        let ok = Search::default();
        assert!(ok.check().is_ok());
        for (s, hint) in [
            (
                Search {
                    levels: vec![],
                    ..ok.clone()
                },
                "levels",
            ),
            (
                Search {
                    levels: vec![-1.0],
                    ..ok.clone()
                },
                "levels",
            ),
            (
                Search {
                    width: 0.1,
                    ..ok.clone()
                },
                "width",
            ),
            (
                Search {
                    max_steps: 0,
                    ..ok.clone()
                },
                "max_steps",
            ),
            (
                Search {
                    top: 100.0,
                    ..ok.clone()
                },
                "top",
            ),
        ] {
            let e = s.check().unwrap_err().to_string();
            assert!(e.contains(hint), "{e}");
        }
    }
}
