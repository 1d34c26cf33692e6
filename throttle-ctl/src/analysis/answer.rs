//! What `analyze` answers, as `--json` prints it and `render` and the report show it:
//! the medians, demands, demand constant, projections, saturation sizes, backtest and
//! warnings of one series.

use serde::Serialize;

use super::backtest::{Check, Growth, Model, Verdict};
use super::bootstrap::Interval;
use super::demand::{Censored, Interp};
use super::noise::Floor;
use super::regression::Regression;
use super::traffic;

/// What the analysed times are: seconds, or the inverse of a rate the program printed
/// (`--rate-regex`: TEPS, FLOPS). CTI is the same either way (a rate that drops by a
/// fraction is an inverse that grows by it); what is printed, plotted and fitted with
/// bytes per second is not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeUnit {
    #[default]
    Seconds,
    InverseRate,
}

impl TimeUnit {
    /// The column head of a median.
    pub fn head(self) -> &'static str {
        match self {
            TimeUnit::Seconds => "median s",
            TimeUnit::InverseRate => "median 1/rate",
        }
    }

    /// A plot's axis.
    pub fn axis(self) -> &'static str {
        match self {
            TimeUnit::Seconds => "completion time (s)",
            TimeUnit::InverseRate => "1/rate (the program's rate, inverted)",
        }
    }

    /// A value in this unit, with the digits it needs (1/TEPS is near 1e-7).
    pub fn format(self, v: f64) -> String {
        if v != 0.0 && v.abs() < 1e-3 {
            format!("{v:.4e}")
        } else {
            format!("{v:.4}")
        }
    }
}

/// The runs of one (size, bandwidth) summarised: their median and its interval, the
/// spread, and the CTI of the median.
#[derive(Clone, Debug, Serialize)]
pub struct MedianPoint {
    pub procs: u32,
    pub bw_pct: f64,
    pub n: usize,
    pub median: f64,
    /// Order-statistic interval of the median; its exact coverage is `coverage`
    /// (with 3 runs it is their range, which covers 75%, not 95%).
    pub interval: Interval,
    pub coverage: f64,
    pub cv: f64,
    /// The fastest and slowest run.
    pub min: f64,
    pub max: f64,
    /// CTI of the median, percent (null without a 100% baseline).
    pub cti: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Demand {
    pub procs: u32,
    pub cti: f64,
    /// The demand read between the steps around the level; with `censored` not `none`
    /// it is no measurement: `bound` is.
    pub bw_pct: f64,
    pub censored: Censored,
    /// What a censored demand is known to be beyond: at most the lowest step (`below`),
    /// more than the highest throttled step (`above`); null when not censored.
    pub bound: Option<f64>,
    /// The two measured steps the level lies between (100% counts as a step); their
    /// distance is how far apart the measurements behind the figure are.
    pub between: Option<[f64; 2]>,
    /// The level is below this size's noise floor: not used for DC or projection.
    pub below_noise: bool,
    /// 90% bootstrap interval (null when the figure existed in under 90% of resamples).
    pub interval: Option<Interval>,
    pub held_out: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct DcPair {
    pub cti: f64,
    pub p1: u32,
    pub p2: u32,
    pub dc: f64,
}

/// How far a projection's model may be off, beyond run-to-run noise.
#[derive(Clone, Debug, Serialize)]
pub struct ModelError {
    /// How far below and above the projection the model's error reaches, points of
    /// bandwidth: the larger of the spread and the backtest's growth times the distance.
    pub down: f64,
    pub up: f64,
    /// The lowest and highest projection of the models about as good as the chosen one
    /// (traffic model only).
    pub spread: Option<Interval>,
    /// How the backtest's error grew with the distance projected.
    pub growth: Option<Growth>,
    /// Doublings of the size from the largest fitted one to this one.
    pub doublings: f64,
    /// What the projection's interval covers, in words.
    pub in_words: String,
}

impl ModelError {
    /// What the interval of a projection with this model error covers, in words.
    pub fn describe(&self) -> String {
        let mut parts = vec!["run-to-run noise (90% bootstrap)".to_string()];
        if let Some(s) = self.spread {
            parts.push(format!(
                "the spread of the close models and of the chosen ones' errors on left-out sizes ({:.1}-{:.1})",
                s.low, s.high
            ));
        }
        if let Some(g) = self.growth {
            parts.push(format!(
                "the backtest's error growth (90% bound {:.1} pp per doubling of the size, worst seen {:.1}, from {} check(s) on {} size(s)) over {:.2} doubling(s)",
                g.pp_per_doubling, g.worst_per_doubling, g.checks, g.sizes, self.doublings
            ));
        }
        parts.join(", ")
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Projection {
    pub procs: u32,
    pub cti: f64,
    pub bw_pct: f64,
    /// 90% bootstrap interval over runs: run-to-run noise only.
    pub noise_interval: Option<Interval>,
    /// The interval the answer uses: run-to-run noise and the model's error (see
    /// `model_error`); null where either cannot be estimated.
    pub interval: Option<Interval>,
    pub model_error: Option<ModelError>,
    /// The demand measured at a held-out size, and how it is censored: with `<` it is the
    /// lowest step (the truth is at most that), with `>` the highest throttled step (the
    /// truth is above it); `error_pp` is then a bound too.
    pub measured_bw_pct: Option<f64>,
    pub measured_censored: Option<Censored>,
    /// The measured level is below the held-out size's noise floor.
    pub measured_below_noise: bool,
    /// predicted - measured, percentage points.
    pub error_pp: Option<f64>,
    pub error_is_bound: bool,
    /// The demand at p* this projects from is censored.
    pub from_censored: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Saturation {
    pub cti: f64,
    /// The smallest whole number of processes at which the projected demand reaches 100%
    /// (null when that is beyond 2^32).
    pub procs: Option<u32>,
    /// Where the projection crosses 100%, fractional (the curve's own crossing point).
    pub crossing: f64,
    /// 90% bootstrap interval of `crossing` over runs.
    pub interval: Option<Interval>,
    /// Computed from a censored demand at p*: a bound at best.
    pub from_censored: bool,
}

/// The traffic-based projection and what supports it.
#[derive(Clone, Debug, Serialize)]
pub struct TrafficAnswer {
    /// (procs, median bytes per run): on the busiest link when `busiest_link`, else
    /// sent per node on average.
    pub bytes_per_node: Vec<(u32, f64)>,
    /// The bytes are the busiest link's (the most one node sent or received in a run).
    pub busiest_link: bool,
    /// The model fitted on the fitted sizes (null with fewer than 2 sizes with traffic).
    pub fit: Option<traffic::Fit>,
    pub projection: Vec<Projection>,
    pub verdict: Verdict,
}

/// What the bottom line says ([`super::bottom_line`] builds it).
#[derive(Clone, Debug, Default, Serialize)]
pub struct BottomLine {
    /// The projection the answer uses; null for a measured answer or none.
    pub model: Option<Model>,
    /// Whether its backtest passed on enough sizes to trust it.
    pub trusted: bool,
    /// One sentence per CTI level (or one saying why there is no answer).
    pub lines: Vec<String>,
    /// What to measure next, when that would make the answer (more) trustworthy.
    pub next: Option<String>,
}

/// The whole answer; `analyze --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    /// The answer first: what the projection (or the measurement) says, or why nothing
    /// can be said, and what to measure next.
    pub bottom_line: BottomLine,
    pub series: String,
    /// Which time was analysed (the job's wall time or the workload's kernel time).
    pub time_source: String,
    /// How demand is read between measured steps (`inverse`: straight lines in 1/w).
    pub interpolation: Interp,
    /// What the times (medians, T(p)) are.
    pub time_unit: TimeUnit,
    pub runs: usize,
    pub failed_runs: usize,
    /// Runs whose links did not run at their setting; left out unless `flagged_kept`.
    pub flagged_runs: usize,
    pub flagged_kept: bool,
    pub min_repeats: usize,
    pub regression: Option<Regression>,
    pub points: Vec<MedianPoint>,
    /// Per size: the smallest CTI its repeats resolve.
    pub noise: Vec<Floor>,
    pub demand: Vec<Demand>,
    pub dc: Option<f64>,
    /// 90% bootstrap interval of DC over runs.
    pub dc_interval: Option<Interval>,
    pub dc_pairs: Vec<DcPair>,
    pub dc_pairs_censored: usize,
    pub p_star: Option<u32>,
    pub projection: Vec<Projection>,
    pub saturation: Vec<Saturation>,
    pub held_out: Vec<u32>,
    /// What every derived interval is.
    pub intervals: String,
    pub resamples: usize,
    /// Each measured size from the third on, projected from the smaller ones.
    pub backtest: Vec<Check>,
    /// Whether the backtest supports the DC projection.
    pub verdict: Verdict,
    /// The traffic model's answer, where the runs' bytes were recorded.
    pub traffic: Option<TrafficAnswer>,
    /// Which projection the backtest supports, in words.
    pub supported: String,
    pub warnings: Vec<String>,
}

impl Analysis {
    /// The demand at p* for CTI level `cti`, which the projections of that level start
    /// from.
    pub fn demand_at_star(&self, cti: f64) -> Option<&Demand> {
        self.demand
            .iter()
            .find(|d| Some(d.procs) == self.p_star && d.cti == cti)
    }
}
