//! The backtest: would the projection have been right for sizes already measured?
//!
//! For each measured size from the third on, the chain is fitted on the smaller sizes
//! only, projected to that size, and compared with what was measured there, level by
//! level, with the projection's bootstrap interval. This is what a user looks at before
//! trusting a projection to a size nobody measured; the verdict in [`Verdict`] is drawn
//! from it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::bootstrap::{self, Interval};
use super::chain::{self, BwKey, Need};
use super::demand::Censored;
use super::traffic::Volumes;

/// Which projection a check is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    /// The paper's: demand ~ DC x sqrt(p) from p*.
    Dc,
    /// From the bytes the agents counted (`traffic`).
    Traffic,
}

/// Backtest errors beyond this (percentage points) fail the projection.
pub const TOLERANCE_PP: f64 = 5.0;

/// One (size, level) of the backtest.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Check {
    pub model: Model,
    pub procs: u32,
    pub cti: f64,
    /// Fitted on these sizes; projected from the largest.
    pub from: Vec<u32>,
    pub projected: f64,
    pub interval: Option<Interval>,
    pub measured: f64,
    pub measured_censored: Censored,
    /// The level is below the measured size's noise floor.
    pub below_noise: bool,
    /// projected - measured, percentage points; with a censored measurement it is a
    /// bound (see `error_is_bound`).
    pub error_pp: f64,
    /// error relative to the measured demand.
    pub error_rel: f64,
    pub error_is_bound: bool,
    /// Whether the measured demand lies inside the projection's interval.
    pub inside_interval: Option<bool>,
}

/// Projection from the sizes smaller than each measured one from the third on, by both
/// models (the traffic model only where the runs' bytes are known).
pub fn run(
    cells: &BTreeMap<(u32, BwKey), Vec<f64>>,
    medians: &BTreeMap<(u32, BwKey), f64>,
    levels: &[f64],
    floors: &BTreeMap<u32, f64>,
    measured: &BTreeMap<(u32, usize), Need>,
    volumes: Option<&Volumes>,
    resamples: usize,
) -> Vec<Check> {
    let sizes: Vec<u32> = chain::curves(medians).keys().copied().collect();
    let mut out = Vec::new();
    for k in 2..sizes.len() {
        let target = sizes[k];
        let from: Vec<u32> = sizes[..k].to_vec();
        let c = chain::run(medians, levels, floors, &from, &[target], volumes);
        if c.projection.is_empty() && c.traffic_projection.is_empty() {
            continue;
        }
        let spread =
            bootstrap::intervals(cells, levels, floors, &from, &[target], volumes, resamples);
        for (li, &level) in levels.iter().enumerate() {
            let Some(m) = measured.get(&(target, li)) else {
                continue;
            };
            let by_model = [
                (
                    Model::Dc,
                    c.projection.get(&(target, li)).map(|p| p.0),
                    spread.projection.get(&(target, li)),
                ),
                (
                    Model::Traffic,
                    c.traffic_projection.get(&(target, li)).copied(),
                    spread.traffic_projection.get(&(target, li)),
                ),
            ];
            for (model, projected, spread) in by_model {
                let Some(projected) = projected else { continue };
                let interval = spread.and_then(|s| s.interval);
                let error_pp = projected - m.bw_pct;
                // Against a bound the projection is inside when it is on the bound's side.
                let inside_interval = interval.map(|i| match m.censored {
                    Censored::None => i.low <= m.bw_pct && m.bw_pct <= i.high,
                    Censored::Below => i.low <= m.bw_pct,
                    Censored::Above => i.high >= m.bw_pct,
                });
                out.push(Check {
                    model,
                    procs: target,
                    cti: level,
                    from: from.clone(),
                    projected,
                    interval,
                    measured: m.bw_pct,
                    measured_censored: m.censored,
                    below_noise: m.below_noise,
                    error_pp,
                    error_rel: error_pp / m.bw_pct,
                    error_is_bound: m.censored != Censored::None,
                    inside_interval,
                });
            }
        }
    }
    out
}

/// What the backtest says of the projection.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Fewer than three sizes with throttled runs, or no comparable level: nothing says
    /// how far the model is off for larger sizes.
    Untested { why: String },
    /// Every uncensored, resolvable check within the tolerance and its interval.
    Passed { checks: usize, worst_pp: f64 },
    /// At least one check missed.
    Failed { why: String, worst_pp: f64 },
}

/// Judge one model's checks: only uncensored ones above the noise count as evidence for;
/// a censored one counts against when even its bound is missed by more than the
/// tolerance (measured > 89 and projected 27 is a miss of at least 62 pp).
pub fn verdict(checks: &[Check], model: Model) -> Verdict {
    let checks: Vec<&Check> = checks.iter().filter(|c| c.model == model).collect();
    if checks.is_empty() {
        return Verdict::Untested {
            why: "the backtest needs throttled runs on at least 3 sizes".into(),
        };
    }
    let mut worst: Option<&Check> = None;
    let mut misses = Vec::new();
    let mut evidence = 0;
    for &c in checks.iter().filter(|c| !c.below_noise) {
        let missed_bound = match c.measured_censored {
            Censored::None => c.error_pp.abs() > TOLERANCE_PP,
            // The truth is at most `measured`: projecting above it by more than the
            // tolerance is a miss.
            Censored::Below => c.error_pp > TOLERANCE_PP,
            // The truth is at least `measured` (an interpolation up to 100%).
            Censored::Above => c.error_pp < -TOLERANCE_PP,
        };
        if c.measured_censored == Censored::None {
            evidence += 1;
        }
        if missed_bound
            || (c.measured_censored == Censored::None
                && c.inside_interval == Some(false)
                && c.error_pp.abs() > TOLERANCE_PP)
        {
            misses.push(c);
        }
        if worst.is_none_or(|w| c.error_pp.abs() > w.error_pp.abs()) {
            worst = Some(c);
        }
    }
    let Some(worst) = worst else {
        return Verdict::Untested {
            why: "every backtest level lies below the noise floor".into(),
        };
    };
    if let Some(m) = misses
        .iter()
        .max_by(|a, b| a.error_pp.abs().total_cmp(&b.error_pp.abs()))
    {
        return Verdict::Failed {
            why: format!(
                "projected from {} procs to {}, CTI {}%: {:.1} against {}{:.1} measured ({}{:+.1} pp)",
                m.from.last().copied().unwrap_or(0),
                m.procs,
                m.cti,
                m.projected,
                flag(m.measured_censored),
                m.measured,
                if m.error_is_bound { "at least " } else { "" },
                m.error_pp
            ),
            worst_pp: m.error_pp,
        };
    }
    if evidence == 0 {
        return Verdict::Untested {
            why: "every measured demand the backtest could compare with is censored (a bound, not a value)".into(),
        };
    }
    Verdict::Passed {
        checks: evidence,
        worst_pp: worst.error_pp,
    }
}

fn flag(c: Censored) -> &'static str {
    match c {
        Censored::None => "",
        Censored::Below => "<",
        Censored::Above => ">",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::chain::bw_key;

    /// Sizes whose demand at CTI 20% is `need(p)`: CTI(bw) = 4 (need + 5 - bw) below
    /// need + 5, measured every 1% (so linear interpolation is exact).
    fn cells(sizes: &[u32], need: impl Fn(f64) -> f64) -> BTreeMap<(u32, BwKey), Vec<f64>> {
        let mut out = BTreeMap::new();
        for &p in sizes {
            let kink = need(p as f64) + 5.0;
            for bw in 1..=100 {
                let bw = bw as f64;
                let cti: f64 = if bw == 100.0 {
                    0.0
                } else {
                    (4.0 * (kink - bw)).max(0.0)
                };
                let t = 10.0 * (1.0 + cti / 100.0);
                out.insert((p, bw_key(bw)), vec![t * 0.999, t, t * 1.001]);
            }
        }
        out
    }

    fn check(c: &BTreeMap<(u32, BwKey), Vec<f64>>, levels: &[f64]) -> Vec<Check> {
        let medians = c.iter().map(|(&k, v)| (k, v[1])).collect();
        let all: Vec<u32> = c.keys().map(|k| k.0).collect();
        let m = chain::run(&medians, levels, &BTreeMap::new(), &all, &[], None);
        run(c, &medians, levels, &BTreeMap::new(), &m.demand, None, 200)
    }

    #[test]
    fn projects_each_size_from_the_smaller_ones() {
        let c = cells(&[4, 6, 16, 25], |p| 6.0 * p.sqrt());
        let checks = check(&c, &[20.0]);
        assert_eq!(checks.len(), 2);
        assert_eq!(checks[0].procs, 16);
        assert_eq!(checks[0].from, vec![4, 6]);
        assert_eq!(checks[1].from, vec![4, 6, 16]);
        for c in &checks {
            assert!(
                (c.error_pp - (c.projected - c.measured)).abs() < 1e-12
                    && (c.error_rel - c.error_pp / c.measured).abs() < 1e-12
            );
        }
    }

    #[test]
    fn a_model_that_holds_passes_and_one_that_does_not_fails() {
        // Demand ~ sqrt(p) is the paper's model (DC = 1): the backtest is exact.
        let holds = check(&cells(&[4, 6, 16], |p| 6.0 * p.sqrt()), &[20.0]);
        assert_eq!(holds.len(), 1);
        assert!(holds[0].error_pp.abs() < 1e-6, "{holds:?}");
        assert_eq!(holds[0].inside_interval, Some(true));
        assert!(matches!(
            verdict(&holds, Model::Dc),
            Verdict::Passed { checks: 1, .. }
        ));
        // Demand ~ p: 12, 18 and 48; from 4 and 6 the constant is 1.5 / sqrt(1.5), and
        // 16 is projected at 18 * 1.2247 * sqrt(16/6) = 36: 12 pp low.
        let linear = check(&cells(&[4, 6, 16], |p| 3.0 * p), &[20.0]);
        assert!((linear[0].error_pp + 12.0).abs() < 1e-6, "{linear:?}");
        assert!(
            (linear[0].measured - 48.0).abs() < 1e-6 && (linear[0].projected - 36.0).abs() < 1e-6
        );
        assert!(matches!(
            verdict(&linear, Model::Dc),
            Verdict::Failed { .. }
        ));
    }

    #[test]
    fn too_few_sizes_are_untested() {
        let checks = check(&cells(&[4, 8], |p| 6.0 * p.sqrt()), &[20.0]);
        assert!(checks.is_empty());
        assert!(matches!(
            verdict(&checks, Model::Dc),
            Verdict::Untested { .. }
        ));
    }

    #[test]
    fn a_missed_bound_fails_and_a_respected_one_is_not_evidence() {
        let base = Check {
            model: Model::Dc,
            procs: 8,
            cti: 5.0,
            from: vec![1, 2, 4],
            projected: 26.8,
            interval: None,
            measured: 89.0,
            measured_censored: Censored::Above,
            below_noise: false,
            error_pp: 26.8 - 89.0,
            error_rel: (26.8 - 89.0) / 89.0,
            error_is_bound: true,
            inside_interval: None,
        };
        let v = verdict(std::slice::from_ref(&base), Model::Dc);
        match v {
            Verdict::Failed { why, .. } => {
                assert!(why.contains(">89.0") && why.contains("at least"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        let respected = Check {
            projected: 95.0,
            error_pp: 6.0,
            ..base
        };
        assert!(matches!(
            verdict(&[respected], Model::Dc),
            Verdict::Untested { .. }
        ));
    }
}
