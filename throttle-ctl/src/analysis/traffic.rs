//! A projection from the traffic the agents counted, beside the paper's demand constant.
//!
//! The paper's projection assumes demand grows as DC x sqrt(p). This one uses what was
//! measured instead: the bytes each node sent per run (the agents count every byte), and
//! the completion time at 100%. At a share w of the link a node needs V / (w C) seconds
//! to move its V bytes; part of that overlaps computation. The model:
//!
//!   T(w) = T(100%) + k x (V / C) x (1/w - 1)
//!
//! with k, the transfer's weight in the completion time, fitted by least squares over
//! every throttled step of the fitted sizes (pooled; each size's own k is shown). Below 1
//! it is the share of the transfer not overlapped with computation; above 1 the critical
//! path carries more than one node's bytes (a broadcast tree relays them, ranks wait on
//! each other).
//! The demand for a CTI level c follows: w = 1 / (1 + c T(100%) / (k V / C)). To project
//! to p', V is fitted as a p^b over the sizes with traffic and T(100%) with the
//! strong-scaling regression (a power law with only two sizes).

use std::collections::BTreeMap;

use serde::Serialize;

use super::cells::{bw_of, BwKey, FULL};
use super::regression;

/// What the traffic model needs besides the medians.
#[derive(Clone, Debug)]
pub struct Volumes {
    /// Median bytes sent per node and run, per size (procs).
    pub bytes_per_node: BTreeMap<u32, f64>,
    /// The link's capacity, bytes per second.
    pub capacity: f64,
}

/// The model fitted on some sizes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fit {
    /// V(p) = a p^b, bytes per node.
    pub volume_a: f64,
    pub volume_b: f64,
    /// k, pooled: the transfer time's weight in the completion time (see above).
    pub exposed: f64,
    /// Per fitted size: (procs, k of that size alone).
    pub exposed_by_size: Vec<(u32, f64)>,
}

/// k for one size: least squares of (T(w) - T100) on (V/C)(1/w - 1) through the origin;
/// returns (sum xy, sum xx).
fn moments(medians: &BTreeMap<(u32, BwKey), f64>, p: u32, transfer_s: f64) -> Option<(f64, f64)> {
    let base = *medians.get(&(p, FULL))?;
    let (mut xy, mut xx) = (0.0, 0.0);
    for (&(_, bw), &t) in medians.range((p, 0)..(p, FULL)) {
        let w = bw_of(bw) / 100.0;
        let x = transfer_s * (1.0 / w - 1.0);
        xy += x * (t - base);
        xx += x * x;
    }
    (xx > 0.0).then_some((xy, xx))
}

/// Fit on `sizes` (those with traffic and a baseline); `None` with fewer than 2 such.
pub fn fit(medians: &BTreeMap<(u32, BwKey), f64>, v: &Volumes, sizes: &[u32]) -> Option<Fit> {
    let with: Vec<(u32, f64)> = sizes
        .iter()
        .filter_map(|&p| {
            let b = *v.bytes_per_node.get(&p)?;
            (b > 0.0 && medians.contains_key(&(p, FULL))).then_some((p, b))
        })
        .collect();
    if with.len() < 2 || v.capacity.is_nan() || v.capacity <= 0.0 {
        return None;
    }
    // log V = log a + b log p.
    let n = with.len() as f64;
    let (sx, sy) = with.iter().fold((0.0, 0.0), |(sx, sy), &(p, b)| {
        (sx + (p as f64).ln(), sy + b.ln())
    });
    let (mx, my) = (sx / n, sy / n);
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for &(p, b) in &with {
        let dx = (p as f64).ln() - mx;
        sxy += dx * (b.ln() - my);
        sxx += dx * dx;
    }
    if sxx <= 0.0 {
        return None;
    }
    let volume_b = sxy / sxx;
    let volume_a = (my - volume_b * mx).exp();
    let (mut xy, mut xx) = (0.0, 0.0);
    let mut exposed_by_size = Vec::new();
    for &(p, b) in &with {
        if let Some((a, c)) = moments(medians, p, b / v.capacity) {
            exposed_by_size.push((p, a / c));
            xy += a;
            xx += c;
        }
    }
    let exposed = xy / xx;
    (xx > 0.0 && exposed > 0.0).then_some(Fit {
        volume_a,
        volume_b,
        exposed,
        exposed_by_size,
    })
}

/// T(100%) at `p` from the fitted sizes' baselines: the strong-scaling regression with 3
/// or more sizes, else a power law through two.
pub fn baseline_at(medians: &BTreeMap<(u32, BwKey), f64>, sizes: &[u32], p: u32) -> Option<f64> {
    let pts: Vec<(f64, f64)> = sizes
        .iter()
        .filter_map(|&s| Some((s as f64, *medians.get(&(s, FULL))?)))
        .collect();
    let t = if let Some(r) = regression::regress(&pts) {
        r.c0 + r.c1 / p as f64 + r.c2 / (p as f64).sqrt()
    } else if pts.len() == 2 && pts[0].1 > 0.0 && pts[1].1 > 0.0 {
        let b = (pts[1].1 / pts[0].1).ln() / (pts[1].0 / pts[0].0).ln();
        pts[1].1 * (p as f64 / pts[1].0).powf(b)
    } else {
        return None;
    };
    (t.is_finite() && t > 0.0).then_some(t)
}

/// The bandwidth (percent) that keeps the CTI within `level` percent, for a program that
/// sends `bytes` per node and takes `t100` seconds at 100%.
pub fn demand(fit: &Fit, capacity: f64, bytes: f64, t100: f64, level: f64) -> f64 {
    let exposed_s = fit.exposed * bytes / capacity;
    100.0 / (1.0 + level / 100.0 * t100 / exposed_s)
}

/// Project the demand at `p` for each level.
pub fn project(
    medians: &BTreeMap<(u32, BwKey), f64>,
    v: &Volumes,
    fit: &Fit,
    sizes: &[u32],
    p: u32,
    level: f64,
) -> Option<f64> {
    let bytes = fit.volume_a * (p as f64).powf(fit.volume_b);
    let t100 = baseline_at(medians, sizes, p)?;
    let d = demand(fit, v.capacity, bytes, t100, level);
    d.is_finite().then_some(d)
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
            },
        )
    }

    #[test]
    fn recovers_the_model_and_projects_it() {
        let (m, v) = exact(&[2, 4, 8, 16]);
        let f = fit(&m, &v, &[2, 4, 8]).unwrap();
        assert!(
            (f.volume_b - 0.5).abs() < 1e-9 && (f.volume_a - 1e6).abs() < 1e-3,
            "{f:?}"
        );
        assert!((f.exposed - 0.6).abs() < 1e-9, "{f:?}");
        // At 16 the demand for CTI 10%: exposed transfer 0.6 * 4e6 / 125e6 = 0.0192 s,
        // T100 = 1.5: w = 1 / (1 + 0.1 * 1.5 / 0.0192).
        let want = 100.0 / (1.0 + 0.1 * 1.5 / 0.0192);
        let got = project(&m, &v, &f, &[2, 4, 8], 16, 10.0).unwrap();
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    }

    #[test]
    fn sizes_without_traffic_do_not_fit() {
        let (m, mut v) = exact(&[1, 2]);
        v.bytes_per_node.insert(1, 0.0);
        assert!(fit(&m, &v, &[1, 2]).is_none());
    }
}
