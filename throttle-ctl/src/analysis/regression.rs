//! Strong-scaling regression (seeds/002, DESIGN.md 5.1): T(p) = C0 + C1/p + C2/sqrt(p).
//!
//! Ordinary least squares on every (p, T) point measured at 100%. C1/p is processing,
//! C2/sqrt(p) communication; they cross at p_x = (C1/C2)^2.

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
    /// p where communication (C2/sqrt p) overtakes processing (C1/p): (C1/C2)^2.
    pub crossover_procs: Option<f64>,
    pub n: usize,
}

fn features(p: f64) -> [f64; 3] {
    [1.0, 1.0 / p, 1.0 / p.sqrt()]
}

/// Solve the 3x3 normal equations; `None` if singular (fewer than 3 distinct p).
fn fit(points: &[(f64, f64)]) -> Option<[f64; 3]> {
    let mut a = [[0.0f64; 4]; 3];
    for &(p, t) in points {
        let x = features(p);
        for i in 0..3 {
            for j in 0..3 {
                a[i][j] += x[i] * x[j];
            }
            a[i][3] += x[i] * t;
        }
    }
    // Gaussian elimination with partial pivoting.
    for col in 0..3 {
        let piv = (col..3).max_by(|&r, &s| a[r][col].abs().total_cmp(&a[s][col].abs()))?;
        if a[piv][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, piv);
        let pivot_row = a[col];
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (x, p) in row.iter_mut().zip(pivot_row.iter()).skip(col) {
                    *x -= f * p;
                }
            }
        }
    }
    Some([a[0][3] / a[0][0], a[1][3] / a[1][1], a[2][3] / a[2][2]])
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
    // Leave-one-out: refit without each point (only when 3 distinct p remain).
    let mut loo = Vec::new();
    for i in 0..n {
        let rest: Vec<(f64, f64)> = points
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, v)| *v)
            .collect();
        let mut d: Vec<f64> = rest.iter().map(|p| p.0).collect();
        d.sort_by(|a, b| a.total_cmp(b));
        d.dedup();
        if d.len() < 3 {
            loo.clear();
            break;
        }
        if let Some(ci) = fit(&rest) {
            loo.push((points[i].1 - predict(&ci, points[i].0)).powi(2));
        }
    }
    let loo_rmse = (!loo.is_empty()).then(|| (loo.iter().sum::<f64>() / loo.len() as f64).sqrt());
    let crossover_procs = (c[1] > 0.0 && c[2] > 0.0).then(|| (c[1] / c[2]).powi(2));
    Some(Regression {
        c0: c[0],
        c1: c[1],
        c2: c[2],
        r2,
        mse: sse / n as f64,
        adj_r2,
        loo_rmse,
        crossover_procs,
        n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_the_papers_scale_27_coefficients_and_crossover() {
        // seeds/002: C1 = 57.67, C2 = 3.8 (scale 27), so p_x = (57.67/3.8)^2 = 230.3.
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

    #[test]
    fn too_few_sizes_give_no_fit() {
        assert!(regress(&[(1.0, 2.0), (2.0, 1.5), (2.0, 1.4)]).is_none());
    }
}
