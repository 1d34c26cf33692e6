//! Latency demand: the method of bandwidth demand over added one-way latency instead of
//! a bandwidth share. A sweep's `latencies` run each size on the full link with each
//! latency added (0 is the baseline); the CTI of a step is its median time against the
//! baseline's, and a size's **latency tolerance** at level c is the largest added latency
//! whose CTI stays within c, read between the two measured steps around the crossing
//! (straight in the latency: each message on the critical path waits it once), or a
//! bound where no step crosses (`<` the first step, `>` the last).
//!
//! To project it, a size's completion time is modelled as
//!
//!   T(L) = T(0) + m x L
//!
//! where m, the added latencies on the critical path (round trips' one-way halves,
//! messages in sequence), is fitted by least squares through the origin over the size's
//! steps. The tolerance at c is then L = c T(0) / m, and T(0) and m are modelled as
//! functions of p by [`normal_form`] as the traffic model's parts are: the tolerance at P
//! is c T0(P) / m(P). Its error is counted in ln L, where a part's relative error is an
//! additive one.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::method::demand::Censored;
use crate::method::noise::MEDIAN_EFFICIENCY;
use crate::method::normal_form::{self, Form, Found, Sample};
use crate::method::stats;

/// One size's latency steps: each step's times (seconds), the baseline (0) among them.
#[derive(Clone, Debug, Default)]
pub struct Steps {
    pub procs: u32,
    pub times: BTreeMap<u64, Vec<f64>>,
}

impl Steps {
    /// The median time at each step.
    pub fn medians(&self) -> BTreeMap<u64, f64> {
        self.times
            .iter()
            .filter(|(_, t)| !t.is_empty())
            .map(|(&l, t)| (l, stats::median(t)))
            .collect()
    }

    /// The CTI (percent) of every step beyond the baseline; empty without a baseline.
    pub fn cti(&self) -> Vec<(u64, f64)> {
        let m = self.medians();
        let Some(&base) = m.get(&0) else {
            return Vec::new();
        };
        m.iter()
            .filter(|(&l, _)| l > 0)
            .map(|(&l, &t)| (l, (t / base - 1.0) * 100.0))
            .collect()
    }

    /// The pooled relative spread of one run about its step's median.
    fn run_cv(&self) -> f64 {
        let mut rel = Vec::new();
        for t in self.times.values().filter(|t| t.len() >= 2) {
            let m = stats::median(t);
            if m > 0.0 {
                rel.extend(t.iter().map(|x| x / m - 1.0));
            }
        }
        stats::rms(&rel)
    }
}

/// A size's tolerance at one level, as measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Tolerance {
    pub procs: u32,
    pub cti: f64,
    /// The largest added one-way latency within the level, us; with `censored` not
    /// `none` no measurement: `below` (even the first step exceeded the level: at most
    /// that step) or `above` (every step kept it: more than the last).
    pub latency_us: f64,
    pub censored: Censored,
    /// The two steps it was read between (us).
    pub between: Option<[u64; 2]>,
}

/// The tolerance of `steps` at `level` percent CTI; `None` without a baseline or a step
/// beyond it.
pub fn tolerance(steps: &Steps, level: f64) -> Option<Tolerance> {
    let cti = steps.cti();
    let (&(first, first_cti), &(last, _)) = (cti.first()?, cti.last()?);
    let read = |latency_us: f64, censored, between| Tolerance {
        procs: steps.procs,
        cti: level,
        latency_us,
        censored,
        between,
    };
    if first_cti > level {
        return Some(read(first as f64, Censored::Below, None));
    }
    let mut below = (0u64, 0.0f64);
    for &(l, c) in &cti {
        if c > level {
            let (l0, c0) = below;
            let at = l0 as f64 + (level - c0) / (c - c0) * (l - l0) as f64;
            return Some(read(at, Censored::None, Some([l0, l])));
        }
        below = (l, c);
    }
    Some(read(last as f64, Censored::Above, None))
}

/// A size's model parts: T(0) and m with their standard errors.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Parts {
    pub procs: u32,
    /// T(0), seconds, and its standard error.
    pub baseline: f64,
    pub baseline_se: f64,
    /// m: added latencies on the critical path (seconds of delay per second of added
    /// latency), and its standard error.
    pub round_trips: f64,
    pub round_trips_se: f64,
}

/// The model's parts of `steps`; `None` without a baseline, a step beyond it, or an m
/// above 0 (the latency did not slow the program at all).
pub fn parts(steps: &Steps) -> Option<Parts> {
    let m = steps.medians();
    let base = *m.get(&0)?;
    let (mut xy, mut xx) = (0.0, 0.0);
    let mut pts = Vec::new();
    for (&l, &t) in m.iter().filter(|(&l, _)| l > 0) {
        let x = l as f64 * 1e-6;
        xy += x * (t - base);
        xx += x * x;
        pts.push((l, x, t - base));
    }
    if xx <= 0.0 {
        return None;
    }
    let slope = xy / xx;
    if !(slope > 0.0 && slope.is_finite()) {
        return None;
    }
    let cv = steps.run_cv();
    let n = |l: u64| steps.times.get(&l).map_or(1, Vec::len).max(1) as f64;
    let baseline_se = MEDIAN_EFFICIENCY * cv * base / n(0).sqrt();
    let scatter = if pts.len() >= 2 {
        let rss: f64 = pts.iter().map(|(_, x, y)| (y - slope * x).powi(2)).sum();
        (rss / (pts.len() - 1) as f64 / xx).sqrt()
    } else {
        0.0
    };
    // The medians' noise carried through the slope: each step's, and the baseline's,
    // which every step is measured against.
    let se = |t: f64, l: u64| MEDIAN_EFFICIENCY * cv * t / n(l).sqrt();
    let steps_var: f64 = pts
        .iter()
        .map(|&(l, x, y)| (x * se(y + base, l)).powi(2))
        .sum();
    let sum_x: f64 = pts.iter().map(|p| p.1).sum();
    let noise = (steps_var + (sum_x * baseline_se).powi(2)).sqrt() / xx;
    Some(Parts {
        procs: steps.procs,
        baseline: base,
        baseline_se,
        round_trips: slope,
        round_trips_se: scatter.max(noise),
    })
}

/// The parts modelled as functions of p.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fit {
    pub baseline: Found,
    pub round_trips: Found,
}

/// Fit the parts of `sizes` (at least two), keeping the forms positive up to `reach`.
pub fn fit(sizes: &[Parts], reach: f64) -> Option<Fit> {
    if sizes.len() < 2 {
        return None;
    }
    let forms = Form::all();
    let samples = |f: fn(&Parts) -> (f64, f64)| -> Vec<Sample> {
        sizes
            .iter()
            .map(|s| {
                let (value, se) = f(s);
                Sample {
                    p: s.procs as f64,
                    value,
                    se,
                }
            })
            .collect()
    };
    Some(Fit {
        baseline: normal_form::search_or(
            &samples(|s| (s.baseline, s.baseline_se)),
            &forms,
            reach,
            Form::Power,
        )?,
        round_trips: normal_form::search_or(
            &samples(|s| (s.round_trips, s.round_trips_se)),
            &forms,
            reach,
            Form::Power,
        )?,
    })
}

/// ln of the tolerance (us) at `p` for `level` percent by the averaged models.
pub fn log_tolerance(fit: &Fit, p: f64, level: f64) -> Option<f64> {
    let l = level / 100.0 * fit.baseline.at(p)? / fit.round_trips.at(p)? * 1e6;
    (l.is_finite() && l > 0.0).then(|| l.ln())
}

/// How far the averaged forms disagree at `p`, in ln.
pub fn selection_spread(fit: &Fit, p: f64) -> Option<f64> {
    Some(
        fit.baseline
            .log_spread(p)?
            .hypot(fit.round_trips.log_spread(p)?),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program whose every added microsecond costs it `m` microseconds: T(L) = T0 + m L.
    fn steps(procs: u32, t0: f64, m: f64) -> Steps {
        let mut s = Steps {
            procs,
            ..Steps::default()
        };
        for l in [0u64, 50, 200, 1000] {
            s.times.insert(
                l,
                (0..3)
                    .map(|r| (t0 + m * l as f64 * 1e-6) * (1.0 + 1e-3 * r as f64))
                    .collect(),
            );
        }
        s
    }

    #[test]
    fn the_tolerance_is_read_between_steps_and_bounded_beyond_them() {
        // T0 = 1 s, m = 200: 50 us costs 1%, 200 us 4%, 1000 us 20%.
        let s = steps(2, 1.0, 200.0);
        let t = tolerance(&s, 10.0).unwrap();
        assert_eq!(t.censored, Censored::None);
        assert_eq!(t.between, Some([200, 1000]));
        assert!((t.latency_us - 500.0).abs() < 5.0, "{t:?}");
        assert_eq!(tolerance(&s, 0.5).unwrap().censored, Censored::Below);
        let above = tolerance(&s, 50.0).unwrap();
        assert_eq!(
            (above.censored, above.latency_us),
            (Censored::Above, 1000.0)
        );
        let p = parts(&s).unwrap();
        assert!((p.round_trips - 200.0).abs() < 2.0, "{p:?}");
    }

    #[test]
    fn the_tolerance_is_projected_from_its_parts() {
        // m grows as p (a ring of messages in sequence), T0 falls as 1/p + 0.5: four sizes,
        // so that the two coefficients of T0 can be judged.
        let sizes: Vec<Parts> = [2u32, 4, 8, 16]
            .iter()
            .map(|&p| parts(&steps(p, 0.5 + 4.0 / p as f64, 50.0 * p as f64)).unwrap())
            .collect();
        let f = fit(&sizes, 32.0).unwrap();
        let want = 0.1 * (0.5 + 4.0 / 32.0) / (50.0 * 32.0) * 1e6;
        let got = log_tolerance(&f, 32.0, 10.0).unwrap().exp();
        assert!((got / want - 1.0).abs() < 0.05, "{got} vs {want}");
    }
}
