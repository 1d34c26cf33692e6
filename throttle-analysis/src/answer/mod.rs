//! What `analyze` answers, as `--json` prints it and `render` and the report show it:
//! the medians, demands, demand constant, projections, saturation sizes, backtest and
//! warnings of one series.

pub(crate) mod compose;
pub mod latency;
pub mod narrow;
pub mod problem;
pub mod sizes;

use serde::Serialize;

use crate::table::number;

use crate::method::demand::{Censored, Interp};
use crate::method::noise::Floor;
use crate::method::regression::Regression;
use crate::method::traffic;
use crate::trust::backtest::{Check, Model, Verdict};
use crate::trust::bootstrap::Interval;
use crate::trust::model_error::ErrorModel;

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
    /// A plot's axis.
    pub fn axis(self) -> &'static str {
        match self {
            TimeUnit::Seconds => "completion time (s)",
            TimeUnit::InverseRate => "rate (as the program prints it)",
        }
    }

    /// A value of the analysis as it is shown: a time as it is, a rate's inverse as the
    /// rate again.
    pub fn shown(self, v: f64) -> f64 {
        match self {
            TimeUnit::Seconds => v,
            TimeUnit::InverseRate if v != 0.0 => 1.0 / v,
            TimeUnit::InverseRate => f64::INFINITY,
        }
    }

    /// An interval of the analysis as it is shown, low end first (a rate's is the
    /// inverse of the time's, its ends swapped).
    pub fn shown_interval(self, low: f64, high: f64) -> (f64, f64) {
        match self {
            TimeUnit::Seconds => (low, high),
            TimeUnit::InverseRate => (self.shown(high), self.shown(low)),
        }
    }

    /// A value of the analysis as it is shown ([`TimeUnit::shown`]), with the digits it
    /// needs (a rate such as TEPS is near 1e6).
    pub fn format(self, v: f64) -> String {
        number(self.shown(v))
    }

    /// An interval as it is shown: `[low, high]` in that order.
    pub fn format_interval(self, low: f64, high: f64) -> (String, String) {
        let (l, h) = self.shown_interval(low, high);
        (number(l), number(h))
    }
}

/// The rate's name in a command series' `rate_regex="..."`: the regex's literal text
/// before its first special character, without trailing punctuation and spaces
/// (`harmonic_mean_TEPS:[ !]+(...)` is `harmonic_mean_TEPS`); `None` when there is none.
pub fn rate_name(series: &str) -> Option<String> {
    let at = series.find("rate_regex=\"")? + "rate_regex=\"".len();
    let literal: String = series[at..]
        .chars()
        .take_while(|c| !"\\.[](){}*+?|^$\"".contains(*c))
        .collect();
    let name = literal.trim_end_matches(|c: char| c == ':' || c == '=' || c.is_whitespace());
    let name = name.trim_start();
    (!name.is_empty() && name.len() <= 40 && !name.chars().any(char::is_control))
        .then(|| name.to_string())
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

/// What a projection's interval holds beyond its run-to-run noise: how a measurement at
/// that size would read its demand, and how far the model may be off there.
#[derive(Clone, Debug, Serialize)]
pub struct ModelError {
    /// How far below and above the projection these parts alone reach, points of
    /// bandwidth (their 90% half-width, `half_width_logit`, mapped back from logit
    /// units).
    pub down: f64,
    pub up: f64,
    /// The 90% half-width of the measurement's noise and reading, the model's error and
    /// the forms' disagreement together, logit units of the demand (Student's t for
    /// their degrees of freedom).
    pub half_width_logit: f64,
    /// What the fitted sizes, the backtest and the prior say of the model's error.
    pub estimate: ErrorModel,
    /// Doublings of the size from the largest fitted one to this one.
    pub doublings: f64,
    /// A run's relative spread expected at this size (what `measurement` comes from).
    pub run_cv: f64,
    /// One standard deviation each, logit units: a measurement's run-to-run noise here
    /// (at this size and level), its reading beyond that noise, the model's error at
    /// this size (lack of fit and growth over `doublings`), and how far the averaged
    /// forms disagree here (traffic model).
    pub measurement: f64,
    pub reading: f64,
    pub model: f64,
    pub selection: Option<f64>,
    /// What the projection's interval covers, in words.
    pub in_words: String,
}

impl ModelError {
    /// What the interval of a projection with this model error covers, in words.
    pub fn describe(&self) -> String {
        let e = &self.estimate;
        let mut s = format!(
            "what a measurement there would show (90%): the projection's run-to-run noise (bootstrap), the measurement's {:.3} (a run's spread {:.1}%), its reading {:.3}, and the model's error {:.3} = sqrt(lack of fit {:.3}^2 + ({:.3} per doubling x {:.2} doublings)^2) from {} check(s) on {} size(s) and a prior worth {:.0}, {:.1} degrees of freedom; logit units",
            self.measurement,
            100.0 * self.run_cv,
            self.reading,
            self.model,
            e.lack_of_fit,
            e.per_doubling,
            self.doublings,
            e.checks,
            e.sizes,
            e.prior.df,
            e.df
        );
        if let Some(sel) = self.selection {
            s.push_str(&format!(", with the averaged forms' disagreement {sel:.3}"));
        }
        s
    }
}

/// A projection's interval at one level (`at_levels`): 0.5 is its 50% interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AtLevel {
    pub level: f64,
    pub low: f64,
    pub high: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Projection {
    pub procs: u32,
    pub cti: f64,
    /// The projected demand, percent of the link; at or past 100 (`saturates`) no
    /// demand: the link saturates before this size.
    pub bw_pct: f64,
    pub saturates: bool,
    /// 90% bootstrap interval over runs: run-to-run noise only.
    pub noise_interval: Option<Interval>,
    /// The interval the answer uses (90%): what a measurement at this size would show,
    /// its run-to-run noise, its reading and the model's error (see `model_error`); null
    /// where either cannot be estimated.
    pub interval: Option<Interval>,
    /// The same interval at 50, 80, 90 and 95% (empty where `interval` is null).
    pub at_levels: Vec<AtLevel>,
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

/// Where the link saturates at one CTI level, by one model.
#[derive(Clone, Debug, Serialize)]
pub struct Saturation {
    /// The model it comes from, and whether that model's backtest makes it trusted.
    pub model: Model,
    pub trusted: bool,
    pub cti: f64,
    /// The smallest whole number of processes at which it saturates (null when it does
    /// not within reach, or beyond 2^32).
    pub procs: Option<u32>,
    /// Where the curve crosses, fractional processes (null when it does not within
    /// reach): DC: where the projected demand reaches 100% of the link; traffic: where
    /// even the full link makes the program `cti` percent slower than an unlimited
    /// network (docs/method.md).
    pub crossing: Option<f64>,
    /// 90% bootstrap interval of `crossing` over runs.
    pub noise_interval: Option<Interval>,
    /// The interval with the model's error as well (as the projections'); null where
    /// the model error cannot be estimated.
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
    /// How far its model may be off (from its backtest and fit).
    pub error: Option<ErrorModel>,
    /// How stable the choice of each part's form is: per part (`T(100%)`, `V`, `k`), each
    /// form that was the best one in some resample of the runs, and in how many.
    pub stability: Vec<Stability>,
}

/// How often one part's forms won over the resamples.
#[derive(Clone, Debug, Serialize)]
pub struct Stability {
    pub part: String,
    /// The resamples that fitted the part.
    pub resamples: usize,
    /// (form, resamples in which it was the best), most often first.
    pub forms: Vec<(String, usize)>,
}

/// What the bottom line says ([`crate::render::bottom_line`] builds it).
#[derive(Clone, Debug, Default, Serialize)]
pub struct BottomLine {
    /// The projection the answer uses; null for a measured answer or none.
    pub model: Option<Model>,
    /// Whether its backtest passed on enough sizes to trust it.
    pub trusted: bool,
    /// One sentence per CTI level (or one saying why there is no answer).
    pub lines: Vec<String>,
    /// The figures the sentences state, one per (size, level), with their flags.
    pub figures: Vec<Figure>,
    /// What to measure next, when that would make the answer (more) trustworthy or
    /// narrower, and what it costs.
    pub next: Option<String>,
    /// Where the answer's width comes from and what would narrow it (null without a
    /// projection with its model error; [`crate::answer::narrow`] works it out).
    pub advice: Option<Advice>,
    /// Every measured size, largest first, with its demand at every level or why it has
    /// none: no size measured is left unsaid.
    pub sizes: Vec<SizeRow>,
    /// Set when every size measured needs nearly all of the link: the link is below what
    /// the program needs, and the answer cannot tell the sizes apart.
    pub network_bound: Option<NetworkBound>,
    /// Set when at some sizes measured every level asked lies below the lowest step (or
    /// in the runs' noise): the link is faster than the program needs there, and its
    /// demand there is not measured (first in `next` when fewer than two sizes have a
    /// measured demand).
    pub link_too_fast: Option<LinkTooFast>,
    /// The sizes the program allows, as its measured sizes show ([`sizes::SizeRule`]):
    /// every size `next` suggests is one of them.
    pub size_rule: sizes::SizeRule,
}

/// Every size measured needs nearly all of the link at the lowest level asked: as much
/// as a program whose time is all transfer needs (`all_transfer`, 100/(1 + CTI)), so the
/// link, not the size, sets the times.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetworkBound {
    pub cti: f64,
    /// The sizes with a demand there, and the range of their demands (% of the link; a
    /// demand known only to exceed the highest throttled step counts at that step).
    pub sizes: Vec<u32>,
    pub low: f64,
    pub high: f64,
    pub all_transfer: f64,
    /// A capacity that would tell more ([`NetworkBound::FACTOR`] times the link), bytes
    /// per second; null when the link's capacity is not known.
    pub try_capacity: Option<f64>,
}

impl NetworkBound {
    /// A demand at least this share of `all_transfer` is "nearly all of the link".
    pub const NEAR: f64 = 0.95;
    /// How many times the link the capacity suggested is.
    pub const FACTOR: f64 = 4.0;
}

/// At these sizes every level asked is met at the lowest throttled step, or lies within
/// the runs' noise, and at least one is met at the lowest step: the program needs less
/// than `lowest_step`% of the link there, and what it needs is not measured (the
/// newcomer's program on a 1 Gbit/s loopback cluster with kernel-paced links: 4 and 8
/// procs `<3.0` at CTI 15-25%, in the noise at 5 and 10).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkTooFast {
    pub sizes: Vec<u32>,
    /// The lowest throttled step there (% of the link): each demand is known only to be
    /// at most this.
    pub lowest_step: f64,
    /// A capacity at which that step's rate is [`LinkTooFast::SHARE`] of the link, so
    /// the same steps measure below it, bytes per second; null when the link's capacity
    /// is not known or the lowest step is not below that share (lower steps are what
    /// helps then).
    pub try_capacity: Option<f64>,
}

impl LinkTooFast {
    /// The share of the capacity suggested that the lowest step's rate is (% of it).
    pub const SHARE: f64 = 25.0;
}

impl BottomLine {
    /// The sentences that state no figure (the basis, saturation, NO ANSWER): `lines`
    /// holds the figures' sentences first, one per figure, then these.
    pub fn remarks(&self) -> &[String] {
        &self.lines[self.figures.len().min(self.lines.len())..]
    }
}

/// One measured size in the bottom line.
#[derive(Clone, Debug, Serialize)]
pub struct SizeRow {
    pub procs: u32,
    pub held_out: bool,
    /// Why no level has a number at this size (no traffic between nodes, its runs all
    /// failed or flagged, no baseline); null when its cells say.
    pub why: Option<String>,
    /// The median share of the machine's cores its runs used, when that makes it
    /// CPU-bound ([`crate::trust::cpu`]); null otherwise.
    pub cpu_bound: Option<f64>,
    /// The measured demand at each level asked (empty with `why`).
    pub cells: Vec<Figure>,
}

/// One way to narrow the answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// Measure a size between the largest fitted one and the target.
    Size { procs: u32 },
    /// One more repeat of these points (procs, bandwidth percent): each fitted size's
    /// baseline and the two steps around each of its demands.
    Repeats { points: Vec<(u32, f64)> },
}

/// A step, what it costs and what it would leave.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Narrowing {
    #[serde(flatten)]
    pub step: Step,
    /// About how many runs it takes.
    pub runs: usize,
    /// The widest interval at the target it would leave (estimated), points of bandwidth.
    pub width_after: f64,
}

/// Where the answer's width comes from, and the ways to narrow it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Advice {
    /// The size asked (the largest projected to) and the level whose interval is widest.
    pub procs: u32,
    pub cti: f64,
    /// That interval's width, and its two parts' half-widths (points of bandwidth, the
    /// larger side).
    pub width: f64,
    pub noise_half: f64,
    pub model_half: f64,
    /// The ways to narrow it, the most narrowing per run first.
    pub options: Vec<Narrowing>,
}

impl Advice {
    /// The advice in words.
    pub fn text(&self) -> String {
        let mut s = format!(
            "the answer at {} procs is {:.1} pp wide at CTI {}% (run-to-run noise up to {:.1} pp, a measurement's noise and reading and the model's error up to {:.1} pp)",
            self.procs, self.width, self.cti, self.noise_half, self.model_half
        );
        let say = |o: &Narrowing| {
            match &o.step {
            Step::Size { procs } => format!(
                "measuring {procs} procs (about {} runs) would leave about {:.1} pp",
                o.runs, o.width_after
            ),
            Step::Repeats { .. } => format!(
                "one more repeat of each baseline and of the steps around each demand ({} runs) would leave about {:.1} pp",
                o.runs, o.width_after
            ),
        }
        };
        match self.options.split_first() {
            Some((first, rest)) => {
                s.push_str(&format!("; what narrows it most: {}", say(first)));
                for o in rest {
                    s.push_str(&format!("; {}", say(o)));
                }
            }
            None => s.push_str("; nothing measurable here would narrow it"),
        }
        s
    }
}

/// One figure of the bottom line.
#[derive(Clone, Debug, Serialize)]
pub struct Figure {
    pub procs: u32,
    pub cti: f64,
    /// The demand, percent of the link; null when no number can be given (`why`).
    pub bw_pct: Option<f64>,
    /// Its interval (noise and model error for a projection, noise for a measurement).
    pub interval: Option<Interval>,
    /// Projected (true) or measured at that size (false).
    pub projected: bool,
    /// The level lies below the size's noise floor: not a measurement (measured
    /// figures only; such a figure has no number).
    pub below_noise: bool,
    /// The link saturates at or before this size at this level (the projection reaches
    /// 100% of the link): no number.
    pub saturates: bool,
    /// A measured figure censored: `bw_pct` is the bound.
    pub censored: Censored,
    /// Why there is no number, when there is none.
    pub why: Option<String>,
}

impl Figure {
    /// A figure at this size and level with no number yet and no flag.
    pub fn none(procs: u32, cti: f64, projected: bool) -> Figure {
        Figure {
            procs,
            cti,
            bw_pct: None,
            interval: None,
            projected,
            below_noise: false,
            saturates: false,
            censored: Censored::None,
            why: None,
        }
    }
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
    /// Runs not counted in `runs` for other reasons: successful ones at unlimited
    /// bandwidth (no CTI against the full link), good ones of sizes left out because no
    /// byte of theirs went through the agents (no demand there), and latency points, failed
    /// or not (the latency answer's).
    pub unlimited_runs: usize,
    pub without_traffic_runs: usize,
    pub latency_runs: usize,
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
    /// How far the DC projection's model may be off (from its backtest and fit).
    pub dc_error: Option<ErrorModel>,
    /// The sizes whose runs kept the machine's cores busy (CPU-bound), smallest first:
    /// their figures are marked, and a projection fitted on one is not trusted.
    pub cpu_bound: Vec<crate::trust::cpu::CpuBound>,
    /// The traffic model's answer, where the runs' bytes were recorded.
    pub traffic: Option<TrafficAnswer>,
    /// Which projection the backtest supports, in words.
    pub supported: String,
    /// The latency demand, where the series has latency points (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<latency::LatencyAnswer>,
    pub warnings: Vec<String>,
}

impl Analysis {
    /// What the times shown are called: `s`, or the rate's name as the program prints it
    /// (the literal text before a command's `--rate-regex` capture: `harmonic_mean_TEPS`
    /// for Graph500's line), else `rate`.
    pub fn time_name(&self) -> String {
        match self.time_unit {
            TimeUnit::Seconds => "s".to_string(),
            TimeUnit::InverseRate => rate_name(&self.series).unwrap_or_else(|| "rate".into()),
        }
    }

    /// The column head of a median.
    pub fn time_head(&self) -> String {
        format!("median {}", self.time_name())
    }

    /// A plot's axis for the times shown.
    pub fn time_axis(&self) -> String {
        match self.time_unit {
            TimeUnit::Seconds => self.time_unit.axis().to_string(),
            TimeUnit::InverseRate => format!("{} (as the program prints it)", self.time_name()),
        }
    }

    /// The demand at p* for CTI level `cti`, which the projections of that level start
    /// from.
    pub fn demand_at_star(&self, cti: f64) -> Option<&Demand> {
        self.demand
            .iter()
            .find(|d| Some(d.procs) == self.p_star && d.cti == cti)
    }
}

#[cfg(test)]
mod tests {
    use super::rate_name;

    #[test]
    fn a_rate_is_named_by_the_literal_text_of_its_regex() {
        let graph500 = r#"command rate_regex="harmonic_mean_TEPS:[ !]+([0-9.e+-]+)" run="./bfs""#;
        assert_eq!(rate_name(graph500).as_deref(), Some("harmonic_mean_TEPS"));
        assert_eq!(
            rate_name(r#"command rate_regex="GFLOP/s = ([0-9.]+)""#).as_deref(),
            Some("GFLOP/s")
        );
        // Nothing literal before the capture, or no regex in the series: no name.
        assert_eq!(rate_name(r#"command rate_regex="([0-9.]+) TEPS""#), None);
        assert_eq!(rate_name("my_app"), None);
    }
}
