//! What `analyze` answers of a series' latency points (`latencies` in its sweep): the
//! completion time at each added latency, each size's tolerance at each CTI level, the
//! model's parts, and the tolerance projected to the sizes asked with its backtest.

use serde::Serialize;

use crate::method::latency::{Fit, Parts, Tolerance};
use crate::trust::latency_check::LatencyProjection;

/// The latency demand of one series.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyAnswer {
    /// The added one-way latencies measured, us (0: the baseline).
    pub steps_us: Vec<u64>,
    pub points: Vec<LatencyPoint>,
    /// Each size's tolerance at each level, as measured.
    pub tolerance: Vec<Tolerance>,
    /// Each size's model parts.
    pub parts: Vec<Parts>,
    /// The parts modelled in p (null with fewer than two sizes).
    pub model: Option<Fit>,
    /// The tolerance at the sizes asked (the largest measured without `--predict`).
    pub projection: Vec<LatencyProjection>,
    /// The largest size projected from the smaller ones.
    pub backtest: Vec<LatencyProjection>,
    /// TRUSTED, FAILED or UNTESTED, and why.
    pub verdict: String,
    pub verdict_why: String,
}

/// One (size, latency) point.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyPoint {
    pub procs: u32,
    pub latency_us: u64,
    pub runs: usize,
    pub median: f64,
    /// Against the size's baseline, percent (null for the baseline itself).
    pub cti: Option<f64>,
}
