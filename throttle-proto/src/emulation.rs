//! Emulated compute: the rates at which a workload's ranks may stand in for a node's CPU
//! by sleeping, and the time they sleep. Shared so that the controller refuses, before it
//! launches anything, exactly what the program itself would refuse.

/// The accepted range of one workload's emulated rate: bounds on typos, not claims about
/// hardware.
#[derive(Clone, Copy, Debug)]
pub struct RateBounds {
    pub min: f64,
    pub max: f64,
    pub unit: &'static str,
}

impl RateBounds {
    /// The rate when it is finite and within the bounds, else what is wrong, as the end
    /// of a sentence ("must be from ... to ..., not ...").
    pub fn check(&self, rate: f64) -> Result<f64, String> {
        if rate.is_finite() && (self.min..=self.max).contains(&rate) {
            Ok(rate)
        } else {
            Err(format!(
                "must be from {} to {} {}, not {rate}",
                self.min, self.max, self.unit
            ))
        }
    }
}

/// Fox PMM: a node's GFLOP/s (`throttle-pmm --emulate-gflops`).
pub const PMM_GFLOPS: RateBounds = RateBounds {
    min: 1e-6,
    max: 1e6,
    unit: "GFLOP/s",
};

/// BFS: a node's million edges scanned per second (`throttle-bfs --emulate-meps`).
pub const BFS_MEPS: RateBounds = RateBounds {
    min: 1e-3,
    max: 1e6,
    unit: "million edges/s",
};

/// Seconds one Fox step on `block` x `block` blocks sleeps at `gflops` (2 block^3 flops).
pub fn pmm_step_seconds(block: usize, gflops: f64) -> f64 {
    2.0 * (block as f64).powi(3) / (gflops * 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_outside_the_bounds_are_refused_with_them() {
        assert_eq!(PMM_GFLOPS.check(0.5), Ok(0.5));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-7, 1e7] {
            let e = PMM_GFLOPS.check(bad).unwrap_err();
            assert!(e.contains("0.000001 to 1000000 GFLOP/s"), "{bad}: {e}");
        }
        assert!(BFS_MEPS.check(1e-4).is_err() && BFS_MEPS.check(1e-3).is_ok());
        assert!((pmm_step_seconds(150, 0.0117) - 0.5769).abs() < 1e-4);
    }
}
