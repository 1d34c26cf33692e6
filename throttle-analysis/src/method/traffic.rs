//! A projection from the traffic the agents counted, beside the paper's demand constant.
//!
//! The paper's projection assumes demand grows as DC x sqrt(p). This one uses what was
//! measured instead: the bytes on the run's busiest link (the agents count every byte of
//! every node; the mean per node where the runs carry no per-node counts), and the
//! completion time at 100%. At a share w of the link a node needs V / (w C) seconds to
//! move its V bytes; part of that overlaps computation. The model:
//!
//!   T(w) = T(100%) + k x (V / C) x (1/w - 1)
//!
//! with k, the transfer's weight in the completion time, fitted by least squares over
//! every throttled step of each fitted size. Below 1 it is the share of the transfer not
//! overlapped with computation; above 1 the critical path carries more than one node's
//! bytes (a broadcast tree relays them, ranks wait on each other).
//! The demand for a CTI level c follows: w = 1 / (1 + c T(100%) / (k V / C)). To project
//! to p', each of T(100%), V and k is modelled as a function of p by the model search of
//! [`normal_form`] (the paper's strong-scaling form and a power law among the
//! candidates), each value weighed by its run-to-run noise, and the forms the data cannot
//! tell apart averaged; how far they disagree at a target is the projection's
//! model-selection spread ([`selection_spread`]).
//!
//! The demand depends on the parts only through R = k V / (C T(100%)), the share of the
//! full-bandwidth time the transfer would take: logit(w) = ln R - ln c. A relative error
//! of a part is an additive error of the demand's logit, which is where
//! [`crate::trust::model_error`] adds the projection's errors up (and why its intervals never
//! leave 0-100% of the link).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::data::cells::{percent, BwKey, FULL, LOWEST};
use crate::method::noise::Floor;
use crate::method::normal_form::{self, Form, Found, Sample};

/// What the traffic model needs besides the medians.
#[derive(Clone, Debug)]
pub struct Volumes {
    /// Median bytes per run, per size (procs): on the busiest link (see `busiest`), or
    /// sent per node on average.
    pub bytes_per_node: BTreeMap<u32, f64>,
    /// The link's capacity, bytes per second.
    pub capacity: f64,
    /// The bytes are those of the run's busiest link (the most one node sent or received),
    /// not the mean per node: where traffic is uneven (a master, a broadcast root) the
    /// busiest link is the one the completion time waits for.
    pub busiest: bool,
}

/// The model fitted on some sizes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fit {
    /// V(p), bytes per node.
    pub volume: Found,
    /// T(p) at 100%, in the analysis's time.
    pub baseline: Found,
    /// k(p): the transfer time's weight in the completion time (see above).
    pub exposed: Found,
    /// Per fitted size: (procs, k of that size alone).
    pub exposed_by_size: Vec<(u32, f64)>,
}

/// k for one size and its standard error: least squares of (T(w) - T100) on
/// (V/C)(1/w - 1) through the origin. The error is the larger of the medians' noise
/// carried through the fit (each step's and the baseline's median, from the size's pooled
/// spread) and the scatter of the steps about the line (a curve not quite straight in
/// 1/w makes k uncertain however many repeats there are).
pub(crate) fn exposed_at(
    medians: &BTreeMap<(u32, BwKey), f64>,
    p: u32,
    transfer_s: f64,
    noise: Option<&Floor>,
) -> Option<(f64, f64)> {
    let base = *medians.get(&(p, FULL))?;
    let (mut xy, mut xx, mut sx) = (0.0, 0.0, 0.0);
    let mut points = Vec::new();
    for (&(_, bw), &t) in medians.range((p, LOWEST)..(p, FULL)) {
        let w = percent(bw) / 100.0;
        let x = transfer_s * (1.0 / w - 1.0);
        xy += x * (t - base);
        xx += x * x;
        sx += x;
        points.push((x, t));
    }
    if xx <= 0.0 {
        return None;
    }
    let k = xy / xx;
    let noise_var = noise.map_or(0.0, |f| {
        let step: f64 = points
            .iter()
            .map(|&(x, t)| (x * f.median_se(t, f.step_repeats)).powi(2))
            .sum();
        (step + (sx * f.median_se(base, f.baseline_repeats)).powi(2)) / (xx * xx)
    });
    let m = points.len();
    let scatter_var = if m >= 2 {
        let rss: f64 = points
            .iter()
            .map(|&(x, t)| (t - base - k * x).powi(2))
            .sum();
        rss / (m - 1) as f64 / xx
    } else {
        0.0
    };
    Some((k, noise_var.max(scatter_var).sqrt()))
}

/// Fit on `sizes` (those with traffic, a baseline and a throttled step), searching the
/// forms that stay positive up to `reach` procs, each size's values weighed by `noise`;
/// `None` with fewer than 2 such sizes or a part no form fits.
pub fn fit(
    medians: &BTreeMap<(u32, BwKey), f64>,
    v: &Volumes,
    sizes: &[u32],
    reach: f64,
    noise: &BTreeMap<u32, Floor>,
) -> Option<Fit> {
    if v.capacity.is_nan() || v.capacity <= 0.0 {
        return None;
    }
    let mut volume = Vec::new();
    let mut baseline = Vec::new();
    let mut exposed = Vec::new();
    for &p in sizes {
        let Some(&b) = v.bytes_per_node.get(&p) else {
            continue;
        };
        let (Some(&t), true) = (medians.get(&(p, FULL)), b > 0.0) else {
            continue;
        };
        let floor = noise.get(&p);
        let Some((k, k_se)) = exposed_at(medians, p, b / v.capacity, floor) else {
            continue;
        };
        if k <= 0.0 {
            continue;
        }
        let pf = p as f64;
        // The bytes a program moves vary far less than its times: exact, weighed by the
        // relative floor alone.
        volume.push(Sample::exact(pf, b));
        baseline.push(Sample {
            p: pf,
            value: t,
            se: floor.map_or(0.0, |f| f.median_se(t, f.baseline_repeats)),
        });
        exposed.push(Sample {
            p: pf,
            value: k,
            se: k_se,
        });
    }
    if exposed.len() < 2 {
        return None;
    }
    let forms = Form::all();
    // With two sizes nothing can be judged: power laws through both for V and T(100%),
    // and one k for all.
    Some(Fit {
        volume: normal_form::search_or(&volume, &forms, reach, Form::Power)?,
        baseline: normal_form::search_or(&baseline, &forms, reach, Form::Power)?,
        exposed: normal_form::search_or(&exposed, &forms, reach, normal_form::CONSTANT)?,
        exposed_by_size: exposed.iter().map(|s| (s.p as u32, s.value)).collect(),
    })
}

/// The bandwidth (percent) that keeps the CTI within `level` percent, for a program with
/// transfer weight `k` that sends `bytes` per node and takes `t100` seconds at 100%.
pub fn demand(k: f64, capacity: f64, bytes: f64, t100: f64, level: f64) -> f64 {
    let exposed_s = k * bytes / capacity;
    100.0 / (1.0 + level / 100.0 * t100 / exposed_s)
}

/// The share of the full-bandwidth time the transfer takes at `p`, R = k V / (C T(100%)),
/// by the averaged models; `None` where a part has no positive finite value there (a
/// model is checked positive over the fitted sizes and up to the farthest target, not
/// below the smallest size: `(p-1)^-1` is infinite at one node).
pub fn share(v: &Volumes, fit: &Fit, p: f64) -> Option<f64> {
    let (k, vol, base) = (fit.exposed.at(p)?, fit.volume.at(p)?, fit.baseline.at(p)?);
    let r = k * vol / v.capacity / base;
    (r.is_finite() && r > 0.0).then_some(r)
}

/// The demand at `p` for `level` by the averaged models.
pub fn project(v: &Volumes, fit: &Fit, p: u32, level: f64) -> Option<f64> {
    let r = share(v, fit, p as f64)?;
    let d = 100.0 / (1.0 + level / 100.0 / r);
    (d.is_finite() && d > 0.0).then_some(d)
}

/// How far the forms the data cannot tell apart disagree at `p`: the parts' weighted
/// spreads in ln, added in quadrature (ln R, and so the demand's logit, is the sum of the
/// parts' logs); `None` where a part has no value there.
pub fn selection_spread(fit: &Fit, p: u32) -> Option<f64> {
    let p = p as f64;
    let parts = [&fit.exposed, &fit.volume, &fit.baseline];
    let mut ss = 0.0;
    for f in parts {
        ss += f.log_spread(p)?.powi(2);
    }
    Some(ss.sqrt())
}

/// The smallest size, from `from` (the smallest fitted one) up to 2^20 processes, at
/// which the link saturates at
/// `level` by the traffic model: the transfer on the full link, k V / C, makes the program
/// `level` percent slower than it would be on an unlimited network, T(100%) - k V / C
/// (equivalently R >= c / (1 + c)); with `shift` added to ln R (an envelope of its
/// error). Fractional: where the curve crosses, between the sizes of a fine grid in
/// log p. `None` when it does not before 2^20 or before a part's model stops having a
/// positive value.
pub fn saturation(
    v: &Volumes,
    fit: &Fit,
    from: f64,
    level: f64,
    shift: impl Fn(f64) -> f64,
) -> Option<f64> {
    let c = level / 100.0;
    let threshold = (c / (1.0 + c)).ln();
    crate::method::demand::first_crossing(from, |p| {
        Some(share(v, fit, p)?.ln() + shift(p) - threshold)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::cells::pct;

    /// A program that follows the model exactly: V = 1e6 p^0.5 bytes per node, T100 =
    /// 1 + 8/p, k = 0.6, on a 125 MB/s link.
    fn exact(sizes: &[u32]) -> (BTreeMap<(u32, BwKey), f64>, Volumes) {
        let cap = 125e6;
        let mut m = BTreeMap::new();
        let mut bytes = BTreeMap::new();
        for &p in sizes {
            let v = 1e6 * (p as f64).sqrt();
            bytes.insert(p, v);
            let t100 = 1.0 + 8.0 / p as f64;
            m.insert((p, FULL), t100);
            for bw in [5.0, 10.0, 20.0, 40.0] {
                let w: f64 = bw / 100.0;
                m.insert((p, pct(bw)), t100 + 0.6 * v / cap * (1.0 / w - 1.0));
            }
        }
        (
            m,
            Volumes {
                bytes_per_node: bytes,
                capacity: cap,
                busiest: false,
            },
        )
    }

    #[test]
    fn recovers_the_model_and_projects_it() {
        // Four sizes: T(100%)'s two coefficients can be judged.
        let (m, v) = exact(&[2, 4, 8, 16, 32]);
        let f = fit(&m, &v, &[2, 4, 8, 16], 32.0, &BTreeMap::new()).unwrap();
        assert!(
            (f.volume.best.at(32.0) - 1e6 * 32f64.sqrt()).abs() < 1e-3,
            "{f:?}"
        );
        assert!((f.exposed.best.at(32.0) - 0.6).abs() < 1e-9, "{f:?}");
        assert!((f.baseline.best.at(32.0) - 1.25).abs() < 1e-9, "{f:?}");
        // At 32 the demand for CTI 10%: exposed transfer 0.6 * 1e6 sqrt(32) / 125e6 s,
        // T100 = 1.25: w = 1 / (1 + 0.1 * 1.25 / exposed).
        let exposed = 0.6 * 1e6 * 32f64.sqrt() / 125e6;
        let want = 100.0 / (1.0 + 0.1 * 1.25 / exposed);
        let got = project(&v, &f, 32, 10.0).unwrap();
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        // Exact data: the forms that stay are the exact ones, and they agree at 32.
        let spread = selection_spread(&f, 32).unwrap();
        assert!(spread < 0.02, "{spread} {f:?}");
    }

    /// The link saturates at `c` where the transfer on the full link reaches `c` of the
    /// rest of the time: R = k V / (C T(100%)) >= c / (1 + c).
    #[test]
    fn the_link_saturates_where_the_transfer_outgrows_the_level() {
        let (m, v) = exact(&[2, 4, 8, 16]);
        let f = fit(&m, &v, &[2, 4, 8, 16], 4096.0, &BTreeMap::new()).unwrap();
        // R(p) = 0.6 * 1e6 sqrt(p) / 125e6 / (1 + 8/p): 0.0242 at 16.
        let r = |p: f64| 0.6 * 1e6 * p.sqrt() / 125e6 / (1.0 + 8.0 / p);
        for level in [2.0, 5.0, 10.0] {
            let c = level / 100.0;
            let s = saturation(&v, &f, 2.0, level, |_| 0.0).unwrap();
            assert!((r(s) / (c / (1.0 + c)) - 1.0).abs() < 1e-3, "{level}: {s}");
        }
        // Shifted up by ln 2 (R twice as large), it saturates earlier.
        let early = saturation(&v, &f, 2.0, 10.0, |_| 2f64.ln()).unwrap();
        assert!(early < saturation(&v, &f, 2.0, 10.0, |_| 0.0).unwrap());
        // A level the link keeps at every size: none within reach.
        assert_eq!(saturation(&v, &f, 2.0, 1000.0, |_| -10.0), None);
    }

    #[test]
    fn sizes_without_traffic_do_not_fit() {
        let (m, mut v) = exact(&[1, 2]);
        v.bytes_per_node.insert(1, 0.0);
        assert!(fit(&m, &v, &[1, 2], 4.0, &BTreeMap::new()).is_none());
    }
}
