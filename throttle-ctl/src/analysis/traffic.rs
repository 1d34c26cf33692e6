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
//! candidates); the models about as good as the chosen one, and the chosen ones' errors
//! on sizes left out of their fit, give the projection's model spread ([`band`]).

use std::collections::BTreeMap;

use serde::Serialize;

use super::cells::{bw_of, BwKey, FULL};
use super::normal_form::{self, Form, Found, Model};

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

/// k for one size: least squares of (T(w) - T100) on (V/C)(1/w - 1) through the origin.
fn exposed_at(medians: &BTreeMap<(u32, BwKey), f64>, p: u32, transfer_s: f64) -> Option<f64> {
    let base = *medians.get(&(p, FULL))?;
    let (mut xy, mut xx) = (0.0, 0.0);
    for (&(_, bw), &t) in medians.range((p, 0)..(p, FULL)) {
        let w = bw_of(bw) / 100.0;
        let x = transfer_s * (1.0 / w - 1.0);
        xy += x * (t - base);
        xx += x * x;
    }
    (xx > 0.0).then_some(xy / xx)
}

/// Fit on `sizes` (those with traffic, a baseline and a throttled step), searching the
/// forms that stay positive up to `reach` procs; `None` with fewer than 2 such sizes or
/// a part no form fits.
pub fn fit(
    medians: &BTreeMap<(u32, BwKey), f64>,
    v: &Volumes,
    sizes: &[u32],
    reach: f64,
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
        let Some(k) = exposed_at(medians, p, b / v.capacity) else {
            continue;
        };
        if k <= 0.0 {
            continue;
        }
        volume.push((p as f64, b));
        baseline.push((p as f64, t));
        exposed.push((p as f64, k));
    }
    if exposed.len() < 2 {
        return None;
    }
    let forms = Form::all();
    // With two sizes nothing of two coefficients can be judged: power laws through both
    // for V and T(100%), and one k for all.
    let constant = Form::Term {
        num: 0,
        den: 1,
        log: 0,
        constant: false,
        peers: false,
    };
    Some(Fit {
        volume: normal_form::search_or(&volume, &forms, reach, Form::Power)?,
        baseline: normal_form::search_or(&baseline, &forms, reach, Form::Power)?,
        exposed: normal_form::search_or(&exposed, &forms, reach, constant)?,
        exposed_by_size: exposed.iter().map(|&(p, k)| (p as u32, k)).collect(),
    })
}

/// The bandwidth (percent) that keeps the CTI within `level` percent, for a program with
/// transfer weight `k` that sends `bytes` per node and takes `t100` seconds at 100%.
pub fn demand(k: f64, capacity: f64, bytes: f64, t100: f64, level: f64) -> f64 {
    let exposed_s = k * bytes / capacity;
    100.0 / (1.0 + level / 100.0 * t100 / exposed_s)
}

/// Whether every value is a positive finite number (a model part's value that can make
/// a demand).
fn all_positive(values: &[f64]) -> bool {
    values.iter().all(|x| x.is_finite() && *x > 0.0)
}

/// The demand at `p` by these models of k, V and T(100%); `None` where one of them is not
/// a positive finite number there (a model is checked positive over the fitted sizes
/// and up to the farthest target, not below the smallest size: `(p-1)^-1` is infinite
/// at one node).
fn demand_by(
    k: &Model,
    volume: &Model,
    baseline: &Model,
    capacity: f64,
    p: u32,
    level: f64,
) -> Option<f64> {
    let p = p as f64;
    let (k, vol, base) = (k.at(p), volume.at(p), baseline.at(p));
    if !all_positive(&[k, vol, base]) {
        return None;
    }
    let d = demand(k, capacity, vol, base, level);
    (d.is_finite() && d > 0.0).then_some(d)
}

/// The demand at `p` for `level` by the chosen models.
pub fn project(v: &Volumes, fit: &Fit, p: u32, level: f64) -> Option<f64> {
    demand_by(
        &fit.exposed.best,
        &fit.volume.best,
        &fit.baseline.best,
        v.capacity,
        p,
        level,
    )
}

/// How far off, relatively, the chosen models' k V / T(100%) may be at `p`: each part's
/// leave-one-size-out error (how far it missed a fitted size it was not fitted on),
/// combined in quadrature, and grown by one more such error per doubling of the size
/// beyond the largest fitted one. `None` where no part was judged (two sizes).
pub fn left_out_error(fit: &Fit, p: u32) -> Option<f64> {
    let parts = [&fit.exposed, &fit.volume, &fit.baseline];
    if parts.iter().all(|f| f.best.loso.is_none()) {
        return None;
    }
    let e = parts
        .iter()
        .filter_map(|f| f.best.loso)
        .map(|e| e * e)
        .sum::<f64>()
        .sqrt();
    let largest = fit.exposed_by_size.iter().map(|x| x.0).max().unwrap_or(1);
    let doublings = (p as f64 / largest.max(1) as f64).log2().max(0.0);
    Some(e * (1.0 + doublings))
}

/// The lowest and highest demand at `p` for `level` over every combination of the
/// models about as good as the chosen ones (at most 4 of each part), and of the chosen
/// ones with k V / T(100%) off by its [`left_out_error`] either way: how far the data
/// leave the projection open.
pub fn band(v: &Volumes, fit: &Fit, p: u32, level: f64) -> Option<(f64, f64)> {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    if let Some(e) = left_out_error(fit, p) {
        let pf = p as f64;
        let (k, vol, base) = (
            fit.exposed.best.at(pf),
            fit.volume.best.at(pf),
            fit.baseline.best.at(pf),
        );
        let valid = all_positive(&[k, vol, base]);
        for scale in [1.0 - e.min(0.9), 1.0 + e].into_iter().filter(|_| valid) {
            let d = demand(k * scale, v.capacity, vol, base, level);
            if d.is_finite() && d > 0.0 {
                lo = lo.min(d);
                hi = hi.max(d);
            }
        }
    }
    for k in fit.exposed.close.iter().take(4) {
        for vol in fit.volume.close.iter().take(4) {
            for base in fit.baseline.close.iter().take(4) {
                if let Some(d) = demand_by(k, vol, base, v.capacity, p, level) {
                    lo = lo.min(d);
                    hi = hi.max(d);
                }
            }
        }
    }
    (lo <= hi).then_some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::cells::bw_key;

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
                m.insert((p, bw_key(bw)), t100 + 0.6 * v / cap * (1.0 / w - 1.0));
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
        let f = fit(&m, &v, &[2, 4, 8, 16], 32.0).unwrap();
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
        // The band holds the projection; the paper's power law for T(100%), always among
        // the alternatives, is the one that disagrees (1 + 8/p is no power law).
        let (lo, hi) = band(&v, &f, 32, 10.0).unwrap();
        assert!(
            lo <= got + 1e-9 && got <= hi + 1e-9 && hi - lo < 6.0,
            "{lo} {hi}"
        );
    }

    #[test]
    fn sizes_without_traffic_do_not_fit() {
        let (m, mut v) = exact(&[1, 2]);
        v.bytes_per_node.insert(1, 0.0);
        assert!(fit(&m, &v, &[1, 2], 4.0).is_none());
    }
}
