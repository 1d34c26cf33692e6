//! What `analyze` answers for a series with a problem axis: the demand measured at every
//! (size, problem), each problem's own single-parameter answer, the traffic model fitted
//! in both parameters, its projections to the (P, N) asked with their intervals, the
//! backtest that held out the largest size, the largest problem and both, and where the
//! link saturates along a weak-scaling line.

use serde::Serialize;

use crate::answer::{Analysis, TimeUnit};
use crate::data::problem::ProblemAxis;
use crate::method::demand::Censored;
use crate::method::problem_traffic::{Cell, Fit};
use crate::trust::surface_check::{SurfaceCheck, SurfaceError, Target};

/// The whole answer for a series with a problem axis; `analyze --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct ProblemAnalysis {
    pub series: String,
    pub axis: ProblemAxis,
    pub time_unit: TimeUnit,
    /// CTI levels, percent.
    pub levels: Vec<f64>,
    /// The link's capacity, bytes per second.
    pub capacity: Option<f64>,
    /// The problem values measured, ascending.
    pub values: Vec<f64>,
    /// The traffic model's parts measured at each (size, problem).
    pub cells: Vec<Cell>,
    /// The (size, problem value) cells left out of every fit: those at a size or a
    /// problem asked for (`--predict`, `--problem`) that were measured.
    pub held_out: Vec<(u32, f64)>,
    /// The demand measured at each (size, problem, level).
    pub demand: Vec<CellDemand>,
    /// Each problem's demand constant (the paper's DC), and its trend: DC grows as
    /// size^`dc_trend` over the problems measured.
    pub dc: Vec<ProblemDc>,
    pub dc_trend: Option<f64>,
    /// The traffic model fitted on every cell (null where it cannot be).
    pub model: Option<Fit>,
    /// The projections to the (P, N) asked, every level.
    pub projection: Vec<Target>,
    /// How far the projections may be off.
    pub error: Option<SurfaceError>,
    /// Held out: the largest size, the largest problem, both.
    pub backtest: Vec<SurfaceCheck>,
    /// TRUSTED, FAILED or UNTESTED, and why.
    pub verdict: String,
    pub verdict_why: String,
    /// Where the link saturates along the weak-scaling line asked (`--weak`).
    pub weak: Option<WeakLine>,
    /// Each problem's own answer, as a series without a problem axis gets it.
    pub by_problem: Vec<ByProblem>,
    pub warnings: Vec<String>,
}

/// A demand measured at one (size, problem, level).
#[derive(Clone, Debug, Serialize)]
pub struct CellDemand {
    pub procs: u32,
    pub problem: f64,
    pub cti: f64,
    pub bw_pct: f64,
    pub censored: Censored,
    /// What a censored demand is known to be beyond.
    pub bound: Option<f64>,
    pub below_noise: bool,
}

/// One problem's demand constant.
#[derive(Clone, Debug, Serialize)]
pub struct ProblemDc {
    pub problem: f64,
    pub dc: Option<f64>,
}

/// One problem's own answer.
#[derive(Clone, Debug, Serialize)]
pub struct ByProblem {
    pub problem: f64,
    pub analysis: Analysis,
}

/// The problem growing in proportion to the size: n(p) = n(1) x p.
#[derive(Clone, Debug, Serialize)]
pub struct WeakLine {
    /// The problem's value at one process.
    pub at_one: f64,
    /// The smallest size measured, where the search starts: a saturation there may be
    /// at a smaller size.
    pub from: f64,
    pub saturation: Vec<WeakSaturation>,
}

/// Where the link saturates along the line at one level: the smallest size (fractional),
/// and its interval; null where it does not before 2^20 processes.
#[derive(Clone, Debug, Serialize)]
pub struct WeakSaturation {
    pub cti: f64,
    pub procs: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
}
