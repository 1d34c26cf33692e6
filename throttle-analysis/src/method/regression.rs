//! Strong-scaling regression (the ICPE 2016 paper; docs/method.md): T(p) = C0 + C1/p + C2/sqrt(p).
//!
//! Ordinary least squares on every (p, T) point measured at 100%. C1/p is processing,
//! C2/sqrt(p) communication; they cross at p_x = (C1/C2)^2. Two cross-validation errors:
//! leave-one-out from the hat matrix (no refits, so a million rows take milliseconds),
//! and leave-one-size-out (every run of a size left out at once), which is the error
//! that matters for extrapolating to a size not measured.

use serde::Serialize;

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Regression {
    pub c0: f64,
    pub c1: f64,
    pub c2: f64,
    pub r2: f64,
    /// Mean squared error: SSE / n.
    pub mse: f64,
    pub adj_r2: Option<f64>,
    /// Root mean square of leave-one-out prediction errors (seconds).
    pub loo_rmse: Option<f64>,
    /// Root mean square of the errors predicting each size's runs from a fit without
    /// that size (seconds; needs 4 sizes).
    pub loso_rmse: Option<f64>,
    /// p where communication (C2/sqrt p) overtakes processing (C1/p): (C1/C2)^2.
    pub crossover_procs: Option<f64>,
    pub n: usize,
}

impl Regression {
    /// `T(p) = C0 + C1/p + C2/sqrt(p)` with the coefficients as `number` writes them and
    /// each term's sign in front of it (`- 0.2267/sqrt(p)`, never `+ -0.2267/sqrt(p)`).
    pub fn formula(&self, number: impl Fn(f64) -> String) -> String {
        let term = |v: f64, per: &str| {
            let sign = if v < 0.0 { '-' } else { '+' };
            format!(" {sign} {}{per}", number(v.abs()))
        };
        format!(
            "T(p) = {}{}{}",
            number(self.c0),
            term(self.c1, "/p"),
            term(self.c2, "/sqrt(p)")
        )
    }
}

fn features(p: f64) -> [f64; 3] {
    [1.0, 1.0 / p, 1.0 / p.sqrt()]
}

/// The normal matrix X'X and X'y.
fn normal(points: &[(f64, f64)]) -> ([[f64; 3]; 3], [f64; 3]) {
    let mut xtx = [[0.0f64; 3]; 3];
    let mut xty = [0.0f64; 3];
    for &(p, t) in points {
        let x = features(p);
        for i in 0..3 {
            for j in 0..3 {
                xtx[i][j] += x[i] * x[j];
            }
            xty[i] += x[i] * t;
        }
    }
    (xtx, xty)
}

/// The inverse of a symmetric 3x3 matrix; `None` if (nearly) singular.
fn inverse(m: &[[f64; 3]; 3]) -> Option<[[f64; 3]; 3]> {
    let c = |r: usize, k: usize| {
        let (r1, r2) = ((r + 1) % 3, (r + 2) % 3);
        let (k1, k2) = ((k + 1) % 3, (k + 2) % 3);
        m[r1][k1] * m[r2][k2] - m[r1][k2] * m[r2][k1]
    };
    let det = m[0][0] * c(0, 0) + m[0][1] * c(0, 1) + m[0][2] * c(0, 2);
    let scale = m.iter().flatten().fold(0.0f64, |a, v| a.max(v.abs()));
    if !det.is_finite() || det.abs() <= 1e-18 * scale.powi(3) {
        return None;
    }
    let mut inv = [[0.0; 3]; 3];
    for (r, row) in inv.iter_mut().enumerate() {
        for (k, v) in row.iter_mut().enumerate() {
            *v = c(k, r) / det;
        }
    }
    Some(inv)
}

fn times(m: &[[f64; 3]; 3], v: &[f64; 3]) -> [f64; 3] {
    [0, 1, 2].map(|i| m[i][0] * v[0] + m[i][1] * v[1] + m[i][2] * v[2])
}

/// Least squares; `None` if singular (fewer than 3 distinct p).
fn fit(points: &[(f64, f64)]) -> Option<[f64; 3]> {
    let (xtx, xty) = normal(points);
    Some(times(&inverse(&xtx)?, &xty))
}

fn predict(c: &[f64; 3], p: f64) -> f64 {
    let x = features(p);
    c[0] * x[0] + c[1] * x[1] + c[2] * x[2]
}

/// Fit the model to (procs, seconds) points. Needs at least 3 distinct process counts.
pub fn regress(points: &[(f64, f64)]) -> Option<Regression> {
    let mut distinct: Vec<f64> = points.iter().map(|p| p.0).collect();
    distinct.sort_by(|a, b| a.total_cmp(b));
    distinct.dedup();
    if distinct.len() < 3 {
        return None;
    }
    let c = fit(points)?;
    let n = points.len();
    let mean = points.iter().map(|p| p.1).sum::<f64>() / n as f64;
    let sse: f64 = points
        .iter()
        .map(|&(p, t)| (t - predict(&c, p)).powi(2))
        .sum();
    let sst: f64 = points.iter().map(|&(_, t)| (t - mean).powi(2)).sum();
    let r2 = if sst > 0.0 { 1.0 - sse / sst } else { 1.0 };
    let adj_r2 = (n > 3).then(|| 1.0 - (1.0 - r2) * (n as f64 - 1.0) / (n as f64 - 3.0));
    // Leave-one-out from the hat matrix: e_i / (1 - h_ii), h_ii = x_i' (X'X)^-1 x_i. A
    // point with leverage 1 (its size's only run among 3 sizes) cannot be left out.
    let loo_rmse = inverse(&normal(points).0).and_then(|inv| {
        let mut ss = 0.0;
        for &(p, t) in points {
            let x = features(p);
            let h: f64 = x.iter().zip(times(&inv, &x)).map(|(a, b)| a * b).sum();
            if 1.0 - h < 1e-9 {
                return None;
            }
            ss += ((t - predict(&c, p)) / (1.0 - h)).powi(2);
        }
        Some((ss / n as f64).sqrt())
    });
    // Leave-one-size-out: needs 3 sizes left to fit.
    let loso_rmse = (distinct.len() >= 4)
        .then(|| {
            let mut ss = 0.0;
            for &size in &distinct {
                let rest: Vec<(f64, f64)> =
                    points.iter().copied().filter(|q| q.0 != size).collect();
                let ci = fit(&rest)?;
                for &(p, t) in points.iter().filter(|q| q.0 == size) {
                    ss += (t - predict(&ci, p)).powi(2);
                }
            }
            Some((ss / n as f64).sqrt())
        })
        .flatten();
    let crossover_procs = (c[1] > 0.0 && c[2] > 0.0).then(|| (c[1] / c[2]).powi(2));
    Some(Regression {
        c0: c[0],
        c1: c[1],
        c2: c[2],
        r2,
        mse: sse / n as f64,
        adj_r2,
        loo_rmse,
        loso_rmse,
        crossover_procs,
        n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_formula_puts_each_sign_in_front_of_its_term() {
        let r = Regression {
            c0: 1.5,
            c1: 20.0,
            c2: -0.2267,
            r2: 1.0,
            mse: 0.0,
            adj_r2: None,
            loo_rmse: None,
            loso_rmse: None,
            crossover_procs: None,
            n: 3,
        };
        assert_eq!(
            r.formula(|v| format!("{v:.4}")),
            "T(p) = 1.5000 + 20.0000/p - 0.2267/sqrt(p)"
        );
    }

    #[test]
    fn recovers_the_papers_scale_27_coefficients_and_crossover() {
        // The ICPE 2016 paper's fit: C1 = 57.67, C2 = 3.8 (scale 27), so p_x = (57.67/3.8)^2 = 230.3.
        let pts: Vec<(f64, f64)> = [72.0, 162.0, 288.0, 450.0, 36.0]
            .iter()
            .map(|&p| (p, 0.5 + 57.67 / p + 3.8 / f64::sqrt(p)))
            .collect();
        let r = regress(&pts).unwrap();
        assert!(
            (r.c0 - 0.5).abs() < 1e-6 && (r.c1 - 57.67).abs() < 1e-4 && (r.c2 - 3.8).abs() < 1e-4,
            "{r:?}"
        );
        assert!((r.crossover_procs.unwrap() - 230.33).abs() < 0.1, "{r:?}");
        assert!((r.r2 - 1.0).abs() < 1e-9 && r.mse < 1e-12);
        assert!(r.loo_rmse.unwrap() < 1e-6);
    }

    #[test]
    fn goodness_of_fit_by_hand() {
        // Points that the model cannot fit exactly: check R^2 and MSE against a direct
        // computation from the fitted coefficients.
        let pts = vec![(1.0, 10.0), (2.0, 6.2), (4.0, 3.9), (8.0, 2.9), (16.0, 2.2)];
        let r = regress(&pts).unwrap();
        let pred = |p: f64| r.c0 + r.c1 / p + r.c2 / p.sqrt();
        let sse: f64 = pts.iter().map(|&(p, t)| (t - pred(p)).powi(2)).sum();
        let mean = pts.iter().map(|p| p.1).sum::<f64>() / 5.0;
        let sst: f64 = pts.iter().map(|&(_, t)| (t - mean).powi(2)).sum();
        assert!((r.mse - sse / 5.0).abs() < 1e-12);
        assert!((r.r2 - (1.0 - sse / sst)).abs() < 1e-12);
        assert!((r.adj_r2.unwrap() - (1.0 - (1.0 - r.r2) * 4.0 / 2.0)).abs() < 1e-12);
    }

    /// The hat-matrix leave-one-out against refitting without each point, and
    /// leave-one-size-out by hand.
    #[test]
    fn cross_validation_agrees_with_refitting() {
        let pts = vec![
            (1.0, 10.0),
            (1.0, 10.4),
            (2.0, 6.2),
            (4.0, 3.9),
            (4.0, 4.1),
            (8.0, 2.9),
            (16.0, 2.2),
            (16.0, 2.0),
        ];
        let r = regress(&pts).unwrap();
        let pred = |c: [f64; 3], p: f64| c[0] + c[1] / p + c[2] / p.sqrt();
        let mut ss = 0.0;
        for i in 0..pts.len() {
            let rest: Vec<_> = (0..pts.len()).filter(|&j| j != i).map(|j| pts[j]).collect();
            ss += (pts[i].1 - pred(fit(&rest).unwrap(), pts[i].0)).powi(2);
        }
        let want = (ss / pts.len() as f64).sqrt();
        assert!((r.loo_rmse.unwrap() - want).abs() < 1e-9, "{r:?} vs {want}");
        let mut ss = 0.0;
        for size in [1.0, 2.0, 4.0, 8.0, 16.0] {
            let rest: Vec<_> = pts.iter().copied().filter(|q| q.0 != size).collect();
            for &(p, t) in pts.iter().filter(|q| q.0 == size) {
                ss += (t - pred(fit(&rest).unwrap(), p)).powi(2);
            }
        }
        let want = (ss / pts.len() as f64).sqrt();
        assert!(
            (r.loso_rmse.unwrap() - want).abs() < 1e-9,
            "{r:?} vs {want}"
        );
        // Three sizes, one run each: every point has leverage 1.
        let r = regress(&[(1.0, 3.0), (2.0, 2.0), (4.0, 1.5)]).unwrap();
        assert!(r.loo_rmse.is_none() && r.loso_rmse.is_none());
    }

    #[test]
    fn a_million_runs_are_fitted_in_well_under_a_second() {
        let pts: Vec<(f64, f64)> = (0..1_000_000)
            .map(|i| {
                let p: f64 = [1.0, 2.0, 4.0, 8.0, 16.0][i % 5];
                (p, 1.0 + 10.0 / p + 2.0 / p.sqrt() + (i % 7) as f64 * 1e-3)
            })
            .collect();
        let t = std::time::Instant::now();
        let r = regress(&pts).unwrap();
        assert!(r.loo_rmse.is_some() && r.loso_rmse.is_some());
        // Generous for a debug build on a shared machine; it was 68 s with refits.
        assert!(t.elapsed().as_secs_f64() < 5.0, "{:?}", t.elapsed());
    }

    #[test]
    fn too_few_sizes_give_no_fit() {
        assert!(regress(&[(1.0, 2.0), (2.0, 1.5), (2.0, 1.4)]).is_none());
    }
}
