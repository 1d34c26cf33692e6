//! Intervals of every derived number by a bootstrap over runs.
//!
//! Each resample draws, for every (size, bandwidth) cell, as many runs as it has, with
//! replacement, and runs the whole [`crate::method::chain`] again: medians, CTI, the
//! monotone fix-up, demand, the demand constant, projection and saturation. The interval
//! of a number is the 5th to 95th percentile of its resampled values (a 90% percentile
//! interval). It covers run-to-run noise only: how far the model itself is off for
//! larger sizes is what the backtest shows. A censored figure counts as missing in that
//! resample (it is a bound, not a value); a number that exists in fewer than 90% of the
//! resamples (a demand that flips between censored and not, a constant that often has no
//! pair) gets no interval, and says in how many it existed.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::data::cells::BwKey;
use crate::method::chain::{self, Inputs};
use crate::method::demand::Censored;
use crate::method::stats::{self, Rng};

/// The interval's nominal coverage.
pub const LEVEL: f64 = 0.90;

/// The interval of one number: every interval of the analysis's JSON has this one shape.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
    /// What it accounts for.
    pub covers: Covers,
}

/// What an interval accounts for (`covers` in the JSON).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Covers {
    /// Run-to-run noise: the 90% bootstrap interval over runs.
    Noise,
    /// Run-to-run noise and the model's error (a projection's `model_error` says how).
    NoiseAndModelError,
    /// A median's order-statistic interval (its exact coverage beside it: `coverage`).
    Median,
}

impl Interval {
    /// The 90% bootstrap interval over runs.
    pub fn noise(low: f64, high: f64) -> Interval {
        Interval {
            low,
            high,
            covers: Covers::Noise,
        }
    }

    /// An interval widened by the model's error.
    pub fn with_model_error(low: f64, high: f64) -> Interval {
        Interval {
            low,
            high,
            covers: Covers::NoiseAndModelError,
        }
    }

    /// A median's order-statistic interval.
    pub fn of_median(low: f64, high: f64) -> Interval {
        Interval {
            low,
            high,
            covers: Covers::Median,
        }
    }
}

/// A number's resampled values, summarised.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    /// `None` when the number existed in fewer than 90% of the resamples.
    pub interval: Option<Interval>,
    /// The share of resamples in which it existed.
    pub share: f64,
}

/// Resampled intervals of a chain's numbers, keyed as in [`chain::Chain`].
#[derive(Clone, Debug, Default)]
pub struct Intervals {
    pub resamples: usize,
    pub demand: BTreeMap<(u32, usize), Spread>,
    pub dc: Option<Spread>,
    pub projection: BTreeMap<(u32, usize), Spread>,
    pub saturation: BTreeMap<usize, Spread>,
    pub traffic_projection: BTreeMap<(u32, usize), Spread>,
    pub traffic_saturation: BTreeMap<usize, Spread>,
    /// How often each form was the traffic model's best one for each part (`T(100%)`,
    /// `V`, `k`), over the resamples that fitted it: how stable the model choice is.
    pub forms: BTreeMap<&'static str, BTreeMap<String, usize>>,
}

/// How many resamples for `runs` runs: 1,000, fewer for very large data (at least
/// [`MIN_RESAMPLES`]), so that the analysis of a million rows still answers in seconds.
pub fn resamples_for(runs: usize) -> usize {
    (20_000_000 / runs.max(1)).clamp(MIN_RESAMPLES, 1000)
}

/// The fewest resamples an interval is read from.
pub const MIN_RESAMPLES: usize = 100;

/// What one analysis's bootstraps may cost, in fits of one size (a resample of a
/// bootstrap over `k` sizes fits `k`): the bootstrap of the fitted sizes and, apart, the
/// backtest's (one bootstrap per size checked, over the sizes below it) each get this
/// much. A sweep's handful of sizes never reaches it (16 sizes at 1,000 resamples cost
/// 16,000 and the backtest 119,000); a store of many sizes, or a problem axis whose
/// every value is analysed in turn (each gets its share), has its resamples reduced
/// instead of keeping `analyze` busy for hours (issue 55: 32 sizes x 32 problem values,
/// 899 s; experiments/2026-12-02-analysis-cost.md).
pub const WORK: usize = 120_000;

/// Resamples for bootstraps that fit `sizes` sizes in all, within `work` size fits:
/// `resamples`, fewer where that would cost more, never fewer than [`MIN_RESAMPLES`].
pub fn within(resamples: usize, sizes: usize, work: usize) -> usize {
    (work / sizes.max(1)).clamp(MIN_RESAMPLES.min(resamples), resamples)
}

fn spread(mut values: Vec<f64>, resamples: usize) -> Spread {
    let share = values.len() as f64 / resamples.max(1) as f64;
    if values.is_empty() || share < LEVEL {
        return Spread {
            interval: None,
            share,
        };
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let at =
        |q: f64| values[((q * (values.len() - 1) as f64).round() as usize).min(values.len() - 1)];
    let tail = (1.0 - LEVEL) / 2.0;
    Spread {
        interval: Some(Interval::noise(at(tail), at(1.0 - tail))),
        share,
    }
}

/// Bootstrap `chain::run` with the same inputs, fitted sizes and targets. The traffic
/// volumes stay at their medians (the bytes a deterministic program sends vary far less
/// than its times), and so does each size's noise.
pub fn intervals(
    inputs: &Inputs,
    cells: &BTreeMap<(u32, BwKey), Vec<f64>>,
    fit: &[u32],
    targets: &[u32],
    resamples: usize,
) -> Intervals {
    let mut rng = Rng::new(0xB007_5742);
    let mut demand: BTreeMap<(u32, usize), Vec<f64>> = BTreeMap::new();
    let mut dc = Vec::new();
    let mut projection: BTreeMap<(u32, usize), Vec<f64>> = BTreeMap::new();
    let mut saturation: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut by_traffic: BTreeMap<(u32, usize), Vec<f64>> = BTreeMap::new();
    let mut traffic_saturation: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut forms: BTreeMap<&'static str, BTreeMap<String, usize>> = BTreeMap::new();
    let mut draw = Vec::new();
    for _ in 0..resamples {
        let medians: BTreeMap<(u32, BwKey), f64> = cells
            .iter()
            .map(|(&k, t)| {
                draw.clear();
                draw.extend((0..t.len()).map(|_| t[rng.below(t.len())]));
                (k, stats::median(&draw))
            })
            .collect();
        let c = chain::run(inputs, &medians, fit, targets);
        // A censored figure is a bound, not a value: a resample where it is censored
        // counts as one where the value does not exist.
        for (k, n) in c.demand {
            if n.censored == Censored::None {
                demand.entry(k).or_default().push(n.bw_pct);
            }
        }
        if let Some(v) = c.dc {
            dc.push(v);
        }
        for (k, (v, from_censored)) in c.projection {
            if !from_censored {
                projection.entry(k).or_default().push(v);
            }
        }
        for (k, (v, from_censored)) in c.saturation {
            if !from_censored {
                saturation.entry(k).or_default().push(v);
            }
        }
        for (k, v) in c.traffic_projection {
            by_traffic.entry(k).or_default().push(v);
        }
        for (k, v) in c.traffic_saturation {
            traffic_saturation.entry(k).or_default().push(v);
        }
        if let Some(f) = &c.traffic {
            for (part, found) in [
                ("T(100%)", &f.baseline),
                ("V", &f.volume),
                ("k", &f.exposed),
            ] {
                *forms
                    .entry(part)
                    .or_default()
                    .entry(found.best.form.name())
                    .or_default() += 1;
            }
        }
    }
    Intervals {
        resamples,
        demand: demand
            .into_iter()
            .map(|(k, v)| (k, spread(v, resamples)))
            .collect(),
        dc: (!dc.is_empty()).then(|| spread(dc, resamples)),
        projection: projection
            .into_iter()
            .map(|(k, v)| (k, spread(v, resamples)))
            .collect(),
        saturation: saturation
            .into_iter()
            .map(|(k, v)| (k, spread(v, resamples)))
            .collect(),
        traffic_projection: by_traffic
            .into_iter()
            .map(|(k, v)| (k, spread(v, resamples)))
            .collect(),
        traffic_saturation: traffic_saturation
            .into_iter()
            .map(|(k, v)| (k, spread(v, resamples)))
            .collect(),
        forms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::cells::{pct, FULL};
    use crate::method::demand::Interp;

    /// Two sizes whose CTI(bw) = k (40 - bw) below 40%, with multiplicative noise.
    fn cells(noise: f64, runs: usize, seed: u64) -> BTreeMap<(u32, BwKey), Vec<f64>> {
        let mut rng = Rng::new(seed);
        let mut out = BTreeMap::new();
        for (p, k) in [(4u32, 1.0f64), (16, 2.0)] {
            for bw in [20.0, 25.0, 30.0, 35.0, 40.0, 100.0] {
                let cti: f64 = if bw == 100.0 {
                    0.0
                } else {
                    (k * (40.0 - bw)).max(0.0)
                };
                let t: Vec<f64> = (0..runs)
                    .map(|_| {
                        let u = rng.below(1_000_001) as f64 / 1e6 - 0.5;
                        10.0 * (1.0 + cti / 100.0) * (1.0 + 2.0 * noise * u)
                    })
                    .collect();
                out.insert((p, pct(bw)), t);
            }
        }
        out
    }

    #[test]
    fn intervals_widen_with_noise_and_cover_the_noise_free_answer() {
        let none = BTreeMap::new();
        let inputs = Inputs {
            levels: &[10.0],
            interp: Interp::default(),
            noise: &none,
            volumes: None,
        };
        let medians = cells(0.0, 1, 1)
            .into_iter()
            .map(|(k, v)| (k, v[0]))
            .collect();
        let truth = chain::run(&inputs, &medians, &[4, 16], &[64]).projection[&(64, 0)].0;
        let quiet = intervals(&inputs, &cells(0.01, 9, 7), &[4, 16], &[64], 400);
        let loud = intervals(&inputs, &cells(0.05, 9, 7), &[4, 16], &[64], 400);
        let width = |s: &Spread| s.interval.map(|i| i.high - i.low).unwrap();
        let (q, l) = (quiet.projection[&(64, 0)], loud.projection[&(64, 0)]);
        assert!(width(&l) > 2.0 * width(&q), "{q:?} {l:?}");
        assert_eq!(q.share, 1.0);
        assert!(quiet.dc.unwrap().interval.is_some());
        assert!(quiet.demand[&(16, 0)].interval.is_some());
        assert!(quiet.saturation[&0].interval.is_some());
        // Over many data sets the 90% interval holds the noise-free projection most of
        // the time (a percentile bootstrap of medians of 9 undercovers somewhat).
        let covered = (0..40u64)
            .filter(|&seed| {
                let i = intervals(&inputs, &cells(0.05, 9, seed), &[4, 16], &[64], 300);
                let iv = i.projection[&(64, 0)].interval.unwrap();
                iv.low <= truth && truth <= iv.high
            })
            .count();
        assert!(covered >= 32, "covered {covered} of 40");
    }

    #[test]
    fn a_number_that_often_vanishes_gets_no_interval() {
        // One cell of three very different times at the lowest step: in many resamples
        // the demand at 4 procs is censored, so the constant often has no pair.
        let mut c = cells(0.0, 3, 7);
        c.insert((4, pct(35.0)), vec![10.0, 10.0, 20.0]);
        c.insert((4, pct(30.0)), vec![10.0, 10.0, 20.0]);
        c.insert((4, pct(25.0)), vec![10.0, 10.0, 20.0]);
        c.insert((4, pct(20.0)), vec![10.0, 10.0, 20.0]);
        c.insert((4, FULL), vec![10.0, 10.0, 10.0]);
        let none = BTreeMap::new();
        let inputs = Inputs {
            levels: &[10.0],
            interp: Interp::Linear,
            noise: &none,
            volumes: None,
        };
        let i = intervals(&inputs, &c, &[4, 16], &[64], 400);
        let dc = i.dc.unwrap();
        assert!(dc.share < LEVEL && dc.interval.is_none(), "{dc:?}");
    }

    #[test]
    fn fewer_resamples_for_huge_data() {
        assert_eq!(resamples_for(100), 1000);
        assert_eq!(resamples_for(1_000_000), 100);
        // A sweep's sizes cost their full count; many, fewer, never below the floor.
        assert_eq!(within(1000, 16, WORK), 1000);
        assert_eq!(within(1000, 2_015, WORK), 100);
        assert_eq!(within(1000, 600, WORK), 200);
        assert_eq!(within(50, 600, WORK), 50);
    }
}
