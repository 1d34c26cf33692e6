//! The analytic timing model of Fox's parallel matrix multiplication (Li, Qiu,
//! Fox et al.), for checking stored PMM runs against it.
//!
//! M x M doubles on a q x q grid (N = q^2 processes, one per node), blocks of m = M/q. In
//! each of the q steps a block of A is broadcast along the process row, multiplied in, and
//! B is rolled up the column. The paper's model (its equations 4-5 and 8-9):
//!
//! ```text
//! T(N, M) = 2 M^3 / N * Tflops  +  q * c(q) * m^2 * Tcomm  +  q * s(q) * Tstartup
//! ```
//!
//! with `Tflops` seconds per floating-point operation of the local kernel, `Tcomm` seconds
//! per matrix element (8 bytes) over the link, and `c(q)` the average long-term number of
//! block transfers a process waits for per step, overlap between processes included
//! (Table 2): flat tree (q + 1) / 2, binomial tree (1 + ceil(log2 q)) / 2, pipelined 1.
//! `s(q)` counts the messages on a step's critical path (flat q, binomial ceil(log2 q) + 1,
//! pipelined 2), each paying the start-up time once. The paper's Table 3 coefficients
//! reproduce these factors (MS.MPI on 25 nodes: c = 2.0, which needs the ceiling); a grid
//! of q = 1 communicates nothing.
//!
//! Parallel overhead (equations 6-7, 10): h = (N T(N) - T1) / T1 with T1 = 2 M^3 Tflops,
//! which the model makes linear in x = q c(q) / (2 M) with slope Tcomm / Tflops: for the
//! flat tree x = q (q + 1) / (4 M), for the binomial q (1 + log2 q) / (4 M), the paper's
//! abscissas. The paper's check is that a line fitted to measured (x, h) has that slope.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use serde::Serialize;
use throttle_proto::workload::Bcast;
use throttle_proto::Pct;

use crate::method::stats::median;

/// The model's parameters: what the kernel and the link cost.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PmmParams {
    /// Seconds per floating-point operation of the local kernel.
    pub tflops: f64,
    /// Seconds per matrix element (8 bytes) through the link, at the bandwidth setting.
    pub tcomm: f64,
    /// Seconds of start-up per message (latency and software overheads).
    pub tstartup: f64,
}

/// A grid of q x q processes multiplying M x M matrices with a broadcast algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PmmShape {
    pub size: usize,
    pub grid: usize,
    pub bcast: Bcast,
}

/// The predicted time, split as the model adds it up.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PmmPrediction {
    pub compute_seconds: f64,
    pub comm_seconds: f64,
    pub startup_seconds: f64,
    pub seconds: f64,
}

impl PmmShape {
    pub fn procs(&self) -> usize {
        self.grid * self.grid
    }

    pub fn block(&self) -> f64 {
        self.size as f64 / self.grid as f64
    }

    /// c(q): block transfers a process waits for per step, on average (Table 2).
    pub fn transfers_per_step(&self) -> f64 {
        let q = self.grid;
        if q <= 1 {
            return 0.0;
        }
        match self.bcast {
            Bcast::Flat => (q as f64 + 1.0) / 2.0,
            Bcast::Binomial => (1.0 + ceil_log2(q) as f64) / 2.0,
            Bcast::Pipelined => 1.0,
        }
    }

    /// c(q) by the paper's own averaging argument applied to the broadcast tree
    /// `throttle-pmm` runs: the mean over the row of when each member holds the block (a
    /// sender's k-th send arrives k transfers after it got the block: one egress), plus
    /// one transfer for the roll. Equals the paper's factor for the flat tree; for the
    /// binomial tree the paper's (1 + log2 q) / 2 is below it (at q = 2 the two trees are
    /// the same, yet the paper's factors differ: 1.5 and 1).
    pub fn tree_transfers_per_step(&self) -> f64 {
        let q = self.grid;
        if q <= 1 {
            return 0.0;
        }
        let arrivals = arrival_times(q, self.bcast);
        arrivals.iter().sum::<f64>() / q as f64 + 1.0
    }

    /// c(q) on the given basis.
    pub fn factor(&self, basis: Factors) -> f64 {
        match basis {
            Factors::Paper => self.transfers_per_step(),
            Factors::Tree => self.tree_transfers_per_step(),
        }
    }

    /// s(q): messages on one step's critical path (broadcast and roll).
    pub fn messages_per_step(&self) -> f64 {
        let q = self.grid;
        if q <= 1 {
            return 0.0;
        }
        match self.bcast {
            Bcast::Flat => q as f64,
            Bcast::Binomial => ceil_log2(q) as f64 + 1.0,
            Bcast::Pipelined => 2.0,
        }
    }

    /// The abscissa of the paper's overhead check: x = q c(q) / (2 M).
    pub fn overhead_abscissa(&self) -> f64 {
        self.grid as f64 * self.transfers_per_step() / (2.0 * self.size as f64)
    }

    /// Floating-point operations of the whole product, 2 M^3.
    pub fn flops(&self) -> f64 {
        2.0 * (self.size as f64).powi(3)
    }

    pub fn predict(&self, p: &PmmParams) -> PmmPrediction {
        self.predict_with(p, Factors::Paper)
    }

    pub fn predict_with(&self, p: &PmmParams, basis: Factors) -> PmmPrediction {
        let q = self.grid as f64;
        let m = self.block();
        let compute_seconds = self.flops() / self.procs() as f64 * p.tflops;
        let comm_seconds = q * self.factor(basis) * m * m * p.tcomm;
        let startup_seconds = q * self.messages_per_step() * p.tstartup;
        PmmPrediction {
            compute_seconds,
            comm_seconds,
            startup_seconds,
            seconds: compute_seconds + comm_seconds + startup_seconds,
        }
    }

    /// Parallel overhead of a measured time: (N T - T1) / T1, T1 = 2 M^3 Tflops.
    pub fn parallel_overhead(&self, seconds: f64, tflops: f64) -> f64 {
        let t1 = self.flops() * tflops;
        (self.procs() as f64 * seconds - t1) / t1
    }

    /// Tflops from a rank's kernel time: the slowest rank's compute seconds over the
    /// operations one rank does (2 m^3 per step, q steps).
    pub fn tflops_from_compute(&self, max_compute_seconds: f64) -> f64 {
        max_compute_seconds / (self.flops() / self.procs() as f64)
    }
}

/// Where c(q) comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Factors {
    /// The paper's Table 2.
    Paper,
    /// The paper's averaging argument on the tree `throttle-pmm` uses.
    Tree,
}

/// When each member of a row holds the broadcast block, in block transfers, for the
/// trees of `workloads::comm::collectives::bcast` (relative ranks, root 0). Pipelined:
/// every member after the first segment's hops, about one transfer.
fn arrival_times(q: usize, bcast: Bcast) -> Vec<f64> {
    match bcast {
        Bcast::Flat => (0..q).map(|j| j as f64).collect(),
        Bcast::Pipelined => (0..q).map(|j| if j == 0 { 0.0 } else { 1.0 }).collect(),
        Bcast::Binomial => {
            let mut at = vec![f64::NAN; q];
            at[0] = 0.0;
            // Members in order of their rank; a parent (rel - lowest bit) precedes its
            // children, so its arrival is known when they are visited.
            for rel in 0..q {
                let mut mask = 1;
                while mask < q && rel & mask == 0 {
                    mask <<= 1;
                }
                // It sends to rel + m for m below its receive bit, highest first.
                let mut m = mask >> 1;
                let mut k = 0.0;
                while m > 0 {
                    if rel + m < q {
                        k += 1.0;
                        at[rel + m] = at[rel] + k;
                    }
                    m >>= 1;
                }
            }
            at
        }
    }
}

/// One stored PMM run, as the comparison needs it.
#[derive(Clone, Debug)]
pub struct PmmRun {
    pub shape: PmmShape,
    pub ranks_per_node: u32,
    pub pct: Pct,
    /// The link's capacity at 100%, payload bytes per second.
    pub capacity: f64,
    /// The multiplication's time (barrier to barrier), seconds.
    pub seconds: f64,
    /// The slowest rank's time in the local kernel, when the run reported it.
    pub max_compute_seconds: Option<f64>,
}

/// What the link costs at one setting, and where the figure came from.
#[derive(Clone, Debug, Serialize)]
pub struct LinkCost {
    pub tcomm: f64,
    pub tstartup: f64,
    /// `measured` (LogGPS through the agents) or `nominal` (8 bytes / (pct x capacity)).
    pub source: String,
}

/// One configuration: measured against predicted.
#[derive(Clone, Debug, Serialize)]
pub struct PmmRow {
    pub shape: PmmShape,
    pub procs: usize,
    pub bw_pct: Pct,
    pub runs: usize,
    /// Median measured time, seconds.
    pub measured_seconds: f64,
    pub predicted: PmmPrediction,
    /// The same with c(q) from the tree `throttle-pmm` runs ([`Factors::Tree`]).
    pub predicted_tree: PmmPrediction,
    pub params: PmmParams,
    pub tcomm_source: String,
    /// predicted / measured - 1, for both bases.
    pub error: f64,
    pub error_tree: f64,
    /// Why the model's assumptions do not hold here, if they do not.
    pub caveat: Option<String>,
}

/// The paper's check for one broadcast and bandwidth: measured overhead against x.
#[derive(Clone, Debug, Serialize)]
pub struct OverheadCheck {
    pub bcast: Bcast,
    pub bw_pct: Pct,
    /// (x, h) of each configuration with communication.
    pub points: Vec<(f64, f64)>,
    pub intercept: f64,
    pub slope: f64,
    pub r2: f64,
    /// Tcomm / Tflops from the measured parameters (median over the points).
    pub expected_slope: f64,
    /// slope / expected - 1.
    pub error: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PmmComparison {
    pub rows: Vec<PmmRow>,
    /// Configurations the model could not be applied to, and why.
    pub skipped: Vec<String>,
    pub checks: Vec<OverheadCheck>,
    /// Largest |error| among rows whose assumptions hold, for both bases.
    pub max_abs_error_where_assumptions_hold: Option<f64>,
    pub max_abs_error_tree: Option<f64>,
}

/// Communication below this share of the predicted time: the comparison then checks the
/// kernel, not the link, and says so.
const MIN_COMM_SHARE: f64 = 0.05;

/// Compare every stored configuration with the model. Tflops of a configuration is the
/// median over its runs (all bandwidths: the kernel does not depend on the link) of the
/// slowest rank's kernel time per operation; `link` gives Tcomm and the start-up time
/// at a bandwidth setting.
pub fn compare(runs: &[PmmRun], link: impl Fn(Pct, f64) -> Option<LinkCost>) -> PmmComparison {
    let tflops = kernel_tflops(runs);
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for (key, cell) in &configurations(runs) {
        let (shape, _, Reverse(pct), capacity) = key;
        let Some(tf) = tflops.get(shape).map(|v| median(v)) else {
            skipped.push(format!(
                "{}: no run reported its kernel time (stored before schema 2?)",
                describe(shape, *pct)
            ));
            continue;
        };
        let Some(cost) = link(*pct, f64::from_bits(*capacity)) else {
            skipped.push(format!(
                "{}: no Tcomm (unlimited, and no LogGPS measured there)",
                describe(shape, *pct)
            ));
            continue;
        };
        let params = PmmParams {
            tflops: tf,
            tcomm: cost.tcomm,
            tstartup: cost.tstartup,
        };
        rows.push(compare_configuration(key, cell, params, cost.source));
    }
    let checks = overhead_checks(&rows);
    let max_abs_error_where_assumptions_hold = rows
        .iter()
        .filter(|r| r.caveat.is_none())
        .map(|r| r.error.abs())
        .reduce(f64::max);
    let max_abs_error_tree = rows
        .iter()
        .filter(|r| r.caveat.is_none())
        .map(|r| r.error_tree.abs())
        .reduce(f64::max);
    PmmComparison {
        rows,
        skipped,
        checks,
        max_abs_error_where_assumptions_hold,
        max_abs_error_tree,
    }
}

/// One configuration: shape, ranks per node, bandwidth setting, capacity (as bits).
type ConfigKey = (PmmShape, u32, Reverse<Pct>, u64);

/// Tflops of every run that reported its kernel time, by shape.
fn kernel_tflops(runs: &[PmmRun]) -> BTreeMap<PmmShape, Vec<f64>> {
    let mut tflops: BTreeMap<PmmShape, Vec<f64>> = BTreeMap::new();
    for r in runs {
        if let Some(c) = r.max_compute_seconds.filter(|c| *c > 0.0) {
            tflops
                .entry(r.shape)
                .or_default()
                .push(r.shape.tflops_from_compute(c));
        }
    }
    tflops
}

/// The runs of each configuration.
fn configurations(runs: &[PmmRun]) -> BTreeMap<ConfigKey, Vec<&PmmRun>> {
    let mut cells: BTreeMap<ConfigKey, Vec<&PmmRun>> = BTreeMap::new();
    for r in runs {
        cells
            .entry((
                r.shape,
                r.ranks_per_node,
                Reverse(r.pct),
                r.capacity.to_bits(),
            ))
            .or_default()
            .push(r);
    }
    cells
}

/// A configuration for people: "5x5 M=1000 binomial at 50%".
fn describe(shape: &PmmShape, pct: Pct) -> String {
    format!(
        "{}x{} M={} {} at {}",
        shape.grid,
        shape.grid,
        shape.size,
        shape.bcast,
        pct.percent()
            .map(|p| format!("{p}%"))
            .unwrap_or_else(|| "unlimited".into())
    )
}

/// One configuration's runs against the model with `params`: the median measured time,
/// both predictions, their errors and the caveat, if any.
fn compare_configuration(
    (shape, rpn, Reverse(pct), _): &ConfigKey,
    cell: &[&PmmRun],
    params: PmmParams,
    tcomm_source: String,
) -> PmmRow {
    let measured = median(&cell.iter().map(|r| r.seconds).collect::<Vec<_>>());
    let predicted = shape.predict(&params);
    let predicted_tree = shape.predict_with(&params, Factors::Tree);
    let comm_share = (predicted.comm_seconds + predicted.startup_seconds) / predicted.seconds;
    PmmRow {
        shape: *shape,
        procs: shape.procs(),
        bw_pct: *pct,
        runs: cell.len(),
        measured_seconds: measured,
        predicted,
        predicted_tree,
        params,
        tcomm_source,
        error: predicted.seconds / measured - 1.0,
        error_tree: predicted_tree.seconds / measured - 1.0,
        caveat: caveat(*rpn, shape, comm_share),
    }
}

/// Why the model's assumptions do not hold for a configuration, if they do not.
fn caveat(rpn: u32, shape: &PmmShape, comm_share: f64) -> Option<String> {
    if rpn > 1 {
        Some(format!(
            "{rpn} ranks per node: traffic inside a node is not shaped, the model counts it"
        ))
    } else if shape.grid <= 1 {
        Some("one process: no communication to model".into())
    } else if comm_share < MIN_COMM_SHARE {
        Some(format!(
            "communication is {:.1}% of the time: this checks the kernel, not the link",
            comm_share * 100.0
        ))
    } else {
        None
    }
}

/// The paper's overhead check for every broadcast and bandwidth with communication.
fn overhead_checks(rows: &[PmmRow]) -> Vec<OverheadCheck> {
    let mut groups: BTreeMap<(Bcast, Reverse<Pct>), Vec<&PmmRow>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.shape.grid > 1) {
        groups
            .entry((r.shape.bcast, Reverse(r.bw_pct)))
            .or_default()
            .push(r);
    }
    groups
        .into_iter()
        .filter_map(|((bcast, Reverse(pct)), g)| overhead_check(bcast, pct, &g))
        .collect()
}

/// A line fitted to the measured (x, h) of one broadcast at one bandwidth, against the
/// slope Tcomm / Tflops; None with fewer than two distinct x or no line.
fn overhead_check(bcast: Bcast, pct: Pct, g: &[&PmmRow]) -> Option<OverheadCheck> {
    let points: Vec<(f64, f64)> = g
        .iter()
        .map(|r| {
            (
                r.shape.overhead_abscissa(),
                r.shape
                    .parallel_overhead(r.measured_seconds, r.params.tflops),
            )
        })
        .collect();
    let distinct_x = {
        let mut xs: Vec<f64> = points.iter().map(|p| p.0).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup_by(|a, b| (*a - *b).abs() <= 1e-12 * b.abs());
        xs.len()
    };
    if distinct_x < 2 {
        return None;
    }
    let line = super::fit_line(&points)?;
    let expected = median(
        &g.iter()
            .map(|r| r.params.tcomm / r.params.tflops)
            .collect::<Vec<_>>(),
    );
    Some(OverheadCheck {
        bcast,
        bw_pct: pct,
        points,
        intercept: line.intercept,
        slope: line.slope,
        r2: line.r2,
        expected_slope: expected,
        error: line.slope / expected - 1.0,
    })
}

fn ceil_log2(q: usize) -> u32 {
    usize::BITS - (q.max(1) - 1).leading_zeros()
}

#[cfg(test)]
mod tests;
