//! The analytic models of the other seed papers, checked against what the emulator
//! measured: the emulator sets the link exactly, so a model that predicts well at 100%
//! but not at 20% points at the link model, not at the application.
//!
//! * [`pmm`]: Fox's matrix multiplication timing model (Li, Qiu, Fox; docs/method.md).
//! * [`loggps`]: LogGPS parameters and the master's overhead linear in P (Mizutani et al.; docs/method.md).
//! * [`master_worker`]: the master/worker closed forms (the master/worker thesis; docs/method.md) and the saturation
//!   point of Mizutani et al..
//!
//! Pure functions; the commands in `commands/model/` feed them stored runs and
//! measurements.

pub mod loggps;
pub mod master_worker;
pub mod pmm;

/// A straight line fitted by least squares.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Line {
    pub intercept: f64,
    pub slope: f64,
    /// Coefficient of determination (1 when every point is on the line).
    pub r2: f64,
}

/// Least-squares line through `points`; None with fewer than two distinct x.
pub fn fit_line(points: &[(f64, f64)]) -> Option<Line> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx <= 0.0 || !sxx.is_finite() || !sxy.is_finite() {
        return None;
    }
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let r2 = if syy > 0.0 {
        sxy * sxy / (sxx * syy)
    } else {
        1.0
    };
    Some(Line {
        intercept,
        slope,
        r2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_through_points_and_none_without_spread() {
        let l = fit_line(&[(1.0, 3.0), (2.0, 5.0), (3.0, 7.0)]).unwrap();
        assert!((l.slope - 2.0).abs() < 1e-12 && (l.intercept - 1.0).abs() < 1e-12);
        assert!((l.r2 - 1.0).abs() < 1e-12);
        assert!(fit_line(&[(1.0, 3.0), (1.0, 5.0)]).is_none());
        assert!(fit_line(&[(1.0, 3.0)]).is_none());
        let noisy = fit_line(&[(0.0, 0.0), (1.0, 2.0), (2.0, 1.0), (3.0, 3.0)]).unwrap();
        assert!(noisy.r2 < 1.0 && noisy.r2 > 0.0);
    }
}
